"""The lowering of a stream aggregation to the columnar kernel (runtime/engine/columnar.py), which
runs it a bucket of rows at a time, a column at a time, on the engine's own state.

:func:`lower_columnar` walks the element: it refuses what the kernel cannot run (with the reason)
and otherwise describes what the kernel is made of: per expression (WHERE, GROUP FILTER, GROUP BY,
aggregate arguments) whether it is read straight off a column or evaluated by the engine's
compiled expression (the *backend* builds each such operand), the select items when each is an
aggregate or a plain column, and per aggregate the NumPy fold it takes. The compiler's checker
(``ccl.plan.physical.columnar_aggregation``) builds nothing; the kernel builds its operands from
the engine's expressions.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any, Generic, Mapping, Optional, Protocol, TypeVar, Union

from ...syntax import nodes as n
from ..model import Element, Keep, Plan
from . import Unsupported, plain_column

C = TypeVar("C")

# Functions whose value depends on more than their arguments (time, counters, the row at hand) or
# that rank a group: an aggregation folded a batch at a time evaluates its select items once per
# group, not once per row, so they would differ.
IMPURE_FUNCTIONS = frozenset(("getdate", "getrowid", "nextval", "now", "random", "rank",
                              "sysbigdatetime", "sysdate", "sysseconddate", "systimestamp",
                              "uniqueval"))
# The nodes an expression folded a group at a time may hold besides columns, variables and calls
# (their parts are checked in turn).
_PURE_NODES = (n.Literal, n.Interval, n.IntervalPart, n.Unary, n.Binary, n.Case, n.WhenThen,
               n.InList, n.Star, n.Cast)

# Column types whose values, as Arrow gives them to Python, the engine's expressions read
# unchanged (runtime.engine.expr: values already in SPLASH form): read straight off the column.
PLAIN_TYPES = ("integer", "float", "string", "boolean")
# The aggregates folded with NumPy, and the column types they fold in.
FAST_AGGREGATES = ("count", "sum", "avg", "min", "max")
NUMPY_TYPES = ("integer", "float")
# DISTINCT changes these (min and max of the distinct values are those of all values).
_DISTINCT_MATTERS = ("count", "sum", "avg")


def pure(expr: n.Node, alias: Union[str, tuple[str, ...]], names: set, builtins: Mapping) -> bool:
    """Whether ``expr`` (a tree) reads only columns of ``alias`` (or of any of several) and
    ``names`` and calls only built-in functions (``builtins``) not in :data:`IMPURE_FUNCTIONS`."""
    if isinstance(expr, n.FieldAccess):
        return any(plain_column(expr, a) is not None for a in ((alias,) if isinstance(alias, str) else alias))
    if isinstance(expr, n.Var):
        return expr.name.name in names
    if isinstance(expr, n.Call):
        fn = str(expr.func.name).lower()
        if fn in IMPURE_FUNCTIONS or fn not in builtins or expr.library:
            return False
        return all(pure(a, alias, names, builtins) for a in expr.args)
    if not isinstance(expr, _PURE_NODES):
        return False
    # (a Cast's type is no expression)
    parts = (expr.expr,) if isinstance(expr, n.Cast) else expr.children()
    return all(pure(p, alias, names, builtins) for p in parts)


def _same(a: object, b: object) -> bool:
    """Whether two trees (or values in them) are the same expression as the plan writes it: node
    equality, and also a money literal's scale and ``Binary.temporal`` (which node equality leaves
    out: ``1.0d1`` equals ``1.00d2``)."""
    if isinstance(a, n.Node) or isinstance(b, n.Node):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in fields(a) if f.name != "span")  # type: ignore[arg-type]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return format(a, "f") == format(b, "f")
    return a is b or a == b


def partitions_var(element: Element) -> str:
    """The name the element's expressions read its partition count by (``<target>_partitions``
    unless its PARTITION clause names it)."""
    return ((element.partition.partitions_var if element.partition is not None else "")
            or f"{element.name.split('.')[-1]}_partitions")


class ColumnarBackend(Protocol[C]):
    """What builds the kernel's operands."""

    def operand(self, role: str, index: tuple[int, ...], column: Optional[str]) -> C:
        """The values of an expression over a bucket's rows: ``role`` is ``where``,
        ``group_filter``, ``group_by`` (``index``: which) or ``argument`` (``index``: aggregate,
        argument); ``column`` is the source column it reads as it is, or None when the engine's
        compiled expression evaluates it."""


@dataclass(frozen=True)
class ColumnarLowering(Generic[C]):
    """What the kernel runs: ``mode`` (``batch``: one change per group per batch; ``rows``: one
    per input row), its source's ``alias``, its operands as the backend built them, the select
    items as ``(name, is_aggregate, aggregate index or column)`` when each is an aggregate or a
    plain column (and there is no HAVING) else None, and per aggregate the NumPy fold
    (``count``, ``integer``, ``float``) or None (the engine's ``add``)."""

    mode: str
    alias: str
    where: Optional[C]
    group_filter: Optional[C]
    group_by: list[C]
    arguments: list[list[C]]
    items: Optional[list[tuple[str, bool, Any]]]
    folds: list[Optional[str]]


# The kinds (as read, READ_AS) of the source a columnar aggregation reads (not a reference, read
# as a window: its rows come from its table, on a port of their own).
COLUMNAR_SOURCES = ("stream", "window", "delta stream")


def timed_stream(keep: Optional[Keep], source: Element) -> bool:
    """Whether a FROM source with ``keep`` reading ``source`` is a stream made a window by a
    sliding time KEEP (``FROM s KEEP 10 SECONDS``, PER or none: a time KEEP ignores it): the
    window aggregation kernel (runtime/engine/kernels/window_agg.py) runs an aggregate over it,
    its rows keyed by sequence number and expired by the batch's time."""
    return keep is not None and keep.kind == "time" and source.read_as == "stream"


def lower_columnar(element: Element, plan: Plan, observed: bool, builtins: Mapping,
                   backend: ColumnarBackend[C]) -> ColumnarLowering[C]:
    """``element`` (of ``plan``, whose elements it looks its source up in) as the columnar kernel
    runs it, in ``rows`` mode when its changes are ``observed`` one by one (else ``batch``), or
    :class:`Unsupported` with why not.

    It must be a window with KEEP ALL (or no KEEP, no AGES, no DECLARE) aggregating one stream,
    window or delta stream (:data:`COLUMNAR_SOURCES`; no join, MATCHING or GROUP ORDER BY, no FROM
    KEEP but a time KEEP on a stream, :func:`timed_stream`; a window's or delta stream's updates
    and deletes, and a time KEEP's expiries, retract: runtime/engine/kernels/window_agg.py), keyed by its GROUP BY expressions (each key
    column is one, and each is a key column), whose expressions read only the source's columns,
    the aggregates and ``<target>_partitions``, and call only built-in functions (``builtins``)
    whose value depends on their arguments alone (not :data:`IMPURE_FUNCTIONS`). In rows mode
    its select items must be aggregates and plain columns of :data:`PLAIN_TYPES`, with no HAVING,
    except under a time KEEP, which is always in rows mode (the window aggregation kernel gives
    the engine's change per event, any select items).
    """
    query = element.query
    if element.kind != "window" or query is None or len(query.selects) != 1:
        raise Unsupported("not a window of one select")
    if (element.flex is not None or element.declare or element.aging is not None
            or (element.keep is not None and element.keep.kind != "all")):
        raise Unsupported("Flex, DECLARE, AGES or a KEEP other than ALL")
    sel = query.selects[0]
    if (len(sel.sources) != 1 or sel.joins or sel.matching is not None
            or sel.group_order_by):
        raise Unsupported("a join, MATCHING or GROUP ORDER BY")
    if not (sel.aggregates or sel.group_by):
        raise Unsupported("no aggregation")
    src = next((e for e in plan.elements if e.name == sel.sources[0].element), None)
    if src is None or src.read_as not in COLUMNAR_SOURCES or src.kind == "reference":
        raise Unsupported("its source is no stream, window or delta stream")
    timed = sel.sources[0].keep is not None
    if timed and not timed_stream(sel.sources[0].keep, src):
        raise Unsupported("a FROM KEEP other than a time KEEP on a stream")
    # the window's key must be the group's: key columns are GROUP BY expressions, all of them, so
    # that no two groups ever show a row under one key (where the engine's order of rows decides)
    items = {it.name: it.expr for it in sel.items}
    keyed = [items.get(k) for k in element.key]
    if (any(not any(_same(e, g) for g in sel.group_by) for e in keyed)
            or any(not any(_same(g, e) for e in keyed) for g in sel.group_by)):
        raise Unsupported("its key is not its GROUP BY")
    alias = sel.sources[0].alias
    aggregates = sel.aggregates
    agg_names = {a.name: i for i, a in enumerate(aggregates)}
    names = set(agg_names) | {partitions_var(element)}
    exprs = ([sel.where, sel.group_filter, sel.having] + list(sel.group_by)
             + [it.expr for it in sel.items] + [a for g in aggregates for a in g.args])
    if not all(pure(e, alias, names, builtins) for e in exprs if e is not None):
        raise Unsupported("an expression reads more than the source's columns or calls an impure function")
    types = {c.name: str(c.type).strip().lower() for c in src.columns}

    def read(expr: object) -> Optional[str]:
        col = plain_column(expr, alias)
        return col if types.get(col) in PLAIN_TYPES else None  # type: ignore[arg-type]

    plain: Optional[list[tuple[str, bool, Any]]] = []
    for item in sel.items:
        expr = item.expr
        if isinstance(expr, n.Var) and expr.name.name in agg_names:
            plain.append((item.name, True, agg_names[expr.name.name]))  # type: ignore[union-attr]
        elif read(expr) is not None:
            plain.append((item.name, False, read(expr)))  # type: ignore[union-attr]
        else:
            plain = None
            break
    if sel.having is not None:
        plain = None
    if observed and plain is None and not timed:
        raise Unsupported("its changes are read one by one, and a select item is neither an "
                          "aggregate nor a plain column, or there is a HAVING")
    arguments, folds = [], []
    for i, agg in enumerate(aggregates):
        args = [a for a in agg.args if not isinstance(a, n.Star)]
        arguments.append([backend.operand("argument", (i, j), read(a)) for j, a in enumerate(args)])
        fn = str(agg.fn).lower()
        kind = types.get(plain_column(args[0], alias)) if len(args) == 1 else None  # type: ignore[arg-type]
        fast = (fn in FAST_AGGREGATES and not (agg.distinct and fn in _DISTINCT_MATTERS)
                and (not args or kind in NUMPY_TYPES or (fn == "count" and kind is not None)))
        folds.append(None if not fast else "count" if not args or fn == "count" else kind)
    return ColumnarLowering(
        # (under a time KEEP every event is its own transaction and gives its own change, which
        # a fold per batch does not: rows mode, observed or not, any select items)
        mode="rows" if observed or timed else "batch", alias=alias,
        where=backend.operand("where", (), read(sel.where)) if sel.where is not None else None,
        group_filter=(backend.operand("group_filter", (), read(sel.group_filter))
                      if sel.group_filter is not None else None),
        group_by=[backend.operand("group_by", (i,), read(e)) for i, e in enumerate(sel.group_by)],
        arguments=arguments, items=plain, folds=folds)
