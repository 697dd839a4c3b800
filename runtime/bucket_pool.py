"""A small batch's buckets run on the driver's machine, side by side in worker processes.

The project's query runs a small batch on the driver (runtime/project_query.py). A per-instance
element's buckets are independent (each its own instances, its own state file), so a batch with
many rows runs them in a pool of Python processes, one per core the run may use: the engine is
Python, and one process uses one core however many the machine has, while the JVM waits for the
batch. A batch with few rows (an event at a time, the latency path) runs its buckets here, in this
process: handing a bucket to a worker costs more than it saves.

The pool is made on first use, or ahead of it by :func:`warm` when a batch's files are large
enough to need it (a worker's start, importing the runtime, costs about a second of CPU, which
then overlaps the batch's stages before the per-instance ones), and kept for the life of the process (each worker keeps the
engines it built, as Spark's Python workers do). Its workers ignore SIGINT, which a terminal
sends to the whole process group: the driver stops the run and ends them. A worker that dies
(killed, out of memory) breaks the pool; the batch then runs its buckets here, and the next batch
makes a new pool.

A bucket run here, in the driver's process, keeps its state store open for its next batch
(``runtime.state.store.BucketStore.held``: opening and closing a bucket's RocksDB cost more than a
small batch's own work); the stores are released before the pool or Spark runs buckets, and at a
run's start and end (``release_held``). The pool's workers open and close them per task, as
Spark's workers do: a bucket does not always go to the same worker.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Optional

from ccl.plan.model import Element

from .arrow_state import BUCKET, bucket_runner
from .processor import output_schema
from .state.store import release_held

# The fewest bytes of an input row (a CSV line of a few short fields): a batch of fewer bytes than
# parallel_rows rows of it cannot need the pool.
MIN_ROW_BYTES = 16

_LOCK = threading.Lock()
_POOL: Optional[ProcessPoolExecutor] = None
_WORKERS = 0


def run_buckets(runner_args: tuple, proc_in: Any, element: Element, workers: int,
                parallel_rows: int) -> Any:
    """The processor output rows (one Arrow table) of a batch held here (``proc_in``: an Arrow
    table of the processor's input layout with ``__bucket``): each bucket's rows through
    :func:`runtime.arrow_state.bucket_runner` of ``runner_args``, in bucket order; in a pool of
    ``workers`` processes when there are two or more buckets, ``workers`` > 1 and at least
    ``parallel_rows`` rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_schema

    parts = []
    if proc_in.num_rows:
        column = proc_in.column(BUCKET)
        parts = [proc_in.filter(pc.equal(column, b)) for b in sorted(pc.unique(column).to_pylist())]
    if not parts:
        return to_arrow_schema(output_schema(element), timezone="UTC").empty_table()
    outs = None
    if workers > 1 and len(parts) > 1 and proc_in.num_rows >= parallel_rows:
        release_held()  # the workers open the buckets' stores: none may stay open here
        outs = _in_pool(runner_args, parts, workers)
    if outs is None:
        # here, in the process that runs every small batch: each bucket's store stays open
        # for its next batch (released before a pool or Spark runs the buckets)
        outs = [bucket_runner(*runner_args, keep_open=True)(None, part) for part in parts]
    return pa.concat_tables(outs) if len(outs) > 1 else outs[0]


def cores() -> int:
    """The cores this process may run on (the default number of workers)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def warm(workers: int) -> list[Future]:
    """Start the pool's ``workers`` processes now, without waiting for them: each imports the
    per-instance engine (:func:`_ready`) while the caller goes on. The warm-up tasks (none for
    one worker: no pool)."""
    if workers <= 1:
        return []
    pool = _pool(workers)
    return [pool.submit(_ready) for _ in range(workers)]


def _ready() -> None:
    """What a bucket's first run would import (the engine's modules)."""
    from .engine import element, flex, kernels  # noqa: F401


def run_bucket(runner_args: tuple, part: Any) -> Any:
    """One bucket's rows through :func:`runtime.arrow_state.bucket_runner` of ``runner_args``
    (what a pool worker runs)."""
    return bucket_runner(*runner_args)(None, part)


def map_if_running(fn: Callable[..., Any], *items: list) -> Optional[list]:
    """``fn`` over ``items`` (as ``map``) in the pool when it is running (a large batch started
    it), its results in order; None when there is no pool, or it broke (the caller runs them).
    ``fn`` is a module's function, each item picklable."""
    with _LOCK:
        pool = _POOL
    return None if pool is None else _mapped(pool, fn, *items)


def _in_pool(runner_args: tuple, parts: list, workers: int) -> Optional[list]:
    """The buckets' outputs from the pool, in the order of ``parts``; None when the pool broke
    (the caller runs them). The largest buckets are handed out first, so that a large one
    started last does not keep one worker busy while the others wait for the next stage."""
    order = sorted(range(len(parts)), key=lambda i: -parts[i].num_rows)
    outs = _mapped(_pool(workers), run_bucket, [runner_args] * len(parts), [parts[i] for i in order])
    if outs is None:
        return None
    placed: list = [None] * len(parts)
    for i, out in zip(order, outs):
        placed[i] = out
    return placed


def _mapped(pool: ProcessPoolExecutor, fn: Callable[..., Any], *items: list) -> Optional[list]:
    global _POOL
    try:
        return list(pool.map(fn, *items))
    except BrokenProcessPool:
        with _LOCK:
            if _POOL is pool:
                _POOL = None
        pool.shutdown(wait=False, cancel_futures=True)
        return None


def _pool(workers: int) -> ProcessPoolExecutor:
    global _POOL, _WORKERS
    with _LOCK:
        if _POOL is None or _WORKERS != workers:
            if _POOL is not None:
                _POOL.shutdown(wait=False, cancel_futures=True)
            # spawn, not fork: the driver holds the JVM gateway's threads and sockets
            _POOL = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_worker_start)
            _WORKERS = workers
        return _POOL


def _worker_start() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@atexit.register
def _shut_down() -> None:
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
