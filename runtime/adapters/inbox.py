"""An input element's durable inbox: the directory its reader lists, written as ``ccl publish``
writes (ccl/ops/workspace.py ``publish_file``): each batch of received records under a hidden
temporary name, flushed to disk, then linked to a name that sorts after every earlier one, and
the directory flushed. A file in the inbox is complete and on disk; the reader numbers files in
name order and its checkpoint remembers which it read, so a restart reads each file once.

:class:`Batcher` gathers the records of one connection and publishes them as one file when
:data:`MAX_BATCH_BYTES` are pending or the oldest pending record has waited ``max_delay`` seconds:
few files where events come fast, a short wait where they come one by one.
"""
from __future__ import annotations

import datetime as dt
import os
import threading
import time
from typing import Callable, Optional

from ..file_names import file_name

MAX_BATCH_BYTES = 4 << 20
DEFAULT_DELAY = 0.05  # seconds a received record may wait before its batch is published


class Inbox:
    """The inbox directory of one input element; :meth:`publish` is thread-safe and gives names
    in strictly increasing order (``YYYYmmddTHHMMSS.ffffffZ-ADAPTER.EXT``, as ``ccl publish``
    names files, the time stamp bumped by a microsecond when two would collide)."""

    def __init__(self, directory: str, adapter: str, ext: str) -> None:
        self.directory = directory
        self.adapter = file_name(adapter)
        self.ext = ext
        self._lock = threading.Lock()
        self._last = 0
        self.files = 0
        self.bytes = 0
        os.makedirs(directory, exist_ok=True)

    def _name(self) -> str:
        now = max(int(time.time() * 1_000_000), self._last + 1)
        self._last = now
        stamp = dt.datetime.fromtimestamp(now // 1_000_000, dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        return f"{stamp}.{now % 1_000_000:06d}Z-{self.adapter}.{self.ext}"

    def publish(self, data: bytes, before_link: Optional[Callable[[str], None]] = None) -> str:
        """Write ``data`` as a new inbox file (complete and on disk when this returns); its path.
        ``before_link(name)`` is called once the data is on disk under its temporary name, before
        the file appears under ``name`` (an adapter records there what the file will hold)."""
        with self._lock:
            name = self._name()
            final = os.path.join(self.directory, name)
            tmp = os.path.join(self.directory, f".{name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if before_link is not None:
                before_link(name)
            try:
                os.link(tmp, final)
            except OSError:  # no hard links here: a rename (the name is fresh)
                os.replace(tmp, final)
            if os.path.exists(tmp):
                os.unlink(tmp)
            _fsync_dir(self.directory)
            self.files += 1
            self.bytes += len(data)
            return final


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Batcher:
    """The pending records of one connection, published to ``inbox`` as one file each time
    :meth:`due` says so (see the module docstring). ``prefix`` (a CSV header) starts every file."""

    def __init__(self, inbox: Inbox, max_delay: float = DEFAULT_DELAY,
                 max_bytes: int = MAX_BATCH_BYTES) -> None:
        self.inbox = inbox
        self.max_delay = max_delay
        self.max_bytes = max_bytes
        self.prefix = b""
        self._parts: list[bytes] = []
        self._size = 0
        self._since: Optional[float] = None
        self.records = 0

    def add(self, records: bytes, count: int) -> None:
        """Add complete ``records`` (``count`` of them, ending with a newline); publish when due."""
        if not records:
            return
        if self._since is None:
            self._since = time.monotonic()
        self._parts.append(records)
        self._size += len(records)
        self.records += count
        if self._size >= self.max_bytes:
            self.flush()

    def wait(self) -> Optional[float]:
        """Seconds until the pending records are due (None: nothing pending)."""
        if self._since is None:
            return None
        return max(0.0, self._since + self.max_delay - time.monotonic())

    def flush_if_due(self) -> None:
        wait = self.wait()
        if wait is not None and wait <= 0:
            self.flush()

    def flush(self) -> None:
        """Publish what is pending (nothing when nothing is)."""
        if not self._parts:
            return
        data = self.prefix + b"".join(self._parts)
        self._parts, self._size, self._since = [], 0, None
        self.inbox.publish(data)
