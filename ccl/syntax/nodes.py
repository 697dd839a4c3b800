"""AST of CCL and SPLASH: typed dataclasses with source spans.

Every node carries a ``span`` (file, line, column of its first token). Spans take no part in equality,
so ``parse(print(tree)) == tree`` compares structure only. Identifiers are ``Ident`` nodes so that later
phases can point a diagnostic at the exact name.
"""
from __future__ import annotations

import contextlib
import gc
import operator
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Callable, Iterator, Optional, Union


@dataclass(frozen=True)
class Span:
    """Where a node starts: file name, 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass
class Node:
    """Base of all nodes."""

    span: Optional[Span] = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> Iterator["Node"]:
        """The direct child nodes, in field order (lists and tuples are flattened)."""
        out: list[Node] = []
        _collect((_CHILD_GETTERS.get(type(self)) or _child_getter(type(self)))(self), out)
        return iter(out)

    def walk(self) -> Iterator["Node"]:
        """This node and all its descendants, depth first (preorder)."""
        # Iterative, with each class's child fields read by one attrgetter: a recursive generator
        # costs a frame per node and level, which made walks a large part of checking a project.
        stack: list[Node] = [self]
        pop, push = stack.pop, stack.append
        getters = _CHILD_GETTERS
        while stack:
            node = pop()
            yield node
            get = getters.get(type(node))
            if get is None:
                get = _child_getter(type(node))
            if get is _NO_CHILDREN:
                continue
            for value in reversed(get(node)):
                if isinstance(value, Node):
                    push(value)
                elif isinstance(value, (list, tuple)):
                    kids: list[Node] = []
                    _collect(value, kids)
                    stack.extend(reversed(kids))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (it is re-enabled after, if it was on).

    Building or analysing a large tree allocates many objects, each allocation burst triggers a
    collection, and each full collection rescans the whole tree (which has no cycles): paused, the
    time stays linear in the size of the project.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def to_json(value: object) -> object:
    """A JSON-ready form of a tree: each node a dict with its class name, its position and its fields."""
    if isinstance(value, Node):
        out: dict[str, object] = {"node": type(value).__name__}
        if value.span is not None:
            out["line"], out["col"] = value.span.line, value.span.col
        for f in fields(value):
            if f.name != "span":
                out[f.name] = to_json(getattr(value, f.name))
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, Decimal):
        return format(value, "f")  # money literals: exact, scale kept
    return value


def from_json(value: object, file: str = "<plan>") -> object:
    """The tree :func:`to_json` wrote (positions come back as spans in ``file``).

    Only classes of this module are built, by name: the data chooses no code to run.
    """
    if isinstance(value, list):
        return [from_json(v, file) for v in value]
    if not isinstance(value, dict) or "node" not in value:
        return value
    cls = _NODE_CLASSES.get(value["node"])
    if cls is None:
        raise ValueError(f"unknown node kind {value['node']!r}")
    kwargs = {f.name: from_json(value[f.name], file) for f in fields(cls)
              if f.name != "span" and f.name in value}
    node = cls(**kwargs)
    if "line" in value:
        node.span = Span(file, value["line"], value.get("col", 1))
    return node


# Fields declared with these types hold no nodes: walks skip them (an Ident has nothing to visit).
_SCALAR_FIELD_TYPES = frozenset({"str", "bool", "int", "Optional[str]", "Optional[bool]", "Optional[int]",
                                 "list[str]", "list[int]"})
_CHILD_GETTERS: dict[type, Callable[[Node], tuple]] = {}


def _NO_CHILDREN(node: Node) -> tuple:
    return ()


def _child_fields(cls: type) -> tuple[str, ...]:
    """The names of the fields of node class ``cls`` that may hold nodes, in field order."""
    return tuple(f.name for f in fields(cls) if f.name != "span" and str(f.type) not in _SCALAR_FIELD_TYPES)


def _child_getter(cls: type) -> Callable[[Node], tuple]:
    """A function giving the values of the fields of a ``cls`` node that may hold nodes (cached)."""
    names = _child_fields(cls)
    if not names:
        get = _NO_CHILDREN
    elif len(names) == 1:
        one = operator.attrgetter(names[0])
        get = lambda node: (one(node),)  # noqa: E731
    else:
        get = operator.attrgetter(*names)
    _CHILD_GETTERS[cls] = get
    return get


def _collect(value: object, out: list[Node]) -> None:
    """Append the nodes in ``value`` (a node, or lists and tuples of them, nested) to ``out``."""
    if isinstance(value, Node):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, Node):
                out.append(item)
            elif isinstance(item, (list, tuple)):
                _collect(item, out)


# --------------------------------------------------------------------------------------------------
# Names, types, intervals
# --------------------------------------------------------------------------------------------------

@dataclass
class Ident(Node):
    """A name as written (case kept: element and column names are case-sensitive)."""

    name: str


@dataclass
class NamedType(Node):
    """A built-in type (`integer`, `money(2)`, `decimal(10,2)`) or a typedef name."""

    name: str  # built-in types are lower-cased; typedef names keep their case
    args: list[int] = field(default_factory=list)


@dataclass
class TypeOf(Node):
    """`typeof(Source)`: the record type of a stream or window."""

    source: Ident


@dataclass
class DictType(Node):
    key: "TypeSpec"
    value: "TypeSpec"


@dataclass
class VectorType(Node):
    element: "TypeSpec"


@dataclass
class RecordField(Node):
    type: "TypeSpec"
    name: Ident


@dataclass
class RecordType(Node):
    """`[integer k; | string v;]`: fields before the bar are the key."""

    key_fields: list[RecordField]
    fields: list[RecordField]
    bar: bool


@dataclass
class IntervalPart(Node):
    amount: int
    unit: str  # canonical: day, hour, minute, second, millisecond, microsecond


@dataclass
class Interval(Node):
    """`3 MINUTES 30 SECONDS`; a bare number is one part in microseconds."""

    parts: list[IntervalPart]

    _MICROS = {"day": 86_400_000_000, "hour": 3_600_000_000, "minute": 60_000_000,
               "second": 1_000_000, "millisecond": 1_000, "microsecond": 1}

    @property
    def microseconds(self) -> int:
        return sum(p.amount * self._MICROS[p.unit] for p in self.parts)


@dataclass
class CacheOption(Node):
    """One option of an eventCache: `10 events`, an interval, `manual`, `coalesce`, `col asc`."""

    kind: str  # events | interval | manual | auto | coalesce | order
    count: Optional[int] = None
    interval: Optional[Interval] = None
    column: Optional[Ident] = None
    descending: bool = False


@dataclass
class EventCacheType(Node):
    """`eventCache(Src[k1, k2], 10 events, coalesce, Price asc)`."""

    source: Ident
    keys: Optional[list[Ident]]
    options: list[CacheOption]


TypeSpec = Union[NamedType, TypeOf, DictType, VectorType, RecordType, EventCacheType]


# --------------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------------

@dataclass
class Literal(Node):
    """kind is one of integer, long, float, money, string, boolean, null.

    A money literal (``10.00d2``) has a Decimal value whose exponent is minus its scale; plan JSON
    holds it as text (``"10.00"``), which is turned back into a Decimal here.
    """

    kind: str
    value: object

    def __post_init__(self) -> None:
        if self.kind == "money" and isinstance(self.value, str):
            self.value = Decimal(self.value)


@dataclass
class Var(Node):
    """A bare name: a column, a source, a variable or a parameter (resolved by analysis)."""

    name: Ident


@dataclass
class FieldAccess(Node):
    """`base.field`, e.g. `priceW.isin` or `rec.price`."""

    base: "Expr"
    field: Ident


@dataclass
class IndexAccess(Node):
    """`base[index]`: dictionary or vector element."""

    base: "Expr"
    index: "Expr"


@dataclass
class WindowFind(Node):
    """`W_stream{record}`: any row of a window whose fields equal the record's (ESP SPLASH)."""

    base: "Expr"
    record: "Expr"


@dataclass
class Star(Node):
    """`*` or `src.*` in a select list, or the argument of `count(*)`."""

    qualifier: Optional[Ident] = None


@dataclass
class Call(Node):
    """A function call; `name` is lower-cased only for keyword-named functions (left, right, ...)."""

    func: Ident
    args: list["Expr"]
    distinct: bool = False  # count(DISTINCT x)
    library: Optional[Ident] = None  # Lib.func(...): a function of a CREATE LIBRARY


@dataclass
class New(Node):
    """`new dictionary(string, integer)`, `new vector(float)`: a fresh, empty container."""

    type: "TypeSpec"


@dataclass
class Cast(Node):
    """`cast(type, expr)`."""

    type: TypeSpec
    expr: "Expr"


@dataclass
class Unary(Node):
    op: str  # '-', '+', 'not'
    operand: "Expr"


@dataclass
class Binary(Node):
    op: str  # or and = != <> < <= > >= like + - * / % ^
    left: "Expr"
    right: "Expr"
    # Set by the analysis when a date-time meets a number in * / % or a comparison: the temporal
    # type (date, timestamp, bigdatetime) whose count of units since the epoch stands for it.
    temporal: Optional[str] = field(default=None, compare=False)


def conjuncts(expr: Optional[Node]) -> list[Node]:
    """The operands of a tree of ANDs (none for no expression): the parts of a join's ON or a
    MATCHING condition that the planner, the rescale check and the engine each read."""
    if expr is None:
        return []
    if isinstance(expr, Binary) and expr.op == "and":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


@dataclass
class InList(Node):
    expr: "Expr"
    items: list["Expr"]
    negated: bool = False


@dataclass
class WhenThen(Node):
    when: "Expr"
    then: "Expr"


@dataclass
class Sequence(Node):
    """`(step; step; value)`: ESP's expression sequence; the steps (assignments ``v := e`` or
    expressions) run in order, then the value is the sequence's."""

    steps: list["Stmt"]
    value: "Expr"


@dataclass
class Case(Node):
    """`CASE [subject] WHEN c THEN v ... [ELSE e] END`."""

    subject: Optional["Expr"]
    whens: list[WhenThen]
    default: Optional["Expr"]


@dataclass
class FieldInit(Node):
    name: Ident
    value: "Expr"


@dataclass
class RecordLit(Node):
    """`[k=1; | v='x';]`: fields before the bar are the key."""

    key_fields: list[FieldInit]
    fields: list[FieldInit]
    bar: bool


Expr = Union[Literal, Var, FieldAccess, IndexAccess, WindowFind, Star, Call, New, Cast, Unary,
             Binary, InList, Case, RecordLit]


# --------------------------------------------------------------------------------------------------
# SPLASH statements
# --------------------------------------------------------------------------------------------------

@dataclass
class Block(Node):
    stmts: list["Stmt"]


@dataclass
class Declarator(Node):
    name: Ident
    init: Optional[Expr] = None


@dataclass
class VarDecl(Node):
    """`integer a := 1, b;`"""

    type: TypeSpec
    declarators: list[Declarator]


@dataclass
class ParamDecl(Node):
    """`PARAMETER integer n := 2;` (value fixed at load time, from the configuration)."""

    type: TypeSpec
    name: Ident
    default: Optional[Expr] = None


@dataclass
class TypeDef(Node):
    type: TypeSpec
    name: Ident


@dataclass
class Param(Node):
    type: TypeSpec
    name: Ident


@dataclass
class FuncDef(Node):
    """A SPLASH function in a DECLARE block."""

    return_type: TypeSpec
    name: Ident
    params: list[Param]
    body: Block


@dataclass
class Assign(Node):
    target: Expr
    value: Expr


@dataclass
class If(Node):
    cond: Expr
    then: "Stmt"
    otherwise: Optional["Stmt"] = None


@dataclass
class While(Node):
    cond: Expr
    body: "Stmt"


@dataclass
class ForIn(Node):
    """`for (var in iterable [where col = expr, ...]) body`; ``where`` only over a window."""

    var: Ident
    iterable: Expr
    body: "Stmt"
    where: list[FieldInit] = field(default_factory=list)


@dataclass
class SwitchCase(Node):
    values: list[Expr]  # empty for `default:`
    stmts: list["Stmt"]


@dataclass
class Switch(Node):
    subject: Expr
    cases: list[SwitchCase]


@dataclass
class Break(Node):
    pass


@dataclass
class Continue(Node):
    pass


@dataclass
class Return(Node):
    value: Optional[Expr] = None


@dataclass
class Exit(Node):
    pass


@dataclass
class OutputStmt(Node):
    """`output rec;` in a Flex handler."""

    value: Expr


@dataclass
class ExprStmt(Node):
    expr: Expr


Stmt = Union[Block, VarDecl, ParamDecl, TypeDef, FuncDef, Assign, If, While, ForIn, Switch, Break,
             Continue, Return, Exit, OutputStmt, ExprStmt]


# --------------------------------------------------------------------------------------------------
# CCL clauses
# --------------------------------------------------------------------------------------------------

@dataclass
class Column(Node):
    name: Ident
    type: TypeSpec


@dataclass
class SchemaName(Node):
    """`SCHEMA name`"""

    name: Ident


@dataclass
class InlineSchema(Node):
    """`SCHEMA (col type, ...)`"""

    columns: list[Column]


SchemaSpec = Union[SchemaName, InlineSchema]


@dataclass
class PrimaryKey(Node):
    columns: list[Ident]
    deduced: bool = False


@dataclass
class Aging(Node):
    """`AGES EVERY interval SET column [n TIMES] [FROM column]`: a row not updated for an interval
    gets ``column`` incremented, up to ``times`` (default 1); ``start`` names the column holding
    the time aging starts from (default: the row's last change)."""

    interval: Interval
    column: Ident
    times: Optional[int] = None
    start: Optional[Ident] = None


@dataclass
class Keep(Node):
    """A retention policy.

    kind: rows (`n ROWS [SLACK s]`), every_rows, time (an interval), every_time, all, last.
    count is an int or, for rows, a parameter name.
    """

    kind: str
    count: Optional[Union[int, Ident, "Expr"]] = None
    interval: Optional[Interval] = None
    slack: Optional[Union[int, Ident, "Expr"]] = None  # like count
    per: list[Ident] = field(default_factory=list)


@dataclass
class StoreRef(Node):
    name: Ident


@dataclass
class Autogenerate(Node):
    columns: list[Ident]
    start: Optional[Expr] = None


@dataclass
class InputWhere(Node):
    """WHERE on an input stream."""

    cond: Expr


@dataclass
class DeclareBlock(Node):
    items: list[Stmt]


@dataclass
class PartitionSpec(Node):
    """One `[BY src] HASH(cols) | ROUNDROBIN | { block }`."""

    source: Optional[Ident]
    method: str  # hash | roundrobin | custom
    columns: list[Ident] = field(default_factory=list)
    body: Optional[Block] = None


@dataclass
class Partition(Node):
    """`PARTITION spec [, spec] PARTITIONS n|param`."""

    specs: list[PartitionSpec]
    count: Union[int, Ident]


@dataclass
class SelectItem(Node):
    expr: Expr
    alias: Optional[Ident] = None


@dataclass
class FromSource(Node):
    name: Ident
    alias: Optional[Ident] = None
    keep: Optional[Keep] = None


@dataclass
class Join(Node):
    kind: str  # inner | left | right | full
    left: "FromItem"
    right: "FromItem"
    on: Expr


FromItem = Union[FromSource, Join]


@dataclass
class PatternRef(Node):
    name: Ident


@dataclass
class PatternNot(Node):
    operand: "Pattern"


@dataclass
class PatternOp(Node):
    op: str  # ',' (followed by), '&&', '||'
    left: "Pattern"
    right: "Pattern"


Pattern = Union[PatternRef, PatternNot, PatternOp]


@dataclass
class Matching(Node):
    interval: Interval
    pattern: Pattern
    on: Optional[Expr] = None


@dataclass
class OrderItem(Node):
    expr: Expr
    descending: Optional[bool] = None  # None when neither ASC nor DESC is written


@dataclass
class Select(Node):
    items: list[Union[SelectItem, Star]]
    sources: list[FromItem]
    matching: Optional[Matching] = None
    where: Optional[Expr] = None
    group_filter: Optional[Expr] = None
    group_by: list[Expr] = field(default_factory=list)
    group_order_by: list[OrderItem] = field(default_factory=list)
    having: Optional[Expr] = None


@dataclass
class Union_(Node):
    """`select UNION select ...`"""

    selects: list[Select]


Query = Union[Select, Union_]


@dataclass
class Property(Node):
    name: Ident
    value: Expr


# --------------------------------------------------------------------------------------------------
# CCL statements
# --------------------------------------------------------------------------------------------------

@dataclass
class CreateSchema(Node):
    name: Ident
    inherits: list[Ident]
    columns: list[Column]


@dataclass
class CreateElement(Node):
    """CREATE [INPUT|OUTPUT|LOCAL] STREAM | WINDOW | DELTA STREAM.

    role is input, output, local or None (unspecified: output for derived elements).
    """

    role: Optional[str]
    kind: str  # stream | window | delta stream
    name: Ident
    schema: Optional[SchemaSpec] = None
    primary_key: Optional[PrimaryKey] = None
    store: Optional[StoreRef] = None
    keep: Optional[Keep] = None
    autogenerate: Optional[Autogenerate] = None
    where: Optional[InputWhere] = None
    declare: Optional[DeclareBlock] = None
    partition: Optional[Partition] = None
    query: Optional[Query] = None
    aging: Optional[Aging] = None
    keyed: bool = False  # a STREAM with a PRIMARY KEY (ESP's keyed stream): kind is "delta stream"


@dataclass
class CreateErrorStream(Node):
    """`CREATE [LOCAL|OUTPUT] ERROR STREAM name ON src, ...`"""

    role: Optional[str]
    name: Ident
    sources: list[Ident]
    partition: Optional["Partition"] = None


@dataclass
class SplitBranch(Node):
    cond: Expr
    targets: list[Ident]


@dataclass
class CreateSplitter(Node):
    """`CREATE SPLITTER name AS WHEN c THEN t1, t2 ... [ELSE t] SELECT ...`"""

    role: Optional[str]
    name: Ident
    branches: list[SplitBranch]
    otherwise: list[Ident]
    select: Select
    partition: Optional[Partition] = None


@dataclass
class CreateReference(Node):
    role: Optional[str]
    name: Ident
    schema: Optional[SchemaSpec]
    primary_key: Optional[PrimaryKey]
    properties: list[Property]
    partition: Optional[Partition] = None


@dataclass
class LibraryFunction(Node):
    """One function a CREATE LIBRARY declares: `returnType name(argType, ...);`."""

    return_type: "TypeSpec"
    name: Ident
    params: list["TypeSpec"]


@dataclass
class CreateLibrary(Node):
    """`CREATE LIBRARY name LANGUAGE C|JAVA FROM 'file or class' (functions)`: foreign functions."""

    name: Ident
    language: str  # c | java
    source: str
    functions: list[LibraryFunction]


@dataclass
class CreateStore(Node):
    kind: str  # memory | log
    is_default: bool
    name: Ident
    properties: list[Property]


@dataclass
class AttachAdapter(Node):
    direction: str  # input | output
    name: Ident
    type: Ident
    target: Ident
    group: Optional[Ident]
    properties: list[Property]
    partition: Optional[Partition] = None


@dataclass
class Import(Node):
    path: str


@dataclass
class GlobalDeclare(Node):
    block: DeclareBlock


@dataclass
class FlexOutput(Node):
    role: Optional[str]
    kind: str  # stream | window | delta stream
    name: Ident
    schema: Optional[SchemaSpec] = None
    primary_key: Optional[PrimaryKey] = None
    keep: Optional[Keep] = None
    store: Optional[StoreRef] = None
    keyed: bool = False  # as CreateElement.keyed


@dataclass
class OnHandler(Node):
    """`ON src { ... }`; source is None for ON START/END TRANSACTION (event says which)."""

    event: str  # row | start_transaction | end_transaction
    source: Optional[Ident]
    body: Block


@dataclass
class EveryHandler(Node):
    interval: Interval
    body: Block


@dataclass
class CreateFlex(Node):
    name: Ident
    inputs: list[Ident]
    output: FlexOutput
    partition: Optional[Partition]
    declare: Optional[DeclareBlock]
    handlers: list[Union[OnHandler, EveryHandler]]
    input_keeps: list[Optional[Keep]] = field(default_factory=list)  # `IN w KEEP ...`, per input


@dataclass
class CreateModule(Node):
    name: Ident
    inputs: list[Ident]
    outputs: list[Ident]
    references: list[Ident]
    stores: list[Ident]
    body: list["Statement"]


@dataclass
class Binding(Node):
    """`inner = outer` in LOAD MODULE (value is an Ident for IN/OUT/STORES, an Expr for PARAMETERS)."""

    name: Ident
    value: Union[Ident, Expr]


@dataclass
class LoadModule(Node):
    """LOAD MODULE. ``clauses`` lists the clause keywords in source order (for the PARTITION-last rule)."""

    module: Ident
    instance: Ident
    inputs: list[Binding]
    outputs: list[Binding]
    parameters: list[Binding]
    stores: list[Binding]
    references: list[Binding] = field(default_factory=list)
    partition: Optional[Partition] = None
    clauses: list[str] = field(default_factory=list)


@dataclass
class AdapterStart(Node):
    """`ADAPTER START GROUPS g1, g2 [NOSTART]`: which adapter groups start with the project."""

    groups: list[Ident]
    nostart: bool = False


Statement = Union[CreateSchema, CreateElement, CreateErrorStream, CreateSplitter, CreateReference,
                  CreateStore, AttachAdapter, AdapterStart, Import, GlobalDeclare, CreateFlex,
                  CreateModule, LoadModule, CreateLibrary]


@dataclass
class Project(Node):
    """A parsed file: its statements in order."""

    statements: list[Statement]


_NODE_CLASSES = {cls.__name__: cls for cls in list(globals().values())
                 if isinstance(cls, type) and issubclass(cls, Node)}
