"""The typed plan (docs/plan.md): what the compiler hands the runtime, as frozen dataclasses.

Expressions and SPLASH code are syntax trees (:mod:`ccl.syntax.nodes`), decoded once by
:mod:`ccl.plan.codec`. The physical decisions (:class:`Physical`) are made by the compiler
(:mod:`ccl.plan.decisions`) and stored here, so the runtime reads them and never recomputes them.
This module imports nothing of the parser, the analysis or the planner.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from ..syntax import nodes as n

PLAN_FORMAT = "ccl-plan"
PLAN_VERSION = 4

# The columnar kernels a plan may name (``Physical.kernel``; runtime/engine/kernels/__init__.py
# KERNELS has one class per name): a stream aggregation (runtime/engine/columnar.py), an
# aggregation of a window or delta stream (runtime/engine/kernels/window_agg.py), a stream joined
# with windows (kernels/join.py), a window with a row-count KEEP over a stream (kernels/keep.py), a
# stream selecting from one stream without a join (kernels/join.py with no window), a window or
# delta stream projecting or filtering one window or delta stream (kernels/window_select.py), a
# stream defined by a UNION of selects each from one stream (kernels/union.py), a window or delta
# stream joining windows (kernels/window_join.py), a window or delta stream defined by a UNION of
# selects each from one window, delta stream or stream (kernels/window_union.py).
KERNELS = ("aggregation", "window_aggregation", "join", "keep", "select", "window_select", "union",
           "window_join", "window_union")

# The kind an element has for the elements that read it: an error stream is a stream (inserts
# only, no key); a reference, whose rows come from a file bound to it, is a window keyed by its
# PRIMARY KEY.
READ_AS = {"error stream": "stream", "reference": "window"}

# The two paths of docs/runtime.md.
NATIVE = "native"
PER_INSTANCE = "per-instance"

Expr = n.Node


@dataclass(frozen=True, slots=True)
class Column:
    """An element column: its name and CCL type text (``integer``, ``money(2)``, ...)."""

    name: str
    type: str


@dataclass(frozen=True, slots=True)
class Keep:
    """A KEEP clause: ``kind`` is rows, every_rows, time, every_time, all or last."""

    kind: str
    count: Optional[int] = None
    millis: Optional[int] = None
    per: tuple[str, ...] = ()
    slack: Optional[int] = None


@dataclass(frozen=True, slots=True)
class Aging:
    """``AGES EVERY millis SET column times TIMES FROM start``."""

    millis: int
    column: str
    times: int
    start: Optional[str]


@dataclass(frozen=True, slots=True)
class Autogenerate:
    """The AUTOGENERATE columns of an input element and their start value."""

    columns: tuple[str, ...]
    start: Optional[Expr]


@dataclass(frozen=True, slots=True)
class Source:
    """A FROM source: the alias expressions use, the plan element read, its FROM-level KEEP."""

    alias: str
    element: str
    keep: Optional[Keep]


@dataclass(frozen=True, slots=True)
class Join:
    """The join of the sources before it with the next one (left-deep)."""

    kind: str
    on: Expr


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregate call, replaced by ``Var(name)`` in the select's expressions."""

    name: str
    fn: str
    args: tuple[Expr, ...]
    distinct: bool


@dataclass(frozen=True, slots=True)
class Item:
    """One output column of a select and its expression."""

    name: str
    expr: Expr


@dataclass(frozen=True, slots=True)
class OrderItem:
    """A GROUP ORDER BY item."""

    expr: Expr
    descending: bool


@dataclass(frozen=True, slots=True)
class Matching:
    """``MATCHING [millis : pattern] ON on``."""

    millis: int
    pattern: n.Node
    on: Optional[Expr]


@dataclass(frozen=True, slots=True)
class Select:
    """One SELECT of a query (docs/plan.md "Query")."""

    sources: tuple[Source, ...]
    joins: tuple[Join, ...]
    where: Optional[Expr]
    group_by: tuple[Expr, ...]
    group_filter: Optional[Expr]
    having: Optional[Expr]
    group_order_by: tuple[OrderItem, ...]
    matching: Optional[Matching]
    aggregates: tuple[Aggregate, ...]
    items: tuple[Item, ...]


@dataclass(frozen=True, slots=True)
class Query:
    """The selects of an element: one, or several for a UNION."""

    selects: tuple[Select, ...]


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """How the rows of one input find their instance.

    ``alias`` is the name BY used (``as`` in JSON); ``block`` the custom function's SPLASH block;
    ``compiled`` (custom functions) whether the block compiles to one Spark expression, and if
    not ``why``."""

    input: str
    alias: str
    method: str
    columns: tuple[str, ...]
    block: Optional[n.Node]
    compiled: Optional[bool] = None
    why: Optional[str] = None


@dataclass(frozen=True, slots=True)
class Partition:
    """A PARTITION clause: the instance count, one spec per partitioned input, broadcast inputs."""

    count: int
    partitions_var: str
    specs: tuple[PartitionSpec, ...]
    broadcast: tuple[str, ...]

    def spec_for(self, source: str) -> Optional[PartitionSpec]:
        """The spec that partitions ``source`` (None: the source is broadcast)."""
        return next((s for s in self.specs if s.input == source), None)


@dataclass(frozen=True, slots=True)
class Handler:
    """A Flex handler: ``event`` row (with ``source``), start_transaction, end_transaction or
    every (with ``millis``)."""

    event: str
    source: Optional[str]
    millis: Optional[int]
    body: n.Node


@dataclass(frozen=True, slots=True)
class Flex:
    """A CREATE FLEX: its inputs (plan names and the names its code uses), their KEEPs, its
    DECLARE items and handlers."""

    name: str
    inputs: tuple[str, ...]
    input_names: tuple[str, ...]
    input_keeps: tuple[Optional[Keep], ...]
    declare: tuple[n.Node, ...]
    handlers: tuple[Handler, ...]


@dataclass(frozen=True, slots=True)
class NativeAggregation:
    """A stream aggregation Spark's group-by runs: its source, the alias, the group columns
    ``(item, column)`` and the aggregates ``(item, fn, column or None)``."""

    source: str
    alias: str
    groups: tuple[tuple[str, str], ...]
    aggregates: tuple[tuple[str, str, Optional[str]], ...]


@dataclass(frozen=True, slots=True)
class NativeFilter:
    """A stateless stream Spark expressions run: its source, the alias, the items
    ``(output column, source column)`` and the WHERE (in the subset whose Spark meaning is
    SPLASH's)."""

    source: str
    alias: str
    items: tuple[tuple[str, str], ...]
    where: Optional[Expr]


@dataclass(frozen=True, slots=True)
class Physical:
    """How the runtime executes an element, decided once by the compiler (ccl/plan/decisions.py).

    - ``path``/``why``: :data:`NATIVE` or :data:`PER_INSTANCE`, and why (what ``ccl explain``
      prints);
    - ``native``: ``"input"``, ``"aggregation"``, ``"stream"`` or None (the per-instance path);
    - ``instances``: partition instances (a module PARTITION multiplies);
    - ``uses_time``: a time-based KEEP, AGES or a Flex EVERY (needs timers);
    - ``columnar``: ``"batch"``, ``"rows"`` or None (runtime/engine/columnar.py);
    - ``kernel``: the columnar kernel (one of :data:`KERNELS`) that runs the per-instance element
      a bucket at a time (:func:`ccl.plan.physical.columnar_kernel`; ``aggregation`` or
      ``window_aggregation`` exactly when ``columnar`` is set), or None: the engine runs it row by
      row;
    - ``group_columns``: for a columnar aggregation, the source columns its buckets spread by;
    - ``arrow``: a per-instance element without timers, run in applyInArrow with state files;
    - ``window_store``: its keyed state (window rows and times, aggregate groups) lives in the
      bucket's state store (runtime/state/rows.py) when applyInArrow runs it: an ``arrow``
      element or one with timers, but not a Flex (whose window iterators walk rows in insertion
      order; the store keeps key order);
    - ``fused_consumers``: the elements that run inside this element's batches;
    - ``unrecorded``: an input whose changelog nothing reads (unless the run records inputs);
    - ``project_stage``: may run as a stage of the project's one query (runtime/project_query.py),
      elements with timers included;
    - ``aggregation``/``filter``: the native aggregation's or stream's parts;
    - ``input_adapter``: the name of the input adapter whose files feed the element, if any.
    """

    path: str
    why: str
    native: Optional[str] = None
    instances: int = 1
    uses_time: bool = False
    columnar: Optional[str] = None
    kernel: Optional[str] = None
    group_columns: Optional[tuple[str, ...]] = None
    arrow: bool = False
    window_store: bool = False
    fused_consumers: tuple[str, ...] = ()
    unrecorded: bool = False
    project_stage: bool = False
    aggregation: Optional[NativeAggregation] = None
    filter: Optional[NativeFilter] = None
    input_adapter: Optional[str] = None


@dataclass(frozen=True, slots=True)
class Element:
    """A planned element (docs/plan.md "Elements"); optional parts are None (or empty) when the
    element has none."""

    name: str
    kind: str
    role: str
    file: Optional[str]
    line: Optional[int]
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    keep: Optional[Keep] = None
    autogenerate: Optional[Autogenerate] = None
    input_where: Optional[Expr] = None
    declare: tuple[n.Node, ...] = ()
    query: Optional[Query] = None
    partition: Optional[Partition] = None
    module_partition: Optional[Partition] = None
    stateful: bool = False
    aging: Optional[Aging] = None
    flex: Optional[Flex] = None
    properties: Optional[Mapping[str, Expr]] = None
    error_sources: Optional[tuple[str, ...]] = None
    splitter: Optional[str] = None
    physical: Optional[Physical] = None

    @property
    def is_input(self) -> bool:
        """A CREATE INPUT stream or window (read from files)."""
        return self.role == "input" and self.query is None

    @property
    def read_as(self) -> str:
        """The kind this element has for the elements that read it (:data:`READ_AS`)."""
        return READ_AS.get(self.kind, self.kind)

    def ports(self) -> list[tuple[str, str]]:
        """(alias, source element name) per port, in port order: an input element reads itself,
        a Flex its inputs, a derived element its queries' sources; references and error streams
        have none."""
        if self.is_input:
            return [(self.name, self.name)]
        if self.flex is not None:
            return list(zip(self.flex.input_names, self.flex.inputs))
        if self.query is None:
            return []
        return [(s.alias, s.element) for sel in self.query.selects for s in sel.sources]


@dataclass(frozen=True, slots=True)
class Adapter:
    """An ATTACH ADAPTER with its effective properties (secret ones left out)."""

    name: str
    direction: str
    type: str
    element: str
    group: Optional[str] = None
    property_set: Optional[str] = None
    properties: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Plan:
    """A compiled project: elements in dependency order, adapters, parameters and globals.

    ``native_operators`` records the planning option: False keeps derived elements off Spark's
    native operators (the differential tests run both ways)."""

    project: str
    file: str
    parameters: Mapping[str, object]
    globals: tuple[n.Node, ...]
    elements: tuple[Element, ...]
    adapters: tuple[Adapter, ...]
    native_operators: bool = True

    def element(self, name: str) -> Element:
        """The element called ``name`` (KeyError when there is none)."""
        for e in self.elements:
            if e.name == name:
                return e
        raise KeyError(name)


# --- moves of a checkpoint to other instance counts (ccl/plan/rescale.py, runtime/rescale.py) -----


@dataclass(frozen=True, slots=True)
class HashColumn:
    """A hash column of a move: the output column that holds it as it is, the source column and
    its type (by which Spark's hash places it)."""

    output: str
    source: str
    type: str


@dataclass(frozen=True, slots=True)
class HashPort:
    """How the rows of one source find their instance: its HASH columns and their types;
    ``alias`` the source's alias in a join's select (None for a Flex's input)."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    alias: Optional[str] = None


@dataclass(frozen=True, slots=True)
class JoinMove:
    """The sources of a join, in FROM order: each one's port (None: a broadcast input, whose rows
    every instance holds) and alias."""

    ports: tuple[Optional[HashPort], ...]
    aliases: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FlexVariable:
    """How a Flex variable is keyed by the hash columns: a ``dictionary`` keyed by one hash
    column of ``type``, or an event ``cache`` whose bucket key holds the hash columns at
    ``positions`` (of ``types``)."""

    kind: str
    type: Optional[str] = None
    positions: tuple[int, ...] = ()
    types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FlexMove:
    """How a Flex's state is keyed: the port of each input (in input order), each variable's
    keying, and the output column of each hash column (a window's)."""

    ports: Mapping[str, HashPort]
    vars: Mapping[str, FlexVariable]
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GroupSpread:
    """How the rows of an aggregation whose groups spread over buckets (``by_group``) find their
    bucket: its group columns (source columns, GROUP BY order), their types and the output
    columns (select items) that hold them."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    items: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Move:
    """The move of one element's state from ``before`` to ``after`` instances: where its state
    is (``store``: ``engine``, the per-instance engine's; ``native``, a Spark group-by's
    snapshot; ``none``: nothing kept), its hash columns, and as the element needs: where the
    hash columns sit in an aggregation's group key (``groups``), a join's ports, a Flex's
    keying, and the buckets an aggregation's groups spread over (``spread``, added by the
    runtime, which knows the run's layout)."""

    before: int
    after: int
    store: str
    hash: tuple[HashColumn, ...] = ()
    groups: Optional[tuple[int, ...]] = None
    join: Optional[JoinMove] = None
    flex: Optional[FlexMove] = None
    spread: Optional[GroupSpread] = None
