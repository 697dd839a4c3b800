"""Parquet files of the run directory (runtime/parquet_files.py): complete or absent, read back as
written, dictionary-encoded where it pays."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from runtime.parquet_files import AtomicParquet, dictionary_columns, write_atomically


def _table() -> pa.Table:
    return pa.table({
        "__op": pa.array(["i", "u", None, "d"]),
        "n": pa.array([1, None, 3, 2**40], pa.int64()),
        "x": pa.array([1.5, -0.0, float("nan"), None]),
        "b": pa.array([b"\x00", None, b"ab", b""], pa.binary()),
        "s": pa.array([{"k": "a"}, None, {"k": None}, {"k": "z"}], pa.struct([("k", pa.string())])),
    })


def test_written_files_read_back_as_written(tmp_path):
    target = str(tmp_path / "d" / "f.parquet")
    table = _table()
    write_atomically(target, table)
    back = pq.read_table(target)
    assert back.schema == table.schema
    assert back.to_pylist()[:2] == table.to_pylist()[:2]  # (NaN != NaN: compared apart)
    assert back.column("x")[2].as_py() != back.column("x")[2].as_py()
    assert back.slice(3).to_pylist() == table.slice(3).to_pylist()
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["f.parquet"]


def test_only_strings_and_binaries_are_dictionary_encoded(tmp_path):
    table = _table()
    assert dictionary_columns(table.schema) == ["__op", "b"]
    out = AtomicParquet(str(tmp_path / "f.parquet"), table.schema)
    out.write(table)
    out.close()
    assert not (tmp_path / "f.parquet").exists()  # hidden until committed
    out.commit()
    meta = pq.ParquetFile(str(tmp_path / "f.parquet")).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert any("DICTIONARY" in e for e in encodings["__op"])
    assert not any("DICTIONARY" in e for e in encodings["n"] + encodings["x"])
