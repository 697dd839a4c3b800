"""``python -m ccl.cli``: the ``ccl`` command."""
import sys

from .main import main

sys.exit(main())
