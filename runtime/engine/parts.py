"""Small readings of the typed plan (``ccl.plan.model``) that several engine modules share.

The engine is built from the typed plan, by attribute, once per element; these helpers give the
shapes its hot paths use (a list of ``(name, type)`` column pairs, a column reference) so that
nothing per row reads the plan.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ccl.plan.lowering.columnar import partitions_var
from ccl.plan.model import Column, Element
from ccl.syntax import nodes as n

__all__ = ["column_pairs", "field_ref", "partitions_variable"]


def column_pairs(columns: Sequence[Column]) -> list[tuple[str, str]]:
    """An element's columns as ``(name, CCL type text)`` pairs, the form the engine keeps (one
    list per engine part, made at construction: runtime.engine.expr caches per list)."""
    return [(c.name, c.type) for c in columns]


def partitions_variable(element: Element) -> dict[str, int]:
    """``{<target>_partitions: its instance count}``, the constant an element's expressions may
    read (the name the PARTITION clause gives, else the element's own; 1 when unpartitioned)."""
    partition = element.partition
    return {partitions_var(element): int(partition.count if partition is not None else 0) or 1}


def field_ref(expr: object) -> Optional[tuple[str, str]]:
    """``(alias, column)`` when ``expr`` is ``alias.column`` (``FieldAccess(Var(alias), column)``),
    else None."""
    if isinstance(expr, n.FieldAccess) and isinstance(expr.base, n.Var):
        return expr.base.name.name, expr.field.name
    return None
