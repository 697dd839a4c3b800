"""One query per project: the elements of a run that can (``RunLayout.project``, see
:func:`runtime.run_setup.project_members`) run as the stages of one streaming query's micro-batches.

The query reads the new files of every input element of the project at once (Spark's file source
over each input's directory, the listings unioned and tagged with the input; Spark's checkpoint
logs which files each batch took, so a replayed batch takes the same ones). A batch parses each
input's files (:func:`runtime.inputs.file_input.batch_rows`: the ``ccl_csv`` source's rows and
sequence numbers) and runs every stage in dependency order on the rows its sources produced in
the same batch: an element's output rows are computed once (persisted for its readers and its
writers) and handed to its readers as a frame, never through files. Each stage writes what it
wrote as a query of its own: its changelog (unless nothing reads it: ``RunLayout.unrecorded``),
counters and bad records, named by the batch id, and its state under the batch id
(runtime/arrow_state.py, runtime/native_agg.py), so that a batch Spark runs again after a crash
rewrites the same files from the same state.

A batch costs what its elements do plus one listing, instead of one query (trigger, listing,
offsets and commit log, planning) per element; an element's changes reach its readers in the
batch that caused them rather than one trigger later.
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional, Union

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import arrow_frames
from .arrow_state import prune
from .batch_writers import (aggregation_writer, arrow_transform, batch_writer, element_writer,
                            hands_over_unread, local_arrow_transform, table_writer)
from .bucket_pool import cores
from .frames import changelog_frame, changelog_schema, frame_layout
from .native_stages import native_frame, native_input
from .processor import KIND
from .run_dir import RunDirs
from .run_setup import (CLUSTER_COLLECT_BYTES, LOCAL_COLLECT_BYTES, RunError, RunLayout, RunOptions,
                        input_files)
from .topology import is_input, ports_of, processor_input

INPUT = "__input"  # the listing's column: the position of the input among the query's stages
COLLECT_ROWS = 5_000  # see _collected


def query_dir(dirs: RunDirs) -> str:
    """The Spark checkpoint of the project's query (beside ``queries/ELEMENT`` of the others)."""
    return os.path.join(dirs.root, "project_query")


def project_listing(spark: SparkSession, plan: dict, options: RunOptions,
                    layout: RunLayout) -> Optional[DataFrame]:
    """The stream of new input files of the project's query: ``path`` and :data:`INPUT` (the
    input's position in ``layout.project``); None when no input of the query has files bound."""
    from .inputs.file_input import file_stream

    by_name = {e["name"]: e for e in plan["elements"]}
    listings = []
    for i, name in enumerate(layout.project):
        element = by_name[name]
        if not is_input(element):
            continue
        files = input_files(element, plan, options)[0]
        if files is None:
            continue
        try:
            listing = file_stream(spark, files)
        except OSError as exc:  # the directory is missing and cannot be made
            raise RunError(f"input of '{name}': {exc}") from None
        listings.append(listing.withColumn(INPUT, F.lit(i)))
    if not listings:
        return None
    union = listings[0]
    for listing in listings[1:]:
        union = union.unionByName(listing)
    return union


class BatchGuard:
    """Between the batches of the project's query and whoever stops it: a batch runs holding the
    lock, and once :meth:`stop` has taken it no batch runs (one Spark starts meanwhile does
    nothing and runs again, whole, when the checkpoint is resumed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False

    @contextlib.contextmanager
    def batch(self) -> Iterator[bool]:
        """Held while a batch runs; gives whether it may run."""
        with self._lock:
            yield not self._stopped

    def stop(self, query: Any, bound: float) -> None:
        """Stop ``query`` between two batches (waiting at most ``bound`` seconds for the one
        running)."""
        held = self._lock.acquire(timeout=bound)
        self._stopped = True
        try:
            query.stop()
        finally:
            if held:
                self._lock.release()


def project_batch(plan: dict, options: RunOptions, dirs: RunDirs, layout: RunLayout,
                  guard: Optional[BatchGuard] = None) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of the project's query: one batch of the listing of
    :func:`project_listing` through every stage, in dependency order, under ``guard``."""
    from .inputs.file_input import batch_rows, input_format, rows_here

    by_name = {e["name"]: e for e in plan["elements"]}
    stages = [by_name[name] for name in layout.project]
    own = replace(layout, fused={})  # the stages run here, not inside their sources' batches
    formats = {}
    for e in stages:
        if is_input(e):
            files, props = input_files(e, plan, options)
            if files is not None:
                try:
                    formats[e["name"]] = (files, input_format(e, {k: str(v) for k, v in props.items()}))
                except ValueError as exc:  # a delimiter or date format the reader cannot use
                    raise RunError(f"input of '{e['name']}': {exc}") from None
    specs = {i: formats[e["name"]][0] for i, e in enumerate(stages) if e["name"] in formats}
    readers = {name: [e for e in stages if any(src == name for _, src in ports_of(e))]
               for name in layout.project}
    # An input with one reader that takes its one port from it, and that nothing else here reads,
    # hands a large batch over unread as in a query of its own (runtime.batch_writers.hands_over_unread).
    through = {}
    for e in stages:
        ours = readers[e["name"]]
        if (len(ours) == 1 and len(ports_of(ours[0])) == 1 and not readers[ours[0]["name"]]
                and hands_over_unread(e, ours[0], layout)):
            fused = replace(layout, fused={e["name"]: [ours[0]["name"]]}, project=())
            through[e["name"]] = (ours[0]["name"], batch_writer(e, dirs, plan, fused))
    writers = {e["name"]: (aggregation_writer(e, dirs, plan) if e["physical"]["native"] == "aggregation"
                           else element_writer(e, dirs, plan, own)) for e in stages}
    tables = {e["name"]: table_writer(e, dirs, plan, own) for e in stages}
    transforms = {name: arrow_transform(plan, by_name[name], dirs, layout.buckets)
                  for name in layout.project if name in layout.arrow_state}
    workers = options.driver_workers or cores()
    here = {name: local_arrow_transform(plan, by_name[name], dirs, workers, options.parallel_rows)
            for name in transforms}

    def run(listing: DataFrame, batch_id: int) -> None:
        if guard is None:
            return batch(listing, batch_id)
        with guard.batch() as runs:
            if runs:
                batch(listing, batch_id)

    def batch(listing: DataFrame, batch_id: int) -> None:
        spark = listing.sparkSession
        paths: dict[int, list[str]] = {}
        for r in listing.select(INPUT, "path").collect():
            paths.setdefault(r[0], []).append(r[1])
        # a small batch's rows are Arrow tables here, each stage's written here (no Spark job per
        # file); a large one stays distributed, each stage's rows persisted for its writers
        limit = options.collect_bytes
        if limit is None:
            local = spark.sparkContext.master.startswith("local")
            limit = LOCAL_COLLECT_BYTES if local else CLUSTER_COLLECT_BYTES
        small = _bytes(paths, specs) <= limit
        handed = set() if small else {reader for reader, _ in through.values()}
        outputs: dict[str, Any] = {}  # a stage's rows of this batch: a frame, an Arrow table when small, None: none
        held: list[DataFrame] = []
        try:
            for i, e in enumerate(stages):
                name = e["name"]
                if name in handed:
                    continue
                if is_input(e):
                    if name not in formats or not paths.get(i):
                        outputs[name] = None
                        continue
                    files, fmt = formats[name]
                    manifest = dirs.of("sources", name)
                    if small:
                        frames = [arrow_frames.input_frame(rows_here(e, files, fmt, manifest, paths[i]))]
                    else:
                        frames = [frame_layout(batch_rows(spark, e, files, fmt, manifest, paths[i]))]
                    if name in through and not small:
                        through[name][1](native_input(e, frames[0]), batch_id)
                        outputs[name] = None
                        continue
                else:
                    frames = [outputs.get(src) for _, src in ports_of(e)]
                    if all(f is None for f in frames):
                        outputs[name] = None
                        continue
                if small:
                    out = _stage_table(spark, plan, e, frames, batch_id, dirs, layout,
                                       writers[name], here.get(name))
                else:
                    out = _stage_rows(plan, e, frames, batch_id, dirs, layout, writers[name],
                                      transforms.get(name), False)
                outputs[name] = _written(e, out, batch_id, writers[name], tables[name], small,
                                         held)
        finally:
            for df in held:
                df.unpersist()
        for name in transforms:
            prune(dirs.of("state", name), batch_id)
    return run


def _bytes(paths: dict[int, list[str]], files: dict[int, Any]) -> int:
    """The bytes of the new files of a batch (``paths`` by input position) that their inputs
    read (``files``: each input's ``FileSpec``)."""
    from .inputs.file_input import read_paths

    total = 0
    for i, batch in paths.items():
        for path in read_paths(files[i], batch):
            try:
                total += os.path.getsize(path)
            except OSError:  # gone: the parser reports it
                pass
    return total


def _stage_rows(plan: dict, element: dict, frames: list[Optional[DataFrame]], batch_id: int,
                dirs: RunDirs, layout: RunLayout, write: Callable, transform: Optional[Callable],
                here: bool, rows: int = 0) -> Union[DataFrame, Any, None]:
    """``element``'s processor output rows of this batch from its ports' rows (``frames``, in the
    processor's frame layout; None for a port without rows): a frame, or with ``here`` an Arrow
    table (``transform`` is then :func:`runtime.batch_writers.local_arrow_transform`, which runs it on the
    driver); for a native aggregation (which writes its batch itself, here) its changelog rows as
    written, None when no group changed."""
    native = element["physical"]["native"]
    if native in ("aggregation", "stream"):  # one source
        source = next(e for e in plan["elements"] if e["name"] == ports_of(element)[0][1])
    if native == "aggregation":
        write(native_frame(element, source, frames[0]), batch_id)
        path = dirs.batch_file("changelog", element["name"], batch_id, "parquet")
        if not os.path.exists(path):
            return None
        if here:  # read here: a Spark read is a job
            import pyarrow.parquet as pq
            from pyspark.sql.pandas.types import to_arrow_schema
            schema = to_arrow_schema(changelog_schema(element), timezone="UTC")
            return pq.read_table(path).select(schema.names).cast(schema)
        return frames[0].sparkSession.read.schema(changelog_schema(element)).parquet(path)
    if native == "input":
        return native_input(element, frames[0])
    if native == "stream":
        return native_frame(element, source, frames[0])
    assert transform is not None, f"{element['name']} has no way to run"
    proc_in = processor_input(plan, element, frames, layout.buckets,
                              layout.by_group.get(element["name"], ()), narrow=True)
    if here:
        return transform(_collected(proc_in, rows), batch_id)
    return transform(proc_in, batch_id)


def _stage_table(spark: SparkSession, plan: dict, element: dict, frames: list[Optional[Any]],
                 batch_id: int, dirs: RunDirs, layout: RunLayout, write: Callable,
                 transform: Optional[Callable]) -> Optional[Any]:
    """:func:`_stage_rows` of a small batch, whose frames are Arrow tables, as an Arrow table:
    built here by runtime/arrow_frames.py where it can, else by Spark's expressions over the
    tables."""
    native = element["physical"]["native"]
    out = None
    if native == "input":
        out = arrow_frames.native_input(element, frames[0])
    elif native == "stream":
        source = next(e for e in plan["elements"] if e["name"] == ports_of(element)[0][1])
        out = arrow_frames.native_stream(element, source, frames[0])
    elif transform is not None:
        proc_in = arrow_frames.processor_input(plan, element, frames, layout.buckets,
                                               layout.by_group.get(element["name"], ()))
        out = transform(proc_in, batch_id) if proc_in is not None else None
    if out is not None:
        return out
    spark_frames = [None if t is None else spark.createDataFrame(t) for t in frames]
    rows = sum(t.num_rows for t in frames if t is not None)
    out = _stage_rows(plan, element, spark_frames, batch_id, dirs, layout, write, transform, True,
                      rows)
    return _collected(out, rows) if isinstance(out, DataFrame) else out


def _written(element: dict, out: Union[DataFrame, Any, None], batch_id: int, write: Callable,
             write_table: Callable, small: bool, held: list[DataFrame]) -> Union[DataFrame, Any, None]:
    """Write ``element``'s batch (``out``: its processor output rows) and return its changelog
    rows for its readers, in the processor's frame layout (None: none). A small batch's rows (an
    Arrow table) are written by ``write_table`` and handed on as an Arrow table; a large one's
    are persisted (into ``held``, which the caller unpersists) and written by ``write``."""
    cols = [c for c, _ in element["columns"]]
    if out is None:
        return None
    if element["physical"]["native"] == "aggregation":  # written already: ``out`` is its changelog
        return arrow_frames.changelog_frame(out, cols) if small else changelog_frame(out, cols)
    if small:
        rows = write_table(out, batch_id)
        return arrow_frames.changelog_frame(rows, cols) if rows is not None else None
    df, produced = write(out, batch_id)
    held.append(df)
    return changelog_frame(df.where(F.col(KIND) == "row"), cols) if produced else None


def _collected(df: DataFrame, rows: int) -> Any:
    """The rows of ``df`` (a small batch's, computed from about ``rows`` rows) as an Arrow table.
    Up to :data:`COLLECT_ROWS` by ``collect``: Spark computes a plan of projections over local
    relations on the driver, without a job; beyond, by ``toArrow``, a job, but the rows cross a
    column at a time, not as Python objects one by one (200,000 rows: 0.6 s instead of 3 s)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema, timezone="UTC")
    if rows > COLLECT_ROWS:
        return df.toArrow().cast(schema)
    return pa.Table.from_pylist([r.asDict(recursive=True) for r in df.collect()], schema=schema)
