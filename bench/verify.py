"""How long `ccl verify` takes on the example projects: both runs on the per-instance engine (no
Spark), and with ``--spark`` the same on an embedded Spark (as ``ccl verify --spark``).

    python bench/verify.py [--repeat 3] [--spark]
    python bench/verify.py --seeds [--repeat 3] [--commands 2]

Per project: the verdict (equivalent / differs) and the seconds of the two runs and the comparison
(best of ``repeat``, wall clock, planning excluded); the Spark line runs once (its session started
once, before the first project, and not counted).

``--seeds``: the seed examples issue 26 names, on generated sample inputs as tests/test_verify.py
writes them (the ROUNDROBIN aggregate and its HASH(Symbol) form on projects/trades_roundrobin's
trades; ESP's eventCache Example 1 as written and with a cache without key; ESP's Example 2 (Flex,
keyCache) as written and with 3 events a bucket; the HASH seeds hash_maxprice and
hash_vwap_broadcast; the custom function seed custom_maxprice). Per example: its verdict, the
engine path's seconds (best of ``repeat``, planning excluded) and the wall time of a whole ``ccl
verify`` command in a new process (best of ``commands``: start-up, imports, planning both
projects, both runs, the report).
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ccl.analysis import analyze  # noqa: E402
from ccl.cli.verify import without_partitions  # noqa: E402
from ccl.config.project_config import load_project_config  # noqa: E402
from ccl.plan.planner import build_plan  # noqa: E402
from runtime.verify import verify  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECTS = ["max_price_hash/max_price.ccl", "meter_regions/meter_regions.ccl",
            "sales_by_country/sales_by_country.ccl", "stock_prices/stock_prices.ccl",
            "trades_roundrobin/trades_roundrobin.ccl", "vwap_broadcast/vwap_broadcast.ccl"]


def plans(path: str):
    """The plan as written and the plan without its PARTITION BY clauses."""
    config = load_project_config(path)
    written = build_plan(config.project, analyze(config.project, config.parameters),
                         config.parameters, adapters_properties=config.adapters)
    stripped, _ = without_partitions(config.project)
    plain = build_plan(stripped, analyze(stripped, config.parameters), config.parameters,
                       adapters_properties=config.adapters)
    return written, plain


SEEDS = os.path.join(ROOT, "tests", "projects", "seeds")
TRADES_CSV = os.path.join(ROOT, "projects", "trades_roundrobin", "data", "trades.csv")
RR_AGGREGATE = """CREATE INPUT STREAM Trades SCHEMA (TradeId long, Ts bigdatetime, Symbol string,
    Price money(2), Volume integer);
CREATE OUTPUT WINDOW VolumeBySymbol PRIMARY KEY DEDUCED
    PARTITION BY Trades ROUNDROBIN PARTITIONS 3
AS SELECT t.Symbol Symbol, count(*) Trades, sum(t.Volume) Volume
   FROM Trades t GROUP BY t.Symbol;
"""


def _seed(name: str) -> str:
    with open(os.path.join(SEEDS, name), encoding="utf-8") as f:
        return f.read()


def _csv(path: str, header: str, lines: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write(header + "\n" + "".join(line + "\n" for line in lines))
    return path


def seed_examples(work: str) -> list[tuple[str, str, dict[str, str]]]:
    """(label, project file, inputs) of each seed example, its files written under ``work``."""
    rng = random.Random(1)
    isins = ("DE01", "DE02", "US01", "US02", "FR01", "GB07", "IT03")
    prices = _csv(os.path.join(work, "prices.csv"), "ts,isin,price",
                  [f"2024-01-01T10:{i // 60:02d}:{i % 60:02d},{rng.choice(isins)},"
                   f"{rng.randint(1000, 9000) / 100}" for i in range(200)])
    rng = random.Random(3)
    qtrades = _csv(os.path.join(work, "qtrades.csv"), "Id,Symbol,Symbol2,Price,Shares",
                   [f"{i},{rng.choice('ABCDEFG')},{rng.choice('ABCDEFG')},{rng.randint(1, 20)},"
                    f"{rng.randint(1, 100)}" for i in range(60)])
    rng = random.Random(3)
    names = [f"IS{i:02d}" for i in range(12)]
    vw_prices = _csv(os.path.join(work, "vw_prices.csv"), "isin,price",
                     [f"{i},{rng.randint(100, 999) / 10}" for i in names])
    vw_volumes = _csv(os.path.join(work, "vw_volumes.csv"), "isin,volume",
                      [f"{i},{rng.randint(1, 500)}" for i in names[::2]])
    custom = _csv(os.path.join(work, "custom.csv"), "isin,price",
                  ["DE01,100", "de02,50", "US01,10", "us02,20"])
    example1 = _seed("eventcache_example1.ccl")
    texts = {
        "roundrobin_aggregate": (RR_AGGREGATE, {"Trades": TRADES_CSV}),
        "hash_aggregate": (RR_AGGREGATE.replace("ROUNDROBIN", "HASH(Symbol)"),
                           {"Trades": TRADES_CSV}),
        "eventcache_example1": (example1, {"priceW": prices}),
        "eventcache_no_key": (example1.replace("eventCache(priceW[isin], 10 events)",
                                               "eventCache(priceW, 10 events)"),
                              {"priceW": prices}),
        "flex_keycache_example2": (_seed("flex_keycache_example2.ccl"), {"QTrades": qtrades}),
        "example2_3_events": (_seed("flex_keycache_example2.ccl").replace(
            "manual, Price asc", "manual, 3 events, Price asc"), {"QTrades": qtrades}),
        "hash_maxprice": (_seed("hash_maxprice.ccl"), {"priceW": prices}),
        "hash_vwap_broadcast": (_seed("hash_vwap_broadcast.ccl"),
                                {"priceW": vw_prices, "volumeW": vw_volumes}),
        "custom_maxprice": (_seed("custom_maxprice.ccl").replace("PARTITIONS 2", "PARTITIONS 3"),
                            {"priceW": custom}),
    }
    out = []
    for label, (text, inputs) in texts.items():
        path = os.path.join(work, label + ".ccl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        out.append((label, path, inputs))
    return out


def bench_seeds(repeat: int, commands: int) -> None:
    """The ``--seeds`` table (see the module docstring)."""
    work = tempfile.mkdtemp(prefix="bench-verify-")
    ccl = [sys.executable, "-m", "ccl.cli"]
    print("| example | verdict | engine path (s) | `ccl verify` command (s) |\n|---|---|---|---|")
    for label, path, inputs in seed_examples(work):
        written, plain = plans(path)
        best = float("inf")
        for _ in range(repeat):
            began = time.perf_counter()
            result = verify(written, plain, inputs, work)
            best = min(best, time.perf_counter() - began)
        verdict = "equivalent" if result.equivalent else "differs"
        argv = ccl + ["verify", path]
        for element, data in inputs.items():
            argv += ["--input", f"{element}={data}"]
        wall = float("inf")
        for _ in range(commands):
            began = time.perf_counter()
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
            wall = min(wall, time.perf_counter() - began)
            if done.returncode != (0 if result.equivalent else 1):
                raise SystemExit(f"{label}: ccl verify exited {done.returncode}: {done.stderr}")
        print(f"| {label} | {verdict} | {best:.3f} | {wall:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--seeds", action="store_true")
    ap.add_argument("--commands", type=int, default=2)
    args = ap.parse_args()
    if args.seeds:
        bench_seeds(args.repeat, args.commands)
        return
    spark = None
    if args.spark:
        from runtime.session import get_session
        spark = get_session("local[2]", "bench-verify", 2, log_level="WARN")
    for rel in PROJECTS:
        path = os.path.join(ROOT, "projects", rel)
        written, plain = plans(path)
        base = os.path.dirname(path)
        best = float("inf")
        for _ in range(args.repeat):
            began = time.perf_counter()
            result = verify(written, plain, {}, base)
            best = min(best, time.perf_counter() - began)
        verdict = "equivalent" if result.equivalent else "differs"
        line = f"{rel.split('/')[0]:<20} {verdict:<11} engine {best:6.3f} s"
        if spark is not None:
            began = time.perf_counter()
            on_spark = verify(written, plain, {}, base, spark_session=lambda: spark, force_spark=True)
            took = time.perf_counter() - began
            same = "same verdicts" if [(c.name, c.equivalent) for c in on_spark.comparisons] == \
                [(c.name, c.equivalent) for c in result.comparisons] else "OTHER VERDICTS"
            line += f"   spark {took:6.2f} s ({same}; x{took / best:.0f})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
