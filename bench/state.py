"""runtime/state's BucketStore against today's pickled bucket state: one bucket's micro-batch time
as the rows held grow (issue 27): the store alone. bench/state_engine.py measures the engine's
window rows wired into it (runtime/state/rows.py) through the runtime's bucket function
(``python bench/state.py engine [...]`` runs it).

    python bench/state.py [--held 100000,1000000,3000000] [--batch 100000] [--batches 4]
                          [--kinds keep_all,keep_time] [--candidates pickle,store] [--dir ...]

The workload is bench/state_store.py's (one bucket of a window keyed by OrderId; a batch inserts B
new keys, updates B/10 held ones and deletes B/100), with the rows as the runtime would store
them: a tuple (account, qty, price, ts) under the key (instance, OrderId), 64 instances.
``keep_all``: a ``KEEP ALL`` window. ``keep_time``: a time KEEP whose span is the held rows' (H ms),
so each batch first expires about B of the oldest rows, then applies its changes.

Per batch, as a task would run it:
- ``store``: open the bucket's RocksDB, ``begin``, (``expire``), one ``get_many`` of the keys the
  batch touches (the engine needs their old rows), the puts and deletes, ``commit``, close;
- ``pickle``: today's runtime/arrow_state.py: unpickle the bucket's newest state file, apply (for
  ``keep_time`` pop the expired rows from the front of the time-ordered dict first), pickle it to
  the next file.

The store is compacted after the load (a store that has held H rows for a while, not one that
was just filled). Each (candidate, kind, H) runs in its own process: peak memory (VmHWM) is its own. Also measured
for the store: a replay (reopen and ``begin`` of the last batch again: its undo applied) and its
files on disk. Batch times are wall clock and, in parentheses, the CPU time of the process (all
its threads, RocksDB's background flushes and compactions included), which a machine shared with
other runs inflates less. Nothing fsyncs. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from state_store import (PickleStore, T0, _peak_mb, batch_changes, du,  # noqa: E402
                         initial_rows, rss_mb)

INSTANCES = 64
NS = "w"
LOAD_CHUNK = 500_000


def _key(order_id: int) -> tuple:
    return (order_id % INSTANCES, order_id)


def run_store(kind: str, held: int, batch: int, batches: int, d: str) -> dict:
    """Load H rows into a one-bucket state root, then run the measured batches."""
    from runtime.state import BucketStore, create
    timed = kind == "keep_time"
    root = os.path.join(d, "state")
    create(root, 1)
    res: dict = {}
    t = time.perf_counter()
    bid = 0
    rows = initial_rows(held)
    done = False
    while not done:
        with BucketStore.open(root, 0) as s:
            s.begin(bid)
            n = 0
            for k, row in rows:
                if timed:
                    s.put_timed(NS, _key(k), row, row[3])
                else:
                    s.put(NS, _key(k), row)
                n += 1
                if n == LOAD_CHUNK:
                    break
            else:
                done = True
            s.commit(bid)
        bid += 1
    with BucketStore.open(root, 0) as s:
        s.compact()  # a store that has held H rows for a while: no compaction left from the load
    res["load_s"] = time.perf_counter() - t
    res["rss_after_load_mb"] = rss_mb()
    totals, cpus, commits, expired = [], [], [], []
    for n in range(1, batches + 1):
        ups, dels, _ = batch_changes(held, batch, n)
        now = T0 + held + n * batch
        c0 = time.process_time()
        t0 = time.perf_counter()
        with BucketStore.open(root, 0) as s:
            s.begin(bid)
            if timed:
                expired.append(len(s.expire(NS, now - held)))
            touched = [_key(k) for k in ups] + [_key(k) for k in dels]
            s.get_many(NS, touched)
            for k in dels:
                s.delete(NS, _key(k))
            for k, row in ups.items():
                if timed:
                    s.put_timed(NS, _key(k), row, row[3])
                else:
                    s.put(NS, _key(k), row)
            t1 = time.perf_counter()
            s.commit(bid)
        totals.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        commits.append(time.perf_counter() - t1)
        bid += 1
    res.update(batch_s=totals, cpu_s=cpus, commit_close_s=commits, expired=expired)
    with BucketStore.open(root, 0) as s:
        res["rows_after"] = s.count(NS)
    t = time.perf_counter()
    with BucketStore.open(root, 0) as s:  # Spark runs the last batch again: back to before it
        s.begin(bid - 1)
    res["replay_begin_s"] = time.perf_counter() - t
    res["disk_mb"] = du(root) / 1e6
    return res


def run_pickle(kind: str, held: int, batch: int, batches: int, d: str) -> dict:
    """Today's state files: the whole bucket read and written every batch."""
    store = PickleStore(os.path.join(d, "pickle"))
    res: dict = {}
    t = time.perf_counter()
    store.load(initial_rows(held))
    res["load_s"] = time.perf_counter() - t
    store.reopen()
    res["rss_after_load_mb"] = rss_mb()
    totals, cpus, expired = [], [], []
    for n in range(1, batches + 1):
        ups, dels, _ = batch_changes(held, batch, n)
        now = T0 + held + n * batch
        c0 = time.process_time()
        t0 = time.perf_counter()
        store._read(n - 1)
        rows = store.state["rows"]
        if kind == "keep_time":
            gone = []
            for k, row in rows.items():  # time order: stops at the first young row
                if row[3] >= now - held:
                    break
                gone.append(k)
            for k in gone:
                del rows[k]
            expired.append(len(gone))
        for k in dels:
            rows.pop(k, None)
        for k, row in ups.items():
            rows.pop(k, None)
            rows[k] = row
        store._write(n)
        store.reopen()
        totals.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    res.update(batch_s=totals, cpu_s=cpus, expired=expired, disk_mb=du(store.d) / 1e6)
    store._read(batches)
    res["rows_after"] = len(store.state["rows"])
    return res


def run_one(cand: str, kind: str, held: int, batch: int, batches: int, root: str) -> dict:
    d = tempfile.mkdtemp(prefix=f"{cand}-{kind}-", dir=root)
    try:
        fn = run_store if cand == "store" else run_pickle
        res = fn(kind, held, batch, batches, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    res.update(candidate=cand, kind=kind, held=held, batch=batch, peak_mb=_peak_mb())
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held", default="100000,1000000,3000000")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--kinds", default="keep_all,keep_time")
    ap.add_argument("--candidates", default="pickle,store")
    ap.add_argument("--dir", default=None, help="where stores are written (default: a temp dir)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # cand:kind:held (a child)
    args = ap.parse_args()
    if args.one:
        cand, kind, held = args.one.split(":")
        print(json.dumps(run_one(cand, kind, int(held), args.batch, args.batches, args.dir)))
        return
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="state-bench-", dir=args.dir)
    results = []
    try:
        for kind in args.kinds.split(","):
            for held in [int(h) for h in args.held.split(",")]:
                for cand in args.candidates.split(","):
                    p = subprocess.run([sys.executable, __file__, "--one", f"{cand}:{kind}:{held}",
                                        "--batch", str(args.batch), "--batches", str(args.batches),
                                        "--dir", root], capture_output=True, text=True)
                    if p.returncode != 0:
                        print(f"{cand} {kind} H={held}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                        continue
                    res = json.loads(p.stdout.strip().splitlines()[-1])
                    results.append(res)
                    print(json.dumps(res), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results)


def report(results: list[dict]) -> None:
    """The Markdown table: median batch time per (kind, H) for both candidates."""
    med = statistics.median
    print("\n| kind | rows held | pickle s/batch (CPU s) | store s/batch (CPU s) | of it commit+close "
          "| store replay begin s | expired/batch | pickle peak MB | store peak MB | pickle disk MB "
          "| store disk MB | load s (pickle, store) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = {(r["candidate"], r["kind"], r["held"]): r for r in results}
    for kind, held in sorted({(r["kind"], r["held"]) for r in results}):
        p, s = by.get(("pickle", kind, held)), by.get(("store", kind, held))
        if s is not None and p is None:
            print(f"| {kind} | {held:,} | - | {med(s['batch_s']):.2f} ({med(s['cpu_s']):.2f}) "
                  f"| {med(s['commit_close_s']):.2f} | {s['replay_begin_s']:.2f} "
                  f"| {med(s['expired']) if s['expired'] else 0:,.0f} | - | {s['peak_mb']:.0f} | - "
                  f"| {s['disk_mb']:.0f} | -, {s['load_s']:.1f} |")
        if p is None or s is None:
            continue
        assert p["rows_after"] == s["rows_after"], (p["rows_after"], s["rows_after"])
        exp = med(s["expired"]) if s["expired"] else 0
        print(f"| {kind} | {held:,} | {med(p['batch_s']):.2f} ({med(p['cpu_s']):.2f}) "
              f"| {med(s['batch_s']):.2f} ({med(s['cpu_s']):.2f}) "
              f"| {med(s['commit_close_s']):.2f} | {s['replay_begin_s']:.2f} | {exp:,.0f} "
              f"| {p['peak_mb']:.0f} | {s['peak_mb']:.0f} | {p['disk_mb']:.0f} | {s['disk_mb']:.0f} "
              f"| {p['load_s']:.1f}, {s['load_s']:.1f} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["engine"]:  # python bench/state.py engine [...]: bench/state_engine.py
        del sys.argv[1]
        import state_engine
        state_engine.main()
    else:
        main()
