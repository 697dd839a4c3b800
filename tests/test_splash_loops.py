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

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ccl.splash import Interpreter, SplashError
from ccl.splash.caches import EventCache
from ccl.splash.interpreter import declare_state
from ccl.splash.caches import get_cache
from ccl.splash.convert import coerce
from ccl.splash.types import Type
from ccl.splash.values import Record
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
    float f := 0.25;
    typeof(priceW) r;
    string s := 'A';
"""
# the containers, made by the first run (and changed by later ones)
SETUP = ("if (size(vr) = 0) { vnull := null; vf := new vector(float); push_back(vf, 1.5); push_back(vf, null); "
         "push_back(vf, -0.0); push_back(vf, 3.0); vr := new vector(typeof(priceW)); "
         "push_back(vr, priceW); push_back(vr, [k = 'B'; | v = null; i = 5;]); "
         "push_back(vr, [k = null; | v = 2.5; i = null;]); d := new dictionary(string, float); "
         "d['A'] := 1.0; d['B'] := null; d['C'] := 2.5; } ")
LOCALS = "integer li := 2; float lf := 0.5; integer j := 0; integer lz := 1; typeof(priceW) lrec; "
ROWS = [{"k": "A", "v": 1.5, "i": 2}, {"k": "B", "v": None, "i": -1}, {"k": "A", "v": -0.0, "i": None},
        {"k": "A", "v": 2.0**40, "i": 2**31 - 1}, {"k": None, "v": 7.0, "i": 3}]

# operands: the loop variables (f a float, r a record, s a string key: globals of those names
# outside their loops), their fields, globals,
# locals (lz declared in loop bodies), the input row's fields, literals, unknown names, null
OPERANDS = ["f", "f", "r.v", "r.v", "r.i", "r.k", "r.nosuch", "s", "n", "x", "li", "lf", "lz",
            "priceW.v", "priceW.i", "1", "2.5", "null", "d[s]", "lrec.v"]
TARGETS = ["x", "x", "lf", "lf", "f", "f", "n", "li", "lz", "r", "s", "lrec", "nosuch"]


# reads of lz and lr (declared in two nested scopes, the inner one in a loop body) by each fused
# form: the innermost declaration must win
READ = ("if (lz > li) { n := n + 1; } if (li < lz) { n := n + 2; } x := lz * 2.5; n := (lz + li) * 1; "
        "if ((lz > li) and (lr.v < x)) { n := n + 3; } if (lr.v < x) { n := n + 4; } "
        "if (x >= lr.v) { n := n + 5; } d['R'] := lr.v; x := lr.v + 1.0; x := (lr.v - lz) * 1.0; "
        "x := lr.v; lz := lz + 1;")
# r.f of a record declared in two nested scopes, the outer one a loop's
READ_R = ("x := r.v; if (r.v < x) { n := n + 1; } x := r.v + 1.0; x := (r.v - lz) * 1.0; "
          "if ((r.v < x) and true) { n := n + 2; } d['R'] := r.v; if (x > r.v) { n := n + 3; }")
SHADOWED_R = (f"for (r in vr) {{ {READ_R} typeof(priceW) r := [k = 'S'; | v = 9.0; i = 9;]; {READ_R} "
              f"if (li > 0) {{ typeof(priceW) r := [k = 'T'; | v = -1.0; i = 8;]; {READ_R} }} }}")
# a break leaving the loop's scope (the name is the global's again after it); a continue in a
# fused while; the last record of an ordered cache read with getCache
AFTER_BREAK = "for (x in vf) { if (x >= 3.0) { break; } n := n + 1; } d['L'] := x;"
CONTINUED = "j := 0; while (j < 3) { j := j + 1; if (j = 2) { continue; } n := n + 1; } d['J'] := j;"
ORDERED = ("j := 0; while (j < cacheSize(eco)) { typeof(priceW) r := getCache(eco, j); j := j + 1; "
           "rec := r; }")
SHADOWED = ("if (true) { integer lz := 4; typeof(priceW) lr := vr[0]; for (f in vf) { integer lz := 6; "
            f"typeof(priceW) lr := vr[2]; {READ} }} {READ} }}")


def simple() -> st.SearchStrategy[str]:
    operand = st.sampled_from(OPERANDS)
    arith = st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from("+-*"), operand)
    compare = st.builds(lambda a, op, b: f"{a} {op} {b}", operand,
                        st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), operand)
    near = st.sampled_from(["r.v", "r.i", "r.nosuch", "lrec.v", "f", "lz"])  # a loop's or a local
    return st.one_of(
        st.builds(lambda t, e: f"{t} := {e};", st.sampled_from(TARGETS), st.one_of(arith, operand)),
        # the fused operand forms as expressions, one side a loop's variable or field
        st.builds(lambda a, op, b: f"x := ({a} {op} {b}) * 1;", near, st.sampled_from("+-*"), operand),
        st.builds(lambda a, op, b: f"if (({a} {op} {b}) and true) {{ n := n + 1; }}", near,
                  st.sampled_from(["<", ">=", "="]), operand),
        st.builds(lambda a, op, b: f"if (({b} {op} {a}) and true) {{ n := n + 1; }}", near,
                  st.sampled_from(["<", ">=", "="]), operand),
        st.builds(lambda e: f"x := ({e}) * 1;", arith),  # arithmetic as an expression
        st.builds(lambda e: f"if ({e}) {{ n := n + 1; }}", compare),
        st.builds(lambda e: f"if (({e}) and true) {{ n := n + 1; }}", compare),  # as an expression
        st.builds(lambda e, a: f"if ({e}) {{ {a} }}", compare,
                  st.sampled_from(["break;", "continue;", "return n;", "rec := r;"])),
        st.sampled_from(["break;", "continue;", "integer lz := 4;", "push_back(vf, 9.5);",
                         "d['Z'] := x;", "remove(d, 'A');", "output [k = 'o'; | v = x; i = n;];",
                         "rec := r;", "r.v := 1.0;", "x := sum(ec.v);"]),
    )


# a loop body's first statement: nothing, or a continue or break on a test of what changes
CONTROL = ["", "", "if (n > 1) { continue; } ", "if (j = 2) { continue; } ", "if (n > 2) { break; } ",
           "if (j >= 2) { break; } ", "if (x < 0.0) { continue; } "]


def loops(depth: int) -> st.SearchStrategy[str]:
    inner = st.builds(
        lambda c, b: c + " ".join(b), st.sampled_from(CONTROL),
        st.lists(simple() if depth <= 1 else st.one_of(simple(), loops(depth - 1)), min_size=1, max_size=4))
    return st.one_of(
        st.builds(lambda c, b: f"for (f in {c}) {{ {b} }}",
                  st.sampled_from(["vf"] * 6 + ["vnull", "n", "nosuch", "ec"]), inner),
        st.builds(lambda b: f"for (r in vr) {{ {b} }}", inner),
        st.builds(lambda b: f"for (r in vr) {{ integer lz := 3; {b} }}", inner),
        st.builds(lambda b: f"for (s in d) {{ {b} }}", inner),
        # the loop variable a global's name: after the loop the name is the global's again
        st.builds(lambda b: f"for (x in vf) {{ if (x >= 3.0) {{ break; }} {b} }} d['L'] := x;", inner),
        # while over a counter no generated statement assigns (it always moves on)
        st.builds(lambda op, lim, b: f"j := 0; while (j {op} {lim}) {{ j := j + 1; {b} }} d['J'] := j;",
                  st.sampled_from(["<", "<=", "!="]), st.sampled_from(["3", "li", "null", "lf"]), inner),
        st.builds(lambda c, b: (f"j := 0; while (j < cacheSize({c})) {{ typeof(priceW) r := "
                                f"getCache({c}, j); j := j + 1; rec := r; {b} }}"),
                  st.sampled_from(["ec", "eco"]), inner),
        st.builds(lambda b: f"j := 0; while ((j < 2) and isnull(lrec)) {{ j := j + 1; {b} }}", inner),
        st.builds(lambda b: f"if (li > 0) {{ integer lz := 5; {b} }}", inner),
    )


def statements() -> st.SearchStrategy[str]:
    return st.one_of(loops(2), simple(), st.just(SHADOWED), st.just(SHADOWED_R))


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


@settings(max_examples=120, deadline=None)
@example(SHADOWED, 100_000)
@example(SHADOWED_R, 100_000)
@example(AFTER_BREAK, 100_000)
@example(CONTINUED, 100_000)
@example(ORDERED, 100_000)
@given(st.lists(statements(), min_size=1, max_size=3).map(" ".join),
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


# --- getCache and the records of a cache, against what they did before ---

def old_record(cache: EventCache, entry: list) -> Record:
    """A cache's record as ``EventCache._record`` made it before (``Record(...)``, its own types)."""
    rec = Record(entry[0].items(), types=dict(cache.columns))
    rec.readonly, rec.source = True, cache.source  # type: ignore[attr-defined]
    rec.opcode = {"i": 1, "u": 3, "d": 5, "p": 7, "s": 13}.get(entry[1])
    return rec


def seen(rec: object) -> object:
    if not isinstance(rec, Record):
        return rec
    return (type(rec), list(rec.items()), rec.types, rec.key_fields, rec.readonly, rec.source,
            rec.opcode, sorted(rec.__dict__))


EVENTS = st.lists(st.tuples(st.sampled_from("iud"), st.sampled_from(["A", "B", None]),
                            st.none() | st.floats(allow_nan=True, width=16), st.none() | st.integers(-3, 3)),
                  max_size=9)


@settings(max_examples=200, deadline=None)
@given(EVENTS, st.sampled_from([[], [("v", False)], [("v", True)], [("i", False), ("v", True)]]),
       st.sampled_from([None, 2, 3]), st.booleans(), st.sampled_from([["k"], []]))
def test_get_cache_and_records_as_before(events, order, count, coalesce, keys):
    import pickle
    cols = [("k", Type("string")), ("v", Type("float")), ("i", Type("integer"))]
    made = []
    for read in (True, False):  # one cache read after each event, one never read
        cache = EventCache("c", "priceW", keys, ["i"], cols, count=count, coalesce=coalesce, order=order)
        for t, (op, k, v, i) in enumerate(events):
            cache.add(op, {"k": k, "v": v, "i": i}, t)
            if read:
                view = cache.view()
                for j in range(-1, len(view) + 1):
                    want = old_record(cache, view[j]) if 0 <= j < len(view) else None
                    assert seen(get_cache(None, cache, j)) == seen(want)
                assert [seen(r) for r in cache.records()] == [seen(old_record(cache, e)) for e in view]
        made.append(cache)
    # the shared types dict is no part of the cache's state
    assert pickle.dumps(made[0]) == pickle.dumps(made[1])
    assert sorted(pickle.loads(pickle.dumps(made[0])).__dict__) == sorted(made[1].__dict__)


def test_coerce_of_a_record_copies_it_as_before():
    from ccl.splash.interpreter import InputRecord
    rec = Record([("k", "A"), ("v", None)], types={"k": Type("string")}, key_fields=("k",))
    rec.opcode = 3
    inp = InputRecord([("k", "B")])
    for r in (rec, inp):
        got = coerce(r, Type("record"), "x")
        assert got is not r and seen(got) == seen(r.copy_record())
