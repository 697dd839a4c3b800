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

# The files that take longest (end-to-end runs, deploys, kill -9 restarts), slowest first. xdist
# hands each worker a whole file at a time; by default it queues the files with most tests first,
# which put these few-test files near the end, where one of them ran while the other worker had
# nothing left. They go first (setup.cfg: --no-loadscope-reorder), the rest as xdist ordered them.
SLOWEST_FILES = ["test_run_signals.py", "test_deploy.py", "test_kernel_window_agg.py",
                 "test_run_restart.py", "test_run_e2e.py", "test_web.py", "test_project_query.py",
                 "test_kernel_keep.py", "test_held_store.py", "test_adapters_postgres.py",
                 "test_partition_fn_spark.py", "test_adapters.py", "test_adapters_mqtt.py",
                 "test_kernel_join_e2e.py", "test_lowering_partition.py",
                 "test_example_mqtt_positions.py", "test_engine_matching_generated.py",
                 "test_adapter_secrets.py", "test_report.py", "test_kernel_join.py",
                 "test_spark_hash.py", "test_kernel_keep_e2e.py", "test_rescale.py",
                 "test_kernel_time_keep.py", "test_state_containers.py", "test_state_groups.py",
                 "test_arrow_frames.py", "test_splash_fused.py"]


def pytest_collection_modifyitems(items: list) -> None:
    """The slowest files first, then the other end-to-end files, then the rest by their number
    of tests (most first)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1

    def rank(item) -> tuple:
        name = item.path.name
        if name in SLOWEST_FILES:
            return (SLOWEST_FILES.index(name), False, 0, "")
        return (len(SLOWEST_FILES), "_e2e" not in name, -counts[name], name)
    items.sort(key=rank)  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (local[2], 2 shuffle partitions, UI off)."""
    from runtime.session import get_session

    session = get_session("local[2]", app_name="ccl-tests", shuffle_partitions=2)
    yield session
    session.stop()
