"""The run report: what recording micro-batch times costs a batch, and how long a report takes.

    python bench/report.py [--batches 2000] [--elements 6] [--repeat 5]

No Spark. Two measures, each the best of REPEAT, measured in one process against a baseline:

- the batch timing of runtime.run.timed_batches (one small JSON file per batch of a query,
  written aside and renamed): microseconds per batch around a batch function that does nothing,
  over the same loop without it (a real batch takes tens of milliseconds at the least);
- collecting and rendering the report (ccl.ops.report) of a synthetic run directory of BATCHES
  micro-batches of a project query over ELEMENTS elements (stats, batch times and bad records
  files as the runtime writes them), 8 partition instances each.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from ccl.ops.report import collect, render  # noqa: E402
from runtime.run import timed_batches  # noqa: E402
from runtime.run_dir import RunDirs  # noqa: E402


def _plan(elements: int) -> dict:
    names = [f"e{i}" for i in range(elements)]
    out = []
    for i, name in enumerate(names):
        first = i == 0
        out.append({"name": name, "kind": "stream" if first else "window",
                    "role": "input" if first else ("output" if i == elements - 1 else "local"),
                    "line": i + 1, "file": "bench.ccl", "query": None if first else {"from": names[i - 1]},
                    "physical": {"instances": 1 if first else 8},
                    "partition": None if first else {"count": 8, "broadcast": [], "specs": [
                        {"input": names[i - 1], "method": "hash", "columns": ["k"]}]}})
    return {"project": "bench", "elements": out}


def _write(path: str, data: object) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _run_dir(root: str, plan: dict, batches: int) -> None:
    _write(os.path.join(root, "plan.json"), plan)
    _write(os.path.join(root, "run.json"), {"project_query": [e["name"] for e in plan["elements"]]})
    dirs = RunDirs(root)
    for b in range(batches):
        for e in plan["elements"]:
            n = e["physical"]["instances"]
            _write(dirs.batch_file("stats", e["name"], b, "json"),
                   {"rows_in": 1000, "rows_out": {"i": 900, "u": 100}, "bad": {"bad price": 1},
                    "instances": {str(i): 1000 // n for i in range(n)}})
        _write(dirs.batch_file("batches", "ccl:project", b, "json"), {"start": 1000.0 + b, "seconds": 0.5})
        bad = dirs.batch_file("bad", "e0", b, "jsonl")
        os.makedirs(os.path.dirname(bad), exist_ok=True)
        with open(bad, "w", encoding="utf-8") as f:
            f.write(json.dumps({"element": "e0", "reason": "bad price", "row": {"line": "x"}}) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=2000)
    p.add_argument("--elements", type=int, default=6)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    root = tempfile.mkdtemp(prefix="ccl-bench-report-")
    try:
        calls = 2000
        dirs = RunDirs(os.path.join(root, "timing"))

        def nothing(df: object, batch_id: int) -> None:
            pass
        timed = timed_batches(nothing, dirs, "ccl:project")
        bare = min(_loop(nothing, calls) for _ in range(args.repeat))
        with_timing = min(_loop(timed, calls) for _ in range(args.repeat))
        print(f"batch timing: {(with_timing - bare) / calls * 1e6:.0f} us per batch "
              f"(bare loop {bare / calls * 1e6:.2f} us)")
        run = os.path.join(root, "run")
        _run_dir(run, _plan(args.elements), args.batches)
        best_collect = best_render = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = collect(run)
            t1 = time.perf_counter()
            page = render(report)
            t2 = time.perf_counter()
            best_collect, best_render = min(best_collect, t1 - t0), min(best_render, t2 - t1)
        files = args.batches * (args.elements + 2)
        print(f"report of {args.batches} batches x {args.elements} elements ({files} files): "
              f"collect {best_collect:.3f} s, render {best_render:.3f} s, page {len(page) / 1024:.0f} KiB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _loop(write, calls: int) -> float:
    t0 = time.perf_counter()
    for b in range(calls):
        write(None, b)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
