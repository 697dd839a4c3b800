"""What an adapter reports while it runs: ``RUN/adapters/NAME.json`` (state, connections, records,
files, the last error), rewritten whole when something changes, for ``ccl status`` to show."""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from ..file_names import file_name

EVERY = 0.5  # seconds between two writes of the status file for counts alone


class Status:
    """The live status of one adapter (thread-safe)."""

    def __init__(self, directory: str, adapter: str, kind: str) -> None:
        self.path = os.path.join(directory, file_name(adapter) + ".json")
        os.makedirs(directory, exist_ok=True)
        self._lock = threading.Lock()
        self._written = 0.0
        self.data: dict[str, Any] = {"adapter": adapter, "type": kind, "state": "starting",
                                     "records": 0, "files": 0, "connections": 0, "retries": 0,
                                     "last_error": None}

    def update(self, **changes: Any) -> None:
        with self._lock:
            self.data.update(changes)
            self.data["updated"] = time.time()
            self._write()

    def add(self, **increments: int) -> None:
        """Count; the file is rewritten at most every :data:`EVERY` seconds for counts alone."""
        with self._lock:
            for k, v in increments.items():
                self.data[k] = self.data.get(k, 0) + v
            if time.monotonic() - self._written >= EVERY:
                self._write()

    def _write(self) -> None:
        self._written = time.monotonic()
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.data, f, sort_keys=True)
        os.replace(tmp, self.path)
