"""Parquet files written by a task on an executor, complete or not at all: under a hidden name
beside the target, renamed when closed (the changelogs and state snapshots of the run directory,
which readers list while a batch is being written)."""
from __future__ import annotations

import os
import uuid
from typing import Any


class AtomicParquet:
    """A Parquet file being written to ``target`` with the arrow ``schema``."""

    def __init__(self, target: str, schema: Any) -> None:
        import pyarrow.parquet as pq

        os.makedirs(os.path.dirname(target), exist_ok=True)
        self.target = target
        self.hidden = os.path.join(os.path.dirname(target), f".{uuid.uuid4().hex}.tmp")
        self.writer = pq.ParquetWriter(self.hidden, schema)

    def write(self, data: Any) -> None:
        """Append a RecordBatch or Table."""
        if hasattr(data, "to_batches"):
            self.writer.write_table(data)
        else:
            self.writer.write_batch(data)

    def close(self) -> None:
        """Close the file (still hidden)."""
        self.writer.close()

    def commit(self) -> None:
        """Give the closed file its name."""
        os.replace(self.hidden, self.target)


def write_atomically(target: str, table: Any) -> None:
    """``table`` (an arrow Table) as the Parquet file ``target``."""
    out = AtomicParquet(target, table.schema)
    try:
        out.write(table)
    finally:
        out.close()
    out.commit()
