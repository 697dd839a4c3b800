"""One lowering per fast path: a walk that decides what a fast path supports and calls a
*backend* to build each piece of it (docs/plan.md, "Lowerings").

The walks take the typed plan (:mod:`ccl.plan.model`: an ``Element``, a ``Select``, a ``Plan``)
and its expressions as syntax trees (:mod:`ccl.syntax.nodes`), read by attribute and node class.

The compiler runs a walk with a backend that builds nothing, to decide and record why not; the
runtime runs the very same walk with a backend that builds Spark Columns (or the columnar kernel's
parts), so that the checker and the translator cannot disagree. These modules import neither
Spark nor the rest of the compiler (only the plan's types and the syntax trees): the runtime may
import them (tests/test_layers.py).
"""
from __future__ import annotations

from typing import Any, Optional

from ...syntax import nodes as n


class Unsupported(Exception):
    """The construct is outside the fast path's subset; the message says why."""


def plain_column(expr: object, alias: str) -> Optional[str]:
    """The column name when ``expr`` (a tree) is ``alias.column``
    (``FieldAccess(Var(alias), column)``), else None."""
    if (isinstance(expr, n.FieldAccess) and isinstance(expr.base, n.Var)
            and expr.base.name.name == alias):
        return expr.field.name
    return None


class Nothing:
    """The checker's backend of every lowering: each piece it is asked to build is None (the walk
    alone decides what is supported)."""

    def __getattr__(self, name: str) -> Any:
        return _nothing


def _nothing(*args: object) -> None:
    return None
