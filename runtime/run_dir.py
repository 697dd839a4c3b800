"""The run directory: its paths (:class:`RunDirs`), the record of what it was begun with
(``plan.json``: the plan in its JSON form, with its physical decisions; :func:`saved_plan` reads
it as it is, :func:`saved_run_plan` decodes it into the typed plan) and whether another plan can
go on from it (:func:`why_not_continued`, compared on the typed plans).

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

from ccl.plan.codec import PlanFormatError, plan_from_json, plan_version
from ccl.plan.model import PLAN_VERSION, Element, Plan

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
    version = plan_version(saved)
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


def saved_run_plan(saved: dict) -> Plan:
    """The typed plan of a run directory's ``plan.json`` (``saved``, as :func:`saved_plan` read
    it), of any of the :data:`READABLE_VERSIONS`; ``PlanFormatError`` when it is none."""
    return plan_from_json(saved, READABLE_VERSIONS)


def why_not_resumable(root: str, old: dict, new: dict) -> Optional[str]:
    """:func:`why_not_continued` for a new plan in its JSON form (``ccl deploy``'s ``.ccx``)."""
    return why_not_continued(root, old, plan_from_json(new))


def why_not_continued(root: str, old: dict, new: Plan) -> Optional[str]:
    """Why the plan ``new`` cannot go on from the run directory ``root`` begun with ``old`` (its
    ``plan.json`` as read, of whatever version), in one sentence without the remedy; None when
    it can."""
    older = older_layout(root, old)
    if older:
        return older
    try:
        begun = saved_run_plan(old)
    except PlanFormatError as exc:
        return f"its {PLAN_FILE} is not a plan this ccl reads ({exc})"
    if begun.project != new.project:
        return f"it holds a checkpoint of project {begun.project!r}, not {new.project!r}"
    before = {e.name: e for e in begun.elements}
    grouped_before = by_group(begun)
    for e in new.elements:
        was = before.get(e.name)
        if was is None:
            continue
        name, now = e.name, _instances(e)
        if _instances(was) != now:
            count = _instances(was)
            return (f"element '{name}' had {count} partition instance(s) in the checkpoint and "
                    f"has {now} now: its state is split by instance and cannot be carried over "
                    f"(set PARTITIONS back to {count} to go on from it, or move its state to the "
                    f"new count with ccl rescale or ccl run --rescale)")
        if (was.columns, was.key) != (e.columns, e.key):
            return (f"element '{name}' has other columns or another key than in the checkpoint: "
                    f"its changelog and state cannot be read with the new ones")
        if _spread(was) != _spread(e):
            return (f"element '{name}' spreads its rows over its instances otherwise than in the "
                    f"checkpoint (another partition method or columns): its state per instance "
                    f"cannot be carried over")
        grouped = grouped_before.get(name)
        if grouped is not None and _group_columns(e) != grouped:
            return (f"element '{name}' kept its state split by the groups of "
                    f"({', '.join(grouped)}) in the checkpoint, which it cannot now (see ccl "
                    f"explain): its state cannot be carried over")
        native_before = _native(was) == "aggregation"
        if native_before != (_native(e) == "aggregation"):
            how = {True: "Spark's group-by", False: "the per-instance engine"}
            return (f"element '{name}' ran on {how[native_before]} in the checkpoint and runs on "
                    f"{how[not native_before]} now (see ccl explain): its state cannot be carried "
                    f"over")
    return None


def by_group(plan: Plan) -> dict[str, list[str]]:
    """Per-instance elements run in applyInArrow whose rows go to buckets by instance and group
    (the plan's ``group_columns``), not by instance alone."""
    return {e.name: list(e.physical.group_columns) for e in plan.elements
            if e.physical is not None and e.physical.arrow and e.physical.group_columns is not None}


# An element without physical decisions (a plan edited by hand) compares as one instance on the
# per-instance path without group buckets: what the checks above then report is a difference.
def _instances(element: Element) -> int:
    return 1 if element.physical is None else element.physical.instances


def _native(element: Element) -> Optional[str]:
    return None if element.physical is None else element.physical.native


def _group_columns(element: Element) -> Optional[list[str]]:
    p = element.physical
    return None if p is None or p.group_columns is None else list(p.group_columns)


def _spread(element: Element) -> list:
    """How an element's rows find their instance: per partitioned input, its method and columns."""
    return [(p.count, [(s.input, s.method, s.columns) for s in p.specs])
            for p in (element.partition, element.module_partition) if p is not None]
