"""`ccl verify`: the project as written against the project with every PARTITION BY removed, on
sample inputs (the runs and the comparison: runtime/verify.py; docs/analysis.md, "ccl verify")."""
from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Optional, Sequence

from ..diagnostics import Diagnostic
from ..syntax import nodes as n
from ..syntax.project import LoadedProject

if TYPE_CHECKING:
    from runtime.verify import Comparison, VerifyResult


def _nodes(value: object) -> Iterator[n.Node]:
    """Every node in ``value`` (a node, or lists and tuples of them), depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, n.Node):
            yield item
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item) if f.name != "span")
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def without_partitions(project: LoadedProject) -> tuple[LoadedProject, int]:
    """A copy of ``project`` whose statements (modules' and LOAD MODULE's too) have no PARTITION BY
    clause, and how many clauses were removed; ``project`` itself is not changed."""
    files = copy.deepcopy(project.files)
    removed = 0
    for tree in files.values():
        for node in _nodes(tree):
            if getattr(node, "partition", None) is not None and any(
                    f.name == "partition" for f in dataclasses.fields(node)):
                node.partition = None  # type: ignore[attr-defined]
                removed += 1
    return dataclasses.replace(project, files=files), removed


def element_of(diag: Diagnostic, elements: Sequence[Mapping]) -> Optional[str]:
    """The plan element whose statement holds ``diag`` (the last one starting at or before it in
    its file), or None."""
    best: Optional[Mapping] = None
    for e in elements:
        if e.get("file") == diag.span.file and e.get("line", 0) <= diag.span.line:
            if best is None or e["line"] >= best["line"]:
                best = e
    return best["name"] if best is not None else None


def upstream(plan: Mapping, name: str) -> list[str]:
    """``name`` and every element it reads from, directly or not (``name`` first)."""
    by_name = {e["name"]: e for e in plan["elements"]}
    out: list[str] = []
    todo = [name]
    while todo:
        current = todo.pop()
        if current in out or current not in by_name:
            continue
        out.append(current)
        todo.extend(_sources(by_name[current]))
    return out


def _sources(element: Mapping) -> Iterable[str]:
    flex = element.get("flex")
    if flex:
        return list(flex["inputs"])
    query = element.get("query") or {}
    return [s["element"] for sel in query.get("selects", []) for s in sel["sources"]]


def partition_warnings(plan: Mapping, diagnostics: Sequence[Diagnostic]) -> dict[str, list[Diagnostic]]:
    """The partition-safety warnings (CCL3xxx) by the element they are on."""
    out: dict[str, list[Diagnostic]] = {}
    for d in diagnostics:
        if d.code.startswith("CCL3") and not d.is_error:
            name = element_of(d, plan["elements"])
            if name is not None:
                out.setdefault(name, []).append(d)
    return out


def _show(value: object) -> str:
    if value is None:
        return "null"
    return str(value)


def _row(row: Mapping, columns: Sequence[str]) -> str:
    return "(" + ", ".join(f"{c}={_show(row.get(c))}" for c in columns) + ")"


def _side(rows: list[dict], columns: Sequence[str]) -> list[str]:
    return [_row(r, columns) for r in rows] or ["(no row)"]


def describe(comp: "Comparison", plan: Mapping, warnings: Mapping[str, list[Diagnostic]],
             partitioned: Iterable[str], ordered: bool = False) -> list[str]:
    """The lines of one element's verdict: differing keys with both sides' rows, then the
    warnings that predicted it (on the element or upstream of it). ``ordered``: a stream compared
    in order too."""
    what = ("window: by key" if comp.key else f"{comp.kind}: rows in order" if ordered
            else f"{comp.kind}: rows as a multiset")
    rows = f"{comp.rows[0]} rows partitioned, {comp.rows[1]} unpartitioned"
    if comp.unfixed_order is not None:
        return [f"{comp.name}: order not fixed, not compared ({what}; {rows})",
                f"  {comp.unfixed_order}"]
    if comp.equivalent:
        return [f"{comp.name}: equivalent ({what}; {rows})"]
    unit = "key(s) differ" if comp.key else "row(s) in one run only"
    if comp.out_of_order is not None:
        unit = f"row(s) at other places: the same rows in another order from row {comp.out_of_order + 1}"
    lines = [f"{comp.name}: differs ({what}; {rows}; {comp.differing} {unit})"]
    for diff in comp.differences:
        if comp.out_of_order is not None:
            lines.append(f"  from row {comp.out_of_order + 1}:")
        elif comp.key:
            label = ", ".join(f"{c}={_show(v)}" for c, v in zip(comp.key, diff.key))
            lines.append(f"  key {label}:")
        else:
            lines.append("  rows only in one run (first ones):")
        a, b = _side(diff.partitioned, comp.columns), _side(diff.unpartitioned, comp.columns)
        width = max(len(x) for x in a + ["partitioned"])
        lines.append(f"    {'partitioned'.ljust(width)} | unpartitioned")
        for i in range(max(len(a), len(b))):
            left = a[i] if i < len(a) else ""
            right = b[i] if i < len(b) else ""
            lines.append(f"    {left.ljust(width)} | {right}")
    if comp.key and comp.differing > len(comp.differences):
        lines.append(f"  ... and {comp.differing - len(comp.differences)} more key(s)")
    chain = upstream(plan, comp.name)
    predicted = [(e, d) for e in chain for d in warnings.get(e, [])]
    if predicted:
        for element, d in predicted:
            where = "" if element == comp.name else f" (upstream, on {element})"
            lines.append(f"  predicted by {d.code}{where}: {d.span}: {d.message}")
    else:
        parts = [e for e in chain if e in set(partitioned)]
        lines.append(f"  no partition-safety warning predicted this (partitioned upstream: "
                     f"{', '.join(parts) or 'none'}): a gap in the checker (ccl/analysis/safety.py)")
    return lines


def report(result: "VerifyResult", plan: Mapping, warnings: Mapping[str, list[Diagnostic]]) -> list[str]:
    """The report of ``ccl verify``: one verdict per output element and a summary line."""
    partitioned = [e["name"] for e in plan["elements"] if e.get("partition") or e.get("module_partition")]
    lines: list[str] = []
    unpartitioned = {e["name"] for e in plan["elements"]
                     if not e.get("partition") and not e.get("module_partition")}
    for comp in result.comparisons:
        lines += describe(comp, plan, warnings, partitioned,
                          ordered=not comp.key and comp.name in unpartitioned)
    unfixed = sum(c.unfixed_order is not None for c in result.comparisons)
    differ = sum(not c.equivalent for c in result.comparisons) - unfixed
    a, b = result.seconds
    lines.append(f"{len(result.comparisons) - differ - unfixed} equivalent, {differ} differ"
                 f"{f', {unfixed} order not fixed' if unfixed else ''} "
                 f"({result.why}; partitioned run {a:.2f} s, unpartitioned {b:.2f} s)")
    return lines
