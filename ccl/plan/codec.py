"""The one JSON form of a plan (docs/plan.md): format ``ccl-plan``, version ``PLAN_VERSION``.

:func:`plan_to_json` and :func:`plan_from_json` are inverses; expressions and SPLASH code are
decoded into syntax trees here, once. Data that is not a plan of this version raises
:class:`PlanFormatError` with a one-line message.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, TypeVar

from ..syntax import nodes as n
from .model import (KERNELS, PLAN_FORMAT, PLAN_VERSION, Adapter, Aggregate, Aging, Autogenerate,
                    Column, Element, Flex, FlexMove, FlexVariable, GroupSpread, Handler, HashColumn,
                    HashPort, Item, Join, JoinMove, Keep, Matching, Move, NativeAggregation,
                    NativeFilter, OrderItem, Partition, PartitionSpec, Physical, Plan, Query, Select,
                    Source)

__all__ = ["PlanFormatError", "move_from_json", "move_to_json", "plan_from_json", "plan_to_json",
           "plan_version", "spread_from_json", "spread_to_json"]

T = TypeVar("T")


class PlanFormatError(ValueError):
    """Data that is not a plan this code reads; the message is one line."""


# --- encoding --------------------------------------------------------------------------------------

def _expr(node: Optional[n.Node]) -> object:
    return None if node is None else n.to_json(node)


def _opt(value: Optional[T], encode: Callable[[T], object]) -> object:
    return None if value is None else encode(value)


def keep_to_json(k: Keep) -> dict:
    """A KEEP as docs/plan.md writes it."""
    return {"kind": k.kind, "count": k.count, "millis": k.millis, "per": list(k.per),
            "slack": k.slack}


def _select_to_json(s: Select) -> dict:
    return {"sources": [{"alias": x.alias, "element": x.element, "keep": _opt(x.keep, keep_to_json)}
                        for x in s.sources],
            "joins": [{"kind": j.kind, "on": _expr(j.on)} for j in s.joins],
            "where": _expr(s.where),
            "group_by": [_expr(g) for g in s.group_by],
            "group_filter": _expr(s.group_filter),
            "having": _expr(s.having),
            "group_order_by": [{"expr": _expr(o.expr), "descending": o.descending}
                               for o in s.group_order_by],
            "matching": _opt(s.matching, lambda m: {"millis": m.millis, "pattern": _expr(m.pattern),
                                                    "on": _expr(m.on)}),
            "aggregates": [{"name": a.name, "fn": a.fn, "args": [_expr(x) for x in a.args],
                            "distinct": a.distinct} for a in s.aggregates],
            "items": [{"name": i.name, "expr": _expr(i.expr)} for i in s.items]}


def _partition_to_json(p: Partition) -> dict:
    specs = []
    for s in p.specs:
        spec = {"input": s.input, "as": s.alias, "method": s.method, "columns": list(s.columns),
                "block": _expr(s.block)}
        if s.compiled is not None:
            spec.update(compiled=s.compiled, why=s.why)
        specs.append(spec)
    return {"count": p.count, "partitions_var": p.partitions_var, "specs": specs,
            "broadcast": list(p.broadcast)}


def _flex_to_json(f: Flex) -> dict:
    return {"name": f.name, "inputs": list(f.inputs), "input_names": list(f.input_names),
            "input_keeps": [_opt(k, keep_to_json) for k in f.input_keeps],
            "declare": [_expr(d) for d in f.declare],
            "handlers": [{"event": h.event, "source": h.source, "millis": h.millis,
                          "body": _expr(h.body)} for h in f.handlers]}


def physical_to_json(p: Physical) -> dict:
    """A :class:`Physical` record as JSON."""
    return {"path": p.path, "why": p.why, "native": p.native, "instances": p.instances,
            "uses_time": p.uses_time, "columnar": p.columnar, "kernel": p.kernel,
            "group_columns": _opt(p.group_columns, list), "arrow": p.arrow,
            "window_store": p.window_store,
            "fused_consumers": list(p.fused_consumers), "unrecorded": p.unrecorded,
            "project_stage": p.project_stage,
            "aggregation": _opt(p.aggregation, lambda a: {
                "source": a.source, "alias": a.alias, "groups": [list(g) for g in a.groups],
                "aggregates": [list(x) for x in a.aggregates]}),
            "filter": _opt(p.filter, lambda f: {
                "source": f.source, "alias": f.alias, "items": [list(i) for i in f.items],
                "where": _expr(f.where)}),
            "input_adapter": p.input_adapter}


def element_to_json(e: Element) -> dict:
    """One element as docs/plan.md writes it (the optional parts only when it has them)."""
    out: dict[str, Any] = {
        "name": e.name, "kind": e.kind, "role": e.role, "file": e.file, "line": e.line,
        "columns": [[c.name, c.type] for c in e.columns], "key": list(e.key),
        "keep": _opt(e.keep, keep_to_json),
        "autogenerate": _opt(e.autogenerate, lambda a: {"columns": list(a.columns),
                                                        "start": _expr(a.start)}),
        "input_where": _expr(e.input_where),
        "declare": [_expr(d) for d in e.declare],
        "query": _opt(e.query, lambda q: {"selects": [_select_to_json(s) for s in q.selects]}),
        "partition": _opt(e.partition, _partition_to_json),
        "module_partition": _opt(e.module_partition, _partition_to_json),
        "stateful": e.stateful}
    if e.aging is not None:
        a = e.aging
        out["aging"] = {"millis": a.millis, "column": a.column, "times": a.times, "start": a.start}
    if e.flex is not None:
        out["flex"] = _flex_to_json(e.flex)
    if e.properties is not None:
        out["properties"] = {k: _expr(v) for k, v in e.properties.items()}
    if e.error_sources is not None:
        out["error_sources"] = list(e.error_sources)
    if e.splitter is not None:
        out["splitter"] = e.splitter
    if e.physical is not None:
        out["physical"] = physical_to_json(e.physical)
    return out


def plan_to_json(plan: Plan) -> dict:
    """The JSON form of ``plan`` (what a ``.ccx`` file holds)."""
    return {"format": PLAN_FORMAT, "version": PLAN_VERSION, "project": plan.project,
            "file": plan.file, "native_operators": plan.native_operators,
            "parameters": dict(plan.parameters),
            "globals": [_expr(g) for g in plan.globals],
            "elements": [element_to_json(e) for e in plan.elements],
            "adapters": [{"name": a.name, "direction": a.direction, "type": a.type,
                          "element": a.element, "group": a.group, "property_set": a.property_set,
                          "properties": dict(a.properties)} for a in plan.adapters]}


# --- decoding --------------------------------------------------------------------------------------

def _node(value: object) -> Optional[n.Node]:
    if value is None:
        return None
    node = n.from_json(value)
    if not isinstance(node, n.Node):
        raise PlanFormatError(f"an expression is expected, not {type(value).__name__}")
    return node


def _nodes(values: object) -> tuple[n.Node, ...]:
    return tuple(_node(v) for v in _list(values))  # type: ignore[misc]


def _list(value: object) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PlanFormatError(f"a list is expected, not {type(value).__name__}")
    return value


def keep_from_json(d: Optional[Mapping]) -> Optional[Keep]:
    """A KEEP from its JSON form (None stays None)."""
    if d is None:
        return None
    return Keep(d["kind"], d.get("count"), d.get("millis"), tuple(d.get("per") or ()),
                d.get("slack"))


def _select_from_json(d: Mapping) -> Select:
    m = d.get("matching")
    return Select(
        sources=tuple(Source(s["alias"], s["element"], keep_from_json(s.get("keep")))
                      for s in _list(d["sources"])),
        joins=tuple(Join(j["kind"], _node(j["on"])) for j in _list(d.get("joins"))),  # type: ignore[arg-type]
        where=_node(d.get("where")),
        group_by=_nodes(d.get("group_by")),
        group_filter=_node(d.get("group_filter")),
        having=_node(d.get("having")),
        group_order_by=tuple(OrderItem(_node(o["expr"]), bool(o.get("descending")))  # type: ignore[arg-type]
                             for o in _list(d.get("group_order_by"))),
        matching=None if m is None else Matching(m["millis"], _node(m["pattern"]),  # type: ignore[arg-type]
                                                 _node(m.get("on"))),
        aggregates=tuple(Aggregate(a["name"], a["fn"], _nodes(a.get("args")), bool(a.get("distinct")))
                         for a in _list(d.get("aggregates"))),
        items=tuple(Item(i["name"], _node(i["expr"])) for i in _list(d["items"])))  # type: ignore[arg-type]


def _partition_from_json(d: Optional[Mapping]) -> Optional[Partition]:
    if d is None:
        return None
    specs = tuple(PartitionSpec(s["input"], s.get("as") or s["input"], s["method"],
                                tuple(s.get("columns") or ()), _node(s.get("block")),
                                s.get("compiled"), s.get("why"))
                  for s in _list(d["specs"]))
    return Partition(int(d["count"]), d.get("partitions_var") or "", specs,
                     tuple(d.get("broadcast") or ()))


def _flex_from_json(d: Optional[Mapping]) -> Optional[Flex]:
    if d is None:
        return None
    return Flex(d["name"], tuple(d["inputs"]), tuple(d["input_names"]),
                tuple(keep_from_json(k) for k in _list(d.get("input_keeps"))),
                _nodes(d.get("declare")),
                tuple(Handler(h["event"], h.get("source"), h.get("millis"), _node(h["body"]))  # type: ignore[arg-type]
                      for h in _list(d.get("handlers"))))


def physical_from_json(d: Optional[Mapping]) -> Optional[Physical]:
    """A :class:`Physical` record from its JSON form (None stays None)."""
    if d is None:
        return None
    agg, flt = d.get("aggregation"), d.get("filter")
    # the runtime builds what these name: a name it has no code for is refused here, once
    if d.get("kernel") is not None and d["kernel"] not in KERNELS:
        raise ValueError(f"unknown kernel {d['kernel']!r}")
    if d.get("columnar") not in (None, "batch", "rows"):
        raise ValueError(f"unknown columnar mode {d['columnar']!r}")
    if d.get("kernel") in ("aggregation", "window_aggregation") and d.get("columnar") is None:
        raise ValueError(f"the {d['kernel']} kernel without a columnar mode")
    return Physical(
        path=d["path"], why=d["why"], native=d.get("native"), instances=int(d.get("instances", 1)),
        uses_time=bool(d.get("uses_time")), columnar=d.get("columnar"), kernel=d.get("kernel"),
        group_columns=None if d.get("group_columns") is None else tuple(d["group_columns"]),
        arrow=bool(d.get("arrow")), window_store=bool(d.get("window_store")),
        fused_consumers=tuple(d.get("fused_consumers") or ()),
        unrecorded=bool(d.get("unrecorded")), project_stage=bool(d.get("project_stage")),
        aggregation=None if agg is None else NativeAggregation(
            agg["source"], agg["alias"], tuple(tuple(g) for g in agg["groups"]),  # type: ignore[misc]
            tuple(tuple(a) for a in agg["aggregates"])),  # type: ignore[misc]
        filter=None if flt is None else NativeFilter(
            flt["source"], flt["alias"], tuple(tuple(i) for i in flt["items"]),  # type: ignore[misc]
            _node(flt.get("where"))),
        input_adapter=d.get("input_adapter"))


def element_from_json(d: Mapping) -> Element:
    """One element from its JSON form."""
    auto, aging, query = d.get("autogenerate"), d.get("aging"), d.get("query")
    props = d.get("properties")
    return Element(
        name=d["name"], kind=d["kind"], role=d["role"], file=d.get("file"), line=d.get("line"),
        columns=tuple(Column(c, t) for c, t in _list(d["columns"])),
        key=tuple(d.get("key") or ()),
        keep=keep_from_json(d.get("keep")),
        autogenerate=None if auto is None else Autogenerate(tuple(auto["columns"]),
                                                            _node(auto.get("start"))),
        input_where=_node(d.get("input_where")),
        declare=_nodes(d.get("declare")),
        query=None if query is None else Query(tuple(_select_from_json(s)
                                                     for s in _list(query["selects"]))),
        partition=_partition_from_json(d.get("partition")),
        module_partition=_partition_from_json(d.get("module_partition")),
        stateful=bool(d.get("stateful")),
        aging=None if aging is None else Aging(aging["millis"], aging["column"], aging["times"],
                                               aging.get("start")),
        flex=_flex_from_json(d.get("flex")),
        properties=None if props is None else {k: _node(v) for k, v in props.items()},  # type: ignore[misc]
        error_sources=None if d.get("error_sources") is None else tuple(d["error_sources"]),
        splitter=d.get("splitter"),
        physical=physical_from_json(d.get("physical")))


def _decoded(what: str, decode: Callable[[], T]) -> T:
    """``decode()``, its errors on malformed data (PlanFormatError too) raised as one
    PlanFormatError of one line."""
    try:
        return decode()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # (PlanFormatError too)
        why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise PlanFormatError(f"not a valid {what}: {why}") from None


def _mapping(value: object) -> Mapping:
    if not isinstance(value, Mapping):
        raise PlanFormatError(f"an object is expected, not {type(value).__name__}")
    return value


def check_header(data: object, versions: tuple[int, ...] = (PLAN_VERSION,)) -> None:
    """Refuse data that is not a ``ccl-plan`` of one of ``versions`` (one-line message)."""
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
        raise PlanFormatError(f"not a compiled CCL plan (format {PLAN_FORMAT!r} expected)")
    version = plan_version(data)
    if version not in versions:
        raise PlanFormatError(
            f"plan version {version!r} is not supported (this ccl reads version {PLAN_VERSION}): "
            f"run `ccl compile` again on the project")
    if not isinstance(data.get("elements"), list):
        raise PlanFormatError("the plan has no element list")


def plan_from_json(data: object, versions: tuple[int, ...] = (PLAN_VERSION,)) -> Plan:
    """The :class:`Plan` that :func:`plan_to_json` wrote; :class:`PlanFormatError` otherwise.

    ``versions``: the plan versions accepted. A run directory's ``plan.json`` of an older version
    whose fields this version only adds to (runtime/run_dir.py ``READABLE_VERSIONS``) decodes
    with the added decisions at their defaults."""
    check_header(data, versions)
    assert isinstance(data, dict)

    def decode() -> Plan:
        return Plan(
            project=str(data.get("project", "")), file=str(data.get("file", "")),
            parameters=dict(data.get("parameters") or {}),
            globals=_nodes(data.get("globals")),
            elements=tuple(element_from_json(e) for e in data["elements"]),
            adapters=tuple(Adapter(a["name"], a["direction"], a["type"], a["element"],
                                   a.get("group"), a.get("property_set"),
                                   dict(a.get("properties") or {}))
                           for a in _list(data.get("adapters"))),
            native_operators=bool(data.get("native_operators", True)))
    return _decoded("plan", decode)


def plan_version(data: object) -> object:
    """The version the JSON form ``data`` says it is of (None when it says none), read before it
    is decoded: which versions a reader accepts is its own question (runtime/run_dir.py)."""
    return data.get("version") if isinstance(data, dict) else None


# --- moves to other instance counts (the journal of runtime/rescale.py) ---------------------------
#
# A move's JSON form is what ``RUN/rescale.json`` (and, for a spread, ``RUN/rebucket.json``) holds
# while a run directory's state moves: a journal a crash left behind is finished by the next run,
# perhaps of a newer ccl, so the form stays as it is.


def spread_to_json(s: GroupSpread) -> dict:
    """The JSON form of a :class:`GroupSpread`."""
    return {"columns": list(s.columns), "types": list(s.types), "items": list(s.items)}


def _port_to_json(p: Optional[HashPort]) -> Optional[dict]:
    if p is None:
        return None
    out: dict[str, Any] = {} if p.alias is None else {"alias": p.alias}
    return {**out, "columns": list(p.columns), "types": list(p.types)}


def _variable_to_json(v: FlexVariable) -> dict:
    if v.kind == "dictionary":
        return {"kind": v.kind, "type": v.type}
    return {"kind": v.kind, "positions": list(v.positions), "types": list(v.types)}


def move_to_json(m: Move) -> dict:
    """The JSON form of a :class:`Move` (the parts it does not have left out)."""
    out: dict[str, Any] = {"from": m.before, "to": m.after, "store": m.store,
                           "hash": [[h.output, h.source, h.type] for h in m.hash]}
    if m.groups is not None:
        out["groups"] = list(m.groups)
    if m.join is not None:
        out["join"] = {"ports": [_port_to_json(p) for p in m.join.ports],
                       "aliases": list(m.join.aliases)}
    if m.flex is not None:
        out["flex"] = {"ports": {k: _port_to_json(p) for k, p in m.flex.ports.items()},
                       "vars": {k: _variable_to_json(v) for k, v in m.flex.vars.items()},
                       "outputs": list(m.flex.outputs)}
    if m.spread is not None:
        out["spread"] = spread_to_json(m.spread)
    return out


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in _list(value))


def _port_from_json(d: object) -> Optional[HashPort]:
    if d is None:
        return None
    port = _mapping(d)
    return HashPort(_strings(port["columns"]), _strings(port["types"]),
                    None if port.get("alias") is None else str(port["alias"]))


def _variable_from_json(d: Mapping) -> FlexVariable:
    if d["kind"] == "dictionary":
        return FlexVariable("dictionary", type=str(d["type"]))
    if d["kind"] == "cache":
        return FlexVariable("cache", positions=tuple(int(p) for p in _list(d["positions"])),
                            types=_strings(d["types"]))
    raise PlanFormatError(f"a Flex variable kept as {d['kind']!r} is not known")


def spread_from_json(d: object) -> GroupSpread:
    """The :class:`GroupSpread` :func:`spread_to_json` wrote; PlanFormatError otherwise."""
    def decode() -> GroupSpread:
        spec = _mapping(d)
        return GroupSpread(_strings(spec["columns"]), _strings(spec["types"]),
                           _strings(spec["items"]))
    return _decoded("group spread", decode)


def move_from_json(d: object) -> Move:
    """The :class:`Move` :func:`move_to_json` wrote; PlanFormatError otherwise."""
    def decode() -> Move:
        m = _mapping(d)
        if m["store"] not in ("engine", "native", "none"):
            raise PlanFormatError(f"a store {m['store']!r} is not known")
        join = None if m.get("join") is None else _mapping(m["join"])
        flex = None if m.get("flex") is None else _mapping(m["flex"])
        return Move(
            before=int(m["from"]), after=int(m["to"]), store=str(m["store"]),
            hash=tuple(HashColumn(str(o), str(s), str(t)) for o, s, t in _list(m["hash"])),
            groups=None if m.get("groups") is None else tuple(int(g) for g in _list(m["groups"])),
            join=None if join is None else JoinMove(
                tuple(_port_from_json(p) for p in _list(join["ports"])), _strings(join["aliases"])),
            flex=None if flex is None else FlexMove(
                {str(k): _port_from_json(p)  # type: ignore[misc]
                 for k, p in _mapping(flex["ports"]).items()},
                {str(k): _variable_from_json(_mapping(v))
                 for k, v in _mapping(flex["vars"]).items()},
                _strings(flex["outputs"])),
            spread=None if m.get("spread") is None else spread_from_json(m["spread"]))
    return _decoded("move", decode)
