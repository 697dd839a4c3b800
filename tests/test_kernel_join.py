"""The join kernel (runtime/engine/kernels/join.py) against the engine run row by row
(BucketRun.process), on generated buckets: a stream joined with windows whose rows come in the
same buckets (inserts, updates, deletes, upserts), nulls, NaN, unknown opcodes, rows that came
bad, rows sharing sequence numbers, several instances and batches. After every batch both leave
the same states and give the same output rows, change for change (sequence and sub-numbers,
bad records and counts included)."""
from __future__ import annotations

import json
import logging
import math
import pickle
import random
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.plan.codec import plan_from_json
from planned import plan_json, typed_parts
from ccl.plan.physical import join_kernel, select_kernel
from runtime.engine.flex import make_engine
from runtime.engine.kernels import make_kernel
from runtime.engine.kernels.join import JoinKernel
from runtime.processor import BucketRun, bucket_rows, received_rows

SOURCES = """
CREATE INPUT STREAM S SCHEMA (k string, p float, v integer, n long);
CREATE INPUT WINDOW W SCHEMA (k string, name string, f float) PRIMARY KEY (k);
CREATE INPUT WINDOW X SCHEMA (id integer, v integer, tag string) PRIMARY KEY (id);
"""
QUERIES = {
    "enrich": ("SELECT s.k k, s.p p, s.v v, w.name name FROM S s INNER JOIN W w ON s.k = w.k",
               ["W"]),
    "left join with where": ("SELECT s.k k, s.n n, w.name name, w.f f FROM S s LEFT JOIN W w "
                             "ON w.k = s.k WHERE s.v > -3 OR w.f > 0.0", ["W"]),
    # X is joined on a column that is not its key: a stream row may match several of its rows
    "two windows, several matches": ("SELECT s.k k, w.name name, x.id id, x.tag tag, s.p p "
                                     "FROM S s LEFT JOIN W w ON s.k = w.k "
                                     "INNER JOIN X x ON s.v = x.v", ["W", "X"]),
    "equality on a window's column": ("SELECT s.k k, x.id id, w.f f FROM S s INNER JOIN W w "
                                      "ON s.k = w.k LEFT JOIN X x ON x.tag = w.name AND x.v = s.v",
                                      ["W", "X"]),
    # a cast of 'x' fails: those stream rows become bad records; a long item; a widened column
    "expressions": ("SELECT upper(s.k) k, cast(integer, CASE WHEN s.v = 1 THEN 'x' ELSE '2' END) q, "
                    "s.p * w.f pf, s.n + 1 n1, s.v vv, w.name + '!' t FROM S s "
                    "INNER JOIN W w ON s.k = w.k WHERE w.f <> 0.1",
                    ["W"], "SCHEMA (k string, q integer, pf float, n1 long, vv float, t string)"),
    # no window (the ``select`` kernel): arithmetic, CASE, a function call, a failing cast, a
    # WHERE the native stream path does not take
    "select, no window": ("SELECT upper(s.k) k, s.p * 2.0 p2, s.n + 1 n1, "
                          "CASE WHEN s.v > 0 THEN 'pos' ELSE 'neg' END sign, "
                          "cast(integer, CASE WHEN s.v = 1 THEN 'x' ELSE '2' END) q "
                          "FROM S s WHERE s.p * 2.0 > 0.5 OR s.v < 1", [],
                          "SCHEMA (k string, p2 float, n1 long, sign string, q integer)"),
    "select plain columns": ("SELECT s.k k, s.v v, s.n n, s.p p FROM S s WHERE s.v + 1 > 0", []),
}
PORT_OF = {"S": 0}

floats = st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), 0.1, 1e308])
keys = st.sampled_from([None, "a", "a", "b", "B"])
ints = st.sampled_from([None, 0, 1, 2, -3, 2**31 - 1])
ROWS = {
    "S": st.fixed_dictionaries({"k": keys, "p": floats, "v": ints,
                                "n": st.sampled_from([None, 0, 5, 2**40, -2**62])}),
    "W": st.fixed_dictionaries({"k": keys, "name": st.sampled_from([None, "x", "y", "A"]), "f": floats}),
    "X": st.fixed_dictionaries({"id": st.sampled_from([None, 1, 2, 3, 4]), "v": ints,
                                "tag": st.sampled_from([None, "x", "y", "A"])}),
}
SCHEMAS = {
    "S": pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())]),
    "W": pa.struct([("k", pa.string()), ("name", pa.string()), ("f", pa.float64())]),
    "X": pa.struct([("id", pa.int32()), ("v", pa.int32()), ("tag", pa.string())]),
}


def events(windows: list[str]):
    """(instance, port, opcode, why, row, shares the sequence number before it, source)."""
    ports = [st.tuples(st.just(0), ROWS["S"])] * 2 + [st.tuples(st.just(i + 1), ROWS[w])
                                                       for i, w in enumerate(windows)]
    return st.tuples(st.integers(0, 3), st.one_of(*ports),
                     st.sampled_from(["i", "i", "i", "u", "p", "d", "s", "x"]),
                     st.sampled_from([None] * 9 + ["no instance"]),
                     st.sampled_from([False] * 15 + [True]), st.integers(0, 1))


def bucket_run(tmp_path, name: str, first: bool) -> BucketRun:
    query = QUERIES[name]
    path = tmp_path / "p.ccl"
    schema = query[2] if len(query) > 2 else ""
    path.write_text(SOURCES + f"CREATE OUTPUT STREAM J {schema} AS {query[0]};\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    element = next(e for e in plan["elements"] if e["name"] == "J")
    typed = plan_from_json(plan)
    if query[1]:
        assert join_kernel(typed.element("J"), typed) and element["physical"]["kernel"] == "join"
    else:
        assert select_kernel(typed.element("J"), typed) and element["physical"]["kernel"] == "select"
    ports = frozenset(range(1, len(query[1]) + 1)) if first else frozenset()
    run = BucketRun(json.dumps(plan), "J", ports)
    assert isinstance(run.kernel, JoinKernel)
    return run


def table(windows: list[str], data: list, first_seq: int) -> pa.Table:
    return ports_table([SCHEMAS[name] for name in ["S", *windows]], data, first_seq)


def ports_table(schemas: list, data: list, first_seq: int) -> pa.Table:
    """A bucket of ``data`` (events as ``random_events`` makes them), port k's values of type
    ``schemas[k]``, sequence numbers from ``first_seq``."""
    seqs, subs = [], []
    for e in data:  # an event sharing the number before it comes next in its transaction
        shared = e[4] and bool(seqs)
        seqs.append(seqs[-1] if shared else first_seq + len(seqs))
        subs.append(subs[-1] + 1 if shared else 0)
    columns = {
        "__port": pa.array([e[1][0] for e in data], pa.int32()),
        "__seq": pa.array(seqs, pa.int64()),
        "__sub": pa.array(subs, pa.int64()),
        "__src": pa.array([e[5] for e in data], pa.int32()),
        "__op": pa.array([e[2] for e in data], pa.string()),
        "__inst": pa.array([e[0] for e in data], pa.int32()),
        "__why": pa.array([e[3] for e in data], pa.string()),
        "__raw": pa.array([None] * len(data), pa.string())}
    for port, schema in enumerate(schemas):
        columns[f"__p{port}"] = pa.array([e[1][1] if e[1][0] == port else None for e in data],
                                         schema)
    columns["__bucket"] = pa.array([0] * len(data), pa.int32())
    return pa.table(columns)


def same(a, b) -> bool:
    """Equality with NaN equal to NaN and -0.0 told from 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, int) and isinstance(b, int) and bool not in (type(a), type(b)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def outputs(run: BucketRun, got: pa.Table) -> list[tuple]:
    """process_table's output rows as BucketRun.process gives them."""
    return [(r["__kind"], r["__inst"], r["__seq"], r["__sub"], r["__op"], r["__info"],
             {} if r["__kind"] != "row" else {c: r[c] for c in run.columns}) for r in got.to_pylist()]


def in_order(rows: list[tuple]) -> list[tuple]:
    """Output rows by instance, sequence and sub-number (the table's order means nothing)."""
    return sorted(rows, key=lambda o: (o[1], o[0] != "stat", o[2] or 0, o[3] or 0, o[0], o[5] or ""))


@pytest.mark.parametrize("first", [True, False], ids=["windows first", "in sequence order"])
@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_gives_the_engine_outputs_and_states(tmp_path, name, first, data):
    windows = QUERIES[name][1]
    batches = data.draw(st.lists(st.lists(events(windows), max_size=40), min_size=1, max_size=4))
    run = bucket_run(tmp_path, name, first)
    by_rows: dict = {}
    by_kernel: dict = {}
    for b, bucket in enumerate(batches):
        t = table(windows, bucket, 1000 * (b + 1))
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(by_kernel, t, 0))
        assert same(by_kernel, by_rows)
        assert same(in_order(got), in_order(expected))


def random_events(rnd: random.Random, windows: list[str], n: int) -> list:
    """``n`` events as :func:`events` draws them, from ``rnd``."""
    def row(name: str) -> dict:
        return {c: rnd.choice(CHOICES[name][c]) for c in CHOICES[name]}
    out: list = []
    for _ in range(n):
        port = rnd.choice([0, 0] + list(range(1, len(windows) + 1)))
        shares = bool(out) and rnd.random() < 0.1  # an upstream transaction, often one instance's
        inst = out[-1][0] if shares and rnd.random() < 0.7 else rnd.randrange(4)
        if shares and rnd.random() < 0.7:
            port = out[-1][1][0]
        out.append((inst, (port, row((["S"] + windows)[port])),
                    rnd.choice(["i", "i", "i", "u", "p", "d", "s", "x"]), rnd.choice([None] * 19 + ["no instance"]),
                    shares, rnd.randrange(2)))
    return out


CHOICES = {
    "S": {"k": [None, "a", "a", "b", "B"], "p": [None, 0.0, -0.0, 1.5, float("nan"), 0.1, 1e308],
          "v": [None, 0, 1, 2, -3, 2**31 - 1], "n": [None, 0, 5, 2**40, -2**62]},
    "W": {"k": [None, "a", "b", "B"], "name": [None, "x", "y", "A"], "f": [None, 0.0, 2.5, float("nan"), 0.1]},
    "X": {"id": [None, 1, 2, 3, 4], "v": [None, 0, 1, 2, -3], "tag": [None, "x", "y", "A"]},
}


@pytest.mark.parametrize("first", [True, False], ids=["windows first", "in sequence order"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_larger_random_buckets(tmp_path, name, first):
    """Buckets of a few hundred rows (Hypothesis keeps its examples small): stream rows find
    window rows, and the kernel itself runs nearly every instance."""
    windows = QUERIES[name][1]
    run = bucket_run(tmp_path, name, first)
    rnd = random.Random(f"{name}{first}")
    by_rows: dict = {}
    by_kernel: dict = {}
    joined = ran = handed = 0
    for b in range(4):
        t = table(windows, random_events(rnd, windows, 300), 1000 * (b + 1))
        expected = run.process(by_rows, received_rows(t), 0)
        trial = pickle.loads(pickle.dumps(by_kernel))
        runs, left, _ = run.kernel.run(trial, bucket_rows(t), [t.column(f"__p{p}").combine_chunks()
                                                               for p in range(len(windows) + 1)], 0)
        ran, handed = ran + len(runs), handed + len(left)
        got = outputs(run, run.process_table(by_kernel, t, 0))
        assert same(by_kernel, by_rows)
        assert same(in_order(got), in_order(expected))
        joined += sum(1 for o in got if o[0] == "row")
    assert joined > 50 and ran > handed


def test_the_kernel_merges_a_transaction_and_hands_back_a_state_it_cannot_read(tmp_path):
    """Window rows first, then trades: instance 0's rows are the kernel's (a match, a LEFT join's
    missing side, a WHERE that fails the row); instance 1's two trades share a sequence number
    (one upstream transaction) and join the same window row: one output, the second's values, as
    the engine merges them; instance 2's state is none the kernel reads: handed back, untouched."""
    run = bucket_run(tmp_path, "left join with where", True)
    w = [(0, (1, {"k": "a", "name": "x", "f": 2.0}), "i", None, False, 0),
         (1, (1, {"k": "a", "name": "y", "f": 1.0}), "i", None, False, 0)]
    s = [(0, (0, {"k": "a", "p": 1.0, "v": 1, "n": 7}), "i", None, False, 0),
         (0, (0, {"k": "b", "p": 1.0, "v": 2, "n": 8}), "i", None, False, 0),
         (0, (0, {"k": "a", "p": 1.0, "v": -5, "n": 9}), "i", None, False, 0),
         (1, (0, {"k": "a", "p": 1.0, "v": 1, "n": 10}), "i", None, False, 0),
         (1, (0, {"k": "a", "p": 1.0, "v": 1, "n": 11}), "i", None, True, 0)]
    t = table(["W"], w + s, 10)
    ports = [t.column(f"__p{p}").combine_chunks() for p in range(2)]
    states: dict = {}
    runs, left, changes = run.kernel.run(states, bucket_rows(t), ports, 0)
    assert [r.inst for r in runs] == [0, 1] and left == []
    assert list(zip(changes.inst, changes.seq, changes.sub)) == [(0, 12, 0), (0, 13, 1), (0, 14, 2),
                                                                (1, 15, 0)]
    assert changes.values == [["a", "b", "a", "a"], [7, 8, 9, 11], ["x", None, "x", "y"],
                              [2.0, None, 2.0, 1.0]]
    expected = run.process({}, received_rows(t), 0)
    got = outputs(run, run.process_table({}, t, 0))
    assert same(in_order(got), in_order(expected))
    odd = {2: {"seq": 3, "selects": []}}
    t2 = table(["W"], [(2, (0, {"k": "a", "p": 1.0, "v": 1, "n": 1}), "i", None, False, 0)], 20)
    runs, left, changes = run.kernel.run(odd, bucket_rows(t2), [t2.column(f"__p{p}").combine_chunks()
                                                                 for p in range(2)], 0)
    assert runs == [] and left == [2] and odd == {2: {"seq": 3, "selects": []}}


def test_a_failing_row_is_the_engines_bad_record(tmp_path):
    """A cast that fails for one trade: its bad record (the engine's reason and row) in the kernel's
    changes, numbered among the other rows' changes."""
    run = bucket_run(tmp_path, "expressions", True)
    w = [(0, (1, {"k": "a", "name": "x", "f": 2.0}), "i", None, False, 0)]
    s = [(0, (0, {"k": "a", "p": 1.0, "v": v, "n": 1}), "i", None, False, 0) for v in (2, 1, 3)]
    t = table(["W"], w + s, 10)
    ports = [t.column(f"__p{p}").combine_chunks() for p in range(2)]
    runs, left, changes = run.kernel.run({}, bucket_rows(t), ports, 0)
    assert left == [] and changes.sub == [0, 2] and changes.seq == [11, 13]
    [(inst, seq, sub, reason, row)] = changes.bad
    assert (inst, seq, sub, row["v"]) == (0, 12, 1, 1) and "x" in reason


def test_the_runtime_runs_the_kernel_the_plan_names_and_chooses_none_itself(tmp_path, caplog):
    """The kernel is the compiler's decision, read from the plan: a join plan whose ``kernel`` is
    taken away runs row by row; a plan naming the join kernel for an element it cannot run (here
    an aggregation) leaves it to the engine with a warning naming the element; and a
    kernel this runtime does not have is refused where the plan is read (one line, no traceback
    for the user: runtime.submit.decode_plan)."""
    from ccl.plan.codec import PlanFormatError, plan_from_json
    from runtime.submit import SubmitError, decode_plan

    (tmp_path / "j").mkdir()
    join = bucket_run(tmp_path / "j", "expressions", True)
    plan, _ = plan_json(str(tmp_path / "j" / "p.ccl"))
    next(e for e in plan["elements"] if e["name"] == "J")["physical"]["kernel"] = None
    run = BucketRun(json.dumps(plan), "J", frozenset([1]))
    assert run.kernel is None and run.columnar is None
    w = [(0, (1, {"k": "a", "name": "x", "f": 2.0}), "i", None, False, 0)]
    t = table(["W"], w + [(0, (0, {"k": "a", "p": 1.0, "v": 2, "n": 1}), "i", None, False, 0)], 10)
    assert same(in_order(outputs(run, run.process_table({}, t, 0))),
                in_order(outputs(join, join.process_table({}, t, 0))))

    path = tmp_path / "p.ccl"
    path.write_text(SOURCES + "CREATE OUTPUT WINDOW A PRIMARY KEY DEDUCED AS "
                    "SELECT s.k k, count(*) c FROM S s LEFT JOIN W w ON s.k = w.k GROUP BY s.k;\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    element = next(e for e in plan["elements"] if e["name"] == "A")
    assert element["physical"]["kernel"] is None
    assert BucketRun(json.dumps(plan), "A").kernel is None
    element["physical"]["kernel"] = "join"
    with caplog.at_level(logging.WARNING, logger="runtime.engine.kernels"):
        assert BucketRun(json.dumps(plan), "A").kernel is None
    assert "the plan's join kernel cannot run A" in caplog.text
    # a typed plan made in code that names a kernel this runtime does not have
    a, built = typed_parts(element, plan)
    unknown = replace(a, physical=replace(a.physical, kernel="no such kernel"))
    with pytest.raises(ValueError, match="A: the plan names the kernel 'no such kernel'"):
        make_kernel(unknown, make_engine(unknown, built), built)
    # ... and one the engine is shipped: its text is refused as it is decoded
    element["physical"]["kernel"] = "no such kernel"
    with pytest.raises(PlanFormatError, match="unknown kernel 'no such kernel'"):
        BucketRun(json.dumps(plan), "A")
    with pytest.raises(PlanFormatError, match="^not a valid plan: unknown kernel 'no such kernel'$"):
        plan_from_json(plan)
    with pytest.raises(SubmitError, match="unknown kernel"):
        decode_plan(plan)
