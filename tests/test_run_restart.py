"""A real `ccl run --checkpoint` killed with SIGKILL and started again: nothing lost, nothing twice;
and a checkpoint refused after PARTITIONS changed."""
import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner_e2e import run_project, write_rows
from runtime.run_setup import RunError
from runtime.outputs import CONFLICT

ROOT = Path(__file__).resolve().parent.parent

PROJECT = """
create input stream trades schema (id integer, sym string, qty integer);
create output stream big as select t.id, t.sym, t.qty from trades t where t.qty > 50;
create output window totals primary key deduced keep 10 minutes
  partition by trades hash(sym) partitions 3
  as select t.sym, sum(t.qty) total, count(*) n from trades t group by t.sym;
create output window counted primary key deduced
  partition by trades roundrobin partitions 2
  as select t.sym, sum(t.qty) total, count(*) n from trades t group by t.sym having count(*) > 0;
"""


def _batches(run_dir: str, element: str) -> int:
    return len(glob.glob(os.path.join(run_dir, "stats", element, "batch-*.json")))


@pytest.mark.parametrize("source", ["ccl_csv", "spark files"])
def test_killed_run_resumes_without_loss_or_duplicates(spark, tmp_path, source):
    """With ``max_files_per_batch`` the input is read by the ccl_csv source, one file a batch; without
    it by Spark's file source (runtime/inputs/file_input.py), fed a file at a time while the run goes."""
    rows = [(i, "ABCDEFG"[i % 7], (i * 37) % 100) for i in range(1200)]
    data = tmp_path / "in"

    def feed(f: int) -> None:  # written aside and renamed: a reader never sees half a file
        write_rows(str(data / f".trades-{f:02d}.csv"), ["id", "sym", "qty"], rows[f * 50:(f + 1) * 50])
        os.replace(data / f".trades-{f:02d}.csv", data / f"trades-{f:02d}.csv")
    fed = 24 if source == "ccl_csv" else 1
    for f in range(fed):  # one file per micro-batch: the kill lands in the middle of the input
        feed(f)
    (tmp_path / "p.ccl").write_text(PROJECT)
    run_dir = str(tmp_path / "ckpt")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    limit = ["--set", "runtime.max_files_per_batch=1"] if source == "ccl_csv" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--input", f"trades={data}",
         "--checkpoint", run_dir, "--output-dir", str(tmp_path / "out1"), *limit,
         "--set", "runtime.trigger_interval=200 milliseconds",
         "--set", "spark.master=local[2]", "--set", "spark.shuffle_partitions=2"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while _batches(run_dir, "totals") < 4 and proc.poll() is None and time.monotonic() < deadline:
            if fed < 24 and _batches(run_dir, "trades") >= fed:
                feed(fed)
                fed += 1
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be killed"
        assert _batches(run_dir, "totals") >= 4, "no progress before the deadline"
    finally:
        _crash(proc)
    run = json.loads((Path(run_dir) / "run.json").read_text())
    assert run["file_source"] == ([] if source == "ccl_csv" else ["trades"])
    # totals (a time KEEP) has timers: a stage of the project's query (state files, its batches'
    # time kept in RUN/clock), or with a file limit per batch in transformWithState; counted keeps
    # its state in files
    assert ("totals" in run["project_query"]) == (source != "ccl_csv")
    saved = json.loads((Path(run_dir) / "plan.json").read_text())
    assert [e["name"] for e in saved["elements"] if e["physical"]["arrow"]] == ["counted"]
    for f in range(fed, 24):
        feed(f)
    done = _batches(run_dir, "trades")
    assert 0 < done < 24, f"{done} of 24 input batches were done at the kill: not a mid-run kill"

    # (buckets as ccl run chose them: auto keeps the run directory's count)
    out = run_project(spark, tmp_path, PROJECT, {"trades": str(data)}, checkpoint=run_dir,
                      buckets=None)
    got = sorted(int(r["id"]) for r in out.rows("big"))
    assert got == [i for i, _, q in rows if q > 50]  # every row once: none lost, none twice
    want = totals_of(rows)
    assert {r["sym"]: (int(r["total"]), int(r["n"])) for r in out.rows("totals")} == want
    # a symbol's rows are split between the 2 instances (CCL3001): the window holds the later
    # instance's row, the other's is a bad record
    held = out.rows("counted") + [b["row"] for b in out.bad_records() if b["reason"] == CONFLICT]
    both: dict[str, tuple[int, int]] = {}
    for r in held:
        total, n = both.get(r["sym"], (0, 0))
        both[r["sym"]] = (total + int(r["total"]), n + int(r["n"]))
    assert both == want and len(out.rows("counted")) == len(want) and len(held) == 2 * len(want)
    assert out.stats("trades")["rows_in"] == len(rows)


def totals_of(rows: list[tuple[int, str, int]]) -> dict[str, tuple[int, int]]:
    """What ``totals`` of :data:`PROJECT` (sum and count of qty by sym) holds after ``rows``."""
    want: dict[str, tuple[int, int]] = {}
    for _, sym, qty in rows:
        total, n = want.get(sym, (0, 0))
        want[sym] = (total + qty, n + 1)
    return want


def test_checkpoint_refused_after_partitions_change(spark, tmp_path):
    path = write_rows(str(tmp_path / "in" / "t.csv"), ["id", "sym", "qty"], [(1, "A", 5)])
    run_project(spark, tmp_path, PROJECT, {"trades": path})
    (tmp_path / "p.ccl").write_text(PROJECT.replace("partitions 3", "partitions 4"))
    with pytest.raises(RunError) as info:
        run_project(spark, tmp_path, "", {"trades": path})
    message = str(info.value)
    assert "'totals'" in message and "3 partition instance(s)" in message and "has 4 now" in message
    assert "new checkpoint directory" in message


def test_checkpoint_refused_when_an_aggregation_changes_path(tmp_path):
    """A native aggregation keeps Spark group totals, the per-instance path engine states: a run
    directory made with one is refused when the element now runs on the other (here because a
    Flex now reads its changes)."""
    from ccl.plan.planner import plan_project
    from runtime.run_setup import RunOptions, prepare_run_dir
    agg = """create input stream s schema (k string, v integer);
    create window w primary key deduced keep all as select s.k, sum(s.v) v from s group by s.k;
    create output window o primary key deduced as select w.k, w.v from w;\n"""
    flex = ("create flex f in w out output stream c schema (k string) "
            "begin on w { output setOpcode([k = w.k;], insert); }; end;\n")

    def plan(text):
        (tmp_path / "p.ccl").write_text(text)
        planned, diags = plan_project(str(tmp_path / "p.ccl"))
        assert planned is not None, [str(d) for d in diags]
        return planned
    run_dir = tmp_path / "run"
    options = RunOptions(inputs={}, base_dir=str(tmp_path), run_dir=str(run_dir))
    prepare_run_dir(plan(agg), options)
    saved = json.loads((run_dir / "plan.json").read_text())
    assert [e["name"] for e in saved["elements"] if e["physical"]["native"] == "aggregation"] == ["w"]
    prepare_run_dir(plan(agg), options)  # unchanged: goes on
    with pytest.raises(RunError) as info:
        prepare_run_dir(plan(agg + flex), options)
    assert "'w' ran on Spark's group-by" in str(info.value)
    assert "runs on the per-instance engine now" in str(info.value)


def test_checkpoint_refused_when_groups_can_no_longer_be_spread(tmp_path):
    """A per-instance aggregation run a bucket at a time keeps its state split by instance and
    group (the plan's ``group_columns``), whether its changes are read one by one or not; once an
    item computes on an aggregate while its changes are read, it runs on the row engine with state
    split by instance alone, and the run directory is refused."""
    from ccl.plan.planner import plan_project
    from runtime.run_setup import RunOptions, prepare_run_dir
    agg = """create input stream s schema (k string, v integer);
    create output window w primary key deduced keep all as select s.k, sum(s.v) v from s group by s.k;\n"""
    reader = "create output stream c as select w.k from w;\n"
    options = RunOptions(inputs={}, base_dir=str(tmp_path), run_dir=str(tmp_path / "run"))
    computed = agg.replace("sum(s.v) v", "sum(s.v) + 1 v") + reader
    for text, refused in [(agg, False), (agg + reader, False), (computed, True)]:
        (tmp_path / "p.ccl").write_text(text)
        plan, diags = plan_project(str(tmp_path / "p.ccl"), native_operators=False)
        assert plan is not None, [str(d) for d in diags]
        if not refused:
            prepare_run_dir(plan, options)
            saved = json.loads((tmp_path / "run" / "plan.json").read_text())
            assert {e["name"]: e["physical"]["group_columns"] for e in saved["elements"]
                    if e["physical"]["arrow"] and e["physical"]["group_columns"]} == {"w": ["k"]}
            continue
        with pytest.raises(RunError) as info:
            prepare_run_dir(plan, options)
        assert "'w' kept its state split by the groups of (k)" in str(info.value)


def test_checkpoint_refused_when_an_element_changes_columns(tmp_path):
    """Resuming after a column was added used to go on, reading old changelogs and state with
    nulls (or failing inside Spark)."""
    from ccl.plan.planner import plan_project
    from runtime.run_setup import RunOptions, prepare_run_dir
    text = "create input window w schema (k string, v integer) primary key (k);\n"
    options = RunOptions(inputs={}, base_dir=str(tmp_path), run_dir=str(tmp_path / "run"))
    for body, refused in [(text, False), (text.replace("v integer", "v integer, x float"), True),
                          (text.replace("primary key (k)", "primary key (k, v)"), True)]:
        (tmp_path / "p.ccl").write_text(body)
        plan, diags = plan_project(str(tmp_path / "p.ccl"))
        assert plan is not None, [str(d) for d in diags]
        if refused:
            with pytest.raises(RunError, match="element 'w' has other columns or another key"):
                prepare_run_dir(plan, options)
        else:
            prepare_run_dir(plan, options)


def test_ctrl_c_while_spark_starts_stops_the_run(tmp_path):
    """A SIGINT that came while Spark was starting was lost (the run went on for good); now the
    run stops as soon as its queries are up, writes its outputs and exits 0."""
    (tmp_path / "p.ccl").write_text(PROJECT)
    data = tmp_path / "in"
    write_rows(str(data / "t.csv"), ["id", "sym", "qty"], [(1, "A", 60)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--input", f"trades={data}",
         "--output-dir", str(tmp_path / "out"), "--set", "spark.master=local[2]",
         "--set", "spark.shuffle_partitions=2"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not _has_child(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _has_child(proc.pid), "Spark's JVM did not start"
        proc.send_signal(signal.SIGINT)  # the JVM is starting
        _, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert (tmp_path / "out" / "_run.json").is_file()


def _has_child(pid: int) -> bool:
    """Whether process ``pid`` has started a child (`ccl run`: spark-submit, the JVM)."""
    return bool(_children(pid))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat, encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


def _crash(proc: subprocess.Popen) -> None:
    """SIGKILL to a `ccl run` and its Spark JVM, as a crash of the machine would: the JVM runs in a
    session of its own (runtime/session.py), so the driver's process group does not hold it, and
    left alone it would go on a moment after the driver, racing the run that resumes."""
    jvms = _children(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in jvms:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{pid}") for pid in jvms) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_checkpoint_refused_when_rows_spread_otherwise(tmp_path):
    """A run directory whose element spread its rows with another partition method or columns
    (here: a ROUNDROBIN over a window from before it rotated the window's keys, then a HASH) is
    refused; the same partitioning goes on."""
    from ccl.plan.planner import plan_project
    from runtime.run_setup import RunOptions, prepare_run_dir
    text = """create input window w schema (k string, v integer) primary key (k);
    create output window o primary key deduced partition by w roundrobin partitions 2
      as select * from w where w.v > 0;\n"""
    options = RunOptions(inputs={}, base_dir=str(tmp_path), run_dir=str(tmp_path / "run"))

    def plan(body):
        (tmp_path / "p.ccl").write_text(body)
        planned, diags = plan_project(str(tmp_path / "p.ccl"))
        assert planned is not None, [str(d) for d in diags]
        return planned
    prepare_run_dir(plan(text), options)
    prepare_run_dir(plan(text), options)  # unchanged: goes on
    saved_path = tmp_path / "run" / "plan.json"
    saved = json.loads(saved_path.read_text())
    o = next(e for e in saved["elements"] if e["name"] == "o")
    assert o["partition"]["specs"][0]["columns"] == ["k"]
    o["partition"]["specs"][0]["columns"] = []  # rows rotated: as before keys did
    saved_path.write_text(json.dumps(saved))
    with pytest.raises(RunError, match="element 'o' spreads its rows over its instances otherwise"):
        prepare_run_dir(plan(text), options)
    o["partition"]["specs"][0]["columns"] = ["k"]
    saved_path.write_text(json.dumps(saved))
    prepare_run_dir(plan(text), options)
    with pytest.raises(RunError, match="element 'o' spreads its rows"):
        prepare_run_dir(plan(text.replace("roundrobin", "hash(v)")), options)
