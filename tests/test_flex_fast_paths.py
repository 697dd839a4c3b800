"""The Flex engine's own fast paths (runtime/engine/flex.py): rows cast with the same-kind test
inline (against runtime.engine.expr.coerce_row, value by value), input records taken as they are,
``<input>_old`` made only when the code names it, one SPLASH session per batch (variables changed
by a failing handler stay, outputs are snapshots)."""
import datetime as dt
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccl.splash import Long, SplashError
from runtime.engine.changes import Bad, Emit, Event
from runtime.engine.expr import coerce_row
from runtime.engine.flex import _cast_row, cast_steps
from test_engine_flex import build

COLUMNS = [["i", "integer"], ["l", "long"], ["f", "float"], ["s", "string"], ["b", "boolean"],
           ["m", "money(2)"], ["t", "msdate"], ["v", "interval"]]
VALUES = [None, 0, 1, -2**31, 2**31 - 1, 2**31, -2**31 - 1, 2**40, 2**63 - 1, 2**63, -2**63, -2**63 - 1,
          2**70, Long(5), Long(2**40), 1.5, -0.0,
          float("nan"), float("inf"), "7", "2.5", "x", "", True, False, Decimal("1.005"),
          dt.datetime(2024, 1, 2, 3, 4, 5, 6000)]


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


def outcome(f, *args):  # type: ignore[no-untyped-def]
    try:
        return ("ok", f(*args))
    except SplashError as e:
        return ("error", e.reason)


@pytest.mark.parametrize("column", COLUMNS, ids=[c for c, _ in COLUMNS])
def test_cast_row_is_coerce_row(column):
    columns = [column]
    for v in VALUES:
        expected = outcome(coerce_row, {column[0]: v}, columns)
        got = outcome(_cast_row, {column[0]: v}, cast_steps(columns))
        assert got[0] == expected[0], (column, v, got, expected)
        if got[0] == "ok":
            assert list(got[1]) == [column[0]] and same(got[1][column[0]], expected[1][column[0]]), (column, v)
        else:
            assert got == expected
    missing = _cast_row({}, cast_steps(COLUMNS))  # missing columns are null, in column order
    assert list(missing) == [c for c, _ in COLUMNS] and set(missing.values()) == {None}


# per column type, values of its own Python type (its same-kind and int-range cases), in and out of range
_FITTING = {"integer": st.integers(-2**31 - 2, 2**31 + 1), "long": st.integers(-2**63 - 1, 2**63)
            | st.builds(Long, st.integers(-2**63, 2**63 - 1)),
            "float": st.floats(), "string": st.text(max_size=3), "boolean": st.booleans()}


@settings(max_examples=500, deadline=None)
@given(st.data(), st.lists(st.sampled_from(COLUMNS[:5]) | st.sampled_from(COLUMNS), min_size=1, max_size=6))
def test_cast_row_of_generated_rows_is_coerce_row(data, chosen):
    """_cast_row gives what coerce_row gives for rows of several columns, most values of their
    column's Python type (its fast path), some not, some missing: the same values of the same
    types in the same column order, or the same error."""
    columns, values = [], {}
    for k, (_, ctype) in enumerate(chosen):
        columns.append([f"c{k}", ctype])
        fitting = _FITTING.get(ctype)
        how = data.draw(st.sampled_from(["fitting"] * 6 + ["any", "missing"]))
        if how == "fitting" and fitting is not None:
            values[f"c{k}"] = data.draw(fitting)
        elif how != "missing":  # a missing column is null
            values[f"c{k}"] = data.draw(st.sampled_from(VALUES))
    got = outcome(_cast_row, values, cast_steps(columns))
    expected = outcome(coerce_row, values, columns)
    assert got[0] == expected[0], (columns, values, got, expected)
    if got[0] == "ok":
        assert list(got[1]) == list(expected[1]), (columns, values)
        assert all(same(got[1][c], expected[1][c]) for c in got[1]), (columns, values, got, expected)
    else:
        assert got == expected


FLEX = """
CREATE INPUT WINDOW W SCHEMA (k string, n long, x float) PRIMARY KEY (k);
CREATE FLEX F IN W
OUT OUTPUT STREAM O SCHEMA (k string, n long, x float, seen integer, old long)
BEGIN
    DECLARE
        typeof(O) rec;
        integer seen := 0;
    END;
    ON W {
        seen := seen + 1;
        rec.k := W.k; rec.n := W.n; rec.x := W.x; rec.seen := seen; rec.old := OLD;
        output rec;
        rec.k := 'changed';
        if (W.x > 100.0) { rec.n := cast(long, 'not a number'); }
        output setOpcode(rec, insert);
    };
END;
"""


@pytest.mark.parametrize("old", ["W_old.n", "null"])
def test_batch_run_of_a_window_input(tmp_path, old):
    engine, _ = build(tmp_path, FLEX.replace("OLD", old), "O")
    state = engine.initial_state()
    events = [Event(0, "i", 1, {"k": "a", "n": 1, "x": 1.0}),
              Event(0, "u", 2, {"k": "a", "n": 2**40, "x": None}),
              Event(0, "i", 3, {"k": "b", "n": None, "x": 500.0}),    # fails after its first output
              Event(0, "i", 4, {"k": "c", "n": "12", "x": 2}),        # cast to the input's types
              Event(0, "i", 5, {"k": "d", "n": "x", "x": 1.0})]       # does not cast: bad
    out = engine.process(state, events, 0)
    rows = [(o.seq, dict(o.values)) for o in out if isinstance(o, Emit)]
    bad = [(o.seq, o.reason) for o in out if isinstance(o, Bad)]
    named = old != "null"
    assert rows == [
        (1, {"k": "a", "n": 1, "x": 1.0, "seen": 1, "old": None}),
        (1, {"k": "changed", "n": 1, "x": 1.0, "seen": 1, "old": None}),
        (2, {"k": "a", "n": 2**40, "x": None, "seen": 2, "old": 1 if named else None}),
        (2, {"k": "changed", "n": 2**40, "x": None, "seen": 2, "old": 1 if named else None}),
        (4, {"k": "c", "n": 12, "x": 2.0, "seen": 4, "old": None}),
        (4, {"k": "changed", "n": 12, "x": 2.0, "seen": 4, "old": None})]
    assert all(type(r["n"]) is Long for _, r in rows if r["n"] is not None)
    assert [s for s, _ in bad] == [3, 5] and "not a number" in bad[0][1]
    assert state["vars"]["seen"] == 4         # the failing run's change stays
    assert state["vars"]["rec"]["k"] == "changed" and state["vars"]["rec"]["seen"] == 4
    assert engine.uses_old == [named]


def test_window_rows_fast_paths_match_the_general_test():
    """window_rows with one where column (its test inline) and views over rows already in SPLASH
    form (copied as they are) give what the general test and conversion give."""
    from ccl.splash import as_type
    from ccl.splash.windows import WindowView, window_rows

    types = {"k": as_type("string"), "n": as_type("long"), "b": as_type("boolean"), "x": as_type("float")}
    rows = {("a",): {"k": "a", "n": Long(1), "b": True, "x": 1.0},
            ("b",): {"k": "b", "n": Long(1), "b": False, "x": float("nan")},
            ("c",): {"k": "c", "n": None, "b": None, "x": -0.0},
            ("d",): {"k": "d", "n": Long(0), "b": True, "x": 0.0}}
    fast, slow = WindowView("W", rows, ["k"], types, True), WindowView("W", rows, ["k"], types)
    probes = [{"n": 1}, {"n": True}, {"b": True}, {"b": 1}, {"x": 0.0}, {"x": float("nan")},
              {"n": None}, {"k": "c"}, {"k": "zz"}, {"n": 1, "b": True}, {"n": 1, "b": 1}, {}]
    for probe in probes:
        got = [(dict(r), r.readonly, r.source, r.key_fields) for r in window_rows(fast, probe)]
        general = [dict(r) for r in slow.rows.values()
                   if all(r.get(c) is not None and r.get(c) == v and (type(r.get(c)) is bool) == (type(v) is bool)
                          for c, v in probe.items())] if None not in probe.values() else []
        assert [g[0] for g in got] == general, probe
        assert [dict(r) for r in window_rows(slow, probe)] == general, probe
        assert all(g[1:] == (True, "W", ("k",)) for g in got)
    rec = fast.by_key({"k": "a"})
    assert rec == {"k": "a", "n": 1, "b": True, "x": 1.0} and type(rec["n"]) is Long
    plain = WindowView("W", {("a",): {"k": "a", "n": 5}}, ["k"], types)  # not in SPLASH form
    assert type(plain.by_key({"k": "a"})["n"]) is Long and plain.by_key({"k": "a"})["b"] is None
