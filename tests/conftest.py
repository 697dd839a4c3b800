"""Makes the shared Hypothesis strategies (tests/strategies.py) importable as ``strategies``, and
provides the one SparkSession of a test run."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# The tests' Spark JVMs (this process's and those of the `ccl` subprocesses, which inherit the
# environment) live seconds on small data: compiling hot code with C1 only spends less CPU than
# C2's optimisation ever gives back there (-17% to -32% of wall time on the end-to-end files,
# docs/runtime.md "The suite's time"). spark-submit passes SPARK_SUBMIT_OPTS to the driver's JVM
# without printing it (JAVA_TOOL_OPTIONS would be echoed on stderr). Runs outside tests keep C2.
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
    filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), "-XX:TieredStopAtLevel=1"]))


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (local[2], 2 shuffle partitions, UI off)."""
    from runtime.session import get_session

    session = get_session("local[2]", app_name="ccl-tests", shuffle_partitions=2)
    yield session
    session.stop()
