"""A bucket's per-instance state in an embedded RocksDB (``rocksdict``), versioned by batch id.

Layout of a state root (docs/runtime.md, "The state store")::

    ROOT/layout.json           {"format": 1, "buckets": B, "generation": G}
    ROOT/gGGGGG/bBBBBB/        one RocksDB per bucket of generation G

Keys inside a bucket's RocksDB (one key space, the first byte says what a key is):

- ``d NS 0x00 KEY``: a value; ``NS`` the namespace (ASCII), ``KEY`` :func:`runtime.state.keys.encode_key`
  of (instance, key values...). The value is a header byte (bit 0: timed, then the time as 8
  ordered bytes follows; bits 1-7: the codec of the rest, 0 a plain pickle of protocol 5, 1
  :class:`runtime.state.codec.ValueCodec`) and the Python value's bytes.
- ``t NS 0x00 TIME KEY``: the time index of timed values (empty value), in time order per namespace.
- ``u BATCH dKEY`` (or ``u BATCH mlowNS``): the undo record of a key batch ``BATCH`` changed: its
  value before the batch (empty: it was absent); ``u BATCH`` alone marks that the batch's undo
  records are all there, its value the keys the batch added (absent before it: each its length
  in 4 bytes, then the key), whose undo is their removal (one value, not a record a key: most
  keys a batch writes are new).
- ``m history``: the ids of the last committed batches (the newest is the version);
  ``m low NS 0x00``: a time no index entry of the namespace is older than, where expiry seeks to.

A batch's changes stay in memory until :meth:`BucketStore.commit` writes them, their undo records,
the time index entries and the new history in one RocksDB write batch (atomic; the write-ahead log
is written, not synced: a killed process loses nothing committed, a power cut may).
"""
from __future__ import annotations

import bisect
import json
import os
import pickle
import shutil
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from .codec import CodecError, ValueCodec, holds_classes
from .keys import decode_instance, decode_key, encode_items, encode_key

# 2: values may be in the codec (header 2 or 3), which a runtime of format 1 cannot read; a root
# of format 1 is read as it is and marked 2 by create
# 3: the state files of a root's element hold a count in the place of a row-count KEEP's PER
# groups and of a Flex's input mirrors, whose entries are in the store (runtime/state/rows.py),
# which a runtime of format 2 would misread; a root of format 1 or 2 is read as it is (its state
# files' dicts go to the store at their next batch) and marked 3 by create or open
FORMAT = 3
_READS = (1, 2, 3)
KEEP_UNDO = 2  # batches that can be rolled back: a replay is of the last one, rarely two
LAYOUT = "layout.json"
_Q = struct.Struct(">Q")
_L = struct.Struct(">I")
_SIGN = 1 << 63
_UNTIMED = b"\x00"
_UNTIMED_CODED = b"\x02"  # the header of an untimed value in the codec (timed: 3)
_HISTORY = b"mhistory"
_LOW = b"mlow"  # + namespace prefix: no time index entry of the namespace is older
_ABSENT = b""
_WRITE_CHUNK = 50_000  # keys per write batch when copying whole stores


class StateError(Exception):
    """A state root or store that cannot be used as asked (wrong layout, version gone, misuse)."""


@dataclass(frozen=True)
class Layout:
    """The set of buckets of a state root: how many, and which generation directory holds them."""
    buckets: int
    generation: int

    def bucket_dir(self, root: str, bucket: int) -> str:
        """The directory of ``bucket``'s RocksDB."""
        return os.path.join(root, f"g{self.generation:05d}", f"b{bucket:05d}")


@dataclass(frozen=True)
class StoreStats:
    """What a bucket store holds, for reports."""
    version: Optional[int]
    estimated_keys: int  # RocksDB's estimate over all kinds of keys (values, index, undo)
    disk_bytes: int


def read_layout(root: str) -> Optional[Layout]:
    """The layout of the state root ``root``, or ``None`` when it has none yet."""
    return _read_layout(root)[0]


def _read_layout(root: str) -> tuple[Optional[Layout], Optional[int]]:
    """The layout of ``root`` and the format its ``layout.json`` says (None, None: none yet)."""
    try:
        with open(os.path.join(root, LAYOUT)) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None, None
    if data.get("format") not in _READS:
        raise StateError(f"{root}: state format {data.get('format')!r}, this runtime reads "
                         f"formats {', '.join(map(str, _READS))}; start from a new run directory")
    return Layout(int(data["buckets"]), int(data["generation"])), data["format"]


def _write_layout(root: str, layout: Layout) -> None:
    os.makedirs(root, exist_ok=True)
    hidden = os.path.join(root, f".{uuid.uuid4().hex}.tmp")
    with open(hidden, "w") as f:
        json.dump({"format": FORMAT, "buckets": layout.buckets,
                   "generation": layout.generation}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(hidden, os.path.join(root, LAYOUT))


def create(root: str, buckets: int) -> Layout:
    """Make ``root`` a state root of ``buckets`` buckets, or check that it is one (the driver
    calls this before the first batch; tasks only open buckets). Another bucket count is refused:
    :func:`rebucket` moves the state first."""
    if buckets < 1:
        raise StateError(f"a state root needs at least one bucket, not {buckets}")
    layout, form = _read_layout(root)
    if layout is None:
        layout = Layout(buckets, 1)
        _write_layout(root, layout)
    elif layout.buckets != buckets:
        raise StateError(f"{root}: the state is in {layout.buckets} buckets, this run has "
                         f"{buckets}: rebucket it first (runtime.state.rebucket)")
    elif form != FORMAT:
        # this runtime writes values a runtime of the older format cannot read: it now refuses
        # the root by its format, with a message, instead of failing on a value
        _write_layout(root, layout)
    _remove_strays(root, layout)
    return layout


def _remove_strays(root: str, layout: Layout) -> None:
    """Generation directories other than the layout's: left by a rebucket that crashed (before or
    after its switch) and never read."""
    live = f"g{layout.generation:05d}"
    for name in os.listdir(root):
        if name.startswith("g") and name != live and os.path.isdir(os.path.join(root, name)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _open_db(path: str) -> Any:
    release_held(path)  # this process's own kept handle would hold RocksDB's lock
    from rocksdict import BlockBasedOptions, Options, Rdict, WriteOptions
    opt = Options(raw_mode=True)
    opt.create_if_missing(True)
    opt.set_write_buffer_size(32 << 20)
    table = BlockBasedOptions()
    # most keys a batch reads are new (inserts): a bloom filter answers "absent" without a read
    table.set_bloom_filter(10, False)
    opt.set_block_based_table_factory(table)
    try:
        db = Rdict(path, opt)
    except Exception as e:  # rocksdict raises a plain Exception with RocksDB's status text
        hint = " (open in another task or process: RocksDB locks it)" if "lock" in str(e) else ""
        raise StateError(f"cannot open the state store {path}{hint}: {e}") from e
    wo = WriteOptions()
    wo.sync = False
    db.set_write_options(wo)
    return db


def _write_batch() -> Any:
    from rocksdict import WriteBatch
    return WriteBatch(raw_mode=True)


def _time(millis: int) -> bytes:
    return _Q.pack(millis + _SIGN)


def _batch(batch_id: int) -> bytes:
    return _Q.pack(batch_id + _SIGN)


def _index_key(dkey: bytes, raw: bytes) -> bytes:
    """The time index key of value ``raw`` (timed) stored under ``dkey``."""
    cut = dkey.index(b"\x00", 1) + 1
    return b"t" + dkey[1:cut] + raw[1:9] + dkey[cut:]


def _next_prefix(prefix: bytes) -> bytes:
    """The least byte string greater than every string starting with ``prefix``."""
    p = prefix.rstrip(b"\xff")
    return p[:-1] + bytes([p[-1] + 1]) if p else b"\xff" * (len(prefix) + 1)


# Stores kept open in this process between batches (BucketStore.held): (state root, bucket) ->
# (store, the inode of its directory when it was opened, to tell a directory removed and made again)
_HELD: dict[tuple[str, int], tuple["BucketStore", int]] = {}
_HELD_LOCK = threading.RLock()


def release_held(path: Optional[str] = None) -> None:
    """Close the stores :meth:`BucketStore.held` keeps open in this process (``path``: only the
    one of that bucket directory). Before another process may open them (a pool worker, Spark's
    Python workers: RocksDB locks a store's directory), and at a run's end."""
    if not _HELD:
        return
    with _HELD_LOCK:
        stores = [store for store, _ in _HELD.values()
                  if path is None or store.path == os.path.abspath(path)]
        for store in stores:
            _drop(store)


def _drop(store: "BucketStore") -> None:
    """Close a kept store (dropping it from _HELD) whose directory may be gone: RocksDB's close
    then fails to flush, and nothing of it is read again."""
    try:
        store.close()
    except Exception:  # rocksdict raises a plain Exception with RocksDB's status text
        store._db = None


def kept(root: str, bucket: int) -> Optional["BucketStore"]:
    """The store of ``bucket`` of the state root ``root`` that :meth:`BucketStore.held` keeps open
    in this process, when it has one that can begin a batch (none in a batch, its directory the
    one it opened: not removed and made again)."""
    held = _HELD.get((os.path.abspath(root), bucket))
    if held is None:
        return None
    store, inode = held
    if store._db is not None and store._batch is None and not store._pending \
            and _inode(store.path) == inode:
        return store
    _drop(store)
    return None


def _inode(path: str) -> int:
    try:
        return os.stat(path).st_ino
    except OSError:
        return -1


class BucketStore:
    """One bucket's state store, open for one task (see :meth:`open`).

    Use::

        with BucketStore.open(root, bucket) as store:
            store.begin(batch_id)          # the state after batch_id - 1 (a replay rolls back)
            row = store.get("w0", (instance, order_id))
            store.put_timed("w0", (instance, order_id), row, now_ms)
            gone = store.expire("w0", now_ms - keep_ms)
            store.commit(batch_id)         # all of it, atomically, or (crash) none of it

    Keys are tuples whose first item is the instance number (:mod:`runtime.state.keys`); values
    any picklable Python value. Reads see the batch's own writes; nothing reaches the disk before
    :meth:`commit`.
    """

    def __init__(self, db: Any, path: str, bucket: int) -> None:
        """Use :meth:`open`."""
        self._db = db
        self.path = path
        self.bucket = bucket
        raw = db.get(_HISTORY)
        self._history: list[int] = [] if raw is None else \
            [_Q.unpack_from(raw, i)[0] - _SIGN for i in range(0, len(raw), 8)]
        self._batch: Optional[int] = None
        self._pending: dict[bytes, Optional[bytes]] = {}  # data key -> new raw value, None: deleted
        # committed values the batch read: the engine reads a key before it writes it, so its undo
        # record costs no second read at commit
        self._prior: dict[bytes, Optional[bytes]] = {}
        self._sorted: Optional[list[bytes]] = []  # the pending keys in order (None: to sort)
        self._timed: dict[bytes, set[bytes]] = {}  # namespace prefix -> pending keys put timed
        # namespace prefix -> a time no index entry is older than (see expire), committed / this
        # batch's
        self._low: dict[bytes, Optional[int]] = {}
        self._low_pending: dict[bytes, int] = {}
        self._ns: dict[str, bytes] = {}
        # namespace prefix -> whether its values are written with the codec (decided by the
        # first value written in it in the batch, see _coded)
        self._coded_ns: dict[bytes, bool] = {}
        self._codec_of: Optional[ValueCodec] = None
        self._held: Optional[tuple[str, int]] = None  # its key in _HELD when kept open there

    @classmethod
    def open(cls, root: str, bucket: int) -> "BucketStore":
        """Open ``bucket`` of the state root ``root`` (made by :func:`create`). Open it in the task
        that uses it and close it at the task's end: RocksDB locks its directory, and the bucket's
        next batch may run in another Python worker (:meth:`held` for the driver's small
        batches, which keeps it open). A store :meth:`held` keeps open in this process is closed
        first."""
        layout, form = _read_layout(root)
        if layout is None:
            raise StateError(f"{root} is not a state root (no {LAYOUT}): runtime.state.create")
        if not 0 <= bucket < layout.buckets:
            raise StateError(f"{root}: no bucket {bucket}, the state has {layout.buckets}")
        if form != FORMAT:  # (as create does: a task may come first)
            _write_layout(root, layout)
        path = os.path.abspath(layout.bucket_dir(root, bucket))
        os.makedirs(path, exist_ok=True)
        return cls(_open_db(path), path, bucket)

    @classmethod
    def held(cls, root: str, bucket: int) -> "BucketStore":
        """:meth:`open`, the store then kept open in this process for the bucket's next batches
        (opening and closing RocksDB cost 20-60 ms elapsed and 5-10 ms of CPU a batch, more than
        a small batch's own work). Only for a process that runs all of the bucket's batches until
        :func:`release_held` (the driver running small batches: runtime/bucket_pool.py);
        :meth:`close` it when a batch fails (its uncommitted changes dropped: the next batch
        opens the store again). Opening the bucket again in this process closes the kept one."""
        key = (os.path.abspath(root), bucket)
        with _HELD_LOCK:
            store = kept(root, bucket)
            if store is not None:
                return store
            store = cls.open(root, bucket)
            store._held = key
            _HELD[key] = (store, _inode(store.path))
            return store

    def close(self) -> None:
        """Close the store; changes not committed are dropped."""
        if self._held is not None:
            with _HELD_LOCK:
                if _HELD.get(self._held, (None,))[0] is self:
                    del _HELD[self._held]
            self._held = None
        if self._db is not None:
            self._db.close()
            self._db = None
        self._pending.clear()
        self._prior.clear()
        self._low_pending.clear()
        self._batch = None

    def __enter__(self) -> "BucketStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> Optional[int]:
        """The last committed batch id (``None``: nothing committed)."""
        return self._history[-1] if self._history else None

    # --- batches -------------------------------------------------------------------------------

    def begin(self, batch_id: int) -> None:
        """Start batch ``batch_id`` from the state after ``batch_id - 1``: when the store already
        committed ``batch_id`` or later (the task finished, Spark did not record the batch, and
        now runs it again), those batches are rolled back with their undo records first."""
        if self._pending or self._batch is not None:
            raise StateError(f"bucket {self.bucket}: begin({batch_id}) while batch {self._batch} "
                             "is open")
        self._prior.clear()  # reads before begin may be of a version the rollback replaces
        self._low.clear()
        # decided again per batch, so that a store kept open between batches (held) writes the
        # bytes one opened per batch writes
        self._coded_ns.clear()
        if self._history and self._history[-1] >= batch_id:
            self._rollback(batch_id)
        self._batch = batch_id

    def _rollback(self, batch_id: int) -> None:
        db = self._db
        newer = [h for h in self._history if h >= batch_id]
        marks = db.get([b"u" + _batch(h) for h in newer])
        if any(m is None for m in marks):
            raise StateError(
                f"bucket {self.bucket}: cannot go back to the state before batch {batch_id}: the "
                f"store is at batch {self.version} and keeps the undo records of its last "
                f"{KEEP_UNDO} batches only")
        first = b"u" + _batch(batch_id)
        before: dict[bytes, bytes] = {}  # the oldest undo record of a key is its state back then
        it = db.iter()
        it.seek(first)
        while it.valid():
            k = it.key()
            if k[:1] != b"u":
                break
            if len(k) > 9:
                if k[9:] not in before:
                    before[k[9:]] = it.value()
            else:  # a batch's mark: the keys it added (absent before it), one after another
                raw, at = it.value(), 0
                while at < len(raw):
                    size = _L.unpack_from(raw, at)[0]
                    before.setdefault(raw[at + 4:at + 4 + size], _ABSENT)
                    at += 4 + size
            it.next()
        del it
        wb = _write_batch()
        keys = list(before)
        for dkey, now in zip(keys, db.get(keys) if keys else []):
            old = before[dkey]
            value = dkey[:1] == b"d"  # else a meta key (a low-time mark): no index entry
            if value and now is not None and now[0] & 1:
                wb.delete(_index_key(dkey, now))
            if old == _ABSENT:
                wb.delete(dkey)
            else:
                wb.put(dkey, old)
                if value and old[0] & 1:
                    wb.put(_index_key(dkey, old), b"")
        wb.delete_range(first, b"v")
        history = [h for h in self._history if h < batch_id]
        wb.put(_HISTORY, b"".join(_batch(h) for h in history))
        db.write(wb)
        self._history = history

    def commit(self, batch_id: int) -> None:
        """Write the batch's changes, their undo records, the time index and the new version in one
        atomic write; drop the undo records of batches older than the last :data:`KEEP_UNDO`."""
        if self._batch != batch_id:
            raise StateError(f"bucket {self.bucket}: commit({batch_id}) of a batch not begun "
                             f"(open: {self._batch})")
        db = self._db
        prior = self._prior
        unread = [k for k in self._pending if k not in prior]
        if unread:
            prior.update(zip(unread, db.get(unread)))
        undo = b"u" + _batch(batch_id)
        wb = _write_batch()
        put, delete = wb.put, wb.delete
        added: list[bytes] = []  # keys absent before the batch: their undo records in one value
        # (a raw value is never empty: ``raw[0]`` is its header byte, bit 0 timed, read without
        # the slice ``raw[:1]`` makes; most keys of a batch are new: their branch comes first)
        for dkey, new in self._pending.items():
            old = prior[dkey]
            if old is None:
                if new is None:
                    continue
                added.append(dkey)
                put(dkey, new)
                if new[0] & 1:
                    put(_index_key(dkey, new), b"")
                continue
            if new == old:
                continue
            put(undo + dkey, old)
            if old[0] & 1:
                delete(_index_key(dkey, old))
            if new is None:
                delete(dkey)
            else:
                put(dkey, new)
                if new[0] & 1:
                    put(_index_key(dkey, new), b"")
        pack = _L.pack
        put(undo, b"".join([pack(len(k)) + k for k in added]))
        for p, low in self._low_pending.items():
            mkey = _LOW + p
            old = db.get(mkey)
            wb.put(undo + mkey, _ABSENT if old is None else old)
            wb.put(mkey, _time(low))
        history = (self._history + [batch_id])[-(KEEP_UNDO + 1):]
        if len(history) > KEEP_UNDO:
            wb.delete_range(b"u", b"u" + _batch(history[-KEEP_UNDO]))
        wb.put(_HISTORY, b"".join(_batch(h) for h in history))
        db.write(wb)
        self._history = history
        self._pending.clear()
        self._prior.clear()
        self._sorted = []
        self._timed.clear()
        self._low.clear()
        self._low_pending.clear()
        self._batch = None

    # --- reads and writes ------------------------------------------------------------------------

    def _prefix(self, ns: str) -> bytes:
        p = self._ns.get(ns)
        if p is None:
            if not ns or not ns.isascii() or "\x00" in ns:
                raise StateError(f"a namespace is a non-empty ASCII name, not {ns!r}")
            p = self._ns[ns] = ns.encode() + b"\x00"
        return p

    def _coded(self, p: bytes, value: Any) -> bool:
        """Whether values of namespace prefix ``p`` are written with the codec: those whose first
        value in the batch (``value``, when not decided yet) holds objects a plain pickle writes by class
        reference (a ``Long``, a money value, a date, a record...). The values of one namespace
        are of one kind (rows of one window, groups of one aggregate); a plain pickle is cheaper
        for plain values (no codec call per value), the codec for the others."""
        coded = self._coded_ns.get(p)
        if coded is None:
            if value is None:  # (a time KEEP's times: decided by nothing)
                return False
            coded = self._coded_ns[p] = holds_classes(value)
        return coded

    def _encode(self, p: bytes, values: list, at: bytes = b"") -> list[bytes]:
        """The stored bytes of ``values`` of namespace prefix ``p``: the header (timed when
        ``at``, the encoded time, is given) and the value in the codec or a plain pickle."""
        if values and self._coded(p, values[0]):
            try:
                h = (b"\x03" if at else _UNTIMED_CODED) + at
                return [h + b for b in self._codec().encode_all(values)]
            except Exception:  # (what the codec's protocol 3 cannot write: a plain pickle)
                pass
        h = (b"\x01" if at else _UNTIMED) + at
        dumps = pickle.dumps
        return [h + dumps(value, 5) for value in values]

    def _codec(self) -> ValueCodec:
        if self._codec_of is None:
            self._codec_of = ValueCodec()
        return self._codec_of

    def _load(self, raw: bytes) -> Any:
        """The value of the stored bytes ``raw``."""
        h = raw[0]
        if h < 2:
            return pickle.loads(raw[9:] if h else raw[1:])
        if h > 3:
            return _load(raw)  # (refused, with the reason)
        try:
            return (self._codec_of or self._codec()).decode(raw[9:] if h & 1 else raw[1:])
        except CodecError as e:
            raise StateError(f"{self.path}: {e}") from None

    def _raw(self, dkey: bytes) -> Optional[bytes]:
        if dkey in self._pending:
            return self._pending[dkey]
        if dkey in self._prior:
            return self._prior[dkey]
        raw = self._prior[dkey] = self._db.get(dkey)
        return raw

    def _committed(self, dkeys: list[bytes]) -> None:
        """Read the committed values of those of ``dkeys`` not read or written yet (one multi-get)."""
        prior = self._prior
        pending = self._pending
        unread = [k for k in dkeys if k not in pending and k not in prior]
        if unread:
            prior.update(zip(unread, self._db.get(unread)))

    def _set(self, dkey: bytes, raw: Optional[bytes]) -> None:
        if self._batch is None:
            raise StateError(f"bucket {self.bucket}: a write outside a batch (begin first)")
        if dkey not in self._pending:
            self._sorted = None
        self._pending[dkey] = raw

    def get(self, ns: str, key: tuple, default: Any = None) -> Any:
        """The value under ``key`` in namespace ``ns``, or ``default``."""
        raw = self._raw(b"d" + self._prefix(ns) + encode_key(key))
        return default if raw is None else self._load(raw)

    def get_many(self, ns: str, keys: Sequence[tuple], default: Any = None) -> list[Any]:
        """The values under ``keys`` (one RocksDB multi-get for those the batch did not write)."""
        p = b"d" + self._prefix(ns)
        dkeys = [p + encode_key(k) for k in keys]
        self._committed(dkeys)
        pending, prior = self._pending, self._prior
        load = self._load
        out = []
        for k in dkeys:
            raw = pending[k] if k in pending else prior[k]
            out.append(default if raw is None else load(raw))
        return out

    def time_of(self, ns: str, key: tuple) -> Optional[int]:
        """The time a timed value under ``key`` was put with (``None``: absent or untimed)."""
        raw = self._raw(b"d" + self._prefix(ns) + encode_key(key))
        if raw is None or not raw[0] & 1:
            return None
        return _Q.unpack_from(raw, 1)[0] - _SIGN

    def put(self, ns: str, key: tuple, value: Any, absent: bool = False) -> None:
        """Store ``value`` under ``key`` (out of the time index if it was timed). ``absent``: the
        caller knows the key held nothing before the batch (a key numbered past all the keys it
        stored), so :meth:`commit` need not read it for its undo record."""
        p = self._prefix(ns)
        dkey = b"d" + p + encode_key(key)
        if absent and dkey not in self._prior and dkey not in self._pending:
            self._prior[dkey] = None
        self._set(dkey, self._encode(p, [value])[0])

    def put_all(self, ns: str, inst: int, items: Iterable[tuple[tuple, Any]],
                absent: Optional[bool] = None) -> None:
        """:meth:`put` of every ``(key, value)`` of ``items`` under ``(inst, *key)``: a whole part
        of an instance's state, or the values a batch changed in it, written at once (the
        instance's prefix encoded once). ``absent``: whether the caller knows the instance holds
        nothing committed in ``ns`` (True: no key is read for its undo record at commit; False:
        it holds some); None: found out by one seek."""
        if self._batch is None:
            raise StateError(f"bucket {self.bucket}: a write outside a batch (begin first)")
        p = self._prefix(ns)
        head = b"d" + p + encode_key((inst,))
        # comprehensions, not a loop of statements per entry: a third of this function's time
        # was the loop's own (bench/project_cpu.py's one batch writes every entry here)
        pairs = items if isinstance(items, list) else list(items)
        if not pairs:
            return
        # (a tuple's encoding is its items' concatenated: encode_key((inst, *key)))
        dkeys = [head + encode_items(key) for key, _ in pairs]
        self._pending.update(zip(dkeys, self._encode(p, [value for _, value in pairs])))
        # the instance holds nothing committed in ns (an instance new in the batch): no key is
        # read for its undo record at commit (one seek here instead)
        if absent if absent is not None else not self._holds(head):
            self._prior.update(dict.fromkeys(dkeys))
        self._sorted = None

    def _holds(self, head: bytes) -> bool:
        """Whether a committed key starts with ``head``."""
        it = self._db.iter()
        try:
            it.seek(head)
            return it.valid() and it.key().startswith(head)
        finally:
            del it

    def put_timed(self, ns: str, key: tuple, value: Any, at_millis: int) -> None:
        """Store ``value`` under ``key`` at time ``at_millis`` (ms) in the namespace's time index;
        a key put again moves in the index to its new time."""
        p = self._prefix(ns)
        dkey = b"d" + p + encode_key(key)
        self._set(dkey, self._encode(p, [value], _time(at_millis))[0])
        self._timed.setdefault(p, set()).add(dkey)
        low = self._low_of(p)
        if low is not None and at_millis < low:
            self._low_pending[p] = at_millis

    def _low_of(self, p: bytes) -> Optional[int]:
        """A time no index entry of namespace prefix ``p`` is older than (None: unknown)."""
        if p in self._low_pending:
            return self._low_pending[p]
        if p not in self._low:
            raw = self._db.get(_LOW + p)
            self._low[p] = None if raw is None else _Q.unpack(raw)[0] - _SIGN
        return self._low[p]

    def _index_start(self, p: bytes) -> bytes:
        """Where a walk of the time index of ``p`` starts: at its low mark, so the seek skips the
        deletion markers of the entries expired before (RocksDB keeps them until a compaction,
        and walking them made every expiry cost all the rows expired so far)."""
        low = self._low_of(p)
        return b"t" + p + (_time(low) if low is not None else b"")

    def delete(self, ns: str, key: tuple) -> None:
        """Remove ``key`` (nothing when absent)."""
        self._set(b"d" + self._prefix(ns) + encode_key(key), None)

    def delete_all(self, ns: str, inst: int, keys: Iterable[tuple]) -> None:
        """:meth:`delete` of every key of ``keys`` under ``(inst, *key)`` (the instance's prefix
        encoded once)."""
        if self._batch is None:
            raise StateError(f"bucket {self.bucket}: a write outside a batch (begin first)")
        head = b"d" + self._prefix(ns) + encode_key((inst,))
        self._pending.update(dict.fromkeys([head + encode_items(key) for key in keys]))
        self._sorted = None

    def scan(self, ns: str, prefix: tuple = ()) -> Iterator[tuple[tuple, Any]]:
        """(key, value) of the keys of ``ns`` starting with the items ``prefix`` (``(instance,)``:
        one instance's), in key order. The scan sees the batch's writes made before it started."""
        for dkey, raw in self._range(b"d" + self._prefix(ns), encode_items(prefix)):
            yield decode_key(dkey[dkey.index(b"\x00", 1) + 1:]), self._load(raw)

    def committed_data(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed data entry (its key, ``d`` tag included, and raw value) in key order,
        the batch's pending writes not seen: the whole-store scans of a move or a count."""
        it = self._db.iter()
        try:
            it.seek(b"d")
            while it.valid():
                dkey = it.key()
                if dkey[:1] != b"d":
                    break
                yield dkey, it.value()
                it.next()
        finally:
            del it

    def _range(self, head: bytes, rest: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Committed keys in the range merged with the pending ones (which win)."""
        lo = head + rest
        hi = _next_prefix(lo)
        if self._sorted is None:
            self._sorted = sorted(self._pending)
        ps = self._sorted
        pend = ps[bisect.bisect_left(ps, lo):bisect.bisect_left(ps, hi)]
        pending = self._pending
        it = self._db.iter()
        it.seek(lo)
        i = 0
        while True:
            k = it.key() if it.valid() else None
            if k is not None and k >= hi:
                k = None
            if i < len(pend) and (k is None or pend[i] <= k):
                p = pend[i]
                i += 1
                if k == p:
                    it.next()
                raw = pending[p]
                if raw is not None:
                    yield p, raw
            elif k is not None:
                if k not in pending:
                    yield k, it.value()
                it.next()
            else:
                return

    def expire(self, ns: str, before_millis: int) -> list[tuple[tuple, Any]]:
        """Delete the timed values of ``ns`` put at a time before ``before_millis`` and return
        them as (key, value), oldest first: found through the time index, so it touches only
        them (and the values this batch put timed)."""
        if self._batch is None:
            raise StateError(f"bucket {self.bucket}: expire outside a batch (begin first)")
        p = self._prefix(ns)
        found = self._due(p, _time(before_millis))
        found.sort()
        dkeys = [b"d" + p + ek for _, ek in found]
        self._committed(dkeys)
        out = []
        for dkey, (_, ek) in zip(dkeys, found):
            raw = self._pending[dkey] if dkey in self._pending else self._prior[dkey]
            out.append((decode_key(ek), self._load(raw)))
            self._set(dkey, None)
        low = self._low_of(p)
        if low is None or before_millis > low:  # nothing older than the bound is left
            self._low_pending[p] = before_millis
        return out

    def timed(self, ns: str) -> list[tuple[int, tuple]]:
        """(time, key) of every timed value of ``ns``, oldest first (keys of one time in key
        order), the batch's own writes included: a walk of the whole time index."""
        found = self._due(self._prefix(ns), None)
        found.sort()
        return [(_Q.unpack(t)[0] - _SIGN, decode_key(ek)) for t, ek in found]

    def _due(self, p: bytes, bound: Optional[bytes]) -> list[tuple[bytes, bytes]]:
        """(time, encoded key) of the timed values of namespace prefix ``p`` whose time is
        before ``bound`` (an encoded time; None: all), unsorted: the time index's entries the
        batch has not rewritten, and the batch's own timed writes."""
        head = b"t" + p
        cut = len(head) + 8
        hi = head + bound if bound is not None else None
        found: list[tuple[bytes, bytes]] = []
        it = self._db.iter()
        it.seek(self._index_start(p))
        while it.valid():
            k = it.key()
            if (k >= hi) if hi is not None else not k.startswith(head):
                break
            if b"d" + p + k[cut:] not in self._pending:
                found.append((k[len(head):cut], k[cut:]))
            it.next()
        del it
        for dkey in self._timed.get(p, ()):
            raw = self._pending.get(dkey)
            if raw is not None and raw[0] & 1 and (bound is None or raw[1:9] < bound):
                found.append((raw[1:9], dkey[len(p) + 1:]))
        return found

    def next_time(self, ns: str) -> Optional[int]:
        """The earliest time in the time index of ``ns`` (``None``: no timed value), for the next
        deadline of a timer; counts the batch's own writes."""
        p = self._prefix(ns)
        head = b"t" + p
        best: Optional[bytes] = None
        it = self._db.iter()
        it.seek(self._index_start(p))
        while it.valid():
            k = it.key()
            if not k.startswith(head):
                break
            if b"d" + p + k[len(head) + 8:] not in self._pending:
                best = k[len(head):len(head) + 8]
                break
            it.next()
        del it
        for dkey in self._timed.get(p, ()):
            raw = self._pending.get(dkey)
            if raw is not None and raw[0] & 1 and (best is None or raw[1:9] < best):
                best = raw[1:9]
        return None if best is None else _Q.unpack(best)[0] - _SIGN

    def compact(self) -> None:
        """Compact the whole store now (after a bulk load, such as :func:`rebucket`'s), so that
        the batches after it do not pay the compaction the load left."""
        self._db.compact_range(None, None)

    # --- reports -------------------------------------------------------------------------------

    def count(self, ns: Optional[str] = None) -> int:
        """The number of values in ``ns`` (all namespaces: ``None``), by a scan: for reports and
        tests, not for every batch."""
        n = 0
        head = b"d" + self._prefix(ns) if ns is not None else b"d"
        for _ in self._range(head, b""):
            n += 1
        return n

    def stats(self) -> StoreStats:
        """Version, RocksDB's key estimate and the bytes of the store's files."""
        keys = self._db.property_int_value("rocksdb.estimate-num-keys") or 0
        return StoreStats(self.version, int(keys), disk_bytes(self.path))


def _load(raw: bytes, codec: Optional[ValueCodec] = None) -> Any:
    """The value of the raw stored bytes ``raw`` (header byte included); ``codec``: the codec to
    read a value in the codec with (a new one when None)."""
    h = raw[0]
    if h < 2:  # a plain pickle (every value a runtime of layout format 1 wrote)
        return pickle.loads(raw[9:] if h else raw[1:])
    if h > 3:
        raise StateError(f"a state value of codec {h >> 1}: this runtime reads codecs 0 and 1 "
                         "(written by a newer runtime?)")
    try:
        return (codec or ValueCodec()).decode(raw[9:] if h & 1 else raw[1:])
    except CodecError as e:
        raise StateError(str(e)) from None


def disk_bytes(path: str) -> int:
    """The bytes of the files under ``path`` (files that go while it counts are skipped)."""
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(top, name)).st_size
            except FileNotFoundError:
                pass
    return total


def rebucket(root: str, old_buckets: int, new_buckets: int, bucket_of: Callable[[int], int],
             next_batch: int) -> Layout:
    """Move the state of ``root`` from ``old_buckets`` to ``new_buckets`` buckets: every key to
    bucket ``bucket_of(instance)`` (in ``0..new_buckets-1``), as the state is before batch
    ``next_batch`` (the batch the resumed run starts with; newer commits are rolled back).

    The new buckets are written to a new generation directory and the layout switched to it by
    one rename, so a crash leaves either the old state whole (the half-written generation is
    removed by the next :func:`create` or :func:`rebucket`) or the new one. The undo records are
    not carried over: the new stores cannot roll back before ``next_batch``."""
    def place(dkey: bytes, raw: bytes) -> int:
        return bucket_of(decode_instance(dkey[dkey.index(b"\x00", 1) + 1:]))
    return _move(root, old_buckets, new_buckets, place, next_batch)


def rebucket_keys(root: str, old_buckets: int, new_buckets: int,
                  route: Callable[[str, tuple, Callable[[], Any]], int],
                  next_batch: int) -> tuple[Layout, dict[tuple[int, str, int], int]]:
    """:func:`rebucket`, every value to the bucket ``route(namespace, key, load)`` says (``key``
    with the instance first; ``load()`` gives the value, read only when the route needs it), not
    by instance alone: for an element whose instance's keys are spread over buckets by more than
    the instance (an aggregation's groups). Also gives, per (new bucket, namespace, instance),
    the number of values moved there: what the bucket's pickled instance states count in place
    of each stored part (runtime/state/rows.py)."""
    counts: dict[tuple[int, str, int], int] = {}
    codec = ValueCodec()

    def place(dkey: bytes, raw: bytes) -> int:
        cut = dkey.index(b"\x00", 1)
        ns = dkey[1:cut].decode()
        key = decode_key(dkey[cut + 1:])
        nb = route(ns, key, lambda: _load(raw, codec))
        at = (nb, ns, key[0])
        counts[at] = counts.get(at, 0) + 1
        return nb
    return _move(root, old_buckets, new_buckets, place, next_batch), counts


def count_keys(root: str) -> dict[tuple[int, str, int], int]:
    """Per (bucket, namespace, instance), the number of values the state root ``root`` holds as
    its last committed batch left them (a scan of every bucket: for :func:`rebucket_keys`'s
    counts when a crash cut the move short after the switch)."""
    layout = read_layout(root)
    if layout is None:
        raise StateError(f"{root} is not a state root (no {LAYOUT})")
    counts: dict[tuple[int, str, int], int] = {}
    for b in range(layout.buckets):
        with BucketStore.open(root, b) as store:
            for dkey, _ in store.committed_data():
                cut = dkey.index(b"\x00", 1)
                at = (b, dkey[1:cut].decode(), decode_instance(dkey[cut + 1:]))
                counts[at] = counts.get(at, 0) + 1
    return counts


def _move(root: str, old_buckets: int, new_buckets: int, place: Callable[[bytes, bytes], int],
          next_batch: int) -> Layout:
    """Copy every value of the buckets of ``root`` (before batch ``next_batch``) to the bucket
    ``place(data key, raw value)`` of a new generation of ``new_buckets``, then switch to it
    (see :func:`rebucket`)."""
    layout = read_layout(root)
    if layout is None:
        raise StateError(f"{root} is not a state root (no {LAYOUT})")
    if layout.buckets != old_buckets:
        raise StateError(f"{root}: the state is in {layout.buckets} buckets, not {old_buckets}")
    if new_buckets < 1:
        raise StateError(f"a state root needs at least one bucket, not {new_buckets}")
    _remove_strays(root, layout)
    new = Layout(new_buckets, layout.generation + 1)
    targets = []
    try:
        for b in range(new_buckets):
            os.makedirs(new.bucket_dir(root, b))
            targets.append(_open_db(new.bucket_dir(root, b)))
        batches = [_write_batch() for _ in targets]
        sizes = [0] * new_buckets
        for b in range(old_buckets):
            with BucketStore.open(root, b) as store:
                store.begin(next_batch)
                for dkey, raw in store.committed_data():
                    nb = place(dkey, raw)
                    if not 0 <= nb < new_buckets:
                        raise StateError(f"a value of {root} maps to bucket {nb}, not one of "
                                         f"0..{new_buckets - 1}")
                    wb = batches[nb]
                    wb.put(dkey, raw)
                    if raw[0] & 1:
                        wb.put(_index_key(dkey, raw), b"")
                    sizes[nb] += 1
                    if sizes[nb] >= _WRITE_CHUNK:
                        targets[nb].write(wb)
                        batches[nb] = _write_batch()
                        sizes[nb] = 0
        history = _batch(next_batch - 1) if next_batch > 0 else b""
        for db, wb in zip(targets, batches):
            wb.put(_HISTORY, history)
            db.write(wb)
            db.compact_range(None, None)
    finally:
        for db in targets:
            db.close()
    _write_layout(root, new)
    _remove_strays(root, new)
    return new
