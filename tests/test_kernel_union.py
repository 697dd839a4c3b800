"""The union kernel (runtime/engine/kernels/union.py: a UNION of streams) against the engine run
row by row (BucketRun.process), on generated buckets: rows of every port interleaved, every
opcode, nulls, NaN, -0.0, rows without values, rows that came bad, failing casts and WHERE, rows
sharing sequence numbers, several instances and batches, the last batch run again. After every
batch both leave the same states and give the same output rows, change for change (sequence and
sub-numbers, bad records and counts included)."""
from __future__ import annotations

import json
import pickle
import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.plan.codec import plan_from_json
from ccl.plan.physical import columnar_kernel, union_kernel
from planned import plan_json
from runtime.engine.kernels.union import UnionKernel
from runtime.processor import BucketRun, bucket_rows, received_rows
from test_kernel_join import ROWS as JOIN_ROWS, floats, in_order, ints, keys, outputs, ports_table, same

SOURCES = """
CREATE INPUT STREAM S SCHEMA (k string, p float, v integer, n long);
CREATE INPUT STREAM T SCHEMA (k string, q float, v integer);
"""
# name -> (the element's text after CREATE OUTPUT STREAM U, the source of each port)
QUERIES = {
    "two filters": ("AS SELECT s.k k, s.p p FROM S s WHERE s.p > 0.0 "
                    "UNION SELECT t.k k, t.q p FROM T t WHERE t.v < 2", ["S", "T"]),
    # computed items, a failing cast (v = 1), a long widened, a WHERE that fails (q = 0.0:
    # 1 / 0 raises), the same source twice
    "expressions": ("SCHEMA (k string, x float, c integer, n long) AS "
                    "SELECT upper(s.k) k, s.p * 2.0 x, "
                    "cast(integer, CASE WHEN s.v = 1 THEN 'x' ELSE '2' END) c, s.n + 1 n FROM S s "
                    "WHERE s.p * 2.0 > 0.5 OR s.v < 1 "
                    "UNION SELECT t.k + '!' k, t.q x, t.v c, t.v n FROM T t WHERE 1 / t.v > 0 "
                    "UNION SELECT s.k k, s.p x, s.v c, s.n n FROM S s", ["S", "T", "S"]),
    "plain columns": ("AS SELECT s.k k, s.v v FROM S s UNION SELECT t.k k, t.v v FROM T t",
                      ["S", "T"]),
}

ROWS = {
    "S": JOIN_ROWS["S"],
    "T": st.fixed_dictionaries({"k": keys, "q": floats, "v": ints}),
}
SCHEMAS = {
    "S": pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())]),
    "T": pa.struct([("k", pa.string()), ("q", pa.float64()), ("v", pa.int32())]),
}


def events(sources: list[str]):
    """(instance, (port, row or None), opcode, why, shares the sequence number before it, src)."""
    ports = [st.tuples(st.just(k), st.one_of(ROWS[s], st.none()) if k == 0 else ROWS[s])
             for k, s in enumerate(sources)]
    return st.tuples(st.integers(0, 3), st.one_of(*ports),
                     st.sampled_from(["i", "i", "i", "u", "p", "d", "s", "x"]),
                     st.sampled_from([None] * 9 + ["no instance"]),
                     st.sampled_from([False] * 5 + [True]), st.integers(0, 1))


def bucket_run(tmp_path, name: str) -> BucketRun:
    text, _ = QUERIES[name]
    path = tmp_path / "p.ccl"
    path.write_text(SOURCES + f"CREATE OUTPUT STREAM U {text};\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    typed = plan_from_json(plan)
    assert union_kernel(typed.element("U"), typed) and columnar_kernel(typed.element("U"), typed) == "union"
    run = BucketRun(json.dumps(plan), "U")
    assert isinstance(run.kernel, UnionKernel)
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
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(by_kernel, t, 0))
        assert same(by_kernel, by_rows)
        assert same(in_order(got), in_order(expected))


@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_gives_the_engine_outputs_and_states(tmp_path, name, data):
    sources = QUERIES[name][1]
    batches = data.draw(st.lists(st.lists(events(sources), max_size=40), min_size=1, max_size=3))
    check_batches(bucket_run(tmp_path, name), sources, batches)


def random_events(rnd: random.Random, sources: list[str], n: int) -> list:
    """``n`` events as :func:`events` draws them, from ``rnd``."""
    out: list = []
    for _ in range(n):
        port = rnd.randrange(len(sources))
        shares = bool(out) and rnd.random() < 0.15
        inst = out[-1][0] if shares and rnd.random() < 0.7 else rnd.randrange(4)
        if shares and rnd.random() < 0.7:
            port = out[-1][1][0]
        row = {c: rnd.choice(CHOICES[c]) for c in SCHEMAS[sources[port]].names}
        out.append((inst, (port, row), rnd.choice(["i", "i", "i", "u", "p", "d", "s", "x"]),
                    rnd.choice([None] * 19 + ["no instance"]), shares, rnd.randrange(2)))
    return out


CHOICES = {"k": [None, "a", "b", "B"], "p": [None, 0.0, -0.0, 1.5, float("nan"), 0.1, 1e308],
           "q": [None, 0.0, -0.0, 2.5, float("nan"), 0.1], "v": [None, 0, 1, 2, -3, 2**31 - 1],
           "n": [None, 0, 5, 2**40, -2**62]}


@pytest.mark.parametrize("name", list(QUERIES))
def test_larger_random_buckets(tmp_path, name):
    """Buckets of a few hundred rows: the kernel itself runs nearly every instance."""
    sources = QUERIES[name][1]
    run = bucket_run(tmp_path, name)
    rnd = random.Random(name)
    batches = [random_events(rnd, sources, 300) for _ in range(3)]
    states: dict = {}
    t = table(sources, batches[0], 1000)
    runs, left, changes = run.kernel.run(states, bucket_rows(t), [
        t.column(f"__p{p}").combine_chunks() for p in range(len(sources))], 0)
    assert len(runs) > len(left) and len(changes.inst) > 50
    check_batches(run, sources, batches)


def test_ports_merge_in_the_engines_order_and_a_transaction_is_one_row(tmp_path):
    """Rows of the two ports interleaved by sequence number come out in that order; two rows of
    port 0 sharing a sequence number (one upstream transaction) give one output, the second's
    values; a delete gives nothing, an unknown opcode a bad record; a state the kernel cannot
    read is handed back untouched."""
    run = bucket_run(tmp_path, "two filters")
    rows = [(0, (1, {"k": "t1", "q": 1.0, "v": 0}), "i", None, False, 0),
            (0, (0, {"k": "s1", "p": 1.0, "v": 0, "n": 1}), "i", None, False, 0),
            (0, (0, {"k": "s2", "p": 2.0, "v": 0, "n": 1}), "i", None, True, 0),
            (0, (1, {"k": "t2", "q": 2.0, "v": 0}), "d", None, False, 0),
            (0, (1, {"k": "t3", "q": 3.0, "v": 0}), "x", None, False, 0),
            (0, (1, {"k": "t4", "q": 4.0, "v": 0}), "u", None, False, 0)]
    t = table(["S", "T"], rows, 10)
    ports = [t.column(f"__p{p}").combine_chunks() for p in range(2)]
    runs, left, changes = run.kernel.run({}, bucket_rows(t), ports, 0)
    assert [r.inst for r in runs] == [0] and left == []
    assert changes.values == [["t1", "s2", "t4"], [1.0, 2.0, 4.0]]
    assert changes.seq == [10, 11, 15] and changes.sub == [0, 1, 3]
    assert [(b[1], b[2], b[3]) for b in changes.bad] == [(14, 2, "unknown opcode 'x'")]
    odd = {0: {"seq": 3, "selects": []}}
    runs, left, changes = run.kernel.run(odd, bucket_rows(t), ports, 0)
    assert runs == [] and left == [0] and odd == {0: {"seq": 3, "selects": []}}


def test_what_the_union_kernel_does_not_take(tmp_path):
    """A union with a select over a window, a join, an aggregate or an impure function, and a
    union window, are not the union kernel's."""
    extra = "CREATE INPUT WINDOW W SCHEMA (k string, p float) PRIMARY KEY (k);\n"
    for text in ["CREATE OUTPUT STREAM U AS SELECT s.k k, s.p p FROM S s "
                 "UNION SELECT w.k k, w.p p FROM W w;",
                 "CREATE OUTPUT STREAM U AS SELECT s.k k, s.p p FROM S s "
                 "UNION SELECT t.k k, w.p p FROM T t INNER JOIN W w ON t.k = w.k;",
                 "CREATE OUTPUT STREAM U AS SELECT s.k k, s.p p FROM S s "
                 "UNION SELECT t.k k, random() p FROM T t;",
                 "CREATE OUTPUT WINDOW U PRIMARY KEY (k) AS SELECT s.k k, s.p p FROM S s "
                 "UNION SELECT t.k k, t.q p FROM T t;"]:
        path = tmp_path / "p.ccl"
        path.write_text(SOURCES + extra + text + "\n")
        plan, diags = plan_json(str(path))
        assert plan is not None, [str(d) for d in diags]
        typed = plan_from_json(plan)
        assert not union_kernel(typed.element("U"), typed), text
        assert typed.element("U").physical.kernel != "union", text


def test_kernel_and_engine_take_turns_on_one_state(tmp_path):
    """Either may run an instance's next batch: the kernel's state is the engine's."""
    sources = QUERIES["expressions"][1]
    run = bucket_run(tmp_path, "expressions")
    rnd = random.Random(7)
    by_rows: dict = {}
    mixed: dict = {}
    for b in range(4):
        t = table(sources, random_events(rnd, sources, 120), 1000 * (b + 1))
        expected = run.process(by_rows, received_rows(t), 0)
        if b % 2:
            got = run.process(mixed, received_rows(t), 0)
        else:
            got = outputs(run, run.process_table(mixed, t, 0))
        assert same(in_order(got), in_order(expected))
        assert same(pickle.loads(pickle.dumps(mixed)), by_rows)
