"""A UNION producing a window or delta stream, run a bucket's micro-batch at a time.

``ccl.plan.physical.window_union_kernel`` picks the elements: a keyed window (KEEP ALL, none or a
row-count KEEP, no AGES), delta stream or stream (not a UNION of streams only: the ``union``
kernel's) defined by two or more selects, each from one window, delta stream or stream (no FROM
KEEP, join, MATCHING, aggregate, DECLARE or Flex) with pure WHERE and items: each select one the
``window_select`` kernel could take on its own. What the engine
(runtime/engine/element.py) does with such an element, row by row:

- port ``k`` is select ``k``'s one source; an event with an unknown opcode or port is a bad
  record;
- select ``k``'s mirror of its source (``state["selects"][k]``) takes the change as the
  window_select kernel's does (a stream source has none: an insert, update or upsert is a new
  row, a delete or safedelete nothing); WHERE and the items of select ``k`` make the output
  change, keyed by the element's key, a failure a bad record;
- the events run in the bucket's order, cut into transactions (one instance, sequence number and
  port, so one select), each one's bad records first, then its changes merged by key
  (``consolidate``) and through the one output stage all selects share: a window's store
  resolved leniently (a change of a key another select wrote upserts it, a delete removes it
  whichever select wrote it; an update whose key changed deletes the old key first), a delta
  stream's pass-through, or a stream's inserts (a stream's changes are keyed, and a transaction's
  merged, by the source's key; WHERE reads the old row, the items the new one only).

The kernel runs the mirrors in one loop over the bucket
(:func:`runtime.engine.kernels.window_select.mirror_changes`), each port's old and new rows through
its select's WHERE and items a column at a time (a :class:`WindowSelectKernel` per select), and
the transactions through one output stage (that of the first select's kernel: the output is the
element's, shared). Either the engine or the kernel can run an instance's next batch.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine
from runtime.engine.kernels.window_select import WindowSelectKernel, mirror_changes

__all__ = ["WindowUnionKernel"]


class WindowUnionKernel:
    """The UNION of ``engine``'s element (one that ``ccl.plan.physical.window_union_kernel``
    takes) over whole buckets; see the module docstring."""

    def __init__(self, engine: Engine, plan: Any, first_ports: frozenset[int] = frozenset()) -> None:
        if (not isinstance(engine, Engine) or len(engine.selects) < 2
                or engine.kind not in ("window", "delta stream", "stream")
                or any(len(sel.sources) != 1 for sel in engine.selects)
                or engine.ports != [(k, 0) for k in range(len(engine.selects))]):
            raise ValueError(f"{engine.name} is not a union the window_union kernel runs")
        # each select as the window_select kernel runs it (ValueError when one is not)
        self.parts = [WindowSelectKernel(engine, plan, first_ports, select=k)
                      for k in range(len(engine.selects))]
        self.engine = engine
        self.first_ports = first_ports
        # per port its source's key (None for a stream source: no mirror)
        self.keys = [list(sel.sources[0].key) if sel.sources[0].store is not None else None
                     for sel in engine.selects]

    def run(self, states: dict[int, dict], rows: BucketRows, ports: list[Any],
            now: int) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Apply a bucket's rows (``ports[k]``: the struct array of port ``k``'s values, one per
        row) to the instances' ``states``: the instances run (ascending), those left untouched
        for the engine, and the changes and bad records of the run ones."""
        order, came = rows.engine_order(self.first_ports)
        events = order[~came]
        inst, seq, port = rows.inst[events], rows.seq[events], rows.port[events]
        left, ran = rows.instances(states, self._readable, self.engine.initial_state)
        ops = rows.op.take(events).to_pylist()
        values: list = [None] * len(events)
        at_port = []
        for k in range(len(self.parts)):
            at = np.flatnonzero(port == k)
            at_port.append(at.tolist())
            if len(at):
                for e, v in zip(at_port[k], ports[k].take(events[at]).to_pylist()):
                    values[e] = v
        if None in values:   # a row without values, or on no port: {} (each its own, as the engine's)
            values = [v if v else {} for v in values]
        inst_l, seq_l, port_l = inst.tolist(), seq.tolist(), port.tolist()
        olds, news, bad = mirror_changes(states, inst_l, port_l, ops, values, left, self.keys,
                                         self.engine.name)
        outputs: list = [None] * len(events)
        for part, at in zip(self.parts, at_port):
            if not at:
                continue
            failed: dict[int, str] = {}   # (by position in ``at``)
            got = part._evaluate([olds[e] for e in at], [news[e] for e in at], failed)
            for e, o in zip(at, got):
                outputs[e] = o
            for j, reason in failed.items():
                bad[at[j]] = reason
        # the transactions: consecutive events of one instance, sequence number and port
        cut = (inst[1:] != inst[:-1]) | (seq[1:] != seq[:-1]) | (port[1:] != port[:-1])
        starts = [0, *(np.flatnonzero(cut) + 1).tolist(), len(events)] if len(events) else [0]
        # (a stream merges a transaction's changes by the source's key: its port's)
        source_keys = ([self.keys[p] or [] if 0 <= p < len(self.keys) else [] for p in port_l]
                       if self.engine.kind == "stream" else None)
        changes = self.parts[0]._deliver(states, inst_l, seq_l, starts, values, outputs, bad,
                                         left, now, source_keys)
        arrivals = rows.arrivals(order[came])
        return ([InstanceRun(i, [], arrivals.get(i, [])) for i in ran], sorted(left), changes)

    def _readable(self, state: Any) -> bool:
        """Whether ``state`` has the shape the engine's initial state has for this element."""
        try:
            output = state["output"]
            return ("seq" in state and len(state["selects"]) == len(self.parts)
                    and all((s["sources"][0] is None) == (key is None)
                            and (key is None or "rows" in s["sources"][0])
                            for s, key in zip(state["selects"], self.keys))
                    and (output is None) == (self.engine.kind != "window")
                    and (output is None or "rows" in output))
        except (KeyError, IndexError, TypeError):
            return False
