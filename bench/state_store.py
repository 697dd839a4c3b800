"""Candidate stores for per-instance state: what one micro-batch costs as the state held grows.

    python bench/state_store.py [--held 100000,1000000,3000000] [--batch 100000] [--repeat 2]
                                [--only pickle,sqlite,lmdb,rocksdb,rocksdb-ckpt,spark]
                                [--spark-held 100000] [--dir /tmp/...] [--out runs.jsonl]
    python bench/state_store.py --report runs.jsonl      # the table again, from saved runs

At the defaults it took 5.5 minutes on 2 cores at load average 3 and would take about 10 at load
8-12 (each round of the five local candidates 2-4 minutes, Spark at 0.1M 1-1.5 minutes; add 1M
with ``--spark-held 100000,1000000``: about 2.5 minutes more; 3M: over 4 minutes more).

Simulates one bucket's state of a keyed window (``KEEP ALL`` keyed by OrderId, or ``KEEP 1 DAY``
for the eviction part): H rows held, key a long OrderId, value a small row (account string, qty
int, price float, ts long). A micro-batch inserts B new keys, updates B/10 existing keys (new qty,
price and ts) and deletes B/100 existing keys. Every store must give the runtime's replay
guarantee: after batch N+1 committed, a crash and a replay of N+1 start from exactly the state
after N. Each candidate shows how it gets back to version N, and the bench checks it: it commits
N+1, "crashes" (closes the store and opens it again from disk), restores version N, checks every
key N+1 touched and the row count against the state after N, replays N+1 and checks again.

Needs ``pip install lmdb rocksdict`` (not in the project's dependencies; both install from PyPI
as wheels: lmdb 3.0.0, rocksdict 0.3.29 here) and, for ``spark``, the venv's pyspark 4.x.

Candidates (each (candidate, H) runs in its own Python process so that memory is its own):

- ``pickle``: today's runtime (runtime/arrow_state.py): the bucket's state is one pickled dict,
  read whole and written whole (hidden name, then renamed) every batch, one file per batch; version
  N is file N.
- ``sqlite``: stdlib sqlite3, WAL, synchronous=NORMAL; a table of rows (OrderId primary key) with
  an index on ts; every batch writes, in the same transaction as its changes, an undo log of the
  old values of the keys it touched and its batch id; version N = undo the newer batch.
- ``lmdb``: the ``lmdb`` package (B+tree in a memory map), sub-databases rows / by-time index /
  undo log / meta, one write transaction per batch (sync off, so survives kill -9, not a power
  cut); version N = undo the newer batch.
- ``rocksdb``: ``rocksdict`` (RocksDB), one WriteBatch per batch holding the changes, the time
  index entries, the undo log and the batch id (WAL on, not synced: survives kill -9);
  version N = undo the newer batch.
- ``rocksdb-ckpt``: the same store without an undo log; each commit flushes and takes a RocksDB
  checkpoint (hard links to the SST files); version N = open from checkpoint N.
- ``spark``: Spark's own state: ``transformWithStateInPandas`` with a MapState per bucket (4
  buckets, grouped by OrderId % 4) under the RocksDB state store provider with changelog
  checkpointing, fed Parquet files (one load file of H rows, then files of B new keys) one file per
  trigger; batch durations and state metrics from the query progress; the first batch after a
  restart from the checkpoint is the restore.

Measured per batch: apply + commit (read the touched keys, write the changes, commit the version),
restore to version N after a crash (open + undo / load), bytes written (``wchar`` of
/proc/self/io: every write() of the process and its threads, and for the ``pickle`` baseline the
file size), the state's size on disk, RSS of the process (after load, after the batches), and
time-ordered eviction: delete the B oldest rows by ts (found through the time index, not by a scan)
and commit. No store fsyncs (nor does today's runtime): all survive a killed process, none a power
cut.

Prints a table (medians over ``--repeat`` rounds; rounds interleave the candidates) and writes
JSON lines to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from runtime.state.store import disk_bytes as du  # noqa: E402  (the store's own count)

ACCOUNTS = [f"ACC{i:05d}" for i in range(5000)]
T0 = 1_700_000_000_000  # ms: ts of OrderId 0; OrderId k was created at T0 + k ms


# --- workload ------------------------------------------------------------------------------------

def initial_rows(held: int):
    """(OrderId, (account, qty, price, ts)) for OrderIds 0..held-1, in OrderId (= ts) order; a
    generator, so that a store that keeps its rows off the Python heap never has them all there."""
    rnd = random.Random(1)
    for k in range(held):
        yield k, (ACCOUNTS[k % 5000], rnd.randrange(1, 1000), round(rnd.uniform(1, 500), 2), T0 + k)


def batch_deletes(held: int, batch: int, n: int) -> list[int]:
    """The B/100 OrderIds batch ``n`` deletes: among the first ``held``, a different residue per
    batch, so no batch deletes a key an earlier one deleted."""
    count = batch // 100
    stride = max(held // max(count, 1), 1)
    return sorted({(i * stride + 7 * n) % max(held, 1) for i in range(count)})


def batch_changes(held: int, batch: int, n: int):
    """Batch ``n`` (1, 2, ...): B inserts of new OrderIds, B/10 updates of OrderIds held before it
    (new qty, price and ts) and B/100 deletes. Deterministic in ``n``, so a replay is the same
    batch. Returns (upserts {OrderId: row}, deletes [OrderId], number of new keys)."""
    rnd = random.Random(1000 + n)
    first_new = held + (n - 1) * batch
    now = T0 + first_new + batch
    ups = {}
    for k in range(first_new, first_new + batch):
        ups[k] = (ACCOUNTS[k % 5000], rnd.randrange(1, 1000), round(rnd.uniform(1, 500), 2), T0 + k)
    dels = batch_deletes(held, batch, n)
    gone = set(dels).union(*(batch_deletes(held, batch, m) for m in range(1, n)))
    upd: set[int] = set()
    while len(upd) < batch // 10:
        k = rnd.randrange(0, first_new)
        if k not in gone:
            upd.add(k)
    for k in sorted(upd):
        ups[k] = (ACCOUNTS[(k + n) % 5000], rnd.randrange(1, 1000), round(rnd.uniform(1, 500), 2), now)
    return ups, dels, batch


# --- measuring -----------------------------------------------------------------------------------

def _proc_number(path: str, field: str) -> int:
    """The number after ``field:`` in a /proc file of this process (0 if absent)."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wchar() -> int:
    """Bytes this process has written so far."""
    return _proc_number("/proc/self/io", "wchar")


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    return _proc_number("/proc/self/status", "VmRSS") / 1024


# --- row codec for the key-value stores ------------------------------------------------------------

_NUM = struct.Struct(">qdq")  # qty, price, ts


def enc_key(k: int) -> bytes:
    return k.to_bytes(8, "big", signed=False)


def dec_key(b: bytes) -> int:
    return int.from_bytes(b, "big")


def enc_row(row) -> bytes:
    return _NUM.pack(row[1], row[2], row[3]) + row[0].encode()


def dec_row(b: bytes):
    qty, price, ts = _NUM.unpack_from(b)
    return (b[24:].decode(), qty, price, ts)


def time_key(ts: int, k: int) -> bytes:
    return ts.to_bytes(8, "big") + k.to_bytes(8, "big")


def undo_key(batch_id: int, k: int) -> bytes:
    return batch_id.to_bytes(8, "big") + k.to_bytes(8, "big")


ABSENT = b""  # undo value of a key that did not exist before the batch


# --- candidates ------------------------------------------------------------------------------------
# Each: load(rows) as version 0; apply(n, ups, dels) commits version n; get(keys) -> {k: row|None};
# count(); reopen() (a crash: drop what is in memory, open from disk); restore(n) -> version n;
# evict(t) deletes rows with ts < t through the time index, committed as version n+... (own id).


class PickleStore:
    """Today's runtime: one pickled value per bucket and batch, read whole and written whole."""

    def __init__(self, d: str):
        self.d = d
        os.makedirs(d, exist_ok=True)
        self.state = None
        self.version = None

    def _path(self, n: int) -> str:
        return os.path.join(self.d, f"b00000-{n:010d}.pkl")

    def _write(self, n: int) -> None:
        hidden = os.path.join(self.d, ".tmp")
        with open(hidden, "wb") as f:
            pickle.dump(self.state, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(hidden, self._path(n))
        for name in os.listdir(self.d):  # keep this version and the one before (a replay's)
            if name.endswith(".pkl") and int(name[7:17]) < n - 1:
                os.remove(os.path.join(self.d, name))

    def _read(self, n: int) -> None:
        with open(self._path(n), "rb") as f:
            self.state = pickle.load(f)
        self.version = n

    def load(self, rows) -> None:
        # rows in insertion (= time) order, as the runtime's store keeps its "times" dict
        self.state = {"rows": dict(rows)}
        self._write(0)
        self.version = 0

    def apply(self, n: int, ups, dels) -> None:
        # the runtime's batch: read the newest state file before n, change, write file n
        self._read(n - 1)
        rows = self.state["rows"]
        for k in dels:
            rows.pop(k, None)
        for k, row in ups.items():
            rows.pop(k, None)  # re-inserted last: the dict stays in time order
            rows[k] = row
        self._write(n)
        self.version = n

    def get(self, keys):
        rows = self.state["rows"]
        return {k: rows.get(k) for k in keys}

    def count(self) -> int:
        return len(self.state["rows"])

    def reopen(self) -> None:
        self.state = None

    def restore(self, n: int) -> None:
        self._read(n)

    def evict(self, n: int, t: int) -> int:
        self._read(n - 1)
        rows = self.state["rows"]
        gone = []
        for k, row in rows.items():  # time order: stops at the first young row
            if row[3] >= t:
                break
            gone.append(k)
        for k in gone:
            del rows[k]
        self._write(n)
        return len(gone)

    def close(self) -> None:
        self.state = None


class SqliteStore:
    def __init__(self, d: str):
        self.d = d
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(d, "bucket.db")
        self._open()

    def _open(self) -> None:
        import sqlite3
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA cache_size=-65536")  # 64 MB page cache
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS rows(k INTEGER PRIMARY KEY, account TEXT, qty INTEGER,
                                            price REAL, ts INTEGER);
            CREATE INDEX IF NOT EXISTS rows_ts ON rows(ts);
            CREATE TABLE IF NOT EXISTS undo(batch INTEGER, k INTEGER, account TEXT, qty INTEGER,
                                            price REAL, ts INTEGER, PRIMARY KEY(batch, k));
            CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER);
        """)

    def load(self, rows) -> None:
        db = self.db
        db.execute("BEGIN")
        db.executemany("INSERT INTO rows VALUES(?,?,?,?,?)", ((k, *r) for k, r in rows))
        db.execute("INSERT OR REPLACE INTO meta VALUES('version', 0)")
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _change(self, n: int, ups, dels) -> None:
        db = self.db
        touched = list(ups) + list(dels)
        old = self.get(touched)  # the engine reads the touched keys' rows anyway
        db.executemany("INSERT INTO undo VALUES(?,?,?,?,?,?)",
                       ((n, k, *(old[k] or (None, None, None, None))) for k in touched))
        db.executemany("DELETE FROM rows WHERE k=?", ((k,) for k in dels))
        db.executemany("INSERT OR REPLACE INTO rows VALUES(?,?,?,?,?)",
                       ((k, *r) for k, r in ups.items()))
        db.execute("DELETE FROM undo WHERE batch < ?", (n - 1,))
        db.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (n,))

    def apply(self, n: int, ups, dels) -> None:
        self.db.execute("BEGIN")
        self._change(n, ups, dels)
        self.db.execute("COMMIT")

    def get(self, keys):
        out = dict.fromkeys(keys)
        keys = list(keys)
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            q = "SELECT k, account, qty, price, ts FROM rows WHERE k IN (%s)" % ",".join("?" * len(part))
            for k, *r in self.db.execute(q, part):
                out[k] = tuple(r)
        return out

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM rows").fetchone()[0]

    def reopen(self) -> None:
        self.db.close()
        self._open()

    def restore(self, n: int) -> None:
        db = self.db
        v = db.execute("SELECT value FROM meta WHERE name='version'").fetchone()[0]
        db.execute("BEGIN")
        while v > n:
            db.execute("DELETE FROM rows WHERE k IN (SELECT k FROM undo WHERE batch=?)", (v,))
            db.execute("INSERT INTO rows SELECT k, account, qty, price, ts FROM undo "
                       "WHERE batch=? AND account IS NOT NULL", (v,))
            db.execute("DELETE FROM undo WHERE batch=?", (v,))
            v -= 1
        db.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (v,))
        db.execute("COMMIT")

    def evict(self, n: int, t: int) -> int:
        db = self.db
        db.execute("BEGIN")
        gone = [k for (k,) in db.execute("SELECT k FROM rows WHERE ts < ? ORDER BY ts", (t,))]
        self._change(n, {}, gone)
        db.execute("COMMIT")
        return len(gone)

    def close(self) -> None:
        self.db.close()


class LmdbStore:
    def __init__(self, d: str, map_size: int):
        self.d = d
        os.makedirs(d, exist_ok=True)
        self.map_size = map_size
        self._open()

    def _open(self) -> None:
        import lmdb
        self.env = lmdb.open(self.d, map_size=self.map_size, max_dbs=4, sync=False,
                             metasync=False, readahead=False)
        self.rows = self.env.open_db(b"rows")
        self.by_time = self.env.open_db(b"by_time")
        self.undo = self.env.open_db(b"undo")
        self.meta = self.env.open_db(b"meta")

    def load(self, rows) -> None:
        with self.env.begin(write=True) as txn:
            # keys in order: append mode
            rc, tc = txn.cursor(self.rows), txn.cursor(self.by_time)
            for k, r in rows:  # OrderId order is ts order: both appended
                rc.put(enc_key(k), enc_row(r), append=True)
                tc.put(time_key(r[3], k), b"", append=True)
            txn.put(b"version", b"0", db=self.meta)

    def _change(self, txn, n: int, ups, dels) -> None:
        touched = list(ups) + list(dels)
        olds = {}
        for k in touched:
            olds[k] = txn.get(enc_key(k), db=self.rows)
        uc = txn.cursor(self.undo)
        uc.putmulti(((undo_key(n, k), olds[k] or ABSENT) for k in sorted(touched)), append=False)
        for k in dels:
            o = olds[k]
            if o is not None:
                txn.delete(enc_key(k), db=self.rows)
                txn.delete(time_key(dec_row(o)[3], k), db=self.by_time)
        for k, r in ups.items():
            o = olds[k]
            if o is not None:
                txn.delete(time_key(dec_row(o)[3], k), db=self.by_time)
            txn.put(enc_key(k), enc_row(r), db=self.rows)
            txn.put(time_key(r[3], k), b"", db=self.by_time)
        # drop undo records older than n-1 (they are at the front: keys start with the batch id)
        end = undo_key(n - 1, 0)
        if uc.first():
            while uc.key() < end:
                if not uc.delete():
                    break
        txn.put(b"version", str(n).encode(), db=self.meta)

    def apply(self, n: int, ups, dels) -> None:
        with self.env.begin(write=True) as txn:
            self._change(txn, n, ups, dels)

    def get(self, keys):
        with self.env.begin() as txn:
            out = {}
            for k in keys:
                v = txn.get(enc_key(k), db=self.rows)
                out[k] = dec_row(v) if v is not None else None
            return out

    def count(self) -> int:
        with self.env.begin() as txn:
            return txn.stat(self.rows)["entries"]

    def reopen(self) -> None:
        self.env.close()
        self._open()

    def restore(self, n: int) -> None:
        with self.env.begin(write=True) as txn:
            v = int(txn.get(b"version", db=self.meta))
            while v > n:
                c = txn.cursor(self.undo)
                prefix = v.to_bytes(8, "big")
                if c.set_range(prefix):
                    while c.key()[:8] == prefix:
                        k = dec_key(c.key()[8:])
                        old = c.value()
                        cur = txn.get(enc_key(k), db=self.rows)
                        if cur is not None:
                            txn.delete(time_key(dec_row(cur)[3], k), db=self.by_time)
                        if old == ABSENT:
                            txn.delete(enc_key(k), db=self.rows)
                        else:
                            txn.put(enc_key(k), old, db=self.rows)
                            txn.put(time_key(dec_row(old)[3], k), b"", db=self.by_time)
                        if not c.delete():
                            break
                v -= 1
            txn.put(b"version", str(v).encode(), db=self.meta)

    def evict(self, n: int, t: int) -> int:
        with self.env.begin(write=True) as txn:
            gone = []
            c = txn.cursor(self.by_time)
            end = t.to_bytes(8, "big")
            if c.first():
                while c.key() < end:
                    gone.append(dec_key(c.key()[8:]))
                    if not c.next():
                        break
            self._change(txn, n, {}, gone)
            return len(gone)

    def close(self) -> None:
        self.env.close()


class RocksStore:
    """RocksDB through rocksdict; prefixes r (rows), t (by time), u (undo), m (meta) in one
    column family. ``checkpoints``: no undo log; a RocksDB checkpoint per version instead."""

    def __init__(self, d: str, checkpoints: bool = False):
        self.d = d
        self.live = os.path.join(d, "live")
        self.checkpoints = checkpoints
        self._open()

    def _open(self) -> None:
        from rocksdict import Options, Rdict, WriteOptions
        opt = Options(raw_mode=True)
        opt.create_if_missing(True)
        opt.set_write_buffer_size(64 << 20)
        self.db = Rdict(self.live, opt)
        wo = WriteOptions()
        wo.sync = False
        self.db.set_write_options(wo)

    def load(self, rows) -> None:
        from rocksdict import WriteBatch
        wb = WriteBatch(raw_mode=True)
        for i, (k, r) in enumerate(rows):
            wb.put(b"r" + enc_key(k), enc_row(r))
            wb.put(b"t" + time_key(r[3], k), b"")
            if i % 100_000 == 99_999:
                self.db.write(wb)
                wb = WriteBatch(raw_mode=True)
        wb.put(b"mversion", b"0")
        self.db.write(wb)
        self._commit(0)

    def _commit(self, n: int) -> None:
        if not self.checkpoints:
            return
        from rocksdict import Checkpoint
        self.db.flush()
        path = os.path.join(self.d, f"ckpt-{n:010d}")
        if os.path.exists(path):  # a replayed batch: its checkpoint again
            shutil.rmtree(path)
        Checkpoint(self.db).create_checkpoint(path)
        for name in os.listdir(self.d):
            if name.startswith("ckpt-") and int(name[5:]) < n - 1:
                shutil.rmtree(os.path.join(self.d, name))

    def _change(self, n: int, ups, dels):
        from rocksdict import WriteBatch
        db = self.db
        touched = list(ups) + list(dels)
        olds = dict(zip(touched, db.get([b"r" + enc_key(k) for k in touched])))
        wb = WriteBatch(raw_mode=True)
        if not self.checkpoints:
            for k in touched:
                o = olds[k]
                wb.put(b"u" + undo_key(n, k), o if o is not None else ABSENT)
            wb.delete_range(b"u" + undo_key(0, 0), b"u" + undo_key(max(n - 1, 0), 0))
        for k in dels:
            o = olds[k]
            if o is not None:
                wb.delete(b"r" + enc_key(k))
                wb.delete(b"t" + time_key(dec_row(o)[3], k))
        for k, r in ups.items():
            o = olds[k]
            if o is not None:
                wb.delete(b"t" + time_key(dec_row(o)[3], k))
            wb.put(b"r" + enc_key(k), enc_row(r))
            wb.put(b"t" + time_key(r[3], k), b"")
        wb.put(b"mversion", str(n).encode())
        return wb

    def apply(self, n: int, ups, dels) -> None:
        self.db.write(self._change(n, ups, dels))
        self._commit(n)

    def get(self, keys):
        keys = list(keys)
        vals = self.db.get([b"r" + enc_key(k) for k in keys])
        return {k: (dec_row(v) if v is not None else None) for k, v in zip(keys, vals)}

    def count(self) -> int:
        it = self.db.iter()
        it.seek(b"r")
        n = 0
        while it.valid() and it.key()[:1] == b"r":
            n += 1
            it.next()
        return n

    def reopen(self) -> None:
        self.db.close()
        self._open()

    def restore(self, n: int) -> None:
        from rocksdict import WriteBatch
        v = int(self.db[b"mversion"])
        if v == n:
            return
        if self.checkpoints:  # replace the live store by checkpoint n: SSTs linked, rest copied
            self.db.close()
            shutil.rmtree(self.live)
            src = os.path.join(self.d, f"ckpt-{n:010d}")
            os.makedirs(self.live)
            for name in os.listdir(src):
                (os.link if name.endswith(".sst") else shutil.copy2)(
                    os.path.join(src, name), os.path.join(self.live, name))
            self._open()
            return
        wb = WriteBatch(raw_mode=True)
        while v > n:
            it = self.db.iter()
            prefix = b"u" + v.to_bytes(8, "big")
            it.seek(prefix)
            undo = []
            while it.valid() and it.key()[:9] == prefix:
                undo.append((dec_key(it.key()[9:]), it.value()))
                it.next()
            curs = self.db.get([b"r" + enc_key(k) for k, _old in undo])
            for (k, old), cur in zip(undo, curs):
                if cur is not None:
                    wb.delete(b"t" + time_key(dec_row(cur)[3], k))
                if old == ABSENT:
                    wb.delete(b"r" + enc_key(k))
                else:
                    wb.put(b"r" + enc_key(k), old)
                    wb.put(b"t" + time_key(dec_row(old)[3], k), b"")
            wb.delete_range(prefix, b"u" + (v + 1).to_bytes(8, "big"))
            v -= 1
        wb.put(b"mversion", str(v).encode())
        self.db.write(wb)

    def evict(self, n: int, t: int) -> int:
        it = self.db.iter()
        it.seek(b"t")
        end = b"t" + t.to_bytes(8, "big")
        gone = []
        while it.valid() and it.key() < end:
            gone.append(dec_key(it.key()[9:]))
            it.next()
        self.db.write(self._change(n, {}, gone))
        self._commit(n)
        return len(gone)

    def close(self) -> None:
        self.db.close()


def make_store(name: str, d: str, held: int, batch: int):
    if name == "pickle":
        return PickleStore(d)
    if name == "sqlite":
        return SqliteStore(d)
    if name == "lmdb":
        return LmdbStore(d, map_size=max(1 << 30, (held + 20 * batch) * 400))
    if name == "rocksdb":
        return RocksStore(d)
    if name == "rocksdb-ckpt":
        return RocksStore(d, checkpoints=True)
    raise SystemExit(f"unknown candidate {name}")


# --- one (candidate, H) run, in its own process ------------------------------------------------------

def run_one(name: str, held: int, batch: int, batches: int, root: str) -> dict:
    d = tempfile.mkdtemp(prefix=f"{name}-", dir=root)
    res: dict = {"candidate": name, "held": held, "batch": batch}
    rss0 = rss_mb()
    rows = initial_rows(held)
    store = make_store(name, d, held, batch)
    t = time.perf_counter()
    store.load(rows)
    res["load_s"] = time.perf_counter() - t
    del rows
    live_count = held
    res["rss_after_load_mb"] = rss_mb() - rss0
    applies, writes = [], []
    n = 0
    prev_after = None
    for n in range(1, batches + 1):
        ups, dels, new = batch_changes(held, batch, n)
        touched = list(ups) + dels
        before = store.get(touched) if n == batches else None  # the state after n-1, for the check
        w = wchar()
        t = time.perf_counter()
        store.apply(n, ups, dels)
        applies.append(time.perf_counter() - t)
        writes.append(wchar() - w)
        live_count += new - len(dels)
        prev_after = before
    res["apply_s"] = applies
    res["written_bytes"] = writes
    res["disk_bytes"] = du(d)
    res["rss_after_batches_mb"] = rss_mb() - rss0
    # crash after batch n committed; Spark replays n: restore n-1, check, replay n, check
    ups, dels, new = batch_changes(held, batch, n)
    touched = list(ups) + dels
    after = store.get(touched)
    assert store.count() == live_count, (store.count(), live_count)
    store.reopen()
    t = time.perf_counter()
    store.restore(n - 1)
    res["restore_s"] = time.perf_counter() - t
    assert store.get(touched) == prev_after, "restore: touched keys differ from version n-1"
    assert store.count() == live_count - (new - len(dels))
    t = time.perf_counter()
    store.apply(n, ups, dels)
    res["replay_s"] = time.perf_counter() - t
    assert store.get(touched) == after and store.count() == live_count, "replay differs"
    # time-ordered eviction (KEEP 1 DAY): the B oldest rows, found by time
    t_evict = T0 + batch
    w = wchar()
    t = time.perf_counter()
    gone = store.evict(n + 1, t_evict)
    res["evict_s"] = time.perf_counter() - t
    res["evict_written_bytes"] = wchar() - w
    res["evicted"] = gone
    res["rss_end_mb"] = rss_mb() - rss0
    res["rss_peak_mb"] = _peak_mb()
    store.close()
    shutil.rmtree(d, ignore_errors=True)
    return res


def _peak_mb() -> float:
    """This process's peak resident memory, in MB."""
    return _proc_number("/proc/self/status", "VmHWM") / 1024


# --- driver ----------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held", default="100000,1000000,3000000")
    ap.add_argument("--batch", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=2, help="rounds, candidates interleaved")
    ap.add_argument("--batches", type=int, default=2, help="measured batches per run")
    ap.add_argument("--only", default="pickle,sqlite,lmdb,rocksdb,rocksdb-ckpt,spark")
    ap.add_argument("--spark-held", default="100000",
                    help="Spark loads the held rows at about 10,000 MapState entries/s")
    ap.add_argument("--spark-batch", type=int, default=None, help="default: --batch")
    ap.add_argument("--spark-batches", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where stores are written (default: a temp dir)")
    ap.add_argument("--out", default=None, help="JSON lines of every run")
    ap.add_argument("--report", default=None, help="only print the table of these JSON lines")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # name:held (child process)
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            report([json.loads(line) for line in f if line.strip()])
        return
    if args.one:
        name, held = args.one.split(":")
        print(json.dumps(run_one(name, int(held), args.batch, args.batches, args.dir)))
        return
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="state-bench-", dir=args.dir)
    names = [n for n in args.only.split(",") if n]
    helds = [int(h) for h in args.held.split(",")]
    results: list[dict] = []
    out = open(args.out, "a") if args.out else None
    local = [n for n in names if n != "spark"]
    for r in range(args.repeat):
        for held in helds:
            order = local[r % len(local):] + local[:r % len(local)] if local else []
            for name in order:
                p = subprocess.run([sys.executable, __file__, "--one", f"{name}:{held}",
                                    "--batch", str(args.batch), "--batches", str(args.batches),
                                    "--dir", root], capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"{name} H={held}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                    continue
                res = json.loads(p.stdout.strip().splitlines()[-1])
                res["round"] = r
                results.append(res)
                if out:
                    out.write(json.dumps(res) + "\n")
                    out.flush()
                print(f"round {r} {name:13s} H={held:>8d} apply {['%.2f' % a for a in res['apply_s']]}"
                      f" restore {res['restore_s']:.2f}s evict {res['evict_s']:.2f}s", flush=True)
    if "spark" in names:
        from importlib import import_module
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        spark_res = import_module("state_store_spark").run(
            [int(h) for h in args.spark_held.split(",")], args.spark_batch or args.batch,
            args.spark_batches, root)
        for res in spark_res:
            results.append(res)
            if out:
                out.write(json.dumps(res) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    report(results)


def report(results: list[dict]) -> None:
    med = statistics.median
    print("\n| candidate | rows held | apply+commit s/batch | restore to N s | replay s | written MB/batch "
          "| on disk MB | RSS after batches MB | evict B oldest s | load s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    keys = []
    for r in results:
        if (r["candidate"], r["held"]) not in keys:
            keys.append((r["candidate"], r["held"]))
    keys.sort(key=lambda x: (x[1], x[0]))
    for name, held in keys:
        rs = [r for r in results if r["candidate"] == name and r["held"] == held]
        if name == "spark":
            for r in rs:
                print(f"| spark (MapState, RocksDB, changelog; B={r['batch']:,}) | {held:,} "
                      f"| {', '.join('%.2f' % a for a in r['apply_s'])} "
                      f"| {r.get('restore_s', float('nan')):.2f} (first batch after restart) | - "
                      f"| {med(r['written_bytes']) / 1e6:.1f} | {r['disk_bytes'] / 1e6:.0f} "
                      f"| state {r.get('state_memory_mb') or 0:.0f} (JVM) | - | {r['load_s']:.1f} |")
            continue
        apply = med([a for r in rs for a in r["apply_s"]])
        written = med([w for r in rs for w in r["written_bytes"]])
        print(f"| {name} | {held:,} | {apply:.2f} | {med([r['restore_s'] for r in rs]):.2f} "
              f"| {med([r['replay_s'] for r in rs]):.2f} | {written / 1e6:.1f} "
              f"| {med([r['disk_bytes'] for r in rs]) / 1e6:.0f} "
              f"| {med([r['rss_after_batches_mb'] for r in rs]):.0f} "
              f"| {med([r['evict_s'] for r in rs]):.2f} | {med([r['load_s'] for r in rs]):.1f} |")
    rounds = {r["round"] for r in results if "round" in r}
    print(f"(medians over rounds and batches; {len(rounds)} rounds of the local candidates;"
          " Spark: one run per size, its batches listed)")


if __name__ == "__main__":
    main()
