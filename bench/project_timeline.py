"""Where a large batch of bench/project.py's project spends its wall time: a timeline of the
driver's steps and of every bucket in the worker pool, and how long both, one or none of the
pool's workers were busy.

    python bench/project_timeline.py [--rows 200000] [--elements 4] [--runs 2]

Runs the project (its first ``--elements`` derived elements, as bench/project.py's prefixes)
``--runs`` times in one Spark session (local[2]), after a small untimed run, and prints the last
run's timeline (the pool is warm by then, as in bench/project.py's fastest runs): per line the
process, start and end (seconds from the run's start), the step (a driver function and its
element, or a bucket with its rows in and out and its thread's CPU seconds), then the summary.
The driver's steps are timed by wrapping runtime functions in this process; the buckets by a
wrapper of ``runtime.bucket_pool.run_bucket`` that the workers import from this file. On a
loaded machine every figure stretches; compare the shares, not the seconds.
"""
from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOG_DIR = "CCL_TIMELINE_DIR"  # the environment variable naming where each process appends events


def _record(kind: str, name: str, began: float, **more: Any) -> None:
    with open(os.path.join(os.environ[LOG_DIR], f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": os.getpid(), "kind": kind, "name": name, "t0": began,
                            "t1": time.time(), **more}) + "\n")


def timed_bucket(runner_args: tuple, part: Any) -> Any:
    """``runtime.bucket_pool.run_bucket``, its time recorded (what the workers run)."""
    from runtime.arrow_state import BUCKET, bucket_runner

    began, cpu = time.time(), time.thread_time()
    out = bucket_runner(*runner_args)(None, part)
    _record("bucket", runner_args[1], began, rows=part.num_rows, out=out.num_rows,
            cpu=time.thread_time() - cpu, bucket=part.column(BUCKET)[0].as_py())
    return out


def timed_output(*args: Any) -> Any:
    """``runtime.outputs.write_output``, its time recorded (in a worker, or on the driver)."""
    import runtime.outputs as outputs

    began, cpu = time.time(), time.thread_time()
    try:
        return _ORIGINAL_OUTPUT(*args) if _ORIGINAL_OUTPUT else outputs.write_output(*args)
    finally:
        _record("driver" if os.environ.get(MAIN) == str(os.getpid()) else "output",
                f"write_output {args[1].name}", began, cpu=time.thread_time() - cpu)


_ORIGINAL_OUTPUT = None
MAIN = "CCL_TIMELINE_MAIN"  # the environment variable naming the driver's pid


def _timed_step(module: Any, attr: str) -> None:
    """Wrap ``module.attr`` so that each call is recorded with the element it ran for and the
    CPU of the thread that ran it."""
    step = getattr(module, attr)

    @functools.wraps(step)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began, cpu = time.time(), time.thread_time()
        try:
            return step(*args, **kwargs)
        finally:
            element = next((a.name for a in args if isinstance(getattr(a, "name", None), str)), "")
            _record("driver", f"{attr} {element}".strip(), began, cpu=time.thread_time() - cpu)
    setattr(module, attr, timed)


def _timed_writes(behind: Any) -> None:
    """Record each write a batch's stage hands to ``runtime.project_query.WriteBehind`` (its
    thread's CPU)."""
    submit = behind.submit

    @functools.wraps(submit)
    def timed_submit(self: Any, write: Any) -> None:
        def timed_write() -> None:
            began, cpu = time.time(), time.thread_time()
            try:
                write()
            finally:
                _record("driver", "stage files (behind)", began, cpu=time.thread_time() - cpu)
        submit(self, timed_write)
    behind.submit = timed_submit


def instrument() -> None:
    """Time the driver's steps of a batch and the buckets of the pool."""
    import runtime.arrow_frames as arrow_frames
    import runtime.bucket_pool as bucket_pool
    import runtime.inputs.file_input as file_input
    import runtime.outputs as outputs
    import runtime.project_query as project_query
    import runtime.run as run

    global _ORIGINAL_OUTPUT
    os.environ[MAIN] = str(os.getpid())
    bucket_pool.run_bucket = timed_bucket
    _ORIGINAL_OUTPUT = outputs.write_output
    outputs.write_output = timed_output
    _timed_writes(project_query.WriteBehind)
    for module, attr in [(project_query, "_stage_table"), (project_query, "_written"),
                         (arrow_frames, "processor_input"), (project_query, "run_buckets"),
                         (file_input, "rows_here"), (run, "write_outputs")]:
        _timed_step(module, attr)


def summary(events: list[dict]) -> str:
    """How long both, one or none of the workers ran a bucket from the batch's first step to its
    last, and the outputs' time after the query."""
    buckets = [e for e in events if e["kind"] == "bucket"]
    steps = [e for e in events if e["kind"] == "driver"]
    outputs = [e for e in steps if e["name"].startswith("write_outputs")]
    start = min(e["t0"] for e in events)
    end = max([e["t1"] for e in steps if e not in outputs] + [e["t1"] for e in buckets])
    busy = [0.0, 0.0, 0.0]
    level, last = 0, start
    for t, change in sorted([(e["t0"], 1) for e in buckets] + [(e["t1"], -1) for e in buckets]):
        busy[min(level, 2)] += t - last
        level, last = level + change, t
    busy[0] += end - last
    written = sum(e["t1"] - e["t0"] for e in outputs)
    return (f"batch {end - start:.2f} s: both workers busy {busy[2]:.2f} s, one {busy[1]:.2f} s, "
            f"none {busy[0]:.2f} s; outputs after the query {written:.2f} s; buckets' CPU "
            f"{sum(e['cpu'] for e in buckets):.2f} s")


def cpu_summary(events: list[dict], spent: dict[str, float]) -> str:
    """The run's CPU seconds by process (bench/project.py's ``process_cpu``) and by step: the
    driver's steps by name (each step's own thread CPU; steps that call other timed steps count
    them too) and the buckets it ran itself, the buckets' and the outputs' in the workers, and
    what of the workers' CPU is neither (taking buckets in, handing them back, pyarrow's own
    threads)."""
    steps: dict[str, float] = {}
    for e in events:
        if e["kind"] == "driver":
            name = e["name"].split(" ")[0] if e["name"] != "stage files (behind)" else e["name"]
            steps[name] = steps.get(name, 0.0) + e["cpu"]
    main = int(os.environ[MAIN])
    buckets = sum(e["cpu"] for e in events if e["kind"] == "bucket" and e["pid"] != main)
    here = sum(e["cpu"] for e in events if e["kind"] == "bucket" and e["pid"] == main)
    outputs = sum(e["cpu"] for e in events if e["kind"] == "output")
    lines = ["CPU s by process: " + ", ".join(f"{k} {v:.2f}" for k, v in spent.items()),
             "driver steps (thread CPU): " + ", ".join(f"{k} {v:.2f}" for k, v in steps.items())
             + f"; buckets run on the driver {here:.2f}",
             f"pool: buckets {buckets:.2f}, outputs {outputs:.2f}, the rest "
             f"{spent.get('pool', 0.0) - buckets - outputs:.2f}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run, print the last run's timeline and summary; exit code 0."""
    import bench.project as project
    from runtime.session import get_session

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--elements", type=int, default=4, choices=range(1, len(project.ELEMENTS) + 1))
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args(argv)
    root = tempfile.mkdtemp(prefix="ccl-bench-timeline-")
    os.environ[LOG_DIR] = os.path.join(root, "events")
    os.makedirs(os.environ[LOG_DIR])
    instrument()
    data = os.path.join(root, "data")
    project.generate(data, args.rows, 2000, 4)
    project.generate(os.path.join(root, "warm"), 2000, 100, 2)
    spark = get_session("local[2]", "ccl-bench-timeline", 2, conf={"spark.driver.memory": "4g"})
    try:
        os.makedirs(os.path.join(root, "w"))
        project.compiled(spark, os.path.join(root, "warm"), os.path.join(root, "w"), args.elements)
        for k in range(args.runs):
            for path in glob.glob(os.path.join(os.environ[LOG_DIR], "*")):
                os.remove(path)
            work = os.path.join(root, f"run{k}")
            os.makedirs(work)
            before = project.process_cpu()
            began = time.time()
            seconds = project.compiled(spark, data, work, args.elements)
            spent = {k: v - before.get(k, 0.0) for k, v in project.process_cpu().items()}
            print(f"run {k + 1}: {seconds:.2f} s", file=sys.stderr, flush=True)
        events: list[dict] = []
        for path in glob.glob(os.path.join(os.environ[LOG_DIR], "*.jsonl")):
            with open(path, encoding="utf-8") as f:
                events += [json.loads(line) for line in f]
        events.sort(key=lambda e: e["t0"])
        for e in events:
            what = (f"{e['name']} bucket {e['bucket']}: {e['rows']} rows in, {e['out']} out"
                    if e["kind"] == "bucket" else e["name"])
            print(f"{e['pid']:>7} {e['t0'] - began:7.3f} {e['t1'] - began:7.3f}  {what}, "
                  f"{e['cpu']:.3f} CPU s")
        print(f"run {args.runs}: {seconds:.2f} s; " + summary(events))
        print(cpu_summary(events, spent))
        print("load average (1, 5, 15 min) at the end: "
              + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
