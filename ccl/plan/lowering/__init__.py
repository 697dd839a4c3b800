"""One lowering per fast path: a walk that decides what a fast path supports and calls a
*backend* to build each piece of it (docs/plan.md, "Lowerings").

The compiler runs a walk with a backend that builds nothing, to decide and record why not; the
runtime runs the very same walk with a backend that builds Spark Columns (or the columnar kernel's
parts), so that the checker and the translator cannot disagree. These modules import neither
Spark nor the rest of the compiler: the runtime may import them (tests/test_layers.py).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional


class Unsupported(Exception):
    """The construct is outside the fast path's subset; the message says why."""


def plain_column(expr: object, alias: str) -> Optional[str]:
    """The column name when ``expr`` (plan JSON) is ``alias.column``."""
    if not isinstance(expr, Mapping) or expr.get("node") != "FieldAccess":
        return None
    base = expr.get("base") or {}
    if base.get("node") != "Var" or base.get("name", {}).get("name") != alias:
        return None
    return expr["field"]["name"]


class Nothing:
    """The checker's backend of every lowering: each piece it is asked to build is None (the walk
    alone decides what is supported)."""

    def __getattr__(self, name: str) -> Any:
        return _nothing


def _nothing(*args: object) -> None:
    return None
