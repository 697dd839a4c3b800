"""Bad records: rows an element cannot process go to a JSON-lines output with their reason.

Called per micro-batch (from ``foreachBatch``, where the batch is a static DataFrame): the rows whose
reason column is set are written as JSON lines ``{"element", "reason", "batch", "row"}``, counted
per reason, and logged as one warning per element per batch; the other rows go on.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .partition_fn import BAD_REASON, INSTANCE

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
