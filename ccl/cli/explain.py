"""`ccl explain`: how each partitioned element is split into instances, in words, and the physical
plan of every element (from the compiled plan: partitioning, instances, state, path)."""
from __future__ import annotations

import os
from typing import Mapping, Optional

from ..analysis.analyzer import PartitionedElement
from ..analysis.symbols import Element
from ..plan.codec import plan_to_json
from ..plan.model import Physical, Plan
from ..syntax.printer import to_ccl


def _compiled(plan: Plan) -> dict[tuple[str, str], Optional[str]]:
    """(partitioned element or module instance as written, input as BY names it) -> why its
    custom partition function does not compile to a Spark expression (None: it does), as the
    plan decided."""
    found: dict[tuple[str, str], Optional[str]] = {}
    for e in plan.elements:
        for part in (e.partition, e.module_partition):
            if part is None:
                continue
            target = part.partitions_var.removesuffix("_partitions")
            for spec in part.specs:
                if spec.compiled is not None:
                    found.setdefault((target, spec.alias), spec.why)
                    found.setdefault((target, spec.input), spec.why)
    return found


def explain_partitioning(partitioned: list[PartitionedElement],
                         elements: Mapping[str, Element], plan: Plan) -> str:
    """One paragraph per partitioned element: count, functions and paths, broadcast inputs
    (``elements``: the project's elements, whose keys ROUNDROBIN rotates; ``plan``: its decisions
    on the partition functions)."""
    if not partitioned:
        return "no partitioned elements\n"
    compiled = _compiled(plan)
    lines: list[str] = []
    for el in partitioned:
        count = f"{el.count} instances" if el.count is not None else f"PARTITIONS {el.count_text} (no value)"
        lines.append(f"{el.name} ({el.kind}): {count}")
        for spec, source in el.specs:
            if spec.method == "hash":
                cols = ", ".join(c.name for c in spec.columns)
                lines.append(f"  input {source}: HASH({cols}) -> Spark expression "
                             f"pmod(hash({cols}), {el.count_text})")
            elif spec.method == "roundrobin":
                key = ", ".join(elements[source].roundrobin_key) if source in elements else ""
                how = (f"pmod(hash({key}), {el.count_text}) (its keys rotate, each with its changes)"
                       if key else f"pmod(sequence number, {el.count_text})")
                lines.append(f"  input {source}: ROUNDROBIN -> Spark expression {how}")
            else:
                why = compiled.get((el.name, source), "not in the plan")
                path = ("compiled to one Spark expression" if why is None
                        else f"SPLASH interpreter in an Arrow UDF (not compilable: {why})")
                lines.append(f"  input {source}: custom function -> {path}")
                lines.extend("      " + ln for ln in to_ccl(spec.body).splitlines())
        for name in el.broadcast:
            lines.append(f"  input {name}: broadcast to every instance")
    return "\n".join(lines) + "\n"


# --- the physical plan ---------------------------------------------------------------------------

def _duration(millis: int) -> str:
    for unit, size in (("HOURS", 3_600_000), ("MINUTES", 60_000), ("SECONDS", 1000)):
        if millis and millis % size == 0:
            count = millis // size
            return f"{count} {unit[:-1] if count == 1 else unit}"
    return f"{millis} MILLISECONDS"


def keep_text(keep: Optional[Mapping]) -> str:
    """A plan KEEP (docs/plan.md) back in CCL words: ``KEEP 5 MINUTES``, ``KEEP 3 ROWS PER (a)``."""
    if not keep:
        return "KEEP ALL"
    kind = keep.get("kind")
    if kind == "rows":
        text = f"KEEP {keep.get('count')} ROWS"
    elif kind == "every_rows":
        text = f"KEEP EVERY {keep.get('count')} ROWS"
    elif kind == "time":
        text = f"KEEP {_duration(int(keep.get('millis') or 0))}"
    elif kind == "every_time":
        text = f"KEEP EVERY {_duration(int(keep.get('millis') or 0))}"
    elif kind == "last":
        text = "KEEP LAST"
    else:
        text = "KEEP ALL"
    if keep.get("slack"):
        text += f" SLACK {keep['slack']}"
    if keep.get("per"):
        text += f" PER ({', '.join(keep['per'])})"
    return text


def aging_text(aging: Optional[Mapping]) -> str:
    """A plan AGES policy back in CCL words (empty for none)."""
    if not aging:
        return ""
    start = f" FROM {aging['start']}" if aging.get("start") else ""
    return (f" AGES EVERY {_duration(int(aging['millis']))} SET {aging['column']} "
            f"{aging['times']} TIMES{start}")


def state_kind(element: Mapping) -> str:
    """What state an element keeps per instance, in words."""
    if element.get("flex"):
        flex = element["flex"]
        handlers = len(flex.get("handlers", []))
        inputs = "".join(f"; input {name} with {keep_text(keep)}" for name, keep
                         in zip(flex.get("input_names") or [], flex.get("input_keeps") or []) if keep)
        return (f"flex: {handlers} handler(s), {len(flex.get('declare', []))} DECLARE item(s); "
                f"output {element.get('kind')} keyed by ({', '.join(element.get('key', []))}) "
                f"with {keep_text(element.get('keep'))}{inputs}")
    if not element.get("stateful"):
        return "none"
    parts: list[str] = []
    for sel in (element.get("query") or {}).get("selects", []):
        sources = sel.get("sources", [])
        if len(sources) > 1:
            kinds = ", ".join(j.get("kind", "inner") for j in sel.get("joins", []))
            parts.append(f"join of {len(sources)} sources ({kinds})")
        if sel.get("aggregates") or sel.get("group_by"):
            parts.append(f"aggregation: {len(sel.get('group_by', []))} GROUP BY expression(s), "
                         f"{len(sel.get('aggregates', []))} aggregate(s)")
        if sel.get("matching"):
            parts.append(f"pattern MATCHING over {_duration(int(sel['matching'].get('millis') or 0))}")
        for src in sources:
            if src.get("keep"):
                parts.append(f"source {src['alias']} with {keep_text(src['keep'])}")
    if element.get("declare"):
        parts.append(f"local DECLARE ({len(element['declare'])} item(s))")
    kind = element.get("kind")
    if kind in ("window", "delta stream"):
        keep = (f" with {keep_text(element.get('keep'))}{aging_text(element.get('aging'))}"
                if kind == "window" else "")
        parts.append(f"{kind} keyed by ({', '.join(element.get('key', []))}){keep}")
    elif element.get("keep"):
        parts.append(f"{kind} with {keep_text(element['keep'])}")
    return "; ".join(dict.fromkeys(parts)) or "none"


def _partition_lines(part: Mapping, what: str) -> list[str]:
    lines = [f"    {what}: {part.get('count')} partitions"]
    for spec in part.get("specs", []):
        method = spec.get("method")
        if method == "hash":
            how = f"HASH({', '.join(spec.get('columns', []))})"
        elif method == "roundrobin" and spec.get("columns"):
            how = f"ROUNDROBIN over its keys ({', '.join(spec['columns'])})"
        elif method == "roundrobin":
            how = "ROUNDROBIN"
        else:
            how = "custom function"
        lines.append(f"      input {spec.get('input')}: {how}")
    for name in part.get("broadcast", []):
        lines.append(f"      input {name}: broadcast to every instance")
    return lines


def decided(p: Physical) -> str:
    """The plan's other physical decisions of an element (docs/plan.md "Physical decisions"), in
    words: how it runs, where, what runs in its batches, whether its changelog is written."""
    parts = []
    if p.native is not None:
        parts.append(f"native {p.native}")
    if p.columnar is not None:
        spread = (f", buckets by instance and ({', '.join(p.group_columns)})"
                  if p.group_columns is not None else "")
        parts.append(f"columnar aggregation ({p.columnar} mode{spread})")
    if p.kernel is not None:
        parts.append(f"{p.kernel.replace('_', ' ')} kernel")
    if p.arrow:
        parts.append("applyInArrow with state files")
    if p.window_store:
        parts.append("keyed state in the state store")
    if p.uses_time:
        parts.append("timers")
    parts.append("a stage of the project's query" if p.project_stage else "a query of its own")
    if p.fused_consumers:
        parts.append(f"runs in its batches: {', '.join(p.fused_consumers)}")
    if p.unrecorded:
        parts.append("changelog not written (nothing reads it)")
    if p.input_adapter is not None:
        parts.append(f"files of adapter {p.input_adapter}")
    return "; ".join(parts)


def explain_physical(typed: Plan) -> str:
    """Per plan element: kind and role, partitioning, instance count, state, path (with why),
    broadcast inputs and the plan's other decisions (:func:`decided`), in the order the elements
    run; the path, instances and decisions are the plan's, printed as it holds them."""
    from ..ops.compile import element_inputs

    plan = plan_to_json(typed)
    elements = plan.get("elements", [])
    lines = [f"physical plan ({len(elements)} element(s), in the order they run):"]
    for i, e in enumerate(elements, 1):
        where = f", line {e['line']} of {os.path.basename(e['file'])}" if e.get("line") else ""
        lines.append(f"  {i}. {e['name']}: {e.get('role')} {e.get('kind')}{where}")
        reads = element_inputs(e)
        if reads:
            lines.append(f"    reads: {', '.join(reads)}")
        if not e.get("partition") and not e.get("module_partition"):
            lines.append("    partitioning: none")
        if e.get("module_partition"):
            lines.extend(_partition_lines(e["module_partition"], "module instance partitioning"))
        if e.get("partition"):
            lines.extend(_partition_lines(e["partition"], "partitioning"))
        physical = e["physical"]
        lines.append(f"    instances: {physical['instances']}")
        lines.append(f"    state: {state_kind(e)}")
        lines.append(f"    path: {physical['path']} ({physical['why']})")
        broadcast = sorted({b for key in ("partition", "module_partition") if e.get(key)
                            for b in e[key].get("broadcast", [])})
        lines.append(f"    broadcast inputs: {', '.join(broadcast) if broadcast else 'none'}")
        physical_of = typed.elements[i - 1].physical
        if physical_of is not None:
            lines.append(f"    decided: {decided(physical_of)}")
    return "\n".join(lines) + "\n"
