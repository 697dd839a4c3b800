"""Throughput of a typical project, element by element, against a passthrough of the same events.

    python bench/project.py [--rows 400000] [--instruments 2000] [--files 4] [--repeat N]
                            [--only NAME,...] [--json FILE]

The project (``PROJECT`` below, every derived element ``PARTITION BY ... HASH(Sym) PARTITIONS 4``):
trades (TradeId, Sym, Price, Qty) joined with an input window of INSTRUMENTS instruments (named in
no BY clause, so broadcast to every instance), a ``KEEP 20 ROWS PER (Sym)`` window over the join,
a GROUP BY Sym aggregate (count, sum, avg, max) over that window, and a Flex keeping the last
average per symbol in a SPLASH ``dictionary(string, float)`` that emits the move of the average.

Jobs, all in one Spark session (local[2], 2 shuffle partitions) on the same generated files, each
run with ``availableNow`` / ``ccl run --until-idle`` semantics (``plan_project`` + ``run_plan``,
outputs included), as in bench/runtime.py:

- ``passthrough``: ``spark.readStream.csv`` of the trade files into the noop sink.
- ``filter``: the native passthrough through ccl: ``FILTER`` below (an output stream of the trades
  with a WHERE every trade passes), its output written as the others' are. The issue's "native
  filter over the same trades in the same measurement": the ratio ``÷ filter`` compares with it.
- ``join``: the join only (its output element the last one).
- ``join+keep``: the join and the KEEP window.
- ``join+keep+agg``: the join, the KEEP window and the aggregate.
- ``full``: the whole project, the Flex included.

Each prefix's last element is its only OUTPUT element, so the difference between two prefixes is
the cost of the element added. Every kind of job runs once on a small input first (not timed: the
first query of a session pays JVM code generation, Python workers and the data source's start).
Prints each job's time (its fastest run), trades/s, the ratios to the passthrough and to the
filter, the time each element adds (the join's over the filter), and the CPU seconds the run took
(its least): of this process and every process under it (the JVM, the bucket pool's workers,
Spark's Python workers, each with its reaped children's), from /proc, which on a shared machine
varies less than the time; each run's line on stderr splits it by process (``driver``: this
Python process, ``jvm``, ``pool``: the bucket pool's workers, ``other``). ``--json FILE`` writes
the same as data.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ccl.plan.planner import plan_project  # noqa: E402
from runtime.run_setup import RunOptions  # noqa: E402
from runtime.run import run_plan  # noqa: E402
from runtime.session import get_session  # noqa: E402

# The elements in order; {out} becomes OUTPUT on the last element of a prefix.
INPUTS = """
CREATE INPUT STREAM Trades
    SCHEMA (TradeId long, Sym string, Price float, Qty integer);

CREATE INPUT WINDOW Instruments
    SCHEMA (Sym string, Sector string, LotSize integer)
    PRIMARY KEY (Sym);
"""
ELEMENTS = [
    ("join", """
CREATE {out}STREAM Enriched
    PARTITION BY Trades HASH(Sym) PARTITIONS 4
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price Price, t.Qty Qty, i.Sector Sector
   FROM Trades t INNER JOIN Instruments i ON t.Sym = i.Sym;
"""),
    ("keep", """
CREATE {out}WINDOW Recent
    PRIMARY KEY (Sym, TradeId)
    KEEP 20 ROWS PER (Sym)
    PARTITION BY Enriched HASH(Sym) PARTITIONS 4
AS SELECT * FROM Enriched;
"""),
    ("agg", """
CREATE {out}WINDOW SymStats
    PRIMARY KEY DEDUCED
    PARTITION BY Recent HASH(Sym) PARTITIONS 4
AS SELECT r.Sym Sym, count(*) Trades, sum(r.Qty) Volume, avg(r.Price) AvgPrice,
          max(r.TradeId) LastId
   FROM Recent r
   GROUP BY r.Sym;
"""),
    ("flex", """
CREATE FLEX Moves
    IN SymStats
    OUT {out}STREAM Moves SCHEMA (Sym string, AvgPrice float, Change float, LastId long)
    PARTITION BY SymStats HASH(Sym) PARTITIONS 4
BEGIN
    DECLARE
        dictionary(string, float) lastAvg;
        typeof(Moves) rec;
    END;
    ON SymStats {
        rec.Sym := SymStats.Sym;
        rec.AvgPrice := SymStats.AvgPrice;
        rec.LastId := SymStats.LastId;
        if (isnull(lastAvg[SymStats.Sym])) {
            rec.Change := 0.0;
        } else {
            rec.Change := SymStats.AvgPrice - lastAvg[SymStats.Sym];
        }
        lastAvg[SymStats.Sym] := SymStats.AvgPrice;
        output setOpcode(rec, insert);
    };
END;
"""),
]
PREFIXES = {"join": 1, "join+keep": 2, "join+keep+agg": 3, "full": 4}
FILTER = INPUTS + """
CREATE OUTPUT STREAM Picked AS SELECT * FROM Trades t WHERE t.Qty > 0;
"""
PROJECT = INPUTS + "".join(text.replace("{out}", "OUTPUT ") for _, text in ELEMENTS)


def project_text(elements: int) -> str:
    """The CCL of the first ``elements`` derived elements, the last one an OUTPUT element."""
    parts = [text.replace("{out}", "OUTPUT " if k == elements - 1 else "")
             for k, (_, text) in enumerate(ELEMENTS[:elements])]
    return INPUTS + "".join(parts)


def generate(directory: str, rows: int, instruments: int, files: int) -> str:
    """``rows`` trades over ``files`` CSV files (header, increasing TradeId) in ``directory``/trades
    and the instruments in ``directory``/instruments.csv; returns the trades directory."""
    rnd = random.Random(7)
    syms = [f"S{k:05d}" for k in range(instruments)]
    trades = os.path.join(directory, "trades")
    os.makedirs(trades, exist_ok=True)
    with open(os.path.join(directory, "instruments.csv"), "w") as out:
        out.write("Sym,Sector,LotSize\n")
        out.write("".join(f"{s},SEC{k % 11},{100 * (1 + k % 5)}\n" for k, s in enumerate(syms)))
    per, trade_id = rows // files, 0
    for f in range(files):
        lines = ["TradeId,Sym,Price,Qty\n"]
        for _ in range(per if f < files - 1 else rows - per * (files - 1)):
            trade_id += 1
            lines.append(f"{trade_id},{rnd.choice(syms)},{rnd.randrange(1, 10**6) / 100:.2f},"
                         f"{rnd.randrange(1, 1000)}\n")
        with open(os.path.join(trades, f"part{f:03d}.csv"), "w") as out:
            out.write("".join(lines))
    return trades


def _processes() -> dict[int, tuple[int, int, str]]:
    """Every process of /proc: pid -> (parent pid, CPU ticks with its reaped children's, command
    line); empty without /proc."""
    found: dict[int, tuple[int, int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rfind(")") + 2:].split()
        found[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]), command)
    return found


def process_cpu() -> dict[str, float]:
    """CPU seconds (user and system, each process with the children it reaped) of this process
    (``driver``) and its live descendants by kind: ``jvm`` (Java), ``pool`` (the bucket pool's
    spawned workers), ``other`` (Spark's Python workers and anything else); empty without /proc."""
    procs = _processes()
    if not procs:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    kinds = {"driver": 0.0, "jvm": 0.0, "pool": 0.0, "other": 0.0}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if pid not in procs:
            continue
        command = procs[pid][2]
        kind = ("driver" if pid == os.getpid() else "jvm" if "java" in command.split(" ")[0]
                else "pool" if "multiprocessing" in command else "other")
        kinds[kind] += procs[pid][1] / tick
    return kinds


def _timed(start: Callable[[], object]) -> float:
    began = time.perf_counter()
    query = start()
    if query is not None and hasattr(query, "awaitTermination"):
        query.awaitTermination()
    return time.perf_counter() - began


def passthrough(spark, data: str, work: str) -> float:
    """The trade files read by Spark's CSV source into the noop sink, availableNow."""
    df = (spark.readStream.schema("TradeId long, Sym string, Price double, Qty int")
          .option("header", True).csv(os.path.join(data, "trades")))
    return _timed(lambda: df.writeStream.format("noop").trigger(availableNow=True)
                  .option("checkpointLocation", os.path.join(work, "ck")).start())


def run_until_idle(spark, plan, data: str, work: str) -> tuple[float, dict]:
    """``plan`` run until idle on the trades and instruments of ``data`` (run directory and
    outputs under ``work``): its seconds and the run report's elements."""
    options = RunOptions(inputs={"Trades": os.path.join(data, "trades"),
                                 "Instruments": os.path.join(data, "instruments.csv")},
                         base_dir=work, run_dir=os.path.join(work, "run"), until_idle=True)
    result = {}

    def go() -> None:
        result["run"] = run_plan(spark, plan, options, os.path.join(work, "out"))
    seconds = _timed(go)
    return seconds, result["run"].report["elements"]


def compiled(spark, data: str, work: str, elements: int) -> float:
    """A prefix of the project (``elements`` derived elements; 0: ``FILTER``) run until idle;
    its seconds."""
    path = os.path.join(work, "p.ccl")
    with open(path, "w") as f:
        f.write(project_text(elements) if elements else FILTER)
    plan, diags = plan_project(path)
    if plan is None:
        raise SystemExit("\n".join(str(d) for d in diags))
    seconds, report = run_until_idle(spark, plan, data, work)
    # every derived element saw rows (the join matched): a broken prefix is not timed as fast
    assert all(stats["rows_in"] > 0 for name, stats in report.items() if name != "Instruments"), report
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Run the jobs, print the table, write ``--json``; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000, help="trades (default 400,000)")
    ap.add_argument("--instruments", type=int, default=2_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds (every job once per round); each job's fastest run counts")
    ap.add_argument("--only", default="", help="comma-separated job names: passthrough,filter,"
                    + ",".join(PREFIXES))
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)
    only = [j for j in args.only.split(",") if j]
    unknown = [j for j in only if j not in ("passthrough", "filter") and j not in PREFIXES]
    if unknown:
        ap.error(f"--only: unknown job(s) {', '.join(unknown)}")
    if args.rows < args.files or args.files < 1 or args.instruments < 1 or args.repeat < 1:
        ap.error("--rows >= --files >= 1, --instruments >= 1 and --repeat >= 1 are required")
    root = tempfile.mkdtemp(prefix="ccl-bench-project-")
    data = os.path.join(root, "data")
    generate(data, args.rows, args.instruments, args.files)
    spark = get_session("local[2]", "ccl-bench-project", 2, conf={"spark.driver.memory": "4g"})
    jobs: dict[str, Callable[[str], float]] = {"passthrough": lambda w: passthrough(spark, data, w)}
    steps = {"filter": 0, **PREFIXES}
    for name, n in steps.items():
        jobs[name] = lambda w, n=n: compiled(spark, data, w, n)
    chosen = [name for name in jobs if not only or name in only]
    times: dict[str, list[float]] = {name: [] for name in chosen}
    cpus: dict[str, list[float]] = {name: [] for name in chosen}
    kinds: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
    try:
        warm = os.path.join(root, "warm")
        generate(os.path.join(warm, "data"), 2000, min(args.instruments, 100), 2)
        for name in chosen:
            work = os.path.join(warm, name)
            os.makedirs(work)
            (passthrough(spark, os.path.join(warm, "data"), work) if name == "passthrough"
             else compiled(spark, os.path.join(warm, "data"), work, steps[name]))
        for attempt in range(args.repeat):
            for name in chosen:
                work = os.path.join(root, f"{name}-{attempt}")
                os.makedirs(work)
                before = process_cpu()
                times[name].append(jobs[name](work))
                spent = {k: v - before.get(k, 0.0) for k, v in process_cpu().items()}
                cpus[name].append(sum(spent.values()) if spent else float("nan"))
                kinds[name].append(spent)
                shutil.rmtree(work, ignore_errors=True)
                print(f"  {name} run {attempt + 1}: {times[name][-1]:.2f} s, {cpus[name][-1]:.2f} CPU s ("
                      + ", ".join(f"{k} {v:.2f}" for k, v in spent.items()) + ")",
                      file=sys.stderr, flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    best = {name: min(t) for name, t in times.items()}
    base, filtered = best.get("passthrough"), best.get("filter")
    print(f"{args.rows:,} trades, {args.instruments:,} instruments, {args.files} files, local[2], "
          f"fastest of {args.repeat} run(s)")
    print(f"{'job':>14} {'seconds':>8} {'trades/s':>11} {'÷ passthrough':>14} {'÷ filter':>9} "
          f"{'element adds':>13} {'CPU s':>7}")
    results = []
    previous = None
    for name in chosen:
        seconds = best[name]
        rate = args.rows / seconds
        ratio = base / seconds if base else None
        to_filter = filtered / seconds if filtered else None
        adds = (seconds - best[previous]) if previous in best and name in PREFIXES else None
        if name == "join" and "filter" in best:
            adds = seconds - best["filter"]
        print(f"{name:>14} {seconds:8.2f} {rate:11,.0f} "
              f"{(f'{ratio:.3f}' if ratio is not None else '-'):>14} "
              f"{(f'{to_filter:.3f}' if to_filter is not None else '-'):>9} "
              f"{(f'{adds:+.2f} s' if adds is not None else '-'):>13} {min(cpus[name]):7.2f}"
              + (f"  (runs: {', '.join(f'{t:.2f}' for t in times[name])}; CPU s: "
                 f"{', '.join(f'{t:.2f}' for t in cpus[name])})" if len(times[name]) > 1 else ""))
        results.append({"job": name, "seconds": seconds, "runs": times[name],
                        "median_seconds": statistics.median(times[name]), "rows_per_second": rate,
                        "ratio_to_passthrough": ratio, "ratio_to_filter": to_filter,
                        "adds_seconds": adds, "cpu_seconds": min(cpus[name]), "cpu_runs": cpus[name],
                        "cpu_by_process": kinds[name]})
        previous = name
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "instruments": args.instruments, "files": args.files,
                       "repeat": args.repeat, "master": "local[2]", "jobs": results,
                       "load_average_at_end": os.getloadavg()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
