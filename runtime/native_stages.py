"""Native stages: elements whose processor output Spark expressions compute, without the engine
(the plan's ``native`` decision, ccl/plan/physical.py): an input stream read natively, a stateless
stream over one stream (its WHERE as a Column), and what a native aggregation's batch writer
(runtime/native_agg.py) gets."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ccl.plan.model import Element

from .bad_records import info_column
from .built_once import once
from .lowering_spark import condition_column
from .engine.changes import OPS
from .processor import INFO, INST, KIND, OP, RAW, SEQ, SUB, WHY
from .topology import with_instance
from .types import column, columns_of


def native_input(element: Element, frame: DataFrame) -> DataFrame:
    """An input stream's processor output computed by Spark expressions (the plan's native
    ``input`` path): what
    the engine's input stage does for a stream, row by row. Every input row gives one output row:
    ``row`` (an insert, upsert or update, emitted as an insert), ``bad`` (does not parse, unknown
    opcode) or ``skip`` (a delete or safedelete, which a stream drops; counted as received)."""
    return frame.select(*_native_input_columns(element))


@once
def _native_input_columns(element: Element) -> list[Column]:
    op, why = F.col(OP), F.col(WHY)
    unknown = F.concat(F.lit("unknown opcode '"), op, F.lit("'"))
    reason = F.when(why.isNotNull(), why).when(~op.isin(*OPS), unknown)
    kind = (F.when(reason.isNotNull(), F.lit("bad"))
            .when(op.isin("d", "s"), F.lit("skip")).otherwise(F.lit("row")))
    cols = [c.name for c in element.columns]
    info = (F.when(reason.isNull(), F.lit(None))
            .when(F.col(RAW).isNotNull(), info_column(reason, F.struct(F.col(RAW).alias("line"))))
            .otherwise(info_column(reason, F.struct(*[column(c) for c in cols]))))
    return _native_row_columns(kind, F.lit(0), info, [column(c) for c in cols])


def _native_row_columns(kind: Column, inst: Column, info: Column, values: list[Column]) -> list[Column]:
    """The columns of processor output rows (runtime/processor.py) of a native element: one per
    input row, kind ``row`` (an insert with the input's sequence number), ``skip`` or ``bad``."""
    return [kind.alias(KIND), inst.alias(INST), F.col(SEQ), F.lit(0).cast("long").alias(SUB),
            F.when(kind == "row", F.lit("i")).alias(OP), info.alias(INFO), *values]


def native_stream(element: Element, source: Element, frame: DataFrame) -> DataFrame:
    """A stateless stream's processor output computed by Spark expressions (the plan's
    ``filter``): ``row`` for a row that passes the WHERE (an insert with the source row's
    sequence number), ``skip`` for one that does not (counted as received), ``bad`` for a row
    that got no instance (``__why``). ``frame`` is the changelog of ``source`` with ``__inst``."""
    return frame.select(*_native_stream_columns(element, source))


@once
def _native_stream_columns(element: Element, source: Element) -> list[Column]:
    assert element.physical is not None and element.physical.filter is not None
    spec = element.physical.filter
    why = F.col(WHY)
    passes = (F.coalesce(condition_column(spec.where, spec.alias,
                                          dict(columns_of(source))),
                         F.lit(False)) if spec.where is not None else F.lit(True))
    kind = (F.when(why.isNotNull(), F.lit("bad")).when(F.col(OP).isin("d", "s"), F.lit("skip"))
            .when(passes, F.lit("row")).otherwise(F.lit("skip")))
    info = info_column(why, F.struct(*[column(c.name) for c in source.columns]))
    return _native_row_columns(kind, F.col(INST), F.when(why.isNotNull(), info),
                               [column(src).alias(name) for name, src in spec.items])


def native_frame(element: Element, source: Element, frame: DataFrame) -> DataFrame:
    """What the batch writer of a native aggregation or native stream ``element`` gets from
    ``frame`` (rows of its one source, in the processor's frame layout): the rows with their
    instance, or for a stream its processor output."""
    frame = with_instance(frame, element, source)
    if element.physical is not None and element.physical.native == "stream":
        return native_stream(element, source, frame)
    return frame  # aggregated per batch by runtime/native_agg.py (see runtime.batch_writers.batch_writer)
