"""`ccl deploy` and the project management commands.

Most tests run without Spark: the workspace and its metadata, states from pids and stats files,
publishing (atomic for a reader that lists the directory at any moment), subscribing (changelog
Parquet files written here with pyarrow), stopping and the supervisor (with stand-in processes),
and deploy's refusals and spark-submit command. One test runs everything for real: a standalone
master and worker on 127.0.0.1, an example project deployed, fed, read and stopped
(CCL_SKIP_CLUSTER_TEST=1 skips it).
"""
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_runner import run
from planned import plan_json
from ccl.ops import deploy as deploy_mod
from ccl.ops import workspace as ws
from ccl.syntax.project import UsageError
from runtime.state.rows import LAYOUT as STATE_LAYOUT

ROOT = Path(__file__).resolve().parent.parent
TRADES = ROOT / "projects" / "trades_roundrobin"
GOOD = "create input stream s schema (id integer, name string);\ncreate output stream o as select * from s;\n"


def make_project(tmp_path, name="p", meta=None, plan=None):
    """A deployed-looking project directory (no processes)."""
    pd = ws.ProjectDir(str(tmp_path / "ws"), name)
    os.makedirs(pd.job_dir)
    plan = plan or {"format": "ccl-plan", "version": 1, "project": name, "elements": [
        {"name": "s", "role": "input", "query": None, "kind": "stream",
         "columns": [["id", "integer"], ["name", "string"]]},
        {"name": "o", "role": "output", "query": {"selects": []}, "kind": "stream",
         "columns": [["id", "integer"], ["name", "string"]]}]}
    ws.write_json(os.path.join(pd.job_dir, name + ".ccx"), plan)
    base = {"name": name, "project": name, "plan_file": name + ".ccx", "master": "spark://h:7077",
            "started": time.time() - 100, "pid": None, "pid_start": None,
            "inputs": {"s": {"directory": pd.input_dir("s"), "pattern": None, "how": "workspace",
                             "seeded": None, "passed": True}}}
    ws.write_json(pd.meta_file, {**base, **(meta or {})})
    return pd


def write_stats(pd, element, batch, rows_in, bad=None, age=0.0):
    path = os.path.join(pd.checkpoint, "stats", element, f"batch-{batch:08d}.json")
    ws.write_json(path, {"rows_in": rows_in, "rows_out": {"i": rows_in}, "bad": bad or {},
                         "instances": {"0": rows_in}})
    t = time.time() - age
    os.utime(path, (t, t))


def dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# --------------------------------------------------------------------------------------------------
# Workspace, names, metadata
# --------------------------------------------------------------------------------------------------

def test_workspace_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(ws.WORKSPACE_ENV, raising=False)
    home = os.path.expanduser("~")
    assert ws.resolve_workspace(None, "~/.ccl/workspace", True) == os.path.join(home, ".ccl", "workspace")
    monkeypatch.setenv(ws.WORKSPACE_ENV, str(tmp_path / "env"))
    assert ws.resolve_workspace(None, "~/.ccl/workspace", True) == str(tmp_path / "env")
    # a value set on the command line, in the .ccr or a --config file beats the variable
    assert ws.resolve_workspace(None, str(tmp_path / "set"), False) == str(tmp_path / "set")
    assert ws.resolve_workspace(str(tmp_path / "opt"), str(tmp_path / "set"), False) == str(tmp_path / "opt")


def test_workspace_setting_is_known_to_ccl_config():
    code, out, _ = run("config", str(TRADES / "trades_roundrobin.ccl"),
                       "--set", "runtime.workspace=/srv/ccl")
    assert code == 0 and "runtime.workspace" in out and "/srv/ccl" in out


@pytest.mark.parametrize("name", ["", "../x", "a/b", "_cluster", ".hidden", "x" * 65, "a b", "é"])
def test_bad_project_names(name):
    with pytest.raises(UsageError):
        ws.check_name(name)


def test_good_project_names():
    for name in ("trades_roundrobin", "prod-1", "A.b_c"):
        assert ws.check_name(name) == name


def test_list_ignores_other_directories(tmp_path):
    make_project(tmp_path, "b")
    make_project(tmp_path, "a")
    os.makedirs(tmp_path / "ws" / "_cluster")
    os.makedirs(tmp_path / "ws" / "junk")
    assert ws.list_projects(str(tmp_path / "ws")) == ["a", "b"]
    code, out, _ = run("list", "--workspace", str(tmp_path / "ws"))
    assert code == 0 and out.splitlines()[0].startswith("NAME")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["a", "b"]


# --------------------------------------------------------------------------------------------------
# Processes and states
# --------------------------------------------------------------------------------------------------

def test_pid_identity():
    me = os.getpid()
    assert ws.pid_alive(me) and ws.pid_alive(me, ws.process_start_time(me))
    assert not ws.pid_alive(me, (ws.process_start_time(me) or 0) + 1)  # another process, same id
    assert not ws.pid_alive(dead_pid())
    assert not ws.pid_alive(None) and not ws.pid_alive(-1)


def test_zombie_is_not_alive():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 10
    while time.time() < deadline and ws.process_start_time(p.pid) is not None:
        time.sleep(0.05)
    assert not ws.pid_alive(p.pid)  # exited, not yet reaped
    p.wait()


def test_state_of_a_running_project_and_its_counters(tmp_path):
    me = os.getpid()
    pd = make_project(tmp_path, meta={"pid": me, "pid_start": ws.process_start_time(me)})
    write_stats(pd, "s", 0, 100, age=300)
    write_stats(pd, "s", 1, 30, bad={"bad opcode": 2}, age=10)
    write_stats(pd, "o", 0, 100, bad={"x": 1}, age=300)
    st = ws.project_state(pd)
    assert st["state"] == ws.STARTING  # no driver yet: spark-submit is starting
    assert st["rows_in"] == 130 and st["bad_records"] == 3 and st["batches"] == 3
    assert st["rows_per_second"] == pytest.approx(30 / ws.RATE_WINDOW)
    assert 99 <= st["uptime"] <= 110
    assert abs(st["last_batch"] - (time.time() - 10)) < 5
    text = "\n".join(ws.describe(st))
    assert "starting" in text and "rows in      130" in text and "bad records  3" in text


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode("utf-8", "replace")


def test_running_once_the_driver_runs(tmp_path):
    sleeper = None
    pd = make_project(tmp_path)
    try:
        # a stand-in driver whose command line names the job directory, as the real one does
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", pd.job_dir])
        # Popen returns after fork: until exec, /proc shows this process's command line
        deadline = time.time() + 20
        while time.time() < deadline and pd.job_dir not in _cmdline(sleeper.pid):
            time.sleep(0.05)
        with open(pd.driver_pid_file, "w") as f:
            f.write(f"{sleeper.pid}\n")
        meta = pd.meta()
        meta.update(pid=os.getpid(), pid_start=ws.process_start_time(os.getpid()))
        ws.write_json(pd.meta_file, meta)
        assert ws.project_state(pd)["state"] == ws.RUNNING
        with open(pd.driver_pid_file, "w") as f:
            f.write(f"{os.getpid()}\n")  # a live process that is not this project's driver
        assert ws.project_state(pd)["state"] == ws.STARTING
    finally:
        if sleeper:
            sleeper.kill()
            sleeper.wait()


def test_stopped_and_failed_states(tmp_path):
    pd = make_project(tmp_path, meta={"pid": dead_pid()})
    started = pd.meta()["started"]
    # no exit record and no process: lost
    with open(pd.log_file, "w") as f:
        f.write("starting\nERROR SparkContext: Could not connect to spark://h:7077\nbye\n")
    st = ws.project_state(pd)
    assert st["state"] == ws.FAILED and "Could not connect" in st["detail"]
    ws.write_json(pd.exit_file, {"code": 0, "started": started, "ended": time.time()})
    assert ws.project_state(pd)["state"] == ws.STOPPED
    ws.write_json(pd.exit_file, {"code": 1, "started": started, "ended": time.time()})
    st = ws.project_state(pd)
    assert st["state"] == ws.FAILED and st["exit_code"] == 1 and "exit code 1" in st["detail"]
    # an exit record of an earlier run says nothing about this one
    ws.write_json(pd.exit_file, {"code": 0, "started": started - 50, "ended": time.time()})
    assert ws.project_state(pd)["state"] == ws.FAILED
    # a requested stop that ended with a signal is a stop
    meta = pd.meta()
    meta["stop_requested"] = started + 10
    ws.write_json(pd.meta_file, meta)
    ws.write_json(pd.exit_file, {"code": -15, "started": started, "ended": time.time()})
    assert ws.project_state(pd)["state"] == ws.STOPPED
    code, out, _ = run("status", "p", "--workspace", pd.workspace, "--format", "json")
    assert code == 0 and json.loads(out)["state"] == "stopped"
    code, out, _ = run("status", "--workspace", pd.workspace)
    assert code == 0 and out.splitlines()[1].split()[:2] == ["p", "stopped"]


def test_status_of_unknown_project(tmp_path):
    make_project(tmp_path, "known")
    code, _, err = run("status", "nosuch", "--workspace", str(tmp_path / "ws"))
    assert code == 2 and "no project 'nosuch'" in err and "known" in err and "Traceback" not in err
    code, _, err = run("stop", "../etc", "--workspace", str(tmp_path / "ws"))
    assert code == 2 and "not a usable project name" in err


def test_logs_tail(tmp_path):
    pd = make_project(tmp_path)
    with open(pd.log_file, "w") as f:
        f.write("".join(f"line {i}\n" for i in range(1000)) + "status 1\rstatus 2\n")
    code, out, _ = run("logs", "p", "-n", "3", "--workspace", pd.workspace)
    assert code == 0 and out == "line 999\nstatus 1\nstatus 2\n"
    assert ws.tail_lines(pd.log_file, 0) == []
    code, _, err = run("logs", "p", "-n", "-1", "--workspace", pd.workspace)
    assert code == 2


# --------------------------------------------------------------------------------------------------
# Publish
# --------------------------------------------------------------------------------------------------

def test_publish_is_atomic_for_the_csv_source(tmp_path, monkeypatch):
    from runtime.inputs.listing import FileSpec, list_new_files

    pd = make_project(tmp_path)
    src = tmp_path / "rows.csv"
    src.write_text("id,name\n1,a\n2,b\n")
    directory = pd.input_dir("s")
    spec = FileSpec(directory, None, "*")
    seen_while_writing = []
    real_link = os.link

    def link(a, b):  # the moment before the file gets its name: the reader sees nothing new
        seen_while_writing.append((sorted(os.listdir(directory)), list_new_files(spec, [])))
        return real_link(a, b)

    monkeypatch.setattr(os, "link", link)
    code, out, _ = run("publish", "p", "s", str(src), "--workspace", pd.workspace)
    assert code == 0
    (names, new), = seen_while_writing
    assert len(names) == 1 and names[0].startswith(".") and names[0].endswith(".tmp")
    assert new == []
    final = list_new_files(spec, [])
    assert len(final) == 1 and final[0].endswith("-rows.csv") and os.listdir(directory) == final
    assert (Path(directory) / final[0]).read_text() == src.read_text()
    assert final[0] in out
    # the next one sorts after it
    time.sleep(0.01)
    assert run("publish", "p", "s", str(src), "--workspace", pd.workspace)[0] == 0
    later = list_new_files(spec, final)
    assert len(later) == 1 and later[0] > final[0]


def test_publish_refusals(tmp_path):
    pd = make_project(tmp_path)
    src = tmp_path / "rows.csv"
    src.write_text("id,name\n1,a\n")
    code, _, err = run("publish", "p", "nosuch", str(src), "--workspace", pd.workspace)
    assert code == 2 and "no input element 'nosuch'" in err and "(inputs: s)" in err
    code, _, err = run("publish", "p", "s", str(tmp_path / "missing.csv"), "--workspace", pd.workspace)
    assert code == 2 and "no such file" in err
    code, _, err = run("publish", "nosuch", "s", str(src), "--workspace", pd.workspace)
    assert code == 2 and "Traceback" not in err


def test_publish_names_follow_the_adapter_pattern():
    assert ws.publish_name("x/trades.csv", "*.csv", now=0).endswith("-trades.csv")
    assert ws.publish_name("x/trades_1.csv", "trades_*.csv", now=0) == "trades_1.csv"
    with pytest.raises(UsageError, match="does not match"):
        ws.publish_name("x/rows.txt", "*.csv", now=0)
    with pytest.raises(UsageError, match="already"):
        ws.publish_name("x/trades_1.csv", "trades_*.csv", {"trades_1.csv"}, now=0)
    for hidden in ("_rows.csv", ".rows.csv", "rows.tmp"):
        name = ws.publish_name(hidden, None, now=0)
        assert not name.startswith((".", "_")) and not name.endswith(".tmp")


# --------------------------------------------------------------------------------------------------
# Subscribe
# --------------------------------------------------------------------------------------------------

def write_changelog(pd, element, batch, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "__batch": pa.array([batch] * len(rows), pa.int64()),
        "__inst": pa.array([r[0] for r in rows], pa.int32()),
        "__seq": pa.array([r[1] for r in rows], pa.int64()),
        "__sub": pa.array([0] * len(rows), pa.int64()),
        "__op": pa.array([r[2] for r in rows], pa.string()),
        "id": pa.array([r[3] for r in rows], pa.int32()),
        "name": pa.array([r[4] for r in rows], pa.string())})
    path = os.path.join(pd.checkpoint, "changelog", element, f"batch-{batch:08d}.parquet")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path + ".tmp")
    os.replace(path + ".tmp", path)


def test_subscribe_prints_changes_in_order(tmp_path):
    pd = make_project(tmp_path)
    write_changelog(pd, "o", 0, [(1, 7, "i", 2, "b, with comma"), (0, 3, "i", 1, "a")])
    write_changelog(pd, "o", 1, [(0, 9, "d", 1, None)])
    code, out, _ = run("subscribe", "p", "o", "--once", "--workspace", pd.workspace)
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["ESP_OPS", "id", "name"], ["i", "1", "a"], ["i", "2", "b, with comma"], ["d", "1", ""]]
    code, _, err = run("subscribe", "p", "nosuch", "--once", "--workspace", pd.workspace)
    assert code == 2 and "no element 'nosuch'" in err


def test_subscribe_follows_new_batches_and_ends_on_ctrl_c(tmp_path, monkeypatch):
    pd = make_project(tmp_path)
    write_changelog(pd, "o", 0, [(0, 1, "i", 1, "old")])
    sleeps = []

    def fake_sleep(seconds):  # a batch arrives while subscribed, then Ctrl-C
        sleeps.append(seconds)
        if len(sleeps) == 1:
            write_changelog(pd, "o", 1, [(0, 2, "i", 2, "new")])
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", fake_sleep)
    code, out, err = run("subscribe", "p", "o", "--workspace", pd.workspace)
    assert code == 0 and out == "ESP_OPS,id,name\ni,2,new\n" and err == ""


# --------------------------------------------------------------------------------------------------
# Stop and the supervisor (stand-in processes, no Spark)
# --------------------------------------------------------------------------------------------------

def spawn(code):
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_stop_sends_sigterm_then_kills(tmp_path):
    pd = make_project(tmp_path)
    assert deploy_mod.stop(pd, timeout=1) == "not running"
    polite = spawn("import time; time.sleep(60)")
    stubborn = spawn("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                     "print('ready', flush=True); time.sleep(60)")
    try:
        for proc, want in ((polite, "stopped"), (stubborn, "killed")):
            time.sleep(0.5)
            meta = pd.meta()
            meta.update(pid=proc.pid, pid_start=ws.process_start_time(proc.pid))
            ws.write_json(pd.meta_file, meta)
            assert deploy_mod.stop(pd, timeout=1.0) == want
            proc.wait(timeout=10)
            assert pd.meta()["stop_requested"] >= meta["started"]
        assert ws.read_json(pd.exit_file)["killed"] is True
        assert ws.project_state(pd)["state"] == ws.STOPPED
    finally:
        for proc in (polite, stubborn):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_supervisor_records_the_exit_and_forwards_sigterm(tmp_path):
    root = tmp_path / "ws" / "p"
    root.mkdir(parents=True)
    cmd = [sys.executable, "-m", "ccl.ops.deploy", "supervise", str(root), "12.5", "--"]
    env = deploy_mod.python_env()
    noisy = ("print('hello'); print('Streaming TransformWithStateInPandas Python worker done.'); "
             "print(); print('bye'); raise SystemExit(3)")
    done = subprocess.run(cmd + [sys.executable, "-c", noisy], env=env, timeout=60)
    assert done.returncode == 0
    assert ws.read_json(str(root / "exit.json"))["code"] == 3
    assert ws.read_json(str(root / "exit.json"))["started"] == 12.5
    assert (root / "driver.log").read_text() == "hello\nbye\n"  # PySpark's chatter left out
    child = ("import signal, sys, time\n"
             "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
             "print('up', flush=True)\n"
             "time.sleep(60)\n")
    sup = subprocess.Popen(cmd + [sys.executable, "-c", child], env=env, start_new_session=True)
    try:
        deadline = time.time() + 30
        while "up" not in (root / "driver.log").read_text() and time.time() < deadline:
            time.sleep(0.1)
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=30) == 0
        assert ws.read_json(str(root / "exit.json"))["code"] == 0  # the child stopped cleanly
    finally:
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGKILL)
            sup.wait()
    assert subprocess.run([sys.executable, "-m", "ccl.ops.deploy", "nonsense"], env=env,
                          capture_output=True).returncode == 2


# --------------------------------------------------------------------------------------------------
# Deploy: refusals, input bindings, the spark-submit command (no Spark started)
# --------------------------------------------------------------------------------------------------

def test_deploy_refuses_a_local_master(tmp_path, monkeypatch):
    monkeypatch.setenv(ws.WORKSPACE_ENV, str(tmp_path / "ws"))
    src = tmp_path / "p.ccl"
    src.write_text(GOOD)
    code, out, err = run("deploy", str(src))
    assert code == 2 and "--master spark://HOST:PORT" in err and "ccl cluster start" in err
    code, _, err = run("deploy", str(src), "--master", "local[2]")
    assert code == 2 and "ccl run" in err and "Traceback" not in err
    code, _, err = run("deploy", str(src), "--set", "spark.master=yarn")
    assert code == 2 and "spark.master (command line) is yarn" in err
    code, _, err = run("deploy", str(src), "--master", "nonsense")
    assert code == 2 and "not a Spark master URL" in err
    assert not os.path.exists(tmp_path / "ws" / "p")


def test_deploy_refusals_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv(ws.WORKSPACE_ENV, str(tmp_path / "ws"))
    src = tmp_path / "p.ccl"
    src.write_text(GOOD)
    master = ("--master", "spark://127.0.0.1:7077")
    bad = tmp_path / "bad.ccl"
    bad.write_text("create output stream o as select x.a from x;\n")
    code, out, err = run("deploy", str(bad), *master)
    assert code == 1 and "not deployed" in err
    code, _, err = run("deploy", str(src), *master, "--name", "a/b")
    assert code == 2 and "not a usable project name" in err
    code, _, err = run("deploy", str(src), *master, "--input", f"nosuch={src}")
    assert code == 2 and "no input element" in err
    code, _, err = run("deploy", str(src), *master, "--set", "spark.state_store=hdfs")
    assert code == 2 and "rocksdb" in err
    # a project of that name is running
    make_project(tmp_path, "p", meta={"pid": os.getpid(),
                                           "pid_start": ws.process_start_time(os.getpid())})
    code, _, err = run("deploy", str(src), *master)
    assert code == 2 and "p is running" in err and "ccl stop p" in err


def test_deploy_refuses_a_checkpoint_it_cannot_resume(tmp_path, monkeypatch):
    monkeypatch.setenv(ws.WORKSPACE_ENV, str(tmp_path / "ws"))
    src = tmp_path / "p.ccl"
    src.write_text("create input stream s schema (id integer);\n"
                   "create output window o primary key (id) partition by s hash(id) partitions 3 "
                   "as select * from s;\n")
    pd = ws.ProjectDir(str(tmp_path / "ws"), "p")
    before = tmp_path / "before" / "p.ccl"  # the checkpoint's run had 4 instances
    before.parent.mkdir()
    before.write_text(src.read_text().replace("partitions 3", "partitions 4"))
    old, _ = plan_json(str(before))
    ws.write_json(os.path.join(pd.checkpoint, "run.json"), {"buckets": 8, "unrecorded": [], "window_store": [],
                                                            "state_store": STATE_LAYOUT, "file_source": [],
                                                            "numbering": "arrival"})
    ws.write_json(os.path.join(pd.checkpoint, "plan.json"), old)
    code, _, err = run("deploy", str(src), "--master", "spark://127.0.0.1:7077")
    assert code == 2 and "had 4 partition instance(s)" in err and "has 3 now" in err
    ws.write_json(os.path.join(pd.checkpoint, "plan.json"), {**old, "project": "other"})
    code, _, err = run("deploy", str(src), "--master", "spark://127.0.0.1:7077")
    assert code == 2 and "checkpoint of project 'other'" in err
    ws.write_json(os.path.join(pd.checkpoint, "plan.json"), {**old, "version": 1})
    code, _, err = run("deploy", str(src), "--master", "spark://127.0.0.1:7077")
    assert code == 2 and "older ccl (plan version 1)" in err and "remove" in err


def test_deploy_command_and_input_bindings(tmp_path, monkeypatch):
    """Deploy trades_roundrobin with the start replaced: the compiled job in the workspace, the
    spark-submit command, every input element bound to a directory, the adapter's file seeded."""
    monkeypatch.setenv(ws.WORKSPACE_ENV, str(tmp_path / "ws"))
    started = {}

    def fake_start(pd, meta, cmd):
        started.update(pd=pd, meta=meta, cmd=list(cmd))
        meta = {**meta, "started": time.time(), "pid": os.getpid(),
                "pid_start": ws.process_start_time(os.getpid())}
        ws.write_json(pd.meta_file, meta)
        return meta

    monkeypatch.setattr(deploy_mod, "start", fake_start)
    monkeypatch.setattr(deploy_mod, "check_java", lambda: None)
    code, out, err = run("deploy", str(TRADES / "trades_roundrobin.ccl"),
                         "--master", "spark://127.0.0.1:7077", "--name", "rr",
                         "--set", "spark.shuffle_partitions=3")
    assert code == 0, err
    pd = started["pd"]
    assert pd.root == str(tmp_path / "ws" / "rr")
    cmd = started["cmd"]
    assert cmd[0].endswith(os.path.join("bin", "spark-submit"))
    flags = dict(zip(cmd[1:], cmd[2:]))
    assert flags["--master"] == "spark://127.0.0.1:7077" and flags["--deploy-mode"] == "client"
    assert flags["--py-files"] == os.path.join(pd.job_dir, "ccl_runtime.zip")
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert "spark.sql.shuffle.partitions=3" in confs
    assert f"spark.pyspark.python={sys.executable}" in confs
    job = os.path.join(pd.job_dir, "trades_roundrobin_job.py")
    assert job in cmd and os.path.isfile(job) and os.path.isfile(flags["--py-files"])
    args = cmd[cmd.index(job) + 1:]
    opts = dict(zip(args[::2], args[1::2]))
    assert opts["--checkpoint"] == pd.checkpoint and opts["--output-dir"] == pd.out_dir
    assert opts["--base-dir"] == str(TRADES) and opts["--pid-file"] == pd.driver_pid_file
    assert opts["--input"] == f"Trades={pd.input_dir('Trades')}"
    # the adapter reads one file: it is copied into the workspace input directory
    assert os.listdir(pd.input_dir("Trades")) == ["trades.csv"]
    meta = pd.meta()
    assert meta["inputs"]["Trades"]["how"] == "workspace"
    assert meta["master"] == "spark://127.0.0.1:7077" and meta["project"] == "trades_roundrobin"
    assert "deployed rr on spark://127.0.0.1:7077" in out and pd.input_dir("Trades") in out
    env = deploy_mod.python_env()
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable


def test_input_bindings(tmp_path):
    pd = ws.ProjectDir(str(tmp_path / "ws"), "p")
    feed = tmp_path / "feed"
    feed.mkdir()
    one = tmp_path / "one.csv"
    one.write_text("a\n1\n")
    from ccl.plan.model import Adapter, Element, Plan, Query

    plan = Plan("p", "p.ccl", {}, (),
                tuple(Element(n, "stream", "input", None, None, (), ()) for n in "abcde")
                + (Element("x", "stream", "output", None, None, (), (), query=Query(())),),
                (Adapter("c_in", "input", "toolkit_file_csv_input", "c",
                         properties={"Dir": "data", "filePattern": "*.csv"}),
                 Adapter("d_in", "input", "dsv_in", "d", properties={"dir": "data", "file": "d.csv"}),
                 # not a file adapter: e is bound to its workspace directory like an element without one
                 Adapter("e_in", "input", "kafka_in", "e", properties={"dir": "data"})))
    got = deploy_mod.bind_inputs(plan, pd, str(tmp_path), {"a": str(feed), "b": str(one)})
    assert (got["a"].directory, got["a"].how, got["a"].passed) == (str(feed), "--input", True)
    assert (got["b"].directory, got["b"].seeded) == (pd.input_dir("b"), str(one))
    assert (got["c"].directory, got["c"].pattern, got["c"].passed) == (str(tmp_path / "data"), "*.csv", False)
    assert (got["d"].directory, got["d"].seeded) == (pd.input_dir("d"), str(tmp_path / "data" / "d.csv"))
    assert (got["e"].directory, got["e"].how, got["e"].seeded) == (pd.input_dir("e"), "workspace", None)
    assert set(got) == set("abcde")
    copied = deploy_mod.seed_inputs(got)
    assert copied == [os.path.join(pd.input_dir("b"), "one.csv")]  # d's file does not exist
    one.write_text("a\n2\n")
    assert deploy_mod.seed_inputs(got) == []  # once: a redeploy does not copy it again
    assert os.path.isdir(pd.input_dir("e"))


def test_cluster_status_without_a_cluster(tmp_path):
    code, out, _ = run("cluster", "status", "--workspace", str(tmp_path / "ws"))
    assert code == 0 and "no cluster is running" in out
    code, out, _ = run("cluster", "stop", "--workspace", str(tmp_path / "ws"))
    assert code == 0 and "no cluster is running" in out
    code, _, err = run("cluster", "start", "--memory", "lots", "--workspace", str(tmp_path / "ws"))
    assert code == 2 and "--memory" in err
    code, _, err = run("cluster", "start", "--workers", "0", "--workspace", str(tmp_path / "ws"))
    assert code == 2 and "--workers" in err


def test_cluster_metadata_of_the_one_worker_layout_gives_its_worker():
    from ccl.ops import cluster as cluster_mod

    assert cluster_mod.workers({"worker_pid": 12, "worker_pid_start": 3.0}) == [
        {"pid": 12, "pid_start": 3.0}]
    assert cluster_mod.workers({"workers": [{"pid": 5, "pid_start": 1.0}, {"pid": "x"}],
                                "worker_pid": 5}) == [{"pid": 5, "pid_start": 1.0}]
    assert cluster_mod.workers({}) == []


# --------------------------------------------------------------------------------------------------
# The real thing: a standalone cluster on 127.0.0.1
# --------------------------------------------------------------------------------------------------

def _ccl(env, *args, timeout=120):
    done = subprocess.run([sys.executable, "-m", "ccl.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))
    return done.returncode, done.stdout, done.stderr


def _large_trades(path):
    with open(path, newline="") as f:
        return [r["TradeId"] for r in csv.DictReader(f) if int(r["Volume"]) > 10000]


def _subscribed_ids(env, name):
    code, out, err = _ccl(env, "subscribe", name, "LargeTrades", "--once")
    assert code == 0, err
    return [r["TradeId"] for r in csv.DictReader(io.StringIO(out))]


def _wait_for(what, check, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _kill_leftovers(workspace):
    """Whatever the commands left running (only the process groups this test started)."""
    from ccl.ops import cluster as cluster_mod

    cluster_meta = ws.read_json(os.path.join(workspace, "_cluster", "cluster.json")) or {}
    groups = [(w["pid"], w.get("pid_start")) for w in cluster_mod.workers(cluster_meta)]
    for meta, key in (((ws.read_json(os.path.join(workspace, "rr", "project.json")) or {}), "pid"),
                      (cluster_meta, "master_pid")):
        groups.append((meta.get(key), meta.get(key + "_start")))
    for pid, start in groups:
        if ws.pid_alive(pid, start):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.skipif(os.environ.get("CCL_SKIP_CLUSTER_TEST") == "1" or not shutil.which("java"),
                    reason="needs Java; CCL_SKIP_CLUSTER_TEST=1 skips it")
def test_real_cluster_with_two_workers_status_and_stop_cover_both(tmp_path):
    """`ccl cluster start --workers 2`: both register with the master, `status` lists both pids,
    `stop` ends both and the master."""
    from ccl.ops import cluster as cluster_mod

    workspace = str(tmp_path / "ws")
    env = {**os.environ, ws.WORKSPACE_ENV: workspace,
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    try:
        code, out, err = _ccl(env, "cluster", "start", "--workers", "2", "--port", "0",
                              "--webui-port", "0", "--cores", "1", "--memory", "512m")
        assert code == 0, err
        assert "2 workers, each (1 core, 512m)" in err
        meta = ws.read_json(os.path.join(workspace, "_cluster", "cluster.json"))
        started = cluster_mod.workers(meta)
        assert len(started) == 2 and meta["worker_pid"] == started[0]["pid"]
        assert len({w["log"] for w in started}) == 2 and len({w["work"] for w in started}) == 2
        info = cluster_mod.master_json(meta["web_url"])
        assert info["aliveworkers"] == 2 and info["cores"] == 2
        code, out, _ = _ccl(env, "cluster", "status")
        assert code == 0 and "workers 2, cores 2" in out
        assert all(str(w["pid"]) in out for w in started) and "not running" not in out
        code, out, _ = _ccl(env, "cluster", "stop")
        assert code == 0 and "stopped the cluster" in out
        assert not any(ws.pid_alive(w["pid"], w["pid_start"]) for w in started)
        assert not ws.pid_alive(meta["master_pid"], meta["master_pid_start"])
        code, out, _ = _ccl(env, "cluster", "status")
        assert "no cluster is running" in out
    finally:
        _ccl(env, "cluster", "stop")
        _kill_leftovers(workspace)


@pytest.mark.skipif(os.environ.get("CCL_SKIP_CLUSTER_TEST") == "1" or not shutil.which("java"),
                    reason="needs Java; CCL_SKIP_CLUSTER_TEST=1 skips it")
def test_real_standalone_cluster_deploy_publish_subscribe_stop(tmp_path):
    """`ccl cluster start` (master + worker on free ports), `ccl deploy` trades_roundrobin (the
    master found from the workspace's cluster), its LargeTrades changes match the input, a
    published file is processed, `ccl stop` writes the outputs, `ccl cluster stop`."""
    workspace = str(tmp_path / "ws")
    env = {**os.environ, ws.WORKSPACE_ENV: workspace,
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    began = time.monotonic()
    expected = _large_trades(TRADES / "data" / "trades.csv")
    assert len(expected) == 99
    try:
        code, out, err = _ccl(env, "cluster", "start", "--port", "0", "--webui-port", "0",
                              "--cores", "2", "--memory", "1g")
        assert code == 0, err
        master = out.strip()
        assert master.startswith("spark://127.0.0.1:")

        code, out, err = _ccl(env, "deploy", str(TRADES / "trades_roundrobin.ccl"), "--name", "rr")
        assert code == 0, err + out
        assert f"deployed rr on {master}" in out
        code, out, _ = _ccl(env, "deploy", str(TRADES / "trades_roundrobin.ccl"), "--name", "rr")
        assert code == 2  # running: refused

        got = _wait_for("the first LargeTrades rows",
                        lambda: _subscribed_ids(env, "rr") or None, 240)
        assert got == expected  # the filter over 3 ROUNDROBIN instances, in input order

        more = tmp_path / "more.csv"
        more.write_text("TradeId,Ts,Symbol,Price,Volume\n"
                        "900001,2024-03-04T10:00:00.000000,ZZZ,10.00,50000\n"
                        "900002,2024-03-04T10:00:01.000000,ZZZ,10.00,5\n"
                        "900003,2024-03-04T10:00:02.000000,ZZZ,11.00,20000\n")
        code, out, err = _ccl(env, "publish", "rr", "Trades", str(more))
        assert code == 0, err
        got = _wait_for("the published rows",
                        lambda: (lambda ids: ids if len(ids) > 99 else None)(_subscribed_ids(env, "rr")), 120)
        assert got == expected + ["900001", "900003"]

        code, out, _ = _ccl(env, "status", "rr", "--format", "json")
        st = json.loads(out)
        assert st["state"] == "running" and st["rows_in"] == 303 and st["bad_records"] == 0

        code, out, err = _ccl(env, "stop", "rr")
        assert code == 0 and "stopped rr" in out, err + out
        code, out, _ = _ccl(env, "status", "rr", "--format", "json")
        assert json.loads(out)["state"] == "stopped"
        written = _large_trades(Path(workspace) / "rr" / "out" / "LargeTrades.csv")
        assert written == expected + ["900001", "900003"]  # outputs written by the graceful stop
        report = (Path(workspace) / "rr" / "out" / "report.html").read_text()  # by the supervisor
        assert "LargeTrades" in report and 'class="meta">finished' in report.replace("\n", "")
        # the whole log: the cluster's shutdown may log stack traces after the driver's summary
        code, out, _ = _ccl(env, "logs", "rr", "-n", "100000")
        assert code == 0 and "LargeTrades: 303 in, 101 out" in out
    finally:
        _ccl(env, "stop", "rr", "--timeout", "15")
        _ccl(env, "cluster", "stop")
        _kill_leftovers(workspace)
    print(f"real cluster test: {time.monotonic() - began:.0f} s")
