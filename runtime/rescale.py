"""A run directory moved to another number of partition instances (``ccl rescale``,
``ccl run --checkpoint DIR --rescale``): each key's state goes to the instance its hash now
chooses.

The compiler decides what may move and how (ccl/plan/rescale.py :func:`rescale_moves`: HASH
partitioning on columns that key the state; the refusals name the element and the reason); this
module carries the moves out, as the state is after the last batch the project's query committed:

- per-instance engine state (runtime/arrow_state.py: the pickled instance states of each bucket,
  and the rows, times and groups of their windows in the bucket's RocksDB store,
  runtime/state/rows.py): every instance's window rows, their times and their PER groups are split
  by the instance the hash columns of their keys choose among the new count
  (:func:`runtime.spark_hash.spark_pmod_hash`, Spark's ``pmod(hash(cols), n)``) and gathered into
  the new instances' states, which are written to a new state directory (new stores included);
- a join's rows (its sources' mirrors, the Joiner's stores, indexes and match counts): each
  hashed port's rows go where their hash chooses, a broadcast port's rows to every new instance,
  whose match counts are counted again there (:func:`_split_join`, :func:`_recount`);
- a Flex's dictionaries and event cache buckets: each entry where the hash of its key chooses
  (:func:`_split_flex`);
- an aggregation the per-instance engine runs: each group, input and output key, output row and
  source row where the hash of its hash column values chooses (:func:`_split_groups`), and for
  a ``by_group`` one, within its instance, in the bucket runtime/rebucket.py's
  :func:`~runtime.rebucket.group_router` gives it (:func:`_spread`); a join that aggregates:
  its ports' rows as a join's, its groups as an aggregation's;
- a Spark group-by aggregation (runtime/native_agg.py): each group's ``__inst`` in its latest
  snapshot is recomputed from its group columns;
- a window's changelog: its rows' ``__inst`` is recomputed too, so that the window's final
  contents (runtime/outputs.py, the last change of each key per instance) see one instance per key.

The plans and moves are typed (ccl/plan/model.py ``Plan``, ``Move``): the checkpoint's plan is
decoded where it is read (:func:`checkpoint_plan`), the journal's moves and plan where the journal
is read (:func:`finish_rescale`).

Crash-safe as runtime/rebucket.py: a journal (``RUN/rescale.json``, holding the moves and the new
plan in their JSON forms, ccl/plan/codec.py) is written first; the new directories are built beside the old ones (``NAME.rescale``);
then each is swapped in (old renamed aside, new renamed in, old removed: a step that may be done
again) and ``plan.json`` replaced by the new plan. A run that finds the journal finishes (or
redoes) the move before anything else (:func:`finish_rescale`).
"""
from __future__ import annotations

import copy
import dataclasses
import glob
import json
import os
import re
import shutil
from typing import Any, Optional

from ccl.plan.codec import (PlanFormatError, move_from_json, move_to_json, plan_from_json,
                            plan_to_json)
from ccl.plan.model import Element, HashPort, JoinMove, Move, Plan
from ccl.splash.caches import EventCache
from ccl.splash.values import Dictionary

from .arrow_state import load_states, newest_batches, rows_root, save_states, saved_deadline
from .processor import INST
from .rebucket import JOURNAL as REBUCKET_JOURNAL, group_router, group_spec, last_commit
from .run_dir import PLAN_FILE, RunDirs, saved_plan, saved_run_plan, why_not_continued
from .run_setup import RunError, atomic_json, layout_of
from .spark_hash import spark_pmod_hash, spark_pmod_hash_columns
from .state import variables
from .state.rows import StoredTimes, detach, stored_parts, uses_window_store, window_states
from .state.variables import StoredDictionary, uses_variable_store
from .state.store import BucketStore, create, read_layout

JOURNAL = "rescale.json"
NEW = ".rescale"  # suffix of the directory where an element's new files are built
OLD = ".rescale-old"  # suffix of the old directory while it is swapped out


def checkpoint_plan(root: str) -> Optional[Plan]:
    """The plan the run directory ``root`` was begun with, decoded (None: none was begun there);
    RunError, saying why, when its ``plan.json`` is not a plan this ccl reads."""
    saved = saved_plan(root)
    if saved is None:
        return None
    try:
        return saved_run_plan(saved)
    except PlanFormatError as exc:
        raise RunError(f"the run directory {root} cannot be rescaled: its {PLAN_FILE} is not a "
                       f"plan this ccl reads ({exc})") from None


def counts_of(plan: Plan, like: Plan) -> Plan:
    """``plan`` with the instance (and PARTITIONS) counts of the plan ``like``, element by
    element: what the resume check compares with the checkpoint's plan, everything but the
    counts being the same."""
    counts = {e.name: e.physical.instances for e in like.elements if e.physical is not None}

    def counted(e: Element) -> Element:
        count = counts.get(e.name)
        if count is None:
            return e
        return dataclasses.replace(
            e, physical=None if e.physical is None else dataclasses.replace(e.physical,
                                                                            instances=count),
            partition=None if e.partition is None else dataclasses.replace(e.partition,
                                                                          count=count),
            module_partition=None if e.module_partition is None else dataclasses.replace(
                e.module_partition, count=count))
    return dataclasses.replace(plan, elements=tuple(counted(e) for e in plan.elements))


def rescale_run(root: str, old: Plan, new: Plan, moves: dict[str, Move]) -> None:
    """Move the state of the run directory ``root`` (begun with the plan ``old``) to the
    instance counts of ``new``, as ``moves`` (:func:`ccl.plan.rescale.rescale_moves`, whose
    refusals the caller has reported) says, and make ``new`` its plan. RunError when the
    directory cannot go on with ``new`` for another reason than the counts, or holds state the
    moves cannot place."""
    finish_rescale(root)
    problem = why_not_continued(root, saved_plan(root) or {}, counts_of(new, old))
    if problem:
        raise RunError(f"the run directory {root} cannot be rescaled: {problem}")
    if os.path.exists(os.path.join(root, REBUCKET_JOURNAL)):
        raise RunError(f"the run directory {root} is moving its state to other buckets: run it "
                       f"once (ccl run --checkpoint) before rescaling it")
    dirs = RunDirs(root)
    layout = layout_of(root)
    planned: dict[str, Move] = {}
    for name, move in moves.items():
        if move.store != "none" and name not in layout.project:
            raise RunError(f"the run directory {root} cannot be rescaled: element '{name}' runs "
                           f"in a query of its own, whose state is not moved")
        if move.store == "engine" and name in layout.by_group:
            if move.groups is None or move.join is not None:
                raise RunError(f"the run directory {root} cannot be rescaled: element '{name}' "
                               f"spreads each instance's groups over several buckets")
            # (each group then goes, within its new instance, to the bucket the runtime sends
            # its rows to)
            move = dataclasses.replace(move, spread=group_spec(new, name))
        planned[name] = move
    atomic_json(os.path.join(root, JOURNAL),
                {"batch": last_commit(dirs), "buckets": layout.buckets,
                 "moves": {name: move_to_json(move) for name, move in planned.items()},
                 "plan": plan_to_json(new), "swapping": False})
    finish_rescale(root)


def finish_rescale(root: str) -> None:
    """Carry out (or finish, after a crash) the move the journal of ``root`` describes; nothing
    when there is none. RunError when the journal is not one this ccl reads."""
    journal = os.path.join(root, JOURNAL)
    try:
        with open(journal, encoding="utf-8") as f:
            job = json.load(f)
    except FileNotFoundError:
        return
    except ValueError as exc:
        raise _unreadable(root, f"not JSON: {exc}") from None
    try:
        moves = {str(name): move_from_json(m) for name, m in job["moves"].items()}
        plan = plan_from_json(job["plan"])
        elements = {name: plan.element(name) for name in moves}
        batch, buckets = int(job["batch"]), int(job["buckets"])
        swapping = bool(job["swapping"])
    except (PlanFormatError, KeyError, TypeError, ValueError, AttributeError) as exc:
        why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise _unreadable(root, why) from None
    dirs = RunDirs(root)
    if not swapping:
        for name, move in moves.items():
            if move.store == "none" or batch < 0:
                continue
            element = elements[name]
            if move.store == "engine":
                _build_engine(dirs.of("state", name), move, batch, buckets, element)
            else:
                _build_native(dirs.of("native", name), move, batch)
            if element.kind == "window":
                _build_changelog(dirs.of("changelog", name), move)
        job["swapping"] = True
        atomic_json(journal, job)
    for name in moves:
        for what in ("state", "native", "changelog"):
            swap_dir(dirs.of(what, name))
    hidden = os.path.join(root, PLAN_FILE + ".tmp")
    with open(hidden, "w", encoding="utf-8") as f:  # as run_setup.prepare_run_dir writes it
        json.dump(job["plan"], f, indent=1, sort_keys=True)
    os.replace(hidden, os.path.join(root, PLAN_FILE))
    os.remove(journal)


def _unreadable(root: str, why: str) -> RunError:
    """The error for a rescale journal of ``root`` this ccl cannot read (``why``)."""
    return RunError(f"the run directory {root} holds a move to other instance counts that this "
                    f"ccl cannot read ({os.path.join(root, JOURNAL)}: {why}): finish it with the "
                    f"ccl that began it (ccl run --checkpoint), or start from a new checkpoint "
                    f"directory")


def swap_dir(path: str) -> None:
    """Put the directory built beside ``path`` (``path + NEW``) in its place; nothing when none
    was built. Each step may be done again after a crash."""
    built, old = path + NEW, path + OLD
    if os.path.isdir(built):
        if os.path.isdir(path):
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(built, path)
    shutil.rmtree(old, ignore_errors=True)


def _hasher(types: list[str], count: int) -> Any:
    """Spark's ``pmod(hash(values), count)`` of a tuple of values of ``types``, each distinct
    tuple hashed once (a key's rows, index entries and counts ask for the same one)."""
    seen: dict[tuple, int] = {}

    def instance(values: tuple) -> int:
        found = seen.get(values)
        if found is None:
            found = seen[values] = spark_pmod_hash(list(values), types, count)
        return found
    return instance


def _router(move: Move, columns: list[str]) -> Any:
    """The new instance of a key over ``columns`` (which include every hash output column)."""
    positions = [columns.index(h.output) for h in move.hash]
    instance = _hasher([h.type for h in move.hash], move.after)
    return lambda key: instance(tuple(key[p] for p in positions))


def _materialize(states: dict[int, dict], store: Optional[BucketStore]) -> None:
    """Replace every count a bucket's pickled states hold in place of their stored parts by a
    plain dict of what the store holds for it."""
    for inst, state in states.items():
        for owner, field, ns, kind in stored_parts(state, inst):
            held = owner[field]
            if type(held) is not int:
                continue
            if store is None:
                if held:
                    raise RunError(f"the state store of instance {inst} is missing")
                owner[field] = {}
            elif kind is StoredTimes:
                owner[field] = {key[1:]: t for t, key in store.timed(ns)}
            else:
                unpack = getattr(kind, "unpack", None)  # (a PER group: stored as a tuple)
                owner[field] = {key[1:]: value if unpack is None else unpack(value)
                                for key, value in store.scan(ns, (inst,))}


def _empty_window(window: dict) -> dict:
    """A window state with ``window``'s settings and no rows."""
    return {**{k: copy.deepcopy(v) for k, v in window.items()
               if k not in ("rows", "groups", "times")},
            "rows": {}, "groups": {}, "times": {}}


def _emptied(value: Any) -> Any:
    """A Flex variable's value without its entries: an event cache without buckets, an empty
    dictionary of the same types (flex_state moves no other kind)."""
    if isinstance(value, EventCache):
        cache = copy.copy(value)
        cache.buckets, cache.current = {}, None
        return cache
    if isinstance(value, Dictionary):
        return Dictionary((), value.key, value.value)
    return copy.deepcopy(value)


def _plain_variables(states: dict[int, dict]) -> None:
    """The Flex variables the store holds (attached by runtime/state/variables.py) read out
    into plain dictionaries and cache buckets."""
    for state in states.values():
        values = state.get("vars") or {}
        for var, value in list(values.items()):
            if isinstance(value, StoredDictionary):
                values[var] = value.plain()
            elif isinstance(value, EventCache) and not isinstance(value.buckets, dict):
                value.buckets = {k: value.buckets[k] for k in list(value.buckets)}


def _split_flex(name: str, state: dict, move: Move, target: Any) -> None:
    """Add the keyed state of old Flex instance state ``state`` to the new instances
    ``target(j)`` gives: each dictionary entry and event cache bucket where the hash of its key
    (the hash columns) places it, each input mirror row where its port places it."""
    flex, count = move.flex, move.after
    assert flex is not None
    for var, value in (state.get("vars") or {}).items():
        how = flex.vars.get(var)
        if how is None:
            raise RunError(f"element '{name}' keeps variable {var} per instance")
        if how.kind == "dictionary":
            instance = _hasher([how.type], count)
            for k, v in value.items():
                target(instance((k,)))["vars"][var][k] = v
            continue
        instance = _hasher(list(how.types), count)
        for key, entries in value.buckets.items():
            j = instance(tuple(key[p] for p in how.positions))
            cache = target(j)["vars"][var]
            cache.buckets[key] = entries
            cache.now_ms = max(cache.now_ms, value.now_ms)
    ports = list(flex.ports.values())
    for i, mirror in enumerate(state.get("sources") or []):
        if mirror is None:
            continue
        cols, instance = ports[i].columns, _hasher(list(ports[i].types), count)
        for key, row in mirror["rows"].items():
            j = instance(tuple(row.get(c) for c in cols))
            target(j)["sources"][i]["rows"][key] = row
            if key in mirror["times"]:
                target(j)["sources"][i]["times"][key] = mirror["times"][key]


def _skeleton(state: dict, join: Optional[JoinMove]) -> dict:
    """A new instance's state made from the old instance state ``state``: its fields without the
    output window's rows and, for a join, without the select's rows (sources and join stores)."""
    skeleton = copy.deepcopy({k: v for k, v in state.items()
                              if k not in ("output", "selects", "vars", "sources")})
    if "vars" in state:  # (a Flex's: emptied, each keeps its declaration)
        skeleton["vars"] = {var: _emptied(value) for var, value in state["vars"].items()}
    if "sources" in state:  # (a Flex's input mirrors)
        skeleton["sources"] = [None if m is None else _empty_window(m) for m in state["sources"]]
    if join is None:
        if "selects" in state:
            skeleton["selects"] = copy.deepcopy(state["selects"])
    else:
        select = state["selects"][0]
        stores = select["join"]
        skeleton["selects"] = [{
            **{k: copy.deepcopy(v) for k, v in select.items() if k not in ("sources", "join")},
            "sources": [None if m is None else _empty_window(m) for m in select["sources"]],
            "join": {**{k: ([{} for _ in v] if isinstance(v, list) else v)
                        for k, v in stores.items()}}}]
    if state.get("output") is not None:
        skeleton["output"] = _empty_window(state["output"])
    return skeleton


def _split(name: str, inst: int, state: dict, move: Move, element: Element,
           into: dict[int, dict], counts: Optional[dict] = None) -> None:
    """Add the window rows, times and PER groups of old instance ``inst``'s ``state`` to the new
    instances' states in ``into`` (made from ``state``'s skeleton as needed); for a join, its
    sources' and join's rows too (:func:`_split_join`, which notes in ``counts`` what
    :func:`_recount` needs)."""
    if state.get("vars") and move.flex is None:
        raise RunError(f"element '{name}' keeps variables per instance, which cannot be split")
    window = state.get("output")
    join = move.join
    for owner, field, ns, _ in stored_parts(state, inst):
        if (owner is not window and owner[field] and join is None and move.flex is None
                and move.groups is None):
            raise RunError(f"element '{name}' holds state ({ns}) that is not keyed by the hash "
                           f"columns")
    if window is not None and window.get("bucket") is not None:
        raise RunError(f"element '{name}' keeps a KEEP EVERY bucket per instance")
    by_key = _router(move, list(element.key)) if move.hash else None
    per = list(element.keep.per) if element.keep is not None else []
    by_group = _router(move, per) if per else None

    # (an aggregation's skeleton is without its aggregates' and sources' entries too)
    shape = _bare(state, inst) if move.groups is not None else state

    def target(j: int) -> dict:
        if j not in into:
            into[j] = _skeleton(shape, join)
        elif state.get("seq") is not None and (into[j].get("seq") is None
                                               or state["seq"] > into[j]["seq"]):
            into[j]["seq"] = state["seq"]
        return into[j]

    if move.groups is not None:
        if join is not None:  # (a join that aggregates: its ports' rows as a join's)
            _split_join(name, state, move, target, counts if counts is not None else {})
        _split_groups(name, inst, state, move, target, joined=join is not None)
        return
    if join is not None:
        _split_join(name, state, move, target, counts if counts is not None else {})
    if move.flex is not None:
        _split_flex(name, state, move, target)
    if window is None:
        return
    if by_key is None:
        if window["rows"]:
            raise RunError(f"element '{name}' holds rows not keyed by the hash columns")
        return
    for key, row in window["rows"].items():
        target(by_key(key))["output"]["rows"][key] = row
    for key, millis in window["times"].items():
        target(by_key(key))["output"]["times"][key] = millis
    for gkey, keys in window["groups"].items():
        if by_group is None and not keys:
            continue
        j = by_group(gkey) if by_group is not None else by_key(next(iter(keys)))
        target(j)["output"]["groups"][gkey] = keys


def _group_route(move: Move) -> Any:
    """The new instance of an entry ``(namespace, key, value)`` of an aggregation's state: the
    hash of its hash column values, which an aggregate's group key holds at ``move.groups``
    (an input or output key's value is its group key), an output row in the hash output
    columns and a source row in the hash source columns."""
    positions = list(move.groups or ())
    outs = [h.output for h in move.hash]
    sources = [h.source for h in move.hash]
    instance = _hasher([h.type for h in move.hash], move.after)

    def route(ns: str, key: tuple, value: Any) -> int:
        if ns.startswith("a."):
            group = key if ns.endswith(".g") else value
            return instance(tuple(group[p] for p in positions))
        if ns == "w.output" and isinstance(value, dict):
            return instance(tuple(value[c] for c in outs))
        if ns.startswith("w.selects.") and isinstance(value, dict):
            return instance(tuple(value[c] for c in sources))
        raise RunError(f"state of kind {ns!r} is not known to be kept by group")
    return route


def _part_id(ns: str, kind: type) -> tuple:
    """A stored part's place in an instance state, the same in every instance."""
    return (ns.rsplit(".t", 1)[0], "t") if kind is StoredTimes else (ns, "")


def _split_groups(name: str, inst: int, state: dict, move: Move, target: Any,
                  joined: bool = False) -> None:
    """Add every stored entry of the old aggregation instance state ``state`` (its aggregates'
    groups, input and output keys, its output window's and source windows' rows and times) to
    the new instance ``target(j)`` that :func:`_group_route` gives it, in the same part. For a
    join that aggregates (``joined``) the select's sources and join stores are left to
    :func:`_split_join`."""
    route = _group_route(move)
    parts = list(stored_parts(state, inst))
    # new instance -> its parts by where they sit (a join's skeleton orders its select's fields
    # otherwise; a time index's namespace names the instance)
    found: dict[int, dict[tuple, tuple]] = {}
    for _, window in window_states(state):
        if window.get("groups") or window.get("bucket") is not None:
            raise RunError(f"element '{name}' keeps a KEEP of a window per instance")
    for owner, field, ns, kind in parts:
        if joined and (ns.startswith("j.") or ns.startswith("w.selects.")):
            continue
        for key, value in owner[field].items():
            if kind is StoredTimes:  # (a row's time goes with its row)
                row = owner["rows"].get(key)
                if row is None:
                    continue
                j = route(ns.rsplit(".t", 1)[0], key, row)
            else:
                j = route(ns, key, value)
            if j not in found:
                found[j] = {_part_id(ns2, kind2): (owner2, field2)
                            for owner2, field2, ns2, kind2 in stored_parts(target(j), j)}
            there = found[j][_part_id(ns, kind)]
            there[0][there[1]][key] = value


def _bare(state: dict, inst: int) -> dict:
    """A copy of the instance state ``state`` (of instance ``inst``) with every stored part
    empty (the entries are not copied)."""
    parts = list(stored_parts(state, inst))
    held = [owner[field] for owner, field, _, _ in parts]
    for owner, field, _, _ in parts:
        owner[field] = {}
    try:
        return copy.deepcopy(state)
    finally:
        for (owner, field, _, _), entries in zip(parts, held):
            owner[field] = entries


def _spread(into: dict[int, dict], route: Any) -> dict[int, dict[int, dict]]:
    """The new instance states ``into`` of a ``by_group`` aggregation cut into the buckets its
    groups go to (``route``: runtime/rebucket.py :func:`~runtime.rebucket.group_router`): per
    bucket, per instance with entries there, the instance state with those entries."""
    per_bucket: dict[int, dict[int, dict]] = {}
    for inst, state in into.items():
        parts = list(stored_parts(state, inst))
        held = [owner[field] for owner, field, _, _ in parts]
        bare = _bare(state, inst)
        pieces: dict[int, list] = {}  # bucket -> the parts of the instance's piece there
        for p, ((_, _, ns, kind), entries) in enumerate(zip(parts, held)):
            if kind is StoredTimes:
                if entries:
                    raise RunError("an aggregation whose groups are spread over buckets keeps "
                                   "row times")
                continue
            for key, value in entries.items():
                nb = route(ns, (inst, *key), lambda v=value: v)
                if nb not in pieces:
                    piece = per_bucket.setdefault(nb, {})[inst] = copy.deepcopy(bare)
                    pieces[nb] = list(stored_parts(piece, inst))
                there = pieces[nb][p]
                there[0][there[1]][key] = value
    return per_bucket


def _join_routes(move: Move) -> tuple[list, Any]:
    """Per source of a join, a function giving the new instances of one of its rows (a hashed
    port: the one its hash chooses; a broadcast port: all); and the function that gives those of
    a joined row of sources ``0..j`` (the first hashed source present in it; all when its
    sources are broadcast ones only)."""
    assert move.join is not None
    ports, aliases = move.join.ports, move.join.aliases
    count = move.after
    everywhere = list(range(count))

    def port_route(port: Optional[HashPort]) -> Any:
        if port is None:
            return lambda row: everywhere
        cols, instance = port.columns, _hasher(list(port.types), count)
        return lambda row: [instance(tuple(row.get(c) for c in cols))]

    routes = [port_route(p) for p in ports]

    def joined(j: int, row: dict) -> list[int]:
        for i in range(j + 1):
            if ports[i] is not None and row.get(aliases[i]) is not None:
                return routes[i](row[aliases[i]])
        if all(ports[i] is None for i in range(j + 1)):
            return everywhere
        raise RunError("a joined row of broadcast rows only is kept beside hashed sources")
    return routes, joined


def _split_join(name: str, state: dict, move: Move, target: Any, counts: dict) -> None:
    """Add the rows of old instance state ``state``'s join (its sources' mirrors, the Joiner's
    per-source and per-level stores, equality indexes and match counts: runtime/engine/join.py)
    to the new instances ``target(j)`` gives, each row where its port places it. The equated
    values of every row (from the indexes) go to ``counts`` for :func:`_recount`."""
    routes, joined = _join_routes(move)
    select = state["selects"][0]
    for i, mirror in enumerate(select["sources"]):
        if mirror is None:
            continue
        if mirror.get("groups") or mirror.get("bucket") is not None:
            raise RunError(f"element '{name}' keeps a KEEP of source {i} per instance")
        for key, row in mirror["rows"].items():
            for j in routes[i](row):
                target(j)["selects"][0]["sources"][i]["rows"][key] = row
        for key, millis in mirror["times"].items():
            if key in mirror["rows"]:
                for j in routes[i](mirror["rows"][key]):
                    target(j)["selects"][0]["sources"][i]["times"][key] = millis
    stores = select["join"]
    lvals = counts.setdefault("lvals", [{} for _ in stores["acc"]])
    rvals = counts.setdefault("rvals", [{} for _ in stores["acc"]])

    def place(field: str, level: int, key: tuple, value: Any, where: list[int]) -> None:
        for j in where:
            target(j)["selects"][0]["join"][field][level][key] = value

    for i, rows in enumerate(stores["src"]):
        for key, row in rows.items():
            place("src", i, key, row, routes[i](row))
    for level, rows in enumerate(stores["acc"]):
        for key, row in rows.items():
            place("acc", level, key, row, joined(level, row))
    for level, index in enumerate(stores["lidx"]):
        acc = stores["acc"][level]
        for values, keys in index.items():
            for key in keys:
                lvals[level][key] = values
                if key in acc:
                    for j in joined(level, acc[key]):
                        target(j)["selects"][0]["join"]["lidx"][level].setdefault(
                            values, {})[key] = True
    for level, index in enumerate(stores["ridx"]):
        src = stores["src"][level + 1]
        for values, keys in index.items():
            for key in keys:
                rvals[level][key] = values
                if key in src:
                    for j in routes[level + 1](src[key]):
                        target(j)["selects"][0]["join"]["ridx"][level].setdefault(
                            values, {})[key] = True
    for level, cnt in enumerate(stores["lcnt"]):
        for key, n in cnt.items():
            if key in stores["acc"][level]:
                place("lcnt", level, key, n, joined(level, stores["acc"][level][key]))
    for level, cnt in enumerate(stores["rcnt"]):
        for key, n in cnt.items():
            if key in stores["src"][level + 1]:
                place("rcnt", level, key, n, routes[level + 1](stores["src"][level + 1][key]))


def _recount(move: Move, into: dict[int, dict], counts: dict) -> None:
    """The match counts of the broadcast rows of each level that joins them with hashed rows,
    counted in each new instance from its equality indexes (ccl/plan/rescale.py allows such a
    level only when its ON is column equalities alone: a row's matches are its index entry)."""
    assert move.join is not None
    ports = move.join.ports
    for state in into.values():
        stores = state["selects"][0]["join"]
        for level in range(len(stores["acc"])):
            left_hashed = any(p is not None for p in ports[: level + 1])
            right_hashed = ports[level + 1] is not None
            if left_hashed and not right_hashed:  # broadcast right rows: matches here
                lidx, vals = stores["lidx"][level], counts["rvals"][level]
                stores["rcnt"][level] = {
                    key: len(lidx[vals[key]]) for key in stores["src"][level + 1]
                    if key in vals and lidx.get(vals[key])}
            elif right_hashed and not left_hashed:  # broadcast left rows
                ridx, vals = stores["ridx"][level], counts["lvals"][level]
                stores["lcnt"][level] = {
                    key: len(ridx[vals[key]]) for key in stores["acc"][level]
                    if key in vals and ridx.get(vals[key])}


def _build_engine(state_dir: str, move: Move, batch: int, buckets: int,
                  element: Element) -> None:
    """The new state directory of the per-instance element ``element`` (``state_dir + NEW``), as
    the state is after ``batch``: state files and, where the old one had them, stores of
    ``buckets`` buckets."""
    name = element.name
    target = state_dir + NEW
    shutil.rmtree(target, ignore_errors=True)  # a build a crash cut short
    os.makedirs(target)
    root = rows_root(state_dir)
    stored = os.path.isdir(root) and read_layout(root) is not None
    # a Flex whose dictionaries and caches the store keeps (runtime/arrow_state.py _stored)
    in_vars = not uses_window_store(element) and uses_variable_store(element)
    into: dict[int, dict] = {}
    counts: dict = {}  # (a join's) equated values of its rows, for _recount
    due: list[int] = []
    timed = False
    for bucket, written in sorted(newest_batches(state_dir, batch + 1).items()):
        has, deadline = saved_deadline(state_dir, bucket, written)
        timed = timed or has
        if deadline is not None:
            due.append(deadline)
        states = load_states(state_dir, bucket, batch + 1)
        if stored and bucket < read_layout(root).buckets:
            with BucketStore.open(root, bucket) as store:
                store.begin(batch + 1)  # (the state after batch: later tries rolled back)
                if in_vars:
                    variables.attach(states, store)
                    _plain_variables(states)
                # (a Flex's input mirrors too; the new states hold them as dicts, which go to
                # the store at their next batch)
                _materialize(states, store)
        else:
            _materialize(states, None)
        for inst, state in sorted(states.items()):
            _split(name, inst, state, move, element, into, counts)
    if move.join is not None:
        _recount(move, into, counts)
    per_bucket: dict[int, dict[int, dict]] = {}
    if move.spread is not None:
        per_bucket = _spread(into, group_router(move.spread, buckets))
    else:
        for inst, state in into.items():
            per_bucket.setdefault(inst % buckets, {})[inst] = state
    deadline = (min(due) if due else None,) if timed else None
    if stored:
        create(rows_root(target), buckets)
    for bucket, states in sorted(per_bucket.items()):
        if not stored:
            save_states(target, bucket, batch, states, deadline)
            continue
        with BucketStore.open(rows_root(target), bucket) as store:
            store.begin(batch)
            if in_vars:
                variables.detach(states, store, {})
            else:
                detach(states, store)
            save_states(target, bucket, batch, states, deadline)
            store.commit(batch)


def _rewritten(path: str, target: str, move: Move, columns: list[str]) -> None:
    """The Parquet file ``path`` written to ``target`` with its ``__inst`` recomputed from the
    ``columns`` of each row (one per hash column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    if INST not in table.column_names or not all(c in table.column_names for c in columns):
        shutil.copyfile(path, target)
        return
    import pyarrow.compute as pc
    hashed = spark_pmod_hash_columns([table.column(c).combine_chunks() for c in columns],
                                     [h.type for h in move.hash], move.after)
    field = table.schema.field(INST)
    was = table.column(INST)
    new = pc.if_else(pc.is_null(was), pa.scalar(None, field.type),
                     pa.array(hashed, pa.int64()).cast(field.type))
    table = table.set_column(table.column_names.index(INST), field, new)
    pq.write_table(table, target)


def _build_native(state_dir: str, move: Move, batch: int) -> None:
    """The new snapshot directory of a Spark group-by aggregation: its snapshot of ``batch``
    (the newest up to it) with every group's ``__inst`` recomputed from its group columns."""
    target = state_dir + NEW
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    snapshots = sorted(glob.glob(os.path.join(state_dir, "state-*.parquet")))
    kept = [p for p in snapshots if int(re.findall(r"\d+", os.path.basename(p))[0]) <= batch]
    if kept:
        _rewritten(kept[-1], os.path.join(target, os.path.basename(kept[-1])), move,
                   [h.source for h in move.hash])


def _build_changelog(changelog_dir: str, move: Move) -> None:
    """A window's changelog with each row's ``__inst`` the instance its key now has."""
    if not os.path.isdir(changelog_dir):
        return
    target = changelog_dir + NEW
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    for entry in sorted(os.scandir(changelog_dir), key=lambda e: e.name):
        if entry.name.startswith("batch-") and entry.name.endswith(".parquet"):
            _rewritten(entry.path, os.path.join(target, entry.name), move,
                       [h.output for h in move.hash])
        elif entry.is_file() and not entry.name.startswith("."):
            shutil.copyfile(entry.path, os.path.join(target, entry.name))
