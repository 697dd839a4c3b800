"""``ccl deploy`` and ``ccl stop``: a compiled project started on a Spark cluster with the installed
pyspark's ``spark-submit``, detached, its state and logs in the workspace (:mod:`ccl.ops.workspace`).

Processes of a deployed project, all in one new session (process group) whose leader is the
*supervisor*::

    python -m ccl.ops.deploy supervise ROOT STARTED -- spark-submit ...   (pid in project.json)
      └─ java ... SparkSubmit --deploy-mode client ...                 (spark-submit's JVM)
           └─ python ROOT/job/PROJECT_job.py ...                       (the driver; driver.pid)
      └─ python -m runtime.web ROOT/web-config.json                  (the web service, when enabled)

The supervisor sends spark-submit's output to ``driver.log`` (without PySpark's per-batch
Python-worker lines, filtered by :mod:`runtime.quiet`), waits for it and writes
``exit.json`` (exit code, end time). SIGTERM to the supervisor (``ccl stop``) is passed on to the
Python driver, whose ``run_plan`` stops the queries and writes the outputs, so the job ends with
exit code 0; before the driver runs it goes to spark-submit. After the stop timeout the whole
process group gets SIGKILL: the checkpoint stays usable (a replayed batch rewrites the same
files). The web service (``web.enabled``) is the supervisor's second child: it starts with the
job and is stopped when the job has ended (so that subscribers see its last batches).

Nothing here imports pyspark.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from ..config.property_sets import AdapterConfig
from ..config.secret import Secret, is_secret_name
from ..plan.model import Plan
from ..plan.physical import INBOX_INPUT_ADAPTERS, input_adapter
from ..syntax.project import UsageError
from .workspace import (ProjectDir, driver_pid, process_start_time, supervisor_alive,
                        write_json)

STOP_TIMEOUT = 60.0  # seconds `ccl stop` waits for a graceful end before SIGKILL


# --------------------------------------------------------------------------------------------------
# The installed Spark
# --------------------------------------------------------------------------------------------------

def spark_bin(script: str) -> str:
    """A script of the installed pyspark's ``bin/`` (``spark-submit``, ``spark-class``)."""
    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for home in [os.environ.get("SPARK_HOME", "")] + locations:
        path = os.path.join(home, "bin", script) if home else ""
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise UsageError(f"cannot find Spark's {script}: install pyspark (pip install ccl-spark) "
                     f"or set SPARK_HOME")


def check_java() -> None:
    """Spark needs Java: JAVA_HOME/bin/java or java on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return
    if shutil.which("java"):
        return
    raise UsageError("Spark needs Java 17 or later: install it, or set JAVA_HOME")


def python_env(extra: Optional[dict] = None) -> dict:
    """The environment of spark-submit and the driver: this interpreter runs the driver and the
    executors' Python workers (it has pyspark, pandas, pyarrow); the ``ccl`` and ``runtime``
    packages of this process come first on the path."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra or {})
    return env


# --------------------------------------------------------------------------------------------------
# Inputs: every input element reads a directory ccl publish can write into
# --------------------------------------------------------------------------------------------------

@dataclass
class InputBinding:
    """Where an input element of a deployed project reads its files (and ``ccl publish`` writes)."""

    directory: str
    pattern: Optional[str]     # file name glob the reader applies (None: every file)
    how: str                   # "workspace", "--input" or "adapter"
    seeded: Optional[str] = None   # the file copied into the workspace directory at deploy
    passed: bool = True        # given to the job as --input ELEMENT=DIRECTORY


def input_elements(plan: Plan) -> list[str]:
    """The names of the plan's input elements (those read from files)."""
    return [e.name for e in plan.elements if e.is_input]


def _adapter_props(plan: Plan, element: str) -> Optional[dict]:
    adapter = input_adapter(plan, element)
    if adapter is None or str(adapter.type).lower() in INBOX_INPUT_ADAPTERS:
        return None  # a socket or database adapter writes into the element's workspace directory
    return {str(k).lower(): v for k, v in adapter.properties.items()}


def bind_inputs(plan: Plan, pd: ProjectDir, base_dir: str, given: dict[str, str]
                ) -> dict[str, InputBinding]:
    """The input directory of every input element:

    - ``--input E=DIR``: DIR;
    - an input adapter with ``dir`` and no ``file`` (a directory the adapter watches, with its
      ``filePattern``): that directory;
    - anything else (``--input E=FILE``, an adapter reading one ``file``, no binding):
      ``WORKSPACE/NAME/inputs/E/``, with the one file copied into it on the first deploy."""
    out: dict[str, InputBinding] = {}
    for name in input_elements(plan):
        path = given.get(name)
        props = _adapter_props(plan, name)
        seed: Optional[str] = None
        if path is not None and os.path.isdir(path):
            out[name] = InputBinding(os.path.abspath(path), None, "--input")
            continue
        if path is not None:
            seed = os.path.abspath(path)
        elif props is not None:
            directory = os.path.join(base_dir, str(props.get("dir", ".")))
            if not props.get("file"):
                pattern = str(props.get("filepattern") or "*")
                out[name] = InputBinding(os.path.abspath(directory), pattern, "adapter", passed=False)
                continue
            seed = os.path.abspath(os.path.join(directory, str(props["file"])))
        out[name] = InputBinding(pd.input_dir(name), None, "workspace", seed)
    return out


def seed_inputs(bindings: dict[str, InputBinding]) -> list[str]:
    """Create the workspace input directories and copy each one's first file into it (once: a
    file of that name already there, read or not, is left alone). Returns what was copied."""
    copied = []
    for b in bindings.values():
        if b.how != "workspace":
            continue
        os.makedirs(b.directory, exist_ok=True)
        if not b.seeded or not os.path.isfile(b.seeded):
            continue
        name = os.path.basename(b.seeded)
        if name.startswith((".", "_")) or name.endswith(".tmp"):
            name = "input-" + name.lstrip("._")
            if name.endswith(".tmp"):
                name = name[:-4] + "_tmp"
        if os.path.exists(os.path.join(b.directory, name)):
            continue
        copied.append(_copy_as(b.seeded, b.directory, name))
    return copied


def _copy_as(src: str, directory: str, name: str) -> str:
    tmp_dir = os.path.join(os.path.dirname(directory), f".seed-{os.getpid()}")
    os.makedirs(tmp_dir, exist_ok=True)
    try:
        staged = os.path.join(tmp_dir, name)
        shutil.copyfile(src, staged)
        final = os.path.join(directory, name)
        os.replace(staged, final)  # same file system: atomic
        return final
    except OSError as exc:
        raise UsageError(f"cannot copy {src} into {directory}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Resuming
# --------------------------------------------------------------------------------------------------

def check_resumable(pd: ProjectDir, plan: dict) -> None:
    """Refuse a checkpoint ``plan`` (JSON form) cannot go on from, before spark-submit starts (the
    driver would refuse it for the same reason, runtime/run_dir.py, but only once started)."""
    from runtime.run_dir import saved_plan, why_not_resumable

    old = saved_plan(pd.checkpoint)
    problem = None if old is None else why_not_resumable(pd.checkpoint, old, plan)
    if problem:
        raise UsageError(f"{pd.name} cannot go on from its checkpoint: {problem}. Deploy under "
                         f"another --name, or remove {pd.checkpoint} to begin with empty state")


# --------------------------------------------------------------------------------------------------
# Starting
# --------------------------------------------------------------------------------------------------

@dataclass
class SubmitSpec:
    """What spark-submit is given."""

    master: str
    app_name: str
    job_file: str
    bundle: str
    base_dir: str
    shuffle_partitions: int
    trigger_interval: str
    poll_interval: str
    buckets: int  # 0: auto (runtime.buckets)
    log_level: str
    inputs: dict[str, str]


def submit_command(pd: ProjectDir, spec: SubmitSpec) -> list[str]:
    """spark-submit in client deploy mode (the only mode for Python on a standalone cluster)."""
    cmd = [spark_bin("spark-submit"), "--master", spec.master, "--deploy-mode", "client",
           "--name", spec.app_name, "--py-files", spec.bundle,
           "--conf", f"spark.sql.shuffle.partitions={spec.shuffle_partitions}",
           "--conf", f"spark.pyspark.python={sys.executable}",
           "--conf", f"spark.pyspark.driver.python={sys.executable}",
           "--conf", "spark.ui.showConsoleProgress=false",
           spec.job_file,
           "--checkpoint", pd.checkpoint, "--output-dir", pd.out_dir, "--base-dir", spec.base_dir,
           "--trigger-interval", spec.trigger_interval, "--poll-interval", spec.poll_interval,
           "--buckets", str(spec.buckets), "--log-level", spec.log_level,
           "--pid-file", pd.driver_pid_file]
    for element, directory in sorted(spec.inputs.items()):
        cmd += ["--input", f"{element}={directory}"]
    return cmd


def start(pd: ProjectDir, meta: dict, cmd: Sequence[str]) -> dict:
    """Start the supervisor (detached: a new session, no terminal) that runs ``cmd``; returns
    the metadata written to ``project.json`` (with ``pid``)."""
    started = time.time()
    meta = {**meta, "started": started, "pid": None, "pid_start": None, "stop_requested": None,
            "command": list(cmd)}
    for stale in (pd.driver_pid_file, pd.exit_file):
        if os.path.exists(stale):
            os.unlink(stale)
    write_json(pd.meta_file, meta)
    with open(pd.log_file, "ab") as log:
        log.write(f"\n==== ccl deploy {pd.name} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ccl.ops.deploy", "supervise", pd.root, repr(started), "--", *cmd],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=pd.root,
            env=python_env(), start_new_session=True, close_fds=True)
    meta["pid"] = proc.pid
    meta["pid_start"] = process_start_time(proc.pid)
    write_json(pd.meta_file, meta)
    return meta


def write_web_config(pd: ProjectDir, enabled: bool, host: str, port: int, token: str,
                     plan_file: str, base_dir: str, inputs: dict[str, str]) -> Optional[dict]:
    """Write ``web-config.json`` (mode 0600: it holds the token) for the supervisor to start the
    web service with; remove it when the service is not enabled. Returns what ``project.json``
    shows of it (never the token)."""
    for stale in (pd.web_config, pd.web_address):
        if os.path.exists(stale):
            os.unlink(stale)
    if not enabled:
        return None
    config = {"plan": plan_file, "run_dir": pd.checkpoint, "inputs": inputs, "base_dir": base_dir,
              "host": host, "port": port, "token": token, "address_file": pd.web_address}
    fd = os.open(pd.web_config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    return {"host": host, "port": port, "token": bool(token)}


def write_adapter_secrets(run_dir: str, adapters: Sequence[AdapterConfig]) -> None:
    """Give the runtime the adapters' secret properties (password, mqttPassword, ...), which the
    plan leaves out: ``RUN/adapters/secrets.json``, mode 0600 (runtime/adapters/secrets.py), keyed
    by adapter name; removed when no adapter has one. Written by ``ccl run`` and ``ccl deploy``
    before the run starts; the values are never printed."""
    from runtime.adapters.secrets import write_secrets

    secrets: dict[str, dict[str, str]] = {}
    for a in adapters:
        for name, p in a.properties.items():
            if p.value is None or not (isinstance(p.value, Secret) or is_secret_name(name)):
                continue
            value = p.value.reveal() if isinstance(p.value, Secret) else str(p.value)
            secrets.setdefault(a.name, {})[name.lower()] = value
    try:
        write_secrets(run_dir, secrets)
    except OSError as exc:
        raise UsageError(f"cannot write the adapters' secrets to {run_dir}: "
                         f"{exc.strerror or exc}") from None


def _start_web(pd: ProjectDir, log: int) -> Optional[subprocess.Popen]:
    """The web service's process when ``web-config.json`` asks for one (its output in the log)."""
    if not os.path.isfile(pd.web_config):
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", "runtime.web", pd.web_config],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=pd.root)
    except OSError as exc:
        os.write(log, f"ccl deploy: cannot start the web service: {exc}\n".encode())
        return None


def _stop_web(web: Optional[subprocess.Popen], timeout: float = 10.0) -> None:
    if web is None or web.poll() is not None:
        return
    web.terminate()
    try:
        web.wait(timeout)
    except subprocess.TimeoutExpired:
        web.kill()
        web.wait()


# --------------------------------------------------------------------------------------------------
# Stopping
# --------------------------------------------------------------------------------------------------

def stop(pd: ProjectDir, timeout: float = STOP_TIMEOUT, poll: float = 0.2) -> str:
    """Stop a deployed project: SIGTERM (the driver stops its queries and writes the outputs),
    then after ``timeout`` seconds SIGKILL to its process group. Returns what happened:
    ``not running``, ``stopped`` or ``killed``."""
    meta = pd.meta() or {}
    if not supervisor_alive(meta):
        return "not running"
    pid = int(meta["pid"])
    meta["stop_requested"] = time.time()
    write_json(pd.meta_file, meta)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "stopped"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not supervisor_alive(meta):
            return "stopped"
        time.sleep(poll)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(50):
        if not supervisor_alive(meta):
            break
        time.sleep(0.1)
    write_json(pd.exit_file, {"code": -int(signal.SIGKILL), "killed": True,
                              "started": meta.get("started"), "ended": time.time()})
    return "killed"


# --------------------------------------------------------------------------------------------------
# The supervisor (python -m ccl.ops.deploy supervise ROOT STARTED -- CMD...)
# --------------------------------------------------------------------------------------------------

def supervise(root: str, started: float, cmd: Sequence[str]) -> int:
    """Run ``cmd`` (spark-submit) with its output in ``driver.log``; pass SIGTERM, SIGINT and
    SIGHUP on to the Python driver (to spark-submit before the driver runs); write ``exit.json``
    when it ends."""
    pd = ProjectDir(os.path.dirname(root), os.path.basename(root))
    log = os.open(pd.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # PySpark's per-batch Python-worker chatter is left out of the log
        from runtime.quiet import copy_filtered
    except ImportError:
        copy_filtered = None
    if copy_filtered is None:
        child = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=root)
        copier = None
    else:
        read_end, write_end = os.pipe()
        child = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=write_end,
                                 stderr=subprocess.STDOUT, cwd=root)
        os.close(write_end)
        copier = threading.Thread(target=copy_filtered, args=(read_end, log), daemon=True)
        copier.start()

    def forward(signum, frame) -> None:
        target = driver_pid(pd) or child.pid
        try:
            os.kill(target, signal.SIGTERM)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    web = _start_web(pd, log)
    code = child.wait()
    _stop_web(web)
    if copier is not None:
        copier.join(timeout=5.0)  # ends when the last process holding the pipe does
    os.close(log)
    _write_report(pd)
    write_json(pd.exit_file, {"code": code, "started": started, "ended": time.time()})
    return 0


def _write_report(pd: ProjectDir) -> None:
    """The run report beside the outputs' ``_run.json`` (as ``ccl run`` writes it), once the
    driver has ended; a report that cannot be made is left out (the run is not failed for it)."""
    from .report import REPORT_FILE, deployed_source, render

    try:
        source = deployed_source(pd)
        page = render(source.report())
        os.makedirs(pd.out_dir, exist_ok=True)
        target = os.path.join(pd.out_dir, REPORT_FILE)
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(target + ".tmp", target)
    except Exception:  # exit.json must still be written: `ccl stop` and `ccl status` wait for it
        pass


def _main(argv: Sequence[str]) -> int:
    if len(argv) >= 4 and argv[0] == "supervise" and argv[3] == "--" and len(argv) > 4:
        return supervise(os.path.abspath(argv[1]), float(argv[2]), argv[4:])
    sys.stderr.write("usage: python -m ccl.ops.deploy supervise ROOT STARTED -- COMMAND...\n")
    return 2


def binding_json(bindings: dict[str, InputBinding]) -> dict:
    return {name: asdict(b) for name, b in bindings.items()}


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
