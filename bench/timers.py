"""What a project with a time KEEP costs while idle, and how late its rows leave.

    python bench/timers.py [--idle 10] [--keep 2] [--repeat 1] [--tree DIR]

Runs ``ccl run`` continuously (``--master local[2]``, a subprocess, the code of ``--tree``: this
checkout by default) on a project of an input stream, a window ``KEEP N SECONDS`` over it and an
aggregate over the window. Once a query has committed a batch, one file of three trades is put in
the input directory (written aside, then renamed). Reported per round:

- ``late``: from the window's changelog file with the inserts to the first one with deletes
  (their mtimes), minus the KEEP: how long after its deadline a row left;
- ``idle batches``: batches committed by any query (``DIR/project_query/commits`` and
  ``DIR/queries/*/commits``) over ``--idle`` seconds once the rows are gone.
"""
from __future__ import annotations

import argparse
import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE OUTPUT WINDOW Recent PRIMARY KEY (TradeId) KEEP {keep} SECONDS AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Counts PRIMARY KEY DEDUCED
AS SELECT r.Sym Sym, count(*) N FROM Recent r GROUP BY r.Sym;
"""


def _commits(run: str) -> int:
    return sum(1 for d in glob.glob(os.path.join(run, "*", "commits")) +
               glob.glob(os.path.join(run, "queries", "*", "commits"))
               for n in os.listdir(d) if n.isdigit())


def _first_with(run: str, op: str) -> float | None:
    import pyarrow.parquet as pq

    for path in sorted(glob.glob(os.path.join(run, "changelog", "Recent", "batch-*.parquet"))):
        if op in pq.read_table(path, columns=["__op"]).column("__op").to_pylist():
            return os.path.getmtime(path)
    return None


def _round(tree: str, keep: int, idle: float) -> dict:
    work = tempfile.mkdtemp(prefix="ccl-bench-timers-")
    ccl, data, run = os.path.join(work, "p.ccl"), os.path.join(work, "in"), os.path.join(work, "run")
    os.makedirs(data)
    with open(ccl, "w", encoding="utf-8") as f:
        f.write(PROJECT.format(keep=keep))
    env = {**os.environ, "PYTHONPATH": tree}
    proc = subprocess.Popen([sys.executable, "-m", "ccl.cli", "run", ccl, "--master", "local[2]",
                             "--checkpoint", run, "--input", f"Trades={data}",
                             "--output-dir", os.path.join(work, "out")],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        time.sleep(15)  # the queries start (no commit to wait for: an idle query commits nothing)
        hidden = os.path.join(data, ".t.csv")
        with open(hidden, "w", encoding="utf-8") as f:
            f.write("TradeId,Sym,Qty\n1,A,1\n2,A,2\n3,B,3\n")
        os.replace(hidden, os.path.join(data, "t.csv"))
        deadline = time.monotonic() + 300
        while _first_with(run, "d") is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        inserted, deleted = _first_with(run, "i"), _first_with(run, "d")
        if inserted is None or deleted is None:
            raise SystemExit(f"no rows expired: {proc.stderr.read().decode()[-2000:] if proc.poll() is not None else ''}")
        time.sleep(3)
        before = _commits(run)
        time.sleep(idle)
        return {"late": deleted - inserted - keep, "idle_batches": _commits(run) - before}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--keep", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args()
    for r in range(args.repeat):
        result = _round(args.tree, args.keep, args.idle)
        print(f"round {r + 1}: late {result['late']:.2f} s, {result['idle_batches']} batches in "
              f"{args.idle:.0f} s idle (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
