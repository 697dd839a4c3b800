"""What a compiled CCL project costs on Spark, against a passthrough and a hand-written PySpark job.

    python bench/runtime.py [--rows 1000000] [--isins 50000] [--files 4] [--only NAME,...] [--repeat N]

One Spark session (local[2], 2 shuffle partitions), the same generated rows (isin, price, volume) in
FILES CSV files for every job, each run with ``availableNow`` / ``ccl run --until-idle`` semantics:

- ``passthrough``: ``spark.readStream.csv`` into the noop sink: the ceiling of any file job here.
- ``handwritten``: the same files, ``groupBy(isin).agg(max(price), sum(volume))`` in update mode,
  each batch's changed groups written as Parquet: what a PySpark user would write by hand.
- ``hash``, ``roundrobin``, ``custom``: our compiled job (input stream, then a window of the
  maximum price and total volume per isin) partitioned 4 ways by HASH(isin), ROUNDROBIN and a
  SPLASH function; the whole run, outputs (``maxW.csv``, ``_run.json``) included. The planner
  runs this aggregation natively (runtime/native_agg.py: Spark's groupBy on instance and isin).
- ``instances-N``: the HASH project forced onto the per-instance path with PARTITIONS N (1, 16,
  1024, 65535): the cost of per-instance state as instances multiply (the Spark grouping key
  stays the bucket). Nothing reads the window's changes one by one, so the per-instance path
  folds each bucket's batch a column at a time (runtime/engine/columnar.py), one change per group.
- ``observed-16``: the same with 16 instances and an output adapter on the window, which writes
  every change: one change per input row (columnar.py's per-row mode), a changelog of a million
  rows.

Before timing, every kind of job runs once on a small input (not timed): the first query of a
session pays one-off start-up (JVM code generation, Python workers, the Python data source),
which is not throughput.

Prints rows/s per job (its fastest run) and the ratios the runtime issue sets targets for, from
the fastest runs and from the median runs (the baseline's own runs vary as much as ours).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ccl.plan.planner import plan_project  # noqa: E402
from runtime.run_setup import RunOptions  # noqa: E402
from runtime.run import run_plan  # noqa: E402
from runtime.session import get_session  # noqa: E402

PROJECT = """
create input stream priceS schema (isin string, price float, volume integer);
create output window maxW primary key deduced keep all
  {partition}
  as select priceS.isin, max(priceS.price) maxPrice, sum(priceS.volume) volume
     from priceS group by priceS.isin;
"""
PARTITIONS = {
    "hash": "partition by priceS hash(isin) partitions {n}",
    "roundrobin": "partition by priceS roundrobin partitions {n}",
    "custom": "partition by priceS { return ascii(substr(priceS.isin, 3, 1)) % maxW_partitions; } "
              "partitions {n}",
}


def generate(directory: str, rows: int, isins: int, files: int) -> None:
    """``rows`` rows over ``files`` CSV files with a header."""
    rnd = random.Random(7)
    names = [f"US{k:08d}" for k in range(isins)]
    per = rows // files
    for f in range(files):
        lines = ["isin,price,volume\n"]
        for _ in range(per):
            lines.append(f"{rnd.choice(names)},{rnd.randrange(10**6) / 100:.2f},{rnd.randrange(1, 1000)}\n")
        with open(os.path.join(directory, f"part{f:03d}.csv"), "w") as out:
            out.write("".join(lines))


def _timed(start) -> float:
    began = time.perf_counter()
    query = start()
    if query is not None:
        query.awaitTermination()
    return time.perf_counter() - began


def passthrough(spark, data: str, work: str) -> float:
    df = spark.readStream.schema("isin string, price double, volume int").option("header", True).csv(data)
    return _timed(lambda: df.writeStream.format("noop").trigger(availableNow=True)
                  .option("checkpointLocation", os.path.join(work, "ck")).start())


def handwritten(spark, data: str, work: str) -> float:
    from pyspark.sql import functions as F
    df = spark.readStream.schema("isin string, price double, volume int").option("header", True).csv(data)
    agg = df.groupBy("isin").agg(F.max("price").alias("maxPrice"), F.sum("volume").alias("volume"))
    out = os.path.join(work, "out")

    def write(batch, batch_id):
        batch.write.mode("overwrite").parquet(os.path.join(out, f"batch-{batch_id}"))
    return _timed(lambda: agg.writeStream.outputMode("update").foreachBatch(write)
                  .trigger(availableNow=True).option("checkpointLocation", os.path.join(work, "ck")).start())


OBSERVED = "attach output adapter o type toolkit_file_csv_output to maxW properties dir = 'adapter';\n"


def compiled(spark, data: str, work: str, method: str, n: int, native: bool = True,
             observed: bool = False) -> float:
    path = os.path.join(work, "p.ccl")
    with open(path, "w") as f:
        f.write(PROJECT.replace("{partition}", PARTITIONS[method].replace("{n}", str(n)))
                + (OBSERVED if observed else ""))
    plan, diags = plan_project(path, native_operators=native)
    if plan is None:
        raise SystemExit("\n".join(str(d) for d in diags))
    options = RunOptions(inputs={"priceS": data}, base_dir=work, run_dir=os.path.join(work, "run"),
                         until_idle=True)
    return _timed(lambda: run_plan(spark, plan, options, os.path.join(work, "out")) and None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--isins", type=int, default=50_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--only", default="", help="comma-separated job names")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of runs (every job once per round); each job's fastest run counts "
                         "(run-to-run noise here is 10-40%%)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="ccl-bench-")
    data = os.path.join(root, "data")
    os.makedirs(data)
    generate(data, args.rows, args.isins, args.files)
    # One instance holds every group's rows (aggregates keep their inputs for retraction) in one
    # state value: more driver heap than the local default (1g) for the per-instance runs.
    spark = get_session("local[2]", "ccl-bench-runtime", 2, conf={"spark.driver.memory": "6g"})
    jobs = {"passthrough": lambda w: passthrough(spark, data, w),
            "handwritten": lambda w: handwritten(spark, data, w)}
    for method in ("hash", "roundrobin", "custom"):
        jobs[method] = lambda w, m=method: compiled(spark, data, w, m, 4)
    for n in (1, 16, 1024, 65535):
        jobs[f"instances-{n}"] = lambda w, n=n: compiled(spark, data, w, "hash", n, native=False)
    jobs["observed-16"] = lambda w: compiled(spark, data, w, "hash", 16, native=False, observed=True)
    only = [j for j in args.only.split(",") if j]
    rates: dict[str, float] = {}  # from each job's fastest run
    medians: dict[str, float] = {}  # from its median run
    try:
        warm = os.path.join(root, "warm")
        os.makedirs(os.path.join(warm, "data"))
        generate(os.path.join(warm, "data"), 4000, 100, 2)
        for name, job in [("passthrough", passthrough), ("handwritten", handwritten),
                          ("native", lambda s, d, w: compiled(s, d, w, "custom", 4)),
                          ("per-instance", lambda s, d, w: compiled(s, d, w, "hash", 4, native=False)),
                          ("observed", lambda s, d, w: compiled(s, d, w, "hash", 4, native=False,
                                                                observed=True))]:
            os.makedirs(os.path.join(warm, name))
            job(spark, os.path.join(warm, "data"), os.path.join(warm, name))
        # Rounds: every job once per round, so that the machine's drift over minutes (runs of the
        # same job vary 10-40% here) weighs on all jobs alike.
        chosen = [name for name in jobs if not only or name in only]
        times: dict[str, list[float]] = {name: [] for name in chosen}
        for attempt in range(max(args.repeat, 1)):
            for name in chosen:
                work = os.path.join(root, f"{name}-{attempt}")
                os.makedirs(work)
                times[name].append(jobs[name](work))
                shutil.rmtree(work, ignore_errors=True)
        for name in chosen:
            seconds = min(times[name])
            rates[name] = args.rows / seconds
            medians[name] = args.rows / statistics.median(times[name])
            print(f"{name:>16}: {seconds:7.2f} s  {rates[name]:>10,.0f} rows/s"
                  + (f"  (runs: {', '.join(f'{t:.2f}' for t in times[name])} s)"
                     if len(times[name]) > 1 else ""), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    base = rates.get("handwritten")
    if base:
        for name in ("passthrough", "hash", "roundrobin", "custom", "instances-1", "instances-16",
                     "instances-1024", "instances-65535", "observed-16"):
            if name in rates:
                print(f"{name:>16} / handwritten = {rates[name] / base:.2f} fastest runs, "
                      f"{medians[name] / medians['handwritten']:.2f} median runs")
    if "instances-16" in rates and "instances-65535" in rates:
        print(f"instances-65535 / instances-16 = {rates['instances-65535'] / rates['instances-16']:.2f}")


if __name__ == "__main__":
    main()
