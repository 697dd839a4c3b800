"""The aggregation of a window or delta stream (rows inserted, updated and deleted), run a
bucket's micro-batch at a time.

``ccl.plan.physical.columnar_aggregation`` picks it (and its mode, as for a stream source:
runtime/engine/columnar.py) for a KEEP ALL window aggregating one window or delta stream. A row
that leaves a group takes its contribution away (count and sum subtract, min and max recompute
from the group's stored rows, as runtime/engine/aggregate.py does), so the batch cannot be folded
out of order: each instance's rows are applied one after the other, in the engine's order
(BucketRun's: sequence number, source, sub-number, port) and cut into the engine's transactions
(the rows sharing a sequence number and port, whose output changes are merged), but without the
engine's general machinery:

- the bucket's rows are read once, column by column (opcodes, instances, sequence numbers, and
  each row's values as the engine receives them, whose very objects it stores);
- the source's mirror is the engine's :class:`Store` on the engine's state; WHERE, GROUP FILTER,
  the GROUP BY values and the aggregate arguments are read straight from the row when they are
  plain columns of a type the engine reads unchanged, else computed by the engine's compiled
  expressions, in the engine's order (the first failing one gives the bad record's reason);
- the group's contributions, its count and accumulators are kept exactly as the engine's
  :class:`Aggregator` keeps them (count, sum, avg, min and max written out, with the engine's
  arithmetic; the others through the engine's ``add`` and ``remove``);
- each touched group's output row (the engine's, or read off directly when the select items are
  aggregates and plain columns) is settled and delivered through the engine's own output stage.

So the state afterwards is the engine's, and in *rows* mode the outputs are the engine's, change
for change; in *batch* mode each window row that changed gives one change, from its row before
the batch to its row after, with the sequence number of its last change (a row that comes back
as it was gives nothing).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from runtime.engine.aggregate import _add, _sub, plain_rows
from runtime.engine.changes import OPS, Bad, Change, Output
from runtime.engine.columnar import _PLAIN_TYPES, BucketRows, InstanceRun, _plain_column
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import SplashError, coerce_row, splash_value
from runtime.engine.stages import RowRefused, consolidate, key_of, truth

__all__ = ["WindowAggregation"]

# The aggregates whose add and remove are written out here (no DISTINCT, no argument check).
_INLINE = ("count", "sum", "avg", "min", "max")


class WindowAggregation:
    """The aggregation of ``engine`` (an :class:`Engine` whose one select aggregates one window or
    delta stream) over whole buckets; see the module docstring. Same interface as
    :class:`runtime.engine.columnar.ColumnarAggregation`."""

    def __init__(self, engine: Engine, plan: dict) -> None:
        sel = engine.selects[0]
        if (engine.declared is not None or sel.aggregator is None or len(sel.sources) != 1
                or sel.joiner is not None or sel.matcher is not None or sel.grouped_cache
                or sel.refused is not None or sel.sources[0].kind == "stream"
                or not sel.aggregator.retracting or engine.output.kind != "window"):
            raise ValueError(f"{engine.name} is not a window aggregation this kernel runs")
        self.engine = engine
        self.select = sel
        self.agg = sel.aggregator
        self.source = sel.sources[0]
        self.alias = sel.aliases[0]
        self.per_row = engine.element["physical"]["columnar"] == "rows"
        types = {c: t.strip().lower() for c, t in self.source.columns}
        spec = engine.element["query"]["selects"][0]

        def plain(expr: Optional[dict]) -> Optional[str]:
            col = _plain_column(expr, self.alias)
            return col if types.get(col) in _PLAIN_TYPES else None
        self.where = sel.where
        self.where_col = plain(spec.get("where"))
        self.filter = self.agg.group_filter
        self.filter_col = plain(spec.get("group_filter"))
        self.group_cols = [plain(e) for e in spec.get("group_by") or []]
        # per aggregate: its argument columns when every argument is a plain column read as it is
        # and the engine checks nothing; else None (the engine's ``values``)
        self.arg_cols: list[Optional[list[str]]] = []
        for agg_spec, agg in zip(spec["aggregates"], self.agg.aggregates):
            exprs = [a for a in agg_spec.get("args") or [] if a.get("node") != "Star"]
            cols = [plain(e) for e in exprs]
            simple = agg.check is None and agg.values.__func__ is type(agg).values  # type: ignore[attr-defined]
            self.arg_cols.append(cols if simple and all(cols) else None)
        self.inline = [agg.fn if agg.fn in _INLINE and not agg.distinct else None
                       for agg in self.agg.aggregates]
        # the select items when each is an aggregate or a plain column, with no HAVING: the
        # output row is read off as the engine's expressions give it
        names = {a["name"]: i for i, a in enumerate(spec["aggregates"])}
        self.items: Optional[list[tuple[str, bool, Any]]] = []
        for item in spec["items"]:
            expr, col = item["expr"], plain(item["expr"])
            if expr.get("node") == "Var" and expr["name"]["name"] in names:
                self.items.append((item["name"], True, names[expr["name"]["name"]]))
            elif col is not None:
                self.items.append((item["name"], False, col))
            else:
                self.items = None
                break
        if spec.get("having") is not None:
            self.items = None
        self.output_row: Callable[[dict], Optional[dict]] = (
            self._output_row if self.items is not None else self.agg.output_row)

    # --- a bucket ------------------------------------------------------------------------------

    def run(self, states: dict[int, dict], rows: BucketRows,
            now: int) -> tuple[list[InstanceRun], list[int], None]:
        """Apply a bucket's rows to the instances' ``states``: per instance (in ascending order)
        what it gave; no instance is left to the engine, and the changes are the runs' outputs."""
        order = np.lexsort((rows.port, rows.sub, rows.src, rows.seq, rows.inst))
        came_bad_mask = np.asarray(rows.why.is_valid(), dtype=bool)
        arrivals: dict[int, list[int]] = {}
        for i in order[came_bad_mask[order]].tolist():
            arrivals.setdefault(int(rows.inst[i]), []).append(i)
        events = order[~came_bad_mask[order]]
        inst = rows.inst[events]
        seqs = rows.seq[events].tolist()
        ports = rows.port[events].tolist()
        ops = rows.op.take(events).to_pylist()
        values = rows.values.take(events).to_pylist()
        ends = np.append(np.flatnonzero(inst[1:] != inst[:-1]) + 1, len(inst)).tolist()
        starts = [0] + ends[:-1]
        by_inst = {int(inst[s]): (s, e) for s, e in zip(starts, ends) if e > s}
        runs = []
        for i in sorted(set(by_inst) | set(arrivals)):
            state = states.get(i)
            if state is None:
                state = states[i] = self.engine.initial_state()
            s, e = by_inst.get(i, (0, 0))
            outputs = self._instance(state, seqs[s:e], ports[s:e], ops[s:e], values[s:e], now)
            runs.append(InstanceRun(i, outputs, arrivals.get(i, [])))
        return runs, [], None

    def _instance(self, state: dict, seqs: list[int], ports: list[int], ops: list[str],
                  values: list[dict], now: int) -> list[Output]:
        """One instance's events through :meth:`Engine.process`'s steps: its outputs."""
        engine = self.engine
        out: list[Output] = list(engine.expire(state, now))
        engine._bind(state)
        sstate = state["selects"][0]
        mirror, agg_state = sstate["sources"][0], sstate["agg"]
        window = state["output"]
        batch = None if self.per_row else _Net(engine.output.store, window)
        upsert, delete, key = self.source.store.upsert, self.source.store.delete, self.source.key
        n = len(seqs)
        start = 0
        while start < n:
            seq, port = seqs[start], ports[start]
            stop = start + 1
            while stop < n and seqs[stop] == seq and ports[stop] == port:
                stop += 1
            changes: list[Change] = []
            for j in range(start, stop):
                if state["seq"] is None or seq > state["seq"]:
                    state["seq"] = seq
                op, row = ops[j], values[j] or {}
                if op not in OPS:
                    out.append(Bad(f"unknown opcode {op!r}", seq, port, dict(row)))
                    continue
                if port != 0:
                    out.append(Bad(f"no input port {port} on {engine.name}", seq, port, dict(row)))
                    continue
                done = (delete(mirror, key_of(row, key), seq) if op in ("d", "s")
                        else upsert(mirror, key_of(row, key), row, seq, now))
                try:
                    found: list[Change] = []
                    for c in done:
                        found += self._apply(agg_state, c)
                    changes += found
                except SplashError as e:
                    out.append(Bad(str(e), seq, port, dict(row)))
            try:
                delivered = engine.deliver(state, consolidate(changes), now)
            except (SplashError, RowRefused) as e:
                out.append(Bad(str(e), seq, port, dict(values[stop - 1])))
                delivered = []
            if batch is None:
                out += [emit_of(c) for c in delivered]
            else:
                batch.saw(delivered, len(out))
            start = stop
        return out if batch is None else batch.outputs(out)

    # --- one change of a source row ------------------------------------------------------------

    def _apply(self, st: dict, change: Change) -> list[Change]:
        """The output-row changes of one change of the mirror: WHERE, then
        :meth:`Aggregator.apply` (raises :class:`SplashError` where the engine does, before or
        after changing the state as the engine does)."""
        old, new, op = change.old, change.new, change.op
        if self.where is not None:
            col = self.where_col
            old_ok = old is not None and truth(old[col] if col else self.where({self.alias: old}))
            new_ok = new is not None and truth(new[col] if col else self.where({self.alias: new}))
            if not old_ok:
                if not new_ok:
                    return []
                old, op = None, "i"
            elif not new_ok:
                new, op = None, "d"
        ikey = change.key
        entry = self._contribution(new) if op != "d" else None
        inputs = st["inputs"]
        touched: list[tuple] = []
        since, moving = None, False
        if ikey in inputs:
            gold = inputs.pop(ikey)
            moving = entry is not None and entry[0] == gold
            since = self._remove(st, gold, ikey, None if moving or old is None else old)
            touched.append(gold)
        seq = change.seq
        if entry is not None:
            gkey, args = entry
            self._add(st, gkey, ikey, args, since if moving else seq, seq, new)  # type: ignore[arg-type]
            if gkey not in touched:
                touched.append(gkey)
        out: list[Change] = []
        groups, settle = st["groups"], self.agg.settle
        for gkey in touched:
            group = groups.get(gkey)
            if group is not None:
                out += settle(st, gkey, self.output_row(group) if group["n"] > 0 else None, seq)
        return out

    def _contribution(self, row: dict) -> Optional[tuple[tuple, list]]:
        """:meth:`Aggregator._contribution` of a source row."""
        rows = None
        if self.filter is not None:
            col = self.filter_col
            if col is not None:
                passed = row[col]
            else:
                rows = {self.alias: row}
                passed = self.filter(rows)
            if passed is not True:
                return None
        gkey = []
        for col, f in zip(self.group_cols, self.agg.group_by):
            if col is not None:
                gkey.append(row[col])
            else:
                if rows is None:
                    rows = {self.alias: row}
                gkey.append(f(rows))
        args = []
        for cols, agg in zip(self.arg_cols, self.agg.aggregates):
            if cols is not None:
                args.append([row[c] for c in cols])
            else:
                if rows is None:
                    rows = {self.alias: row}
                args.append(agg.values(rows))
        return tuple(gkey), args

    def _add(self, st: dict, gkey: tuple, ikey: tuple, args: list, since: int, touched: int,
             row: dict) -> None:
        """:meth:`Aggregator._add`."""
        group = st["groups"].get(gkey)
        if group is None:
            group = st["groups"][gkey] = self.agg.new_group()
        group["n"] += 1
        accs, stored = group["acc"], group["rows"]
        for i, (fn, agg, a) in enumerate(zip(self.inline, self.agg.aggregates, args)):
            acc = accs[i]
            if fn is None:
                accs[i] = agg.add(acc, a, since, touched, stored)
            elif fn == "count":
                if agg.star or a[0] is not None:
                    accs[i] = acc + 1
            elif fn == "sum" or fn == "avg":
                x = a[0]
                if x is not None:
                    accs[i] = [x if acc[1] == 0 else _add(acc[0], x), acc[1] + 1]
            else:
                x = a[0]
                if x is not None:
                    if acc is None:
                        accs[i] = x
                    elif x != x or acc != acc:  # NaN is larger than every number
                        if (acc == acc) if fn == "max" else (x == x):
                            accs[i] = x
                    elif (x > acc) if fn == "max" else (x < acc):
                        accs[i] = x
        group["row"] = {self.alias: row}
        stored[ikey] = [since, touched, args]
        st["inputs"][ikey] = gkey

    def _remove(self, st: dict, gkey: tuple, ikey: tuple, old: Optional[dict]) -> Optional[int]:
        """:meth:`Aggregator._remove`."""
        group = st["groups"].get(gkey)
        if group is None or ikey not in group["rows"]:
            return None
        stored = group["rows"]
        since, touched, args = stored.pop(ikey)
        group["n"] -= 1
        accs = group["acc"]
        for i, (fn, agg, a) in enumerate(zip(self.inline, self.agg.aggregates, args)):
            acc = accs[i]
            if fn is None:
                accs[i] = agg.remove(acc, a, since, touched, stored)
            elif fn == "count":
                if agg.star or a[0] is not None:
                    accs[i] = acc - 1
            elif fn == "sum" or fn == "avg":
                x = a[0]
                if x is not None:
                    accs[i] = [0, 0] if acc[1] == 1 else [_sub(acc[0], x), acc[1] - 1]
            else:
                x = a[0]
                if x is not None and (x == acc or (x != x and acc != acc)):  # NaN equals NaN
                    accs[i] = agg.remove(acc, a, since, touched, stored)  # recomputed

        if old is not None:
            group["row"] = plain_rows({self.alias: old})
        return since

    def _output_row(self, group: dict) -> dict:
        """:meth:`Aggregator.output_row` for items that are aggregates and plain columns only."""
        acc, row, aggregates = group["acc"], group["row"][self.alias], self.agg.aggregates
        return coerce_row({name: splash_value(aggregates[ref].result(acc[ref])) if is_agg else row[ref]
                           for name, is_agg, ref in self.items}, self.agg.columns)  # type: ignore[union-attr]


class _Net:
    """Batch mode: the window's changes of an instance's batch netted per window row."""

    def __init__(self, store: Any, window: dict) -> None:
        self.store, self.window = store, window
        self.before: dict[tuple, Optional[dict]] = {}
        self.last: dict[tuple, tuple[int, int]] = {}   # key -> (position, sequence number)
        self.count = 0

    def saw(self, changes: list[Change], position: int) -> None:
        """Changes delivered after ``position`` outputs (the bad records so far)."""
        for c in changes:
            if c.key not in self.before:
                self.before[c.key] = c.old if c.op != "i" else None
            self.last.pop(c.key, None)  # in the order of the rows' last changes
            self.last[c.key] = (position, c.seq)

    def outputs(self, bad: list[Output]) -> list[Output]:
        """The bad records and each changed row's one change, in order."""
        from runtime.engine.changes import Emit
        entries: list[tuple[int, int, Output]] = [(p, 0, o) for p, o in enumerate(bad)]
        for k, (position, seq) in self.last.items():
            old, new = self.before[k], self.store.get(self.window, k)
            if old is None and new is None or (old is not None and new is not None and old == new):
                continue
            op = "i" if old is None else "d" if new is None else "u"
            entries.append((position, 1, Emit(op, seq, dict(new if new is not None else old))))
        entries.sort(key=lambda e: (e[0], e[1]))
        return [o for _, _, o in entries]

