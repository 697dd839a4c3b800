"""The SparkSession every job and test uses: the settings our semantics depend on are fixed here."""
from __future__ import annotations

import os
import sys
import time
from typing import Optional

from py4j.protocol import Py4JNetworkError
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
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


# Spark's log configuration while it starts (WARN, without its start-up lines); the session then
# sets runtime.log_level.
LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
QUIET_LEVELS = ("OFF", "FATAL", "ERROR", "WARN")


def is_quiet(log_level: str) -> bool:
    """Whether at ``log_level`` (runtime.log_level) only ccl's lines are printed, also none that
    the JVM prints itself (runtime.quiet); from INFO on Spark's lines are printed."""
    return log_level.upper() in QUIET_LEVELS


def get_session(master: str = "local[*]", app_name: str = "ccl", shuffle_partitions: int = 8,
                conf: Optional[dict[str, str]] = None, log_level: str = "ERROR") -> SparkSession:
    """A SparkSession (created once per process) with the runtime's required settings, Spark
    logging at ``log_level``.

    The Spark JVM is started in a session (process group) of its own: a SIGTERM to the driver's
    process group (a service manager stopping it, ``timeout``) reaches only the driver, which
    stops the queries, writes the outputs and then stops the JVM. The JVM still ends with the
    driver however the driver ends: it exits when its standard input, a pipe from the driver,
    closes. Spark's start-up lines are left out (:data:`LOG4J2`)."""
    # Python workers must run this interpreter, which has the project's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["TZ"] = "UTC"
    time.tzset()
    settings = {"spark.master": master, "spark.app.name": app_name, "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": str(shuffle_partitions), **(conf or {}),
                **REQUIRED_CONF}
    if master.startswith("local"):
        _worker_path_first()
        # Spark binds the loopback address only (and does not warn that the host name resolves
        # to it).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    options = settings.get("spark.driver.extraJavaOptions", "")
    settings["spark.driver.extraJavaOptions"] = (
        f"{options} -Dlog4j2.configurationFile=file:{LOG4J2}").strip()
    _launch_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level.upper())
    return spark


def _launch_jvm(settings: dict[str, str]) -> None:
    """Start the driver's JVM (as PySpark would: spark-submit with ``settings``) in a new session,
    unless this process has one (a session made before, or spark-submit's)."""
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    SparkContext._ensure_initialized(
        gateway=launch_gateway(conf, popen_kwargs={"start_new_session": True}))


def jvm_gone() -> bool:
    """Whether the JVM this process started has ended (killed, crashed); False when it runs or
    is not this process's child (under spark-submit)."""
    proc = getattr(SparkContext._gateway, "proc", None)
    return proc is not None and proc.poll() is not None


def spark_gone(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the Spark JVM having ended under the driver: the JVM this
    process started has exited, or the driver lost its connection to the JVM."""
    return jvm_gone() or isinstance(exc, (Py4JNetworkError, ConnectionError))


def gone_message(resumable: bool) -> str:
    """The one line a run prints when Spark's JVM ended before the run did."""
    return ("Spark's JVM ended before the run did (killed or crashed): the outputs were not written"
            + ("; the checkpoint resumes from the last finished batch" if resumable else ""))


def stop_session(spark: SparkSession) -> None:
    """``spark.stop()``, which has nothing to do when the JVM has already ended."""
    try:
        spark.stop()
    except Exception as exc:
        if not spark_gone(exc):
            raise
