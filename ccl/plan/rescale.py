"""Whether an element's per-instance state can move to another number of partition instances.

A checkpoint made with ``PARTITIONS n`` keeps each partitioned element's state split by instance.
Moving it to ``m`` instances (``ccl rescale``, ``ccl run --rescale``; runtime/rescale.py carries
the move out) gives the outputs of a run that had ``m`` from the start only where every piece of
state belongs to one key whose rows all go to one instance, and that instance can be computed from
the key alone: HASH partitioning on columns that key the state. Everything else is refused here,
naming the reason (:func:`why_not_rescaled`), before any file is touched.

Works on the plan's JSON form (what ``plan.json`` of a run directory holds), without Spark.
"""
from __future__ import annotations

from typing import Optional

# KEEP kinds whose retention is counted per instance unless PER groups it by the hash columns
_COUNTED = ("rows", "last")
# KEEP kinds whose state is a row count or a time bucket shared by all the rows of an instance
_BUCKETED = ("every_rows", "every_time")


def _plain_column(expr: Optional[dict], aliases: set[str]) -> Optional[str]:
    """The source column ``expr`` reads unchanged (``alias.col`` or ``col``), else None."""
    if not isinstance(expr, dict):
        return None
    if expr.get("node") == "FieldAccess":
        base = expr.get("base") or {}
        if base.get("node") == "Var" and (base.get("name") or {}).get("name") in aliases:
            return (expr.get("field") or {}).get("name")
        return None
    if expr.get("node") == "Var":
        return (expr.get("name") or {}).get("name")
    if expr.get("node") == "Ident":
        return expr.get("name")
    return None


def _source_types(plan: dict, source: str) -> dict[str, str]:
    for e in plan.get("elements", []):
        if e["name"] == source:
            return {c: t for c, t in e["columns"]}
    return {}


def why_not_rescaled(element: dict, plan: dict) -> Optional[str]:
    """Why the per-instance state of ``element`` (an element of the JSON plan ``plan``) cannot be
    moved to another instance count without changing results, in one clause; None when it can
    (also when it keeps nothing per instance)."""
    if element.get("module_partition"):
        return ("it is partitioned with its module (PARTITION BY on LOAD MODULE), whose "
                "elements' state is not moved")
    part = element.get("partition")
    if not part or not element.get("stateful"):
        return None  # nothing kept per instance: nothing to move
    for spec in part["specs"]:
        if spec["method"] == "roundrobin":
            return ("it is partitioned ROUNDROBIN: a row's instance follows its arrival, not a "
                    "key, so no key's state belongs to one instance under another count")
        if spec["method"] != "hash":
            return ("it is partitioned by a custom SPLASH function: which instance a key's state "
                    "would go to under another count is not known without its rows")
    if element.get("flex") is not None:
        declared = element["flex"].get("declare") or element.get("declare")
        if declared:
            return ("its Flex variables are kept per instance, not keyed by the partition key, "
                    "so they cannot be split between instances")
        return "a Flex keeps its state per instance, not keyed by the partition key"
    if element.get("declare"):
        return ("its DECLARE variables are kept per instance, not keyed by the partition key, so "
                "they cannot be split between instances")
    selects = (element.get("query") or {}).get("selects") or []
    if len(selects) != 1:
        return "its state is not that of one SELECT keyed by the hash columns"
    select = selects[0]
    if select.get("joins") or len(select["sources"]) != 1 or len(part["specs"]) != 1:
        return ("it joins: each side's rows are kept by the join's own keys, which this move "
                "does not map to the hash columns")
    if select.get("matching"):
        return "it matches patterns: a pattern's partial matches are kept per instance"
    source = select["sources"][0]
    if source.get("keep"):
        return (f"KEEP on its source {source['alias']} holds that source's rows per instance, "
                f"not by key")
    spec = part["specs"][0]
    if select.get("group_by") or select.get("aggregates"):
        grouped = {_plain_column(g, {source["alias"], source["element"]})
                   for g in select.get("group_by") or []}
        missing = [c for c in spec["columns"] if c not in grouped]
        if missing:
            return (f"its GROUP BY does not include the hash column {missing[0]}: a group's "
                    f"rows come from several instances")
    moved = _hash_outputs(element, select, spec)
    if isinstance(moved, str):
        return moved
    outputs = [out for out, _ in moved]
    if select.get("group_by") or select.get("aggregates"):
        if element["physical"].get("native") != "aggregation":
            return ("its groups are kept by the per-instance engine (see ccl explain); only "
                    "aggregations on Spark's group-by are moved")
        return None
    if element["kind"] != "window":
        return "its per-instance state is not keyed by the hash columns"
    missing = [c for c in outputs if c not in element["key"]]
    if missing:
        return (f"its PRIMARY KEY does not include the hash column {missing[0]}, so its rows "
                f"are not keyed by it")
    keep = element.get("keep") or {}
    if keep.get("kind") in _BUCKETED:
        return "KEEP EVERY empties all the rows of an instance at once: it is counted per instance"
    if keep.get("kind") in _COUNTED:
        per = keep.get("per") or []
        if not all(c in per for c in outputs):
            return (f"KEEP {keep.get('count') or 1} ROWS is counted per instance (no PER on the "
                    f"hash columns), so which rows stay depends on the instance count")
    return None


def _hash_outputs(element: dict, select: dict, spec: dict) -> list[tuple[str, str]] | str:
    """(output column, source column) of each hash column the element passes through unchanged,
    or why one is not."""
    source = select["sources"][0]
    aliases = {source["alias"], source["element"], spec.get("as") or spec["input"]}
    by_source = {}
    for item in select.get("items") or []:
        col = _plain_column(item.get("expr"), aliases)
        if col is not None:
            by_source.setdefault(col, item["name"])
    out = []
    for col in spec["columns"]:
        if col not in by_source:
            return (f"the hash column {col} is not one of its columns as it is, so its state's "
                    f"keys do not give the instance")
        out.append((by_source[col], col))
    return out


def rescale_moves(old: dict, new: dict) -> tuple[dict[str, dict], list[str]]:
    """The moves that take the run directory begun with the JSON plan ``old`` to the plan
    ``new`` (element name -> ``from``/``to`` instance counts, ``store`` (``native``: a Spark
    group-by snapshot, ``engine``: per-instance engine state, ``none``: nothing kept) and
    ``hash``: per hash column its output column, source column and type), and the refusals
    (``element 'X': reason``) of the elements whose count changes but whose state cannot move."""
    before = {e["name"]: e for e in old.get("elements", [])}
    moves: dict[str, dict] = {}
    refused: list[str] = []
    for e in new.get("elements", []):
        was = before.get(e["name"])
        if was is None or was["physical"]["instances"] == e["physical"]["instances"]:
            continue
        problem = why_not_rescaled(e, new)
        if problem:
            refused.append(f"element '{e['name']}': {problem}")
            continue
        move = {"from": was["physical"]["instances"], "to": e["physical"]["instances"],
                "store": "none", "hash": []}
        if e.get("stateful") and e.get("partition"):
            spec = e["partition"]["specs"][0]
            select = e["query"]["selects"][0]
            types = _source_types(new, spec["input"])
            hashed = _hash_outputs(e, select, spec)
            assert not isinstance(hashed, str)  # (why_not_rescaled said so)
            move["hash"] = [[out, src, types.get(src, "string")] for out, src in hashed]
            move["store"] = "native" if e["physical"].get("native") == "aggregation" else "engine"
        moves[e["name"]] = move
    return moves, refused
