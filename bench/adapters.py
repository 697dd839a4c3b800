"""Input adapters: events per second into the inbox, and the latency of a single event.

    python bench/adapters.py [--events 200000] [--repeat 3] [--only socket|database]

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

from runtime.adapters.config import socket_spec  # noqa: E402
from runtime.adapters.socket_input import SocketInput  # noqa: E402
from runtime.adapters.status import Status  # noqa: E402
from runtime.inputs.formats import CsvFormat  # noqa: E402
from runtime.inputs.json_rows import parse_json_text  # noqa: E402

sys.path.insert(1, os.path.join(sys.path[0], "tests"))

COLUMNS = [["isin", "string"], ["price", "money(4)"], ["volume", "integer"], ["ts", "timestamp"],
           ["bid", "float"]]


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
    adapter = {"name": "bench", "type": kind, "direction": "input", "element": "E",
               "properties": props}
    spec = socket_spec(adapter, work)
    source = SocketInput(spec, inbox, COLUMNS, Status(os.path.join(work, "status"), "bench", kind))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("socket", "database"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ccl-bench-adapters-")
    try:
        if args.only != "socket":
            run_database(args.events, args.repeat, work)
        if args.only == "database":
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
        element = {"name": "E", "columns": COLUMNS, "key": []}
        spec = db_spec({"name": "bench", "type": "db_in", "direction": "input", "element": "E",
                        "properties": {"service": "ccl_test", "table": "ev",
                                       "trackingColumn": "id", "pollperiod": 1}}, element)
        print(f"{'adapter':44} {'events/s':>10} {'files':>6}")
        runs = []
        for i in range(repeat):
            inbox, prog = os.path.join(work, f"db-inbox-{i}"), os.path.join(work, f"db-prog-{i}")
            source = DbInput(spec, inbox, COLUMNS, Status(prog, "bench", "db_in"), prog)
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
                out_spec = db_spec({"name": f"bench{i}{label[8]}", "type": "db_out",
                                    "direction": "output", "element": "E",
                                    "properties": {"service": "ccl_test", "table": table, **props}}, el)
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
