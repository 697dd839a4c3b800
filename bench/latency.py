"""Publish-to-subscribe latency of a running project, as a user sees it.

    python bench/latency.py [--mode run|cluster] [--events 20] [--hops 1,3] [--empty 5]
                            [--json FILE]

Two projects (``PROJECTS`` below):

- ``1-hop``: input stream ``Trades`` -> an output stream ``Out`` (``Price * Qty``, per instance).
- ``3-hop``: ``Trades`` joined with an input window ``Instruments`` -> a window ``KEEP 3 ROWS
  PER (Sym)`` over the join -> a ``GROUP BY Sym`` aggregate ``SymStats`` (count, sum, avg,
  ``max(TradeId) LastId``), each ``PARTITION BY ... HASH(Sym) PARTITIONS 2``.

Modes:

- ``run``: ``ccl run FILE.ccl --master local[2] --checkpoint DIR --input Trades=DIR ...``,
  continuous (no ``--until-idle``), in a subprocess. A user feeds it by putting a new file in the
  input directory (done here as ``ccl publish`` does it: written under a hidden name, then linked
  into place, ``ccl.ops.workspace.publish_file``) and sees its changes in the run directory's
  changelog (``DIR/changelog/ELEMENT/batch-N.parquet``, what ``ccl subscribe`` reads).
- ``cluster``: ``ccl cluster start --port 0 --webui-port 0 --cores 2 --memory 1g`` in a temporary
  workspace (``CCL_WORKSPACE``), ``ccl deploy``, one ``ccl publish NAME Trades FILE.csv`` per
  event, the changes read from the changelog files ``ccl subscribe`` reads; ``ccl stop`` and
  ``ccl cluster stop`` at the end whatever happens, then any process group left is killed.

Both use the default triggers: the project's one query looks for new files every
``runtime.poll_interval`` (100 ms); queries of elements with timers (none here) run every
``runtime.trigger_interval`` (1 second). Events go one at a
time: one trade (a new TradeId) per file; the next is published once the change of the last one
is visible. Latency is measured from the moment the file is in place in the input directory (its
inode's ctime: the link that makes it visible) to the moment a changelog file holding the
event's row (``Out.TradeId`` or ``SymStats.LastId`` equal to the event's id) is there, watched
every 5 ms (``ccl subscribe`` polls every 0.05 s by default, which adds 0-50 ms). In cluster mode
the time of the ``ccl publish`` command itself (a Python start) is reported apart. Two events are
sent first and not counted (the first batches of a query are slower). Every event's change must
arrive (within ``--timeout`` seconds), else the bench fails.

Micro-batch costs come from Spark's own query checkpoints (``DIR/project_query/`` for the project's
one query, shown as ``(project)``; ``DIR/queries/ELEMENT/`` for an element's own): a batch
starts at its ``batchTimestampMs`` (in ``offsets/N``, the trigger time) and ends when
``commits/N`` is written (its mtime). The one-row batches are those of the counted events; the
empty ones come from ``--empty`` files holding only a header line, published after the events
(a batch with a new file and no rows: the input query's batch). For every event the batches of
each query are matched to the event's time span, which splits its latency into waiting for a
trigger and running batches, per query.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ccl.ops import workspace as ws  # noqa: E402

TRADES_SCHEMA = """
CREATE INPUT STREAM Trades
    SCHEMA (TradeId long, Sym string, Price float, Qty integer);
"""
PROJECTS = {
    1: ("Out", "TradeId", TRADES_SCHEMA + """
CREATE OUTPUT STREAM Out
    PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price * t.Qty Notional
   FROM Trades t;
"""),
    3: ("SymStats", "LastId", TRADES_SCHEMA + """
CREATE INPUT WINDOW Instruments
    SCHEMA (Sym string, Sector string, LotSize integer)
    PRIMARY KEY (Sym);

CREATE STREAM Enriched
    PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price Price, t.Qty Qty, i.Sector Sector
   FROM Trades t INNER JOIN Instruments i ON t.Sym = i.Sym;

CREATE WINDOW Recent
    PRIMARY KEY (Sym, TradeId)
    KEEP 3 ROWS PER (Sym)
    PARTITION BY Enriched HASH(Sym) PARTITIONS 2
AS SELECT * FROM Enriched;

CREATE OUTPUT WINDOW SymStats
    PRIMARY KEY DEDUCED
    PARTITION BY Recent HASH(Sym) PARTITIONS 2
AS SELECT r.Sym Sym, count(*) Trades, sum(r.Qty) Volume, avg(r.Price) AvgPrice,
          max(r.TradeId) LastId
   FROM Recent r
   GROUP BY r.Sym;
"""),
}
HEADER = "TradeId,Sym,Price,Qty\n"
INSTRUMENTS = 50
WARM_EVENTS = 2
POLL = 0.005
LISTING = 0.2  # seconds a batch's trigger time may precede the file it reads (the listing)


@dataclass
class Batch:
    """One micro-batch of one query: trigger time, commit time (epoch seconds)."""

    query: str
    batch_id: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        """How long the batch ran."""
        return self.end - self.start


@dataclass
class Event:
    """One published event: when its file was in place and when its change was visible."""

    trade_id: int
    published: float
    seen: Optional[float] = None
    publish_command: Optional[float] = None  # seconds of `ccl publish` (cluster mode)
    hops: list = field(default_factory=list)  # (query, wait s, batch s) in order

    @property
    def latency(self) -> Optional[float]:
        """Seconds from the file in place to its change visible; None when it never came."""
        return None if self.seen is None else self.seen - self.published


class ChangeWatcher:
    """The changelog of one element: which ids its files hold (read once each with pyarrow)."""

    def __init__(self, directory: str, column: str) -> None:
        self.directory, self.column = directory, column
        self.read: set[str] = set()
        self.ids: dict[int, float] = {}  # id -> when first seen

    def poll(self) -> None:
        """Read the changelog files not read yet."""
        import pyarrow.parquet as pq
        now = time.time()
        for path in sorted(glob.glob(os.path.join(self.directory, "batch-*.parquet"))):
            if path in self.read:
                continue
            try:
                values = pq.read_table(path, columns=[self.column]).column(0).to_pylist()
            except (OSError, ValueError):
                continue  # not complete yet (they are renamed into place, so should not happen)
            self.read.add(path)
            for v in values:
                if v is not None:
                    self.ids.setdefault(int(v), now)

    def wait_for(self, trade_id: int, timeout: float) -> Optional[float]:
        """When ``trade_id`` appeared (epoch seconds), or None after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if trade_id in self.ids:
                return self.ids[trade_id]
            if time.monotonic() > deadline:
                return None
            time.sleep(POLL)


def query_batches(run_dir: str) -> dict[str, list[Batch]]:
    """Each query's finished batches, from its checkpoint (offsets/N: the trigger time;
    commits/N: written when the batch is done)."""
    out: dict[str, list[Batch]] = {}
    for qdir in _query_dirs(run_dir):
        name = _query_name(qdir)
        batches = []
        for commit in glob.glob(os.path.join(qdir, "commits", "[0-9]*")):
            n = os.path.basename(commit)
            try:
                with open(os.path.join(qdir, "offsets", n)) as f:
                    meta = json.loads(f.read().splitlines()[1])
                batches.append(Batch(name, int(n), meta["batchTimestampMs"] / 1000.0,
                                     os.stat(commit).st_mtime))
            except (OSError, ValueError, IndexError, KeyError):
                continue
        out[name] = sorted(batches, key=lambda b: b.batch_id)
    return out


PROJECT_QUERY = "(project)"  # the name shown for the project's one query (RUN/project_query)


def _first_query_batches(batches: dict[str, list[Batch]]) -> list[Batch]:
    """The batches of the query that reads the input files: the project's one query, or the
    input element's own query where a run has no project query."""
    return batches.get(PROJECT_QUERY) or batches.get("Trades", [])


def _query_dirs(run_dir: str) -> list[str]:
    """The Spark checkpoints of a run: the project's query and the elements' own queries."""
    own = os.path.join(run_dir, "project_query")
    return ([own] if os.path.isdir(own) else []) + sorted(glob.glob(os.path.join(run_dir, "queries", "*")))


def _query_name(qdir: str) -> str:
    return PROJECT_QUERY if os.path.basename(qdir) == "project_query" else os.path.basename(qdir)


def query_order(run_dir: str) -> list[str]:
    """The queries in the plan's element order (plan.json of the run directory), the project's
    query first."""
    plan = ws.read_json(os.path.join(run_dir, "plan.json")) or {}
    names = [PROJECT_QUERY] + [e["name"] for e in plan.get("elements", [])]
    present = {_query_name(q) for q in _query_dirs(run_dir)}
    return [n for n in names if n in present] + sorted(present - set(names))


def split_latency(events: list[Event], batches: dict[str, list[Batch]], order: list[str]) -> None:
    """For each event, per query in order: the wait from the previous step's end (the file in
    place, or the upstream batch's commit) to the start of the query's first batch that ended
    after it and started at most :data:`LISTING` seconds before it (and before the change was
    seen), and that batch's duration. Queries with no such batch (an input the event does not go
    through) are skipped. The trigger time can precede the file by the time Spark takes to list
    the directory: a wait can be slightly negative. (A batch's commit comes after its changelog is
    written, so the batch of the previous event can still be running when the next file is
    published: hence the bound on the start.)"""
    for ev in events:
        if ev.seen is None:
            continue
        previous = ev.published
        for q in order:
            batch = next((b for b in batches.get(q, []) if b.start >= previous - LISTING
                          and b.end > previous and b.start <= ev.seen), None)
            if batch is None:
                continue
            ev.hops.append((q, batch.start - previous, batch.seconds))
            previous = batch.end


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100.0 * len(ordered)) - 1))]


def summary(values: list[float]) -> dict:
    """median, p95, p99, worst (seconds) of ``values``."""
    if not values:
        return {}
    return {"n": len(values), "median": statistics.median(values), "p95": percentile(values, 95),
            "p99": percentile(values, 99), "worst": max(values)}


# --------------------------------------------------------------------------------------------------

class Target:
    """A running project: started, fed one file at a time, stopped."""

    run_dir: str
    inputs: str

    def start(self) -> None:
        """Start it (returns once it runs)."""

    def publish(self, path: str) -> tuple[float, Optional[float]]:
        """Put ``path`` into the Trades input: (when it was in place, seconds of the command)."""
        final = ws.publish_file(path, self.inputs)
        return os.stat(final).st_ctime, None

    def stop(self) -> None:
        """Stop it, and everything it started."""


class RunTarget(Target):
    """``ccl run`` continuous, in its own process group."""

    def __init__(self, work: str, ccl_file: str, hops: int, env: dict) -> None:
        self.work, self.ccl_file, self.hops, self.env = work, ccl_file, hops, env
        self.run_dir = os.path.join(work, "ck")
        self.inputs = os.path.join(work, "trades")
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        """``ccl run`` in the background (its log in WORK/run.log)."""
        cmd = [sys.executable, "-m", "ccl.cli", "run", self.ccl_file, "--master", "local[2]",
               "--checkpoint", self.run_dir, "--output-dir", os.path.join(self.work, "out"),
               "--input", f"Trades={self.inputs}"]
        if self.hops == 3:
            cmd += ["--input", f"Instruments={os.path.join(self.work, 'instruments.csv')}"]
        self.log = open(os.path.join(self.work, "run.log"), "w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> bool:
        """Whether ``ccl run`` still runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM (a graceful stop), SIGKILL to its process group after 60 s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its group only: the driver and the JVM
        except OSError:
            pass
        self.log.close()


class ClusterTarget(Target):
    """``ccl cluster start`` + ``ccl deploy`` in a temporary workspace."""

    NAME = "lat"

    def __init__(self, work: str, ccl_file: str, hops: int, env: dict) -> None:
        self.work, self.ccl_file, self.hops = work, ccl_file, hops
        self.workspace = os.path.join(work, "ws")
        self.env = {**env, ws.WORKSPACE_ENV: self.workspace}
        self.run_dir = os.path.join(self.workspace, self.NAME, "checkpoint")
        self.inputs = os.path.join(work, "trades")
        self.started_cluster = False

    def ccl(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """One ``ccl`` command in the workspace."""
        return subprocess.run([sys.executable, "-m", "ccl.cli", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        """The cluster, then the project."""
        self.started_cluster = True
        done = self.ccl("cluster", "start", "--port", "0", "--webui-port", "0", "--cores", "2",
                        "--memory", "1g")
        if done.returncode != 0:
            raise RuntimeError(f"ccl cluster start failed: {done.stderr.strip()}")
        args = ["deploy", self.ccl_file, "--name", self.NAME, "--input", f"Trades={self.inputs}"]
        if self.hops == 3:
            args += ["--input", f"Instruments={os.path.join(self.work, 'instruments.csv')}"]
        done = self.ccl(*args)
        if done.returncode != 0:
            raise RuntimeError(f"ccl deploy failed: {done.stderr.strip()} {done.stdout.strip()}")

    def alive(self) -> bool:
        """Whether the deployed job runs (its supervisor)."""
        meta = ws.read_json(os.path.join(self.workspace, self.NAME, "project.json")) or {}
        return ws.pid_alive(meta.get("pid"), meta.get("pid_start"))

    def publish(self, path: str) -> tuple[float, Optional[float]]:
        """``ccl publish lat Trades FILE``."""
        began = time.perf_counter()
        done = self.ccl("publish", self.NAME, "Trades", path)
        took = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"ccl publish failed: {done.stderr.strip()}")
        final = done.stdout.strip().rsplit(" as ", 1)[-1]
        return os.stat(final).st_ctime, took

    def stop(self) -> None:
        """``ccl stop``, ``ccl cluster stop``, then SIGKILL to any process group left."""
        if not self.started_cluster:
            return
        for args in (("stop", self.NAME, "--timeout", "30"), ("cluster", "stop")):
            try:
                self.ccl(*args, timeout=120)
            except subprocess.TimeoutExpired:
                pass
        for meta_file, keys in ((os.path.join(self.workspace, self.NAME, "project.json"), ("pid",)),
                                (os.path.join(self.workspace, "_cluster", "cluster.json"),
                                 ("worker_pid", "master_pid"))):
            meta = ws.read_json(meta_file) or {}
            for key in keys:
                if ws.pid_alive(meta.get(key), meta.get(key + "_start")):
                    try:
                        os.killpg(meta[key], signal.SIGKILL)
                    except OSError:
                        pass

    def driver_log(self) -> str:
        """The end of the deployed job's driver log."""
        return "\n".join(ws.tail_lines(os.path.join(self.workspace, self.NAME, "driver.log"), 200))


def write_event(directory: str, k: int, trade_id: int, header_only: bool = False) -> str:
    """A CSV file of one trade (or only the header); its path."""
    path = os.path.join(directory, f"ev{k:05d}.csv")
    with open(path, "w") as f:
        f.write(HEADER)
        if not header_only:
            f.write(f"{trade_id},S{trade_id % INSTRUMENTS:03d},{10 + trade_id % 97 / 10:.2f},"
                    f"{1 + trade_id % 50}\n")
    return path


def measure(mode: str, hops: int, events: int, empty: int, timeout: float, start_timeout: float,
            keep: bool) -> dict:
    """Start the ``hops`` project in ``mode``, send the events and the empty files, stop it;
    the results as data."""
    element, column, text = PROJECTS[hops]
    work = tempfile.mkdtemp(prefix=f"ccl-bench-latency-{mode}-{hops}-")
    staging = os.path.join(work, "staging")
    os.makedirs(staging)
    os.makedirs(os.path.join(work, "trades"))
    ccl_file = os.path.join(work, f"lat{hops}.ccl")
    with open(ccl_file, "w") as f:
        f.write(text)
    with open(os.path.join(work, "instruments.csv"), "w") as f:
        f.write("Sym,Sector,LotSize\n" + "".join(f"S{k:03d},SEC{k % 7},{100 * (1 + k % 5)}\n"
                                                  for k in range(INSTRUMENTS)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    target: Target = (RunTarget if mode == "run" else ClusterTarget)(work, ccl_file, hops, env)
    watcher = ChangeWatcher(os.path.join(target.run_dir, "changelog", element), column)
    counted: list[Event] = []
    empties: list[float] = []
    began = time.monotonic()
    try:
        target.start()
        if hops == 3:  # a trade joins only once the instruments are in the join's state
            _wait_for_instruments(target, start_timeout)
        k = 0
        for n in range(WARM_EVENTS + events):
            trade_id = 1000 + n
            path = write_event(staging, k, trade_id)
            k += 1
            published, command = target.publish(path)
            limit = start_timeout if n == 0 else timeout
            seen = watcher.wait_for(trade_id, limit)
            if seen is None and not target.alive():
                raise RuntimeError(f"the {mode} job ended; its log:\n{_log_of(target)[-3000:]}")
            ev = Event(trade_id, published, seen, command)
            if n >= WARM_EVENTS:
                counted.append(ev)
            elif seen is None:
                raise RuntimeError(f"warm-up event {trade_id} not seen after {limit:.0f} s; "
                                   f"log:\n{_log_of(target)[-3000:]}")
            print(f"  {hops}-hop {mode} event {n + 1}/{WARM_EVENTS + events}: "
                  + (f"{ev.latency:.3f} s" if seen is not None else "LOST"), file=sys.stderr, flush=True)
        # empty micro-batches: files with a header only; the input query's next batch reads them
        empty_error = None
        for _ in range(empty):
            published, _ = target.publish(write_event(staging, k, 0, header_only=True))
            k += 1
            deadline = time.monotonic() + timeout
            while (not any(b.start >= published - LISTING
                           for b in _first_query_batches(query_batches(target.run_dir)))
                   and time.monotonic() < deadline and target.alive()):
                time.sleep(0.02)
            if not target.alive() or _query_failed(target):
                empty_error = "the job failed on a header-only file: " + _error_line(target)
                print(f"  {hops}-hop {mode}: {empty_error}", file=sys.stderr, flush=True)
                break
            empties.append(published)
        time.sleep(1.5)  # let downstream queries finish whatever the empty files started
        batches = query_batches(target.run_dir)
        order = query_order(target.run_dir)
    finally:
        target.stop()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    split_latency(counted, batches, order)
    lost = [ev.trade_id for ev in counted if ev.seen is None]
    assert not lost, f"events whose change never arrived: {lost}"
    # batch durations: one-row batches are those the counted events' hops ran; empty batches are
    # the first query's batches that started after an empty file was in place
    one_row: dict[str, list[float]] = {q: [] for q in order}
    for ev in counted:
        for q, _, seconds in ev.hops:
            one_row[q].append(seconds)
    # (the last event's batch commits after its change is visible: it is not one of these)
    empty_batches = [b.seconds for b in _first_query_batches(batches)
                     if empties and b.start >= empties[0] - LISTING]
    result = {
        "mode": mode, "hops": hops, "element": element, "events": events,
        "poll_interval": "100 milliseconds", "queries": order,
        "latency": summary([ev.latency for ev in counted]),
        "latencies": [ev.latency for ev in counted],
        "publish_command": summary([ev.publish_command for ev in counted if ev.publish_command]),
        "one_row_batch": {q: summary(v) for q, v in one_row.items()},
        "empty_batch": {order[0] if order else "Trades": summary(empty_batches)},
        "empty_batch_error": empty_error,
        "wait_for_trigger": {q: summary([w for ev in counted for (qq, w, _) in ev.hops if qq == q])
                             for q in order},
        "after_last_commit": summary([ev.seen - (ev.published + sum(w + s for _, w, s in ev.hops))
                                      for ev in counted if ev.hops]),
        "events_matched": {q: sum(1 for ev in counted if any(qq == q for qq, _, _ in ev.hops))
                           for q in order},
        "wall_seconds": time.monotonic() - began,
        "batches": {q: [[b.batch_id, b.start, b.end] for b in v] for q, v in batches.items()},
        "published": [ev.published for ev in counted], "seen": [ev.seen for ev in counted],
        "empty_published": empties,
    }
    return result


def _wait_for_instruments(target: Target, timeout: float) -> None:
    """Until the join (Enriched) has read the instruments (its counters, RUN/stats/Enriched)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = 0
        for path in glob.glob(os.path.join(target.run_dir, "stats", "Enriched", "batch-*.json")):
            seen += int((ws.read_json(path) or {}).get("rows_in", 0))
        if seen >= INSTRUMENTS:
            return
        if not target.alive():
            break
        time.sleep(0.1)
    raise RuntimeError(f"the join did not read the instruments within {timeout:.0f} s; log:\n"
                       + _log_of(target)[-3000:])


def _query_failed(target: Target) -> bool:
    """Whether the job's log says a query stopped (the job may still be winding down)."""
    return "stopped:" in _log_of(target) or "terminated with error" in _log_of(target)


def _error_line(target: Target) -> str:
    lines = _log_of(target).splitlines()
    for marker in ("stopped:", "terminated with error", "Error"):
        found = [ln for ln in lines if marker in ln]
        if found:
            return found[-1].strip()[:300]
    return "(see its log)"


def _log_of(target: Target) -> str:
    if isinstance(target, ClusterTarget):
        return target.driver_log()
    path = os.path.join(getattr(target, "work", ""), "run.log")
    return "\n".join(ws.tail_lines(path, 200)) if os.path.exists(path) else ""


def _fmt(stats: dict, key: str) -> str:
    return f"{stats[key]:.3f}" if stats else "-"


def print_table(results: list[dict]) -> None:
    """The latency table, then the batch costs per query."""
    print(f"{'project':>8} {'mode':>8} {'events':>6} {'median s':>9} {'p95 s':>7} {'p99 s':>7} {'worst s':>8}")
    for r in results:
        lat = r["latency"]
        print(f"{str(r['hops']) + '-hop':>8} {r['mode']:>8} {lat['n']:>6} {_fmt(lat, 'median'):>9} "
              f"{_fmt(lat, 'p95'):>7} {_fmt(lat, 'p99'):>7} {_fmt(lat, 'worst'):>8}")
    for r in results:
        extra = (f"; `ccl publish` itself {r['publish_command']['median']:.3f} s median"
                 if r["publish_command"] else "")
        print(f"\n{r['hops']}-hop {r['mode']}: where the time goes (median seconds per event{extra})")
        print(f"  {'query':>12} {'events':>6} {'wait for trigger':>17} {'one-row batch':>14} {'empty batch':>12}")
        for q in r["queries"]:
            e = r["empty_batch"].get(q, {})
            print(f"  {q:>12} {r['events_matched'][q]:>6} {_fmt(r['wait_for_trigger'][q], 'median'):>17} "
                  f"{_fmt(r['one_row_batch'][q], 'median'):>14} {_fmt(e, 'median'):>12}")
        print(f"  {'(seen)':>12} {'':>6} {_fmt(r['after_last_commit'], 'median'):>17}   "
              f"(last commit to change seen by a 5 ms poll; negative: the changelog precedes the commit)")
        if r.get("empty_batch_error"):
            print(f"  empty batches: {r['empty_batch_error']}")


def main(argv: Optional[list[str]] = None) -> int:
    """Parse the options, measure, print; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("run", "cluster"), default="run")
    ap.add_argument("--events", type=int, default=20, help="counted events per project (default 20)")
    ap.add_argument("--hops", default="1,3", help="projects to measure: 1, 3 or 1,3 (default)")
    ap.add_argument("--empty", type=int, default=5,
                    help="header-only files published after the events (empty batches; default 5)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for one event's change (default 60)")
    ap.add_argument("--start-timeout", type=float, default=300.0,
                    help="seconds to wait for the first event (Spark starting; default 300)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (debugging)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)
    try:
        hops = sorted({int(h) for h in args.hops.split(",") if h.strip()})
    except ValueError:
        ap.error(f"--hops: expected 1, 3 or 1,3, not {args.hops!r}")
    if not hops or any(h not in PROJECTS for h in hops):
        ap.error(f"--hops: expected 1, 3 or 1,3, not {args.hops!r}")
    if args.events < 1 or args.empty < 0 or args.timeout <= 0 or args.start_timeout <= 0:
        ap.error("--events >= 1, --empty >= 0 and positive timeouts are required")
    if not shutil.which("java"):
        ap.error("needs Java (Spark)")
    results = []
    try:
        for h in hops:
            results.append(measure(args.mode, h, args.events, args.empty, args.timeout,
                                   args.start_timeout, args.keep))
    except (RuntimeError, AssertionError) as exc:
        print(f"bench/latency.py: {exc}", file=sys.stderr)
        return 1
    print_table(results)
    print("\nload average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "load_average_at_end": os.getloadavg()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
