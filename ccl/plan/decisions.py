"""The physical decisions, made once by the compiler and stored in the plan (docs/plan.md
"Physical decisions"): per element its path, native operator, instances, timers, columnar mode,
by-group buckets, whether it runs in applyInArrow, which elements run inside its batches,
whether its changelog is written and which input adapter's files feed it; per custom partition
function whether it compiles to a Spark expression. The runtime reads them (:class:`ccl.plan.model.Physical`) and never recomputes them.

The rules read the plan's JSON form (the rules of :mod:`ccl.plan.physical` are written over it).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ..syntax import nodes as n
from . import physical as ph
from .partition_functions import why_not_compilable

__all__ = ["arrow_elements", "decide", "fused_consumers", "native_path", "unrecorded_inputs"]


def is_input(element: Mapping) -> bool:
    """Whether the element is a CREATE INPUT stream or window (read from files)."""
    return element.get("role") == "input" and element.get("query") is None


def ports_of(element: Mapping) -> list[tuple[str, str]]:
    """(alias, source element name) per port, as :meth:`ccl.plan.model.Element.ports`."""
    if is_input(element):
        return [(element["name"], element["name"])]
    flex = element.get("flex")
    if flex:
        return list(zip(flex["input_names"], flex["inputs"]))
    if element.get("query") is None:
        return []
    return [(s["alias"], s["element"]) for sel in element["query"]["selects"] for s in sel["sources"]]


def native_path(element: Mapping, plan: Mapping, native_operators: bool = True) -> Optional[str]:
    """How Spark runs ``element`` natively: ``"input"`` (an input stream as expressions),
    ``"aggregation"`` (runtime/native_agg.py), ``"stream"`` (a filter and projection as
    expressions), or None for the per-instance path. ``native_operators=False`` keeps derived
    elements on the per-instance path."""
    if ph.path_of(element)[0] == ph.NATIVE:
        return "input"
    if native_operators and ph.native_aggregation(element, plan) is not None:
        return "aggregation"
    if native_operators and ph.native_filter(element, plan) is not None:
        return "stream"
    return None


def arrow_elements(plan: Mapping, native_operators: bool = True) -> list[str]:
    """The per-instance elements that need no timers (no time-based KEEP): they run in their
    query's batches with ``applyInArrow`` and keep their state in files (runtime/arrow_state.py)."""
    return [e["name"] for e in plan["elements"]
            if (is_input(e) or ports_of(e)) and native_path(e, plan, native_operators) is None
            and not ph.uses_time(e)]


def fused_consumers(plan: Mapping, native_operators: bool = True,
                    arrow: Sequence[str] = ()) -> dict[str, list[str]]:
    """Producer name -> the elements that run inside the producer's batches instead of a query of
    their own: a native aggregation, a native stream or an ``arrow`` element (see
    :func:`arrow_elements`) whose only source is the producer (not itself a native aggregation).
    Each such batch gets the producer's output rows directly, under the producer's batch id, so
    it is written (and replayed) with the producer's batch."""
    by_name = {e["name"]: e for e in plan["elements"]}
    fused: dict[str, list[str]] = {}
    for e in plan["elements"]:
        ports = ports_of(e)
        if (is_input(e) or len(ports) != 1
                or (native_path(e, plan, native_operators) not in ("aggregation", "stream")
                    and e["name"] not in arrow)):
            continue
        source = by_name.get(ports[0][1])
        if (source is not None and (is_input(source) or ports_of(source))  # it has a query
                and native_path(source, plan, native_operators) != "aggregation"):
            fused.setdefault(source["name"], []).append(e["name"])
    return fused


def unrecorded_inputs(plan: Mapping, fused: Mapping[str, Sequence[str]]) -> list[str]:
    """Input elements whose changelog nothing reads: no output adapter, and every element reading
    them runs inside their batches (``fused``). Their rows are in the input files
    (replay-stable), so writing them again would cost a copy of the input per batch."""
    written = {a["element"] for a in plan.get("adapters", []) if a.get("direction") == "output"}
    readers: dict[str, set[str]] = {}
    for e in plan["elements"]:
        for _, source in ports_of(e):
            if source != e["name"]:
                readers.setdefault(source, set()).add(e["name"])
    return [e["name"] for e in plan["elements"]
            if is_input(e) and e["name"] not in written
            and readers.get(e["name"], set()) <= set(fused.get(e["name"], []))]


def _path(element: Mapping, plan: Mapping, native: Optional[str]) -> tuple[str, str]:
    path, why = ph.path_of(element, plan)
    if path == ph.NATIVE and native is None:  # native operators turned off when planning
        return ph.PER_INSTANCE, "native operators off (planning option): the per-instance engine"
    return path, why


def _compiled_specs(partition: Optional[dict]) -> Optional[dict]:
    """``partition`` with each custom spec's ``compiled`` and ``why`` filled in."""
    if not partition:
        return partition
    specs = []
    for spec in partition["specs"]:
        if spec["method"] == "custom" and spec.get("block") is not None:
            block = n.from_json(spec["block"])
            why = why_not_compilable(block, spec.get("as") or spec["input"])  # type: ignore[arg-type]
            spec = {**spec, "compiled": why is None, "why": why}
        specs.append(spec)
    return {**partition, "specs": specs}


def decide(plan: dict, native_operators: bool = True) -> dict:
    """``plan`` (JSON form) with every element's ``physical`` record and every custom partition
    spec's ``compiled``/``why``, and ``native_operators`` noted."""
    arrow = arrow_elements(plan, native_operators)
    fused = fused_consumers(plan, native_operators, arrow)
    unrecorded = set(unrecorded_inputs(plan, fused))
    elements = []
    for e in plan["elements"]:
        native = native_path(e, plan, native_operators)
        path, why = _path(e, plan, native)
        adapter = ph.input_adapter(plan, e["name"])
        physical = {
            "path": path, "why": why, "native": native, "instances": ph.instance_count(e),
            "uses_time": ph.uses_time(e), "columnar": ph.columnar_aggregation(e, plan),
            "group_columns": ph.group_columns(e, plan), "arrow": e["name"] in arrow,
            "fused_consumers": fused.get(e["name"], []), "unrecorded": e["name"] in unrecorded,
            "aggregation": ph.native_aggregation(e, plan) if native == "aggregation" else None,
            "filter": ph.native_filter(e, plan) if native == "stream" else None,
            "input_adapter": adapter["name"] if adapter is not None else None}
        elements.append({**e, "partition": _compiled_specs(e.get("partition")),
                         "module_partition": _compiled_specs(e.get("module_partition")),
                         "physical": physical})
    return {**plan, "elements": elements, "native_operators": native_operators}
