"""The planner: a checked project (AST + analysis + resolved parameters) to the plan of docs/plan.md.

Entry points: :func:`build_plan` and :func:`plan_project`. The planner builds the typed plan
(:mod:`ccl.plan.model`) directly and :func:`ccl.plan.decisions.decide` stores its physical
decisions in it; its JSON form is the codec's (:mod:`ccl.plan.codec`). Anything the plan format
cannot express raises :class:`PlanError`. Expression normalisation lives in
:mod:`ccl.plan.expressions`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Iterable, Mapping, Optional, Sequence

from ..syntax import nodes as n
from ..analysis import Analysis, analyze
from ..analysis.analyzer import Analyzer, select_aggregates
from ..analysis.symbols import Element
from ..splash.types import Type
from ..diagnostics import Diagnostic, sort_key
from ..config.parameters import ResolvedParameter, constant_of, keep_count
from .decisions import decide
from .model import (Adapter, Aging, Autogenerate, Column, Element as PlanElement, Flex, Handler, Item,
                    Join, Keep, Matching, OrderItem, Partition, PartitionSpec, Plan, Query, Select,
                    Source)
from .expressions import (ParamValue, PlanError, PlanSource, QueryScope, column_ref,
                          fold_parameters, json_value)
from ..syntax.project import LoadedProject
from ..config.project_config import load_project_config, project_name
from ..config.property_sets import AdapterConfig, adapter_properties
from ..config.secret import Secret, is_secret_name
from ..config.value_text import canonical_type, parse_value

__all__ = ["PlanError", "build_plan", "plan_project"]


def type_text(t: Type) -> str:
    """A column type as the plan writes it: ``integer``, ``money(2)``, ``decimal(10,2)``."""
    return f"{t.name}({','.join(str(a) for a in t.args)})" if t.args else t.name


def _where(node: n.Node) -> str:
    span = node.span
    return f"{span.file}:{span.line}" if span is not None else "<unknown>"


def _fail(node: n.Node, what: str, message: str) -> PlanError:
    return PlanError(f"{_where(node)}: {what}: {message}")


@dataclass
class Scope:
    """A naming environment: the top level or one module instance."""

    prefix: str
    params: dict[str, ParamValue]
    elements: Mapping[str, Element]  # analysis facts by the name written in this scope
    modules: dict[str, n.CreateModule]
    names: dict[str, str] = field(default_factory=dict)  # written name -> plan name (bindings)
    module_partition: Optional[Partition] = None
    bound: set[str] = field(default_factory=set)  # module inputs/references bound outside

    def resolve(self, written: str) -> str:
        """The plan name of an element referred to by ``written`` in this scope."""
        return self.names.get(written, self.prefix + written)

    def element(self, written: str, at: n.Node) -> Element:
        found = self.elements.get(written)
        if found is None:
            raise _fail(at, written, "the analysis knows no such element")
        return found


class Planner:
    """Walks the statements of a project (and of the module instances it loads) in order."""

    def __init__(self, project: LoadedProject, analysis: Analysis,
                 parameters: Mapping[str, ResolvedParameter]) -> None:
        self.project = project
        self.analysis = analysis
        self.parameters = parameters
        self.elements: list[PlanElement] = []
        self.globals: list[n.Node] = []
        self._module_facts: dict[str, dict[str, Element]] = {}
        self._outer: Optional[Analyzer] = None

    # --- statements ---------------------------------------------------------------------------

    def run(self, statements: Sequence[n.Node], scope: Scope) -> None:
        for stmt in statements:
            handler = getattr(self, "plan_" + type(stmt).__name__, None)
            if handler is not None:
                handler(stmt, scope)

    def plan_GlobalDeclare(self, s: n.GlobalDeclare, scope: Scope) -> None:
        items = [i for i in s.block.items if not isinstance(i, n.ParamDecl)]
        if scope.prefix and items:
            raise _fail(s, "module DECLARE", "only PARAMETERs are supported in a module's DECLARE")
        self.globals.extend(_code(items, scope))

    def plan_CreateElement(self, s: n.CreateElement, scope: Scope) -> None:
        if s.name.name in scope.bound:
            return  # a module input bound to an outer element
        facts = scope.element(s.name.name, s)
        base = self._base(s, scope, s.kind, s.role or ("input" if s.query is None else "output"), facts)
        query: Optional[Query] = None
        partition: Optional[Partition] = None
        if s.query is None:
            stateful = s.kind != "stream"
        else:
            selects = s.query.selects if isinstance(s.query, n.Union_) else [s.query]
            names = [c.name for c in base["columns"]]
            planned = [self.select(sel, names, scope, s) for sel in selects]
            query = Query(tuple(p[0] for p in planned))
            partition = self.partition(s.partition, planned[0][1], s.name.name, scope, s)
            stateful = s.kind == "window" or s.keep is not None or s.declare is not None \
                or any(_select_stateful(sel) for sel in selects)
        a = s.aging
        aging = None if a is None else Aging(a.interval.microseconds // 1000, a.column.name,
                                             a.times if a.times is not None else 1,
                                             a.start.name if a.start is not None else None)
        self.elements.append(PlanElement(
            **base, keep=keep_of(s.keep, scope),
            autogenerate=self._autogenerate(s.autogenerate, s.name.name, facts, scope),
            input_where=self._input_where(s, facts, scope),
            declare=tuple(_code(s.declare.items, scope)) if s.declare else (),
            query=query, partition=partition, stateful=stateful, aging=aging))

    def plan_CreateFlex(self, s: n.CreateFlex, scope: Scope) -> None:
        o = s.output
        facts = scope.element(o.name.name, s)
        base = self._base(s, scope, o.kind, o.role or "output", facts, name=o.name.name)
        inputs = [(i.name, scope.resolve(i.name)) for i in s.inputs]
        sources = [PlanSource(w, w, plan, list(scope.element(w, s).columns)) for w, plan in inputs]
        declare = tuple(_code(s.declare.items, scope)) if s.declare else ()
        keeps = list(s.input_keeps) + [None] * (len(inputs) - len(s.input_keeps))
        flex = Flex(s.name.name, tuple(p for _, p in inputs), tuple(w for w, _ in inputs),
                    tuple(keep_of(k, scope) for k in keeps), declare,
                    tuple(self._handler(h, scope) for h in s.handlers))
        self.elements.append(PlanElement(
            **base, keep=keep_of(o.keep, scope), declare=declare,
            partition=self.partition(s.partition, sources, o.name.name, scope, s),
            stateful=True, flex=flex))

    def _handler(self, h: n.Node, scope: Scope) -> Handler:
        if isinstance(h, n.EveryHandler):
            return Handler("every", None, h.interval.microseconds // 1000, _code(h.body, scope))
        assert isinstance(h, n.OnHandler)
        return Handler(h.event, scope.resolve(h.source.name) if h.source else None, None,
                       _code(h.body, scope))

    def plan_CreateReference(self, s: n.CreateReference, scope: Scope) -> None:
        if s.name.name in scope.bound:
            return
        facts = scope.element(s.name.name, s)
        base = self._base(s, scope, "reference", s.role or "input", facts)
        props = {p.name.name: _code(p.value, scope) for p in s.properties
                 if not is_secret_name(p.name.name)}
        self.elements.append(PlanElement(**base, stateful=False, properties=props))

    def plan_CreateErrorStream(self, s: n.CreateErrorStream, scope: Scope) -> None:
        facts = scope.element(s.name.name, s)
        # ESP: "The visibility of an error stream is, by default, LOCAL"
        base = self._base(s, scope, "error stream", s.role or "local", facts)
        self.elements.append(PlanElement(
            **base, stateful=False,
            error_sources=tuple(scope.resolve(src.name) for src in s.sources)))

    def plan_CreateSplitter(self, s: n.CreateSplitter, scope: Scope) -> None:
        """Each target becomes a derived stream (a delta stream with the source's key when the
        splitter reads a window): the splitter's SELECT with the WHERE of the branches that send to
        it (a row takes the first branch whose condition is true)."""
        targets: list[str] = []
        for t in [t for b in s.branches for t in b.targets] + s.otherwise:
            if t.name not in targets:
                targets.append(t.name)
        for target in targets:
            facts = scope.element(target, s)
            # ESP: the targets are local or output "depending on the visibility clause defined
            # for the splitter. The default is local."
            base = self._base(s, scope, facts.kind, s.role or "local", facts, name=target)
            select, sources = self.select(s.select, [c.name for c in base["columns"]], scope, s)
            qs = QueryScope(sources, scope.params)
            cond = _branch_condition(s, target, qs)
            select = replace(select, where=_and(select.where, cond))
            self.elements.append(PlanElement(
                **base, query=Query((select,)), stateful=_select_stateful(s.select),
                splitter=s.name.name))

    def plan_LoadModule(self, s: n.LoadModule, scope: Scope) -> None:
        module = scope.modules.get(s.module.name)
        if module is None:
            raise _fail(s, f"LOAD MODULE {s.module.name}", "unknown module")
        prefix = scope.prefix + s.instance.name + "."
        names: dict[str, str] = {}
        for b in s.inputs + s.references:
            names[b.name.name] = scope.resolve(b.value.name)
        for b in s.outputs:  # in a module, the target may itself be bound to an outer name
            names[b.name.name] = scope.resolve(b.value.name)
        inner = Scope(prefix, self._module_params(s, module, scope), self._module_elements(module),
                      scope.modules, names, bound={b.name.name for b in s.inputs + s.references})
        sources = [PlanSource(b.name.name, b.value.name, names[b.name.name], [])
                   for b in s.inputs]
        inner.module_partition = self.partition(s.partition, sources, s.instance.name, scope, s) \
            if s.partition is not None else scope.module_partition
        body = [st for st in module.body if not isinstance(st, (n.CreateModule, n.AttachAdapter))]
        self.run(body, inner)

    def _module_params(self, s: n.LoadModule, module: n.CreateModule, scope: Scope
                       ) -> dict[str, ParamValue]:
        decls = [i for st in module.body if isinstance(st, n.GlobalDeclare) for i in st.block.items
                 if isinstance(i, n.ParamDecl)]
        given = {b.name.name: b.value for b in s.parameters}
        out: dict[str, ParamValue] = {}
        for d in decls:
            expr = given.get(d.name.name, d.default)
            if expr is None:
                raise _fail(s, f"LOAD MODULE {s.instance.name}", f"parameter '{d.name.name}' has no value")
            out[d.name.name] = self._param_value(d, fold_parameters(expr, scope.params), s)
        return out

    @staticmethod
    def _param_value(d: n.ParamDecl, expr: object, at: n.Node) -> ParamValue:
        spec = d.type
        base = canonical_type(spec.name) if isinstance(spec, n.NamedType) else None
        const = constant_of(expr) if isinstance(expr, n.Node) else None
        if base is None or const is None:
            raise _fail(at, f"parameter '{d.name.name}'", "only constant values of built-in types "
                                                         "can be planned")
        kind, value = const
        if kind == "string" and base != "string":
            try:
                value = parse_value(str(value), base, tuple(spec.args))
            except ValueError as exc:
                raise _fail(at, f"parameter '{d.name.name}'", str(exc)) from None
        text = f"{base}({','.join(map(str, spec.args))})" if spec.args else base
        return ParamValue(text, value)

    def _module_elements(self, module: n.CreateModule) -> dict[str, Element]:
        """The analysis facts of a module body's elements (the analysis keeps only its outputs)."""
        name = module.name.name
        if name not in self._module_facts:
            if self._outer is None:
                self._outer = Analyzer(self.parameters, [])
                self._outer.run(self.project.statements)
            inner = Analyzer({}, [])
            inner.schemas = dict(self._outer.schemas)
            inner.typedefs = dict(self._outer.typedefs)
            inner.modules = dict(self._outer.modules)  # for a LOAD MODULE in the body
            inner.run([st for st in module.body if not isinstance(st, (n.CreateModule, n.AttachAdapter))])
            self._module_facts[name] = inner.elements
        return self._module_facts[name]

    # --- element parts ------------------------------------------------------------------------

    def _base(self, s: n.Node, scope: Scope, kind: str, role: str, facts: Element,
              name: Optional[str] = None) -> dict:
        """The fields every planned element has (its module PARTITION included)."""
        written = name or s.name.name  # type: ignore[attr-defined]
        return {"name": scope.resolve(written), "kind": kind, "role": role,
                "file": s.span.file if s.span else None, "line": s.span.line if s.span else None,
                "columns": tuple(Column(c, type_text(t)) for c, t in facts.columns.items()),
                "key": tuple(facts.key) if kind != "stream" else (),
                "module_partition": scope.module_partition}

    def _autogenerate(self, a: Optional[n.Autogenerate], own: str, facts: Element, scope: Scope
                      ) -> Optional[Autogenerate]:
        if a is None:
            return None
        qs = QueryScope([PlanSource(own, own, scope.resolve(own), list(facts.columns))], scope.params)
        return Autogenerate(tuple(c.name for c in a.columns), qs.expr(a.start))

    def _input_where(self, s: n.CreateElement, facts: Element, scope: Scope) -> Optional[n.Node]:
        if s.where is None:
            return None
        own = s.name.name
        qs = QueryScope([PlanSource(own, own, scope.resolve(own), list(facts.columns))], scope.params)
        return qs.expr(s.where.cond)

    # --- SELECT -------------------------------------------------------------------------------

    def select(self, sel: n.Select, columns: list[str], scope: Scope, at: n.Node
               ) -> tuple[Select, list[PlanSource]]:
        """One SELECT of the plan, and its sources."""
        froms: list[tuple[n.FromSource, Optional[n.Join]]] = []
        joins: list[tuple[str, Optional[n.Node]]] = []
        for item in sel.sources:
            self._flatten(item, froms, joins, at)
        sources = [self._source(f, scope, at) for f, _ in froms]
        qs = QueryScope(sources, scope.params)
        items = self._items(sel, sources, qs)
        if len(items) != len(columns):
            raise _fail(at, "SELECT", f"produces {len(items)} column(s) for {len(columns)}")
        # (in this order: aggregate calls are numbered as they are met, the items' first)
        planned_sources = tuple(Source(src.alias, src.element, keep_of(f.keep, scope))
                                for src, (f, _) in zip(sources, froms))
        planned_joins = tuple(Join(kind, qs.expr(on) if on is not None else _true())  # type: ignore[arg-type]
                              for kind, on in joins)
        where = qs.expr(sel.where)
        group_by = tuple(qs.expr(g) for g in sel.group_by)
        group_filter = qs.expr(sel.group_filter)
        having = qs.expr(sel.having, aggregates=True)
        order = tuple(OrderItem(qs.expr(o.expr), bool(o.descending))  # type: ignore[arg-type]
                      for o in sel.group_order_by)
        return Select(planned_sources, planned_joins, where, group_by, group_filter,  # type: ignore[arg-type]
                      having, order, self._matching(sel.matching, qs), tuple(qs.aggregates),
                      tuple(Item(c, e) for c, e in zip(columns, items))), sources

    def _flatten(self, item: n.Node, froms: list, joins: list, at: n.Node) -> None:
        """FROM items to a left-deep list: sources and, for each after the first, its join."""
        if isinstance(item, n.FromSource):
            if froms:
                joins.append(("inner", None))
            froms.append((item, None))
            return
        assert isinstance(item, n.Join)
        if not isinstance(item.right, n.FromSource):
            raise _fail(at, "FROM", "a join whose right side is itself a join cannot be planned")
        self._flatten(item.left, froms, joins, at)
        froms.append((item.right, item))
        joins.append((item.kind, item.on))

    def _source(self, f: n.FromSource, scope: Scope, at: n.Node) -> PlanSource:
        written = f.name.name
        facts = scope.element(written, at)
        return PlanSource(f.alias.name if f.alias else written, written, scope.resolve(written),
                          list(facts.columns))

    def _items(self, sel: n.Select, sources: list[PlanSource], qs: QueryScope) -> list[n.Node]:
        out: list[n.Node] = []
        for item in sel.items:
            if isinstance(item, n.Star):
                chosen = sources if item.qualifier is None else [qs.source(item.qualifier.name)]
                seen: set[str] = set()
                for src in chosen:
                    for col in (src.columns if src else []):
                        if col not in seen:
                            seen.add(col)
                            out.append(column_ref(src.alias, col))
            else:
                out.append(qs.node(item.expr, aggregates=True))
        return out

    @staticmethod
    def _matching(m: Optional[n.Matching], qs: QueryScope) -> Optional[Matching]:
        if m is None:
            return None
        return Matching(m.interval.microseconds // 1000, fold_parameters(m.pattern, {}),  # type: ignore[arg-type]
                        qs.expr(m.on))

    # --- PARTITION ----------------------------------------------------------------------------

    def partition(self, p: Optional[n.Partition], sources: list[PlanSource], target: str,
                  scope: Scope, at: n.Node) -> Optional[Partition]:
        """A PARTITION clause of the plan; BY names resolve to plan elements."""
        if p is None:
            return None
        by_name: dict[str, str] = {}
        written_as: dict[str, str] = {}  # alias or name -> the element's name as written
        for src in sources:
            by_name.setdefault(src.alias, src.element)
            by_name.setdefault(src.written, src.element)
            written_as.setdefault(src.alias, src.written)
            written_as.setdefault(src.written, src.written)
        inputs = sorted(set(by_name.values()))
        specs = []
        for spec in p.specs:
            if spec.source is None:
                if len(inputs) != 1:
                    raise _fail(at, target, "a partition spec without BY needs exactly one input")
                name, written = inputs[0], next(s.alias for s in sources)
            else:
                written = spec.source.name
                name = by_name.get(written) or scope.resolve(written)
            columns = [c.name for c in spec.columns]
            if spec.method == "roundrobin":
                source = scope.elements.get(written_as.get(written, written))
                columns = source.roundrobin_key if source is not None else []
            specs.append(PartitionSpec(name, written or name, spec.method, tuple(columns),
                                       _code(spec.body, scope) if spec.body else None))
        used = {s.input for s in specs}
        return Partition(self._count(p, scope, at, target), f"{target}_partitions", tuple(specs),
                         tuple(i for i in inputs if i not in used))

    @staticmethod
    def _count(p: n.Partition, scope: Scope, at: n.Node, target: str) -> int:
        if isinstance(p.count, int):
            return p.count
        param = scope.params.get(p.count.name)
        if param is None or not isinstance(param.value, int) or isinstance(param.value, bool):
            raise _fail(at, target, f"PARTITIONS {p.count.name} has no integer value")
        return param.value


def _true() -> n.Node:
    return n.Literal("boolean", True)


def _code(value: object, scope: Scope) -> object:
    """SPLASH code (a Block, DECLARE items, a property value) as the plan holds it: without
    positions, parameters folded, references as written."""
    return fold_parameters(value, scope.params)


def _and(left: Optional[n.Node], right: Optional[n.Node]) -> Optional[n.Node]:
    if left is None or right is None:
        return left or right
    return n.Binary("and", left, right)


def _branch_condition(s: n.CreateSplitter, target: str, qs: QueryScope) -> n.Node:
    """The WHERE of one splitter target: the OR of (its branch's condition and no earlier one).
    A condition counts as true only when it is true: a null one (a null column) falls through to the
    next branch and to ELSE, as in CASE."""
    earlier: list[n.Node] = []
    alternatives: list[n.Node] = []
    for b in s.branches:
        cond = qs.node(n.Case(None, [n.WhenThen(b.cond, n.Literal("boolean", True))],
                              n.Literal("boolean", False), span=b.cond.span))
        if any(t.name == target for t in b.targets):
            alternatives.append(_conj(earlier + [cond]))
        earlier.append(n.Unary("not", cond))
    if any(t.name == target for t in s.otherwise):
        alternatives.append(_conj(earlier) if earlier else _true())
    result = alternatives[0]
    for alt in alternatives[1:]:
        result = n.Binary("or", result, alt)
    return result


def _conj(parts: list[n.Node]) -> n.Node:
    result = parts[0]
    for p in parts[1:]:
        result = _and(result, p)  # type: ignore[assignment]
    return result


def _select_stateful(sel: n.Select) -> bool:
    """Whether a SELECT alone needs state: several sources, aggregation, a FROM KEEP, MATCHING."""
    return (len(list(_from_sources(sel.sources))) != 1 or select_aggregates(sel)
            or sel.matching is not None or any(f.keep is not None for f in _from_sources(sel.sources)))


def _from_sources(items: Iterable[n.Node]) -> Iterable[n.FromSource]:
    for item in items:
        if isinstance(item, n.Join):
            yield from _from_sources([item.left, item.right])
        elif isinstance(item, n.FromSource):
            yield item


def keep_of(k: Optional[n.Keep], scope: Scope) -> Optional[Keep]:
    """A KEEP clause normalised (counts given by parameters are their values)."""
    if k is None:
        return None
    values = {name: p.value for name, p in scope.params.items()}
    count, slack = k.count, k.slack
    if count is not None:
        count, why = keep_count(count, values)
        if count is None:
            raise _fail(k, "KEEP", f"the row count has no value: {why or 'a parameter has none'}")
    if slack is not None:
        slack, why = keep_count(slack, values)
        if slack is None:
            raise _fail(k, "KEEP", f"the SLACK has no value: {why or 'a parameter has none'}")
    millis = k.interval.microseconds // 1000 if k.interval is not None else None
    return Keep(k.kind, count, millis, tuple(p.name for p in k.per), slack)


# --- adapters and parameters ---------------------------------------------------------------------

def _plain(value: object) -> object:
    return json_value("", value)


def plan_adapters(project: LoadedProject, configs: Sequence[AdapterConfig]) -> tuple[Adapter, ...]:
    """Every top-level ATTACH ADAPTER with its effective properties (secret ones left out)."""
    stmts = {s.name.name: s for s in project.statements if isinstance(s, n.AttachAdapter)}
    out = []
    for a in configs:
        stmt = stmts.get(a.name)
        props = {name: _plain(p.value) for name, p in a.properties.items()
                 if not is_secret_name(name) and not isinstance(p.value, Secret)}
        out.append(Adapter(a.name, a.direction, a.type, a.target,
                           stmt.group.name if stmt is not None and stmt.group else None,
                           a.property_set, props))
    return tuple(out)


def _top_params(parameters: Mapping[str, ResolvedParameter]) -> dict[str, ParamValue]:
    return {name: ParamValue(p.type, p.value) for name, p in parameters.items()}


def build_plan(project: LoadedProject, analysis: Analysis,
               parameters: Mapping[str, ResolvedParameter], *,
               adapters_properties: Optional[Sequence[AdapterConfig]] = None,
               native_operators: bool = True) -> Plan:
    """The plan (docs/plan.md) of a project that analysed without errors, with its physical
    decisions (ccl/plan/decisions.py).

    ``adapters_properties`` are the adapters with .ccr property sets applied (``ProjectConfig.adapters``);
    without them the CCL properties alone (with parameters) are used. ``native_operators=False``
    keeps derived elements off Spark's native operators (the differential tests run both ways).
    Raises :class:`PlanError` for what the plan cannot express.
    """
    if adapters_properties is None:
        adapters_properties, _ = adapter_properties(project, None, parameters)
    params = _top_params(parameters)
    modules = {s.name.name: s for s in project.statements if isinstance(s, n.CreateModule)}
    planner = Planner(project, analysis, parameters)
    planner.run(project.statements, Scope("", params, analysis.elements, modules))
    _give_error_records_their_schemas(planner.elements, planner.globals)
    plan = Plan(project_name(project.main), os.path.basename(project.main),
                {k: json_value(v.type, v.value) for k, v in params.items()},
                tuple(planner.globals), tuple(planner.elements),
                plan_adapters(project, adapters_properties))
    return decide(plan, native_operators)


_ERROR_RECORD_FUNCTIONS = ("recorddatatostring", "recorddatatorecord")


def _give_error_records_their_schemas(elements: Sequence[PlanElement], *more: object) -> None:
    """Append the plan's element schemas (JSON text) to each recordDataToString/Record call of
    the plan, in place: the row of an error record reads in its element's columns and key
    (ccl/splash/error_records.py)."""
    schemas = json.dumps({e.name: {"columns": [[c.name, c.type] for c in e.columns],
                                   "key": list(e.key)}
                          for e in elements if e.columns}, sort_keys=True)

    def visit(value: object) -> None:
        if isinstance(value, n.Node):
            for node in value.walk():
                if (isinstance(node, n.Call) and node.library is None and len(node.args) == 2
                        and str(node.func.name).lower() in _ERROR_RECORD_FUNCTIONS):
                    node.args.append(n.Literal("string", schemas))
        elif is_dataclass(value):
            for f in fields(value):
                visit(getattr(value, f.name))
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, Mapping):
            for v in value.values():
                visit(v)
    visit([elements, *more])


def plan_project(path: str, ccr: Optional[str] = None, params: Mapping[str, str] = {}, *,
                 native_operators: bool = True) -> tuple[Optional[Plan], list[Diagnostic]]:
    """Load, configure and analyse ``path`` as `ccl check` does, then plan it
    (``native_operators``: see :func:`build_plan`).

    Returns ``(None, diagnostics)`` when there are errors, else ``(plan, warnings)``.
    """
    config = load_project_config(path, ccr_path=ccr, params=[f"{k}={v}" for k, v in params.items()])
    if config.project.has_errors:
        return None, config.all_diagnostics
    analysis = analyze(config.project, config.parameters)
    diags = sorted(config.all_diagnostics + analysis.diagnostics, key=sort_key)
    if any(d.is_error for d in diags):
        return None, diags
    return build_plan(config.project, analysis, config.parameters,
                      adapters_properties=config.adapters, native_operators=native_operators), diags
