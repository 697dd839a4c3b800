"""The deployment workspace: one directory per deployed project, and what can be read from it
without Spark (state, counters, logs, changes).

Layout (``WORKSPACE`` is ``--workspace``, else ``$CCL_WORKSPACE``, else the setting
``runtime.workspace``, default ``~/.ccl/workspace``)::

    WORKSPACE/NAME/project.json        metadata: project, master, pids, start time, input bindings
    WORKSPACE/NAME/job/                the compiled project: PROJECT.ccx, PROJECT_job.py, ccl_runtime.zip
    WORKSPACE/NAME/checkpoint/         the run directory (runtime/run_setup.py): plan.json, queries/,
                                       changelog/ELEMENT/batch-N.parquet, stats/ELEMENT/batch-N.json
    WORKSPACE/NAME/out/                the outputs, written when the job stops (NAME.csv, _run.json)
    WORKSPACE/NAME/inputs/ELEMENT/     input directories of elements deploy bound (ccl publish)
    WORKSPACE/NAME/driver.log          spark-submit's and the driver's output
    WORKSPACE/NAME/driver.pid          the Python driver's process id (written by the driver)
    WORKSPACE/NAME/exit.json           how the job ended (exit code, time), written by the supervisor
    WORKSPACE/NAME/web-config.json     the web service's settings, when enabled (mode 0600: the token)
    WORKSPACE/NAME/web.json            the running web service's address and pid
    WORKSPACE/_cluster/                `ccl cluster`: the local standalone master and worker

Nothing here imports pyspark.
"""
from __future__ import annotations

import datetime as dt
import fnmatch
import glob
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Iterator, Optional

from runtime.file_names import file_name
from runtime.run_dir import RunDirs, saved_plan

from ..syntax.project import UsageError

WORKSPACE_ENV = "CCL_WORKSPACE"
DEFAULT_WORKSPACE = "~/.ccl/workspace"
CLUSTER_DIR = "_cluster"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")

RUNNING, STARTING, STOPPING, STOPPED, FAILED = "running", "starting", "stopping", "stopped", "failed"
RATE_WINDOW = 60.0  # seconds over which `ccl status` computes rows/s


def resolve_workspace(option: Optional[str] = None, setting_value: Optional[str] = None,
                      setting_is_default: bool = True) -> str:
    """The workspace directory, absolute: ``option`` (``--workspace``) > a ``runtime.workspace``
    set on the command line, in the ``.ccr`` or a ``--config`` file > ``$CCL_WORKSPACE`` > the
    value of ``config/default.yaml`` (``~/.ccl/workspace``)."""
    if option:
        path = option
    elif setting_value and not setting_is_default:
        path = setting_value
    elif os.environ.get(WORKSPACE_ENV):
        path = os.environ[WORKSPACE_ENV]
    else:
        path = setting_value or DEFAULT_WORKSPACE
    return os.path.abspath(os.path.expanduser(path))


def default_workspace_setting() -> str:
    """``runtime.workspace`` of ``config/default.yaml`` (commands that load no project)."""
    from ..config.settings import resolve_settings

    try:
        settings, diags = resolve_settings()
    except UsageError:
        return DEFAULT_WORKSPACE
    if diags:
        return DEFAULT_WORKSPACE
    return str(settings["runtime.workspace"])


def check_name(name: str) -> str:
    """A project name usable as a directory name: letters, digits, ``_ . -``, starting with a
    letter or digit, at most 64 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"{name!r} is not a usable project name: use letters, digits, '_', '.' "
                         f"and '-', starting with a letter or digit (at most 64 characters)")
    return name


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------

def write_json(path: str, data: object) -> None:
    """Write ``data`` as JSON at ``path``: a temporary file, then a rename."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def read_json(path: str) -> Optional[dict]:
    """A JSON object from ``path``; None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class ProjectDir:
    """The paths of one deployed project."""

    workspace: str
    name: str

    @property
    def root(self) -> str:
        return os.path.join(self.workspace, self.name)

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def meta_file(self) -> str:
        return self.path("project.json")

    @property
    def checkpoint(self) -> str:
        return self.path("checkpoint")

    @property
    def out_dir(self) -> str:
        return self.path("out")

    @property
    def job_dir(self) -> str:
        return self.path("job")

    @property
    def log_file(self) -> str:
        return self.path("driver.log")

    @property
    def driver_pid_file(self) -> str:
        return self.path("driver.pid")

    @property
    def exit_file(self) -> str:
        return self.path("exit.json")

    @property
    def web_config(self) -> str:
        """The web service's settings (with the token: readable by its owner only)."""
        return self.path("web-config.json")

    @property
    def web_address(self) -> str:
        """Where the running web service says where it listens (``url``, ``pid``)."""
        return self.path("web.json")

    def input_dir(self, element: str) -> str:
        return self.path("inputs", file_name(element))

    def meta(self) -> Optional[dict]:
        return read_json(self.meta_file)

    def exists(self) -> bool:
        return os.path.isfile(self.meta_file)


def project_dir(workspace: str, name: str) -> ProjectDir:
    return ProjectDir(workspace, check_name(name))


def deployed(workspace: str, name: str) -> ProjectDir:
    """A project that has been deployed in ``workspace``; UsageError otherwise."""
    pd = project_dir(workspace, name)
    if not pd.exists():
        known = ", ".join(list_projects(workspace)) or "none"
        raise UsageError(f"no project {name!r} in the workspace {workspace} (deployed: {known})")
    return pd


def list_projects(workspace: str) -> list[str]:
    """Names of the projects deployed in ``workspace``, sorted."""
    try:
        names = sorted(os.listdir(workspace))
    except OSError:
        return []
    return [n for n in names if _NAME.match(n) and os.path.isfile(os.path.join(workspace, n, "project.json"))]


# --------------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------------

def process_start_time(pid: int) -> Optional[int]:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22);
    None when there is no such process, it is a zombie, or /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: Optional[int], start_time: Optional[int] = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, when ``start_time`` is given, is the process that
    started then (not a later one that got the same id)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if os.path.isdir("/proc"):
        started = process_start_time(pid)
        if started is None:
            return False
        return start_time is None or started == start_time
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_pid(path: str) -> Optional[int]:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def driver_pid(pd: ProjectDir) -> Optional[int]:
    """The Python driver's pid when it runs (written by the driver, checked against its command
    line, which names the job file in the project's directory)."""
    pid = read_pid(pd.driver_pid_file)
    if pid is None or not pid_alive(pid):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode("utf-8", "replace")
    except OSError:
        return pid if not os.path.isdir("/proc") else None
    return pid if pd.job_dir in cmdline else None


# --------------------------------------------------------------------------------------------------
# State and counters
# --------------------------------------------------------------------------------------------------

def supervisor_alive(meta: dict) -> bool:
    return pid_alive(meta.get("pid"), meta.get("pid_start"))


def job_plan(pd: ProjectDir) -> Optional[dict]:
    """The plan the project runs: the compiled ``.ccx`` of the last deploy, else the checkpoint's."""
    meta = pd.meta() or {}
    plan = read_json(os.path.join(pd.job_dir, str(meta.get("plan_file", "")))) if meta.get("plan_file") else None
    return plan or saved_plan(pd.checkpoint)


def _input_names(plan: Optional[dict]) -> set[str]:
    if not plan:
        return set()
    return {e.get("name") for e in plan.get("elements", [])
            if e.get("role") == "input" and e.get("query") is None}


@dataclass
class Counters:
    """What the stats files of a run directory add up to."""

    batches: int = 0
    rows_in: int = 0          # rows read by input elements
    recent_rows: int = 0      # ... in stats files written in the last RATE_WINDOW seconds
    bad_records: int = 0
    last_batch: Optional[float] = None  # time of the newest stats file


def counters(pd: ProjectDir, plan: Optional[dict] = None, now: Optional[float] = None) -> Counters:
    """Counters from ``checkpoint/stats/ELEMENT/batch-N.json`` (one file per element and batch)."""
    now = time.time() if now is None else now
    plan = plan if plan is not None else job_plan(pd)
    inputs = {file_name(n) for n in _input_names(plan)}
    c = Counters()
    for path in RunDirs(pd.checkpoint).batch_files("stats", "json"):
        data = read_json(path)
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            continue
        if data is None:
            continue
        element = os.path.basename(os.path.dirname(path))
        c.batches += 1
        c.last_batch = mtime if c.last_batch is None else max(c.last_batch, mtime)
        bad = data.get("bad") or {}
        c.bad_records += sum(v for v in bad.values() if isinstance(v, int))
        if element in inputs:
            rows = data.get("rows_in", 0)
            rows = rows if isinstance(rows, int) else 0
            c.rows_in += rows
            if now - mtime <= RATE_WINDOW:
                c.recent_rows += rows
    return c


def project_state(pd: ProjectDir, now: Optional[float] = None) -> dict:
    """The state of a deployed project: ``state`` (starting, running, stopping, stopped, failed),
    times, pids, counters. ``starting`` while spark-submit starts, ``running`` once the Python
    driver runs (it has written ``driver.pid``)."""
    now = time.time() if now is None else now
    meta = pd.meta() or {}
    exit_info = read_json(pd.exit_file)
    started = meta.get("started")
    alive = supervisor_alive(meta)
    c = counters(pd, now=now)
    out: dict = {"name": pd.name, "project": meta.get("project"), "master": meta.get("master"),
                 "pid": meta.get("pid") if alive else None, "started": started,
                 "batches": c.batches, "rows_in": c.rows_in, "bad_records": c.bad_records,
                 "last_batch": c.last_batch, "uptime": None, "rows_per_second": None,
                 "exit_code": None, "detail": "", "adapters": adapter_states(pd),
                 "web": web_state(pd) if alive else None}
    if alive:
        stop_asked = meta.get("stop_requested") and meta["stop_requested"] >= (started or 0)
        if stop_asked:
            out["state"] = STOPPING
        elif driver_pid(pd) is not None:
            out["state"] = RUNNING
        else:
            out["state"] = STARTING
        if started is not None:
            out["uptime"] = max(0.0, now - started)
            window = min(RATE_WINDOW, max(out["uptime"], 1e-9))
            out["rows_per_second"] = c.recent_rows / window
        return out
    same_run = exit_info is not None and exit_info.get("started") == started
    code = exit_info.get("code") if same_run else None
    out["exit_code"] = code
    requested = bool(meta.get("stop_requested")) and meta["stop_requested"] >= (started or 0)
    if same_run and (code == 0 or requested):
        out["state"] = STOPPED
        if exit_info.get("killed"):
            out["detail"] = "killed after the stop timeout"
        elif code not in (0, None):
            out["detail"] = f"exit code {code}"
    elif same_run:
        out["state"] = FAILED
        out["detail"] = f"exit code {code}" + _last_error(pd)
    else:
        out["state"] = FAILED
        out["detail"] = "its processes are gone without an exit record" + _last_error(pd)
    if same_run and isinstance(exit_info.get("ended"), (int, float)):
        out["ended"] = exit_info["ended"]
    return out


def _last_error(pd: ProjectDir) -> str:
    """``: <the last line of the driver log that looks like an error>``, or nothing."""
    found = ""
    for line in tail_lines(pd.log_file, 200):
        text = line.strip()
        if re.search(r"\b(error|exception)\b", text, re.IGNORECASE):
            found = text
    return f": {found[:200]}" if found else ""


def format_duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def format_time(epoch: Optional[float]) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


def web_state(pd: ProjectDir) -> Optional[dict]:
    """The web service's ``url`` and ``pid`` while it runs; ``{"url": None, "state": "starting"}``
    while an enabled one has not yet said where it listens, ``"failed"`` with the ``error`` when it
    could not listen; None when it is not enabled."""
    if not os.path.isfile(pd.web_config):
        return None
    address = read_json(pd.web_address) or {}
    if isinstance(address.get("pid"), int) and pid_alive(address["pid"]):
        return {"url": address.get("url"), "pid": address["pid"], "state": "running"}
    if address.get("error"):
        return {"url": None, "pid": None, "state": "failed", "error": str(address["error"])}
    return {"url": None, "pid": None, "state": "starting"}


def adapter_states(pd: ProjectDir) -> list[dict]:
    """What each socket or fed output adapter of the project last reported
    (``CHECKPOINT/adapters/NAME.json``, written by runtime/adapters/status.py)."""
    found = []
    for path in sorted(glob.glob(os.path.join(pd.checkpoint, "adapters", "*.json"))):
        if not path.endswith(".progress.json"):
            state = read_json(path)
            if isinstance(state, dict):
                found.append(state)
    return found


def describe(state: dict, now: Optional[float] = None) -> list[str]:
    """``ccl status NAME``: one line per fact."""
    now = time.time() if now is None else now
    head = f"{state['name']}: {state['state']}"
    if state.get("detail"):
        head += f" ({state['detail']})"
    lines = [head]
    lines.append(f"  project      {state.get('project') or '-'}")
    lines.append(f"  master       {state.get('master') or '-'}")
    if state.get("pid"):
        lines.append(f"  pid          {state['pid']}")
    lines.append(f"  started      {format_time(state.get('started'))}")
    if state.get("uptime") is not None:
        lines.append(f"  uptime       {format_duration(state['uptime'])}")
    if state.get("ended") is not None:
        lines.append(f"  ended        {format_time(state['ended'])}")
    last = state.get("last_batch")
    ago = f" ({format_duration(now - last)} ago)" if last is not None else ""
    lines.append(f"  last batch   {format_time(last)}{ago}")
    lines.append(f"  batches      {state['batches']}")
    rate = state.get("rows_per_second")
    rate_text = f" ({rate:,.1f} rows/s over the last {int(RATE_WINDOW)} s)" if rate is not None else ""
    lines.append(f"  rows in      {state['rows_in']:,}{rate_text}")
    lines.append(f"  bad records  {state['bad_records']:,}")
    web = state.get("web")
    if web:
        lines.append(f"  web          {web.get('url') or web.get('state')}"
                     + (f" ({web['error']})" if web.get("error") else ""))
    for a in state.get("adapters") or []:
        where = f" {a['address']}" if a.get("address") else ""
        error = f", last error: {a['last_error']}" if a.get("last_error") else ""
        lines.append(f"  adapter      {a.get('adapter')}: {a.get('state')}{where} ({a.get('records', 0):,} "
                     f"records, {a.get('retries', 0)} retries{error})")
    return lines


def summary_line(state: dict) -> str:
    """``ccl status`` / ``ccl list``: one line per project."""
    rate = state.get("rows_per_second")
    return (f"{state['name']:<20} {state['state']:<9} {format_duration(state.get('uptime')):>8} "
            f"{format_time(state.get('last_batch')):>19} "
            f"{(f'{rate:,.1f}' if rate is not None else '-'):>9} {state['bad_records']:>6}  "
            f"{state.get('master') or '-'}")


SUMMARY_HEADER = (f"{'NAME':<20} {'STATE':<9} {'UPTIME':>8} {'LAST BATCH':>19} {'ROWS/S':>9} "
                  f"{'BAD':>6}  MASTER")


# --------------------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------------------

def tail_lines(path: str, n: int) -> list[str]:
    """The last ``n`` lines of a text file (carriage returns count as line ends)."""
    if n <= 0:
        return []
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            block, data = 65536, b""
            pos = size
            while pos > 0 and data.count(b"\n") + data.count(b"\r") <= n:
                step = min(block, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except OSError:
        return []
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if pos > 0 and lines:
        lines = lines[1:]  # the first line may be cut
    return lines[-n:]


def follow(path: str, offset: int, poll: float = 0.5, should_stop=lambda: False) -> Iterator[str]:
    """Text appended to ``path`` after byte ``offset``, as it comes (until ``should_stop()``)."""
    while True:
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() < offset:  # truncated or replaced: start again
                    offset = 0
                f.seek(offset)
                data = f.read()
        except OSError:
            data = b""
        if data:
            offset += len(data)
            yield data.decode("utf-8", "replace")
        elif should_stop():
            return
        else:
            time.sleep(poll)


# --------------------------------------------------------------------------------------------------
# Publishing input files
# --------------------------------------------------------------------------------------------------

def publish_name(source: str, pattern: Optional[str], existing: Optional[set] = None,
                 now: Optional[float] = None) -> str:
    """The name a published file gets in an input directory: ``YYYYmmddTHHMMSS.ffffffZ-BASE``
    (names sort in publishing order; the CSV source reads the files of one listing in name
    order), or BASE itself when only that matches the input's file pattern. Never a hidden name
    (``.x``, ``_x``) or ``*.tmp``, which the source skips."""
    base = os.path.basename(source)
    base = file_name(base).lstrip("._") or "rows.csv"
    if base.endswith(".tmp"):
        base = base[:-4] + "_tmp"
    now = time.time() if now is None else now
    stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    candidates = [f"{stamp}-{base}", base]
    existing = existing or set()
    for name in candidates:
        if name in existing:
            continue
        if pattern and pattern != "*" and not fnmatch.fnmatchcase(name, pattern):
            continue
        return name
    if pattern and not any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
        raise UsageError(f"the input reads files matching {pattern!r}; {base!r} does not match "
                         f"(rename the file so that it does)")
    raise UsageError(f"a file named {base!r} is already in the input directory")


def publish_file(source: str, directory: str, pattern: Optional[str] = None) -> str:
    """Copy ``source`` into the input ``directory`` safely for a reader that lists it at any
    moment: written under a hidden temporary name (``.NAME.tmp``, skipped by the CSV source),
    flushed to disk, then linked to its final name (atomic; never replaces a file). Returns the
    final path."""
    if not os.path.isfile(source):
        raise UsageError(f"{source}: no such file")
    os.makedirs(directory, exist_ok=True)
    existing = set(os.listdir(directory))
    name = publish_name(source, pattern, existing)
    final = os.path.join(directory, name)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    try:
        with open(source, "rb") as src, open(tmp, "wb") as dst:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise UsageError(f"a file named {name!r} appeared in {directory}; publish again") from None
        except OSError:  # no hard links here: a rename (replaces, but the name is fresh)
            os.replace(tmp, final)
    except OSError as exc:
        raise UsageError(f"cannot publish {source} into {directory}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final


# --------------------------------------------------------------------------------------------------
# Subscribing to changes
# --------------------------------------------------------------------------------------------------

def changelog_files(pd: ProjectDir, element: str) -> list[str]:
    """The complete changelog files of an element, in batch order (``batch-N.parquet`` files are
    renamed into place whole)."""
    return RunDirs(pd.checkpoint).batch_files("changelog", "parquet", element)


def changelog_rows(path: str, columns: list) -> list[list[str]]:
    """The CSV fields (``ESP_OPS`` first) of one changelog file, in the order the runtime
    writes outputs (sequence number, instance, sub-position)."""
    import pyarrow.parquet as pq

    from runtime.csv_output import format_value

    table = pq.read_table(path)
    data = table.to_pylist()
    data.sort(key=lambda r: (r.get("__seq") or 0, r.get("__inst") or 0, r.get("__sub") or 0))
    out = []
    for r in data:
        out.append([str(r.get("__op") or "i")] + [format_value(r.get(name), str(t)) for name, t in columns])
    return out
