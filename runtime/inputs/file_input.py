"""Input files through Spark's own file source: the query of a native input stream.

Spark's file source (format ``binaryFile``, whose content column is never read) decides which new
files each micro-batch takes and logs them in the query's checkpoint, so a replayed batch takes the
same files. The batch function (:func:`batch_rows`, on the driver) takes the batch's files with
their numbers in the project's order of arrival (:class:`runtime.inputs.listing.Arrivals`, see
:func:`file_numbers`), cuts them into slices (:func:`runtime.inputs.csv_text.file_slices`) and parses the slices on the executors
(``mapInArrow`` over the slice list, :func:`runtime.inputs.source.read_partition`): the rows and
sequence numbers of the ``ccl_csv`` source, without a Python data source (whose planning and read
path cost 0.3-0.6 s more per million rows here, see docs/io.md).

Only a query that feeds ``foreachBatch`` can read files so: an element on the per-instance path
needs its rows as a stream and keeps the ``ccl_csv`` source. Files are taken as the ``ccl_csv``
source takes them (:func:`runtime.inputs.listing.wanted`: the top level of the directory, no hidden
or ``*.tmp`` files); with ``max_files_per_batch`` Spark takes the oldest files first.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Iterator, Optional
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ccl.plan.model import Element

from .csv_text import DEFAULT_SLICE_BYTES, file_slices, output_schema
from .formats import CsvFormat
from .listing import Arrivals, FileSpec, wanted
from .source import read_partition
from .values import column_parser

# binaryFile's fixed schema; only ``path`` is selected, so no file content is read by the JVM
_LISTING = T.StructType([T.StructField("path", T.StringType()),
                         T.StructField("modificationTime", T.TimestampType()),
                         T.StructField("length", T.LongType()),
                         T.StructField("content", T.BinaryType())])
_SLICES = "file_no long, path string, start long, end long, first_line long"
# Spark keeps files it has seen for this long (relative to the newest) and ignores older new
# ones by default (7 days): a file copied in with an old modification time would be lost.
_MAX_FILE_AGE = "36500d"


def input_format(element: Element, adapter: dict) -> CsvFormat:
    """The parsing format of ``adapter`` properties for ``element``; ValueError (with the reason)
    for a delimiter or date format the reader cannot use."""
    fmt = CsvFormat.from_options(adapter, element.name or None)
    for c in element.columns:
        column_parser(c.type, fmt)
    return fmt


def element_columns(element: Element) -> list[list[str]]:
    """``element``'s columns as the parsers take them: ``[[name, ccl_type], ...]``."""
    return [[c.name, c.type] for c in element.columns]


def file_stream(spark: SparkSession, files: FileSpec, max_files: Optional[int] = None) -> DataFrame:
    """The stream of new file paths under ``files.dir`` (all of them: :func:`batch_rows` keeps
    the wanted ones). A missing directory is made (Spark's source needs it; the ``ccl_csv``
    source waits for it to appear); OSError when it cannot be."""
    os.makedirs(files.dir, exist_ok=True)
    reader = (spark.readStream.format("binaryFile").schema(_LISTING)
              .option("maxFileAge", _MAX_FILE_AGE)
              # no partition discovery: subdirectories named like ``x=1`` next to the files made
              # Spark fail the query ("Conflicting directory structures")
              .option("recursiveFileLookup", True))
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    return reader.load(listed_path(files)).select("path")


def listed_path(files: FileSpec) -> str:
    """What Spark's file source lists for ``files``: its directory, or for one named file a glob
    matching that file only. Listing the file's directory instead listed everything under it at
    every poll, and took every file written there as new: a run whose checkpoint was beside the
    file (``--input Ref=ref.csv --checkpoint ck``) ran one more batch after each batch, for the
    files that batch wrote. A glob, not the file's path: Spark refuses to start on a path that does
    not exist, and the file may come later."""
    directory = _glob_escaped(os.path.abspath(files.dir))
    name = files.file
    at = next((i for i, c in enumerate(name or "") if c.isascii() and c.isalnum()), None)
    # no character to make a one-letter class of, or a colon in its name or in a name beside it
    # (Hadoop's glob takes ``0:`` or ``:`` for a URI scheme and fails the query; its directory
    # listing does not): the directory
    if name is None or at is None or ":" in name or _colon_beside(files.dir):
        return directory
    return (directory + "/" + _glob_escaped(name[:at]) + "[" + name[at] + "]"
            + _glob_escaped(name[at + 1:]))


def _colon_beside(directory: str) -> bool:
    """Whether ``directory`` holds a name with a colon (a file that comes later is not seen)."""
    try:
        return any(":" in entry for entry in os.listdir(directory))
    except OSError:
        return False


def _glob_escaped(path: str) -> str:
    """``path`` with Hadoop's glob characters escaped: Spark's file source reads its path as a
    glob, so a directory called ``in [1]`` would match nothing."""
    return "".join("\\" + c if c in "\\{}[]*?" else c for c in path)


def local_path(path: str) -> str:
    """A local path for a path Spark lists (``file:/a/b c.csv``, possibly percent-encoded; not
    parsed as a URL, where ``?`` and ``#`` would start a query or fragment)."""
    local = re.sub(r"^file:(//)?", "", path)
    return local if os.path.exists(local) else unquote(local)


def batch_rows(spark: SparkSession, element: Element, files: FileSpec, fmt: CsvFormat,
               numbers: dict[str, int], slice_bytes: int = DEFAULT_SLICE_BYTES) -> DataFrame:
    """The parsed rows of the files ``numbers`` (by name: those of one micro-batch of
    :func:`file_stream` that the input reads, see :func:`file_numbers`) in the ``ccl_csv``
    source's schema."""
    slices = numbered_slices(files, fmt, numbers, slice_bytes)
    columns = element_columns(element)
    schema = output_schema(columns)
    listing = spark.createDataFrame(spark.sparkContext.parallelize(slices, max(len(slices), 1)),
                                    _SLICES)
    return listing.mapInArrow(_parser(json.dumps(columns), fmt, schema), schema)


def read_paths(files: FileSpec, paths: list[str]) -> list[str]:
    """The local paths, among ``paths`` (a batch of :func:`file_stream`, which lists the whole
    directory tree), of the files the input reads: in ``files.dir`` itself, not a subdirectory,
    and :func:`wanted` by it."""
    top = os.path.realpath(files.dir)
    return [p for p in map(local_path, paths)
            if os.path.realpath(os.path.dirname(p)) == top and wanted(files, os.path.basename(p))]


def file_numbers(arrivals: Arrivals, batch: list[tuple[str, FileSpec, list[str]]]
                 ) -> dict[str, dict[str, int]]:
    """Per input element of ``batch`` (``(element, files, paths)``: the paths of one micro-batch
    of :func:`file_stream` of each input, in the project's order of inputs), the files it reads
    (:func:`read_paths`) with their numbers in the order they arrived (``arrivals``)."""
    return arrivals.numbers([(element, files.dir,
                              sorted({os.path.basename(p) for p in read_paths(files, paths)}))
                             for element, files, paths in batch])


def numbered_slices(files: FileSpec, fmt: CsvFormat, numbers: dict[str, int],
                    slice_bytes: int = DEFAULT_SLICE_BYTES) -> list[tuple[int, str, int, int, int]]:
    """The slices ``(file_no, path, start, end, first_line)`` of the files ``numbers`` (their
    numbers by name), in the order of their numbers."""
    slices = []
    for nm, no in sorted(numbers.items(), key=lambda item: item[1]):
        path = os.path.join(files.dir, nm)
        for start, end, first_line in file_slices(path, 0 if fmt.whole_files else slice_bytes):
            slices.append((no, os.path.abspath(path), start, end, first_line))
    return slices


def rows_here(element: Element, files: FileSpec, fmt: CsvFormat, numbers: dict[str, int]) -> Any:
    """:func:`batch_rows` parsed here, in this process (a small batch): an Arrow table of the
    ``ccl_csv`` source's schema."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    columns = element_columns(element)
    arrow = to_arrow_schema(output_schema(columns), timezone="UTC")
    batches = [batch for file_no, path, start, end, first_line
               in numbered_slices(files, fmt, numbers)
               for batch in read_partition(path, columns, fmt, file_no, start, end,
                                           first_line, arrow)]
    return pa.Table.from_batches(batches, schema=arrow)


def _parser(columns_json: str, fmt: CsvFormat, schema: T.StructType) -> Any:
    """The ``mapInArrow`` function parsing slices (it travels to the executors pickled)."""
    def parse(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema
        columns = json.loads(columns_json)
        arrow = to_arrow_schema(schema, timezone="UTC")
        for batch in batches:
            for file_no, path, start, end, first_line in zip(
                    *[batch.column(i).to_pylist() for i in range(5)]):
                yield from read_partition(path, columns, fmt, file_no, start, end, first_line, arrow)
    return parse
