"""A small batch's Arrow tables reaching Spark: as a local relation or as a Parquet file scanned.

    python bench/local_relation.py [--rows 200000] [--repeat 3] [--only NAME,...]

A batch of the project's query whose new files are small runs on the driver with its rows in
Arrow tables; what Arrow does not compute exactly as Spark goes through Spark's expressions over
those tables (runtime.project_query._spark_frames). Each case below is one such stage over one
batch of ``--rows`` trades (one file), run until idle in one Spark session (local[2]), twice per
round: with ``SCAN_ROWS`` beyond any table (``local``: every table a local relation, which the
driver JVM's stream thread converts row by row) and at its default (``scan``), alternating.

Per run: wall seconds, the CPU seconds of this process tree from /proc (bench/project.py's
``process_cpu``) and of the JVM's threads by name (``stream``: the stream execution thread,
``tasks``: executor task threads, ``gc``, ``jit``, ``jvm-other``). Printed per case and route: the
least and median of each over the rounds, and whether both routes wrote the same outputs.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import project as bench_project  # noqa: E402  (bench/project.py: process_cpu)
from ccl.plan.planner import plan_project  # noqa: E402
from runtime import project_query  # noqa: E402
from runtime.run import run_plan  # noqa: E402
from runtime.run_setup import RunOptions  # noqa: E402
from runtime.session import get_session  # noqa: E402

TRADES = "CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer);\n"
FILTER = "CREATE OUTPUT STREAM Big AS SELECT * FROM Trades t WHERE t.Price > 5000.0;\n"
SPLASH = """CREATE OUTPUT WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 5 ROWS PER (Sym)
    PARTITION BY Trades { return ascii(substr(Trades.Sym, 6, 1)) % Recent_partitions; }
    PARTITIONS 4
AS SELECT * FROM Trades;
"""
SPLASH_FILTER = """CREATE OUTPUT STREAM Big
    PARTITION BY Trades { return ascii(substr(Trades.Sym, 6, 1)) % Big_partitions; } PARTITIONS 4
AS SELECT * FROM Trades t WHERE t.Price > 5000.0;
"""
# name -> (project, what the trades hold): each takes Spark's expressions for one stage
CASES: dict[str, tuple[str, str]] = {
    "filter_nan": (TRADES + FILTER, "nan"),  # a NaN where the WHERE compares floats
    "bad_rows": (TRADES + FILTER, "bad"),  # the input's stage: one row does not parse
    "splash_window": (TRADES + SPLASH, "clean"),  # a custom partition function, per instance
    "splash_filter": (TRADES + SPLASH_FILTER, "clean"),  # ... of a native filter
}


def generate(path: str, rows: int, kind: str) -> None:
    """``rows`` trades in one CSV file; ``nan``: one price NaN, ``bad``: one quantity not a number."""
    rnd = random.Random(5)
    syms = [f"SYM{i:05d}" for i in range(2000)]
    lines = []
    for i in range(rows):
        price = f"{rnd.randrange(1, 10 ** 6) / 100:.2f}"
        qty = str(rnd.randrange(1, 1000))
        if i == rows // 2:
            price = "NaN" if kind == "nan" else price
            qty = "many" if kind == "bad" else qty
        lines.append(f"{i + 1},{rnd.choice(syms)},{price},{qty}\n")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("TradeId,Sym,Price,Qty\n" + "".join(lines))


def _jvm_threads() -> dict[int, tuple[str, float]]:
    """The threads of the JVM under this process: thread id -> (name, CPU seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                java = f.read().split(b"\0")[0].endswith(b"java")
        except OSError:
            continue
        if not java or int(stat[stat.rfind(")") + 2:].split()[1]) != os.getpid():
            continue
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            fields = text[text.rfind(")") + 2:].split()
            out[int(tid)] = (text[text.find("(") + 1:text.rfind(")")],
                             (int(fields[11]) + int(fields[12])) / tick)
    return out


class ThreadCpu:
    """CPU of the JVM's threads by kind over a span, sampled every 0.1 s so that threads born
    and gone within it (the stream execution thread) count (all but their last 0.1 s)."""

    def __init__(self) -> None:
        self._start = _jvm_threads()
        self._seen: dict[int, tuple[str, float]] = dict(self._start)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.1):
            self._seen.update(_jvm_threads())

    def stop(self) -> dict[str, float]:
        """Stop sampling; CPU seconds by kind (see the module's docstring)."""
        self._stop.set()
        self._thread.join()
        self._seen.update(_jvm_threads())
        out = {"stream": 0.0, "tasks": 0.0, "gc": 0.0, "jit": 0.0, "jvm-other": 0.0}
        for tid, (name, cpu) in self._seen.items():
            spent = cpu - self._start.get(tid, (name, 0.0))[1]
            kind = ("stream" if name.startswith("stream execu") else
                    "tasks" if name.startswith("Executor task") else
                    "gc" if "GC" in name or name.startswith("G1") else
                    "jit" if "Compiler" in name else "jvm-other")
            out[kind] += spent
        return out


def run_case(spark: Any, project: str, data: str, work: str) -> dict[str, Any]:
    """The project run until idle over ``data``; wall, CPU by process and JVM thread, outputs."""
    path = os.path.join(work, "p.ccl")
    os.makedirs(work, exist_ok=True)
    with open(path, "w") as f:
        f.write(project)
    plan, diags = plan_project(path)
    assert plan is not None, [str(d) for d in diags]
    options = RunOptions(inputs={"Trades": data}, base_dir=work,
                         run_dir=os.path.join(work, "run"), until_idle=True)
    out = os.path.join(work, "out")
    procs, threads, began = bench_project.process_cpu(), ThreadCpu(), time.perf_counter()
    run_plan(spark, plan, options, out)
    wall = time.perf_counter() - began
    cpu = {k: v - procs.get(k, 0.0) for k, v in bench_project.process_cpu().items()}
    jvm = threads.stop()
    files = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".csv") or name.endswith(".jsonl"):
            with open(os.path.join(out, name), "rb") as f:
                files[name] = f.read()
    return {"wall": wall, "cpu": sum(cpu.values()), **jvm, "files": files}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated: " + ",".join(CASES))
    args = ap.parse_args()
    chosen = [c for c in CASES if not args.only or c in args.only.split(",")]
    root = tempfile.mkdtemp(prefix="ccl-bench-localrel-")
    spark = get_session("local[2]", "ccl-bench-localrel", 2, conf={"spark.driver.memory": "4g"})
    default = project_query.SCAN_ROWS
    routes = {"local": 10 ** 12, "scan": default}
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for kind in {CASES[c][1] for c in chosen}:
            generate(os.path.join(root, "data", kind, "t.csv"), args.rows, kind)
            generate(os.path.join(root, "warm", kind, "t.csv"), 2000, kind)
        for case in chosen:  # warm-up: first-query costs, not timed
            project, kind = CASES[case]
            run_case(spark, project, os.path.join(root, "warm", kind), os.path.join(root, "w", case))
        for attempt in range(args.repeat):
            order = list(routes) if attempt % 2 == 0 else list(reversed(routes))
            for case in chosen:
                project, kind = CASES[case]
                for route in order:
                    project_query.SCAN_ROWS = routes[route]
                    work = os.path.join(root, f"{case}-{route}-{attempt}")
                    got = run_case(spark, project, os.path.join(root, "data", kind), work)
                    shutil.rmtree(work, ignore_errors=True)
                    results.setdefault((case, route), []).append(got)
                    print(f"  {case} {route} run {attempt + 1}: " + ", ".join(
                        f"{k} {v:.2f}" for k, v in got.items() if k != "files"),
                        file=sys.stderr, flush=True)
    finally:
        project_query.SCAN_ROWS = default
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    keys = ["wall", "cpu", "stream", "tasks", "gc", "jit", "jvm-other"]
    print(f"{args.rows:,} trades in one small batch, local[2], {args.repeat} round(s); "
          "seconds, least / median")
    print(f"{'case':>14} {'route':>6} " + " ".join(f"{k:>11}" for k in keys) + "  same outputs")
    for case in chosen:
        for route in routes:
            runs = results[(case, route)]
            same = all(r["files"] == results[(case, "local")][0]["files"] for r in runs)
            print(f"{case:>14} {route:>6} " + " ".join(
                f"{min(r[k] for r in runs):5.2f}/{statistics.median(r[k] for r in runs):5.2f}"
                for k in keys) + f"  {same}")
    print("load average (1, 5, 15 min) at the end: "
          + ", ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
