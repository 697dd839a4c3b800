"""The stages of one element's pipeline that are not join or aggregation (docs/runtime.md).

- :class:`InputStage`: an input element's own rows (key rules, AUTOGENERATE, input WHERE);
- :class:`SourceStage`: one FROM source: a mirror of a window source by its key (so that updates
  and deletes carry the old row), or a FROM-level KEEP turning a stream source into a window;
- :func:`where`: a filter over changes;
- :class:`Projection`: the select list of a non-aggregating select;
- :class:`OutputStage`: the element's own rows (stream, window or delta stream rules); every select
  of a UNION feeds the same one.

Stages hold no per-instance data: each method takes the instance's state part.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from ccl.plan.model import Element, Keep, Select
from runtime.engine.changes import Change
from runtime.engine.expr import Compiled, Expressions, coerce_row
from runtime.engine.parts import column_pairs
from runtime.engine.store import Store

STRICT_KEEPS = (None, "all")


class RowRefused(Exception):
    """A change that the strict key rules of an input window refuse (the row becomes bad)."""


def key_of(row: Mapping[str, object], key: Sequence[str]) -> tuple:
    """The values of the ``key`` columns of ``row``, as a tuple."""
    return tuple([row.get(c) for c in key])  # a list first: cheaper than a generator


def _show_key(key: tuple) -> str:
    return "(" + ", ".join(repr(v) for v in key) + ")"


def truth(value: object) -> bool:
    """A filter result: null counts as false."""
    return value is not None and bool(value)


def apply_to_window(store: Store, store_state: dict, strict: bool, name: str, op: str, key: tuple,
                    row: dict, seq: int, now_ms: int) -> list[Change]:
    """One opcode applied to a keyed window: under strict keys an insert of a present key and an
    update or delete of a missing one raise RowRefused; otherwise a delete/safedelete removes
    and anything else upserts."""
    present = store.get(store_state, key) is not None
    if strict:
        if op == "i" and present:
            raise RowRefused(f"duplicate key {_show_key(key)} in {name}")
        if op in ("u", "d") and not present:
            raise RowRefused(f"no row with key {_show_key(key)} in {name}")
    if op in ("d", "s"):
        return store.delete(store_state, key, seq)
    return store.upsert(store_state, key, row, seq, now_ms)


class InputStage:
    """An input window, stream or delta stream: applies the raw rows the runtime delivers."""

    def __init__(self, element: Element, exprs: Expressions) -> None:
        self.name: str = element.name
        self.kind: str = element.kind
        self.columns = column_pairs(element.columns)
        self.key: list[str] = list(element.key)
        keep = element.keep
        self.store: Optional[Store] = (Store(keep, element.aging) if self.kind == "window"
                                       else None)
        self.strict: bool = (keep.kind if keep is not None else None) in STRICT_KEEPS
        where = element.input_where
        self.where: Optional[Compiled] = exprs.compile(where) if where else None
        auto = element.autogenerate
        self.auto_columns: list[str] = list(auto.columns) if auto else []
        self.auto_start: Optional[Compiled] = (exprs.compile(auto.start)
                                               if auto and auto.start else None)

    def initial_state(self) -> dict:
        """The window's rows and the AUTOGENERATE counters."""
        start = 0
        if self.auto_start is not None:
            value = self.auto_start({})
            start = int(value) if value is not None else 0
        return {"store": self.store.initial_state() if self.store else None,
                "auto": {c: start for c in self.auto_columns}}

    def apply(self, state: dict, op: str, seq: int, values: Mapping[str, object],
              now_ms: int) -> list[Change]:
        """The changes of the element caused by one input row (``op`` one of i u d p s); raises
        RowRefused (key rules) or SplashError (a cast or the WHERE failed)."""
        row = coerce_row(values, self.columns)
        if op in ("i", "u", "p") and self.where is not None and not truth(self.where({self.name: row})):
            return []
        if self.kind == "stream":
            if op in ("d", "s"):
                return []
            self._autogenerate(state, row)
            return [Change("i", (seq,), None, row, seq)]
        if op == "i" or (op == "p" and self.kind == "window"
                         and self.store.get(state["store"], key_of(row, self.key)) is None):
            self._autogenerate(state, row)
        key = key_of(row, self.key)
        if self.kind == "delta stream":
            return [self._delta(op, key, row, seq)]
        return self._window(state["store"], op, key, row, seq, now_ms)

    def _autogenerate(self, state: dict, row: dict) -> None:
        counters = state["auto"]
        for col in self.auto_columns:
            row[col] = counters[col]
            counters[col] += 1

    def _delta(self, op: str, key: tuple, row: dict, seq: int) -> Change:
        # A delta stream stores nothing: an upsert goes on as an update, a safedelete as a delete.
        if op == "i":
            return Change("i", key, None, row, seq)
        if op in ("u", "p"):
            return Change("u", key, row, row, seq)
        return Change("d", key, row, None, seq)

    def _window(self, store_state: dict, op: str, key: tuple, row: dict, seq: int,
                now_ms: int) -> list[Change]:
        return apply_to_window(self.store, store_state, self.strict, self.name, op, key, row, seq,
                               now_ms)

    def expire(self, state: dict, now_ms: int, seq: int) -> list[Change]:
        """Deletes of rows a time KEEP evicts."""
        return self.store.expire(state["store"], now_ms, seq) if self.store else []

    def next_deadline(self, state: dict) -> Optional[int]:
        """When :meth:`expire` next has work."""
        return self.store.next_deadline(state["store"]) if self.store else None


class SourceStage:
    """One FROM source of a select: turns the source's changelog into changes of its rows.

    A window or delta stream source is mirrored by its key (changes carry the old row; an upsert
    or safedelete is resolved against the mirror; a FROM-level KEEP applies to the mirror). A
    stream source is not stored unless it has a FROM-level KEEP; its rows are identified by seq.
    """

    def __init__(self, source: Element, keep: Optional[Keep]) -> None:
        self.kind: str = source.kind
        self.columns = column_pairs(source.columns)
        self.key: list[str] = list(source.key) if self.kind != "stream" else []
        self.store: Optional[Store] = (Store(keep) if self.kind != "stream" or keep else None)

    @property
    def mirrored(self) -> bool:
        """Whether the source's rows are kept (False for an unstored stream, and once
        :meth:`unmirror` made a window or delta stream source unstored)."""
        return self.store is not None

    def unmirror(self) -> None:
        """Keep no mirror of this window or delta stream source: an upsert becomes an update whose
        old row is unknown (``None``), a delete or safedelete a delete of the key with no row:
        the reader (an aggregate) finds what the key held in its own state (its inputs)."""
        self.store = None

    @property
    def effective_kind(self) -> str:
        """``window`` for a stream made a window by a FROM-level KEEP, else the source's kind."""
        return "window" if self.kind == "stream" and self.store else self.kind

    def initial_state(self) -> Optional[dict]:
        """The mirror (``None`` for an unstored stream source)."""
        return self.store.initial_state() if self.store else None

    def apply(self, state: Optional[dict], op: str, seq: int, values: Mapping[str, object],
              now_ms: int) -> list[Change]:
        """Changes of source rows (``{col: value}``) for one row of the source's changelog."""
        if self.kind == "stream":
            if op in ("d", "s"):
                return []          # streams carry inserts only; anything else counts as one
            row = dict(values)
            if self.store is None:
                return [Change("i", (seq,), None, row, seq)]
            return self.store.upsert(state, (seq,), row, seq, now_ms)
        key = key_of(values, self.key)
        if self.store is None:  # unmirrored: the old row is not known here
            if op in ("d", "s"):
                return [Change("d", key, None, None, seq)]
            return [Change("u", key, None, values if type(values) is dict else dict(values), seq)]
        if op in ("d", "s"):
            return self.store.delete(state, key, seq)
        return self.store.upsert(state, key, values, seq, now_ms)

    def expire(self, state: Optional[dict], now_ms: int, seq: int) -> list[Change]:
        """Deletes of rows a FROM-level time KEEP evicts."""
        return self.store.expire(state, now_ms, seq) if self.store else []

    def next_deadline(self, state: Optional[dict]) -> Optional[int]:
        """When :meth:`expire` next has work."""
        return self.store.next_deadline(state) if self.store else None


def where(change: Change, test: Callable[[Mapping], object]) -> list[Change]:
    """``change`` seen through a filter: (old passes, new passes) decides the op.

    update: both pass -> update, only old -> delete of old, only new -> insert, neither -> nothing.
    An update or delete whose old row is unknown (``None``: an unmirrored source, whose reader
    finds the old contribution by key) is not tested on it: an update whose new row fails is a
    delete of the key, a delete stays one.
    """
    if change.old is None and change.op != "i":
        if change.op == "d" or truth(test(change.new)):
            return [change]
        return [Change("d", change.key, None, None, change.seq)]
    old_ok = change.old is not None and truth(test(change.old))
    new_ok = change.new is not None and truth(test(change.new))
    if old_ok and new_ok:
        return [change]
    if old_ok:
        return [Change("d", change.key, change.old, None, change.seq)]
    if new_ok:
        return [Change("i", change.key, None, change.new, change.seq)]
    return []


def consolidate(changes: Sequence[Change]) -> list[Change]:
    """Changes of one input event merged per key, in order of each key's first change.

    i+u -> i, i+d -> nothing, u+u -> u, u+d -> d, d+i -> u: one input row (an ESP transaction)
    gives at most one change per key, e.g. a KEEP eviction and an insert into the same group of an
    aggregate give one update.
    """
    if len(changes) < 2:
        return list(changes)
    merged: dict[object, Optional[Change]] = {}
    for ch in changes:
        key = ch.key
        if key is None:  # a row without a key (a MATCHING match) is an event of its own
            merged[object()] = ch
            continue
        first = merged.get(key)
        if first is None:
            merged.pop(key, None)   # a key that cancelled out goes to the end when it comes back
            merged[key] = ch
            continue
        old = first.old if first.op != "i" else None
        new = ch.new if ch.op != "d" else None
        if old is None and new is None:
            merged[key] = None
        else:
            op = "i" if old is None else ("d" if new is None else "u")
            merged[key] = Change(op, key, old, new, ch.seq)
    return [c for c in merged.values() if c is not None]


class Projection:
    """The select list of a select without aggregation: rows by alias -> output row."""

    def __init__(self, select: Select, exprs: Expressions, columns: Sequence[Sequence[str]],
                 key: Sequence[str], keyed: bool,
                 extra: Optional[Callable[[Mapping], Mapping[str, object]]] = None) -> None:
        self.items = [(item.name, exprs.compile(item.expr)) for item in select.items]
        self.columns = columns
        self.key = list(key)
        self.keyed = keyed
        self.extra = extra  # names bound for the items per row (aggregates over event caches)

    def row(self, rows: Mapping[str, Mapping]) -> dict:
        """The output row for ``rows`` (items in order, cast to the column types)."""
        if self.extra is not None:
            bound = self.extra(rows)
            return coerce_row({name: f(rows, bound) for name, f in self.items}, self.columns)
        return coerce_row({name: f(rows) for name, f in self.items}, self.columns)

    def apply(self, change: Change) -> Change:
        """``change`` of source rows as a change of output rows (keyed by the element key)."""
        # A stream's output never uses the old row: not evaluating it spares work and bad records.
        old = self.row(change.old) if change.old is not None and self.keyed else None
        new = self.row(change.new) if change.new is not None else None
        if self.keyed:
            key = key_of(new if new is not None else old, self.key)
        else:
            key = change.key
        return Change(change.op, key, old, new, change.seq)


class OutputStage:
    """The element's own rows: where every select (of a UNION) delivers its output changes.

    ``stream``: inserts only (an update becomes an insert, a delete is dropped); ``delta stream``:
    i/u/d pass through, nothing stored; ``window``: a store keyed by the element key under its
    KEEP, where a change is resolved leniently (as an upsert; a delete of a missing key is nothing).
    """

    def __init__(self, element: Element) -> None:
        self.kind: str = element.kind
        self.key: list[str] = list(element.key)
        self.store: Optional[Store] = (Store(element.keep, element.aging)
                                       if self.kind == "window" else None)

    def initial_state(self) -> Optional[dict]:
        """The window's rows (``None`` for streams and delta streams)."""
        return self.store.initial_state() if self.store else None

    def apply(self, state: Optional[dict], change: Change,
              now_ms: int) -> tuple[list[Change], list[tuple]]:
        """The element's changes for one output change (store evictions are deletes listed before
        the change causing them), and the keys of the rows the KEEP evicted."""
        if self.kind == "stream":
            if change.op == "d":
                return [], []
            return [Change("i", change.key, None, change.new, change.seq)], []
        old_key = key_of(change.old, self.key) if change.old is not None else None
        new_key = key_of(change.new, self.key) if change.new is not None else None
        if self.kind == "delta stream":
            if change.op == "u" and old_key != new_key:
                return [Change("d", old_key, change.old, None, change.seq),
                        Change("i", new_key, None, change.new, change.seq)], []
            return [change], []
        out: list[Change] = []
        evicted: list[tuple] = []
        if change.old is not None and old_key != new_key:
            out += self.store.delete(state, old_key, change.seq)
        if change.new is not None:
            added = self.store.upsert(state, new_key, change.new, change.seq, now_ms)
            evicted = [c.key for c in added if c.op == "d"]
            out += added
        return out, evicted

    def expire(self, state: Optional[dict], now_ms: int, seq: int) -> list[Change]:
        """Deletes of rows the element's time KEEP evicts, updates of rows that aged (AGES)."""
        return self.store.expire(state, now_ms, seq) if self.store else []

    def next_deadline(self, state: Optional[dict]) -> Optional[int]:
        """When :meth:`expire` next has work."""
        return self.store.next_deadline(state) if self.store else None
