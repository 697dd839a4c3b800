"""Cost of runtime/spark_hash.py per row: the row-by-row ``spark_hash`` against the numpy
``spark_hash_columns`` (over Python lists and over Arrow arrays), for 1 and 3 columns.

    python bench/spark_hash.py [--rows 100000] [--repeat 5]

No Spark. The rows are generated once (ISIN-like strings, longs, doubles); each variant hashes all
of them --repeat times, interleaved; the figure is the median µs per row, and the ratio of the
row-by-row time to the columnar one (robust to machine load).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

# Run as a script, this directory is sys.path[0], where bench/runtime.py would shadow the
# runtime package.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402

from runtime.spark_hash import spark_hash, spark_hash_columns  # noqa: E402


def _columns(rows: int) -> tuple[list, list, list, list]:
    rnd = random.Random(7)
    isins = ["US%09d%d" % (rnd.randrange(10**9), rnd.randrange(10)) for _ in range(rows)]
    longs = [rnd.randrange(-2**63, 2**63) for _ in range(rows)]
    doubles = [rnd.uniform(-1e6, 1e6) for _ in range(rows)]
    ints = [rnd.randrange(-2**31, 2**31) for _ in range(rows)]
    return isins, longs, doubles, ints


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    isins, longs, doubles, ints = _columns(args.rows)
    cases = {
        "1 column (string)": ([isins], ["string"]),
        "1 column (integer)": ([ints], ["integer"]),
        "3 columns (string, long, float)": ([isins, longs, doubles], ["string", "long", "float"]),
    }
    for name, (cols, types) in cases.items():
        arrow = [pa.array(c) for c in cols]
        rows = list(zip(*cols))
        times: dict[str, list[float]] = {"rows": [], "lists": [], "arrow": []}
        for _ in range(args.repeat):
            t = time.perf_counter()
            by_row = [spark_hash(r, types) for r in rows]
            times["rows"].append(time.perf_counter() - t)
            t = time.perf_counter()
            by_list = spark_hash_columns(cols, types)
            times["lists"].append(time.perf_counter() - t)
            t = time.perf_counter()
            by_arrow = spark_hash_columns(arrow, types)
            times["arrow"].append(time.perf_counter() - t)
            assert by_row == by_list.tolist() == by_arrow.tolist()
        med = {k: statistics.median(v) for k, v in times.items()}
        us = {k: 1e6 * v / args.rows for k, v in med.items()}
        print(f"{name}: spark_hash {us['rows']:.2f} µs/row, spark_hash_columns over lists "
              f"{us['lists']:.3f} µs/row ({med['rows'] / med['lists']:.0f}x), over Arrow "
              f"{us['arrow']:.3f} µs/row ({med['rows'] / med['arrow']:.0f}x)")


if __name__ == "__main__":
    main()
