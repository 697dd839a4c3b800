"""The join of one stream with windows, run a bucket's micro-batch at a time.

``ccl.plan.physical.join_kernel`` picks the elements: a stream selecting from one stream (its first
source) INNER or LEFT joined with one or more windows, each ON equalities of columns, with select
items and WHERE over the sources' columns (pure built-in functions only). In the engine
(runtime/engine/element.py, runtime/engine/join.py) such a join keeps the windows' rows (the
select's source mirrors and the Joiner's stores and hash indexes); a stream row is a transient
insert joined with what the windows hold when it comes, and a window change only changes the
stores. With no window (``ccl.plan.physical.select_kernel``, the plan's ``select`` kernel: a
stream selecting from one stream with a WHERE or items the native stream path does not take),
each stream insert is its one joined row: the same evaluation a column at a time, the same bad
records and transaction merging (the engine keys a stream row by its sequence number alone).

The kernel takes a bucket's rows in BucketRun's order (instance, then the ports of ``first_ports``
first, sequence number, source, sub-number, port) and, on the engine's own state:

- applies every row that is not a stream insert (window inserts, updates and deletes, stream
  deletes, unknown opcodes and ports) through the engine itself (:meth:`Engine.process`), so the
  windows' stores change exactly as the engine changes them, in the engine's order relative to
  the stream rows, and such a row's bad record is the engine's;
- looks each stream insert up in the join's hash indexes as the stores stand at that row (a loop
  of dictionary look-ups: no Event, Change or joined-row dict per row), keeping the matched
  window rows (the stores replace a changed row, never change it in place, so a row looked up
  stays as it was);
- evaluates WHERE and the select items over all the bucket's joined rows at once, a column at a
  time: a plain column of a type the engine reads as it is is taken as it is, others through the
  engine's compiled expressions, and each output column is cast by the engine's
  :func:`coerce_column`;
- a stream row one of whose joined rows fails (an expression or a cast) is run again by the
  engine's own WHERE and projection (:meth:`_Select.finish`) on the rows it joined, which gives its
  bad record (or its rows) exactly.

Stream rows that share a sequence number one after the other are one engine transaction: their
bad records come first, then their joined rows merged by key, as the engine's ``consolidate``
merges them (a joined row's key holds the stream row's sequence number, so two rows of one
transaction joining the same window rows give one output: the last one's, at the first one's
place). An instance whose state the kernel cannot read, or with a stream row without values in
such a transaction, is left untouched and handed back to the engine for the batch.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Optional

import numpy as np

from runtime.engine.changes import Bad, Change, Event
from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import SplashError, coerce_column
from runtime.engine.join import null_filled
from runtime.engine.parts import field_ref
from runtime.engine.stages import RowRefused, consolidate, truth

__all__ = ["JoinKernel"]

INSERTS = ("i", "u", "p")
# CCL column type -> the Python type of the values the engine's expressions read as they are
# (runtime.engine.expr: a value of that type, an integer within 32 bits; null is null)
_AS_IS = {"integer": int, "float": float, "string": str, "boolean": bool}
# ... and those whose values, read from a column of that type and cast to it, are the values
_SAME = {**_AS_IS, "long": int}


class JoinKernel:
    """The join of ``engine``'s element (one that ``ccl.plan.physical.join_kernel`` takes) over
    whole buckets; see the module docstring."""

    def __init__(self, engine: Engine, plan: dict, first_ports: frozenset[int] = frozenset(),
                 select: Optional[int] = None) -> None:
        # ``select``: run select ``select`` of a UNION (runtime/engine/kernels/union.py runs the
        # bucket and uses this one's evaluation and outputs); None: the element's one select
        if not isinstance(engine, Engine) or engine.declared is not None or engine.input is not None \
                or engine.kind != "stream" \
                or (len(engine.selects) != 1 if select is None else not 0 <= select < len(engine.selects)):
            raise ValueError(f"{engine.name} is not a join the join kernel runs")
        si = select or 0
        sel = engine.selects[si]
        joiner = sel.joiner
        # no joiner: one unstored stream source, each insert its one "joined" row
        alone = (joiner is None and len(sel.sources) == 1 and sel.sources[0].kind == "stream"
                 and sel.sources[0].store is None)
        if (not alone and joiner is None) or sel.aggregator is not None or sel.matcher is not None \
                or sel.projection is None or sel.projection.extra is not None \
                or sel.refused is not None or (joiner is not None and (
                    joiner.stored[0] or not all(joiner.stored[1:])
                    or any(lv.kind not in ("inner", "left") or lv.residual or not lv.eq_left
                           for lv in joiner.levels))):
            raise ValueError(f"{engine.name} is not a join the join kernel runs")
        self.engine, self.sel, self.joiner = engine, sel, joiner
        self.first_ports = first_ports
        self.aliases = list(sel.aliases)
        self.levels = joiner.levels if joiner is not None else []
        types = [{c: str(t).strip().lower() for c, t in src.columns} for src in sel.sources]
        spec = engine.element.query.selects[si]
        position = {alias: k for k, alias in enumerate(self.aliases)}

        def value(expr: object, compiled: Callable) -> _Value:
            ref = field_ref(expr)
            if ref is not None and ref[0] in position and ref[1] in types[position[ref[0]]]:
                k = position[ref[0]]
                return _Value(compiled, k, ref[1], types[k][ref[1]])
            return _Value(compiled, None, None, None)
        self.where = value(spec.where, sel.where) if spec.where else None
        # the projection's row: each output column from the last item of its name (or null)
        items = {name: value(item.expr, f)
                 for item, (name, f) in zip(spec.items, sel.projection.items)}
        self.outputs = [(name, ctype, items.get(name)) for name, ctype in engine.columns]
        # per level: where each equated value comes from, (source index, column)
        self.eq = [[(position[a], c) for a, c in lv.eq_left] for lv in self.levels]
        self.stream_eq = sorted({c for level in self.eq for k, c in level if k == 0})

    # --- a bucket ---------------------------------------------------------------------------

    def run(self, states: dict[int, dict], rows: BucketRows, ports: list[Any],
            now: int) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Apply a bucket's rows (``ports[k]``: the struct array of port ``k``'s values, one per
        row) to the instances' ``states``: the instances run (ascending), those left untouched
        for the engine, and the changes and bad records of the run ones."""
        order, came = rows.engine_order(self.first_ports)
        events = order[~came]
        inst, seq, port = rows.inst[events], rows.seq[events], rows.port[events]
        valid0 = np.asarray(ports[0].is_valid(), dtype=bool)[events]
        # each event's transaction (the position of its first event), for the stream's port:
        # consecutive rows of one instance, sequence number and port (ESP: one upstream row)
        joins_last = (inst[1:] == inst[:-1]) & (seq[1:] == seq[:-1]) & (port[1:] == port[:-1]) & (port[1:] == 0)
        starts = np.flatnonzero(np.r_[True, ~joins_last])
        tx = np.repeat(starts, np.diff(np.r_[starts, len(events)]))
        shared = np.zeros(len(events), dtype=bool)
        shared[1:] |= joins_last
        shared[:-1] |= joins_last
        # a stream row without values in a transaction of several (the engine would join it in
        # the transaction) hands its instance back
        left, ran = rows.instances(states, self._readable, self.engine.initial_state,
                                   inst[shared & ~valid0].tolist())
        ops = rows.op.take(events)
        import pyarrow as pa
        import pyarrow.compute as pc
        inserts = np.asarray(pc.is_in(ops, value_set=pa.array(list(INSERTS))).fill_null(False),
                             dtype=bool)
        joining = (port == 0) & inserts & valid0
        found = Found(len(self.levels))
        extra: dict[int, list] = {}   # event position -> its outputs, when not joined rows
        self._look_up(states, ports, events, inst, seq, port, ops, joining, left, found, extra,
                      now)
        stream = ports[0].take(events[np.asarray(found.at, dtype=np.int64)])
        columns, live = self.evaluate(found, stream, seq, extra)
        finish_sequence_numbers(states, inst, seq, left)
        emitted = np.asarray(found.at, dtype=np.int64)[live]
        if shared.any():
            changes = self.merged(found, columns, live, emitted, extra, inst, seq, tx, shared)
        else:
            changes = self.changes_of(columns, emitted, extra, inst, seq)
        arrivals = rows.arrivals(order[came])
        return ([InstanceRun(i, [], arrivals.get(i, [])) for i in ran], sorted(left), changes)

    def _readable(self, state: Any) -> bool:
        """Whether ``state`` has the shape the engine's initial state has for this element."""
        try:
            join = state["selects"][0]["join"]
            if self.joiner is None:
                return len(state["selects"]) == 1 and "seq" in state and join is None
            return (len(state["selects"]) == 1 and "seq" in state
                    and len(join["ridx"]) == len(self.levels) and len(join["src"]) == len(self.aliases)
                    and all(isinstance(x, (dict, MutableMapping))
                            for x in join["ridx"] + join["src"][1:]))
        except (KeyError, IndexError, TypeError, AttributeError):
            return False

    def _look_up(self, states: dict[int, dict], ports: list[Any],
                 events: np.ndarray, inst: np.ndarray, seq: np.ndarray, port: np.ndarray, ops: Any,
                 joining: np.ndarray, left: set[int], found: "Found", extra: dict[int, list],
                 now: int) -> None:
        """Walk the events in order: a stream insert is looked up in the join's indexes as they
        stand (its joined rows go to ``found``), any other row goes through the engine (its bad
        record or outputs to ``extra``)."""
        eq_values = {c: ports[0].field(c).take(events).to_pylist() for c in self.stream_eq}
        inst_l, join_l = inst.tolist(), joining.tolist()
        levels, eq = self.levels, self.eq
        single = (len(levels) == 1 and len(eq[0]) == 1)
        column = eq_values[eq[0][0][1]] if single else None
        keeps = levels[0].left_keeps if levels else False
        at, rights, keys = found.at, found.rights, found.keys
        current, ridx, src, state = None, None, None, None
        for e, i in enumerate(inst_l):
            if i in left:
                continue
            if i != current:
                current, state = i, states[i]
                join = state["selects"][0]["join"]
                if join is not None:
                    ridx, src = join["ridx"], join["src"]
            if not join_l[e]:
                self.other_row(state, e, ports, events, seq, port, ops, extra, now)
                continue
            if not levels:  # no window: the stream row is its own joined row
                at.append(e)
                continue
            if single:  # one window, one equated stream column: the usual enrichment
                v = column[e]  # type: ignore[index]
                bucket = ridx[0].get((v,)) if v is not None else None
                if bucket:
                    store = src[1]
                    for rk in bucket:
                        at.append(e)
                        rights[0].append(store[rk])
                        keys[0].append(rk)
                elif keeps:
                    at.append(e)
                    rights[0].append(None)
                    keys[0].append(None)
                continue
            combos: list[tuple[tuple, tuple]] = [((), ())]
            for j, level in enumerate(levels):
                grown = []
                for matched, mkeys in combos:
                    values = []
                    for k, c in eq[j]:
                        row = matched[k - 1] if k else None
                        x = eq_values[c][e] if k == 0 else (row.get(c) if row is not None else None)
                        if x is None:
                            break
                        values.append(x)
                    bucket = ridx[j].get(tuple(values)) if len(values) == len(eq[j]) else None
                    if bucket:
                        store = src[j + 1]
                        grown += [(matched + (store[rk],), mkeys + (rk,)) for rk in bucket]
                    elif level.left_keeps:
                        grown.append((matched + (None,), mkeys + (None,)))
                combos = grown
            for matched, mkeys in combos:
                at.append(e)
                for j in range(len(levels)):
                    rights[j].append(matched[j])
                    keys[j].append(mkeys[j])

    def other_row(self, state: dict, e: int, ports: list[Any], events: np.ndarray,
               seq: np.ndarray, port: np.ndarray, ops: Any, extra: dict[int, list], now: int) -> None:
        """A row that is no stream insert, through the engine (a transaction of its own: rows
        sharing a sequence number on a port other than the stream's change no output)."""
        p, s = int(port[e]), int(seq[e])
        values = (ports[p][int(events[e])].as_py() if p < len(ports) else None) or {}
        outputs = self.engine.process(state, [Event(p, ops[e].as_py(), s, values)], now)
        if outputs:  # a bad record (a window change joins nothing: the stream is not stored)
            extra[e] = [("bad", o.reason, dict(o.values)) if isinstance(o, Bad) else ("row", o.values, None)
                        for o in outputs]

    # --- WHERE and the select items, over all joined rows -----------------------------------

    def evaluate(self, found: "Found", stream: Any, seq: np.ndarray, extra: dict[int, list]
                  ) -> tuple[list[list], np.ndarray]:
        """The output columns of the joined rows that pass WHERE (cast to the element's types)
        and which joined rows those are; a stream row with a failing joined row is run by the
        engine's WHERE and projection instead (its outputs or bad record in ``extra``)."""
        n = len(found.at)
        failing: set[int] = set()   # joined rows whose evaluation failed
        reader = _Reader(self, found, stream)
        if self.where is not None and n:
            tests = reader.values(self.where, np.arange(n), failing)
            passed = np.array([truth(t) for t in tests], dtype=bool)
            passed[list(failing)] = False
        else:
            passed = np.ones(n, dtype=bool)
        live = np.flatnonzero(passed)
        columns: list[list] = []
        for name, ctype, item in self.outputs:
            if item is None:
                columns.append([None] * len(live))
                continue
            same = reader.as_cast(item, ctype, live)
            if same is not None:
                columns.append(same)
                continue
            values = reader.values(item, live, failing)
            try:
                columns.append(coerce_column(values, ctype))
            except SplashError:  # rare: find the rows, one by one
                column = []
                for j, v in zip(live.tolist(), values):
                    try:
                        column.append(coerce_column([v], ctype)[0])
                    except SplashError:
                        failing.add(j)
                        column.append(None)
                columns.append(column)
        at = np.asarray(found.at, dtype=np.int64)
        if failing:
            redo = sorted({found.at[j] for j in failing})
            self._redo(redo, found, reader, seq, extra)
            keep = ~np.isin(at[live], redo)
            live = live[keep]
            columns = [[v for v, k in zip(col, keep.tolist()) if k] for col in columns]
        return columns, live

    def _redo(self, redo: list[int], found: "Found", reader: "_Reader", seq: np.ndarray,
              extra: dict[int, list]) -> None:
        """Run stream rows (event positions ``redo``) through the engine's WHERE and projection
        on the rows they joined: their outputs, or the engine's bad record."""
        wanted = set(redo)
        rows_of: dict[int, list[int]] = {}
        for j, e in enumerate(found.at):
            if e in wanted:
                rows_of.setdefault(e, []).append(j)
        sel = self.sel
        columns = self.joiner.columns if self.joiner is not None else None
        for e in redo:
            joined = rows_of[e]
            s = int(seq[e])
            changes = []
            for j in joined:
                new = {self.aliases[0]: reader.stream_row(j)}
                for lv, level in enumerate(self.levels):
                    new[level.right_alias] = found.rights[lv][j]
                key = ((s,),) + tuple(found.keys[lv][j] for lv in range(len(self.levels)))
                changes.append(Change("i", key, None,
                                      null_filled(new, columns) if columns is not None else new, s))
            try:
                out = sel.finish({}, changes)
            except (SplashError, RowRefused) as ex:
                extra[e] = [("bad", str(ex), reader.stream_row(joined[0]))]
                continue
            extra[e] = [("row", emit_of(Change("i", c.key, None, c.new, c.seq)).values, c.key)
                        for c in consolidate(out) if c.op != "d"]

    # --- outputs ------------------------------------------------------------------------------

    def changes_of(self, columns: list[list], emitted: np.ndarray, extra: dict[int, list],
                 inst: np.ndarray, seq: np.ndarray) -> RowChanges:
        """The outputs in the engine's order (by event position: an event gives joined rows or
        else ``extra`` outputs, never both), numbered within each instance."""
        names = [name for name, _, _ in self.outputs]
        out = RowChanges([], [], [], [], [[] for _ in names], [])
        tail = [(e, o) for e in sorted(extra) for o in extra[e]]
        positions = np.concatenate([emitted, np.array([e for e, _ in tail], dtype=np.int64)])
        count = len(positions)
        if not count:
            return out
        perm = np.argsort(positions, kind="stable")
        positions = positions[perm]
        insts = inst[positions]
        starts = np.flatnonzero(np.r_[True, insts[1:] != insts[:-1]])
        subs = (np.arange(count) - np.repeat(starts, np.diff(np.r_[starts, count]))).tolist()
        insts_l, seqs_l = insts.tolist(), seq[positions].tolist()
        if not tail:  # only joined rows, already in order
            out.inst, out.seq, out.sub, out.op, out.values = insts_l, seqs_l, subs, ["i"] * count, columns
            return out
        n = len(emitted)
        for j, k in enumerate(perm.tolist()):
            if k >= n and tail[k - n][1][0] == "bad":
                _, reason, row = tail[k - n][1]
                out.bad.append((insts_l[j], seqs_l[j], subs[j], reason, row))
                continue
            out.inst.append(insts_l[j])
            out.seq.append(seqs_l[j])
            out.sub.append(subs[j])
            out.op.append("i")
            if k < n:
                for column, source in zip(out.values, columns):
                    column.append(source[k])
            else:
                row = tail[k - n][1][1]
                for column, name in zip(out.values, names):
                    column.append(row.get(name))
        return out


    def merged(self, found: "Found", columns: list[list], live: np.ndarray, emitted: np.ndarray,
                extra: dict[int, list], inst: np.ndarray, seq: np.ndarray, tx: np.ndarray,
                shared: np.ndarray) -> RowChanges:
        """:meth:`changes_of` where stream rows share a sequence number: as in the engine, the bad
        records of a transaction come first, then its joined rows merged by key (the joined rows'
        keys hold the sequence number, so two rows of a transaction joining the same window rows
        meet on one key: one output, the last one's values at the first one's place)."""
        names = [name for name, _, _ in self.outputs]
        entries: list[tuple[tuple, int, list, Any]] = []   # (order, event, values, bad or None)
        merged: dict[tuple, int] = {}   # (transaction, key) -> index in entries
        emitted_l, live_l = emitted.tolist(), live.tolist()

        def add(e: int, j: int, values: list, key: Any, bad: Any) -> None:
            if not shared[e]:
                entries.append(((e, 0, 0, j), e, values, bad))
            elif bad is not None:
                entries.append(((int(tx[e]), 0, e, j), e, values, bad))
            else:
                at = merged.get((int(tx[e]), key))
                if at is None:
                    merged[(int(tx[e]), key)] = len(entries)
                    entries.append(((int(tx[e]), 1, len(entries), 0), e, values, None))
                else:
                    entries[at] = (entries[at][0], e, values, None)
        for k, (e, j) in enumerate(zip(emitted_l, live_l)):
            key = ((int(seq[e]),),) + tuple(found.keys[lv][j] for lv in range(len(self.levels)))
            add(e, k, [column[k] for column in columns], key, None)
        for e in sorted(extra):
            for n, o in enumerate(extra[e]):
                if o[0] == "bad":
                    add(e, n, [], None, (o[1], o[2]))
                else:
                    add(e, n, [o[1].get(name) for name in names], o[2], None)
        entries.sort(key=lambda entry: entry[0])
        out = RowChanges([], [], [], [], [[] for _ in names], [])
        sub: dict[int, int] = {}
        for _, e, values, bad in entries:
            i = int(inst[e])
            n = sub[i] = sub.get(i, -1) + 1
            if bad is not None:
                out.bad.append((i, int(seq[e]), n, bad[0], bad[1]))
                continue
            out.inst.append(i)
            out.seq.append(int(seq[e]))
            out.sub.append(n)
            out.op.append("i")
            for column, v in zip(out.values, values):
                column.append(v)
        return out


class Found:
    """The joined rows of a bucket's stream rows, in the engine's order: per joined row the event
    position of its stream row (``at``), and per join level the window row it matched (None for
    the missing side of a LEFT join) and that row's key."""

    def __init__(self, levels: int) -> None:
        self.at: list[int] = []
        self.rights: list[list] = [[] for _ in range(levels)]
        self.keys: list[list] = [[] for _ in range(levels)]


class _Value:
    """An expression over joined rows: its compiled form, and when it is a plain column, the
    source (index) and column it reads and the column's type."""

    def __init__(self, compiled: Callable, source: Optional[int], column: Optional[str],
                 ctype: Optional[str]) -> None:
        self.compiled, self.source, self.column, self.ctype = compiled, source, column, ctype


class _Reader:
    """Values of expressions over the joined rows (positions into :class:`Found`)."""

    def __init__(self, kernel: JoinKernel, found: Found, stream: Any) -> None:
        self.kernel, self.found, self.stream = kernel, found, stream
        self._rows: Optional[list[dict]] = None
        self._columns: dict[str, list] = {}

    def stream_row(self, j: int) -> dict:
        """The stream row of joined row ``j``, as the engine holds it."""
        if self._rows is None:
            self._rows = self.stream.to_pylist()
        return dict(self._rows[j])

    def values(self, value: _Value, positions: np.ndarray, failing: set[int]) -> list:
        """``value`` at joined rows ``positions`` (a failing row gets None, added to ``failing``)."""
        if value.source is not None:
            raw = self._plain(value, positions)
            kind = _AS_IS.get(value.ctype or "")
            if kind is not None and value.source == 0 \
                    and _arrow_holds(self.stream.type.field(value.column).type, value.ctype):
                return raw
            if kind is not None and all(v is None or (type(v) is kind and (
                    kind is not int or -2**31 <= v < 2**31)) for v in raw):
                return raw
            alias, column = self.kernel.aliases[value.source], value.column
            return self._each(value.compiled, positions,
                              lambda j, k: {alias: {column: raw[k]}}, failing)
        return self._each(value.compiled, positions, self._joined, failing)

    def as_cast(self, value: _Value, ctype: str, positions: np.ndarray) -> Optional[list]:
        """``value`` at ``positions`` cast to the output type ``ctype``, when it is a plain column of
        that very type and its values are as such a column holds them: the values as they are
        (reading and casting them gives them back; a long, which the engine carries as SPLASH's
        Long, an int subclass, reaches the output table as the same integer); else None."""
        kind = _SAME.get(ctype.strip().lower())
        if value.source is None or kind is None or value.ctype != ctype.strip().lower():
            return None
        raw = self._plain(value, positions)
        if value.source == 0 and _arrow_holds(self.stream.type.field(value.column).type, value.ctype):
            return raw  # (the Arrow type of the stream's column says what its values are)
        low, high = (-2**63, 2**63) if value.ctype == "long" else (-2**31, 2**31)
        if all(v is None or (type(v) is kind and (kind is not int or low <= v < high)) for v in raw):
            return raw
        return None

    def _plain(self, value: _Value, positions: np.ndarray) -> list:
        if value.source == 0:
            column = self._columns.get(value.column)  # type: ignore[arg-type]
            if column is None:
                column = self._columns[value.column] = self.stream.field(value.column).to_pylist()  # type: ignore[arg-type]
            return column if len(positions) == len(column) else [column[j] for j in positions.tolist()]
        rights, c = self.found.rights[value.source - 1], value.column
        return [None if rights[j] is None else rights[j].get(c) for j in positions.tolist()]

    def _joined(self, j: int, k: int) -> dict:
        if self._rows is None:
            self._rows = self.stream.to_pylist()
        rows = {self.kernel.aliases[0]: self._rows[j]}
        if self.kernel.joiner is None:
            return rows
        for lv, level in enumerate(self.kernel.levels):
            rows[level.right_alias] = self.found.rights[lv][j]
        return null_filled(rows, self.kernel.joiner.columns)

    @staticmethod
    def _each(compiled: Callable, positions: np.ndarray, rows_of: Callable[[int, int], dict],
              failing: set[int]) -> list:
        out = []
        for k, j in enumerate(positions.tolist()):
            if j in failing:
                out.append(None)
                continue
            try:
                out.append(compiled(rows_of(j, k)))
            except SplashError:
                failing.add(j)
                out.append(None)
        return out


def _arrow_holds(arrow_type: Any, ctype: Optional[str]) -> bool:
    """Whether every value of an Arrow column of ``arrow_type``, as Python gives it, is null or of
    the Python type :data:`_SAME` gives for the CCL type ``ctype`` (an integer within its range)."""
    import pyarrow as pa
    t = pa.types
    checks = {"string": lambda: t.is_string(arrow_type) or t.is_large_string(arrow_type),
              "float": lambda: t.is_float64(arrow_type) or t.is_float32(arrow_type),
              "boolean": lambda: t.is_boolean(arrow_type),
              "integer": lambda: (t.is_int8(arrow_type) or t.is_int16(arrow_type) or t.is_int32(arrow_type)
                                  or t.is_uint8(arrow_type) or t.is_uint16(arrow_type)),
              "long": lambda: (t.is_integer(arrow_type) and not t.is_uint64(arrow_type))}
    check = checks.get(ctype or "")
    return check is not None and bool(check())


def finish_sequence_numbers(states: dict[int, dict], inst: np.ndarray, seq: np.ndarray,
                             left: set[int]) -> None:
    """Raise each run instance's sequence number to its largest event's, as the engine does."""
    if not len(inst):
        return
    ends = np.append(np.flatnonzero(inst[1:] != inst[:-1]), len(inst) - 1)
    starts = np.r_[0, ends[:-1] + 1]
    for i, a, b in zip(inst[ends].tolist(), starts.tolist(), ends.tolist()):
        if i in left:
            continue
        top = int(seq[a:b + 1].max())
        state = states[i]
        if state["seq"] is None or top > state["seq"]:
            state["seq"] = top
