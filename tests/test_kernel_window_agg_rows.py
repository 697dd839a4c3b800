"""The fast path of the window aggregation's rows mode (runtime/engine/kernels/window_agg.py,
``WindowAggregation.fast``: no per-change output stage, changes written by column) against the
engine run row by row (BucketRun.process), on generated buckets of a window's or delta stream's
changes (inserts, updates, deletes, upserts, safedeletes and bad opcodes of a few keys, several
instances and batches, nulls, NaN, both zeros, rows sharing a sequence number): after every batch
the same states, and the same changes, bad records and counts, change for change (sequence and
sub-numbers too)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.plan.model import Aggregate
from runtime.engine.aggregate import _Aggregate
from runtime.engine.expr import Expressions
from runtime.engine.kernels.window_agg import _extreme, _transactions
from runtime.processor import received_rows
from test_engine_columnar import outputs, same
from test_kernel_window_agg import (QUERIES, SOURCES, assert_rows_mode_is_the_engine, batches,
                                    bucket_run, narrow_row, row, same_state, table, with_found)

FAST = {
    **{name: QUERIES[name] for name in ("count sum avg max", "min max with retraction",
                                        "two group columns")},
    # rows equal to the ones before (a null argument): no change, or an update of a merged pair
    "count of a column": "SELECT S.k, count(S.v) c FROM S GROUP BY S.k",
    "integer and string groups": ("SELECT S.v, S.k, count(S.p) cp, avg(S.v) av, min(S.p) lo, "
                                  "sum(S.p) sp FROM S GROUP BY S.v, S.k"),
    # the group's last row shown: a removed row's values until another comes
    "last row columns": "SELECT S.k, S.p p, S.v v, max(S.v) m, min(S.v) l FROM S GROUP BY S.k",
    # long arguments (read as the engine's Long): extremes, a count, an average
    "long arguments": ("SELECT S.k, max(S.n) mn, min(S.n) ln, count(S.n) cn, avg(S.n) an, "
                       "sum(S.p) sp FROM S GROUP BY S.k"),
}
# rows mode on the engine's per-change path (the kernel's slow lane): float groups (NaN, zeros
# of both signs as keys), the engine's other aggregates, a failing argument, WHERE and GROUP
# FILTER expressions (one that fails leaves the mirror changed and the groups not: a group's row
# may then show another key)
SLOW = ("float group", "engine aggregates", "failing argument", "filters")


def test_a_where_expression_keeps_rows_mode_on_the_per_change_path(tmp_path):
    failing_where = ("SELECT S.k, count(*) c, sum(S.v) sv FROM S "
                     "WHERE cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END) > 0 GROUP BY S.k")
    assert not bucket_run(tmp_path, failing_where, "rows").columnar.fast


@pytest.mark.parametrize("name", list(FAST))
def test_the_fast_path_takes_these_queries(tmp_path, name):
    assert bucket_run(tmp_path, FAST[name], "rows").columnar.fast


@pytest.mark.parametrize("name", SLOW)
def test_rows_mode_keeps_the_others_on_the_per_change_path(tmp_path, name):
    assert not bucket_run(tmp_path, QUERIES[name], "rows").columnar.fast


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", list(FAST))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
@with_found
def test_fast_rows_mode_gives_the_engine_changes_and_state(tmp_path, source, name, data):
    assert_rows_mode_is_the_engine(bucket_run(tmp_path, FAST[name], "rows", source), data)


def test_a_transaction_that_empties_and_refills_a_group(tmp_path):
    """A group's only row deleted and another inserted under one sequence number: the engine drops
    the emptied group and starts a new one; merged, one update of its row (even when the row comes
    back equal); then an insert and a delete in one transaction cancel out: nothing."""
    run = bucket_run(tmp_path, FAST["count sum avg max"], "rows")
    row = {"k": "a", "p": 1.0, "v": 1, "n": 1}
    events = [(0, "i", None, {**row, "id": 1}, False),
              (0, "d", None, {**row, "id": 1}, False), (0, "i", None, {**row, "id": 1}, True),
              (0, "i", None, {**row, "id": 2, "k": "b"}, False),
              (0, "d", None, {**row, "id": 2, "k": "b"}, True)]
    states: dict = {}
    got = [o for o in outputs(run, run.process_table(states, table(events, 10), 0)) if o[0] == "row"]
    assert [(o[2], o[3], o[4], o[6]["k"], o[6]["c"]) for o in got] == [
        (10, 0, "i", "a", 1), (11, 1, "u", "a", 1)]
    by_rows: dict = {}
    run.process(by_rows, received_rows(table(events, 10)), 0)
    assert same_state(states, by_rows)


def test_a_group_that_cancelled_out_and_came_back_goes_last(tmp_path):
    """In one transaction group a is inserted and emptied (cancelled out), b inserted, a inserted
    again: as ``consolidate`` orders them, b's insert comes first, then a's."""
    run = bucket_run(tmp_path, FAST["count sum avg max"], "rows")
    row = {"p": 1.0, "v": 1, "n": 1}
    events = [(0, "i", None, {**row, "id": 1, "k": "a"}, False),
              (0, "d", None, {**row, "id": 1, "k": "a"}, True),
              (0, "i", None, {**row, "id": 2, "k": "b"}, True),
              (0, "i", None, {**row, "id": 3, "k": "a"}, True)]
    states: dict = {}
    got = [o for o in outputs(run, run.process_table(states, table(events, 10), 0)) if o[0] == "row"]
    expected = [o for o in run.process({}, received_rows(table(events, 10)), 0) if o[0] == "row"]
    assert [(o[2], o[3], o[4], o[6]["k"]) for o in got] == [(10, 0, "i", "b"), (10, 1, "i", "a")]
    assert same(got, expected)


# transactions of several changes (a delete and an insert into one group, as a KEEP eviction
# gives, rows coming back as they were, groups emptied and filled again), few keys and groups
long_transactions = st.lists(
    st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["i", "i", "u", "p", "d", "s"]),
                       st.just(None), narrow_row, st.sampled_from([True, True, False])),
             max_size=16),
    min_size=1, max_size=3)


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", list(FAST))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=long_transactions)
def test_fast_rows_mode_merges_long_transactions_as_the_engine(tmp_path, source, name, data):
    assert_rows_mode_is_the_engine(bucket_run(tmp_path, FAST[name], "rows", source), data)


# transactions of several changes over the wide rows (more keys and groups, NaN, infinities,
# both zeros, nulls, longs far from 32 bits), in two instances
wide_transactions = st.lists(
    st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["i", "i", "u", "p", "d", "s", "x"]),
                       st.just(None), row, st.sampled_from([True, True, False])),
             max_size=30),
    min_size=1, max_size=3)


@pytest.mark.parametrize("name", list(FAST))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=wide_transactions)
def test_fast_rows_mode_gives_the_engine_on_wide_transactions(tmp_path, name, data):
    assert_rows_mode_is_the_engine(bucket_run(tmp_path, FAST[name], "rows"), data)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([0, 1, 2**62, -2**63, 2**63 - 1]),
                               st.integers(0, 2)), max_size=12))
def test_the_transactions_are_the_runs_of_a_sequence_number_and_port(rows):
    """``_transactions``: each maximal run of rows sharing a sequence number and a port, in
    order (64-bit numbers at both ends of the range)."""
    seqs, ports = [r[0] for r in rows], [r[1] for r in rows]
    want, start = [], 0
    for k in range(1, len(rows) + 1):
        if k == len(rows) or rows[k] != rows[k - 1]:
            want.append((start, k))
            start = k
    assert list(_transactions(seqs, ports)) == want


def test_a_group_row_that_changes_and_comes_back_in_one_transaction(tmp_path):
    """One group, one transaction: a delete and an insert of the same row (the row in between
    differs): one update of the row as it was; the same row updated to itself: nothing; a delete
    and an insert of another row: one update to the last row."""
    run = bucket_run(tmp_path, FAST["count sum avg max"], "rows")
    one = {"id": 1, "k": "a", "p": 1.0, "v": 1, "n": 1}
    two = {"id": 2, "k": "a", "p": 2.5, "v": 2, "n": 1}
    events = [(0, "i", None, one, False), (0, "i", None, two, False),
              (0, "d", None, two, False), (0, "i", None, two, True),
              (0, "u", None, one, False),
              (0, "d", None, one, False), (0, "i", None, {**one, "id": 3, "v": 5}, True)]
    states: dict = {}
    got = [o for o in outputs(run, run.process_table(states, table(events, 10), 0)) if o[0] == "row"]
    expected = [o for o in run.process({}, received_rows(table(events, 10)), 0) if o[0] == "row"]
    assert [(o[2], o[4], o[6]["c"], o[6]["sv"], o[6]["mx"]) for o in got] == [
        (10, "i", 1, 1, 1), (11, "u", 2, 3, 2), (12, "u", 2, 3, 2), (15, "u", 2, 7, 3)]
    assert same(got, expected)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, float("inf"), 3]),
                                 st.builds(float, st.just("nan"))),  # (each NaN its own object)
                       max_size=8))
def test_the_extreme_recomputed_is_the_engines(values):
    """min and max recomputed when the extreme leaves (``_extreme``) as the engine's
    ``_extreme_remove`` (NaN largest, the first of equal ones: 0.0 or -0.0, which NaN)."""
    stored = {(k,): [k, k, [[], [v]]] for k, v in enumerate(values)}
    for fn in ("min", "max"):
        engine = _Aggregate(1, Aggregate("m", fn, (), False), Expressions({}, {}))
        leaving = float("nan")  # (the extreme that left: NaN equals NaN)
        want = engine.remove(leaving, [leaving], 0, 0, stored)
        got = _extreme(stored, 1, fn == "max")
        assert repr(got) == repr(want) and (got is want or got == got)
        assert [i for i, v in enumerate(values) if v is got] == [i for i, v in enumerate(values) if v is want]
