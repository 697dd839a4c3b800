"""One lowering of a custom partition function (ccl/plan/lowering/partition.py): the compiler's
checker (``why_not_compilable``, whose reason the plan records) accepts exactly the blocks the
runtime's Spark backend (runtime/partition_fn.py) builds, refusing the others with the same
reason, and what it builds gives the SPLASH interpreter's instance on every row.

The blocks: tests/test_partition_fn_spark.py's generator of compilable blocks read over rows of
several column kinds (so that some no longer type: a string compared with a number, a float
returned, a column of a date), the shared SPLASH block strategy (tests/strategies.py), and the
custom partition functions of the project corpus, as planned.
"""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies
from ccl.plan.lowering.partition import column_kinds as plan_kinds
from ccl.plan.model import Column
from ccl.plan.partition_functions import why_not_compilable
from ccl.splash.interpreter import PartitionFunction
from ccl.splash.types import scalar
from ccl.syntax import nodes as n
from ccl.syntax.printer import to_ccl
from planned import plan_json
from runtime.partition_fn import NotCompilable, column_kinds, compile_custom
from runtime.types import struct
from test_partition_fn_spark import INT_MAX, INT_MIN, SOURCE, TARGET, blocks

COUNT_NAME = f"{TARGET}_partitions"
ROOT = Path(__file__).resolve().parent.parent

# (CCL columns, rows): the generated blocks read columns s, u, i, j
SCHEMAS = [
    ([["s", "string"], ["u", "string"], ["i", "integer"], ["j", "integer"]],
     [("a", "", 7, None), (None, "日本", INT_MAX, -1), ("Z", None, INT_MIN, 0), ("", " x ", None, 255)]),
    ([["s", "string"], ["u", "integer"], ["i", "long"], ["j", "float"]],
     [("a", 3, 2**40, 1.5), (None, None, -1, float("nan")), ("é", -7, None, None), ("", 0, 0, -0.0)]),
    ([["s", "boolean"], ["u", "string"], ["i", "interval"], ["j", "date"]],
     [(True, "x", 10, None), (None, None, None, None), (False, "", -3, None)]),
    ([["s", "money(2)"], ["u", "string"], ["i", "integer"], ["j", "long"]],
     [(None, "b", 1, 2), (None, None, None, None), (None, "c", -5, 2**33)]),
]


def _lowering(block, kinds, count):
    """(the checker's reason, the Spark backend's Column or its reason) for ``block``."""
    why = why_not_compilable(block, SOURCE, kinds, COUNT_NAME)
    try:
        return why, compile_custom(block, SOURCE, TARGET, count, kinds), None
    except NotCompilable as exc:
        return why, None, str(exc)


def _check(spark, block_list, columns, rows, count):
    df = spark.createDataFrame(rows, struct(columns))
    kinds = column_kinds(df.schema)
    # the checker sees the columns as the runtime does
    assert kinds == plan_kinds([Column(name, ctype) for name, ctype in columns])
    built = []
    for block in block_list:
        why, col, refused = _lowering(block, kinds, count)
        assert (why is None) == (col is not None), (to_ccl(block), why, refused)
        assert why == refused, to_ccl(block)
        if col is not None:
            built.append((block, col))
    if not built:
        return 0
    result = df.select("*", *[c.alias(f"b{k}") for k, (_, c) in enumerate(built)]).collect()
    types = {c: scalar(kind) for c, kind in kinds.items()}
    names = [c for c, _ in columns]
    for k, (block, _) in enumerate(built):
        fn = PartitionFunction(block, SOURCE, TARGET, count, column_types=types)
        for spark_row in result:
            row = {c: spark_row[c] for c in names}
            assert spark_row[f"b{k}"] == fn.assign(row)[0], (to_ccl(block), row, count)
    return len(built)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(blocks(), min_size=20, max_size=20), st.sampled_from(SCHEMAS), st.integers(1, 7))
def test_generated_blocks_over_rows_of_several_kinds(spark, block_list, schema, count):
    _check(spark, block_list, *schema, count)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(strategies.blocks, min_size=30, max_size=30))
def test_any_splash_block_is_refused_or_built_alike(spark, block_list):
    _check(spark, block_list, *SCHEMAS[0], 3)


def test_type_refusals_are_the_checkers_and_the_backends():
    def block(ret):
        return n.Block([n.Return(ret)])

    def field(col):
        return n.FieldAccess(n.Var(n.Ident(SOURCE)), n.Ident(col))
    kinds = {"s": "string", "i": "integer", "f": "float"}
    cases = {
        "comparison of string with integer":
            n.Case(None, [n.WhenThen(n.Binary("=", field("s"), field("i")), n.Literal("integer", 1))], None),
        "the block returns float": field("f"),
        "column 'd' of an unsupported type": field("d"),
        "the name 'g'": n.Var(n.Ident("g")),
        "abs() of a string": n.Call(n.Ident("abs"), [field("s")]),
    }
    for reason, ret in cases.items():
        why, col, refused = _lowering(block(ret), kinds, 3)
        assert why == refused == reason and col is None


def _corpus():
    paths = sorted(ROOT.glob("projects/*/*.ccl")) + sorted(ROOT.glob("tests/projects/*/*.ccl"))
    return [p for p in paths if "{" in p.read_text(encoding="utf-8", errors="replace")]


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_the_corpus_partition_functions(spark, path):
    plan, _ = plan_json(str(path))
    if plan is None:
        pytest.skip("does not plan on its own")
    by_name = {e["name"]: e for e in plan["elements"]}
    for e in plan["elements"]:
        for partition in (e.get("partition"), e.get("module_partition")):
            for spec in (partition or {}).get("specs", []):
                if spec["method"] != "custom" or spec.get("block") is None:
                    continue
                schema = struct(by_name[spec["input"]]["columns"])
                var = partition["partitions_var"]
                try:
                    compile_custom(n.from_json(spec["block"]), spec.get("as") or spec["input"],
                                   var[:-len("_partitions")], partition["count"], column_kinds(schema))
                    refused = None
                except NotCompilable as exc:
                    refused = str(exc)
                assert spec["why"] == refused and spec["compiled"] == (refused is None), e["name"]
