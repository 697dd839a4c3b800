"""A Flex's SPLASH dictionaries kept in a bucket's :class:`~runtime.state.store.BucketStore`, entry
by entry (issue 27).

A Flex instance's variables (runtime/engine/flex.py, ``state["vars"]``: name -> SPLASH value) are
pickled with its state per bucket and batch (runtime/arrow_state.py). A ``dictionary(K, V)``
variable of a scalar key type can hold millions of entries, of which a batch touches
few; for an element whose variables live in the store (:func:`uses_variable_store`) such a
variable's place in the pickled state holds a :class:`HeldDictionary` (its size, the next
insertion number and its types), and its entries are in the store:

- namespace ``v.NAME``: key (instance, dictionary key) -> (insertion number, key, value); the key
  is kept in the value too, so that it comes back with its Python type (a ``Long`` key is stored
  as an int);
- namespace ``v.NAME.o``: key (instance, insertion number) -> key: the insertion order, which
  ``for (k in d)`` follows (docs/functions.md), walked without reading the values.

:func:`attach` puts a :class:`StoredDictionary` (a :class:`~ccl.splash.values.Dictionary` the
interpreter uses as it uses any dictionary: reads go to the store on a miss, with a cache for the
batch) in the place of each :class:`HeldDictionary`; :func:`detach` writes the changed entries
and puts the marks back. A dictionary the code made anew (``d := new dictionary(...)``, or an
instance new in the batch) goes to the store whole. Every other variable (scalars, vectors,
records: small) stays pickled.

Values may be scalars, records, vectors or dictionaries (nested to any depth, of such types).
Records, vectors and dictionaries are containers code changes in place (``d[k].f := x``,
``v := d[k]; push_back(v, x)``: a vector or dictionary is shared by assignment, a record copied
but its containers shared), so the rule is:

- **write-back of what was read**: an entry read in a batch is materialised once, as a live
  object in the batch's cache, and every entry read (not only those set) is written back whole
  at :func:`detach` (not a diff). Within a batch aliasing is so exact: a local, a variable or
  another entry holding the entry's object changes the one the store gets.
- **one object, one place**: the store pickles each entry alone, so it cannot keep a container
  held in two places (two names, a name and an entry, two entries, two dictionaries, a level of
  a nested one); the state file can (pickle keeps one object). At every :func:`detach` the
  containers reachable from the instance's variables are counted (:func:`_aliased`; of a stored
  dictionary, the entries the batch read: the others are in the store, held nowhere else), and
  a dictionary held in two places or one of whose entries (at any depth) is held elsewhere
  stays pickled while it is so (a stored one is read out whole, in place:
  :meth:`StoredDictionary.freeze`), and goes back to the store at the first detach where it is
  not.

A replayed batch starts from the entries as the batch before left them (the store's undo
records); a rebucket moves the entries with their instance as any key (runtime/rebucket.py), a
rescale reads them out (:meth:`StoredDictionary.plain`) and writes them whole to the new
instances (runtime/rescale.py).

An event cache (:class:`~ccl.splash.caches.EventCache`) keeps its buckets in the store bucket by
bucket (namespace ``c.NAME``: key (instance, bucket key) -> the bucket's entries): the pickled
cache holds the number of its buckets in the place of its ``buckets`` dict, and :func:`attach`
puts there a :class:`~runtime.state.rows.StoredGroups` (the cache changes a bucket's entries in
place, so every bucket read is written back), which :func:`detach` flushes. A cache with a time
retention (``eventCache(S[k], 20 seconds)``) keeps its buckets in a namespace per instance
(``c.NAME.tINSTANCE``), each in the store's time index at the time of its oldest entry
(:class:`StoredCacheBuckets`): its sweep (the element's expiry) reads the buckets that have
entries to drop, found by time, not every bucket.

The variables of any element runtime/arrow_state.py runs are kept so, those of a derived element's
DECLARE block (and the global DECLARE items each instance has a copy of) as a Flex's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

from ccl.plan.model import Element
from ccl.splash.caches import EventCache
from ccl.splash.types import Type
from ccl.splash.values import Dictionary, Vector

from .rows import StoredGroups
from .store import BucketStore

_ABSENT = object()
_NOT_SCALAR = frozenset(("record", "dictionary", "vector", "eventcache", "any", "null"))


def uses_variable_store(element: Element) -> bool:
    """Whether the dictionaries and event caches of ``element`` (a plan element: a Flex, or a
    derived element with DECLARE or global DECLARE items) live in the bucket's state store when
    runtime/arrow_state.py runs it (the elements it runs; elsewhere they run on
    transformWithState, whose state stays pickled). Whether it has any is a fact of its built
    engine (:func:`holds_stored_variables`)."""
    physical = element.physical
    return physical is not None and (physical.arrow or physical.uses_time)


def storable(value: object) -> bool:
    """Whether the variable value ``value`` is a dictionary kept in the store by entry: of
    declared scalar key type, and values of a data type: scalars, records, vectors and
    dictionaries of data types (no event caches, no values of unknown type)."""
    if not isinstance(value, Dictionary):
        return False
    key, val = getattr(value, "key", None), getattr(value, "value", None)
    return isinstance(key, Type) and key.name not in _NOT_SCALAR and _data(val)


def _data(t: object) -> bool:
    """Whether values of type ``t`` are data the store can keep pickled entry by entry: a
    scalar type, or a record, vector or dictionary whose parts are of such types."""
    if not isinstance(t, Type):
        return False
    if t.name == "record":
        return bool(t.fields) and all(_data(ft) for _, ft in t.fields)
    if t.name in ("vector", "dictionary"):
        return bool(t.args) and all(_data(a) for a in t.args)
    return t.name not in _NOT_SCALAR


def _mutable(value: object) -> bool:
    """Whether ``value`` is a container code can change in place (a record, a vector, a
    dictionary; not an event cache)."""
    return isinstance(value, (list, dict)) and not isinstance(value, EventCache)


def _container_refs(value: object, counts: dict[int, int]) -> None:
    """Count in ``counts`` (id -> references) the containers ``value`` holds, itself included:
    records, vectors and dictionaries (of a stored one, the entries the batch read), nested ones
    too. A container is walked on its first reference only (a cycle ends there)."""
    if not _mutable(value):
        return
    n = counts.get(id(value), 0) + 1
    counts[id(value)] = n
    if n > 1:
        return
    items = value.read_values() if isinstance(value, StoredDictionary) else \
        value.values() if isinstance(value, dict) else value
    for v in items:
        if isinstance(v, (list, dict)):
            _container_refs(v, counts)


def _aliased(d: Dictionary, counts: dict[int, int]) -> bool:
    """Whether a container among the values of ``d`` (of a stored one, those the batch read),
    or nested in one, is also held elsewhere (another variable, another entry, another
    dictionary): code changing it through one name changes it under the other, which the state
    file keeps (it pickles the shared object once) and the store's entries, each pickled alone,
    would not."""
    values = d.read_values() if isinstance(d, StoredDictionary) else d.values()
    seen: set[int] = set()
    todo = [v for v in values if _mutable(v)]
    while todo:
        v = todo.pop()
        if counts.get(id(v), 0) > 1:
            return True
        if id(v) in seen:
            continue
        seen.add(id(v))
        todo.extend(x for x in (v.values() if isinstance(v, dict) else v) if _mutable(x))
    return False


def stored_cache(value: object) -> bool:
    """Whether the variable value ``value`` is an event cache, whose buckets are kept in the
    store bucket by bucket."""
    return isinstance(value, EventCache)


def holds_stored_variables(state: Any) -> bool:
    """Whether the (fresh) Flex instance state ``state`` has variables kept in the store."""
    values = state.get("vars") if isinstance(state, dict) else None
    return isinstance(values, dict) and any(storable(v) or stored_cache(v)
                                            for v in values.values())


@dataclass(frozen=True)
class HeldDictionary:
    """What the pickled state holds in the place of a dictionary kept in the store."""
    size: int
    next: int  # the insertion number of the next new key
    key: Type
    value: Type


def _names(name: str) -> tuple[str, str]:
    """The namespaces (entries, insertion order) of variable ``name``."""
    tag = name if name.isascii() and name.isprintable() else "x" + name.encode().hex()
    return f"v.{tag}", f"v.{tag}.o"


def _cache_ns(name: str) -> str:
    """The namespace of the buckets of event cache variable ``name``."""
    return "c." + _names(name)[0][2:]


def _timed_ns(name: str, inst: int) -> str:
    """The namespace of the buckets of instance ``inst``'s event cache ``name`` with a time
    retention (one per instance: an expiry walks a namespace's time index)."""
    return f"{_cache_ns(name)}.t{inst}"


class StoredCacheBuckets(StoredGroups):
    """The buckets of an event cache with a time retention over a bucket store: as
    :class:`~runtime.state.rows.StoredGroups` (every bucket read is written back), each bucket
    written at the time of its oldest entry (entries are in arrival order), so that :meth:`due`
    finds the buckets holding entries of a time by the store's time index."""

    def flush(self) -> None:
        """Give the buckets changed so far to the store, each at the time of its oldest entry."""
        store, ns, inst = self._store, self._ns, self._inst
        for key in list(self._changed()):
            entries = self.get(key)
            if entries is None:
                store.delete(ns, (inst, *key))
            elif entries:
                store.put_timed(ns, (inst, *key), entries, entries[0][2])
            else:  # (an empty bucket: nothing to expire)
                store.put(ns, (inst, *key), entries)

    def due(self, last_millis: int) -> list[tuple]:
        """The keys of the buckets that may hold entries of time ``last_millis`` or earlier: those
        the time index has at such a time (read into the batch's cache; written back at their new
        oldest time, or deleted, by :meth:`flush`) and those the batch read already."""
        if self._size:
            cached = set(self._cache)
            for key, entries in self._store.expire(self._ns, last_millis + 1):
                if key[1:] not in cached:
                    self._cache[key[1:]] = entries
        return [k for k in list(self._cache) if self.get(k) is not None]


def _pack(value: Any, t: Type) -> Any:
    """``value`` (of declared type ``t``) as the store keeps it: a vector or dictionary of the
    declared types as a tuple of its items (of its (key, value) pairs), nested ones too, since
    pickling the ``Type`` objects a :class:`~ccl.splash.values.Vector` or ``Dictionary`` carries
    cost 7 times the items' (12.7 against 1.8 µs for a vector of 6 floats; loading 9.4 against
    0.9). A tuple is no SPLASH value, so :func:`_unpack` knows a packed one; a container of other
    types is kept as it is."""
    tv = type(value)
    if tv is Vector and t.name == "vector" and len(value.__dict__) == 1 \
            and value.elem == t.args[0]:
        elem = t.args[0]
        if elem.name in ("vector", "dictionary"):
            return tuple([_pack(v, elem) for v in value])
        return tuple(value)
    if tv is Dictionary and t.name == "dictionary" and len(value.__dict__) == 2 \
            and value.key == t.args[0] and value.value == t.args[1]:
        vt = t.args[1]
        if vt.name in ("vector", "dictionary"):
            return tuple([(k, _pack(v, vt)) for k, v in value.items()])
        return tuple(value.items())
    return value


def _unpack(value: Any, t: Type) -> Any:
    """The value :func:`_pack` gave ``value`` for (a fresh container of the declared types)."""
    if type(value) is not tuple:
        return value
    if t.name == "vector":
        elem = t.args[0]
        if elem.name in ("vector", "dictionary"):
            return Vector([_unpack(v, elem) for v in value], elem)
        return Vector(value, elem)
    vt = t.args[1]
    if vt.name in ("vector", "dictionary"):
        return Dictionary([(k, _unpack(v, vt)) for k, v in value], t.args[0], vt)
    return Dictionary(value, t.args[0], vt)


def _store_key(key: object) -> object:
    # -0.0 == 0.0 is one dict key, but two encodings
    return 0.0 if type(key) is float and key == 0 else key


def _plain(key: Type, value: Type, items: list) -> Dictionary:
    """A plain dictionary of ``items`` (what a :class:`StoredDictionary` pickles and copies as)."""
    return Dictionary(items, key, value)


class StoredDictionary(Dictionary):
    """One instance's dictionary variable over a bucket store, for one batch (see the module
    docstring). The ``dict`` underneath stays empty: every access the interpreter makes
    (``get``, item access, ``pop``, ``len``, iteration, ``clear``, equality) is overridden."""

    def __init__(self, store: BucketStore, name: str, inst: int, held: HeldDictionary) -> None:
        dict.__init__(self)
        self.key, self.value = held.key, held.value
        self.name, self.inst = name, inst
        self._store = store
        self._data, self._order = _names(name)
        self._size, self._next = held.size, held.next
        self._empty = held.size == 0  # nothing committed: a key not in the cache is absent
        self._cache: dict[object, Any] = {}  # key -> [insertion number, key, value] or _ABSENT
        self._dirty: dict[object, None] = {}
        self._added: list[tuple[int, object]] = []  # (insertion number, key) of the keys added
        self._dropped: list[int] = []  # insertion numbers of the keys removed
        # records, vectors or dictionaries as values: code may change one in place
        # (``d[k].f := x``, ``push_back(d[k], x)``, ``v := d[k]; v[j] := x``), so every entry
        # read is written back
        self._in_place = held.value.name in ("record", "vector", "dictionary")
        self._frozen: Optional[list] = None  # every entry, once detach read them out (freeze)
        self._packed = held.value.name in ("vector", "dictionary")  # (see _pack)

    def held(self) -> HeldDictionary:
        """The mark the pickled state keeps (after :meth:`flush`)."""
        return HeldDictionary(self._size, self._next, self.key, self.value)

    def _entry(self, k: object) -> Any:
        e = self._cache.get(k, None)
        if e is None:
            e = _ABSENT
            if not self._empty:
                found = self._store.get(self._data, (self.inst, _store_key(k)), None)
                if found is not None:
                    e = list(found)
                    if self._packed:
                        e[2] = _unpack(e[2], self.value)
            self._cache[k] = e
        return e

    def get(self, k: object, default: Any = None) -> Any:  # type: ignore[override]
        """The value under ``k`` (read from the store once per batch), or ``default``."""
        e = self._entry(k)
        return default if e is _ABSENT else e[2]

    def __getitem__(self, k: object) -> Any:
        e = self._entry(k)
        if e is _ABSENT:
            raise KeyError(k)
        return e[2]

    def __contains__(self, k: object) -> bool:
        return self._entry(k) is not _ABSENT

    def __setitem__(self, k: object, v: Any) -> None:
        e = self._entry(k)
        if e is _ABSENT:  # a new key goes last in the order, as in a dict
            self._cache[k] = [self._next, k, v]
            self._added.append((self._next, k))
            self._next += 1
            self._size += 1
        else:
            e[2] = v  # (a dict keeps the key object it has)
        self._dirty[k] = None

    def pop(self, k: object, default: Any = _ABSENT) -> Any:  # type: ignore[override]
        """Remove ``k`` and give its value back (``default`` when absent, else KeyError)."""
        e = self._entry(k)
        if e is _ABSENT:
            if default is _ABSENT:
                raise KeyError(k)
            return default
        self._cache[k] = _ABSENT
        self._dirty[k] = None
        self._dropped.append(e[0])
        self._size -= 1
        return e[2]

    def __delitem__(self, k: object) -> None:
        self.pop(k)

    def setdefault(self, k: object, default: Any = None) -> Any:
        """The value under ``k``, set to ``default`` first when absent."""
        e = self._entry(k)
        if e is _ABSENT:
            self[k] = default
            return default
        return e[2]

    def update(self, *others: Any, **kw: Any) -> None:  # type: ignore[override]
        """Set the entries of a mapping or of (key, value) pairs."""
        for other in others:
            for k, v in (other.items() if hasattr(other, "items") else other):
                self[k] = v
        for k, v in kw.items():
            self[k] = v

    def popitem(self) -> tuple:
        """Remove the last key inserted and give (key, value)."""
        keys = list(self)
        if not keys:
            raise KeyError("popitem(): dictionary is empty")
        return keys[-1], self.pop(keys[-1])

    def clear(self) -> None:
        """Remove every entry (a walk of the keys held, as a dict's clear frees them all)."""
        for k in list(self):
            self.pop(k)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[object]:
        """The keys in insertion order, streamed from the store's order namespace."""
        if self._frozen is not None:
            yield from [k for k, _ in self._frozen]
            return
        self._flush_order()  # (the values of the keys read or written are in the cache)
        for _, k in self._store.scan(self._order, (self.inst,)):
            yield k

    def keys(self) -> list:  # type: ignore[override]
        """The keys in insertion order."""
        return list(self)

    def items(self) -> list:  # type: ignore[override]
        """(key, value) in insertion order."""
        if self._frozen is not None:
            return list(self._frozen)
        keys = list(self)
        self._prefetch(keys)
        return [(k, self._cache[k][2]) for k in keys]

    def values(self) -> list:  # type: ignore[override]
        """The values in insertion order."""
        return [v for _, v in self.items()]

    def _prefetch(self, keys: list) -> None:
        unread = [k for k in keys if k not in self._cache]
        if unread and not self._empty:
            found = self._store.get_many(self._data, [(self.inst, _store_key(k)) for k in unread],
                                         None)
            for k, f in zip(unread, found):
                if f is None:
                    self._cache[k] = _ABSENT
                else:
                    e = self._cache[k] = list(f)
                    if self._packed:
                        e[2] = _unpack(e[2], self.value)

    def read_values(self) -> list:
        """The values of the entries the batch read or wrote (not the others held)."""
        return [e[2] for e in self._cache.values() if e is not _ABSENT]

    def plain(self) -> Dictionary:
        """A plain dictionary of the same entries, in the same order."""
        return _plain(self.key, self.value, self.items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredDictionary):
            other = other.plain()
        return isinstance(other, dict) and dict(self.items()) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredDictionary({self.name!r}, {len(self)} entries)"

    def copy(self) -> Dictionary:  # type: ignore[override]
        """A plain copy."""
        return self.plain()

    def __reduce__(self) -> tuple:
        return _plain, (self.key, self.value, self.items())

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return self.__reduce__()

    def __deepcopy__(self, memo: dict) -> Dictionary:
        import copy
        return copy.deepcopy(self.plain(), memo)

    def freeze(self) -> None:
        """Read every entry into the object, which from then on iterates, pickles and copies as a
        plain dictionary of them (:func:`detach`, for a dictionary the store stops keeping: the
        entries are the live objects, so what else holds one still shares it)."""
        if self._frozen is None:
            self._frozen = self.items()

    @property
    def frozen(self) -> bool:
        """Whether :meth:`freeze` read the entries out."""
        return self._frozen is not None

    def _flush_order(self) -> None:
        """Give the changes of the insertion order so far to the store."""
        store, order, inst = self._store, self._order, self.inst
        for seq, k in self._added:  # (numbered past every key committed: absent before)
            store.put(order, (inst, seq), k, absent=True)
        for seq in self._dropped:
            store.delete(order, (inst, seq))
        self._added.clear()
        self._dropped.clear()

    def flush(self) -> None:
        """Give the entries changed so far to the store (pending until its commit)."""
        store, data, inst = self._store, self._data, self.inst
        cache = self._cache
        self._flush_order()
        changed = self._dirty if not self._in_place else \
            {**self._dirty, **{k: None for k, e in cache.items() if e is not _ABSENT}}
        values = []
        for k in changed:
            e = cache[k]
            if e is _ABSENT:
                store.delete(data, (inst, _store_key(k)))
            else:
                values.append(((_store_key(k),), (e[0], e[1], _pack(e[2], self.value))
                               if self._packed else tuple(e)))
        if values:  # (one call for all, not one per entry; nothing committed: no seek)
            store.put_all(data, inst, values, absent=self._empty)
        self._dirty.clear()
        if self._size:
            self._empty = False


def attach(states: dict[int, dict], store: BucketStore) -> dict[int, dict[str, Any]]:
    """Put a :class:`StoredDictionary` where the pickled Flex states of a bucket hold a
    :class:`HeldDictionary`, and a mapping over the store (read bucket by bucket) where an event
    cache holds the count of its buckets; instance -> variable -> the dictionary or cache, for
    :func:`detach`."""
    attached: dict[int, dict[str, StoredDictionary]] = {}
    for inst, state in states.items():
        values = state.get("vars")
        if not isinstance(values, dict):
            continue
        for name, v in values.items():
            if isinstance(v, HeldDictionary):
                values[name] = attached.setdefault(inst, {})[name] = \
                    StoredDictionary(store, name, inst, v)
            elif isinstance(v, EventCache) and type(v.buckets) is int:
                v.buckets = (StoredGroups(store, _cache_ns(name), inst, v.buckets)
                             if v.millis is None else
                             StoredCacheBuckets(store, _timed_ns(name, inst), inst, v.buckets))
                attached.setdefault(inst, {})[name] = v  # type: ignore[assignment]
    return attached


def _drop(store: BucketStore, name: str, inst: int) -> None:
    """Remove every entry of variable ``name`` of instance ``inst`` from the store."""
    for ns in (*_names(name), _cache_ns(name), _timed_ns(name, inst)):
        for key, _ in list(store.scan(ns, (inst,))):
            store.delete(ns, key)


def _write(store: BucketStore, name: str, inst: int, d: Dictionary) -> HeldDictionary:
    """Write the plain dictionary ``d`` as the entries of variable ``name`` (whose namespaces
    hold nothing of ``inst``)."""
    data, order = _names(name)
    for seq, (k, v) in enumerate(d.items()):
        store.put(data, (inst, _store_key(k)), (seq, k, _pack(v, d.value)), absent=True)
        store.put(order, (inst, seq), k, absent=True)
    return HeldDictionary(len(d), len(d), d.key, d.value)


def _detach_caches(values: dict, store: BucketStore, inst: int, attached: dict[str, Any]) -> None:
    """The event caches of one instance's ``values``: a cache held by its own name alone leaves
    the count of its buckets (their changes written to the store, or all of them for a cache
    new to the store); any other goes back to plain buckets (the store keeps one name per
    cache)."""
    refs: dict[int, int] = {}
    for v in values.values():
        refs[id(v)] = refs.get(id(v), 0) + 1
    plain: dict[int, dict] = {}
    for name, v in values.items():  # read out the buckets of caches not held alone first
        if isinstance(v, EventCache) and isinstance(v.buckets, StoredGroups) \
                and (attached.get(name) is not v or refs[id(v)] > 1):
            if id(v) not in plain:
                plain[id(v)] = {k: v.buckets[k] for k in list(v.buckets)}
            v.buckets = plain[id(v)]
    for name, v in attached.items():  # names whose buckets are in the store but held no more
        if isinstance(v, EventCache) and (values.get(name) is not v or refs[id(v)] > 1):
            _drop(store, name, inst)
    for name, v in values.items():
        if not isinstance(v, EventCache):
            continue
        if isinstance(v.buckets, StoredGroups):
            v.buckets.flush()
            v.buckets = len(v.buckets)  # type: ignore[assignment]
        elif stored_cache(v) and refs[id(v)] == 1 and isinstance(v.buckets, dict):
            if v.millis is None:
                ns = _cache_ns(name)
                for key, entries in v.buckets.items():
                    store.put(ns, (inst, *key), entries)
            else:
                mapping = StoredCacheBuckets(store, _timed_ns(name, inst), inst, 0)
                for key, entries in v.buckets.items():
                    mapping[key] = entries
                mapping.flush()
            v.buckets = len(v.buckets)  # type: ignore[assignment]


def detach(states: dict[int, dict], store: BucketStore,
           attached: dict[int, dict[str, Any]]) -> int:
    """Write the changed entries of the stored dictionaries of a bucket's Flex states to
    ``store`` and leave their marks in their place, ready to be pickled; plain storable
    dictionaries (new ones) go to the store whole. A dictionary held in more than one place (two
    names, a name and an entry, a name other than its own) or one of whose entries holds a
    container held elsewhere stays plain (a stored one is read out whole, in place: see
    :meth:`StoredDictionary.freeze`) while it is so. ``attached``: what :func:`attach` gave. The
    number of entries held (for reports)."""
    held = 0
    for inst, state in states.items():
        values = state.get("vars")
        if not isinstance(values, dict):
            continue
        mine = attached.get(inst, {})
        _detach_caches(values, store, inst, mine)
        refs: dict[int, int] = {}  # container id -> references (see _aliased)
        for v in values.values():
            _container_refs(v, refs)
        plain = {id(v) for name, v in values.items()
                 if storable(v) and (refs[id(v)] > 1 or getattr(v, "name", name) != name
                                     or _aliased(v, refs))}  # type: ignore[arg-type]
        # dictionaries of the store not held by their own name alone (or with an entry held
        # elsewhere): read out first, then their entries go
        lost = [name for name, d in mine.items() if isinstance(d, StoredDictionary)
                and (values.get(name) is not d or id(d) in plain)]
        for name in lost:
            mine[name].freeze()
        for name in lost:
            _drop(store, name, inst)
        for name, v in values.items():
            if isinstance(v, StoredDictionary):
                if v.frozen:
                    continue
                v.flush()
                values[name] = v.held()
            elif storable(v) and id(v) not in plain:
                values[name] = _write(store, name, inst, v)  # type: ignore[arg-type]
            else:
                continue
            held += values[name].size
    return held
