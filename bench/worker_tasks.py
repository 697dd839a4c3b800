"""A bucket's task in a Spark Python worker: what it costs besides the bucket's own work.

    python bench/worker_tasks.py FILE [--repeat 3] [--code DIR] [--json OUT]
    python bench/worker_tasks.py FILE --alternate BASE [--code BRANCH] [--rounds 4]

FILE is a recording of ``bench/small_batches.py capture`` (bench/project.py's project, its
``run_buckets`` calls of small batches). Here each call (one element's batch) runs as a batch
that Spark distributes runs it: the driver pickles the batch's ``applyInArrow`` function
(``runtime.arrow_state.bucket_runner``) with cloudpickle, once per element and batch, and every
bucket is one task that unpickles that function and calls it on the bucket's rows, its state
store opened and closed per task, in one process (a Python worker Spark reuses,
``spark.python.worker.reuse``). Spark's own scheduling and Arrow transfer are left out: they are
the same whichever runtime runs. Printed per batch size: CPU (``time.process_time``) per task of
the unpickling, of the call, and of the first call of each element (the worker's first task), the
pickled function's bytes, and how many runners (``BucketRun``) the tasks built. ``--code DIR`` runs
another checkout's runtime; ``--alternate BASE`` runs BASE and ``--code`` (default: this one) in
fresh processes, taking turns.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _code(directory: str | None) -> None:
    sys.path.insert(0, os.path.abspath(directory) if directory else os.path.dirname(HERE))
    sys.path.insert(1, HERE)


def replay_once(data: dict, root: str, builds: list) -> list[dict]:
    """Every recorded call once as Spark tasks, on new state under ``root``; per batch its
    figures."""
    import pyarrow.compute as pc
    from pyspark import cloudpickle

    from runtime import arrow_state
    from runtime.state.store import create
    from small_batches import _batches_of

    prepared: set[str] = set()
    out = []
    for batch_id, calls in _batches_of(data["calls"]):
        unpickle = call = 0.0
        tasks = 0
        size = 0
        built = len(builds)
        for c in calls:
            args = list(c["args"])
            args[3] = os.path.join(root, args[3])
            if args[3] not in prepared:
                create(arrow_state.rows_root(args[3]), data["buckets"])
                prepared.add(args[3])
            blob = cloudpickle.dumps(arrow_state.bucket_runner(*args))  # the driver, per batch
            size += len(blob)
            table = c["table"]
            column = table.column(arrow_state.BUCKET)
            for b in sorted(pc.unique(column).to_pylist()):
                part = table.filter(pc.equal(column, b))
                t0 = time.process_time()
                fn = cloudpickle.loads(blob)  # the worker, per task
                t1 = time.process_time()
                fn(None, part)
                t2 = time.process_time()
                unpickle += t1 - t0
                call += t2 - t1
                tasks += 1
        for c in calls:
            arrow_state.prune(os.path.join(root, c["args"][3]), batch_id)
        out.append({"batch": batch_id, "tasks": tasks, "unpickle": unpickle, "call": call,
                    "bytes": size / len(calls), "built": len(builds) - built})
    return out


def replay(path: str, repeat: int) -> dict:
    """``repeat`` replays of ``path`` (each on new state, the process's runners kept between
    them as a reused worker keeps them); per batch size the least and median per task."""
    import gc

    from runtime import processor
    with open(path, "rb") as f:
        data = pickle.load(f)
    builds: list = []
    init = processor.BucketRun.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        builds.append(args[1] if len(args) > 1 else kwargs.get("element_name"))
        init(self, *args, **kwargs)
    processor.BucketRun.__init__ = counted  # type: ignore[method-assign]
    runs = []
    for _ in range(repeat):
        root = tempfile.mkdtemp(prefix="ccl-bench-worker-tasks-")
        try:
            gc.collect()
            runs.append(replay_once(data, root, builds))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    from small_batches import trades_per_batch
    trades = trades_per_batch(data["calls"])
    summary: dict[str, Any] = {}
    for size in data["sizes"]:
        figures: dict[str, list[float]] = collections.defaultdict(list)
        for run in runs:
            picked = [b for b in run if trades.get(b["batch"]) == size]
            if not picked:
                continue
            tasks = sum(b["tasks"] for b in picked)
            figures["tasks per batch"].append(tasks / len(picked))
            figures["unpickle µs/task"].append(1e6 * sum(b["unpickle"] for b in picked) / tasks)
            figures["call µs/task"].append(1e6 * sum(b["call"] for b in picked) / tasks)
            figures["task cpu ms/batch"].append(
                1e3 * sum(b["unpickle"] + b["call"] for b in picked) / len(picked))
            figures["pickled function bytes"].append(statistics.mean(b["bytes"] for b in picked))
            figures["runners built per batch"].append(sum(b["built"] for b in picked) / len(picked))
        summary[str(size)] = {k: {"least": min(v), "median": statistics.median(v), "runs": v}
                              for k, v in figures.items()}
    return {"summary": summary, "builds": len(builds), "load": os.getloadavg()}


def _print(result: dict, label: str = "") -> None:
    for size, figures in result["summary"].items():
        print(f"{label}{size} trade(s) per batch (least, median of the runs):")
        for name, v in figures.items():
            print(f"  {name:>28} {v['least']:11.2f} {v['median']:11.2f}")
    print(f"runners built in all: {result['builds']}; load average: "
          + ", ".join(f"{x:.1f}" for x in result["load"]))


def alternate(path: str, codes: list[str], rounds: int, repeat: int) -> None:
    """``replay`` of each checkout in a process of its own, taking turns."""
    results: dict[str, list[dict]] = {c: [] for c in codes}
    for r in range(rounds):
        for code in (codes if r % 2 == 0 else codes[::-1]):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), path, "--repeat",
                                   str(repeat), "--code", code, "--json", "-"],
                                  check=True, capture_output=True, text=True)
            result = json.loads(done.stdout)
            results[code].append(result)
            print(f"round {r + 1} {code}: " + "; ".join(
                f"{size}: task cpu {f['task cpu ms/batch']['least']:.2f} ms/batch, "
                f"unpickle {f['unpickle µs/task']['least']:.0f} µs/task, "
                f"call {f['call µs/task']['least']:.0f} µs/task"
                for size, f in result["summary"].items()) + f" (load {result['load'][0]:.1f})",
                flush=True)
    print("per checkout, over the rounds (each round's least): least / median")
    for code in codes:
        for size in results[code][0]["summary"]:
            for what in ("task cpu ms/batch", "unpickle µs/task", "call µs/task",
                         "pickled function bytes", "runners built per batch"):
                v = [x["summary"][size][what]["least"] for x in results[code]]
                print(f"  {code} {size} rows {what}: {min(v):.2f} / {statistics.median(v):.2f}")


def main(argv: list[str] | None = None) -> int:
    """Replay or alternate; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--code", help="a checkout whose runtime runs the tasks (default: this one)")
    ap.add_argument("--alternate", metavar="BASE", help="alternate BASE and --code in fresh processes")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    if args.alternate:
        alternate(args.file, [args.alternate, args.code or os.path.dirname(HERE)], args.rounds,
                  args.repeat)
        return 0
    _code(args.code)
    result = replay(args.file, args.repeat)
    if args.json == "-":
        print(json.dumps(result))
        return 0
    _print(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
