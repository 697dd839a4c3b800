"""The columnar kernels (runtime/engine/kernels/) against the engine row by row, on one generated
bucket in one process (no Spark): µs per input row of ``BucketRun.process_table`` with the
element's kernel and without it (``run.kernel = None``: the engine path), and their ratio.

    python bench/kernel_join.py [--section join] [--rows 100000] [--instances 4] [--repeat 5]

Sections:

- ``join``: bench/project.py's ``join`` element (a stream of trades INNER JOIN a window of
  instruments ON Sym, ``PARTITION BY Trades HASH(Sym) PARTITIONS 4``). A first batch loads the
  instruments (each instance has every one: the window is broadcast) with some trades; the timed
  batch is ``--rows`` trades spread over the instances, one bucket, every trade matching (and one
  in 50 of an unknown symbol, matching nothing). Both paths start each repeat from a copy of the
  states after the first batch, and their outputs are checked equal.

Each figure is the fastest of ``--repeat`` runs (the machine is shared: the ratio, measured in the
same process, says more than either time).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import sys
import tempfile
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa  # noqa: E402

from ccl.plan.codec import plan_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from runtime.processor import BucketRun, gc_paused  # noqa: E402

JOIN = """
CREATE INPUT STREAM Trades
    SCHEMA (TradeId long, Sym string, Price float, Qty integer);
CREATE INPUT WINDOW Instruments
    SCHEMA (Sym string, Sector string, LotSize integer)
    PRIMARY KEY (Sym);
CREATE OUTPUT STREAM Enriched
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price Price, t.Qty Qty, i.Sector Sector
   FROM Trades t INNER JOIN Instruments i ON t.Sym = i.Sym;
"""
TRADE = pa.struct([("TradeId", pa.int64()), ("Sym", pa.string()), ("Price", pa.float64()),
                   ("Qty", pa.int32())])
INSTRUMENT = pa.struct([("Sym", pa.string()), ("Sector", pa.string()), ("LotSize", pa.int32())])


def _run_of(text: str, element: str) -> BucketRun:
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "p.ccl")
        with open(path, "w") as out:
            out.write(text)
        plan, diags = plan_project(path)
        if plan is None:
            raise SystemExit("\n".join(str(d) for d in diags))
    plan_json = plan_to_json(plan)
    found = next(e for e in plan_json["elements"] if e["name"] == element)
    print(f"{element}: physical.kernel = {found['physical']['kernel']!r}")
    return BucketRun(json.dumps(plan_json), element, frozenset([1]))


def _bucket(rows: list[tuple[int, int, int, str, dict]]) -> pa.Table:
    """A bucket in the processor's input layout, two ports: (instance, seq, port, op, values)."""
    return pa.table({
        "__port": pa.array([r[2] for r in rows], pa.int32()),
        "__seq": pa.array([r[1] for r in rows], pa.int64()),
        "__op": pa.array([r[3] for r in rows], pa.string()),
        "__inst": pa.array([r[0] for r in rows], pa.int32()),
        "__p0": pa.array([r[4] if r[2] == 0 else None for r in rows], TRADE),
        "__p1": pa.array([r[4] if r[2] == 1 else None for r in rows], INSTRUMENT),
        "__bucket": pa.array([0] * len(rows), pa.int32())})


def join_section(rows: int, instances: int) -> tuple[BucketRun, pa.Table, pa.Table]:
    """The join's run, its first batch (instruments and some trades) and the timed batch."""
    rnd = random.Random(7)
    syms = [f"S{k:04d}" for k in range(2000)]
    first = [(i, k, 1, "i", {"Sym": s, "Sector": f"SEC{k % 11}", "LotSize": 100 * (1 + k % 5)})
             for i in range(instances) for k, s in enumerate(syms)]
    seq = len(syms)

    def trades(n: int, start: int) -> list:
        out = []
        for j in range(n):
            sym = rnd.choice(syms) if j % 50 else "UNKNOWN"
            out.append((rnd.randrange(instances), start + j, 0, "i",
                        {"TradeId": start + j, "Sym": sym, "Price": round(rnd.uniform(1, 500), 2),
                         "Qty": rnd.randrange(1, 1000)}))
        return out
    first += trades(1000, seq)
    return _run_of(JOIN, "Enriched"), _bucket(first), _bucket(trades(rows, seq + 10_000))


def _timed(fn: Callable[[], pa.Table], repeat: int) -> tuple[float, pa.Table]:
    best, out = float("inf"), None
    for _ in range(repeat):
        with gc_paused():
            t0 = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t0)
    return best, out  # type: ignore[return-value]


def compare(name: str, run: BucketRun, first: pa.Table, batch: pa.Table, repeat: int) -> dict:
    """Time ``batch`` through ``run`` with its kernel and without, from the states ``first`` leaves."""
    kernel = run.kernel
    if kernel is None:
        raise SystemExit(f"{name}: the plan names no kernel the runtime has")
    run.kernel = None
    states: dict = {}
    run.process_table(states, first, 0)
    saved = pickle.dumps(states)
    engine_s, by_engine = _timed(lambda: run.process_table(pickle.loads(saved), batch, 0), repeat)
    run.kernel = kernel
    kernel_s, by_kernel = _timed(lambda: run.process_table(pickle.loads(saved), batch, 0), repeat)
    order = ["__inst", "__kind", "__seq", "__sub"]
    if by_engine.sort_by([(c, "ascending") for c in order]) != by_kernel.sort_by([(c, "ascending") for c in order]):
        raise SystemExit(f"{name}: the kernel's outputs differ from the engine's")
    n = batch.num_rows
    result = {"section": name, "rows": n, "outputs": by_kernel.num_rows,
              "engine_us_per_row": engine_s / n * 1e6, "kernel_us_per_row": kernel_s / n * 1e6,
              "speed_up": engine_s / kernel_s}
    print(f"{name}: {n} rows, {by_kernel.num_rows} output rows; engine {result['engine_us_per_row']:.2f} "
          f"µs/row, kernel {result['kernel_us_per_row']:.2f} µs/row ({result['speed_up']:.1f}x)")
    return result


SECTIONS = {"join": join_section}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--section", default=",".join(SECTIONS), help="comma-separated: " + ",".join(SECTIONS))
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for name in args.section.split(","):
        if name not in SECTIONS:
            ap.error(f"unknown section {name!r}")
        compare(name, *SECTIONS[name](args.rows, args.instances), args.repeat)


if __name__ == "__main__":
    main()
