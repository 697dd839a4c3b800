"""CSV input files as a Spark stream with replay-stable sequence numbers (the ``ccl_csv`` source).

An input adapter of type ``toolkit_file_csv_input`` (ESP's DSV file input) becomes
:func:`read_input`: a streaming DataFrame with the columns ``__seq`` (long), ``__op`` (one letter
``i u d p s``), ``__bad`` (the reason a row is bad, null for good rows), ``__raw`` (the original line
of a bad row, else null), then the element's columns typed as in :mod:`runtime.types`.

Files: one file, or every file of a directory matching a glob, including files that appear later.
New files are picked up by later micro-batches, sorted by name within one directory listing. A file
is read once, whole, when it is first seen: writers must write it under another name (one starting
with ``.`` or ``_``, or ending in ``.tmp``; those are ignored) and rename it when complete.

A batch has one Spark partition per file, or per slice of a file larger than ``slice_bytes``
(default 4 MiB) without quote characters (cut just after a newline).

The reader parses a slice in one of two ways, with the same rows either way:

* the fast path, :func:`runtime.inputs.csv_arrow.parse_slice_arrow`: pyarrow's CSV reader and compute
  kernels (C++) parse the whole slice into one arrow table, yielded in RecordBatches of
  ``FAST_BATCH_ROWS``. It takes only slices it handles exactly like the Python path: no quote
  character, blank line, bare ``\r`` or invalid UTF-8, every row with the header's number of
  fields and a known opcode, every value in a strict plain form of its type (see that module), no
  binary column and no date/timestamp format option for a date-time column. For anything else it
  answers None, for the whole slice, and the reader uses
* the Python path, :func:`parse_file_text` (``csv.reader`` and the per-field parsers of
  :func:`column_parser`), about ten times slower, which also produces the bad rows. It is the
  reference: tests compare the fast path with it row for row. Its rows become RecordBatches of
  ``ARROW_BATCH_ROWS`` (faster than tuples, see ``bench/csv_source.py``), or tuples with the
  option ``rows_as_tuples`` (which always takes this path).

Sequence numbers: ``__seq = file_no * 2**32 + line_no`` where ``file_no`` is the file's place in the
discovery list (0-based) and ``line_no`` the 1-based physical line where the record starts. The
discovery list lives in the offsets (``{"files": [...]}``) or, with the option ``manifest_dir``, in
an append-only manifest file there (offsets are then ``{"count": n}``), so a replayed micro-batch
reads the same files with the same numbers whatever the directory looks like at replay time.

The parsing here (:class:`CsvFormat`, :func:`parse_file_text`) runs without Spark; the data source
classes import pyspark lazily enough for the Python worker, which gets everything from the options.
The fast path needs pyarrow (which pyspark's arrow support needs anyway).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ccl.plan.model import Element

from .csv_text import (ARROW_BATCH_ROWS, DEFAULT_SLICE_BYTES, Row, file_slices, output_schema,
                       parse_file_text, read_slice_bytes, rows_to_arrow)
from .formats import CsvFormat, property_flag
from .values import column_parser
from .listing import FileSpec, Manifest, list_new_files

SOURCE_NAME = "ccl_csv"
FAST_BATCH_ROWS = 65536  # rows per RecordBatch of the pyarrow fast path (runtime/inputs/csv_arrow.py)


def read_partition(path: str, columns: Sequence[Sequence[str]], fmt: CsvFormat, file_no: int,
                   start: int, end: int, first_line: int, schema: Any = None) -> Iterator[Any]:
    """The rows of bytes ``start..end`` of the file at ``path`` (a slice of :func:`file_slices`,
    ``first_line`` lines into the file, numbered ``file_no``): pyarrow RecordBatches of the arrow
    ``schema`` (the fast path when it takes the slice, else the Python path's rows converted), or
    with no ``schema`` tuples of the Python path."""
    data, header = read_slice_bytes(path, fmt, start, end, columns)
    rows: Iterator[Row]
    if fmt.xml_list:
        from .xml_list import parse_xml_list
        rows = parse_xml_list(data.decode("utf-8", "replace"), columns, fmt, file_no)
    elif fmt.json:
        from .json_rows import parse_json_text
        rows = parse_json_text(data.decode("utf-8", "replace"), columns, fmt, file_no)
    else:
        if schema is not None:
            from .csv_arrow import parse_slice_arrow
            table = parse_slice_arrow(data, columns, fmt, file_no, first_line=first_line,
                                      header=header, schema=schema)
            if table is not None:
                for batch in table.to_batches(max_chunksize=FAST_BATCH_ROWS):
                    if batch.num_rows:
                        yield batch
                return
        rows = parse_file_text(data.decode("utf-8", "surrogateescape"), columns, fmt, file_no,
                               first_line=first_line, header=header)
    if schema is None:
        yield from rows
        return
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= ARROW_BATCH_ROWS:
            yield rows_to_arrow(chunk, schema)
            chunk = []
    if chunk:
        yield rows_to_arrow(chunk, schema)


# --------------------------------------------------------------------------------------------------
# The Spark data source
# --------------------------------------------------------------------------------------------------

def _make_source_classes() -> tuple[type, type]:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamReader,
        InputPartition,
    )
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxFiles,
        SupportsTriggerAvailableNow,
    )

    class FilePartition(InputPartition):
        def __init__(self, file_no: int, path: str, start: int, end: int, first_line: int) -> None:
            super().__init__((file_no, path, start, end, first_line))
            self.file_no, self.path = file_no, path
            self.start, self.end, self.first_line = start, end, first_line

    class CclCsvStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        """Offsets ``{"files": [names in discovery order]}`` or, with a manifest, ``{"count": n}``."""

        def __init__(self, schema: Any, options: dict) -> None:
            self.schema = schema
            self.columns = json.loads(options["columns"])
            self.spec = FileSpec(options["dir"], options.get("file") or None,
                                 options.get("pattern") or None)
            self.fmt = CsvFormat.from_options(json.loads(options.get("adapter") or "{}"),
                                              options.get("element") or None)
            self.max_files = int(options.get("max_files_per_batch") or 0)
            self.manifest_dir = options.get("manifest_dir") or None
            self.as_tuples = property_flag(options.get("rows_as_tuples", "false"))
            self.slice_bytes = int(options.get("slice_bytes") or DEFAULT_SLICE_BYTES)
            self.target: set[str] | None = None  # files present when AvailableNow began

        # driver side -----------------------------------------------------------------------
        def _names(self, offset: dict) -> list[str]:
            if "files" in offset:
                return list(offset["files"])
            return Manifest(self.manifest_dir).read()[:offset["count"]]  # type: ignore[arg-type]

        def _offset(self, names: list[str]) -> dict:
            return {"count": len(names)} if self.manifest_dir else {"files": names}

        def _discover(self, done: list[str]) -> list[str]:
            """``done`` (the files of the start offset), then the files known or found since, in
            discovery order (the manifest's order, or new names sorted)."""
            if self.manifest_dir:
                manifest = Manifest(self.manifest_dir)
                known = manifest.read()
                new = list_new_files(self.spec, known)
                manifest.append(new)
                return known + new
            return done + list_new_files(self.spec, done)

        def initialOffset(self) -> dict:
            return self._offset([])

        def getDefaultReadLimit(self) -> Any:
            return ReadMaxFiles(self.max_files) if self.max_files > 0 else ReadAllAvailable()

        def prepareForTriggerAvailableNow(self) -> None:
            self.target = set(list_new_files(self.spec, ()))

        def latestOffset(self, start: dict, limit: Any) -> dict:
            done = self._names(start)
            names = self._discover(done)
            end = len(names)
            if self.target is not None:  # Trigger.AvailableNow: only files present at its start
                end = len(done)
                while end < len(names) and names[end] in self.target:
                    end += 1
            if isinstance(limit, ReadMaxFiles) and limit.max_files > 0:
                end = min(end, len(done) + limit.max_files)
            return self._offset(names[:end])

        def partitions(self, start: dict, end: dict) -> Sequence[Any]:
            first = len(self._names(start))
            names = self._names(end)
            out = []
            for no in range(first, len(names)):
                path = os.path.join(self.spec.dir, names[no])
                slice_bytes = 0 if self.fmt.whole_files else self.slice_bytes
                for start_byte, end_byte, lines in file_slices(path, slice_bytes):
                    out.append(FilePartition(no, path, start_byte, end_byte, lines))
            return out

        def commit(self, end: dict) -> None:
            pass

        # worker side -----------------------------------------------------------------------
        def read(self, partition: Any) -> Iterator[Any]:
            schema = None
            if not self.as_tuples:
                from pyspark.sql.pandas.types import to_arrow_schema
                schema = to_arrow_schema(self.schema, timezone="UTC")
            return read_partition(partition.path, self.columns, self.fmt, partition.file_no,
                                  partition.start, partition.end, partition.first_line, schema)

    class CclCsvDataSource(DataSource):
        """``spark.readStream.format("ccl_csv")``: options ``columns`` (JSON ``[[name, type]]``),
        ``dir``, ``file``, ``pattern``, ``adapter`` (JSON of the adapter properties),
        ``max_files_per_batch``, ``manifest_dir``."""

        @classmethod
        def name(cls) -> str:
            return SOURCE_NAME

        def schema(self) -> Any:
            return output_schema(json.loads(self.options["columns"]))

        def streamReader(self, schema: Any) -> Any:
            return CclCsvStreamReader(schema, dict(self.options))

    return CclCsvDataSource, CclCsvStreamReader


_CLASSES: tuple[type, type] | None = None


def data_source_class() -> type:
    """The ``ccl_csv`` DataSource class (defined on first use, so that importing this module does
    not need pyspark)."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _make_source_classes()
    return _CLASSES[0]


def read_input(spark: Any, element: Element, files: FileSpec, *,
               options: dict | None = None) -> Any:
    """A streaming DataFrame of the CSV files ``files`` for the plan element ``element``:
    ``__seq, __op, __bad, __raw`` then the element's columns. ``options`` are the adapter properties (``delimiter``, ``hasHeader``,
    ``expectStreamNameOpcode``, ``dateFormat``, ``timestampFormat``; any case) plus the runtime's
    ``max_files_per_batch`` and ``manifest_dir``. Bad rows are returned, not dropped."""
    spark.dataSource.register(data_source_class())
    opts = dict(options or {})
    runtime_keys = {"max_files_per_batch", "manifest_dir", "rows_as_tuples", "slice_bytes"}
    runtime = {k.lower(): str(v) for k, v in opts.items() if k.lower() in runtime_keys}
    adapter = {k: v for k, v in opts.items() if k.lower() not in runtime_keys}
    CsvFormat.from_options(adapter)  # fail early on a bad delimiter or date format
    columns = [[c.name, c.type] for c in element.columns]  # (the source's option, as JSON)
    for _, t in columns:
        column_parser(t, CsvFormat.from_options(adapter))
    reader = (spark.readStream.format(SOURCE_NAME)
              .option("columns", json.dumps(columns))
              .option("element", element.name)
              .option("dir", os.path.abspath(files.dir))
              .option("file", files.file or "").option("pattern", files.pattern or "")
              .option("adapter", json.dumps(adapter)))
    for k, v in runtime.items():
        reader = reader.option(k, v)
    return reader.load()
