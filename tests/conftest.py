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
