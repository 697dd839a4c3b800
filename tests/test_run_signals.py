"""Stopping a continuous `ccl run` the way a service manager does (SIGTERM to its whole process
group), and what `ccl run` prints at the default log level."""
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner_e2e import RunOutput, run_project, write_rows
from test_run_restart import PROJECT, _batches, totals_of

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
LOCAL = ["--set", "spark.master=local[2]", "--set", "spark.shuffle_partitions=2"]


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out.decode(), err.decode()


def test_sigterm_to_the_process_group_writes_the_outputs_and_resumes_exactly(spark, tmp_path):
    """The JVM was in the driver's process group: a group SIGTERM (systemd, `timeout`) killed it
    before the driver could write anything (Py4J tracebacks, no outputs). Now the run stops its
    queries, writes the outputs of what it read and exits 0; a run from its checkpoint then reads
    the rest, every row once."""
    rows = [(i, "ABCDEFG"[i % 7], (i * 37) % 100) for i in range(1200)]
    data = tmp_path / "in"
    for f in range(24):
        write_rows(str(data / f"trades-{f:02d}.csv"), ["id", "sym", "qty"], rows[f * 50:(f + 1) * 50])
    (tmp_path / "p.ccl").write_text(PROJECT)
    run_dir = str(tmp_path / "ckpt")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--input", f"trades={data}",
         "--checkpoint", run_dir, "--output-dir", str(tmp_path / "out1"),
         "--set", "runtime.max_files_per_batch=1",  # one file a batch: the stop lands mid-input
         "--set", "runtime.trigger_interval=200 milliseconds", *LOCAL],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _batches(run_dir, "totals") < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it was stopped"
        assert _batches(run_dir, "totals") >= 2, "no progress before the deadline"
        os.killpg(proc.pid, signal.SIGTERM)  # the driver and everything in its group
    finally:
        out, err = _wait(proc, 180)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "Py4J" not in err, err[-3000:]
    report = json.loads((tmp_path / "out1" / "_run.json").read_text())
    first = RunOutput(str(tmp_path / "out1"), report, {})
    read = first.stats("trades")["rows_in"]
    assert 0 < read < len(rows) and read % 50 == 0, f"{read} rows read: not a stop mid-input"
    assert f"trades: {read} in" in out
    # The outputs hold whole files from the start, none twice, at most what was read: a batch a
    # derived query had not finished within its bound at the stop runs again from the checkpoint.
    big = sorted(int(r["id"]) for r in first.rows("big"))
    files = (big[-1] // 50 + 1) if big else 0
    assert files * 50 <= read and big == [i for i, _, q in rows[:files * 50] if q > 50]
    counted = sum(int(r["n"]) for r in first.rows("totals"))
    assert counted % 50 == 0 and 0 < counted <= read
    assert _totals(first) == totals_of(rows[:counted])

    resumed = run_project(spark, tmp_path, PROJECT, {"trades": str(data)}, checkpoint=run_dir,
                          buckets=None)  # as ccl run chose them: auto keeps the directory's count
    assert sorted(int(r["id"]) for r in resumed.rows("big")) == [i for i, _, q in rows if q > 50]
    assert _totals(resumed) == totals_of(rows)
    assert resumed.stats("trades")["rows_in"] == len(rows)


@pytest.mark.parametrize("files_per_batch", [None, 1])
def test_a_batch_spark_starts_once_the_stop_has_begun_runs_again_on_resume(
        spark, tmp_path, monkeypatch, files_per_batch):
    """The stop refuses every batch from its start (runtime.project_query.BatchGuard): one that
    Spark starts then (here: for a file fed once the stop has begun) raises, and Spark ends the
    query without committing it. The run ends cleanly with the outputs of the batches before,
    and the run resumed from the checkpoint runs it again: every row once. The old guard let
    such a batch return without running anything, and Spark committed it: its rows were lost.
    The project's query (no file limit), and the element queries (one file a batch) alike."""
    import runtime.run as run_module
    from ccl.plan.planner import plan_project
    from runtime.project_query import BatchGuard
    from runtime.run_setup import RunOptions

    rows = [(i, "ABCDEFG"[i % 7], (i * 37) % 100) for i in range(300)]
    data = tmp_path / "in"

    def feed(f: int) -> None:  # written aside and renamed: a reader never sees half a file
        write_rows(str(data / f".trades-{f}.csv"), ["id", "sym", "qty"], rows[f * 50:(f + 1) * 50])
        os.replace(data / f".trades-{f}.csv", data / f"trades-{f}.csv")

    raced = threading.Event()

    class Racing(BatchGuard):
        def _refuse(self, bound: float) -> bool:
            idle = super()._refuse(bound)
            if not raced.is_set():  # the first query stopped: the project's, or the input's
                raced.set()
                feed(2)
                deadline = time.monotonic() + 120
                while not self.refused and time.monotonic() < deadline:
                    time.sleep(0.05)
            return idle
    monkeypatch.setattr(run_module, "BatchGuard", Racing)

    for f in range(2):
        feed(f)
    (tmp_path / "p.ccl").write_text(PROJECT)
    plan, diags = plan_project(str(tmp_path / "p.ccl"))
    assert plan is not None, [str(d) for d in diags]
    run_dir = str(tmp_path / "ckpt")
    options = RunOptions(inputs={"trades": str(data)}, base_dir=str(tmp_path), run_dir=run_dir,
                         until_idle=False, buckets=2, trigger_interval="200 milliseconds",
                         max_files_per_batch=files_per_batch)
    stop, done = threading.Event(), []
    runner = threading.Thread(target=lambda: done.append(
        run_module.run_plan(spark, plan, options, str(tmp_path / "out1"), stop=stop)))
    runner.start()
    deadline = time.monotonic() + 240
    while _rows_in(run_dir) < 100 and runner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _rows_in(run_dir) == 100, "the first two files were not read before the deadline"
    stop.set()
    runner.join(240)
    assert not runner.is_alive(), "the stop hung"
    assert done, "the run failed (its error is above)"
    assert done[0].report["elements"]["trades"]["rows_in"] == 100
    checkpoint = os.path.join(run_dir, "project_query" if files_per_batch is None
                              else os.path.join("queries", "trades"))
    offsets, commits = (max(int(n) for n in os.listdir(os.path.join(checkpoint, d)) if n.isdigit())
                        for d in ("offsets", "commits"))
    assert offsets == commits + 1, "the refused batch was committed"

    for f in range(3, 6):
        feed(f)
    resumed = run_project(spark, tmp_path, PROJECT, {"trades": str(data)}, checkpoint=run_dir,
                          max_files_per_batch=files_per_batch)
    assert sorted(int(r["id"]) for r in resumed.rows("big")) == [i for i, _, q in rows if q > 50]
    assert _totals(resumed) == totals_of(rows)
    assert resumed.stats("trades")["rows_in"] == len(rows)


def _rows_in(run_dir: str) -> int:
    """The rows the run has read so far (its input's counters)."""
    total = 0
    for path in glob.glob(os.path.join(run_dir, "stats", "trades", "batch-*.json")):
        with open(path, encoding="utf-8") as f:
            total += json.load(f)["rows_in"]
    return total


def _totals(out: RunOutput) -> dict[str, tuple[int, int]]:
    return {r["sym"]: (int(r["total"]), int(r["n"])) for r in out.rows("totals")}


def test_run_prints_only_our_lines_at_the_default_log_level(tmp_path):
    """Spark's JVM start-up lines (incubator modules, log4j profile, loopback address, native
    Hadoop library, default log level) came before anything of ours; at the default level only
    ccl's lines are printed, and --log-level INFO brings Spark's back."""
    project = ROOT / "projects" / "stock_prices" / "stock_prices.ccl"
    args = [sys.executable, "-m", "ccl.cli", "run", str(project), "--until-idle", *LOCAL]
    quiet = subprocess.run([*args, "--output-dir", str(tmp_path / "quiet")], env=ENV, cwd=tmp_path,
                           capture_output=True, text=True, timeout=240)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert quiet.stderr == ""
    assert quiet.stdout.splitlines() == [
        "StockUpdates: 240 in, 240 out", "StockPrices: 240 in, 240 out",
        "StockSession: 240 in, 240 out", quiet.stdout.splitlines()[-1]]
    assert quiet.stdout.splitlines()[-1].startswith(f"outputs in {tmp_path / 'quiet'} (")

    # a project of one input and one output is enough to see Spark's lines (the whole one above
    # took half a minute more)
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "in.csv").write_text("k,v\na,1\nb,2\n")
    (tmp_path / "tiny" / "tiny.ccl").write_text(
        "CREATE INPUT STREAM S SCHEMA (k string, v integer);\n"
        "ATTACH INPUT ADAPTER f TYPE toolkit_file_csv_input TO S\n"
        "PROPERTIES dir = '.', file = 'in.csv', hasHeader = TRUE;\n"
        "CREATE OUTPUT STREAM T AS SELECT * FROM S WHERE S.v > 1;\n")
    loud = subprocess.run([sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "tiny" / "tiny.ccl"),
                           "--until-idle", *LOCAL, "--output-dir", str(tmp_path / "loud"),
                           "--log-level", "info"],
                          env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert " INFO " in loud.stderr and "Using incubator modules" in loud.stderr
    assert "T: 2 in, 1 out" in loud.stdout.splitlines(), loud.stdout
