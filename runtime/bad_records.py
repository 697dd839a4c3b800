"""Bad records: rows an element cannot process, kept with their reason.

An element's bad records of a micro-batch go to ``bad/ELEMENT/batch-N.jsonl`` (one JSON line
``{"element", "reason", "row"}`` each, counted per reason; :func:`write_bad`, from the ``__info``
column of a bad row, :func:`info_column`) and to the error streams ON the element, which get them
as rows (:func:`error_writer`, docs/runtime.md "Error streams").

:func:`split_bad_records` is the older form over a frame with a partition function's reason
column (appended as JSON lines ``{"element", "reason", "batch", "row"}``, logged as one warning
per element per batch); no runtime path calls it (tests/test_partition_fn_spark.py does).
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ccl.plan.model import Element, Plan

from .file_names import file_name
from .partition_fn import BAD_REASON, INSTANCE
from .processor import BATCH, INFO, INST, KIND, OP, PORT, RAW, SEQ, SRC, SUB, WHY
from .run_dir import RunDirs
from .run_setup import atomic_json
from .topology import is_input, ports_of
from .types import column

log = logging.getLogger("ccl.runtime")


@dataclass
class BadRecordCounts:
    """Bad records of one element, by reason, over the batches seen so far."""

    element: str
    by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())


def split_bad_records(batch: DataFrame, element: str, batch_id: int, path: str,
                      counts: BadRecordCounts) -> DataFrame:
    """The good rows of ``batch``; bad ones are appended to ``path`` and added to ``counts``.

    ``batch`` is persisted (the partition function must not run once per use); the caller calls
    ``batch.unpersist()`` when it is done with the returned rows.
    """
    batch = batch.persist()
    bad = batch.where(F.col(BAD_REASON).isNotNull())
    per_reason = {r[BAD_REASON]: r["count"] for r in bad.groupBy(BAD_REASON).count().collect()}
    if per_reason:
        row_columns = [c for c in batch.columns if c not in (INSTANCE, BAD_REASON)]
        (bad.select(F.lit(element).alias("element"), F.col(BAD_REASON).alias("reason"),
                    F.lit(batch_id).alias("batch"),
                    F.struct(*[F.col(f"`{c}`") for c in row_columns]).alias("row"))
         .write.mode("append").json(path))
        for reason, count in per_reason.items():
            counts.by_reason[reason] = counts.by_reason.get(reason, 0) + count
        total = sum(per_reason.values())
        log.warning("%s: %d bad record(s) in batch %d (%s)", element, total, batch_id,
                    "; ".join(f"{r}: {c}" for r, c in sorted(per_reason.items())))
    return batch.where(F.col(BAD_REASON).isNull())


def info_column(reason: Column, row: Column) -> Column:
    """The ``__info`` JSON of a bad record (as runtime.processor.bad_info writes it)."""
    return F.to_json(F.struct(reason.alias("reason"), row.alias("row")))


def why_info(frame: DataFrame) -> Column:
    """The ``__info`` of a row of ``frame`` (the processor's input layout) with a ``__why``: that
    reason and the row's element columns."""
    meta = {SEQ, SUB, SRC, OP, WHY, RAW, INST, KIND, BATCH, PORT}
    return info_column(F.col(WHY), F.struct(*[column(c) for c in frame.columns if c not in meta]))


def write_bad(bad: DataFrame, element: str, path: str,
              errors: Callable[[list[dict], int], None], batch_id: int) -> dict[str, int]:
    """Bad records as JSON lines (element, reason, row), also handed to ``errors`` (the error
    streams on the element); their counts by reason."""
    return write_bad_infos([r[INFO] for r in bad.select(INFO).collect()], element, path, errors,
                           batch_id)


def write_bad_infos(infos: list[str], element: str, path: str,
                    errors: Callable[[list[dict], int], None], batch_id: int) -> dict[str, int]:
    """:func:`write_bad` for the ``__info`` texts of the bad records."""
    if not infos:
        return {}
    counts: dict[str, int] = {}
    records = []
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for info in infos:
            record = {"element": element, **json.loads(info)}
            counts[record["reason"]] = counts.get(record["reason"], 0) + 1
            records.append(record)
            f.write(json.dumps(record, sort_keys=True) + "\n")
    os.replace(path + ".tmp", path)
    errors(records, batch_id)
    return counts


# Our errorCode values (ESP's own table is not known): see docs/runtime.md "Error streams".
ERROR_UNREADABLE, ERROR_KEY, ERROR_PARTITION, ERROR_COMPUTATION = 1, 2, 3, 4


def error_code(reason: str, row: object) -> int:
    """The errorCode of a bad record with ``reason`` and ``row``."""
    if (isinstance(row, dict) and "line" in row and len(row) == 1) or reason.startswith(
            ("column ", "expected ", "unknown opcode")):
        return ERROR_UNREADABLE
    if reason.startswith(("duplicate key", "no row with key")):
        return ERROR_KEY
    if "partition" in reason:
        return ERROR_PARTITION
    return ERROR_COMPUTATION


def error_writer(element: Element, plan: Plan, dirs: RunDirs) -> Callable[[list[dict], int], None]:
    """What writes an element's bad records of one batch into the error streams ON it: per error
    stream a changelog file ``batch-N-ELEMENT.parquet`` (and its counters), one insert per bad
    record. ``errorRecord`` is the record as JSON (UTF-8 bytes), ``sourceStreamName`` the element
    itself for an input element, else its source when it has one, ``errorTime`` the time written."""
    monitors = [e for e in plan.elements
                if e.kind == "error stream" and element.name in (e.error_sources or ())]
    if not monitors:
        return lambda records, batch_id: None
    sources = {src for _, src in ports_of(element)}
    source = element.name if is_input(element) else (sources.pop() if len(sources) == 1 else None)

    def write(records: list[dict], batch_id: int) -> None:
        import datetime as dt

        import pyarrow as pa
        import pyarrow.parquet as pq

        now = dt.datetime.now(dt.timezone.utc)
        n = len(records)
        table = pa.table({
            BATCH: pa.array([batch_id] * n, pa.int64()), INST: pa.array([0] * n, pa.int32()),
            SEQ: pa.array(range(n), pa.int64()), SUB: pa.array([0] * n, pa.int64()),
            OP: pa.array(["i"] * n, pa.string()),
            "errorCode": pa.array([error_code(r["reason"], r["row"]) for r in records], pa.int32()),
            "errorRecord": pa.array([json.dumps(r["row"], sort_keys=True).encode() for r in records],
                                    pa.binary()),
            "errorMessage": pa.array([r["reason"] for r in records], pa.string()),
            "errorStreamName": pa.array([element.name] * n, pa.string()),
            "sourceStreamName": pa.array([source] * n, pa.string()),
            "errorTime": pa.array([now] * n, pa.timestamp("us", tz="UTC"))})
        for monitor in monitors:
            stem = f"batch-{batch_id:08d}-{file_name(element.name)}"
            target = os.path.join(dirs.of("changelog", monitor.name), stem + ".parquet")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            hidden = os.path.join(os.path.dirname(target), "." + stem + ".tmp")  # unseen by readers
            pq.write_table(table, hidden)
            os.replace(hidden, target)
            atomic_json(os.path.join(dirs.of("stats", monitor.name), stem + ".json"),
                        {"rows_in": n, "rows_out": {"i": n}, "bad": {}, "instances": {"0": n}})
    return write
