"""A stream output's ``NAME.csv`` lines kept in the run directory as its batches are written, so
that the end of a run copies them instead of reading and sorting the changelog.

An OUTPUT stream's (or delta stream's) ``NAME.csv`` is its changelog in :data:`runtime.changelog_order.ORDER`
(batch, sequence number, instance, sub-number): each batch's lines after the earlier batches'.
When a batch has written the element's changelog file, :func:`append_batch` appends the batch's
lines (sorted, formatted as :func:`runtime.csv_output.write_csv_tables` formats them) to
``RUN/appended/ELEMENT/rows.csv`` and a line ``BATCH END SIZE`` to its ``index`` (``END``: the
length of ``rows.csv`` after the batch, ``SIZE``: the changelog file's). A batch that runs again
(Spark replays the batch a crash or a stop cut short, with the same rows) first cuts both files
back to the batches before it, so a kill at any point leaves no line twice.

:func:`copy_appended` writes ``NAME.csv`` from them: the header, then ``rows.csv`` up to the last
batch counted (``upto``, :func:`runtime.outputs.last_complete`). It does so only when the index
names exactly the changelog's files up to there, with their sizes; otherwise (a run directory of
an older ccl, a batch whose lines could not be appended) the caller reads the changelog as
before. Nothing here decides what a run's outputs hold: the changelog and ``last_complete`` do.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Optional

from ccl.plan.model import Element

from .changelog_order import sorted_tables
from .csv_output import csv_header, write_csv_rows
from .frames import changelog_schema
from .run_dir import RunDirs
from .types import columns_of

log = logging.getLogger("ccl.runtime")

APPENDED = "appended"  # RUN/appended/ELEMENT/{rows.csv,index}
ROWS, INDEX = "rows.csv", "index"


def appends(element: Element) -> bool:
    """Whether ``element``'s ``NAME.csv`` lines are appended as its batches are written: an
    OUTPUT stream or delta stream (a window's file holds each key's last change, from the whole
    changelog; an error stream's changelog is written by the bad records' writer)."""
    return element.role == "output" and element.kind in ("stream", "delta stream")


@dataclass
class _Entry:
    batch: int
    end: int  # rows.csv's length after the batch
    size: int  # the batch's changelog file's size
    line_end: int  # index's length after the entry


_cache: dict[str, tuple[int, list[_Entry]]] = {}  # folder -> (index length, entries) this process wrote
_lock = threading.Lock()


def _read_index(folder: str) -> Optional[list[_Entry]]:
    """The entries of ``folder``'s index (a last line without its line feed, cut short by a
    kill, is left out); None when it has a line that does not parse."""
    try:
        with open(os.path.join(folder, INDEX), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    entries: list[_Entry] = []
    at = 0
    while True:
        nl = data.find(b"\n", at)
        if nl < 0:
            return entries
        try:
            batch, end, size = (int(x) for x in data[at:nl].split())
        except ValueError:
            return None
        at = nl + 1
        entries.append(_Entry(batch, end, size, at))


def _entries(folder: str) -> Optional[list[_Entry]]:
    """``folder``'s index entries: this process's own when the index is as it left it."""
    try:
        length = os.path.getsize(os.path.join(folder, INDEX))
    except OSError:
        length = -1
    cached = _cache.get(folder)
    if cached is not None and cached[0] == length:
        return cached[1]
    return _read_index(folder)


def append_batch(dirs: RunDirs, element: Element, batch_id: int, rows: Optional[Any] = None) -> None:
    """Append batch ``batch_id``'s ``NAME.csv`` lines of ``element`` (see the module docstring),
    once its changelog file is written; ``rows``: the batch's changelog rows as an Arrow table
    (None: read from the file). Nothing when the batch has no changelog file. A failure is
    logged, not raised: the index is removed, and the end of the run reads the changelog."""
    changelog = dirs.batch_file("changelog", element.name, batch_id, "parquet")
    folder = dirs.of(APPENDED, element.name)
    try:
        size = os.path.getsize(changelog)
    except FileNotFoundError:
        return
    with _lock:
        try:
            _append(folder, element, batch_id, rows, changelog, size)
        except Exception as exc:  # the outputs stay exact: they read the changelog instead
            log.warning("%s: batch %d's output lines were not appended (%s); its NAME.csv will be "
                        "made from the changelog", element.name, batch_id, exc)
            _cache.pop(folder, None)
            try:
                os.remove(os.path.join(folder, INDEX))
            except OSError:
                pass


def _append(folder: str, element: Element, batch_id: int, rows: Optional[Any], changelog: str,
            size: int) -> None:
    if rows is None:
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(changelog_schema(columns_of(element)), timezone="UTC")
        rows = pq.read_table(changelog).select(schema.names).cast(schema)
    os.makedirs(folder, exist_ok=True)
    body, index = os.path.join(folder, ROWS), os.path.join(folder, INDEX)
    entries = _entries(folder)
    body_size = os.path.getsize(body) if os.path.exists(body) else 0
    if entries is None or (entries and entries[-1].end > body_size):  # not ours to go on from
        entries = []
    while entries and entries[-1].batch >= batch_id:  # a batch run again, and any after it
        entries.pop()
    end = entries[-1].end if entries else 0
    line_end = entries[-1].line_end if entries else 0
    with open(body, "a", encoding="utf-8", newline="") as f:
        f.truncate(end)
        write_csv_rows(f, columns_of(element), sorted_tables([rows]),
                       opcodes=element.kind == "delta stream")
    end = os.path.getsize(body)
    line = f"{batch_id} {end} {size}\n".encode()
    with open(index, "ab") as f:
        f.truncate(line_end)
        f.write(line)
    entries.append(_Entry(batch_id, end, size, line_end + len(line)))
    _cache[folder] = (line_end + len(line), entries)


def copy_appended(dirs: RunDirs, element: Element, path: str, files: list[tuple[int, str]],
                  upto: Optional[int]) -> bool:
    """Write ``element``'s ``NAME.csv`` at ``path`` (to ``path.tmp``, renamed) from its appended
    lines up to batch ``upto`` (None: all), when they are those of the changelog's ``files``
    ((batch, path) in batch order, up to ``upto``); False, writing nothing, when they are not."""
    folder = dirs.of(APPENDED, element.name)
    with _lock:
        entries = _read_index(folder)
    if entries is None:
        return False
    kept = [e for e in entries if upto is None or e.batch <= upto]
    try:
        sizes = [(batch, os.path.getsize(p)) for batch, p in files]
    except OSError:
        return False
    if sizes != [(e.batch, e.size) for e in kept]:
        return False
    end = kept[-1].end if kept else 0
    body = os.path.join(folder, ROWS)
    if end and (not os.path.exists(body) or os.path.getsize(body) < end):
        return False
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(csv_header(columns_of(element), opcodes=element.kind == "delta stream")
                  .encode("utf-8"))
        if end:
            with open(body, "rb") as f:
                left = end
                while left:
                    chunk = f.read(min(left, 8 << 20))
                    if not chunk:
                        break
                    out.write(chunk)
                    left -= len(chunk)
    os.replace(tmp, path)
    return True
