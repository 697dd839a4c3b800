"""The lowering of a native stream's WHERE (a tree of the typed plan) to a Spark Column.

The subset is the one whose Spark meaning is SPLASH's meaning: plain columns of the source and
literals of integer/long/float/string/boolean, compared (numbers with numbers, strings with
strings, booleans with booleans: SPLASH compares as Spark does, NaN included) and combined with
AND/OR/NOT (both three-valued), and a splitter branch's test ``CASE WHEN c THEN true ELSE false
END`` (null is false). :func:`lower_condition` walks an expression, refuses what is outside the
subset with the reason, and has a :class:`ConditionBackend` build each accepted piece: the
compiler's checker (``ccl.plan.physical.condition_kind``) builds nothing, the runtime's
(runtime/lowering_spark.py) builds Spark Columns.
"""
from __future__ import annotations

from typing import Mapping, Optional, Protocol, TypeGuard, TypeVar

from ...syntax import nodes as n
from . import Nothing, Unsupported, plain_column

C = TypeVar("C")

COMPARISONS = ("=", "!=", "<>", "<", "<=", ">", ">=")
NUMBERS = ("integer", "long", "float")
COMPARABLE = NUMBERS + ("string", "boolean")


class ConditionBackend(Protocol[C]):
    """What builds the pieces of a condition :func:`lower_condition` accepts."""

    def literal(self, value: object, kind: str) -> C:
        """A literal of ``kind`` (one of :data:`COMPARABLE`)."""

    def column(self, name: str, kind: str) -> C:
        """The source's column ``name`` (of ``kind``)."""

    def not_(self, operand: C) -> C:
        """Three-valued NOT."""

    def true_test(self, operand: C) -> C:
        """True when ``operand`` is true, false when it is false or null."""

    def logic(self, op: str, left: C, right: C) -> C:
        """Three-valued ``and`` / ``or``."""

    def compare(self, op: str, left: C, right: C) -> C:
        """A comparison (:data:`COMPARISONS`; null when either side is)."""


_TRUE, _FALSE = n.Literal("boolean", True), n.Literal("boolean", False)


def is_true_test(expr: n.Node) -> TypeGuard[n.Case]:
    """Whether ``expr`` is ``CASE WHEN c THEN true ELSE false END`` (true when c is true, false when
    it is false or null: a splitter branch's test)."""
    return (isinstance(expr, n.Case) and expr.subject is None and len(expr.whens) == 1
            and expr.whens[0].then == _TRUE and expr.default == _FALSE)


def lower_condition(expr: Optional[n.Node], alias: str, types: Mapping[str, str],
                    backend: ConditionBackend[C]) -> tuple[str, C]:
    """``(kind, built)`` of ``expr`` (a tree) over the columns of ``alias`` (``types``: each
    column's CCL type), or :class:`Unsupported` with the reason it is outside the subset."""
    if not isinstance(expr, n.Node):
        raise Unsupported("no expression")
    if isinstance(expr, n.Literal):
        if expr.kind not in COMPARABLE:
            raise Unsupported(f"a {expr.kind} literal")
        return expr.kind, backend.literal(expr.value, expr.kind)
    if isinstance(expr, n.FieldAccess):
        col = plain_column(expr, alias)
        if col is None:
            raise Unsupported("a field of something other than the source row")
        kind = types.get(col)
        if kind not in COMPARABLE:
            raise Unsupported(f"column {col} of type {kind}")
        return kind, backend.column(col, kind)
    if isinstance(expr, n.Unary) and expr.op == "not":
        return "boolean", backend.not_(lower_where(expr.operand, alias, types, backend))
    if is_true_test(expr):
        return "boolean", backend.true_test(lower_where(expr.whens[0].when, alias, types, backend))
    if isinstance(expr, n.Binary):
        op = expr.op
        if op in ("and", "or"):
            left = lower_where(expr.left, alias, types, backend)
            return "boolean", backend.logic(op, left, lower_where(expr.right, alias, types, backend))
        if op in COMPARISONS:
            lkind, left = lower_condition(expr.left, alias, types, backend)
            rkind, right = lower_condition(expr.right, alias, types, backend)
            if lkind != rkind and not (lkind in NUMBERS and rkind in NUMBERS):
                raise Unsupported(f"a comparison of {lkind} with {rkind}")
            return "boolean", backend.compare(op, left, right)
        raise Unsupported(f"the operator {op}")
    raise Unsupported(f"a {type(expr).__name__} expression")


def lower_where(expr: Optional[n.Node], alias: str, types: Mapping[str, str],
                backend: ConditionBackend[C]) -> C:
    """:func:`lower_condition` of a WHERE: ``expr`` must be a boolean."""
    kind, built = lower_condition(expr, alias, types, backend)
    if kind != "boolean":
        raise Unsupported(f"a {kind} used as a condition")
    return built


def why_not_condition(expr: Optional[n.Node], alias: str,
                      types: Mapping[str, str]) -> Optional[str]:
    """None when ``expr`` is a condition in the subset, else why not."""
    try:
        lower_where(expr, alias, types, Nothing())
    except Unsupported as exc:
        return str(exc)
    return None
