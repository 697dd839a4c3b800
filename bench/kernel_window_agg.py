"""Columnar kernels against the engine, one generated bucket at a time, in one process (no Spark).

    python bench/kernel_window_agg.py [--section "window aggregation"] [--trades 40000] [--symbols 500]
                            [--batches 4] [--repeats 3] [--base PATH]

Each section builds the plan of bench/project.py's elements, generates one bucket's input rows
as the processor receives them (an Arrow table in its input layout), and times
``BucketRun.process_table`` over the bucket's micro-batches twice on fresh states: with the
element's kernel, and with the engine row by row (the kernel taken away: what the per-instance
path did before). It checks that both leave the same states, and prints µs per input row of each
(CPU time, the fastest of ``--repeats`` runs, the three alternating; Python's cycle collector
paused as the bucket runner pauses it, ``runtime.processor.gc_paused``) and their ratio.
``--base PATH``: also time the kernel of another checkout's window_agg.py (e.g. main's, exported
with ``git show main:runtime/engine/kernels/window_agg.py > /tmp/base_window_agg.py``) in the same
process, alternating with this one: a before/after that the machine's load moves less than
separate runs.

Sections:

- ``window aggregation`` (runtime/engine/kernels/window_agg.py): bench/project.py's SymStats
  (count, sum, avg, max GROUP BY Sym) over its Recent window (``KEEP 20 ROWS PER (Sym)``), whose
  changelog is made by the engine from generated trades: once a symbol holds 20 rows, every trade
  is a delete of its oldest row and an insert, under one sequence number. Both modes: ``batch``
  (nothing reads SymStats's changes one by one) and ``rows`` (something does).
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import random
import sys
import tempfile
import time
import zlib
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa  # noqa: E402

from ccl.plan.codec import plan_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from runtime.processor import BucketRun, gc_paused  # noqa: E402

# bench/project.py's elements up to the aggregate (its join's output, as an input stream here)
WINDOW_AGGREGATION = """
CREATE INPUT STREAM Enriched
    SCHEMA (TradeId long, Sym string, Price float, Qty integer, Sector string);

CREATE WINDOW Recent
    PRIMARY KEY (Sym, TradeId)
    KEEP 20 ROWS PER (Sym)
    PARTITION BY Enriched HASH(Sym) PARTITIONS 4
AS SELECT * FROM Enriched;

CREATE OUTPUT WINDOW SymStats
    PRIMARY KEY DEDUCED
    PARTITION BY Recent HASH(Sym) PARTITIONS 4
AS SELECT r.Sym Sym, count(*) Trades, sum(r.Qty) Volume, avg(r.Price) AvgPrice,
          max(r.TradeId) LastId
   FROM Recent r
   GROUP BY r.Sym;
"""
RECENT = pa.struct([("TradeId", pa.int64()), ("Sym", pa.string()), ("Price", pa.float64()),
                    ("Qty", pa.int32()), ("Sector", pa.string())])


def plan_of(text: str) -> dict:
    """The JSON plan of CCL ``text``."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.ccl")
        with open(path, "w") as f:
            f.write(text)
        plan, diags = plan_project(path)
    if plan is None:
        raise SystemExit("\n".join(map(str, diags)))
    return plan_to_json(plan)


def bucket_table(rows: list[tuple], schema: pa.DataType) -> pa.Table:
    """A bucket's rows ``(instance, seq, sub, op, values)`` in the processor's input layout."""
    n = len(rows)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()),
        "__seq": pa.array([r[1] for r in rows], pa.int64()),
        "__sub": pa.array([r[2] for r in rows], pa.int64()),
        "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array([r[3] for r in rows], pa.string()),
        "__inst": pa.array([r[0] for r in rows], pa.int32()),
        "__why": pa.array([None] * n, pa.string()),
        "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array([r[4] for r in rows], schema)})


def recent_changes(plan: dict, trades: int, symbols: int) -> list[tuple]:
    """The Recent window's changelog for ``trades`` generated trades, as the engine gives it:
    ``(instance, seq, sub, op, values)`` in order."""
    rnd = random.Random(7)
    syms = [f"S{k:05d}" for k in range(symbols)]
    by_instance: dict[int, list[tuple]] = {}
    for t in range(1, trades + 1):
        sym = rnd.choice(syms)
        values = {"TradeId": t, "Sym": sym, "Price": rnd.randrange(1, 10**6) / 100,
                  "Qty": rnd.randrange(1, 1000), "Sector": f"SEC{zlib.crc32(sym.encode()) % 11}"}
        by_instance.setdefault(zlib.crc32(sym.encode()) % 4, []).append((t, 0, 0, 0, "i", False, values))
    out = BucketRun(json.dumps(plan), "Recent").process({}, by_instance, 0)
    rows = [(o[1], o[2], o[3], o[4], o[6]) for o in out if o[0] == "row"]
    rows.sort(key=lambda r: (r[1], r[2]))
    return rows


def timed(run: BucketRun, tables: list[pa.Table]) -> tuple[float, dict]:
    """CPU seconds of this process to run ``tables`` (a bucket's micro-batches) through ``run`` on
    a fresh state (CPU time: the machine may be shared)."""
    states: dict = {}
    with gc_paused():
        start = time.process_time()
        for t in tables:
            run.process_table(states, t, 0)
        return time.process_time() - start, states


def base_kernel(path: str, plan: dict, element: str) -> BucketRun:
    """A :class:`BucketRun` of ``element`` whose columnar kernel is the ``WindowAggregation`` of
    the window_agg.py at ``path`` (another checkout's, on this checkout's engine)."""
    spec = importlib.util.spec_from_file_location("base_window_agg", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = BucketRun(json.dumps(plan), element)
    run.columnar = module.WindowAggregation(run.engine, plan)
    return run


def window_aggregation(args: argparse.Namespace) -> None:
    """Engine vs the window kernel on SymStats's bucket, in both modes."""
    plan = plan_of(WINDOW_AGGREGATION)
    changes = recent_changes(plan, args.trades, args.symbols)
    per = -(-len(changes) // args.batches)
    tables = [bucket_table(changes[i:i + per], RECENT) for i in range(0, len(changes), per)]
    print(f"## window aggregation: {args.trades} trades, {args.symbols} symbols, "
          f"{len(changes)} changes of Recent in {len(tables)} batches")
    if args.base:
        print("| mode | engine µs/row | base kernel µs/row | kernel µs/row | engine / kernel "
              "| base / kernel |")
        print("|---|---|---|---|---|---|")
    else:
        print("| mode | engine µs/row | kernel µs/row | engine / kernel |")
        print("|---|---|---|---|")
    for mode in ("batch", "rows"):
        mplan = copy.deepcopy(plan)
        stats = next(e for e in mplan["elements"] if e["name"] == "SymStats")
        stats["physical"]["columnar"] = mode
        kernel = BucketRun(json.dumps(mplan), "SymStats")
        assert kernel.columnar is not None
        engine = BucketRun(json.dumps(mplan), "SymStats")
        engine.columnar = None
        runs = [("engine", engine), ("kernel", kernel)]
        if args.base:
            runs.append(("base", base_kernel(args.base, mplan, "SymStats")))
        best: dict[str, float] = {}
        finals: dict[str, dict] = {}
        for _ in range(args.repeats):
            for name, run in runs:
                seconds, finals[name] = timed(run, tables)
                best[name] = min(best.get(name, seconds), seconds)
        for name, _ in runs[1:]:
            assert finals["engine"] == finals[name], f"the {name} kernel left another state"
        e, k = (best[n] / len(changes) * 1e6 for n in ("engine", "kernel"))
        if args.base:
            b = best["base"] / len(changes) * 1e6
            print(f"| {mode} | {e:.1f} | {b:.1f} | {k:.1f} | {e / k:.2f} | {b / k:.2f} |")
        else:
            print(f"| {mode} | {e:.1f} | {k:.1f} | {e / k:.2f} |")


SECTIONS: dict[str, Callable[[argparse.Namespace], None]] = {
    "window aggregation": window_aggregation,
}


def main() -> None:
    """Run the chosen sections (all by default)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--section", action="append", choices=list(SECTIONS))
    parser.add_argument("--trades", type=int, default=40000)
    parser.add_argument("--symbols", type=int, default=500)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", metavar="PATH",
                        help="another checkout's runtime/engine/kernels/window_agg.py to time too")
    args = parser.parse_args()
    for name in args.section or list(SECTIONS):
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
