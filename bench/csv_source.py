"""CSV input cost: the ``ccl_csv`` source (runtime/csv_source.py) vs Spark's built-in CSV file source.

    python bench/csv_source.py [--rows 1000000] [--files 4] [--repeat 1]

One Spark run (local[2]). The rows (symbol, price, volume, timestamp) are generated into FILES files;
each reader streams the directory with ``trigger(availableNow=True)`` into the noop sink (one file
per micro-batch for both). Paths: ``read_input`` yielding arrow RecordBatches (the default), the
same yielding tuples, ``spark.readStream.csv`` with the same schema, and the ceiling of any Python
streaming source here: a source of the same schema that yields one pre-built RecordBatch over and
over (no parsing at all). Prints rows/s and ratios.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

# Run as a script, this directory is sys.path[0], where bench/runtime.py would shadow the
# runtime package.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from runtime.csv_source import FileSpec, read_input  # noqa: E402
from runtime.session import get_session  # noqa: E402
from runtime.types import struct  # noqa: E402

COLUMNS = [["isin", "string"], ["price", "money(4)"], ["volume", "integer"], ["ts", "timestamp"],
           ["bid", "float"]]


def generate(directory: str, rows: int, files: int) -> None:
    """FILES files of ROWS rows in all, with a header."""
    rnd = random.Random(1)
    per = rows // files
    for f in range(files):
        with open(os.path.join(directory, f"part{f:03d}.csv"), "w") as out:
            out.write("isin,price,volume,ts,bid\n")
            lines = []
            for i in range(per):
                lines.append(f"US{rnd.randrange(10**9):010d},{rnd.randrange(10**6) / 100:.2f},"
                             f"{rnd.randrange(10000)},2024-03-{1 + i % 28:02d}T10:{i % 60:02d}:"
                             f"{(i // 60) % 60:02d}.{i % 1000:03d},{rnd.random() * 100:.3f}\n")
            out.write("".join(lines))


def ceiling_source(data: str, rows: int, files: int):
    """A Python streaming source yielding the first rows of ``data`` as one cached RecordBatch,
    ``rows`` rows in all over ``files`` partitions: what the Python Data Source path costs alone."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamReader,
        InputPartition,
    )

    from runtime.csv_source import CsvFormat, output_schema, read_file, rows_to_arrow
    schema = output_schema(COLUMNS)
    first = os.path.join(data, "part000.csv")

    class Reader(DataSourceStreamReader):
        def initialOffset(self):
            return {"n": 0}

        def latestOffset(self, start=None, limit=None):
            return {"n": files}

        def partitions(self, start, end):
            return [InputPartition(i) for i in range(start["n"], end["n"])]

        def read(self, partition):
            from pyspark.sql.pandas.types import to_arrow_schema
            cached = list(read_file(first, COLUMNS, CsvFormat()))[:8192]
            batch = rows_to_arrow(cached, to_arrow_schema(schema, timezone="UTC"))
            full, rest = divmod(rows // files, len(cached))
            for _ in range(full):
                yield batch
            if rest:
                yield batch.slice(0, rest)

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "bench_ceiling"

        def schema(self):
            return schema

        def streamReader(self, schema):
            return Reader()
    return Source


def run(spark, df, checkpoint: str) -> float:
    shutil.rmtree(checkpoint, ignore_errors=True)
    t0 = time.perf_counter()
    q = (df.writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", checkpoint).start())
    q.awaitTermination()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    spark = get_session("local[2]", app_name="bench-csv", shuffle_partitions=2)
    work = tempfile.mkdtemp(prefix="bench_csv_")
    data = os.path.join(work, "in")
    os.makedirs(data)
    generate(data, args.rows, args.files)
    element = {"name": "priceW", "columns": COLUMNS}
    paths = {
        "ccl_csv (arrow)": lambda: read_input(spark, element, FileSpec(data, pattern="*.csv"),
                                              options={"max_files_per_batch": 1}),
        "ccl_csv (tuples)": lambda: read_input(spark, element, FileSpec(data, pattern="*.csv"),
                                               options={"max_files_per_batch": 1,
                                                        "rows_as_tuples": "true"}),
        "built-in csv": lambda: (spark.readStream.schema(struct(COLUMNS)).option("header", "true")
                                 .option("maxFilesPerTrigger", 1).csv(data)),
    }
    spark.dataSource.register(ceiling_source(data, args.rows, args.files))
    paths["python source ceiling"] = lambda: spark.readStream.format("bench_ceiling").load()
    run(spark, paths["built-in csv"](), os.path.join(work, "warm"))  # first-batch start-up
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, make in paths.items():
            seconds = run(spark, make(), os.path.join(work, "ck"))
            best[name] = min(best.get(name, seconds), seconds)
    base = args.rows / best["built-in csv"]
    for name, seconds in best.items():
        rate = args.rows / seconds
        print(f"{name:22s} {seconds:7.2f} s {rate:12,.0f} rows/s  {rate / base:5.2f} x built-in")
    shutil.rmtree(work, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
