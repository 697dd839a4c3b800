"""Makes the shared Hypothesis strategies (tests/strategies.py) importable as ``strategies``, and
provides the one SparkSession of a test run."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (local[2], 2 shuffle partitions, UI off)."""
    from runtime.session import get_session

    session = get_session("local[2]", app_name="ccl-tests", shuffle_partitions=2)
    yield session
    session.stop()


# The files whose tests take a minute or more in all (end-to-end runs in subprocesses, servers,
# a cluster), the slowest first, from `pytest --durations` (2026-11-27). pytest-xdist hands each
# worker whole files in collection order (`--dist loadfile --no-loadscope-reorder` in setup.cfg);
# its default order, most tests first, left these few-test files for the end, where one of them
# ran alone for minutes. Started first, they overlap the many short files instead.
SLOW_FILES = (
    "test_run_signals.py", "test_run_restart.py", "test_run_e2e.py", "test_web.py",
    "test_kernel_keep.py", "test_kernel_window_agg.py", "test_adapters_postgres.py",
    "test_deploy.py", "test_rescale.py", "test_adapters.py", "test_adapters_mqtt.py",
    "test_project_query.py", "test_kernel_join_e2e.py", "test_example_mqtt_positions.py",
    "test_report.py", "test_partition_fn_spark.py", "test_kernel_keep_e2e.py",
    "test_adapter_secrets.py", "test_lowering_partition.py", "test_held_store.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the slow files first, then the others with the most tests first (xdist's own order)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -counts[item.path.name],
                                 item.path.name))
