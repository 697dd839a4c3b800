"""One lowering of a native stream's WHERE (ccl/plan/lowering/condition.py): the compiler's checker
(``ccl.plan.physical.condition_kind``) accepts exactly the conditions the runtime's Spark backend
(runtime/lowering_spark.py) builds, and the built Column keeps a row exactly when the row engine's
WHERE does.

The conditions are those of tests/test_physical.py's native and per-instance streams, and ones
Hypothesis generates over columns of every kind (numbers, strings, booleans, dates, money) with
comparisons, AND/OR/NOT, splitter tests, arithmetic and LIKE; the rows hold nulls, NaN and -0.0.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from ccl.plan.codec import plan_from_json
from ccl.plan.lowering import Unsupported
from ccl.plan.lowering.condition import why_not_condition
from ccl.plan.physical import condition_kind, native_filter
from ccl.syntax import nodes as n
from planned import plan_json
from runtime.engine.expr import Expressions
from runtime.engine.stages import truth
from runtime.lowering_spark import condition_column
from runtime.types import struct

COLUMNS = [["sym", "string"], ["venue", "string"], ["px", "float"], ["q", "integer"],
           ["l", "long"], ["b", "boolean"], ["d", "date"], ["m", "money(2)"]]
TYPES = dict(COLUMNS)
ALIAS = "s"


def _field(name):
    return n.FieldAccess(n.Var(n.Ident(ALIAS)), n.Ident(name))


def _binary(op, left, right):
    return n.Binary(op, left, right)


def _literal(kind, value):
    return n.Literal(kind, value)


def _true_test(cond):
    return n.Case(None, [n.WhenThen(cond, _literal("boolean", True))], _literal("boolean", False))


leaves = st.one_of(
    st.sampled_from([c for c, _ in COLUMNS]).map(_field),
    st.integers(-3, 3).map(lambda v: _literal("integer", v)),
    st.sampled_from([0.0, -0.0, 1.5, float("nan")]).map(lambda v: _literal("float", v)),
    st.sampled_from(["", "A", "b"]).map(lambda v: _literal("string", v)),
    st.booleans().map(lambda v: _literal("boolean", v)),
    st.just(_literal("null", None)))


def _extend(children):
    return st.one_of(
        st.builds(_binary, st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="]), children, children),
        st.builds(_binary, st.sampled_from(["and", "or"]), children, children),
        children.map(lambda c: n.Unary("not", c)),
        children.map(_true_test),
        st.builds(_binary, st.sampled_from(["+", "like"]), children, children))


conditions = st.recursive(leaves, _extend, max_leaves=6)

NAN = float("nan")
ROWS = [("A", "x", 1.5, 1, 3, True, None, None), ("b", None, NAN, -2, None, False, None, None),
        (None, "A", -0.0, None, -1, None, None, None), ("", "", 0.0, 0, 0, False, None, None),
        ("A", "A", None, 3, 3, True, None, None), ("b", "B", NAN, 1, 1, None, None, None)]


def _engine_keeps(expr, rows):
    compiled = Expressions(source_types={ALIAS: COLUMNS}).compile(expr)
    return [truth(compiled({ALIAS: dict(zip(TYPES, row))})) for row in rows]


def _spark_keeps(spark, exprs, rows):
    df = spark.createDataFrame(rows, struct(COLUMNS))
    cols = [F.coalesce(condition_column(e, ALIAS, TYPES), F.lit(False)).alias(f"c{k}")
            for k, e in enumerate(exprs)]
    result = df.select(*cols).collect()
    return [[r[f"c{k}"] for r in result] for k in range(len(exprs))]


def _check(spark, exprs):
    accepted = []
    for expr in exprs:
        checker = condition_kind(expr, ALIAS, TYPES) == "boolean"
        assert checker == (why_not_condition(expr, ALIAS, TYPES) is None)
        try:
            condition_column(expr, ALIAS, TYPES)
            built = True
        except Unsupported:
            built = False
        assert checker == built, expr
        if checker:
            accepted.append(expr)
    if accepted:
        for expr, keeps in zip(accepted, _spark_keeps(spark, accepted, ROWS)):
            assert keeps == _engine_keeps(expr, ROWS), expr
    return accepted


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(conditions, min_size=40, max_size=40))
def test_generated_conditions_the_checker_accepts_are_built_and_filter_as_the_engine(spark, exprs):
    _check(spark, exprs)


def test_a_refused_condition_is_refused_by_the_spark_backend_with_the_checkers_reason():
    expr = _binary(">", _binary("+", _field("px"), _literal("integer", 1)), _literal("integer", 2))
    assert condition_kind(expr, ALIAS, TYPES) is None
    with pytest.raises(Unsupported, match="the operator \\+"):
        condition_column(expr, ALIAS, TYPES)
    assert why_not_condition(expr, ALIAS, TYPES) == "the operator +"
    assert why_not_condition(_binary("=", _field("d"), _field("d")), ALIAS, TYPES) == "column d of type date"
    assert why_not_condition(_field("q"), ALIAS, TYPES) == "a integer used as a condition"


SRC = "create input stream s schema (sym string, venue string, px float, q integer, b boolean);\n"
BODIES = [  # the WHERE clauses of tests/test_physical.py, and a few more
    "where s.px > 1 and (s.sym = 'A' or not (s.q <> 3)) or s.px <> s.px",
    "where s.sym like 'A%'", "where s.q", "where s.px + 1 > 2", "where s.b", "where not s.b",
    "where s.q >= s.px or s.venue < s.sym", "where s.b = true and s.q != 2.5",
]


@pytest.mark.parametrize("where", BODIES)
def test_the_corpus_conditions(spark, tmp_path, where):
    path = tmp_path / "p.ccl"
    path.write_text(SRC + f"create output stream a as select s.sym from s {where};")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    typed = plan_from_json(plan)
    expr = typed.element("a").query.selects[0].where
    accepted = _check(spark, [expr])
    assert bool(accepted) == (native_filter(typed.element("a"), typed) is not None)
