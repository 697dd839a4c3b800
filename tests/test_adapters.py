"""The adapter layer (runtime/adapters): JSON records, stream framing, the inbox, and end to end
runs with JSON file adapters and socket adapters against TCP servers and clients of the test's own
on 127.0.0.1."""
from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from ccl.plan.model import Adapter, Column, Element
from ccl.plan.planner import plan_project
from runtime.adapters.framing import CsvFramer, JsonFramer
from runtime.adapters.inbox import Batcher, Inbox
from runtime.adapters.output import CsvLines, JsonFileSink, JsonObjects
from runtime.inputs.formats import CsvFormat
from runtime.inputs.json_rows import parse_json_text, parse_path
from runtime.inputs.listing import FileSpec, list_new_files
from runtime.run import run_plan
from runtime.run_setup import RunError, RunOptions
from runner_e2e import run_project

COLS = [["id", "integer"], ["sym", "string"], ["px", "money(2)"], ["t", "timestamp"],
        ["ok", "boolean"]]
JSON_FMT = CsvFormat.from_options({"fileformat": "json"})


def _rows(text: str, fmt: CsvFormat = JSON_FMT, cols=COLS) -> list[tuple]:
    return list(parse_json_text(text, cols, fmt, 1))


# --------------------------------------------------------------------------------------------------
# JSON records
# --------------------------------------------------------------------------------------------------

def test_json_lines_arrays_and_concatenated_objects_give_typed_rows_in_order():
    text = ('{"id": 1, "sym": "A", "px": 1.5, "t": "2024-01-02T03:04:05.678", "ok": true}\n'
            '[{"id": 2, "ESP_OPS": "u"}, {"ID": 3, "SYM": "c", "PX": "2.25"}]\n'
            '{"id": 4}{"id": 5, "ESP_OPS": "delete"}\n'
            '[\n  {"id": 6},\n  {"id": 7}\n]\n')
    rows = _rows(text)
    assert [r[0] - (1 << 32) for r in rows] == [1, 2, 3, 4, 5, 6, 7]  # record ordinals
    assert [(r[1], r[4]) for r in rows] == [("i", 1), ("u", 2), ("i", 3), ("i", 4), ("d", 5),
                                           ("i", 6), ("i", 7)]
    assert all(r[2] is None for r in rows)
    first = rows[0]
    assert str(first[6]) == "1.5" and first[7].isoformat() == "2024-01-02T03:04:05.678000"
    assert first[8] is True
    assert rows[2][5] == "c" and str(rows[2][6]) == "2.25"


@pytest.mark.parametrize("record, reason", [
    ('{"id": 1.5}', "column id: 1.5 is a JSON number, not an integer"),
    ('{"id": "x"}', "column id: \"x\" is not an integer"),
    ('{"sym": 7}', "column sym: 7 is a JSON integer, not a string"),
    ('{"ok": 1}', "column ok: 1 is a JSON integer, not a boolean"),
    ('{"px": [1]}', "column px: [1] is a JSON array, not a money(2)"),
    ('{"id": 9999999999}', "column id: 9999999999 is not an integer"),
    ('{"id": 1, "ESP_OPS": "x"}', "unknown opcode 'x'"),
    ('7', "a JSON integer is not a record (an object)"),
    ('{"id": 1,', "not JSON: Expecting property name enclosed in double quotes"),
])
def test_json_values_that_do_not_fit_are_bad_records_with_reasons(record, reason):
    rows = _rows(record + '\n{"id": 2}\n')
    assert rows[0][2] == reason and rows[0][3]
    assert rows[1][2] is None and rows[1][4] == 2  # the next record is read


def test_bad_json_inside_an_array_loses_only_its_line():
    rows = _rows('[\n{"id": 1},\n{"id": oops},\n{"id": 3}\n]\n{"id": 4}\n')
    assert [(r[2] is None, r[4]) for r in rows] == [(True, 1), (False, None), (True, 3), (True, 4)]
    assert rows[1][2].startswith("not JSON") and "oops" in rows[1][3]


def test_root_path_and_column_mapping_list():
    fmt = CsvFormat.from_options({"fileformat": "json", "jsonRootpath": "$.data.items",
                                  "jsonColsMappingList": "key, quote.sym, quote.legs[1]"})
    cols = [["id", "integer"], ["sym", "string"], ["px", "float"]]
    text = '{"data": {"items": [{"key": 1, "quote": {"sym": "A", "legs": [0, 2.5]}}]}}\n{"other": 1}\n'
    rows = _rows(text, fmt, cols)
    assert rows[0][1:] == ("i", None, None, 1, "A", 2.5)
    assert rows[1][2] == "no value at the root path '$.data.items'"
    assert parse_path("$.a[2].b") == ["a", 2, "b"]
    with pytest.raises(ValueError):
        parse_path("a..b")


# --------------------------------------------------------------------------------------------------
# Framing and the inbox
# --------------------------------------------------------------------------------------------------

def test_csv_framer_keeps_quoted_line_feeds_and_partial_lines():
    f = CsvFramer()
    assert f.feed(b'1,"a\nb",2\n3,x') == (b'1,"a\nb",2\n', 2)
    assert f.feed(b'y,4\n5,"open\n') == (b"3,xy,4\n", 1)
    assert f.end() == (b'5,"open\n', 1)


def test_json_framer_cuts_only_where_no_value_is_open():
    f = JsonFramer()
    assert f.feed(b'{"a": "x\\"{"}\n{"b": [\n1,\n') == (b'{"a": "x\\"{"}\n', 1)
    assert f.feed(b"2]}\n{\"c\"") == (b'{"b": [\n1,\n2]}\n', 3)
    assert f.end() == (b'{"c"\n', 1)


def test_inbox_files_are_complete_and_sort_in_arrival_order(tmp_path):
    inbox = Inbox(str(tmp_path / "in"), "A dapter", "csv")
    batcher = Batcher(inbox, max_delay=10.0, max_bytes=20)
    batcher.prefix = b"id\n"
    batcher.add(b"1\n2\n", 2)
    assert inbox.files == 0  # waits for more
    batcher.add(b"3\n" * 10, 10)  # over max_bytes: published
    for i in range(5):
        inbox.publish(f"{i}\n".encode())
    names = list_new_files(FileSpec(str(tmp_path / "in"), None, "*"), ())
    assert len(names) == 6 and names == sorted(names) and all("A_dapter" in n for n in names)
    with open(tmp_path / "in" / names[0], "rb") as f:
        assert f.read() == b"id\n1\n2\n" + b"3\n" * 10
    assert [open(tmp_path / "in" / n).read() for n in names[1:]] == [f"{i}\n" for i in range(5)]
    assert not [n for n in os.listdir(tmp_path / "in") if n.startswith(".")]


def test_json_file_sink_replaces_a_batch_cut_short(tmp_path):
    objects = JsonObjects("E", (Column("id", "integer"), Column("px", "money(2)")), {})
    path = str(tmp_path / "o.json")
    for array in (False, True):
        sink = JsonFileSink(path, objects, array)
        state: dict = {"batch": -1}
        sink.open(state)
        sink.deliver([{"__op": "i", "id": 1, "px": None}], state)
        saved = dict(state)
        sink.deliver([{"__op": "d", "id": 2, "px": None}], state)  # then "crashed" before saving
        state = dict(saved)
        sink.open(state)  # the restart cuts the unrecorded batch off, then it comes again
        sink.deliver([{"__op": "d", "id": 2, "px": None}], state)
        text = open(path).read()
        objs = json.loads(text) if array else [json.loads(x) for x in text.splitlines()]
        assert objs == [{"ESP_OPS": "i", "id": 1, "px": None}, {"ESP_OPS": "d", "id": 2, "px": None}]


def test_csv_lines_follow_the_csv_file_output_forms():
    cols = (Column("id", "integer"), Column("s", "string"))
    row = {"__op": "u", "id": 1, "s": "a,b"}
    plain = CsvLines("E", cols, {})
    assert plain.preamble() == b"ESP_OPS,id,s\n" and plain.encode(row) == b'u,1,"a,b"\n'
    named = CsvLines("E", cols, {"prependstreamnameopcode": "true", "delimiter": "|"})
    assert named.preamble() == b"" and named.encode(row) == b"E|u|1|a,b\n"
    bare = CsvLines("E", cols, {"hasheader": "false"})
    assert bare.encode(row) == b'1,"a,b"\n'


# --------------------------------------------------------------------------------------------------
# End to end: JSON files
# --------------------------------------------------------------------------------------------------

JSON_PROJECT = """
create input stream Trades schema (id integer, sym string, px float);
attach input adapter TIn type toolkit_file_json_input to Trades
  properties dir = 'in', filePattern = '*.json*';
create output window Last primary key deduced as
  select t.sym, max(t.px) px, count(*) n from Trades t group by t.sym;
create output stream Big as select * from Trades t where t.px > 10;
attach output adapter LOut type toolkit_file_json_output to Last properties dir = 'out2';
attach output adapter BOut type toolkit_file_json_output to Big
  properties dir = 'out2', file = 'big.json', jsonFormat = 'array';
"""


def test_json_file_adapters_end_to_end(spark, tmp_path):
    os.makedirs(tmp_path / "in")
    (tmp_path / "in" / "a.jsonl").write_text(
        '{"id": 1, "sym": "A", "px": 5}\n{"id": 2, "sym": "B", "px": 12.5}\n'
        '{"id": "two", "sym": "B"}\nnot json\n')
    (tmp_path / "in" / "b.json").write_text(
        '[{"id": 3, "sym": "A", "px": 20.0}, {"id": 4, "sym": 5, "px": 1}]')
    out = run_project(spark, tmp_path, JSON_PROJECT, {})
    assert out.stats("Trades")["rows_in"] == 6  # bad records included
    reasons = sorted(b["reason"] for b in out.bad_records())
    assert reasons == ['column id: "two" is not an integer', "column sym: 5 is a JSON integer, not a string",
                       "not JSON: Expecting value"]
    last = [json.loads(x) for x in (tmp_path / "out2" / "Last.json").read_text().splitlines()]
    final = {}
    for change in last:
        assert change["ESP_OPS"] in ("i", "u", "d")
        final[change["sym"]] = change
    assert {k: (v["px"], v["n"]) for k, v in final.items()} == {"A": (20.0, 2), "B": (12.5, 1)}
    big = json.loads((tmp_path / "out2" / "big.json").read_text())
    assert [(b["ESP_OPS"], b["id"], b["px"]) for b in big] == [("i", 2, 12.5), ("i", 3, 20.0)]


# --------------------------------------------------------------------------------------------------
# End to end: sockets
# --------------------------------------------------------------------------------------------------

SOCKET_PROJECT = """
create input stream Trades schema (id integer, sym string, px float);
attach input adapter Feed type toolkit_socket_csv_input to Trades
  properties host = '127.0.0.1', port = {feed_port}, retryPeriod = 1;
create input stream Quotes schema (id integer, sym string, px float);
attach input adapter QIn type toolkit_socket_json_input to Quotes
  properties port = 0, epFile = 'quotes.port';
create output stream Big as select * from Trades t where t.px > 10;
create output stream QBig as select * from Quotes q where q.px > 10;
attach output adapter BigOut type toolkit_socket_json_output to Big
  properties host = '127.0.0.1', port = {sink_port};
attach output adapter QOut type dsv_sockin_out to QBig properties port = 0, epFile = 'qout.port';
"""


class Collector:
    """A TCP server of the test: sends ``lines`` to each client that connects (the first
    connection is closed after half of them, to make the adapter reconnect), or collects what
    clients send."""

    def __init__(self, send: bytes = b"", split: int = 0) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.send, self.split = send, split
        self.received = bytearray()
        self.connections = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                if self.send:
                    part = self.send[:self.split] if self.connections == 1 and self.split else self.send
                    conn.sendall(part)
                    if self.connections == 1 and self.split:
                        # closed: the adapter connects again and gets the header and the rest
                        self.send = self.send[:self.send.index(b"\n") + 1] + self.send[self.split:]
                        continue
                    time.sleep(3600)
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    self.received.extend(data)


def _wait(what, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _port_file(path) -> int:
    _wait(lambda: os.path.exists(path) and open(path).read().strip())
    return int(open(path).read())


def test_socket_adapters_end_to_end(spark, tmp_path):
    trades = b"id,sym,px\n" + b"".join(f"{i},S{i % 3},{i * 2.5}\n".encode() for i in range(1, 9))
    trades += b"9,S0,notanumber\n"
    feed = Collector(trades, split=len(b"id,sym,px\n1,S1,2.5\n2,S2,5.0\n"))
    sink = Collector()
    ccl = SOCKET_PROJECT.format(feed_port=feed.port, sink_port=sink.port)
    (tmp_path / "s.ccl").write_text(ccl)
    plan, diags = plan_project(str(tmp_path / "s.ccl"))
    assert plan is not None, [str(d) for d in diags]
    options = RunOptions(base_dir=str(tmp_path), run_dir=str(tmp_path / "run"), until_idle=False,
                         buckets=2)
    stop = threading.Event()
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(
        r=run_plan(spark, plan, options, str(tmp_path / "out"), stop=stop)))
    runner.start()
    try:
        # a subscriber of QBig, then quotes sent as JSON to the server side of QIn
        subscriber = socket.create_connection(("127.0.0.1", _port_file(tmp_path / "qout.port")))
        with socket.create_connection(("127.0.0.1", _port_file(tmp_path / "quotes.port"))) as q:
            q.sendall(b'{"id": 1, "sym": "Q", "px": 11}\n{"id": 2, "sym": "Q", "px": 1}\n'
                      b'{"id": 3, "sym": "Q", "px": "high"}\n[{"id": 4, "sym": "R", "px": 40.5}]\n')
        got = bytearray()
        subscriber.settimeout(1.0)

        def subscriber_has_both() -> bool:
            try:
                got.extend(subscriber.recv(65536))
            except socket.timeout:
                pass
            return got.count(b"\n") >= 3
        _wait(subscriber_has_both)
        _wait(lambda: sink.received.count(b"\n") >= 4)
    finally:
        stop.set()
        runner.join(300)
    assert not runner.is_alive()
    assert got.decode().splitlines() == ["ESP_OPS,id,sym,px", "i,1,Q,11.0", "i,4,R,40.5"]
    big = [json.loads(x) for x in sink.received.decode().splitlines()]
    assert big == [{"ESP_OPS": "i", "id": i, "sym": f"S{i % 3}", "px": i * 2.5} for i in (5, 6, 7, 8)]
    assert feed.connections >= 2  # the feed closed after the first part: the adapter reconnected
    report = result["r"].report["elements"]
    assert report["Trades"]["rows_in"] == 9 and report["Quotes"]["rows_in"] == 4
    bad = [json.loads(x) for x in (tmp_path / "out" / "_bad_records.jsonl").read_text().splitlines()]
    assert sorted(b["reason"] for b in bad) == sorted(["column px: 'notanumber' is not a float",
                                                      "column px: \"high\" is not a float"])
    status = json.loads((tmp_path / "run" / "adapters" / "Feed.json").read_text())
    assert status["records"] == 9 and status["connections"] >= 2
    subscriber.close()


def test_an_adapter_without_a_port_stops_the_run_before_it_starts(spark, tmp_path):
    (tmp_path / "p.ccl").write_text(
        "create input stream S schema (id integer);\n"
        "attach input adapter A type toolkit_socket_csv_input to S properties host = 'h';\n"
        "create output stream O as select * from S;\n")
    plan, _ = plan_project(str(tmp_path / "p.ccl"))
    with pytest.raises(RunError, match="adapter 'A': a toolkit_socket_csv_input adapter needs a port"):
        run_plan(spark, plan, RunOptions(base_dir=str(tmp_path), run_dir=str(tmp_path / "r")),
                 str(tmp_path / "out"))


# --------------------------------------------------------------------------------------------------
# ccl check
# --------------------------------------------------------------------------------------------------

def test_ccl_check_warns_about_adapter_properties_that_mean_nothing_here(tmp_path):
    from ccl.config.adapter_types import USED
    from ccl.config.project_config import load_project_config
    from ccl.plan.physical import FILE_INPUT_ADAPTERS, SOCKET_INPUT_ADAPTERS
    from runtime.adapters.config import (DB_INPUTS, DB_OUTPUTS, INBOX_INPUTS, JSON_FILE_INPUT,
                                         JSON_FILE_OUTPUT, MQTT_OUTPUTS, SOCKET_OUTPUTS)

    assert set(USED) == {*INBOX_INPUTS, *SOCKET_OUTPUTS, *MQTT_OUTPUTS, JSON_FILE_INPUT,
                         JSON_FILE_OUTPUT, *DB_OUTPUTS}
    assert set(SOCKET_INPUT_ADAPTERS) | set(DB_INPUTS) == set(INBOX_INPUTS)
    assert JSON_FILE_INPUT in FILE_INPUT_ADAPTERS
    path = tmp_path / "p.ccl"
    path.write_text(
        "create input stream S schema (id integer);\n"
        "attach input adapter A type toolkit_socket_csv_input to S properties host = 'h', "
        "PORT = 5, csvDelimiter = ';', charsetName = 'UTF-8', prot = 3;\n"
        "create output stream O as select * from S;\n"
        "attach output adapter B type toolkit_file_json_output to O properties dir = 'o', "
        "jsonMsDateFormat = 'x';\n"
        "attach output adapter C type toolkit_file_csv_output to O properties dir = 'o', anything = 1;\n")
    config = load_project_config(str(path))
    warnings = [d for d in config.diagnostics if d.code == "CCL1307"]
    assert [d.message.split(";")[0] for d in warnings] == [
        "property 'charsetName' of adapter 'A' has no meaning on Spark",
        "property 'prot' is not one the toolkit_socket_csv_input adapter 'A' reads here",
        "property 'jsonMsDateFormat' of adapter 'B' is not supported"]


# --------------------------------------------------------------------------------------------------
# kill -9 in the middle of a socket feed
# --------------------------------------------------------------------------------------------------

KILL_PROJECT = """
create input stream Trades schema (id integer, sym string);
attach input adapter Feed type toolkit_socket_csv_input to Trades
  properties port = 0, epFile = 'feed.port', hasHeader = false;
create output stream Seen as select * from Trades;
attach output adapter SeenOut type toolkit_file_json_output to Seen properties dir = 'json';
"""


def _inbox_records(run_dir) -> int:
    inbox = os.path.join(run_dir, "inbox", "Trades")
    if not os.path.isdir(inbox):
        return 0
    return sum(open(os.path.join(inbox, n), "rb").read().count(b"\n")
               for n in os.listdir(inbox) if not n.startswith("."))


def _json_ids(path) -> list[int]:
    if not os.path.exists(path):
        return []
    return [json.loads(line)["id"] for line in open(path).read().splitlines() if line.endswith("}")]


def test_kill_9_during_a_socket_feed_loses_nothing_received_and_writes_nothing_twice(tmp_path):
    import signal
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    (tmp_path / "p.ccl").write_text(KILL_PROJECT)
    run_dir, port_file = tmp_path / "ckpt", tmp_path / "feed.port"
    out_json = tmp_path / "json" / "Seen.json"

    def start():
        if port_file.exists():
            port_file.unlink()
        return subprocess.Popen(
            [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--checkpoint",
             str(run_dir), "--output-dir", str(tmp_path / "out"),
             "--set", "spark.master=local[2]", "--set", "spark.shuffle_partitions=2"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def send(ids) -> None:
        with socket.create_connection(("127.0.0.1", _port_file(port_file))) as conn:
            for i in ids:
                conn.sendall(f"{i},S{i % 5}\n".encode())

    proc = start()
    try:
        send(range(1, 51))
        _wait(lambda: _inbox_records(run_dir) == 50)  # received: in the inbox
        _wait(lambda: len(_json_ids(out_json)) > 0)   # and some of it through the project
        send(range(51, 201))
        _wait(lambda: _inbox_records(run_dir) == 200)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and Python workers, mid-run
        proc.wait()
        proc = start()
        send(range(201, 221))
        _wait(lambda: len(_json_ids(out_json)) >= 220)
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _json_ids(out_json) == list(range(1, 221))  # every row once, in arrival order


def test_ccl_status_shows_what_each_adapter_reported(tmp_path):
    import ccl.ops.workspace as ws
    from runtime.adapters.status import Status
    from test_deploy import make_project

    pd = make_project(tmp_path)
    status = Status(os.path.join(pd.checkpoint, "adapters"), "Feed", "toolkit_socket_csv_input")
    status.add(records=1200, retries=3)
    status.update(state="retrying", address="127.0.0.1:9", last_error="connection refused")
    with open(os.path.join(pd.checkpoint, "adapters", "Out.progress.json"), "w") as f:
        f.write('{"batch": 3}')
    state = ws.project_state(pd)
    assert [a["adapter"] for a in state["adapters"]] == ["Feed"]
    assert ("  adapter      Feed: retrying 127.0.0.1:9 (1,200 records, 3 retries, last error: "
            "connection refused)") in ws.describe(state)


def test_socket_input_batches_fast_events_and_keeps_each_connections_header(tmp_path):
    from runtime.adapters.config import socket_spec
    from runtime.adapters.socket_input import SocketInput
    from runtime.adapters.status import Status

    adapter = Adapter("In", "input", "dsv_sockin_in", "E",
                      properties={"port": 0, "batchMillis": 60000})
    spec = socket_spec(adapter, str(tmp_path))
    inbox = tmp_path / "inbox"
    source = SocketInput(spec, str(inbox), (Column("id", "integer"), Column("s", "string")),
                         Status(str(tmp_path / "st"), "In", "dsv_sockin_in")).start()
    try:
        with socket.create_connection(("127.0.0.1", source.port)) as a:
            a.sendall(b"s,id\n" + b"".join(f"x,{i}\n".encode() for i in range(10_000)))
        with socket.create_connection(("127.0.0.1", source.port)) as b:
            b.sendall(b"1,y\n2,z")  # no header; the last line without its line feed
        _wait(lambda: len(os.listdir(inbox)) == 2)  # each connection's end publishes its records
    finally:
        source.stop()
    files = sorted(os.listdir(inbox))
    texts = [open(inbox / n).read() for n in files]
    by_header = {t.split("\n", 1)[0]: t for t in texts}
    assert by_header["s,id"].count("\n") == 10_001  # one file for 10,000 fast events
    assert by_header["1,y"] == "1,y\n2,z\n"
    status = json.loads((tmp_path / "st" / "In.json").read_text())
    assert status["records"] == 10_002 and status["connections"] == 2 and status["state"] == "stopped"


def _write_batch(run_dir, element: str, batch: int, ids: list[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    for what in ("changelog", "stats"):
        os.makedirs(os.path.join(run_dir, what, element), exist_ok=True)
    table = pa.table({"__op": ["i"] * len(ids), "__seq": list(range(len(ids), 0, -1)),
                      "__inst": [0] * len(ids), "__sub": [0] * len(ids), "id": ids})
    pq.write_table(table, os.path.join(run_dir, "changelog", element, f"batch-{batch:08d}.parquet"))
    with open(os.path.join(run_dir, "stats", element, f"batch-{batch:08d}.json"), "w") as f:
        f.write("{}")


def test_socket_client_output_retries_until_its_server_is_up_and_never_resends_a_recorded_batch(tmp_path):
    from runtime.adapters.config import socket_spec
    from runtime.adapters.output import Feed, SocketClientSink, encoder
    from runtime.adapters.status import Status

    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there yet
    element = Element("E", "stream", "output", None, None, (Column("id", "integer"),), ())
    adapter = Adapter("Out", "output", "toolkit_socket_csv_output", "E",
                      properties={"host": "127.0.0.1", "port": port, "retryPeriod": 0.2})
    spec = socket_spec(adapter, str(tmp_path))
    run_dir = str(tmp_path / "run")
    _write_batch(run_dir, "E", 0, [1, 2])
    _write_batch(run_dir, "E", 2, [3])  # batch 1 made no stats: found by the listing
    stop = threading.Event()

    def feed() -> Feed:
        status = Status(os.path.join(run_dir, "adapters"), "Out", adapter.type)
        sink = SocketClientSink(spec, encoder("csv", "E", element.columns, {}), status, stop)
        return Feed(run_dir, element, "Out", sink, status).start()

    first = feed()
    time.sleep(1.0)  # retrying: connection refused
    assert json.loads((tmp_path / "run" / "adapters" / "Out.json").read_text())["state"] == "retrying"
    server = socket.create_server(("127.0.0.1", port))
    got = bytearray()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    got.extend(data)
    threading.Thread(target=serve, daemon=True).start()
    _wait(lambda: got.count(b"\n") >= 4, 30)
    first.finish()
    assert got.decode() == "ESP_OPS,id\ni,2\ni,1\ni,3\n"  # in sequence order, batch by batch
    _write_batch(run_dir, "E", 2, [3])  # batch 2 run again (a replay): already delivered
    _write_batch(run_dir, "E", 3, [4])
    second = feed()
    _wait(lambda: got.count(b"\n") >= 6, 30)
    second.finish()
    server.close()
    assert got.decode().endswith("ESP_OPS,id\ni,4\n")
