"""The aggregation of a window or delta stream (rows inserted, updated and deleted), run a
bucket's micro-batch at a time.

``ccl.plan.physical.columnar_aggregation`` picks it (and its mode, as for a stream source:
runtime/engine/columnar.py) for a KEEP ALL window aggregating one window or delta stream, or a
stream under a time KEEP (``FROM s KEEP 10 SECONDS``: always in rows mode, each event its own
transaction and change, the expiry the engine's first transaction of the batch). A row
that leaves a group takes its contribution away (count and sum subtract, min and max recompute
from the group's stored rows, as runtime/engine/aggregate.py does), so the batch cannot be folded
out of order: each instance's rows are applied one after the other, in the engine's order
(BucketRun's: sequence number, source, sub-number, port) and cut into the engine's transactions
(the rows sharing a sequence number and port, whose output changes are merged), but without the
engine's general machinery:

- the bucket's rows are read once, column by column (opcodes, instances, sequence numbers, and
  each row's values as the engine receives them, whose very objects it stores);
- the source's mirror is the engine's :class:`Store` on the engine's state, or none where the
  aggregate needs no old row (``element._mirror_needed``: an upsert is then an update of an
  unknown old row, found by key in the aggregate's inputs, as the engine does); WHERE, GROUP FILTER,
  the GROUP BY values and the aggregate arguments are read straight from the row when they are
  plain columns of a type the engine reads unchanged (a long made the engine's ``Long``), else
  computed by the engine's compiled expressions, in the engine's order (the first failing one
  gives the bad record's reason);
- the group's contributions, its count and accumulators are kept exactly as the engine's
  :class:`Aggregator` keeps them (count, sum, avg, min and max written out, with the engine's
  arithmetic; the others through the engine's ``add`` and ``remove``);
- each touched group's output row (the engine's, or read off directly when the select items are
  aggregates and plain columns) is settled as the engine settles it and delivered through the
  engine's own output stage; in batch mode, when no output row in between can fail or matter
  (:meth:`WindowAggregation._rows_cannot_fail`), once per batch instead of after every row.

In *rows* mode, when no output row can fail (:meth:`WindowAggregation._rows_cannot_fail`'s
conditions) and the source's mirror and the window keep all rows, the *fast path*
(:meth:`WindowAggregation._fast_instance`) leaves out the engine's per-change output stage: the
mirror is its rows by key, written inline; the contributions are read a column at a time from the
Arrow rows when GROUP FILTER, GROUP BY values and arguments are plain columns
(:meth:`WindowAggregation._entries`); the fold is the one above, change by change (a row leaving a
group needs the group's state as it is at that change: min and max under retraction, sums whose
float totals are the engine's only when added in its order); each touched group's output row is a
tuple in column order, compared with the row it showed; a transaction's changes are merged per
group as ``consolidate`` merges them and delivered against the window's row; and the changes go
out by column (:class:`RowChanges`, no record or dict per change), the groups' shown rows, output
keys and window rows written once per group at the end.

So the state afterwards is the engine's, and in *rows* mode the outputs are the engine's, change
for change; in *batch* mode each window row that changed gives one change, from its row before
the batch to its row after, with the sequence number of the last row of its group (a row that
comes back as it was gives nothing). An instance with a row that holds no values at all is left
to the engine.
"""
from __future__ import annotations

from functools import cached_property
from math import copysign
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ccl.plan.lowering import plain_column
from ccl.plan.lowering.columnar import PLAIN_TYPES
from ccl.plan.model import Plan, Select
from ccl.splash import as_type
from ccl.splash.convert import PLAIN_KINDS
from ccl.splash.values import Long
from ccl.syntax.nodes import Star, Var
from runtime.engine.aggregate import Aggregator, plain_rows
from runtime.engine.changes import OPS, Bad, Change, Output, same_row
from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import SplashError, coerce_column, splash_value
from runtime.engine.stages import RowRefused, consolidate, key_of, truth

__all__ = ["WindowAggregation"]

# The aggregates whose add and remove are written out here (no DISTINCT, no argument check).
_INLINE = ("count", "sum", "avg", "min", "max")
_OTHER, _COUNT_STAR, _COUNT, _SUM, _MIN, _MAX = range(6)
_CODES = {"count": _COUNT, "sum": _SUM, "avg": _SUM, "min": _MIN, "max": _MAX}
# Their results (aggregate.py's), without the method call (avg's is the engine's).
_RESULTS: dict[str, Callable[[Any], Any]] = {
    "count": lambda acc: acc, "min": lambda acc: acc, "max": lambda acc: acc,
    "sum": lambda acc: acc[0] if acc[1] else None}
# How a deferred group's column may be a zero: its row's value, an extreme, a sum's total.
_ROW, _EXTREME, _TOTAL = range(3)
# Below this a total may divide into a zero (|total| / count under the smallest double, any count
# up to 2**63); above it the average of a float total is no zero.
_TINY = 1e-290
_UNSET = object()  # a contribution not read yet (``WindowAggregation._fold_row``)
# the opcode of a row a time KEEP expired (:meth:`WindowAggregation._fast_instance`)
_EXPIRED: Any = object()
# How an output column's value is read (:attr:`WindowAggregation._steps`): an aggregate whose
# result is its running value (count, min, max), a sum's, an average's, another aggregate's
# (the engine's ``result``), a plain column of the group's row.
_R_ACC, _R_SUM, _R_AVG, _R_ENGINE, _R_COLUMN = range(5)
# Column type -> the Python type of its values already in SPLASH form (expr.coerce_row's check).
_PLAIN = {kind: python for python, kind in PLAIN_KINDS.items()}


# Column types (besides the plain ones) whose non-null values are read by a function: a long
# as the engine's expressions read it (``from_python(v, long)``, the class itself: no call of a
# Python function per value).
_READERS: dict[str, Callable[[Any], Any]] = {"long": Long}


class WindowAggregation:
    """The aggregation of ``engine`` (an :class:`Engine` whose one select aggregates one window or
    delta stream) over whole buckets; see the module docstring. Same interface as
    :class:`runtime.engine.columnar.ColumnarAggregation`."""

    def __init__(self, engine: Engine, plan: Plan) -> None:
        sel = engine.selects[0]
        # a stream source only under a time KEEP (FROM s KEEP 10 SECONDS): a window of its rows
        # keyed by sequence number, which expiry deletes
        timed = _timed(sel.sources[0].store) if len(sel.sources) == 1 else False
        if (engine.declared is not None or sel.aggregator is None or len(sel.sources) != 1
                or sel.joiner is not None or sel.matcher is not None or sel.grouped_cache
                or sel.refused is not None or (sel.sources[0].kind == "stream") != timed
                or (timed and not _keeps_all(engine.output.store))
                or type(sel.aggregator) is not Aggregator
                or not sel.aggregator.retracting or engine.output.kind != "window"):
            raise ValueError(f"{engine.name} is not a window aggregation this kernel runs")
        self.engine = engine
        self.select = sel
        self.agg = sel.aggregator
        self.source = sel.sources[0]
        self.timed = timed
        self.alias = sel.aliases[0]
        self.per_row = engine.element.physical.columnar == "rows"
        if timed and not self.per_row:
            # each event under a time KEEP is its own transaction with its own change, which a
            # fold per batch does not give (the compiler gives such an aggregate rows mode)
            raise ValueError(f"{engine.name}: an aggregate under a time KEEP runs in rows mode")
        types = {c: t.strip().lower() for c, t in self.source.columns}
        spec = engine.element.query.selects[0]

        def plain(expr: object) -> Optional[str]:
            col = plain_column(expr, self.alias)
            return col if types.get(col) in PLAIN_TYPES else None

        def column(expr: object) -> Optional[tuple[str, Optional[Callable]]]:
            # a column read as it is, or (a long) made a SPLASH value as the engine makes it
            col = plain_column(expr, self.alias)
            kind = types.get(col)
            return None if col is None or not (kind in PLAIN_TYPES or kind in _READERS) \
                else (col, _READERS.get(kind))  # type: ignore[arg-type]
        self.where = sel.where
        self.where_col = plain(spec.where)
        self.filter = self.agg.group_filter
        self.filter_col = plain(spec.group_filter)
        self.group_cols = [column(e) for e in spec.group_by]
        # per aggregate: its argument columns when every argument is a plain column and the
        # engine checks nothing; else None (the engine's ``values``)
        self.arg_cols: list[Optional[list[tuple[str, Optional[Callable]]]]] = []
        for agg_spec, agg in zip(spec.aggregates, self.agg.aggregates):
            exprs = [a for a in agg_spec.args if not isinstance(a, Star)]
            cols = [column(e) for e in exprs]
            # (an aggregate the engine does not compute refuses its rows through ``values``)
            simple = (agg.check is None
                      and agg.values.__func__ is type(agg).values)  # type: ignore[attr-defined]
            self.arg_cols.append(cols if simple and all(cols) else None)  # type: ignore[arg-type]
        self.inline = [agg.fn if agg.fn in _INLINE and not agg.distinct else None
                       for agg in self.agg.aggregates]
        # per aggregate: (index, how its add and remove run, the engine's aggregate)
        self.codes = [(i, _COUNT_STAR if fn == "count" and agg.star else _CODES.get(fn, _OTHER), agg)
                      for i, (fn, agg) in enumerate(zip(self.inline, self.agg.aggregates))]
        # the select items when each is an aggregate or a plain column, with no HAVING: the
        # output row is read off as the engine's expressions give it
        names = {a.name: i for i, a in enumerate(spec.aggregates)}
        items: Optional[dict[str, tuple[bool, Any, Optional[Callable]]]] = {}
        for item in spec.items:
            expr, col = item.expr, column(item.expr)
            if isinstance(expr, Var) and expr.name.name in names:
                items[item.name] = (True, names[expr.name.name], None)  # type: ignore[index]
            elif col is not None:
                items[item.name] = (False, col[0], col[1])  # type: ignore[index]
            else:
                items = None
                break
        if spec.having is not None or items is None or set(items) != {c for c, _ in self.agg.columns}:
            self.items = None
        else:  # per output column, in order: how to read it and how the engine casts it
            self.items = []
            for name, text in self.agg.columns:
                kind = as_type(text).name  # type: ignore[attr-defined]
                self.items.append((name, *items[name], text, kind == "long", _PLAIN.get(kind),
                                   kind in ("any", "null")))
        self.results = [_RESULTS.get(agg.fn) if not agg.distinct else None
                        for agg in self.agg.aggregates]
        self.deferred = not self.per_row and self._rows_cannot_fail(spec, types)
        # rows mode on the fast path (:meth:`_fast_instance`): no output row can fail, both
        # stores KEEP ALL (a source change is then one change of the mirror), and nothing in the
        # fold can fail either: a failing WHERE or argument leaves the mirror changed and the
        # groups not, and a group's row may then show another group's key (the engine's delete
        # and insert), which the fast path does not follow
        self.fast = (self.per_row and self._rows_cannot_fail(spec, types)
                     and (self.where is None or self.where_col is not None)
                     and (self.filter is None or self.filter_col is not None)
                     and all(cols is not None for cols in self.arg_cols)
                     and (_keeps_all(self.source.store) or timed or not self.source.mirrored)
                     and _keeps_all(engine.output.store))
        # ... whose contributions are read a column at a time (:meth:`_entries`)
        self.lean = ((self.filter is None or self.filter_col is not None)
                     and all(col is not None for col in self.group_cols)
                     and all(cols is not None for cols in self.arg_cols))
        self.names = [name for name, _ in self.agg.columns]
        self.key_pos = [self.names.index(k) for k in self.agg.key]
        # batch mode, deferred: the output columns that may hold 0.0 or -0.0 (floats of a float
        # source), and per such column how to see, from a group, whether it may be a zero now
        self.zero_cols: list[str] = []
        self.zero_checks: list[tuple[int, Any]] = []
        if self.deferred:
            for name, is_agg, ref, *_ in self.items:  # type: ignore[union-attr]
                if not is_agg:
                    if types.get(ref) == "float":
                        self.zero_cols.append(name)
                        self.zero_checks.append((_ROW, ref))
                    continue
                agg, args = self.agg.aggregates[ref], self.arg_cols[ref]
                if agg.fn == "count" or agg.star or not args or types.get(args[0][0]) != "float":
                    continue  # (an average of integers is never -0.0: float(total) / count)
                self.zero_cols.append(name)
                self.zero_checks.append((_EXTREME if agg.fn in ("min", "max") else _TOTAL, ref))
        self.output_row: Callable[[dict], Optional[dict]] = (
            self._output_row if self.items is not None else self.agg.output_row)

    def _rows_cannot_fail(self, spec: Select, types: dict[str, str]) -> bool:
        """Whether batch mode may compute each touched group's output row once per batch, not
        after every row: the engine's output rows in between can neither fail (a bad record) nor
        differ in what the batch leaves. So: select items that are aggregates and plain columns,
        no HAVING; only count, sum, avg, min and max (a group emptied and filled again then
        holds the accumulators of a new group, as in the engine, which drops it); each result's
        cast into its column one that cannot fail; and group keys that are string, integer, long
        or boolean columns shown in columns of their type (no two groups share a window row)."""
        if self.items is None or any(fn is None for fn in self.inline):
            return False
        out_types = {c: t.strip().lower() for c, t in self.agg.columns}
        items = {it.name: it.expr for it in spec.items}
        for name, is_agg, ref, *_ in self.items:
            kind = out_types[name]
            if not is_agg:
                if types.get(ref) != kind:
                    return False
                continue
            agg, args = self.agg.aggregates[ref], self.arg_cols[ref]
            source = None if agg.star or not args else types.get(args[0][0])
            if agg.fn == "count":
                fits = kind in ("integer", "long")
            elif agg.fn == "avg":
                fits = kind == "float" and source in ("integer", "long", "float")
            elif agg.fn == "sum":  # (a sum of longs may leave the long range: splash_value fails)
                fits = (source == "integer" and kind in ("integer", "long")) or source == kind == "float"
            else:
                fits = source is not None and source == kind
            if not fits:
                return False
        for expr in spec.group_by:
            col = plain_column(expr, self.alias)
            shown = [name for name, e in items.items() if e == expr]
            if (types.get(col) not in ("string", "integer", "long", "boolean")
                    or any(out_types.get(name) != types[col] for name in shown)):  # type: ignore[index]
                return False
        return True

    # --- a bucket ------------------------------------------------------------------------------

    def run(self, states: dict[int, dict], rows: BucketRows,
            now: int) -> tuple[list[InstanceRun], list[int], Optional[RowChanges]]:
        """Apply a bucket's rows to the instances' ``states``: per instance (in ascending order)
        what it gave, and the instances left to the engine (those with a row without values); the
        changes are the runs' outputs, or on the fast path of rows mode (:attr:`fast`) the
        :class:`RowChanges` of every instance."""
        order, came_bad = rows.engine_order()
        arrivals = rows.arrivals(order[came_bad])
        events = order[~came_bad]
        inst = rows.inst[events]
        seqs = rows.seq[events].tolist()
        ports = rows.port[events].tolist()
        ops = rows.op.take(events).to_pylist()
        taken = rows.values.take(events)
        values = taken.to_pylist()
        # the fast path's contributions of the rows, read a column at a time
        entries = self._entries(taken) if self.fast and self.lean else None
        # ... and the source keys (``key_of`` of each row: null for a column the rows lack)
        ikeys = None
        if self.fast and self.timed:  # (a stream's rows are keyed by sequence number)
            ikeys = [(q,) for q in seqs]
        elif self.fast:
            n, fields = len(values), taken.type
            ikeys = list(zip(*[taken.field(c).to_pylist() if fields.get_field_index(c) >= 0
                               else [None] * n for c in self.source.key])) \
                if self.source.key else [()] * n
        ends = np.append(np.flatnonzero(inst[1:] != inst[:-1]) + 1, len(inst)).tolist()
        starts = [0] + ends[:-1]
        by_inst = {int(inst[s]): (s, e) for s, e in zip(starts, ends) if e > s}
        left = {i for i, (s, e) in by_inst.items() if any(v is None for v in values[s:e])}
        runs = []
        changes = (RowChanges([], [], [], [], [[] for _ in self.names], [])
                   if self.fast else None)
        for i in sorted((set(by_inst) | set(arrivals)) - left):
            state = states.get(i)
            if state is None:
                state = states[i] = self.engine.initial_state()
            s, e = by_inst.get(i, (0, 0))
            if changes is not None:
                self._fast_instance(i, state, seqs[s:e], ports[s:e], ops[s:e], values[s:e], now,
                                    changes, entries[s:e] if entries is not None else None,
                                    ikeys[s:e])  # type: ignore[index]
                runs.append(InstanceRun(i, [], arrivals.get(i, [])))
                continue
            outputs = self._instance(state, seqs[s:e], ports[s:e], ops[s:e], values[s:e], now)
            runs.append(InstanceRun(i, outputs, arrivals.get(i, [])))
        return runs, sorted(left), changes

    def _entries(self, taken: Any) -> list[Optional[tuple[tuple, list]]]:
        """:meth:`_contribution` of each row of ``taken`` (a struct array of source rows), read a
        column at a time: GROUP FILTER, the GROUP BY values and the arguments are plain columns
        (:attr:`lean`)."""
        n = len(taken)
        read_cols: dict[str, list] = {}

        def column(name: str, read: Optional[Callable]) -> list:
            if name not in read_cols:
                read_cols[name] = taken.field(name).to_pylist()
            values = read_cols[name]
            if read is None:
                return values
            return ([v if v is None else read(v) for v in values] if None in values
                    else list(map(read, values)))
        gkeys = (list(zip(*[column(c, read) for c, read in self.group_cols]))  # type: ignore[misc]
                 if self.group_cols else [()] * n)
        per_agg = []
        for cols in self.arg_cols:
            if not cols:
                per_agg.append([[] for _ in range(n)])
            elif len(cols) == 1:
                per_agg.append([[v] for v in column(*cols[0])])
            else:
                per_agg.append(list(map(list, zip(*[column(c, read) for c, read in cols]))))
        args = list(map(list, zip(*per_agg))) if per_agg else [[] for _ in range(n)]
        entries: list[Optional[tuple[tuple, list]]] = list(zip(gkeys, args))
        if self.filter is not None:
            passed = column(self.filter_col, None)  # type: ignore[arg-type]
            entries = [e if p is True else None for e, p in zip(entries, passed)]
        return entries

    def _instance(self, state: dict, seqs: list[int], ports: list[int], ops: list[str],
                  values: list[dict], now: int) -> list[Output]:
        """One instance's events through :meth:`Engine.process`'s steps: its outputs."""
        engine = self.engine
        expired = self._expired(state, now) if self.timed else []
        out: list[Output] = [] if self.timed else list(engine.expire(state, now))
        engine._bind(state)
        sstate = state["selects"][0]
        mirror, agg_state = sstate["sources"][0], sstate["agg"]
        window = state["output"]
        batch = None if self.per_row else _Net(engine.output.store, window)
        deferred: Optional[dict[tuple, int]] = {} if self.deferred else None  # group -> last seq
        tracks: dict[tuple, list] = {}  # deferred groups whose rows may hold a zero: see _track
        mirrored = self.source.mirrored
        store = self.source.store
        upsert, delete = (store.upsert, store.delete) if store is not None else (None, None)
        key = self.source.key
        fold = self._fold_row
        if expired:  # the engine's expire (rows mode): one transaction, a failing change's output lost
            retracted: list[Change] = []
            for c in expired:
                try:
                    retracted += self._apply(agg_state, c)
                except SplashError:
                    continue
            out += [emit_of(c) for c in engine.deliver(state, consolidate(retracted), now)]
        timed = self.timed
        for start, stop in _transactions(seqs, ports):
            seq, port = seqs[start], ports[start]
            changes: list[Change] = []
            for j in range(start, stop):
                if state["seq"] is None or seq > state["seq"]:
                    state["seq"] = seq
                op, row = ops[j], values[j]
                if op not in OPS:
                    out.append(Bad(f"unknown opcode {op!r}", seq, port, dict(row)))
                    continue
                if port != 0:
                    out.append(Bad(f"no input port {port} on {engine.name}", seq, port, dict(row)))
                    continue
                if timed:  # a stream's rows, by sequence number; its deletes are nothing
                    if op in ("d", "s"):
                        continue
                    done = upsert(mirror, (seq,), row, seq, now)
                elif not mirrored:
                    done = self.source.apply(mirror, op, seq, row, now)
                else:
                    done = (delete(mirror, key_of(row, key), seq) if op in ("d", "s")
                            else upsert(mirror, key_of(row, key), row, seq, now))
                try:
                    if deferred is not None:
                        for c in done:
                            for gkey in fold(agg_state, c.key, c.old, c.new, c.op, c.seq):
                                first = deferred.pop(gkey, None) is None
                                deferred[gkey] = seq  # (in the order of their last rows)
                                if self.zero_cols:
                                    self._track(agg_state["groups"][gkey], gkey, first, tracks)
                        continue
                    found: list[Change] = []
                    for c in done:
                        found += self._apply(agg_state, c)
                    changes += found
                except SplashError as e:
                    out.append(Bad(str(e), seq, port, dict(row)))
            if deferred is not None:
                continue
            try:
                delivered = engine.deliver(state, consolidate(changes), now)
            except (SplashError, RowRefused) as e:
                out.append(Bad(str(e), seq, port, dict(values[stop - 1])))
                delivered = []
            if batch is None:
                out += [emit_of(c) for c in delivered]
            else:
                batch.saw(delivered, len(out))
        if deferred:
            self._settle(state, deferred, tracks, batch, len(out), now)  # type: ignore[arg-type]
        return out if batch is None else batch.outputs(out)

    def _fast_instance(self, inst: int, state: dict, seqs: list[int], ports: list[int],
                       ops: list[str], values: list[dict], now: int, out: RowChanges,
                       entries: Optional[list], ikeys: list[tuple]) -> None:
        """Rows mode when no row can fail (:attr:`fast`): :meth:`_instance`'s state and outputs
        (appended to ``out`` by column), without the engine's output stage per change.

        The source's mirror and the groups are folded change by change as in :meth:`_instance`
        (an emptied group dropped at once, as the engine's settle drops it), but a group's output
        row is a tuple in column order, compared with the row the group showed (an insert, a
        delete, an update, or nothing when equal, as the engine's settle); a transaction's changes
        are merged per group as ``consolidate`` merges them, and delivered against the window's
        row of the group (an insert or an update by whether the window holds it; a delete gives
        the window's row). The groups' shown rows, the output keys and the window's rows are
        written once per group at the end: the last row each showed and the last each delivered
        (they differ when a row equal to the one before has the other zero, ``-0.0 == 0.0``).
        ``ikeys``: the rows' source keys."""
        engine = self.engine
        sub = 0
        # the rows a time KEEP expires come first, as one transaction: rows of opcode _EXPIRED
        expiring = 0
        if self.timed:
            expired = self._expired(state, now)
            if expired:
                expiring = len(expired)
                seqs = [expired[0].seq] * expiring + seqs
                ports = [0] * expiring + ports
                ops = [_EXPIRED] * expiring + ops
                values = [c.old for c in expired] + values
                ikeys = [c.key for c in expired] + ikeys
                if entries is not None:
                    entries = [None] * expiring + entries
        else:
            for o in engine.expire(state, now):  # (KEEP ALL on both sides: nothing, in practice)
                sub = self._put(out, inst, sub, o)
        engine._bind(state)
        sstate = state["selects"][0]
        mirror, st = sstate["sources"][0], sstate["agg"]
        groups = st["groups"]
        wstore, wstate = engine.output.store, state["output"]
        # (None: an unmirrored source, the old row unknown; see ``element._mirror_needed``)
        mrows = mirror["rows"] if self.source.mirrored else None
        times = mirror["times"] if self.timed else None  # (the time KEEP's last-change times)
        names, key_pos, values_of = self.names, self.key_pos, self._values
        alias = self.alias
        inputs, new_group, contribution = st["inputs"], self.agg.new_group, self._contribution
        aggregates, where_col, extreme = self.agg.aggregates, self.where_col, _extreme
        cstar, counts, sums, maxes, mins, kinds = self._fold_plan
        shown: dict[tuple, Optional[tuple]] = {}   # touched group -> the row it shows now
        keys: dict[tuple, tuple] = {}              # touched group -> its output key
        window: dict[tuple, Optional[tuple]] = {}  # group -> the window's row, once read or set
        oseq, osub, oop = out.seq, out.sub, out.op
        rows_out: list[tuple] = []  # the changes' rows, made columns at the end
        n, stop = len(seqs), 0
        while stop < n:  # (:func:`_transactions` written out)
            start = stop
            seq, port = seqs[start], ports[start]
            if start < expiring:  # the rows a time KEEP expired: one transaction
                stop = expiring
            else:
                stop = start + 1
                while stop < n and seqs[stop] == seq and ports[stop] == port:
                    stop += 1
            if start >= expiring and (state["seq"] is None or seq > state["seq"]):
                state["seq"] = seq
            # per change of a group: the group, and its accumulators and row (the inputs of its
            # output row, computed below only where needed), None when it emptied; ``one``: the
            # group when every change is of that one group and leaves it non-empty
            steps: list[tuple] = []
            one: Any = _UNSET
            for j in range(start, stop):
                op, row = ops[j], values[j]
                if op is _EXPIRED:  # (gone from the mirror already)
                    ikey, was, mop, mnew = ikeys[j], row, "d", None
                else:
                    if op not in OPS:
                        out.bad.append((inst, seq, sub, f"unknown opcode {op!r}", dict(row)))
                        sub += 1
                        continue
                    if port != 0:
                        out.bad.append((inst, seq, sub, f"no input port {port} on {engine.name}",
                                        dict(row)))
                        sub += 1
                        continue
                    # the mirror (KEEP ALL, or a stream's rows under a time KEEP: its rows by key,
                    # and their times) and its one change
                    ikey = ikeys[j]
                    if mrows is None:  # unmirrored: an update, or a delete, of unknown old row
                        was = None
                        if op == "d" or op == "s":
                            mop, mnew = "d", None
                        elif where_col is not None and not truth(row[where_col]):
                            mop, mnew = "d", None
                        else:
                            mop, mnew = "u", row
                        if mop == "d" and ikey not in inputs:
                            continue
                    elif op == "d" or op == "s":
                        if times is not None:
                            continue  # (a stream's deletes are nothing)
                        was = mrows.pop(ikey, None)
                        if was is None:
                            continue
                        mop, mnew = "d", None
                    else:
                        was = mrows.get(ikey)
                        mrows[ikey] = row
                        if times is not None:  # (Store.upsert: the row's time now, last in order)
                            if was is not None:
                                times.pop(ikey, None)
                            times[ikey] = now
                        mop, mnew = ("i" if was is None else "u"), row
                # the fold (:meth:`_fold_row` written out: WHERE a plain column, the aggregates
                # count, sum, avg, min and max only, each kind a loop over its indices)
                old, new = was, mnew
                if where_col is not None and mrows is not None:
                    old_ok = old is not None and truth(old[where_col])
                    new_ok = new is not None and truth(new[where_col])
                    if not old_ok:
                        if not new_ok:
                            continue
                        old, mop = None, "i"
                    elif not new_ok:
                        new, mop = None, "d"
                if mop == "d":
                    entry = None
                elif entries is not None:
                    entry = entries[j]
                else:
                    try:
                        entry = contribution(new)
                    except SplashError as e:  # (not with plain columns; the engine's way, still)
                        out.bad.append((inst, seq, sub, str(e), dict(row)))
                        sub += 1
                        continue
                gold = inputs.pop(ikey, None)
                since, moving = None, False
                if gold is not None:
                    moving = entry is not None and entry[0] == gold
                    group = groups.get(gold)
                    stored_entry = None if group is None else group["rows"].pop(ikey, None)
                    if stored_entry is not None:
                        stored = group["rows"]
                        since, stouched, args = stored_entry
                        group["n"] -= 1
                        accs = group["acc"]
                        for i in cstar:
                            accs[i] -= 1
                        for i in counts:
                            if args[i][0] is not None:
                                accs[i] -= 1
                        for i in sums:
                            x = args[i][0]
                            if x is None:
                                continue
                            acc = accs[i]
                            if acc[1] == 1:
                                accs[i] = [0, 0]
                                continue
                            total = acc[0]
                            t = type(total)
                            if t is type(x) and (t is float or t is int):
                                accs[i] = [total - x, acc[1] - 1]
                            else:  # (a Long's sum, and the like)
                                accs[i] = aggregates[i].remove(acc, args[i], since, stouched, stored)
                        for i in maxes:
                            x = args[i][0]
                            if x is not None:
                                acc = accs[i]
                                if x == acc or (x != x and acc != acc):  # (NaN equals NaN)
                                    accs[i] = extreme(stored, i, True, kinds[i])
                        for i in mins:
                            x = args[i][0]
                            if x is not None:
                                acc = accs[i]
                                if x == acc or (x != x and acc != acc):
                                    accs[i] = extreme(stored, i, False, kinds[i])
                        if not moving and old is not None:
                            group["row"] = ({alias: old} if type(old) is dict
                                            else plain_rows({alias: old}))
                if entry is not None:
                    gkey, args = entry
                    group = groups.get(gkey)
                    if group is None:
                        group = groups[gkey] = new_group()
                    group["n"] += 1
                    accs = group["acc"]
                    for i in cstar:
                        accs[i] += 1
                    for i in counts:
                        if args[i][0] is not None:
                            accs[i] += 1
                    for i in sums:
                        x = args[i][0]
                        if x is None:
                            continue
                        acc = accs[i]
                        if acc[1] == 0:
                            accs[i] = [x, 1]
                            continue
                        total = acc[0]
                        t = type(total)
                        if t is type(x) and (t is float or t is int):
                            accs[i] = [total + x, acc[1] + 1]
                        else:  # (a Decimal meeting a float, a Long's sum, and the like)
                            accs[i] = aggregates[i].add(acc, args[i], since if moving else seq,
                                                        seq, group["rows"])
                    for i in maxes:
                        x = args[i][0]
                        if x is not None:
                            acc = accs[i]
                            if acc is None:
                                accs[i] = x
                            elif x != x or acc != acc:  # NaN is larger than every number
                                if acc == acc:
                                    accs[i] = x
                            elif x > acc:
                                accs[i] = x
                    for i in mins:
                        x = args[i][0]
                        if x is not None:
                            acc = accs[i]
                            if acc is None:
                                accs[i] = x
                            elif x != x or acc != acc:
                                if x == x:
                                    accs[i] = x
                            elif x < acc:
                                accs[i] = x
                    group["row"] = {alias: new}
                    group["rows"][ikey] = [since if moving else seq, seq, args]
                    inputs[ikey] = gkey
                    touched = (gkey,) if gold is None or gold == gkey else (gold, gkey)
                elif gold is not None:
                    touched = (gold,)
                else:
                    continue
                for gkey in touched:
                    group = groups.get(gkey)
                    if group is None:
                        continue
                    if gkey not in shown:
                        emitted = group["emitted"]
                        shown[gkey] = None if emitted is None else tuple([emitted[c] for c in names])
                    if one is _UNSET:
                        one = gkey
                    elif one is not None and one != gkey:
                        one = None
                    if group["n"] > 0:
                        # (the accumulators are replaced when they change, never changed in place)
                        steps.append((gkey, group["acc"][:], group["row"]))
                    else:
                        steps.append((gkey, None, None))
                        del groups[gkey]
                        one = None
            if one is not _UNSET and one is not None:
                # one group, never empty: its row after the transaction is the merged change's
                # when it differs from the row shown before (or there was none), whatever the
                # rows in between; when it is the same, they tell whether anything changed
                old = shown[one]
                _, acc, grow = steps[-1]
                new = tuple(values_of(acc, grow[alias]))
                if old is None or not (old == new and same_row(old, new)):
                    # the merged change [old, new], delivered (the loop below, for one group)
                    shown[one] = new
                    if one not in keys:
                        keys[one] = tuple([new[p] for p in key_pos])
                    if one in window:
                        held = window[one]
                    else:
                        was = wstore.get(wstate, keys[one])
                        held = None if was is None else tuple([was[c] for c in names])
                    window[one] = new
                    oseq.append(seq)
                    osub.append(sub)
                    oop.append("u" if held is not None else "i")
                    rows_out.append(new)
                    sub += 1
                    continue
                if len(steps) == 1:
                    shown[one] = new
                    continue
            # the transaction's changes per group, as consolidate merges them: [old, new] or
            # None (an insert and a delete that cancelled out), in order of first change
            merged: dict[tuple, Optional[list]] = {}
            for gkey, acc, grow in steps:
                old = shown[gkey]
                new = None if acc is None else tuple(values_of(acc, grow[alias]))
                shown[gkey] = new
                if new is None:
                    if old is None:
                        continue
                elif old is not None and old == new and same_row(old, new):
                    continue
                if gkey not in keys:
                    some = new if new is not None else old
                    keys[gkey] = tuple([some[p] for p in key_pos])  # type: ignore[index]
                first = merged.get(gkey)
                if first is None:
                    merged.pop(gkey, None)  # (cancelled out: to the end when it comes back)
                    merged[gkey] = [old, new]
                elif first[0] is None and new is None:
                    merged[gkey] = None
                else:
                    first[1] = new
            for gkey, change in merged.items():
                if change is None:
                    continue
                new = change[1]
                if gkey in window:
                    held = window[gkey]
                else:
                    was = wstore.get(wstate, keys[gkey])
                    held = None if was is None else tuple([was[c] for c in names])
                if new is not None:
                    op = "u" if held is not None else "i"
                    row_out = new
                elif held is not None:
                    op, row_out = "d", held
                else:
                    continue
                window[gkey] = new
                oseq.append(seq)
                osub.append(sub)
                oop.append(op)
                rows_out.append(row_out)
                sub += 1
        if rows_out:
            out.inst.extend([inst] * len(rows_out))
            for k, col in enumerate(out.values):  # (a column at a time: no zip(*rows_out))
                col.extend([r[k] for r in rows_out])
        last = seqs[-1] if seqs else state["seq"]
        outs = st["out"]
        for gkey, row in shown.items():
            if row is not None:
                groups[gkey]["emitted"] = dict(zip(names, row))
            key = keys.get(gkey)
            if key is None:
                continue
            if row is not None:
                outs[key] = gkey
            elif outs.get(key) == gkey:
                del outs[key]
        for gkey, row in window.items():
            if row is not None:
                wstore.upsert(wstate, keys[gkey], dict(zip(names, row)), last, now)
            else:
                wstore.delete(wstate, keys[gkey], last)

    def _expired(self, state: dict, now: int) -> list[Change]:
        """:meth:`Engine.expire`'s first step for a stream under a time KEEP: the mirror's rows
        due at ``now`` deleted (their deletes, in the store's order, with the instance's largest
        sequence number so far)."""
        engine = self.engine
        engine._bind(state)
        for exprs in engine._exprs:  # (as the engine's: no input row at hand)
            exprs.set_row_id(None)
        seq = state["seq"] if state["seq"] is not None else 0
        return self.source.store.expire(state["selects"][0]["sources"][0], now, seq)

    def expire(self, states: dict[int, dict],
               now: int) -> tuple[list[InstanceRun], Optional[RowChanges]]:
        """What :meth:`Engine.expire` gives at ``now`` in every instance of ``states`` (in
        ascending order), as :meth:`run` gives it: the outputs per instance, or on the fast path
        the :class:`RowChanges` of all (sub-numbers from 0)."""
        runs: list[InstanceRun] = []
        changes = (RowChanges([], [], [], [], [[] for _ in self.names], [])
                   if self.fast else None)
        for inst in sorted(states):
            state = states[inst]
            if changes is not None:
                self._fast_instance(inst, state, [], [], [], [], now, changes, None, [])
            else:
                runs.append(InstanceRun(inst, self._instance(state, [], [], [], [], now), []))
        return runs, changes

    def _put(self, out: RowChanges, inst: int, sub: int, o: Output) -> int:
        """An engine output ``o`` (an Emit or a Bad) appended to ``out`` as ``sub``: the next sub."""
        if isinstance(o, Bad):
            out.bad.append((inst, o.seq, sub, o.reason, dict(o.values)))
        else:
            out.inst.append(inst)
            out.seq.append(o.seq)
            out.sub.append(sub)
            out.op.append(o.op)  # type: ignore[attr-defined]
            for col, name in zip(out.values, self.names):
                col.append(o.values.get(name))  # type: ignore[attr-defined]
        return sub + 1

    def _settle(self, state: dict, touched: dict[tuple, int], tracks: dict[tuple, list],
                batch: "_Net", position: int, now: int) -> None:
        """Batch mode with output rows that cannot fail: each touched group's output row once,
        after the batch, settled and delivered with the sequence number of its last row (the
        engine's intermediate rows change nothing the batch shows: a group emptied and filled
        again has the accumulators of a new one, see :attr:`deferred`).

        The window then holds the group's last row, which is the engine's but for the sign of a
        zero: the engine's window holds the row of the group's last *change*, and a row equal to
        the one before (``-0.0 == 0.0``) is none. A group whose rows may hold a zero was followed
        row by row (:meth:`_track`): its window row is the one its last change gave."""
        st = state["selects"][0]["agg"]
        groups, settle, output_row = st["groups"], self.agg.settle, self.output_row
        changes: list[Change] = []
        for gkey, seq in touched.items():
            group = groups[gkey]
            last = output_row(group) if group["n"] > 0 else None
            track = tracks.get(gkey)
            if track is None or not track[2] or track[1] is None:
                changes += settle(st, gkey, last, seq)
                continue
            shown, before = track[1], group["emitted"]
            found = settle(st, gkey, shown, seq)
            if not found:  # equal to the row before, maybe another zero: the window holds it
                found = [Change("u", key_of(shown, self.agg.key), before, shown, seq)]
            changes += found
            group["emitted"] = last
        batch.saw(self.engine.deliver(state, changes, now), position)

    def _track(self, group: dict, gkey: tuple, first: bool, tracks: dict[tuple, list]) -> None:
        """Batch mode, deferred, output columns that may hold 0.0 or -0.0: follow, from the first
        of its rows that may hold a zero, the group's output row after each change as the engine
        settles it, in ``tracks[gkey]``: ``[its last row, its window's row, changed]`` (the row
        of its last change; changed: whether any change came in the batch).

        A group is followed from its first change in the batch when the row it showed before
        holds a zero; else from the first change whose row holds one: the row before held none,
        so that change is a change of the row (a zero equals no other value)."""
        track = tracks.get(gkey)
        if track is None:
            if first and any(v == 0 for v in self._zero_values(group["emitted"])):
                track = tracks[gkey] = [group["emitted"], None, False]
            elif group["n"] > 0 and self._may_be_zero(group):
                row = self.output_row(group)
                if any(v == 0 for v in self._zero_values(row)):
                    tracks[gkey] = [row, row, True]
                return
            else:
                return
        row = self.output_row(group) if group["n"] > 0 else None
        old = track[0]
        if not (old is None and row is None) and (old is None or row is None or not same_row(old, row)):
            track[1], track[2] = row, True
        track[0] = row

    def _zero_values(self, row: Optional[dict]) -> list:
        """The values of ``row`` (or None) in the columns that may hold 0.0 or -0.0."""
        return [] if row is None else [row[c] for c in self.zero_cols]

    def _may_be_zero(self, group: dict) -> bool:
        """Whether a column of the (non-empty) group's output row may be 0.0 or -0.0 (never
        False when one is)."""
        accs, row = group["acc"], group["row"][self.alias]
        for how, ref in self.zero_checks:
            if how == _ROW:
                v = row[ref]
            elif how == _EXTREME:
                v = accs[ref]
            else:
                total, count = accs[ref]
                if count and -_TINY < total < _TINY:
                    return True
                continue
            if v is not None and v == 0:
                return True
        return False

    # --- one change of a source row ------------------------------------------------------------

    def _apply(self, st: dict, change: Change) -> list[Change]:
        """The output-row changes of one change of the mirror: WHERE, then
        :meth:`Aggregator.apply` (raises :class:`SplashError` where the engine does, before or
        after changing the state as the engine does)."""
        touched = self._fold_row(st, change.key, change.old, change.new, change.op, change.seq)
        out: list[Change] = []
        groups, settle, seq = st["groups"], self.agg.settle, change.seq
        for gkey in touched:
            group = groups.get(gkey)
            if group is not None:
                out += settle(st, gkey, self.output_row(group) if group["n"] > 0 else None, seq)
        return out

    def _fold_row(self, st: dict, ikey: tuple, old: Optional[dict], new: Optional[dict], op: str,
                  seq: int, entry: Any = _UNSET) -> list[tuple]:
        """WHERE, then :meth:`Aggregator.apply` up to its output rows, for the change ``op`` of
        the source row under ``ikey`` from ``old`` to ``new`` (None for none) with sequence
        number ``seq``: the groups it touched. ``entry``: the contribution of ``new`` when
        already known (:meth:`_entries`)."""
        if self.where is not None and old is None and op != "i":
            # an unmirrored source's update or delete (``stages.where``): only the new row tested
            col = self.where_col
            if op != "d" and not truth(new[col] if col else self.where({self.alias: new})):
                new, op = None, "d"
        elif self.where is not None:
            col = self.where_col
            old_ok = old is not None and truth(old[col] if col else self.where({self.alias: old}))
            new_ok = new is not None and truth(new[col] if col else self.where({self.alias: new}))
            if not old_ok:
                if not new_ok:
                    return []
                old, op = None, "i"
            elif not new_ok:
                new, op = None, "d"
        if op == "d":
            entry = None
        elif entry is _UNSET:
            entry = self._contribution(new)  # type: ignore[arg-type]
        inputs = st["inputs"]
        touched: list[tuple] = []
        since, moving = None, False
        if ikey in inputs:
            gold = inputs.pop(ikey)
            moving = entry is not None and entry[0] == gold
            since = self._remove(st, gold, ikey, None if moving or old is None else old)
            touched.append(gold)
        if entry is not None:
            gkey, args = entry
            self._add(st, gkey, ikey, args, since if moving else seq, seq, new)  # type: ignore[arg-type]
            if gkey not in touched:
                touched.append(gkey)
        return touched

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
                v = row[col[0]]
                gkey.append(v if col[1] is None or v is None else col[1](v))
            else:
                if rows is None:
                    rows = {self.alias: row}
                gkey.append(f(rows))
        args = []
        for cols, agg in zip(self.arg_cols, self.agg.aggregates):
            if cols is not None:
                values = []
                for c, read in cols:
                    v = row[c]
                    values.append(v if read is None or v is None else read(v))
                args.append(values)
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
        for (i, code, agg), acc, a in zip(self.codes, accs, args):
            if code == _COUNT_STAR:
                accs[i] = acc + 1
                continue
            if code == _OTHER:
                accs[i] = agg.add(acc, a, since, touched, stored)
                continue
            x = a[0]
            if x is None:
                continue
            if code == _COUNT:
                accs[i] = acc + 1
            elif code == _SUM:
                total = acc[0]
                t = type(total)
                if acc[1] == 0:
                    accs[i] = [x, 1]
                elif t is type(x) and (t is float or t is int):
                    accs[i] = [total + x, acc[1] + 1]
                else:  # (a Decimal meeting a float, and the like)
                    accs[i] = agg.add(acc, a, since, touched, stored)
            elif acc is None:
                accs[i] = x
            elif x != x or acc != acc:  # NaN is larger than every number
                if (acc == acc) if code == _MAX else (x == x):
                    accs[i] = x
            elif (x > acc) if code == _MAX else (x < acc):
                accs[i] = x
        group["row"] = {self.alias: row}
        stored[ikey] = [since, touched, args]
        st["inputs"][ikey] = gkey

    def _remove(self, st: dict, gkey: tuple, ikey: tuple, old: Optional[dict]) -> Optional[int]:
        """:meth:`Aggregator._remove`."""
        group = st["groups"].get(gkey)
        if group is None:
            return None
        stored = group["rows"]
        entry = stored.pop(ikey, None)
        if entry is None:
            return None
        since, touched, args = entry
        group["n"] -= 1
        accs = group["acc"]
        for (i, code, agg), acc, a in zip(self.codes, accs, args):
            if code == _COUNT_STAR:
                accs[i] = acc - 1
                continue
            if code == _OTHER:
                accs[i] = agg.remove(acc, a, since, touched, stored)
                continue
            x = a[0]
            if x is None:
                continue
            if code == _COUNT:
                accs[i] = acc - 1
            elif code == _SUM:
                total = acc[0]
                t = type(total)
                if acc[1] == 1:
                    accs[i] = [0, 0]
                elif t is type(x) and (t is float or t is int):
                    accs[i] = [total - x, acc[1] - 1]
                else:
                    accs[i] = agg.remove(acc, a, since, touched, stored)
            elif x == acc or (x != x and acc != acc):  # the extreme leaves (NaN equals NaN)
                accs[i] = _extreme(stored, i, code == _MAX)  # recomputed
        if old is not None:
            group["row"] = {self.alias: old} if type(old) is dict else plain_rows({self.alias: old})
        return since

    def _output_row(self, group: dict) -> dict:
        """:meth:`Aggregator.output_row` for items that are aggregates and plain columns only:
        each value as the engine's expressions read it, cast as ``coerce_row`` casts it (values
        already of their column's type as they are)."""
        return dict(zip(self.names, self._output_values(group)))

    @cached_property
    def _steps(self) -> list[tuple]:
        """:attr:`items` as :meth:`_output_values` reads them, per output column in order: how
        its value is read (``_R_*``), the aggregate's index or the column's name, the column's
        reader, its type's text, whether it is a long, the plain Python type of its values and
        whether they are cast to text (``coerce_row``'s), and that plain type again when a value
        of it is kept as it is (an integer's when in range; None for a column cast to text)."""
        steps = []
        for _, is_agg, ref, read, ctype, is_long, plain, as_text in self.items or []:
            if not is_agg:
                how = _R_COLUMN
            elif self.results[ref] is not None:
                how = _R_SUM if self.agg.aggregates[ref].fn == "sum" else _R_ACC
            else:
                agg = self.agg.aggregates[ref]
                how = _R_AVG if agg.fn == "avg" and not agg.distinct else _R_ENGINE
            kept = plain if not as_text else None
            steps.append((how, ref, read, ctype, is_long, plain, as_text, kept))
        return steps

    @cached_property
    def _fold_plan(self) -> tuple[list[int], list[int], list[int], list[int], list[int], list[bool]]:
        """The fast path's aggregates by how :meth:`_fast_instance` folds them: the indices of
        count(*), count, sum and avg, max, min; and per aggregate whether its argument may be NaN
        (a float, or a column of another type: any but integer and long). The fast path has no
        other aggregate (:meth:`_rows_cannot_fail`), and each aggregate's accumulator is its own,
        so folding them kind by kind gives what folding them in order gives."""
        by: dict[int, list[int]] = {code: [] for code in (_COUNT_STAR, _COUNT, _SUM, _MAX, _MIN)}
        types = {c: t.strip().lower() for c, t in self.source.columns}
        kinds = []
        for (i, code, _), cols in zip(self.codes, self.arg_cols):
            if code == _OTHER:
                raise ValueError("the fast path folds count, sum, avg, min and max only")
            by[code].append(i)
            kinds.append(not cols or types.get(cols[0][0]) not in ("integer", "long"))
        return by[_COUNT_STAR], by[_COUNT], by[_SUM], by[_MAX], by[_MIN], kinds

    def _output_values(self, group: dict) -> list:
        """:meth:`_output_row`'s values, in column order."""
        return self._values(group["acc"], group["row"][self.alias])

    def _values(self, acc: list, row: dict) -> list:
        """:meth:`_output_values` of a group whose accumulators are ``acc`` and last row ``row``."""
        aggregates = self.agg.aggregates
        out: list = []
        put = out.append
        for how, ref, read, ctype, is_long, plain, as_text, kept in self._steps:
            if how != _R_COLUMN:
                if how == _R_ACC:
                    v = acc[ref]
                elif how == _R_SUM:
                    a = acc[ref]
                    v = a[0] if a[1] else None
                elif how == _R_AVG:  # (the engine's _div but for a Decimal)
                    total, count = acc[ref]
                    tt = type(total)
                    v = (None if not count else float(total) / float(count)
                         if (tt is float or tt is int) and type(count) is int
                         else aggregates[ref].result(acc[ref]))
                else:
                    v = aggregates[ref].result(acc[ref])
                t = type(v)
                if t is kept and (t is not int or -2**31 <= v < 2**31):  # (coerce_row's check)
                    put(v)
                    continue
                if t is Long and is_long:  # (a SPLASH long already, cast to itself)
                    put(v)
                    continue
                if not (t is str or t is float or t is bool or (t is int and -2**31 <= v < 2**31)):
                    v = splash_value(v)
            else:
                v = row[ref]
                if read is not None and v is not None:
                    v = read(v)
                    if is_long:
                        put(v)
                        continue
            if v is None or (type(v) is plain and (plain is not int or -2**31 <= v < 2**31)
                             and not as_text):
                put(v)
            else:
                put(coerce_column([v], ctype)[0])
        return out


def _extreme(stored: dict, i: int, largest: bool, may_nan: bool = True) -> Any:
    """The engine's ``_extreme_remove`` recomputation: over a group's stored rows (``[since,
    touched, args]``), the least or largest non-null value of aggregate ``i``'s argument, NaN
    larger than every number (``nan_largest``), the first of equal ones; None when none.
    ``may_nan``: False when the values are integers (no NaN to look for)."""
    values = [r[2][i][0] for r in stored.values()]
    if None in values:
        values = [v for v in values if v is not None]
    if not values:
        return None
    if not may_nan:
        return max(values) if largest else min(values)
    numbers = [v for v in values if not (v != v)]
    if len(numbers) == len(values):
        return max(numbers) if largest else min(numbers)
    if largest or not numbers:  # the first NaN
        return next(v for v in values if v != v)
    return min(numbers)


def _timed(store: Any) -> bool:
    """Whether ``store`` (a :class:`Store`, or None) is a sliding time KEEP, unaged."""
    return store is not None and store.kind == "time" and store.aging is None


def _keeps_all(store: Any) -> bool:
    """Whether ``store`` (a :class:`Store`) keeps every row, unaged."""
    return store is not None and store.kind == "all" and store.aging is None


def _same(a: dict, b: dict) -> bool:
    """Whether window rows ``a`` and ``b`` are the same: equal, and no zero in one is the other
    sign's (``-0.0 == 0.0``; the engine's change from one to the other is a change)."""
    return a == b and all(type(v) is not float or v != 0 or copysign(1.0, v) == copysign(1.0, b[c])
                          for c, v in a.items())


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
            if old is None and new is None or (old is not None and new is not None and _same(old, new)):
                continue
            op = "i" if old is None else "d" if new is None else "u"
            entries.append((position, 1, Emit(op, seq, dict(new if new is not None else old))))
        entries.sort(key=lambda e: (e[0], e[1]))
        return [o for _, _, o in entries]


def _transactions(seqs: list[int], ports: list[int]) -> Iterator[tuple[int, int]]:
    """The engine's transactions of an instance's rows in order: each run of rows sharing a
    sequence number and port, as ``(start, stop)`` (a Python loop: NumPy's arrays cost more than
    the whole loop for an instance's batch of a few hundred rows or less)."""
    n = len(seqs)
    start = 0
    while start < n:
        seq, port = seqs[start], ports[start]
        stop = start + 1
        while stop < n and seqs[stop] == seq and ports[stop] == port:
            stop += 1
        yield start, stop
        start = stop
