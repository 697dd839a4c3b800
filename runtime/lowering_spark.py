"""The Spark backends of the compiler's lowerings (ccl/plan/lowering/): the same walks that decide
whether something takes a fast path, building Spark Columns.

:func:`condition_column` is a native stream's WHERE (the plan's ``filter``) as a Spark Column: the
walk of ccl/plan/lowering/condition.py, which the planner ran to accept it
(``ccl.plan.physical.condition_kind``), with :class:`SparkCondition` building each piece.
"""
from __future__ import annotations

from typing import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from ccl.plan.lowering.condition import lower_where
from ccl.syntax import nodes as n

from .types import column


class SparkCondition:
    """Builds the pieces of a condition as Spark Columns (Spark's comparisons and its three-valued
    AND/OR/NOT are SPLASH's on the subset the walk accepts)."""

    def literal(self, value: object, kind: str) -> Column:
        return F.lit(value)

    def column(self, name: str, kind: str) -> Column:
        return column(name)

    def not_(self, operand: Column) -> Column:
        return ~operand

    def true_test(self, operand: Column) -> Column:
        return F.coalesce(operand, F.lit(False))

    def logic(self, op: str, left: Column, right: Column) -> Column:
        return left & right if op == "and" else left | right

    def compare(self, op: str, left: Column, right: Column) -> Column:
        if op == "=":
            return left == right
        if op in ("!=", "<>"):
            return left != right
        return {"<": left.__lt__, "<=": left.__le__, ">": left.__gt__, ">=": left.__ge__}[op](right)


def condition_column(expr: n.Node, alias: str, types: Mapping[str, str]) -> Column:
    """A native stream's WHERE (a tree, over the columns of ``alias`` of CCL ``types``) as a
    Spark Column; raises ccl.plan.lowering.Unsupported when it is outside the subset (a plan whose
    ``filter`` the planner did not accept)."""
    return lower_where(expr, alias, types, SparkCondition())
