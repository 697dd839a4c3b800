"""The fused closures of ccl/splash (``Compiler.fuse``): ``output setOpcode(r, <opcode>);`` as one
closure, ``if (isnull(x))`` and ``if (a < b)`` with the call's or comparison's work inline, and
variable operands of comparisons and ``+ - *`` read from their cell. Generated handler bodies are run by a fused and an unfused
(one closure per node: the reference) interpreter, each in a session over the same rows: every run
must give the same outcome or error, the same records output (values and opcodes), the same
variables, and use the same number of steps."""
from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from ccl.splash import Interpreter, SplashError
from ccl.splash.interpreter import declare_state
from test_splash_interpreter import block, declare

TYPES = {"k": "string", "v": "float", "i": "integer"}
DECLARE = """
    integer n := 0;
    float x := 1.5;
    typeof(priceW) rec;
    dictionary(string, float) d;
    integer upsert := 3;
    dictionary(string, integer) pd;
"""
ROWS = [{"k": "A", "v": 1.5, "i": 2}, {"k": "B", "v": None, "i": -1}, {"k": None, "v": -0.0, "i": None},
        {"k": "A", "v": 2.0**40, "i": 2**31 - 1}]

# operands: globals, the input row's fields, locals (li in the handler's scope, lz in an inner
# one), literals, an opcode name, an unknown name, null
OPERANDS = ["n", "x", "priceW.v", "priceW.i", "li", "lf", "lz", "1", "2.5", "insert", "nosuch", "null",
            "2147483647", "upsert", "priceW"]
RECORDS = ["rec", "priceW", "lrec", "[k = priceW.k; | v = 1.0; i = n;]", "null", "n", "nosuch", "insert",
           "d"]
OPCODES = ["insert", "update", "delete", "upsert", "safedelete", "Delete", "n", "3", "2", "li", "null",
           "priceW"]


# reads of lz and li as operands of each fused form (lz shadowed one scope in, li two out)
READ_LZ = ("lz := lz + li; n := lz + li; n := li - lz; x := lz * 2.5; if (lz > li) { n := n + 1; } "
           "if (li < lz) { n := n + 2; } if ((lz > li) and (li < lz)) { n := n + 3; } "
           "n := (lz + li) * 1; n := (li - lz) * 1;")


def statements(depth: int) -> st.SearchStrategy[str]:
    operand = st.sampled_from(OPERANDS)
    arith = st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from("+-*"), operand)
    compare = st.builds(lambda a, op, b: f"{a} {op} {b}", operand,
                        st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), operand)
    simple = st.one_of(
        st.builds(lambda r, o: f"output setOpcode({r}, {o});", st.sampled_from(RECORDS),
                  st.sampled_from(OPCODES)),
        st.builds(lambda t, e: f"{t} := {e};",
                  st.sampled_from(["n", "x", "li", "lf"] * 3 + ["lz", "priceW", "pd", "nosuch", "rec"]), arith),
        st.builds(lambda e: f"d[priceW.k] := {e};", st.sampled_from(["x", "priceW.v", "lf"])),
        st.builds(lambda f, e: f"rec.{f} := {e};", st.sampled_from(["v", "i"]), arith),
        st.builds(lambda e: f"if ({e}) {{ n := n + 1; }}", compare),
        st.just("output rec;"),
        # a run of field copies r.a := X.b; (one closure when r and X are no locals)
        st.builds(lambda r, x, pairs: " ".join(f"{r}.{a} := {x}.{b};" for a, b in pairs),
                  st.sampled_from(["rec", "rec", "rec", "priceW", "n", "nosuch", "lrec", "d"]),
                  st.sampled_from(["priceW", "priceW", "priceW", "rec", "n", "nosuch", "insert", "li"]),
                  st.lists(st.tuples(st.sampled_from(["k", "v", "i", "k", "v", "i", "nosuch"]),
                                     st.sampled_from(["k", "v", "i", "k", "v", "i", "nosuch"])),
                           min_size=1, max_size=4)),
        st.just("n := pd['p']; pd['p'] := 7;"),  # a read-only container: fresh per run
        st.just("li := nextval();"),              # a global added by the run
        st.just("return n;"),
        st.just("exit;"),
    )
    if depth == 0:
        return simple
    inner = st.lists(statements(depth - 1), min_size=1, max_size=3).map(" ".join)
    nested = st.one_of(
        st.builds(lambda e, a, b: f"if (isnull({e})) {{ {a} }} else {{ {b} }}",
                  st.sampled_from(["d[priceW.k]", "priceW.v", "x", "li", "lz", "nosuch", "rec.v"]),
                  inner, inner),
        st.builds(lambda e, a: f"if (isnull({e})) {{ integer lz := 4; {a} }}",
                  st.sampled_from(["priceW.i", "lf", "lz"]), inner),
        st.builds(lambda c, a: f"if ({c}) {{ integer lz := 5; {a} }} else {{ {a} }}", compare, inner),
        # a local shadowed one scope in, read from both (operands read the next scope out inline)
        st.builds(lambda a: (f"if (isnull(null)) {{ integer lz := 4; if (li = 2) {{ integer lz := 6; {a} "
                             f"{READ_LZ} }} {a} {READ_LZ} }}"), inner),
    )
    return st.one_of(simple, nested)


def interpreter(fuse: bool, budget: int) -> Interpreter:
    decl, _ = declare_state(declare(DECLARE), source_types={"priceW": TYPES})
    decl.constants.add("pd")  # read-only, as a parameter is
    interp = Interpreter(decl, source_types={"priceW": TYPES}, budget=budget)
    interp.compiler.fuse = fuse
    return interp


def runs(fuse: bool, body: str, budget: int, how: str) -> list:
    """Per row: the outcome or error, the records output with their opcodes, the variables after
    the run and the steps it used. ``how``: through Session.run_plain (as a Flex batch runs
    them), or Session.run with ``copies`` True or False."""
    interp = interpreter(fuse, budget)
    store = interp.initial_values()
    session = interp.session(store)
    code = block("integer li := 2; float lf := 0.5; typeof(priceW) lrec; " + body)
    got = []
    for row in ROWS:
        out_seen: list = []

        def out(r, seen=out_seen):  # type: ignore[no-untyped-def]
            seen.append((dict(r), r.opcode))
        rec = interp.input_record("priceW", row, 1, ("k",), True)
        try:
            if how == "plain":
                limit = sys.getrecursionlimit()
                sys.setrecursionlimit(max(limit, interp.needed_recursion_limit))
                try:
                    r = session.run_plain(code, {"priceW": rec}, out)
                finally:
                    sys.setrecursionlimit(limit)
            else:
                r = session.run(code, {"priceW": rec}, None, out, copies=how == "copies")
            result: tuple = ("ok", r.returned, r.value)
        except SplashError as e:
            result = ("error", e.reason)
        # (with copies, a record output may change later in the run: compared as output)
        got.append((result, out_seen, repr(store), getattr(store["rec"], "opcode", None),
                    session.machine.steps if result[0] == "ok" else None))
    return got


@settings(max_examples=200, deadline=None)
@given(st.lists(statements(2), min_size=1, max_size=5).map(" ".join),
       st.sampled_from([100_000, 3, 8, 20]))
def test_fused_closures_run_as_one_closure_per_node(body, budget):
    reference = runs(False, body, budget, "copies")
    assert runs(True, body, budget, "copies") == reference, body
    assert runs(True, body, budget, "plain") == reference, body
    assert runs(True, body, budget, "snapshots") == runs(False, body, budget, "snapshots"), body


def test_the_fused_forms_are_compiled():
    """The test above compares something: these bodies compile to the fused closures."""
    interp = interpreter(True, 100)
    names = []
    for code in ["output setOpcode(rec, insert);", "if (isnull(x)) { n := 1; }",
                 "if (priceW.v > li) { n := 1; }", "n := n + li;", "n := n;"]:
        interp.compiler.locals = frozenset(["li"])
        stmt = interp.compiler.stmt(block(code).stmts[0], 0, 0)
        names.append(stmt.__name__)
    assert names == ["run_output_opcode", "run_if_isnull", "run_if_compare", "run_var_arith", "run_var"], names
    interp.compiler.locals = frozenset(["li"])
    copies = interp.compiler.block(block("rec.k := priceW.k; rec.v := priceW.v;"), 0, 0)
    assert copies.__name__ == "run_field_copies"


# --- input records of Interpreter.input_class (runtime/engine/flex.py makes its input records so) ---

ROW_VALUES = st.fixed_dictionaries({}, optional={"k": st.none() | st.text(max_size=2),
                                                 "v": st.none() | st.floats(allow_nan=False),
                                                 "i": st.none() | st.integers(-2**31, 2**31 - 1)})


def observed(rec) -> tuple:  # type: ignore[no-untyped-def]
    """What code and the engine can see of an input record."""
    import copy
    import pickle
    copied = rec.copy_record()
    back = pickle.loads(pickle.dumps(rec))
    deep = copy.deepcopy(rec)
    return (list(rec.items()), rec.types, rec.key_fields, rec.readonly, rec.source, rec.opcode,
            isinstance(rec, type(back)), [(type(x).__name__, list(x.items()), x.types, x.key_fields,
                                          x.readonly, x.source, x.opcode)
                                         for x in (copied, back, deep)])


@settings(max_examples=300, deadline=None)
@given(ROW_VALUES, st.sampled_from([None, 1, 3, 5]), st.sampled_from([(), ("k",), ("k", "i")]),
       st.sampled_from([None, "delete", "upsert"]))
def test_records_of_an_input_class_are_input_records(row, code, keys, set_to):
    from ccl.splash.interpreter import new_input
    interp = interpreter(True, 1000)
    made = interp.input_record("priceW", row, code, keys, True)
    rec = new_input(interp.input_class("priceW", keys, code))
    dict.update(rec, row)
    assert observed(rec) == observed(made)
    # the record in code: read, its opcode set (its own, not its class's), assigned to (refused),
    # stored (copied) and output
    body = block("integer was := getOpcode(priceW); rec := priceW; "
                 + (f"output setOpcode(priceW, {set_to}); " if set_to else "output priceW; ")
                 + "return was;")
    got = []
    for r in (rec, made):
        store = interp.initial_values()
        out: list = []
        result = interp.session(store).run(body, {"priceW": r}, None, out.append)
        got.append((result.value, [(list(o.items()), o.opcode) for o in out], list(store["rec"].items()),
                    store["rec"].opcode, r.opcode))
        try:
            interp.session(store).run(block("priceW.k := 'z';"), {"priceW": r})
        except SplashError as e:
            got.append(e.reason)
    assert got[0:2] == got[2:4], got
    assert new_input(interp.input_class("priceW", keys, code)).opcode == code  # the class's kept
