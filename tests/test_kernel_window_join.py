"""The window_join kernel (runtime/engine/kernels/window_join.py) against the engine, on generated
buckets: both sides interleaved, every opcode (inserts, updates, upserts, deletes, safedeletes,
unknown ones), rows that came bad, nulls, NaN and -0.0 in the join keys, several rows per key on
the many side, INNER, LEFT, RIGHT and FULL OUTER joins, two equated columns, a residual ON, three
sources, WHERE, a failing item (bad records), a row-count KEEP and a delta stream as the output,
shared sequence numbers, three instances, several batches and the last one run again from the
state before it (a crash). Outputs (changes and bad records, in order) and states (dicts in
order) must be equal."""
from __future__ import annotations

import copy
import json
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planned import plan_json, typed, typed_element
from test_kernel_join import ports_table
from test_kernel_keep import engine_outputs, outputs, same
from ccl.plan.physical import columnar_kernel, window_join_kernel
from runtime.arrow_state import bucket_runner, load_states, uses_window_store
from runtime.engine.kernels.window_join import WindowJoinKernel
from runtime.processor import BucketRun

SOURCES = """CREATE INPUT WINDOW A SCHEMA (k string, s string, x float) PRIMARY KEY (k);
CREATE INPUT WINDOW B SCHEMA (k string, y integer, s string, p float) PRIMARY KEY (k, y);
CREATE INPUT WINDOW C SCHEMA (k string, z integer) PRIMARY KEY (k);
"""
ITEMS = "a.k ak, b.k bk, b.y y, a.x x, b.p p, 10 / b.y r"
OUT = "CREATE OUTPUT WINDOW J PRIMARY KEY DEDUCED AS"
QUERIES = {
    "inner": f"{OUT} SELECT {ITEMS} FROM A a INNER JOIN B b ON a.s = b.s",
    "left": f"{OUT} SELECT {ITEMS} FROM A a LEFT OUTER JOIN B b ON a.s = b.s",
    "right": f"{OUT} SELECT {ITEMS} FROM A a RIGHT OUTER JOIN B b ON a.s = b.s",
    "full": f"{OUT} SELECT {ITEMS} FROM A a FULL OUTER JOIN B b ON a.s = b.s",
    # a float equated column: NaN and -0.0 in the index
    "two columns": f"{OUT} SELECT {ITEMS} FROM A a INNER JOIN B b ON a.s = b.s AND a.x = b.p",
    "residual": f"{OUT} SELECT {ITEMS} FROM A a LEFT OUTER JOIN B b ON a.s = b.s AND a.x < b.p",
    "three": (f"{OUT} SELECT {ITEMS}, c.z z FROM A a INNER JOIN B b ON b.s = a.s "
              "LEFT OUTER JOIN C c ON c.k = b.k"),
    "where": f"{OUT} SELECT {ITEMS} FROM A a INNER JOIN B b ON a.s = b.s WHERE b.y > 0 OR a.x > 0.0",
    # the copartitioned shape (bench/shapes.py copart_join): joined on both sides' keys, so every
    # update keeps its equated values
    "keys": "CREATE OUTPUT WINDOW J PRIMARY KEY (k) AS SELECT a.k k, a.x x, c.z z, a.s s "
            "FROM A a INNER JOIN C c ON a.k = c.k",
    "keys full": "CREATE OUTPUT WINDOW J PRIMARY KEY DEDUCED AS SELECT a.k ak, c.k ck, a.x x, "
                 "c.z * 2 z FROM A a FULL OUTER JOIN C c ON c.k = a.k",
    "keep rows": (f"CREATE OUTPUT WINDOW J PRIMARY KEY DEDUCED KEEP 2 ROWS AS SELECT {ITEMS} "
                  "FROM A a LEFT OUTER JOIN B b ON a.s = b.s"),
    "delta": (f"CREATE OUTPUT DELTA STREAM J PRIMARY KEY DEDUCED AS SELECT {ITEMS} "
              "FROM A a RIGHT OUTER JOIN B b ON a.s = b.s"),
}
SCHEMAS = [pa.struct([("k", pa.string()), ("s", pa.string()), ("x", pa.float64())]),
           pa.struct([("k", pa.string()), ("y", pa.int32()), ("s", pa.string()), ("p", pa.float64())]),
           pa.struct([("k", pa.string()), ("z", pa.int32())])]

# few values, zeros of both signs often: updates that keep a row's equated values, and rows
# that change only a zero's sign, come often
floats = st.sampled_from([None, 0.0, -0.0, 0.0, -0.0, 1.5, float("nan")])
strings = st.sampled_from([None, "a", "a", "a", "b", "c"])
keys = st.sampled_from(["k1", "k2", "k3"])
values = [st.fixed_dictionaries({"k": keys, "s": strings, "x": floats}),
          st.fixed_dictionaries({"k": st.sampled_from(["k1", "k2", "k3"]),
                                 "y": st.sampled_from([0, 1, 2, -3]), "s": strings, "p": floats}),
          st.fixed_dictionaries({"k": keys, "z": st.sampled_from([None, 0, 7, 2**30])})]
# (instance, (port, values), opcode, why it came bad, shares its sequence number, source)
event = st.integers(0, 2).flatmap(lambda port: st.tuples(
    st.integers(0, 2), st.tuples(st.just(port), values[port]),
    st.sampled_from(["i", "i", "u", "u", "u", "p", "d", "s", "x"]),
    st.sampled_from([None] * 12 + ["does not parse"]),
    st.sampled_from([False, False, False, True]), st.just(0)))
batches = st.lists(st.lists(event, max_size=40), min_size=1, max_size=3)

_RUNS: dict[str, BucketRun] = {}


def plan_of(tmp_path, name: str) -> dict:
    path = tmp_path / "p.ccl"
    path.write_text(SOURCES + QUERIES[name] + ";\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return plan


def bucket_run(tmp_path, name: str) -> BucketRun:
    """The element J's BucketRun, on the window_join kernel (made once per query)."""
    if name not in _RUNS:
        plan = plan_of(tmp_path, name)
        assert window_join_kernel(*typed_element(plan, 3))
        assert columnar_kernel(*typed_element(plan, 3)) == "window_join"
        run = BucketRun(json.dumps(plan), "J")
        assert isinstance(run.kernel, WindowJoinKernel)
        _RUNS[name] = run
    return _RUNS[name]


def table(run: BucketRun, data: list, first_seq: int) -> pa.Table:
    """The generated events of the element's sources (A, B and C are ports 0, 1 and 2 of the
    generator), each on its source's port of the element."""
    names = [src.element for src in run.engine.element.query.selects[0].sources]
    port_of = {"ABC".index(name): k for k, name in enumerate(names)}
    data = [(e[0], (port_of[e[1][0]], e[1][1]), *e[2:]) for e in data if e[1][0] in port_of]
    return ports_table([SCHEMAS["ABC".index(name)] for name in names], data, first_seq)


@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_kernel_gives_the_engine_outputs_and_state(tmp_path, name, data):
    run = bucket_run(tmp_path, name)
    by_rows: dict = {}
    kernel: dict = {}
    for b, events in enumerate(data):
        t = table(run, events, 1000 * (b + 1))
        before = copy.deepcopy((by_rows, kernel))
        expected = engine_outputs(run, by_rows, t)
        got = outputs(run, run.process_table(kernel, t, 0))
        assert same(got, expected), (name, b)
        assert same(kernel, by_rows), (name, b)
    # the last batch again from the states before it (a crash after it ran): the same again
    by_rows, kernel = before
    assert same(outputs(run, run.process_table(kernel, t, 0)), expected)
    assert same(engine_outputs(run, by_rows, t), expected)
    assert same(kernel, by_rows)


@pytest.mark.parametrize("name", ["keys", "full"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_engine_and_kernel_take_turns_on_one_state(tmp_path, name, data):
    """Either runs an instance's next batch on the state the other left."""
    run = bucket_run(tmp_path, name)
    by_rows: dict = {}
    mixed: dict = {}
    for b, events in enumerate(data * 2):
        t = table(run, events, 1000 * (b + 1))
        expected = engine_outputs(run, by_rows, t)
        got = (outputs(run, run.process_table(mixed, t, 0)) if b % 2
               else engine_outputs(run, mixed, t))
        assert same(got, expected)
        assert same(mixed, by_rows)


@pytest.mark.parametrize("name", ["keys", "left"])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.lists(event, min_size=1, max_size=30), min_size=1, max_size=3))
def test_kernel_over_the_state_store(tmp_path, name, data):
    """Batch after batch through runtime/arrow_state.py (the windows' rows and the join's state
    in the bucket's state store, written back, committed, the last batch run again as after a
    crash): the kernel gives the engine's outputs and leaves the same state file."""
    plan = plan_of(tmp_path, name)
    assert plan["elements"][3]["physical"]["kernel"] == "window_join"
    assert uses_window_store(typed(plan).element("J"))
    plans = {"kernel": json.dumps(plan)}
    plan["elements"][3]["physical"]["kernel"] = None
    plans["engine"] = json.dumps(plan)
    example = uuid.uuid4().hex
    dirs = {which: tmp_path / f"{which}{example}" for which in plans}
    run = bucket_run(tmp_path, name)
    for b, events in enumerate(data + data[-1:]):
        batch_id = min(b, len(data) - 1)
        t = table(run, events, 1000 * (batch_id + 1))
        if not t.num_rows:
            continue
        got = {}
        for which, plan_text in plans.items():
            runner = bucket_runner(plan_text, "J", frozenset(), str(dirs[which]), batch_id, 0)
            got[which] = sorted(runner((None,), t).to_pylist(), key=lambda r: (
                r["__inst"], r["__kind"] == "stat", r["__seq"] or 0, r["__sub"] or 0))
        assert same(got["kernel"], got["engine"])
        assert same(load_states(str(dirs["kernel"]), 0, batch_id + 1),
                    load_states(str(dirs["engine"]), 0, batch_id + 1))


def test_rule_leaves_aggregates_streams_and_from_keeps_to_others(tmp_path):
    """A join of windows that aggregates, outputs a stream, or has a FROM KEEP is not the
    kernel's."""
    for query in [
            "CREATE OUTPUT WINDOW J PRIMARY KEY DEDUCED AS SELECT a.s s, count(*) n "
            "FROM A a INNER JOIN B b ON a.s = b.s GROUP BY a.s",
            "CREATE OUTPUT STREAM J AS SELECT a.k ak, b.y y FROM A a INNER JOIN B b ON a.s = b.s",
            "CREATE OUTPUT WINDOW J PRIMARY KEY DEDUCED AS SELECT a.k ak, b.k bk, b.y y "
            "FROM A a KEEP 2 ROWS INNER JOIN B b ON a.s = b.s"]:
        path = tmp_path / "q.ccl"
        path.write_text(SOURCES + query + ";\n")
        plan, diags = plan_json(str(path))
        assert plan is not None, [str(d) for d in diags]
        assert not window_join_kernel(*typed_element(plan, 3)), query
