"""The ``ccl`` command line (:mod:`ccl.cli.main`) and the reports it prints (explain, graph)."""
from .main import main

__all__ = ["main"]
