"""CPU time of writing an output CSV: ``write_csv_tables`` (Arrow tables, formatted a column at a
time, lines joined) against ``write_csv`` (a dict per row, a value at a time, the csv module per
row: the reference the tests compare it with), on bench/project.py's output shape.

    python bench/csv_output.py [--rows 250000] [--batch 10000] [--repeat 3] [--quoted]

The rows are ``Sym string, AvgPrice float, Change float, LastId long`` (``--quoted``: every
tenth symbol holds a comma, so those lines go through the csv module). Prints the CPU seconds of
each (the fastest of ``--repeat``) and checks that both wrote the same bytes.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa  # noqa: E402

from runtime.csv_output import write_csv, write_csv_tables  # noqa: E402

COLUMNS = [["Sym", "string"], ["AvgPrice", "float"], ["Change", "float"], ["LastId", "long"]]


def main() -> None:
    """Time both writers and compare their files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quoted", action="store_true")
    args = parser.parse_args()
    rnd = random.Random(24)
    n = args.rows
    syms = [f"S{rnd.randrange(2000):05d}" + ("," if args.quoted and k % 10 == 0 else "")
            for k in range(n)]
    table = pa.table({"Sym": syms, "AvgPrice": [rnd.randrange(1, 10**8) / 10**4 for _ in range(n)],
                      "Change": [rnd.uniform(-5, 5) for _ in range(n)],
                      "LastId": pa.array(range(n), pa.int64())})
    tables = [table.slice(i, args.batch) for i in range(0, n, args.batch)]
    rows = table.to_pylist()
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "tables.csv"), os.path.join(d, "rows.csv")
        best = {"write_csv_tables": float("inf"), "write_csv": float("inf")}
        for _ in range(args.repeat):
            start = time.process_time()
            write_csv_tables(a, COLUMNS, tables)
            best["write_csv_tables"] = min(best["write_csv_tables"], time.process_time() - start)
            start = time.process_time()
            write_csv(b, COLUMNS, rows)
            best["write_csv"] = min(best["write_csv"], time.process_time() - start)
        same = filecmp.cmp(a, b, shallow=False)
    print(f"{n:,} rows in tables of {args.batch:,}{' (10% quoted)' if args.quoted else ''}: "
          f"write_csv_tables {best['write_csv_tables']:.3f} s, write_csv (per value, per row) "
          f"{best['write_csv']:.3f} s of CPU; same bytes: {same}")
    if not same:
        raise SystemExit("the two writers wrote different files")


if __name__ == "__main__":
    main()
