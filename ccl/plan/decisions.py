"""The physical decisions, made once by the compiler and stored in the plan (docs/plan.md
"Physical decisions"): per element its path, native operator, instances, timers, columnar mode,
by-group buckets, columnar kernel, whether it runs in applyInArrow and keeps its state in the
state store, which elements run inside its batches, whether its changelog is written and which
input adapter's files feed it; per custom partition function whether it compiles to a Spark
expression. The runtime reads them
(:class:`ccl.plan.model.Physical`) and never recomputes them.

The planner builds the typed plan (:mod:`ccl.plan.model`) and :func:`decide` stores the decisions
in it; the rules of :mod:`ccl.plan.physical` read it by attribute.
"""
from __future__ import annotations

from dataclasses import replace
from typing import AbstractSet, Mapping, Optional, Sequence

from . import physical as ph
from .model import Element, Partition, Physical, Plan
from .partition_functions import column_kinds, why_not_compilable

__all__ = ["arrow_elements", "decide", "fused_consumers", "native_path", "project_stages",
           "unrecorded_inputs", "window_store"]


def native_path(element: Element, plan: Plan, native_operators: bool = True) -> Optional[str]:
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


def window_store(element: Element, arrow: bool, timed: bool) -> bool:
    """Whether the keyed state (window rows and times, aggregate groups) of ``element`` lives in
    the bucket's state store (runtime/state/rows.py) when applyInArrow runs it: an ``arrow``
    element, or one with timers (``timed``: in the project's query; in a query of its own it runs
    on transformWithState, whose state stays pickled), but not a Flex, whose window iterators walk
    rows in the order they were inserted (the store keeps key order)."""
    return (arrow or timed) and element.flex is None


def _path(element: Element, plan: Plan, native: Optional[str],
          columnar: Optional[str]) -> tuple[str, str]:
    path, why = ph.path_of(element, plan, columnar)
    if path == ph.NATIVE and native is None:  # native operators turned off when planning
        return ph.PER_INSTANCE, "native operators off (planning option): the per-instance engine"
    return path, why


def _compiled_specs(partition: Optional[Partition], plan: Plan) -> Optional[Partition]:
    """``partition`` with each custom spec's ``compiled`` and ``why`` filled in."""
    if partition is None:
        return partition
    specs = []
    for spec in partition.specs:
        if spec.method == "custom" and spec.block is not None:
            source = next((e for e in plan.elements if e.name == spec.input), None)
            columns = source.columns if source is not None else ()
            why = why_not_compilable(spec.block, spec.alias or spec.input, column_kinds(columns),
                                     partition.partitions_var or "")
            spec = replace(spec, compiled=why is None, why=why)
        specs.append(spec)
    return replace(partition, specs=tuple(specs))


def decide(plan: Plan, native_operators: bool = True) -> Plan:
    """``plan`` with every element's ``physical`` record and every custom partition spec's
    ``compiled``/``why``, and ``native_operators`` noted."""
    native = {e.name: native_path(e, plan, native_operators) for e in plan.elements}
    timed = {e.name for e in plan.elements if ph.uses_time(e)}
    arrow = arrow_elements(plan, native, timed)
    fused = fused_consumers(plan, native, arrow)
    unrecorded = set(unrecorded_inputs(plan, fused))
    staged = set(project_stages(plan, native, arrow, timed))
    elements = []
    for e in plan.elements:
        name = native[e.name]
        columnar = ph.columnar_aggregation(e, plan)
        path, why = _path(e, plan, name, columnar)
        adapter = ph.input_adapter(plan, e.name)
        spread = ph.group_columns(e, plan, columnar)
        physical = Physical(
            path=path, why=why, native=name, instances=ph.instance_count(e),
            uses_time=e.name in timed, columnar=columnar,
            kernel=ph.columnar_kernel(e, plan, columnar) if name is None else None,
            group_columns=tuple(spread) if spread is not None else None, arrow=e.name in arrow,
            window_store=window_store(e, e.name in arrow, e.name in timed),
            fused_consumers=tuple(fused.get(e.name, [])), unrecorded=e.name in unrecorded,
            project_stage=e.name in staged,
            aggregation=ph.native_aggregation(e, plan) if name == "aggregation" else None,
            filter=ph.native_filter(e, plan) if name == "stream" else None,
            input_adapter=adapter.name if adapter is not None else None)
        elements.append(replace(e, partition=_compiled_specs(e.partition, plan),
                                module_partition=_compiled_specs(e.module_partition, plan),
                                physical=physical))
    return replace(plan, elements=tuple(elements), native_operators=native_operators)
