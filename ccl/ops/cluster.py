"""``ccl cluster start|stop|status``: a Spark standalone master and N workers (default 1) on this
machine, from the installed pyspark (``spark-class org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``; pyspark has no ``start-master.sh``), detached, with their pids, logs
and work directories in ``WORKSPACE/_cluster/``. Each daemon is the leader of its own process group,
so stopping a worker also ends the executors it started. Nothing here imports pyspark.

``cluster.json`` lists every worker under ``workers`` (pid, its start time, log, work directory);
``worker_pid``/``worker_pid_start`` stay those of the first worker, for readers of the older layout.
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


def workers(meta: dict) -> list[dict]:
    """The workers a cluster's metadata records (``pid``, ``pid_start``, ``log``, ``work``); a
    metadata file of the one-worker layout gives its single worker."""
    listed = meta.get("workers")
    if isinstance(listed, list):
        return [w for w in listed if isinstance(w, dict) and isinstance(w.get("pid"), int)]
    if isinstance(meta.get("worker_pid"), int):
        return [{"pid": meta["worker_pid"], "pid_start": meta.get("worker_pid_start")}]
    return []


def _daemon_alive(daemon: dict) -> bool:
    return pid_alive(daemon.get("pid"), daemon.get("pid_start"))


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
                  progress=lambda text: None, worker_count: int = 1) -> dict:
    """Start a master and ``worker_count`` workers on ``host`` (each with ``cores`` and
    ``memory``); wait until all have registered. Port 0 picks a free port. Returns the metadata
    (``master_url``, ``web_url``, pids)."""
    if worker_count < 1:
        raise UsageError("--workers: expected at least 1")
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
    os.makedirs(root, exist_ok=True)
    master_url = f"spark://{host}:{port}"
    web_url = f"http://{host}:{webui_port}"
    meta = {"master_url": master_url, "web_url": web_url, "host": host, "port": port,
            "webui_port": webui_port, "cores": cores, "memory": memory,
            "worker_count": worker_count, "workers": [], "started": time.time()}
    master = _spawn([spark_class, MASTER_CLASS, "--host", host, "--port", str(port),
                     "--webui-port", str(webui_port)], os.path.join(root, "master.log"), root)
    meta.update(master_pid=master.pid, master_pid_start=process_start_time(master.pid))
    write_json(_meta_file(workspace), meta)
    try:
        progress(f"master {master_url} starting (log {os.path.join(root, 'master.log')})")
        _wait(lambda: (master_json(web_url) or {}).get("status") == "ALIVE", timeout,
              lambda: _alive(meta, "master"), "the master", [os.path.join(root, "master.log")])
        for n in range(1, worker_count + 1):
            # one worker keeps the names of the one-worker layout (worker.log, work/)
            log = os.path.join(root, "worker.log" if worker_count == 1 else f"worker-{n}.log")
            work = os.path.join(root, "work" if worker_count == 1 else f"work-{n}")
            os.makedirs(work, exist_ok=True)
            proc = _spawn([spark_class, WORKER_CLASS, master_url, "--host", host,
                           "--cores", str(cores), "--memory", memory,
                           "--webui-port", str(free_port(host)), "--work-dir", work], log, root)
            meta["workers"].append({"pid": proc.pid, "pid_start": process_start_time(proc.pid),
                                    "log": log, "work": work})
            if n == 1:
                meta.update(worker_pid=proc.pid, worker_pid_start=meta["workers"][0]["pid_start"])
            write_json(_meta_file(workspace), meta)
        progress(f"{worker_count} worker{'s' if worker_count > 1 else ''} starting, "
                 f"waiting for {'them' if worker_count > 1 else 'it'} to register")
        started = list(meta["workers"])
        _wait(lambda: int((master_json(web_url) or {}).get("aliveworkers") or 0) >= worker_count,
              timeout, lambda: all(_daemon_alive(w) for w in started),
              "a worker", [w["log"] for w in started])
    except BaseException:
        stop_cluster(workspace, timeout=10)
        raise
    return meta


def _wait(ready, timeout: float, alive, what: str, logs: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if not alive():
            last = "\n  ".join(line for log in logs for line in tail_lines(log, 5))
            raise UsageError(f"{what} ended while starting; the end of {', '.join(logs)}:\n  {last}")
        time.sleep(0.5)
    raise UsageError(f"{what} did not come up within {timeout:.0f} s (see {', '.join(logs)})")


def stop_cluster(workspace: str, timeout: float = 20.0) -> str:
    """SIGTERM to every worker's and the master's process groups, SIGKILL after ``timeout``
    seconds. Returns ``stopped`` or ``not running``."""
    meta = read_json(_meta_file(workspace))
    if not meta:
        return "not running"
    daemons = [w for w in workers(meta) if _daemon_alive(w)]
    if _alive(meta, "master"):
        daemons.append({"pid": meta["master_pid"], "pid_start": meta.get("master_pid_start")})
    if not daemons:
        return "not running"
    for d in daemons:
        _signal_group(d["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_daemon_alive(d) for d in daemons):
        time.sleep(0.2)
    for d in daemons:
        _signal_group(d["pid"], signal.SIGKILL)  # the group: executors included
    for _ in range(50):
        if not any(_daemon_alive(d) for d in daemons):
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
    """``state`` (running, stopped, none) and, while running, what the master's web UI says.
    ``worker_pids`` lists every worker started, ``workers_running`` those still alive."""
    meta = read_json(_meta_file(workspace))
    if not meta:
        return {"state": "none", "workspace": workspace}
    started = workers(meta)
    alive = [w["pid"] for w in started if _daemon_alive(w)]
    out = {"state": "running" if _alive(meta, "master") else "stopped", "workspace": workspace,
           "master_url": meta.get("master_url"), "web_url": meta.get("web_url"),
           "master_pid": meta.get("master_pid"), "worker_pid": meta.get("worker_pid"),
           "worker_running": _alive(meta, "worker"), "worker_pids": [w["pid"] for w in started],
           "workers_running": alive, "logs": cluster_dir(workspace)}
    if out["state"] == "running":
        info = master_json(str(meta.get("web_url"))) or {}
        out["workers"] = info.get("aliveworkers")
        out["cores"] = info.get("cores")
        out["applications"] = [a.get("name") for a in info.get("activeapps") or []]
    return out
