"""ESP's Database input and output adapters (db_in, db_out, hana_out) against a real PostgreSQL
server started by the tests (tests/pg_server.py): the sink's transactions and replays, the
input's position kept with the inbox, a server that goes away, and end to end runs of projects
through ``run_plan`` and ``ccl run`` (with a kill -9 in the middle of a feed)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import pg_server
from ccl.plan.model import Adapter, Column, Element
from runtime.adapters.config import AdapterError
from runtime.adapters.postgres import DbInput, DbSink, Position, db_spec
from runtime.adapters.status import Status
from runner_e2e import run_project

pytestmark = pytest.mark.skipif(pg_server.pg_bin() is None,
                                reason="PostgreSQL is not installed (.ci/run installs it)")

ELEMENT = Element("W", "window", "output", None, None,
                  (Column("id", "integer"), Column("sym", "string"), Column("px", "money(2)")),
                  ("id",))


@pytest.fixture(scope="module")
def pg():
    yield from pg_server.start_server()


@pytest.fixture
def service(pg, monkeypatch):
    """The server's connection entry in a libpq service file, as a deployment names it."""
    monkeypatch.setenv("PGSERVICEFILE", pg.service_file)
    return "ccl_test"


def _adapter(kind: str, direction: str, **props) -> Adapter:
    return Adapter(f"A_{kind}", direction, kind, "W", properties=props)


def _sink(tmp_path, table: str, service: str, **props) -> DbSink:
    spec = db_spec(_adapter("db_out", "output", service=service, table=table, **props), ELEMENT)
    sink = DbSink(spec, ELEMENT, Status(str(tmp_path / "st"), spec.name, "db_out"), threading.Event())
    sink.open({"batch": -1})
    return sink


def _ch(op: str, i: int, sym: str = "S", px: str = "1.00") -> dict:
    from decimal import Decimal
    return {"__op": op, "id": i, "sym": sym, "px": Decimal(px)}


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, direction, props, message", [
    ("db_out", "output", {"table": "t"}, "needs a service"),
    ("hana_out", "output", {"table": "t"}, "hana_out adapter writes to the PostgreSQL database"),
    ("db_out", "output", {"service": "s"}, "needs a table"),
    ("db_in", "input", {"service": "s"}, "needs a table or a sqlQuery"),
    ("db_in", "input", {"service": "s", "table": "t", "pollperiod": 1}, "pollperiod needs a trackingColumn"),
    ("db_out", "output", {"service": "s", "table": "t", "keyColumns": "nope"}, "'nope' is not a column"),
    ("db_out", "output", {"host": "h", "port": "x", "table": "t"}, "is not a TCP port"),
    ("db_out", "output", {"service": "s", "table": "t", "truncateTable": "maybe"}, "truncateTable"),
    ("db_in", "input", {"service": "s", "table": "t", "hasHeader": "false"}, "hasHeader false"),
])
def test_unusable_database_adapter_properties_are_refused_with_a_message(kind, direction, props, message):
    with pytest.raises(AdapterError, match=message):
        db_spec(_adapter(kind, direction, **props), ELEMENT)


def test_the_compiler_and_the_runtime_name_the_same_database_input_types():
    from ccl.plan.physical import DB_INPUT_ADAPTERS, INBOX_INPUT_ADAPTERS, READ_INPUT_ADAPTERS
    from runtime.adapters.config import DB_INPUTS, INBOX_INPUTS

    assert set(DB_INPUT_ADAPTERS) == set(DB_INPUTS)
    assert set(INBOX_INPUT_ADAPTERS) == set(INBOX_INPUTS) <= set(READ_INPUT_ADAPTERS)


def test_ccl_check_explains_esp_database_properties_that_mean_nothing_here(tmp_path):
    from ccl.config.project_config import load_project_config
    path = tmp_path / "p.ccl"
    path.write_text("create input window W schema (id integer, v string) primary key (id);\n"
                    "attach output adapter O type db_out to W properties service = 's', "
                    "table = 't', outputBase = true, batchSize = 100, colour = 'red';\n"
                    "attach output adapter H type hana_out to W properties service = 's', "
                    "table = 'h', opcodeColumnName = 'op';\n"
                    "attach output adapter H2 type hana_out to W properties table = 'h2';\n")
    cfg = load_project_config(str(path))
    messages = [str(d.message) for d in cfg.diagnostics if d.code == "CCL1307"]
    assert any("outputBase" in m and "every change from the run's first batch" in m for m in messages)
    assert any("'colour'" in m and "reads service" in m for m in messages)
    assert any("'H2' of type hana_out" in m and "names none, so it writes nothing" in m
               for m in messages)
    assert not any("'H' of type hana_out" in m for m in messages)
    assert not any("property 'batchSize'" in m or "property 'opcodeColumnName'" in m
                   for m in messages)


# --------------------------------------------------------------------------------------------------
# The output sink
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("join_rows", [1_000, 0])  # deletes one by one, or through a join
def test_keyed_output_follows_the_opcodes_in_one_transaction_per_batch(pg, service, tmp_path,
                                                                        monkeypatch, join_rows):
    import runtime.adapters.postgres as pgmod
    monkeypatch.setattr(pgmod, "DELETE_JOIN_ROWS", join_rows)
    pg.query("drop table if exists keyed")
    sink = _sink(tmp_path, "keyed", service)
    state = {"batch": -1, "next": 0}
    assert sink.deliver([_ch("i", 1, "A"), _ch("i", 2, "B"), _ch("i", 3, "C"), _ch("u", 3, "C", "3.50")],
                        state)
    state["next"] = 1
    assert sink.deliver([_ch("d", 2), _ch("u", 1, "A", "9.99"), _ch("p", 4, "D"), _ch("i", 5),
                         _ch("d", 5)], state)
    rows = pg.query("select id, sym, px::text from keyed order by id")
    assert rows == [(1, "A", "9.99"), (3, "C", "3.50"), (4, "D", "1.00")]
    assert pg.query("select batch from ccl_progress where adapter = %s", (sink.progress_key,)) == [(1,)]
    # the primary key is the element's
    assert pg.query("select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid "
                    "and a.attnum = any(i.indkey) where i.indrelid = 'keyed'::regclass "
                    "and i.indisprimary") == [("id",)]
    # a batch replayed after a crash (written, the progress file not) is not written again
    state["next"] = 1
    assert sink.deliver([_ch("i", 7)], state)
    assert pg.query("select count(*) from keyed") == [(3,)]
    sink.close()


def test_history_output_appends_every_change_with_its_opcode(pg, service, tmp_path):
    sink = _sink(tmp_path, "hist", service, opcodeColumnName="op", timestampColumnName="at",
                 batchSize=2)
    state = {"batch": -1, "next": 3}
    assert sink.deliver([_ch("i", 1), _ch("u", 1, px="2.00"), _ch("d", 1)], state)
    state["next"] = 3  # the same batch again: skipped
    assert sink.deliver([_ch("i", 1), _ch("u", 1, px="2.00"), _ch("d", 1)], state)
    rows = pg.query("select id, px::text, op, at is not null from hist order by px, op")
    assert sorted(rows) == sorted([(1, "1.00", "i", True), (1, "2.00", "u", True), (1, "1.00", "d", True)])
    sink.close()


def test_a_server_that_goes_away_is_retried_and_reported(pg, service, tmp_path):
    sink = _sink(tmp_path, "retried", service)
    state = {"batch": -1, "next": 0}
    assert sink.deliver([_ch("i", 1)], state)
    pg.stop()
    restarted = threading.Timer(2.0, pg.start)
    restarted.start()
    try:
        state["next"] = 1
        assert sink.deliver([_ch("i", 2)], state)  # waits for the server to come back
    finally:
        restarted.join()
    status = json.load(open(sink.status.path))
    assert status["retries"] >= 1 and status["state"] == "connected"
    assert pg.query("select id from retried order by id") == [(1,), (2,)]
    sink.close()


def test_a_service_no_service_file_defines_fails_at_once_without_retrying(pg, service, tmp_path):
    """Settings no retry can mend (ESP's HANA service name, undefined here) fail the adapter at
    once: the run's end does not wait for it, and its status says why."""
    sink = _sink(tmp_path, "never", "no_such_service")
    started = time.monotonic()
    sink.give_up_at = started + 30
    assert not sink.deliver([_ch("i", 1)], {"batch": -1, "next": 0})
    assert not sink.deliver([_ch("i", 2)], {"batch": -1, "next": 1})
    assert time.monotonic() - started < 5
    status = json.load(open(sink.status.path))
    assert status["state"] == "failed" and "no_such_service" in status["last_error"]
    assert not status.get("retries")
    sink.close()


def test_an_input_of_a_service_no_service_file_defines_fails_at_once(pg, service, tmp_path):
    spec = db_spec(_adapter("db_in", "input", service="no_such_service", table="src"), ELEMENT)
    src = DbInput(spec, str(tmp_path / "inbox"), ELEMENT.columns,
                  Status(str(tmp_path / "st"), spec.name, "db_in"), str(tmp_path / "pos"))
    started = time.monotonic()
    assert not src.poll_with_retries(started + 30)
    assert time.monotonic() - started < 5
    status = json.load(open(src.status.path))
    assert status["state"] == "failed" and "no_such_service" in status["last_error"]
    assert not status.get("retries")


def test_a_table_that_refuses_the_batch_is_reported_and_retried(pg, service, tmp_path):
    pg.query("create table wrong (id int primary key, sym int, px numeric)")
    sink = _sink(tmp_path, "wrong", service)
    sink.give_up_at = time.monotonic() + 1.0
    assert not sink.deliver([_ch("i", 1, "A")], {"batch": -1, "next": 0})
    status = json.load(open(sink.status.path))
    assert status["state"] == "retrying" and "invalid input syntax for type integer" in status["last_error"]
    assert "s3cret" not in json.dumps(status)
    pg.query("alter table wrong alter column sym type text")  # mended while it retries
    sink.give_up_at = None
    assert sink.deliver([_ch("i", 1, "A")], {"batch": -1, "next": 0})
    assert pg.query("select id, sym from wrong") == [(1, "A")]


# --------------------------------------------------------------------------------------------------
# The input adapter
# --------------------------------------------------------------------------------------------------

def _inbox_lines(directory) -> list[str]:
    out = []
    for name in sorted(os.listdir(directory)):
        if not name.startswith("."):
            out += open(os.path.join(directory, name)).read().splitlines()[1:]
    return out


def test_input_reads_new_rows_once_and_its_position_matches_the_inbox(pg, service, tmp_path):
    pg.query("create table src (seq serial primary key, id text, sym text, px numeric)")
    pg.query("insert into src (id, sym, px) values ('1', 'A', 1.5), ('2', 'B', 2)")
    spec = db_spec(_adapter("db_in", "input", service=service, table="src", trackingColumn="seq",
                            pollperiod=1), ELEMENT)
    inbox, progress = str(tmp_path / "inbox"), str(tmp_path / "adapters")

    def reader() -> DbInput:
        return DbInput(spec, inbox, ELEMENT.columns, Status(progress, spec.name, "db_in"), progress)

    src = reader()
    assert src.poll() == 2
    assert src.poll() == 0  # nothing new
    pg.query("insert into src (id, sym, px) values ('x', 'C', 3)")
    assert src.poll() == 1
    src.stop()
    assert _inbox_lines(inbox) == ["1,A,1.5", "2,B,2", "x,C,3"]
    # a crash after a file was linked but before its position was committed: the restart takes
    # the pending position from the file that is there
    pg.query("insert into src (id, sym, px) values ('4', 'D', 4)")
    src = reader()
    real_commit = src.position.commit
    src.position.commit = lambda value: None  # type: ignore[method-assign]
    assert src.poll() == 1
    src.position.commit = real_commit  # type: ignore[method-assign]
    src = reader()
    assert src.poll() == 0
    assert _inbox_lines(inbox) == ["1,A,1.5", "2,B,2", "x,C,3", "4,D,4"]
    # a crash before the file was linked: its position is not taken, the rows are read again
    pos = Position(os.path.join(progress, "A_db_in.position.json"), inbox)
    pos.prepare(os.path.join(inbox, "never-linked.csv"), 99)
    src = reader()
    assert src.position.value == "4" and src.poll() == 0  # the text PostgreSQL sent
    # a query (a % in it is the query's, with or without a position to read after)
    query = db_spec(_adapter("db_in", "input", service=service, trackingColumn="seq",
                             sqlQuery="select * from src where sym like '%' and id <> 'x'"), ELEMENT)
    other = str(tmp_path / "inbox2")
    src = DbInput(query, other, ELEMENT.columns, Status(progress, "Q", "db_in"), str(tmp_path / "q"))
    assert src.poll() == 3
    pg.query("insert into src (id, sym, px) values ('5', 'E', 5), ('x', 'F', 6)")
    assert src.poll() == 1
    assert [line.split(",")[0] for line in _inbox_lines(other)] == ["1", "2", "4", "5"]


def test_an_input_whose_server_goes_away_retries_and_a_bad_query_fails_with_its_reason(
        pg, service, tmp_path):
    pg.query("create table gone (seq int, id int, sym text, px numeric)")
    pg.query("insert into gone values (1, 1, 'A', 1)")
    spec = db_spec(_adapter("db_in", "input", service=service, table="gone", trackingColumn="seq",
                            pollperiod=1), ELEMENT)
    inbox, progress = str(tmp_path / "inbox"), str(tmp_path / "adapters")
    src = DbInput(spec, inbox, ELEMENT.columns, Status(progress, spec.name, "db_in"), progress)
    pg.stop()
    assert not src.poll_with_retries(time.monotonic() + 0.5)  # gave up: reported
    status = json.load(open(src.status.path))
    assert status["state"] == "failed" and status["retries"] >= 1 and "service ccl_test" in status["last_error"]
    restarted = threading.Timer(1.0, pg.start)
    restarted.start()
    try:
        assert src.poll_with_retries(None)  # retried until the server is back
    finally:
        restarted.join()
    assert _inbox_lines(inbox) == ["1,A,1"]
    bad = db_spec(_adapter("db_in", "input", service=service, sqlQuery="select nonsense from gone",
                           trackingColumn="seq"), ELEMENT)
    src = DbInput(bad, str(tmp_path / "in2"), ELEMENT.columns, Status(progress, "B", "db_in"),
                  str(tmp_path / "p2"))
    assert not src.poll_with_retries(None)
    status = json.load(open(src.status.path))
    assert status["state"] == "failed" and 'column "nonsense" does not exist' in status["last_error"]


def test_a_table_without_tracking_column_is_read_once(pg, service, tmp_path):
    pg.query("create table once (id int, sym text, px numeric)")
    pg.query("insert into once values (1, 'A', 1), (2, 'B', 2)")
    spec = db_spec(_adapter("db_in", "input", service=service, table="once"), ELEMENT)
    inbox, progress = str(tmp_path / "inbox"), str(tmp_path / "adapters")
    for _ in range(2):
        DbInput(spec, inbox, ELEMENT.columns, Status(progress, spec.name, "db_in"), progress).poll()
    assert _inbox_lines(inbox) == ["1,A,1", "2,B,2"]


# --------------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------------

E2E_PROJECT = """
create input window Orders schema (id integer, sym string, qty integer) primary key (id);
attach input adapter OrdersIn type db_in to Orders
  properties service = 'ccl_test', trackingColumn = 'seq',
  sqlQuery = 'select seq, op as esp_ops, id, sym, qty from orders_src';
create output window BySym primary key deduced as
  select o.sym, sum(o.qty) as total, count(*) as n from Orders o group by o.sym;
attach output adapter SymOut type db_out to BySym properties service = 'ccl_test', table = 'by_sym';
create output window Copy primary key deduced as select * from Orders o;
attach output adapter CopyOut type db_out to Copy
  properties service = 'ccl_test', table = 'orders_copy';
attach output adapter HistOut type hana_out to Copy
  properties service = 'ccl_test', table = 'orders_hist', opcodeColumnName = 'op';
"""


def test_a_project_reads_a_table_and_writes_its_windows_end_to_end(spark, pg, service, tmp_path):
    pg.query("create table orders_src (seq serial primary key, op text, id text, sym text, qty text)")
    pg.query("insert into orders_src (op, id, sym, qty) values ('i', '1', 'A', '10'), "
             "('i', '2', 'B', '5'), ('i', '3', 'A', '1'), ('i', 'abc', 'A', '7'), "
             "('i', '4', 'B', 'lots')")
    run_dir = str(tmp_path / "run")
    out = run_project(spark, tmp_path, E2E_PROJECT, {}, checkpoint=run_dir)
    reasons = sorted(b["reason"] for b in out.bad_records())
    assert reasons == ["column id: 'abc' is not an integer", "column qty: 'lots' is not an integer"]
    assert pg.query("select sym, total, n from by_sym order by sym") == [("A", 11, 2), ("B", 5, 1)]
    # a second run goes on after what the first read: an update, a delete, an insert
    pg.query("insert into orders_src (op, id, sym, qty) values ('u', '1', 'A', '20'), "
             "('d', '2', 'B', '5'), ('i', '5', 'C', '2')")
    run_project(spark, tmp_path, E2E_PROJECT, {}, checkpoint=run_dir)
    assert pg.query("select sym, total, n from by_sym order by sym") == [("A", 21, 2), ("C", 2, 1)]
    assert pg.query("select id, sym, qty from orders_copy order by id") == [
        (1, "A", 20), (3, "A", 1), (5, "C", 2)]
    assert sorted(pg.query("select op, id from orders_hist")) == sorted([
        ("i", 1), ("i", 2), ("i", 3), ("u", 1), ("d", 2), ("i", 5)])
    status = json.load(open(os.path.join(run_dir, "adapters", "OrdersIn.json")))
    assert status["records"] == 3 and status["type"] == "db_in"


KILL_PROJECT = """
create input stream Ticks schema (id integer, sym string);
attach input adapter TicksIn type db_in to Ticks
  properties service = 'ccl_test', table = 'ticks', trackingColumn = 'id', pollperiod = 0.2;
create output stream Seen as select * from Ticks;
attach output adapter SeenOut type db_out to Seen
  properties service = 'ccl_test', table = 'seen', opcodeColumnName = 'op';
"""


def _wait(what, timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.2)


def test_kill_9_during_a_database_feed_duplicates_nothing_in_postgres(pg, service, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root, "PGSERVICEFILE": pg.service_file}
    (tmp_path / "p.ccl").write_text(KILL_PROJECT)
    pg.query("create table ticks (id int primary key, sym text)")

    def feed(ids) -> None:
        pg.query("insert into ticks select i, 'S' || (i %% 5) from unnest(%s::int[]) i", (list(ids),))

    def seen() -> int:
        try:
            return pg.query("select count(*) from seen")[0][0]
        except Exception:
            return 0

    def start():
        return subprocess.Popen(
            [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--checkpoint",
             str(tmp_path / "ckpt"), "--output-dir", str(tmp_path / "out"),
             "--set", "spark.master=local[2]", "--set", "spark.shuffle_partitions=2"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    proc = start()
    try:
        feed(range(1, 51))
        _wait(lambda: seen() > 0)
        feed(range(51, 201))
        _wait(lambda: seen() >= 60)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and Python workers, mid-feed
        proc.wait()
        feed(range(201, 221))
        proc = start()
        _wait(lambda: seen() >= 220)
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    rows = pg.query("select id, sym, op from seen order by id")
    assert rows == [(i, f"S{i % 5}", "i") for i in range(1, 221)]  # each once
