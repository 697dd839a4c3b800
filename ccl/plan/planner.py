"""The planner: a checked project (AST + analysis + resolved parameters) to the plan of docs/plan.md.

Entry points: :func:`build_plan` and :func:`plan_project`. Anything the plan format cannot express
raises :class:`PlanError`. Expression normalisation lives in :mod:`ccl.plan.expressions`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from ..syntax import nodes as n
from ..analysis import Analysis, analyze
from ..analysis.analyzer import Analyzer, select_aggregates
from ..analysis.symbols import Element
from ..splash.types import Type
from ..diagnostics import Diagnostic, sort_key
from ..config.parameters import ResolvedParameter, constant_of, keep_count
from .codec import plan_from_json
from .decisions import decide
from .model import PLAN_FORMAT, PLAN_VERSION, Plan
from .expressions import (ParamValue, PlanError, PlanSource, QueryScope, column_ref,
                               fold_parameters, json_value, splash_json)
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
    module_partition: Optional[dict] = None
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
        self.elements: list[dict] = []
        self.globals: list[object] = []
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
        self.globals.extend(splash_json(items, scope.params))  # type: ignore[arg-type]

    def plan_CreateElement(self, s: n.CreateElement, scope: Scope) -> None:
        if s.name.name in scope.bound:
            return  # a module input bound to an outer element
        facts = scope.element(s.name.name, s)
        out = self._base(s, scope, s.kind, s.role or ("input" if s.query is None else "output"), facts)
        out["keep"] = keep_json(s.keep, scope)
        out["autogenerate"] = self._autogenerate(s.autogenerate, s.name.name, facts, scope)
        out["input_where"] = self._input_where(s, facts, scope)
        out["declare"] = splash_json(s.declare.items, scope.params) if s.declare else []
        if s.aging is not None:
            a = s.aging
            out["aging"] = {"millis": a.interval.microseconds // 1000, "column": a.column.name,
                            "times": a.times if a.times is not None else 1,
                            "start": a.start.name if a.start is not None else None}
        if s.query is None:
            out.update(query=None, partition=None, stateful=s.kind != "stream")
        else:
            selects = s.query.selects if isinstance(s.query, n.Union_) else [s.query]
            names = [c for c, _ in out["columns"]]
            planned = [self.select(sel, names, scope, s) for sel in selects]
            out["query"] = {"selects": [p[0] for p in planned]}
            out["partition"] = self.partition(s.partition, planned[0][1], s.name.name, scope, s)
            out["stateful"] = s.kind == "window" or s.keep is not None or s.declare is not None \
                or any(_select_stateful(sel) for sel in selects)
        self._add(out, scope)

    def plan_CreateFlex(self, s: n.CreateFlex, scope: Scope) -> None:
        o = s.output
        facts = scope.element(o.name.name, s)
        out = self._base(s, scope, o.kind, o.role or "output", facts, name=o.name.name)
        inputs = [(i.name, scope.resolve(i.name)) for i in s.inputs]
        sources = [PlanSource(w, w, plan, list(scope.element(w, s).columns)) for w, plan in inputs]
        out.update(keep=keep_json(o.keep, scope), autogenerate=None, input_where=None,
                   declare=splash_json(s.declare.items, scope.params) if s.declare else [],
                   query=None,
                   partition=self.partition(s.partition, sources, o.name.name, scope, s),
                   stateful=True)
        keeps = list(s.input_keeps) + [None] * (len(inputs) - len(s.input_keeps))
        out["flex"] = {"name": s.name.name, "inputs": [p for _, p in inputs],
                       "input_names": [w for w, _ in inputs],
                       "input_keeps": [keep_json(k, scope) for k in keeps],
                       "declare": out["declare"],
                       "handlers": [self._handler(h, scope) for h in s.handlers]}
        self._add(out, scope)

    def _handler(self, h: n.Node, scope: Scope) -> dict:
        if isinstance(h, n.EveryHandler):
            return {"event": "every", "source": None, "millis": h.interval.microseconds // 1000,
                    "body": splash_json(h.body, scope.params)}
        assert isinstance(h, n.OnHandler)
        return {"event": h.event, "source": scope.resolve(h.source.name) if h.source else None,
                "millis": None, "body": splash_json(h.body, scope.params)}

    def plan_CreateReference(self, s: n.CreateReference, scope: Scope) -> None:
        if s.name.name in scope.bound:
            return
        facts = scope.element(s.name.name, s)
        out = self._base(s, scope, "reference", s.role or "input", facts)
        props = {p.name.name: n.to_json(fold_parameters(p.value, scope.params)) for p in s.properties
                 if not is_secret_name(p.name.name)}
        out.update(keep=None, autogenerate=None, input_where=None, declare=[], query=None,
                   partition=None, stateful=False, properties=props)
        self._add(out, scope)

    def plan_CreateErrorStream(self, s: n.CreateErrorStream, scope: Scope) -> None:
        facts = scope.element(s.name.name, s)
        # ESP: "The visibility of an error stream is, by default, LOCAL"
        out = self._base(s, scope, "error stream", s.role or "local", facts)
        out.update(keep=None, autogenerate=None, input_where=None, declare=[], query=None,
                   partition=None, stateful=False,
                   error_sources=[scope.resolve(src.name) for src in s.sources])
        self._add(out, scope)

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
            out = self._base(s, scope, facts.kind, s.role or "local", facts, name=target)
            select, sources = self.select(s.select, [c for c, _ in out["columns"]], scope, s)
            qs = QueryScope(sources, scope.params)
            cond = _branch_condition(s, target, qs)
            select["where"] = _and(select["where"], cond)
            out.update(keep=None, autogenerate=None, input_where=None, declare=[],
                       query={"selects": [select]}, partition=None,
                       stateful=_select_stateful(s.select), splitter=s.name.name)
            self._add(out, scope)

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
        written = name or s.name.name  # type: ignore[attr-defined]
        return {"name": scope.resolve(written), "kind": kind, "role": role,
                "file": s.span.file if s.span else None, "line": s.span.line if s.span else None,
                "columns": [[c, type_text(t)] for c, t in facts.columns.items()],
                "key": list(facts.key) if kind != "stream" else []}

    def _add(self, out: dict, scope: Scope) -> None:
        out["module_partition"] = scope.module_partition
        self.elements.append(out)

    def _autogenerate(self, a: Optional[n.Autogenerate], own: str, facts: Element, scope: Scope
                      ) -> Optional[dict]:
        if a is None:
            return None
        qs = QueryScope([PlanSource(own, own, scope.resolve(own), list(facts.columns))], scope.params)
        return {"columns": [c.name for c in a.columns], "start": qs.expr(a.start)}

    def _input_where(self, s: n.CreateElement, facts: Element, scope: Scope) -> Optional[dict]:
        if s.where is None:
            return None
        own = s.name.name
        qs = QueryScope([PlanSource(own, own, scope.resolve(own), list(facts.columns))], scope.params)
        return qs.expr(s.where.cond)

    # --- SELECT -------------------------------------------------------------------------------

    def select(self, sel: n.Select, columns: list[str], scope: Scope, at: n.Node
               ) -> tuple[dict, list[PlanSource]]:
        """One SELECT as plan JSON, and its sources."""
        froms: list[tuple[n.FromSource, Optional[n.Join]]] = []
        joins: list[tuple[str, Optional[n.Node]]] = []
        for item in sel.sources:
            self._flatten(item, froms, joins, at)
        sources = [self._source(f, scope, at) for f, _ in froms]
        qs = QueryScope(sources, scope.params)
        items = self._items(sel, sources, qs)
        if len(items) != len(columns):
            raise _fail(at, "SELECT", f"produces {len(items)} column(s) for {len(columns)}")
        return {
            "sources": [{"alias": src.alias, "element": src.element,
                         "keep": keep_json(f.keep, scope)} for src, (f, _) in zip(sources, froms)],
            "joins": [{"kind": kind, "on": qs.expr(on) if on is not None else _TRUE}
                      for kind, on in joins],
            "where": qs.expr(sel.where),
            "group_by": [qs.expr(g) for g in sel.group_by],
            "group_filter": qs.expr(sel.group_filter),
            "having": qs.expr(sel.having, aggregates=True),
            "group_order_by": [{"expr": qs.expr(o.expr), "descending": bool(o.descending)}
                               for o in sel.group_order_by],
            "matching": self._matching(sel.matching, qs),
            "aggregates": qs.aggregates,
            "items": [{"name": c, "expr": e} for c, e in zip(columns, items)],
        }, sources

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

    def _items(self, sel: n.Select, sources: list[PlanSource], qs: QueryScope) -> list[dict]:
        out: list[dict] = []
        for item in sel.items:
            if isinstance(item, n.Star):
                chosen = sources if item.qualifier is None else [qs.source(item.qualifier.name)]
                seen: set[str] = set()
                for src in chosen:
                    for col in (src.columns if src else []):
                        if col not in seen:
                            seen.add(col)
                            out.append(n.to_json(column_ref(src.alias, col)))
            else:
                out.append(qs.expr(item.expr, aggregates=True))
        return out

    @staticmethod
    def _matching(m: Optional[n.Matching], qs: QueryScope) -> Optional[dict]:
        if m is None:
            return None
        return {"millis": m.interval.microseconds // 1000,
                "pattern": n.to_json(fold_parameters(m.pattern, {})), "on": qs.expr(m.on)}

    # --- PARTITION ----------------------------------------------------------------------------

    def partition(self, p: Optional[n.Partition], sources: list[PlanSource], target: str,
                  scope: Scope, at: n.Node) -> Optional[dict]:
        """A PARTITION clause as plan JSON; BY names resolve to plan elements."""
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
            specs.append({"input": name, "as": written, "method": spec.method, "columns": columns,
                          "block": splash_json(spec.body, scope.params) if spec.body else None})
        used = {s["input"] for s in specs}
        return {"count": self._count(p, scope, at, target), "partitions_var": f"{target}_partitions",
                "specs": specs, "broadcast": [i for i in inputs if i not in used]}

    @staticmethod
    def _count(p: n.Partition, scope: Scope, at: n.Node, target: str) -> int:
        if isinstance(p.count, int):
            return p.count
        param = scope.params.get(p.count.name)
        if param is None or not isinstance(param.value, int) or isinstance(param.value, bool):
            raise _fail(at, target, f"PARTITIONS {p.count.name} has no integer value")
        return param.value


_TRUE = {"node": "Literal", "kind": "boolean", "value": True}


def _and(left: Optional[dict], right: Optional[dict]) -> Optional[dict]:
    if left is None or right is None:
        return left or right
    return {"node": "Binary", "op": "and", "left": left, "right": right, "temporal": None}


def _not(e: dict) -> dict:
    return {"node": "Unary", "op": "not", "operand": e}


def _branch_condition(s: n.CreateSplitter, target: str, qs: QueryScope) -> Optional[dict]:
    """The WHERE of one splitter target: the OR of (its branch's condition and no earlier one).
    A condition counts as true only when it is true: a null one (a null column) falls through to the
    next branch and to ELSE, as in CASE."""
    earlier: list[dict] = []
    alternatives: list[dict] = []
    for b in s.branches:
        cond = qs.expr(n.Case(None, [n.WhenThen(b.cond, n.Literal("boolean", True))],
                              n.Literal("boolean", False), span=b.cond.span))
        if any(t.name == target for t in b.targets):
            alternatives.append(_conj(earlier + [cond]))
        earlier.append(_not(cond))
    if any(t.name == target for t in s.otherwise):
        alternatives.append(_conj(earlier) if earlier else _TRUE)
    result = alternatives[0]
    for alt in alternatives[1:]:
        result = {"node": "Binary", "op": "or", "left": result, "right": alt, "temporal": None}
    return result


def _conj(parts: list[dict]) -> dict:
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


def keep_json(k: Optional[n.Keep], scope: Scope) -> Optional[dict]:
    """A KEEP clause normalised: ``{"kind", "count", "millis", "per", "slack"}``."""
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
    return {"kind": k.kind, "count": count, "millis": millis, "per": [p.name for p in k.per],
            "slack": slack}


# --- adapters and parameters ---------------------------------------------------------------------

def _plain(value: object) -> object:
    return json_value("", value)


def adapters_json(project: LoadedProject, configs: Sequence[AdapterConfig]) -> list[dict]:
    """Every top-level ATTACH ADAPTER with its effective properties (secret ones left out)."""
    stmts = {s.name.name: s for s in project.statements if isinstance(s, n.AttachAdapter)}
    out = []
    for a in configs:
        stmt = stmts.get(a.name)
        props = {name: _plain(p.value) for name, p in a.properties.items()
                 if not is_secret_name(name) and not isinstance(p.value, Secret)}
        out.append({"name": a.name, "direction": a.direction, "type": a.type, "element": a.target,
                    "group": stmt.group.name if stmt is not None and stmt.group else None,
                    "property_set": a.property_set, "properties": props})
    return out


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
    data = {"format": PLAN_FORMAT, "version": PLAN_VERSION, "project": project_name(project.main),
            "file": os.path.basename(project.main),
            "parameters": {k: json_value(v.type, v.value) for k, v in params.items()},
            "globals": planner.globals, "elements": planner.elements,
            "adapters": adapters_json(project, adapters_properties)}
    return plan_from_json(decide(data, native_operators))


_ERROR_RECORD_FUNCTIONS = ("recorddatatostring", "recorddatatorecord")


def _give_error_records_their_schemas(elements: list[dict], *more: object) -> None:
    """Append the plan's element schemas (JSON text) to each recordDataToString/Record call of
    the plan, in place: the row of an error record reads in its element's columns and key
    (ccl/splash/error_records.py)."""
    schemas = json.dumps({e["name"]: {"columns": e["columns"], "key": e.get("key") or []}
                          for e in elements if e.get("columns")}, sort_keys=True)
    literal = n.to_json(n.Literal("string", schemas))

    def visit(value: object) -> None:
        if isinstance(value, list):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            if (value.get("node") == "Call" and not value.get("library") and len(value["args"]) == 2
                    and str(value["func"]["name"]).lower() in _ERROR_RECORD_FUNCTIONS):
                value["args"].append(literal)
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
