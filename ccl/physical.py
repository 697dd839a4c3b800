"""How the runtime executes each planned element: the native Spark path or the per-instance path.

Shared by ``ccl explain`` and the runtime so that what is explained is what runs.
"""
from __future__ import annotations

from typing import Mapping, Optional

NATIVE = "native"
PER_INSTANCE = "per-instance"


NATIVE_AGGREGATES = ("count", "sum", "min", "max", "avg")


def instance_count(element: Mapping) -> int:
    """How many partition instances an element runs as (a module PARTITION multiplies)."""
    count = 1
    for key in ("module_partition", "partition"):
        part = element.get(key)
        if part and isinstance(part.get("count"), int) and part["count"] > 0:
            count *= part["count"]
    return count


def changed_instances(old: Mapping, new: Mapping) -> list[tuple[str, int, int]]:
    """(element, count before, count now) for each element of plan ``new`` whose instance count
    differs from plan ``old``'s: state split by instance cannot be carried over."""
    before = {e.get("name"): instance_count(e) for e in old.get("elements", [])}
    return [(e["name"], before[e["name"]], instance_count(e)) for e in new.get("elements", [])
            if e.get("name") in before and before[e["name"]] != instance_count(e)]


def path_of(element: Mapping, plan: Optional[Mapping] = None) -> tuple[str, str]:
    """(path, why) for one plan element (docs/plan.md); ``plan`` lets the rule look at sources.

    Native (Spark expressions and operators, no per-instance engine):
    - an input stream with no AUTOGENERATE and no WHERE (a row is an insert, a delete is dropped, a
      row that does not parse is a bad record);
    - a stream aggregation that never retracts (:func:`native_aggregation`).
    Everything else (input windows and delta streams, which check keys and opcodes; other derived
    elements; Flex operators) runs on the per-instance path.
    """
    if (element.get("role") == "input" and element.get("kind") == "stream"
            and element.get("query") is None and not element.get("flex")
            and not element.get("autogenerate") and not element.get("input_where")):
        return NATIVE, "input stream without state: Spark expressions"
    if element.get("query") is None and not element.get("flex"):
        return PER_INSTANCE, "input element: key and opcode rules need per-instance state"
    if plan is not None and native_aggregation(element, plan) is not None:
        return NATIVE, ("aggregation of a stream: Spark group-by per batch on (instance, group), "
                        "merged into per-group totals")
    return PER_INSTANCE, "per-instance state in transformWithState"


def _column(expr: object, alias: str) -> Optional[str]:
    """The column name when ``expr`` (plan JSON) is ``alias.column``."""
    if not isinstance(expr, Mapping) or expr.get("node") != "FieldAccess":
        return None
    base = expr.get("base") or {}
    if base.get("node") != "Var" or base.get("name", {}).get("name") != alias:
        return None
    return expr["field"]["name"]


def native_aggregation(element: Mapping, plan: Mapping) -> Optional[dict]:
    """The parts of a GROUP BY window that Spark can run natively, or None.

    It must be a window with KEEP ALL over one *stream* (inserts only: nothing is ever retracted),
    no WHERE/HAVING/GROUP FILTER/FROM KEEP/DECLARE, grouped by plain columns, with count/sum/min/
    max/avg of plain columns (not DISTINCT), and select items that are group columns or
    aggregates. Any partitioning: the runtime gives each row its instance as the per-instance path
    does and groups by (instance, group columns), so every instance has its own groups (with HASH
    on group columns, a group lives in one instance and the result is the unpartitioned one).
    Returns ``{"source", "alias", "groups": [(item, column)], "aggregates": [(item, fn, column or
    None)]}``.
    """
    query = element.get("query")
    if (element.get("kind") != "window" or not query or len(query["selects"]) != 1
            or element.get("flex") or element.get("declare")
            or (element.get("keep") or {}).get("kind") != "all"):
        return None
    sel = query["selects"][0]
    if (len(sel["sources"]) != 1 or sel.get("joins") or sel.get("where") or sel.get("having")
            or sel.get("group_filter") or sel.get("matching") or sel["sources"][0].get("keep")
            or not sel.get("group_by") or not sel.get("aggregates")):
        return None
    alias, source = sel["sources"][0]["alias"], sel["sources"][0]["element"]
    src = next((e for e in plan["elements"] if e["name"] == source), None)
    if src is None or src.get("kind") != "stream":
        return None
    group_cols = [_column(g, alias) for g in sel["group_by"]]
    if None in group_cols:
        return None
    aggs: dict[str, tuple[str, Optional[str]]] = {}
    for a in sel["aggregates"]:
        args = [x for x in a.get("args") or [] if x.get("node") != "Star"]  # count(*)
        col = _column(args[0], alias) if len(args) == 1 else None
        if (a["fn"] not in NATIVE_AGGREGATES or a.get("distinct") or len(args) > 1
                or (args and col is None) or (not args and a["fn"] != "count")):
            return None
        aggs[a["name"]] = (a["fn"], col)
    groups, aggregates = [], []
    for item in sel["items"]:
        expr = item["expr"]
        col = _column(expr, alias)
        if col is not None and col in group_cols:
            groups.append((item["name"], col))
        elif expr.get("node") == "Var" and expr["name"]["name"] in aggs:
            fn, arg = aggs[expr["name"]["name"]]
            aggregates.append((item["name"], fn, arg))
        else:
            return None
    if sorted(element.get("key") or []) != sorted(name for name, _ in groups) \
            or sorted({c for _, c in groups}) != sorted(set(group_cols)):
        return None
    return {"source": source, "alias": alias, "groups": groups, "aggregates": aggregates}
