"""The SparkSession every job and test uses: the settings our semantics depend on are fixed here."""
from __future__ import annotations

import os
import sys
import time
from typing import Optional

from pyspark.sql import SparkSession

# Settings the runtime's semantics rely on; configuration may not change them.
REQUIRED_CONF = {
    # SPLASH integer arithmetic wraps like Java and x/0 is null, as in Spark's non-ANSI mode.
    "spark.sql.ansi.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # transformWithState (the stateful elements) needs the RocksDB state store.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    # Python workers turn timestamps into naive datetimes in their local zone: make it UTC.
    "spark.executorEnv.TZ": "UTC",
}


WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_path")


def _worker_path_first() -> None:
    """Put :data:`WORKER_PATH` (its sitecustomize: compiled pyspark for Python workers, see there)
    on the PYTHONPATH the local Spark JVM, started next, gives its Python workers."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if WORKER_PATH not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([WORKER_PATH] + paths)


def get_session(master: str = "local[*]", app_name: str = "ccl", shuffle_partitions: int = 8,
                conf: Optional[dict[str, str]] = None) -> SparkSession:
    """A SparkSession (created once per process) with the runtime's required settings."""
    # Python workers must run this interpreter, which has the project's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["TZ"] = "UTC"
    time.tzset()
    if master.startswith("local"):
        _worker_path_first()
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions)))
    for key, value in {**(conf or {}), **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
