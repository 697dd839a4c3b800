"""Input adapters: events per second into the inbox, and the latency of a single event.

    python bench/adapters.py [--events 200000] [--repeat 3]

No Spark: each socket input adapter (runtime/adapters/socket_input.py) runs on its own with a
sender of this script on 127.0.0.1, which writes EVENTS trade events (symbol, price, volume,
timestamp, bid: the columns of bench/csv_source.py) as fast as the socket takes them, in CSV or
JSON lines. The time runs from the first byte sent until the inbox holds every event, flushed to
disk (what an adapter has acknowledged). Printed per adapter: events/s, inbox files written
(events come fast: few large files), and the latency of one event sent alone (from send until its
inbox file exists: the adapter's ``batchMillis`` wait plus one fsync). Also the parsing rate of
the JSON reader (runtime/inputs/json_rows.py, rows/s on one core) over the same events, which
bounds what a JSON input (file or socket) gives the project. Best of REPEAT.
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
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ccl-bench-adapters-")
    try:
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


def _timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
