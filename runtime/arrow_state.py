"""Per-instance elements (those with timers too, as stages of the project's query): each
micro-batch's rows grouped by bucket with Spark's ``applyInArrow``, every bucket's instances run by
:class:`runtime.processor.BucketRun`, and their states kept in files, one per bucket and batch.

transformWithState's row API converts every cell between Arrow and Python one at a time (about as
much time per row as the engine itself), and its pandas API reads a null float as NaN and writes a
NaN as null. Here a bucket's rows arrive as one Arrow table and leave as one, converted a column at
a time. A bucket's state is what transformWithState kept in RocksDB, the pickled dict of its
instances' states: batch N reads the bucket's newest file from before N and writes its file for N
(under a hidden name, then renamed), so a batch that Spark runs again after a crash reads what the
first try read and writes the same file. The file of an element with timers starts with the
bucket's next deadline, which the driver reads without the states (:func:`saved_deadline`). The
rows of the windows (and a time KEEP's times) and the groups of the aggregates of an element, and
the dictionaries of a Flex, are not in that file but in a RocksDB store per bucket
(runtime/state/rows.py, runtime/state/variables.py, runtime/state/store.py), so that a batch
costs the rows, groups and entries it touches, not those held, and a time KEEP expires the rows
its store's time index says are due. Outside the project's query, elements with timers run on
transformWithState with processing-time timers (runtime/processor.py :class:`ElementProcessor`).
"""
from __future__ import annotations

import os
import pickle
import re
import uuid
from collections import defaultdict
from typing import Any, Callable, Optional

from pyspark.sql import Column, DataFrame

from ccl.plan.model import Element

from .processor import INST, BucketRun, gc_paused, output_schema, runner_of
from .spark_hash import spark_hash_int
from .state import variables
from .state.rows import attach, detach, holds_stored_state, uses_window_store
from .state.variables import holds_stored_variables, uses_variable_store
from .state.store import BucketStore, create, kept, read_layout, release_held

BUCKET = "__bucket"
GROUP = "__group"  # what a batch's rows are grouped by: the bucket's spread key
_STATE_FILE = re.compile(r"^b(\d+)-(\d+)\.pkl$")
# An element's runner comes from runtime.processor.runner_of (one per process, kept across tasks
# and batches). What each runner's store keeps is worked out once and kept on it
# (``BucketRun.stored``): a map keyed by ``id(runner)`` gave a new runner the answer of a freed
# one whose id it got.

# ``__inst`` of a marker row: a bucket of an element with timers whose next deadline has come is
# sent one, so that its instances expire in a batch that brings the bucket no rows
MARK = -1
_DEADLINE = "ccl-deadline"  # the head of an element with timers' state file: (_DEADLINE, deadline)


def state_path(state_dir: str, bucket: int, batch_id: int) -> str:
    """The state file of ``bucket`` written by batch ``batch_id``."""
    return os.path.join(state_dir, f"b{bucket:05d}-{batch_id:010d}.pkl")


def _files(state_dir: str) -> dict[int, list[int]]:
    """Bucket -> the batches that wrote a state file for it, in order."""
    found: dict[int, list[int]] = defaultdict(list)
    for name in os.listdir(state_dir) if os.path.isdir(state_dir) else []:
        m = _STATE_FILE.match(name)
        if m:
            found[int(m.group(1))].append(int(m.group(2)))
    return {b: sorted(batches) for b, batches in found.items()}


def load_states(state_dir: str, bucket: int, batch_id: int) -> dict[int, dict]:
    """The instance states of ``bucket`` as batch ``batch_id`` starts (the newest file of an
    earlier batch; none: every instance starts empty)."""
    earlier = [b for b in _files(state_dir).get(bucket, []) if b < batch_id]
    if not earlier:
        return {}
    with open(state_path(state_dir, bucket, earlier[-1]), "rb") as f:
        states = pickle.load(f)
        return pickle.load(f) if isinstance(states, tuple) else states


def saved_deadline(state_dir: str, bucket: int, batch_id: int) -> tuple[bool, Optional[int]]:
    """Whether the state file of ``bucket`` written by batch ``batch_id`` holds its next
    deadline (files of elements with timers do), and that deadline (epoch ms; None: none)."""
    with open(state_path(state_dir, bucket, batch_id), "rb") as f:
        head = pickle.load(f)
    if isinstance(head, tuple) and head[0] == _DEADLINE:
        return True, head[1]
    return False, None


def save_states(state_dir: str, bucket: int, batch_id: int, states: dict[int, dict],
                deadline: Optional[tuple[Optional[int]]] = None) -> None:
    """Write the states of ``bucket`` after batch ``batch_id`` (complete or not at all), after
    their next deadline when one is given (``(deadline,)``, for an element with timers)."""
    os.makedirs(state_dir, exist_ok=True)
    hidden = os.path.join(state_dir, f".{uuid.uuid4().hex}.tmp")
    with open(hidden, "wb") as f:
        if deadline is not None:
            pickle.dump((_DEADLINE, deadline[0]), f, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(states, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(hidden, state_path(state_dir, bucket, batch_id))


def newest_batches(state_dir: str, batch_id: int) -> dict[int, int]:
    """Bucket -> the batch of its newest state file from before ``batch_id`` (what
    :func:`load_states` reads)."""
    newest = {}
    for bucket, batches in _files(state_dir).items():
        earlier = [b for b in batches if b < batch_id]
        if earlier:
            newest[bucket] = earlier[-1]
    return newest


def prune(state_dir: str, batch_id: int) -> None:
    """After batch ``batch_id``: per bucket, drop the files older than the newest one from before
    it (which stays: should this batch run again, it starts from there)."""
    for bucket, batches in _files(state_dir).items():
        earlier = [b for b in batches if b < batch_id]
        for b in earlier[:-1]:
            try:
                os.remove(state_path(state_dir, bucket, b))
            except FileNotFoundError:
                pass


def rows_root(state_dir: str) -> str:
    """The state root (runtime/state/store.py) of the window rows of the element whose state
    files are in ``state_dir``."""
    return os.path.join(state_dir, "rows")


def prepare_rows(state_dir: str, element: Element, buckets: int) -> None:
    """On the driver, before the element's first batch: make (or check) the state root of its
    window rows (or a Flex's dictionaries) when it keeps them in the state store."""
    if uses_window_store(element) or uses_variable_store(element):
        create(rows_root(state_dir), buckets)


def bucket_runner(plan_text: str, element_name: str, first_ports: frozenset[int], state_dir: str,
                  batch_id: int, now: int, timed: bool = False, *,
                  keep_open: bool = False) -> Callable[[Any, Any], Any]:
    """The ``applyInArrow`` function of one batch (it travels to the executors pickled): a
    bucket's rows (the processor's input layout, runtime/topology.py processor_input) in, its output
    rows (:func:`runtime.processor.output_schema`) out. An element whose window rows and groups
    (or a Flex whose dictionaries) live in the state store (runtime/state/rows.py,
    runtime/state/variables.py) reads and writes only the rows, groups or entries its events
    touch, and commits them with the batch id after its state file is written: a batch run again
    rolls the store back to the state before it (the undo records) and reads the state file
    before it.
    With ``timed`` (an element with timers), rows of instance :data:`MARK` are dropped, and after
    the rows every instance of the bucket expires what is due at ``now``. With ``keep_open`` the
    bucket's store stays open in this process for its next batch (``BucketStore.held``: for the
    driver's small batches; whoever hands the bucket to another process releases it first,
    ``runtime.state.store.release_held``)."""
    def run(key: Any, table: Any) -> Any:
        with gc_paused():
            return _run(key, table)

    def _run(key: Any, table: Any) -> Any:
        runner = runner_of(plan_text, element_name, first_ports)
        bucket = table.column(BUCKET)[0].as_py()  # one bucket per group (key: bucket_group)
        states = load_states(state_dir, bucket, batch_id)
        what = _stored(runner)
        if not what:
            out = _processed(runner, states, table, now, timed)
            save_states(state_dir, bucket, batch_id, states,
                        (runner.next_deadline(states),) if timed else None)
            return out
        root = rows_root(state_dir)
        store = kept(root, bucket) if keep_open else None
        if store is None:
            if read_layout(root) is None:  # (a bucket run without prepare_rows: tests)
                create(root, bucket + 1)
            store = BucketStore.held(root, bucket) if keep_open else BucketStore.open(root, bucket)
        try:
            store.begin(batch_id)
            if "rows" in what:
                attach(states, store)
            if "vars" in what:
                attached = variables.attach(states, store)
            mirrors = runner.stored[2] if "mirrors" in what else None  # (set by _stored)
            if mirrors:
                attach(states, store, mirrors)
            out = _processed(runner, states, table, now, timed)
            deadline = (runner.next_deadline(states),) if timed else None  # (from the store)
            if "rows" in what:
                detach(states, store)
            if "vars" in what:
                variables.detach(states, store, attached)
            if mirrors:
                detach(states, store, mirrors)
            save_states(state_dir, bucket, batch_id, states, deadline)
            store.commit(batch_id)
        except BaseException:
            store.close()  # a kept store too: its batch's changes dropped, opened again next time
            raise
        if not keep_open:
            store.close()
        return out
    return run


def _processed(runner: BucketRun, states: dict, table: Any, now: int, timed: bool) -> Any:
    """The output rows of a bucket's ``table``; ``timed``: see :func:`bucket_runner`."""
    if not timed:
        return runner.process_table(states, table, now)
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.filter(pc.not_equal(table.column(INST), MARK))
    parts = [runner.process_table(states, table, now)] if table.num_rows else []
    parts.append(runner.table(runner.expire(states, now)))
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _stored(runner: BucketRun) -> tuple[str, ...]:
    """What of the state of the element of ``runner`` the bucket's state store keeps: "rows"
    (window rows and aggregate groups), "vars" (dictionaries and event caches of a Flex or of
    DECLARE items) and "mirrors" (a Flex's input mirrors of the ports in ``runner.stored[2]``),
    or nothing (no store is opened for it). What the runner's engine holds is worked out once
    per runner and kept on it (``runner.stored``); the plan's decisions are read every call."""
    element = runner.element
    if runner.stored is None:
        initial = runner.engine.initial_state()
        of = getattr(runner.engine, "stored_mirrors", None)
        runner.stored = (holds_stored_state(initial), holds_stored_variables(initial),
                         of() if of is not None else ())
    holds_rows, holds_vars, mirrors = runner.stored
    kept = []
    if uses_variable_store(element) and not uses_window_store(element) and mirrors:
        kept.append("mirrors")
    if uses_window_store(element) and holds_rows:
        kept.append("rows")
    if uses_variable_store(element) and holds_vars:
        kept.append("vars")
    return tuple(kept)


def bucket_rows(proc_in: DataFrame, group: Column, plan_text: str, element: Element,
                first_ports: frozenset[int], state_dir: str, batch_id: int, now: int,
                timed: bool = False) -> DataFrame:
    """The processor output rows of one batch of ``proc_in`` (with ``__bucket``), its buckets
    grouped by ``group`` (:func:`bucket_group`)."""
    runner = bucket_runner(plan_text, element.name, first_ports, state_dir, batch_id, now, timed)
    release_held()  # Spark's Python workers open the buckets' stores: not held here
    return proc_in.groupBy(group.alias(GROUP)).applyInArrow(runner, output_schema(element))


def bucket_group(buckets: int) -> Column:
    """The grouping column of the buckets ``0..buckets-1``: for bucket ``b`` the ``b``-th of
    :func:`spread_keys`. Spark sends a group to shuffle partition ``pmod(murmur3(key), n)``; the
    bucket numbers themselves would crowd some partitions (with 2 partitions, 5 of 8 buckets
    landed on one and its core did 5/8 of the work)."""
    from pyspark.sql import functions as F
    keys = spread_keys(buckets)
    return F.element_at(F.array(*[F.lit(k) for k in keys]), F.col(BUCKET) + 1)


def spread_keys(buckets: int) -> list[int]:
    """Integers ``k_0 .. k_(buckets-1)`` with ``pmod(murmur3(k_b), L) == b`` for ``L`` the power of
    two at or above ``buckets``: under any power-of-two number of shuffle partitions the buckets
    spread evenly (one each when there are as many partitions as buckets)."""
    size = 1 << max(buckets - 1, 0).bit_length()
    keys: list[Optional[int]] = [None] * buckets
    k = 0
    while None in keys:
        b = spark_hash_int(k) % size
        if b < buckets and keys[b] is None:
            keys[b] = k
        k += 1
    return keys  # type: ignore[return-value]
