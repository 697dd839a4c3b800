"""Throughput of element shapes other than the typical project's, each a small project over the
same trades, against a passthrough of those trades in the same process.

    python bench/shapes.py [--rows 100000] [--instruments 2000] [--files 4] [--repeat N]
                           [--only NAME,...] [--json FILE] [--check]

bench/project.py times one typical project (a broadcast join, KEEP 20 ROWS PER, GROUP BY, Flex);
a project the runtime has never seen has other shapes. Each entry of ``SHAPES`` below is a small
project over bench/project.py's generated trades (TradeId, Sym, Price, Qty) and instruments
(Sym, Sector, LotSize), its last element the only OUTPUT element. Every shape runs in one Spark
session (local[2], 2 shuffle partitions) with ``ccl run --until-idle`` semantics (``plan_project``
+ ``run_plan``, outputs included), as bench/project.py's jobs do, after a warm-up run of every job
on a small input. Printed per shape: seconds (its fastest run), trades/s, the ratio to the
passthrough (``spark.readStream.csv`` of the same files into the noop sink) and the CPU seconds of
this process and its descendants from /proc (least of the runs; stderr splits each run's by
process: ``driver``, ``jvm``, ``pool``, ``other``), and how the plan runs each derived element
(``native``, ``kernel:NAME``, ``engine``; ``+time``: a time-based KEEP or timers). ``--check`` only compiles every shape and prints its
elements' paths.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import project as bench_project  # noqa: E402  (bench/project.py: trades, passthrough, CPU)
from ccl.plan.planner import plan_project  # noqa: E402

INPUTS = bench_project.INPUTS
H4 = "PARTITION BY {src} HASH(Sym) PARTITIONS 4"

# name -> the derived elements (after INPUTS); one OUTPUT element, the last.
SHAPES: dict[str, str] = {
    # arithmetic, a function call and a CASE: not the native filter's subset
    "derived": """
CREATE OUTPUT STREAM Priced PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price * t.Qty Notional,
          upper(substr(t.Sym, 1, 3)) Prefix,
          CASE WHEN t.Qty > 500 THEN 'big' ELSE 'small' END Size
   FROM Trades t WHERE t.Price * t.Qty > 1000.0;
""",
    "stream_agg": """
CREATE OUTPUT WINDOW BySym PRIMARY KEY DEDUCED PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.Sym Sym, count(*) N, sum(t.Qty) Volume, avg(t.Price) AvgPrice, max(t.Price) Hi
   FROM Trades t GROUP BY t.Sym;
""",
    # the same aggregate read by a stream: its changes one by one (rows mode)
    "stream_agg_rows": """
CREATE WINDOW BySym PRIMARY KEY DEDUCED PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.Sym Sym, count(*) N, sum(t.Qty) Volume, max(t.Price) Hi
   FROM Trades t GROUP BY t.Sym;
CREATE OUTPUT STREAM Hot AS SELECT b.Sym Sym, b.N N FROM BySym b WHERE b.N > 40;
""",
    "time_keep_agg": """
CREATE OUTPUT WINDOW Last10s PRIMARY KEY DEDUCED PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.Sym Sym, count(*) N, sum(t.Qty) Volume, max(t.Price) Hi
   FROM Trades t KEEP 10 SECONDS GROUP BY t.Sym;
""",
    # two windows of one partitioning joined on their key
    "copart_join": """
CREATE WINDOW Hi PRIMARY KEY DEDUCED PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.Sym Sym, max(t.Price) Hi FROM Trades t GROUP BY t.Sym;
CREATE WINDOW Vol PRIMARY KEY DEDUCED PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.Sym Sym, sum(t.Qty) Volume FROM Trades t GROUP BY t.Sym;
CREATE OUTPUT WINDOW Both PRIMARY KEY DEDUCED
    PARTITION BY Hi HASH(Sym), BY Vol HASH(Sym) PARTITIONS 4
AS SELECT h.Sym Sym, h.Hi Hi, v.Volume Volume FROM Hi h INNER JOIN Vol v ON h.Sym = v.Sym;
""",
    # the stream hashed, the reference window hashed too (not broadcast), a computed item
    "hashed_join": """
CREATE OUTPUT STREAM Lots
    PARTITION BY Trades HASH(Sym), BY Instruments HASH(Sym) PARTITIONS 4
AS SELECT t.TradeId TradeId, t.Sym Sym, i.Sector Sector, t.Qty / i.LotSize Lots
   FROM Trades t INNER JOIN Instruments i ON t.Sym = i.Sym;
""",
    "minmax_having": """
CREATE WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 20 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Range PRIMARY KEY DEDUCED PARTITION BY Recent HASH(Sym) PARTITIONS 4
AS SELECT r.Sym Sym, min(r.Price) Lo, max(r.Price) Hi, count(*) N
   FROM Recent r GROUP BY r.Sym HAVING max(r.Price) - min(r.Price) > 100.0;
""",
    "roundrobin": """
CREATE OUTPUT STREAM Big PARTITION BY Trades ROUNDROBIN PARTITIONS 4
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price * t.Qty Notional
   FROM Trades t WHERE t.Qty > 100;
""",
    "splash_partition": """
CREATE OUTPUT WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 5 ROWS PER (Sym)
    PARTITION BY Trades {
        return ascii(substr(Trades.Sym, 6, 1)) % Recent_partitions;
    }
    PARTITIONS 4
AS SELECT * FROM Trades;
""",
    "union": """
CREATE STREAM Cheap PARTITION BY Trades HASH(Sym) PARTITIONS 4 AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price Price FROM Trades t
   WHERE t.Price < 2000.0;
CREATE STREAM Dear PARTITION BY Trades HASH(Sym) PARTITIONS 4 AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price * 1.0 Price FROM Trades t
   WHERE t.Price > 8000.0;
CREATE OUTPUT STREAM Edges AS SELECT c.TradeId, c.Sym, c.Price FROM Cheap c
   UNION SELECT d.TradeId, d.Sym, d.Price FROM Dear d;
""",
    "pattern": """
CREATE OUTPUT STREAM Jumps PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT a.Sym Sym, a.TradeId FirstId, b.TradeId SecondId, b.Price - a.Price Jump
   FROM Trades a, Trades b
   MATCHING [10 SECONDS : a, b]
   ON a.Sym = b.Sym AND b.Price > a.Price * 5.0;
""",
    "flex_loop": """
CREATE FLEX Spread
    IN Trades
    OUT OUTPUT STREAM Spread SCHEMA (Sym string, Lo float, Hi float, N integer)
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
BEGIN
    DECLARE
        eventCache(Trades[Sym], 10 events) lastTen;
    END;
    ON Trades {
        float lo := Trades.Price;
        float hi := Trades.Price;
        integer n := 0;
        while (n < cacheSize(lastTen)) {
            typeof(Trades) rec := getCache(lastTen, n);
            if (rec.Price < lo) { lo := rec.Price; }
            if (rec.Price > hi) { hi := rec.Price; }
            n := n + 1;
        }
        output [Sym = Trades.Sym; Lo = lo; Hi = hi; N = n;];
    };
END;
""",
    "deduced_window": """
CREATE WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 20 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Notional PRIMARY KEY DEDUCED PARTITION BY Recent HASH(Sym) PARTITIONS 4
AS SELECT r.Sym Sym, r.TradeId TradeId, r.Price * r.Qty Notional FROM Recent r
   WHERE r.Qty > 10;
""",
    # regional windows merged (ESP: merging regional windows or partitioned instances' outputs)
    "union_windows": """
CREATE WINDOW EastRecent PRIMARY KEY (Sym, TradeId) KEEP 20 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT * FROM Trades WHERE Trades.Price < 5000.0;
CREATE WINDOW WestRecent PRIMARY KEY (Sym, TradeId) KEEP 20 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT * FROM Trades WHERE Trades.Price >= 5000.0;
CREATE OUTPUT WINDOW AllRecent PRIMARY KEY (Sym, TradeId)
AS SELECT * FROM EastRecent UNION SELECT w.TradeId, w.Sym, w.Price, w.Qty FROM WestRecent w
   WHERE w.Qty > 10;
""",
    "agg_of_agg": """
CREATE WINDOW BySym PRIMARY KEY DEDUCED PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.Sym Sym, sum(t.Qty) Volume, max(t.Price) Hi FROM Trades t GROUP BY t.Sym;
CREATE OUTPUT WINDOW ByPrefix PRIMARY KEY DEDUCED
AS SELECT substr(b.Sym, 1, 4) Prefix, sum(b.Volume) Volume, max(b.Hi) Hi, count(*) Syms
   FROM BySym b GROUP BY substr(b.Sym, 1, 4);
""",
    # no PARTITION BY: one instance
    "unpartitioned": """
CREATE WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 20 ROWS PER (Sym)
AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Stats PRIMARY KEY DEDUCED
AS SELECT r.Sym Sym, count(*) N, avg(r.Price) AvgPrice, sum(r.Qty) Volume
   FROM Recent r GROUP BY r.Sym;
""",
}


def shape_text(name: str) -> str:
    """The CCL of the shape ``name``: the inputs and its elements."""
    return INPUTS + SHAPES[name]


def _plan(work: str, name: str) -> Any:
    path = os.path.join(work, f"{name}.ccl")
    with open(path, "w") as f:
        f.write(shape_text(name))
    plan, diags = plan_project(path)
    if plan is None:
        raise SystemExit(f"{name}:\n" + "\n".join(str(d) for d in diags))
    return plan


def paths(plan: Any) -> str:
    """How the plan runs each derived element: ``Name=native|kernel:K|engine``."""
    out = []
    for element in plan.elements:
        physical = element.physical
        if physical is None or element.role == "input":
            continue
        if getattr(physical, "native", None):
            how = "native"
        elif getattr(physical, "kernel", None):
            how = f"kernel:{physical.kernel}"
        else:
            how = "engine"
        if physical.uses_time:
            how += "+time"
        out.append(f"{element.name}={how}")
    return " ".join(out)


def run_shape(spark: Any, data: str, work: str, name: str) -> float:
    """The shape run until idle on ``data``; its seconds."""
    seconds, report = bench_project.run_until_idle(spark, _plan(work, name), data, work)
    assert report, name
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Run the shapes, print the table, write ``--json``; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="trades (default 100,000)")
    ap.add_argument("--instruments", type=int, default=2_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds (every job once per round); each job's fastest run counts")
    ap.add_argument("--only", default="", help="comma-separated: passthrough," + ",".join(SHAPES))
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--check", action="store_true", help="compile every shape, print its paths")
    args = ap.parse_args(argv)
    only = [j for j in args.only.split(",") if j]
    unknown = [j for j in only if j != "passthrough" and j not in SHAPES]
    if unknown:
        ap.error(f"--only: unknown job(s) {', '.join(unknown)}")
    root = tempfile.mkdtemp(prefix="ccl-bench-shapes-")
    if args.check:
        for name in SHAPES:
            print(f"{name:>16}: {paths(_plan(root, name))}")
        shutil.rmtree(root, ignore_errors=True)
        return 0
    from runtime.session import get_session
    data = os.path.join(root, "data")
    bench_project.generate(data, args.rows, args.instruments, args.files)
    spark = get_session("local[2]", "ccl-bench-shapes", 2, conf={"spark.driver.memory": "4g"})
    chosen = [n for n in ["passthrough", *SHAPES] if not only or n in only]
    times: dict[str, list[float]] = {n: [] for n in chosen}
    cpus: dict[str, list[float]] = {n: [] for n in chosen}
    kinds: dict[str, list[dict[str, float]]] = {n: [] for n in chosen}
    how = {n: paths(_plan(root, n)) for n in chosen if n != "passthrough"}

    def job(name: str, data_dir: str, work: str) -> float:
        return (bench_project.passthrough(spark, data_dir, work) if name == "passthrough"
                else run_shape(spark, data_dir, work, name))
    try:
        warm = os.path.join(root, "warm")
        bench_project.generate(os.path.join(warm, "data"), 2000, min(args.instruments, 100), 2)
        for name in chosen:
            work = os.path.join(warm, name)
            os.makedirs(work)
            job(name, os.path.join(warm, "data"), work)
        for attempt in range(args.repeat):
            for name in chosen:
                work = os.path.join(root, f"{name}-{attempt}")
                os.makedirs(work)
                before = bench_project.process_cpu()
                times[name].append(job(name, data, work))
                spent = {k: v - before.get(k, 0.0) for k, v in bench_project.process_cpu().items()}
                cpus[name].append(sum(spent.values()) if spent else float("nan"))
                kinds[name].append(spent)
                shutil.rmtree(work, ignore_errors=True)
                print(f"  {name} run {attempt + 1}: {times[name][-1]:.2f} s, {cpus[name][-1]:.2f} CPU s ("
                      + ", ".join(f"{k} {v:.2f}" for k, v in spent.items()) + "), load "
                      + ", ".join(f"{x:.1f}" for x in os.getloadavg()), file=sys.stderr, flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    best = {n: min(t) for n, t in times.items()}
    base = best.get("passthrough")
    print(f"{args.rows:,} trades, {args.instruments:,} instruments, {args.files} files, local[2], "
          f"fastest of {args.repeat} run(s)")
    print(f"{'shape':>16} {'seconds':>8} {'trades/s':>10} {'÷ passthrough':>14} {'CPU s':>7} "
          f"{'pool CPU s':>10}  paths")
    results = []
    for name in chosen:
        seconds = best[name]
        ratio = base / seconds if base else None
        pool = min(k.get("pool", 0.0) for k in kinds[name])
        print(f"{name:>16} {seconds:8.2f} {args.rows / seconds:10,.0f} "
              f"{(f'{ratio:.3f}' if ratio is not None else '-'):>14} {min(cpus[name]):7.2f} "
              f"{pool:10.2f}  {how.get(name, '')}")
        results.append({"shape": name, "seconds": seconds, "runs": times[name],
                        "median_seconds": statistics.median(times[name]),
                        "rows_per_second": args.rows / seconds, "ratio_to_passthrough": ratio,
                        "cpu_seconds": min(cpus[name]), "cpu_runs": cpus[name],
                        "cpu_by_process": kinds[name], "paths": how.get(name, "")})
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "instruments": args.instruments, "files": args.files,
                       "repeat": args.repeat, "jobs": results,
                       "load_average_at_end": os.getloadavg()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
