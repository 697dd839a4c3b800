"""Interpreter.session (ccl/splash/interpreter.py): blocks run one after another against one bound
store with one machine must leave exactly what Interpreter.run_block after bind leaves, run by run:
the store, the outcome, the records output and the errors. Also the compiled fast paths of field,
index and arithmetic access (expressions.py, compiler.py, machine.py) against their slow forms."""
from __future__ import annotations

import copy
import math

import pytest

from ccl.splash import Dictionary, Interpreter, Long, Record, SplashError, as_type
from ccl.splash.machine import Cell
from test_splash_interpreter import block, declare
from ccl.splash.interpreter import declare_state

DECLARE = """
    integer n := 0;
    float total := 0.0;
    dictionary(string, float) d;
    typeof(priceW) last;
    typeof(priceW) out;
    dictionary(string, integer) pd;
    integer shadow := 100;
"""
# each a handler body; several fail at run time after changing variables
BODIES = [
    "n := n + 1; total := total + priceW.price; d[priceW.isin] := priceW.price; return n;",
    "out.isin := priceW.isin; out.price := nextval(); output setOpcode(out, upsert); out.price := 0;",
    "n := n * 2; if (priceW.price > 2.0) { n := cast(integer, 'x'); } d['after'] := 1.0;",
    "last := priceW; output [k = priceW.isin; | v = n;]; exit;",
    "float x := d[priceW.isin]; if (isnull(x)) { x := -1.0; } total := total - x; output out;",
    "integer was := pd['p']; pd['p'] := n; return was;",  # a read-only container: fresh per run
    "shadow := shadow + 1; return shadow;",     # a global an extra cell stands for
    "for (k in d) { n := n + 1; if (n > 6) break; } while (n < 10) n := n + 1; return n;",
    "return d[priceW.isin] * priceW.price + priceW.price - 0.5;",
    "return priceW.nosuch;",
    "n := uniqueval(); return priceW.isin + 'x';",
]
ROWS = [{"isin": "A", "price": 1.5}, {"isin": "B", "price": 2.5}, {"isin": None, "price": None},
        {"isin": "A", "price": -0.0}]
TYPES = {"isin": "string", "price": "float"}


def interpreter() -> Interpreter:
    decl, _ = declare_state(declare(DECLARE), source_types={"priceW": TYPES})
    decl.constants.add("pd")  # read-only, as a parameter is
    return Interpreter(decl, source_types={"priceW": TYPES})


def outcome(go):  # type: ignore[no-untyped-def]
    try:
        got = go()
        return ("ok", got.returned, got.value)
    except SplashError as e:
        return ("error", e.reason)


def extra_for(i: int) -> dict:
    """Every third run an extra cell stands for the global ``shadow``, as a Flex's window cells do."""
    return {"shadow": Cell(7, as_type("integer"))} if i % 3 == 0 else {}


@pytest.mark.parametrize("order", [list(range(len(BODIES))), list(range(len(BODIES)))[::-1],
                                   [0, 1, 2, 0, 4, 6, 6, 1, 3, 8, 5, 5, 2, 10, 1, 7, 9]])
def test_session_runs_as_run_block_after_bind(order):
    slow, fast = interpreter(), interpreter()
    slow_store, fast_store = slow.initial_values(), fast.initial_values()
    slow.bind(slow_store)
    session = fast.session(fast_store)
    blocks = [block(b) for b in BODIES]
    for i, b in enumerate(order):
        for r, row in enumerate(ROWS):
            slow_out: list = []
            fast_out: list = []
            expected = outcome(lambda: slow.run_block(blocks[b], {"priceW": row}, extra_for(i + r),
                                                      slow_out.append))
            rec = fast.input_record("priceW", row, 1, (), True)
            got = outcome(lambda: session.run(blocks[b], {"priceW": rec}, extra_for(i + r),
                                              fast_out.append))
            assert got == expected, (BODIES[b], row)
            assert fast_out == slow_out and [o.opcode for o in fast_out] == [o.opcode for o in slow_out]
            assert fast_store == slow_store, (BODIES[b], row)
    assert "#nextval" in fast_store  # nextval's count went through the session


def test_session_budget_and_clock_are_per_run():
    interp = Interpreter(budget=200)  # one run takes about 90 steps
    session = interp.session({})
    loop = block("integer i := 0; while (i < 20) i := i + 1; return i;")
    for _ in range(5):  # each run has the whole budget again
        assert session.run(loop, {}).value == 20
    with pytest.raises(SplashError, match="budget"):
        session.run(block("while (true) { }"), {})
    assert session.run(loop, {}).value == 20
    ticks = iter([1, 2, 3])
    timed = Interpreter(clock=lambda: next(ticks))
    timed_session = timed.session({})
    now = block("return now();")
    assert [timed_session.run(now, {}).value for _ in range(3)] == [1, 2, 3]


def test_output_is_a_snapshot_of_the_record():
    interp = interpreter()
    store = interp.initial_values()
    out: list = []
    interp.session(store).run(block("out.isin := 'a'; output out; out.isin := 'b'; output out; "
                                    "out.price := 3;"), {}, None, out.append)
    assert [dict(o) for o in out] == [{"isin": "a", "price": None}, {"isin": "b", "price": None}]
    assert store["out"] == {"isin": "b", "price": 3.0}
    out[0]["isin"] = "changed"  # the copies are the caller's: the variable does not see changes
    assert store["out"]["isin"] == "b"


# --- the compiled fast paths --------------------------------------------------------------------------

def run(code: str, globals_: dict | None = None, row: dict | None = None) -> object:
    interp = Interpreter(globals_ or {}, source_types={"priceW": TYPES})
    return interp.run_block(block(code), {"priceW": row or {"isin": "A", "price": 2.0}}).value


def test_a_global_named_as_the_input_row_comes_first():
    assert run("return priceW.isin;", {"priceW": Record([("isin", "G")])}) == "G"
    assert run("return priceW.isin;") == "A"
    assert run("return priceW.isin;", row={"isin": None}) is None


@pytest.mark.parametrize("code, message", [
    ("return priceW.nosuch;", "'priceW' has no column 'nosuch'"),
    ("return g.x;", "integer has no field 'x'"),
    ("return r.nosuch;", "the record has no field 'nosuch'"),
    ("return nosuch.x;", "unknown name 'nosuch'"),
    ("g.x := 1;", "cannot set field 'x' of an integer"),
    ("priceW.isin := 'b';", "the input row cannot be assigned"),
    ("r.nosuch := 1;", "the record has no field 'nosuch'"),
    ("r.a := 'text';", "cannot assign a string to field 'a' of type integer"),
    ("return g[1];", "integer cannot be indexed"),
    ("d[1.5] := 1;", "cannot assign a float to a dictionary key of type string"),
    ("d['a'] := 'x';", "cannot assign a string to a dictionary value of type integer"),
    ("return d[2.5];", "cannot assign a float to a dictionary key of type string"),
])
def test_fast_paths_fail_as_the_slow_ones(code, message):
    g = {"g": 1, "r": Record([("a", None)], types={"a": as_type("integer")}),
         "d": Dictionary(key=as_type("string"), value=as_type("integer"))}
    with pytest.raises(SplashError, match=message):
        run(code, copy.deepcopy(g))


def test_fast_paths_coerce_and_keep_nulls():
    d = Dictionary(key=as_type("long"), value=as_type("float"))
    g = {"r": Record([("a", None), ("f", None)], types={"a": as_type("long"), "f": as_type("float")}),
         "d": d, "nr": None}
    got = run("r.a := 3; r.f := 2; d[4] := 1; d[5] := null; r.a := r.a; "
              "return [a = r.a; f = r.f; one = d[4]; five = d[5]; n = d[6];];", g)
    assert got == {"a": 3, "f": 2.0, "one": 1.0, "five": None, "n": None}
    assert [type(got[k]) for k in ("a", "f", "one")] == [Long, float, float]
    assert run("return nr.x;", {"nr": None}) is None
    assert run("return d[null];", {"d": d}) is None
    assert run("return nv[1];", {"nv": None}) is None


@pytest.mark.parametrize("code, expected", [
    ("return 1.5 + 2.25;", 3.75), ("return 1.5 - 2;", -0.5), ("return 2 * 1.5;", 3.0),
    ("return 0.1 * 3.0;", 0.1 * 3.0), ("return 2147483647 + 1;", -2147483648),
    ("return 'a' + 'b';", "ab"), ("return -2147483647 - 2;", 2147483647), ("return 65536 * 65536;", 0),
    ("return 3 - 5;", -2), ("return 2.5 * 3;", 7.5), ("return 3 - 0.5;", 2.5),
    ("return 16777217 * 1.0;", 16777217.0), ("return cast(long, 3) * 1.5;", 4.5),
    ("return cast(long, 2147483647) + 1;", Long(2147483648)), ("return 1.5 > 1.0;", True), ("return 'a' < 'b';", True),
    ("return 2 >= 3;", False), ("return 1 = 1.0;", True), ("return 1.5 <> null;", None),
    ("return cast(float, 'nan') = cast(float, 'nan');", True), ("return 1.0 + null;", None), ("return -0.0 * 1.0;", -0.0),
])
def test_arithmetic_fast_path(code, expected):
    got = run(code)
    assert type(got) is type(expected) and got == expected
    if isinstance(expected, float):
        assert math.copysign(1, got) == math.copysign(1, expected)


def test_one_statement_blocks_pass_their_signal_on():
    assert run("integer i := 0; while (true) { if (i > 3) break; i := i + 1; } return i;") == 4
    assert run("integer i := 0; integer s := 0; while (i < 5) { i := i + 1; if (i = 2) continue; "
               "s := s + i; } return s;") == 13
    assert run("if (true) return 7; return 8;") == 7
