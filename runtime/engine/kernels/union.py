"""A UNION of streams, run a bucket's micro-batch at a time.

``ccl.plan.physical.union_kernel`` picks the elements: a stream (no KEEP, AGES, DECLARE or Flex)
defined by two or more selects, each from one stream (no FROM KEEP, join, MATCHING or
aggregation) with pure WHERE and items. In the engine (runtime/engine/element.py) port ``k`` is
select ``k``'s one source; an insert (``i``, ``u``, ``p``) on it is one row through that select's
WHERE and projection, keyed by its sequence number; a delete or safedelete gives nothing; the
stream output stage emits each as an insert. The events of one instance run in the bucket's order
(BucketRun's: ``first_ports`` first, then sequence number, source, sub-number, port), cut into
transactions (consecutive events of one sequence number and port), whose rows are merged by key
(all of a transaction's rows share the key: its last passing row, at its first row's place) after
its bad records.

The kernel orders the bucket once, as the engine does, and:

- runs every event that is no insert with values on a port of the element (deletes, unknown
  opcodes, unknown ports, a row without values) through the engine itself
  (:meth:`Engine.process`), which gives its bad record or nothing;
- evaluates each port's inserts with its own select's WHERE and items a column at a time, by the
  select's :class:`~runtime.engine.kernels.join.JoinKernel` (the ``select`` kernel's evaluation:
  plain columns taken as they are, the rest by the engine's compiled expressions, the casts by
  :func:`coerce_column`, a failing row run again by the engine's own WHERE and projection);
- merges the ports' outputs by event position, so the changes come in the engine's order with
  its sequence and sub-numbers (transactions merged as above).

An instance whose state does not have the engine's shape for this element, or with a row without
values in a transaction of several, is left untouched and handed back to the engine for the batch.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine
from runtime.engine.kernels.join import INSERTS, JoinKernel, finish_sequence_numbers, Found

__all__ = ["UnionKernel"]


class UnionKernel:
    """The UNION of streams of ``engine``'s element (one ``ccl.plan.physical.union_kernel``
    takes) over whole buckets; see the module docstring."""

    def __init__(self, engine: Engine, plan: dict, first_ports: frozenset[int] = frozenset()) -> None:
        if not isinstance(engine, Engine) or len(engine.selects) < 2 \
                or any(len(sel.sources) != 1 for sel in engine.selects) \
                or engine.ports != [(k, 0) for k in range(len(engine.selects))]:
            raise ValueError(f"{engine.name} is not a union the union kernel runs")
        # each select as the select kernel runs it (ValueError when one is not: a join, a
        # window source, an aggregate, ...)
        self.parts = [JoinKernel(engine, plan, first_ports, select=k)
                      for k in range(len(engine.selects))]
        if any(part.joiner is not None for part in self.parts):
            raise ValueError(f"{engine.name} is not a union the union kernel runs")
        self.engine = engine
        self.first_ports = first_ports

    def run(self, states: dict[int, dict], rows: BucketRows, ports: list[Any],
            now: int) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Apply a bucket's rows (``ports[k]``: the struct array of port ``k``'s values, one per
        row) to the instances' ``states``: the instances run (ascending), those left untouched
        for the engine, and the changes and bad records of the run ones."""
        import pyarrow as pa
        import pyarrow.compute as pc

        order, came = rows.engine_order(self.first_ports)
        events = order[~came]
        inst, seq, port = rows.inst[events], rows.seq[events], rows.port[events]
        count = len(self.parts)
        # whether each event has values on its own port (an unknown port has none)
        valid = np.zeros(len(events), dtype=bool)
        for k in range(count):
            on = port == k
            if on.any():
                valid[on] = np.asarray(ports[k].is_valid(), dtype=bool)[events[on]]
        # each event's transaction (the position of its first event): consecutive rows of one
        # instance, sequence number and port (ESP: one upstream row)
        joins_last = (inst[1:] == inst[:-1]) & (seq[1:] == seq[:-1]) & (port[1:] == port[:-1])
        starts = np.flatnonzero(np.r_[True, ~joins_last])
        tx = np.repeat(starts, np.diff(np.r_[starts, len(events)]))
        shared = np.zeros(len(events), dtype=bool)
        shared[1:] |= joins_last
        shared[:-1] |= joins_last
        left, ran = rows.instances(states, self._readable, self.engine.initial_state,
                                   inst[shared & ~valid].tolist())
        ops = rows.op.take(events)
        inserts = np.asarray(pc.is_in(ops, value_set=pa.array(list(INSERTS))).fill_null(False),
                             dtype=bool)
        taken = ~np.isin(inst, list(left)) if left else np.ones(len(events), dtype=bool)
        rowed = inserts & valid & taken   # (valid: on a port of the element)
        extra: dict[int, list] = {}   # event position -> its outputs, when not evaluated rows
        other = self.parts[0].other_row
        for e in np.flatnonzero(~rowed & taken).tolist():
            other(states[int(inst[e])], e, ports, events, seq, port, ops, extra, now)
        emitted_parts, column_parts = [], []
        for k, part in enumerate(self.parts):
            at = np.flatnonzero(rowed & (port == k))
            if not len(at):
                continue
            found = Found(0)
            found.at = at.tolist()
            columns, live = part.evaluate(found, ports[k].take(events[at]), seq, extra)
            emitted_parts.append(at[live])
            column_parts.append(columns)
        finish_sequence_numbers(states, inst, seq, left)
        names = len(self.parts[0].outputs)
        if len(emitted_parts) == 1:
            emitted, columns = emitted_parts[0], column_parts[0]
        elif emitted_parts:
            emitted = np.concatenate(emitted_parts)
            perm = np.argsort(emitted, kind="stable")
            emitted = emitted[perm]
            perm_l = perm.tolist()
            columns = []
            for c in range(names):
                joined = [v for cols in column_parts for v in cols[c]]
                columns.append([joined[j] for j in perm_l])
        else:
            emitted, columns = np.zeros(0, dtype=np.int64), [[] for _ in range(names)]
        head = self.parts[0]
        if shared.any():
            changes = head.merged(Found(0), columns, np.arange(len(emitted)), emitted, extra,
                                   inst, seq, tx, shared)
        else:
            changes = head.changes_of(columns, emitted, extra, inst, seq)
        arrivals = rows.arrivals(order[came])
        return ([InstanceRun(i, [], arrivals.get(i, [])) for i in ran], sorted(left), changes)

    def _readable(self, state: Any) -> bool:
        """Whether ``state`` has the shape the engine's initial state has for this element."""
        try:
            return ("seq" in state and len(state["selects"]) == len(self.parts)
                    and all(s["join"] is None for s in state["selects"]))
        except (KeyError, IndexError, TypeError, AttributeError):
            return False
