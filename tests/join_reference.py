"""Incremental joins of a Select's sources (docs/runtime-joins-aggregates.md).

A :class:`Joiner` turns row changes of the sources of one Select into changes of joined rows. The
join is left-deep: ``joins[j]`` combines the accumulated rows of sources ``0..j`` (level ``j``'s
left side, keyed by the tuple of their identities) with source ``j + 1`` (its right side). Each
level keeps both sides stored (when they can change), a hash index on the equated columns of its
ON condition, and per-row match counts for the outer-join transitions.

A stream source is not stored: its row is a *transient* insert that joins with what the other
sources hold now and yields inserts only; changes of the other sources then yield nothing.

All state is plain data in the ``state`` dict (picklable); the object holds only the compiled
expressions, so one Joiner serves every partition instance.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence

from ccl.plan.model import Join, Select
from ccl.syntax import nodes as n
from runtime.engine.changes import Change, same_row
from runtime.engine.expr import Compiled, Expressions
from runtime.engine.parts import field_ref

JoinedRow = dict  # alias -> row (column -> value) or None for the missing side of an outer join

__all__ = ["JoinSource", "Joiner", "referenced_columns", "null_filled", "order_changes"]

_OP_ORDER = {"d": 0, "u": 1, "i": 2}


# --- expression helpers (shared with aggregate.py) ---------------------------------------------

def _walk(exprs: object) -> Iterator[n.Node]:
    """Every node of the expressions in ``exprs`` (a tree, None, or lists of them, nested)."""
    if isinstance(exprs, n.Node):
        yield from exprs.walk()
    elif isinstance(exprs, (list, tuple)):
        for value in exprs:
            yield from _walk(value)


def referenced_columns(exprs: Iterable[object]) -> dict[str, list[str]]:
    """The columns each alias's rows are read for, over all ``exprs``."""
    found: dict[str, list[str]] = {}
    for expr in exprs:
        for node in _walk(expr):
            ref = field_ref(node)
            if ref is not None and ref[1] not in found.setdefault(ref[0], []):
                found[ref[0]].append(ref[1])
    return found


def null_filled(rows: Mapping[str, Optional[Mapping[str, object]]],
                columns: Mapping[str, Sequence[str]]) -> dict[str, Mapping[str, object]]:
    """``rows`` with each missing (None) row replaced by a row of nulls over ``columns[alias]``, so
    that expressions read null from the missing side of an outer join (``rows`` itself when no
    row is missing)."""
    if None not in rows.values():
        return rows  # type: ignore[return-value]
    return {alias: row if row is not None else {c: None for c in columns.get(alias, ())}
            for alias, row in rows.items()}


def order_changes(changes: list[Change]) -> list[Change]:
    """Deletes first, then updates, then inserts (stable): the batch can be applied in order."""
    return sorted(changes, key=lambda c: _OP_ORDER[c.op])


def _is_true(expr: n.Node) -> bool:
    return isinstance(expr, n.Literal) and expr.value is True


# --- one level of the left-deep join -----------------------------------------------------------

class _Level:
    """What is fixed about level ``j``: its kind, aliases, the equated columns and the rest of the
    ON condition (compiled)."""

    def __init__(self, j: int, join: Join, aliases: Sequence[str], exprs: Expressions) -> None:
        self.j = j
        self.kind = str(join.kind or "inner")
        self.left_aliases = list(aliases[: j + 1])
        self.right_alias = aliases[j + 1]
        self.left_keeps = self.kind in ("left", "full")
        self.right_keeps = self.kind in ("right", "full")
        self.eq_left: list[tuple[str, str]] = []   # (alias, column) on the left side
        self.eq_right: list[str] = []              # matching column of the right source
        residual = []
        for part in n.conjuncts(join.on):
            if not self._equality(part):
                if not _is_true(part):
                    residual.append(part)
        self.residual: list[Compiled] = [exprs.compile(p) for p in residual]

    def _equality(self, part: object) -> bool:
        """Record ``part`` as an equated column pair when it is one; say whether it was."""
        if not (isinstance(part, n.Binary) and part.op == "="):
            return False
        a, b = field_ref(part.left), field_ref(part.right)
        if a is None or b is None:
            return False
        if a[0] == self.right_alias and b[0] in self.left_aliases:
            a, b = b, a
        if a[0] in self.left_aliases and b[0] == self.right_alias:
            self.eq_left.append(a)
            self.eq_right.append(b[1])
            return True
        return False

    def left_values(self, row: JoinedRow) -> Optional[tuple]:
        """The equated values of a left row (None when one is null: it matches nothing)."""
        values = []
        for alias, col in self.eq_left:
            src = row.get(alias)
            value = None if src is None else src.get(col)
            if value is None:
                return None
            values.append(value)
        return tuple(values)

    def right_values(self, row: Mapping[str, object]) -> Optional[tuple]:
        """The equated values of a right row (None when one is null)."""
        values = tuple(row.get(c) for c in self.eq_right)
        return None if any(v is None for v in values) else values


def _index_add(index: dict, values: Optional[tuple], key: tuple) -> None:
    if values is not None:
        index.setdefault(values, {})[key] = True


def _index_remove(index: dict, values: Optional[tuple], key: tuple) -> None:
    if values is None:
        return
    bucket = index.get(values)
    if bucket is not None:
        bucket.pop(key, None)
        if not bucket:
            del index[values]


class JoinSource(NamedTuple):
    """One source of a join: its alias, its kind as the select reads it (a stream under a FROM
    KEEP is a window) and its column names."""

    alias: str
    kind: str
    columns: Sequence[str]


class Joiner:
    """Joins the sources of one Select incrementally (see the module docstring)."""

    def __init__(self, select: Select, exprs: Expressions, sources: Sequence[JoinSource]) -> None:
        """``select`` is a plan Select; ``sources[i]`` describes its i-th source."""
        keeps = [s.keep for s in select.sources] + [None] * len(sources)
        self.aliases = [s.alias for s in sources]
        self.stored = [s.kind != "stream" or keeps[i] is not None
                       for i, s in enumerate(sources)]
        self.columns = {s.alias: list(s.columns) for s in sources}
        self.levels = [_Level(j, join, self.aliases, exprs) for j, join in enumerate(select.joins)]
        unstored = [i for i, s in enumerate(self.stored) if not s]
        self.first_stream = unstored[0] if unstored else len(sources)

    def initial_state(self) -> dict:
        """Empty stores: ``src[i]`` rows of source i (by key), ``acc[j]`` rows of level j's left
        side, ``lidx``/``ridx`` the equality indexes, ``lcnt``/``rcnt`` match counts; ``keyed``:
        whether every level finds its matches through its indexes, never walking a side's rows
        (such a state may live in a keyed store that does not keep insertion order:
        runtime/state/rows.py)."""
        n = len(self.levels)
        return {"src": [{} for _ in self.aliases], "acc": [{} for _ in range(n)],
                "lidx": [{} for _ in range(n)], "ridx": [{} for _ in range(n)],
                "lcnt": [{} for _ in range(n)], "rcnt": [{} for _ in range(n)],
                "keyed": all(lv.eq_left for lv in self.levels)}

    def apply(self, state: dict, source_index: int, change: Change) -> list[Change]:
        """The changes of joined rows caused by ``change`` of source ``source_index``."""
        alias = self.aliases[source_index]
        transient = not self.stored[source_index]
        if transient:
            if change.op == "d" or change.new is None:
                return []
            change = Change("i", tuple(change.key), None, dict(change.new), change.seq)
        else:
            change = self._normalise(state["src"][source_index], change)
            if change is None:
                return []
        if not self.levels:
            return self._single(state, alias, change, transient)
        if source_index == 0:
            wrapped = Change(change.op, (change.key,), _wrap(alias, change.old),
                             _wrap(alias, change.new), change.seq)
            if not transient:
                _store(state["src"][0], change)
            return self._propagate(state, 0, [wrapped], transient)
        j = source_index - 1
        out = self._right_change(state, j, change, transient)
        if not transient and j + 1 >= self.first_stream:
            return []
        return self._propagate(state, source_index, out, transient)

    # --- driving ----------------------------------------------------------------------------

    @staticmethod
    def _normalise(store: dict, change: Change) -> Optional[Change]:
        """The change made consistent with the stored row: insert of a present key is an update,
        update of a missing key an insert, delete of a missing key nothing."""
        key = tuple(change.key)
        old = store.get(key)
        if change.op == "d":
            return None if old is None else Change("d", key, old, None, change.seq)
        new = dict(change.new or {})
        return Change("i" if old is None else "u", key, old, new, change.seq)

    def _single(self, state: dict, alias: str, change: Change, transient: bool) -> list[Change]:
        """A Select with one source: its changes, wrapped."""
        if not transient:
            _store(state["src"][0], change)
        return [Change(change.op, (change.key,), _wrap(alias, change.old),
                       _wrap(alias, change.new), change.seq)]

    def _propagate(self, state: dict, start: int, changes: list[Change],
                   transient: bool) -> list[Change]:
        """Feed changes of level ``start``'s left side through the remaining levels."""
        for j in range(start, len(self.levels)):
            out: list[Change] = []
            for ch in changes:
                out.extend(self._left_change(state, j, ch, transient))
            if not transient and j + 1 >= self.first_stream:
                return []   # these joined rows involve a stream: only the stores changed
            changes = out
        return changes

    # --- matching ---------------------------------------------------------------------------

    def _on(self, level: _Level, left: JoinedRow, right: Mapping[str, object]) -> bool:
        if not level.residual:
            return True
        rows = null_filled({**left, level.right_alias: right}, self.columns)
        return all(f(rows) is True for f in level.residual)

    def _right_matches(self, state: dict, level: _Level, left: JoinedRow) -> list[tuple]:
        """Keys of the right source's rows that ``left`` joins with."""
        store = state["src"][level.j + 1]
        if level.eq_left:
            values = level.left_values(left)
            keys = [] if values is None else list(state["ridx"][level.j].get(values, {}))
        else:
            keys = list(store)
        return [k for k in keys if self._on(level, left, store[k])]

    def _left_matches(self, state: dict, level: _Level, right: Mapping[str, object]) -> list[tuple]:
        """Keys of the left side's rows that ``right`` joins with."""
        store = state["acc"][level.j]
        if level.eq_right:
            values = level.right_values(right)
            keys = [] if values is None else list(state["lidx"][level.j].get(values, {}))
        else:
            keys = list(store)
        return [k for k in keys if self._on(level, store[k], right)]

    # --- outputs of one level ---------------------------------------------------------------

    def _left_rows(self, state: dict, level: _Level, key: tuple, row: Optional[JoinedRow],
                   matches: list[tuple]) -> dict[tuple, JoinedRow]:
        """The joined rows one left row yields (with its matches, or alone for a left/full join)."""
        if row is None:
            return {}
        store = state["src"][level.j + 1]
        if matches:
            return {key + (rk,): {**row, level.right_alias: store[rk]} for rk in matches}
        if level.left_keeps:
            return {key + (None,): {**row, level.right_alias: None}}
        return {}

    def _right_rows(self, state: dict, level: _Level, key: tuple,
                    row: Optional[Mapping[str, object]], matches: list[tuple]) -> dict[tuple, JoinedRow]:
        """The joined rows one right row yields (with its matches, or alone for right/full)."""
        if row is None:
            return {}
        store = state["acc"][level.j]
        if matches:
            return {lk + (key,): {**store[lk], level.right_alias: row} for lk in matches}
        if level.right_keeps:
            return {self._no_left(level) + (key,): self._no_left_row(level, row)}
        return {}

    @staticmethod
    def _no_left(level: _Level) -> tuple:
        return (None,) * len(level.left_aliases)

    @staticmethod
    def _no_left_row(level: _Level, row: Mapping[str, object]) -> JoinedRow:
        return {**{a: None for a in level.left_aliases}, level.right_alias: row}

    def _left_change(self, state: dict, j: int, ch: Change, transient: bool) -> list[Change]:
        """A change of level j's left side: the joined rows it changes, and the right rows whose
        unmatched row appears or goes."""
        level = self.levels[j]
        old_m = self._right_matches(state, level, ch.old) if ch.old is not None else []
        new_m = self._right_matches(state, level, ch.new) if ch.new is not None else []
        before = self._left_rows(state, level, ch.key, ch.old, old_m)
        after = self._left_rows(state, level, ch.key, ch.new, new_m)
        if transient:
            return _diff({}, after, ch.seq)
        self._store_left(state, level, ch)
        out = _diff(before, after, ch.seq)
        rcnt, store = state["rcnt"][j], state["src"][j + 1]
        cnt = state["lcnt"][j]
        if ch.new is None:
            cnt.pop(ch.key, None)
        else:
            cnt[ch.key] = len(new_m)
        for rk in set(old_m) - set(new_m):
            rcnt[rk] -= 1
            if rcnt[rk] == 0:
                del rcnt[rk]
                if level.right_keeps:
                    out.append(Change("i", self._no_left(level) + (rk,), None,
                                      self._no_left_row(level, store[rk]), ch.seq))
        for rk in set(new_m) - set(old_m):
            rcnt[rk] = rcnt.get(rk, 0) + 1
            if rcnt[rk] == 1 and level.right_keeps:
                out.append(Change("d", self._no_left(level) + (rk,),
                                  self._no_left_row(level, store[rk]), None, ch.seq))
        return order_changes(out)

    def _right_change(self, state: dict, j: int, ch: Change, transient: bool) -> list[Change]:
        """A change of source j+1 (level j's right side); symmetric to :meth:`_left_change`."""
        level = self.levels[j]
        if not transient and j + 1 > self.first_stream:
            self._store_right(state, level, ch)   # joined rows involve a stream: store only
            return []
        old_m = self._left_matches(state, level, ch.old) if ch.old is not None else []
        new_m = self._left_matches(state, level, ch.new) if ch.new is not None else []
        before = self._right_rows(state, level, ch.key, ch.old, old_m)
        after = self._right_rows(state, level, ch.key, ch.new, new_m)
        if transient:
            return _diff({}, after, ch.seq)
        self._store_right(state, level, ch)
        out = _diff(before, after, ch.seq)
        lcnt, store = state["lcnt"][j], state["acc"][j]
        cnt = state["rcnt"][j]
        if ch.new is None:
            cnt.pop(ch.key, None)
        else:
            cnt[ch.key] = len(new_m)
        for lk in set(old_m) - set(new_m):
            lcnt[lk] -= 1
            if lcnt[lk] == 0 and level.left_keeps:
                out.append(Change("i", lk + (None,), None,
                                  {**store[lk], level.right_alias: None}, ch.seq))
        for lk in set(new_m) - set(old_m):
            lcnt[lk] = lcnt.get(lk, 0) + 1
            if lcnt[lk] == 1 and level.left_keeps:
                out.append(Change("d", lk + (None,), {**store[lk], level.right_alias: None},
                                  None, ch.seq))
        return order_changes(out)

    # --- stores -----------------------------------------------------------------------------

    def _store_left(self, state: dict, level: _Level, ch: Change) -> None:
        acc, index = state["acc"][level.j], state["lidx"][level.j]
        if ch.old is not None:
            _index_remove(index, level.left_values(ch.old) if level.eq_left else None, ch.key)
        if ch.new is None:
            acc.pop(ch.key, None)
        else:
            acc[ch.key] = ch.new
            _index_add(index, level.left_values(ch.new) if level.eq_left else None, ch.key)

    def _store_right(self, state: dict, level: _Level, ch: Change) -> None:
        index = state["ridx"][level.j]
        if ch.old is not None:
            _index_remove(index, level.right_values(ch.old) if level.eq_right else None, ch.key)
        _store(state["src"][level.j + 1], ch)
        if ch.new is not None:
            _index_add(index, level.right_values(ch.new) if level.eq_right else None, ch.key)


def _wrap(alias: str, row: Optional[Mapping[str, object]]) -> Optional[JoinedRow]:
    return None if row is None else {alias: row}


def _store(store: dict, ch: Change) -> None:
    if ch.new is None:
        store.pop(ch.key, None)
    else:
        store[ch.key] = ch.new


def _diff(before: Mapping[tuple, JoinedRow], after: Mapping[tuple, JoinedRow],
          seq: int) -> list[Change]:
    """Changes taking the joined rows ``before`` to ``after`` (same key: update, unless the row
    shows the same values, :func:`_same_joined`)."""
    out = [Change("d", k, row, None, seq) for k, row in before.items() if k not in after]
    for k, row in after.items():
        if k not in before:
            out.append(Change("i", k, None, row, seq))
        elif not _same_joined(before[k], row):
            out.append(Change("u", k, before[k], row, seq))
    return order_changes(out)


def _same_joined(old: JoinedRow, new: JoinedRow) -> bool:
    """Whether joined row ``new`` shows what ``old`` showed: each source's row the same by
    :func:`runtime.engine.changes.same_row` (a float zero of the other sign is a change, as for
    every other row of the engine), the missing side of an outer join missing in both."""
    if old != new:
        return False
    for alias, row in old.items():
        other = new[alias]
        if row is not other and row is not None and not same_row(row, other):
            return False
    return True
