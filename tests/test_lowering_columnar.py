"""One lowering of a stream aggregation to the columnar kernel (ccl/plan/lowering/columnar.py):
the compiler's checker (``ccl.plan.physical.columnar_aggregation``) takes exactly the
aggregations the kernel (runtime/engine/columnar.py) builds itself for, in the mode it records;
the kernel refuses (ValueError, with the walk's reason) every aggregation the checker does not take.
tests/test_engine_columnar.py compares the kernel's results with the engine's row by row.

The aggregations: those of tests/test_engine_columnar.py and tests/test_physical.py, and ones the
kernel cannot run (impure functions, a join, a KEEP, a GROUP ORDER BY, a plain column of a type
the engine does not read as Arrow gives it shown row by row), each with and without a reader of
its changes one by one.
"""
from __future__ import annotations

import json

import pytest

from ccl.plan.codec import plan_from_json
from ccl.plan.lowering import Unsupported
from ccl.plan.lowering import Nothing
from ccl.plan.lowering.columnar import lower_columnar
from ccl.plan.physical import changes_observed, columnar_aggregation
from ccl.splash.functions_data import FUNCTIONS
from planned import plan_json, typed_parts
from runtime.engine.columnar import ColumnarAggregation
from runtime.engine.element import Engine
from runtime.engine.flex import make_engine
from runtime.processor import BucketRun
from test_engine_columnar import OBSERVED, QUERIES, ROW_QUERIES, SOURCE

OTHERS = {
    "a long shown as it is": "SELECT S.k, S.n, count(*) c FROM S GROUP BY S.k",
    "a long group column": "SELECT S.n, sum(S.p) s FROM S GROUP BY S.n",
    "an impure item": "SELECT S.k, count(*) c, getrowid(S) r FROM S GROUP BY S.k",
    "a now() in WHERE": "SELECT S.k, count(*) c FROM S WHERE now() > 0 GROUP BY S.k",
    "a key that is no group": ("SELECT S.k, S.v, count(*) c FROM S GROUP BY S.k",
                               "PRIMARY KEY (k, v)"),
    "keep rows": ("SELECT S.k, count(*) c FROM S GROUP BY S.k", "PRIMARY KEY DEDUCED KEEP 3 ROWS"),
    "group order by": "SELECT S.k, last(S.v) l FROM S GROUP ORDER BY S.p GROUP BY S.k",
    "no aggregation": ("SELECT S.k, S.v FROM S", "PRIMARY KEY (k)"),
    "distinct": ("SELECT S.k, count(distinct S.v) c, sum(distinct S.p) s, max(distinct S.v) m FROM S "
                 "GROUP BY S.k"),
}
CASES = [(q, False) for q in list(QUERIES.values()) + list(OTHERS.values())] + \
        [(q, True) for q in list(ROW_QUERIES.values()) + list(QUERIES.values()) + list(OTHERS.values())]


def _plan(tmp_path, query, observed):
    text, key = (query, "PRIMARY KEY DEDUCED") if isinstance(query, str) else query
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W {key} AS {text};\n" + (OBSERVED if observed else ""))
    # (per-instance: a batch-mode aggregation of a stream would otherwise run natively)
    plan, diags = plan_json(str(path), native_operators=False)
    assert plan is not None, [str(d) for d in diags]
    return plan, next(e for e in plan["elements"] if e["name"] == "W")


@pytest.mark.parametrize("query, observed", CASES, ids=lambda x: str(x)[:40])
def test_the_checker_takes_what_the_kernel_builds(tmp_path, query, observed):
    plan, element = _plan(tmp_path, query, observed)
    typed = plan_from_json(plan)
    mode = columnar_aggregation(typed.element("W"), typed)
    assert (changes_observed("W", typed) is not None) == observed
    if mode is not None:
        assert mode == ("rows" if observed else "batch")
        run = BucketRun(json.dumps(plan), "W")
        assert run.columnar is not None and run.columnar.per_row == (mode == "rows")
        return
    # the kernel, built for this element in the mode the checker would have given, refuses it
    element["physical"]["columnar"] = "rows" if observed else "batch"
    built = typed_parts(element, plan)
    engine = make_engine(*built, 0)
    if not isinstance(engine, Engine) or engine.declared is not None:
        return  # (the processor builds no kernel for it either)
    with pytest.raises(ValueError, match="not a stream aggregation the columnar path runs"):
        ColumnarAggregation(engine, built[1])
    with pytest.raises(Unsupported):
        lower_columnar(*built, observed, FUNCTIONS, Nothing())


def test_a_plain_column_shown_row_by_row_must_be_read_as_arrow_gives_it(tmp_path):
    """A long column shown as it is: batch mode takes it (the engine's output row), rows mode does
    not (the kernel reads plain items off Arrow; the checker used to take it and the kernel to
    refuse it when the run started)."""
    query = OTHERS["a long shown as it is"]
    typed = plan_from_json(_plan(tmp_path, query, False)[0])
    assert columnar_aggregation(typed.element("W"), typed) == "batch"
    typed = plan_from_json(_plan(tmp_path, query, True)[0])
    assert columnar_aggregation(typed.element("W"), typed) is None
    with pytest.raises(Unsupported, match="one by one"):
        lower_columnar(typed.element("W"), typed, True, FUNCTIONS, Nothing())


def test_the_folds_the_kernel_takes_are_the_walks(tmp_path):
    plan = _plan(tmp_path, OTHERS["distinct"], False)[0]
    typed = plan_from_json(plan)
    lowered = lower_columnar(typed.element("W"), typed, False, FUNCTIONS, Nothing())
    # count(distinct) and sum(distinct) by the engine's add; max of distinct values is max
    assert lowered.folds == [None, None, "integer"]
    assert BucketRun(json.dumps(plan), "W").columnar.kinds == lowered.folds


@pytest.mark.parametrize("group, mode", [("S.v + 1.0d1", "batch"), ("S.v + 1.00d2", None)])
def test_a_key_is_its_group_by_expression_as_the_plan_writes_it(tmp_path, group, mode):
    """The key column's expression must be the GROUP BY's as the plan writes it: a money literal
    of another scale is another expression (the trees' equality alone would take it)."""
    query = (f"SELECT S.v + 1.0d1 g, count(*) c FROM S GROUP BY {group}", "PRIMARY KEY (g)")
    typed = plan_from_json(_plan(tmp_path, query, False)[0])
    assert columnar_aggregation(typed.element("W"), typed) == mode
    if mode is None:
        with pytest.raises(Unsupported, match="its key is not its GROUP BY"):
            lower_columnar(typed.element("W"), typed, False, FUNCTIONS, Nothing())
