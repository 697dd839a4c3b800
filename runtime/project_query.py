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

Elements with timers (time-based KEEP, AGES, Flex EVERY) are stages too. Every batch has one
time, ``now``, kept in ``RUN/clock/project/batch-N.json`` by its first run, so that a batch Spark runs
again sees the time the first run saw. After a batch the driver knows each timed stage's next
deadline (over its buckets' saved states); a :class:`Ticker` thread writes a *tick file* into
``RUN/ticks/`` when the earliest one comes, a listing of the query like an input's, so that an
idle project runs a batch only when a file arrives or a timer is due. In a batch, each bucket of a
timed stage whose deadline has come gets a marker row (:data:`runtime.arrow_state.MARK`), so its
instances expire even when the batch brings it no rows.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional, Union

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ccl.plan.model import Element, Physical, Plan

from . import arrow_frames
from .arrow_state import BUCKET, MARK, load_states, newest_batches, prune, saved_deadline
from .batch_writers import (aggregation_writer, arrow_transform, batch_writer, element_writer,
                            hands_over_unread, table_writer)
from .bucket_pool import MIN_ROW_BYTES, cores, run_buckets, warm
from .frames import changelog_frame, changelog_schema, frame_layout
from .json_plan import engine_plan_text
from .native_stages import native_frame, native_input
from .processor import INST, KIND, BucketRun
from .quiet import REFUSED
from .run_dir import RunDirs
from .run_setup import (CLUSTER_COLLECT_BYTES, LOCAL_COLLECT_BYTES, RunError, RunLayout, RunOptions,
                        atomic_json, element_files)
from .topology import first_ports, is_input, ports_of, processor_input
from .types import columns_of

log = logging.getLogger("ccl.runtime")

INPUT = "__input"  # the listing's column: the position of the input among the query's stages
TICKS = -1  # the listing's INPUT of the tick files (``RUN/ticks``)
COLLECT_ROWS = 5_000  # see _collected
SCAN_ROWS = 5_000  # see _spark_frames


def query_dir(dirs: RunDirs) -> str:
    """The Spark checkpoint of the project's query (beside ``queries/ELEMENT`` of the others)."""
    return os.path.join(dirs.root, "project_query")


def ticks_dir(dirs: RunDirs) -> str:
    """Where :class:`Ticker` writes the tick files of the project's query."""
    return os.path.join(dirs.root, "ticks")


def timed_stages(plan: Plan, layout: RunLayout) -> list[str]:
    """The stages of the project's query with timers (time-based KEEP, AGES, Flex EVERY)."""
    timed = {e.name for e in plan.elements if e.physical is not None and e.physical.uses_time}
    return [name for name in layout.project if name in timed]


def project_listing(spark: SparkSession, plan: Plan, options: RunOptions,
                    layout: RunLayout, dirs: Optional[RunDirs] = None) -> Optional[DataFrame]:
    """The stream of new input files of the project's query: ``path`` and :data:`INPUT` (the
    input's position in ``layout.project``); None when no input of the query has files bound.
    When a stage has timers, the tick files of ``dirs`` are listed too (:data:`TICKS`): always,
    whether this run writes any or not, since the checkpoint fixes the query's sources."""
    from .inputs.file_input import file_stream
    from .inputs.listing import FileSpec

    listings = []
    for i, name in enumerate(layout.project):
        element = plan.element(name)
        if not element.is_input:
            continue
        files = element_files(element, plan, options)[0]
        if files is None:
            continue
        try:
            listing = file_stream(spark, files)
        except OSError as exc:  # the directory is missing and cannot be made
            raise RunError(f"input of '{name}': {exc}") from None
        listings.append(listing.withColumn(INPUT, F.lit(i)))
    if not listings:
        return None
    if dirs is not None and timed_stages(plan, layout):
        ticks = file_stream(spark, FileSpec(ticks_dir(dirs), None, "*"))
        listings.append(ticks.withColumn(INPUT, F.lit(TICKS)))
    union = listings[0]
    for listing in listings[1:]:
        union = union.unionByName(listing)
    return union


class BatchRefused(Exception):
    """What a batch that starts once its query's stop has begun raises (:class:`BatchGuard`):
    Spark then ends the query without writing the batch to its commit log, so the batch runs
    again, whole, when the checkpoint is resumed. Had the batch returned, Spark would have
    committed it with nothing written: its rows lost."""


class BatchGuard:
    """Between the batches of a query (the project's, or an element's) and whoever stops it. A
    batch runs inside :meth:`batch`; :meth:`stop` refuses every batch from then on, waits for
    the one running, and only then stops the query, holding no lock meanwhile: a batch Spark
    starts while ``query.stop()`` waits for its stream thread raises :class:`BatchRefused` at
    once (it neither waits for the stop, which would wait for it, nor returns, which would
    commit it). :attr:`refused` then tells the stopper that the query's error is its own stop's
    doing."""

    def __init__(self, ticker: Optional["Ticker"] = None) -> None:
        self._cond = threading.Condition()
        self._running = False
        self._stopped = False
        self.refused = False  # a batch was refused: the query ended with BatchRefused
        self.ticker = ticker  # stopped with the query

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Around a batch; raises :class:`BatchRefused` once the stop has begun."""
        with self._cond:
            if self._stopped:
                self.refused = True
                raise BatchRefused(REFUSED)
            self._running = True
        try:
            yield
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()

    def guarded(self, write: Callable[[Any, int], Any]) -> Callable[[Any, int], None]:
        """``write`` (a foreachBatch function) run as a batch of this guard."""
        def run(df: Any, batch_id: int) -> None:
            with self.batch():
                write(df, batch_id)
        return run

    def stop(self, query: Any, bound: float) -> None:
        """Stop ``query`` between two batches (waiting at most ``bound`` seconds for the one
        running). A batch still running then is cut short: its Python side goes on writing
        after ``query.stop()`` returns, so this waits for it (``bound`` seconds more) before the
        caller reads the run directory, and says in one line when it could not."""
        idle = self._refuse(bound)
        if self.ticker is not None:
            self.ticker.stop()
        query.stop()
        if not idle and not self._idle(bound):
            log.warning("the batch in flight of query %s did not end within %.0f s of the stop; "
                        "the outputs hold the batches before it", query.name, 2 * bound)

    def _refuse(self, bound: float) -> bool:
        """Refuse every batch from now on; whether the one running (if any) ended within
        ``bound`` seconds."""
        with self._cond:
            self._stopped = True
        return self._idle(bound)

    def _idle(self, bound: float) -> bool:
        """Whether no batch runs, waiting at most ``bound`` seconds for the one running."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, bound)


class Ticker:
    """The thread that wakes an idle project's query when a timer is due: armed with the earliest
    deadline of the timed stages (epoch ms, after every batch), it writes a tick file holding
    that time into ``directory`` once the time has come (under a hidden name, then renamed:
    Spark's file source lists no hidden file)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._cond = threading.Condition()
        self._deadline: Optional[int] = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="ccl-ticker", daemon=True)

    def start(self) -> "Ticker":
        """Start the thread (returns self)."""
        os.makedirs(self.directory, exist_ok=True)
        self._thread.start()
        return self

    def arm(self, deadline: Optional[int]) -> None:
        """The next deadline (None: no timer pending); replaces the one before."""
        with self._cond:
            self._deadline = deadline
            self._cond.notify()

    def stop(self) -> None:
        """Stop the thread (no tick is written after this returns)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                wait = self._deadline / 1000.0 - time.time()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                self._tick(self._deadline)
                self._deadline = None

    def _tick(self, at: int) -> None:
        hidden = os.path.join(self.directory, f".{uuid.uuid4().hex}.tmp")
        try:
            with open(hidden, "w", encoding="utf-8") as f:
                json.dump({"time": at}, f)
            os.replace(hidden, os.path.join(self.directory, f"tick-{at:015d}-{uuid.uuid4().hex[:8]}.json"))
        except OSError:  # the run directory is going away: the query is stopping
            pass


def batch_clock(dirs: RunDirs, batch_id: int) -> int:
    """The time (epoch ms) of batch ``batch_id`` of the project's query: what its first run wrote
    in ``RUN/clock/project/batch-N.json``, else now (never before the batch before's), written there."""
    path = dirs.batch_file("clock", "project", batch_id, "json")
    try:
        with open(path, encoding="utf-8") as f:
            return int(json.load(f)["now"])
    except (FileNotFoundError, ValueError, KeyError):
        pass
    now = int(time.time() * 1000)
    try:
        with open(dirs.batch_file("clock", "project", batch_id - 1, "json"), encoding="utf-8") as f:
            now = max(now, int(json.load(f)["now"]))
    except (FileNotFoundError, ValueError, KeyError):
        pass
    atomic_json(path, {"now": now})
    return now


class Deadlines:
    """The next deadline of each bucket of the timed stages, read from the head of their newest
    state files (remembered per file: a bucket whose file did not change is not read again)."""

    def __init__(self, plan: Plan, dirs: RunDirs, names: list[str]) -> None:
        self.plan_text = engine_plan_text(plan)
        self.dirs = dirs
        self.names = names
        self._runs: dict[str, BucketRun] = {}
        self._known: dict[tuple[str, int], tuple[int, Optional[int]]] = {}

    def of(self, name: str, batch_id: int) -> dict[int, Optional[int]]:
        """Bucket -> the next deadline of stage ``name`` as batch ``batch_id`` starts."""
        state_dir = self.dirs.of("state", name)
        found: dict[int, Optional[int]] = {}
        for bucket, newest in newest_batches(state_dir, batch_id).items():
            known = self._known.get((name, bucket))
            if known is None or known[0] != newest:
                has, deadline = saved_deadline(state_dir, bucket, newest)
                if not has:  # a file without its deadline: read the states
                    run = self._runs.get(name)
                    if run is None:
                        run = self._runs[name] = BucketRun(self.plan_text, name)
                    deadline = run.next_deadline(load_states(state_dir, bucket, batch_id))
                known = self._known[(name, bucket)] = (newest, deadline)
            found[bucket] = known[1]
        return found

    def earliest(self, batch_id: int) -> Optional[int]:
        """The earliest deadline of every timed stage as batch ``batch_id`` starts (None: none)."""
        deadlines = [d for name in self.names for d in self.of(name, batch_id).values() if d is not None]
        return min(deadlines) if deadlines else None


def project_batch(plan: Plan, options: RunOptions, dirs: RunDirs,
                  layout: RunLayout,
                  guard: Optional[BatchGuard] = None) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of the project's query: one batch of the listing of
    :func:`project_listing` through every stage, in dependency order, under ``guard`` (whose
    ticker, if any, is armed after each batch with the earliest deadline of the timed stages;
    a batch it refuses, the query stopping, writes nothing and raises BatchRefused)."""
    from .inputs.file_input import batch_rows, file_numbers, input_format, rows_here
    from .inputs.listing import Arrivals

    stages = [plan.element(name) for name in layout.project]
    own = replace(layout, fused={})  # the stages run here, not inside their sources' batches
    formats = {}
    for e in stages:
        if is_input(e):
            files, props = element_files(e, plan, options)
            if files is not None:
                try:
                    formats[e.name] = (files, input_format(e, {k: str(v) for k, v in props.items()}))
                except ValueError as exc:  # a delimiter or date format the reader cannot use
                    raise RunError(f"input of '{e.name}': {exc}") from None
    specs = {i: formats[e.name][0] for i, e in enumerate(stages) if e.name in formats}
    readers = {name: [e for e in stages if any(src == name for _, src in ports_of(e))]
               for name in layout.project}
    # An input with one reader that takes its one port from it, and that nothing else here reads,
    # hands a large batch over unread as in a query of its own (runtime.batch_writers.hands_over_unread).
    through = {}
    for e in stages:
        ours = readers[e.name]
        if (len(ours) == 1 and len(ports_of(ours[0])) == 1 and not readers[ours[0].name]
                and hands_over_unread(e, ours[0], layout)):
            fused = replace(layout, fused={e.name: [ours[0].name]}, project=())
            through[e.name] = (ours[0].name, batch_writer(e, dirs, plan, fused))
    errors = {e.name for e in stages if e.kind == "error stream"}  # written by their elements
    writers = {e.name: (aggregation_writer(e, dirs, plan) if _physical(e).native == "aggregation"
                        else element_writer(e, dirs, plan, own))
               for e in stages if e.name not in errors}
    behind = WriteBehind()  # a small batch's stage files, written while the next stage runs
    tables = {e.name: table_writer(e, dirs, plan, own, behind.submit)
              for e in stages if e.name not in errors}
    timed = timed_stages(plan, layout)
    deadlines = Deadlines(plan, dirs, timed)
    due: dict[str, list[int]] = {}  # per timed stage, the buckets whose deadline has come
    clock = [0]  # the time of the batch running
    transforms = {name: _transform(plan, plan.element(name), dirs, layout.buckets, clock, due.get)
                  for name in layout.project if name in layout.arrow_state or name in timed}
    workers = options.driver_workers or cores()
    here = {name: _local_transform(plan, plan.element(name), dirs, clock, due.get, workers,
                                   options.parallel_rows)
            for name in transforms}
    seen_ticks: list[str] = []  # the tick files of the batch before (committed: removed)
    arrivals = Arrivals(dirs.arrivals)

    def run(listing: DataFrame, batch_id: int) -> None:
        if guard is None:
            batch(listing, batch_id)
            return
        with guard.batch():
            batch(listing, batch_id)
            if guard.ticker is not None:
                guard.ticker.arm(_next_tick(deadlines.earliest(batch_id + 1), clock[0]))

    def batch(listing: DataFrame, batch_id: int) -> None:
        spark = listing.sparkSession
        paths: dict[int, list[str]] = {}
        # the listing's own columns (path, INPUT: project_listing) collected as they are: a
        # select first cost 13 of a one-row batch's 20 py4j round trips (its columns and list)
        for r in listing.collect():
            paths.setdefault(r[INPUT], []).append(r["path"])
        _remove_ticks(seen_ticks)
        seen_ticks[:] = paths.pop(TICKS, [])  # a tick only wakes the query: the batch's time counts
        clock[0] = now = batch_clock(dirs, batch_id) if timed else int(time.time() * 1000)
        due.clear()
        for name in timed:
            buckets = sorted(b for b, d in deadlines.of(name, batch_id).items()
                             if d is not None and d <= now)
            if buckets:
                due[name] = buckets
        # a small batch's rows are Arrow tables here, each stage's written here (no Spark job per
        # file); a large one stays distributed, each stage's rows persisted for its writers
        limit = options.collect_bytes
        if limit is None:
            local = spark.sparkContext.master.startswith("local")
            limit = LOCAL_COLLECT_BYTES if local else CLUSTER_COLLECT_BYTES
        size = _bytes(paths, specs)
        small = size <= limit
        if small and here and size >= options.parallel_rows * MIN_ROW_BYTES:
            warm(workers)  # the batch may have parallel_rows rows: start the workers now
        numbers = file_numbers(arrivals, [(e.name, formats[e.name][0], paths[i])
                                          for i, e in enumerate(stages)
                                          if e.name in formats and paths.get(i)])
        handed = set() if small else {reader for reader, _ in through.values()}
        outputs: dict[str, Any] = {}  # a stage's rows of this batch: a frame, an Arrow table when small, None: none
        held: list[DataFrame] = []
        try:
            for i, e in enumerate(stages):
                name = e.name
                if name in handed:
                    continue
                if name in errors:
                    behind.wait()  # the bad records it reads
                    outputs[name] = _error_rows(spark, e, dirs, batch_id, small)
                    continue
                if is_input(e):
                    if name not in formats or not paths.get(i):
                        outputs[name] = _expired(spark, e, batch_id, here.get(name), due,
                                                 writers[name], tables[name], small, held)
                        continue
                    files, fmt = formats[name]
                    if small:
                        frames = [arrow_frames.input_frame(rows_here(e, files, fmt, numbers[name]))]
                    else:
                        frames = [frame_layout(batch_rows(spark, e, files, fmt, numbers[name]))]
                    if name in through and not small:
                        through[name][1](native_input(e, frames[0]), batch_id)
                        outputs[name] = None
                        continue
                else:
                    frames = [outputs.get(src) for _, src in ports_of(e)]
                    if all(f is None for f in frames):
                        outputs[name] = _expired(spark, e, batch_id, here.get(name), due,
                                                 writers[name], tables[name], small, held)
                        continue
                if small:
                    out = _stage_table(spark, plan, e, frames, batch_id, dirs, layout,
                                       writers[name], here.get(name))
                else:
                    out = _stage_rows(plan, e, frames, batch_id, dirs, layout, writers[name],
                                      transforms.get(name), False)
                outputs[name] = _written(e, out, batch_id, writers[name], tables[name], small,
                                         held)
            behind.wait()  # every file written before the batch commits
        finally:
            behind.wait(quietly=True)
            for df in held:
                df.unpersist()
        for name in transforms:
            prune(dirs.of("state", name), batch_id)
    return run


class WriteBehind:
    """Writes handed over by a batch's stages (their changelog, bad records and counters), run one
    after another on a thread of their own while the batch goes on: the files of a stage are
    written while the next one runs. :meth:`wait` before anything reads them and before the
    batch ends (Spark commits the batch when its function returns); the thread ends there."""

    def __init__(self) -> None:
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: list[Future] = []

    def submit(self, write: Callable[[], None]) -> None:
        """Run ``write`` after the writes handed over before it."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="ccl-writes")
        self._pending.append(self._pool.submit(write))

    def wait(self, quietly: bool = False) -> None:
        """Wait for every write handed over; raise the first one's error unless ``quietly``."""
        pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        failed = next((e for e in errors if e is not None), None)
        if failed is not None and not quietly:
            raise failed


def _expired(spark: SparkSession, element: Element, batch_id: int, transform: Optional[Callable],
             due: dict[str, list[int]], write: Callable, write_table: Callable, small: bool,
             held: list[DataFrame]) -> Optional[Any]:
    """A stage's batch without rows: nothing, unless it has timers due (``due``), whose buckets
    then expire here on the driver (``transform``: :func:`_local_transform`) and are written. Its
    changelog rows for its readers as :func:`_written` gives them (None: none), as a Spark frame
    in a large batch."""
    if element.name not in due or transform is None:
        return None
    rows = _written(element, transform(None, batch_id), batch_id, write, write_table, True, held)
    return rows if rows is None or small else spark.createDataFrame(rows)


def _error_rows(spark: SparkSession, element: Element, dirs: RunDirs, batch_id: int,
                small: bool) -> Optional[Any]:
    """The rows of error stream ``element`` in batch ``batch_id``, for its readers as
    :func:`_written` gives rows (None: none): the bad records that the stages it is ON wrote
    earlier in the batch, as its changelog files ``batch-N-ELEMENT.parquet``
    (:func:`runtime.bad_records.error_writer`)."""
    import glob

    found = sorted(glob.glob(os.path.join(dirs.of("changelog", element.name),
                                          f"batch-{batch_id:08d}-*.parquet")))
    if not found:
        return None
    cols = [c.name for c in element.columns]
    if not small:
        return changelog_frame(spark.read.parquet(*found), cols)
    import pyarrow as pa
    import pyarrow.parquet as pq

    return arrow_frames.changelog_frame(pa.concat_tables([pq.read_table(f) for f in found]), cols)


def _next_tick(deadline: Optional[int], now: int) -> Optional[int]:
    """When to tick after a batch at ``now`` whose timed stages' earliest deadline is
    ``deadline``: then, unless it is no later than ``now`` (the batch expired what was due then,
    so a deadline it left there is one the engine does not move: a second later, not at once and
    again and again)."""
    if deadline is None or deadline > now:
        return deadline
    return now + 1000


def _remove_ticks(paths: list[str]) -> None:
    """Remove tick files a committed batch took (they only woke the query)."""
    from .inputs.file_input import local_path

    for path in paths:
        try:
            os.remove(local_path(path))
        except OSError:
            pass


def _markers(buckets: list[int], schema: Any) -> Any:
    """One :data:`runtime.arrow_state.MARK` row per bucket of ``buckets``, as an Arrow table of
    ``schema`` (a processor input's), the other columns null."""
    import pyarrow as pa

    columns = []
    for field in schema:
        if field.name == BUCKET:
            columns.append(pa.array(buckets, field.type))
        elif field.name == INST:
            columns.append(pa.array([MARK] * len(buckets), field.type))
        else:
            columns.append(pa.nulls(len(buckets), field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _transform(plan: Plan, element: Element, dirs: RunDirs, buckets: int, clock: list[int],
               due: Callable[[str], Optional[list[int]]]) -> Callable[[DataFrame, int], DataFrame]:
    """:func:`runtime.batch_writers.arrow_transform` of a stage (one with timers too), at the
    batch's time (``clock[0]``); a timed stage's ``due`` buckets get a marker row each."""
    timed = _physical(element).uses_time
    transform = arrow_transform(plan, element, dirs, buckets, lambda: clock[0], timed)

    def rows(proc_in: DataFrame, batch_id: int) -> DataFrame:
        marked = due(element.name) if timed else None
        if marked:
            spark = proc_in.sparkSession
            marks = spark.createDataFrame([(b, MARK) for b in marked], f"{BUCKET} int, {INST} int")
            types = dict(proc_in.dtypes)
            marks = marks.select(*[F.col(c).cast(types[c]).alias(c) for c in (BUCKET, INST)])
            proc_in = proc_in.unionByName(marks, allowMissingColumns=True)
        return transform(proc_in, batch_id)
    return rows


def _local_transform(plan: Plan, element: Element, dirs: RunDirs, clock: list[int],
                     due: Callable[[str], Optional[list[int]]], workers: int = 1,
                     parallel_rows: int = 0) -> Callable[[Any, int], Any]:
    """:func:`_transform` for a small batch, run on the driver's machine: from the batch's
    processor input collected (an Arrow table with ``__bucket``; None: no rows, only the due
    buckets) to its processor output rows (an Arrow table), each bucket through the very function
    applyInArrow runs, with the same state files; in ``workers`` processes from ``parallel_rows``
    rows (runtime/bucket_pool.py)."""
    import pyarrow as pa

    plan_text = engine_plan_text(plan)
    first = first_ports(plan, element)
    state_dir = dirs.of("state", element.name)
    timed = _physical(element).uses_time
    marker_schema = pa.schema([(BUCKET, pa.int32()), (INST, pa.int32())])

    def rows(proc_in: Any, batch_id: int) -> Any:
        marked = due(element.name) if timed else None
        if marked:
            marks = _markers(marked, proc_in.schema if proc_in is not None else marker_schema)
            proc_in = marks if proc_in is None else pa.concat_tables([proc_in, marks])
        if proc_in is None:
            proc_in = marker_schema.empty_table()
        runner = (plan_text, element.name, first, state_dir, batch_id, clock[0], timed)
        return run_buckets(runner, proc_in, element, workers, parallel_rows)
    return rows


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


def _stage_rows(plan: Plan, element: Element, frames: list[Optional[DataFrame]], batch_id: int,
                dirs: RunDirs, layout: RunLayout, write: Callable, transform: Optional[Callable],
                here: bool, rows: int = 0) -> Union[DataFrame, Any, None]:
    """``element``'s processor output rows of this batch from its ports' rows (``frames``, in the
    processor's frame layout; None for a port without rows): a frame, or with ``here`` an Arrow
    table (``transform`` is then :func:`_local_transform`, which runs it on the
    driver); for a native aggregation (which writes its batch itself, here) its changelog rows as
    written, None when no group changed."""
    native = _physical(element).native
    if native in ("aggregation", "stream"):
        source = _one_source(plan, element)
    if native == "aggregation":
        write(native_frame(element, source, frames[0]), batch_id)
        path = dirs.batch_file("changelog", element.name, batch_id, "parquet")
        if not os.path.exists(path):
            return None
        if here:  # read here: a Spark read is a job
            import pyarrow.parquet as pq
            from pyspark.sql.pandas.types import to_arrow_schema
            schema = to_arrow_schema(changelog_schema(columns_of(element)), timezone="UTC")
            return pq.read_table(path).select(schema.names).cast(schema)
        return frames[0].sparkSession.read.schema(changelog_schema(columns_of(element))).parquet(path)
    if native == "input":
        return native_input(element, frames[0])
    if native == "stream":
        return native_frame(element, source, frames[0])
    assert transform is not None, f"{element.name} has no way to run"
    proc_in = processor_input(plan, element, frames, layout.buckets,
                              layout.by_group.get(element.name, ()), narrow=True)
    if here:
        return transform(_collected(proc_in, rows), batch_id)
    return transform(proc_in, batch_id)


def _one_source(plan: Plan, element: Element) -> Element:
    """The source element of ``element``, which reads one (a native stream or aggregation)."""
    return plan.element(ports_of(element)[0][1])


def _physical(element: Element) -> Physical:
    """The plan's physical decisions of ``element`` (every element the runtime runs has them)."""
    assert element.physical is not None, f"{element.name} has no physical decisions"
    return element.physical


def _stage_table(spark: SparkSession, plan: Plan, element: Element, frames: list[Optional[Any]],
                 batch_id: int, dirs: RunDirs, layout: RunLayout, write: Callable,
                 transform: Optional[Callable]) -> Optional[Any]:
    """:func:`_stage_rows` of a small batch, whose frames are Arrow tables, as an Arrow table:
    built here by runtime/arrow_frames.py where it can, else by Spark's expressions over the
    tables."""
    native = _physical(element).native
    out = None
    if native == "input":
        out = arrow_frames.native_input(element, frames[0])
    elif native == "stream":
        out = arrow_frames.native_stream(element, _one_source(plan, element), frames[0])
    elif transform is not None:
        proc_in = arrow_frames.processor_input(plan, element, frames, layout.buckets,
                                               layout.by_group.get(element.name, ()))
        out = transform(proc_in, batch_id) if proc_in is not None else None
    if out is not None:
        return out
    rows = sum(t.num_rows for t in frames if t is not None)
    with _spark_frames(spark, element, frames, dirs, batch_id) as spark_frames:
        out = _stage_rows(plan, element, spark_frames, batch_id, dirs, layout, write, transform,
                          True, rows)
        # collected while the files a frame scans are there
        return _collected(out, rows) if isinstance(out, DataFrame) else out


@contextlib.contextmanager
def _spark_frames(spark: SparkSession, element: Element, frames: list[Optional[Any]],
                  dirs: RunDirs, batch_id: int) -> Iterator[list[Optional[DataFrame]]]:
    """``frames`` (Arrow tables, None for a port without rows) as Spark frames, for a stage that
    runs Spark's expressions over a small batch.

    ``createDataFrame`` makes a local relation: the driver's JVM turns every row into a Spark row,
    then runs the projections over them one row at a time, interpreted (ConvertToLocalRelation),
    on one thread. A table beyond :data:`SCAN_ROWS` rows is written as a Parquet file instead (by
    pyarrow, a column at a time), which Spark's tasks scan: 200,000 rows cost 2-3 s of the driver
    JVM's CPU the other way (docs/runtime.md, the HASH job's drop). The files are removed when the
    stage is done: the caller collects its result inside the ``with``.

    Row order: a stage that hands its rows on (a filter's output is its changelog, in its
    source's order) needs them in the table's order, which Spark does not promise for a file it
    splits between tasks (it orders the splits by size; today a file's equal splits stay in
    place). So its file is one row group: Parquet's reader gives a row group to the one split
    holding its middle and the other splits read nothing, so one task reads every row in order
    (and a union of ports keeps the ports' order). No sort on a sequence column: a second pass,
    and the rows of a broadcast or of several ports share their sequence numbers.
    A native aggregation, whose rows Spark groups, gets row groups of the writer's default size,
    which Spark may read in parallel."""
    import pyarrow.parquet as pq

    ordered = _physical(element).native != "aggregation"
    paths: list[str] = []
    try:
        out: list[Optional[DataFrame]] = []
        for i, t in enumerate(frames):
            if t is None:
                out.append(None)
            elif t.num_rows > SCAN_ROWS and _scannable(t.schema):
                from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
                schema = from_arrow_schema(t.schema)
                path = dirs.batch_file("staged", element.name, batch_id, f"{i}.parquet")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                paths.append(path)
                # the types createDataFrame gives the table (timestamps in UTC)
                pq.write_table(t.cast(to_arrow_schema(schema, timezone="UTC")), path,
                               row_group_size=t.num_rows if ordered else None)
                out.append(spark.read.schema(schema).parquet(path))
            else:
                out.append(spark.createDataFrame(t))
        yield out
    finally:
        for path in paths:
            with contextlib.suppress(OSError):
                os.remove(path)


def _scannable(schema: Any) -> bool:
    """Whether every column of the Arrow ``schema`` reads back from Parquet as Spark's
    ``createDataFrame`` would take it (flat columns of these types)."""
    import pyarrow.types as pt
    return all(pt.is_string(t) or pt.is_large_string(t) or pt.is_signed_integer(t)
               or pt.is_float32(t) or pt.is_float64(t) or pt.is_boolean(t) or pt.is_date32(t)
               or pt.is_decimal(t) or pt.is_binary(t) or (pt.is_timestamp(t) and t.unit == "us")
               for t in (f.type for f in schema))


def _written(element: Element, out: Union[DataFrame, Any, None], batch_id: int, write: Callable,
             write_table: Callable, small: bool, held: list[DataFrame]) -> Union[DataFrame, Any, None]:
    """Write ``element``'s batch (``out``: its processor output rows) and return its changelog
    rows for its readers, in the processor's frame layout (None: none). A small batch's rows (an
    Arrow table) are written by ``write_table`` and handed on as an Arrow table; a large one's
    are persisted (into ``held``, which the caller unpersists) and written by ``write``."""
    cols = [c.name for c in element.columns]
    if out is None:
        return None
    if _physical(element).native == "aggregation":  # written already: ``out`` is its changelog
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
