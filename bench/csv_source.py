"""CSV input cost: the ``ccl_csv`` source (runtime/inputs/source.py) vs Spark's built-in CSV file source.

    python bench/csv_source.py [--rows 1000000] [--files 4] [--repeat 1]

One Spark run (local[2]). The rows (symbol, price, volume, timestamp) are generated into FILES files;
each reader streams the directory with ``trigger(availableNow=True)`` into the noop sink (one file
per micro-batch for all). Paths: ``read_input`` yielding arrow RecordBatches (the default: these
plain files take the pyarrow fast path of runtime/inputs/csv_arrow.py), the same yielding tuples (always
the Python parser), ``spark.readStream.csv`` with the same element schema, and the ceiling of any
Python streaming source here: a source with the schema of ``ccl_csv`` (checked equal) that yields
one pre-built RecordBatch of ``FAST_BATCH_ROWS`` rows over and over (no parsing at all).

Warm-up: before timing, every path runs once on a small input of its own. The first query of a
session pays Spark's start-up, and the first Python source query also the Python workers'
(measured here: about 5 s; a pre-built-batch source ran at 277k rows/s cold and 1.08M rows/s warm
on 2M rows), which would otherwise be charged to whichever path runs first. Prints rows/s and
ratios.
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

from ccl.plan.model import Column, Element  # noqa: E402
from runtime.inputs.listing import FileSpec  # noqa: E402
from runtime.inputs.source import read_input  # noqa: E402
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


def ceiling_source():
    """A Python streaming source (options ``data``, ``rows``, ``files``) yielding the first rows of
    ``data``/part000.csv as one cached RecordBatch of up to ``FAST_BATCH_ROWS`` rows, ``rows`` rows
    in all over ``files`` partitions: what the Python Data Source path costs alone. Its schema is
    the ``ccl_csv`` source's."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamReader,
        InputPartition,
    )

    from runtime.inputs.csv_text import output_schema, parse_file_text, rows_to_arrow
    from runtime.inputs.formats import CsvFormat
    from runtime.inputs.source import FAST_BATCH_ROWS

    class Reader(DataSourceStreamReader):
        def __init__(self, schema, options):
            self.schema = schema
            self.first = os.path.join(options["data"], "part000.csv")
            self.rows, self.files = int(options["rows"]), int(options["files"])

        def initialOffset(self):
            return {"n": 0}

        def latestOffset(self, start=None, limit=None):
            return {"n": self.files}

        def partitions(self, start, end):
            return [InputPartition(i) for i in range(start["n"], end["n"])]

        def read(self, partition):
            from pyspark.sql.pandas.types import to_arrow_schema
            with open(self.first, encoding="utf-8", newline="") as f:  # the header and rows
                head = "".join(line for _, line in zip(range(FAST_BATCH_ROWS + 1), f))
            cached = list(parse_file_text(head, COLUMNS, CsvFormat()))
            batch = rows_to_arrow(cached, to_arrow_schema(self.schema, timezone="UTC"))
            full, rest = divmod(self.rows // self.files, len(cached))
            for _ in range(full):
                yield batch
            if rest:
                yield batch.slice(0, rest)

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "bench_ceiling"

        def schema(self):
            return output_schema(COLUMNS)

        def streamReader(self, schema):
            return Reader(schema, dict(self.options))
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
    data, small = os.path.join(work, "in"), os.path.join(work, "warm_in")
    os.makedirs(data)
    os.makedirs(small)
    generate(data, args.rows, args.files)
    generate(small, 20_000, 2)
    element = Element("priceW", "stream", "input", None, None,
                      tuple(Column(c, t) for c, t in COLUMNS), ())
    spark.dataSource.register(ceiling_source())

    def paths_for(directory: str, rows: int, files: int) -> dict:
        spec = FileSpec(directory, pattern="*.csv")
        return {
            "ccl_csv (arrow)": lambda: read_input(spark, element, spec,
                                                  options={"max_files_per_batch": 1}),
            "ccl_csv (tuples)": lambda: read_input(spark, element, spec,
                                                   options={"max_files_per_batch": 1,
                                                            "rows_as_tuples": "true"}),
            "built-in csv": lambda: (spark.readStream.schema(struct(COLUMNS))
                                     .option("header", "true").option("maxFilesPerTrigger", 1)
                                     .csv(directory)),
            "python source ceiling": lambda: (spark.readStream.format("bench_ceiling")
                                              .option("data", directory).option("rows", rows)
                                              .option("files", files).load()),
        }

    paths = paths_for(data, args.rows, args.files)
    assert paths["python source ceiling"]().schema == paths["ccl_csv (arrow)"]().schema
    for no, make in enumerate(paths_for(small, 20_000, 2).values()):  # start-up, see docstring
        run(spark, make(), os.path.join(work, f"warm{no}"))
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
