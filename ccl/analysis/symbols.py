"""What the analysis knows about names: elements, schemas, modules, variables and their scopes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..syntax import nodes as n
from ..splash.types import Type, record, scalar

OPCODES = ("insert", "update", "delete", "upsert", "safedelete")


# The schema ESP gives every error stream (it cannot be changed): the record that caused an error
# (errorRecord, as bytes), where it was reported and where the record came from.
ERROR_COLUMNS = (("errorCode", scalar("integer")), ("errorRecord", scalar("binary")),
                 ("errorMessage", scalar("string")), ("errorStreamName", scalar("string")),
                 ("sourceStreamName", scalar("string")), ("errorTime", scalar("bigdatetime")))


@dataclass
class Element:
    """A stream, window, delta stream, reference or other element rows can be read from."""

    name: str
    kind: str  # stream | window | delta stream | reference | error stream
    role: Optional[str]
    columns: dict[str, Type]
    key: list[str] = field(default_factory=list)
    node: Optional[n.Node] = None
    keep: Optional[n.Keep] = None
    open: bool = False  # columns not known statically: any column name is accepted

    @property
    def row_type(self) -> Type:
        return record(list(self.columns.items()))

    @property
    def roundrobin_key(self) -> list[str]:
        """The columns ROUNDROBIN rotates over the instances when it partitions by this element:
        its key (a key's insert, updates and delete go to one instance), none when it has no key
        known statically (its rows rotate)."""
        return [] if self.open else list(self.key or [])


@dataclass
class Module:
    node: n.CreateModule
    params: dict[str, n.ParamDecl]
    inputs: dict[str, Optional[Element]]
    outputs: dict[str, Element]
    partitioned: list = field(default_factory=list)  # the body's PartitionedElements


@dataclass
class Variable:
    name: str
    type: Type
    where: str  # global | local | parameter | implicit
    span: Optional[n.Span] = None


class Scope:
    """Variables in nested SPLASH scopes; the outermost level holds globals and parameters."""

    def __init__(self, parent: Optional["Scope"] = None) -> None:
        self.parent = parent
        self.vars: dict[str, Variable] = {}

    def lookup(self, name: str) -> Optional[Variable]:
        scope: Optional[Scope] = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        return None

    def child(self) -> "Scope":
        return Scope(self)


@dataclass
class Source:
    """A source of a SELECT under the name it is referred to by (its alias or its own name)."""

    alias: str
    element: Element
    from_node: Optional[n.FromSource] = None


@dataclass
class Context:
    """Everything an expression can refer to at one place of the program."""

    scope: Scope
    sources: list[Source] = field(default_factory=list)
    functions: dict[str, n.FuncDef] = field(default_factory=dict)
    in_splash: bool = False
    in_where: bool = False
    in_group_filter: bool = False  # rank() is allowed here only
    no_aggregates: Optional[str] = None  # where aggregates cannot be (besides WHERE): "GROUP BY", ...

    def source(self, name: str) -> Optional[Source]:
        for s in self.sources:
            if s.alias == name or (s.element.name == name and s.from_node is not None
                                   and s.from_node.alias is None):
                return s
        for s in self.sources:
            if s.element.name == name:
                return s
        return None

    def with_scope(self, scope: Scope) -> "Context":
        return Context(scope, self.sources, self.functions, self.in_splash, self.in_where,
                       self.in_group_filter, self.no_aggregates)
