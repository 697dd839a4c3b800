"""``ccl run``: start the project's query and the queries of the elements outside it, run until idle
or until stopped, write the outputs."""
from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Optional, TextIO

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from ccl.plan.model import Element, Plan

from .adapters.config import AdapterError
from .adapters.service import Adapters, check_adapters
from .batch_writers import arrow_transform, batch_writer
from .frames import input_files_stream
from .job import element_query
from .outputs import element_stats, output_adapters, write_outputs
from .project_query import (BatchGuard, Deadlines, Ticker, project_batch, project_listing, query_dir,
                            ticks_dir, timed_stages)
from .run_dir import BATCHES, PROJECT_QUERY, RunDirs
from .rebucket import finish_rebucket, rebucket_run, why_not_rebucketed
from .rescale import finish_rescale
from .state.store import release_held
from .run_setup import (RunError, RunLayout, RunOptions, atomic_json, auto_buckets, layout_of,
                        prepare_run_dir)


# per query id, the guard of its batches (runtime.project_query.BatchGuard), until it has stopped
_GUARDS: dict[str, BatchGuard] = {}
IDLE_POLL = "100 milliseconds"  # trigger of until-idle queries that cannot use availableNow
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


STATUS_EVERY = 30.0  # seconds between status lines when stderr is a file (a driver log)


def status_writer(err: TextIO) -> Callable[[str], None]:
    """The live status line: rewritten in place on a terminal; in a log file one line every
    :data:`STATUS_EVERY` seconds."""
    if getattr(err, "isatty", lambda: False)():
        return lambda line: err.write("\r" + line + "   ") and err.flush()
    last = [0.0]

    def write(line: str) -> None:
        now = time.monotonic()
        if now - last[0] >= STATUS_EVERY:
            last[0] = now
            err.write(time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")
            err.flush()
    return write


@dataclass
class RunResult:
    """What a finished run left: its report (the ``_run.json`` data) and where."""

    report: dict
    run_dir: str
    out_dir: str

    def summary(self) -> str:
        """Per element rows in, out and bad, then where the outputs are (what the CLI prints)."""
        lines = []
        for name, stats in self.report["elements"].items():
            bad = sum(stats["bad_records"].values())
            lines.append(f"{name}: {stats['rows_in']} in, {stats['rows_out']} out"
                         + (f", {bad} bad" if bad else ""))
        lines.append(f"outputs in {self.out_dir} ({self.report['wall_seconds']:.1f} s)")
        return "\n".join(lines) + "\n"


def _start(spark: SparkSession, plan: Plan, element: Element,
           options: RunOptions, dirs: RunDirs, layout: RunLayout) -> Optional[StreamingQuery]:
    """The query of ``element``; None when it has none (no input bound, or it runs inside its
    source's batches: ``layout.fused``, the plan's ``fused_consumers``). RunError when Spark
    refuses to start it (e.g. an input directory it cannot list)."""
    try:
        return _start_query(spark, plan, element, options, dirs, layout)
    except (PySparkException, Py4JJavaError) as exc:
        raise RunError(f"element '{element.name}' could not start: {_first_line(exc)}") from None


def _start_query(spark: SparkSession, plan: Plan, element: Element,
                 options: RunOptions, dirs: RunDirs, layout: RunLayout) -> Optional[StreamingQuery]:
    if (element.name in layout.project
            or any(element.name in consumers for consumers in layout.fused.values())):
        return None
    write = batch_writer(element, dirs, plan, layout)
    if element.name in layout.file_source:
        files = input_files_stream(spark, plan, element, options, dirs)
        if files is None:
            return None
        frame, rows = files
        write = (lambda df, batch_id, write=write: write(rows(df), batch_id))
    else:
        frame = element_query(spark, plan, element, options, dirs, layout)
        if frame is None:
            return None
        if element.name in layout.arrow_state:
            transform = arrow_transform(plan, element, dirs, layout.buckets)
            write = (lambda df, batch_id, write=write: write(transform(df, batch_id), batch_id))
    name = f"ccl:{element.name}"
    guard = BatchGuard()
    return _started(spark, frame, timed_batches(guard.guarded(write), dirs, name),
                    dirs.of("queries", element.name), name, options, _uses_time(element), guard)


def _uses_time(element: Element) -> bool:
    """Whether the element has timers (the plan's ``uses_time``)."""
    return element.physical is not None and element.physical.uses_time


def _start_project(spark: SparkSession, plan: Plan, options: RunOptions,
                   dirs: RunDirs, layout: RunLayout) -> Optional[StreamingQuery]:
    """The project's one query (runtime/project_query.py); None when it has no stage or no input
    file bound."""
    if not layout.project:
        return None
    try:
        listing = project_listing(spark, plan, options, layout, dirs)
        if listing is None:
            return None
        # timers are served by tick files while the run goes on; an until-idle run has none (its
        # timed stages expire what is due as batches arrive, and it ends once the files are read)
        timed = timed_stages(plan, layout)
        ticker = Ticker(ticks_dir(dirs)) if timed and not options.until_idle else None
        guard = BatchGuard(ticker)
        write = timed_batches(project_batch(plan, options, dirs, layout, guard), dirs,
                              PROJECT_QUERY)
        query = _started(spark, listing, write, query_dir(dirs), PROJECT_QUERY, options, False,
                         guard, options.poll_interval)
        if ticker is not None:  # the timers the saved states hold
            ticker.start().arm(Deadlines(plan, dirs, timed).earliest(sys.maxsize))
        return query
    except (PySparkException, Py4JJavaError) as exc:
        raise RunError(f"the project's query could not start: {_first_line(exc)}") from None


def _started(spark: SparkSession, frame: DataFrame, write: Callable[[DataFrame, int], None],
             checkpoint: str, name: str, options: RunOptions, timed: bool, guard: BatchGuard,
             interval: Optional[str] = None) -> StreamingQuery:
    """The query writing ``frame`` through ``write`` (whose batches run under ``guard``, kept in
    :data:`_GUARDS` for its stop), started with the trigger of the run (``interval``, else the
    run's trigger interval, when it runs until stopped)."""
    query = _start_writer(spark, frame, write, checkpoint, name, options, timed, interval)
    _GUARDS[str(query.id)] = guard
    return query


def _start_writer(spark: SparkSession, frame: DataFrame, write: Callable[[DataFrame, int], None],
                  checkpoint: str, name: str, options: RunOptions, timed: bool,
                  interval: Optional[str]) -> StreamingQuery:
    writer = (frame.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
              .queryName(name))
    if options.until_idle and not timed:
        writer = writer.trigger(availableNow=True)
    elif options.until_idle:
        # No batches without data: an until-idle run registers no timers, and a stop between
        # batches is clean (the query copies the session's configuration when it starts).
        writer = writer.trigger(processingTime=IDLE_POLL)
        previous = spark.conf.get(NO_DATA_BATCHES, "true")
        spark.conf.set(NO_DATA_BATCHES, "false")
        try:
            return writer.start()
        finally:
            spark.conf.set(NO_DATA_BATCHES, previous)
    else:
        writer = writer.trigger(processingTime=interval or options.trigger_interval)
    return writer.start()


def timed_batches(write: Callable[[DataFrame, int], None], dirs: RunDirs,
                  query: str) -> Callable[[DataFrame, int], None]:
    """``write`` that also records when each batch of ``query`` ran, once it has written all its
    files: ``RUN_DIR/batches/QUERY/batch-N.json`` with ``start`` (epoch seconds) and ``seconds``
    (the batch function's wall time), which the run report draws as latency and throughput, and
    runtime/outputs.py takes as the batch being complete. Nothing for a batch ``write`` raised
    on (one its guard refused, say)."""
    def write_timed(df: DataFrame, batch_id: int) -> None:
        start, began = time.time(), time.monotonic()
        write(df, batch_id)
        atomic_json(dirs.batch_file(BATCHES, query, batch_id, "json"),
                    {"start": round(start, 3), "seconds": round(time.monotonic() - began, 4)})
    return write_timed


def _checked(call: Callable, *args: object):
    """``call(*args)``, an adapter that cannot be used or started being a RunError."""
    try:
        return call(*args)
    except AdapterError as exc:
        raise RunError(str(exc)) from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _failure(element: Optional[str], exc: StreamingQueryException) -> RunError:
    """The error of a failed query: an element's, or (None) the project's."""
    what = f"element '{element}'" if element else "the project's query"
    return RunError(f"{what} stopped: {_first_line(exc)}")


@contextlib.contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """Within the block SIGINT and SIGTERM set ``stop`` (when called in the main thread, the only
    one that may handle signals); afterwards the previous handlers are back."""
    previous = ({s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
                if threading.current_thread() is threading.main_thread() else {})
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_plan(spark: SparkSession, plan: Plan, options: RunOptions, out_dir: str,
             status: Callable[[str], None] = lambda s: None,
             stop: Optional[threading.Event] = None) -> RunResult:
    """Run ``plan``; with ``options.until_idle`` process what is there and return, otherwise run
    until SIGINT/SIGTERM (printing a live status line), then stop cleanly. A SIGINT/SIGTERM stops
    an until-idle run too, between two batches. Outputs are written in all cases. ``stop``: set
    by the caller's signal handlers while Spark was starting (a stop asked for then is carried
    out as soon as the queries are up)."""
    began = time.monotonic()
    release_held()  # (kept by an earlier run in this process: the state may move now)
    output_adapters(plan, options.base_dir)  # refused now rather than when the run ends
    _checked(check_adapters, plan, options.base_dir)
    if options.run_dir is None:  # the socket adapters' inboxes are in the run directory
        options = replace(options, run_dir=tempfile.mkdtemp(prefix="ccl-run-"))
    wanted = options.buckets
    options = replace(options, buckets=wanted or auto_buckets(spark.sparkContext.defaultParallelism))
    finish_rescale(options.run_dir)  # one a crash cut short, before the plan is compared
    dirs = prepare_run_dir(plan, options)
    finish_rebucket(dirs)  # one a crash cut short
    layout = layout_of(dirs.root)
    # another count asked for is moved to; auto grows to the cores, where the state can move
    if layout.buckets != options.buckets:
        if wanted is not None or (options.buckets > layout.buckets
                                  and why_not_rebucketed(plan, layout) is None):
            rebucket_run(dirs, plan, layout, options.buckets)
            layout = layout_of(dirs.root)
    stop = stop or threading.Event()
    adapters = _checked(Adapters(plan, dirs.root, options.base_dir, options.inputs).start,
                        not options.until_idle)
    # (again: SparkContext replaced the caller's SIGINT handler by its own, which raises
    # KeyboardInterrupt)
    try:
        with stopped_by_signals(stop):
            if options.until_idle:
                _run_until_idle(spark, plan, options, dirs, layout, stop)
            else:
                _run_until_stopped(spark, plan, options, dirs, layout, status, stop)
    finally:
        release_held()  # the buckets' stores the driver's small batches kept open
        adapters.stop()  # outputs get the last batches; inputs' last records wait in the inboxes
    report = write_outputs(spark, plan, dirs, layout, out_dir, options.base_dir,
                           time.monotonic() - began)
    return RunResult(report, dirs.root, out_dir)


def _run_until_idle(spark: SparkSession, plan: Plan, options: RunOptions,
                    dirs: RunDirs, layout: RunLayout, stop: threading.Event) -> None:
    """The project's query, then each other element's query in turn, until it has processed
    everything; on ``stop`` the query running stops between two batches and the rest do not start
    (a checkpoint resumes them)."""
    starts: list[tuple[Optional[Element], Callable[[], Optional[StreamingQuery]]]] = [
        (None, lambda: _start_project(spark, plan, options, dirs, layout))]
    starts += [(e, lambda e=e: _start(spark, plan, e, options, dirs, layout)) for e in plan.elements]
    for element, start in starts:
        if stop.is_set():
            break
        query = start()
        if query is None:
            continue
        try:
            if element is not None and _uses_time(element):
                _stop_when_idle(query, stop)
            while not query.awaitTermination(0.5):
                if stop.is_set():
                    _stop_between_batches(query)
        except StreamingQueryException as exc:
            if not _refused(query):
                raise _failure(element.name if element else None, exc) from None
        finally:
            _GUARDS.pop(str(query.id), None)


def _stop_when_idle(query: StreamingQuery, stop: Optional[threading.Event] = None) -> None:
    """Stop ``query`` once it has processed everything available (its upstream queries have
    already ended): when ``processAllAvailable`` returns or, should batches without data run
    anyway, after two finished batches that read no rows with no data waiting; or once ``stop``
    is set."""
    drained = threading.Thread(target=_quietly, args=(query.processAllAvailable,), daemon=True)
    drained.start()
    quiet, last_batch = 0, None
    while query.isActive and drained.is_alive() and quiet < 2 and not (stop and stop.is_set()):
        time.sleep(0.1)
        progress = query.lastProgress
        if query.exception() is not None or progress is None or progress["batchId"] == last_batch:
            continue
        last_batch = progress["batchId"]
        idle = progress["numInputRows"] == 0 and not query.status["isDataAvailable"]
        quiet = quiet + 1 if idle else 0
    _stop_between_batches(query)


def _stop_between_batches(query: StreamingQuery, bound: float = 10.0) -> None:
    """Stop ``query`` while no batch is running (waiting at most ``bound`` seconds): a stop that
    interrupts a batch (a RocksDB commit, say) can kill Spark's stream thread with a
    StackOverflowError printed on stderr, although nothing is lost; and a batch cut short leaves
    some of its files written and others not (the batch runs again, whole, when the checkpoint
    is resumed). Its guard (:data:`_GUARDS`) knows when a batch runs and refuses those Spark
    starts once the stop has begun, so that none can start between a look and the stop (they
    end the query with an error that :func:`_refused` tells from a failure)."""
    _GUARDS[str(query.id)].stop(query, bound)


def _refused(query: StreamingQuery) -> bool:
    """Whether ``query`` ended because its guard refused a batch at a stop asked for: a clean
    stop, not a failure (Spark ends a query at its first error: no batch ran after that one)."""
    guard = _GUARDS.get(str(query.id))
    return guard is not None and guard.refused


def _run_until_stopped(spark: SparkSession, plan: Plan, options: RunOptions,
                       dirs: RunDirs, layout: RunLayout,
                       status: Callable[[str], None], stop: threading.Event) -> None:
    queries: dict[str, StreamingQuery] = {}
    try:
        project = _start_project(spark, plan, options, dirs, layout)
        if project is not None:
            queries[PROJECT_QUERY] = project
        for element in plan.elements:
            if stop.is_set():  # asked to stop while starting: stop what started
                break
            q = _start(spark, plan, element, options, dirs, layout)
            if q is not None:
                queries[element.name] = q
        began, before = time.monotonic(), _progress(plan, dirs)[0]  # rows of earlier runs
        while not stop.wait(2.0):
            for name, q in queries.items():
                if q.exception() is not None:
                    raise _failure(None if name == PROJECT_QUERY else name, q.exception())
            rows, bad, batches = _progress(plan, dirs)
            elapsed = max(time.monotonic() - began, 1e-9)
            status(f"batches {batches}  rows {rows}  ({(rows - before) / elapsed:,.0f} rows/s)  "
                   f"bad records {bad}")
    finally:
        _drain_and_stop(plan, queries)
        sys.stdout.flush()


def _drain_and_stop(plan: Plan, queries: dict[str, StreamingQuery], bound: float = 30.0) -> None:
    """Stop the queries in dependency order: an input query once its batch in flight is done, a
    derived one once it has processed what its (already stopped) sources wrote, each wait bounded.
    A batch cut short is not lost (it runs again from the checkpoint) but stopping between batches
    gives complete outputs. The project's query reads the inputs: it stops first, as an input's."""
    project = queries.get(PROJECT_QUERY)
    if project is not None:
        try:
            _stop_between_batches(project, bound)
        except Exception:  # stopping is best effort; the checkpoint stays usable
            pass
    for element in plan.elements:
        q = queries.get(element.name)
        if q is None:
            continue
        try:
            if element.is_input:
                _stop_between_batches(q, bound)
            elif _uses_time(element):  # timers keep batches coming: stop once they bring no rows
                _stop_when_idle(q)
            else:
                waiter = threading.Thread(target=_quietly, args=(q.processAllAvailable,),
                                          daemon=True)
                waiter.start()
                waiter.join(bound)
                _stop_between_batches(q, bound)
        except Exception:  # stopping is best effort; the checkpoint stays usable
            pass
    for q in queries.values():
        _GUARDS.pop(str(q.id), None)


def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception:  # a failed query is reported by the caller's loop, not here
        pass


def _progress(plan: Plan, dirs: RunDirs) -> tuple[int, int, int]:
    rows = bad = batches = 0
    for e in plan.elements:
        s = element_stats(dirs, e)
        if e.is_input:
            rows += s["rows_in"]
        bad += sum(s["bad_records"].values())
        batches += s["batches"]
    return rows, bad, batches
