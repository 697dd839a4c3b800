"""MQTT adapters (runtime/adapters/mqtt.py) against a real mosquitto broker the tests start on
127.0.0.1 (a free port, a configuration of their own): messages into the inbox, acknowledgement
after the inbox file, redelivered messages recognised, reconnecting, the output sink, and end to
end through a project and through `ccl run` killed with -9 in the middle of a QoS 1 feed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from ccl.plan.model import Adapter, Column, Element
from ccl.plan.planner import plan_project
from runtime.adapters.config import AdapterError, mqtt_spec
from runtime.adapters.mqtt import AckJournal, MqttInput, MqttSink
from runtime.adapters.output import Feed, encoder
from runtime.adapters.status import Status
from runtime.run import run_plan
from runtime.run_setup import RunOptions
from servers import MOSQUITTO, Broker, SlowProxy, wait as _wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not os.path.exists(MOSQUITTO),
                                reason="mosquitto is not installed (.ci/run installs it)")


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


def _publisher(broker: Broker):
    import paho.mqtt.client as paho
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"pub-{time.monotonic_ns()}")
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    return client


def _publish(client, topic: str, payloads, qos: int = 1) -> None:
    infos = [client.publish(topic, p, qos=qos) for p in payloads]
    for info in infos:
        info.wait_for_publish(30)


class Subscriber:
    """Collects what an output adapter publishes."""

    def __init__(self, broker: Broker, topic: str) -> None:
        import paho.mqtt.client as paho
        self.messages: list[bytes] = []
        self.ready = threading.Event()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2,
                                  client_id=f"sub-{time.monotonic_ns()}")
        self.client.on_connect = lambda c, u, f, r, p: c.subscribe(topic, 1)
        self.client.on_subscribe = lambda *a: self.ready.set()
        self.client.on_message = lambda c, u, m: self.messages.append(bytes(m.payload))
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        assert self.ready.wait(30)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _adapter(props: dict, direction: str = "input", name: str = "In") -> Adapter:
    return Adapter(name, direction, f"mqtt_{direction}", "T", properties=props)


def _inbox(directory) -> list[str]:
    """The inbox files' texts in name (arrival) order."""
    if not os.path.isdir(directory):
        return []
    return [open(os.path.join(directory, n), encoding="utf-8").read()
            for n in sorted(os.listdir(directory)) if not n.startswith(".")]


def _start_input(tmp_path, props: dict) -> MqttInput:
    spec = mqtt_spec(_adapter(props), str(tmp_path / "run"))
    status = Status(str(tmp_path / "run" / "adapters"), "In", "mqtt_input")
    return MqttInput(spec, str(tmp_path / "inbox"), status,
                     str(tmp_path / "run" / "adapters" / "In.mqtt-journal")).start()


def _status(tmp_path, name: str = "In") -> dict:
    return json.loads((tmp_path / "run" / "adapters" / f"{name}.json").read_text())


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("props, message", [
    ({"mqttTopic": "t"}, "needs mqttServerUri"),
    ({"mqttServerUri": "tcp://h:1883"}, "needs mqttTopic"),
    ({"mqttServerUri": "http://h", "mqttTopic": "t"}, "the scheme must be tcp, mqtt, ssl or mqtts"),
    ({"mqttServerUri": "tcp://h:x", "mqttTopic": "t"}, "'x' is not a port"),
    ({"mqttServerUri": "tcp://h", "mqttTopic": "t", "mqttQos": 3}, "mqttQos 3 must be 0, 1 or 2"),
    ({"mqttServerUri": "tcp://h", "mqttTopic": "t", "mqttMsgFormat": "xml"}, "must be csv or json"),
    ({"mqttServerUri": "tcp://h", "mqttTopic": "t", "mqttCleanSession": "maybe"},
     "mqttCleanSession 'maybe': must be true or false"),
])
def test_unusable_properties_are_errors_naming_the_adapter(props, message):
    with pytest.raises(AdapterError, match=f"adapter 'In': .*{message}"):
        mqtt_spec(_adapter(props))


def test_spec_defaults_and_a_stable_client_id(tmp_path):
    spec = mqtt_spec(_adapter({"MQTTSERVERURI": "broker.example", "mqttTopic": "a/+, b/#"}),
                     str(tmp_path))
    assert (spec.host, spec.port, spec.tls, spec.topics, spec.qos) == (
        "broker.example", 1883, False, ("a/+", "b/#"), 1)
    assert spec.client_id == mqtt_spec(_adapter({"mqttServerUri": "x", "mqttTopic": "t"}),
                                       str(tmp_path)).client_id
    assert not spec.clean_session and spec.payload == "csv" and spec.version == 5
    assert mqtt_spec(_adapter({"mqttServerUri": "ssl://h", "mqttTopic": "t"})).port == 8883
    with pytest.raises(AdapterError, match="an output publishes to one topic"):
        mqtt_spec(_adapter({"mqttServerUri": "h", "mqttTopic": "a/#"}, "output"))


def test_ccl_check_names_mqtt_properties_it_does_not_read(tmp_path):
    from ccl.config.project_config import load_project_config

    path = tmp_path / "p.ccl"
    path.write_text(
        "create input stream S schema (id integer);\n"
        "attach input adapter A type mqtt_input to S properties mqttServerUri = 'tcp://h:1', "
        "MQTTTOPIC = 't', mqttTopik = 'x', mqttMsgFormat = 'json', jsonRootpath = '$.rows';\n"
        "create output stream O as select * from S;\n"
        "attach output adapter B type mqtt_output to O properties mqttServerUri = 'h', "
        "mqttTopic = 'o', mqttRetain = true, enableGdMode = true;\n")
    warnings = [d.message.split(";")[0] for d in load_project_config(str(path)).diagnostics
                if d.code == "CCL1307"]
    assert warnings == ["property 'mqttTopik' is not one the mqtt_input adapter 'A' reads here",
                        "property 'enableGdMode' of adapter 'B' has no meaning on Spark"]


def test_the_journal_counts_only_files_that_exist(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "f1.csv").write_text("1\n")
    j = AckJournal(str(tmp_path / "j"), str(inbox))
    j.append("f1.csv", [(7, "aa")])
    j.append("f2.csv", [(8, "bb")])  # a crash before f2.csv was linked
    again = AckJournal(str(tmp_path / "j"), str(inbox))
    assert again.holds(7, "aa") and not again.holds(7, "other") and not again.holds(8, "bb")


# --------------------------------------------------------------------------------------------------
# Input into the inbox
# --------------------------------------------------------------------------------------------------

def test_messages_go_to_the_inbox_in_arrival_order_and_a_broken_one_stands_alone(tmp_path, broker):
    adapter = _start_input(tmp_path, {"mqttServerUri": broker.uri, "mqttTopic": "trades/+",
                                      "mqttQos": 1, "batchMillis": 200})
    try:
        _wait(lambda: _status(tmp_path)["state"] == "connected", 30)
        pub = _publisher(broker)
        _publish(pub, "trades/a", [b"1,A", b"2,B\n3,C\n", b'4,"open', b"5,E"])
        _publish(pub, "other/a", [b"6,F"])  # not subscribed
        _wait(lambda: sum(t.count("\n") for t in _inbox(tmp_path / "inbox")) >= 5, 30)
        pub.loop_stop()
    finally:
        adapter.stop()
    text = "".join(_inbox(tmp_path / "inbox"))
    assert text == '1,A\n2,B\n3,C\n4,"open\n5,E\n'
    assert '4,"open\n' in _inbox(tmp_path / "inbox")  # its own file: it cannot swallow 5,E
    status = _status(tmp_path)
    assert (status["messages"], status["records"], status["state"]) == (4, 5, "stopped")


@pytest.mark.parametrize("version", ["5", "3.1.1"])
def test_connected_means_subscribed_so_a_message_published_then_is_received(tmp_path, broker,
                                                                            version):
    """The SUBSCRIBE reaches the broker 1 s after the CONNACK reached the adapter (a slow link
    or a loaded broker): the adapter is "subscribing" until the broker acknowledged it, and a
    message published once it says "connected" is its own (a new session holds nothing before)."""
    proxy = SlowProxy(broker.port, 1.0)
    adapter = _start_input(tmp_path, {"mqttServerUri": f"tcp://127.0.0.1:{proxy.port}",
                                      "mqttTopic": "t", "mqttVersion": version})
    pub = _publisher(broker)
    try:
        _wait(lambda: _status(tmp_path)["state"] in ("subscribing", "connected"), 30)
        _wait(lambda: _status(tmp_path)["state"] == "connected", 30, step=0.005)
        _publish(pub, "t", [b"1,x"])
        _wait(lambda: _inbox(tmp_path / "inbox") == ["1,x\n"], 30)
    finally:
        pub.loop_stop()
        adapter.stop()
        proxy.close()


def test_a_message_is_acknowledged_only_after_its_inbox_file_and_a_restart_reads_it_once(tmp_path, broker):
    """Received but not yet in the inbox (the adapter is killed first): the broker sends it
    again to the same session. In the inbox but not acknowledged: sent again, recognised, dropped."""
    import paho.mqtt.client as paho

    props = {"mqttServerUri": broker.uri, "mqttTopic": "t", "mqttQos": 1, "batchMillis": 100_000}
    first = _start_input(tmp_path, props)
    _wait(lambda: _status(tmp_path)["state"] == "connected", 30)
    pub = _publisher(broker)
    _publish(pub, "t", [b"1,a", b"2,b"])
    _wait(lambda: len(first._pending) == 2, 30)
    # kill the connection without a word (as kill -9 would): nothing was acknowledged
    first._client.on_message = None
    first._client.loop_stop()
    first._client.socket().close()
    first._stop.set()
    assert _inbox(tmp_path / "inbox") == []

    # the second adapter writes them, and then "dies" before acknowledging
    second = _start_input(tmp_path, dict(props, batchMillis=50))
    orig_ack = second._client.ack
    second._client.ack = lambda mid, qos: paho.MQTTErrorCode.MQTT_ERR_SUCCESS  # acks lost
    _wait(lambda: "".join(_inbox(tmp_path / "inbox")) == "1,a\n2,b\n", 30)
    second._client.on_message = None
    second._client.loop_stop()
    second._client.socket().close()
    second._stop.set()
    second._client.ack = orig_ack

    props["batchMillis"] = 50
    third = _start_input(tmp_path, props)  # redelivered with DUP: recognised from the journal
    try:
        _wait(lambda: _status(tmp_path)["duplicates"] == 2, 30)
        _publish(pub, "t", [b"3,c"])
        _wait(lambda: "".join(_inbox(tmp_path / "inbox")).count("\n") == 3, 30)
    finally:
        third.stop()
        pub.loop_stop()
    assert "".join(_inbox(tmp_path / "inbox")) == "1,a\n2,b\n3,c\n"
    fourth = _start_input(tmp_path, props)  # everything was acknowledged: nothing comes again
    time.sleep(1.0)
    fourth.stop()
    assert "".join(_inbox(tmp_path / "inbox")) == "1,a\n2,b\n3,c\n"


def test_a_broker_that_goes_away_is_retried_and_reported(tmp_path):
    broker = Broker(tmp_path / "broker")  # not started yet
    adapter = _start_input(tmp_path, {"mqttServerUri": broker.uri, "mqttTopic": "t",
                                      "retryPeriod": 0.5})
    try:
        _wait(lambda: _status(tmp_path)["state"] == "retrying", 30)
        assert "cannot connect" in _status(tmp_path)["last_error"]
        broker.start()
        _wait(lambda: _status(tmp_path)["state"] == "connected", 30)
        broker.stop()
        _wait(lambda: _status(tmp_path)["state"] == "retrying", 30)
        broker.start()
        _wait(lambda: _status(tmp_path)["state"] == "connected", 30)
        pub = _publisher(broker)
        _publish(pub, "t", [b"1,x"])
        _wait(lambda: _inbox(tmp_path / "inbox") == ["1,x\n"], 30)
        pub.loop_stop()
        assert _status(tmp_path)["connections"] == 2 and _status(tmp_path)["retries"] >= 1
    finally:
        adapter.stop()
        broker.stop()


# --------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------

def _write_batch(run_dir, element: str, batch: int, rows: list[tuple[str, int]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    for what in ("changelog", "stats"):
        os.makedirs(os.path.join(run_dir, what, element), exist_ok=True)
    table = pa.table({"__op": [r[0] for r in rows], "__seq": list(range(1, len(rows) + 1)),
                      "__inst": [0] * len(rows), "__sub": [0] * len(rows),
                      "id": [r[1] for r in rows]})
    pq.write_table(table, os.path.join(run_dir, "changelog", element, f"batch-{batch:08d}.parquet"))
    with open(os.path.join(run_dir, "stats", element, f"batch-{batch:08d}.json"), "w") as f:
        f.write("{}")


@pytest.mark.parametrize("fmt, expected", [
    ("csv", [b"i,1", b"d,1", b"u,2"]),
    ("json", [b'{"ESP_OPS":"i","id":1}', b'{"ESP_OPS":"d","id":1}', b'{"ESP_OPS":"u","id":2}']),
])
def test_the_output_publishes_each_change_with_its_opcode_once_per_batch(tmp_path, broker, fmt, expected):
    element = Element("T", "stream", "output", None, None, (Column("id", "integer"),), ())
    adapter = _adapter({"mqttServerUri": broker.uri, "mqttTopic": "out/t", "mqttMsgFormat": fmt},
                       "output", "Out")
    spec = mqtt_spec(adapter, str(tmp_path / "run"))
    run_dir = str(tmp_path / "run")
    sub = Subscriber(broker, "out/#")
    _write_batch(run_dir, "T", 0, [("i", 1), ("d", 1)])
    stop = threading.Event()

    def feed() -> Feed:
        status = Status(os.path.join(run_dir, "adapters"), "Out", "mqtt_output")
        sink = MqttSink(spec, encoder(fmt, "T", element.columns, spec.properties), status, stop)
        return Feed(run_dir, element, "Out", sink, status).start()

    first = feed()
    _wait(lambda: len(sub.messages) >= 2, 30)
    first.finish()
    _write_batch(run_dir, "T", 0, [("i", 1), ("d", 1)])  # batch 0 run again: delivered already
    _write_batch(run_dir, "T", 1, [("u", 2)])
    second = feed()
    _wait(lambda: len(sub.messages) >= 3, 30)
    second.finish()
    time.sleep(0.5)
    sub.close()
    assert sub.messages == expected
    assert json.loads((tmp_path / "run" / "adapters" / "Out.progress.json").read_text())["batch"] == 1


# --------------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------------

PROJECT = """
create input window Positions schema (id integer, sym string, qty integer) primary key (id);
attach input adapter PosIn type mqtt_input to Positions
  properties mqttServerUri = '{uri}', mqttTopic = 'positions/#', mqttQos = 1,
             mqttMsgFormat = 'json';
create input stream Trades schema (id integer, sym string, px float);
attach input adapter TradesIn type mqtt_input to Trades
  properties mqttServerUri = '{uri}', mqttTopic = 'trades', mqttQos = 2;
create output window Held primary key deduced as select p.sym, sum(p.qty) total
  from Positions p group by p.sym;
attach output adapter HeldOut type mqtt_output to Held
  properties mqttServerUri = '{uri}', mqttTopic = 'out/held', mqttMsgFormat = 'json';
create output stream Big as select * from Trades t where t.px > 10;
attach output adapter BigOut type mqtt_output to Big
  properties mqttServerUri = '{uri}', mqttTopic = 'out/big';
"""


def test_mqtt_adapters_end_to_end(spark, tmp_path, broker):
    (tmp_path / "p.ccl").write_text(PROJECT.format(uri=broker.uri))
    plan, diags = plan_project(str(tmp_path / "p.ccl"))
    assert plan is not None, [str(d) for d in diags]
    sub = Subscriber(broker, "out/#")
    options = RunOptions(base_dir=str(tmp_path), run_dir=str(tmp_path / "run"), until_idle=False,
                         buckets=2)
    stop = threading.Event()
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(
        r=run_plan(spark, plan, options, str(tmp_path / "out"), stop=stop)))
    runner.start()
    try:
        _wait(lambda: all(os.path.exists(tmp_path / "run" / "adapters" / f"{a}.json")
                          and _status(tmp_path, a)["state"] == "connected"
                          for a in ("PosIn", "TradesIn", "HeldOut", "BigOut")))
        pub = _publisher(broker)
        _publish(pub, "positions/desk1", [
            b'{"id": 1, "sym": "A", "qty": 10}',
            b'[{"id": 2, "sym": "A", "qty": 5}, {"id": 3, "sym": "B", "qty": 7}]',
            b'{"id": 4, "sym": "B", "qty": "lots"}',      # a JSON value of the wrong type
            b'{"id": 1, "ESP_OPS": "d"}',                  # opcode: delete position 1
            b'{"id": 3, "sym": "B", "qty": 9, "ESP_OPS": "u"}'])
        _publish(pub, "trades", [b"1,X,11.5\n2,Y,3", b"3,Z", b"4,W,20,extra", b"5,V,12"], qos=2)
        pub.loop_stop()

        def settled() -> bool:
            held = [json.loads(m) for m in sub.messages if m.startswith(b"{")]
            final = {}
            for change in held:
                final[change["sym"]] = None if change["ESP_OPS"] == "d" else change["total"]
            big = [m for m in sub.messages if not m.startswith(b"{")]
            return final == {"A": 5, "B": 9} and len(big) >= 2
        _wait(settled)
    finally:
        stop.set()
        runner.join(300)
        sub.close()
    assert not runner.is_alive()
    assert [m for m in sub.messages if not m.startswith(b"{")] == [b"i,1,X,11.5", b"i,5,V,12.0"]
    report = result["r"].report["elements"]
    assert report["Positions"]["rows_in"] == 6 and report["Trades"]["rows_in"] == 5
    bad = [json.loads(x) for x in (tmp_path / "out" / "_bad_records.jsonl").read_text().splitlines()]
    reasons = sorted(b["reason"] for b in bad)
    assert len(reasons) == 3 and 'column qty: "lots" is not an integer' in reasons
    assert sum("field" in r for r in reasons) == 2, reasons  # 3,Z and 4,W,20,extra


KILL_PROJECT = """
create input stream Trades schema (id integer, sym string);
attach input adapter Feed type mqtt_input to Trades
  properties mqttServerUri = '{uri}', mqttTopic = 'feed', mqttQos = 1;
create output stream Seen as select * from Trades;
attach output adapter SeenOut type toolkit_file_json_output to Seen properties dir = 'json';
"""


def _json_ids(path) -> list[int]:
    if not os.path.exists(path):
        return []
    return [json.loads(line)["id"] for line in open(path).read().splitlines() if line.endswith("}")]


def test_kill_9_during_a_qos1_feed_then_restart_gives_every_message_once(tmp_path, broker):
    env = {**os.environ, "PYTHONPATH": ROOT}
    (tmp_path / "p.ccl").write_text(KILL_PROJECT.format(uri=broker.uri))
    run_dir = tmp_path / "ckpt"
    out_json = tmp_path / "json" / "Seen.json"

    logs = []

    def start():
        # stderr to a file: a pipe nobody reads would stop the run once Spark's log fills it
        logs.append(open(tmp_path / f"run{len(logs)}.log", "wb"))
        return subprocess.Popen(
            [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--checkpoint",
             str(run_dir), "--output-dir", str(tmp_path / "out"),
             "--set", "spark.master=local[2]", "--set", "spark.shuffle_partitions=2"],
            env=env, stdout=subprocess.DEVNULL, stderr=logs[-1], start_new_session=True)

    def connected() -> bool:
        path = run_dir / "adapters" / "Feed.json"
        return path.exists() and json.loads(path.read_text())["state"] == "connected"

    pub = _publisher(broker)
    proc = start()
    try:
        _wait(connected)
        _publish(pub, "feed", [f"{i},S{i % 5}".encode() for i in range(1, 51)])
        _wait(lambda: len(_json_ids(out_json)) > 0)  # some of it through the project
        sender = threading.Thread(target=_publish, args=(
            pub, "feed", [f"{i},S{i % 5}".encode() for i in range(51, 2001)]))
        sender.start()  # the broker holds what arrives while the run is down
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and Python workers, mid-feed
        proc.wait()
        sender.join(120)
        (run_dir / "adapters" / "Feed.json").unlink()
        proc = start()
        _wait(connected)
        # the broker kept the session: what the killed run had not acknowledged comes again
        assert json.loads((run_dir / "adapters" / "Feed.json").read_text())["session_present"]
        _publish(pub, "feed", [f"{i},S{i % 5}".encode() for i in range(2001, 2021)])

        def state() -> str:  # what the test saw when it timed out
            seen = set(_json_ids(out_json))
            inbox = "".join(_inbox(run_dir / "inbox" / "Trades")).splitlines()
            return (f"{len(seen)} ids out, missing {sorted(set(range(1, 2021)) - seen)[:20]}; "
                    f"{len(inbox)} records in the inbox; run alive: {proc.poll() is None}; "
                    f"adapter: {(run_dir / 'adapters' / 'Feed.json').read_text()}; log: "
                    f"{(tmp_path / 'run1.log').read_text()[-2000:]}")
        _wait(lambda: len(_json_ids(out_json)) >= 2020, state=state)
        time.sleep(2.0)  # anything redelivered twice would show up by now
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=180)
        assert proc.returncode == 0, (tmp_path / "run1.log").read_text()[-3000:]
    finally:
        pub.loop_stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for f in logs:
            f.close()
    assert _json_ids(out_json) == list(range(1, 2021))  # every message once, in arrival order
    assert sum(t.count("\n") for t in _inbox(run_dir / "inbox" / "Trades")) == 2020
