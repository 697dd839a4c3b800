"""runtime.engine.expr: expressions evaluated by direct closures (literals, columns, bound variables,
unary and binary operators) give exactly what the SPLASH interpreter gives, errors included."""
import datetime as dt
import math
import random
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from ccl.syntax import nodes as n
from ccl.splash import SplashError
from runtime.engine.expr import Expressions

COLUMNS = [("i", "integer"), ("l", "long"), ("f", "float"), ("m", "money(2)"), ("s", "string"),
           ("b", "boolean"), ("t", "timestamp"), ("d", "interval")]
VALUES = {"i": [0, 1, -7, 2**31 - 1, None], "l": [0, 3, 2**40, -2**63, None],
          "f": [0.0, 1.5, -2.25, float("nan"), float("inf"), None],
          "m": [Decimal("1.25"), Decimal("-3.10"), Decimal("0.00"), None],
          "s": ["", "abc", "a%c", "Z", None], "b": [True, False, None],
          "t": [dt.datetime(2024, 2, 29, 12, 30), None], "d": [0, 1_000_000, None]}
LITERALS = [n.Literal("integer", 0), n.Literal("integer", 3), n.Literal("integer", -2),
            n.Literal("long", 2**40), n.Literal("float", 2.5), n.Literal("string", "a%"),
            n.Literal("string", "abc"), n.Literal("boolean", True), n.Literal("null", None),
            n.Literal("money", Decimal("1.5"))]
BINARY = ["+", "-", "*", "/", "%", "^", "=", "!=", "<>", "<", "<=", ">", ">=", "and", "or", "like"]


def _tree(rnd: random.Random, depth: int) -> n.Node:
    pick = rnd.random()
    if depth == 0 or pick < 0.3:
        if rnd.random() < 0.55:
            return n.FieldAccess(n.Var(n.Ident("r")), n.Ident(rnd.choice(COLUMNS)[0]))
        if rnd.random() < 0.2:
            return n.Var(n.Ident("agg"))
        return rnd.choice(LITERALS)
    if pick < 0.45:
        return n.Unary(rnd.choice(["-", "+", "not"]), _tree(rnd, depth - 1))
    return n.Binary(rnd.choice(BINARY), _tree(rnd, depth - 1), _tree(rnd, depth - 1))


def _outcome(fn, rows, variables):
    try:
        value = fn(rows, variables)
    except SplashError as e:
        return ("error", str(e))
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return ("value", type(value).__name__, value)


def test_direct_closures_agree_with_the_interpreter_on_random_expressions():
    rnd = random.Random(5)
    exprs = Expressions({}, {"r": [list(c) for c in COLUMNS]})
    direct_count = 0
    for _ in range(3000):
        node = _tree(rnd, rnd.randint(1, 4))
        fast = exprs.compile(n.to_json(node))
        slow = exprs._interpreted(node)
        direct_count += exprs._direct(node) is not None
        for _ in range(4):
            row = {c: rnd.choice(VALUES[c]) for c, _ in COLUMNS}
            variables = {"agg": rnd.choice([1, 2.5, None, "x"])} if rnd.random() < 0.8 else {}
            assert _outcome(fast, {"r": row}, variables) == _outcome(slow, {"r": row}, variables), \
                (n.to_json(node), row, variables)
    assert direct_count > 2000  # most of these trees take the direct path


def test_an_unusual_row_or_a_shadowed_name_goes_to_the_interpreter():
    exprs = Expressions({}, {"r": [["i", "integer"]]})
    plus_one = exprs.compile(n.to_json(n.Binary("+", n.FieldAccess(n.Var(n.Ident("r")), n.Ident("i")),
                                                 n.Literal("integer", 1))))
    assert plus_one({"r": {"i": 2}}) == 3
    assert plus_one({"r": {"i": 2**31 - 1}}) == -2**31  # wraps like Java, as SPLASH does
    try:
        plus_one({"r": {}})
        raise AssertionError("a missing column must fail")
    except SplashError as e:
        assert "no column 'i'" in str(e)


# Calls (pure built-ins, wrong arities, an unknown name, functions never called directly), CASE
# and casts over the trees above: the direct closures added for them must agree too.
CALLS = ["upper", "lower", "length", "substr", "left", "right", "trim", "concat", "abs", "round",
         "ceil", "floor", "sqrt", "power", "mod", "to_string", "string", "to_integer", "to_float",
         "to_long", "max", "min", "maxof", "coalesce", "firstnonnull", "isnull", "ascii", "instr",
         "replace", "sign", "ln", "char", "nosuchfunction", "getrowid", "size"]
CASTS = ["integer", "long", "float", "string", "boolean", "money(2)", "timestamp"]


def _tree2(rnd: random.Random, depth: int) -> n.Node:
    pick = rnd.random()
    if depth == 0 or pick < 0.25:
        return _tree(rnd, 0)
    if pick < 0.55:
        return n.Call(n.Ident(rnd.choice(CALLS)), [_tree2(rnd, depth - 1) for _ in range(rnd.randint(0, 3))])
    if pick < 0.7:
        whens = [n.WhenThen(_tree2(rnd, depth - 1), _tree2(rnd, depth - 1)) for _ in range(rnd.randint(1, 2))]
        return n.Case(_tree2(rnd, depth - 1) if rnd.random() < 0.4 else None, whens,
                      _tree2(rnd, depth - 1) if rnd.random() < 0.6 else None)
    if pick < 0.8:
        name = rnd.choice(CASTS)
        spec = n.NamedType(name.split("(")[0], [int(name[6])] if "(" in name else [])
        return n.Cast(spec, _tree2(rnd, depth - 1))
    if pick < 0.9:
        return n.Unary(rnd.choice(["-", "not"]), _tree2(rnd, depth - 1))
    return n.Binary(rnd.choice(BINARY), _tree2(rnd, depth - 1), _tree2(rnd, depth - 1))


def _agree(rnd: random.Random, trees: int) -> int:
    exprs = Expressions({}, {"r": [list(c) for c in COLUMNS]})
    direct = 0
    for _ in range(trees):
        node = _tree2(rnd, rnd.randint(1, 3))
        fast = exprs.compile(n.to_json(node))
        slow = exprs._interpreted(node)
        direct += exprs._direct(node) is not None and isinstance(node, (n.Call, n.Case, n.Cast))
        for _ in range(4):
            row = {c: rnd.choice(VALUES[c]) for c, _ in COLUMNS}
            variables = {"agg": rnd.choice([1, 2.5, None, "x"])} if rnd.random() < 0.8 else {}
            assert _outcome(fast, {"r": row}, variables) == _outcome(slow, {"r": row}, variables), \
                (n.to_json(node), row, variables)
    return direct


def test_calls_case_and_casts_agree_with_the_interpreter():
    assert _agree(random.Random(11), 3000) > 500  # many calls, CASEs and casts run directly


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_generated_calls_case_and_casts_agree_with_the_interpreter(seed):
    _agree(random.Random(seed), 20)
