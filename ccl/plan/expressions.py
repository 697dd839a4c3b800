"""Expression normalisation for the plan (docs/plan.md, "Expressions").

Expressions are rebuilt without positions; column references are qualified as
``FieldAccess(Var(alias), column)``, parameters become literals and aggregate calls become
``Var("__aggN")``. SPLASH code (custom partition blocks, Flex handlers, DECLARE items) only has its
parameters folded.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from datetime import datetime
from decimal import Decimal
from typing import Callable, Mapping, Optional

from ..syntax import nodes as n
from ..analysis.expressions import is_aggregate_call
from .model import Aggregate

Rewrite = Callable[[n.Node], Optional[n.Node]]

_INT32 = (-2**31, 2**31 - 1)


class PlanError(Exception):
    """A project the planner cannot (yet) plan; the message names the element, file:line and what
    is unsupported."""


@dataclass(frozen=True)
class ParamValue:
    """A parameter's resolved value and its CCL type text (``integer``, ``interval``, ...)."""

    type: str
    value: object


def rebuild(value: object, rewrite: Rewrite) -> object:
    """A copy of a tree without spans; ``rewrite`` may replace a node (its result is used as is)."""
    if isinstance(value, n.Node):
        replaced = rewrite(value)
        if replaced is not None:
            return replaced
        kwargs = {f.name: rebuild(getattr(value, f.name), rewrite) for f in fields(value)
                  if f.name != "span"}
        return type(value)(**kwargs)
    if isinstance(value, (list, tuple)):
        return [rebuild(v, rewrite) for v in value]
    return value


def ident(name: str) -> n.Ident:
    return n.Ident(name)


def column_ref(alias: str, column: str) -> n.FieldAccess:
    """``alias.column`` as a plan expression."""
    return n.FieldAccess(n.Var(ident(alias)), ident(column))


def json_value(type_text: str, value: object) -> object:
    """A parameter value as plain JSON: intervals in milliseconds, decimals as numbers, datetimes as
    ISO text, binary as hex."""
    if type_text == "interval" and isinstance(value, int):
        return value // 1000
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value


def literal(param: ParamValue) -> n.Node:
    """A parameter's value as an expression (intervals stay microseconds, as SPLASH counts them)."""
    value = param.value
    if value is None:
        return n.Literal("null", None)
    if isinstance(value, bool):
        return n.Literal("boolean", value)
    if isinstance(value, int):
        return n.Literal("integer" if _INT32[0] <= value <= _INT32[1] else "long", value)
    if isinstance(value, (float, Decimal)):
        return n.Literal("float", float(value))
    if isinstance(value, str):
        return n.Literal("string", value)
    base = param.type.split("(")[0]
    return n.Cast(n.NamedType(base), n.Literal("string", str(json_value(param.type, value))))


def fold_parameters(value: object, params: Mapping[str, ParamValue]) -> object:
    """``value`` (a node or list) without positions and with parameters replaced by literals."""
    def rewrite(node: n.Node) -> Optional[n.Node]:
        if isinstance(node, n.Var) and node.name.name in params:
            return literal(params[node.name.name])
        return None
    return rebuild(value, rewrite)


@dataclass
class PlanSource:
    """A FROM source: the alias expressions use, the name written in FROM, the plan element it
    reads and that element's column names."""

    alias: str
    written: str
    element: str
    columns: list[str]


@dataclass
class QueryScope:
    """What names in one SELECT refer to: its sources and the parameters."""

    sources: list[PlanSource]
    params: Mapping[str, ParamValue]
    aggregates: list[Aggregate] = field(default_factory=list)
    _keys: list[str] = field(default_factory=list)  # each aggregate's call, as JSON text

    def source(self, name: str) -> Optional[PlanSource]:
        """The source a qualifier names (its alias, or else the element name written in FROM)."""
        for src in self.sources:
            if src.alias == name:
                return src
        for src in self.sources:
            if src.written == name:
                return src
        return None

    def column_source(self, column: str) -> Optional[PlanSource]:
        """The source an unqualified column belongs to (the first having it)."""
        return next((s for s in self.sources if column in s.columns), None)

    def expr(self, e: Optional[n.Node], aggregates: bool = False) -> Optional[n.Node]:
        """The plan's tree of a query expression (aggregate calls replaced when ``aggregates``)."""
        if e is None:
            return None
        return self.node(e, aggregates)

    def node(self, e: n.Node, aggregates: bool = False) -> n.Node:
        """The normalised tree of a query expression."""
        def rewrite(node: n.Node) -> Optional[n.Node]:
            if isinstance(node, n.Var):
                return self._var(node)
            if isinstance(node, n.FieldAccess) and isinstance(node.base, n.Var):
                src = self.source(node.base.name.name)
                if src is not None:
                    return column_ref(src.alias, node.field.name)
                return None
            if aggregates and isinstance(node, n.Call) and is_aggregate_call(node):
                return self._aggregate(node)
            return None
        return rebuild(e, rewrite)  # type: ignore[return-value]

    def _var(self, node: n.Var) -> Optional[n.Node]:
        name = node.name.name
        src = self.column_source(name)
        if src is not None:
            return column_ref(src.alias, name)
        if name in self.params:
            return literal(self.params[name])
        return n.Var(ident(name))

    def _aggregate(self, call: n.Call) -> n.Node:
        fn, args = call.func.name.lower(), tuple(self.node(a) for a in call.args)
        # (the JSON text tells calls apart as the plan writes them: Binary.temporal included)
        key = json.dumps({"fn": fn, "args": n.to_json(args), "distinct": call.distinct},
                         sort_keys=True)
        if key in self._keys:
            return n.Var(ident(self.aggregates[self._keys.index(key)].name))
        name = f"__agg{len(self.aggregates)}"
        self.aggregates.append(Aggregate(name, fn, args, call.distinct))
        self._keys.append(key)
        return n.Var(ident(name))
