"""Where a one-row micro-batch's time goes, and what it costs, in a continuous ``ccl run``.

    python bench/batch_cost.py [--hops 3] [--events 10] [--empty 5] [--strace] [--json FILE]

Runs the project of ``bench/latency.py`` (``--hops 1`` or ``3``) as ``ccl run`` continuous, in a
child process instrumented from outside the runtime (the runtime has no probe of its own): the
child wraps, before ``ccl run`` starts, the project query's batch function and the functions it
calls (``runtime.project_query``, ``runtime.arrow_frames``, ``runtime.inputs.file_input``), py4j's
``send_command`` and the bucket pool. Per batch it records, as JSON lines:

- the batch function's start and end (epoch seconds) and each phase's start and end;
- the py4j round trips the batch's thread made (count, seconds), those of the probe left out;
- Spark jobs: the DAG scheduler's next job id at the end of each batch (the jobs from one
  batch's end to the next one's end are that batch's, Spark's own listing included);
- the buckets run and those handed to the pool's worker processes.

The parent publishes one event at a time (as ``bench/latency.py`` does), then ``--empty``
header-only files, and reads Spark's checkpoint: trigger time (``offsets/N``) and commit
(``commits/N``'s mtime), so each batch splits into: Spark before the batch function (trigger,
listing, offsets log), the function's phases, and Spark after it (commit). With ``--strace`` the
counted events run under ``strace -f`` of the driver and its JVM (slower: its times are not
latencies): files opened for writing, renames, fsyncs, unlinks and mkdirs per batch, by
directory of the run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from typing import Any, Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
# bench/runtime.py would shadow the runtime package: this directory is not on the path
sys.path[:] = [ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != BENCH]


def _latency() -> Any:
    """bench/latency.py as a module."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("latency", os.path.join(BENCH, "latency.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["latency"] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------ the child

class _Probe:
    """The running batch's record (one batch at a time: the project's query is one thread)."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.rec: Optional[dict] = None
        self.batch_thread: Optional[int] = None
        self.paused = threading.local()
        self.last_job: Optional[int] = None

    def phase(self, name: str, fn: Callable) -> Callable:
        probe = self

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            rec = probe.rec
            if rec is None:
                return fn(*args, **kwargs)
            t0 = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                main = threading.get_ident() == probe.batch_thread
                with probe.lock:
                    rec["phases"].append([name, t0, time.time(), main])
        wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
        return wrapped


def _child(trace: str, argv: list[str]) -> int:
    import py4j.clientserver
    import py4j.java_gateway

    import runtime.arrow_frames as af
    import runtime.bucket_pool as bp
    import runtime.inputs.file_input as fi
    import runtime.project_query as pq
    import runtime.run as run_mod

    probe = _Probe(trace)

    def counting(cls: Any) -> None:
        send = cls.send_command

        def send_command(self: Any, command: str, *a: Any, **k: Any) -> Any:
            rec = probe.rec
            if rec is None or getattr(probe.paused, "on", False) or threading.get_ident() != probe.batch_thread:
                return send(self, command, *a, **k)
            t0 = time.perf_counter()
            try:
                return send(self, command, *a, **k)
            finally:
                rec["py4j"] += 1
                rec["py4j_s"] += time.perf_counter() - t0
                rec["py4j_kinds"][command.split("\n", 1)[0]] += 1
        cls.send_command = send_command
    counting(py4j.clientserver.ClientServerConnection)
    counting(py4j.java_gateway.GatewayConnection)

    for name in ("_bytes", "_stage_table", "_written", "_expired", "_remove_ticks", "batch_clock",
                 "prune", "_error_rows", "_collected", "_stage_rows"):
        setattr(pq, name, probe.phase(name, getattr(pq, name)))
    pq.WriteBehind.wait = probe.phase("behind.wait", pq.WriteBehind.wait)
    submit = pq.WriteBehind.submit
    pq.WriteBehind.submit = lambda self, write: submit(self, probe.phase("write", write))
    af.input_frame = probe.phase("input_frame", af.input_frame)
    af.processor_input = probe.phase("processor_input", af.processor_input)
    fi.rows_here = probe.phase("rows_here", fi.rows_here)
    fi.file_numbers = probe.phase("file_numbers", fi.file_numbers)
    engine = probe.phase("run_buckets", bp.run_buckets)

    def run_buckets(runner_args: tuple, proc_in: Any, element: Any, workers: int, parallel_rows: int) -> Any:
        rec = probe.rec
        if rec is not None and proc_in is not None and proc_in.num_rows:
            import pyarrow.compute as pc
            rec["buckets"] += len(pc.unique(proc_in.column("__bucket")))
        return engine(runner_args, proc_in, element, workers, parallel_rows)
    pq.run_buckets = run_buckets
    in_pool = bp._in_pool

    def _in_pool(runner_args: tuple, parts: list, workers: int) -> Any:
        if probe.rec is not None:
            probe.rec["pool_tasks"] += len(parts)
        return in_pool(runner_args, parts, workers)
    bp._in_pool = _in_pool

    timed_batches = run_mod.timed_batches

    def probed_batches(write: Callable, dirs: Any, query: str) -> Callable:
        inner = timed_batches(write, dirs, query)
        collect_patched = []

        def batch(df: Any, batch_id: int) -> None:
            if not collect_patched:
                cls = type(df)
                cls.collect = probe.phase("collect", cls.collect)
                collect_patched.append(cls)
            probe.batch_thread = threading.get_ident()
            probe.rec = rec = {"query": query, "batch": batch_id, "start": time.time(), "phases": [],
                               "py4j": 0, "py4j_s": 0.0, "py4j_kinds": Counter(), "buckets": 0,
                               "pool_tasks": 0}
            try:
                inner(df, batch_id)
            finally:
                rec["end"] = time.time()
                probe.rec = None
                probe.paused.on = True
                try:
                    sc = df.sparkSession.sparkContext
                    job = sc._jsc.sc().dagScheduler().nextJobId()
                    rec["next_job"] = int(job if isinstance(job, int) else job.get())
                except Exception as exc:  # noqa: BLE001 (a probe: report, do not fail the batch)
                    rec["next_job_error"] = repr(exc)[:200]
                finally:
                    probe.paused.on = False
                with open(probe.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
        return batch
    run_mod.timed_batches = probed_batches

    # Spark's own split of each batch (StreamingQueryProgress.durationMs), written by a listener
    from pyspark.sql.streaming import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            with open(probe.out + ".progress", "a") as f:
                f.write(json.dumps({"batch": p.batchId, "rows": p.numInputRows,
                                    "durationMs": dict(p.durationMs)}) + "\n")

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    started = run_mod._started
    listening = []

    def _started(spark: Any, *a: Any, **k: Any) -> Any:
        if not listening:
            spark.streams.addListener(Progress())
            listening.append(True)
        return started(spark, *a, **k)
    run_mod._started = _started

    from ccl.cli.main import main
    return main(argv)


# ----------------------------------------------------------------------------------- the parent

def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(p)], capture_output=True, text=True).stdout
        except OSError:
            break
        kids = [int(x) for x in out.split()]
        found += kids
        todo += kids
    return found


_STRACE_CALLS = "openat,open,creat,rename,renameat,renameat2,fsync,fdatasync,unlink,unlinkat,mkdir,mkdirat"


def _strace_counts(path: str, run_dir: str, batches: int) -> dict:
    """Per call kind and run directory part, the calls per batch in a strace -f output."""
    counts: Counter = Counter()
    fds_fsync = Counter()
    run_dir = os.path.realpath(run_dir)
    line_re = re.compile(r"^(\d+)\s+[\d:.]+\s+(\w+)\((.*)$")
    with open(path, errors="replace") as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            call, rest = m.group(2), m.group(3)
            if "= -1" in rest and call not in ("fsync", "fdatasync"):
                continue  # failed (ENOENT probes and the like)
            if call in ("fsync", "fdatasync"):
                fds_fsync[call] += 1
                counts[(call, "")] += 1
                continue
            paths = re.findall(r'"([^"]*)"', rest)
            if not paths:
                continue
            target = paths[-1] if call.startswith("rename") else paths[0]
            if call in ("openat", "open", "creat") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT", rest):
                continue
            where = "(elsewhere)"
            if target.startswith(run_dir):
                parts = os.path.relpath(target, run_dir).split(os.sep)
                where = "/".join(parts[:2]) if parts[0] in ("project_query",) else parts[0]
            elif target.startswith("/tmp") or "/tmp/" in target:
                where = "(tmp)"
            kind = {"openat": "open-write", "open": "open-write", "creat": "open-write"}.get(call, call)
            kind = {"renameat": "rename", "renameat2": "rename", "unlinkat": "unlink", "mkdirat": "mkdir"}.get(kind, kind)
            counts[(kind, where)] += 1
    per: dict = defaultdict(dict)
    for (kind, where), n in sorted(counts.items()):
        per[kind][where or "all"] = round(n / max(batches, 1), 2)
    return {k: dict(v) for k, v in per.items()}


def _checkpoint_batches(run_dir: str) -> dict[int, tuple[float, float]]:
    from latency import PROJECT_QUERY, query_batches
    return {b.batch_id: (b.start, b.end) for b in query_batches(run_dir).get(PROJECT_QUERY, [])}


def _summarise(recs: list[dict], spark_batches: dict, prev_job: dict, progress: dict) -> dict:
    """Medians per batch of the phases (inclusive seconds), the Spark parts, the counts."""
    phases: dict[str, list[float]] = defaultdict(list)
    other: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        per: Counter = Counter()
        for name, t0, t1, main in r["phases"]:
            per[name + ("" if main else " (write-behind thread)")] += t1 - t0
        for k, v in per.items():
            phases[k].append(v)
        other["batch function"].append(r["end"] - r["start"])
        other["py4j round trips"].append(r["py4j"])
        other["py4j seconds"].append(r["py4j_s"])
        other["buckets run"].append(r["buckets"])
        other["pool tasks (Python worker round trips)"].append(r["pool_tasks"])
        sb = spark_batches.get(r["batch"])
        if sb is not None:
            other["trigger -> batch function"].append(r["start"] - sb[0])
            other["batch function -> commit"].append(sb[1] - r["end"])
            other["trigger -> commit"].append(sb[1] - sb[0])
        for k, v in progress.get(r["batch"], {}).items():
            other["spark durationMs " + k].append(v / 1000.0)
        if "next_job" in r and r["batch"] - 1 in prev_job:
            other["Spark jobs"].append(r["next_job"] - prev_job[r["batch"] - 1])
    med = lambda v: round(statistics.median(v), 4) if v else None  # noqa: E731
    kinds: Counter = Counter()
    for r in recs:
        kinds.update(r["py4j_kinds"])
    return {"batches": len(recs),
            "median": {k: med(v) for k, v in other.items()},
            "min": {k: round(min(v), 4) for k, v in other.items() if v},
            "phases_median": {k: med(v) for k, v in sorted(phases.items(), key=lambda kv: -sum(kv[1]))},
            "py4j_commands_per_batch": {k: round(n / max(len(recs), 1), 2) for k, n in kinds.most_common(12)}}


def main(argv: Optional[list[str]] = None) -> int:
    """Measure; print a JSON summary (and write it to ``--json``)."""
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--child":
        return _child(sys.argv[2], sys.argv[3:])
    lat = _latency()

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hops", type=int, default=3, choices=(1, 3))
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--empty", type=int, default=5)
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--poll", default=None, help="--poll-interval for ccl run (default: the run's)")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    element, column, text = lat.PROJECTS[args.hops]
    work = tempfile.mkdtemp(prefix=f"ccl-bench-batchcost-{args.hops}-")
    staging, inputs, run_dir = (os.path.join(work, d) for d in ("staging", "trades", "ck"))
    os.makedirs(staging)
    os.makedirs(inputs)
    ccl_file = os.path.join(work, "p.ccl")
    with open(ccl_file, "w") as f:
        f.write(text)
    with open(os.path.join(work, "instruments.csv"), "w") as f:
        f.write("Sym,Sector,LotSize\n" + "".join(f"S{k:03d},SEC{k % 7},{100 * (1 + k % 5)}\n"
                                                  for k in range(lat.INSTRUMENTS)))
    trace = os.path.join(work, "trace.jsonl")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", trace, "run", ccl_file, "--master", "local[2]",
           "--checkpoint", run_dir, "--output-dir", os.path.join(work, "out"), "--input", f"Trades={inputs}"]
    if args.hops == 3:
        cmd += ["--input", f"Instruments={os.path.join(work, 'instruments.csv')}"]
    if args.poll:
        cmd += ["--poll-interval", args.poll]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    log = open(os.path.join(work, "run.log"), "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    target = lat.RunTarget(work, ccl_file, args.hops, env)
    target.proc, target.log = proc, log
    watcher = lat.ChangeWatcher(os.path.join(run_dir, "changelog", element), column)
    strace = None
    result: dict = {"hops": args.hops, "events": args.events, "load_average_start": os.getloadavg()}
    try:
        if args.hops == 3:
            lat._wait_for_instruments(target, 600)
        k = 0
        counted_from = None
        latencies = []
        for n in range(lat.WARM_EVENTS + args.events):
            if n == lat.WARM_EVENTS:
                time.sleep(0.5)  # the last warm-up batch's commit
                with open(trace) as f:
                    counted_from = sum(1 for _ in f)
                if args.strace:
                    pids = [proc.pid] + _descendants(proc.pid)
                    strace_out = os.path.join(work, "strace.txt")
                    strace = subprocess.Popen(["strace", "-f", "-tt", "-qq", "-e", "trace=" + _STRACE_CALLS,
                                               "-o", strace_out] + sum((["-p", str(p)] for p in pids), []),
                                              stderr=subprocess.DEVNULL)
                    time.sleep(2.0)
            trade_id = 1000 + n
            published = os.stat(lat.ws.publish_file(lat.write_event(staging, k, trade_id), inputs)).st_ctime
            k += 1
            seen = watcher.wait_for(trade_id, 600 if n == 0 else 120)
            if seen is None:
                raise RuntimeError(f"event {trade_id} not seen; log:\n{lat._log_of(target)[-3000:]}")
            if n >= lat.WARM_EVENTS:
                latencies.append(seen - published)
            print(f"  event {n + 1}: {seen - published:.3f} s", file=sys.stderr, flush=True)
        time.sleep(1.0)
        with open(trace) as f:
            events_end = sum(1 for _ in f)
        if strace is not None:
            strace.send_signal(signal.SIGINT)
            strace.wait(30)
            result["files_per_one_row_batch"] = _strace_counts(strace_out, run_dir, events_end - counted_from)
        for _ in range(args.empty):
            published = os.stat(lat.ws.publish_file(lat.write_event(staging, k, 0, header_only=True), inputs)).st_ctime
            k += 1
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with open(trace) as f:
                    if sum(1 for _ in f) > events_end:
                        break
                time.sleep(0.02)
            time.sleep(0.5)
            with open(trace) as f:
                events_end = sum(1 for _ in f)
        time.sleep(1.0)
        recs = [json.loads(line) for line in open(trace)]
        spark_batches = _checkpoint_batches(run_dir)
        prev_job = {r["batch"]: r["next_job"] for r in recs if "next_job" in r}
        progress = {}
        if os.path.exists(trace + ".progress"):
            for line in open(trace + ".progress"):
                p = json.loads(line)
                progress[p["batch"]] = p["durationMs"]
        one_row = recs[counted_from:counted_from + args.events]
        empty = recs[counted_from + args.events:]
        result["latency"] = lat.summary(latencies)
        result["one_row_batch"] = _summarise(one_row, spark_batches, prev_job, progress)
        result["empty_batch"] = _summarise(empty, spark_batches, prev_job, progress)
        result["load_average_end"] = os.getloadavg()
    finally:
        if strace is not None and strace.poll() is None:
            strace.kill()
        target.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
