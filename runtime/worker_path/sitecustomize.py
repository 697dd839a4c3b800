"""Imported at start-up by the Python processes of a local Spark session (runtime/session.py puts
this directory on their PYTHONPATH).

Spark starts its Python workers with ``SPARK_HOME/python/lib/pyspark.zip`` first on the path.
Python does not cache compiled code for modules in a zip, so every process it starts without
forking (a streaming source's runner, for one) compiled pyspark again: about half a second each.
With pyspark installed by pip, site-packages holds the same files, compiled once: the zips move
to the end of the path, where they still serve if pyspark is not installed. Then the
sitecustomize this one shadows, if any, runs.
"""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _is_spark_zip(entry: str) -> bool:
    name = os.path.basename(entry)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


sys.path[:] = [p for p in sys.path if not _is_spark_zip(p)] + [p for p in sys.path if _is_spark_zip(p)]

_others = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
_shadowed = importlib.machinery.PathFinder.find_spec("sitecustomize", _others)
if _shadowed is not None and _shadowed.loader is not None:
    _module = importlib.util.module_from_spec(_shadowed)
    _shadowed.loader.exec_module(_module)
