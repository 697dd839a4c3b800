"""Keep Spark's Python-worker chatter (and log lines about what the runtime does on purpose) off
the user's terminal.

PySpark's transformWithState driver worker prints "Streaming TransformWithStateInPandas Python
worker ..." lines (and a blank line after each) for every batch and group; the JVM copies them to
its standard error, which it inherits from us. :func:`filtered_stderr` puts a pipe on file
descriptor 2 before the JVM starts and copies everything but those lines to the real standard
error.
At the default log level it also drops the one start-up line the JVM prints itself (the rest are
kept out by runtime/log4j2.properties, see runtime.session), and once Spark's JVM has died under
a run, all but ccl's own lines.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from typing import Callable, Iterator

_NOISE = re.compile(rb"(Starting )?Streaming TransformWithStateInPandas Python worker")
# Log lines Spark writes for what the runtime does on purpose: streaming turns AQE off, until-idle
# runs stop queries between (empty) batches, a 100 ms poll trigger is "falling behind".
_HARMLESS = re.compile(
    rb"(ResolveWriteToStream: spark\.sql\.adaptive\.enabled is not supported"
    rb"|MicroBatchExecution: Disabling AQE"
    rb"|ProcessingTimeExecutor: Current batch is falling behind"
    rb"|DAGScheduler: Failed to cancel job group"
    rb"|TorrentBroadcast: Store broadcast \S+ fail"
    rb"|TransformWithStateInPySparkStateServer: No more data to read from the socket)")
# What Spark prints when a query is stopped in the middle of a batch (at the end of a run, after
# the wait for the batch to end): its stream thread may die with a StackOverflowError of a
# thousand lines, the batch's tasks are killed, and their interrupted threads warn, some with a
# stack. The batch runs again from the checkpoint (docs/runtime.md).
_STOPPED_BATCH = re.compile(
    rb'(Exception in thread "stream execution thread for ccl:[^"]*" java\.lang\.StackOverflowError'
    rb"|(\d\d/\d\d/\d\d \d\d:\d\d:\d\d )?WARN ("
    rb"TaskSetManager: .*TaskKilled \(Stage cancelled: \[SPARK_JOB_CANCELLED\] Job \d+ cancelled "
    rb"Query ccl:"
    rb"|BlockManager: (Putting block \S+ failed due to exception|Block \S+ could not be removed)"
    rb"|RocksDB: Error recursively deleting local dir"
    rb"|Shell: Interrupted while joining on))")
# The error Spark logs for a query that a batch refused at the stop ended (the refusal is how the
# stop keeps Spark from committing a batch it did not run: runtime.project_query.BatchGuard):
# held from its first line until the refusal's message shows it is one (dropped with the rest of
# the printed exception) or its first stack frame shows it is not (printed as it came).
REFUSED = "ccl: batch refused, its query is stopping"  # the message of BatchRefused
_QUERY_ERROR = re.compile(rb"(\d\d/\d\d/\d\d \d\d:\d\d:\d\d )?ERROR \S+: Query ccl:\S* "
                          rb"\[id = [^\]]*\] terminated with error$")
_HELD_ENDS = re.compile(rb"(\tat |\r|\d\d/\d\d/\d\d \d\d:\d\d:\d\d )")
_HELD_MOST = 500  # lines held at most (a Python traceback in an exception's message)
_STACK_LINE = re.compile(rb"(\s+(at |\.\.\. \d+ more)|java\.lang\.InterruptedException$|Caused by: )")
# The JVM's own warning about the Vector API module Spark adds: nothing a user can act on.
_STARTUP = re.compile(rb"^WARNING: Using incubator modules: ")
_OURS = b"ccl "  # "ccl run: ...", "ccl job: ..."
# How a Python error of the driver starts (a traceback, socketserver's, logging's). One printed
# as Spark's JVM dies can come a moment before its death shows: it waits that long to be muted.
_PYTHON_ERROR = re.compile(rb"(Traceback \(most recent call last\):|-{40}$|ERROR:)")
_SETTLE = 1.0
_PREFIXES = (b"Starting Streaming TransformWithStateInPandas", b"Streaming TransformWithStateInPandas")


def _maybe_noise(segment: bytes) -> bool:
    """Whether an unfinished line could still turn out to be chatter."""
    return any(p.startswith(segment) or segment.startswith(p) for p in _PREFIXES)


def copy_filtered(source: int, target: int, quiet: bool = False,
                  muted: Callable[[], bool] = lambda: False) -> None:
    """Copy file descriptor ``source`` to ``target`` until its end without Spark's chatter (with
    ``quiet``, without the JVM's own start-up line; once ``muted()``, only ccl's own lines), then
    close ``source``."""
    try:
        _filter(source, target, quiet, muted)
    except OSError:  # the real stderr was closed after the run: nothing left to show
        pass
    finally:
        os.close(source)


def _filter(source: int, target: int, quiet: bool, muted: Callable[[], bool]) -> None:
    pending, dropped, trace = b"", False, False
    open_line = False  # what was written ends in the middle of a line (our status line)
    held: list[bytes] = []  # a query's error, until it shows whether a refused batch ended it
    refusal = False  # dropping the rest of such an error
    marker = REFUSED.encode()
    while True:
        chunk = os.read(source, 65536)
        if not chunk:
            break
        pending += chunk
        lines = pending.split(b"\n")
        pending = lines.pop()
        out = []
        for line in lines:
            if not line.startswith(_OURS) and (muted() or _PYTHON_ERROR.match(line)
                                               and _becomes(muted, _SETTLE)):
                continue
            if refusal and (not line or line[:1].isspace() or line.startswith(b"Caused by: ")
                            or marker in line):
                continue
            refusal = False
            if held:
                if marker in line:
                    held, refusal = [], True
                    continue
                if not (line.startswith(_OURS) or _HELD_ENDS.match(line)
                        or len(held) >= _HELD_MOST):
                    held.append(line + b"\n")
                    continue
                out += held
                held = []
            error = _QUERY_ERROR.search(line)
            if error:
                _end_status_line(out, open_line, line[:error.start()])
                held = [line[error.start():] + b"\n"]
                continue
            if trace and _STACK_LINE.match(line):
                continue
            stopped = _STOPPED_BATCH.search(line)
            trace = stopped is not None
            if stopped:
                _end_status_line(out, open_line, line[:stopped.start()])
                continue
            found = _NOISE.search(line)
            if found:  # it may follow text that has no newline yet (our status line): keep that
                out.append(line[:found.start()])
                dropped = True   # print() added one blank line after it
                continue
            if dropped and not line:
                dropped = False
                continue
            if _HARMLESS.search(line) or (quiet and _STARTUP.match(line)):
                continue
            dropped = False
            out.append(line + b"\n")
        if (pending and not (trace or held or refusal)
                and not _maybe_noise(pending.rsplit(b"\r", 1)[-1])):
            out.append(pending)
            pending, dropped = b"", False
        data = b"".join(out)
        if data:
            os.write(target, data)
            open_line = not data.endswith(b"\n")
    if held:  # an error that never showed what it was: as it came
        os.write(target, b"".join(held))
    if pending and not _NOISE.search(pending):
        os.write(target, pending)


def _end_status_line(out: list[bytes], open_line: bool, head: bytes) -> None:
    """Before a line left out whose start ``head`` (our status line, when not empty) is kept:
    ``head`` and a newline, when there is one or what was written (``out``, else before it:
    ``open_line``) ends in the middle of a line."""
    written = b"".join(out)
    if head or (not written.endswith(b"\n") if written else open_line):
        out.append(head + b"\n")


def _becomes(condition: Callable[[], bool], within: float) -> bool:
    """Whether ``condition()`` is true now or turns true within ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@contextlib.contextmanager
def filtered_stderr(quiet: bool = False, muted: Callable[[], bool] = lambda: False
                    ) -> Iterator[None]:
    """Within the block, file descriptor 2 (and every process started in it) goes through the
    filter; afterwards it is the real standard error again. ``quiet``: Spark's start-up lines
    are left out too (see runtime.session.is_quiet). Once ``muted()`` is true only ccl's own
    lines pass: when Spark's JVM dies under a run, the driver's threads that were talking to it
    print tracebacks that say nothing more than the run's one line about it."""
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    copier = threading.Thread(target=copy_filtered, args=(read_end, real, quiet, muted), daemon=True)
    copier.start()
    try:
        yield
    finally:
        os.dup2(real, 2)      # our end of the pipe closes; the copier ends when the JVM's does
        copier.join(timeout=2.0)
        os.close(real)


def mute_stderr() -> None:
    """Send the rest of this process's standard error to /dev/null (after a run's last line,
    for threads still failing as they find Spark's JVM gone)."""
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
