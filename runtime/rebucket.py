"""A run directory resumed with another number of buckets: its per-bucket state moved first.

A per-instance element's state is kept per bucket (runtime/arrow_state.py: a state file per bucket
and batch; runtime/state: a RocksDB store per bucket), and an instance's rows go to bucket
``instance % buckets``. More buckets than a run directory was made with let a cluster run more of
an element's instances side by side; :func:`rebucket_run` moves every instance's state to the
bucket it maps to under the new count, as the state is after the last committed batch of the
project's query, before that query starts again.

It is refused (:func:`why_not_rebucketed`) where state is not kept per bucket by instance: an
element whose rows go to buckets by instance and group (``by_group``: an instance's groups are
spread over several buckets), and a per-instance element outside the project's query (its own
query's batches, or transformWithState's state in Spark's checkpoint).

A crash leaves nothing half-moved: a journal (``RUN/rebucket.json``) is written first; the new state
files are built beside the old ones (``state/ELEMENT.rebucket/``) and the stores switch
generations whole (runtime.state.rebucket); only then are the files swapped and ``run.json``
updated. A run that finds the journal finishes (or redoes) the move before anything else.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Optional

from .arrow_state import load_states, newest_batches, save_states, saved_deadline
from .project_query import query_dir
from .run_dir import RUN_FILE, RunDirs
from .run_setup import RunError, RunLayout, atomic_json
from .state.store import read_layout, rebucket

JOURNAL = "rebucket.json"
NEW = ".rebucket"  # suffix of the directory where an element's new state files are built


def last_commit(dirs: RunDirs) -> int:
    """The last batch the project's query committed (-1: none)."""
    commits = os.path.join(query_dir(dirs), "commits")
    done = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
    return max(done, default=-1)


def stateful(plan: dict, layout: RunLayout) -> list[str]:
    """The elements whose state is kept per bucket: the per-instance elements run by
    runtime/arrow_state.py, those with timers included."""
    return [e["name"] for e in plan["elements"]
            if e["name"] in layout.arrow_state
            or (e["physical"]["uses_time"] and e["physical"]["native"] is None)]


def why_not_rebucketed(plan: dict, layout: RunLayout) -> Optional[str]:
    """Why the state of the run directory of ``layout`` (begun with ``plan``) cannot be moved to
    another number of buckets, in one sentence; None when it can."""
    for name in stateful(plan, layout):
        if name in layout.by_group:
            return (f"element '{name}' spreads each instance's groups over several buckets, so its "
                    f"state is not kept by instance")
        if name not in layout.project:
            return (f"element '{name}' runs in a query of its own, whose state is not moved "
                    f"between buckets")
    return None


def rebucket_run(dirs: RunDirs, plan: dict, layout: RunLayout, buckets: int) -> None:
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
    atomic_json(journal, {"from": layout.buckets, "to": buckets, "batch": last_commit(dirs),
                          "elements": stateful(plan, layout), "swapping": False})
    finish_rebucket(dirs)


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
    if not job["swapping"]:
        for name in job["elements"]:
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

