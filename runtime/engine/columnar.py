"""A stream aggregation of the per-instance path, run a bucket's micro-batch at a time.

``ccl.plan.physical.columnar_aggregation`` picks the aggregations (a KEEP ALL window over one stream,
keyed by its GROUP BY expressions, with pure expressions) and the mode, by the walk
(ccl/plan/lowering/columnar.py) that the kernel is built with: which expressions are read straight
off a column, the select items, the aggregates folded with NumPy:

- *batch*: nothing reads the window's changes one by one, so all a micro-batch has to give is,
  per group it touched, the change from the group's row before the batch to its row after: one
  change per group, as on the native path (runtime/native_agg.py), with the sequence number of the
  group's last row in the batch;
- *rows*: something does (an output adapter, a stream, a Flex), so every contributing row gives
  the group's row after it, compared with its row before (an insert, an update or nothing), with
  the engine's sequence and sub-numbers: the engine's very changes. Only for select items that
  are aggregates and plain columns, with no HAVING.

Either way the rows are read column by column instead of one engine call per row
(runtime/engine/element.py), on the engine's own state (the Aggregator's groups and the window's
store), with the engine's expressions and arithmetic, so that either can run an instance's next
batch:

- an instance's rows are taken in BucketRun's order (sequence number, source, sub-number), and
  their opcodes as the engine takes a stream's (a delete is nothing, an unknown opcode a bad
  record);
- WHERE, GROUP FILTER, the GROUP BY values and the aggregate arguments are read straight from the
  columns when they are plain columns of a type whose values the engine reads as they are, and
  otherwise evaluated row by row by the engine's compiled expressions (a failure makes the row a
  bad record, the first failing expression giving the reason, as in the engine);
- in batch mode count, sum, avg, min and max of integer and float columns fold with NumPy:
  ``ufunc.at`` applies the rows in order, so float sums add up in the engine's order, and
  ``maximum``/``fmin`` rank NaN above every number, as the engine does; in rows mode they run as
  loops written after the engine's own (:func:`_running`: each result is the very object the
  engine's would be, which decides whether a NaN equals the row before); other aggregates use the
  engine's ``add`` and ``result``;
- each group's output row is the engine's (HAVING, the select items, the casts) and goes through
  the window's store.

An instance whose output rows cannot all be evaluated (an item or HAVING that fails, a value no
column holds), or in rows mode one whose rows share a sequence number (an upstream transaction,
whose changes the engine merges), is left as it was and handed back to be run by the engine.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import numpy as np

from ccl.plan.lowering import Unsupported
from ccl.plan.lowering.columnar import lower_columnar
from ccl.plan.model import Plan
from ccl.splash.functions_data import FUNCTIONS
from runtime.engine.changes import OPS, Bad, Output, same_row
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import SplashError, coerce_column, coerce_row, splash_value
from runtime.engine.stages import truth

__all__ = ["BucketRows", "ColumnarAggregation"]

_NUMPY = {"integer": np.int64, "float": np.float64}   # the column types the NumPy folds take
_LIMIT = 1 << 62  # integer sums are folded in int64 only while they cannot leave it


@dataclass(frozen=True)
class BucketRows:
    """One bucket's rows of a micro-batch in the processor's input layout (one port), by column:
    NumPy arrays of each row's instance, sequence number, source, sub-number and port, and Arrow
    arrays of its opcode, of why it came bad (null when it did not) and of its values (a struct
    array of the source's columns)."""

    inst: np.ndarray
    seq: np.ndarray
    src: np.ndarray
    sub: np.ndarray
    port: np.ndarray
    op: Any
    why: Any
    values: Any

    def engine_order(self, first_ports: Iterable[int] = ()) -> tuple[np.ndarray, np.ndarray]:
        """The rows' positions in the engine's order (by instance, sequence number, source,
        sub-number and port; within a sequence number the rows of ``first_ports`` first), and
        for each position whether its row came bad."""
        first = list(first_ports)
        keys = [self.port, self.sub, self.src, self.seq]
        if first:
            keys.append(~np.isin(self.port, first))
        order = np.lexsort(keys + [self.inst])
        return order, np.asarray(self.why.is_valid(), dtype=bool)[order]

    def instances(self, states: dict[int, dict], readable: Callable[[Any], bool],
                  initial: Callable[[], dict], left: Iterable[int] = ()) -> tuple[set[int], list[int]]:
        """The bucket's instances a kernel leaves to the engine (``left``, and those whose state
        is not ``readable`` by it) and those it runs, ascending, each of the latter given
        ``initial()`` when it has no state yet."""
        handed = set(left)
        present = np.unique(self.inst).tolist()
        for i in present:
            state = states.get(i)
            if state is not None and not readable(state):
                handed.add(i)
        ran = [i for i in present if i not in handed]
        for i in ran:
            if i not in states:
                states[i] = initial()
        return handed, ran

    def arrivals(self, positions: np.ndarray) -> dict[int, list[int]]:
        """The rows at ``positions`` (those that came bad) by instance, in the order given."""
        found: dict[int, list[int]] = {}
        for i in positions.tolist():
            found.setdefault(int(self.inst[i]), []).append(i)
        return found


@dataclass
class InstanceRun:
    """What :meth:`ColumnarAggregation.run` did for one instance: the engine's outputs, in order
    (in per-row mode they are in :class:`RowChanges` instead), and the indexes of the rows that
    came to it bad (which the caller reports)."""

    inst: int
    outputs: list[Output]
    came_bad: list[int]


@dataclass
class RowChanges:
    """The outputs of a bucket in per-row mode, in order per instance: the changes by column
    (instance, sequence number, sub-number, opcode, and per element column its values) and the
    bad records as ``(instance, sequence number, sub-number, reason, row)``."""

    inst: list[int]
    seq: list[int]
    sub: list[int]
    op: list[str]
    values: list[list]
    bad: list[tuple[int, int, int, str, dict]]


class ColumnarAggregation:
    """The aggregation of ``engine`` (an :class:`Engine` of an element that
    ``ccl.plan.physical.columnar_aggregation`` takes) over whole buckets; see the module docstring."""

    def __init__(self, engine: Engine, plan: Plan) -> None:
        sel = engine.selects[0]
        if (engine.declared is not None or sel.aggregator is None or len(sel.sources) != 1
                or sel.sources[0].store is not None):  # (a FROM KEEP: the window aggregation's)
            raise ValueError(f"{engine.name} is not a stream aggregation the columnar path runs")
        self.engine = engine
        self.agg = sel.aggregator
        self.alias = sel.aliases[0]
        self.names = [c for c, _ in sel.sources[0].columns]
        # the walk the planner decided with, in the mode it recorded, building the operands from
        # the engine's compiled expressions
        try:
            per_row = engine.element.physical.columnar == "rows"
            lowered = lower_columnar(engine.element, plan, per_row, FUNCTIONS,
                                     _EngineOperands(sel.where, self.agg, self.alias))
        except Unsupported as exc:
            raise ValueError(f"{engine.name}: not a stream aggregation the columnar path runs: "
                             f"{exc}") from None
        self.where = lowered.where
        self.group_filter = lowered.group_filter
        self.group_by = lowered.group_by
        # the select items when each is an aggregate or a plain column, with no HAVING: the
        # output row is then read off directly, as the engine's expressions would give it
        self.items: Optional[list[tuple[str, bool, Any]]] = lowered.items
        # each key column a plain group column of its own type: no two groups can share a key
        self.exact_keys = engine.element.physical.group_columns is not None
        # one change per input row (the window's changes are read one by one) or per group
        self.per_row = lowered.mode == "rows"
        self.args: list[list[_Getter]] = lowered.arguments
        self.kinds: list[Optional[str]] = lowered.folds  # per aggregate: the type NumPy folds it in, or None

    def run(self, states: dict[int, dict], rows: BucketRows,
            now: int) -> tuple[list[InstanceRun], list[int], Optional[RowChanges]]:
        """Apply a bucket's rows to the instances' ``states``: per instance that was run (in
        ascending order) what it gave, the instances left untouched for the engine, and in
        per-row mode the changes."""
        order = np.lexsort((rows.sub, rows.src, rows.seq, rows.inst))
        came_bad = np.asarray(rows.why.is_valid(), dtype=bool)[order]
        events = order[~came_bad]            # the rows the engine would get, in its order
        batch = _Batch(rows, events, self.names, self.alias)
        live = self._usual(batch)
        live = self._filter(batch, live, self.where, truth)
        live = self._filter(batch, live, self.group_filter, lambda v: v is True)
        keys = [g.key_values(batch, live) for g in self.group_by]
        args = [self._arguments(batch, live, i) for i in range(len(self.args))]
        if batch.bad:  # rows that failed drop out of the fold
            keep = np.array([p not in batch.bad for p in live.tolist()], dtype=bool)
            live = live[keep]
            keys = [_kept(k, keep) if isinstance(k, list) else k.filter(keep) for k in keys]
            args = [None if a is None else [_kept(v, keep) for v in a] for a in args]
        groups = _Groups(batch.inst[live], keys)
        _prefetch(states, groups.inst, groups.keys, "groups")
        found = [self._group(states, inst, key) for inst, key in zip(groups.inst, groups.keys)]
        # (an aggregate folded by the engine's add() may change its accumulator in place, as
        # median's sorted list: the state's own stays as it was until the batch is kept)
        accs = [[(g["acc"][i] if self.kinds[i] else copy.deepcopy(g["acc"][i])) if g is not None
                 else agg.init() for g in found] for i, agg in enumerate(self.agg.aggregates)]
        counts = np.bincount(groups.ids, minlength=len(found)).tolist()
        if self.per_row:
            return self._run_rows(states, batch, groups, live, found, accs, counts, args,
                                  order[came_bad])
        for i, agg in enumerate(self.agg.aggregates):
            if not (self.kinds[i] and self._fold_fast(i, accs[i], groups, batch, live, args[i])):
                values = args[i] if args[i] is not None else [g.values(batch, live) for g in self.args[i]]
                _fold_rows(agg, accs[i], groups, values, batch.seq[live])
        runs, left = self._settle(states, batch, groups, live, found, accs, counts, order[came_bad], now)
        return runs, left, None

    def _output_row(self, group: dict) -> dict:
        """:meth:`Aggregator.output_row` for items that are aggregates and plain columns only."""
        acc, row, aggregates = group["acc"], group["row"][self.alias], self.agg.aggregates
        return coerce_row({name: splash_value(aggregates[ref].result(acc[ref])) if is_agg else row[ref]
                           for name, is_agg, ref in self.items}, self.agg.columns)  # type: ignore[union-attr]

    # --- one change per row --------------------------------------------------------------------

    def _run_rows(self, states: dict[int, dict], batch: "_Batch", groups: "_Groups",
                  live: np.ndarray, found: list[Optional[dict]], accs: list[list], counts: list[int],
                  args: list[Optional[list]], came_bad: np.ndarray
                  ) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Per-row mode: each contributing row's group row after it, compared with the group's row
        before it (an insert, an update, or nothing when they are equal), as the engine emits
        them; then each group's state as the engine leaves it."""
        # rows of one upstream transaction (one sequence number) reach the engine's output stage
        # merged: such an instance's batch is the engine's
        left = _shared_sequence_numbers(batch.inst, batch.seq)
        ids, seqs = groups.ids.tolist(), batch.seq[live].tolist()
        results = []
        for i, agg in enumerate(self.agg.aggregates):
            values = args[i] if args[i] is not None else [g.values(batch, live) for g in self.args[i]]
            results.append(_running(agg, self.kinds[i], accs[i], ids, values, seqs))
        rows, failing = self._output_tuples(batch, live, results)
        left |= {int(i) for i in batch.inst[live[failing]].tolist()} if failing else set()
        shown = [None if g is None or g["emitted"] is None
                 else tuple(g["emitted"][c] for c, _ in self.agg.columns) for g in found]
        emits: list[tuple[int, str]] = []          # (live index, opcode)
        last, last_emit = [-1] * len(found), [-1] * len(found)  # each group's last row, last change
        for j, (g, row) in enumerate(zip(ids, rows)):
            old = shown[g]
            if old is None or not same_row(old, row):
                emits.append((j, "u" if old is not None else "i"))
                last_emit[g] = j
            shown[g] = row
            last[g] = j
        ran = self._started(states, batch, left)
        self._keep_rows(states, groups, found, accs, counts, rows, last, last_emit, batch, live,
                        left)
        changes = self._changes(batch, live, rows, emits, seqs, left)
        arrivals = _finished(states, batch, left, came_bad)
        return [InstanceRun(inst, [], arrivals.get(inst, [])) for inst in ran], sorted(left), changes

    def _output_tuples(self, batch: "_Batch", live: np.ndarray,
                       results: list[list]) -> tuple[list[tuple], list[int]]:
        """The output row after each contributing row, as a tuple in the element's column order:
        its plain columns and aggregate results, cast as the engine's ``coerce_row`` casts; and
        the rows whose output fails (a result no column type holds)."""
        by_name = {name: (is_agg, ref) for name, is_agg, ref in self.items}  # type: ignore[union-attr]
        columns = []
        failing: set[int] = set()
        for name, ctype in self.agg.columns:
            is_agg, ref = by_name[name]
            values = results[ref] if is_agg else batch.values(ref, live)
            try:
                columns.append(coerce_column([splash_value(v) for v in values] if is_agg else values,
                                             ctype))
            except SplashError:  # rare: find the rows, one by one
                column = []
                for j, v in enumerate(values):
                    try:
                        column.append(coerce_column([splash_value(v) if is_agg else v], ctype)[0])
                    except SplashError:
                        failing.add(j)
                        column.append(None)
                columns.append(column)
        return list(zip(*columns)), sorted(failing)

    def _keep_rows(self, states: dict[int, dict], groups: "_Groups", found: list[Optional[dict]],
                   accs: list[list], counts: list[int], rows: list[tuple], last: list[int],
                   last_emit: list[int], batch: "_Batch", live: np.ndarray, left: set[int]) -> None:
        """Each group's state after the batch, as the engine leaves it: count, accumulators, last
        row, the row it showed last (``emitted``), and in the window's store the row of its last
        change, the store's keys in the order of their last changes."""
        names = [c for c, _ in self.agg.columns]
        last_rows = batch.dicts(live[np.array(last, dtype=np.int64)]) if last else []
        key_at = [names.index(k) for k in self.agg.key]
        for g in sorted(range(len(found)), key=lambda g: last_emit[g]):
            inst = groups.inst[g]
            if inst in left:
                continue
            state = states[inst]
            agg_state, window = state["selects"][0]["agg"], state["output"]
            group = found[g]
            if group is None:
                group = agg_state["groups"][groups.keys[g]] = self.agg.new_group()
            group["n"] += counts[g]
            group["acc"] = [a[g] for a in accs]
            group["row"] = {self.alias: last_rows[g]}
            shown = dict(zip(names, rows[last[g]]))
            group["emitted"] = shown
            key = tuple(shown[names[k]] for k in key_at)
            agg_state["out"][key] = groups.keys[g]
            if last_emit[g] < 0:
                continue
            stored = shown if last_emit[g] == last[g] else dict(zip(names, rows[last_emit[g]]))
            self.engine.output.store.upsert(window, key, stored, 0, 0)

    def _changes(self, batch: "_Batch", live: np.ndarray, rows: list[tuple],
                 emits: list[tuple[int, str]], seqs: list[int], left: set[int]) -> RowChanges:
        """The bucket's changes and bad records, each numbered within its instance in order."""
        live_at, insts = live.tolist(), batch.inst[live].tolist()
        entries = [(live_at[j], j, op) for j, op in emits if insts[j] not in left]
        entries += [(p, -1, reason) for p, reason in batch.bad.items() if int(batch.inst[p]) not in left]
        entries.sort()
        out = RowChanges([], [], [], [], [[] for _ in self.agg.columns], [])
        sub: dict[int, int] = {}
        for p, j, what in entries:
            inst = int(batch.inst[p])
            n = sub[inst] = sub.get(inst, -1) + 1
            if j < 0:
                out.bad.append((inst, int(batch.seq[p]), n, what, batch.dict_at(p)))
                continue
            out.inst.append(inst)
            out.seq.append(seqs[j])
            out.sub.append(n)
            out.op.append(what)
            for column, v in zip(out.values, rows[j]):
                column.append(v)
        return out

    # --- rows ----------------------------------------------------------------------------------

    def _usual(self, batch: "_Batch") -> np.ndarray:
        """The event positions that insert a row: opcodes i, u, p on port 0 (d and s insert
        nothing; any other opcode or port makes a bad record)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        inserts = pc.is_in(batch.ops, value_set=pa.array(["i", "u", "p"])).fill_null(False)
        usual = np.asarray(inserts, dtype=bool) & (batch.ports == 0)
        for p in np.flatnonzero(~usual).tolist():
            op = batch.ops[p].as_py()
            if op not in OPS:
                batch.bad[p] = f"unknown opcode {op!r}"
            elif batch.ports[p] != 0:
                batch.bad[p] = f"no input port {batch.ports[p]} on {self.engine.name}"
        return np.flatnonzero(usual)

    @staticmethod
    def _filter(batch: "_Batch", live: np.ndarray, getter: Optional["_Getter"],
                passes: Callable[[object], bool]) -> np.ndarray:
        """The positions of ``live`` whose value of ``getter`` passes (a failing one is bad)."""
        if getter is None or not len(live):
            return live
        values = getter.values(batch, live)
        keep = [p not in batch.bad and passes(v) for p, v in zip(live.tolist(), values)]
        return live[np.array(keep, dtype=bool)]

    def _arguments(self, batch: "_Batch", live: np.ndarray, i: int) -> Optional[list]:
        """The arguments of aggregate ``i`` per row, checked as the engine checks them; None when
        they are plain columns that :meth:`_fold_fast` reads itself."""
        agg, getters = self.agg.aggregates[i], self.args[i]
        if self.kinds[i] and all(g.column is not None for g in getters):
            return None
        values = [g.values(batch, live) for g in getters]
        if agg.check is None:
            return values
        checked: list[list] = [[] for _ in values]
        for j, p in enumerate(live.tolist()):
            row = [v[j] for v in values]
            if p not in batch.bad:
                try:
                    row = agg.check(agg.fn, row)
                except SplashError as e:
                    batch.bad[p] = str(e)
            for column, v in zip(checked, row):
                column.append(v)
        return checked

    # --- folds ---------------------------------------------------------------------------------

    def _fold_fast(self, i: int, accs: list, groups: "_Groups", batch: "_Batch", live: np.ndarray,
                   args: Optional[list]) -> bool:
        """Fold aggregate ``i`` (count/sum/avg/min/max of an integer or float column) with NumPy;
        False when this batch's values do not allow it."""
        agg, kind = self.agg.aggregates[i], self.kinds[i]
        if agg.star:
            _add_counts(accs, np.bincount(groups.ids, minlength=len(accs)))
            return True
        if args is None:
            values, valid = batch.numbers(self.args[i][0].column, live, kind)  # type: ignore[arg-type]
        else:  # a count of a column the engine reads through its expressions: nulls only
            values = valid = np.array([v is not None for v in args[0]], dtype=bool)
        ids = groups.ids[valid]
        counts = np.bincount(ids, minlength=len(accs))
        if kind == "count":
            _add_counts(accs, counts)
            return True
        values = values[valid]
        touched = np.flatnonzero(counts).tolist()
        if agg.fn in ("sum", "avg"):
            starts = [accs[g][0] if accs[g][1] else None for g in touched]
            if kind == "integer":
                if (any(s is not None and abs(s) >= _LIMIT for s in starts)
                        or (len(values) and int(np.abs(values).max()) * len(values) >= _LIMIT)):
                    return False
                totals = np.zeros(len(accs), np.int64)
                blank: object = 0
            else:
                # -0.0 is the identity of float addition: a new group's first value stays as it
                # is, as the engine takes it
                totals = np.full(len(accs), -0.0)
                blank = -0.0
            totals[touched] = [s if s is not None else blank for s in starts]
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, sums past 1e308
                np.add.at(totals, ids, values)
            for g, total, c in zip(touched, totals[touched].tolist(), counts[touched].tolist()):
                accs[g] = [total, accs[g][1] + c]
            return True
        if kind == "integer":
            blank = np.iinfo(np.int64).min if agg.fn == "max" else np.iinfo(np.int64).max
        else:  # max from -inf; min from NaN, which fmin drops for any number
            blank = -np.inf if agg.fn == "max" else np.nan
            zeros = values == 0
            if zeros.any() and (np.signbit(values[zeros]).any()
                                or any(accs[g] == 0 and math.copysign(1, accs[g]) < 0 for g in touched)):
                return False  # of 0.0 and -0.0 the engine keeps the first; NumPy may take either
        best = np.full(len(accs), blank, dtype=_NUMPY[kind])
        best[touched] = [accs[g] if accs[g] is not None else blank for g in touched]
        with np.errstate(invalid="ignore"):  # comparisons with NaN
            (np.maximum if agg.fn == "max" else np.fmin).at(best, ids, values)
        for g, v in zip(touched, best[touched].tolist()):
            accs[g] = v
        return True

    # --- outputs -------------------------------------------------------------------------------

    def _started(self, states: dict[int, dict], batch: "_Batch", left: set[int]) -> list[int]:
        """The bucket's instances that are not left to the engine, in ascending order, each
        given a state if it had none."""
        ran = [inst for inst in np.unique(batch.rows.inst).tolist() if inst not in left]
        for inst in ran:
            if inst not in states:
                states[inst] = self.engine.initial_state()
        return ran

    @staticmethod
    def _group(states: dict[int, dict], inst: int, gkey: tuple) -> Optional[dict]:
        state = states.get(inst)
        return state["selects"][0]["agg"]["groups"].get(gkey) if state is not None else None

    def _settle(self, states: dict[int, dict], batch: "_Batch", groups: "_Groups",
                live: np.ndarray, found: list[Optional[dict]], accs: list[list],
                counts: list[int], came_bad: np.ndarray,
                now: int) -> tuple[list[InstanceRun], list[int]]:
        """Evaluate each touched group's output row; for each instance whose rows all evaluate,
        write its groups into its state and give its outputs; hand the others back."""
        last = np.full(len(groups.keys), -1, dtype=np.int64)
        np.maximum.at(last, groups.ids, live)         # each group's last row (event position)
        updates, failed = self._output_rows(groups, found, accs, counts, batch.dicts(last))
        # the output keys the groups showed and will show, read at once where the state is stored
        key = self.agg.key
        shown = [(inst, tuple(row.get(k) for k in key))
                 for inst, old, (_, new) in zip(groups.inst, found, updates)
                 for row in (old["emitted"] if old is not None else None, new) if row is not None]
        for window in (False, True):
            _prefetch(states, [i for i, _ in shown], [k for _, k in shown], "out", window)
        if not self.exact_keys:
            failed |= self._sharing_keys(states, groups, updates)
        out: dict[int, list[tuple[int, Output]]] = {}
        for p, reason in batch.bad.items():
            inst = int(batch.inst[p])
            if inst not in failed:
                out.setdefault(inst, []).append((p, Bad(reason, int(batch.seq[p]), int(batch.ports[p]),
                                                        batch.dict_at(p))))
        ran = self._started(states, batch, failed)
        self._apply(states, groups, found, updates, last, batch.seq[last].tolist(), failed, out, now)
        arrivals = _finished(states, batch, failed, came_bad)
        runs = []
        for inst in ran:
            outputs = out.get(inst, [])
            if batch.bad:  # bad records were put first: order by position
                outputs.sort(key=_position)
            runs.append(InstanceRun(inst, [o for _, o in outputs], arrivals.get(inst, [])))
        return runs, sorted(failed)

    def _output_rows(self, groups: "_Groups", found: list[Optional[dict]], accs: list[list],
                     counts: list[int], last_rows: list[dict]
                     ) -> tuple[list[tuple[dict, Optional[dict]]], set[int]]:
        """Per touched group its new count, accumulators and last row, and its output row; the
        instances where an output row fails."""
        failed: set[int] = set()
        updates: list[tuple[dict, Optional[dict]]] = []
        output_row = self._output_row if self.items is not None else self.agg.output_row
        alias = self.alias
        for inst, old, count, acc, row in zip(groups.inst, found, counts, map(list, zip(*accs)),
                                              last_rows):
            group = {"n": (old["n"] if old is not None else 0) + count, "acc": acc, "row": {alias: row}}
            new = None
            if inst not in failed:
                try:
                    new = output_row(group)
                except SplashError:
                    failed.add(inst)
            updates.append((group, new))
        return updates, failed

    def _apply(self, states: dict[int, dict], groups: "_Groups", found: list[Optional[dict]],
               updates: list[tuple[dict, Optional[dict]]], last: np.ndarray, seqs: list[int],
               failed: set[int], out: dict[int, list[tuple[int, Output]]], now: int) -> None:
        """Write each group into its instance's state, in the order of the groups' last rows, and
        its change through the window's store (KEEP ALL: nothing is evicted, and a group's key is
        its own for good, see ccl.plan.physical.columnar_aggregation) into ``out``."""
        store, settle, new_group = self.engine.output.store, self.agg.settle, self.agg.new_group
        positions = last.tolist()
        for j in np.argsort(last, kind="stable").tolist():
            inst = groups.inst[j]
            if inst in failed:
                continue
            state = states[inst]
            agg_state, window = state["selects"][0]["agg"], state["output"]
            (group, new), p, seq, gkey = updates[j], positions[j], seqs[j], groups.keys[j]
            target = found[j]
            if target is None:
                target = agg_state["groups"][gkey] = new_group()
            target["n"], target["acc"], target["row"] = group["n"], group["acc"], group["row"]
            emits = out.get(inst)
            if emits is None:
                emits = out[inst] = []
            for change in settle(agg_state, gkey, new, seq):
                done = (store.delete(window, change.key, seq) if change.op == "d"
                        else store.upsert(window, change.key, change.new, seq, now))  # type: ignore[arg-type]
                for c in done:
                    emits.append((p, emit_of(c)))

    def _sharing_keys(self, states: dict[int, dict], groups: "_Groups",
                      updates: list[tuple[dict, Optional[dict]]]) -> set[int]:
        """The instances where two groups' output rows would meet on one key of the window (the
        key is no function of the group, or casts make it so): the order in which the engine
        applies their rows decides what the window keeps, so their batch is the engine's."""
        clashing: set[int] = set()
        taken: dict[tuple, tuple] = {}  # (instance, key) -> the group showing it after the batch
        for inst, gkey, (_, new) in zip(groups.inst, groups.keys, updates):
            if new is None or inst in clashing:
                continue
            key = tuple(new.get(k) for k in self.agg.key)
            state = states.get(inst)
            holder = state["selects"][0]["agg"]["out"].get(key) if state is not None else None
            if taken.setdefault((inst, key), gkey) != gkey or holder not in (None, gkey):
                clashing.add(inst)
        return clashing


def _prefetch(states: dict[int, dict], insts: Any, keys: list[tuple], part: str,
              window: bool = False) -> None:
    """Have each instance's aggregate ``part`` (or output window's rows: ``window``) read the
    keys a batch will touch at once, where it is a mapping over the bucket's state store
    (runtime/state/rows.py ``StoredRows.prefetch``; a dict has nothing to read)."""
    by_inst: dict[int, list[tuple]] = {}
    for inst, key in zip(insts, keys):
        by_inst.setdefault(inst, []).append(key)
    for inst, wanted in by_inst.items():
        state = states.get(inst)
        if state is not None:
            held = state["output"]["rows"] if window else state["selects"][0]["agg"][part]
            fetch = getattr(held, "prefetch", None)
            if fetch is not None:
                fetch(wanted)


def _position(entry: tuple[int, Output]) -> int:
    return entry[0]


class _Batch:
    """A bucket's events (rows that did not come bad) in processing order, read column by column
    on demand; ``bad`` collects the reasons of the events that fail (by position)."""

    def __init__(self, rows: BucketRows, events: np.ndarray, names: list[str], alias: str) -> None:
        self.rows, self.events, self.names, self.alias = rows, events, names, alias
        self.inst = rows.inst[events]
        self.seq = rows.seq[events]
        self.ports = rows.port[events]
        self.ops = rows.op.take(events)
        self.bad: dict[int, str] = {}

    def values(self, name: str, positions: np.ndarray) -> list:
        """Column ``name`` at event ``positions``."""
        return self.array(name, positions).to_pylist()

    def encodable(self, name: str) -> bool:
        """Whether Arrow tells values of column ``name`` apart as Python does."""
        import pyarrow as pa
        t = self.rows.values.type.field(name).type
        return pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_boolean(t)

    def array(self, name: str, positions: np.ndarray) -> Any:
        """Column ``name`` at event ``positions``, as an Arrow array."""
        return self.rows.values.field(name).take(self.events[positions])

    def numbers(self, name: str, positions: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """Column ``name`` at event ``positions`` as ``(NumPy array, valid mask)`` (nulls as 0);
        for a count, only the mask matters."""
        taken = self.array(name, positions)
        valid = np.asarray(taken.is_valid(), dtype=bool)
        if kind == "count":
            return valid, valid
        return np.asarray(taken.fill_null(0).to_numpy(zero_copy_only=False), dtype=_NUMPY[kind]), valid

    def dict_at(self, position: int) -> dict:
        """The event at ``position`` as the engine receives it: every source column."""
        return self.rows.values[int(self.events[position])].as_py()

    def dicts(self, positions: np.ndarray) -> list[dict]:
        """The events at ``positions`` as the engine receives them."""
        return self.rows.values.take(self.events[positions]).to_pylist()


class _Getter:
    """The values of one expression over events: a plain column read as it is, or else the
    engine's compiled expression row by row."""

    def __init__(self, column: Optional[str], compiled: Optional[Callable], alias: str) -> None:
        self.column, self.compiled, self.alias = column, compiled, alias

    def key_values(self, batch: _Batch, live: np.ndarray) -> Any:
        """:meth:`values` for grouping: an Arrow array when Arrow's equality of the values is
        Python's (a plain string, integer or boolean column), else a list."""
        if self.column is not None and batch.encodable(self.column):
            return batch.array(self.column, live)
        return self.values(batch, live)

    def values(self, batch: _Batch, live: np.ndarray) -> list:
        """The values at event positions ``live`` (a failing row gets None and its reason in
        ``batch.bad``; a row bad already is not evaluated)."""
        if self.column is not None:
            return batch.values(self.column, live)
        out: list = []
        bad = batch.bad
        for p, row in zip(live.tolist(), batch.dicts(live)):
            if p in bad:
                out.append(None)
                continue
            try:
                out.append(self.compiled({self.alias: row}))  # type: ignore[misc]
            except SplashError as e:
                bad[p] = str(e)
                out.append(None)
        return out


class _EngineOperands:
    """The kernel's backend of the columnar lowering: each operand a :class:`_Getter` of the plain
    column the walk found, or else of the engine's compiled expression."""

    def __init__(self, where: Optional[Callable], agg: Any, alias: str) -> None:
        self.where, self.agg, self.alias = where, agg, alias

    def operand(self, role: str, index: tuple[int, ...], column: Optional[str]) -> _Getter:
        compiled = (self.where if role == "where" else self.agg.group_filter if role == "group_filter"
                    else self.agg.group_by[index[0]] if role == "group_by"
                    else self.agg.aggregates[index[0]].args[index[1]])
        return _Getter(column, compiled, self.alias)


class _Groups:
    """The groups of a batch's contributing rows, one per (instance, GROUP BY values), as the
    engine's dictionary of groups tells them apart (Python's equality), and each row's group:
    ``ids`` (per row), ``inst`` and ``keys`` (per group)."""

    def __init__(self, inst: np.ndarray, keys: list[Any]) -> None:
        if all(not isinstance(k, list) for k in keys):
            self._encoded(inst, keys)
            return
        index: dict[tuple, int] = {}
        ids = [index.setdefault(entry, len(index)) for entry in zip(inst.tolist(), *map(_as_list, keys))]
        self.ids = np.array(ids, dtype=np.int64)
        self.inst = [entry[0] for entry in index]
        self.keys = [tuple(entry[1:]) for entry in index]

    def _encoded(self, inst: np.ndarray, keys: list[Any]) -> None:
        """Key columns as Arrow arrays of strings, integers or booleans, whose Arrow equality is
        Python's: rows numbered by dictionary codes instead of a Python dictionary."""
        import pandas as pd
        import pyarrow.compute as pc
        codes = pd.factorize(inst)[0]
        for array in keys:
            encoded = pc.dictionary_encode(array, null_encoding="encode")
            size = len(encoded.dictionary)
            codes = pd.factorize(codes.astype(np.int64) * size + np.asarray(encoded.indices))[0]
        count = int(codes.max()) + 1 if len(codes) else 0
        first = np.full(count, len(codes), dtype=np.int64)
        np.minimum.at(first, codes, np.arange(len(codes)))
        self.ids = codes.astype(np.int64)
        self.inst = inst[first].tolist()
        values = [array.take(first).to_pylist() for array in keys]
        self.keys = list(zip(*values)) if values else [()] * count


def _as_list(values: Any) -> list:
    """Values of a getter (a list, or an Arrow array) as a list."""
    return values if isinstance(values, list) else values.to_pylist()


def _fold_rows(agg: Any, accs: list, groups: _Groups, values: list[list], seqs: np.ndarray) -> None:
    """Fold each row into its group's accumulator with the engine's ``add``, in order."""
    no_rows: dict = {}
    for j, (g, seq) in enumerate(zip(groups.ids.tolist(), seqs.tolist())):
        accs[g] = agg.add(accs[g], [v[j] for v in values], seq, seq, no_rows)


def _add_counts(accs: list, counts: np.ndarray) -> None:
    for g in np.flatnonzero(counts).tolist():
        accs[g] = accs[g] + int(counts[g])


def _kept(values: list, keep: np.ndarray) -> list:
    return [v for v, k in zip(values, keep.tolist()) if k]


def _largest(inst: np.ndarray, seqs: np.ndarray) -> dict[int, int]:
    """The largest sequence number among each instance's events (in processing order: by
    instance, then sequence number, the last of each instance's run)."""
    if not len(inst):
        return {}
    ends = np.append(np.flatnonzero(inst[1:] != inst[:-1]), len(inst) - 1)
    return dict(zip(inst[ends].tolist(), seqs[ends].tolist()))


def _finished(states: dict[int, dict], batch: "_Batch", left: set[int],
              came_bad: np.ndarray) -> dict[int, list[int]]:
    """Raise each run instance's sequence number to its largest in the batch, as the engine does;
    the rows that came bad (bucket indexes), by instance."""
    for inst, seq in _largest(batch.inst, batch.seq).items():
        state = states[inst] if inst not in left else None
        if state is not None and (state["seq"] is None or seq > state["seq"]):
            state["seq"] = seq
    arrivals: dict[int, list[int]] = {}
    for i in came_bad.tolist():
        arrivals.setdefault(int(batch.rows.inst[i]), []).append(i)
    return arrivals


def _shared_sequence_numbers(inst: np.ndarray, seq: np.ndarray) -> set[int]:
    """The instances in which two events (in processing order) share a sequence number."""
    same = (inst[1:] == inst[:-1]) & (seq[1:] == seq[:-1])
    return set(inst[1:][same].tolist())


def _running(agg: Any, kind: Optional[str], accs: list, ids: list[int], values: Any,
             seqs: list[int]) -> list:
    """The aggregate's result after each row (the rows in order, ``ids`` their groups), leaving
    each group's final accumulator in ``accs``; the engine's ``add`` and ``result``, written out
    for count, sum, avg, min and max (a result is the very object the engine's would be: a max that
    does not move keeps its object, so a NaN equals itself as it does in the engine's rows)."""
    out: list = []
    if kind is None:
        no_rows: dict = {}
        columns = values
        for j, g in enumerate(ids):
            accs[g] = acc = agg.add(accs[g], [v[j] for v in columns], seqs[j], seqs[j], no_rows)
            out.append(agg.result(acc))
        return out
    xs = [None] * len(ids) if agg.star else (values[0] if isinstance(values, list) else values)
    fn = agg.fn
    if fn == "count":
        for g, x in zip(ids, xs):
            if agg.star or x is not None:
                accs[g] = accs[g] + 1
            out.append(accs[g])
    elif fn in ("sum", "avg"):
        for g, x in zip(ids, xs):
            acc = accs[g]
            if x is not None:
                accs[g] = acc = [x if acc[1] == 0 else acc[0] + x, acc[1] + 1]
            out.append((acc[0] if fn == "sum" else float(acc[0]) / float(acc[1])) if acc[1] else None)
    else:
        biggest = fn == "max"
        for g, x in zip(ids, xs):
            acc = accs[g]
            if x is not None:
                if acc is None:
                    acc = x
                elif x != x or acc != acc:  # NaN is larger than every number
                    if (acc == acc) if biggest else (x == x):
                        acc = x
                elif (x > acc) if biggest else (x < acc):
                    acc = x
                accs[g] = acc
            out.append(acc)
    return out
