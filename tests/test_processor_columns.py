"""BucketRun.process_columns (an engine's bucket read from its Arrow columns once, the output's
columns made directly) against what it replaces, ``table(process(received_rows(...)))``, on
generated buckets of a two-input Flex: rows of both ports in any order, shared sequence numbers,
unknown opcodes, rows that came bad (with and without their line), null values, failing handlers
and refused outputs, with and without a port read first. Both give the same table and leave the
same states."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planned import plan_text_of
from runtime.processor import BucketRun, received_rows

PROJECT = """
CREATE INPUT STREAM S SCHEMA (k string, v integer);
CREATE INPUT WINDOW R SCHEMA (k string, w integer) PRIMARY KEY (k);
CREATE FLEX F IN S, R
OUT OUTPUT WINDOW O SCHEMA (k string, t integer) PRIMARY KEY (k)
BEGIN
    DECLARE
        dictionary(string, integer) seen;
    END;
    ON S {
        if (S.v = 13) { output 5; }
        seen[S.k] := S.v;
        if (S.v > 5) {
            output setOpcode([k = S.k; | t = S.v;], upsert);
        } else {
            output setOpcode([k = S.k; | t = S.v;], insert);
        }
    };
    ON R {
        output setOpcode([k = R.k; | t = R.w + seen[R.k];], update);
    };
END;
"""
S_TYPE = pa.struct([("k", pa.string()), ("v", pa.int32())])
R_TYPE = pa.struct([("k", pa.string()), ("w", pa.int32())])


@pytest.fixture(scope="module")
def plan_text(tmp_path_factory) -> str:
    return plan_text_of(tmp_path_factory.mktemp("p"), PROJECT)


keys = st.sampled_from([None, "a", "b", "c"])
ints = st.sampled_from([None, 0, 1, 6, 13, -2**31])
rows = st.lists(st.tuples(
    st.integers(0, 3),                                  # instance
    st.integers(0, 1),                                  # port
    st.sampled_from(["i", "u", "d", "p", "s", "x"]),    # opcode
    st.integers(1, 6), st.integers(0, 1), st.integers(0, 2),  # seq, src, sub: ties happen
    st.sampled_from([None, None, None, "no instance"]),  # why it came bad
    st.booleans(),                                      # a bad row carries its line
    st.one_of(st.none(), st.tuples(keys, ints))),       # the port's values (None: a null struct)
    min_size=1, max_size=30)


def _table(events: list) -> pa.Table:
    n = len(events)
    ports = [[(e[8] and {"k": e[8][0], ("v" if p == 0 else "w"): e[8][1]}) if e[1] == p else None
              for e in events] for p in (0, 1)]
    return pa.table({
        "__port": pa.array([e[1] for e in events], pa.int32()),
        "__seq": pa.array([e[3] for e in events], pa.int64()),
        "__sub": pa.array([e[5] for e in events], pa.int64()),
        "__src": pa.array([e[4] for e in events], pa.int32()),
        "__op": pa.array([e[2] for e in events], pa.string()),
        "__inst": pa.array([e[0] for e in events], pa.int32()),
        "__why": pa.array([e[6] for e in events], pa.string()),
        "__raw": pa.array(["x,y" if e[6] and e[7] else None for e in events], pa.string()),
        "__p0": pa.array(ports[0], S_TYPE),
        "__p1": pa.array(ports[1], R_TYPE)}).slice(0, n)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(batches=st.lists(rows, min_size=1, max_size=3), first=st.booleans())
def test_process_columns_gives_what_process_and_table_give(plan_text, batches, first):
    run = BucketRun(plan_text, "O", frozenset({1}) if first else frozenset())
    fast: dict = {}
    slow: dict = {}
    for now, events in enumerate(batches):
        table = _table(events)
        got = run.process_columns(fast, table, now)
        expected = run.table(run.process(slow, received_rows(table), now))
        assert got.schema == expected.schema
        assert got.to_pylist() == expected.to_pylist()
        assert fast == slow


def test_process_table_of_an_engine_takes_the_columns(plan_text):
    run = BucketRun(plan_text, "O")
    events = [(1, 0, "i", 2, 0, 0, None, False, ("a", 6)), (0, 1, "i", 1, 0, 0, None, False, ("a", 1)),
              (1, 0, "i", 1, 0, 0, "no instance", True, None), (0, 0, "i", 3, 0, 0, None, False, ("a", 13))]
    out = run.process_table({}, _table(events), 0).to_pylist()
    assert [(r["__kind"], r["__inst"], r["__seq"], r["__sub"], r["__op"], r["k"], r["t"]) for r in out] == [
        ("stat", 0, 2, 0, None, None, None),
        ("bad", 0, 1, 0, None, None, None),      # update of a key the output does not hold
        ("bad", 0, 3, 1, None, None, None),      # output of a number (the batch's second output)
        ("stat", 1, 1, 1, None, None, None),
        ("bad", 1, 1, 0, None, None, None),      # came bad, with its line
        ("row", 1, 2, 0, "i", "a", 6)]
    assert json.loads(out[4]["__info"]) == {"reason": "no instance", "row": {"line": "x,y"}}


# --- a Flex input whose Arrow columns have its columns' kinds: rows taken without the row cast ---

TYPED_PROJECT = """
CREATE INPUT WINDOW W SCHEMA (k string, i integer, l long, f float, b boolean) PRIMARY KEY (k);
CREATE INPUT STREAM S SCHEMA (k string, l long);
CREATE FLEX F IN W, S
OUT OUTPUT STREAM O SCHEMA (k string, t long, f float, b boolean)
BEGIN
    DECLARE
        dictionary(string, long) last;
    END;
    ON W {
        long t := W.l * 1000000;
        if (W.i = 13) { t := W.i * 1000000000; }
        last[W.k] := W.l;
        output setOpcode([k = W.k; t = t; f = W.f; b = W.b;], getOpcode(W));
    };
    ON S {
        output [k = S.k; t = S.l + last[S.k]; f = 1.5;];
    };
END;
"""
W_TYPE = pa.struct([("k", pa.string()), ("i", pa.int32()), ("l", pa.int64()), ("f", pa.float64()),
                    ("b", pa.bool_())])
S_TYPES = [pa.struct([("k", pa.string()), ("l", pa.int64())]),   # typed
           pa.struct([("k", pa.string()), ("l", pa.int32())]),   # an int32 in a long column: cast
           pa.struct([("l", pa.int64()), ("k", pa.string())])]   # another order: cast

typed_rows = st.lists(st.tuples(
    st.integers(0, 2),                                   # instance
    st.integers(0, 1),                                   # port
    st.sampled_from(["i", "u", "d", "p", "x"]),          # opcode
    st.integers(1, 5),                                   # seq
    st.one_of(st.none(), st.tuples(keys, st.sampled_from([None, 0, 13, -2**31, 2**31 - 1]),
                                   st.sampled_from([None, 0, 5, 2**40, -2**63, 2**63 - 1]),
                                   st.sampled_from([None, 0.5, -0.0, float("nan")]),
                                   st.sampled_from([None, True, False])))),
    min_size=1, max_size=25)


def _typed_table(events: list, s_type: pa.DataType) -> pa.Table:
    n = len(events)
    w = [dict(zip(["k", "i", "l", "f", "b"], e[4])) if e[1] == 0 and e[4] else None for e in events]
    s = [{"k": e[4][0], "l": e[4][2] if s_type.field("l").type == pa.int64() else e[4][1]}
         if e[1] == 1 and e[4] else None for e in events]
    return pa.table({
        "__port": pa.array([e[1] for e in events], pa.int32()),
        "__seq": pa.array([e[3] for e in events], pa.int64()),
        "__sub": pa.array([0] * n, pa.int64()),
        "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array([e[2] for e in events], pa.string()),
        "__inst": pa.array([e[0] for e in events], pa.int32()),
        "__p0": pa.array(w, W_TYPE),
        "__p1": pa.array(s, s_type)})


@pytest.fixture(scope="module")
def typed_plan_text(tmp_path_factory) -> str:
    return plan_text_of(tmp_path_factory.mktemp("t"), TYPED_PROJECT)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(batches=st.lists(typed_rows, min_size=1, max_size=3), s_type=st.sampled_from(S_TYPES))
def test_typed_ports_skip_the_cast_with_the_same_outputs_and_states(typed_plan_text, batches, s_type):
    run = BucketRun(typed_plan_text, "O")
    fast: dict = {}
    slow: dict = {}
    for now, events in enumerate(batches):
        table = _typed_table(events, s_type)
        assert run.typed_ports(table, {0, 1}) == [True, s_type == S_TYPES[0]]
        got = run.process_columns(fast, table, now)
        expected = run.table(run.process(slow, received_rows(table), now))
        assert got.schema == expected.schema
        assert repr(got.to_pylist()) == repr(expected.to_pylist())
        assert repr(fast) == repr(slow)  # (a Long's repr is not an int's)
