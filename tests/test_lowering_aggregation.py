"""One lowering of a native aggregation's aggregates (ccl/plan/lowering/aggregation.py): the
compiler's checker (``ccl.plan.physical.native_aggregation``) accepts exactly the aggregations
whose every aggregate the runtime's Spark backend (runtime/native_agg.py) builds, and what it
builds gives, over a stream cut into two batches whose partials are merged, Spark's own aggregate
of all the rows.

The aggregations are generated (count/sum/min/max/avg and aggregates the native path does not
take, of columns, of ``*``, of expressions, DISTINCT), planned from CCL text as
tests/test_physical.py plans its cases; tests/test_run_e2e.py compares the native path with the
per-instance engine end to end.
"""
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from ccl.plan.lowering import Unsupported
from ccl.plan.lowering.aggregation import aggregate_call, lower_aggregate
from ccl.plan.codec import element_from_json, plan_from_json
from ccl.plan.model import Aggregate
from ccl.plan.physical import native_aggregation
from planned import plan_json
from runtime.native_agg import SparkAggregation, output_values

SRC = "create input stream s schema (sym string, px float, q integer, l long);\n"
CALLS = ["count(*)", "count(s.px)", "sum(s.q)", "sum(s.l)", "min(s.px)", "max(s.sym)", "avg(s.q)",
         "avg(s.px)", "max(s.q)", "min(s.l)",
         # not native: another aggregate, an expression, DISTINCT
         "median(s.px)", "sum(s.px * 2)", "count(distinct s.q)", "first(s.q)", "sum(s.q + s.l)"]
ROWS = [("A", 1.5, 3, 10), ("B", None, -2, None), ("A", -0.0, None, 2**40), ("B", float("nan"), 7, -5),
        ("A", 2.25, 1, 1), ("C", None, None, None), ("B", 0.5, 2, 3), ("A", 4.0, -9, 0)]


def _plan(tmp_path, calls):
    items = ", ".join(f"{c} a{k}" for k, c in enumerate(calls))
    path = tmp_path / "p.ccl"
    path.write_text(SRC + f"create output window a primary key deduced keep all as select s.sym, {items} "
                    "from s group by s.sym;")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return next(e for e in plan["elements"] if e["name"] == "a"), plan


def _spark_builds(element) -> bool:
    sel = element_from_json(element).query.selects[0]
    try:
        for i, a in enumerate(sel.aggregates):
            fn, col = aggregate_call(a, sel.sources[0].alias)
            lower_aggregate(i, fn, col, SparkAggregation())
    except Unsupported:
        return False
    return True


def _batches_merged(spark, spec, element):
    """The element's rows per group from two batches' partials merged, and from one batch."""
    backend = SparkAggregation()
    lowered = [lower_aggregate(i, fn, col, backend) for i, (_, fn, col) in enumerate(spec.aggregates)]
    parts = [p for agg in lowered for p in agg.partials]
    schema = "sym string, px double, q int, l long"
    df = spark.createDataFrame(ROWS, schema)
    first, second = spark.createDataFrame(ROWS[:3], schema), spark.createDataFrame(ROWS[3:], schema)

    def fold(frame):
        return frame.groupBy("sym").agg(*[p.fold.alias(p.name) for p in parts])
    old = fold(first).select("sym", *[F.col(p.name).alias("o" + p.name) for p in parts])
    merged = fold(second).join(old, "sym", "full_outer").select(
        "sym", *[backend.merge(p.how, F.col(p.name), F.col("o" + p.name)).alias(p.name) for p in parts])
    whole = fold(df)
    values = output_values(element_from_json(element), spec)
    return ({r[0]: tuple(r[1:]) for r in merged.select("sym", *values[1:]).collect()},
            {r[0]: tuple(r[1:]) for r in whole.select("sym", *values[1:]).collect()})


def _same(a, b):
    return all(x == y or (isinstance(x, float) and isinstance(y, float)
                          and (math.isclose(x, y) or (math.isnan(x) and math.isnan(y))))
               for x, y in zip(a, b))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(CALLS), min_size=1, max_size=4))
def test_the_checker_accepts_what_spark_builds_and_merged_batches_give_the_whole(spark, tmp_path_factory,
                                                                                calls):
    element, plan = _plan(tmp_path_factory.mktemp("agg"), calls)
    typed = plan_from_json(plan)
    spec = native_aggregation(typed.element("a"), typed)
    assert (spec is not None) == _spark_builds(element), calls
    if spec is None:
        return
    merged, whole = _batches_merged(spark, spec, element)
    assert merged.keys() == whole.keys() == {"A", "B", "C"}
    for sym in whole:
        assert _same(merged[sym], whole[sym]), (calls, sym, merged[sym], whole[sym])


@pytest.mark.parametrize("fn", ["median", "first", "vwap"])
def test_an_aggregate_the_native_path_lacks_is_refused_by_both(fn):
    with pytest.raises(Unsupported, match=fn):
        aggregate_call(Aggregate("__agg0", fn, (), False), "s")
    with pytest.raises(Unsupported, match=fn):
        lower_aggregate(0, fn, "px", SparkAggregation())
