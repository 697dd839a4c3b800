"""BucketRun.table: a bucket's output rows as the Arrow table of runtime/processor.py's output
schema, the values' dicts converted as one struct column; the same table as column by column."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import MappingProxyType

import pytest

from ccl.splash.values import Long
from planned import plan_text_of
from runtime.processor import BucketRun

PROJECT = """
CREATE INPUT WINDOW S SCHEMA (k string, i integer, n long, x float, b boolean, m money(2),
                              t timestamp) PRIMARY KEY (k);
CREATE OUTPUT WINDOW W PRIMARY KEY (k) AS SELECT * FROM S;
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> BucketRun:
    return BucketRun(plan_text_of(tmp_path_factory.mktemp("p"), PROJECT), "W")


def _by_columns(run: BucketRun, out: list[tuple]):
    """The table as it was made before: a list of values per column, a dict lookup per value."""
    return run.table_of([[row[c] for row in out] for c in range(6)]
                        + [[row[6].get(name) for row in out] for name in run.columns])


def test_struct_conversion_gives_the_table_of_the_columns(run):
    t = dt.datetime(2020, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    out = [("stat", 0, 3, 0, None, None, {}),
           ("row", 0, 1, 0, "i", None, {"k": "a", "i": -2**31, "n": Long(2**40), "x": -0.0, "b": True,
                                         "m": Decimal("1.25"), "t": t}),
           ("row", 1, 2, 1, "u", None, {"k": "b", "x": float("inf")}),       # missing columns: null
           ("row", 1, 3, 0, "d", None, {"k": "c", "i": None, "other": 5}),  # no such column: ignored
           ("bad", 1, 4, 0, None, '{"reason": "r"}', {})]
    got, expected = run.table(out), _by_columns(run, out)
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()
    assert run.table([]).to_pylist() == [] and run.table([]).schema == expected.schema


def test_a_mapping_that_is_no_dict_is_converted_column_by_column(run):
    out = [("row", 0, 1, 0, "i", None, MappingProxyType({"k": "a", "i": 7}))]
    assert run.table(out).to_pylist() == _by_columns(run, out).to_pylist()


def test_a_value_that_does_not_fit_fails_as_before(run):
    import pyarrow as pa

    out = [("row", 0, 1, 0, "i", None, {"k": "a", "i": "seven"})]
    with pytest.raises((pa.ArrowException, TypeError, ValueError)):
        _by_columns(run, out)
    with pytest.raises((pa.ArrowException, TypeError, ValueError)):
        run.table(out)
