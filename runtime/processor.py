"""One stateful element on Spark: a transformWithState processor around the Python engine.

Rows reach the processor grouped by a *bucket* (``instance % buckets``): a partition instance is not
its own Spark grouping key, because the cost of a stateful operator grows with the number of keys
per batch, not with rows (measured on Spark 4: docs/runtime.md). A bucket's state is one value: the
pickled engine states of its instances, read once and written once per batch.

Every output row has a kind: ``row`` (a changelog row of the element), ``bad`` (a bad record, its
reason and input row as JSON in ``__info``) or ``stat`` (rows an instance received in this batch,
in ``__seq``; rows that came to it already bad, such as those that got no instance, in ``__sub``),
so that one stream carries the data, the bad records and the counters.
"""
from __future__ import annotations

import gc
import json
import pickle
from collections import defaultdict
from contextlib import contextmanager
from functools import cached_property
from typing import Any, Iterator, Optional, Sequence

from pyspark.sql import Row
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor,
                                                      StatefulProcessorHandle, TimerValues)

from ccl.plan.model import Element

from .engine.changes import Bad, Emit, Event
from .json_plan import engine_plan
from .types import columns_of, struct

# Columns of every element's processor output and changelog, before the element's own columns.
KIND, INST, SEQ, SUB, OP, INFO = "__kind", "__inst", "__seq", "__sub", "__op", "__info"
META = [(KIND, T.StringType()), (INST, T.IntegerType()), (SEQ, T.LongType()),
        (SUB, T.LongType()), (OP, T.StringType()), (INFO, T.StringType())]
# The changelog's micro-batch column (written by the batch writers, not by the processor).
BATCH = "__batch"
# Columns of the processor's input rows besides one struct per port (``__p0``, ``__p1``, ...).
# Expiry emits rows with the sequence number of the last row seen: their ``__sub`` starts here so
# that they sort after the rows that number already produced.
EXPIRY_SUB = 1 << 40
PORT, SRC, WHY, RAW = "__port", "__src", "__why", "__raw"
# What those columns hold on every row when they are left out of the input (runtime/topology.py
# processor_input leaves out the ones that cannot hold anything else for an element).
META_DEFAULTS = {PORT: 0, SRC: 0, SUB: 0, OP: "i", WHY: None, RAW: None}


def output_schema(element: Element) -> T.StructType:
    """The processor output schema of ``element``: META columns then the element's columns."""
    return T.StructType([T.StructField(n, t, True) for n, t in META]
                        + struct(columns_of(element)).fields)


def port_column(port: int) -> str:
    """The struct column holding a port's row in the processor's input."""
    return f"__p{port}"


def _plain(values: Any) -> dict:
    """A port's struct value as a dict (the row API gives dicts or Rows, depending on the path)."""
    if values is None:
        return {}
    return values if isinstance(values, dict) else values.asDict()


def bad_info(reason: str, values: Any) -> str:
    """The ``__info`` text of a bad record: its reason and the row, as JSON."""
    return json.dumps({"reason": reason, "row": values}, default=str, sort_keys=True)


# Arrow type (its text) -> the SPLASH kind whose plain Python values to_pylist gives for it
# (an int32's ints are an integer's range; an int64's, a long's, made Longs by the engine)
_ARROW_KINDS = {"string": "string", "double": "float", "int32": "integer", "int64": "long",
                "bool": "boolean"}


class BucketRun:
    """The per-instance processing of one element's bucket, shared by both ways of running it:
    a batch's rows of each instance in order, through the element's engine
    (:func:`runtime.engine.flex.make_engine`, made once and serving every instance), with the
    instances' states (a dict, kept by the caller between batches).

    A batch's rows are processed in sequence order, except that rows of ``first_ports`` (the ports
    reading a reference) come before all others: ESP looks a reference up in its database when a
    row arrives, so its rows are data already there, not events that race with the element's other
    inputs. Output rows are tuples ``(kind, inst, seq, sub, op, info, values)``.

    Whether a columnar kernel runs the bucket, and which, is the plan's decision
    (``physical.kernel``, :func:`runtime.engine.kernels.make_kernel`), not chosen here. What is
    still checked at run time is what the compiler cannot know: per batch and instance, whether
    the kernel takes that instance's state and rows (the instances it hands back run through the
    engine for that batch).
    """

    def __init__(self, plan_text: str, element_name: str,
                 first_ports: frozenset[int] = frozenset()) -> None:
        from .engine.flex import make_engine
        from .engine.kernels import AGGREGATIONS, make_kernel

        plan = engine_plan(plan_text)
        element = plan.element(element_name)
        self.element = element
        self.engine = make_engine(element, plan, 0)
        self.columns = [c.name for c in element.columns]
        # the columnar kernel the plan names (``physical.kernel``): an aggregation run a bucket at
        # a time (of a stream, or of a window or delta stream: runtime/engine/kernels/
        # window_agg.py), or another kernel
        kernel = make_kernel(element, self.engine, plan, first_ports)
        aggregation = element.physical is not None and element.physical.kernel in AGGREGATIONS
        self.columnar = kernel if aggregation else None
        self.kernel = None if aggregation else kernel
        # (seq, src, sub, port) order; rows of a reference's port first when there is one
        self.order = ((lambda x: (x[3] not in first_ports, *x[:4])) if first_ports
                      else (lambda x: x[:4]))
        self.first_ports = first_ports
        # runtime/arrow_state.py's: whether the engine's state holds window rows and groups, and
        # variables, the store may keep, and the input ports whose mirrors it keeps (first use)
        self.stored: Optional[tuple[bool, bool, tuple[int, ...]]] = None

    def process(self, states: dict[int, dict], by_instance: dict[int, list[tuple]],
                now: int) -> list[tuple]:
        """Output rows for ``by_instance``: per instance its received rows
        ``(seq, src, sub, port, op, bad, values)`` (``values`` of a bad one: its reason and row)."""
        out: list[tuple] = []
        for inst in sorted(by_instance):
            received = sorted(by_instance[inst], key=self.order)
            unplaced = sum(1 for r in received if r[5])  # bad on arrival: processed by no instance
            out.append(("stat", inst, len(received) - unplaced, unplaced, None, None, _NONE))
            events = []
            for seq, _src, _sub, port, op, bad, values in received:
                if bad:
                    out.append(("bad", inst, seq, 0, None, bad_info(*values), _NONE))
                else:
                    events.append(Event(port, op, seq, values))
            state = states.get(inst)
            if state is None:
                state = states[inst] = self.engine.initial_state()
            out.extend(self.emitted(inst, self.engine.process(state, events, now)))
        return out

    def process_table(self, states: dict[int, dict], table: Any, now: int) -> Any:
        """:meth:`process` for a bucket's rows as an Arrow table in the processor's input layout,
        giving its output rows as an Arrow table (:func:`output_schema`): through
        :attr:`columnar` or :attr:`kernel` when there is one (and the instances it hands back,
        or everything when there is none, through :meth:`process`)."""
        if self.columnar is None and self.kernel is None:
            return self.process_columns(states, table, now)
        import numpy as np

        rows = bucket_rows(table)
        ports = [rows.values] + [table.column(port_column(p)).combine_chunks()
                                 for p in range(1, len(self.engine.ports))]
        runs, left, changes = (self.columnar.run(states, rows, now) if self.columnar is not None
                               else self.kernel.run(states, rows, ports, now))
        received = dict(zip(*[a.tolist() for a in np.unique(rows.inst, return_counts=True)]))
        out: list[tuple] = []
        for run in runs:
            came_bad = len(run.came_bad)
            out.append(("stat", run.inst, received[run.inst] - came_bad, came_bad, None, None, _NONE))
            for i in run.came_bad:
                why, raw = rows.why[i].as_py(), meta_column(table, RAW)[i].as_py()
                reason = (why, {"line": raw} if raw is not None else ports[int(rows.port[i])][i].as_py() or {})
                out.append(("bad", run.inst, int(rows.seq[i]), 0, None, bad_info(*reason), _NONE))
            out.extend(self.emitted(run.inst, run.outputs))
        if changes is not None:
            out.extend(("bad", inst, seq, sub, None, bad_info(reason, row), _NONE)
                       for inst, seq, sub, reason, row in changes.bad)
        if left:
            out.extend(self.process(states, received_rows(table, set(left)), now))
        parts = [self.table(out)]
        if changes is not None and changes.inst:
            n = len(changes.inst)
            parts.append(self.table_of([["row"] * n, changes.inst, changes.seq, changes.sub, changes.op,
                                        [None] * n, *changes.values]))
        import pyarrow as pa
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def process_columns(self, states: dict[int, dict], table: Any, now: int) -> Any:
        """``self.table(self.process(states, received_rows(table), now))``, the same output table,
        with the bucket's columns read once and the output's columns made directly: the rows
        ordered by one stable numpy sort instead of tuples per row sorted by instance and key."""
        import numpy as np

        n = table.num_rows
        ints = [meta_column(table, c) for c in (INST, SEQ, SRC, SUB, PORT)]
        if n == 0 or any(c.null_count for c in ints):  # (a null the tuples' order would refuse)
            return self.table(self.process(states, received_rows(table), now))
        inst, seq, src, sub, port = [np.asarray(c.to_numpy(), dtype=np.int64) for c in ints]
        keys = [port, sub, src, seq]
        if self.first_ports:
            keys.append(~np.isin(port, list(self.first_ports)))
        order = np.lexsort(keys + [inst])  # stable: rows of equal keys keep the table's order
        ordered = inst[order]
        cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
        order_l, inst_l = order.tolist(), ordered[[0, *cuts]].tolist()
        seq_l, port_l = seq.tolist(), port.tolist()
        op_l, why_l = meta_column(table, OP).to_pylist(), meta_column(table, WHY).to_pylist()
        raws = meta_column(table, RAW) if why_l.count(None) != n else None
        raw_l = raws.to_pylist() if raws is not None else None
        values = {p: table.column(port_column(p)).to_pylist() for p in set(port_l)}
        typed = self.typed_ports(table, set(port_l))
        kinds: list = []
        insts: list = []
        seqs: list = []
        subs: list = []
        ops: list = []
        infos: list = []
        rows: list = []
        engine = self.engine
        for k, (start, end) in enumerate(zip([0, *cuts], [*cuts, n])):
            i_inst, rows_of = inst_l[k], order_l[start:end]
            bad = [i for i in rows_of if why_l[i] is not None] if raw_l is not None else []
            # (kind, seq, sub, info) of the instance's stat row, then of its rows that came bad
            done = [("stat", len(rows_of) - len(bad), len(bad), None)]
            if bad:
                for i in bad:
                    line = raw_l[i]  # type: ignore[index]
                    reason = (why_l[i], {"line": line} if line is not None
                              else values[port_l[i]][i] or {})
                    done.append(("bad", seq_l[i], 0, bad_info(*reason)))
                rows_of = [i for i in rows_of if why_l[i] is None]
            for kind, i_seq, i_sub, info in done:
                kinds.append(kind)
                insts.append(i_inst)
                seqs.append(i_seq)
                subs.append(i_sub)
                ops.append(None)
                infos.append(info)
                rows.append(_NONE)
            events = [Event(port_l[i], op_l[i], seq_l[i], values[port_l[i]][i] or {}) for i in rows_of]
            state = states.get(i_inst)
            if state is None:
                state = states[i_inst] = engine.initial_state()
            outputs = engine.process(state, events, now, typed) if typed else engine.process(
                state, events, now)
            if all(type(o) is Emit for o in outputs):  # the common case: a column at a time
                count = len(outputs)
                kinds += ["row"] * count
                insts += [i_inst] * count
                seqs += [o.seq for o in outputs]
                subs += range(count)
                ops += [o.op for o in outputs]
                infos += [None] * count
                rows += [o.values for o in outputs]
                continue
            for i_sub, o in enumerate(outputs):
                if isinstance(o, Emit):
                    kinds.append("row")
                    ops.append(o.op)
                    infos.append(None)
                    rows.append(o.values)
                elif isinstance(o, Bad):
                    kinds.append("bad")
                    ops.append(None)
                    infos.append(bad_info(o.reason, dict(o.values)))
                    rows.append(_NONE)
                else:
                    continue
                insts.append(i_inst)
                seqs.append(o.seq)
                subs.append(i_sub)
        return self.columns_table([kinds, insts, seqs, subs, ops, infos], rows)

    def typed_ports(self, table: Any, ports: set) -> list[bool]:
        """Per input port of a Flex engine, whether the rows of ``table``'s column of that port
        (to_pylist's dicts) hold exactly the port's columns in order, each of an Arrow type whose
        values are those of its SPLASH kind (:meth:`FlexEngine.process`'s ``typed``); [] when
        none is, or the engine is no Flex."""
        kinds_of = getattr(self.engine, "source_kinds_of", None)
        if kinds_of is None:
            return []
        typed = [False] * len(kinds_of)
        for p in ports:
            if not 0 <= p < len(kinds_of):
                continue
            t = table.schema.field(port_column(p)).type
            fields = [t.field(i) for i in range(t.num_fields)] if hasattr(t, "num_fields") else []
            typed[p] = [(f.name, _ARROW_KINDS.get(str(f.type))) for f in fields] == kinds_of[p]
        return typed if any(typed) else []

    def table(self, out: list[tuple]) -> Any:
        """Output rows (tuples of :meth:`process`) as an Arrow table of :func:`output_schema`."""
        # the rows' fields as columns: one transposition (zip's, in C), not a pass per field
        columns = list(zip(*out)) if out else [()] * 7
        return self.columns_table(columns[:6], columns[6])

    def columns_table(self, meta: list, rows: Sequence[Any]) -> Any:
        """An Arrow table of :func:`output_schema` from its META columns' values and each row's
        values (a dict of the element's columns)."""
        import pyarrow as pa

        schema = self._arrow_schema
        try:  # the values' dicts converted as one struct column (missing names null): one pass
            values = pa.array(rows, type=pa.struct(list(schema)[6:])).flatten()
        except (TypeError, ValueError, pa.ArrowException):  # a mapping that is no dict, and the like
            return self.table_of(list(meta) + [[row.get(name) for row in rows] for name in self.columns])
        return pa.Table.from_arrays([pa.array(col, type=field.type) for col, field in zip(meta, schema)]
                                    + values, schema=schema)

    def table_of(self, columns: list[list]) -> Any:
        """An Arrow table of :func:`output_schema` from its columns' values."""
        import pyarrow as pa

        schema = self._arrow_schema
        return pa.Table.from_arrays([pa.array(col, type=field.type) for col, field in zip(columns, schema)],
                                    schema=schema)

    @cached_property
    def _arrow_schema(self) -> Any:
        from pyspark.sql.pandas.types import to_arrow_schema
        return to_arrow_schema(output_schema(self.element), timezone="UTC")

    def expire(self, states: dict[int, dict], now: int) -> list[tuple]:
        """Output rows of what time-based KEEPs evict at ``now``, in every instance (through the
        columnar kernel when it expires rows itself: a window aggregation of a stream under a
        time KEEP)."""
        out: list[tuple] = []
        if getattr(self.columnar, "timed", False):
            runs, changes = self.columnar.expire(states, now)
            for run in runs:
                out.extend(self.emitted(run.inst, run.outputs, EXPIRY_SUB))
            if changes is not None:
                names = self.columns
                out.extend(("row", inst, seq, EXPIRY_SUB + sub, op, None,
                            dict(zip(names, values)))
                           for inst, seq, sub, op, *values in zip(
                               changes.inst, changes.seq, changes.sub, changes.op, *changes.values))
            return out
        for inst in sorted(states):
            out.extend(self.emitted(inst, self.engine.expire(states[inst], now), EXPIRY_SUB))
        return out

    def next_deadline(self, states: dict[int, dict]) -> Optional[int]:
        """When :meth:`expire` next has work in any instance (ms), or None."""
        deadlines = [d for d in (self.engine.next_deadline(s) for s in states.values()) if d is not None]
        return min(deadlines) if deadlines else None

    @staticmethod
    def emitted(inst: int, outputs: list, first_sub: int = 0) -> list[tuple]:
        """The output rows of an engine's outputs for instance ``inst``."""
        rows = []
        for sub, o in enumerate(outputs, first_sub):
            if isinstance(o, Emit):
                rows.append(("row", inst, o.seq, sub, o.op, None, o.values))
            elif isinstance(o, Bad):
                rows.append(("bad", inst, o.seq, sub, None, bad_info(o.reason, dict(o.values)), _NONE))
        return rows


_NONE: dict = {}  # the values of an output row that carries none (never changed)

# per Python process (the driver, a pool worker, a Spark Python worker that Spark reuses for its
# next tasks, spark.python.worker.reuse): an element's runner is built once, not per task or
# batch. Keyed by the plan's whole text, the element and its first ports, so that another plan
# (or another version of this one), element or port order never gets it; a runner holds nothing
# of a bucket's state (states come from the state files and the store on every call). Read only
# through :func:`runner_of`, a module function that cloudpickle pickles by reference: a nested
# function naming ``_RUNS`` itself shipped a copy of the driver's map with every task (the
# driver's runners pickled in, a new map unpickled per task; runtime/arrow_state.py).
_RUNS: dict[tuple, BucketRun] = {}
_MOST_RUNS = 64  # runners kept per process (a process runs few plans; tests run many)


def runner_of(plan_text: str, element_name: str, first_ports: frozenset[int]) -> BucketRun:
    """The runner of ``element_name`` in the plan ``plan_text`` with ``first_ports`` (see
    :class:`runtime.processor.BucketRun`), built on the first call in this process and the same
    object afterwards, whichever task, batch or bucket asks."""
    key = (plan_text, element_name, first_ports)
    runner = _RUNS.get(key)
    if runner is None:
        if len(_RUNS) >= _MOST_RUNS:
            _RUNS.clear()
        runner = _RUNS[key] = BucketRun(plan_text, element_name, first_ports)
    return runner


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector off while a batch is processed: a bucket's rows, events and states
    are millions of young container objects that the collector scans again and again (a third of
    the time for 400,000 rows in one bucket), and they are freed by reference counting anyway."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def meta_column(table: Any, name: str) -> Any:
    """A meta column of a bucket's rows (an Arrow table in the processor's input layout), or its
    :data:`META_DEFAULTS` value on every row when the input left it out."""
    if name in table.column_names:
        return table.column(name).combine_chunks()
    import pyarrow as pa
    value = META_DEFAULTS[name]
    kind = pa.string() if value is None or isinstance(value, str) else pa.int64()
    return pa.repeat(pa.scalar(value, kind), table.num_rows)


def bucket_rows(table: Any) -> Any:
    """A bucket's rows (an Arrow table in the processor's input layout, one port) as
    :class:`runtime.engine.columnar.BucketRows`."""
    import numpy as np

    from .engine.columnar import BucketRows

    def ints(name: str) -> Any:
        return np.asarray(meta_column(table, name).to_numpy(), dtype=np.int64)
    return BucketRows(ints(INST), ints(SEQ), ints(SRC), ints(SUB), ints(PORT), meta_column(table, OP),
                      meta_column(table, WHY), table.column(port_column(0)).combine_chunks())


def received_rows(table: Any, instances: Optional[set[int]] = None) -> dict[int, list[tuple]]:
    """A bucket's rows (an Arrow table in the processor's input layout) as :meth:`BucketRun.process`
    takes them, by instance (only those of ``instances`` when given)."""
    meta = {c: meta_column(table, c).to_pylist() for c in (INST, SEQ, SRC, SUB, PORT, OP, WHY, RAW)}
    ports: dict[int, list] = {}
    by_instance: dict[int, list[tuple]] = defaultdict(list)
    for i, (inst, seq, src, sub, port, op, why, raw) in enumerate(zip(
            meta[INST], meta[SEQ], meta[SRC], meta[SUB], meta[PORT], meta[OP], meta[WHY], meta[RAW])):
        if instances is not None and inst not in instances:
            continue
        values = ports.get(port)
        if values is None:
            values = ports[port] = table.column(port_column(port)).to_pylist()
        by_instance[inst].append(received_row(seq, src, sub, port, op, why, raw, values[i] or {}))
    return by_instance


def received_row(seq: int, src: int, sub: int, port: int, op: str, why: Optional[str],
                 raw: Optional[str], values: Any) -> tuple:
    """A row as :meth:`BucketRun.process` takes it: one that does not parse or got no instance
    (``why``) carries its reason and its line (or values) instead of values."""
    if why is not None:
        return (seq, src, sub, port, op, True, (why, {"line": raw} if raw is not None else values))
    return (seq, src, sub, port, op, False, values)


class ElementProcessor(StatefulProcessor):
    """:class:`BucketRun` for one bucket in transformWithState (elements whose time-based KEEP
    needs processing-time timers; see runtime/arrow_state.py for the others).

    Built on the driver from the plan as JSON text (it travels to the Python workers pickled);
    the engine is made in ``init`` on the worker.
    """

    def __init__(self, plan_text: str, element_name: str, timers: bool,
                 first_ports: frozenset[int] = frozenset()) -> None:
        self.plan_text, self.element_name, self.timers = plan_text, element_name, timers
        self.first_ports = first_ports

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.run = runner_of(self.plan_text, self.element_name, self.first_ports)
        self.handle = handle
        self.state = handle.getValueState("instances", T.StructType([T.StructField("blob", T.BinaryType())]))
        self.make_row = Row(*[n for n, _ in META], *self.run.columns)

    # --- state --------------------------------------------------------------------------------

    def _load(self) -> dict[int, dict]:
        if not self.state.exists():
            return {}
        return pickle.loads(self.state.get()[0])

    def _save(self, states: dict[int, dict], fired: Optional[int] = None) -> None:
        """Keep the states and set the one timer for their next deadline (``fired``: the timer
        being handled, which Spark deletes itself; deleting it again logs a warning)."""
        self.state.update((pickle.dumps(states, protocol=pickle.HIGHEST_PROTOCOL),))
        if not self.timers:  # only time-based retention needs timers (and only then are they allowed)
            return
        for t in list(self.handle.listTimers()):
            if t != fired:
                self.handle.deleteTimer(t)
        deadline = self.run.next_deadline(states)
        if deadline is not None:
            self.handle.registerTimer(deadline)

    # --- callbacks ----------------------------------------------------------------------------

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        with gc_paused():
            by_instance: dict[int, list[tuple]] = defaultdict(list)
            for r in rows:
                port = r[PORT]
                by_instance[r[INST]].append(received_row(r[SEQ], r[SRC], r[SUB], port, r[OP], r[WHY],
                                                         r[RAW], _plain(r[port_column(port)])))
            states = self._load()
            out = self.run.process(states, by_instance, timerValues.getCurrentProcessingTimeInMs())
            self._save(states)
            return iter(self._rows(out))

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Row]:
        states = self._load()
        out = self.run.expire(states, timerValues.getCurrentProcessingTimeInMs())
        self._save(states, expiredTimerInfo.getExpiryTimeInMs())
        return iter(self._rows(out))

    def close(self) -> None:
        pass

    def _rows(self, out: list[tuple]) -> list[Row]:
        columns = self.run.columns
        return [self.make_row(kind, inst, seq, sub, op, info, *[values.get(c) for c in columns])
                for kind, inst, seq, sub, op, info, values in out]
