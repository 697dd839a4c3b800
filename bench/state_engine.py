"""A KEEP ALL window's micro-batch through the runtime's own bucket function, before and after its
rows moved to the state store (issue 27): batch time and peak memory as the rows held grow.

    python bench/state_engine.py [--held 100000,1000000,2000000] [--batch 100000] [--batches 3]
                                 [--candidates pickle,store]

The project: orders into a ``KEEP ALL`` window keyed by OrderId, ``PARTITION BY o HASH(Account)
PARTITIONS 4``. Each batch brings ``--batch`` new orders spread over the 4 instances (one bucket
each, as runtime/arrow_state.py gives them with 8 buckets). Every bucket of the batch goes through
:func:`runtime.arrow_state.bucket_runner` (the function applyInArrow runs) in this process, one
after the other: the batch time is the sum of the 4 buckets' work (Spark and its Arrow transfer
not included; on a cluster the buckets run side by side).

- ``pickle``: the layout before the state store (``uses_window_store`` patched to say no): every
  bucket's rows read from and written to its pickled state file in every batch;
- ``store``: the window's rows in the bucket's RocksDB (runtime/state/rows.py).

The rows held are loaded straight into the state (as the engine stores them: a dict per row, under
the key ``(OrderId,)``), not run through the engine. Each (candidate, H) runs in its own process:
its peak memory (VmHWM) is its own. Prints one JSON line per run and a Markdown table.
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

PROJECT = """
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create output window Held primary key (OrderId) keep all
  partition by Orders hash(Account) partitions 4
  as select * from Orders;
"""
INSTANCES = 4
LOAD_CHUNK = 200_000


def _row(order_id: int) -> dict:
    inst = order_id % INSTANCES
    return {"OrderId": order_id, "Account": f"A{(order_id // INSTANCES) % 250 * INSTANCES + inst}",
            "Qty": order_id % 97 + 1, "Price": float(order_id % 1000) / 8}


def _table(first: int, count: int, inst: int, seq: int):
    """The processor input of bucket ``inst``: its share of orders ``first .. first+count-1``."""
    import pyarrow as pa
    ids = list(range(first + (inst - first) % INSTANCES, first + count, INSTANCES))
    n = len(ids)
    rows = [_row(i) for i in ids]
    struct = pa.struct([("OrderId", pa.int32()), ("Account", pa.string()), ("Qty", pa.int32()),
                        ("Price", pa.float64())])
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()), "__seq": pa.array(range(seq, seq + n), pa.int64()),
        "__sub": pa.array([0] * n, pa.int64()), "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array(["i"] * n), "__inst": pa.array([inst] * n, pa.int32()),
        "__why": pa.array([None] * n, pa.string()), "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array(rows, struct), "__bucket": pa.array([inst] * n, pa.int32())})


def _du(path: str) -> int:
    from state_store import du
    return du(path)


def _plan(d: str) -> str:
    from planned import plan_json
    path = os.path.join(d, "p.ccl")
    with open(path, "w") as f:
        f.write(PROJECT)
    plan, diags = plan_json(path)
    assert plan is not None, [str(x) for x in diags]
    return json.dumps(plan)


def run_one(cand: str, held: int, batch: int, batches: int, d: str) -> dict:
    """Load ``held`` rows over the 4 buckets, then time ``batches`` batches of ``batch`` orders."""
    import runtime.arrow_state as arrow_state
    from runtime.arrow_state import bucket_runner, load_states, rows_root, save_states
    from runtime.state import BucketStore, create
    from state_store import _peak_mb

    if cand == "pickle":
        arrow_state.uses_window_store = lambda element: False  # the layout before the store
    plan_text = _plan(d)
    state = os.path.join(d, "state")
    if cand == "store":
        create(rows_root(state), 8)

    def run_batch(batch_id: int, first: int, count: int) -> tuple[float, float]:
        tables = [_table(first, count, inst, first) for inst in range(INSTANCES)]
        t, c = time.perf_counter(), time.process_time()
        for inst in range(INSTANCES):
            runner = bucket_runner(plan_text, "Held", frozenset(), state, batch_id, 0)
            runner(None, tables[inst])
        return time.perf_counter() - t, time.process_time() - c

    # batch 0: one order per instance, which makes every instance's state; then the load
    run_batch(0, 0, INSTANCES)
    t0 = time.perf_counter()
    load_id = 1
    for inst in range(INSTANCES):
        states = load_states(state, inst, 1)
        window = states[inst]["output"]
        ids = range(INSTANCES + inst, held, INSTANCES)
        if cand == "pickle":
            window["rows"].update(((i,), _row(i)) for i in ids)
        else:
            with BucketStore.open(rows_root(state), inst) as s:
                for lo in range(0, len(ids), LOAD_CHUNK):
                    s.begin(load_id)
                    for i in ids[lo:lo + LOAD_CHUNK]:
                        s.put("w.output", (inst, i), _row(i))
                    s.commit(load_id)
                    load_id += 1
                s.compact()
            window["rows"] += len(ids)
        save_states(state, inst, 1, states)
    load_s = time.perf_counter() - t0
    first_id = max(load_id, 2)
    times, cpus = [], []
    for n in range(batches):
        wall, cpu = run_batch(first_id + n, held + n * batch, batch)
        times.append(wall)
        cpus.append(cpu)
    final = load_states(state, 0, first_id + batches)[0]["output"]["rows"]
    return {"candidate": cand, "held": held, "batch": batch, "batch_s": times, "cpu_s": cpus,
            "load_s": load_s, "state_mb": _du(state) / 1e6,
            "rows_after_bucket0": final if isinstance(final, int) else len(final),
            "peak_mb": _peak_mb()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held", default="100000,1000000,2000000")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--candidates", default="pickle,store")
    ap.add_argument("--dir", default=None, help="where state is written (default: a temp dir)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # cand:held (a child)
    args = ap.parse_args()
    if args.one:
        cand, held = args.one.split(":")
        d = tempfile.mkdtemp(prefix=f"engine-{cand}-", dir=args.dir)
        try:
            print(json.dumps(run_one(cand, int(held), args.batch, args.batches, d)))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return
    results = []
    for held in [int(h) for h in args.held.split(",")]:
        for cand in args.candidates.split(","):
            cmd = [sys.executable, __file__, "--one", f"{cand}:{held}", "--batch", str(args.batch),
                   "--batches", str(args.batches)] + (["--dir", args.dir] if args.dir else [])
            p = subprocess.run(cmd, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                   [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"),
                                    os.environ.get("PYTHONPATH", "")])})
            if p.returncode != 0:
                print(f"{cand} H={held}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            results.append(res)
            print(json.dumps(res), flush=True)
    print("\n| rows held | pickle s/batch (CPU s) | store s/batch (CPU s) | pickle peak MB "
          "| store peak MB | pickle state MB | store state MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    by = {(r["candidate"], r["held"]): r for r in results}
    for held in sorted({r["held"] for r in results}):
        p, s = by.get(("pickle", held)), by.get(("store", held))
        cell = (lambda r, f: f(r) if r else "-")
        print(f"| {held:,} | {cell(p, _times)} | {cell(s, _times)} "
              f"| {cell(p, lambda r: format(r['peak_mb'], '.0f'))} "
              f"| {cell(s, lambda r: format(r['peak_mb'], '.0f'))} "
              f"| {cell(p, lambda r: format(r['state_mb'], '.0f'))} "
              f"| {cell(s, lambda r: format(r['state_mb'], '.0f'))} |")


def _times(r: dict) -> str:
    med = statistics.median
    return f"{med(r['batch_s']):.2f} ({med(r['cpu_s']):.2f})"


if __name__ == "__main__":
    main()
