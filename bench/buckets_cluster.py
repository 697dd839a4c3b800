"""Buckets that follow the cluster (issue 27): a project whose per-instance elements are partitioned
16 ways runs on a local standalone cluster of two workers with N buckets, is stopped, and resumed
with 2N buckets (its state moved by runtime/rebucket.py, ``spark.sql.shuffle.partitions`` raised
to 2N) on more data; a third run has 2N buckets from the start on all the data.

    python bench/buckets_cluster.py [--buckets 4] [--files 2] [--rows 15000] [--pad 60]
                                    [--collect-bytes 1048576] [--cores 1] [--memory 1g] [--dir ...]

Each run finds ``--files`` new input files of ``--rows`` rows (about 70 bytes each) and takes them
in one batch of the project's query (a file limit per batch, ``max_files_per_batch``, would take
the elements out of the project's query, and the state of elements outside it is not moved
between buckets). The batch's bytes are above ``--collect-bytes`` (RunOptions.collect_bytes,
lowered from the cluster's 8 MiB so that the batches stay quick on a small machine), so it runs on
the executors: the bucket groups of each per-instance element in one ``applyInArrow`` stage. Each run is a driver process of
its own (``run_plan``) with Spark's event log on; from the log, per batch and element stage
(``FlatMapGroupsInArrow``), the tasks, the executors (worker) that ran them, and the shuffle rows
each read. The outputs of the resumed run must equal those of the 2N-bucket run.

Prints a Markdown table and the verdict; exits 1 when the outputs differ or a run fails.
"""
from __future__ import annotations

import argparse
import collections
import csv
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PROJECT = """
CREATE INPUT STREAM Orders SCHEMA (Id long, Acct string, Qty integer, Note string);
CREATE OUTPUT WINDOW Recent PRIMARY KEY (Acct, Id) KEEP 3 ROWS PER (Acct)
    PARTITION BY Orders HASH(Acct) PARTITIONS 16
AS SELECT o.Id Id, o.Acct Acct, o.Qty Qty FROM Orders o;
CREATE FLEX Totals IN Orders OUT OUTPUT STREAM Running SCHEMA (Acct string, N integer, Qty long)
    PARTITION BY Orders HASH(Acct) PARTITIONS 16
BEGIN
    DECLARE dictionary(string, integer) n; dictionary(string, long) qty; END;
    ON Orders {
        if (isnull(n[Orders.Acct])) { n[Orders.Acct] := 0; qty[Orders.Acct] := 0; }
        n[Orders.Acct] := n[Orders.Acct] + 1;
        qty[Orders.Acct] := qty[Orders.Acct] + Orders.Qty;
        if (n[Orders.Acct] % 50 = 0) {
            output [Acct = Orders.Acct; N = n[Orders.Acct]; Qty = qty[Orders.Acct];];
        }
    };
END;
"""

ACCOUNTS = 400


def write_files(directory: str, first: int, count: int, rows: int, pad: int) -> None:
    """Input files ``o{first:04d}.csv`` ... (one batch each, in name order)."""
    os.makedirs(directory, exist_ok=True)
    for f in range(first, first + count):
        rnd = random.Random(f)
        path = os.path.join(directory, f"o{f:04d}.csv")
        with open(path + ".tmp", "w", newline="", encoding="utf-8") as out:
            w = csv.writer(out)
            w.writerow(["Id", "Acct", "Qty", "Note"])
            for i in range(rows):
                w.writerow([f * rows + i, f"A{rnd.randrange(ACCOUNTS):04d}", rnd.randrange(1, 500),
                            "x" * pad])
        os.replace(path + ".tmp", path)


# --------------------------------------------------------------------------------------------------
# One run: a driver process of its own
# --------------------------------------------------------------------------------------------------

def drive(args: argparse.Namespace) -> None:
    """``--phase run``: plan the project, run it until idle on the cluster, write the outputs."""
    from ccl.plan.planner import plan_project
    from runtime.run import run_plan
    from runtime.run_setup import RunOptions
    from runtime.session import get_session, stop_session

    plan, diags = plan_project(args.ccl)
    if plan is None:
        raise SystemExit("\n".join(map(str, diags)))
    spark = get_session(args.master, app_name=args.app, shuffle_partitions=args.shuffle,
                        conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": args.events,
                              # one plain JSON-lines file (Spark 4 rolls and compresses by default)
                              "spark.eventLog.rolling.enabled": "false",
                              "spark.eventLog.compress": "false",
                              "spark.executor.memory": args.executor_memory,
                              "spark.cores.max": str(args.cores_max)},
                        log_level="ERROR")
    try:
        options = RunOptions(inputs={"Orders": args.inputs}, base_dir=os.path.dirname(args.ccl),
                             run_dir=args.run, until_idle=True, buckets=args.run_buckets,
                             collect_bytes=args.collect_bytes)
        began = time.monotonic()
        run_plan(spark, plan, options, args.out)
        print(json.dumps({"seconds": time.monotonic() - began,
                          "app": spark.sparkContext.applicationId}))
    finally:
        stop_session(spark)


# --------------------------------------------------------------------------------------------------
# The event log
# --------------------------------------------------------------------------------------------------

def arrow_stages(event_log: str) -> list[dict]:
    """Per stage that runs an ``applyInArrow`` (an RDD of the ``FlatMapGroupsInArrow`` scope whose
    tasks read the bucket groups' shuffle; stages that only read its persisted output again are
    left out): the streaming batch, the tasks, and per executor (named by its worker's address)
    its tasks and the shuffle rows they read."""
    executors: dict[str, str] = {}
    stage_batch: dict[int, Optional[int]] = {}
    stage_execution: dict[int, str] = {}
    element_columns: dict[str, str] = {}  # SQL execution -> the columns its applyInArrow outputs
    arrow: dict[int, dict] = {}
    tasks: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)
    with open(event_log, encoding="utf-8") as f:
        for line in f:
            ev = json.loads(line)
            kind = ev.get("Event")
            if kind == "SparkListenerExecutorAdded":
                info = ev["Executor Info"]
                logs = info.get("Log Urls") or {}
                # the worker's web UI port tells the two workers on 127.0.0.1 apart
                url = next(iter(logs.values()), "")
                worker = url.split("//", 1)[-1].split("/", 1)[0] if url else info.get("Host")
                executors[ev["Executor ID"]] = worker
            elif kind and kind.endswith("SparkListenerSQLExecutionStart"):
                cols = _arrow_output(ev.get("physicalPlanDescription") or "")
                if cols:
                    element_columns[str(ev.get("executionId"))] = cols
            elif kind == "SparkListenerJobStart":
                props = ev.get("Properties") or {}
                batch = props.get("streaming.sql.batchId")
                for sid in ev.get("Stage IDs") or []:
                    stage_batch[sid] = int(batch) if batch is not None else None
                    stage_execution[sid] = str(props.get("spark.sql.execution.id"))
            elif kind == "SparkListenerStageCompleted":
                st = ev["Stage Info"]
                scopes = {json.loads(r["Scope"])["name"] for r in st.get("RDD Info") or []
                          if r.get("Scope")}
                if any("FlatMapGroupsInArrow" in s for s in scopes):
                    arrow[st["Stage ID"]] = {"stage": st["Stage ID"], "tasks": st["Number of Tasks"]}
            elif kind == "SparkListenerTaskEnd":
                info, metrics = ev["Task Info"], ev.get("Task Metrics") or {}
                read = (metrics.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0)
                tasks[ev["Stage ID"]].append((info["Executor ID"], int(read)))
    out = []
    for sid, st in sorted(arrow.items()):
        per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for executor, read in tasks[sid]:
            per[executor][0] += 1
            per[executor][1] += read
        if not any(rows for _, rows in per.values()):
            continue  # a later stage over the persisted output: it does not run the buckets
        st.update(batch=stage_batch.get(sid),
                  columns=element_columns.get(stage_execution.get(sid, ""), "?"),
                  executors={f"{e} ({executors.get(e, '?')})": tuple(v) for e, v in sorted(per.items())})
        out.append(st)
    return out


def _arrow_output(plan_text: str) -> str:
    """The element's own columns (not the runtime's ``__`` ones) that the ``FlatMapGroupsInArrow``
    of a SQL execution's plan outputs: they tell which element's bucket function it runs."""
    at = plan_text.find(") FlatMapGroupsInArrow\n")
    if at < 0:
        return ""
    for line in plan_text[at:].splitlines()[1:6]:
        if line.startswith("Arguments:"):
            last = line.rsplit("[", 1)[-1].rstrip("]")
            names = [c.strip().split("#", 1)[0] for c in last.split(",")]
            return ", ".join(n for n in names if n and not n.startswith("__"))
    return ""


def outputs(out_dir: str) -> dict[str, list[tuple]]:
    """The final contents of Recent and the rows of Running, sorted."""
    got = {}
    for name in ("Recent", "Running"):
        with open(os.path.join(out_dir, name + ".csv"), newline="", encoding="utf-8") as f:
            got[name] = sorted(tuple(sorted(r.items())) for r in csv.DictReader(f))
    return got


# --------------------------------------------------------------------------------------------------
# The bench
# --------------------------------------------------------------------------------------------------

def run_phase(args: argparse.Namespace, work: str, master: str, label: str, run: str,
              buckets: int, cores_max: int) -> dict:
    events = os.path.join(work, "events", label)
    os.makedirs(events, exist_ok=True)
    out = os.path.join(work, "out", label)
    from ccl.ops.deploy import python_env
    cmd = [sys.executable, os.path.abspath(__file__), "--phase", "run", "--master", master,
           "--app", f"buckets-{label}", "--ccl", os.path.join(work, "orders.ccl"),
           "--inputs", os.path.join(work, f"in-{run}"), "--run", os.path.join(work, f"run-{run}"),
           "--out", out, "--events", events, "--run-buckets", str(buckets),
           "--shuffle", str(buckets), "--collect-bytes", str(args.collect_bytes),
           "--executor-memory", args.executor_memory, "--cores-max", str(cores_max)]
    done = subprocess.run(cmd, cwd=ROOT, env=python_env(), capture_output=True, text=True,
                          timeout=args.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"run {label} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    logs = glob.glob(os.path.join(events, "*"))
    result.update(label=label, buckets=buckets, out=out,
                  stages=arrow_stages(logs[0]) if len(logs) == 1 else [])
    return result


def report(results: list[dict]) -> None:
    """The table of applyInArrow stages per run, and each run's wall time."""
    print("| run | buckets | batch | applyInArrow stage (element's columns) | tasks "
          "| executor (worker): tasks, rows read |")
    print("|---|---|---|---|---|---|")
    for r in results:
        for st in r["stages"]:
            per = "; ".join(f"{e}: {t}, {rows}" for e, (t, rows) in st["executors"].items())
            print(f"| {r['label']} | {r['buckets']} | {st['batch']} | {st['stage']} ({st['columns']}) | "
                  f"{st['tasks']} | {per} |")
    for r in results:
        print(f"- {r['label']}: {r['seconds']:.1f} s, application {r['app']}")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--buckets", type=int, default=4, help="N: the first run's buckets (then 2N)")
    ap.add_argument("--files", type=int, default=2, help="files before and after the resume")
    ap.add_argument("--rows", type=int, default=15_000, help="rows per file")
    ap.add_argument("--pad", type=int, default=60, help="bytes of padding per row")
    ap.add_argument("--collect-bytes", type=int, default=1 << 20,
                    help="RunOptions.collect_bytes: a batch above it runs on the executors")
    ap.add_argument("--cores", type=int, default=1, help="each worker's cores")
    ap.add_argument("--memory", default="1g", help="each worker's memory")
    ap.add_argument("--executor-memory", default="768m")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=1800)
    # one run's driver (internal)
    ap.add_argument("--phase", choices=("bench", "run"), default="bench", help=argparse.SUPPRESS)
    for name in ("--master", "--app", "--ccl", "--inputs", "--run", "--out", "--events"):
        ap.add_argument(name, help=argparse.SUPPRESS)
    ap.add_argument("--run-buckets", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--shuffle", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cores-max", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase == "run":
        drive(args)
        return 0

    from ccl.ops.cluster import start_cluster, stop_cluster

    work = args.dir or tempfile.mkdtemp(prefix="ccl-buckets-cluster-")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "orders.ccl"), "w", encoding="utf-8") as f:
        f.write(PROJECT)
    n = args.buckets
    write_files(os.path.join(work, "in-split"), 0, args.files, args.rows, args.pad)
    write_files(os.path.join(work, "in-whole"), 0, 2 * args.files, args.rows, args.pad)
    size = os.path.getsize(os.path.join(work, "in-split", "o0000.csv"))
    print(f"work {work}; batches of {args.files} x {args.rows} rows, {args.files * size / 2**20:.1f} MiB "
          f"(collect_bytes {args.collect_bytes / 2**20:.1f} MiB)", flush=True)
    workspace = os.path.join(work, "ws")
    meta = start_cluster(workspace, port=0, webui_port=0, cores=args.cores, memory=args.memory,
                         worker_count=2, progress=lambda t: print(t, flush=True))
    cores_max = 2 * args.cores
    results = []
    try:
        results.append(run_phase(args, work, meta["master_url"], "first", "split", n, cores_max))
        write_files(os.path.join(work, "in-split"), args.files, args.files, args.rows, args.pad)
        results.append(run_phase(args, work, meta["master_url"], "resumed", "split", 2 * n, cores_max))
        results.append(run_phase(args, work, meta["master_url"], "from-start", "whole", 2 * n,
                                 cores_max))
    finally:
        stop_cluster(workspace)
    report(results)
    resumed, whole = outputs(results[1]["out"]), outputs(results[2]["out"])
    same = resumed == whole
    print(f"outputs of the resumed run (N={n} then {2 * n}) equal those of {2 * n} buckets from "
          f"the start: {same} (Recent {len(whole['Recent'])} rows, Running {len(whole['Running'])})")
    run_json = json.load(open(os.path.join(work, "run-split", "run.json")))
    print(f"run-split/run.json buckets: {run_json['buckets']}")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
