"""How long `ccl verify` takes on the example projects: both runs on the per-instance engine (no
Spark), and with ``--spark`` the same on an embedded Spark (as ``ccl verify --spark``).

    python bench/verify.py [--repeat 3] [--spark]

Per project: the verdict (equivalent / differs) and the seconds of the two runs and the comparison
(best of ``repeat``, wall clock, planning excluded); the Spark line runs once (its session started
once, before the first project, and not counted).
"""
from __future__ import annotations

import argparse
import os
import sys
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true")
    args = ap.parse_args()
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
