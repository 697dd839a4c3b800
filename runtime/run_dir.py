"""The run directory: its paths (:class:`RunDirs`), the record of what it was begun with
(``plan.json``: the plan in its JSON form, with its physical decisions) and whether another plan
can go on from it.

Imports nothing of Spark: the workspace reads deployed projects' run directories through it, and
``ccl deploy`` asks the resume question before it starts spark-submit, getting the same answer as
the driver would.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Optional

from ccl.plan.model import PLAN_VERSION

from .file_names import file_name
from .state.rows import LAYOUT as STATE_LAYOUT

PLAN_FILE = "plan.json"
RUN_FILE = "run.json"
PROJECT_QUERY = "ccl:project"  # the name of the project's one query (runtime/project_query.py)
BATCHES = "batches"  # BATCHES/QUERY/batch-N.json: when each micro-batch of a query ran (runtime.run)
# The plan versions whose run directories this runtime reads: version 3 differs from 4 only in
# decisions the compiler now records (``kernel`` of aggregations, ``window_store``), none of which
# the run directory holds (its run.json lists the window-store elements as a version 3 run found
# them, by the same rule).
READABLE_VERSIONS = (3, PLAN_VERSION)


@dataclass
class RunDirs:
    """The paths of one run directory."""

    root: str

    def of(self, what: str, element: str) -> str:
        return os.path.join(self.root, what, file_name(element))

    @property
    def arrivals(self) -> str:
        """Where the input files of the project are numbered in the order they arrived
        (:class:`runtime.inputs.listing.Arrivals`)."""
        return os.path.join(self.root, "arrivals")

    def batch_file(self, what: str, element: str, batch_id: int, ext: str) -> str:
        """``WHAT/ELEMENT/batch-N.EXT``: one micro-batch's changelog, stats or bad records."""
        return os.path.join(self.of(what, element), f"batch-{batch_id:08d}.{ext}")

    def batch_files(self, what: str, ext: str, element: str = "*") -> list[str]:
        """The complete ``batch-N.EXT`` files of ``what`` for ``element`` (``*``: every element),
        in batch order per element (files are renamed into place whole)."""
        name = element if element == "*" else file_name(element)
        return sorted(glob.glob(os.path.join(self.root, what, name, f"batch-*.{ext}")))


def saved_plan(root: str) -> Optional[dict]:
    """The plan (JSON form) a run directory was begun with, or None when none was begun there."""
    try:
        with open(os.path.join(root, PLAN_FILE), encoding="utf-8") as f:
            saved = json.load(f)
    except FileNotFoundError:
        return None
    return saved if isinstance(saved, dict) else {}


def older_layout(root: str, saved: dict) -> Optional[str]:
    """Why the run directory ``root``, begun with the plan ``saved``, is of a layout this runtime
    does not read (one sentence without the remedy); None when it reads it."""
    version = saved.get("version")
    if version not in READABLE_VERSIONS or not os.path.exists(os.path.join(root, RUN_FILE)):
        return (f"it was written by an older ccl (plan version {version!r}), whose layout this "
                f"ccl does not read")
    try:
        with open(os.path.join(root, RUN_FILE), encoding="utf-8") as f:
            run = json.load(f)
    except (OSError, ValueError):
        run = None
    if not isinstance(run, dict) or "window_store" not in run:
        return ("it was written by an older ccl that kept the rows of windows in the state files "
                "of their elements, not in the state store this ccl reads")
    if run.get("state_store") == 3:
        return ("it was written by an older ccl that kept the rows and indexes of joins and the "
                "buckets of Flex event caches in the state files of their elements, not in the state store this ccl reads")
    if run.get("state_store") == 2:
        return ("it was written by an older ccl that kept the dictionaries of Flex elements in "
                "the state files of their elements, not in the state store this ccl reads")
    if run.get("state_store") != STATE_LAYOUT:
        return ("it was written by an older ccl that kept the groups of aggregates and the rows of "
                "windows with a time KEEP in the state files of their elements, not in the state "
                "store this ccl reads")
    if run.get("numbering") != "arrival":
        return ("it was written by an older ccl that numbered the rows of each input by itself, "
                "not in the order the files of all inputs arrived, so its rows would be numbered "
                "anew")
    return None


def why_not_resumable(root: str, old: dict, new: dict) -> Optional[str]:
    """Why the plan ``new`` cannot go on from the run directory ``root`` begun with ``old`` (both in
    their JSON form), in one sentence without the remedy; None when it can."""
    older = older_layout(root, old)
    if older:
        return older
    if old.get("project") != new.get("project"):
        return f"it holds a checkpoint of project {old.get('project')!r}, not {new.get('project')!r}"
    before = {e["name"]: e for e in old["elements"]}
    for e in new["elements"]:
        was = before.get(e["name"])
        if was is None:
            continue
        name, now = e["name"], e["physical"]["instances"]
        if was["physical"]["instances"] != now:
            count = was["physical"]["instances"]
            return (f"element '{name}' had {count} partition instance(s) in the checkpoint and "
                    f"has {now} now: its state is split by instance and cannot be carried over "
                    f"(set PARTITIONS back to {count} to go on from it, or move its state to the "
                    f"new count with ccl rescale or ccl run --rescale)")
        if (was.get("columns"), was.get("key")) != (e.get("columns"), e.get("key")):
            return (f"element '{name}' has other columns or another key than in the checkpoint: "
                    f"its changelog and state cannot be read with the new ones")
        if _spread(was) != _spread(e):
            return (f"element '{name}' spreads its rows over its instances otherwise than in the "
                    f"checkpoint (another partition method or columns): its state per instance "
                    f"cannot be carried over")
        grouped = by_group(old).get(name)
        if grouped is not None and e["physical"]["group_columns"] != grouped:
            return (f"element '{name}' kept its state split by the groups of "
                    f"({', '.join(grouped)}) in the checkpoint, which it cannot now (see ccl "
                    f"explain): its state cannot be carried over")
        native_before = was["physical"]["native"] == "aggregation"
        if native_before != (e["physical"]["native"] == "aggregation"):
            how = {True: "Spark's group-by", False: "the per-instance engine"}
            return (f"element '{name}' ran on {how[native_before]} in the checkpoint and runs on "
                    f"{how[not native_before]} now (see ccl explain): its state cannot be carried "
                    f"over")
    return None


def by_group(plan: dict) -> dict[str, list[str]]:
    """Per-instance elements run in applyInArrow whose rows go to buckets by instance and group
    (the plan's ``group_columns``), not by instance alone."""
    return {e["name"]: e["physical"]["group_columns"] for e in plan["elements"]
            if e["physical"]["arrow"] and e["physical"]["group_columns"] is not None}


def _spread(element: dict) -> list:
    """How an element's rows find their instance: per partitioned input, its method and columns."""
    return [(p["count"], [(s["input"], s["method"], s.get("columns", [])) for s in p["specs"]])
            for p in (element.get("partition"), element.get("module_partition")) if p]
