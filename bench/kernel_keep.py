"""The columnar kernels (runtime/engine/kernels/) against the engine row by row, on one generated
bucket (no Spark).

    python bench/kernel_keep.py [--rows 200000] [--instruments 2000] [--repeat 5] [--only keep,...]
                                [--base PATH]

Each section plans a small CCL project with ``ccl.plan.planner.plan_project``, makes one bucket of
rows in the processor's input layout (an Arrow table, 4 instances, as runtime/arrow_state.py hands
``BucketRun.process_table``) and runs it through ``process_table`` twice per repeat, on a copy of
the same warm states (the instances after one earlier bucket of the same size): once through the
element's kernel, once with the kernel taken away (the engine row by row, ``BucketRun.process``).
Both include reading the Arrow rows and making the Arrow output. Prints µs per input row (CPU time
of the process, the cycle collector paused as in runtime/arrow_state.py, the best of ``repeat``
runs, each run's kernel and engine measured one after the other) and their ratio. ``--base PATH``:
also time the ``KeepKernel`` of another checkout's keep.py (e.g. main's, exported with ``git show
main:runtime/engine/kernels/keep.py > /tmp/base_keep.py``) in the same process, alternating with
this one, and print its µs per row and its ratio to this kernel's.

- ``keep``: bench/project.py's ``Recent``: ``KEEP 20 ROWS PER (Sym)`` keyed by (Sym, TradeId),
  ``SELECT *`` from a stream of trades enriched with their sector;
- ``keep-where``: ``KEEP 5 ROWS`` (no PER) keyed by TradeId with a WHERE and a computed item.
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
from typing import Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa  # noqa: E402

from ccl.plan.codec import plan_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from runtime.processor import BucketRun, gc_paused  # noqa: E402

ENRICHED = ("CREATE INPUT STREAM Enriched SCHEMA (TradeId long, Sym string, Price float, Qty integer, "
            "Sector string);\n")
SECTIONS: dict[str, tuple[str, str]] = {
    "keep": ("KEEP 20 ROWS PER (Sym), SELECT *", ENRICHED + """
CREATE OUTPUT WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 20 ROWS PER (Sym)
    PARTITION BY Enriched HASH(Sym) PARTITIONS 4
AS SELECT * FROM Enriched;
"""),
    "keep-where": ("KEEP 5 ROWS, WHERE and a computed item", ENRICHED + """
CREATE OUTPUT WINDOW Recent PRIMARY KEY (TradeId) KEEP 5 ROWS
    PARTITION BY Enriched HASH(Sym) PARTITIONS 4
AS SELECT e.TradeId TradeId, e.Sym Sym, e.Price * e.Qty Notional FROM Enriched e WHERE e.Qty > 10;
"""),
}
SCHEMA = pa.struct([("TradeId", pa.int64()), ("Sym", pa.string()), ("Price", pa.float64()),
                    ("Qty", pa.int32()), ("Sector", pa.string())])


def bucket(rows: int, instruments: int, first_seq: int, rnd: random.Random) -> pa.Table:
    """``rows`` trades in the processor's input layout, each on the instance of its symbol."""
    syms = [rnd.randrange(instruments) for _ in range(rows)]
    values = [{"TradeId": first_seq + i, "Sym": f"S{s}", "Price": round(rnd.uniform(1, 100), 2),
               "Qty": rnd.randint(1, 100), "Sector": f"X{s % 11}"} for i, s in enumerate(syms)]
    return pa.table({
        "__port": pa.array([0] * rows, pa.int32()),
        "__seq": pa.array(range(first_seq, first_seq + rows), pa.int64()),
        "__sub": pa.array([0] * rows, pa.int64()),
        "__src": pa.array([0] * rows, pa.int32()),
        "__op": pa.array(["i"] * rows, pa.string()),
        "__inst": pa.array([s % 4 for s in syms], pa.int32()),
        "__why": pa.array([None] * rows, pa.string()),
        "__raw": pa.array([None] * rows, pa.string()),
        "__p0": pa.array(values, SCHEMA)})


def cpu(fn: Callable[[], object]) -> float:
    """CPU seconds of ``fn()``, with Python's cycle collector paused as runtime/arrow_state.py runs
    a bucket."""
    with gc_paused():
        start = time.process_time()
        fn()
        return time.process_time() - start


def section(name: str, rows: int, instruments: int, repeat: int,
            base: Optional[str] = None) -> tuple[float, float, Optional[float]]:
    """(engine, kernel, base kernel or None) µs per row of section ``name``."""
    _, text = SECTIONS[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.ccl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        plan, diags = plan_project(path)
        assert plan is not None, [str(d) for d in diags]
    plan_json = plan_to_json(plan)
    element = plan_json["elements"][-1]
    assert element["physical"]["kernel"] is not None, f"{name}: no kernel takes {element['name']}"
    kernel = BucketRun(json.dumps(plan_json), element["name"])
    engine = BucketRun(json.dumps(plan_json), element["name"])
    engine.kernel = None
    other = None
    if base is not None:
        spec = importlib.util.spec_from_file_location("base_keep", base)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        other = BucketRun(json.dumps(plan_json), element["name"])
        other.kernel = module.KeepKernel(other.engine, plan_json)
    rnd = random.Random(7)
    warm: dict = {}
    kernel.process_table(warm, bucket(rows, instruments, 1, rnd), 0)
    timed = bucket(rows, instruments, rows + 1, rnd)
    best_engine = best_kernel = best_base = float("inf")
    for _ in range(repeat):
        states = copy.deepcopy(warm)
        best_kernel = min(best_kernel, cpu(lambda: kernel.process_table(states, timed, 0)))
        if other is not None:
            mine, states = states, copy.deepcopy(warm)
            best_base = min(best_base, cpu(lambda: other.process_table(states, timed, 0)))
            assert states == mine, f"{name}: the base kernel left another state"
        states = copy.deepcopy(warm)
        best_engine = min(best_engine, cpu(lambda: engine.process_table(states, timed, 0)))
    return (best_engine / rows * 1e6, best_kernel / rows * 1e6,
            best_base / rows * 1e6 if other is not None else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--instruments", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated section names")
    ap.add_argument("--base", metavar="PATH", help="another checkout's runtime/engine/kernels/keep.py to time too")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(SECTIONS)
    extra = f" {'base µs/row':>12} {'base/kernel':>11}" if args.base else ""
    print(f"{'section':<12} {'what':<42} {'engine µs/row':>14} {'kernel µs/row':>14} {'ratio':>7}" + extra)
    for name in names:
        eng, ker, base = section(name, args.rows, args.instruments, args.repeat, args.base)
        print(f"{name:<12} {SECTIONS[name][0]:<42} {eng:>14.2f} {ker:>14.2f} {eng / ker:>7.1f}"
              + (f" {base:>12.2f} {base / ker:>11.2f}" if base is not None else ""))


if __name__ == "__main__":
    main()
