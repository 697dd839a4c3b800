"""Which custom partition functions run as one Spark expression, and which need the interpreter.

The rule is the walk of ccl/plan/lowering/partition.py, the one the runtime builds the Spark
expression with (runtime/partition_fn.py): a block compiles when it is straight-line code
(declarations, assignments to local variables, IF/ELSE, nested blocks, RETURN) over scalar values of
kinds that fit, using only the operators and built-ins whose Spark equivalents have the
interpreter's exact semantics (``COMPILABLE_FUNCTIONS``), returning an integer. Anything else
(loops, containers, records, side effects, integer division, other built-ins, columns of other
types) runs the SPLASH interpreter in an Arrow UDF.
"""
from __future__ import annotations

from typing import Mapping, Optional

from ..syntax import nodes as n
from .lowering import Nothing, Unsupported
from .lowering.partition import (COMPILABLE_FUNCTIONS, COMPILABLE_OPERATORS, SCALAR_TYPES,
                                 column_kinds, lower_partition_function)

__all__ = ["COMPILABLE_FUNCTIONS", "COMPILABLE_OPERATORS", "SCALAR_TYPES", "column_kinds",
           "why_not_compilable"]


def why_not_compilable(block: n.Block, source: str, columns: Mapping[str, str],
                       count_name: str) -> Optional[str]:
    """None when ``block`` (reading the row as ``source`` and the partition count as
    ``count_name``) compiles to a Spark expression over a row of ``columns`` (name to kind:
    :func:`column_kinds` of the input's columns), else the first reason it does not."""
    try:
        lower_partition_function(block, source, count_name, 1, columns, Nothing())
    except Unsupported as exc:
        return str(exc)
    return None
