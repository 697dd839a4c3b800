"""The keep kernel (runtime/engine/kernels/keep.py) against the engine run row by row
(BucketRun.process), on generated buckets: after every batch both leave the same state (rows,
PER groups and their order) and give the same output rows: changes, evictions, bad records and
counts, with the same sequence and sub-numbers."""
from __future__ import annotations

import json
import math
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buckets import bucket_table
from planned import plan_json, typed, typed_element
from ccl.plan.physical import columnar_kernel
from runtime.arrow_state import bucket_runner, load_states, uses_window_store
from runtime.engine.kernels.keep import KeepKernel
from runtime.processor import BucketRun, bucket_rows, received_rows
from runtime.state import BucketStore, encode_key
from runtime.state.rows import window_states

SOURCE = "CREATE INPUT STREAM S SCHEMA (k string, p float, v integer, n long);\n"
WINDOWS = {
    "per": "PRIMARY KEY (k, v) KEEP 2 ROWS PER (k) AS SELECT * FROM S",
    "no per": "PRIMARY KEY (v) KEEP 3 ROWS AS SELECT S.v, S.k, S.p FROM S",
    "one row per float": "PRIMARY KEY (v, k) KEEP 1 ROWS PER (p) AS SELECT * FROM S",
    "last per, where, expressions": ("SCHEMA (v integer, k string, q float, u string) PRIMARY KEY (v) "
                                     "KEEP LAST PER (k) AS SELECT S.v v, S.k k, S.p * 2 q, "
                                     "upper(S.k) u FROM S WHERE S.p > 0.0 OR S.v < 1"),
    "slack": "PRIMARY KEY (v) KEEP 2 ROWS SLACK 2 AS SELECT S.v, S.n, S.p FROM S",
    "every": "PRIMARY KEY (k, v) KEEP EVERY 3 ROWS PER (k) AS SELECT S.k, S.v FROM S",
    # a long key, an integer shown as a float (1 and 1.0 one key), a PER column the select computes
    "casts": ("SCHEMA (n long, x float, g string) PRIMARY KEY (n, x) KEEP 2 ROWS PER (g) "
              "AS SELECT S.n n, S.v x, S.k + 'z' g FROM S"),
    # <target>_partitions read by WHERE
    "partitions": ("PRIMARY KEY (v) KEEP 2 ROWS PARTITION BY S HASH(k) PARTITIONS 3 "
                   "AS SELECT S.v, S.k FROM S WHERE S.v % W_partitions <> 1"),
    # a cast of 'x' fails: such rows become bad records (WHERE's failure first)
    "failing": ("SCHEMA (v integer, q integer) PRIMARY KEY (v) KEEP 2 ROWS "
                "AS SELECT S.v v, cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END) q FROM S "
                "WHERE cast(integer, CASE WHEN S.k = 'c' THEN 'y' ELSE '1' END) = 1"),
}

floats = st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), 0.1])
row = st.fixed_dictionaries({
    "k": st.sampled_from([None, "a", "b", "B", "c"]), "p": floats,
    "v": st.sampled_from([None, 0, 1, 2, -3, 4, 5, 2**31 - 1]),
    "n": st.sampled_from([None, 0, 5, 2**40, -2**62])})
event = st.tuples(st.integers(0, 3),                                   # instance
                  st.sampled_from(["i", "i", "i", "u", "p", "d", "s", "x"]),  # opcode
                  st.sampled_from([None, None, None, None, "does not parse"]),
                  row,
                  st.sampled_from([False] * 5 + [True]))  # shares the sequence number before it
batches = st.lists(st.lists(event, max_size=40), min_size=1, max_size=4)
# no bad rows and no shared sequence numbers: each instance's rows take the kernel's one loop
clean_event = st.tuples(st.integers(0, 2), st.sampled_from(["i", "i", "u", "p", "d"]), st.none(), row,
                        st.just(False))
clean_batches = st.lists(st.lists(clean_event, max_size=60), min_size=1, max_size=3)
SCHEMA = pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())])


def bucket_run(tmp_path, window: str) -> BucketRun:
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W {window};\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert columnar_kernel(*typed_element(plan, 1)) == "keep"
    assert plan["elements"][1]["physical"]["kernel"] == "keep"
    run = BucketRun(json.dumps(plan), "W")
    assert isinstance(run.kernel, KeepKernel)
    return run


def table(events: list, first_seq: int) -> pa.Table:
    return bucket_table(events, first_seq, SCHEMA)


def same(a, b) -> bool:
    """Equality with NaN equal to NaN, -0.0 told from 0.0 and dictionaries in order."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, int) and isinstance(b, int) and bool not in (type(a), type(b)):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return same(list(a.items()), list(b.items()))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def outputs(run: BucketRun, got: pa.Table) -> list[tuple]:
    """process_table's output rows as BucketRun.process gives them, in (instance, seq, sub) order."""
    rows = [(r["__kind"], r["__inst"], r["__seq"], r["__sub"], r["__op"], r["__info"],
             {} if r["__kind"] != "row" else {c: r[c] for c in run.columns}) for r in got.to_pylist()]
    return sorted(rows, key=order)


def order(o: tuple) -> tuple:
    return (o[1], o[0] == "stat", o[2] or 0, o[3] or 0)


def engine_outputs(run: BucketRun, states: dict, t: pa.Table) -> list[tuple]:
    """BucketRun.process's rows as they come out of an Arrow table (values typed as the table's)."""
    return outputs(run, run.table(run.process(states, received_rows(t), 0)))


@pytest.mark.parametrize("name", list(WINDOWS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_kernel_gives_the_engine_outputs_and_state(tmp_path, name, data):
    run = bucket_run(tmp_path, WINDOWS[name])
    by_rows: dict = {}
    kernel: dict = {}
    for b, events in enumerate(data):
        t = table(events, 1000 * (b + 1))
        expected = engine_outputs(run, by_rows, t)
        got = outputs(run, run.process_table(kernel, t, 0))
        assert same(kernel, by_rows)
        assert same(got, expected)


@pytest.mark.parametrize("name", [n for n in WINDOWS if n != "failing"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=clean_batches)
def test_kernel_gives_the_engine_outputs_without_bad_rows_or_transactions(tmp_path, name, data):
    run = bucket_run(tmp_path, WINDOWS[name])
    by_rows: dict = {}
    kernel: dict = {}
    for b, events in enumerate(data):
        t = table(events, 1000 * (b + 1))
        expected = engine_outputs(run, by_rows, t)
        got = outputs(run, run.process_table(kernel, t, 0))
        assert same(kernel, by_rows)
        assert same(got, expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_engine_and_kernel_take_turns_on_one_state(tmp_path, data):
    """Either runs an instance's next batch on the state the other left (NaN in PER groups too:
    a group is found again by the very objects of its row)."""
    run = bucket_run(tmp_path, WINDOWS["one row per float"])
    by_rows: dict = {}
    mixed: dict = {}
    for b, events in enumerate(data * 2):
        t = table(events, 1000 * (b + 1))
        expected = engine_outputs(run, by_rows, t)
        got = (outputs(run, run.process_table(mixed, t, 0)) if b % 2 else engine_outputs(run, mixed, t))
        assert same(got, expected)
        assert same(mixed, by_rows)


def store_plans(tmp_path, window: str) -> tuple[str, str, str]:
    """The plan text of ``W`` over ``window`` run by the keep kernel and by the engine (no
    kernel), W's rows in the bucket's state store (runtime/state/rows.py), and by the engine with
    its rows in the state file (the pickled layout)."""
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W {window};\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert plan["elements"][1]["physical"]["kernel"] == "keep"
    assert uses_window_store(typed(plan).element("W"))
    kernel = json.dumps(plan)
    plan["elements"][1]["physical"]["kernel"] = None
    engine = json.dumps(plan)
    plan["elements"][1]["physical"]["window_store"] = False
    return kernel, engine, json.dumps(plan)


def stored(state_dir) -> list[tuple[bytes, bytes]]:
    """Every committed entry of bucket 0's state store (values, undo records, history)."""
    with BucketStore.open(str(state_dir / "rows"), 0) as store:
        return list(store._db.items())


def held_rows(state_dir, pickled_dir, batch_id: int) -> tuple[list, list]:
    """The window rows held after ``batch_id`` (encoded instance and key, row), in key order:
    read from the state store of the run in ``state_dir``, and from the state file of the run in
    ``pickled_dir`` (a key as the store reads it back has a long as an int: compared encoded)."""
    states = load_states(str(pickled_dir), 0, batch_id + 1)
    pickled, from_store = [], []
    with BucketStore.open(str(state_dir / "rows"), 0) as store:
        for inst, state in sorted(states.items()):
            for ns, part in window_states(state):
                pickled += [(encode_key((inst, *k)), row) for k, row in part["rows"].items()]
                from_store += [(encode_key(k), row) for k, row in store.scan(ns, (inst,))]
    pickled.sort(key=lambda e: e[0])
    return from_store, pickled


@pytest.mark.parametrize("name", [n for n in WINDOWS if n != "one row per float"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.lists(event, min_size=1, max_size=40), min_size=1, max_size=4))  # (Spark sends
def test_kernel_gives_the_engine_outputs_and_store_over_the_state_store(tmp_path, name, data):  # no empty group)
    """Batch after batch through runtime/arrow_state.py (rows attached from the store, written
    back, committed, the last batch run again as after a crash): the kernel (which reads a
    batch's rows and evicted rows at once, and writes nothing for a row born and evicted in the
    batch) gives the engine's outputs and leaves the same state file and the very same store
    entries; and the rows in the store are those the engine holds in the pickled layout.
    (A NaN PER group is found again only by the very objects of its row: a state read back from
    the store is not the same objects, for the engine too: not a case for this comparison.)"""
    example = uuid.uuid4().hex  # (tmp_path is the test's, shared by the examples)
    plans = dict(zip(("kernel", "engine", "pickled"), store_plans(tmp_path, WINDOWS[name])))
    dirs = {which: tmp_path / f"{which}{example}" for which in plans}
    for b, events in enumerate(data + data[-1:]):
        batch_id = min(b, len(data) - 1)  # the last batch twice: run again, as after a crash
        t = table(events, 1000 * (batch_id + 1))
        got = {}
        for which, plan_text in plans.items():
            run = bucket_runner(plan_text, "W", frozenset(), str(dirs[which]), batch_id, 0)
            got[which] = sorted(run((None,), t).to_pylist(), key=lambda r: (r["__inst"], r["__kind"] == "stat",
                                                                             r["__seq"] or 0, r["__sub"] or 0))
        assert same(got["kernel"], got["engine"])
        assert same(got["kernel"], got["pickled"])
        assert same(load_states(str(dirs["kernel"]), 0, batch_id + 1),
                    load_states(str(dirs["engine"]), 0, batch_id + 1))
        assert stored(dirs["kernel"]) == stored(dirs["engine"])
        from_store, pickled = held_rows(dirs["kernel"], dirs["pickled"], batch_id)
        assert same(from_store, pickled)


def test_evictions_updates_and_transactions(tmp_path):
    """KEEP 2 ROWS PER (k): the third row of a group evicts the oldest (its delete first, with the
    insert's sequence number); a key seen again is an update and becomes its group's newest; two
    rows of one transaction with one key are one insert of the last."""
    run = bucket_run(tmp_path, WINDOWS["per"])
    rows = [{"k": "a", "p": float(i), "v": v, "n": None} for i, v in enumerate([1, 2, 1, 3, 3, 4])]
    t = table([(0, "i", None, r, i == 4) for i, r in enumerate(rows)], 10)
    states: dict = {}
    runs, left, changes = run.kernel.run(states, bucket_rows(t), None, 0)
    assert left == [] and [r.inst for r in runs] == [0]
    assert list(zip(changes.seq, changes.sub, changes.op, changes.values[2], changes.values[1])) == [
        (10, 0, "i", 1, 0.0), (11, 1, "i", 2, 1.0), (12, 2, "u", 1, 2.0),  # v=1 again: the newest
        (13, 3, "d", 2, 1.0), (13, 4, "i", 3, 4.0),    # v=2 was the oldest; one transaction's v=3
        (15, 5, "d", 1, 2.0), (15, 6, "i", 4, 5.0)]
    assert list(states[0]["output"]["groups"][("a",)]) == [("a", 3), ("a", 4)]
    assert states[0]["output"]["rows"][("a", 3)]["p"] == 4.0
    assert states[0]["seq"] == 15


def test_rows_that_come_bad_are_counted_and_reported(tmp_path):
    run = bucket_run(tmp_path, WINDOWS["no per"])
    good = {"k": "a", "p": 1.0, "v": 1, "n": 1}
    t = table([(0, "i", "does not parse", good, False), (0, "x", None, good, False),
               (1, "i", None, good, False)], 5)
    got = outputs(run, run.process_table({}, t, 0))
    assert [(o[0], o[1], o[2], o[3]) for o in got] == [
        ("bad", 0, 5, 0), ("bad", 0, 6, 0), ("stat", 0, 1, 1),   # (rows run, rows that came bad)
        ("row", 1, 7, 0), ("stat", 1, 1, 0)]
    assert "unknown opcode 'x'" in got[1][5]
    assert same(got, engine_outputs(run, {}, t))
