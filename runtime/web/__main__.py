"""``python -m runtime.web CONFIG.json``: the web service of a deployed project, run by its
supervisor (ccl/ops/deploy.py) beside the driver until SIGTERM.

CONFIG.json (written by ``ccl deploy``, readable by its owner only, as it may hold the token):
``plan`` (the ``.ccx``), ``run_dir``, ``inputs`` (element to directory), ``base_dir``, ``host``,
``port``, ``token`` and ``address_file``, where the service writes ``{"url", "host", "port",
"pid"}`` once it listens (removed when it stops), or ``{"error"}`` when it cannot listen.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Sequence

from ccl.plan.codec import plan_from_json

from .server import Server, WebService


def _write(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
    os.replace(tmp, path)


def main(argv: Sequence[str]) -> int:
    """Serve until SIGTERM or SIGINT; exit code 0, 2 for a bad configuration, 1 when the
    address cannot be bound."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m runtime.web CONFIG.json\n")
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            config = json.load(f)
        with open(config["plan"], encoding="utf-8") as f:
            plan = plan_from_json(json.load(f))
        service = WebService(plan, config["run_dir"], dict(config.get("inputs") or {}),
                             config.get("base_dir") or ".", str(config.get("token") or ""))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"ccl web: cannot start: {exc}\n")
        return 2
    server = Server(service, str(config.get("host") or "127.0.0.1"), int(config.get("port") or 0))
    try:
        url = server.start()
    except OSError as exc:
        why = f"cannot listen on {server.host}:{server.port}: {exc.strerror or exc}"
        sys.stderr.write(f"ccl web: {why}\n")
        if config.get("address_file"):
            _write(config["address_file"], {"url": None, "pid": None, "error": why})
        return 1
    done = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda signum, frame: done.set())
    address_file = config.get("address_file")
    if address_file:
        _write(address_file, {"url": url, "host": server.host, "port": server.port, "pid": os.getpid()})
    sys.stderr.write(f"ccl web: serving {url}\n")
    sys.stderr.flush()
    try:
        while not done.wait(1.0):
            pass
    finally:
        server.stop()
        if address_file and os.path.exists(address_file):
            os.unlink(address_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
