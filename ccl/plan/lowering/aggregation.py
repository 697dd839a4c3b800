"""The lowering of a native stream aggregation's aggregates to Spark aggregates
(runtime/native_agg.py).

A native aggregation folds each micro-batch into *partials* per (instance, group) with Spark's
group-by, merges them into the group's partials of the earlier batches, and reads each
aggregate's value off its group's partials. :data:`PARTIALS` says which aggregates lower and
into which partials; :func:`aggregate_call` reads one aggregate of the typed plan (an
:class:`~ccl.plan.model.Aggregate`, its arguments trees) and :func:`lower_aggregate` walks it, or
says why it does not lower, and has an :class:`AggregationBackend` build its partials over a
batch, their merging and its value. The compiler's checker
(``ccl.plan.physical.native_aggregation``) builds nothing; the runtime's (runtime/native_agg.py)
builds Spark Columns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Mapping, Optional, Protocol, TypeVar

from ...syntax import nodes as n
from ..model import Aggregate
from . import Unsupported, plain_column

C = TypeVar("C")

# The aggregates that lower, and the partials each is read off: how each partial folds a batch's
# rows and merges with the earlier batches' (max, min, sum: the same; count: a sum of counts).
PARTIALS: dict[str, tuple[str, ...]] = {"count": ("count",), "sum": ("sum",), "min": ("min",),
                                        "max": ("max",), "avg": ("sum", "count")}
NATIVE_AGGREGATES = tuple(PARTIALS)
_PREFIX = {"max": "__m", "min": "__m", "sum": "__s", "count": "__c"}


class AggregationBackend(Protocol[C]):
    """What builds the pieces of an aggregate :func:`lower_aggregate` accepts."""

    def partial(self, how: str, column: Optional[str]) -> C:
        """``how`` (max, min, sum, count) of the source's ``column`` over a batch's rows of a group
        (``count`` of no column: the rows)."""

    def merge(self, how: str, new: C, old: C) -> C:
        """A batch's partial merged with the earlier batches' (either may be null)."""

    def read(self, name: str) -> C:
        """The partial column ``name`` of a frame of partials."""

    def value(self, fn: str, parts: Mapping[str, C]) -> C:
        """The aggregate ``fn``'s value from its partials (``parts``: by how they fold)."""


@dataclass(frozen=True)
class Partial(Generic[C]):
    """One partial of an aggregate: its column name, how it folds and merges, and its fold over a
    batch as the backend built it."""

    name: str
    how: str
    fold: C


@dataclass(frozen=True)
class LoweredAggregate(Generic[C]):
    """An aggregate's partials and its value read off them (both built by the backend)."""

    fn: str
    column: Optional[str]
    partials: list[Partial[C]]
    value: C


def aggregate_call(agg: Aggregate, alias: str) -> tuple[str, Optional[str]]:
    """``(fn, column)`` of an aggregate call of a select over the columns of ``alias``, or
    :class:`Unsupported`: one of :data:`NATIVE_AGGREGATES` (not DISTINCT) of one plain column, or
    ``count(*)``."""
    args = [x for x in agg.args if not isinstance(x, n.Star)]  # count(*)
    fn = agg.fn
    if fn not in PARTIALS:
        raise Unsupported(f"the aggregate {fn}")
    if agg.distinct:
        raise Unsupported(f"{fn}(DISTINCT ...)")
    if len(args) > 1 or (not args and fn != "count"):
        raise Unsupported(f"{fn}() of {len(args)} arguments")
    col = plain_column(args[0], alias) if args else None
    if args and col is None:
        raise Unsupported(f"{fn}() of an expression")
    return fn, col


def lower_aggregate(index: int, fn: str, column: Optional[str],
                    backend: AggregationBackend[C]) -> LoweredAggregate[C]:
    """The ``index``-th aggregate of a native aggregation, ``fn`` of the source's ``column`` (None:
    of the rows), as ``backend`` builds it; or :class:`Unsupported`."""
    hows = PARTIALS.get(fn)
    if hows is None:
        raise Unsupported(f"the aggregate {fn}")
    partials = [Partial(f"{_PREFIX[how]}{index}", how, backend.partial(how, column)) for how in hows]
    value = backend.value(fn, {p.how: backend.read(p.name) for p in partials})
    return LoweredAggregate(fn, column, partials, value)
