"""Running a plan's elements on Spark: what each writes per batch, and the query of its own that an
element outside the project's query (runtime/project_query.py: elements with timers and their
readers, or every element with a file limit per batch) runs.

Such an element runs as its own Structured Streaming query that reads the changelogs of the elements
it selects from (input elements read their CSV files) and writes its own changelog: one Parquet file
per micro-batch, named by the batch id and written with a rename, so a batch replayed after a crash
rewrites the same file with the same rows (sequence numbers come from the source, the engine is
deterministic, a replayed batch reads the same offsets and state). Downstream queries read those
files as a file stream. Per batch the query also writes its counters (rows in and out, bad records
by reason, rows per instance) and its bad records, under the run directory.

A native aggregation, a native stream or a per-instance element without timers (run by
runtime/arrow_state.py) with one source has no query of its own: it runs inside the
batches of its source's query, on the rows the source just produced, and writes its own changelog,
counters and bad records under the source's batch id (the plan's ``fused_consumers``, decided by
the compiler, ccl/plan/decisions.py; the run directory keeps the plan it started with, so it goes on
as it started).

Run directory (the checkpoint directory, or a temporary one):
``plan.json`` (the plan of the first run, with its physical decisions), ``run.json`` (what that run
decided from run-time facts: buckets, unrecorded inputs, inputs read through Spark's file source),
``queries/ELEMENT`` (Spark checkpoints),
``changelog/ELEMENT/batch-N.parquet``, ``stats/ELEMENT/batch-N.json``, ``bad/ELEMENT/batch-N.jsonl``,
``state/ELEMENT/`` (per-instance state files, runtime/arrow_state.py), ``native/ELEMENT/``
(native aggregation snapshots).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.syntax import nodes as n
from ccl.plan.codec import plan_to_json
from ccl.plan.model import READ_AS, Plan

from .engine.changes import OPS
from .arrow_state import GROUP, bucket_group, bucket_rows, bucket_runner, buckets_here, prune
from .built_once import once
from .native_agg import native_writer
from .parquet_files import write_atomically
from .file_names import file_name
from .partition_fn import instance_columns
from .run_dir import (PLAN_FILE, RUN_FILE, RunDirs, by_group, older_layout, saved_plan,
                      why_not_resumable)
from .processor import (BATCH, INFO, INST, KIND, OP, PORT, RAW, SEQ, SRC, SUB, WHY, ElementProcessor,
                        output_schema, port_column)
from .types import column, struct



class RunError(Exception):
    """A run that cannot start or go on; the message says why and what to do."""


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
    buckets: int = 8                                         # state groups per element (at most)
    trigger_interval: str = "1 second"                      # a Spark processing-time interval
    # the trigger of the project's query (runtime/project_query.py): how soon an idle project
    # sees a new input file
    poll_interval: str = "100 milliseconds"
    # a batch of the project's query whose new files hold at most this many bytes has each
    # stage's rows collected and written on the driver (runtime/project_query.py)
    collect_bytes: int = 8 << 20
    max_files_per_batch: Optional[int] = None


# --------------------------------------------------------------------------------------------------
# Starting: the run directory and the partition counts of an earlier run
# --------------------------------------------------------------------------------------------------

def prepare_run_dir(plan: dict, options: RunOptions) -> RunDirs:
    """Create (or reopen) the run directory. A new one keeps the plan it runs (``plan.json``,
    with the plan's physical decisions) and what this run decided from run-time facts
    (``run.json``); a reopened one must hold a plan the new one can go on from."""
    root = options.run_dir or tempfile.mkdtemp(prefix="ccl-run-")
    for sub in ("queries", "changelog", "stats", "bad"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    old = saved_plan(root)
    if old is not None:
        problem = why_not_resumable(root, old, plan)
        if problem:
            raise RunError(f"the run directory {root} cannot be resumed: {problem}. Start from a "
                           f"new checkpoint directory (or delete this one) to begin again with "
                           f"empty state.")
        return RunDirs(root)
    saved = os.path.join(root, PLAN_FILE)
    project = project_members(plan, options)
    unrecorded = [] if options.record_inputs else [
        e["name"] for e in plan["elements"]
        if e["physical"]["unrecorded"] or _unread_in_project(e, plan, project)]
    # with a file limit per batch the ccl_csv source stays: it takes files in name order,
    # Spark's file source the oldest first
    file_source = ([] if options.max_files_per_batch else
                   [e["name"] for e in plan["elements"] if e["physical"]["native"] == "input"
                    and not _hidden_file(e, plan, options)])
    _atomic_json(os.path.join(root, RUN_FILE), {"buckets": options.buckets, "unrecorded": unrecorded,
                                                "file_source": file_source, "project_query": project})
    with open(saved + ".tmp", "w", encoding="utf-8") as f:  # last: the mark of a run begun
        json.dump(plan, f, indent=1, sort_keys=True)
    os.replace(saved + ".tmp", saved)
    return RunDirs(root)


def project_members(plan: dict, options: RunOptions) -> list[str]:
    """The elements this run runs as stages of the project's one query (runtime/project_query.py),
    in dependency order: those the plan marks ``project_stage`` whose inputs Spark's file source
    can list (not one named file it never lists, see :func:`_hidden_file`) and whose every source
    is one of them. None with a file limit per batch (the per-element queries take files in name
    order, Spark's file source the oldest first)."""
    if options.max_files_per_batch:
        return []
    members: list[str] = []
    for e in plan["elements"]:
        if not e["physical"]["project_stage"]:
            continue
        if (not _hidden_file(e, plan, options) if is_input(e)
                else all(src in members for _, src in ports_of(e))):
            members.append(e["name"])
    return members


def _unread_in_project(element: dict, plan: dict, project: list[str]) -> bool:
    """Whether ``element`` is a stage of the project's query whose changelog nothing reads: its
    every reader is a stage of the same query (which gets its rows in the batch), it is no output
    element (whose ``NAME.csv`` is read from it) and no native aggregation (whose readers read
    back what it wrote), and no output adapter writes it."""
    name = element["name"]
    if (name not in project or element["role"] == "output"
            or element["physical"]["native"] == "aggregation"
            or any(a["direction"] == "output" and a["element"] == name for a in plan["adapters"])):
        return False
    return all(e["name"] in project for e in plan["elements"]
               if e["name"] != name and any(src == name for _, src in ports_of(e)))


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
    with open(os.path.join(root, RUN_FILE), encoding="utf-8") as f:
        run = json.load(f)
    physical = {e["name"]: e["physical"] for e in saved["elements"]}
    return RunLayout(int(run["buckets"]),
                     {name: list(p["fused_consumers"]) for name, p in physical.items()
                      if p["fused_consumers"]},
                     frozenset(run["unrecorded"]), frozenset(run["file_source"]),
                     frozenset(name for name, p in physical.items() if p["arrow"]),
                     by_group(saved), tuple(run["project_query"]))


# --------------------------------------------------------------------------------------------------
# Reading: input files and upstream changelogs
# --------------------------------------------------------------------------------------------------

def changelog_schema(element: dict) -> T.StructType:
    """The schema of an element's changelog files."""
    meta = [T.StructField(BATCH, T.LongType()), T.StructField(INST, T.IntegerType()), T.StructField(SEQ, T.LongType()),
            T.StructField(SUB, T.LongType()), T.StructField(OP, T.StringType())]
    return T.StructType(meta + struct(element["columns"]).fields)


def read_changelog(spark: SparkSession, dirs: RunDirs, element: dict,
                   max_files: Optional[int] = None) -> DataFrame:
    """An element's changelog as a stream (``max_files`` batch files per micro-batch)."""
    path = dirs.of("changelog", element["name"])
    os.makedirs(path, exist_ok=True)
    reader = spark.readStream.schema(changelog_schema(element))
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    return reader.parquet(path)


def input_files(element: dict, plan: dict, options: RunOptions):
    """Where an input element's rows come from: a ``--input`` binding or a file input adapter
    (the plan's ``input_adapter``); the adapter's properties shape the parsing."""
    from .inputs.formats import XML_LIST, adapter_properties
    from .inputs.listing import FileSpec

    path = options.inputs.get(element["name"])
    adapter = next((a for a in plan["adapters"] if a["name"] == element["physical"]["input_adapter"]),
                   None)
    # ESP's aliases resolved first, so the dsv_in default below yields to a csvMatchStreamName
    props = adapter_properties(adapter["properties"]) if adapter else {}
    kind = str(adapter["type"]).lower() if adapter is not None else ""
    if kind == "dsv_in":
        props.setdefault("matchstreamname", "true")  # dsv_in discards other streams' lines
    elif kind == "toolkit_file_xmllist_input":
        props["fileformat"] = XML_LIST
    if path is None and adapter is not None:
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


# --------------------------------------------------------------------------------------------------
# The processor's input: every port's rows, with an instance and a bucket
# --------------------------------------------------------------------------------------------------

def inputs_without_files(typed: Plan, options: RunOptions) -> list[str]:
    """A note per input element that is bound to files (an adapter or ``--input``) none of which
    exist yet: a misspelt directory, file or pattern reads nothing, without an error."""
    from .inputs.listing import list_new_files

    plan = plan_to_json(typed)
    notes = []
    for e in plan["elements"]:
        spec = input_files(e, plan, options)[0] if is_input(e) else None
        if spec is None or list_new_files(spec, ()):
            continue
        where = os.path.join(spec.dir, spec.file or spec.pattern or "*")
        notes.append(f"input '{e['name']}' has no file yet: nothing matches {where}"
                     + ("" if os.path.isdir(spec.dir) else " (the directory does not exist)"))
    return notes


def _hidden_file(element: dict, plan: dict, options: RunOptions) -> bool:
    """Whether ``element`` reads one named file that Spark's file source never lists: a name
    starting with "_" or "." (Hadoop's hidden files). The ``ccl_csv`` source reads it."""
    spec = input_files(element, plan, options)[0]
    return spec is not None and (spec.file or "").startswith(("_", "."))


def is_input(element: dict) -> bool:
    """Whether the element is a CREATE INPUT stream or window (read from files)."""
    return element.get("role") == "input" and element.get("query") is None


def ports_of(element: dict) -> list[tuple[str, str]]:
    """(alias, source element name) per port, in port order (docs/plan.md): an input element reads
    itself, a Flex its inputs, a derived element its queries' sources; references and error
    streams have none (references do not run; error streams are written by the batches of the
    elements they are ON, see :func:`error_writer`)."""
    if is_input(element):
        return [(element["name"], element["name"])]
    flex = element.get("flex")
    if flex:
        return list(zip(flex["input_names"], flex["inputs"]))
    if element.get("query") is None:
        return []
    return [(s["alias"], s["element"]) for sel in element["query"]["selects"] for s in sel["sources"]]


def _spec_for(partition: Optional[dict], source: str) -> Optional[dict]:
    """The BY spec of ``partition`` that names ``source`` (None: the source is broadcast)."""
    if not partition:
        return None
    return next((s for s in partition["specs"] if s["input"] == source), None)


def _target(partition: dict, fallback: str) -> str:
    """The name whose ``<name>_partitions`` a custom block reads."""
    var = partition.get("partitions_var") or ""
    return var[:-len("_partitions")] if var.endswith("_partitions") else fallback


def _assignment(partition: dict, source: dict, target: str, schema: T.StructType,
                tmp: str) -> tuple[dict[str, Column], Column, Optional[Column]]:
    """``(first, instance, reason)`` of ``partition`` for rows of the element ``source`` (see
    :func:`runtime.partition_fn.instance_columns`); a broadcast source's rows are copied to every
    instance (``first`` explodes them, as ``tmp``)."""
    count = int(partition["count"])
    source_name = source["name"]
    spec = _spec_for(partition, source_name)
    if spec is None:
        return {tmp: F.explode(F.sequence(F.lit(0), F.lit(count - 1)))}, F.col(tmp), None
    by_name = spec.get("as") or source_name  # the name the custom block reads the row under
    # ROUNDROBIN over a keyed source rotates its keys: the planner names them as the columns
    method = "hash" if spec["method"] == "roundrobin" and spec.get("columns") else spec["method"]
    node = n.PartitionSpec(n.Ident(by_name), method,
                           [n.Ident(c) for c in spec.get("columns", [])],
                           n.from_json(spec["block"]) if spec.get("block") else None)
    # an input's rows are numbered by line, consecutively; a derived element's carry the numbers
    # of the rows that caused them (with gaps, or several rows with one number)
    sequence = SEQ if is_input(source) else (SEQ, SUB)
    first, instance, reason, _ = instance_columns(node, by_name, _target(partition, target), count,
                                                  schema, sequence, tmp=tmp, why_not=spec.get("why"))
    return first, F.coalesce(instance, F.lit(0)), reason


@once
def _instance_steps(element: dict, source: dict, schema: T.StructType) -> tuple[list[dict], list[str]]:
    """The ``withColumns`` steps that give rows of ``source`` (a frame of ``schema``) their
    ``__inst`` and mark those that get none in ``__why``, and the helper columns to drop after."""
    own, mod = element.get("partition"), element.get("module_partition")
    steps: list[dict] = []
    reasons: list[Column] = []
    instance: Column = F.lit(0)
    for partition, tmp in ((own, "__a_own"), (mod, "__a_mod")):
        if not partition:
            continue
        theirs = source.get("module_partition") or {}
        if partition is mod and theirs.get("partitions_var") == mod["partitions_var"]:
            # an element of the same module instance: the module instance its producer was in
            per = int((source.get("partition") or {}).get("count") or 1)
            part: Column = F.floor(F.col(SRC) / F.lit(per)).cast("int")
        else:
            first, part, reason = _assignment(partition, source, element["name"], schema, tmp)
            if first:
                steps.append(first)
            if reason is not None:
                reasons.append(reason)
        # module instance m of M, own instance p of P: m * P + p
        instance = part if partition is own else part * F.lit(int(own["count"]) if own else 1) + instance
    final = {INST: instance}
    if reasons:
        final[WHY] = F.coalesce(F.col(WHY), *reasons)
    return steps + [final], [tmp for step in steps for tmp in step]


def _with_instance(df: DataFrame, element: dict, source: dict) -> DataFrame:
    """``df`` (rows of ``source``) with ``__inst``, the instance of ``element`` each row goes to.

    Own partitioning gives ``p`` in ``0..P-1``; an element of a partitioned module instance also
    gets the module instance ``m`` in ``0..M-1`` (from the module's BY for an outer input, from the
    producing instance for an element of the same module instance) and ``__inst = m * P + p``."""
    steps, helpers = _instance_steps(element, source, df.schema)
    for step in steps:
        df = df.withColumns(step)
    return df.drop(*helpers) if helpers else df


def processor_input(plan: dict, element: dict, frames: Sequence[Optional[DataFrame]], buckets: int,
                    by_group: Sequence[str] = (), narrow: bool = False) -> DataFrame:
    """The union of all ports' rows in the processor's input layout, with ``__bucket``: the
    instance modulo ``buckets``, or with ``by_group`` (columns of the one source, see
    :attr:`RunLayout.by_group`) a hash of the instance and those columns. ``narrow`` leaves out
    the meta columns that hold their ``META_DEFAULTS`` value on every row (:func:`constant_meta`;
    for the applyInArrow path, whose readers put them back: every column of every row crosses a
    shuffle and the Arrow link to Python, 0.6-0.8 s per million rows for six of them).

    Each frame has ``__seq``, ``__sub``, ``__src``, ``__op``, ``__why``, ``__raw`` and the source
    element's columns; a port whose frame is None has no rows (not all of them)."""
    by_name = {e["name"]: e for e in plan["elements"]}
    ports = ports_of(element)
    columns = [by_name[src]["columns"] for _, src in ports]
    left_out = sorted(constant_meta(plan, element, frames)) if narrow else []
    out = None
    for i, ((_, src), df) in enumerate(zip(ports, frames)):
        if df is None:
            continue
        df = _with_instance(df, element, by_name[src])
        df = df.select(*_port_columns(columns, i, left_out))
        out = df if out is None else out.unionByName(df)
    assert out is not None
    return out.withColumn("__bucket", _bucket_column(buckets, tuple(by_group)))


@once
def _port_columns(columns: list, port: int, left_out: list) -> list[Column]:
    """The processor input columns of the rows of ``port`` (of ports whose sources have
    ``columns``), without the meta columns ``left_out``."""
    packed = [F.lit(port).alias(PORT), F.col(SEQ), F.col(SUB), F.col(SRC), F.col(OP), F.col(INST),
              F.col(WHY), F.col(RAW)]
    packed = [c for c, name in zip(packed, (PORT, SEQ, SUB, SRC, OP, INST, WHY, RAW))
              if name not in left_out]
    for j, cols in enumerate(columns):
        value = (F.struct(*[column(c) for c, _ in cols]) if j == port
                 else F.lit(None).cast(struct(cols)))
        packed.append(value.alias(port_column(j)))
    return packed


@once
def _bucket_column(buckets: int, by_group: tuple[str, ...]) -> Column:
    """``__bucket``: the instance, or with ``by_group`` a hash of it and those columns of the
    first port, modulo ``buckets``."""
    spread = F.hash(F.col(INST), *[F.col(port_column(0))[c] for c in by_group]) if by_group else F.col(INST)
    return F.pmod(spread, F.lit(buckets))



# --------------------------------------------------------------------------------------------------
# Writing: one batch of an element's output
# --------------------------------------------------------------------------------------------------

def constant_meta(plan: dict, element: dict, frames: Sequence[Optional[DataFrame]]) -> set[str]:
    """The meta columns of ``element``'s processor input that hold their ``META_DEFAULTS`` value
    on every row, given its ports' ``frames``: the port of a one-port element; a derived element's
    line (only input elements read lines) and reason (none unless a partition function can fail
    here); the opcode when every source is a stream (streams emit inserts only); the producing
    instance when every source has one instance; the sub-number when every source is an input
    stream read natively (one row per line)."""
    if is_input(element):
        return set()
    by_name = {e["name"]: e for e in plan["elements"]}
    sources = [by_name[src] for _, src in ports_of(element)]
    fails = any(WHY in step for src, df in zip(sources, frames) if df is not None
                for step in _instance_steps(element, src, df.schema)[0])
    rules = {PORT: len(sources) == 1, RAW: True, WHY: not fails,
             OP: all(READ_AS.get(s["kind"], s["kind"]) == "stream" for s in sources),
             SRC: all(s["physical"]["instances"] == 1 for s in sources),
             SUB: all(s["physical"]["native"] == "input" for s in sources)}
    return {name for name, holds in rules.items() if holds}


def _observed(observed: Observation, df: DataFrame, metrics: list[Column]) -> dict:
    """The metrics ``observed`` collected over ``df``, or ``metrics`` counted by another pass when
    Spark collected none: a batch without rows (a file of a header only) is optimised into an
    empty relation that drops the observation, and ``Observation.get`` fails on it."""
    try:
        return observed.get
    except Py4JJavaError:  # an assertion in toPyRow: no metrics were collected
        return df.select(*metrics).first().asDict()


def _atomic_json(path: str, data: object) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
    os.replace(path + ".tmp", path)


def _single_parquet(df: DataFrame, target: str) -> None:
    """Write ``df`` as one Parquet file at ``target`` (see :func:`single_parquets`)."""
    single_parquets([(df, target, True)])


def single_parquets(parts: list[tuple[DataFrame, str, bool]]) -> list[dict]:
    """Write each ``(frame, target, always)`` of ``parts`` as one Parquet file at ``target``
    (complete or absent, never partial), all in one Spark job: one task per frame writes its
    Arrow batches with pyarrow under a hidden name and renames it. A frame with no rows gets a
    file (empty, written here) only when ``always``. Returns per part its rows counted by
    ``__op`` (``{None: rows}`` for a frame without that column). (Spark's own writer, with its
    commit protocol and temporary directories, took about twice as long for a file of 50,000
    rows, and a job per file costs 0.1-0.2 s.)"""
    structs = tuple(T.StructType(df.schema.fields) for df, _, _ in parts)
    frames = [df.coalesce(1).select(*cols) for (df, _, _), cols in zip(parts, _struct_columns(structs))]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    targets = [target for _, target, _ in parts]
    counts: list[dict] = [{} for _ in parts]
    for r in union.mapInArrow(_parquet_writer(targets, structs),
                              "part int, op string, n long").collect():
        counts[r["part"]][r["op"]] = r["n"]
    for (_, target, always), schema, found in zip(parts, structs, counts):
        if always and not found:  # as Spark's writer would leave for a frame without rows
            from pyspark.sql.pandas.types import to_arrow_schema
            write_atomically(target, to_arrow_schema(schema, timezone="UTC").empty_table())
    return [{op: n for op, n in c.items() if n} for c in counts]


@once
def _struct_columns(structs: tuple[T.StructType, ...]) -> list[list[Column]]:
    """Per frame of :func:`single_parquets`, its columns: its rows as struct ``p<i>`` beside null
    structs for the other frames."""
    return [[F.struct(*[column(c) for c in mine.names]).alias(f"p{k}") if k == i
             else F.lit(None).cast(t).alias(f"p{k}") for k, t in enumerate(structs)]
            for i, mine in enumerate(structs)]


def _parquet_writer(targets: list[str], schemas: list[T.StructType]) -> Callable:
    """The ``mapInArrow`` function of :func:`single_parquets` (it runs on an executor, once per
    frame: the rows of a frame are in one partition)."""
    def write(batches):
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql.pandas.types import to_arrow_schema

        from .parquet_files import AtomicParquet

        arrows = [to_arrow_schema(s, timezone="UTC") for s in schemas]
        files: dict[int, AtomicParquet] = {}
        counts: list[dict] = [{} for _ in targets]
        try:
            for batch in batches:
                for i in range(len(targets)):
                    col = batch.column(i)
                    rows = pc.filter(col, pc.is_valid(col))
                    if len(rows) == 0:
                        continue
                    part = pa.RecordBatch.from_struct_array(rows).cast(arrows[i])
                    if i not in files:
                        files[i] = AtomicParquet(targets[i], arrows[i])
                    files[i].write(part)
                    ops = (pc.value_counts(part.column("__op")).to_pylist()
                           if "__op" in arrows[i].names else [{"values": None, "counts": len(part)}])
                    for vc in ops:
                        counts[i][vc["values"]] = counts[i].get(vc["values"], 0) + vc["counts"]
        finally:
            for out in files.values():
                out.close()
        for out in files.values():
            out.commit()
        found = [(i, op, n) for i, c in enumerate(counts) for op, n in c.items()]
        yield pa.record_batch([pa.array([f[0] for f in found], pa.int32()),
                               pa.array([f[1] for f in found], pa.string()),
                               pa.array([f[2] for f in found], pa.int64())],
                              names=["part", "op", "n"])
    return write


def batch_writer(element: dict, dirs: RunDirs, plan: dict,
                 layout: RunLayout) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of an element's query (its input is the processor's output, or
    for a native aggregation the source's changelog with ``__inst``). After its own files, a batch
    runs the writers of the element's fused consumers (``layout.fused``) on its output rows. An
    unrecorded element (``layout.unrecorded``) writes its counters and bad records but no
    changelog."""
    name = element["name"]
    cols = [c for c, _ in element["columns"]]
    native = element["physical"]["native"]
    by_name = {e["name"]: e for e in plan["elements"]}
    consumers = [(by_name[c], batch_writer(by_name[c], dirs, plan, layout))
                 for c in layout.fused.get(name, [])]
    arrow_rows = {c["name"]: arrow_transform(plan, c, dirs, layout.buckets) for c, _ in consumers
                  if c["name"] in layout.arrow_state}

    def consumer_frame(consumer: dict, rows: DataFrame, batch_id: int) -> DataFrame:
        """What the writer of a fused consumer gets from this batch's output ``rows``."""
        if consumer["name"] in arrow_rows:
            proc_in = processor_input(plan, consumer, [rows], layout.buckets,
                                      layout.by_group.get(consumer["name"], ()), narrow=True)
            return arrow_rows[consumer["name"]](proc_in, batch_id)
        return native_frame(consumer, element, rows)
    errors = error_writer(element, plan, dirs)
    if native == "aggregation":
        return aggregation_writer(element, dirs, plan)

    if len(consumers) == 1 and hands_over_unread(element, consumers[0][0], layout):
        consumer, consumer_write = consumers[0]
        # the input's rows by kind (an input stream emits inserts only, and has one instance)
        kinds = ("row", "bad", "skip")
        code = F.when(F.col(KIND) == kinds[0], 0).when(F.col(KIND) == kinds[1], 1).otherwise(2)
        tallies = [F.sum(F.when(code == k, 1).otherwise(0)).alias(kind) for k, kind in enumerate(kinds)]

        def write_through(df: DataFrame, batch_id: int) -> None:
            if consumer["name"] in arrow_rows:
                observed = Observation()
                rows = changelog_frame(df.observe(observed, *tallies).where(F.col(KIND) == "row"), cols)
                consumer_write(consumer_frame(consumer, rows, batch_id), batch_id)
                by_kind = {kind: int(n) for kind, n in _observed(observed, df, tallies).items() if n}
            else:
                rows = changelog_frame(df, cols, keep=(KIND,))
                counted = consumer_write(native_frame(consumer, element, rows),
                                         batch_id, tally=code)
                by_kind = {kinds[k]: n for k, n in counted.items()}
            bad = (_write_bad(df.where(F.col(KIND) == "bad"), name,
                              dirs.batch_file("bad", name, batch_id, "jsonl"), errors, batch_id)
                   if by_kind.get("bad") else {})
            received = sum(n for k, n in by_kind.items() if k != "bad")  # (bad rows reach no instance)
            _atomic_json(dirs.batch_file("stats", name, batch_id, "json"),
                         {"rows_in": sum(by_kind.values()),
                          "rows_out": {"i": by_kind["row"]} if by_kind.get("row") else {},
                          "bad": bad, "instances": {"0": received} if received else {}})
        return write_through

    write_element = element_writer(element, dirs, plan, layout)

    def write(df: DataFrame, batch_id: int) -> None:
        df, produced = write_element(df, batch_id)
        try:
            if consumers and produced:
                rows = changelog_frame(df.where(F.col(KIND) == "row"), cols)
                for consumer, consumer_write in consumers:
                    consumer_write(consumer_frame(consumer, rows, batch_id), batch_id)
        finally:
            df.unpersist()
        if name in layout.arrow_state:
            prune(dirs.of("state", name), batch_id)
    return write


def hands_over_unread(element: dict, reader: dict, layout: RunLayout) -> bool:
    """Whether ``element``, with ``reader`` its one reader, hands its batch to it unread: an input
    stream read natively whose changelog nothing reads, and a reader that is a native aggregation
    or runs in applyInArrow. The reader's pass counts the input's rows too (the aggregation's own
    grouping, or Spark's observed metrics), so the batch is read once, not cached and read again
    (a second read only for bad records, when there are some)."""
    return (element["physical"]["native"] == "input" and element["name"] in layout.unrecorded
            and (reader["physical"]["native"] == "aggregation"
                 or reader["name"] in layout.arrow_state))


def aggregation_writer(element: dict, dirs: RunDirs, plan: dict) -> Callable[..., Optional[dict[int, int]]]:
    """The batch function of a native aggregation (:func:`runtime.native_agg.native_writer`), writing
    into the run directory ``dirs``."""
    name = element["name"]
    errors = error_writer(element, plan, dirs)
    return native_writer(
        element, element["physical"]["aggregation"], dirs.of("native", name),
        write_stats=lambda batch_id, stats: _atomic_json(
            dirs.batch_file("stats", name, batch_id, "json"), stats),
        write_bad=lambda rows, batch_id: _write_bad(
            rows.select(_why_info(rows).alias(INFO)), name,
            dirs.batch_file("bad", name, batch_id, "jsonl"), errors, batch_id),
        changelog_path=lambda batch_id: dirs.batch_file("changelog", name, batch_id, "parquet"))


def element_writer(element: dict, dirs: RunDirs, plan: dict, layout: RunLayout
                   ) -> Callable[[DataFrame, int], tuple[DataFrame, bool]]:
    """What writes one batch of ``element``'s processor output rows (runtime/processor.py): its
    changelog (unless the element is unrecorded), its bad records (also into the error streams
    on it) and its counters. Returns the batch's rows persisted (the caller unpersists them) and
    whether it produced any changelog row."""
    name = element["name"]
    cols = [c for c, _ in element["columns"]]
    native = element["physical"]["native"]
    errors = error_writer(element, plan, dirs)

    def write(df: DataFrame, batch_id: int) -> tuple[DataFrame, bool]:
        df = df.persist()
        # (as Arrow: a row per instance and kind, 130,000 of them with 65,535 instances, which
        # collect() turned into Row objects in about a second)
        counts = df.groupBy(KIND, INST, OP).agg(F.count(F.lit(1)).alias("n"), F.sum(SEQ).alias("s"),
                                                F.sum(SUB).alias("u")).toArrow().to_pylist()
        rows_out, rows_in, instances = _counters(counts, native)
        if rows_out and name not in layout.unrecorded:
            data = df.where(F.col(KIND) == "row").select(F.lit(batch_id).alias(BATCH), INST, SEQ, SUB, OP,
                                                         *[column(c) for c in cols])
            _single_parquet(data, dirs.batch_file("changelog", name, batch_id, "parquet"))
        bad = (_write_bad(df.where(F.col(KIND) == "bad"), name,
                          dirs.batch_file("bad", name, batch_id, "jsonl"), errors, batch_id)
               if any(r[KIND] == "bad" for r in counts) else {})
        _atomic_json(dirs.batch_file("stats", name, batch_id, "json"),
                     {"rows_in": rows_in, "rows_out": rows_out, "bad": bad, "instances": instances})
        return df, bool(rows_out)
    return write


def table_writer(element: dict, dirs: RunDirs, plan: dict, layout: RunLayout
                 ) -> Callable[[Any, int], Optional[Any]]:
    """:func:`element_writer` for a batch's processor output rows collected on the driver (an
    Arrow table of :func:`runtime.processor.output_schema`): the same files, written here with
    pyarrow instead of by Spark jobs. Returns the changelog rows (an Arrow table of
    :func:`changelog_schema`), None when there are none."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_schema

    name = element["name"]
    cols = [c for c, _ in element["columns"]]
    native = element["physical"]["native"]
    errors = error_writer(element, plan, dirs)
    schema = to_arrow_schema(changelog_schema(element), timezone="UTC")

    def write(table: Any, batch_id: int) -> Optional[Any]:
        counts = (table.group_by([KIND, INST, OP], use_threads=False)
                  .aggregate([([], "count_all"), (SEQ, "sum"), (SUB, "sum")])
                  .rename_columns([KIND, INST, OP, "n", "s", "u"]).to_pylist())
        rows_out, rows_in, instances = _counters(counts, native)
        rows = None
        if rows_out:
            kept = table.filter(pc.equal(table.column(KIND), "row"))
            batch = pa.array([batch_id] * kept.num_rows, pa.int64())
            rows = pa.Table.from_arrays([batch] + [kept.column(c) for c in (INST, SEQ, SUB, OP, *cols)],
                                        schema=schema)
            if name not in layout.unrecorded:
                write_atomically(dirs.batch_file("changelog", name, batch_id, "parquet"), rows)
        infos = (table.filter(pc.equal(table.column(KIND), "bad")).column(INFO).to_pylist()
                 if any(r[KIND] == "bad" for r in counts) else [])
        bad = write_bad_infos(infos, name, dirs.batch_file("bad", name, batch_id, "jsonl"), errors,
                              batch_id)
        _atomic_json(dirs.batch_file("stats", name, batch_id, "json"),
                     {"rows_in": rows_in, "rows_out": rows_out, "bad": bad, "instances": instances})
        return rows
    return write


def _counters(counts: list[dict], native: Optional[str]) -> tuple[dict[str, int], int, dict[str, int]]:
    """An element's counters of a batch from its output rows counted by kind, instance and
    opcode (``n`` rows, ``s`` and ``u`` the sums of their sequence and sub-numbers: a ``stat``
    row carries the rows an instance received in ``__seq`` and those that came to it bad in
    ``__sub``): rows out by opcode, rows in, rows received per instance. Rows in also counts
    those that reached no instance (bad on arrival: no partition instance, or not parsed)."""
    rows_out: dict[str, int] = {}
    for r in counts:
        if r[KIND] == "row":
            rows_out[r[OP]] = rows_out.get(r[OP], 0) + int(r["n"])
    instances: dict[str, int] = {}
    if native in ("input", "stream"):  # one output row per input row, no stat rows
        for r in counts:
            if r[KIND] != "bad":
                instances[str(r[INST])] = instances.get(str(r[INST]), 0) + int(r["n"])
        return rows_out, sum(int(r["n"]) for r in counts), instances
    stats = [r for r in counts if r[KIND] == "stat"]
    return (rows_out, sum(int(r["s"]) + int(r["u"]) for r in stats),
            {str(r[INST]): int(r["s"]) for r in stats if r["s"]})


def arrow_transform(plan: dict, element: dict, dirs: RunDirs,
                    buckets: int) -> Callable[[DataFrame, int], DataFrame]:
    """For an element run by runtime/arrow_state.py: the function from one batch of its processor
    input (with ``__bucket``, of ``buckets``) to the batch's processor output rows."""
    plan_text = json.dumps(plan)
    first = first_ports(plan, element)
    state_dir = dirs.of("state", element["name"])
    group = bucket_group(buckets)

    def rows(proc_in: DataFrame, batch_id: int) -> DataFrame:
        return bucket_rows(proc_in, group, plan_text, element, first, state_dir, batch_id,
                           int(time.time() * 1000))
    return rows


def local_arrow_transform(plan: dict, element: dict, dirs: RunDirs) -> Callable[[Any, int], Any]:
    """:func:`arrow_transform` for a small batch, run here on the driver: from the batch's
    processor input collected (an Arrow table with ``__bucket``) to its processor output rows (an
    Arrow table), each bucket through the very function applyInArrow runs, with the same state
    files."""
    plan_text = json.dumps(plan)
    first = first_ports(plan, element)
    state_dir = dirs.of("state", element["name"])

    def rows(proc_in: Any, batch_id: int) -> Any:
        return buckets_here(bucket_runner(plan_text, element["name"], first, state_dir, batch_id,
                                          int(time.time() * 1000)), proc_in, element)
    return rows


def first_ports(plan: dict, element: dict) -> frozenset[int]:
    """The ports of ``element`` whose rows of a batch come before the others: those reading a
    reference, and in a join of a stream with windows, those reading the windows. The rows of two
    inputs in one batch come from different files, so their line numbers say nothing of which
    came first; the data the stream's events look up is taken to be there already (as ESP users
    load it before the events), rather than a stream row at line 2 missing a window row at line 3."""
    kinds = {e["name"]: e["kind"] for e in plan["elements"]}
    first = {port for port, (_, source) in enumerate(ports_of(element)) if kinds.get(source) == "reference"}
    if element.get("query") is not None and not element.get("flex"):
        port = 0
        for sel in element["query"]["selects"]:
            sources = sel["sources"]
            stream = [kinds.get(src["element"]) == "stream" and not src.get("keep") for src in sources]
            if any(stream) and not all(stream):
                first |= {port + i for i, is_stream in enumerate(stream) if not is_stream}
            port += len(sources)
    return frozenset(first)


def _info(reason: Column, row: Column) -> Column:
    """The ``__info`` JSON of a bad record (as runtime.processor.bad_info writes it)."""
    return F.to_json(F.struct(reason.alias("reason"), row.alias("row")))


def _why_info(frame: DataFrame) -> Column:
    """The ``__info`` of a row of ``frame`` (the processor's input layout) with a ``__why``: that
    reason and the row's element columns."""
    meta = {SEQ, SUB, SRC, OP, WHY, RAW, INST, KIND, BATCH, PORT}
    return _info(F.col(WHY), F.struct(*[column(c) for c in frame.columns if c not in meta]))


def _write_bad(bad: DataFrame, element: str, path: str,
               errors: Callable[[list[dict], int], None], batch_id: int) -> dict[str, int]:
    """Bad records as JSON lines (element, reason, row), also handed to ``errors`` (the error
    streams on the element); their counts by reason."""
    return write_bad_infos([r[INFO] for r in bad.select(INFO).collect()], element, path, errors,
                           batch_id)


def write_bad_infos(infos: list[str], element: str, path: str,
                    errors: Callable[[list[dict], int], None], batch_id: int) -> dict[str, int]:
    """:func:`_write_bad` for the ``__info`` texts of the bad records."""
    if not infos:
        return {}
    counts: dict[str, int] = {}
    records = []
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for info in infos:
            record = {"element": element, **json.loads(info)}
            counts[record["reason"]] = counts.get(record["reason"], 0) + 1
            records.append(record)
            f.write(json.dumps(record, sort_keys=True) + "\n")
    os.replace(path + ".tmp", path)
    errors(records, batch_id)
    return counts


# Our errorCode values (ESP's own table is not known): see docs/runtime.md "Error streams".
ERROR_UNREADABLE, ERROR_KEY, ERROR_PARTITION, ERROR_COMPUTATION = 1, 2, 3, 4


def error_code(reason: str, row: object) -> int:
    """The errorCode of a bad record with ``reason`` and ``row``."""
    if (isinstance(row, dict) and "line" in row and len(row) == 1) or reason.startswith(
            ("column ", "expected ", "unknown opcode")):
        return ERROR_UNREADABLE
    if reason.startswith(("duplicate key", "no row with key")):
        return ERROR_KEY
    if "partition" in reason:
        return ERROR_PARTITION
    return ERROR_COMPUTATION


def error_writer(element: dict, plan: dict, dirs: RunDirs) -> Callable[[list[dict], int], None]:
    """What writes an element's bad records of one batch into the error streams ON it: per error
    stream a changelog file ``batch-N-ELEMENT.parquet`` (and its counters), one insert per bad
    record. ``errorRecord`` is the record as JSON (UTF-8 bytes), ``sourceStreamName`` the element
    itself for an input element, else its source when it has one, ``errorTime`` the time written."""
    monitors = [e for e in plan["elements"]
                if e["kind"] == "error stream" and element["name"] in (e.get("error_sources") or [])]
    if not monitors:
        return lambda records, batch_id: None
    sources = {src for _, src in ports_of(element)}
    source = element["name"] if is_input(element) else (sources.pop() if len(sources) == 1 else None)

    def write(records: list[dict], batch_id: int) -> None:
        import datetime as dt

        import pyarrow as pa
        import pyarrow.parquet as pq

        now = dt.datetime.now(dt.timezone.utc)
        n = len(records)
        table = pa.table({
            BATCH: pa.array([batch_id] * n, pa.int64()), INST: pa.array([0] * n, pa.int32()),
            SEQ: pa.array(range(n), pa.int64()), SUB: pa.array([0] * n, pa.int64()),
            OP: pa.array(["i"] * n, pa.string()),
            "errorCode": pa.array([error_code(r["reason"], r["row"]) for r in records], pa.int32()),
            "errorRecord": pa.array([json.dumps(r["row"], sort_keys=True).encode() for r in records],
                                    pa.binary()),
            "errorMessage": pa.array([r["reason"] for r in records], pa.string()),
            "errorStreamName": pa.array([element["name"]] * n, pa.string()),
            "sourceStreamName": pa.array([source] * n, pa.string()),
            "errorTime": pa.array([now] * n, pa.timestamp("us", tz="UTC"))})
        for monitor in monitors:
            stem = f"batch-{batch_id:08d}-{file_name(element['name'])}"
            target = os.path.join(dirs.of("changelog", monitor["name"]), stem + ".parquet")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            hidden = os.path.join(os.path.dirname(target), "." + stem + ".tmp")  # unseen by readers
            pq.write_table(table, hidden)
            os.replace(hidden, target)
            _atomic_json(os.path.join(dirs.of("stats", monitor["name"]), stem + ".json"),
                         {"rows_in": n, "rows_out": {"i": n}, "bad": {}, "instances": {"0": n}})
    return write


# --------------------------------------------------------------------------------------------------
# One element's query
# --------------------------------------------------------------------------------------------------

def input_frame(spark: SparkSession, plan: dict, element: dict, options: RunOptions,
                dirs: RunDirs) -> Optional[DataFrame]:
    """An input element's rows from its CSV files, in the processor's frame layout (rows that do
    not parse have ``__why`` and ``__raw``). None when no file is bound to the element."""
    from .inputs.source import read_input

    files, props = input_files(element, plan, options)
    if files is None:
        return None
    opts = {k: str(v) for k, v in props.items()}
    opts["manifest_dir"] = dirs.of("sources", element["name"])
    if options.max_files_per_batch:
        opts["max_files_per_batch"] = str(options.max_files_per_batch)
    try:
        df = read_input(spark, element, files, options=opts)
    except ValueError as exc:  # a delimiter or date format the reader cannot use
        raise RunError(f"input of '{element['name']}': {exc}") from None
    return frame_layout(df)


def frame_layout(df: DataFrame) -> DataFrame:
    """Rows of an input source (runtime/inputs/source.py) in the processor's frame layout."""
    return df.select(*_layout_columns(tuple(df.columns)))


@once
def _layout_columns(names: tuple[str, ...]) -> list[Column]:
    renamed = {"__bad": WHY, "__raw": RAW}
    return ([column(c).alias(renamed[c]) if c in renamed else column(c) for c in names]
            + [F.lit(0).alias(SRC), F.lit(0).cast("long").alias(SUB)])


def input_files_stream(spark: SparkSession, plan: dict, element: dict, options: RunOptions,
                       dirs: RunDirs) -> Optional[tuple[DataFrame, Callable[[DataFrame], DataFrame]]]:
    """For an input element read through Spark's file source (runtime/inputs/file_input.py): the stream
    of its new files and the function from one batch of it to the batch's processor output rows
    (:func:`native_input`); None when no file is bound to the element."""
    from .inputs.file_input import batch_rows, file_stream, input_format

    files, props = input_files(element, plan, options)
    if files is None:
        return None
    try:
        fmt = input_format(element, {k: str(v) for k, v in props.items()})
    except ValueError as exc:  # a delimiter or date format the reader cannot use
        raise RunError(f"input of '{element['name']}': {exc}") from None

    def rows(batch: DataFrame) -> DataFrame:
        paths = [r[0] for r in batch.collect()]
        parsed = batch_rows(batch.sparkSession, element, files, fmt,
                            dirs.of("sources", element["name"]), paths)
        return native_input(element, frame_layout(parsed))
    try:
        return file_stream(spark, files, options.max_files_per_batch), rows
    except OSError as exc:  # the directory is missing and cannot be made
        raise RunError(f"input of '{element['name']}': {exc}") from None


def native_input(element: dict, frame: DataFrame) -> DataFrame:
    """An input stream's processor output computed by Spark expressions (the plan's native
    ``input`` path): what
    the engine's input stage does for a stream, row by row. Every input row gives one output row:
    ``row`` (an insert, upsert or update, emitted as an insert), ``bad`` (does not parse, unknown
    opcode) or ``skip`` (a delete or safedelete, which a stream drops; counted as received)."""
    return frame.select(*_native_input_columns(element))


@once
def _native_input_columns(element: dict) -> list[Column]:
    op, why = F.col(OP), F.col(WHY)
    unknown = F.concat(F.lit("unknown opcode '"), op, F.lit("'"))
    reason = F.when(why.isNotNull(), why).when(~op.isin(*OPS), unknown)
    kind = (F.when(reason.isNotNull(), F.lit("bad"))
            .when(op.isin("d", "s"), F.lit("skip")).otherwise(F.lit("row")))
    cols = [c for c, _ in element["columns"]]
    info = (F.when(reason.isNull(), F.lit(None))
            .when(F.col(RAW).isNotNull(), _info(reason, F.struct(F.col(RAW).alias("line"))))
            .otherwise(_info(reason, F.struct(*[column(c) for c in cols]))))
    return _native_row_columns(kind, F.lit(0), info, [column(c) for c in cols])


def _native_row_columns(kind: Column, inst: Column, info: Column, values: list[Column]) -> list[Column]:
    """The columns of processor output rows (runtime/processor.py) of a native element: one per
    input row, kind ``row`` (an insert with the input's sequence number), ``skip`` or ``bad``."""
    return [kind.alias(KIND), inst.alias(INST), F.col(SEQ), F.lit(0).cast("long").alias(SUB),
            F.when(kind == "row", F.lit("i")).alias(OP), info.alias(INFO), *values]


def _condition(expr: dict) -> Column:
    """A native stream's WHERE (the plan's ``filter``, in the subset of
    ccl.plan.physical.condition_kind) as a Spark Column."""
    node = expr["node"]
    if node == "Literal":
        return F.lit(expr["value"])
    if node == "FieldAccess":
        return column(expr["field"]["name"])
    if node == "Unary":
        return ~_condition(expr["operand"])
    if node == "Case":  # ccl.plan.physical.is_true_test: null is false
        return F.coalesce(_condition(expr["whens"][0]["when"]), F.lit(False))
    left, right, op = _condition(expr["left"]), _condition(expr["right"]), expr["op"]
    if op == "and":
        return left & right
    if op == "or":
        return left | right
    return {"=": left == right, "!=": left != right, "<>": left != right, "<": left < right,
            "<=": left <= right, ">": left > right, ">=": left >= right}[op]


def native_stream(element: dict, source: dict, frame: DataFrame) -> DataFrame:
    """A stateless stream's processor output computed by Spark expressions (the plan's
    ``filter``): ``row`` for a row that passes the WHERE (an insert with the source row's
    sequence number), ``skip`` for one that does not (counted as received), ``bad`` for a row
    that got no instance (``__why``). ``frame`` is the changelog of ``source`` with ``__inst``."""
    return frame.select(*_native_stream_columns(element, source))


@once
def _native_stream_columns(element: dict, source: dict) -> list[Column]:
    spec = element["physical"]["filter"]
    why = F.col(WHY)
    passes = F.coalesce(_condition(spec["where"]), F.lit(False)) if spec["where"] else F.lit(True)
    kind = (F.when(why.isNotNull(), F.lit("bad")).when(F.col(OP).isin("d", "s"), F.lit("skip"))
            .when(passes, F.lit("row")).otherwise(F.lit("skip")))
    info = _info(why, F.struct(*[column(c) for c, _ in source["columns"]]))
    return _native_row_columns(kind, F.col(INST), F.when(why.isNotNull(), info),
                               [column(src).alias(name) for name, src in spec["items"]])


def changelog_frame(rows: DataFrame, cols: list[str], keep: tuple[str, ...] = ()) -> DataFrame:
    """Changelog rows (``__inst, __seq, __sub, __op`` and ``cols``) in the processor's frame layout
    (and the columns ``keep`` as they are)."""
    return rows.select(*_changelog_columns(tuple(cols), keep))


@once
def _changelog_columns(cols: tuple[str, ...], keep: tuple[str, ...]) -> list[Column]:
    return [F.col(SEQ), F.col(SUB), F.col(INST).alias(SRC), F.col(OP), *[column(c) for c in cols],
            F.lit(None).cast("string").alias(WHY), F.lit(None).cast("string").alias(RAW),
            *[F.col(c) for c in keep]]


def upstream_frame(spark: SparkSession, dirs: RunDirs, source: dict,
                   max_files: Optional[int] = None) -> DataFrame:
    """A source element's changelog as a stream, in the processor's frame layout."""
    return changelog_frame(read_changelog(spark, dirs, source, max_files),
                           [c for c, _ in source["columns"]])


def native_frame(element: dict, source: dict, frame: DataFrame) -> DataFrame:
    """What the batch writer of a native aggregation or native stream ``element`` gets from
    ``frame`` (rows of its one source, in the processor's frame layout): the rows with their
    instance, or for a stream its processor output."""
    frame = _with_instance(frame, element, source)
    if element["physical"]["native"] == "stream":
        return native_stream(element, source, frame)
    return frame  # aggregated per batch by runtime/native_agg.py (see batch_writer)


def element_query(spark: SparkSession, plan: dict, element: dict, options: RunOptions,
                  dirs: RunDirs, layout: RunLayout) -> Optional[DataFrame]:
    """The streaming frame of processor output rows (runtime/processor.py) of ``element``, or for
    an element run by runtime/arrow_state.py its processor input (each batch goes through
    :func:`arrow_transform`); None for an input element with no input."""
    by_name = {e["name"]: e for e in plan["elements"]}
    if is_input(element):
        frame = input_frame(spark, plan, element, options, dirs)
        if frame is None:
            return None
        frames = [frame]
    elif ports_of(element):
        frames = [upstream_frame(spark, dirs, by_name[src], options.max_files_per_batch)
                  for _, src in ports_of(element)]
    else:
        return None
    native = element["physical"]["native"]
    if native in ("aggregation", "stream"):
        return native_frame(element, by_name[ports_of(element)[0][1]], frames[0])
    if native == "input":
        return native_input(element, frames[0])
    if element["name"] in layout.arrow_state:
        return processor_input(plan, element, frames, layout.buckets,
                               layout.by_group.get(element["name"], ()), narrow=True)
    proc_in = processor_input(plan, element, frames, layout.buckets)
    # Time-based KEEPs need processing-time timers. The time mode is part of the checkpoint, so it
    # is the same in both kinds of run; an until-idle run registers no timers (it expires rows only
    # as batches arrive) and is stopped when idle (run.py: availableNow never ends in this mode).
    timed = element["physical"]["uses_time"]
    processor = ElementProcessor(json.dumps(plan), element["name"], timed and not options.until_idle,
                                 first_ports(plan, element))
    # the processor ignores the key: the spread key balances buckets
    proc_in = proc_in.withColumn(GROUP, bucket_group(layout.buckets))
    return (proc_in.groupBy(GROUP)
            .transformWithState(processor, output_schema(element), "Append",
                                "ProcessingTime" if timed else "None"))
