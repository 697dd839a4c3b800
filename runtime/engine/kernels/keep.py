"""A window with a row-count or sliding time KEEP over one stream, run a bucket's micro-batch at
a time.

``ccl.plan.physical.keep_kernel`` picks the elements: a window with ``KEEP n ROWS [SLACK s]``,
``KEEP LAST`` or ``KEEP EVERY n ROWS`` (each with or without PER), or ``KEEP n SECONDS`` (whose
expiry at the batch's time, the engine's own ``expire``, comes first in every instance of the
bucket, and whose upserts set each row's time, with no PER groups), defined by one select from one
stream, with no aggregation, join, MATCHING, FROM KEEP, AGES, DECLARE or Flex, whose expressions
are pure. What the engine (runtime/engine/element.py) does with such an element, row by row, is:

- an event with an unknown opcode or port is a bad record; a delete or safedelete of a stream is
  nothing; any other opcode inserts the row;
- WHERE, then the select items (in item order), then the casts to the element's columns (in
  column order): the first failure makes the event a bad record;
- the rows of one upstream transaction (one sequence number and port) are merged by the window's
  key (the last row of each key, in order of each key's first row) and go through the window's
  store, whose KEEP evicts rows (deletes listed before the insert or update that caused them).

The kernel does the same with the column work done a column at a time: plain columns are read
straight from Arrow (and cast by ``coerce_column``, as the engine's ``coerce_row`` casts), other
expressions by the engine's compiled expressions row by row. The store's bookkeeping (rows by key,
row keys by PER group in order of their last change) is then kept in one tight loop over the
instance's rows, on the engine's own state, giving the engine's changes with its sequence and
sub-numbers as columns (:class:`~runtime.engine.columnar.RowChanges`), so that either the engine
or the kernel can run an instance's next batch.
"""
from __future__ import annotations

from itertools import islice
from operator import itemgetter
from typing import Any, Callable, Optional

import numpy as np

from ccl.plan.lowering import plain_column
from ccl.splash import as_type
from ccl.splash.convert import PLAIN_KINDS, from_python
from ccl.splash.values import Long
from runtime.engine.changes import OPS
from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine
from runtime.engine.expr import SplashError, coerce_column
from runtime.engine.store import COUNT_KINDS
from runtime.engine.stages import truth

__all__ = ["KeepKernel"]


class KeepKernel:
    """The window of ``engine`` (an :class:`Engine` of an element ``keep_kernel`` takes) over whole
    buckets; see the module docstring and runtime/engine/kernels/__init__.py (one port: its
    ``first_ports`` and ``ports`` are not needed)."""

    def __init__(self, engine: Engine, plan: dict, first_ports: frozenset[int] = frozenset()) -> None:
        if (not isinstance(engine, Engine) or engine.declared is not None or engine.input is not None
                or len(engine.selects) != 1):
            raise ValueError(f"{engine.name} is not a window over one stream the keep kernel runs")
        sel = engine.selects[0]
        store = engine.output.store
        if (sel.projection is None or sel.aggregator is not None or sel.joiner is not None
                or sel.matcher is not None or len(sel.sources) != 1 or sel.sources[0].store is not None
                or sel.sources[0].kind != "stream" or sel.refused is not None
                or sel.projection.extra is not None or store is None
                or store.kind not in COUNT_KINDS + ("time",) or store.aging is not None):
            raise ValueError(f"{engine.name} is not a window over one stream the keep kernel runs")
        self.engine = engine
        self.store = store
        self.alias = sel.aliases[0]
        source_types = {c: t for c, t in sel.sources[0].columns}
        spec = engine.element.query.selects[0]

        def column(expr: object) -> Optional[str]:
            col = plain_column(expr, self.alias)
            return col if col in source_types else None
        self.where: Optional[tuple[Optional[str], Callable]] = (
            (column(spec.where), sel.where) if spec.where is not None else None)  # type: ignore[assignment]
        # (column or None, the engine's compiled expression) per select item, in item order
        self.items = [(column(item.expr), compiled)
                      for item, (_, compiled) in zip(spec.items, sel.projection.items)]
        self.readers = {c: _reader(t) for c, t in source_types.items()}
        # the output columns in order, each with the (last) item of its name (coerce_row's values.get)
        by_name = {name: i for i, (name, _) in enumerate(sel.projection.items)}
        self.columns = [(name, ctype, by_name.get(name)) for name, ctype in engine.columns]
        # output columns that are a plain source column whose values the engine's read and cast
        # give back as they come from Arrow (or as a Long, for a long): column index -> how
        self.direct: dict[int, tuple[str, Optional[Callable]]] = {}
        for c, (name, ctype, i) in enumerate(self.columns):
            col = self.items[i][0] if i is not None else None
            if col is None:
                continue
            kinds = (as_type(source_types[col]).name, as_type(ctype).name)  # type: ignore[attr-defined]
            if kinds[0] == kinds[1] and kinds[0] in ("string", "float", "boolean", "integer"):
                self.direct[c] = (col, None)
            elif kinds == ("long", "long"):
                self.direct[c] = (col, _long)
        # items the kernel need not evaluate: plain columns of types whose reads cannot fail
        self.skipped = {i for i, (col, _) in enumerate(self.items)
                        if col is not None and as_type(source_types[col]).name  # type: ignore[attr-defined]
                        in ("string", "float", "boolean", "integer", "long")
                        and all(c in self.direct for c, (_, _, j) in enumerate(self.columns) if j == i)}
        names = [name for name, _ in engine.columns]
        self.names = names
        self.key_at = [names.index(k) if k in names else None for k in engine.output.key]
        self.per_at = [names.index(c) if c in names else None for c in store.per]
        # Store._group: a stored row's PER values (each row has every column of the window)
        per = list(store.per)
        self._group_of: Callable[[dict], tuple] = (
            (lambda row: ()) if not per else
            (lambda row: (row.get(per[0]),)) if len(per) == 1 else
            (lambda row: tuple([row.get(c) for c in per])))

    def run(self, states: dict[int, dict], rows: BucketRows, ports: Any,
            now: int) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Apply a bucket's rows to the instances' ``states``: per instance (ascending) the rows that
        came to it bad, the instances left to the engine (none: the kernel takes every one), and
        the changes and bad records, numbered as the engine numbers them."""
        order, came_bad = rows.engine_order()
        events = order[~came_bad]            # the rows the engine would get, in its order
        batch = _Events(rows, events)
        bad: dict[int, str] = {}
        live = self._inserts(batch, bad)
        if self.where is not None:
            values = self._values(batch, live, self.where, bad)
            live = live[np.array([p not in bad and truth(v) for p, v in zip(live.tolist(), values)],
                                 dtype=bool)] if len(live) else live
        items = [self._values(batch, live, item, bad) if i not in self.skipped else None
                 for i, item in enumerate(self.items)]
        columns = self._coerced(batch, live, items, bad)
        if bad:
            keep = np.array([p not in bad for p in live.tolist()], dtype=bool)
            live = live[keep]
            columns = [[v for v, k in zip(col, keep.tolist()) if k] for col in columns]
        ran = self._started(states, rows)
        # a time KEEP: what is due at ``now`` leaves every instance of the bucket first (the
        # engine's ``process``), with the instance's largest sequence number so far
        expired = ({inst: self.engine.expire(states[inst], now) for inst in ran}
                   if self.store.kind == "time" else None)
        changes = self._apply(states, batch, live, columns, bad, expired, now)
        _raise_seqs(states, batch.inst, batch.seq)
        arrivals = rows.arrivals(order[came_bad])
        return [InstanceRun(inst, [], arrivals.get(inst, [])) for inst in ran], [], changes

    # --- columns -------------------------------------------------------------------------------

    def _inserts(self, batch: "_Events", bad: dict[int, str]) -> np.ndarray:
        """The event positions that insert a row: opcodes i, u, p on port 0 (d and s insert
        nothing; any other opcode or port makes a bad record)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        inserts = pc.is_in(batch.op_array, value_set=pa.array(["i", "u", "p"])).fill_null(False)
        usual = np.asarray(inserts, dtype=bool) & (batch.port_array == 0)
        name = self.engine.name
        for p in np.flatnonzero(~usual).tolist():
            op, port = batch.ops[p], batch.ports[p]
            if op not in OPS:
                bad[p] = f"unknown opcode {op!r}"
            elif port != 0:
                bad[p] = f"no input port {port} on {name}"
        return np.flatnonzero(usual)

    def _values(self, batch: "_Events", live: np.ndarray, getter: tuple[Optional[str], Callable],
                bad: dict[int, str]) -> list:
        """The values of one expression at event positions ``live``: a plain column read as the
        engine's compiled expression reads it, or the expression row by row (a failing row gets
        None and its reason in ``bad``; a row bad already is not evaluated)."""
        col, compiled = getter
        if col is not None:
            values = batch.column(col, live)
            read = self.readers[col]
            if read is None:
                return values
            out = []
            for p, v in zip(live.tolist(), values):
                try:
                    out.append(read(v))
                except SplashError as e:
                    if p not in bad:
                        bad[p] = str(e)
                    out.append(None)
            return out
        out = []
        alias = self.alias
        for p, row in zip(live.tolist(), batch.dicts(live)):
            if p in bad:
                out.append(None)
                continue
            try:
                out.append(compiled({alias: row}))
            except SplashError as e:
                bad[p] = str(e)
                out.append(None)
        return out

    def _coerced(self, batch: "_Events", live: np.ndarray, items: list[Optional[list]],
                 bad: dict[int, str]) -> list[list]:
        """The output columns, in column order, cast as ``coerce_row`` casts (a row whose cast
        fails is bad, the first failing column giving the reason)."""
        out = []
        n = len(live)
        for c, (name, ctype, i) in enumerate(self.columns):
            direct = self.direct.get(c)
            if direct is not None:
                values = batch.column(direct[0], live)
                out.append(values if direct[1] is None else direct[1](values))
                continue
            values = items[i] if i is not None else [None] * n
            try:
                out.append(coerce_column(values, ctype))
            except SplashError:  # rare: find the rows, one by one
                column = []
                for p, v in zip(live.tolist(), values):
                    try:
                        column.append(coerce_column([v], ctype)[0])
                    except SplashError as e:
                        if p not in bad:
                            bad[p] = str(e)
                        column.append(None)
                out.append(column)
        return out

    # --- the store -----------------------------------------------------------------------------

    def _started(self, states: dict[int, dict], rows: BucketRows) -> list[int]:
        """The bucket's instances in ascending order, each given a state if it had none."""
        ran = np.unique(rows.inst).tolist()
        for inst in ran:
            if inst not in states:
                states[inst] = self.engine.initial_state()
        return ran

    def _apply(self, states: dict[int, dict], batch: "_Events", live: np.ndarray,
               columns: list[list], bad: dict[int, str], expired: Optional[dict[int, list]] = None,
               now: int = 0) -> RowChanges:
        """Every event in order through the window's store: bad records, and each upstream
        transaction's rows merged by key and upserted (with the evictions of the KEEP); under a
        time KEEP, each instance's ``expired`` deletes (the engine's) first."""
        names, key_at, per_at = self.names, self.key_at, self.per_at
        # each inserting event's output row, key and PER group (from the very objects of the row)
        nulls = [None] * len(live)
        keys = (list(zip(*[columns[k] if k is not None else nulls for k in key_at])) if key_at
                else [()] * len(live))
        groups = (list(zip(*[columns[k] if k is not None else nulls for k in per_at])) if per_at
                  else [()] * len(live))
        rows = ([dict(zip(names, values)) for values in zip(*columns)] if columns
                else [{} for _ in keys])
        entries = list(zip(rows, keys, groups))
        live_seqs = batch.seq[live].tolist()
        emits: list[tuple] = []     # (instance, seq, sub, opcode, row)
        emit = emits.append
        bads: list[tuple] = []
        inst_at, seq_at, port_at = batch.inst, batch.seq, batch.port_array
        n = len(inst_at)
        # pairs of neighbours in one upstream transaction (one instance, sequence number and port)
        shared = np.concatenate(([0], np.cumsum((inst_at[1:] == inst_at[:-1]) & (seq_at[1:] == seq_at[:-1])
                                                & (port_at[1:] == port_at[:-1]))))
        bad_at = np.array(sorted(bad), dtype=np.int64)
        starts = np.flatnonzero(np.diff(inst_at)) + 1 if n else np.array([], dtype=np.int64)
        bounds = list(zip([0] + starts.tolist(), starts.tolist() + [n])) if n else []
        live_bounds = np.searchsorted(live, [b for bound in bounds for b in bound]).tolist()
        bad_bounds = np.searchsorted(bad_at, [b for bound in bounds for b in bound]).tolist()
        run = self._upsert_all
        self._now = now
        # the instances whose expiry is still to be given, in order (before each one's rows)
        due = sorted(expired, reverse=True) if expired else []

        def expiries(upto: int) -> int:
            """Give the expiries of the instances up to ``upto``: the number of ``upto``'s."""
            count = 0
            while due and due[-1] <= upto:
                inst = due.pop()
                for sub, o in enumerate(expired[inst]):  # type: ignore[index]
                    emit((inst, o.seq, sub, o.op, o.values))
                count = len(expired[inst]) if inst == upto else 0  # type: ignore[index]
            return count
        for i, (s, e) in enumerate(bounds):
            inst = int(inst_at[s])
            state = states[inst]["output"]
            first = expiries(inst)
            ls, le = live_bounds[2 * i], live_bounds[2 * i + 1]
            fetch = getattr(state["rows"], "prefetch", None)
            if fetch is not None and le > ls:  # rows in the state store: one read for the batch
                groups = state["groups"]
                fetch_groups = getattr(groups, "prefetch", None)
                if fetch_groups is not None:  # (the PER groups too: one read for the batch)
                    fetch_groups([group for _, _, group in entries[ls:le]])
                fetch(_touched(groups, entries[ls:le]))
            if shared[e - 1] == shared[s] and bad_bounds[2 * i] == bad_bounds[2 * i + 1]:
                # no bad record, no transaction of several rows: the inserting rows in order
                run(state, entries[ls:le], live_seqs[ls:le], inst, first, emit)
                continue
            self._transactions(state, batch, s, e, live[ls:le].tolist(), entries[ls:le], bad,
                               inst, emit, bads, first)
        expiries(2**62)
        if not emits:
            return RowChanges([], [], [], [], [[] for _ in names], bads)
        # (a column at a time: ``zip(*emits)`` makes an iterator per change, twice the time)
        out_inst, out_seq, out_sub, out_op, out_rows = [list(map(itemgetter(k), emits))
                                                        for k in range(5)]
        return RowChanges(out_inst, out_seq, out_sub, out_op,
                          [list(map(itemgetter(name), out_rows)) for name in names], bads)

    def _transactions(self, state: dict, batch: "_Events", start: int, end: int, live: list[int],
                      entries: list[tuple], bad: dict[int, str], inst: int,
                      emit: Callable[[tuple], None], bads: list[tuple], sub: int = 0) -> None:
        """The events ``start..end`` of one instance as the engine takes them, a transaction at a
        time: its bad records (in order), then its rows merged as ``consolidate`` merges them (the
        last row of each key, in order of the keys' first rows) through the store."""
        entry_of = dict(zip(live, entries))
        seqs, ports = batch.seq[start:end].tolist(), batch.ports[start:end]
        p = start
        while p < end:
            seq, port = seqs[p - start], ports[p - start]
            q = p + 1
            while q < end and seqs[q - start] == seq and ports[q - start] == port:
                q += 1
            merged: dict[tuple, tuple] = {}
            for e in range(p, q):
                reason = bad.get(e)
                if reason is not None:
                    bads.append((inst, seq, sub, reason, batch.dict_at(e)))
                    sub += 1
                    continue
                entry = entry_of.get(e)
                if entry is not None:
                    merged[entry[1]] = entry
            if merged:
                sub = self._upsert_all(state, list(merged.values()), [seq] * len(merged), inst,
                                       sub, emit)
            p = q

    def _upsert_all(self, state: dict, entries: list[tuple], seqs: list[int], inst: int, sub: int,
                    emit: Callable[[tuple], None]) -> int:
        """Each ``(row, key, group)`` of ``entries`` upserted in order into the window (its
        sequence number from ``seqs``), the changes given to ``emit``; the next sub-number. The
        usual insert is inlined: a new key joining a full group evicts the group's oldest row
        (KEEP n ROWS without SLACK, KEEP LAST); anything else goes through :meth:`_upsert`."""
        store, upsert, group_of, ungroup = self.store, self._upsert, self._group_of, self._ungroup
        full = store.count if store.count > 0 and store.kind != "every_rows" and store.slack == 1 else -1
        rows_, groups_ = state["rows"], state["groups"]
        # one PER column: a victim's group is its value's 1-tuple, compared without making it
        per = store.per[0] if len(store.per) == 1 else None
        for (row, key, group), seq in zip(entries, seqs):
            members = groups_.get(group)
            if key in rows_ or members is None or len(members) != full:
                sub = upsert(state, key, group, row, seq, inst, sub, emit)
                continue
            victim = next(iter(members))     # Store._make_room, then the insert
            old = rows_.pop(victim)
            if per is not None:
                value = old.get(per)
                same = value is group[0] or value == group[0]  # (as tuples compare)
            else:
                old_group = group_of(old)
                same = old_group is group or old_group == group
            if same:
                del members[victim]
                if not members:   # (as _ungroup: the group comes back last)
                    del groups_[group]
                    members = groups_[group] = {}
            else:
                ungroup(groups_, victim, group_of(old))
                members = groups_.setdefault(group, {})
            emit((inst, seq, sub, "d", old))
            rows_[key] = row
            members[key] = None
            emit((inst, seq, sub + 1, "i", row))
            sub += 2
        return sub

    def _upsert(self, state: dict, key: tuple, group: tuple, new: dict, seq: int, inst: int,
                sub: int, emit: Callable[[tuple], None]) -> int:
        """:meth:`Store.upsert` (a row-count KEEP, no AGES), giving its changes to ``emit``; the
        next sub-number."""
        rows, groups = state["rows"], state["groups"]
        old = rows.get(key)
        if self.store.kind == "time":  # (Store.upsert: no groups; the row's time now, last)
            rows[key] = new
            times = state["times"]
            times.pop(key, None)
            times[key] = self._now
            emit((inst, seq, sub, "i" if old is None else "u", new))
            return sub + 1
        if old is None:
            sub = self._make_room(state, group, seq, inst, sub, emit)
            rows[key] = new
            members = groups.get(group)
            if members is None:
                members = groups[group] = {}
            members[key] = None
            op = "i"
        else:
            old_group = self._group_of(old)
            if old_group != group:
                self._ungroup(groups, key, old_group)
                sub = self._make_room(state, group, seq, inst, sub, emit)
                groups.setdefault(group, {})[key] = None
            else:  # the most recent row of its group now
                members = groups[group]
                del members[key]
                members[key] = None
            rows[key] = new
            op = "u"
        emit((inst, seq, sub, op, new))
        return sub + 1

    def _make_room(self, state: dict, group: tuple, seq: int, inst: int, sub: int,
                   emit: Callable[[tuple], None]) -> int:
        """:meth:`Store._make_room`: the evictions before a new row joins ``group``."""
        store = self.store
        if store.count <= 0:
            return sub
        members = state["groups"].get(group)
        if members is None or len(members) < store.count + store.slack - 1:
            return sub
        if store.kind == "every_rows":
            victims = list(members)
        elif len(members) == store.count:
            victims = [next(iter(members))]
        else:
            victims = list(members)[:len(members) - store.count + 1]
        rows, groups = state["rows"], state["groups"]
        for key in victims:
            old = rows.pop(key, None)
            if old is None:
                continue
            self._ungroup(groups, key, self._group_of(old))
            emit((inst, seq, sub, "d", old))
            sub += 1
        return sub

    @staticmethod
    def _ungroup(groups: dict, key: tuple, group: tuple) -> None:
        members = groups.get(group)
        if members is not None:
            members.pop(key, None)
            if not members:
                del groups[group]


def _touched(groups: dict, entries: list[tuple]) -> list[tuple]:
    """The row keys the upserts of ``entries`` (``(row, key, group)``) read from the window:
    their own keys, and the oldest members of each group they join, as many as join it (the
    rows a KEEP evicts first; a KEEP with SLACK may evict more, read one by one)."""
    joining: dict[tuple, int] = {}
    for _, _, group in entries:
        joining[group] = joining.get(group, 0) + 1
    keys = [key for _, key, _ in entries]
    for group, count in joining.items():
        members = groups.get(group)
        if members:
            keys.extend(islice(members, count))
    return keys


def _long(values: list) -> list:
    """Values of an Arrow int64 column as the engine reads and casts them for a long column."""
    return [Long(v) if v is not None else None for v in values]


def _reader(ctype: str) -> Optional[Callable[[object], object]]:
    """How the engine's compiled expression reads a value of a column of type ``ctype`` from a row
    (runtime.engine.expr ``Expressions._direct``): None when Arrow's values are read as they are."""
    t = as_type(ctype)
    plain = _PLAIN.get(t.name)  # type: ignore[attr-defined]
    if plain in (str, float, bool):
        return None    # (a string, float or boolean column's values are already SPLASH values)

    def read(v: object) -> object:
        return v if type(v) is plain and _is_plain(v) else from_python(v, t)  # type: ignore[arg-type]
    return read


class _Events:
    """A bucket's events (rows that did not come bad) in processing order, read column by column
    on demand (struct nulls taken into account, as the engine's rows get ``{}`` for them)."""

    def __init__(self, rows: BucketRows, events: np.ndarray) -> None:
        self.rows, self.events = rows, events
        self.inst = rows.inst[events]
        self.seq = rows.seq[events]
        self.port_array = rows.port[events]
        self.ports = self.port_array.tolist()
        self.op_array = rows.op.take(events)
        self.ops = self.op_array.to_pylist()
        self._fields: Optional[dict[str, Any]] = None
        self._dicts: Optional[list] = None

    def column(self, name: str, positions: np.ndarray) -> list:
        """Column ``name`` at event ``positions``."""
        if self._fields is None:
            values = self.rows.values
            self._fields = {f.name: a for f, a in zip(values.type, values.flatten())}
        return self._fields[name].take(self.events[positions]).to_pylist()

    def dicts(self, positions: np.ndarray) -> list[dict]:
        """The events at ``positions`` as the engine's rows (made once, shared by the expressions
        that read them: they never change a row)."""
        if self._dicts is None:
            self._dicts = [None] * len(self.events)
        dicts = self._dicts
        missing = [p for p in positions.tolist() if dicts[p] is None]
        if missing:
            taken = self.rows.values.take(self.events[np.array(missing, dtype=np.int64)]).to_pylist()
            for p, row in zip(missing, taken):
                dicts[p] = row or {}
        return [dicts[p] for p in positions.tolist()]

    def dict_at(self, position: int) -> dict:
        """The event at ``position`` as the engine receives it."""
        return self.rows.values[int(self.events[position])].as_py() or {}


def _raise_seqs(states: dict[int, dict], inst: np.ndarray, seq: np.ndarray) -> None:
    """Raise each instance's sequence number to the largest of its events (in processing order:
    the last of each instance's run), as the engine does for every event it is given."""
    if not len(inst):
        return
    ends = np.append(np.flatnonzero(inst[1:] != inst[:-1]), len(inst) - 1)
    for i, largest in zip(inst[ends].tolist(), seq[ends].tolist()):
        state = states[i]
        if state["seq"] is None or largest > state["seq"]:
            state["seq"] = largest


# Column type -> the Python type whose values are already in SPLASH form for it (as
# runtime.engine.expr reads a column).
_PLAIN = {kind: python for python, kind in PLAIN_KINDS.items()}


def _is_plain(v: object) -> bool:
    """Whether ``v`` is a str, float, bool or 32-bit int (a SPLASH value as it is)."""
    t = type(v)
    return t is str or t is float or t is bool or (t is int and -2**31 <= v < 2**31)  # type: ignore[operator]
