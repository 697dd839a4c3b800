"""The web service's POST: events per second into an input element's inbox.

    python bench/web.py [--events 50000] [--repeat 3]

No Spark: the service (runtime/web) runs in this process on 127.0.0.1 over an input directory,
and a client of this script posts EVENTS trade events (the columns of bench/adapters.py) in
requests of ROWS rows each, one request after the other (each answered once its file is on disk),
as CSV text and as JSON arrays. The time runs from the first request until the last answer.
Printed per format and request size: events/s, requests/s, and the median time of a request
(with one row: the round trip of a single event, one fsync of the file and one of the
directory). Best of REPEAT.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import aiohttp  # noqa: E402

from bench.adapters import COLUMNS, events  # noqa: E402
from ccl.plan.model import NATIVE, Column, Element, Physical, Plan  # noqa: E402
from runtime.web.server import Server, WebService  # noqa: E402


def plan() -> Plan:
    trades = Element("Trades", "stream", "input", None, None,
                     tuple(Column(name, ccl_type) for name, ccl_type in COLUMNS), (),
                     physical=Physical(NATIVE, "an input"))
    return Plan("bench", "", {}, (), (trades,), ())


async def post_all(url: str, bodies: list[bytes], kind: str) -> list[float]:
    times = []
    async with aiohttp.ClientSession() as s:
        for body in bodies:
            t = time.perf_counter()
            async with s.post(f"{url}/elements/Trades/rows", data=body,
                              headers={"Content-Type": kind}) as r:
                answer = await r.json()
                assert r.status == 200 and not answer["bad"], answer
            times.append(time.perf_counter() - t)
    return times


def bodies(n: int, rows: int, payload: str) -> list[bytes]:
    lines = events(n, payload).decode().splitlines()
    out = []
    for i in range(0, len(lines), rows):
        chunk = lines[i:i + rows]
        if payload == "json":
            out.append(("[" + ",".join(chunk) + "]").encode())
        else:
            out.append(("isin,price,volume,ts,bid\n" + "\n".join(chunk) + "\n").encode())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'format':<6} {'rows/request':>12} {'events/s':>10} {'requests/s':>10} {'median ms':>10}")
    for payload, kind in (("csv", "text/csv"), ("json", "application/json")):
        for rows in (1, 100, 5000):
            n = min(args.events, 500) if rows == 1 else args.events
            reqs = bodies(n, rows, payload)
            best = None
            for _ in range(args.repeat):
                tmp = tempfile.mkdtemp(prefix="ccl-bench-web-")
                try:
                    os.makedirs(os.path.join(tmp, "in"))
                    server = Server(WebService(plan(), os.path.join(tmp, "ck"),
                                               {"Trades": os.path.join(tmp, "in")}, tmp))
                    url = server.start()
                    t = time.perf_counter()
                    times = asyncio.run(post_all(url, reqs, kind))
                    elapsed = time.perf_counter() - t
                    server.stop()
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                if best is None or elapsed < best[0]:
                    best = (elapsed, times)
            elapsed, times = best
            print(f"{payload:<6} {rows:>12} {n / elapsed:>10,.0f} {len(reqs) / elapsed:>10,.1f} "
                  f"{statistics.median(times) * 1000:>10.2f}")


if __name__ == "__main__":
    main()
