"""A run directory resumed with another number of buckets: its per-bucket state moved first.

A per-instance element's state is kept per bucket (runtime/arrow_state.py: a state file per bucket
and batch; runtime/state: a RocksDB store per bucket), and an instance's rows go to bucket
``instance % buckets``. More buckets than a run directory was made with let a cluster run more of
an element's instances side by side; :func:`rebucket_run` moves every instance's state to the
bucket it maps to under the new count, as the state is after the last committed batch of the
project's query, before that query starts again.

An aggregation whose rows go to buckets by instance and group (``by_group``: an instance's groups
are spread over several buckets by ``pmod(hash(instance, group columns...), buckets)``) has each
group's state (its group, the input keys and output key that name it, its output row, and a
source window's rows) moved to the bucket its instance and group values now hash to
(:func:`group_router`; the pickled instance states of each new bucket count what it got). It is
refused (:func:`why_not_rebucketed`) for a per-instance element outside the project's query (its
own query's batches, or transformWithState's state in Spark's checkpoint).

A crash leaves nothing half-moved: a journal (``RUN/rebucket.json``) is written first; the new state
files are built beside the old ones (``state/ELEMENT.rebucket/``) and the stores switch
generations whole (runtime.state.rebucket); only then are the files swapped and ``run.json``
updated. A run that finds the journal finishes (or redoes) the move before anything else.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from typing import Any, Callable, Optional

from ccl.plan.codec import PlanFormatError, spread_from_json, spread_to_json
from ccl.plan.model import GroupSpread, Plan

from .arrow_state import load_states, newest_batches, rows_root, save_states, saved_deadline
from .project_query import query_dir
from .run_dir import RUN_FILE, RunDirs
from .run_setup import RunError, RunLayout, atomic_json
from .spark_hash import spark_pmod_hash
from .state.rows import stored_parts, window_states
from .state.store import count_keys, read_layout, rebucket, rebucket_keys

JOURNAL = "rebucket.json"
NEW = ".rebucket"  # suffix of the directory where an element's new state files are built
_KNOWN = 1 << 21  # groups whose bucket group_router remembers (a few hundred MB at most)


def last_commit(dirs: RunDirs) -> int:
    """The last batch the project's query committed (-1: none)."""
    commits = os.path.join(query_dir(dirs), "commits")
    done = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
    return max(done, default=-1)


def stateful(plan: Plan, layout: RunLayout) -> list[str]:
    """The elements whose state is kept per bucket: the per-instance elements run by
    runtime/arrow_state.py, those with timers included."""
    return [e.name for e in plan.elements
            if e.name in layout.arrow_state
            or (e.physical is not None and e.physical.uses_time and e.physical.native is None)]


def why_not_rebucketed(plan: Plan, layout: RunLayout) -> Optional[str]:
    """Why the state of the run directory of ``layout`` (begun with ``plan``) cannot be moved to
    another number of buckets, in one sentence; None when it can."""
    for name in stateful(plan, layout):
        if name not in layout.project:
            return (f"element '{name}' runs in a query of its own, whose state is not moved "
                    f"between buckets")
    return None


def rebucket_run(dirs: RunDirs, plan: Plan, layout: RunLayout, buckets: int) -> None:
    """Move the per-bucket state of the run directory ``dirs`` (begun with ``plan``, laid out as
    ``layout``) to ``buckets`` buckets and record the new count in ``run.json``. RunError when it
    cannot be moved (:func:`why_not_rebucketed`)."""
    problem = why_not_rebucketed(plan, layout)
    if problem:
        raise RunError(f"the run directory {dirs.root} cannot be resumed with {buckets} buckets "
                       f"(it has {layout.buckets}): {problem}. Resume it with "
                       f"--set runtime.buckets={layout.buckets}, or start from a new checkpoint "
                       f"directory.")
    journal = os.path.join(dirs.root, JOURNAL)
    elements = stateful(plan, layout)
    atomic_json(journal, {"from": layout.buckets, "to": buckets, "batch": last_commit(dirs),
                          "elements": elements, "swapping": False,
                          "groups": {name: spread_to_json(group_spec(plan, name))
                                     for name in elements if name in layout.by_group}})
    finish_rebucket(dirs)


def group_spec(plan: Plan, name: str) -> GroupSpread:
    """How the rows of the ``by_group`` aggregation ``name`` of ``plan`` find their bucket: its
    group columns (source columns, in GROUP BY order; ccl/plan/physical.py group_columns), their
    types, and the output columns that hold them (the select items that are those columns). The
    journals that carry it hold its JSON form (ccl/plan/codec.py ``spread_to_json``)."""
    element = plan.element(name)
    sel = element.query.selects[0]  # type: ignore[union-attr]
    source = plan.element(sel.sources[0].element)
    types = {c.name: str(c.type).strip().lower() for c in source.columns}
    columns = list(element.physical.group_columns)  # type: ignore[union-attr,arg-type]
    # (the GROUP BY expressions are plain columns: compared as trees, as their JSON forms were)
    items = [next(it.name for it in sel.items if it.expr == expr) for expr in sel.group_by]
    return GroupSpread(tuple(columns), tuple(types[c] for c in columns), tuple(items))


def group_router(spec: GroupSpread, buckets: int) -> Callable[[str, tuple, Callable[[], Any]], int]:
    """The bucket among ``buckets`` of a stored value of a ``by_group`` aggregation (namespace,
    key with the instance first, a loader of the value; runtime/state/rows.py), as
    runtime/topology.py sends its rows: ``pmod(hash(instance, group values...), buckets)``. The
    group values are, by namespace: an aggregate's group key (``a.*.g``), the group key an input
    key or output key names (``a.*.i``, ``a.*.o``), the group items of an output row
    (``w.output``) and the group columns of a source window's row (``w.selects.*``). Raises
    RunError for another part. A group's bucket is computed once (its group, output key and row
    share it)."""
    types = ["integer"] + list(spec.types)
    columns, items = list(spec.columns), list(spec.items)
    known: dict[tuple, int] = {}

    def route(ns: str, key: tuple, load: Callable[[], Any]) -> int:
        if ns.startswith("a."):
            group = key[1:] if ns.endswith(".g") else tuple(load())
        else:
            value = load()
            if ns == "w.output" and isinstance(value, dict):
                group = tuple(value[c] for c in items)
            elif ns.startswith("w.selects.") and isinstance(value, dict):
                group = tuple(value[c] for c in columns)
            else:
                raise RunError(f"state of kind {ns!r} is not known to be kept by group")
        at = (key[0], *group)
        bucket = known.get(at)
        if bucket is None:
            if len(known) >= _KNOWN:
                known.clear()
            bucket = known[at] = spark_pmod_hash(at, types, buckets)
        return bucket
    return route


def finish_rebucket(dirs: RunDirs) -> None:
    """Carry out (or finish, after a crash) the move the journal of ``dirs`` describes; nothing
    when there is none."""
    journal = os.path.join(dirs.root, JOURNAL)
    try:
        with open(journal, encoding="utf-8") as f:
            job = json.load(f)
    except FileNotFoundError:
        return
    old, new, batch = int(job["from"]), int(job["to"]), int(job["batch"])
    try:
        groups = {name: spread_from_json(g) for name, g in (job.get("groups") or {}).items()}
    except PlanFormatError as exc:
        raise RunError(f"the run directory {dirs.root} holds a move to other buckets that this "
                       f"ccl cannot read ({journal}: {exc})") from None
    if not job["swapping"]:
        for name in job["elements"]:
            if name in groups:
                _build_grouped(dirs.of("state", name), old, new, batch, groups[name])
            else:
                _build(dirs.of("state", name), old, new, batch)
        job["swapping"] = True
        atomic_json(journal, job)
    for name in job["elements"]:
        _swap(dirs.of("state", name))
    with open(os.path.join(dirs.root, RUN_FILE), encoding="utf-8") as f:
        run = json.load(f)
    atomic_json(os.path.join(dirs.root, RUN_FILE), {**run, "buckets": new})
    os.remove(journal)


def _build(state_dir: str, old: int, new: int, batch: int) -> None:
    """The new state files of one element (in ``state_dir + NEW``) and its stores moved, as the
    state is after ``batch``."""
    target = state_dir + NEW
    shutil.rmtree(target, ignore_errors=True)  # a build a crash cut short
    os.makedirs(target)
    moved: dict[int, dict[int, dict]] = {}
    deadlines: dict[int, list[Optional[int]]] = {}
    timed = False
    for bucket, written in newest_batches(state_dir, batch + 1).items():
        has, deadline = saved_deadline(state_dir, bucket, written)
        timed = timed or has
        for instance, state in load_states(state_dir, bucket, batch + 1).items():
            moved.setdefault(instance % new, {})[instance] = state
            deadlines.setdefault(instance % new, []).append(deadline)
    for bucket, states in moved.items():
        due = [d for d in deadlines[bucket] if d is not None]
        save_states(target, bucket, max(batch, 0), states,
                    (min(due) if due else None,) if timed else None)
    for entry in os.scandir(state_dir) if os.path.isdir(state_dir) else []:
        layout = read_layout(entry.path) if entry.is_dir() else None
        if layout is not None and layout.buckets != new:  # (else moved by a try a crash cut)
            rebucket(entry.path, old, new, lambda instance: instance % new, batch + 1)


def _build_grouped(state_dir: str, old: int, new: int, batch: int, spec: GroupSpread) -> None:
    """:func:`_build` for a ``by_group`` aggregation: each group's values (in the store, or in
    the pickled states where no store holds them) go to the bucket :func:`group_router` gives,
    and each new bucket gets, per instance it holds groups of, the instance state with the
    counts (or dicts) of what it got; the sequence number is the greatest the old buckets had."""
    target = state_dir + NEW
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    route = group_router(spec, new)
    root = rows_root(state_dir)
    layout = read_layout(root) if os.path.isdir(root) else None
    counts: dict[tuple[int, str, int], int] = {}
    if layout is not None and layout.buckets != new:
        _, counts = rebucket_keys(root, old, new, route, batch + 1)
    elif layout is not None:  # moved by a try a crash cut short: count what the buckets hold
        counts = count_keys(root)
    skeletons: dict[int, dict] = {}
    # instance -> new bucket -> namespace -> the entries of a part pickled as a dict
    split: dict[int, dict[int, dict[str, dict]]] = {}
    due: list[int] = []
    timed = False
    for bucket, written in newest_batches(state_dir, batch + 1).items():
        has, deadline = saved_deadline(state_dir, bucket, written)
        timed = timed or has
        if deadline is not None:
            due.append(deadline)
        for inst, state in load_states(state_dir, bucket, batch + 1).items():
            _check_splittable(state, state_dir)
            skeleton = skeletons.setdefault(inst, state)
            if (state.get("seq") or 0) > (skeleton.get("seq") or 0):
                skeleton["seq"] = state["seq"]
            for owner, field, ns, _ in stored_parts(state, inst):
                if isinstance(owner[field], dict):
                    for key, value in owner[field].items():
                        nb = route(ns, (inst, *key), lambda v=value: v)
                        split.setdefault(inst, {}).setdefault(nb, {}).setdefault(ns, {})[key] = value
    placed: dict[int, dict[int, dict]] = {}
    for inst, skeleton in skeletons.items():
        homes = {nb for nb, _, i in counts if i == inst} | set(split.get(inst, {}))
        for nb in homes:
            state = copy.deepcopy(skeleton)
            for owner, field, ns, _ in stored_parts(state, inst):
                if type(owner[field]) is int:
                    owner[field] = counts.get((nb, ns, inst), 0)
                else:
                    owner[field] = split.get(inst, {}).get(nb, {}).get(ns, {})
            placed.setdefault(nb, {})[inst] = state
    for nb, states in placed.items():
        save_states(target, nb, max(batch, 0), states,
                    (min(due) if due else None,) if timed else None)


def _check_splittable(state: dict, state_dir: str) -> None:
    """RunError when an instance state of a ``by_group`` element holds state kept by instance
    alone (variables, PER groups, a KEEP EVERY bucket), which its groups cannot share out."""
    kept = bool(state.get("vars")) or any(w.get("groups") or w.get("bucket") is not None
                                          for _, w in window_states(state))
    if kept:
        raise RunError(f"the state in {state_dir} holds parts kept per instance, not per group: "
                       f"it cannot be spread over other buckets")


def _swap(state_dir: str) -> None:
    """Replace the state files of ``state_dir`` by those built beside it (a step that may be
    done again: files of the new set are kept, the others removed, then the new ones moved in)."""
    target = state_dir + NEW
    if not os.path.isdir(target):
        return
    os.makedirs(state_dir, exist_ok=True)
    built = set(os.listdir(target))
    for name in os.listdir(state_dir):
        path = os.path.join(state_dir, name)
        if name.endswith(".pkl") and name not in built and os.path.isfile(path):
            os.remove(path)
    for name in built:
        os.replace(os.path.join(target, name), os.path.join(state_dir, name))
    os.rmdir(target)

