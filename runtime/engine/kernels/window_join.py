"""A join of two or more windows, run a bucket's micro-batch at a time.

``ccl.plan.physical.window_join_kernel`` picks the elements: a keyed window (KEEP ALL, none or a
row-count KEEP, no AGES) or delta stream defined by one select joining windows or delta streams
(INNER, LEFT, RIGHT or FULL OUTER, any ON the engine's Joiner takes; no FROM KEEP, aggregate,
MATCHING, DECLARE or Flex) with pure WHERE and select items. What the engine
(runtime/engine/element.py) does with such an element, row by row, is:

- an event with an unknown opcode or port is a bad record;
- the source's mirror (rows by its key) takes the change, and the Joiner
  (runtime/engine/join.py) turns it into changes of joined rows (null-filled for an outer join);
- WHERE on each joined change's old and new row decides its opcode, the select items and casts
  make the output rows (old and new), keyed by the element's key; the first failure makes the
  event a bad record (the mirror and the Joiner keep the change);
- the changes of one upstream transaction (one sequence number and port) are merged by key
  (``consolidate``) after its bad records, and go through the output stage: a window's store (an
  update whose key changed deletes the old key first) or a delta stream's pass-through.

The kernel runs the mirrors and the Joiner's equality index in one loop over the instance's
events. For a source change whose row is already stored and whose equated values stay, on a
level of equalities only (an aggregate's update joined on its group columns, reference data
changed in place), the joined rows are read straight off the index without a Change per source
row; everything else goes through the engine's own source stage and Joiner. WHERE and the items
are then evaluated over all the bucket's old and new joined rows a column at a time (a plain
column whose values the engine reads as they are is taken as it is, others through the engine's
compiled expressions row by row, the casts by ``coerce_column``); an event with a failing
expression runs through the engine's own WHERE and projection (which gives its bad record); the
outputs are applied in order on the engine's own state, as the window_select kernel applies them.
Either the engine or the kernel can run an instance's next batch.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Optional

import numpy as np

from runtime.engine.changes import OPS, Change, same_row
from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import SplashError, coerce_column
from runtime.engine.join import null_filled
from runtime.engine.parts import field_ref
from runtime.engine.stages import RowRefused, consolidate, truth
from runtime.engine.store import COUNT_KINDS
from runtime.engine.kernels.window_select import row_changes, write_inline

__all__ = ["WindowJoinKernel"]

# CCL column type -> the Python type of the values the engine's compiled column read gives back
# as they are (runtime.engine.expr ``_direct``: an int only within 32 bits)
_AS_IS = {"integer": int, "float": float, "string": str, "boolean": bool}
_MISSING = object()


class WindowJoinKernel:
    """The join of windows of ``engine``'s element (one that
    ``ccl.plan.physical.window_join_kernel`` takes) over whole buckets; see the module docstring.
    ``first_ports``: the ports whose rows the engine takes first within a sequence number."""

    def __init__(self, engine: Engine, plan: Any, first_ports: frozenset[int] = frozenset()) -> None:
        if (not isinstance(engine, Engine) or engine.declared is not None or engine.input is not None
                or len(engine.selects) != 1 or engine.kind not in ("window", "delta stream")):
            raise ValueError(f"{engine.name} is not a join of windows the kernel runs")
        sel = engine.selects[0]
        store = engine.output.store
        if (sel.projection is None or sel.aggregator is not None or sel.joiner is None
                or sel.matcher is not None or sel.refused is not None or sel.grouped_cache
                or sel.projection.extra is not None or not sel.projection.keyed
                or not engine.output.key
                or any(s.kind not in ("window", "delta stream") or s.store is None
                       or s.store.kind != "all" or s.store.aging is not None for s in sel.sources)
                or not all(sel.joiner.stored)
                or engine.ports != [(0, k) for k in range(len(sel.sources))]
                or (engine.kind == "window" and (store is None or store.aging is not None
                                                 or store.kind not in ("all",) + COUNT_KINDS))):
            raise ValueError(f"{engine.name} is not a join of windows the kernel runs")
        self.engine, self.sel, self.joiner = engine, sel, sel.joiner
        self.first_ports = first_ports
        self.aliases = list(sel.aliases)
        self.source_keys = [list(s.key) for s in sel.sources]
        self.key = list(engine.output.key)
        self.inline = engine.kind != "window" or store.kind == "all"  # type: ignore[union-attr]
        types = {a: {c: str(t).strip().lower() for c, t in s.columns}
                 for a, s in zip(self.aliases, sel.sources)}
        spec = engine.element.query.selects[0]
        shadowed = set(getattr(sel.exprs, "_shadowing", ()))

        def reader(expr: object, compiled: Callable) -> tuple:
            ref = field_ref(expr)
            if (ref is not None and ref[0] in types and ref[1] in types[ref[0]]
                    and ref[0] not in shadowed):
                return ref[0], ref[1], _AS_IS.get(types[ref[0]][ref[1]]), compiled
            return None, None, None, compiled
        self.where = reader(spec.where, sel.where) if spec.where is not None else None
        # every select item in order (each is evaluated, as the engine's projection does), and
        # per output column the (last) item of its name, or None (a null column)
        self.items = [reader(item.expr, f) for item, (_, f) in zip(spec.items, sel.projection.items)]
        by_name = {name: k for k, (name, _) in enumerate(sel.projection.items)}
        self.columns = [(name, ctype, by_name.get(name)) for name, ctype in engine.columns]
        self.names = [name for name, _ in engine.columns]
        # output columns that are a plain source column of their own type (integer, float,
        # string, boolean): the engine's read and cast give its values back as they are
        self.direct: dict[int, tuple[str, str, type]] = {}
        for c, (name, ctype, k) in enumerate(self.columns):
            if k is None:
                continue
            alias, column, kind, _ = self.items[k]
            if alias is not None and kind is not None \
                    and types[alias][column] == str(ctype).strip().lower():
                self.direct[c] = (alias, column, kind)
        # the levels the kernel looks up itself (equalities only): per level, whether it may
        levels = self.joiner.levels
        self.plain_level = [not lv.residual and bool(lv.eq_left) for lv in levels]
        # the quick path (:meth:`_quick`): two sources joined by equalities only
        self.quick = self._quick if len(self.aliases) == 2 and self.plain_level[0] else None
        self.filled = self.joiner.outer

    # --- a bucket ---------------------------------------------------------------------------

    def run(self, states: dict[int, dict], rows: BucketRows, ports: list[Any],
            now: int) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Apply a bucket's rows (``ports[k]``: the struct array of port ``k``'s values, one per
        row) to the instances' ``states``: the instances run (ascending), those left untouched
        for the engine, and the changes and bad records of the run ones."""
        order, came = rows.engine_order(self.first_ports)
        events = order[~came]
        inst, seq, port = rows.inst[events], rows.seq[events], rows.port[events]
        count = len(self.aliases)
        unknown = (port < 0) | (port >= count)
        # (an event on an unknown port: the engine reports it)
        left, ran = rows.instances(states, self._readable, self.engine.initial_state,
                                   inst[unknown].tolist())
        values: list = [None] * len(events)
        # per event its source key and (for the index's quick path) its equated values, worked
        # out a column at a time; each row's dict holds the very objects of both
        keys: list = [None] * len(events)
        equated: list = [None] * len(events)
        for k in range(count):
            at = np.flatnonzero(port == k)
            if len(at):
                self._port_rows(k, ports[k].take(events[at]), at.tolist(), values, keys, equated)
        ops = rows.op.take(events).to_pylist()
        inst_l, seq_l, port_l = inst.tolist(), seq.tolist(), port.tolist()
        joined, bad = self._join(states, inst_l, seq_l, port_l, ops, values, keys, equated, left)
        outputs = self._evaluate(joined, bad)
        cut = (inst[1:] != inst[:-1]) | (seq[1:] != seq[:-1]) | (port[1:] != port[:-1])
        starts = [0, *(np.flatnonzero(cut) + 1).tolist(), len(events)] if len(events) else [0]
        changes = self._deliver(states, inst_l, seq_l, starts, values, outputs, bad, left, now)
        arrivals = rows.arrivals(order[came])
        return ([InstanceRun(i, [], arrivals.get(i, [])) for i in ran], sorted(left), changes)

    def _readable(self, state: Any) -> bool:
        """Whether ``state`` has the shape the engine's initial state has for this element."""
        try:
            sel = state["selects"][0]
            output = state["output"]
            return (len(state["selects"]) == 1 and "seq" in state
                    and len(sel["sources"]) == len(self.aliases)
                    and isinstance(sel["join"], (dict, MutableMapping)) and "src" in sel["join"]
                    and (output is None) == (self.engine.kind != "window")
                    and (output is None or "rows" in output))
        except (KeyError, IndexError, TypeError):
            return False

    def _port_rows(self, k: int, struct: Any, at: list[int], values: list, keys: list,
                   equated: list) -> None:
        """Port ``k``'s rows (``struct``, the events at positions ``at``) as the engine takes
        them (``values``: a dict of the port's columns, ``{}`` for a row without values), with
        their source keys and, for the quick path, their equated values (None when one is null:
        the row matches nothing)."""
        names = [struct.type.field(i).name for i in range(struct.type.num_fields)]
        columns = [c.to_pylist() for c in struct.flatten()]
        rows = [dict(zip(names, t)) for t in zip(*columns)] if columns else [{} for _ in at]
        if struct.null_count:
            for j in np.flatnonzero(~np.asarray(struct.is_valid(), dtype=bool)).tolist():
                rows[j] = {}
        by_name = dict(zip(names, columns))
        nulls = [None] * len(at)

        def tuples(cols: list[str]) -> list:
            return list(zip(*[by_name.get(c, nulls) for c in cols]))
        for e, row in zip(at, rows):
            values[e] = row
        for e, key in zip(at, tuples(self.source_keys[k])):
            keys[e] = key
        if self.quick is not None and k < 2:
            level = self.joiner.levels[0]
            cols = [c for _, c in level.eq_left] if k == 0 else level.eq_right
            for e, v in zip(at, tuples(cols)):
                equated[e] = None if None in v else v

    def _join(self, states: dict[int, dict], inst_l: list[int], seq_l: list[int],
              port_l: list[int], ops: list, values: list, keys: list, equated: list,
              left: set[int]) -> tuple[list, dict]:
        """The mirrors and the Joiner through the bucket's events in order: per event its joined
        changes (a list of ``(op, old joined row, new joined row)``, None for none), and the bad
        records of events with an unknown opcode or a failing source stage (by position)."""
        n = len(inst_l)
        joined: list = [None] * n
        bad: dict[int, str] = {}
        sel, joiner = self.sel, self.joiner
        sources = sel.sources
        filled = self.filled
        columns = joiner.columns
        quick = self.quick
        current, sstate = None, None
        for e in range(n):
            i = inst_l[e]
            if i in left:
                continue
            if i != current:
                current = i
                sstate = states[i]["selects"][0]
            op = ops[e]
            if op not in OPS:
                bad[e] = f"unknown opcode {op!r}"
                continue
            k = port_l[e]
            try:
                got = quick(sstate, k, values[e], keys[e], equated[e]) \
                    if quick is not None and op != "d" and op != "s" else None
                if got is None:
                    got = []
                    for change in sources[k].apply(sstate["sources"][k], op, seq_l[e],  # type: ignore[index]
                                                   values[e], 0):
                        got += joiner.apply(sstate["join"], k, change)  # type: ignore[index]
                    got = [(c.op, c.old, c.new) for c in got]
            except (SplashError, RowRefused) as ex:
                bad[e] = str(ex)
                continue
            if got:
                if filled:
                    got = [(o, null_filled(a, columns) if a is not None else None,
                            null_filled(b, columns) if b is not None else None) for o, a, b in got]
                joined[e] = got
        return joined, bad

    def _quick(self, sstate: dict, k: int, row: dict, key: tuple,
               new_v: Optional[tuple]) -> Optional[list]:
        """The joined changes of an update (or upsert) of source ``k``'s stored row whose equated
        values stay, on a level of equalities only, read off the index as the Joiner's own path
        for it does (runtime/engine/join.py ``_left_change``/``_right_change``), with the mirror,
        the Joiner's stores, index and counts changed as they change them; None for any other
        change (the engine's source stage and Joiner take it). ``key`` and ``new_v``: the row's
        source key and equated values (it is no delete)."""
        jstate = sstate["join"]
        src = jstate["src"][k]
        old = src.get(key)
        if old is None:
            return None
        level = self.joiner.levels[0]
        new = dict(row)
        if k == 0:
            wkey = (key,)
            jold, jnew = {level.left_aliases[0]: old}, {level.left_aliases[0]: new}
            old_v = level.left_values(jold)
            if old_v != new_v:
                return None
            # the mirror's upsert (its row there does not change what the Joiner does)
            sstate["sources"][0]["rows"][key] = row if type(row) is dict else dict(row)
            src[key] = new
            # the Joiner's left store for level 0 (acc) and its index, as _store_left keeps them
            acc, index = jstate["acc"][0], jstate["lidx"][0]
            _index_move(index, old_v, new_v, wkey)
            acc[wkey] = jnew
            matches = [] if old_v is None else list(jstate["ridx"][0].get(old_v, ()))
            jstate["lcnt"][0][wkey] = len(matches)
            if same_row(old, new):   # (the Joiner's _same_joined of the one-source rows)
                return []
            ralias = level.right_alias
            if matches:
                store = jstate["src"][1]
                return [("u", {**jold, ralias: store[rk]}, {**jnew, ralias: store[rk]})
                        for rk in matches]
            if level.left_keeps:
                return [("u", {**jold, ralias: None}, {**jnew, ralias: None})]
            return []
        old_v = level.right_values(old)
        if old_v != new_v:
            return None
        # the mirror's upsert (its row there does not change what the Joiner does)
        sstate["sources"][1]["rows"][key] = row if type(row) is dict else dict(row)
        index = jstate["ridx"][0]
        _index_move(index, old_v, new_v, key)
        src[key] = new
        matches = [] if old_v is None else list(jstate["lidx"][0].get(old_v, ()))
        jstate["rcnt"][0][key] = len(matches)
        ralias = level.right_alias
        if same_row(old, new):
            return []
        if matches:
            acc = jstate["acc"][0]
            return [("u", {**acc[lk], ralias: old}, {**acc[lk], ralias: new}) for lk in matches]
        if level.right_keeps:
            lalias = level.left_aliases[0]
            return [("u", {lalias: None, ralias: old}, {lalias: None, ralias: new})]
        return []

    def _evaluate(self, joined: list, bad: dict[int, str]) -> list:
        """Per event, its output changes as a list of ``(op, old output row, new output row)``, or
        None for none (an event with a failing expression runs through the engine's WHERE and
        projection; ``bad`` gets its reason instead)."""
        n = len(joined)
        rows: list = []        # every joined row to evaluate
        at: list = []          # per joined change (event, old's position or None, new's)
        for e in range(n):
            got = joined[e]
            if got is None:
                continue
            for op, old, new in got:
                jo = jn = None
                if old is not None:
                    jo = len(rows)
                    rows.append(old)
                if new is not None:
                    jn = len(rows)
                    rows.append(new)
                at.append((e, op, jo, jn))
        failing: set[int] = set()
        if self.where is not None:
            passed = [truth(t) for t in self._values(self.where, rows, failing)]
        else:
            passed = [True] * len(rows)
        live = [j for j in range(len(rows)) if passed[j] and j not in failing]
        live_rows = [rows[j] for j in live]
        columns: list = [None] * len(self.columns)
        read: set[int] = set()   # items read directly (they cannot fail)
        for c, (alias, column, kind) in self.direct.items():
            got = _direct(live_rows, alias, column, kind)
            if got is not None:
                columns[c] = got
                read.add(self.columns[c][2])  # type: ignore[arg-type]
        values = [self._values(item, live_rows, failing, live) if k not in read else None
                  for k, item in enumerate(self.items)]
        for c, (name, ctype, k_item) in enumerate(self.columns):
            if columns[c] is not None:
                continue
            if k_item is None:
                columns[c] = [None] * len(live)
                continue
            column = values[k_item]
            try:
                columns[c] = coerce_column(column, ctype)
            except SplashError:  # rare: find the rows, one by one
                cast = []
                for j, v in zip(live, column):
                    try:
                        cast.append(coerce_column([v], ctype)[0])
                    except SplashError:
                        failing.add(j)
                        cast.append(None)
                columns[c] = cast
        out_rows: list = [None] * len(rows)
        names = self.names
        for j, vals in zip(live, zip(*columns) if columns else [()] * len(live)):
            out_rows[j] = dict(zip(names, vals))
        outputs: list = [None] * n
        redo: set[int] = set()
        for e, _, jo, jn in at:
            if (jo is not None and jo in failing) or (jn is not None and jn in failing):
                redo.add(e)
        for e, op, jo, jn in at:
            if e in redo:
                continue
            old = out_rows[jo] if jo is not None and passed[jo] else None
            new = out_rows[jn] if jn is not None and passed[jn] else None
            if old is None and new is None:
                continue
            change = ("u", old, new) if old is not None and new is not None else (
                ("d", old, None) if old is not None else ("i", None, new))
            if outputs[e] is None:
                outputs[e] = [change]
            else:
                outputs[e].append(change)
        for e in sorted(redo):
            outputs[e] = self._redo(joined[e], bad, e)
        return outputs

    def _values(self, spec: tuple, rows: list[dict], failing: set[int],
                positions: Optional[list[int]] = None) -> list:
        """An expression's values over joined ``rows`` (a failing row gets None, its position,
        from ``positions`` or its index, added to ``failing``)."""
        alias, column, kind, compiled = spec
        if alias is not None and kind is not None:
            got = _direct(rows, alias, column, kind)
            if got is not None:
                return got
        out: list = [None] * len(rows)
        for k, r in enumerate(rows):
            j = positions[k] if positions is not None else k
            if j in failing:
                continue
            try:
                out[k] = compiled(r)
            except SplashError:
                failing.add(j)
        return out

    def _redo(self, changes: list, bad: dict[int, str], e: int) -> Optional[list]:
        """An event with a failing expression through the engine's WHERE and projection: its
        output changes, or None with its reason in ``bad``."""
        try:
            done = self.sel.finish({}, [Change(op, (), old, new, 0) for op, old, new in changes])
        except (SplashError, RowRefused) as ex:
            bad[e] = str(ex)
            return None
        return [(c.op, c.old, c.new) for c in done] or None

    # --- outputs ------------------------------------------------------------------------------

    def _deliver(self, states: dict[int, dict], inst_l: list[int], seq_l: list[int],
                 starts: list[int], values: list, outputs: list, bad: dict[int, str],
                 left: set[int], now: int) -> RowChanges:
        """Each transaction's (events ``starts[t]`` to ``starts[t + 1]``) bad records, then its
        output changes merged by key and through the output stage, in order; the instances'
        sequence numbers raised as the engine raises them."""
        emitted: list[tuple] = []   # (instance, seq, sub, op, row)
        key_cols = self.key
        if len(key_cols) == 1:
            only = key_cols[0]

            def key_of(row: dict) -> tuple:
                return (row[only],)
        else:
            def key_of(row: dict) -> tuple:
                return tuple([row[c] for c in key_cols])
        delta = self.engine.kind == "delta stream"
        inline = self.inline
        current, store, state, sub = None, None, None, 0
        for t in range(len(starts) - 1):
            e, end = starts[t], starts[t + 1]
            i = inst_l[e]
            if i in left:
                continue
            if i != current:
                current, state, sub = i, states[i], 0
                store = state["output"]["rows"] if state["output"] is not None else None
            s = seq_l[e]
            if state["seq"] is None or s > state["seq"]:  # type: ignore[index]
                state["seq"] = s  # type: ignore[index]
            changes: list = []
            for x in range(e, end):
                if x in bad:
                    emitted.append((i, s, sub, None, (bad[x], dict(values[x]))))
                    sub += 1
                    continue
                o = outputs[x]
                if o is not None:
                    changes += o
            if not changes:
                continue
            keyed = [(op, key_of(new if new is not None else old), old, new) for op, old, new in changes]
            if len(keyed) > 1 and len({k for _, k, _, _ in keyed}) < len(keyed):
                keyed = [(c.op, c.key, c.old, c.new)
                         for c in consolidate([Change(op, k, old, new, s) for op, k, old, new in keyed])]
            if not inline:
                for c in self.engine.deliver(state, [Change(op, k, old, new, s)  # type: ignore[arg-type]
                                                     for op, k, old, new in keyed], now):
                    emit = emit_of(c)
                    emitted.append((i, emit.seq, sub, emit.op, emit.values))
                    sub += 1
                continue
            sub = write_inline(emitted, store, keyed, i, s, sub, key_of, delta)
        return row_changes(emitted, self.names)


def _index_move(index: Any, old_v: Optional[tuple], new_v: Optional[tuple], key: tuple) -> None:
    """The Joiner's index entry of ``key`` removed under ``old_v`` and added again under
    ``new_v`` (the same values: the entry goes last, as ``_store_left``/``_store_right`` leave
    it)."""
    if old_v is not None:
        bucket = index.get(old_v)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del index[old_v]
    if new_v is not None:
        index.setdefault(new_v, {})[key] = True


def _direct(rows: list, alias: str, column: str, kind: type) -> Optional[list]:
    """Column ``column`` of alias ``alias`` of joined ``rows`` as the engine reads it (values of
    ``kind``, an int within 32 bits, or null), or None when one is not such a value."""
    try:
        values = [r[alias][column] for r in rows]
    except (KeyError, TypeError):
        return None
    types = set(map(type, values))
    types.discard(type(None))
    if not types <= {kind}:
        return None
    if kind is int:
        present = [v for v in values if v is not None] if None in values else values
        if present and (min(present) < -2**31 or max(present) >= 2**31):
            return None
    return values

