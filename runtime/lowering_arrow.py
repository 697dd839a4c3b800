"""The Arrow backend of the compiler's condition lowering (ccl/plan/lowering/condition.py): a
native stream's WHERE evaluated over an Arrow table with pyarrow.compute, for a small batch held
on the driver (runtime/arrow_frames.py), by the same walk that builds its Spark Column
(runtime/lowering_spark.py) and that the planner ran to accept it.

Spark's comparisons and three-valued logic are Arrow's Kleene functions on the subset the walk
accepts, except for floating-point NaN: Spark takes NaN as equal to itself and greater than any
number, IEEE (and Arrow) as unordered. A float column holding a NaN in the batch makes
:func:`condition_mask` answer None, and the caller takes Spark's expressions.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ccl.plan.lowering.condition import lower_where
from ccl.syntax import nodes as n


class _HasNaN(Exception):
    """A float column of the batch holds a NaN (Spark and Arrow order it differently)."""


class ArrowCondition:
    """Builds the pieces of a condition as Arrow arrays (or scalars) over ``table``."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def literal(self, value: object, kind: str) -> Any:
        return pa.scalar(value, pa.float64() if kind == "float" else None)

    def column(self, name: str, kind: str) -> Any:
        values = self.table.column(name)
        if kind == "float" and pc.any(pc.is_nan(values)).as_py():
            raise _HasNaN(name)
        return values

    def not_(self, operand: Any) -> Any:
        return pc.invert(operand)

    def true_test(self, operand: Any) -> Any:
        return pc.fill_null(operand, False)

    def logic(self, op: str, left: Any, right: Any) -> Any:
        return (pc.and_kleene if op == "and" else pc.or_kleene)(left, right)

    def compare(self, op: str, left: Any, right: Any) -> Any:
        fn = {"=": pc.equal, "!=": pc.not_equal, "<>": pc.not_equal, "<": pc.less,
              "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}[op]
        return fn(left, right)


def condition_mask(expr: n.Node, alias: str, types: Mapping[str, str], table: pa.Table
                   ) -> Optional[pa.Array]:
    """Whether each row of ``table`` passes the WHERE ``expr`` (a tree, over the columns of
    ``alias`` of CCL ``types``): true, or false for false and null; None when a float column
    holds a NaN (see the module's docstring)."""
    try:
        built = lower_where(expr, alias, types, ArrowCondition(table))
    except _HasNaN:
        return None
    if isinstance(built, pa.Scalar):
        built = pa.array([built.as_py()] * table.num_rows, pa.bool_())
    mask = pc.fill_null(built, False)
    return mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
