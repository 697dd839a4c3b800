"""The window_select kernel (runtime/engine/kernels/window_select.py: a projection or filter of a
window or delta stream) against the engine run row by row (BucketRun.process), on generated
buckets: every opcode, nulls, NaN, -0.0, rows that came bad, unknown opcodes, shared sequence
numbers (an upstream transaction), key changes, failing expressions, four instances, several
batches and a batch run again. After every batch both leave the same state and give the same
output rows (changes, bad records, counts, sequence and sub-numbers)."""
from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buckets import bucket_table
from planned import plan_json, typed, typed_element
from test_kernel_keep import engine_outputs, outputs, same
from ccl.plan.physical import columnar_kernel, window_select_kernel
from runtime.arrow_state import bucket_runner, load_states, uses_window_store
from runtime.engine.kernels.window_select import WindowSelectKernel
from runtime.processor import BucketRun, bucket_rows

SOURCES = {
    "window": "CREATE INPUT WINDOW S SCHEMA (k string, p float, v integer, n long) PRIMARY KEY (k, v);\n",
    # a float key: NaN keys are found again only by the very objects of their rows
    "delta": "CREATE INPUT DELTA STREAM S SCHEMA (k string, p float, v integer, n long) PRIMARY KEY (p);\n",
}
QUERIES = {
    "deduced": ("WINDOW W PRIMARY KEY DEDUCED AS SELECT S.k k, S.v v, S.p p, S.p * S.v q FROM S "
                "WHERE S.v > 0"),
    "plain": "WINDOW W PRIMARY KEY DEDUCED AS SELECT * FROM S",
    # several source rows show one output key ('b' and 'B'), an update moves a row's key
    # (and 10 / S.v fails for v = 0: an operator failing a column at a time)
    "key change": ("WINDOW W SCHEMA (g string, v integer, p float, r integer) PRIMARY KEY (g) "
                   "AS SELECT upper(S.k) g, S.v v, S.p p, 10 / S.v r FROM S "
                   "WHERE S.p <> 1.5 OR S.p IS NULL"),
    "float key": ("WINDOW W SCHEMA (p float, m long, v integer) PRIMARY KEY (p) "
                  "AS SELECT S.p p, S.n m, S.v v FROM S WHERE S.k <> 'c'"),
    "delta stream": ("DELTA STREAM W SCHEMA (v integer, u string, q float) PRIMARY KEY (v) "
                     "AS SELECT S.v v, upper(S.k) u, S.p * 2 q FROM S WHERE S.p > 0.0 OR S.v < 1"),
    "keep rows": ("WINDOW W SCHEMA (k string, v integer, n long) PRIMARY KEY (k, v) KEEP 2 ROWS "
                  "AS SELECT S.k k, S.v v, S.n n FROM S"),
    "partitions": ("WINDOW W SCHEMA (v integer, k string) PRIMARY KEY (v, k) "
                   "PARTITION BY S HASH(k) PARTITIONS 3 "
                   "AS SELECT S.v v, S.k k FROM S WHERE S.v % W_partitions <> 1"),
    # a cast of 'x' fails (the old row's too, on an update or delete); WHERE's failure first
    "failing": ("WINDOW W SCHEMA (v integer, k string, q integer) PRIMARY KEY (v, k) "
                "AS SELECT S.v v, S.k k, cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END) q "
                "FROM S WHERE cast(integer, CASE WHEN S.k = 'c' THEN 'y' ELSE '1' END) = 1"),
    # the window's changes seen as a stream: WHERE on the old row too (10 / S.v fails for
    # v = 0), the items on the new row only (a cast of 'x' fails), transactions merged by the
    # source's key
    "stream": ("STREAM W SCHEMA (k string, q float, c integer) AS SELECT upper(S.k) k, S.p * 2 q, "
               "cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END) c FROM S "
               "WHERE 10 / S.v > 1 OR S.p > 0.0"),
    "plain stream": "STREAM W AS SELECT S.k k, S.v v, S.n n FROM S WHERE S.v > 0",
}
CASES = [(s, q) for s in SOURCES for q in QUERIES if not (s == "delta" and q == "plain")]

floats = st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), 0.1])
row = st.fixed_dictionaries({
    "k": st.sampled_from([None, "a", "b", "B", "c"]), "p": floats,
    "v": st.sampled_from([None, 0, 1, 2, -3, 4, 2**31 - 1]),
    "n": st.sampled_from([None, 0, 5, 2**40, -2**62])})
event = st.tuples(st.integers(0, 3),                                         # instance
                  st.sampled_from(["i", "i", "u", "u", "p", "d", "d", "s", "x"]),  # opcode
                  st.sampled_from([None] * 8 + ["does not parse"]),
                  row,
                  st.sampled_from([False] * 3 + [True]))  # shares the sequence number before it
batches = st.lists(st.lists(event, max_size=40), min_size=1, max_size=4)
SCHEMA = pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())])


def project(source: str, query: str) -> str:
    return SOURCES[source] + f"CREATE OUTPUT {QUERIES[query]};\n"


def bucket_run(tmp_path, source: str, query: str) -> BucketRun:
    path = tmp_path / "p.ccl"
    path.write_text(project(source, query))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert window_select_kernel(*typed_element(plan, 1))
    assert columnar_kernel(*typed_element(plan, 1)) == "window_select"
    assert plan["elements"][1]["physical"]["kernel"] == "window_select"
    run = BucketRun(json.dumps(plan), "W")
    assert isinstance(run.kernel, WindowSelectKernel)
    return run


@pytest.mark.parametrize("source,query", CASES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_kernel_gives_the_engine_outputs_and_state(tmp_path, source, query, data):
    run = bucket_run(tmp_path, source, query)
    by_rows: dict = {}
    kernel: dict = {}
    for b, events in enumerate(data + data[-1:]):  # the last batch again, as the next one
        t = bucket_table(events, 1000 * (b + 1), SCHEMA)
        expected = engine_outputs(run, by_rows, t)
        got = outputs(run, run.process_table(kernel, t, 0))
        assert same(got, expected)
        assert same(kernel, by_rows)


@pytest.mark.parametrize("query", ["key change", "float key", "failing"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_engine_and_kernel_take_turns_on_one_state(tmp_path, query, data):
    """Either runs an instance's next batch on the state the other left."""
    run = bucket_run(tmp_path, "window", query)
    by_rows: dict = {}
    mixed: dict = {}
    for b, events in enumerate(data * 2):
        t = bucket_table(events, 1000 * (b + 1), SCHEMA)
        expected = engine_outputs(run, by_rows, t)
        got = (outputs(run, run.process_table(mixed, t, 0)) if b % 2
               else engine_outputs(run, mixed, t))
        assert same(got, expected)
        assert same(mixed, by_rows)


def store_plans(tmp_path, source: str, query: str) -> tuple[str, str]:
    """The plan text of ``W`` run by the kernel and by the engine, its rows (and its source's
    mirror) in the bucket's state store (runtime/state/rows.py)."""
    path = tmp_path / "p.ccl"
    path.write_text(project(source, query))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert plan["elements"][1]["physical"]["kernel"] == "window_select"
    assert uses_window_store(typed(plan).element("W"))
    kernel = json.dumps(plan)
    plan["elements"][1]["physical"]["kernel"] = None
    return kernel, json.dumps(plan)


@pytest.mark.parametrize("query", ["deduced", "key change", "keep rows", "stream"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.lists(event, min_size=1, max_size=40), min_size=1, max_size=3))
def test_kernel_over_the_state_store(tmp_path, query, data):
    """Batch after batch through runtime/arrow_state.py (rows from the state store, written back,
    committed, the last batch run again as after a crash): the kernel gives the engine's outputs
    and leaves the same state file."""
    example = uuid.uuid4().hex
    plans = dict(zip(("kernel", "engine"), store_plans(tmp_path, "window", query)))
    dirs = {which: tmp_path / f"{which}{example}" for which in plans}
    for b, events in enumerate(data + data[-1:]):
        batch_id = min(b, len(data) - 1)
        t = bucket_table(events, 1000 * (batch_id + 1), SCHEMA)
        got = {}
        for which, plan_text in plans.items():
            run = bucket_runner(plan_text, "W", frozenset(), str(dirs[which]), batch_id, 0)
            got[which] = sorted(run((None,), t).to_pylist(), key=lambda r: (
                r["__inst"], r["__kind"] == "stat", r["__seq"] or 0, r["__sub"] or 0))
        assert same(got["kernel"], got["engine"])
        assert same(load_states(str(dirs["kernel"]), 0, batch_id + 1),
                    load_states(str(dirs["engine"]), 0, batch_id + 1))


def test_a_transaction_of_a_keep_eviction_and_its_insert(tmp_path):
    """An upstream KEEP's delete and the insert that caused it (one sequence number): the output
    window's delete of the evicted row and insert of the new one, under that number; an update
    of a held row is an update."""
    run = bucket_run(tmp_path, "window", "deduced")
    rows = [{"k": "a", "p": 1.0, "v": 1, "n": None}, {"k": "b", "p": 2.0, "v": 2, "n": None},
            {"k": "a", "p": 3.0, "v": 1, "n": None}, {"k": "c", "p": 4.0, "v": 3, "n": None},
            {"k": "a", "p": 5.0, "v": 1, "n": None}]
    t = bucket_table([(0, "i", None, rows[0], False), (0, "i", None, rows[1], False),
                      (0, "d", None, rows[0], False), (0, "i", None, rows[3], True),
                      (0, "u", None, {**rows[1], "v": 2, "p": -1.0}, False)], 10, SCHEMA)
    states: dict = {}
    runs, left, changes = run.kernel.run(states, bucket_rows(t), [bucket_rows(t).values], 0)
    assert left == [] and [r.inst for r in runs] == [0]
    assert list(zip(changes.seq, changes.sub, changes.op, changes.values[0])) == [
        (10, 0, "i", "a"), (11, 1, "i", "b"), (12, 2, "d", "a"), (12, 3, "i", "c"),
        (14, 4, "u", "b")]
    assert states[0]["seq"] == 14
    assert same(engine_outputs(run, {}, t), outputs(run, run.process_table({}, t, 0)))


def test_a_stream_of_a_windows_changes_merges_a_transaction_by_the_sources_key(tmp_path):
    """The window's changes as a stream: within one upstream transaction an insert and a delete
    of one source key give nothing, a delete and an insert an update (one insert out), as the
    engine merges them by the source's key; a delete alone gives nothing."""
    run = bucket_run(tmp_path, "window", "plain stream")
    a = {"k": "a", "p": 1.0, "v": 1, "n": 5}
    b = {"k": "b", "p": 1.0, "v": 2, "n": 6}
    events = [(0, "i", None, a, False), (0, "d", None, a, True),    # i + d: nothing
              (0, "i", None, b, False), (0, "d", None, b, False),   # (each its own)
              (0, "i", None, b, False), (0, "d", None, b, False), (0, "i", None, {**b, "n": 7}, True)]
    t = bucket_table(events, 10, SCHEMA)
    by_rows: dict = {}
    expected = engine_outputs(run, by_rows, t)
    kernel: dict = {}
    got = outputs(run, run.process_table(kernel, t, 0))
    assert same(got, expected) and same(kernel, by_rows)
    assert [r[-1]["n"] for r in got if r[0] == "row"] == [6, 6, 7]
