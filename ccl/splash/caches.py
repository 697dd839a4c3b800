"""SPLASH event caches: the value an ``eventCache(...)`` variable holds, its built-ins, and the
aggregates (``avg(cache.price)``, ``sum``, ``count``, ``min``, ``max``, ``first``, ``last``,
``nth``) over the current bucket.

An :class:`EventCache` holds rows grouped into buckets by key columns. It is plain data (picklable,
so it lives in an engine's per-instance state); the runtime (``runtime/engine/cache.py``) builds one
from a declaration and feeds it the rows of its source. Semantics (docs/runtime-flex.md):

- a bucket is chosen by the cache's key columns (``Src[k1, k2]``; ``Src[]`` is one bucket; ``Src``
  alone: the source's primary key, one bucket for a stream);
- every event goes into its bucket as a record of its own (an insert, an update and a delete of one
  key are three records) unless the cache is ``coalesce``: then a bucket holds one record per
  primary key of the source (a delete removes it);
- ``N events`` keeps the last N records *of each bucket*, an interval keeps the records younger than
  it (processing time); ``col asc|desc`` orders a bucket for ``getCache``, ``deleteCache``, ``nth``,
  ``first`` and ``last`` (records of equal value keep their arrival order);
- ``manual`` caches are filled by ``insertCache`` / ``insertIntoCache`` only;
- the *current* bucket is the bucket of the event being processed; ``keyCache(c, rec)`` selects
  another one. Aggregates and the other functions work on the current bucket.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Callable, Iterable, Mapping, Optional, Sequence

from ..syntax import nodes as n
from .types import Type
from .operators import arithmetic, comparison
from .values import Record, SplashError, a_kind, is_integral

AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last", "nth")
_OP_CODES = {"i": 1, "u": 3, "d": 5, "p": 7, "s": 13}
_new_record = Record.__new__


class EventCache:
    """An event cache: its declaration (plain values) and its buckets.

    ``keys`` are the bucket columns; ``row_key`` the source's primary key (identifies a record for
    ``coalesce``); ``columns`` (name, type) pairs of the source; ``order`` (column, descending) pairs.
    Entries are ``[row, op, time_ms]`` lists in arrival order.
    """

    splash_value = True  # passes through from_python unchanged

    def __init__(self, name: str, source: str, keys: Sequence[str], row_key: Sequence[str],
                 columns: Sequence[tuple[str, Type]], count: Optional[int] = None,
                 millis: Optional[int] = None, coalesce: bool = False, manual: bool = False,
                 order: Sequence[tuple[str, bool]] = ()) -> None:
        self.name, self.source = name, source
        self.keys, self.row_key = list(keys), list(row_key)
        self.columns = [(c, t) for c, t in columns]
        self.count, self.millis = count, millis
        self.coalesce, self.manual = coalesce, manual
        self.order = [(c, bool(d)) for c, d in order]
        self.buckets: dict[tuple, list[list]] = {}
        self.current: Optional[tuple] = None
        self.now_ms = 0

    def __repr__(self) -> str:
        if not isinstance(self.buckets, dict):  # (kept in a state store: not read for a repr)
            return f"EventCache({self.name}: buckets in a state store)"
        return f"EventCache({self.name}: {sum(len(b) for b in self.buckets.values())} records)"

    # --- buckets -----------------------------------------------------------------------------

    def bucket_of(self, row: Mapping[str, object]) -> tuple:
        """The bucket key of a row (or of a record naming the key columns)."""
        missing = [k for k in self.keys if k not in row]
        if missing:
            raise SplashError(f"the record has no key field '{missing[0]}' of event cache '{self.name}'")
        return tuple(row[k] for k in self.keys)

    def select(self, row: Mapping[str, object]) -> None:
        """Make the bucket of ``row`` the current one (keyCache)."""
        self.current = self.bucket_of(row)

    def _live(self, key: Optional[tuple]) -> list[list]:
        """The entries of bucket ``key`` (expired ones dropped), arrival order."""
        if key is None:
            return []
        entries = self.buckets.get(key)
        if entries is None:
            return []
        if self.millis is not None:
            cut = self.now_ms - self.millis
            drop = 0
            while drop < len(entries) and entries[drop][2] <= cut:
                drop += 1
            if drop:
                del entries[:drop]
        if not entries:
            del self.buckets[key]
        return entries

    def view(self) -> list[list]:
        """The current bucket's entries in the cache's order."""
        entries = self._live(self.current)
        if not self.order:
            return list(entries)
        out = list(entries)
        for col, desc in reversed(self.order):  # stable sorts, last column first
            nulls = [e for e in out if e[0].get(col) is None]
            rest = [e for e in out if e[0].get(col) is not None]
            rest.sort(key=_SortKey.of(col), reverse=desc)
            out = nulls + rest if not desc else rest + nulls
        return out

    def records(self) -> list[Record]:
        """The current bucket as records (readonly), in the cache's order."""
        return [self._record(e) for e in self.view()]

    def _record(self, entry: list) -> Record:
        # Record(entry[0].items(), types=dict(self.columns)) without __init__, its types dict
        # made once per cache and shared (records never change their types dict in place)
        types = self.__dict__.get("_types")
        if types is None:
            types = self._types = dict(self.columns)
        rec = _new_record(Record)
        dict.update(rec, entry[0])
        rec.types, rec.key_fields = types, ()
        rec.readonly, rec.source = True, self.source  # type: ignore[attr-defined]
        rec.opcode = _OP_CODES.get(entry[1])
        return rec

    def __getstate__(self) -> dict:
        """What pickle and copy keep: the declaration and buckets, not the shared types dict."""
        state = self.__dict__
        if "_types" in state:
            state = dict(state)
            del state["_types"]
        return state

    # --- changes -----------------------------------------------------------------------------

    def add(self, op: str, row: Mapping[str, object], now_ms: int) -> None:
        """An event of the source (``op`` i, u or d): it goes into its bucket, which becomes the
        current one (a manual cache only changes its current bucket)."""
        self.now_ms = now_ms
        self.current = self.bucket_of(row)
        if not self.manual:
            self._put(self.current, op, row)

    def insert(self, row: Mapping[str, object]) -> None:
        """``insertCache``: ``row`` into the current bucket (the row's own bucket when none is)."""
        if self.current is None:
            self.current = self.bucket_of(row)
        self._put(self.current, "i", row)

    def delete_at(self, index: int) -> None:
        """``deleteCache``: remove the record at ``index`` of the current bucket's order."""
        view = self.view()
        if not 0 <= index < len(view):
            return
        entries = self.buckets[self.current]  # type: ignore[index]
        entries.remove(view[index])
        if not entries:
            del self.buckets[self.current]  # type: ignore[arg-type]

    def _put(self, key: tuple, op: str, row: Mapping[str, object]) -> None:
        entries = self._live(key)
        self.buckets[key] = entries
        stored = {c: row.get(c) for c, _ in self.columns} if self.columns else dict(row)
        if self.coalesce and self.row_key:
            ident = tuple(stored.get(c) for c in self.row_key)
            entries[:] = [e for e in entries if tuple(e[0].get(c) for c in self.row_key) != ident]
            if op == "d":
                if not entries:
                    del self.buckets[key]
                return
        entries.append([stored, op, self.now_ms])
        if self.count is not None and len(entries) > self.count:
            del entries[:len(entries) - self.count]

    def sweep(self, now_ms: int) -> None:
        """Drop every expired record (time retention), so idle buckets do not keep memory."""
        self.now_ms = max(self.now_ms, now_ms)
        if self.millis is not None:
            # buckets kept in a state store say which may have expired records (its time index)
            due = getattr(self.buckets, "due", None)
            for key in due(self.now_ms - self.millis) if due is not None else list(self.buckets):
                self._live(key)

    def size(self) -> int:
        return len(self._live(self.current))


class _SortKey:
    """Orders non-null values with SPLASH comparison (numbers, strings, date-times)."""

    __slots__ = ("v",)

    def __init__(self, v: object) -> None:
        self.v = v

    def __lt__(self, other: "_SortKey") -> bool:
        return bool(comparison("<", self.v, other.v))

    @staticmethod
    def of(col: str) -> Callable[[list], "_SortKey"]:
        return lambda e: _SortKey(e[0].get(col))


# --- built-ins (registered in builtins.BUILTINS) ----------------------------------------------------

def need_cache(name: str, c: object) -> EventCache:
    if not isinstance(c, EventCache):
        raise SplashError(f"{name}() needs an event cache, not {a_kind(c)}")
    return c


def cache_size(ctx: object, c: object) -> int:
    return need_cache("cacheSize", c).size()


def get_cache(ctx: object, c: object, i: object) -> Optional[Record]:
    cache = need_cache("getCache", c)
    if not is_integral(i):
        raise SplashError(f"getCache() index must be an integer, not {a_kind(i)}")
    # an unordered cache's view is its current bucket as it is: indexed without view()'s copy
    view = cache.view() if cache.order else cache._live(cache.current)
    return cache._record(view[i]) if 0 <= i < len(view) else None  # type: ignore[operator,index]


def delete_cache(ctx: object, c: object, i: object) -> None:
    cache = need_cache("deleteCache", c)
    if not is_integral(i):
        raise SplashError(f"deleteCache() index must be an integer, not {a_kind(i)}")
    cache.delete_at(i)  # type: ignore[arg-type]
    return None


def _need_record(name: str, r: object) -> Record:
    if not isinstance(r, Record):
        raise SplashError(f"{name}() needs a record, not {a_kind(r)}")
    return r


def insert_cache(ctx: object, c: object, r: object) -> None:
    need_cache("insertCache", c).insert(_need_record("insertCache", r))
    return None


def key_cache(ctx: object, c: object, r: object) -> None:
    need_cache("keyCache", c).select(_need_record("keyCache", r))
    return None


def insert_into_cache(ctx: object, *args: object) -> Optional[Record]:
    """``insertIntoCache([cache,] row)``: SAP's example function as a built-in (a user function of
    that name takes precedence). Without a cache argument, the cache over the row's source (the only
    one, or the first declared). The row goes into the current bucket; when the cache has an
    ``N events`` limit and the bucket is full, the row replaces the bucket's first record (in the
    cache's order) if it does not sort before it, and that record is returned; when it sorts
    before, nothing changes and null is returned. Otherwise the row itself is returned."""
    if len(args) == 2:
        cache, row = need_cache("insertIntoCache", args[0]), _need_record("insertIntoCache", args[1])
    else:
        row = _need_record("insertIntoCache", args[0])
        cache = _find_cache(ctx, getattr(row, "source", None))
    if cache.current is None:
        cache.current = cache.bucket_of(row)
    if cache.count is not None and cache.size() >= cache.count:
        view = cache.view()
        first = view[0][0]
        if cache.order and any(_before(row.get(col), first.get(col), desc) for col, desc in cache.order[:1]):
            return None
        evicted = cache._record(view[0])
        cache.delete_at(0)
        cache.insert(row)
        return evicted
    cache.insert(row)
    return row


def _before(a: object, b: object, desc: bool) -> bool:
    if a is None or b is None:
        return False
    return bool(comparison(">" if desc else "<", a, b))


def _find_cache(ctx: object, source: Optional[str]) -> EventCache:
    cells = getattr(ctx, "globals", {}) or {}
    caches = [c.value for c in cells.values() if isinstance(c.value, EventCache)]
    mine = [c for c in caches if source is not None and c.source == source]
    if mine or caches:
        return (mine or caches)[0]
    raise SplashError("insertIntoCache(): no event cache is declared")


# --- aggregates over the current bucket -----------------------------------------------------------

def cache_names(args: Iterable[n.Node]) -> list[str]:
    """The variable names an aggregate's arguments mention (one of them must hold a cache)."""
    names: list[str] = []
    for a in args:
        for node in a.walk():
            if isinstance(node, n.Var) and node.name.name not in names:
                names.append(node.name.name)
    return names


def aggregate(fn: str, values: list[object]) -> object:
    """``fn`` over the values of the bucket's records, in the bucket's order (nulls are skipped,
    except by first/last)."""
    if fn == "first":
        return values[0] if values else None
    if fn == "last":
        return values[-1] if values else None
    present = [v for v in values if v is not None]
    if fn == "count":
        return len(present)
    if not present:
        return None
    if fn in ("sum", "avg"):
        total = present[0]
        for v in present[1:]:
            total = arithmetic("+", total, v)
        if fn == "sum":
            return total
        if isinstance(total, Decimal):
            return arithmetic("/", total, Decimal(len(present)))
        return float(total) / len(present)  # type: ignore[arg-type]
    best = present[0]
    for v in present[1:]:
        if comparison("<" if fn == "min" else ">", v, best):
            best = v
    return best


def nth_value(index: object, values: list[object]) -> object:
    if not is_integral(index):
        raise SplashError(f"nth() index must be an integer, not {a_kind(index)}")
    return values[index] if 0 <= index < len(values) else None  # type: ignore[operator,index]


__all__ = ["AGGREGATES", "EventCache", "aggregate", "cache_names", "nth_value"]
