"""The stderr filter that hides PySpark's worker chatter (runtime/quiet.py), without Spark."""
import os
import threading
import time

import pytest

from runtime.quiet import copy_filtered


def _through(chunks, quiet=False, muted=lambda: False):
    """What the filter copies of ``chunks`` (bytes written in turn; a callable is called)."""
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    t = threading.Thread(target=copy_filtered, args=(src_r, out_w, quiet, muted))
    t.start()
    for c in chunks:
        if callable(c):
            c()
        else:
            os.write(src_w, c)
    os.close(src_w)
    t.join()
    os.close(out_w)
    data = b""
    while True:
        part = os.read(out_r, 65536)
        if not part:
            break
        data += part
    os.close(out_r)
    return data


def test_chatter_and_its_blank_lines_are_dropped_the_rest_passes():
    noise = (b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
             b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF: x.\n\n")
    got = _through([b"WARN a real warning\n", noise[:17], noise[17:], b"\rbatches 1  rows 10",
                    b"\rbatches 2  rows 20", noise, b"\nccl run: element 'x' stopped\n"])
    assert got == (b"WARN a real warning\n\rbatches 1  rows 10\rbatches 2  rows 20\n"
                   b"ccl run: element 'x' stopped\n")


def test_blank_lines_of_others_stay():
    assert _through([b"a\n\nb\n"]) == b"a\n\nb\n"


def test_known_harmless_spark_lines_are_dropped_others_kept():
    got = _through([b"26/11/22 10:52:23 WARN DAGScheduler: Failed to cancel job group 57. Cannot find\n",
                    b"26/11/22 10:52:23 ERROR TorrentBroadcast: Store broadcast broadcast_29 fail, x\n",
                    b"26/11/22 10:52:23 ERROR Executor: Exception in task 1.0\n"])
    assert got == b"26/11/22 10:52:23 ERROR Executor: Exception in task 1.0\n"



def test_once_muted_only_our_lines_pass_and_a_python_error_waits_to_be_muted():
    """When Spark's JVM dies under a run, the driver's threads print tracebacks, the first maybe a
    moment before the death shows: a Python error's first line waits for ``muted``."""
    dead = threading.Event()

    def dies_soon():
        threading.Timer(0.2, dead.set).start()
        time.sleep(0.5)
    got = _through([b"WARN before\n",
                    b"----------------------------------------\nException occurred during processing\n",
                    dies_soon, b"Traceback (most recent call last):\nEOFError\n",
                    b"ccl run: Spark's JVM ended\n"], muted=dead.is_set)
    assert got == b"WARN before\nccl run: Spark's JVM ended\n"


def test_a_python_error_that_is_not_muted_is_printed():
    text = b"Traceback (most recent call last):\nValueError: x\n"
    assert _through([text], muted=lambda: False) == text


def test_the_jvm_start_up_line_is_dropped_only_when_quiet():
    line = b"WARNING: Using incubator modules: jdk.incubator.vector\n"
    assert _through([line, b"ccl\n"], quiet=True) == b"ccl\n"
    assert _through([line, b"ccl\n"]) == line + b"ccl\n"


@pytest.mark.parametrize("pause", [0, 0.2], ids=["one read", "status line shown first"])
def test_the_stack_overflow_of_a_stream_thread_stopped_mid_batch_is_dropped(pause):
    """Whether the status line reaches the filter with the trace or is shown before it comes, it
    ends in a newline before the next line of ours."""
    trace = (b'Exception in thread "stream execution thread for ccl:trades [id = 6, runId = 9]" '
             b'java.lang.StackOverflowError\n'
             + b"\tat java.base/java.util.regex.Pattern$Loop.match(Pattern.java:4898)\n" * 1000
             + b"\t... 1024 more\n")
    got = _through([b"\rbatches 3  rows 150   ", lambda: time.sleep(pause), trace,
                    b"ccl run: done\n", b"\tat an indented line of others\n"])
    assert got == b"\rbatches 3  rows 150   \nccl run: done\n\tat an indented line of others\n"


def test_warnings_of_a_batch_cancelled_at_the_stop_are_dropped_others_kept():
    got = _through([
        b"26/11/26 14:11:05 WARN RocksDB: Error recursively deleting local dir /tmp/spark-6/x\n"
        b"java.lang.InterruptedException\n\tat java.base/java.lang.Object.wait(Native Method)\n",
        b"26/11/26 14:11:05 WARN TaskSetManager: [queryId = af904] [batchId = 5] Lost task 3.0 in "
        b"stage 34.0 (TID 109) (localhost executor driver): TaskKilled (Stage cancelled: "
        b"[SPARK_JOB_CANCELLED] Job 16 cancelled Query ccl:StockSession [id = af904]\n",
        b"26/11/26 14:11:05 WARN TaskSetManager: Lost task 1.0 in stage 3.0: java.io.IOException\n",
        b"\tat a.B.c(B.java:1)\n"])
    assert got == (b"26/11/26 14:11:05 WARN TaskSetManager: Lost task 1.0 in stage 3.0: "
                   b"java.io.IOException\n\tat a.B.c(B.java:1)\n")


def _query_error(name: bytes, python_error: bytes) -> bytes:
    """What Spark logs when a query's foreachBatch function raised ``python_error``."""
    traceback = (b"Traceback (most recent call last):\n"
                 b'  File "/x/py4j/clientserver.py", line 644, in _call_proxy\n'
                 b"    return_value = getattr(self.pool[obj_id], method)(*params)\n"
                 b"                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
                 b'  File "/x/runtime/project_query.py", line 150, in batch\n'
                 + python_error + b"\n")
    return (b"26/11/27 12:06:36 ERROR MicroBatchExecution: Query " + name
            + b" [id = 0d8c, runId = f900] terminated with error\n"
            b"org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFuncException: "
            b"[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function "
            b"in foreach batch sink. Reason: An exception was raised by the Python Proxy. Return "
            b"Message: " + traceback + b" SQLSTATE: 39000\n"
            b"\tat org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink.callBatchWriter"
            b"(ForeachBatchSink.scala:60)\n"
            b"\tat org.apache.spark.sql.execution.streaming.runtime.StreamExecution$$anon$1.run("
            b"StreamExecution.scala:236)\n"
            b"Caused by: py4j.Py4JException: An exception was raised by the Python Proxy. Return "
            b"Message: " + traceback + b"\n"
            b"\tat py4j.Protocol.getReturnValue(Protocol.java:476)\n\t... 34 more\n")


def test_the_error_of_a_batch_refused_at_the_stop_is_dropped_a_failure_is_kept_whole():
    """A batch Spark starts once the stop has begun raises BatchRefused (so that Spark does not
    commit it), and Spark logs the query's end as an error, the Python traceback in it: left
    out, the status line before it ended, the lines after it kept. A query that failed is
    printed as it came."""
    from runtime.quiet import REFUSED

    refused = _query_error(b"ccl:project", b"runtime.project_query.BatchRefused: " + REFUSED.encode())
    failed = _query_error(b"ccl:trades", b"ZeroDivisionError: division by zero")
    after = b"26/11/27 12:06:37 WARN Other: kept\nthe project's batch in flight did not end\n"
    assert _through([b"\rbatches 3  rows 150   ", refused[:700], refused[700:], after]) == (
        b"\rbatches 3  rows 150   \n" + after)
    assert _through([failed[:300], failed[300:], after]) == failed + after
    assert _through([refused + failed + b"ccl run: element 'trades' stopped\n"]) == (
        failed + b"ccl run: element 'trades' stopped\n")
    assert _through([failed.split(b"\tat ")[0]]) == failed.split(b"\tat ")[0]  # never decided
