"""The window_union kernel (runtime/engine/kernels/window_union.py: a UNION into a window or delta
stream, each select from one window, delta stream or stream) against the engine run row by row
(BucketRun.process), on generated buckets: the ports' rows interleaved, every opcode, the same
output key from two selects, WHERE flipping on an update, key changes, nulls, NaN, -0.0, rows
without values, rows that came bad, failing expressions, shared sequence numbers, four instances,
several batches and the last one again. After every batch both leave the same states and give the
same output rows, change for change (sequence and sub-numbers, bad records and counts)."""
from __future__ import annotations

import json
import pickle
import random
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.plan.codec import plan_from_json
from ccl.plan.physical import columnar_kernel, window_union_kernel
from planned import plan_json
from runtime.arrow_state import bucket_runner, load_states
from runtime.engine.kernels.window_union import WindowUnionKernel
from runtime.processor import BucketRun, bucket_rows
from test_kernel_join import floats, ports_table
from test_kernel_keep import engine_outputs, outputs, same

SOURCES = """
CREATE INPUT WINDOW E SCHEMA (k string, p float, v integer, n long) PRIMARY KEY (k, v);
CREATE INPUT WINDOW F SCHEMA (k string, p float, v integer, n long) PRIMARY KEY (k, v);
CREATE INPUT DELTA STREAM D SCHEMA (k string, q float, v integer) PRIMARY KEY (q);
CREATE INPUT STREAM S SCHEMA (k string, p float, v integer);
"""
# name -> (the element's text after CREATE OUTPUT, the source of each port)
QUERIES = {
    # the same key from both selects (a change of one overwrites the other's row)
    "two windows": ("WINDOW U SCHEMA (k string, p float, v integer, n long) PRIMARY KEY (k, v) "
                    "AS SELECT e.k k, e.p p, e.v v, e.n n FROM E e "
                    "UNION SELECT f.k k, f.p p, f.v v, f.n n FROM F f", ["E", "F"]),
    # WHERE flipping on an update, a key moved by upper() (several source rows show one key),
    # 10 / v failing for v = 0, the same window on two ports
    "filters": ("WINDOW U SCHEMA (k string, v integer, p float, r integer) PRIMARY KEY (k) "
                "AS SELECT upper(e.k) k, e.v v, e.p p, 10 / e.v r FROM E e WHERE e.p > 0.0 "
                "UNION SELECT f.k k, f.v v, f.p * 2 p, f.v r FROM F f WHERE f.v < 2 "
                "UNION SELECT e.k + '!' k, e.v v, e.p p, 0 r FROM E e WHERE e.n > 0",
                ["E", "F", "E"]),
    # a window, a delta stream (a float key) and a stream; a failing cast (v = 1)
    "three kinds": ("WINDOW U SCHEMA (k string, x float, c integer) PRIMARY KEY (k) "
                    "AS SELECT e.k k, e.p x, e.v c FROM E e "
                    "UNION SELECT d.k k, d.q x, cast(integer, CASE WHEN d.v = 1 THEN 'x' ELSE '2' END) c "
                    "FROM D d WHERE d.q > 0.0 OR d.v < 1 "
                    "UNION SELECT s.k k, s.p * 2 x, s.v c FROM S s WHERE s.v <> 2", ["E", "D", "S"]),
    "delta out": ("DELTA STREAM U SCHEMA (k string, v integer, q float) PRIMARY KEY (k, v) "
                  "AS SELECT upper(e.k) k, e.v v, e.p q FROM E e WHERE e.v > 0 "
                  "UNION SELECT d.k k, d.v v, d.q * 2 q FROM D d", ["E", "D"]),
    # the changes as a stream: WHERE on the old row too (10 / v fails for v = 0), the items on
    # the new row only (a failing cast), a transaction merged by its port's source key
    "stream out": ("STREAM U SCHEMA (k string, x float, c integer) "
                   "AS SELECT upper(e.k) k, e.p * 2 x, "
                   "cast(integer, CASE WHEN e.v = 1 THEN 'x' ELSE '2' END) c FROM E e "
                   "WHERE 10 / e.v > 1 OR e.p > 0.0 "
                   "UNION SELECT d.k k, d.q x, d.v c FROM D d WHERE d.q > 0.0 "
                   "UNION SELECT s.k k, s.p x, s.v c FROM S s", ["E", "D", "S"]),
    "keep rows": ("WINDOW U SCHEMA (k string, v integer, n long) PRIMARY KEY (k, v) KEEP 2 ROWS "
                  "AS SELECT e.k k, e.v v, e.n n FROM E e "
                  "UNION SELECT f.k k, f.v v, f.n n FROM F f WHERE f.p > 0.0", ["E", "F"]),
}

keys = st.sampled_from([None, "a", "a", "b", "B"])
ints = st.sampled_from([None, 0, 1, 2, -3, 2**31 - 1])
longs = st.sampled_from([None, 0, 5, 2**40, -2**62])
ROWS = {
    "E": st.fixed_dictionaries({"k": keys, "p": floats, "v": ints, "n": longs}),
    "D": st.fixed_dictionaries({"k": keys, "q": floats, "v": ints}),
    "S": st.fixed_dictionaries({"k": keys, "p": floats, "v": ints}),
}
ROWS["F"] = ROWS["E"]
SCHEMAS = {
    "E": pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())]),
    "D": pa.struct([("k", pa.string()), ("q", pa.float64()), ("v", pa.int32())]),
    "S": pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32())]),
}
SCHEMAS["F"] = SCHEMAS["E"]


def events(sources: list[str]):
    """(instance, (port, row or None), opcode, why, shares the sequence number before it, src)."""
    ports = [st.tuples(st.just(k), st.one_of(ROWS[s], st.none()) if k == 0 else ROWS[s])
             for k, s in enumerate(sources)]
    return st.tuples(st.integers(0, 3), st.one_of(*ports),
                     st.sampled_from(["i", "i", "u", "u", "p", "d", "d", "s", "x"]),
                     st.sampled_from([None] * 9 + ["no instance"]),
                     st.sampled_from([False] * 3 + [True]), st.integers(0, 1))


def project(name: str) -> str:
    return SOURCES + f"CREATE OUTPUT {QUERIES[name][0]};\n"


def bucket_run(tmp_path, name: str) -> BucketRun:
    path = tmp_path / "p.ccl"
    path.write_text(project(name))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    typed = plan_from_json(plan)
    assert window_union_kernel(typed.element("U"), typed)
    assert columnar_kernel(typed.element("U"), typed) == "window_union"
    run = BucketRun(json.dumps(plan), "U")
    assert isinstance(run.kernel, WindowUnionKernel)
    return run


def table(sources: list[str], data: list, first_seq: int) -> pa.Table:
    return ports_table([SCHEMAS[name] for name in sources], data, first_seq)


def check_batches(run: BucketRun, sources: list[str], batches: list[list]) -> None:
    """Each batch through the engine and the kernel on their own states (the last one twice, as
    a batch run again after a crash on the state it left): same states and outputs each time."""
    by_rows: dict = {}
    by_kernel: dict = {}
    tables = [table(sources, bucket, 1000 * (b + 1)) for b, bucket in enumerate(batches)]
    for t in tables + tables[-1:]:
        expected = engine_outputs(run, by_rows, t)
        got = outputs(run, run.process_table(by_kernel, t, 0))
        assert same(by_kernel, by_rows)
        assert same(got, expected)


@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_gives_the_engine_outputs_and_states(tmp_path, name, data):
    sources = QUERIES[name][1]
    batches = data.draw(st.lists(st.lists(events(sources), max_size=40), min_size=1, max_size=3))
    check_batches(bucket_run(tmp_path, name), sources, batches)


CHOICES = {"k": [None, "a", "b", "B"], "p": [None, 0.0, -0.0, 1.5, float("nan"), 0.1],
           "q": [None, 0.0, -0.0, 2.5, float("nan"), 0.1], "v": [None, 0, 1, 2, -3],
           "n": [None, 0, 5, 2**40]}


def random_events(rnd: random.Random, sources: list[str], n: int) -> list:
    """``n`` events as :func:`events` draws them, from ``rnd`` (few keys: many updates)."""
    out: list = []
    for _ in range(n):
        port = rnd.randrange(len(sources))
        shares = bool(out) and rnd.random() < 0.2
        inst = out[-1][0] if shares and rnd.random() < 0.7 else rnd.randrange(4)
        if shares and rnd.random() < 0.7:
            port = out[-1][1][0]
        row = {c: rnd.choice(CHOICES[c]) for c in SCHEMAS[sources[port]].names}
        out.append((inst, (port, row), rnd.choice(["i", "i", "u", "u", "p", "d", "s", "x"]),
                    rnd.choice([None] * 19 + ["no instance"]), shares, rnd.randrange(2)))
    return out


@pytest.mark.parametrize("name", list(QUERIES))
def test_larger_random_buckets(tmp_path, name):
    """Buckets of a few hundred rows: the kernel itself runs every instance, with many changes."""
    sources = QUERIES[name][1]
    run = bucket_run(tmp_path, name)
    rnd = random.Random(name)
    batches = [random_events(rnd, sources, 300) for _ in range(3)]
    t = table(sources, batches[0], 1000)
    runs, left, changes = run.kernel.run({}, bucket_rows(t), [
        t.column(f"__p{p}").combine_chunks() for p in range(len(sources))], 0)
    assert len(runs) == 4 and not left and len(changes.inst) > 50
    check_batches(run, sources, batches)


@pytest.mark.parametrize("name", ["filters", "three kinds", "stream out"])
def test_kernel_and_engine_take_turns_on_one_state(tmp_path, name):
    """Either may run an instance's next batch: the kernel's state is the engine's."""
    sources = QUERIES[name][1]
    run = bucket_run(tmp_path, name)
    rnd = random.Random(7)
    by_rows: dict = {}
    mixed: dict = {}
    for b in range(6):
        t = table(sources, random_events(rnd, sources, 150), 1000 * (b + 1))
        expected = engine_outputs(run, by_rows, t)
        got = (outputs(run, run.process_table(mixed, t, 0)) if b % 2 == 0
               else engine_outputs(run, mixed, t))
        assert same(got, expected)
        assert same(pickle.loads(pickle.dumps(mixed)), by_rows)


def test_the_same_key_from_two_selects_and_a_transaction(tmp_path):
    """Port 1 writes the key port 0 wrote: an update of the one row; port 1's delete of its source
    row removes it, whichever select wrote it last; two rows of port 0 sharing a sequence number
    merge by key; an unknown opcode is a bad record; a state the kernel cannot read is handed back
    untouched."""
    run = bucket_run(tmp_path, "two windows")
    a = {"k": "a", "p": 1.0, "v": 1, "n": 1}
    rows = [(0, (0, a), "i", None, False, 0),
            (0, (1, {**a, "p": 2.0}), "i", None, False, 0),
            (0, (0, {**a, "p": 3.0}), "u", None, False, 0),
            (0, (0, {**a, "v": 2}), "i", None, True, 0),
            (0, (1, a), "d", None, False, 0),
            (0, (1, a), "x", None, False, 0)]
    t = table(["E", "F"], rows, 10)
    ports = [t.column(f"__p{p}").combine_chunks() for p in range(2)]
    states: dict = {}
    runs, left, changes = run.kernel.run(states, bucket_rows(t), ports, 0)
    assert [r.inst for r in runs] == [0] and left == []
    assert list(zip(changes.seq, changes.sub, changes.op, changes.values[1], changes.values[2])) == [
        (10, 0, "i", 1.0, 1), (11, 1, "u", 2.0, 1), (12, 2, "u", 3.0, 1), (12, 3, "i", 1.0, 2),
        (14, 4, "d", 3.0, 1)]
    assert [(b[1], b[2], b[3]) for b in changes.bad] == [(15, 5, "unknown opcode 'x'")]
    assert same(engine_outputs(run, {}, t), outputs(run, run.process_table({}, t, 0)))
    odd = {0: {"seq": 3, "selects": []}}
    runs, left, changes = run.kernel.run(odd, bucket_rows(t), ports, 0)
    assert runs == [] and left == [0] and odd == {0: {"seq": 3, "selects": []}}


def store_plans(tmp_path, name: str) -> tuple[str, str]:
    """The plan text of ``U`` run by the kernel and by the engine (its rows and its sources'
    mirrors in the bucket's state store)."""
    path = tmp_path / "p.ccl"
    path.write_text(project(name))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    u = next(e for e in plan["elements"] if e["name"] == "U")
    assert u["physical"]["kernel"] == "window_union"
    kernel = json.dumps(plan)
    u["physical"]["kernel"] = None
    return kernel, json.dumps(plan)


@pytest.mark.parametrize("name", ["filters", "stream out"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_over_the_state_store(tmp_path, name, data):
    """Batch after batch through runtime/arrow_state.py (rows from the state store, written back,
    committed, the last batch run again as after a crash): the kernel gives the engine's outputs
    and leaves the same state file."""
    sources = QUERIES[name][1]
    batches = data.draw(st.lists(st.lists(events(sources), min_size=1, max_size=40),
                                 min_size=1, max_size=3))
    example = uuid.uuid4().hex
    plans = dict(zip(("kernel", "engine"), store_plans(tmp_path, name)))
    dirs = {which: tmp_path / f"{which}{example}" for which in plans}
    for b, bucket in enumerate(batches + batches[-1:]):
        batch_id = min(b, len(batches) - 1)
        t = table(sources, bucket, 1000 * (batch_id + 1))
        got = {}
        for which, plan_text in plans.items():
            run = bucket_runner(plan_text, "U", frozenset(), str(dirs[which]), batch_id, 0)
            got[which] = sorted(run((None,), t).to_pylist(), key=lambda r: (
                r["__inst"], r["__kind"] == "stat", r["__seq"] or 0, r["__sub"] or 0))
        assert same(got["kernel"], got["engine"])
        assert same(load_states(str(dirs["kernel"]), 0, batch_id + 1),
                    load_states(str(dirs["engine"]), 0, batch_id + 1))


def test_what_the_window_union_kernel_does_not_take(tmp_path):
    """A UNION of streams into a stream (the union kernel's), or with a join, an aggregate, an
    impure function or a FROM KEEP in a select, is not the window_union kernel's."""
    for text in ["STREAM U AS SELECT s.k k, s.p p FROM S s UNION SELECT t.k k, t.p p FROM S t",
                 "WINDOW U PRIMARY KEY (k) AS SELECT e.k k, e.p p FROM E e "
                 "UNION SELECT f.k k, d.q p FROM F f INNER JOIN D d ON f.k = d.k",
                 "WINDOW U PRIMARY KEY (k) AS SELECT e.k k, e.p p FROM E e "
                 "UNION SELECT f.k k, random() p FROM F f",
                 "WINDOW U PRIMARY KEY (k) AS SELECT e.k k, e.p p FROM E e "
                 "UNION SELECT f.k k, sum(f.p) p FROM F f GROUP BY f.k",
                 "WINDOW U PRIMARY KEY (k) AS SELECT e.k k, e.p p FROM E e "
                 "UNION SELECT s.k k, s.p p FROM S s KEEP 2 ROWS"]:
        path = tmp_path / "p.ccl"
        path.write_text(SOURCES + f"CREATE OUTPUT {text};\n")
        plan, diags = plan_json(str(path))
        assert plan is not None, [str(d) for d in diags]
        typed = plan_from_json(plan)
        assert not window_union_kernel(typed.element("U"), typed), text
        assert typed.element("U").physical.kernel != "window_union", text
