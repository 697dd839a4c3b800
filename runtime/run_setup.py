"""Starting a run: its options, the run directory it prepares (or reopens) and the layout that
directory was made with, and where each input element's files are (``--input`` bindings and file
input adapters).

Run directory (the checkpoint directory, or a temporary one):
``plan.json`` (the plan of the first run, with its physical decisions), ``run.json`` (what that run
decided from run-time facts: buckets, unrecorded inputs, inputs read through Spark's file source),
``queries/ELEMENT`` (Spark checkpoints),
``changelog/ELEMENT/batch-N.parquet``, ``stats/ELEMENT/batch-N.json``, ``bad/ELEMENT/batch-N.jsonl``,
``state/ELEMENT/`` (per-instance state files, runtime/arrow_state.py), ``native/ELEMENT/``
(native aggregation snapshots). runtime/run_dir.py reads it without Spark.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Mapping, Optional

from ccl.plan.codec import PlanFormatError, plan_to_json
from ccl.plan.model import Adapter, Element, Physical, Plan

from .run_dir import (PLAN_FILE, RUN_FILE, RunDirs, by_group, older_layout, saved_plan,
                      saved_run_plan, why_not_continued)
from .state.rows import LAYOUT as STATE_LAYOUT


class RunError(Exception):
    """A run that cannot start or go on; the message says why and what to do."""


LOCAL_COLLECT_BYTES = 64 << 20
CLUSTER_COLLECT_BYTES = 8 << 20


@dataclass
class RunOptions:
    """How to run a plan."""

    inputs: dict[str, str] = field(default_factory=dict)   # element -> file or directory
    base_dir: str = "."                                      # where relative adapter paths start
    run_dir: Optional[str] = None                            # checkpoint directory (None: temporary)
    until_idle: bool = True
    # False: a changelog is written only when something reads it (see prepare_run_dir); a
    # deployed job records every element, for `ccl subscribe`
    record_inputs: bool = False
    # state groups per element (an instance's rows go to bucket ``instance % buckets``); None:
    # :func:`auto_buckets` for a new run directory, and a resumed one keeps its count unless the
    # cluster now has more cores; a number other than a resumed run directory's moves its state
    # to that many (runtime/rebucket.py)
    buckets: Optional[int] = None
    trigger_interval: str = "1 second"                      # a Spark processing-time interval
    # the trigger of the project's query (runtime/project_query.py): how soon an idle project
    # sees a new input file
    poll_interval: str = "100 milliseconds"
    # a batch of the project's query whose new files hold at most this many bytes runs on the
    # driver, its rows in Arrow tables (runtime/project_query.py); None: LOCAL_COLLECT_BYTES on a
    # local master (one machine: the driver's processes beat Spark's shuffles and Python
    # workers), CLUSTER_COLLECT_BYTES on a cluster (whose executors share the work of a large batch)
    collect_bytes: Optional[int] = None
    # a small batch's buckets run in this many processes on the driver's machine (0: one per
    # core it may use) when it has at least parallel_rows rows (runtime/bucket_pool.py)
    driver_workers: int = 0
    parallel_rows: int = 20_000
    max_files_per_batch: Optional[int] = None


DEFAULT_BUCKETS = 8  # the fewest buckets of a new run directory (RunOptions.buckets None)


def auto_buckets(cores: int) -> int:
    """The buckets of a run on ``cores`` cores (Spark's default parallelism) when none are set:
    at least :data:`DEFAULT_BUCKETS`, and one per core beyond, so that every core of a cluster
    can run instances of an element partitioned that many ways."""
    return max(DEFAULT_BUCKETS, cores)


def prepare_run_dir(plan: Plan, options: RunOptions) -> RunDirs:
    """Create (or reopen) the run directory. A new one keeps the plan it runs (``plan.json``,
    the codec's JSON form, with the plan's physical decisions) and what this run decided from
    run-time facts (``run.json``); a reopened one must hold a plan the new one can go on from."""
    root = options.run_dir or tempfile.mkdtemp(prefix="ccl-run-")
    for sub in ("queries", "changelog", "stats", "bad"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    old = saved_plan(root)
    if old is not None:
        problem = why_not_continued(root, old, plan)
        if problem:
            raise RunError(f"the run directory {root} cannot be resumed: {problem}. Start from a "
                           f"new checkpoint directory (or delete this one) to begin again with "
                           f"empty state.")
        return RunDirs(root)
    saved = os.path.join(root, PLAN_FILE)
    project = project_members(plan, options)
    unrecorded = [] if options.record_inputs else [
        e.name for e in plan.elements
        if _physical(e).unrecorded or _unread_in_project(e, plan, project)]
    # with a file limit per batch the ccl_csv source stays: it takes files in name order,
    # Spark's file source the oldest first
    file_source = ([] if options.max_files_per_batch else
                   [e.name for e in plan.elements if _physical(e).native == "input"
                    and not hidden_file(e, plan, options)])
    # the per-instance elements whose window rows live in the state store, not the state files
    # (the plan's decision, read as it is: runtime.state.rows.uses_window_store)
    window_store = [e.name for e in plan.elements if _physical(e).window_store]
    atomic_json(os.path.join(root, RUN_FILE), {"buckets": options.buckets or DEFAULT_BUCKETS,
                                               "unrecorded": unrecorded,
                                               "file_source": file_source, "project_query": project,
                                               "window_store": window_store,
                                               "state_store": STATE_LAYOUT,
                                               # input files numbered across inputs as they arrived
                                               "numbering": "arrival"})
    with open(saved + ".tmp", "w", encoding="utf-8") as f:  # last: the mark of a run begun
        json.dump(plan_to_json(plan), f, indent=1, sort_keys=True)
    os.replace(saved + ".tmp", saved)
    return RunDirs(root)


def _physical(element: Element) -> Physical:
    """The element's physical record (every planned element has one; RunError otherwise)."""
    if element.physical is None:
        raise RunError(f"element '{element.name}' has no physical decisions: compile the "
                       f"project again")
    return element.physical


def project_members(plan: Plan, options: RunOptions) -> list[str]:
    """The elements this run runs as stages of the project's one query (runtime/project_query.py),
    in dependency order: those the plan marks ``project_stage`` (elements with timers included:
    the query's tick files wake them when they are due) whose inputs Spark's file source can list
    (not one named file it never lists, see :func:`hidden_file`) and whose every source is one of
    them, and the error streams ON members only. None with a file limit per batch (the
    per-element queries take files in name order, Spark's file source the oldest first)."""
    if options.max_files_per_batch:
        return []
    members: list[str] = []
    for e in plan.elements:
        if not _physical(e).project_stage:
            continue
        if e.kind == "error stream":  # its rows: the bad records its elements' stages write
            if all(src in members for src in e.error_sources or ()):
                members.append(e.name)
            continue
        if (not hidden_file(e, plan, options) if e.is_input
                else all(src in members for _, src in e.ports())):
            members.append(e.name)
    return members


def _unread_in_project(element: Element, plan: Plan, project: list[str]) -> bool:
    """Whether ``element`` is a stage of the project's query whose changelog nothing reads: its
    every reader is a stage of the same query (which gets its rows in the batch), it is no output
    element (whose ``NAME.csv`` is read from it) and no native aggregation (whose readers read
    back what it wrote), and no output adapter writes it."""
    name = element.name
    if (name not in project or element.role == "output"
            or _physical(element).native == "aggregation"
            or any(a.direction == "output" and a.element == name for a in plan.adapters)):
        return False
    return all(e.name in project for e in plan.elements
               if e.name != name and any(src == name for _, src in e.ports()))


@dataclass(frozen=True)
class RunLayout:
    """What a run directory was made with (its ``plan.json`` and ``run.json``), kept for every
    later run on it."""

    buckets: int                  # state groups per element
    fused: dict[str, list[str]]   # producer -> the elements run in its batches
    unrecorded: frozenset[str]    # elements whose changelog is not written (nothing reads it)
    # input elements read through Spark's file source (runtime/inputs/file_input.py: the native
    # input streams)
    file_source: frozenset[str] = frozenset()
    # per-instance elements run by runtime/arrow_state.py; the other per-instance elements run
    # in transformWithState
    arrow_state: frozenset[str] = frozenset()
    # per-instance aggregations whose rows go to buckets by instance and group (these columns),
    # not by instance alone
    by_group: dict[str, list[str]] = field(default_factory=dict)
    # the stages of the project's one query, in dependency order (runtime/project_query.py)
    project: tuple[str, ...] = ()


def layout_of(root: str) -> RunLayout:
    """The :class:`RunLayout` of the run directory ``root`` (RunError for an older layout)."""
    saved = saved_plan(root) or {}
    problem = older_layout(root, saved)
    if problem:
        raise RunError(f"the run directory {root} cannot be read: {problem}. Start from a new "
                       f"checkpoint directory (or delete this one).")
    try:
        begun = saved_run_plan(saved)
    except PlanFormatError as exc:
        raise RunError(f"the run directory {root} cannot be read: its {PLAN_FILE} is not a plan "
                       f"this ccl reads ({exc}). Start from a new checkpoint directory (or delete "
                       f"this one).") from None
    with open(os.path.join(root, RUN_FILE), encoding="utf-8") as f:
        run = json.load(f)
    physical = {e.name: e.physical for e in begun.elements if e.physical is not None}
    return RunLayout(int(run["buckets"]),
                     {name: list(p.fused_consumers) for name, p in physical.items()
                      if p.fused_consumers},
                     frozenset(run["unrecorded"]), frozenset(run["file_source"]),
                     frozenset(name for name, p in physical.items() if p.arrow),
                     by_group(begun), tuple(run["project_query"]))


def atomic_json(path: str, data: object) -> None:
    """Write ``data`` as JSON at ``path`` (complete or absent: written aside, then renamed)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
    os.replace(path + ".tmp", path)


def element_files(element: Element, plan: Plan, options: RunOptions):
    """Where an input element's rows come from: a ``--input`` binding or a file input adapter
    (the plan's ``input_adapter``); the adapter's properties shape the parsing. ``(FileSpec or
    None, parsing properties)``."""
    adapter = _input_adapter(element, plan)
    return _bound_files(element.name, None if adapter is None else adapter.type,
                        None if adapter is None else adapter.properties, options)


def _input_adapter(element: Element, plan: Plan) -> Optional[Adapter]:
    """The input adapter the plan binds to ``element`` (its ``input_adapter``), if any."""
    name = _physical(element).input_adapter
    return next((a for a in plan.adapters if a.name == name), None)


def _bound_files(name: str, adapter_type: Optional[str], adapter_props: Optional[Mapping],
                 options: RunOptions):
    """:func:`element_files` of the element ``name`` fed by an adapter of ``adapter_type`` with
    ``adapter_props`` (None: no adapter)."""
    from .adapters.config import INBOX_INPUTS, JSON_FILE_INPUT, MQTT_INPUTS, mqtt_payload
    from .adapters.service import inbox_directory
    from .inputs.formats import JSON, XML_LIST, adapter_properties
    from .inputs.listing import FileSpec

    json_inputs = (JSON_FILE_INPUT, "toolkit_socket_json_input")

    path = options.inputs.get(name)
    has_adapter = adapter_type is not None
    # ESP's aliases resolved first, so the dsv_in default below yields to a csvMatchStreamName
    props = adapter_properties(adapter_props) if adapter_props is not None else {}
    kind = adapter_type.lower() if adapter_type is not None else ""
    if kind in ("dsv_in", "dsv_sockin_in", "dsv_sockout_in"):
        props.setdefault("matchstreamname", "true")  # ESP's dsv adapters discard other streams' lines
    elif kind == "toolkit_file_xmllist_input":
        props["fileformat"] = XML_LIST
    elif kind in json_inputs or (kind in MQTT_INPUTS and mqtt_payload(props) == "json"):
        props["fileformat"] = JSON
    elif kind == "db_in":
        props["hasheader"] = "true"  # runtime/adapters/postgres.py writes the column names first
    if kind in INBOX_INPUTS and (path is None or os.path.isdir(path)):
        # the adapter's inbox (runtime/adapters): a bound directory, else one in the run directory
        if options.run_dir is None:
            return None, props
        return FileSpec(inbox_directory(options.run_dir, name, path), None, "*"), props
    if path is None and has_adapter:
        directory = os.path.join(options.base_dir, str(props.get("dir", ".")))
        if props.get("file"):  # a path under dir is read from its own directory
            file = os.path.join(directory, str(props["file"]))
            return FileSpec(os.path.dirname(file), os.path.basename(file), None), props
        return FileSpec(directory, None, str(props.get("filepattern", "*"))), props
    if path is None:
        return None, props
    if os.path.isdir(path):
        return FileSpec(path, None, "*"), props
    return FileSpec(os.path.dirname(os.path.abspath(path)), os.path.basename(path), None), props


def inputs_without_files(plan: Plan, options: RunOptions) -> list[str]:
    """A note per input element that is bound to files (an adapter or ``--input``) none of which
    exist yet: a misspelt directory, file or pattern reads nothing, without an error."""
    from .inputs.listing import list_new_files

    notes = []
    for e in plan.elements:
        spec = element_files(e, plan, options)[0] if e.is_input else None
        if spec is None or list_new_files(spec, ()) or _socket_fed(e, plan):
            continue
        where = os.path.join(spec.dir, spec.file or spec.pattern or "*")
        notes.append(f"input '{e.name}' has no file yet: nothing matches {where}"
                     + ("" if os.path.isdir(spec.dir) else " (the directory does not exist)"))
    return notes


def _socket_fed(element: Element, plan: Plan) -> bool:
    """Whether a socket, MQTT or database input adapter fills ``element``'s input directory (empty at
    first)."""
    from .adapters.config import INBOX_INPUTS
    adapter = _input_adapter(element, plan)
    return adapter is not None and adapter.type.lower() in INBOX_INPUTS


def hidden_file(element: Element, plan: Plan, options: RunOptions) -> bool:
    """Whether ``element`` reads one named file that Spark's file source never lists: a name
    starting with "_" or "." (Hadoop's hidden files). The ``ccl_csv`` source reads it."""
    spec = element_files(element, plan, options)[0]
    return spec is not None and (spec.file or "").startswith(("_", "."))
