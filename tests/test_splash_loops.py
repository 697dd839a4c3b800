"""Loops in the fused closures of ccl/splash (``Compiler.fuse``): ``for (x in ...)`` with one scope
and cell per loop run, ``while (a <op> b)`` as one fused test per round, ``r.f`` of a local
record (a loop's) read inline as an operand or a value, and the loop body's locals one scope
out. Generated handler bodies with loops (for over vectors, vectors of records, dictionaries,
null or wrong containers and event caches; while over counters and over an event cache with
``cacheSize``/``getCache``; break, continue, return, nested loops, declarations in bodies, the
loop variable assigned, the container changed during the loop, nulls) run through a fused and
an unfused (one closure per node: the reference) interpreter: same outcomes or errors, records
output, variables and steps, row after row."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ccl.splash import Interpreter, SplashError
from ccl.splash.caches import EventCache
from ccl.splash.interpreter import declare_state
from ccl.splash.types import Type
from test_splash_interpreter import block, declare

TYPES = {"k": "string", "v": "float", "i": "integer"}
DECLARE = """
    integer n := 0;
    float x := 1.5;
    typeof(priceW) rec;
    vector(float) vf;
    vector(float) vnull;
    vector(typeof(priceW)) vr;
    dictionary(string, float) d;
"""
# the containers, made by the first run (and changed by later ones)
SETUP = ("if (size(vr) = 0) { vnull := null; vf := new vector(float); push_back(vf, 1.5); push_back(vf, null); "
         "push_back(vf, -0.0); push_back(vf, 3.0); vr := new vector(typeof(priceW)); "
         "push_back(vr, priceW); push_back(vr, [k = 'B'; | v = null; i = 5;]); "
         "push_back(vr, [k = null; | v = 2.5; i = null;]); d := new dictionary(string, float); "
         "d['A'] := 1.0; d['B'] := null; d['C'] := 2.5; } ")
LOCALS = "integer li := 2; float lf := 0.5; integer j := 0; typeof(priceW) lrec; "
ROWS = [{"k": "A", "v": 1.5, "i": 2}, {"k": "B", "v": None, "i": -1}, {"k": "A", "v": -0.0, "i": None},
        {"k": "A", "v": 2.0**40, "i": 2**31 - 1}, {"k": None, "v": 7.0, "i": 3}]

# operands: the loop variables (f a float, r a record, s a string key), their fields, globals,
# locals (lz declared in loop bodies), the input row's fields, literals, unknown names, null
OPERANDS = ["f", "r.v", "r.i", "r.k", "r.nosuch", "s", "n", "x", "li", "lf", "lz", "priceW.v",
            "priceW.i", "1", "2.5", "null", "nosuch", "d[s]", "lrec.v"]
TARGETS = ["n", "x", "li", "lf", "lz", "f", "r", "s", "lrec", "nosuch"]


def statements(depth: int) -> st.SearchStrategy[str]:
    operand = st.sampled_from(OPERANDS)
    arith = st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from("+-*"), operand)
    compare = st.builds(lambda a, op, b: f"{a} {op} {b}", operand,
                        st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), operand)
    simple = st.one_of(
        st.builds(lambda t, e: f"{t} := {e};", st.sampled_from(TARGETS), st.one_of(arith, operand)),
        st.builds(lambda e: f"if ({e}) {{ n := n + 1; }}", compare),
        st.builds(lambda e, a: f"if ({e}) {{ {a} }}", compare,
                  st.sampled_from(["break;", "continue;", "return n;", "lrec := r;"])),
        st.sampled_from(["break;", "continue;", "integer lz := 4;", "push_back(vf, 9.5);",
                         "d['Z'] := x;", "remove(d, 'A');", "output [k = 'o'; | v = x; i = n;];",
                         "rec := r;", "r.v := 1.0;", "x := sum(ec.v);"]),
    )
    if depth == 0:
        return simple
    inner = st.lists(statements(depth - 1), min_size=1, max_size=4).map(" ".join)
    loop = st.one_of(
        st.builds(lambda c, b: f"for (f in {c}) {{ {b} }}",
                  st.sampled_from(["vf", "vf", "vnull", "n", "nosuch", "ec"]), inner),
        st.builds(lambda b: f"for (r in vr) {{ {b} }}", inner),
        st.builds(lambda b: f"for (r in vr) {{ integer lz := 3; {b} }}", inner),
        st.builds(lambda b: f"for (s in d) {{ {b} }}", inner),
        st.builds(lambda b: f"for (r in ec) {{ {b} }}", inner),
        # while over a counter no generated statement assigns (it always moves on)
        st.builds(lambda op, lim, b: f"j := 0; while (j {op} {lim}) {{ j := j + 1; {b} }}",
                  st.sampled_from(["<", "<=", "!="]), st.sampled_from(["3", "li", "null", "lf"]), inner),
        st.builds(lambda c, b: (f"j := 0; while (j < cacheSize({c})) {{ typeof(priceW) r := "
                                f"getCache({c}, j); j := j + 1; {b} }}"),
                  st.sampled_from(["ec", "eco"]), inner),
        st.builds(lambda b: f"j := 0; while ((j < 2) and isnull(nosuch2)) {{ j := j + 1; {b} }}", inner),
        st.builds(lambda e, b: f"if ({e}) {{ integer lz := 5; {b} }}", compare, inner),
    )
    return st.one_of(simple, loop)


def caches() -> dict[str, EventCache]:
    cols = [("k", Type("string")), ("v", Type("float")), ("i", Type("integer"))]
    return {"ec": EventCache("ec", "priceW", ["k"], [], cols, count=3),
            "eco": EventCache("eco", "priceW", [], [], cols, count=4, order=[("v", True)])}


def runs(fuse: bool, body: str, budget: int) -> list:
    """Per row: the outcome or error, the records output, the variables and caches after the
    run and the steps it used."""
    decl, _ = declare_state(declare(DECLARE), source_types={"priceW": TYPES})
    interp = Interpreter(decl, source_types={"priceW": TYPES}, budget=budget)
    interp.compiler.fuse = fuse
    store = interp.initial_values()
    store.update(caches())
    session = interp.session(store)
    code = block(LOCALS + SETUP + body)
    got = []
    for t, row in enumerate(ROWS):
        for c in ("ec", "eco"):
            store[c].add("i", row, t)
            store[c].select(row)
        out: list = []
        rec = interp.input_record("priceW", row, 1, ("k",), True)
        try:
            r = session.run(code, {"priceW": rec}, None, lambda o: out.append((dict(o), o.opcode)))
            result: tuple = ("ok", r.returned, r.value)
        except SplashError as e:
            result = ("error", e.reason)
        got.append((result, out, repr(store), [store[c].records() for c in ("ec", "eco")],
                    session.machine.steps if result[0] == "ok" else None))
    return got


@settings(max_examples=200, deadline=None)
@given(st.lists(statements(2), min_size=1, max_size=3).map(" ".join),
       st.sampled_from([100_000, 5, 30, 200]))
def test_fused_loops_run_as_the_unfused(body, budget):
    assert runs(True, body, budget) == runs(False, body, budget), body


def test_the_fused_loop_forms_are_compiled():
    """The test above compares something: these compile to the fused closures."""
    decl, _ = declare_state(declare(DECLARE), source_types={"priceW": TYPES})
    interp = Interpreter(decl, source_types={"priceW": TYPES})
    comp = interp.compiler
    comp.locals = frozenset(["r", "lo"])
    names = [comp.stmt(block(code).stmts[0], 0, 0).__name__
             for code in ["while (n < 3) { n := n + 1; }", "if (r.v < lo) { n := 1; }"]]
    assert names == ["run_while_compare", "run_if_compare"]
    assert comp.expr(block("n := r.v;").stmts[0].value).__name__ == "ev_local_field"


def test_a_loop_over_an_event_cache_is_refused_as_before():
    """``for (r in cache)`` is no ESP form (ESP's for loops read windows, vectors and
    dictionaries): an error, a bad record in a Flex; a cache is read with getCache."""
    got = runs(True, "for (r in ec) { n := n + 1; }", 1000)
    assert got[0][0] == ("error", "for-in needs a vector, a dictionary or a window, not a EventCache")
