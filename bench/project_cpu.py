"""Where one batch of the typical project (bench/project.py) spends its CPU, element by element.

    python bench/project_cpu.py [--rows 100000] [--repeat 3] [--elements 4] [--json FILE]

Runs a prefix of bench/project.py's project (``--elements``: 4 is the whole project, the Flex
included) with ``ccl run --until-idle`` semantics (``plan_project`` + ``run_plan``) on generated
trades, the buckets run on the driver (``RunOptions.parallel_rows`` past the batch: no worker
pool, so one thread runs every bucket), and times with ``time.thread_time`` (the CPU of the
thread that runs the buckets: on a shared machine it varies less than elapsed time, though still
10-30% between runs as the load changes; compare code in alternating runs, and a single step
in one process):

- each element's ``BucketRun.process_table`` (the engine or kernel over its buckets, with the
  Arrow conversions in and out);
- ``~detach`` and ``~commit``: writing the buckets' keyed state to the state store
  (runtime/state/rows.py ``detach``, ``BucketStore.commit``), every element together.

The first run (a warm-up of the same size) is not counted; prints each run's figures and the
least of each over the runs. The timers wrap those functions for the run (a measurement only).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import project as bench_project  # noqa: E402  (bench/project.py)
from ccl.plan.planner import plan_project  # noqa: E402
from runtime import arrow_state  # noqa: E402
from runtime.processor import BucketRun  # noqa: E402
from runtime.run import run_plan  # noqa: E402
from runtime.run_setup import RunOptions  # noqa: E402
from runtime.session import get_session  # noqa: E402
from runtime.state.store import BucketStore  # noqa: E402

SPENT: dict[str, float] = collections.defaultdict(float)


def _timed(name_of: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` adding its thread CPU seconds to ``SPENT[name_of(*args)]``."""
    def timed(*args: Any) -> Any:
        began = time.thread_time()
        try:
            return fn(*args)
        finally:
            SPENT[name_of(*args)] += time.thread_time() - began
    return timed


def _install() -> None:
    BucketRun.process_table = _timed(lambda run, *_: run.element.name,  # type: ignore[method-assign]
                                     BucketRun.process_table)
    arrow_state.detach = _timed(lambda *_: "~detach", arrow_state.detach)
    BucketStore.commit = _timed(lambda *_: "~commit", BucketStore.commit)  # type: ignore[method-assign]


def run_once(spark: Any, data: str, work: str, elements: int) -> float:
    """One run of the prefix until idle; its elapsed seconds."""
    os.makedirs(work)
    path = os.path.join(work, "p.ccl")
    with open(path, "w") as f:
        f.write(bench_project.project_text(elements))
    plan, diags = plan_project(path)
    if plan is None:
        raise SystemExit("\n".join(str(d) for d in diags))
    options = RunOptions(inputs={"Trades": os.path.join(data, "trades"),
                                 "Instruments": os.path.join(data, "instruments.csv")},
                         base_dir=work, run_dir=os.path.join(work, "run"), until_idle=True,
                         parallel_rows=1 << 62)
    began = time.perf_counter()
    run_plan(spark, plan, options, os.path.join(work, "out"))
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    """Run, print the per-element figures, write ``--json``; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="trades (default 100,000)")
    ap.add_argument("--instruments", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--elements", type=int, default=4, choices=range(1, len(bench_project.ELEMENTS) + 1))
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    if args.rows < 4 or args.repeat < 1 or args.instruments < 1:
        ap.error("--rows >= 4, --repeat >= 1 and --instruments >= 1 are required")
    root = tempfile.mkdtemp(prefix="ccl-bench-project-cpu-")
    data = os.path.join(root, "data")
    bench_project.generate(data, args.rows, args.instruments, 4)
    _install()
    spark = get_session("local[2]", "ccl-bench-project-cpu", 2, conf={"spark.driver.memory": "4g"})
    runs: list[dict[str, float]] = []
    try:
        run_once(spark, data, os.path.join(root, "warm"), args.elements)
        for k in range(args.repeat):
            SPENT.clear()
            wall = run_once(spark, data, os.path.join(root, f"run{k}"), args.elements)
            runs.append({**SPENT, "~wall": wall})
            print(f"run {k + 1}: " + ", ".join(f"{name} {s:.2f}" for name, s in sorted(runs[-1].items())),
                  file=sys.stderr, flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    names = sorted({name for r in runs for name in r})
    least = {name: min(r.get(name, 0.0) for r in runs) for name in names}
    print(f"{args.rows:,} trades, {args.elements} element(s), buckets on the driver; thread CPU s "
          f"(least of {args.repeat}); ~wall: elapsed s of the run")
    for name in names:
        per = least[name] / args.rows * 1e6
        print(f"{name:>16} {least[name]:7.2f} s" + (f"  {per:6.2f} µs/trade" if name != "~wall" else ""))
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "elements": args.elements, "runs": runs, "least": least}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
