"""The adapters' secret properties (passwords, tokens): kept out of the plan, given to the runtime
in one file of the run directory.

The planner leaves every secret property out of ``plan.json`` (a plan is shown, diffed and copied).
``ccl run`` and ``ccl deploy`` write them, keyed by adapter name and by lower-case property ID, to
``RUN/adapters/secrets.json``, created with mode 0600 (never readable by others, also not for an
instant: the file is written aside with that mode, then renamed). The adapters read it when they
build their specs (:func:`adapter_secrets`); nothing else reads it, and no status, log or error
shows what it holds.
"""
from __future__ import annotations

import json
import os
from typing import Mapping

SECRETS_FILE = "secrets.json"


def secrets_path(run_dir: str) -> str:
    """Where the secrets of the run in ``run_dir`` are: ``RUN/adapters/secrets.json``."""
    return os.path.join(run_dir, "adapters", SECRETS_FILE)


def write_secrets(run_dir: str, secrets: Mapping[str, Mapping[str, str]]) -> None:
    """Write ``secrets`` (adapter name -> property ID -> value) for the run in ``run_dir``, mode
    0600; with none, remove a file an earlier run left."""
    path = secrets_path(run_dir)
    wanted = {name: {str(k).lower(): str(v) for k, v in props.items()}
              for name, props in secrets.items() if props}
    if not wanted:
        if os.path.exists(path):
            os.unlink(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)  # O_CREAT keeps an existing file's mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(wanted, f, sort_keys=True)
    os.replace(tmp, path)


def read_secrets(run_dir: str) -> dict[str, dict[str, str]]:
    """The secrets :func:`write_secrets` wrote for ``run_dir`` (empty without the file, or when
    it cannot be read: an adapter then connects without its password and says so as its server
    answers)."""
    try:
        with open(secrets_path(run_dir), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(name): {str(k): str(v) for k, v in props.items()}
            for name, props in data.items() if isinstance(props, dict)}


def adapter_secrets(secrets: Mapping[str, Mapping[str, str]], adapter: str) -> dict[str, str]:
    """The secret properties (lower-case IDs) of the adapter called ``adapter``."""
    return dict(secrets.get(adapter) or {})
