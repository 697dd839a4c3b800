"""Input adapters: events per second into the inbox, and the latency of a single event.

    python bench/adapters.py [--events 200000] [--repeat 3] [--mqtt-events 20000]
                             [--only socket|database|mqtt]

No Spark: each socket input adapter (runtime/adapters/socket_input.py) runs on its own with a
sender of this script on 127.0.0.1, which writes EVENTS trade events (symbol, price, volume,
timestamp, bid: the columns of bench/csv_source.py) as fast as the socket takes them, in CSV or
JSON lines. The time runs from the first byte sent until the inbox holds every event, flushed to
disk (what an adapter has acknowledged). Printed per adapter: events/s, inbox files written
(events come fast: few large files), and the latency of one event sent alone (from send until its
inbox file exists: the adapter's ``batchMillis`` wait plus one fsync). Also the parsing rate of
the JSON reader (runtime/inputs/json_rows.py, rows/s on one core) over the same events, which
bounds what a JSON input (file or socket) gives the project. Best of REPEAT.

Database (runtime/adapters/postgres.py; needs PostgreSQL installed: a server of tests/pg_server.py
is started on a free port and stopped): a table of EVENTS trade events with a serial id; the
``db_in`` adapter's poll reads them all into the inbox (events/s, files; one file per 10,000 rows),
then an incremental poll of 1% new rows; the ``db_out`` sink writes the same events as one batch,
keyed (delete by key, then COPY) and as history (COPY with the opcode column), rows/s.

MQTT (runtime/adapters/mqtt.py; when /usr/sbin/mosquitto is installed): a mosquitto of this
script on 127.0.0.1, a paho publisher of this script sending MQTT_EVENTS CSV events, one event a
message (and 100 events a message), at QoS 0, 1 and 2, from the first publish until the inbox holds
every event. The line "plain subscriber" is the same publisher and broker with a paho subscriber
that only counts the messages (acknowledging each at once): the most the broker and publisher give
on this machine, against which the adapter's rate is read.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from ccl.plan.model import Adapter, Column, Element  # noqa: E402
from runtime.adapters.config import mqtt_spec, socket_spec  # noqa: E402
from runtime.adapters.mqtt import MqttInput  # noqa: E402
from runtime.adapters.socket_input import SocketInput  # noqa: E402
from runtime.adapters.status import Status  # noqa: E402
from runtime.inputs.formats import CsvFormat  # noqa: E402
from runtime.inputs.json_rows import parse_json_text  # noqa: E402

sys.path.insert(1, os.path.join(sys.path[0], "tests"))

COLUMNS = [["isin", "string"], ["price", "money(4)"], ["volume", "integer"], ["ts", "timestamp"],
           ["bid", "float"]]
TYPED_COLUMNS = tuple(Column(name, t) for name, t in COLUMNS)  # as the adapters take them


def events(n: int, payload: str) -> bytes:
    rnd = random.Random(7)
    out = []
    for i in range(n):
        sym, px, vol = f"IS{rnd.randrange(1000):04d}", f"{rnd.uniform(1, 500):.4f}", rnd.randrange(1, 10000)
        ts = f"2024-05-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}"
        bid = round(rnd.uniform(1, 500), 3)
        if payload == "json":
            out.append(json.dumps({"isin": sym, "price": px, "volume": vol, "ts": ts, "bid": bid}))
        else:
            out.append(f"{sym},{px},{vol},{ts},{bid}")
    return ("\n".join(out) + "\n").encode()


def inbox_records(directory: str) -> int:
    total = 0
    for name in os.listdir(directory):
        if not name.startswith("."):
            with open(os.path.join(directory, name), "rb") as f:
                total += f.read().count(b"\n")
    return total


def run_adapter(kind: str, payload: str, server: bool, data: bytes, n: int,
                work: str) -> tuple[float, int, float]:
    """(seconds for ``n`` events, inbox files, seconds of latency of one event)."""
    inbox = os.path.join(work, "inbox")
    shutil.rmtree(inbox, ignore_errors=True)
    props = {"hasHeader": "false"}
    listener = None
    if server:
        props.update(port=0, epFile=os.path.join(work, "port"))
    else:
        listener = socket.create_server(("127.0.0.1", 0))
        props.update(host="127.0.0.1", port=listener.getsockname()[1])
    adapter = Adapter("bench", "input", kind, "E", properties=props)
    spec = socket_spec(adapter, work)
    source = SocketInput(spec, inbox, TYPED_COLUMNS, Status(os.path.join(work, "status"), "bench", kind))
    source.start()
    if server:
        conn = socket.create_connection(("127.0.0.1", source.port))
    else:
        assert listener is not None
        conn, _ = listener.accept()
    try:
        began = time.perf_counter()
        sender = threading.Thread(target=conn.sendall, args=(data,))
        sender.start()
        while inbox_records(inbox) < n:
            time.sleep(0.005)
        took = time.perf_counter() - began
        sender.join()
        files = len([x for x in os.listdir(inbox) if not x.startswith(".")])
        # one event alone
        before = set(os.listdir(inbox))
        one = data[:data.index(b"\n") + 1]
        t0 = time.perf_counter()
        conn.sendall(one)
        while not (set(os.listdir(inbox)) - before):
            time.sleep(0.0005)
        latency = time.perf_counter() - t0
    finally:
        conn.close()
        source.stop()
        if listener is not None:
            listener.close()
    return took, files, latency


MOSQUITTO = "/usr/sbin/mosquitto"


def start_broker(work: str):
    """A mosquitto on a free port of 127.0.0.1: (process, port)."""
    import subprocess
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    conf = os.path.join(work, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n")
    proc = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _paho(client_id: str, **kw):
    import paho.mqtt.client as paho
    return paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, **kw)


def publish_all(port: int, topic: str, messages: list[bytes], qos: int) -> None:
    pub = _paho(f"bench-pub-{time.monotonic_ns()}")
    pub.max_queued_messages_set(0)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    infos = [pub.publish(topic, m, qos=qos) for m in messages]
    for info in infos:
        info.wait_for_publish(120)
    pub.disconnect()
    pub.loop_stop()


def run_mqtt(port: int, qos: int, messages: list[bytes], n: int, work: str, tag: str) -> tuple[float, int]:
    """(seconds until the inbox holds ``n`` events, inbox files) for the MQTT input adapter."""
    inbox = os.path.join(work, "inbox")
    shutil.rmtree(inbox, ignore_errors=True)
    adapter = Adapter("bench", "input", "mqtt_input", "E",
                      properties={"mqttServerUri": f"tcp://127.0.0.1:{port}", "mqttTopic": f"b/{tag}",
                                  "mqttQos": qos, "mqttCleanSession": "true", "hasHeader": "false"})
    spec = mqtt_spec(adapter, os.path.join(work, tag))
    status = Status(os.path.join(work, "status"), "bench", "mqtt_input")
    source = MqttInput(spec, inbox, status, os.path.join(work, f"{tag}.journal")).start()
    while status.data["state"] != "connected":
        time.sleep(0.01)
    time.sleep(0.2)  # subscribed
    try:
        began = time.perf_counter()
        sender = threading.Thread(target=publish_all, args=(port, f"b/{tag}", messages, qos))
        sender.start()
        while inbox_records(inbox) < n:
            time.sleep(0.005)
        took = time.perf_counter() - began
        sender.join()
        files = len([x for x in os.listdir(inbox) if not x.startswith(".")])
    finally:
        source.stop()
    return took, files


def run_plain(port: int, qos: int, messages: list[bytes], tag: str) -> float:
    """Seconds until a subscriber that only counts has every message (the baseline)."""
    got = threading.Event()
    count = [0]

    def on_message(c, u, m) -> None:
        count[0] += 1
        if count[0] == len(messages):
            got.set()
    sub = _paho(f"bench-sub-{tag}-{time.monotonic_ns()}")
    sub.on_message = on_message
    subscribed = threading.Event()
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.on_connect = lambda c, u, f, r, p: c.subscribe(f"p/{tag}", qos)
    sub.connect("127.0.0.1", port)
    sub.loop_start()
    subscribed.wait(30)
    began = time.perf_counter()
    publish_all(port, f"p/{tag}", messages, qos)
    got.wait(300)
    took = time.perf_counter() - began
    sub.disconnect()
    sub.loop_stop()
    return took


def bench_mqtt(n: int, repeat: int, work: str) -> None:
    if not os.path.exists(MOSQUITTO):
        print("(mqtt: /usr/sbin/mosquitto is not installed)")
        return
    proc, port = start_broker(work)
    try:
        one = [x for x in events(n, "csv").splitlines()]
        lines = events(n * 10, "csv").splitlines(keepends=True)
        hundred = [b"".join(lines[i:i + 100]) for i in range(0, len(lines), 100)]
        print(f"MQTT: {n:,} CSV events one a message; {n * 10:,} events 100 a message")
        print(f"{'mqtt_input':44} {'events/s':>10} {'plain':>10} {'ratio':>6} {'files':>6}")
        for qos in (0, 1, 2):
            for per, msgs, count in (("1/msg", one, n), ("100/msg", hundred, n * 10)):
                tag = f"q{qos}{per.replace('/', '')}"
                runs = [run_mqtt(port, qos, msgs, count, work, f"{tag}{i}") for i in range(repeat)]
                took, files = min(runs)
                plain = min(run_plain(port, qos, msgs, f"{tag}{i}") for i in range(repeat))
                print(f"{'QoS ' + str(qos) + ', ' + per:44} {count / took:>10,.0f} "
                      f"{count / plain:>10,.0f} {plain / took:>6.2f} {files:>6}")
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--mqtt-events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("socket", "database", "mqtt"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ccl-bench-adapters-")
    try:
        if args.only != "socket":
            if args.only in (None, "database"):
                run_database(args.events, args.repeat, work)
            if args.only in (None, "mqtt"):
                bench_mqtt(args.mqtt_events, args.repeat, work)
        if args.only in ("database", "mqtt"):
            return
        csv_data, json_data = events(args.events, "csv"), events(args.events, "json")
        print(f"{args.events:,} events; CSV {len(csv_data) / 1e6:.1f} MB, JSON {len(json_data) / 1e6:.1f} MB")
        print(f"{'adapter':44} {'events/s':>10} {'MB/s':>7} {'files':>6} {'1 event':>9}")
        cases = [("toolkit_socket_csv_input", "csv", False, "client"),
                 ("toolkit_socket_csv_input", "csv", True, "server"),
                 ("toolkit_socket_json_input", "json", False, "client"),
                 ("toolkit_socket_json_input", "json", True, "server")]
        for kind, payload, server, side in cases:
            data = json_data if payload == "json" else csv_data
            runs = [run_adapter(kind, payload, server, data, args.events, work)
                    for _ in range(args.repeat)]
            took, files, _ = min(runs)
            latency = min(r[2] for r in runs)
            print(f"{kind + ' (' + side + ')':44} {args.events / took:>10,.0f} "
                  f"{len(data) / took / 1e6:>7.1f} {files:>6} {latency * 1000:>7.1f}ms")
        fmt = CsvFormat.from_options({"fileformat": "json"})
        text = json_data.decode()
        best = min(_timed(lambda: sum(1 for _ in parse_json_text(text, COLUMNS, fmt)))
                   for _ in range(args.repeat))
        print(f"{'json_rows.parse_json_text (parsing, 1 core)':44} {args.events / best:>10,.0f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_database(n: int, repeat: int, work: str) -> None:
    """The database adapters against a server of tests/pg_server.py (see the docstring)."""
    import threading as th

    import pg_server
    from runtime.adapters.postgres import DbInput, DbSink, db_spec

    if pg_server.pg_bin() is None:
        print("database: PostgreSQL is not installed; skipped")
        return
    servers = pg_server.start_server()
    pg = next(servers)
    os.environ["PGSERVICEFILE"] = pg.service_file
    try:
        rnd = random.Random(7)
        rows = [(f"IS{rnd.randrange(1000):04d}", round(rnd.uniform(1, 500), 4), rnd.randrange(1, 10000),
                 f"2024-05-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}",
                 round(rnd.uniform(1, 500), 3)) for i in range(n)]
        with pg.connect() as conn:
            conn.execute("create table ev (id bigserial primary key, isin text, price numeric(18,4), "
                         "volume integer, ts timestamp(3), bid double precision)")
            with conn.cursor().copy("copy ev (isin, price, volume, ts, bid) from stdin") as copy:
                for r in rows:
                    copy.write_row(r)
        element = Element("E", "stream", "input", None, None, TYPED_COLUMNS, ())
        spec = db_spec(Adapter("bench", "input", "db_in", "E",
                               properties={"service": "ccl_test", "table": "ev",
                                           "trackingColumn": "id", "pollperiod": 1}), element)
        print(f"{'adapter':44} {'events/s':>10} {'files':>6}")
        runs = []
        for i in range(repeat):
            inbox, prog = os.path.join(work, f"db-inbox-{i}"), os.path.join(work, f"db-prog-{i}")
            source = DbInput(spec, inbox, TYPED_COLUMNS, Status(prog, "bench", "db_in"), prog)
            t0 = time.perf_counter()
            got = source.poll()
            runs.append((time.perf_counter() - t0, len(os.listdir(inbox))))
            assert got == n and inbox_records(inbox) == n + runs[-1][1]  # a header a file
            source.stop()
        took, files = min(runs)
        print(f"{'db_in (table, all rows)':44} {n / took:>10,.0f} {files:>6}")
        new = max(n // 100, 1)
        with pg.connect() as conn:
            with conn.cursor().copy("copy ev (isin, price, volume, ts, bid) from stdin") as copy:
                for r in rows[:new]:
                    copy.write_row(r)
        t0 = time.perf_counter()
        assert source.poll() == new
        print(f"{'db_in (a poll of ' + format(new, ',') + ' new rows)':44} "
              f"{new / (time.perf_counter() - t0):>10,.0f} {1:>6}")
        from decimal import Decimal
        import datetime as dt
        changes = [{"__op": "i", "isin": r[0], "price": Decimal(str(r[1])), "volume": r[2],
                    "ts": dt.datetime.fromisoformat(r[3]), "bid": r[4]} for r in rows]
        for label, props, el in (
                ("db_out (keyed: delete by key, COPY)", {"keyColumns": "isin,ts,volume"}, element),
                ("db_out (history: COPY, opcode column)", {"opcodeColumnName": "op"}, element)):
            best = None
            for i in range(repeat):
                table = f"out_{len(label) % 7}_{i}"
                out_spec = db_spec(Adapter(f"bench{i}{label[8]}", "output", "db_out", "E",
                                           properties={"service": "ccl_test", "table": table,
                                                       **props}), el)
                sink = DbSink(out_spec, el, Status(os.path.join(work, "st"), out_spec.name, "db_out"),
                              th.Event())
                sink.open({"batch": -1})
                t0 = time.perf_counter()
                assert sink.deliver(changes, {"batch": -1, "next": 0})
                took = time.perf_counter() - t0
                best = took if best is None else min(best, took)
                sink.close()
            print(f"{label:44} {n / best:>10,.0f}")
    finally:
        try:
            next(servers)
        except StopIteration:
            pass


def _timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
