"""Socket CSV and JSON input adapters: records read from a TCP connection go, in arrival order, to
the element's inbox (runtime/adapters/inbox.py), from where the element's reader takes them.

Client side (``host`` given, or ``dsv_sockout_in``): connect to host:port, read until the peer
closes, connect again; a refused or lost connection is retried after a wait that starts at 0.1 s
and doubles up to ``retryPeriod`` seconds (``retryNumber`` failed attempts in a row, when not 0,
stop the adapter). Server side (no ``host``, or ``dsv_sockin_in``): listen on
``listenAddress:port`` (127.0.0.1 unless configured; port 0 takes a free one and writes it to
``epFile``) and read every connection. A CSV connection's first line is its header when the
adapter's ``hasHeader`` says so (or, not given, when it names the element's columns); the header
then starts each inbox file of that connection.
"""
from __future__ import annotations

import csv
import logging
import socket
import threading
from typing import Optional, Sequence

from ccl.plan.model import Column

from ..inputs.csv_text import looks_like_header
from ..inputs.formats import CsvFormat
from .config import SocketSpec, read_port, write_port
from .framing import CsvFramer, Framer, JsonFramer
from .inbox import Batcher, Inbox
from .status import Status

log = logging.getLogger("ccl.runtime")
RECV_BYTES = 1 << 20
FIRST_RETRY = 0.1


class SocketInput:
    """One socket input adapter, run by its own threads until :meth:`stop`."""

    def __init__(self, spec: SocketSpec, inbox_dir: str, columns: Sequence[Column],
                 status: Status) -> None:
        self.spec = spec
        self.inbox = Inbox(inbox_dir, spec.name, "json" if spec.payload == "json" else "csv")
        # (name, type) pairs, as the CSV reader's header test takes them
        self.columns = [(c.name, c.type) for c in columns]
        self.status = status
        self.fmt = CsvFormat.from_options(dict(spec.properties, fileformat=spec.payload), spec.element)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: Optional[socket.socket] = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.port: Optional[int] = None  # the port a server listens on

    def start(self) -> "SocketInput":
        if self.spec.server:
            srv = socket.create_server((self.spec.host, self.spec.port), reuse_port=False)
            srv.settimeout(0.2)
            self._server = srv
            self.port = srv.getsockname()[1]
            write_port(self.spec, self.port)
            self.status.update(state="listening", address=f"{self.spec.host}:{self.port}")
            self._spawn(self._accept_loop)
        else:
            self._spawn(self._client_loop)
        return self

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True,
                             name=f"ccl-adapter-{self.spec.name}")
        t.start()
        self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop reading; what was received is published to the inbox first."""
        self._stop.set()
        if self._server is not None:
            self._server.close()
        with self._lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RD)
                except OSError:
                    pass
        for t in self._threads:
            t.join(timeout)
        self.status.update(state="stopped")

    # -- server -----------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, peer = self._server.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            self.status.add(connections=1)
            self._spawn(self._serve, conn, f"{peer[0]}:{peer[1]}")

    def _serve(self, conn: socket.socket, peer: str) -> None:
        try:
            self._read(conn)
        except Exception as exc:  # one connection's failure does not stop the adapter
            self.status.update(last_error=f"{peer}: {exc}")
            log.warning("adapter %s: connection from %s: %s", self.spec.name, peer, exc)

    # -- client -----------------------------------------------------------------------------
    def _client_loop(self) -> None:
        wait, failures = FIRST_RETRY, 0
        while not self._stop.is_set():
            port = read_port(self.spec)
            try:
                if port <= 0:
                    raise OSError(f"no port in {self.spec.ep_file} yet")
                conn = socket.create_connection((self.spec.host, port), timeout=5.0)
            except OSError as exc:
                failures += 1
                self.status.update(state="retrying", last_error=f"{self.spec.host}:{port}: {exc}")
                self.status.add(retries=1)
                if self.spec.retry_number and failures >= self.spec.retry_number:
                    self.status.update(state="failed")
                    log.warning("adapter %s: gave up after %d attempts: %s", self.spec.name,
                                failures, exc)
                    return
                self._stop.wait(wait)
                wait = min(wait * 2, max(self.spec.retry_period, FIRST_RETRY))
                continue
            wait, failures = FIRST_RETRY, 0
            self.status.update(state="connected", address=f"{self.spec.host}:{port}")
            self.status.add(connections=1)
            try:
                self._read(conn)
            except OSError as exc:
                self.status.update(last_error=str(exc))
            if not self._stop.is_set():
                self.status.update(state="retrying")
                self._stop.wait(wait)

    # -- reading one connection -------------------------------------------------------------
    def _read(self, conn: socket.socket) -> None:
        """Read ``conn`` until it closes or the adapter stops, publishing batches of whole
        records; what is pending is published before returning."""
        with self._lock:
            self._connections.add(conn)
        framer: Framer = JsonFramer() if self.spec.payload == "json" else CsvFramer()
        batcher = Batcher(self.inbox, self.spec.batch_seconds)
        header_seen = self.spec.payload == "json" or self.fmt.has_header is False
        try:
            while True:
                wait = batcher.wait()
                conn.settimeout(0.2 if wait is None else max(min(wait, 0.2), 0.001))
                try:
                    data = conn.recv(RECV_BYTES)
                except socket.timeout:
                    batcher.flush_if_due()
                    if self._stop.is_set():
                        break
                    continue
                except OSError:
                    break
                if not data:
                    break
                records, count = framer.feed(data)
                if not header_seen and records:
                    records, count = self._take_header(records, count, batcher)
                    header_seen = True
                self._add(batcher, records, count)
            records, count = framer.end()
            if not header_seen and records:
                records, count = self._take_header(records, count, batcher)
            self._add(batcher, records, count)
        finally:
            batcher.flush()
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _add(self, batcher: Batcher, records: bytes, count: int) -> None:
        if not records:
            return
        before = self.inbox.files
        batcher.add(records, count)
        batcher.flush_if_due()
        self.status.add(records=count, files=self.inbox.files - before)

    def _take_header(self, records: bytes, count: int, batcher: Batcher) -> tuple[bytes, int]:
        """The connection's first CSV line is its header when the format says so: it then starts
        every inbox file of the connection (and is no record)."""
        first, _, rest = records.partition(b"\n")
        fields = next(csv.reader([first.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r")],
                                 delimiter=self.fmt.delimiter), [])
        if self.fmt.has_header or (self.fmt.has_header is None and not self.fmt.stream_opcode
                                   and looks_like_header(fields, self.columns, self.fmt)):
            batcher.prefix = first + b"\n"
            return rest, count - 1
        return records, count
