"""A projection or filter of a window (or delta stream), run a bucket's micro-batch at a time.

``ccl.plan.physical.window_select_kernel`` picks the elements: a keyed window (KEEP ALL, none or a
row-count KEEP), delta stream or stream (the window's changes as a stream) defined by one select
from one window or delta stream, with pure WHERE and select items and nothing else (no join,
aggregate, FROM KEEP, DECLARE). What the engine
(runtime/engine/element.py) does with such an element, row by row, is:

- an event with an unknown opcode or port is a bad record;
- the source's mirror (rows by the source's key, KEEP ALL) takes the change: a delete or
  safedelete pops the key (nothing when absent), anything else stores the row (an insert of a new
  key, else an update carrying the row it replaces);
- WHERE on the old and the new row decides the change (both pass: as it was; only the old: a
  delete; only the new: an insert; neither: nothing), then the select items and casts make the
  output rows (the old one too), keyed by the element's key; the first failure makes the event a
  bad record (the mirror keeps the change);
- the changes of one upstream transaction (one sequence number and port) are merged by key
  (``consolidate``) after its bad records, and go through the output stage: a window's store
  (an update whose key changed deletes the old key first) or a delta stream's pass-through;
- a stream's projection evaluates the new row alone (WHERE still reads the old one), its changes
  are keyed by the source's key, and its output stage makes an insert or update an insert and
  drops a delete.

The kernel keeps the mirror in one loop over the instance's rows, evaluates WHERE and the items
over all the bucket's old and new rows a column at a time (a plain column whose values the engine
reads as they are is taken as it is, others through the engine's compiled expressions row by row,
the casts by ``coerce_column``), runs an event with a failing expression through the engine's own
WHERE and projection (which gives its bad record), and then applies the outputs in order on the
engine's own state: a KEEP ALL window's store and a delta stream inline, a row-count KEEP through
the engine's output stage. Either the engine or the kernel can run an instance's next batch.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Optional

import numpy as np

from runtime.engine.changes import OPS, Change
from runtime.engine.columnar import BucketRows, InstanceRun, RowChanges
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import SplashError, coerce_column
from runtime.engine.parts import field_ref
from runtime.engine.stages import RowRefused, consolidate, truth
from runtime.engine.store import COUNT_KINDS
from runtime.engine.trees import tree
from ccl.splash.operators import arithmetic, comparison
from ccl.splash.values import Long
from ccl.syntax import nodes as n

__all__ = ["WindowSelectKernel", "mirror_changes", "row_changes", "write_inline"]

# CCL column type -> the Python type of the values the engine's compiled column read gives back
# as they are (runtime.engine.expr ``_direct``: an int only within 32 bits)
_AS_IS = {"integer": int, "float": float, "string": str, "boolean": bool}
_LONG_RANGE = (-2**63, 2**63)
_MISSING = object()
_PASSED: dict = {}   # a stream's old row that passed WHERE (its items are not evaluated)


class WindowSelectKernel:
    """The projection or filter of ``engine``'s element (one that
    ``ccl.plan.physical.window_select_kernel`` takes) over whole buckets; see the module
    docstring (one port: ``first_ports`` is not needed)."""

    def __init__(self, engine: Engine, plan: Any, first_ports: frozenset[int] = frozenset(),
                 select: Optional[int] = None) -> None:
        # ``select``: run that select of a UNION (runtime/engine/kernels/window_union.py, which
        # calls :meth:`_evaluate` per port and :meth:`_deliver` once); its source may also be a
        # stream (no mirror: each insert a new row)
        if (not isinstance(engine, Engine) or engine.declared is not None or engine.input is not None
                or len(engine.selects) != 1 and select is None
                or engine.kind not in ("window", "delta stream", "stream")):
            raise ValueError(f"{engine.name} is not a projection of a window the kernel runs")
        index = select if select is not None else 0
        sel = engine.selects[index]
        store = engine.output.store
        source = sel.sources[0] if len(sel.sources) == 1 else None
        streamed = (select is not None and source is not None and source.kind == "stream"
                    and source.store is None)
        if (sel.projection is None or sel.aggregator is not None or sel.joiner is not None
                or sel.matcher is not None or source is None or sel.refused is not None
                or not streamed and (source.kind not in ("window", "delta stream")
                                     or source.store is None or source.store.kind != "all"
                                     or source.store.aging is not None)
                or sel.projection.extra is not None
                or sel.projection.keyed != (engine.kind != "stream")
                or (not engine.output.key) != (engine.kind == "stream")
                or (engine.kind == "window" and (store is None or store.aging is not None
                                                 or store.kind not in ("all",) + COUNT_KINDS))):
            raise ValueError(f"{engine.name} is not a projection of a window the kernel runs")
        self.engine, self.sel = engine, sel
        self.alias = sel.aliases[0]
        self.source_key = list(source.key)
        self.key = list(engine.output.key)
        # a KEEP ALL window's store or a delta stream applied inline; a row-count KEEP by the
        # engine's output stage
        # a stream (the window's changes seen as a stream): keyed by the source's key, its old rows
        # only filtered (the engine's projection evaluates a stream's new row alone), inserts out
        self.stream = engine.kind == "stream"
        self.inline = engine.kind != "window" or store.kind == "all"  # type: ignore[union-attr]
        types = {c: str(t).strip().lower() for c, t in source.columns}
        spec = engine.element.query.selects[index]

        shadowed = self.alias in getattr(sel.exprs, "_shadowing", ())
        self.types = types

        def reader(expr: object, compiled: Callable) -> tuple:
            ref = field_ref(expr)
            if ref is not None and ref[0] == self.alias and ref[1] in types and not shadowed:
                return ref[1], _AS_IS.get(types[ref[1]]), compiled, None
            return None, None, compiled, None if shadowed else self._vector(tree(expr))
        self.where = reader(spec.where, sel.where) if spec.where is not None else None
        # every select item in order (each is evaluated, as the engine's projection does), and
        # per output column the (last) item of its name, or None (a null column)
        self.items = [reader(item.expr, f) for item, (_, f) in zip(spec.items, sel.projection.items)]
        by_name = {name: k for k, (name, _) in enumerate(sel.projection.items)}
        self.columns = [(name, ctype, by_name.get(name)) for name, ctype in engine.columns]
        self.names = [name for name, _ in engine.columns]
        # output columns that are a plain source column of their own type, whose values the
        # engine's read and cast give back as they are (a long as a Long): column -> (source
        # column, Python type); such an item cannot fail, and is not evaluated otherwise
        self.direct: dict[int, tuple[str, type]] = {}
        for c, (name, ctype, k) in enumerate(self.columns):
            column = self.items[k][0] if k is not None else None
            kind = str(ctype).strip().lower()
            if column is not None and types[column] == kind and kind in (*_AS_IS, "long"):
                self.direct[c] = (column, _AS_IS.get(kind, Long))

    # --- a bucket ---------------------------------------------------------------------------

    def run(self, states: dict[int, dict], rows: BucketRows, ports: list[Any],
            now: int) -> tuple[list[InstanceRun], list[int], RowChanges]:
        """Apply a bucket's rows to the instances' ``states``: the instances run (ascending), those
        left untouched for the engine, and the changes and bad records of the run ones."""
        order, came = rows.engine_order()
        events = order[~came]
        inst, seq, port = rows.inst[events], rows.seq[events], rows.port[events]
        left, ran = rows.instances(states, self._readable, self.engine.initial_state)
        ops = rows.op.take(events).to_pylist()
        values = [v if v else {} for v in rows.values.take(events).to_pylist()]
        inst_l, seq_l, port_l = inst.tolist(), seq.tolist(), port.tolist()
        olds, news, bad = self._mirror(states, inst_l, port_l, ops, values, left)
        outputs = self._evaluate(olds, news, bad)
        # the transactions: consecutive events of one instance, sequence number and port
        cut = (inst[1:] != inst[:-1]) | (seq[1:] != seq[:-1]) | (port[1:] != port[:-1])
        starts = [0, *(np.flatnonzero(cut) + 1).tolist(), len(events)] if len(events) else [0]
        changes = self._deliver(states, inst_l, seq_l, starts, values, outputs, bad, left, now)
        arrivals = rows.arrivals(order[came])
        return ([InstanceRun(i, [], arrivals.get(i, [])) for i in ran], sorted(left), changes)

    def _readable(self, state: Any) -> bool:
        """Whether ``state`` has the shape the engine's initial state has for this element."""
        try:
            mirror = state["selects"][0]["sources"][0]
            output = state["output"]
            return (len(state["selects"]) == 1 and "seq" in state and "rows" in mirror
                    and (output is None) == (self.engine.kind != "window")
                    and (output is None or "rows" in output))
        except (KeyError, IndexError, TypeError):
            return False

    def _mirror(self, states: dict[int, dict], inst_l: list[int], port_l: list[int], ops: list,
                values: list[dict], left: set[int]) -> tuple[list, list, dict[int, str]]:
        """The source's mirror through the bucket's events in order (:func:`mirror_changes`)."""
        return mirror_changes(states, inst_l, port_l, ops, values, left, [self.source_key],
                              self.engine.name)

    def _evaluate(self, olds: list, news: list, bad: dict[int, str]) -> list:
        """Per event, its output change as ``(op, old output row, new output row)``, None for no
        change, or a list of the engine's changes for an event with a failing expression (run by
        the engine's WHERE and projection; ``bad`` gets its reason instead)."""
        n = len(olds)
        # the rows to evaluate: every old row, then every new row (positions into ``rows``)
        rows = [r for r in olds if r is not None] + [r for r in news if r is not None]
        at_old: list = [None] * n
        at_new: list = [None] * n
        k = 0
        for e, r in enumerate(olds):
            if r is not None:
                at_old[e] = k
                k += 1
        for e, r in enumerate(news):
            if r is not None:
                at_new[e] = k
                k += 1
        failing: set[int] = set()
        if self.where is not None:
            passed = [truth(t) for t in self._values(self.where, rows, failing)]
        else:
            passed = [True] * len(rows)
        first_new = len(rows) - sum(1 for r in news if r is not None)
        live = [j for j in range(first_new if self.stream else 0, len(rows))
                if passed[j] and j not in failing]
        live_rows = [rows[j] for j in live]
        columns: list = [None] * len(self.columns)
        read: set[int] = set()   # items read directly (they cannot fail)
        for c, (column_name, kind) in self.direct.items():
            got = _direct(live_rows, column_name, kind)
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
        for e in range(n):
            if e in bad:
                continue
            jo, jn = at_old[e], at_new[e]
            if jo is None and jn is None:
                continue
            if (jo is not None and jo in failing) or (jn is not None and jn in failing):
                outputs[e] = self._redo(olds[e], news[e], bad, e)
                continue
            old = out_rows[jo] if jo is not None and passed[jo] else None
            new = out_rows[jn] if jn is not None and passed[jn] else None
            if self.stream and jo is not None and passed[jo]:
                old = _PASSED  # (a stream's old row is filtered, not projected)
            if old is not None and new is not None:
                outputs[e] = ("u", old, new)
            elif old is not None:
                outputs[e] = ("d", old, None)
            elif new is not None:
                outputs[e] = ("i", None, new)
        return outputs

    def _vector(self, node: Any) -> Optional[Callable[[list], Optional[list]]]:
        """``node`` over a list of rows a column at a time, when it is comparisons and arithmetic
        (SPLASH's own operators, as the engine's compiled closures call them) of literals and
        plain columns whose values the engine reads as they are: a function giving the values,
        or None when a row's column value is not as such a column holds it (or raising when an
        operator fails: the engine's expressions then run row by row and give the failure);
        else None."""
        ref = field_ref(node)
        if ref is not None:
            kind = _AS_IS.get(self.types.get(ref[1], "")) if ref[0] == self.alias else None
            if kind is None:
                return None
            column = ref[1]
            return lambda rows: _direct(rows, column, kind)
        if isinstance(node, n.Literal):
            compiled = self.sel.exprs.compile(node)
            try:
                value = compiled({})
            except SplashError:
                return None
            return lambda rows: [value] * len(rows)
        if (isinstance(node, n.Binary) and node.temporal is None
                and node.op in ("=", "!=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%")):
            left, right = self._vector(node.left), self._vector(node.right)
            if left is None or right is None:
                return None
            op = node.op
            fn = comparison if op in ("=", "!=", "<>", "<", "<=", ">", ">=") else arithmetic

            def run(rows: list) -> Optional[list]:
                a = left(rows)  # type: ignore[misc]
                b = right(rows) if a is not None else None  # type: ignore[misc]
                if b is None:
                    return None
                return [fn(op, x, y) for x, y in zip(a, b)]
            return run
        return None

    def _values(self, spec: tuple, rows: list[dict], failing: set[int],
                positions: Optional[list[int]] = None) -> list:
        """An expression's values over ``rows`` (a failing row gets None, its position, from
        ``positions`` or its index, added to ``failing``)."""
        column, kind, compiled, vector = spec
        alias = self.alias
        if vector is not None:
            try:
                got = vector(rows)
            except Exception:  # (a row that fails: the engine's expression says how, below)
                got = None
            if got is not None:
                return got
        if column is not None and kind is not None:
            if kind is int:
                out = [v if v is None or (type(v) is int and -2**31 <= v < 2**31) else _MISSING
                       for v in (r.get(column, _MISSING) if type(r) is dict else _MISSING
                                 for r in rows)]
            else:
                out = [v if v is None or type(v) is kind else _MISSING
                       for v in (r.get(column, _MISSING) if type(r) is dict else _MISSING
                                 for r in rows)]
            if _MISSING not in out:
                return out
            todo = [k for k, v in enumerate(out) if v is _MISSING]
        else:
            out = [None] * len(rows)
            todo = range(len(rows))  # type: ignore[assignment]
        for k in todo:
            j = positions[k] if positions is not None else k
            if j in failing:
                out[k] = None
                continue
            try:
                out[k] = compiled({alias: rows[k]})
            except SplashError:
                failing.add(j)
                out[k] = None
        return out

    def _redo(self, old: Optional[dict], new: Optional[dict], bad: dict[int, str],
              e: int) -> Optional[list]:
        """An event with a failing expression through the engine's WHERE and projection: its
        output changes, or None with its reason in ``bad``."""
        alias = self.alias
        op = "d" if new is None else ("i" if old is None else "u")
        change = Change(op, (), {alias: old} if old is not None else None,
                        {alias: new} if new is not None else None, 0)
        try:
            return [(c.op, c.old, c.new) for c in self.sel.finish({}, [change])]
        except (SplashError, RowRefused) as ex:
            bad[e] = str(ex)
            return None

    # --- outputs ------------------------------------------------------------------------------

    def _deliver(self, states: dict[int, dict], inst_l: list[int], seq_l: list[int],
                 starts: list[int], values: list[dict], outputs: list, bad: dict[int, str],
                 left: set[int], now: int, source_keys: Optional[list] = None) -> RowChanges:
        """Each transaction's (events ``starts[t]`` to ``starts[t + 1]``) bad records, then its
        output changes merged by key and through the output stage, in order; the instances'
        sequence numbers raised as the engine raises them. ``source_keys``: per event its
        source's key columns, when they are not all :attr:`source_key` (a UNION's ports)."""
        emitted: list[tuple] = []   # (instance, seq, sub, op, row)
        key_cols = self.key
        if len(key_cols) == 1:
            only = key_cols[0]

            def key_of(row: dict) -> tuple:
                return (row[only],)
        else:
            # (a tuple of the values, for 2 or more columns; a stream has none)
            key_of = itemgetter(*key_cols) if key_cols else (lambda row: ())
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
            if self.stream:
                sub = self._stream(emitted, i, s, sub, e, end, values, outputs, bad,
                                   self.source_key if source_keys is None else source_keys[e])
                continue
            if end - e == 1 and e not in bad:
                o = outputs[e]
                if o is None:
                    continue
                changes = [o] if type(o) is tuple else o
            else:
                changes = []
                for x in range(e, end):
                    if x in bad:
                        emitted.append((i, s, sub, None, (bad[x], dict(values[x]))))
                        sub += 1
                        continue
                    o = outputs[x]
                    if o is None:
                        continue
                    if type(o) is tuple:
                        changes.append(o)
                    else:
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

    def _stream(self, emitted: list, i: int, s: int, sub: int, e: int, end: int, values: list,
                outputs: list, bad: dict[int, str], key_cols: list[str]) -> int:
        """A stream's part of :meth:`_deliver` for one transaction (events ``e`` to ``end``): its
        bad records, then its changes keyed by the source's key (the engine keys a stream's
        projected change so), merged by key, each insert or update an insert; the next
        sub-number."""
        keyed = []
        for x in range(e, end):
            if x in bad:
                emitted.append((i, s, sub, None, (bad[x], dict(values[x]))))
                sub += 1
                continue
            o = outputs[x]
            if o is None:
                continue
            key = tuple([values[x].get(c) for c in key_cols])
            for op, old, new in ([o] if type(o) is tuple else o):
                keyed.append((op, key, old, new))
        if len(keyed) > 1 and len({k for _, k, _, _ in keyed}) < len(keyed):
            keyed = [(c.op, c.key, c.old, c.new)
                     for c in consolidate([Change(op, k, old, new, s) for op, k, old, new in keyed])]
        for op, _, _, new in keyed:
            if op != "d":
                emitted.append((i, s, sub, "i", new))
                sub += 1
        return sub


def mirror_changes(states: dict[int, dict], inst_l: list[int], port_l: list[int], ops: list,
                   values: list[dict], left: set[int], keys: list[Optional[list[str]]],
                   name: str) -> tuple[list, list, dict[int, str]]:
    """The sources' mirrors through the bucket's events in order (port ``k`` is select ``k``'s
    one source, ``keys[k]`` its key, None for a stream source, which has no mirror): per event
    the row it replaces or deletes and its new row (None for none), and the bad records of events
    with an unknown opcode or port (by event position), as the engine's source stage makes them:
    a delete or safedelete pops the key (a stream source: nothing), anything else stores the row
    (a stream source: a new row each)."""
    n = len(inst_l)
    olds: list = [None] * n
    news: list = [None] * n
    bad: dict[int, str] = {}
    ports = len(keys)
    current = None
    mirrors: list = []
    # per port: its key's getter, whether it gives one value (not a tuple), the key columns
    getters = [None if cols is None else
               (itemgetter(*cols) if cols else (lambda row: ()), len(cols) == 1, cols)
               for cols in keys]
    for e in range(n):
        i = inst_l[e]
        if i in left:
            continue
        if i != current:
            current = i
            mirrors = [s["sources"][0]["rows"] if s["sources"][0] is not None else None
                       for s in states[i]["selects"]]
        op = ops[e]
        if op not in OPS:
            bad[e] = f"unknown opcode {op!r}"
            continue
        p = port_l[e]
        if not 0 <= p < ports:
            bad[e] = f"no input port {p} on {name}"
            continue
        row = values[e]
        getter = getters[p]
        if getter is None:   # a stream source
            if op != "d" and op != "s":
                news[e] = row
            continue
        mirror = mirrors[p]
        try:
            key = (getter[0](row),) if getter[1] else getter[0](row)
        except KeyError:   # (a row without values, {}: nulls)
            key = tuple([row.get(c) for c in getter[2]])
        if op == "d" or op == "s":
            olds[e] = mirror.pop(key, None)
        else:
            olds[e] = mirror.get(key)
            mirror[key] = row
            news[e] = row
    return olds, news, bad


def _direct(rows: list, column: str, kind: type) -> Optional[list]:
    """Column ``column`` of ``rows`` as the engine reads and casts it into a column of its own
    type (``kind``: the Python type of its values, :class:`Long` for a long): the values as they
    are (a long made a ``Long``), or None when one is not of that type (the engine's read then
    converts it)."""
    if rows and set(map(type, rows)) == {dict}:  # the usual case: checked by C loops
        try:
            values = list(map(itemgetter(column), rows))
        except KeyError:
            values = None
        if values is not None:
            types = set(map(type, values))
            types.discard(type(None))
            if not types <= {kind if kind is not Long else int}:
                return _direct_each(rows, column, kind)
            if kind is int or kind is Long:
                low, high = (-2**31, 2**31) if kind is int else _LONG_RANGE
                present = [v for v in values if v is not None] if None in values else values
                if present and (min(present) < low or max(present) >= high):
                    return _direct_each(rows, column, kind)
                if kind is Long:
                    return [Long(v) if v is not None else None for v in values]
            return values
    return _direct_each(rows, column, kind)


def _direct_each(rows: list, column: str, kind: type) -> Optional[list]:
    """:func:`_direct`, value by value."""
    if kind is Long:
        low, high = _LONG_RANGE
        out = [v if v is None else (Long(v) if type(v) is int and low <= v < high else _MISSING)
               for v in (r.get(column, _MISSING) if type(r) is dict else _MISSING for r in rows)]
    elif kind is int:
        out = [v if v is None or (type(v) is int and -2**31 <= v < 2**31) else _MISSING
               for v in (r.get(column, _MISSING) if type(r) is dict else _MISSING for r in rows)]
    else:
        out = [v if v is None or type(v) is kind else _MISSING
               for v in (r.get(column, _MISSING) if type(r) is dict else _MISSING for r in rows)]
    return None if _MISSING in out else out


def write_inline(emitted: list, store: Optional[dict], keyed: list, i: int, s: int, sub: int,
                 key_of: Any, delta: bool) -> int:
    """One transaction's changes ``keyed`` (``(op, key, old, new)``, merged by key) written to an
    output window's ``store`` as the engine's output stage writes them, or passed on as they are
    for a delta stream (an update that moves its key a delete and an insert); each output appended
    to ``emitted`` as ``(instance, seq, sub, op, row)``. Returns the next sub-number."""
    for op, key, old, new in keyed:
        old_key = key_of(old) if old is not None else None
        if delta:
            if op == "u" and old_key != key:
                emitted.append((i, s, sub, "d", old))
                emitted.append((i, s, sub + 1, "i", new))
                sub += 2
            else:
                emitted.append((i, s, sub, op, old if op == "d" else new))
                sub += 1
            continue
        if new is None:
            gone = store.pop(old_key, None)  # type: ignore[union-attr]
            if gone is not None:
                emitted.append((i, s, sub, "d", gone))
                sub += 1
            continue
        if old is not None and old_key != key:
            gone = store.pop(old_key, None)  # type: ignore[union-attr]
            if gone is not None:
                emitted.append((i, s, sub, "d", gone))
                sub += 1
        was = store.get(key)  # type: ignore[union-attr]
        store[key] = new  # type: ignore[index]
        emitted.append((i, s, sub, "i" if was is None else "u", new))
        sub += 1
    return sub


def row_changes(emitted: list, names: list[str]) -> RowChanges:
    """The outputs ``emitted`` (``(instance, seq, sub, op, row)``; ``op`` None for a bad record,
    its row then ``(reason, values)``) as :class:`RowChanges` with the columns ``names``."""
    out = RowChanges([], [], [], [], [], [])
    rows_out = []
    for i, s, number, op, row in emitted:
        if op is None:
            out.bad.append((i, s, number, row[0], row[1]))
            continue
        out.inst.append(i)
        out.seq.append(s)
        out.sub.append(number)
        out.op.append(op)
        rows_out.append(row)
    out.values = [[r.get(name) for r in rows_out] for name in names]
    return out
