"""Output adapters driven per micro-batch from their element's changelog.

A :class:`Feed` thread per output adapter watches ``RUN/changelog/ELEMENT/``: a batch is complete
once the element's ``stats/ELEMENT/batch-N.json`` is written (the batch writers write it after
the changelog), and its rows go to the adapter's sink in the order the element produced them
(sequence number, instance, sub-position), batch after batch. The last batch delivered is kept in
``RUN/adapters/NAME.progress.json`` (written after the sink took the batch), so a restart goes on
after it, and a batch that Spark runs again after a crash (it rewrites the same ``batch-N`` files)
is not delivered twice:

- the JSON file sink (:class:`JsonFileSink`) records with each batch the file's length after it;
  a batch cut short by a crash is cut off the file before it is written again: the file gets each
  batch exactly once;
- socket sinks cannot take back what a peer has received: a batch sent but not yet recorded when
  the process died is sent again after the restart (at least once), never a batch recorded.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import logging
import math
import os
import re
import socket
import threading
import time
from typing import Any, Callable, Optional, Sequence

from ccl.plan.model import Adapter, Column, Element

from ..csv_output import format_value, value_formatter
from ..file_names import file_name
from ..inputs.formats import CsvFormat, adapter_properties, property_flag
from ..inputs.json_rows import parse_path
from .config import SocketSpec, read_port, write_port
from .status import Status

log = logging.getLogger("ccl.runtime")
ORDER = ("__seq", "__inst", "__sub")
_BATCH = re.compile(r"batch-(\d+)")
POLL = 0.05


# --------------------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------------------

class CsvLines:
    """A change as a CSV line, as the CSV output file adapters write it: with ``hasHeader`` (the
    default) a header ``ESP_OPS,columns`` per connection and the opcode first on each line; with
    ``expectStreamNameOpcode``/``prependStreamNameOpcode`` ESP's ``NAME,opcode,fields``; with
    ``hasHeader`` false the bare fields."""

    def __init__(self, element: str, columns: Sequence[Column], props: dict) -> None:
        fmt = CsvFormat.from_options(props)
        self.delimiter = fmt.delimiter
        prepend = property_flag(props.get("prependstreamnameopcode",
                                          props.get("csvprependstreamnameopcode", "false")),
                                "prependStreamNameOpcode")
        self.stream = element if (fmt.stream_opcode or prepend) else None
        self.header = self.stream is None and fmt.has_header is not False
        self.names = [c.name for c in columns]
        self.formatters = [value_formatter(c.type) for c in columns]

    def _line(self, fields: list[str]) -> str:
        out = io.StringIO()
        quoting = csv.QUOTE_ALL if any("\r" in x for x in fields) else csv.QUOTE_MINIMAL
        csv.writer(out, delimiter=self.delimiter, lineterminator="\n", quoting=quoting).writerow(fields)
        return out.getvalue()

    def preamble(self) -> bytes:
        """What a connection starts with (the header)."""
        return self._line(["ESP_OPS", *self.names]).encode() if self.header else b""

    def encode(self, row: dict) -> bytes:
        fields = [f(row.get(n)) for n, f in zip(self.names, self.formatters)]
        op = row.get("__op") or "i"
        if self.stream is not None:
            fields[:0] = [self.stream, op]
        elif self.header:
            fields.insert(0, op)
        return self._line(fields).encode()


def json_value(v: Any, ccl_type: str) -> Any:
    """A column value as JSON: numbers (integers, finite floats) and booleans as themselves,
    money and decimals, date-times, intervals, binary and non-finite floats as the text a CSV
    file holds (exact, and read back by the JSON input adapters)."""
    if v is None:
        return None
    t = ccl_type.strip().lower()
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and t in ("integer", "long"):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    if isinstance(v, str):
        return v
    return format_value(v, t)


class JsonObjects:
    """A change as one JSON object: ``ESP_OPS`` then the columns by name, or under the paths of
    ``jsonColsMappingList`` (a dotted path nests objects)."""

    def __init__(self, element: str, columns: Sequence[Column], props: dict) -> None:
        self.columns = [(c.name, c.type) for c in columns]
        mapping = str(props.get("jsoncolsmappinglist") or "").strip()
        paths = [p.strip() for p in mapping.split(",")] if mapping not in ("", "*") else []
        self.paths: list[list] = []
        for i, (name, _) in enumerate(self.columns):
            path = parse_path(paths[i]) if i < len(paths) else [name]
            if any(isinstance(p, int) for p in path):
                raise ValueError(f"jsonColsMappingList {paths[i]!r}: an output path cannot index arrays")
            self.paths.append(path)

    def preamble(self) -> bytes:
        return b""

    def obj(self, row: dict) -> dict:
        out: dict = {"ESP_OPS": row.get("__op") or "i"}
        for (name, t), path in zip(self.columns, self.paths):
            target = out
            for step in path[:-1]:
                target = target.setdefault(step, {})
            target[path[-1]] = json_value(row.get(name), t)
        return out

    def encode(self, row: dict) -> bytes:
        return (json.dumps(self.obj(row), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def encoder(payload: str, element: str, columns: Sequence[Column], props: dict):
    """The change encoder of a socket or MQTT adapter's ``payload`` (``json``: :class:`JsonObjects`,
    else :class:`CsvLines`) for the element ``element`` and its ``columns``; ValueError for
    unusable format properties."""
    return (JsonObjects if payload == "json" else CsvLines)(element, columns, props)


# --------------------------------------------------------------------------------------------------
# Sinks
# --------------------------------------------------------------------------------------------------

class JsonFileSink:
    """ESP's ``toolkit_file_json_output``: the element's changes in a JSON file (``dir``/``file``,
    default ``ELEMENT.json``), one object a line, or with ``jsonFormat`` ``array`` one JSON array
    (valid after every batch: each batch goes in before the closing bracket)."""

    def __init__(self, path: str, objects: JsonObjects, array: bool) -> None:
        self.path = path
        self.objects = objects
        self.array = array

    def open(self, state: dict) -> None:
        """Cut off what a batch cut short left after the recorded length (or start afresh)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        offset = int(state.get("offset", 0))
        with open(self.path, "ab") as f:
            f.truncate(offset)
            if offset == 0 and self.array:
                f.write(b"[\n]\n")
                state["offset"] = 1

    def deliver(self, rows: list[dict], state: dict) -> bool:
        offset = int(state.get("offset", 0))
        if self.array:
            items = [json.dumps(self.objects.obj(r), ensure_ascii=False, separators=(",", ":"))
                     for r in rows]
            first = offset <= 1
            body = (("\n" if first else ",\n") + ",\n".join(items)).encode() if items else b""
            tail = b"\n]\n"
        else:
            body = b"".join(self.objects.encode(r) for r in rows)
            tail = b""
        with open(self.path, "r+b") as f:
            f.truncate(offset)
            f.seek(offset)
            f.write(body + tail)
            f.flush()
            os.fsync(f.fileno())
        state["offset"] = offset + len(body)
        return True

    def close(self) -> None:
        pass


class SocketClientSink:
    """Connect to ``host:port`` and send each change; a lost connection is made again (waits from
    0.1 s doubling up to ``retryPeriod``) and the batch is sent again whole."""

    def __init__(self, spec: SocketSpec, enc, status: Status, stop: threading.Event) -> None:
        self.spec, self.enc, self.status, self.stop = spec, enc, status, stop
        self.conn: Optional[socket.socket] = None
        self.give_up_at: Optional[float] = None  # set when the run ends: retry until then

    def open(self, state: dict) -> None:
        pass

    def _connect(self) -> bool:
        wait = 0.1
        while True:
            port = read_port(self.spec)
            try:
                if port <= 0:
                    raise OSError(f"no port in {self.spec.ep_file} yet")
                conn = socket.create_connection((self.spec.host, port), timeout=5.0)
                conn.sendall(self.enc.preamble())
                self.conn = conn
                self.status.update(state="connected", address=f"{self.spec.host}:{port}")
                self.status.add(connections=1)
                return True
            except OSError as exc:
                self.status.update(state="retrying", last_error=f"{self.spec.host}:{port}: {exc}")
                self.status.add(retries=1)
                if self.give_up_at is not None:  # the run has ended: retry for a while
                    if time.monotonic() + wait > self.give_up_at:
                        return False
                    time.sleep(wait)
                elif self.stop.wait(wait):
                    return False
                wait = min(wait * 2, max(self.spec.retry_period, 0.1))

    def deliver(self, rows: list[dict], state: dict) -> bool:
        data = b"".join(self.enc.encode(r) for r in rows)
        while True:
            if self.conn is None and not self._connect():
                return False
            try:
                assert self.conn is not None
                self.conn.sendall(data)
                self.status.add(records=len(rows))
                return True
            except OSError as exc:
                self.status.update(last_error=str(exc))
                self.conn.close()
                self.conn = None

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self.conn.close()
            self.conn = None


class SocketServerSink:
    """Listen on ``listenAddress:port`` (127.0.0.1 unless configured; port 0: a free one, written
    to ``epFile``); every connected subscriber gets the changes of the batches delivered while it
    is connected (a CSV header first). A subscriber that cannot keep up is dropped."""

    def __init__(self, spec: SocketSpec, enc, status: Status, stop: threading.Event) -> None:
        self.spec, self.enc, self.status, self.stop = spec, enc, status, stop
        self.server = socket.create_server((spec.host, spec.port))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        write_port(spec, self.port)
        self.subscribers: list[socket.socket] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True,
                                       name=f"ccl-adapter-{spec.name}-accept")
        self.status.update(state="listening", address=f"{spec.host}:{self.port}")
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                conn.settimeout(10.0)
                conn.sendall(self.enc.preamble())
            except OSError:
                conn.close()
                continue
            with self.lock:
                self.subscribers.append(conn)
            self.status.add(connections=1)

    def open(self, state: dict) -> None:
        pass

    def deliver(self, rows: list[dict], state: dict) -> bool:
        data = b"".join(self.enc.encode(r) for r in rows)
        with self.lock:
            for conn in list(self.subscribers):
                try:
                    conn.sendall(data)
                except OSError:
                    self.subscribers.remove(conn)
                    conn.close()
        self.status.add(records=len(rows))
        return True

    def close(self) -> None:
        self.server.close()
        with self.lock:
            for conn in self.subscribers:
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                conn.close()
            self.subscribers.clear()


# --------------------------------------------------------------------------------------------------
# The feed
# --------------------------------------------------------------------------------------------------

class Feed:
    """Delivers an element's changelog to one sink, batch by batch (see the module docstring)."""

    def __init__(self, run_dir: str, element: Element, adapter: str, sink: Any,
                 status: Status) -> None:
        self.run_dir = run_dir
        self.element = element.name
        self.sink = sink
        self.status = status
        self.progress = os.path.join(run_dir, "adapters", file_name(adapter) + ".progress.json")
        self.state = self._load()
        self._listed = 0.0  # when the stats directory was last listed
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None

    def _load(self) -> dict:
        try:
            with open(self.progress, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {"batch": -1}

    def _save(self) -> None:
        os.makedirs(os.path.dirname(self.progress), exist_ok=True)
        tmp = self.progress + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.progress)

    def complete_batches(self) -> list[int]:
        """The element's complete batches after the last delivered one, in order: the next
        numbers while their stats files exist, and (the element may have no stats for a batch
        number) the directory listed at most once a second, not at every poll of a long run."""
        stats = os.path.join(self.run_dir, "stats", file_name(self.element))
        out = []
        batch = self.state["batch"] + 1
        while os.path.exists(os.path.join(stats, f"batch-{batch:08d}.json")):
            out.append(batch)
            batch += 1
        if out or time.monotonic() - self._listed < 1.0:
            return out
        self._listed = time.monotonic()
        for path in glob.glob(os.path.join(stats, "batch-*.json")):
            m = _BATCH.match(os.path.basename(path))
            if m and int(m.group(1)) > self.state["batch"]:
                out.append(int(m.group(1)))
        return sorted(out)

    def rows(self, batch: int) -> list[dict]:
        """The changelog rows of ``batch`` in the order the element produced them."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        name = file_name(self.element)
        paths = sorted(p for p in glob.glob(os.path.join(self.run_dir, "changelog", name,
                                                         f"batch-{batch:08d}*.parquet"))
                       if int(_BATCH.match(os.path.basename(p)).group(1)) == batch)  # type: ignore[union-attr]
        if not paths:
            return []
        table = pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default")
        keys = [(c, "ascending") for c in ORDER if c in table.schema.names]
        if keys:
            table = table.sort_by(keys)
        return table.to_pylist()

    def run_once(self) -> bool:
        """Deliver every complete batch not delivered yet; False when the sink gave up."""
        for batch in self.complete_batches():
            rows = self.rows(batch)
            self.state["next"] = batch  # the batch being delivered (a database records it)
            if rows and not self.sink.deliver(rows, self.state):
                return False
            self.state["batch"] = batch
            self._save()
            self.status.update(batch=batch)
        return True

    def start(self) -> "Feed":
        self.sink.open(self.state)
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name=f"ccl-adapter-feed-{self.element}")
        self.thread.start()
        return self

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.run_once()
            except Exception as exc:  # reported, retried at the next poll
                self.status.update(last_error=str(exc))
                log.warning("output adapter of %s: %s", self.element, exc)
            self.stop.wait(POLL)

    def finish(self, timeout: float = 10.0) -> None:
        """Deliver what the run wrote last (a socket client retries for up to ``timeout``
        seconds), then close the sink."""
        if hasattr(self.sink, "give_up_at"):
            self.sink.give_up_at = time.monotonic() + timeout
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout)
        self._listed = 0.0  # list the directory: no batch is left behind
        try:
            self.run_once()
        except Exception as exc:
            self.status.update(last_error=str(exc))
        self.sink.close()
        self.status.update(state="stopped")


def json_file_sink(adapter: Adapter, element: Element, base_dir: str) -> JsonFileSink:
    """The sink of a ``toolkit_file_json_output`` adapter; ValueError for unusable properties."""
    props = adapter_properties(dict(adapter.properties))
    path = os.path.normpath(os.path.join(base_dir, str(props.get("dir", ".")),
                                         str(props.get("file") or element.name + ".json")))
    form = str(props.get("jsonformat") or "lines").strip().lower()
    if form not in ("lines", "array"):
        raise ValueError(f"jsonFormat {form!r}: must be lines or array")
    return JsonFileSink(path, JsonObjects(element.name, element.columns, props), form == "array")


SinkFactory = Callable[[], Any]
