"""The window aggregation's rows-mode fast path (runtime/engine/kernels/window_agg.py,
``WindowAggregation._fast_instance``) over a KEEP n ROWS window, against the engine run row by
row: the window's changelog is made by the engine from generated batches of its source (a stream,
or an input window whose rows are updated and deleted), so the aggregate sees what a KEEP gives
(evictions and their inserts under one sequence number, a PER group's oldest rows leaving first);
GROUP BY the PER keys, other columns, or both; count, sum, avg, min and max of integers near
overflow, longs, floats with NaN, infinities, both zeros and nulls; several instances and batches,
and the last batch run again on the state before it (as after a crash). After every batch the
same states, and the same changes and bad records, change for change."""
from __future__ import annotations

import copy
import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planned import plan_json
from runtime.processor import BucketRun, received_rows
from test_engine_columnar import OBSERVED, outputs, same
from test_kernel_window_agg import order, same_state

SOURCES = {
    "stream": "CREATE INPUT STREAM T SCHEMA (id long, k string, g integer, p float, v integer, n long);\n",
    "window": ("CREATE INPUT WINDOW T SCHEMA (id long, k string, g integer, p float, v integer, n long) "
               "PRIMARY KEY (id);\n"),
}
KEEPS = {"per k": "KEEP 3 ROWS PER (k)", "no per": "KEEP 2 ROWS", "per g": "KEEP 4 ROWS PER (g)"}
QUERIES = {
    "group k": ("SELECT R.k, count(*) c, sum(R.v) sv, avg(R.p) ap, max(R.id) mx, min(R.id) mn, "
                "count(R.v) cv FROM R GROUP BY R.k"),
    "group g": ("SELECT R.g, count(R.p) cp, sum(R.p) sp, min(R.p) lo, max(R.p) hi, avg(R.n) an, "
                "max(R.n) xn FROM R GROUP BY R.g"),
    "group k g": ("SELECT R.k, R.g, max(R.v) xv, min(R.v) mv, min(R.n) mn, count(R.n) cn, "
                  "avg(R.v) av, sum(R.p) sp, count(*) c FROM R GROUP BY R.k, R.g"),
}
R_TYPE = pa.struct([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32()), ("p", pa.float64()),
                    ("v", pa.int32()), ("n", pa.int64())])

values = st.fixed_dictionaries({
    "id": st.integers(0, 7),
    "k": st.sampled_from([None, "a", "b", "c"]),
    "g": st.sampled_from([None, 0, 1, 2]),
    "p": st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, 0.1, float("nan"), float("inf"),
                          -float("inf"), 1e308]),
    "v": st.sampled_from([None, 0, 1, -3, 2**31 - 1, -2**31]),
    "n": st.sampled_from([None, 0, 5, 2**62, -2**62, 2**63 - 1, -2**63])})
# (instance, opcode, values); a stream's rows are inserts (another opcode is its bad record)
events = st.tuples(st.integers(0, 2), st.sampled_from(["i", "i", "i", "u", "d", "p"]), values)
batches = st.lists(st.lists(events, max_size=25), min_size=1, max_size=4)


def plan_of(tmp_path, source: str, keep: str, query: str) -> str:
    path = tmp_path / "p.ccl"
    path.write_text(SOURCES[source] + f"CREATE WINDOW R PRIMARY KEY (id) {KEEPS[keep]} "
                    "AS SELECT * FROM T;\n"
                    f"CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED AS {QUERIES[query]};\n" + OBSERVED)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return json.dumps(plan)


def keep_changes(keep: BucketRun, states: dict, batch: list, first_seq: int) -> pa.Table:
    """The KEEP window's changelog of ``batch`` (its source's rows, numbered from ``first_seq``),
    made by the engine, as the aggregate's bucket."""
    by_instance: dict[int, list[tuple]] = {}
    for n, (inst, op, row) in enumerate(batch):
        by_instance.setdefault(inst, []).append((first_seq + n, 0, 0, 0, op, False, row))
    rows = [o for o in keep.process(states, by_instance, 0) if o[0] == "row"]
    rows.sort(key=lambda o: (o[1], o[2], o[3]))
    n = len(rows)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()),
        "__seq": pa.array([o[2] for o in rows], pa.int64()),
        "__sub": pa.array([o[3] for o in rows], pa.int64()),
        "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array([o[4] for o in rows], pa.string()),
        "__inst": pa.array([o[1] for o in rows], pa.int32()),
        "__why": pa.array([None] * n, pa.string()),
        "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array([o[6] for o in rows], R_TYPE),
        "__bucket": pa.array([0] * n, pa.int32())})


def assert_the_engine(plan: str, data: list) -> None:
    keep, run = BucketRun(plan, "R"), BucketRun(plan, "W")
    assert run.columnar is not None and run.columnar.fast
    keep_states: dict = {}
    by_rows: dict = {}
    columnar: dict = {}
    before: dict = {}
    for b, batch in enumerate(data):
        t = keep_changes(keep, keep_states, batch, 1000 * (b + 1))
        before = copy.deepcopy(columnar)
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(columnar, t, 0))
        assert same_state(columnar, by_rows)
        assert same(sorted(got, key=order), sorted(expected, key=order))
    # the last batch again, on the state before it: the same changes and state
    again = outputs(run, run.process_table(before, t, 0))
    assert same_state(before, columnar)
    assert same(sorted(again, key=order), sorted(got, key=order))


@pytest.mark.parametrize("query", list(QUERIES))
@pytest.mark.parametrize("keep", list(KEEPS))
@pytest.mark.parametrize("source", list(SOURCES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_fast_rows_mode_over_a_keep_window_is_the_engine(tmp_path, source, keep, query, data):
    assert_the_engine(plan_of(tmp_path, source, keep, query), data)
