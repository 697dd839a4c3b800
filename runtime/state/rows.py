"""The keyed state of the engine kept in a bucket's :class:`~runtime.state.store.BucketStore`:
the rows of its windows, their time KEEP's times and row-count KEEP's PER groups, the groups of
its aggregates, a join's per-port state, and a Flex's input mirrors (:func:`mirror_parts`).

An engine's window state (runtime/engine/store.py :meth:`Store.initial_state`) holds its rows by
key in ``state["rows"]`` and, for a time KEEP, each row's last change time in ``state["times"]``;
an aggregate's state (runtime/engine/aggregate.py :meth:`Aggregator.initial_state`) holds its
groups, its input keys and its output keys in ``state["groups"]``, ``["inputs"]`` and
``["out"]``; a join's state (runtime/engine/join.py :meth:`Joiner.initial_state`) holds lists
of keyed dicts: rows by key per source and per level's left side, the equality indexes (equated
values -> row keys) and match counts. For an element whose state lives in the store (:func:`uses_window_store`), the
pickled per-bucket state (runtime/arrow_state.py) holds in their place the number of entries
held, and a batch reads only the entries its events touch:

- :func:`attach` replaces each such count, in every instance state of the bucket, with a mapping
  over the bucket store (namespace: where the part sits in the instance state; key: the
  instance, then the part's own key): :class:`StoredRows` for rows, input and output keys,
  :class:`StoredGroups` for groups and a join's indexes (which the engine changes in place),
  :class:`StoredTimes` for
  times (kept in the store's time index, so that expiry finds the due rows by time);
- the engine uses the mapping as it uses a dict; entries read are cached for the batch and writes
  kept in that cache (the engine may still change a row object it stored, as with the pickled
  dict);
- :func:`detach` writes the changed entries to the store (the caller commits it with the batch
  id; an entry set and removed again within the batch, which the store never held, writes
  nothing) and puts the counts back. Instances new in the batch hold plain dicts: they go to the store
  whole.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Iterable, Iterator, Optional

from ccl.plan.model import Element

from .store import BucketStore

# What a run directory's run.json says (``state_store``) of the keyed state in the store: 4 =
# window rows, time KEEP times, aggregate groups, Flex dictionaries (runtime/state/variables.py),
# joins' per-port rows, indexes and match counts, and Flex event caches' buckets; 3 = the same
# without joins and event caches; 2 = without
# Flex dictionaries either; before, only window rows, and no entry
LAYOUT = 4
_ABSENT = object()
_MAX_LIST = 64  # lists longer than this in an instance state are data, not its structure
# the parts of an aggregate's state kept in the store, and the namespace suffix of each
_AGG_PARTS = (("groups", "g"), ("inputs", "i"), ("out", "o"))
# the parts of a join's state (runtime/engine/join.py :meth:`Joiner.initial_state`), each a list
# of keyed dicts (one per source or level); the indexes' entries (dicts of row keys) are changed
# in place
_JOIN_PARTS = ("src", "acc", "lidx", "ridx", "lcnt", "rcnt")
_JOIN_INDEXES = ("lidx", "ridx")


def uses_window_store(element: Element) -> bool:
    """Whether the keyed state (window rows and times, aggregate groups) of the per-instance
    element ``element`` (a plan element) lives in the bucket's state store when
    runtime/arrow_state.py runs it: the plan's decision (``physical.window_store``,
    ``ccl.plan.decisions.window_store``), read as it is. (The one run-time fact kept: an element
    whose built engine holds no windows or groups opens no store, runtime/arrow_state.py.)"""
    return element.physical is not None and element.physical.window_store


class StoredRows(MutableMapping):
    """One instance's entries in namespace ``ns`` of ``store``, as a dict of key -> value.

    ``len`` is kept from the count the batch started with, not counted. Iteration (which the
    engine needs only for Flex windows and KEEP EVERY) goes in key order."""

    def __init__(self, store: BucketStore, ns: str, inst: int, size: int) -> None:
        self._store, self._ns, self._inst = store, ns, inst
        self._size = size
        self._empty = size == 0  # nothing committed: a key not in the cache is absent
        self._cache: dict[tuple, Any] = {}  # key -> value, or _ABSENT
        self._dirty: set[tuple] = set()
        # keys found absent in the store (committed, or deleted by a flush): a key set and
        # deleted again within the batch (a KEEP's row evicted by a later row) writes nothing
        self._unstored: set[tuple] = set()

    def get(self, key: tuple, default: Any = None) -> Any:  # type: ignore[override]
        """The value under ``key`` (read from the store once per batch), or ``default``."""
        row = self._cache.get(key, None)
        if row is None:
            row = _ABSENT if self._empty else self._store.get(self._ns, (self._inst, *key), _ABSENT)
            self._cache[key] = row
            if row is _ABSENT:
                self._unstored.add(key)
        return default if row is _ABSENT else row

    def prefetch(self, keys: list[tuple]) -> None:
        """Read the values of those of ``keys`` not read yet in one multi-get, into the batch's
        cache (a caller that knows the keys it will touch saves a RocksDB get per key)."""
        cache = self._cache
        if self._empty:
            return
        unread = list({k: None for k in keys if k not in cache})
        if unread:
            inst = self._inst
            values = self._store.get_many(self._ns, [(inst, *k) for k in unread], _ABSENT)
            cache.update(zip(unread, values))
            self._unstored.update([k for k, v in zip(unread, values) if v is _ABSENT])

    def __getitem__(self, key: tuple) -> Any:
        row = self.get(key, _ABSENT)
        if row is _ABSENT:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        return self.get(key, _ABSENT) is not _ABSENT  # type: ignore[arg-type]

    def __setitem__(self, key: tuple, row: Any) -> None:
        if self.get(key, _ABSENT) is _ABSENT:
            self._size += 1
        self._cache[key] = row
        self._dirty.add(key)

    def __delitem__(self, key: tuple) -> None:
        if self.pop(key, _ABSENT) is _ABSENT:
            raise KeyError(key)

    def pop(self, key: tuple, default: Any = _ABSENT) -> Any:  # type: ignore[override]
        """Remove the value under ``key`` and give it back (``default`` when there is none)."""
        row = self.get(key, _ABSENT)
        if row is _ABSENT:
            if default is _ABSENT:
                raise KeyError(key)
            return default
        self._cache[key] = _ABSENT
        self._dirty.add(key)
        self._size -= 1
        return row

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple]:
        self.flush()
        for key, _ in self._store.scan(self._ns, (self._inst,)):
            yield key[1:]

    def _changed(self) -> Iterator[tuple]:
        """The keys whose value :meth:`flush` writes."""
        return iter(self._dirty)

    def flush(self) -> None:
        """Give the values changed so far to the store (pending until its commit); a key deleted
        that the store does not hold is left out."""
        cache, unstored = self._cache, self._unstored
        changes = []
        for key in self._changed():
            row = cache[key]
            if row is _ABSENT:
                if key in unstored:
                    continue
                unstored.add(key)
            else:
                unstored.discard(key)
            changes.append((key, row))
        self._write(changes)

    def _flush_matched(self, pack: Optional[Callable[[Any], Any]]) -> None:
        """:meth:`flush` for keys matched as a dict matches them: each value changed so far as
        ``pack`` makes it (as it is when None), under its stored key (-0.0 as 0.0); a key with a
        NaN left out, and a deletion of a key the store does not hold (made and removed within
        the batch)."""
        cache, unstored, inst = self._cache, self._unstored, self._inst
        changes = []
        for key in self._changed():
            if _nan(key):
                continue
            value = cache[key]
            if value is _ABSENT:
                if key in unstored:
                    continue
                unstored.add(key)
            else:
                unstored.discard(key)
                if pack is not None:
                    value = pack(value)
            changes.append((_store_key(inst, key)[1:], value))
        self._write(changes)

    def _write(self, changes: Iterable[tuple[tuple, Any]]) -> None:
        """Give the store the (key, value) ``changes`` (``_ABSENT``: deleted): the values in one
        :meth:`~runtime.state.store.BucketStore.put_all` and the deletions in one
        :meth:`~runtime.state.store.BucketStore.delete_all`, not a call per key."""
        values, gone = [], []
        for key, row in changes:
            if row is _ABSENT:
                gone.append(key)
            else:
                values.append((key, row))
        if gone:
            self._store.delete_all(self._ns, self._inst, gone)
        if values:  # (nothing committed when the batch began: the keys are new, no seek)
            self._store.put_all(self._ns, self._inst, values, absent=self._empty)


class StoredGroups(StoredRows):
    """An aggregate's groups: as :class:`StoredRows`, but every group read is written back, since
    the engine changes a group's dict in place (its count, accumulators, rows) without setting it
    again. A batch so writes the groups it touched, not the groups held."""

    def _changed(self) -> Iterator[tuple]:
        cache, dirty = self._cache, self._dirty
        for key, row in cache.items():
            if row is not _ABSENT or key in dirty:
                yield key


def _nan(key: tuple) -> bool:
    """Whether ``key`` holds a float NaN (a dict finds such a key with that very NaN object only:
    a NaN is unequal to itself, and hashes by identity)."""
    return any(type(v) is not str and isinstance(v, float) and v != v for v in key)


def _store_key(inst: int, key: tuple) -> tuple:
    """The store key of ``key`` of instance ``inst``: -0.0 as 0.0 (one dict key, two
    encodings)."""
    return (inst, *[0.0 if type(v) is float and v == 0 else v for v in key])


class StoredIndex(StoredGroups):
    """A join's equality index (equated values -> the keys of the rows having them), as
    :class:`StoredGroups`, with the values matched as the engine's dict matches them: -0.0 finds
    0.0, and values with a NaN find nothing from another batch (the engine's dict finds a NaN
    key only with the very NaN object it was stored with, which a stream row's NaN or a state
    file read again never is): such entries live in the batch's cache only, never in the store."""

    def get(self, key: tuple, default: Any = None) -> Any:  # type: ignore[override]
        """The row keys under ``key`` (read from the store once per batch), or ``default``."""
        entry = self._cache.get(key, None)
        if entry is None:
            entry = _ABSENT if self._empty or _nan(key) else \
                self._store.get(self._ns, _store_key(self._inst, key), _ABSENT)
            self._cache[key] = entry
        return default if entry is _ABSENT else entry

    def prefetch(self, keys: list[tuple]) -> None:
        """As :meth:`StoredRows.prefetch`, without the keys holding a NaN."""
        super().prefetch([k for k in keys if not _nan(k)])

    def flush(self) -> None:
        """Give the entries changed so far to the store, those under a NaN left out."""
        cache, inst = self._cache, self._inst
        self._write([(_store_key(inst, key)[1:], cache[key]) for key in self._changed()
                     if not _nan(key)])


class StoredMembers(StoredIndex):
    """A row-count KEEP's PER groups (the PER values -> the keys of the group's rows, a dict in
    order of their last change, runtime/engine/store.py), matched as :class:`StoredIndex` matches
    (-0.0 finds 0.0; a group holding a NaN finds nothing from another batch, as the pickled
    dict's key is found by its very NaN object only, so it never reaches the store). The engine
    and the KEEP kernel change a group's dict in place: every group read is written back. A
    group is stored as the tuple of its row keys (a dict of ``None`` values pickles larger)."""

    def get(self, key: tuple, default: Any = None) -> Any:  # type: ignore[override]
        """The row keys of group ``key`` as a dict (read once per batch), or ``default``."""
        entry = self._cache.get(key, None)
        if entry is None:
            if self._empty or _nan(key):
                entry = _ABSENT
            else:
                entry = self._store.get(self._ns, _store_key(self._inst, key), _ABSENT)
                if entry is not _ABSENT:
                    entry = dict.fromkeys(entry)
            self._cache[key] = entry
            if entry is _ABSENT:
                self._unstored.add(key)
        return default if entry is _ABSENT else entry

    def prefetch(self, keys: list[tuple]) -> None:
        """The groups of ``keys`` not read yet, in one multi-get."""
        cache = self._cache
        if self._empty:
            return
        unread = list({k: None for k in keys if k not in cache and not _nan(k)})
        if unread:
            inst = self._inst
            values = self._store.get_many(self._ns, [_store_key(inst, k) for k in unread], _ABSENT)
            cache.update(zip(unread, [v if v is _ABSENT else dict.fromkeys(v) for v in values]))
            self._unstored.update([k for k, v in zip(unread, values) if v is _ABSENT])

    def flush(self) -> None:
        """Give the groups changed so far to the store (each as a tuple of its keys), those
        under a NaN left out."""
        self._flush_matched(tuple)

    @staticmethod
    def unpack(value: Any) -> dict:
        """A stored group as the engine's dict."""
        return dict.fromkeys(value)


class StoredMirror(StoredRows):
    """A Flex's mirror of an input window (its rows by key, runtime/engine/stages.py
    :class:`SourceStage`), as :class:`StoredRows` with the keys matched as a dict matches them
    (see :class:`StoredIndex`): -0.0 finds 0.0, and a key holding a NaN finds nothing from
    another batch, its row kept in the batch's cache only (counted, as the pickled dict kept it
    where nothing could find it again)."""

    def get(self, key: tuple, default: Any = None) -> Any:  # type: ignore[override]
        """The row under ``key`` (read from the store once per batch), or ``default``."""
        row = self._cache.get(key, None)
        if row is None:
            nan = _nan(key)
            row = _ABSENT if self._empty or nan else \
                self._store.get(self._ns, _store_key(self._inst, key), _ABSENT)
            self._cache[key] = row
            if row is _ABSENT and not nan:
                self._unstored.add(key)
        return default if row is _ABSENT else row

    def prefetch(self, keys: list[tuple]) -> None:
        """As :meth:`StoredRows.prefetch` (not used by the Flex: it reads a key at a time)."""
        for key in keys:
            self.get(key)

    def flush(self) -> None:
        """As :meth:`StoredRows.flush`, the keys as stored and those with a NaN left out."""
        self._flush_matched(None)


class StoredTimes(MutableMapping):
    """One instance's last-change times of a time KEEP window (key -> epoch ms), in the store's
    time index of a namespace of its own (``ns``): :meth:`pop_due` gives the keys whose time has
    come by seeking into the index, touching only them. Iteration goes in time order (keys of
    one time in key order, where the pickled dict kept the order of their changes)."""

    def __init__(self, store: BucketStore, ns: str, inst: int, size: int) -> None:
        self._store, self._ns, self._inst = store, ns, inst
        self._size = size
        self._empty = size == 0
        self._cache: dict[tuple, Any] = {}  # key -> time, or _ABSENT

    def get(self, key: tuple, default: Any = None) -> Any:  # type: ignore[override]
        """The time of ``key`` (read from the store once per batch), or ``default``."""
        t = self._cache.get(key, None)
        if t is None:
            t = None if self._empty else self._store.time_of(self._ns, (self._inst, *key))
            t = _ABSENT if t is None else t
            self._cache[key] = t
        return default if t is _ABSENT else t

    def __getitem__(self, key: tuple) -> Any:
        t = self.get(key, _ABSENT)
        if t is _ABSENT:
            raise KeyError(key)
        return t

    def __contains__(self, key: object) -> bool:
        return self.get(key, _ABSENT) is not _ABSENT  # type: ignore[arg-type]

    def __setitem__(self, key: tuple, millis: int) -> None:
        if self.get(key, _ABSENT) is _ABSENT:
            self._size += 1
        self._cache[key] = millis
        self._store.put_timed(self._ns, (self._inst, *key), None, millis)

    def __delitem__(self, key: tuple) -> None:
        if self.pop(key, _ABSENT) is _ABSENT:
            raise KeyError(key)

    def pop(self, key: tuple, default: Any = _ABSENT) -> Any:  # type: ignore[override]
        """Remove the time of ``key`` and give it back (``default`` when there is none)."""
        t = self.get(key, _ABSENT)
        if t is _ABSENT:
            if default is _ABSENT:
                raise KeyError(key)
            return default
        self._cache[key] = _ABSENT
        self._store.delete(self._ns, (self._inst, *key))
        self._size -= 1
        return t

    def pop_due(self, last_millis: int) -> list[tuple]:
        """Remove the keys whose time is ``last_millis`` or earlier and give them, oldest first
        (found through the store's time index: the entries that expire, not those held)."""
        if self._size == 0:
            return []
        keys = [key[1:] for key, _ in self._store.expire(self._ns, last_millis + 1)]
        cache = self._cache
        for key in keys:
            cache[key] = _ABSENT
        self._size -= len(keys)
        return keys

    def earliest(self) -> Optional[int]:
        """The earliest time held (None: none)."""
        return self._store.next_time(self._ns) if self._size else None

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple]:
        # (the engine does not walk them: expire and next_deadline use pop_due and earliest)
        for _, key in self._store.timed(self._ns):
            yield key[1:]


def _parts(state: Any, path: tuple = ()) -> Iterator[tuple[str, str, dict]]:
    """(kind, path, part) of every engine window state (kind ``w``) and aggregate state (kind
    ``a``) in the instance state ``state``; the path names where it sits
    (``selects.0.sources.1.store``)."""
    if isinstance(state, dict):
        if "rows" in state and "groups" in state and "times" in state and "bucket" in state:
            yield "w", ".".join(path), state
            return
        if "groups" in state and "inputs" in state and "out" in state:
            yield "a", ".".join(path), state
            return
        if all(part in state for part in _JOIN_PARTS):
            # a join that walks a side's rows (a level without equalities) walks them in the
            # order they came, which the store (in key order) does not keep: such a join's
            # state stays pickled
            if state.get("keyed"):
                yield "j", ".".join(path), state
            return
        if state and type(next(iter(state))) is not str:
            return  # keyed data (aggregate groups, join rows): no engine structure below
        for name, value in state.items():
            if isinstance(value, (dict, list)):
                yield from _parts(value, path + (name,))
    elif isinstance(state, list) and len(state) <= _MAX_LIST:
        for i, value in enumerate(state):
            if isinstance(value, (dict, list)):
                yield from _parts(value, path + (str(i),))


def _ns(kind: str, path: str) -> str:
    return f"{kind}.{path}" if path else kind


def window_states(state: Any) -> Iterator[tuple[str, dict]]:
    """(namespace, window state) of every engine window state in the instance state ``state``;
    the namespace names where it sits (``w.selects.0.sources.1.store``)."""
    for kind, path, part in _parts(state):
        if kind == "w":
            yield _ns("w", path), part


def stored_parts(state: Any, inst: int) -> Iterator[tuple[Any, Any, str, type]]:
    """(owner, field, namespace, mapping class) of every part of the instance state ``state``
    (of instance ``inst``) kept in the store: the part is ``owner[field]`` (a dict and its key,
    or for a join's parts a list and its index)."""
    for kind, path, part in _parts(state):
        ns = _ns(kind, path)
        if kind == "w":
            yield part, "rows", ns, StoredRows
            # per instance: the time index is ordered by time, not by instance
            yield part, "times", f"{ns}.t{inst}", StoredTimes
            # a row-count KEEP's PER groups (other policies keep none: an empty dict)
            yield part, "groups", f"{ns}.p", StoredMembers
        elif kind == "j":
            for field in _JOIN_PARTS:
                kind_of = StoredIndex if field in _JOIN_INDEXES else StoredRows
                for i in range(len(part[field])):
                    yield part[field], i, f"{ns}.{field}{i}", kind_of  # type: ignore[misc]
        else:
            for field, suffix in _AGG_PARTS:
                yield part, field, f"{ns}.{suffix}", StoredGroups if field == "groups" else StoredRows


def holds_stored_state(state: Any) -> bool:
    """Whether the instance state ``state`` has parts kept in the store."""
    return any(True for _ in _parts(state))


def mirror_parts(state: Any, inst: int, ports: tuple[int, ...]) -> Iterator[tuple[Any, Any, str, type]]:
    """:func:`stored_parts` of a Flex instance state kept in the store: the rows and PER groups
    of the input mirrors of ``ports`` (those runtime/engine/flex.py
    :meth:`~runtime.engine.flex.FlexEngine.stored_mirrors` names: no code walks their rows, whose
    order the store does not keep), namespaces ``w.sources.PORT`` and ``w.sources.PORT.p``."""
    sources = state.get("sources") if isinstance(state, dict) else None
    for port in ports:
        mirror = sources[port] if sources is not None and port < len(sources) else None
        if mirror is None:
            continue
        ns = f"w.sources.{port}"
        yield mirror, "rows", ns, StoredMirror
        yield mirror, "groups", f"{ns}.p", StoredMembers


def attach(states: dict[int, dict], store: BucketStore,
           mirrors: Optional[tuple[int, ...]] = None) -> None:
    """Put a mapping over ``store`` where the pickled states of a bucket hold a count (see the
    module docstring); with ``mirrors``, the parts of a Flex's input mirrors of those ports
    (:func:`mirror_parts`) instead."""
    for inst, state in states.items():
        parts = stored_parts(state, inst) if mirrors is None else mirror_parts(state, inst, mirrors)
        for owner, field, ns, kind in parts:
            held = owner[field]
            if type(held) is int:
                owner[field] = kind(store, ns, inst, held)


def detach(states: dict[int, dict], store: BucketStore,
           mirrors: Optional[tuple[int, ...]] = None) -> int:
    """Write every stored part's changed entries of the states of a bucket to ``store`` and leave
    a count in their place, ready to be pickled; the number of window rows held in all (for
    reports). ``mirrors``: as for :func:`attach`."""
    held = 0
    for inst, state in states.items():
        parts = stored_parts(state, inst) if mirrors is None else mirror_parts(state, inst, mirrors)
        for owner, field, ns, kind in parts:
            part = owner[field]
            if isinstance(part, StoredRows):
                part.flush()
            elif isinstance(part, StoredTimes):
                pass  # written as they changed
            elif isinstance(part, dict):  # an instance new in this batch
                if kind is StoredTimes:
                    for key, millis in part.items():
                        store.put_timed(ns, (inst, *key), None, millis)
                elif kind is StoredMembers or kind is StoredMirror:
                    # (as their flush: keys as stored, a NaN's left out, a group as a tuple)
                    store.put_all(ns, inst, [
                        (_store_key(inst, key)[1:],
                         tuple(value) if kind is StoredMembers else value)
                        for key, value in part.items() if not _nan(key)])
                else:
                    store.put_all(ns, inst, part.items())
            else:
                continue
            owner[field] = len(part)
            if field == "rows":
                held += len(part)
    return held
