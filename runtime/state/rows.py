"""The rows of the engine's windows kept in a bucket's :class:`~runtime.state.store.BucketStore`.

An engine's window state (runtime/engine/store.py :meth:`Store.initial_state`) holds its rows by
key in ``state["rows"]``. For an element whose windows live in the state store
(:func:`uses_window_store`), the pickled per-bucket state (runtime/arrow_state.py) holds in their
place the number of rows held, and a batch reads only the rows its events touch:

- :func:`attach` replaces each such count, in every instance state of the bucket, with a
  :class:`StoredRows` mapping over the bucket store (namespace: where the window sits in the
  instance state; key: the instance, then the window's key values);
- the engine uses the mapping as it uses a dict; rows read are cached for the batch and writes kept
  in that cache (the engine may still change a row object it stored, as with the pickled dict);
- :func:`detach` writes the changed rows to the store (the caller commits it with the batch id) and
  puts the counts back. Instances new in the batch hold a plain dict: it goes to the store whole.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Iterator

from .store import BucketStore

_ABSENT = object()
_MAX_LIST = 64  # lists longer than this in an instance state are data, not its structure


def uses_window_store(element: dict) -> bool:
    """Whether the window rows of the per-instance element ``element`` (a plan element) live in
    the bucket's state store: every element run by runtime/arrow_state.py except a Flex, whose
    window iterators walk rows in the order they were inserted (the store keeps key order), and
    an element with timers (its expiry walks its rows)."""
    physical = element.get("physical", {})
    return bool(physical.get("arrow")) and not physical.get("uses_time") and not element.get("flex")


class StoredRows(MutableMapping):
    """One instance's window rows in namespace ``ns`` of ``store``, as a dict of key -> row.

    ``len`` is kept from the count the batch started with, not counted. Iteration (which the
    engine needs only for Flex windows and KEEP EVERY, not run here) goes in key order."""

    def __init__(self, store: BucketStore, ns: str, inst: int, size: int) -> None:
        self._store, self._ns, self._inst = store, ns, inst
        self._size = size
        self._cache: dict[tuple, Any] = {}  # key -> row, or _ABSENT
        self._dirty: set[tuple] = set()

    def get(self, key: tuple, default: Any = None) -> Any:  # type: ignore[override]
        """The row under ``key`` (read from the store once per batch), or ``default``."""
        row = self._cache.get(key, None)
        if row is None:
            row = self._store.get(self._ns, (self._inst, *key), _ABSENT)
            self._cache[key] = row
        return default if row is _ABSENT else row

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
        """Remove the row under ``key`` and give it back (``default`` when there is none)."""
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

    def flush(self) -> None:
        """Give the rows changed so far to the store (pending until its commit)."""
        store, ns, inst = self._store, self._ns, self._inst
        for key in self._dirty:
            row = self._cache[key]
            if row is _ABSENT:
                store.delete(ns, (inst, *key))
            else:
                store.put(ns, (inst, *key), row)


def window_states(state: Any, path: tuple = ()) -> Iterator[tuple[str, dict]]:
    """(namespace, window state) of every engine window state in the instance state ``state``;
    the namespace names where it sits (``w.selects.0.sources.1.store``)."""
    if isinstance(state, dict):
        if "rows" in state and "groups" in state and "times" in state and "bucket" in state:
            yield "w." + ".".join(path) if path else "w", state
            return
        if state and type(next(iter(state))) is not str:
            return  # keyed data (aggregate groups, join rows): no engine structure below
        for name, value in state.items():
            if isinstance(value, (dict, list)):
                yield from window_states(value, path + (name,))
    elif isinstance(state, list) and len(state) <= _MAX_LIST:
        for i, value in enumerate(state):
            if isinstance(value, (dict, list)):
                yield from window_states(value, path + (str(i),))


def attach(states: dict[int, dict], store: BucketStore) -> None:
    """Put a :class:`StoredRows` over ``store`` where the pickled states of a bucket hold a row
    count (see the module docstring)."""
    for inst, state in states.items():
        for ns, window in window_states(state):
            rows = window["rows"]
            if type(rows) is int:
                window["rows"] = StoredRows(store, ns, inst, rows)


def detach(states: dict[int, dict], store: BucketStore) -> int:
    """Write every window's changed rows of the states of a bucket to ``store`` and leave a row
    count in their place, ready to be pickled; the number of rows held in all (for reports)."""
    held = 0
    for inst, state in states.items():
        for ns, window in window_states(state):
            rows = window["rows"]
            if isinstance(rows, StoredRows):
                rows.flush()
            elif isinstance(rows, dict):  # an instance new in this batch
                for key, row in rows.items():
                    store.put(ns, (inst, *key), row)
            else:
                continue
            window["rows"] = len(rows)
            held += len(rows)
    return held
