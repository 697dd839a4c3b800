"""``ccl cluster start|stop|status``: a Spark standalone master and one worker on this machine, from
the installed pyspark (``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``; pyspark has no ``start-master.sh``), detached, with their pids, logs
and work directory in ``WORKSPACE/_cluster/``. Each daemon is the leader of its own process group,
so stopping the worker also ends the executors it started. Nothing here imports pyspark.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Optional

from .deploy import check_java, python_env, spark_bin
from ..syntax.project import UsageError
from .workspace import CLUSTER_DIR, pid_alive, process_start_time, read_json, tail_lines, write_json

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT = 90.0


def cluster_dir(workspace: str) -> str:
    return os.path.join(workspace, CLUSTER_DIR)


def _meta_file(workspace: str) -> str:
    return os.path.join(cluster_dir(workspace), "cluster.json")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def master_json(web_url: str, timeout: float = 2.0) -> Optional[dict]:
    """The master's state from its web UI (``/json/``): status, aliveworkers, cores, activeapps."""
    try:
        with urllib.request.urlopen(web_url.rstrip("/") + "/json/", timeout=timeout) as r:
            data = json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return data if isinstance(data, dict) else None


def _alive(meta: dict, role: str) -> bool:
    return pid_alive(meta.get(f"{role}_pid"), meta.get(f"{role}_pid_start"))


def running(workspace: str) -> Optional[dict]:
    """The metadata of the workspace's cluster when its master runs, else None."""
    meta = read_json(_meta_file(workspace))
    if meta and _alive(meta, "master"):
        return meta
    return None


def _spawn(args: list[str], log_path: str, cwd: str) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=cwd, env=python_env({"SPARK_LOCAL_IP": "127.0.0.1"}),
                                start_new_session=True, close_fds=True)


def start_cluster(workspace: str, port: int = 7077, webui_port: int = 8080, cores: int = 2,
                  memory: str = "1g", timeout: float = START_TIMEOUT, host: str = "127.0.0.1",
                  progress=lambda text: None) -> dict:
    """Start a master and one worker on ``host``; wait until the worker has registered. Port 0
    picks a free port. Returns the metadata (``master_url``, ``web_url``, pids)."""
    check_java()
    spark_class = spark_bin("spark-class")
    if running(workspace):
        raise UsageError(f"a cluster of this workspace runs already ({running(workspace)['master_url']}); "
                         f"'ccl cluster stop' stops it")
    port = port or free_port(host)
    webui_port = webui_port or free_port(host)
    for what, p in (("--port", port), ("--webui-port", webui_port)):
        if not _port_free(host, p):
            raise UsageError(f"port {p} on {host} is in use: choose another {what} (0: any free port)")
    root = cluster_dir(workspace)
    work = os.path.join(root, "work")
    os.makedirs(work, exist_ok=True)
    master_url = f"spark://{host}:{port}"
    web_url = f"http://{host}:{webui_port}"
    meta = {"master_url": master_url, "web_url": web_url, "host": host, "port": port,
            "webui_port": webui_port, "cores": cores, "memory": memory, "started": time.time()}
    master = _spawn([spark_class, MASTER_CLASS, "--host", host, "--port", str(port),
                     "--webui-port", str(webui_port)], os.path.join(root, "master.log"), root)
    meta.update(master_pid=master.pid, master_pid_start=process_start_time(master.pid))
    write_json(_meta_file(workspace), meta)
    try:
        progress(f"master {master_url} starting (log {os.path.join(root, 'master.log')})")
        _wait(lambda: (master_json(web_url) or {}).get("status") == "ALIVE", timeout,
              lambda: _alive(meta, "master"), "the master", os.path.join(root, "master.log"))
        worker = _spawn([spark_class, WORKER_CLASS, master_url, "--host", host,
                         "--cores", str(cores), "--memory", memory,
                         "--webui-port", str(free_port(host)), "--work-dir", work],
                        os.path.join(root, "worker.log"), root)
        meta.update(worker_pid=worker.pid, worker_pid_start=process_start_time(worker.pid))
        write_json(_meta_file(workspace), meta)
        progress("worker starting, waiting for it to register")
        _wait(lambda: int((master_json(web_url) or {}).get("aliveworkers") or 0) >= 1, timeout,
              lambda: _alive(meta, "worker"), "the worker", os.path.join(root, "worker.log"))
    except BaseException:
        stop_cluster(workspace, timeout=10)
        raise
    return meta


def _wait(ready, timeout: float, alive, what: str, log: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if not alive():
            last = "\n  ".join(tail_lines(log, 5))
            raise UsageError(f"{what} ended while starting; the end of {log}:\n  {last}")
        time.sleep(0.5)
    raise UsageError(f"{what} did not come up within {timeout:.0f} s (see {log})")


def stop_cluster(workspace: str, timeout: float = 20.0) -> str:
    """SIGTERM to the worker's and the master's process groups, SIGKILL after ``timeout``
    seconds. Returns ``stopped`` or ``not running``."""
    meta = read_json(_meta_file(workspace))
    if not meta:
        return "not running"
    roles = [r for r in ("worker", "master") if _alive(meta, r)]
    if not roles:
        return "not running"
    for role in roles:
        _signal_group(meta[f"{role}_pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(meta, r) for r in roles):
        time.sleep(0.2)
    for role in roles:
        _signal_group(meta[f"{role}_pid"], signal.SIGKILL)  # the group: executors included
    for _ in range(50):
        if not any(_alive(meta, r) for r in roles):
            break
        time.sleep(0.1)
    meta["stopped"] = time.time()
    write_json(_meta_file(workspace), meta)
    return "stopped"


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cluster_status(workspace: str) -> dict:
    """``state`` (running, stopped, none) and, while running, what the master's web UI says."""
    meta = read_json(_meta_file(workspace))
    if not meta:
        return {"state": "none", "workspace": workspace}
    out = {"state": "running" if _alive(meta, "master") else "stopped", "workspace": workspace,
           "master_url": meta.get("master_url"), "web_url": meta.get("web_url"),
           "master_pid": meta.get("master_pid"), "worker_pid": meta.get("worker_pid"),
           "worker_running": _alive(meta, "worker"), "logs": cluster_dir(workspace)}
    if out["state"] == "running":
        info = master_json(str(meta.get("web_url"))) or {}
        out["workers"] = info.get("aliveworkers")
        out["cores"] = info.get("cores")
        out["applications"] = [a.get("name") for a in info.get("activeapps") or []]
    return out
