"""Real servers the adapter tests start for themselves: a mosquitto broker here, PostgreSQL in
tests/pg_server.py (re-exported as ``pg_server``). Nothing is mocked; a test skips when its server
is not installed (``.ci/run`` installs them)."""
from __future__ import annotations

import os
import socket
import subprocess
import time

import pg_server  # noqa: F401  (the PostgreSQL server, for ``from servers import pg_server``)

MOSQUITTO = "/usr/sbin/mosquitto"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def wait(what, timeout: float = 180.0, step: float = 0.05, state=None) -> None:
    """Wait until ``what()`` is true; AssertionError after ``timeout`` seconds, saying what
    ``state()`` (when given) describes then."""
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out" + (f": {state()}" if state else "")
        time.sleep(step)


class Broker:
    """A mosquitto of the test (persistent sessions kept in its directory across restarts)."""

    def __init__(self, directory, port: int = 0) -> None:
        self.dir = str(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.port = port or free_port()
        self.conf = os.path.join(self.dir, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                    f"persistence_location {self.dir}/\nmax_queued_messages 100000\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Broker":
        self.proc = subprocess.Popen([MOSQUITTO, "-c", self.conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

        def up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return True
            except OSError:
                return False
        wait(up, 30)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    @property
    def uri(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"


class SlowProxy:
    """A TCP proxy on 127.0.0.1 to ``port`` that forwards what a client sends after its first
    chunk (an MQTT CONNECT) ``delay`` seconds late, in order: a slow link or a loaded broker,
    where the broker has a client's SUBSCRIBE only well after the client had its CONNACK."""

    def __init__(self, port: int, delay: float) -> None:
        import threading
        self.target = port
        self.delay = delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._threads: list = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    def _accept(self) -> None:
        import threading
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            up = socket.create_connection(("127.0.0.1", self.target))
            for src, dst, slow in ((conn, up, True), (up, conn, False)):
                threading.Thread(target=self._pump, args=(src, dst, slow), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, slow: bool) -> None:
        first = True
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if slow and not first:
                    time.sleep(self.delay)
                first = False
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
