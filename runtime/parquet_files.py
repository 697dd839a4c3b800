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
        self.writer = pq.ParquetWriter(self.hidden, schema, use_dictionary=dictionary_columns(schema))

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


def dictionary_columns(schema: Any) -> list[str]:
    """The columns of an arrow ``schema`` worth Parquet's dictionary encoding: the string and
    binary ones (symbols, opcodes, keys repeat). Numbers are written plain: their dictionaries
    cost about as much time as the rest of the write and hardly make the files smaller."""
    import pyarrow as pa

    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]


def write_atomically(target: str, table: Any) -> None:
    """``table`` (an arrow Table) as the Parquet file ``target``."""
    out = AtomicParquet(target, table.schema)
    try:
        out.write(table)
    finally:
        out.close()
    out.commit()
