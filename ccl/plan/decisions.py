"""The physical decisions, made once by the compiler and stored in the plan (docs/plan.md
"Physical decisions"): per element its path, native operator, instances, timers, columnar mode,
by-group buckets, columnar kernel, whether it runs in applyInArrow and keeps its state in the
state store, which elements run inside its batches, whether its changelog is written and which
input adapter's files feed it; per custom partition function whether it compiles to a Spark
expression. The runtime reads them
(:class:`ccl.plan.model.Physical`) and never recomputes them.

The rules of :mod:`ccl.plan.physical` read the plan's JSON form; the graph of elements is read
from the typed plan.
"""
from __future__ import annotations

from typing import AbstractSet, Mapping, Optional, Sequence

from ..syntax import nodes as n
from . import physical as ph
from .codec import plan_from_json
from .model import Plan
from .partition_functions import column_kinds, why_not_compilable

__all__ = ["arrow_elements", "decide", "fused_consumers", "native_path", "project_stages",
           "unrecorded_inputs", "window_store"]


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


def arrow_elements(plan: Plan, native: Mapping[str, Optional[str]],
                   timed: AbstractSet[str]) -> list[str]:
    """The per-instance elements (``native``: each element's :func:`native_path`) that need no
    timers (not in ``timed``): they run in their query's batches with ``applyInArrow`` and keep
    their state in files (runtime/arrow_state.py)."""
    return [e.name for e in plan.elements
            if e.ports() and native[e.name] is None and e.name not in timed]


def fused_consumers(plan: Plan, native: Mapping[str, Optional[str]],
                    arrow: Sequence[str] = ()) -> dict[str, list[str]]:
    """Producer name -> the elements that run inside the producer's batches instead of a query of
    their own: a native aggregation, a native stream or an ``arrow`` element (see
    :func:`arrow_elements`) whose only source is the producer (not itself a native aggregation).
    Each such batch gets the producer's output rows directly, under the producer's batch id, so
    it is written (and replayed) with the producer's batch."""
    by_name = {e.name: e for e in plan.elements}
    fused: dict[str, list[str]] = {}
    for e in plan.elements:
        ports = e.ports()
        if (e.is_input or len(ports) != 1
                or (native[e.name] not in ("aggregation", "stream") and e.name not in arrow)):
            continue
        source = by_name.get(ports[0][1])
        if source is not None and source.ports() and native[source.name] != "aggregation":
            fused.setdefault(source.name, []).append(e.name)
    return fused


def project_stages(plan: Plan, native: Mapping[str, Optional[str]],
                   arrow: Sequence[str] = (), timed: AbstractSet[str] = frozenset()) -> list[str]:
    """The elements that may run as stages of the project's one query (runtime/project_query.py):
    input elements run natively, in applyInArrow or with timers (``timed``: the query's tick
    files wake them), error streams ON such elements only (their rows are the bad records those
    stages write in the batch), and derived elements run so whose every source is such an
    element. The others run in queries of their own; so does every element of a run with a file
    limit per batch, and an input Spark's file source cannot list and its readers (facts of the
    run: runtime.run_setup.project_members)."""
    staged: set[str] = set()
    grew = True
    while grew:  # (elements come in dependency order; this does not rely on it)
        grew = False
        for e in plan.elements:
            if e.name in staged:
                continue
            if e.error_sources is not None:
                if all(src in staged for src in e.error_sources):
                    staged.add(e.name)
                    grew = True
                continue
            if not e.ports():
                continue
            runs = native[e.name] is not None or e.name in arrow or e.name in timed
            if runs and (e.is_input or all(src in staged for _, src in e.ports())):
                staged.add(e.name)
                grew = True
    return [e.name for e in plan.elements if e.name in staged]


def unrecorded_inputs(plan: Plan, fused: Mapping[str, Sequence[str]]) -> list[str]:
    """Input elements whose changelog nothing reads: no output adapter, and every element reading
    them runs inside their batches (``fused``). Their rows are in the input files
    (replay-stable), so writing them again would cost a copy of the input per batch."""
    written = {a.element for a in plan.adapters if a.direction == "output"}
    readers: dict[str, set[str]] = {}
    for e in plan.elements:
        for _, source in e.ports():
            if source != e.name:
                readers.setdefault(source, set()).add(e.name)
    return [e.name for e in plan.elements
            if e.is_input and e.name not in written
            and readers.get(e.name, set()) <= set(fused.get(e.name, []))]


def window_store(element: Mapping, arrow: bool, timed: bool) -> bool:
    """Whether the keyed state (window rows and times, aggregate groups) of ``element`` lives in
    the bucket's state store (runtime/state/rows.py) when applyInArrow runs it: an ``arrow``
    element, or one with timers (``timed``: in the project's query; in a query of its own it runs
    on transformWithState, whose state stays pickled), but not a Flex, whose window iterators walk
    rows in the order they were inserted (the store keeps key order)."""
    return (arrow or timed) and not element.get("flex")


def _path(element: Mapping, plan: Mapping, native: Optional[str]) -> tuple[str, str]:
    path, why = ph.path_of(element, plan)
    if path == ph.NATIVE and native is None:  # native operators turned off when planning
        return ph.PER_INSTANCE, "native operators off (planning option): the per-instance engine"
    return path, why


def _compiled_specs(partition: Optional[dict], plan: Mapping) -> Optional[dict]:
    """``partition`` with each custom spec's ``compiled`` and ``why`` filled in."""
    if not partition:
        return partition
    specs = []
    for spec in partition["specs"]:
        if spec["method"] == "custom" and spec.get("block") is not None:
            block = n.from_json(spec["block"])
            source = next((e for e in plan["elements"] if e["name"] == spec["input"]), {})
            why = why_not_compilable(block, spec.get("as") or spec["input"],  # type: ignore[arg-type]
                                     column_kinds(source.get("columns") or []),
                                     partition.get("partitions_var") or "")
            spec = {**spec, "compiled": why is None, "why": why}
        specs.append(spec)
    return {**partition, "specs": specs}


def decide(plan: dict, native_operators: bool = True) -> dict:
    """``plan`` (JSON form) with every element's ``physical`` record and every custom partition
    spec's ``compiled``/``why``, and ``native_operators`` noted."""
    typed = plan_from_json(plan)
    native = {e["name"]: native_path(e, plan, native_operators) for e in plan["elements"]}
    timed = {e["name"] for e in plan["elements"] if ph.uses_time(e)}
    arrow = arrow_elements(typed, native, timed)
    fused = fused_consumers(typed, native, arrow)
    unrecorded = set(unrecorded_inputs(typed, fused))
    staged = set(project_stages(typed, native, arrow, timed))
    elements = []
    for e in plan["elements"]:
        path, why = _path(e, plan, native[e["name"]])
        adapter = ph.input_adapter(plan, e["name"])
        columnar = ph.columnar_aggregation(e, plan)
        physical = {
            "path": path, "why": why, "native": native[e["name"]], "instances": ph.instance_count(e),
            "uses_time": e["name"] in timed, "columnar": columnar,
            "kernel": ph.columnar_kernel(e, plan, columnar) if native[e["name"]] is None else None,
            "group_columns": ph.group_columns(e, plan), "arrow": e["name"] in arrow,
            "window_store": window_store(e, e["name"] in arrow, e["name"] in timed),
            "fused_consumers": fused.get(e["name"], []), "unrecorded": e["name"] in unrecorded,
            "project_stage": e["name"] in staged,
            "aggregation": (ph.native_aggregation(e, plan)
                            if native[e["name"]] == "aggregation" else None),
            "filter": ph.native_filter(e, plan) if native[e["name"]] == "stream" else None,
            "input_adapter": adapter["name"] if adapter is not None else None}
        elements.append({**e, "partition": _compiled_specs(e.get("partition"), plan),
                         "module_partition": _compiled_specs(e.get("module_partition"), plan),
                         "physical": physical})
    return {**plan, "elements": elements, "native_operators": native_operators}
