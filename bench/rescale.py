"""Moving a checkpoint to another PARTITIONS count (runtime/rescale.py) against the alternative,
running the project again from the start with the new count (issue 26).

    python bench/rescale.py [--project window|join|flex|agg|joinagg] [--keys 20000]
                            [--rows 100000] [--first 2] [--then 3] [--repeats 3]

The ``window`` project (tests/rescale_projects.py, which tests/test_rescale.py runs too): a KEEP
2 ROWS PER (Sym) window keyed by (Sym, TradeId) and a GROUP BY Sym aggregation on Spark's
group-by, both HASH(Sym) partitioned; ``join``: a window of the trades HASH(Sym) LEFT JOINed with
a broadcast window of ``--keys / 10`` symbols' names (the join's stores, indexes and counts move,
the names go to every instance); ``flex`` (tests/rescale_projects.py's too): a Flex HASH(Sym)
with two dictionaries and an event cache keyed by Sym; ``agg``: a GROUP BY Sym aggregation the
per-instance engine runs (its WHERE keeps it off Spark's group-by), each instance's groups spread
over the buckets (the groups, input and output keys, output rows move to their instance and
bucket); ``joinagg``: ``join``'s LEFT JOIN grouped by t.Sym (a join that aggregates: the join's
stores and the aggregate's groups move). The input is ``--rows``
trades over ``--keys`` symbols in 4 files. A checkpoint is made with ``--first``
instances on local[2]; then, ``--repeats`` times each on a copy of it: the move to ``--then``
(`rescale_run`: the state files and RocksDB stores of the window, the aggregation's snapshot, the
window's changelog) and a run of all the input with ``--then`` from an empty checkpoint. Prints
the median wall times and their ratio (times on a loaded machine vary: the ratio, measured in one
process, is the figure to compare).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ccl.plan.planner import plan_project  # noqa: E402
from ccl.plan.rescale import rescale_moves  # noqa: E402
from runtime.rescale import rescale_run  # noqa: E402
from runtime.run import run_plan  # noqa: E402
from runtime.run_setup import RunOptions  # noqa: E402
from runtime.session import get_session  # noqa: E402
from tests.rescale_projects import FLEX_PROJECT as FLEX, PROJECT  # noqa: E402


JOIN = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT WINDOW Trades SCHEMA (TradeId long, Sym string, Qty integer) PRIMARY KEY (TradeId);
CREATE INPUT WINDOW Names SCHEMA (Sym string, Name string) PRIMARY KEY (Sym);
CREATE OUTPUT WINDOW Named PRIMARY KEY (Sym, TradeId)
    PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
AS SELECT t.Sym Sym, t.TradeId TradeId, t.Qty Qty, n.Name Name
   FROM Trades t LEFT JOIN Names n ON t.Sym = n.Sym;
"""


AGG = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE OUTPUT WINDOW Totals PRIMARY KEY DEDUCED
    PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
AS SELECT t.Sym, sum(t.Qty) Qty, count(*) N FROM Trades t WHERE t.Qty >= 0 GROUP BY t.Sym;
"""

JOINAGG = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT WINDOW Trades SCHEMA (TradeId long, Sym string, Qty integer) PRIMARY KEY (TradeId);
CREATE INPUT WINDOW Names SCHEMA (Sym string, Name string) PRIMARY KEY (Sym);
CREATE OUTPUT WINDOW Named PRIMARY KEY DEDUCED
    PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
AS SELECT t.Sym Sym, count(*) N, sum(t.Qty) Qty, max(n.Name) Name
   FROM Trades t LEFT JOIN Names n ON t.Sym = n.Sym GROUP BY t.Sym;
"""

PROJECTS = {"window": PROJECT, "join": JOIN, "flex": FLEX, "agg": AGG, "joinagg": JOINAGG}


def _names(directory: str, keys: int) -> None:
    os.makedirs(directory)
    with open(os.path.join(directory, "n.csv"), "w", encoding="utf-8") as f:
        f.write("Sym,Name\n")
        for k in range(0, keys, 10):
            f.write(f"S{k},Name {k}\n")


def _inputs(directory: str, rows: int, keys: int) -> None:
    os.makedirs(directory)
    per_file = rows // 4
    for b in range(4):
        with open(os.path.join(directory, f"t{b}.csv"), "w", encoding="utf-8") as f:
            f.write("TradeId,Sym,Qty\n")
            for i in range(per_file):
                n = b * per_file + i
                f.write(f"{n},S{(n * 7919) % keys},{n % 100}\n")


def _run(spark, path: str, parts: int, inputs: dict, run_dir: str, out: str) -> None:
    plan, diags = plan_project(path, params={"PARTS": str(parts)})
    assert plan is not None, [str(d) for d in diags]
    run_plan(spark, plan, RunOptions(inputs=inputs, run_dir=run_dir, buckets=2,
                                     base_dir=os.path.dirname(path)), out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", choices=sorted(PROJECTS), default="window")
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--first", type=int, default=2)
    ap.add_argument("--then", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-rescale-")
    try:
        path = os.path.join(work, "p.ccl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(PROJECTS[args.project])
        _inputs(os.path.join(work, "in"), args.rows, args.keys)
        inputs = {"Trades": os.path.join(work, "in")}
        if args.project in ("join", "joinagg"):
            _names(os.path.join(work, "names"), args.keys)
            inputs["Names"] = os.path.join(work, "names")
        spark = get_session("local[2]", app_name="bench-rescale", shuffle_partitions=2)
        checkpoint = os.path.join(work, "ck")
        _run(spark, path, args.first, inputs, checkpoint, os.path.join(work, "out"))
        old = plan_project(path, params={"PARTS": str(args.first)})[0]
        new = plan_project(path, params={"PARTS": str(args.then)})[0]
        moves, refused = rescale_moves(old, new)
        assert not refused, refused
        moved, rerun = [], []
        for r in range(args.repeats):
            copy = os.path.join(work, f"ck{r}")
            shutil.copytree(checkpoint, copy)
            began = time.perf_counter()
            rescale_run(copy, old, new, moves)
            moved.append(time.perf_counter() - began)
            began = time.perf_counter()
            _run(spark, path, args.then, inputs, os.path.join(work, f"fresh{r}"),
                 os.path.join(work, f"out{r}"))
            rerun.append(time.perf_counter() - began)
        spark.stop()
        m, f = statistics.median(moved), statistics.median(rerun)
        print(f"| project | keys | rows | move {args.first} -> {args.then} (s) | run again from "
              f"the start (s) | ratio |\n|---|---|---|---|---|---|\n"
              f"| {args.project} | {args.keys} | {args.rows} | {m:.2f} | {f:.2f} | {m / f:.2f} |")
        print(f"(medians of {args.repeats}; moves {[round(t, 2) for t in moved]}, runs "
              f"{[round(t, 2) for t in rerun]})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
