"""The streams an element's query reads, in the processor's frame layout (runtime/processor.py):
an input element's rows from its files (the ``ccl_csv`` source, or Spark's file source for a
native input stream), and a derived element's sources' changelogs."""
from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.plan.model import Element, Plan

from .built_once import once
from .native_stages import native_input
from .processor import BATCH, INST, OP, RAW, SEQ, SRC, SUB, WHY
from .run_dir import RunDirs
from .run_setup import RunError, RunOptions, element_files
from .types import column, columns_of, struct


def changelog_schema(columns: Sequence[Sequence[str]]) -> T.StructType:
    """The schema of the changelog files of an element of ``columns`` (``(name, type)`` pairs)."""
    meta = [T.StructField(BATCH, T.LongType()), T.StructField(INST, T.IntegerType()), T.StructField(SEQ, T.LongType()),
            T.StructField(SUB, T.LongType()), T.StructField(OP, T.StringType())]
    return T.StructType(meta + struct(columns).fields)


def read_changelog(spark: SparkSession, dirs: RunDirs, element: Element,
                   max_files: Optional[int] = None) -> DataFrame:
    """An element's changelog as a stream (``max_files`` batch files per micro-batch)."""
    path = dirs.of("changelog", element.name)
    os.makedirs(path, exist_ok=True)
    reader = spark.readStream.schema(changelog_schema(columns_of(element)))
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    return reader.parquet(path)


def input_frame(spark: SparkSession, plan: Plan, element: Element, options: RunOptions,
                dirs: RunDirs) -> Optional[DataFrame]:
    """An input element's rows from its CSV files, in the processor's frame layout (rows that do
    not parse have ``__why`` and ``__raw``). None when no file is bound to the element."""
    from .inputs.source import read_input

    files, props = element_files(element, plan, options)
    if files is None:
        return None
    opts = {k: str(v) for k, v in props.items()}
    opts["manifest_dir"] = dirs.of("sources", element.name)
    if options.max_files_per_batch:
        opts["max_files_per_batch"] = str(options.max_files_per_batch)
    try:
        df = read_input(spark, element, files, options=opts)
    except ValueError as exc:  # a delimiter or date format the reader cannot use
        raise RunError(f"input of '{element.name}': {exc}") from None
    return frame_layout(df)


def frame_layout(df: DataFrame) -> DataFrame:
    """Rows of an input source (runtime/inputs/source.py) in the processor's frame layout."""
    return df.select(*_layout_columns(tuple(df.columns)))


@once
def _layout_columns(names: tuple[str, ...]) -> list[Column]:
    renamed = {"__bad": WHY, "__raw": RAW}
    return ([column(c).alias(renamed[c]) if c in renamed else column(c) for c in names]
            + [F.lit(0).alias(SRC), F.lit(0).cast("long").alias(SUB)])


def input_files_stream(spark: SparkSession, plan: Plan, element: Element, options: RunOptions,
                       dirs: RunDirs) -> Optional[tuple[DataFrame, Callable[[DataFrame], DataFrame]]]:
    """For an input element read through Spark's file source (runtime/inputs/file_input.py): the stream
    of its new files and the function from one batch of it to the batch's processor output rows
    (:func:`runtime.native_stages.native_input`); None when no file is bound to the element."""
    from .inputs.file_input import batch_rows, file_numbers, file_stream, input_format
    from .inputs.listing import Arrivals

    files, props = element_files(element, plan, options)
    if files is None:
        return None
    try:
        fmt = input_format(element, {k: str(v) for k, v in props.items()})
    except ValueError as exc:  # a delimiter or date format the reader cannot use
        raise RunError(f"input of '{element.name}': {exc}") from None

    arrivals = Arrivals(dirs.arrivals)

    def rows(batch: DataFrame) -> DataFrame:
        name = element.name
        numbers = file_numbers(arrivals, [(name, files, [r[0] for r in batch.collect()])])
        parsed = batch_rows(batch.sparkSession, element, files, fmt, numbers[name])
        return native_input(element, frame_layout(parsed))
    try:
        return file_stream(spark, files, options.max_files_per_batch), rows
    except OSError as exc:  # the directory is missing and cannot be made
        raise RunError(f"input of '{element.name}': {exc}") from None


def changelog_frame(rows: DataFrame, cols: list[str], keep: tuple[str, ...] = ()) -> DataFrame:
    """Changelog rows (``__inst, __seq, __sub, __op`` and ``cols``) in the processor's frame layout
    (and the columns ``keep`` as they are)."""
    return rows.select(*_changelog_columns(tuple(cols), keep))


@once
def _changelog_columns(cols: tuple[str, ...], keep: tuple[str, ...]) -> list[Column]:
    return [F.col(SEQ), F.col(SUB), F.col(INST).alias(SRC), F.col(OP), *[column(c) for c in cols],
            F.lit(None).cast("string").alias(WHY), F.lit(None).cast("string").alias(RAW),
            *[F.col(c) for c in keep]]


def upstream_frame(spark: SparkSession, dirs: RunDirs, source: Element,
                   max_files: Optional[int] = None) -> DataFrame:
    """A source element's changelog as a stream, in the processor's frame layout."""
    return changelog_frame(read_changelog(spark, dirs, source, max_files),
                           [c.name for c in source.columns])
