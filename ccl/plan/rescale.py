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
        return _why_not_join(element, plan, select, part)
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


def _conjuncts(expr: object) -> list:
    """The operands of a tree of ANDs (as runtime/engine/join.py splits an ON condition)."""
    if isinstance(expr, dict) and expr.get("node") == "Binary" and expr.get("op") == "and":
        return _conjuncts(expr["left"]) + _conjuncts(expr["right"])
    return [expr]


def _equality(part: object, aliases: set[str]) -> Optional[tuple[tuple[str, str], tuple[str, str]]]:
    """``((alias, col), (alias, col))`` when ``part`` is ``a.x = b.y`` over ``aliases``."""
    if not (isinstance(part, dict) and part.get("node") == "Binary" and part.get("op") == "="):
        return None
    sides = []
    for side in (part.get("left"), part.get("right")):
        if not (isinstance(side, dict) and side.get("node") == "FieldAccess"):
            return None
        base = side.get("base") or {}
        alias = (base.get("name") or {}).get("name") if base.get("node") == "Var" else None
        if alias not in aliases:
            return None
        sides.append((alias, (side.get("field") or {}).get("name")))
    return sides[0], sides[1]


def join_ports(element: dict, plan: dict) -> list[Optional[dict]] | str:
    """Per source of the element's one select, in FROM order, how its rows are placed: its HASH
    columns and their types (``{"alias", "columns", "types"}``), or None for a broadcast input
    (every instance holds all its rows); or why the sources cannot be placed so."""
    select = element["query"]["selects"][0]
    specs: dict[str, list[dict]] = {}
    for spec in element["partition"]["specs"]:
        specs.setdefault(spec["input"], []).append(spec)
    broadcast = set(element["partition"].get("broadcast") or [])
    ports: list[Optional[dict]] = []
    for src in select["sources"]:
        by = specs.get(src["element"]) or []
        if len(by) > 1:
            return (f"its input {src['element']} is partitioned twice: a row's instance is not "
                    f"one hash")
        if not by:
            if src["element"] not in broadcast:
                return f"its source {src['alias']} is neither HASH partitioned nor broadcast"
            ports.append(None)
            continue
        types = _source_types(plan, src["element"])
        ports.append({"alias": src["alias"], "columns": list(by[0]["columns"]),
                      "types": [types.get(c, "string") for c in by[0]["columns"]]})
    return ports


def _why_not_join(element: dict, plan: dict, select: dict, part: dict) -> Optional[str]:
    """Why the per-instance state of a join (the element's one select over several sources) cannot
    move, or None: every source HASH partitioned on columns its ON conditions equate (in order,
    of one type) or broadcast; outer joins preserve hashed rows only; where a level joins
    broadcast rows with hashed ones its ON is equalities alone (the match counts of the broadcast
    rows are recounted from the equality indexes)."""
    if element["physical"].get("path") != "per-instance":
        return "it joins outside the per-instance engine, whose state is not moved"
    if select.get("group_by") or select.get("aggregates") or select.get("matching"):
        return "it joins and aggregates: the groups of a join are not moved"
    for src in select["sources"]:
        if src.get("keep"):
            return (f"KEEP on its source {src['alias']} holds that source's rows per instance, "
                    f"not by key")
    ports = join_ports(element, plan)
    if isinstance(ports, str):
        return f"it joins and {ports}"
    aliases = [src["alias"] for src in select["sources"]]
    hashed = [p for p in ports if p is not None]
    if not hashed:
        return "none of its join's sources is HASH partitioned"
    # every hashed source's k-th hash column equated (through the ON equalities) with the others'
    parent = {(a, c): (a, c) for p in hashed for a, c in [(p["alias"], col) for col in p["columns"]]}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    levels = []
    for j, join in enumerate(select.get("joins") or []):
        if join.get("temporal"):
            return "its join is temporal: which rows it keeps depends on their times per instance"
        only_equal = True
        for conj in _conjuncts(join.get("on")):
            pair = _equality(conj, set(aliases))
            if pair is None:
                if not (isinstance(conj, dict) and conj.get("node") == "Literal"
                        and conj.get("value") is True):
                    only_equal = False
                continue
            parent[find(pair[0])] = find(pair[1])
        levels.append((join.get("kind", "inner"), only_equal))
    first = hashed[0]
    for p in hashed[1:]:
        if len(p["columns"]) != len(first["columns"]):
            return (f"its sources {first['alias']} and {p['alias']} are hashed on different "
                    f"numbers of columns: matching rows can be in different instances")
        for k, col in enumerate(p["columns"]):
            if find((p["alias"], col)) != find((first["alias"], first["columns"][k])):
                return (f"its ON does not equate the hash column {col} of {p['alias']} with "
                        f"{first['columns'][k]} of {first['alias']}: matching rows can be in "
                        f"different instances")
            if p["types"][k] != first["types"][k]:
                return (f"the hash columns {first['alias']}.{first['columns'][k]} and "
                        f"{p['alias']}.{col} have different types, which hash differently")
    # which aliases every row of each level's left side holds (outer joins null-extend)
    present = {aliases[0]}
    for j, (kind, only_equal) in enumerate(levels):
        left, right = aliases[: j + 1], ports[j + 1]
        left_hashed = any(ports[i] is not None for i in range(j + 1))
        if kind in ("left", "full") and not any(ports[aliases.index(a)] is not None
                                                for a in present):
            return (f"its {kind.upper()} JOIN keeps the unmatched rows of broadcast inputs "
                    f"({', '.join(left)}): each instance emits them")
        if kind in ("right", "full") and right is None:
            return (f"its {kind.upper()} JOIN keeps the unmatched rows of the broadcast input "
                    f"{aliases[j + 1]}: each instance emits them")
        if (left_hashed != (right is not None)) and not only_equal:
            return (f"its join of {aliases[j + 1]} has ON terms besides column equalities between "
                    f"broadcast and hashed rows: a broadcast row's matches in each new instance "
                    f"cannot be recounted")
        present = {"inner": present | {aliases[j + 1]}, "left": present,
                   "right": {aliases[j + 1]}, "full": set()}.get(kind, set())
    moved = _join_outputs(element, select, ports)
    if isinstance(moved, str):
        return moved
    if element["kind"] == "window":
        missing = [out for out, _ in moved if out not in element["key"]]
        if missing:
            return (f"its PRIMARY KEY does not include the hash column {missing[0]}, so its rows "
                    f"are not keyed by it")
        if element.get("keep"):
            return "its KEEP is counted per instance"
    elif element["kind"] != "stream":
        return "its per-instance state is not keyed by the hash columns"
    return None


def _join_outputs(element: dict, select: dict, ports: list[Optional[dict]]
                  ) -> list[tuple[str, str]] | str:
    """(output column, hash column) per hash column, each output column a hashed source's hash
    column as it is (any hashed source: the ON equates them), or why one is not. A stream keeps
    no rows: none is needed."""
    hashed = [p for p in ports if p is not None]
    out = []
    for k, col in enumerate(hashed[0]["columns"]):
        found = None
        for item in select.get("items") or []:
            for p in hashed:
                if _plain_column(item.get("expr"), {p["alias"]}) == p["columns"][k]:
                    found = found or item["name"]
        if found is None:
            if element["kind"] == "stream":
                return []
            return (f"the hash column {col} is not one of its columns as it is, so its state's "
                    f"keys do not give the instance")
        out.append((found, col))
    return out


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
            select = e["query"]["selects"][0]
            if select.get("joins") or len(select["sources"]) != 1:
                ports = join_ports(e, new)
                assert not isinstance(ports, str)  # (why_not_rescaled said so)
                first = next(p for p in ports if p is not None)
                hashed = _join_outputs(e, select, ports)
                assert not isinstance(hashed, str)
                move["hash"] = [[out, src, first["types"][first["columns"].index(src)]]
                                for out, src in hashed]
                move["join"] = {"ports": ports, "aliases": [s["alias"] for s in select["sources"]]}
                move["store"] = "engine"
                moves[e["name"]] = move
                continue
            spec = e["partition"]["specs"][0]
            types = _source_types(new, spec["input"])
            hashed = _hash_outputs(e, select, spec)
            assert not isinstance(hashed, str)  # (why_not_rescaled said so)
            move["hash"] = [[out, src, types.get(src, "string")] for out, src in hashed]
            move["store"] = "native" if e["physical"].get("native") == "aggregation" else "engine"
        moves[e["name"]] = move
    return moves, refused
