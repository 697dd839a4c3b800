"""The ``spark`` candidate of bench/state_store.py: Spark's own state store.

A streaming query reads Parquet files one per trigger (the first holds the H rows to hold, every
later one a batch of B new OrderIds and B/10 updates and B/100 deletes of older ones, the same
batches as the other candidates), groups them by bucket (OrderId mod 4) and runs
``transformWithStateInPandas`` whose processor keeps one MapState per bucket, OrderId -> row, under
the RocksDB state store provider with changelog checkpointing: every input row is one
``updateValue`` / ``removeKey``. Measured from the query progress: each batch's duration
(``triggerExecution``) and state commit time, the rows the state holds and its memory, and from the
checkpoint directory the bytes of files each batch added. Restore: the query is stopped and started
again from its checkpoint with one more file; that batch loads version N (snapshot + changelog)
before it runs, so its duration against a steady batch is the restore.

    python bench/state_store_spark.py [--held 100000] [--batch 100000] [--batches 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from state_store import batch_changes, du, initial_rows  # noqa: E402


def _session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]").appName("state-store-bench")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.adaptive.enabled", "false")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", "3g")
            .config("spark.sql.streaming.stateStore.providerClass",
                    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
            .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
            .getOrCreate())


def _write_file(path: str, rows, seq: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    ks, accts, qtys, prices, tss, ops = [], [], [], [], [], []
    for k, r, op in rows:
        ks.append(k)
        accts.append(r[0] if r else None)
        qtys.append(r[1] if r else None)
        prices.append(r[2] if r else None)
        tss.append(r[3] if r else None)
        ops.append(op)
    table = pa.table({"k": pa.array(ks, pa.int64()), "account": pa.array(accts, pa.string()),
                      "qty": pa.array(qtys, pa.int32()), "price": pa.array(prices, pa.float64()),
                      "ts": pa.array(tss, pa.int64()), "op": pa.array(ops, pa.string())})
    hidden = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
    pq.write_table(table, hidden)
    os.utime(hidden, (1_700_000_000 + seq, 1_700_000_000 + seq))  # file source order = mtime
    os.replace(hidden, path)


def _batch_rows(held: int, batch: int, n: int):
    ups, dels, _new = batch_changes(held, batch, n)
    return [(k, r, "u") for k, r in ups.items()] + [(k, None, "d") for k in dels]


def _processor():
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class Keep(StatefulProcessor):
        def init(self, handle) -> None:
            self.rows = handle.getMapState(
                "rows", "k long", "account string, qty int, price double, ts long")

        def handleInputRows(self, key, rows, timerValues):
            n = 0
            for pdf in rows:
                for k, a, q, p, t, op in zip(pdf["k"].tolist(), pdf["account"].tolist(),
                                             pdf["qty"].tolist(), pdf["price"].tolist(),
                                             pdf["ts"].tolist(), pdf["op"].tolist()):
                    if op == "d":
                        self.rows.removeKey((k,))
                    else:
                        self.rows.updateValue((k,), (a, int(q), float(p), t))
                    n += 1
            yield pd.DataFrame({"bucket": [int(key[0])], "n": [n]})

        def close(self) -> None:
            pass
    return Keep()


def _files_bytes(path: str) -> dict[str, int]:
    out = {}
    for root, _d, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            try:
                out[p] = os.stat(p).st_size
            except FileNotFoundError:
                pass
    return out


def _start(spark, src: str, ckpt: str):
    from pyspark.sql import functions as F
    schema = "k long, account string, qty int, price double, ts long, op string"
    df = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
          .withColumn("bucket", F.pmod(F.col("k"), F.lit(4))))
    out = df.groupBy("bucket").transformWithStateInPandas(
        statefulProcessor=_processor(), outputStructType="bucket long, n long",
        outputMode="Update", timeMode="None")
    return (out.writeStream.format("noop").option("checkpointLocation", ckpt)
            .trigger(processingTime="0 seconds").start())


def _last_progress(q, batch_id: int, timeout: float = 1800):
    end = time.time() + timeout
    while time.time() < end:
        for p in q.recentProgress:
            if p.batchId == batch_id and p.numInputRows > 0:
                return p
        if q.exception():
            raise RuntimeError(str(q.exception()))
        time.sleep(0.2)
    raise TimeoutError(f"batch {batch_id}")


def _metrics(p) -> dict:
    so = p.stateOperators[0] if p.stateOperators else None
    return {"duration_s": p.durationMs.get("triggerExecution", 0) / 1000,
            "rows_in": p.numInputRows,
            "state_rows": so.numRowsTotal if so else None,
            "commit_s": (so.commitTimeMs / 1000) if so else None,
            "state_memory_mb": (so.memoryUsedBytes / 1e6) if so else None,
            "custom": dict(so.customMetrics) if so else {}}


def run(helds: list[int], batch: int, batches: int, root: str) -> list[dict]:
    spark = _session()
    results = []
    try:
        for held in helds:
            d = tempfile.mkdtemp(prefix=f"spark-{held}-", dir=root)
            src, ckpt = os.path.join(d, "in"), os.path.join(d, "ckpt")
            os.makedirs(src)
            _write_file(os.path.join(src, "f000000.parquet"),
                        [(k, r, "u") for k, r in initial_rows(held)], 0)
            q = _start(spark, src, ckpt)
            t = time.perf_counter()
            p = _last_progress(q, 0)
            res = {"candidate": "spark", "held": held, "batch": batch,
                   "load_s": time.perf_counter() - t, "load": _metrics(p)}
            applies, written, per = [], [], []
            before = _files_bytes(ckpt)
            for n in range(1, batches + 1):
                _write_file(os.path.join(src, f"f{n:06d}.parquet"), _batch_rows(held, batch, n), n)
                p = _last_progress(q, n)
                q.processAllAvailable()
                m = _metrics(p)
                now = _files_bytes(ckpt)
                written.append(sum(s for f, s in now.items() if before.get(f) != s))
                before = now
                applies.append(m["duration_s"])
                per.append(m)
            res.update(apply_s=applies, written_bytes=written, batches=per)
            q.stop()
            # restart from the checkpoint: the next batch first loads version `batches`
            n = batches + 1
            _write_file(os.path.join(src, f"f{n:06d}.parquet"), _batch_rows(held, batch, n), n)
            t = time.perf_counter()
            q = _start(spark, src, ckpt)
            p = _last_progress(q, n)
            res["restart_wall_s"] = time.perf_counter() - t
            res["restore_s"] = _metrics(p)["duration_s"]
            res["after_restart"] = _metrics(p)
            q.stop()
            res["disk_bytes"] = du(ckpt)
            res["state_memory_mb"] = per[-1]["state_memory_mb"]
            res["rss_after_batches_mb"] = float("nan")  # the JVM's, not this process's
            results.append(res)
            print(f"spark H={held}: load {res['load_s']:.1f}s batches "
                  f"{['%.2f' % a for a in applies]} first after restart {res['restore_s']:.2f}s "
                  f"written {[w // 1000 for w in written]} kB state rows "
                  f"{per[-1]['state_rows']} mem {per[-1]['state_memory_mb']}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    finally:
        spark.stop()
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--held", default="100000")
    ap.add_argument("--batch", type=int, default=100000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="state-bench-spark-", dir=args.dir)
    res = run([int(h) for h in args.held.split(",")], args.batch, args.batches, root)
    for r in res:
        print(json.dumps(r, default=str))
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(r, default=str) + "\n")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
