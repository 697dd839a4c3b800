"""ESP's Database input and output adapters (``db_in``, ``db_out``; ``hana_out`` writes to the
configured database the same way) on PostgreSQL, through psycopg 3 (docs/io.md "Databases").

Connection: ``service`` names a connection entry of libpq's service file (``pg_service.conf``,
``PGSERVICEFILE``: host, port, dbname, user, password), as ESP's ``service`` names an entry of its
``service.xml``; the properties ``host``, ``port``, ``dbName`` and ``user`` (ESP's JDBC adapters'
IDs, from the CCL or a .ccr property set) override it. A password never passes through the plan (the
compiler leaves secret properties out): a ``password`` property (CCL or .ccr) reaches the adapter
through the run's secrets file (runtime/adapters/secrets.py, mode 0600); without one libpq reads it
from the service file, ``~/.pgpass`` or ``PGPASSWORD``. What is shown (status, errors) names the server, never the password.

Output (:class:`DbSink`, fed per micro-batch by :class:`~runtime.adapters.output.Feed`): one
transaction per batch that also records the batch in our table ``ccl_progress(adapter, batch)``
(``adapter`` is the adapter's name and the run directory's id); a
batch already recorded there (a replay after a crash between the commit and the progress file) is
skipped, so each batch is written once. Keyed (the element's primary key, or ``keyColumns``): the
batch's last change per key wins; deletes remove the key's row, inserts, updates and upserts replace
it (a delete then a ``COPY``). With ``opcodeColumnName``, or an element without a key: every change is
appended (history), the opcode in that column, the write time in ``timestampColumnName``.

Input (:class:`DbInput`): ``table`` or ``sqlQuery`` (ESP's ``query``), read in the order of
``trackingColumn`` (ours: a column whose values only grow, a serial id or an insert time), each poll
taking the rows after the last value read; written to the inbox as CSV, the last value recorded
with the inbox file (a two-step record, :class:`Position`), so a restart reads on after exactly the
rows in the inbox. Without ``trackingColumn`` the table is read once, at the run's first start.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence

from ccl.plan.model import Adapter, Column, Element

from ..file_names import file_name
from ..inputs.formats import CsvFormat, adapter_properties, property_flag
from .config import DB_INPUTS, DB_OUTPUTS, AdapterError, non_negative
from .inbox import Inbox
from .status import Status

log = logging.getLogger("ccl.runtime")

__all__ = ["DB_INPUTS", "DB_OUTPUTS", "DbInput", "DbSink", "DbSpec", "db_spec", "names_database", "pg_type"]
PROGRESS_TABLE = "ccl_progress"
FIRST_RETRY = 0.1
FETCH_ROWS = 10_000
DELETE_JOIN_ROWS = 1_000  # keys in a batch from which they are deleted through a COPY and a join


@dataclass(frozen=True)
class DbSpec:
    """Where and what a database adapter reads or writes."""

    name: str
    kind: str
    element: str
    conninfo: dict[str, str]      # libpq keywords (never a password)
    table: Optional[str]
    query: Optional[str]
    tracking: Optional[str]
    poll_seconds: float
    retry_period: float
    batch_size: int
    keys: tuple[str, ...]
    opcode_column: Optional[str]
    timestamp_column: Optional[str]
    truncate: bool
    properties: dict[str, Any]
    # from the run's secrets file (runtime/adapters/secrets.py), never from the plan; not shown
    password: Optional[str] = field(default=None, repr=False, compare=False)

    def address(self) -> str:
        """The server as shown in status and errors (no password)."""
        c = self.conninfo
        parts = [f"service {c['service']}"] if "service" in c else []
        if "host" in c or "port" in c or "dbname" in c or not parts:
            parts.append(f"{c.get('host', 'localhost')}:{c.get('port', '5432')}/{c.get('dbname', '')}")
        return " ".join(parts)


_CONNECTION = ("service", "host", "port", "dbname", "database", "user", "username")


def names_database(adapter: Adapter) -> bool:
    """Whether a database adapter's properties name a database to connect to (a ``hana_out``
    that names none is skipped with a note: ESP's HANA adapter has its own ODBC service)."""
    props = adapter_properties(dict(adapter.properties))
    return any(props.get(p) not in (None, "") for p in _CONNECTION)


def db_spec(adapter: Adapter, element: Element, secrets: Optional[Mapping[str, str]] = None) -> DbSpec:
    """The :class:`DbSpec` of a ``db_in``, ``db_out`` or ``hana_out`` adapter of the plan;
    AdapterError when its properties cannot be used (no database named, no table, a key or
    tracking column the element does not have, ...). ``secrets``: the adapter's secret properties
    (lower-case IDs; ``password`` is used)."""
    name, kind = adapter.name, adapter.type.lower()
    props = adapter_properties(dict(adapter.properties))
    conninfo: dict[str, str] = {}
    for prop, keyword in zip(_CONNECTION, ("service", "host", "port", "dbname", "dbname", "user",
                                           "user")):
        if props.get(prop) not in (None, ""):
            conninfo[keyword] = str(props[prop]).strip()
    if not conninfo:
        if kind == "hana_out":
            raise AdapterError(f"adapter '{name}': a hana_out adapter writes to the PostgreSQL "
                               f"database its properties name (service, or host/port/dbName); "
                               f"it names none")
        raise AdapterError(f"adapter '{name}': a {kind} adapter needs a service (or host, port, "
                           f"dbName)")
    if "port" in conninfo and not conninfo["port"].isdigit():
        raise AdapterError(f"adapter '{name}': port {conninfo['port']!r} is not a TCP port")
    columns = [c.name for c in element.columns]
    lower = {c.lower(): c for c in columns}

    def column(prop: str) -> Optional[str]:
        value = str(props.get(prop) or "").strip()
        return value or None

    table = column("table")
    schema = column("sourceschema")  # ESP's schema of the table (HANA and database adapters)
    if table and schema and "." not in table:
        table = f"{schema}.{table}"
    query = column("query") or column("sqlquery")
    direction = adapter.direction
    if direction == "output" and not table:
        raise AdapterError(f"adapter '{name}': a {kind} adapter needs a table")
    if direction == "input" and not (table or query):
        raise AdapterError(f"adapter '{name}': a db_in adapter needs a table or a sqlQuery")
    tracking = column("trackingcolumn")
    poll = non_negative(props, "pollperiod", 0.0, name)
    if direction == "input" and poll > 0 and tracking is None:
        raise AdapterError(f"adapter '{name}': pollperiod needs a trackingColumn (a column whose "
                           f"values only grow), or each poll would read the rows again")
    keys: tuple[str, ...] = element.key
    if column("keycolumns"):
        wanted = [k.strip() for k in str(props["keycolumns"]).split(",") if k.strip()]
        missing = [k for k in wanted if k.lower() not in lower]
        if missing:
            raise AdapterError(f"adapter '{name}': keyColumns {missing[0]!r} is not a column of "
                               f"{element.name}")
        keys = tuple(lower[k.lower()] for k in wanted)
    batch = int(non_negative(props, "batchsize", 10_000, name)) or 10_000
    try:
        truncate = property_flag(props.get("truncatetable", "false"), "truncateTable")
        if direction == "input":
            fmt = CsvFormat.from_options(props, element.name)
            if fmt.has_header is False or fmt.stream_opcode:
                raise ValueError("the rows of a db_in adapter go to the inbox with a header of "
                                 "the column names: hasHeader false and expectStreamNameOpcode "
                                 "do not apply")
    except ValueError as exc:
        raise AdapterError(f"adapter '{name}': {exc}") from None
    return DbSpec(name, kind, adapter.element, conninfo, table, query, tracking, poll,
                  non_negative(props, "retryperiod", 5.0, name), batch, keys,
                  column("opcodecolumnname"), column("timestampcolumnname"), truncate, props,
                  (secrets or {}).get("password") or None)


def connect(spec: DbSpec):
    """A new connection (psycopg.OperationalError when the server cannot be reached)."""
    import psycopg
    extra = {"password": spec.password} if spec.password else {}
    return psycopg.connect(connect_timeout=5, application_name=f"ccl-{spec.name}"[:63],
                           **spec.conninfo, **extra)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _misconfigured(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection settings themselves are wrong (a service no service
    file defines): retrying cannot help, unlike a server that went away."""
    return "definition of service" in str(exc)


def _close_quietly(conn: Any) -> None:
    """Close a connection that may be broken already (its error says nothing new)."""
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


def _gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the server went away (retry) rather than a bad statement or settings
    no retry can mend."""
    import psycopg
    return (isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
            and not _misconfigured(exc))


# --------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------

_PG_TYPES = {"integer": "integer", "long": "bigint", "float": "double precision",
             "string": "text", "boolean": "boolean", "date": "timestamp(0)",
             "timestamp": "timestamp(3)", "bigdatetime": "timestamp(6)", "interval": "bigint",
             "binary": "bytea"}


def pg_type(ccl_type: str) -> str:
    """The PostgreSQL column type a CCL type is written as (money(n) and decimal(p,s) as
    numeric)."""
    t = ccl_type.strip().lower()
    if t.startswith("money"):
        scale = t[t.find("(") + 1:t.find(")")] if "(" in t else "4"
        return f"numeric(38,{scale})"
    if t.startswith("decimal"):
        return "numeric" + (t[t.find("("):] if "(" in t else "")
    return _PG_TYPES.get(t, "text")


def _db_value(v: Any) -> Any:
    """A changelog value as psycopg adapts it (date-times written as UTC wall-clock time)."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


class DbSink:
    """A Feed sink writing each batch in one transaction (see the module docstring)."""

    def __init__(self, spec: DbSpec, element: Element, status: Status, stop: threading.Event) -> None:
        self.spec, self.status, self.stop = spec, status, stop
        self.columns = [c.name for c in element.columns]
        self.types = [c.type for c in element.columns]
        self.history = spec.opcode_column is not None or not spec.keys
        self.conn: Any = None
        self.give_up_at: Optional[float] = None  # set when the run ends: retry until then
        self.ready = False
        self.failed = False  # settings no retry can mend: nothing is written until a restart

    def open(self, state: dict) -> None:
        self.first_start = state.get("batch", -1) < 0
        self.progress_key = f"{self.spec.name}/{self._run_id()}"

    def _run_id(self) -> str:
        """This run directory's id for the adapter, made at its first start (kept beside its
        status): batch numbers start afresh in a new run directory, so the database's record
        of the batches written is per run directory, not per adapter name."""
        import uuid
        path = os.path.join(os.path.dirname(self.status.path), file_name(self.spec.name) + ".run-id")
        try:
            with open(path, encoding="utf-8") as f:
                run_id = f.read().strip()
            if run_id:
                return run_id
        except OSError:
            pass
        run_id = uuid.uuid4().hex
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(run_id + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        return run_id

    def _ensure(self) -> None:
        """Connect, and create our progress table and the target table when missing."""
        from psycopg import sql
        self.conn = connect(self.spec)
        cols = [sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(pg_type(t)))
                for c, t in zip(self.columns, self.types)]
        if self.spec.opcode_column:
            cols.append(sql.SQL("{} text").format(sql.Identifier(self.spec.opcode_column)))
        if self.spec.timestamp_column:
            cols.append(sql.SQL("{} timestamp(6)").format(sql.Identifier(self.spec.timestamp_column)))
        if not self.history:
            cols.append(sql.SQL("PRIMARY KEY ({})").format(
                sql.SQL(", ").join(map(sql.Identifier, self.spec.keys))))
        with self.conn.transaction():
            if "." in str(self.spec.table):
                self.conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(str(self.spec.table).split(".")[0])))
            self.conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (adapter text PRIMARY KEY, "
                                      "batch bigint NOT NULL)").format(sql.Identifier(PROGRESS_TABLE)))
            self.conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                self._table(), sql.SQL(", ").join(cols)))
            if self.spec.truncate and self.first_start and not self.ready:
                self.conn.execute(sql.SQL("TRUNCATE {}").format(self._table()))
        self.ready = True
        self.status.update(state="connected", address=self.spec.address(), table=self.spec.table)
        self.status.add(connections=1)

    def _table(self):
        from psycopg import sql
        parts = str(self.spec.table).split(".")
        return sql.Identifier(*parts)

    def deliver(self, rows: list[dict], state: dict) -> bool:
        batch = int(state.get("next", state.get("batch", -1) + 1))
        wait = FIRST_RETRY
        while not self.failed:
            try:
                if self.conn is None or self.conn.closed:
                    self._ensure()
                written = self._write(batch, rows)
                self.status.update(state="connected", last_error=None)
                self.status.add(records=written)
                return True
            except Exception as exc:
                import psycopg
                if not isinstance(exc, psycopg.Error):
                    raise
                # the server went away, or refuses the batch (a table whose columns do not take
                # the element's): reported and retried, so that it can be mended while running
                self._close()
                message = f"{self.spec.address()}: {_first_line(exc)}"
                if message != self.status.data.get("last_error"):
                    log.warning("output adapter %s: %s", self.spec.name, message)
                if _misconfigured(exc):
                    self.failed = True
                    self.status.update(state="failed", last_error=message)
                    return False
                self.status.update(state="retrying", last_error=message)
                self.status.add(retries=1)
                if self.give_up_at is not None:
                    if time.monotonic() + wait > self.give_up_at:
                        return False
                    time.sleep(wait)
                elif self.stop.wait(wait):
                    return False
                wait = min(wait * 2, max(self.spec.retry_period, FIRST_RETRY))
        return False

    def _write(self, batch: int, rows: list[dict]) -> int:
        """Write ``rows`` as batch ``batch`` in one transaction; 0 when the database has it."""
        from psycopg import sql
        with self.conn.transaction():
            cur = self.conn.execute(
                sql.SQL("SELECT batch FROM {} WHERE adapter = %s FOR UPDATE").format(
                    sql.Identifier(PROGRESS_TABLE)), (self.progress_key,))
            done = cur.fetchone()
            if done is not None and done[0] >= batch:
                return 0  # written before a crash: not again
            if self.history:
                out = self._append(rows)
            else:
                out = self._apply(rows)
            self.conn.execute(
                sql.SQL("INSERT INTO {} (adapter, batch) VALUES (%s, %s) ON CONFLICT (adapter) "
                        "DO UPDATE SET batch = EXCLUDED.batch").format(sql.Identifier(PROGRESS_TABLE)),
                (self.progress_key, batch))
        return out

    def _copy(self, names: list[str], records: list[tuple]) -> None:
        from psycopg import sql
        statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
            self._table(), sql.SQL(", ").join(map(sql.Identifier, names)))
        with self.conn.cursor() as cur:
            for start in range(0, len(records), self.spec.batch_size):
                with cur.copy(statement) as copy:
                    for rec in records[start:start + self.spec.batch_size]:
                        copy.write_row(rec)

    def _append(self, rows: list[dict]) -> int:
        names = list(self.columns)
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        if self.spec.opcode_column:
            names.append(self.spec.opcode_column)
        if self.spec.timestamp_column:
            names.append(self.spec.timestamp_column)
        records = []
        for r in rows:
            rec = [_db_value(r.get(c)) for c in self.columns]
            if self.spec.opcode_column:
                rec.append(r.get("__op") or "i")
            if self.spec.timestamp_column:
                rec.append(now)
            records.append(tuple(rec))
        self._copy(names, records)
        return len(records)

    def _apply(self, rows: list[dict]) -> int:
        """The batch's net change per key: delete every key it touches, insert the rows kept."""
        from psycopg import sql
        last: dict[tuple, dict] = {}
        for r in rows:
            key = tuple(r.get(k) for k in self.spec.keys)
            last.pop(key, None)  # keep the batch's order of last changes
            last[key] = r
        keys = [tuple(_db_value(v) for v in key) for key in last]
        if len(keys) < DELETE_JOIN_ROWS:
            where = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(k))
                                          for k in self.spec.keys)
            with self.conn.cursor() as cur:
                cur.executemany(sql.SQL("DELETE FROM {} WHERE ").format(self._table()) + where, keys)
        else:  # many keys: COPY them into a temporary table and delete in one join
            types = dict(zip(self.columns, self.types))
            self.conn.execute(sql.SQL("CREATE TEMPORARY TABLE ccl_keys ({}) ON COMMIT DROP").format(
                sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(k), sql.SQL(pg_type(types[k])))
                                   for k in self.spec.keys)))
            with self.conn.cursor() as cur:
                with cur.copy(sql.SQL("COPY ccl_keys FROM STDIN")) as copy:
                    for key in keys:
                        copy.write_row(key)
            self.conn.execute(sql.SQL("DELETE FROM {} AS t USING ccl_keys AS k WHERE {}").format(
                self._table(), sql.SQL(" AND ").join(
                    sql.SQL("t.{} = k.{}").format(sql.Identifier(k), sql.Identifier(k))
                    for k in self.spec.keys)))
        kept = [tuple(_db_value(r.get(c)) for c in self.columns) for r in last.values()
                if (r.get("__op") or "i") not in ("d", "s")]
        self._copy(self.columns, kept)
        return len(rows)

    def _close(self) -> None:
        _close_quietly(self.conn)
        self.conn = None

    def close(self) -> None:
        self._close()


# --------------------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------------------

def _encode_position(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return {"t": "plain", "v": v}
    if isinstance(v, float):
        return {"t": "float", "v": repr(v)}
    if isinstance(v, Decimal):
        return {"t": "decimal", "v": str(v)}
    if isinstance(v, dt.datetime):
        return {"t": "datetime", "v": v.isoformat()}
    if isinstance(v, dt.date):
        return {"t": "date", "v": v.isoformat()}
    raise AdapterError(f"a trackingColumn of {type(v).__name__} values cannot be tracked")


def _decode_position(d: Any) -> Any:
    if d is None:
        return None
    t, v = d["t"], d["v"]
    return {"plain": lambda: v, "float": lambda: float(v), "decimal": lambda: Decimal(v),
            "datetime": lambda: dt.datetime.fromisoformat(v),
            "date": lambda: dt.date.fromisoformat(v)}[t]()


class Position:
    """Where a database input has read up to, kept with the inbox files: before a file is linked
    into the inbox its name and the position after it are written as ``pending``; once linked, the
    position is committed. A restart that finds a pending file in the inbox takes its position,
    else the one before: the position always matches what the inbox holds."""

    def __init__(self, path: str, inbox_dir: str) -> None:
        self.path = path
        self.inbox_dir = inbox_dir
        state = self._read()
        pending = state.get("pending")
        if pending and os.path.exists(os.path.join(inbox_dir, pending["file"])):
            state = {"position": pending["position"], "done": True}
            self._write(state)
        self.state = {k: v for k, v in state.items() if k != "pending"}

    def _read(self) -> dict:
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def _write(self, state: dict) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    @property
    def value(self) -> Any:
        return _decode_position(self.state.get("position"))

    @property
    def done(self) -> bool:
        """Whether a table read once (no trackingColumn) has been read."""
        return bool(self.state.get("done"))

    def prepare(self, final_path: str, value: Any) -> None:
        self._write({**self.state, "pending": {"file": os.path.basename(final_path),
                                               "position": _encode_position(value)}})

    def commit(self, value: Any) -> None:
        self.state = {"position": _encode_position(value), "done": True}
        self._write(self.state)


def _text(v: Any) -> str:
    """A database value as CSV field text, which the element's reader parses as it parses files
    (a value that does not fit its column is a bad record there)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, (dt.date, Decimal)):
        return str(v) if isinstance(v, Decimal) else v.isoformat()
    if isinstance(v, dt.timedelta):
        return str((v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    return str(v)


# types whose text PostgreSQL sends is what the element's reader reads: taken as it comes
# instead of converted to Python values and formatted again (booleans, time zones, bytea and
# intervals are converted by _text)
_AS_TEXT = ("int2", "int4", "int8", "numeric", "float4", "float8", "text", "varchar", "bpchar",
            "name", "date", "timestamp")


def _load_as_text(conn: Any) -> None:
    from psycopg.types.string import TextLoader
    for name in _AS_TEXT:
        info = conn.adapters.types.get(name)
        if info is not None:
            conn.adapters.register_loader(info.oid, TextLoader)


class DbInput:
    """One ``db_in`` adapter: polls its table or query into the element's inbox."""

    def __init__(self, spec: DbSpec, inbox_dir: str, columns: Sequence[Column], status: Status,
                 progress_dir: str) -> None:
        self.spec = spec
        self.inbox = Inbox(inbox_dir, spec.name, "csv")
        self.columns = [c.name for c in columns]
        self.delimiter = CsvFormat.from_options(spec.properties, spec.element).delimiter
        self.status = status
        self.position = Position(os.path.join(progress_dir, file_name(spec.name) + ".position.json"),
                                 inbox_dir)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.conn: Any = None
        self._last: Any = None

    def _statement(self) -> tuple[Any, Optional[tuple]]:
        """The poll's statement and its parameters (None: the text goes as it is, so a ``%`` in
        the user's query needs doubling only when there are parameters)."""
        from psycopg import sql
        position = self.position.value if self.spec.tracking is not None else None
        query = self.spec.query
        if query is not None and position is not None:
            query = query.replace("%", "%%")
        source = (sql.SQL("({}) AS ccl_q").format(sql.SQL(query)) if query is not None
                  else sql.Identifier(*str(self.spec.table).split(".")))
        out = sql.SQL("SELECT * FROM {}").format(source)
        if self.spec.tracking is None:
            return out, None
        col = sql.Identifier(self.spec.tracking)
        if position is None:
            return out + sql.SQL(" ORDER BY {}").format(col), None
        return out + sql.SQL(" WHERE {} > %s ORDER BY {}").format(col, col), (position,)

    def poll(self) -> int:
        """Read the new rows into the inbox (a file per FETCH_ROWS rows); how many were read.
        psycopg errors propagate (the caller retries)."""
        if self.spec.tracking is None and self.position.done:
            return 0
        if self.conn is None or self.conn.closed:
            self.conn = connect(self.spec)
            _load_as_text(self.conn)
            self.status.update(state="connected", address=self.spec.address())
            self.status.add(connections=1)
        statement, params = self._statement()
        total = 0
        with self.conn.transaction():
            with self.conn.cursor(name=f"ccl_{os.getpid()}") as cur:
                cur.itersize = FETCH_ROWS
                cur.execute(statement, params)
                names = [d.name for d in cur.description]
                lower = {n.lower(): i for i, n in enumerate(names)}
                take = [lower.get(c.lower()) for c in self.columns]
                opcol = lower.get("esp_ops")
                track = lower.get(self.spec.tracking.lower()) if self.spec.tracking else None
                if self.spec.tracking is not None and track is None:
                    raise AdapterError(f"adapter '{self.spec.name}': trackingColumn "
                                       f"{self.spec.tracking!r} is not a column of its rows")
                header = (["ESP_OPS"] if opcol is not None else []) + self.columns
                out = io.StringIO()
                writer = csv.writer(out, delimiter=self.delimiter, lineterminator="\n")
                writer.writerow(header)
                count = 0
                while True:
                    rows = cur.fetchmany(FETCH_ROWS)
                    for row in rows:
                        # most values come as text already (_AS_TEXT): the quick case first
                        fields = [("" if i is None else v if type(v) is str
                                   else "" if v is None else _text(v))
                                  for i in take for v in (row[i] if i is not None else None,)]
                        if opcol is not None:
                            fields.insert(0, _text(row[opcol]) or "i")
                        writer.writerow(fields)
                    count += len(rows)
                    # with a tracking column a file per FETCH_ROWS rows; a table read once is
                    # one file, so that it is in the inbox whole or not at all
                    if count and (not rows or track is not None):
                        value = rows[-1][track] if track is not None and rows else self._last
                        self.inbox.publish(out.getvalue().encode("utf-8"),
                                           before_link=lambda p, v=value: self.position.prepare(p, v))
                        self.position.commit(value)
                        self._last = value
                        total += count
                        self.status.add(records=count, files=1)
                        out = io.StringIO()
                        writer = csv.writer(out, delimiter=self.delimiter, lineterminator="\n")
                        writer.writerow(header)
                        count = 0
                    if not rows:
                        break
        if self.spec.tracking is None and not self.position.done:
            self.position.commit(None)  # an empty table read once is read
        return total

    def poll_with_retries(self, deadline: Optional[float]) -> bool:
        """Poll until it succeeds, retrying a server that went away with backoff (until
        ``deadline`` on the monotonic clock, or until stopped); False when it gave up."""
        wait = FIRST_RETRY
        while True:
            try:
                self.poll()
                return True
            except Exception as exc:
                if not _gone(exc):
                    self.status.update(state="failed", last_error=str(exc).strip()[:500])
                    log.warning("adapter %s: %s", self.spec.name, exc)
                    return False
                self._close()
                self.status.update(state="retrying",
                                   last_error=f"{self.spec.address()}: {_first_line(exc)}")
                self.status.add(retries=1)
                if deadline is not None and time.monotonic() + wait > deadline:
                    self.status.update(state="failed")
                    return False
                if self._stop.wait(wait):
                    return False
                wait = min(wait * 2, max(self.spec.retry_period, FIRST_RETRY))

    def start(self) -> "DbInput":
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"ccl-adapter-{self.spec.name}")
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.poll_with_retries(None) and self.status.data.get("state") == "failed":
                return
            # ESP's pollperiod 0: no polling, the rows there at the start are read once
            if self.spec.poll_seconds <= 0 or self._stop.wait(self.spec.poll_seconds):
                break
        if not self._stop.is_set():
            self.status.update(state="idle")

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._close()
        self.status.update(state="stopped")

    def _close(self) -> None:
        _close_quietly(self.conn)
        self.conn = None
