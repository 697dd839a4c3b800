"""A small batch's frames as Arrow tables, built here on the driver without Spark.

The project's query (runtime/project_query.py) runs a small batch on the driver. Its stages hand
each other rows in the processor's frame layout (``__seq``, ``__sub``, ``__src``, ``__op``, the
element's columns, ``__why``, ``__raw``). Built as Spark DataFrames over local relations and
collected, those rows cross between the JVM and Python as Python objects, row by row: at
200,000 rows that took seconds per stage. This module builds the same rows, and the processor
input of a per-instance element, as Arrow tables with numpy, for what it computes exactly as the
Spark expressions of runtime/topology.py, frames.py and native_stages.py do:

- instance assignment by HASH (Spark's murmur3, runtime/spark_hash.py), ROUNDROBIN, or broadcast
  to every instance, for an element's own ``PARTITION BY`` (not a partitioned module's);
- ``__bucket``: the instance modulo the buckets, or with by-group columns their hash;
- a native input stream's output, and a native stream's (its WHERE by runtime/lowering_arrow.py),
  when no row of the batch is bad.

Everything else (a custom partition function, a module's partitioning, bad input rows, a NaN
where a WHERE compares floats, native aggregations) answers None here, and the caller takes the Spark expressions.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ccl.plan.model import Element, Partition, Plan

from .engine.changes import OPS
from .topology import is_input, ports_of
from .processor import (INFO, INST, KIND, OP, PORT, RAW, SEQ, SRC, SUB, WHY, output_schema,
                        port_column)
from .spark_hash import spark_hash_columns
from .types import columns_of

BUCKET = "__bucket"
_BAD, _LINE = "__bad", "__raw"  # the input source's reason and raw-line columns


def input_frame(parsed: pa.Table) -> pa.Table:
    """An input's parsed rows (the ``ccl_csv`` source's schema) in the frame layout: as
    runtime.frames.frame_layout makes them."""
    n = parsed.num_rows
    names = [WHY if c == _BAD else RAW if c == _LINE else c for c in parsed.column_names]
    return (parsed.rename_columns(names)
            .append_column(pa.field(SRC, pa.int32(), False), pa.array(np.zeros(n, np.int32)))
            .append_column(pa.field(SUB, pa.int64(), False), pa.array(np.zeros(n, np.int64))))


def changelog_frame(rows: pa.Table, cols: Sequence[str]) -> pa.Table:
    """Changelog rows (runtime.frames.changelog_schema's) in the frame layout, as
    runtime.frames.changelog_frame makes them."""
    n = rows.num_rows
    arrays = [rows.column(SEQ), rows.column(SUB), rows.column(INST), rows.column(OP),
              *[rows.column(c) for c in cols], pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]
    return pa.Table.from_arrays(arrays, names=[SEQ, SUB, SRC, OP, *cols, WHY, RAW])


def native_input(element: Element, frame: pa.Table) -> Optional[pa.Table]:
    """An input stream's processor output (runtime.native_stages.native_input's rows) when no row of
    ``frame`` is bad; None when one is (its bad record is Spark's to write)."""
    op = frame.column(OP)
    if frame.column(WHY).null_count != frame.num_rows or not pc.all(pc.is_in(op, pa.array(OPS)), min_count=0).as_py():
        return None
    skip = pc.is_in(op, pa.array(["d", "s"]))
    schema = _schema(element)
    n = frame.num_rows
    arrays = {KIND: pc.if_else(skip, "skip", "row"), INST: pa.array(np.zeros(n, np.int32)),
              SEQ: frame.column(SEQ), SUB: pa.array(np.zeros(n, np.int64)),
              OP: pc.if_else(skip, pa.scalar(None, pa.string()), "i"),
              INFO: pa.nulls(n, pa.string())}
    return pa.Table.from_arrays(
        [arrays[f.name] if f.name in arrays else frame.column(f.name) for f in schema],
        schema=schema)


def native_stream(element: Element, source: Element, frame: pa.Table) -> Optional[pa.Table]:
    """A native stream's processor output (runtime.native_stages.native_stream's rows, the
    instance from :func:`processor_input`'s rule) when no row of ``frame`` (rows of ``source``)
    came bad and its WHERE can be evaluated here (runtime/lowering_arrow.py); None otherwise."""
    from .lowering_arrow import condition_mask

    assert element.physical is not None and element.physical.filter is not None
    spec = element.physical.filter
    assigned = _instances(element.partition, source, frame, is_input(source))
    if (element.module_partition is not None or assigned is None or assigned[0] is not None
            or frame.column(WHY).null_count != frame.num_rows):
        return None
    n = frame.num_rows
    passes = (condition_mask(spec.where, spec.alias, dict(columns_of(source)), frame)
              if spec.where is not None else pa.array(np.ones(n, bool)))
    if passes is None:
        return None
    removed = pc.is_in(frame.column(OP), pa.array(["d", "s"]))
    row = pc.and_(pc.invert(pc.fill_null(removed, False)), passes)
    schema = _schema(element)
    arrays = {KIND: pc.if_else(row, "row", "skip"), INST: pa.array(assigned[1].astype(np.int32)),
              SEQ: frame.column(SEQ), SUB: pa.array(np.zeros(n, np.int64)),
              OP: pc.if_else(row, "i", pa.scalar(None, pa.string())), INFO: pa.nulls(n, pa.string())}
    items = dict(spec.items)
    return pa.Table.from_arrays(
        [arrays[f.name] if f.name in arrays else frame.column(items[f.name]).cast(f.type)
         for f in schema], schema=schema)


def processor_input(plan: Plan, element: Element, frames: Sequence[Optional[pa.Table]],
                    buckets: int, by_group: Sequence[str] = ()) -> Optional[pa.Table]:
    """runtime.topology.processor_input over Arrow frames (None for a port without rows), with every
    meta column; None when an assignment is not one this module computes."""
    ports = ports_of(element)
    if element.module_partition is not None:
        return None
    sources = [plan.element(src) for _, src in ports]
    structs = [pa.struct([frame.schema.field(c.name) for c in src.columns])
               if frame is not None else None for src, frame in zip(sources, frames)]
    parts = []
    for port, (source, frame) in enumerate(zip(sources, frames)):
        if frame is None:
            continue
        instance = _instances(element.partition, source, frame, is_input(source))
        if instance is None:
            return None
        rows, inst = instance
        taken = frame.take(pa.array(rows)) if rows is not None else frame
        n = taken.num_rows
        arrays = [pa.array(np.full(n, port, np.int32)), taken.column(SEQ), taken.column(SUB),
                  taken.column(SRC), taken.column(OP), pa.array(inst.astype(np.int32)),
                  taken.column(WHY), taken.column(RAW)]
        names = [PORT, SEQ, SUB, SRC, OP, INST, WHY, RAW]
        for j, (src, struct) in enumerate(zip(sources, structs)):
            if j == port:
                value = pa.StructArray.from_arrays(
                    [taken.column(c.name).combine_chunks() for c in src.columns],
                    fields=list(struct))
            else:
                fields = ([pa.field(c.name, _arrow_type(c.type)) for c in src.columns]
                          if struct is None else list(struct))
                value = pa.nulls(n, pa.struct(fields))
            arrays.append(value)
            names.append(port_column(j))
        parts.append(pa.Table.from_arrays(arrays, names=names))
    if not parts:
        return None
    table = pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]
    inst = table.column(INST).to_numpy()
    if by_group:
        # flatten, not field: a row of another port has a null struct, whose fields count as null
        first = dict(zip([c.name for c in sources[0].columns],
                         table.column(port_column(0)).combine_chunks().flatten()))
        types = dict(columns_of(sources[0]))
        spread = spark_hash_columns([table.column(INST).combine_chunks()]
                                    + [first[c] for c in by_group],
                                    ["integer"] + [types[c] for c in by_group])
        bucket = np.mod(spread.astype(np.int64), buckets)
    else:
        bucket = np.mod(inst.astype(np.int64), buckets)
    return table.append_column(BUCKET, pa.array(bucket.astype(np.int32)))


def _instances(partition: Optional[Partition], source: Element, frame: pa.Table, numbered: bool
               ) -> Optional[tuple[Optional[np.ndarray], np.ndarray]]:
    """``(rows, instances)``: the rows of ``frame`` to take (None: all, in order; a broadcast
    repeats each row for every instance) and the instance of each; None when the partitioning
    of ``source`` is a custom function. ``numbered``: the source's rows are numbered
    consecutively (an input's lines), so ROUNDROBIN rotates by the number."""
    n = frame.num_rows
    if partition is None:
        return None, np.zeros(n, np.int64)
    count = int(partition.count)
    spec = partition.spec_for(source.name)
    if spec is None:  # broadcast: every row to every instance
        return np.repeat(np.arange(n), count), np.tile(np.arange(count), n)
    method, columns = spec.method, spec.columns
    if method == "hash" or (method == "roundrobin" and columns):
        types = dict(columns_of(source))
        hashed = spark_hash_columns([frame.column(c).combine_chunks() for c in columns],
                                    [types[c] for c in columns])
        return None, np.mod(hashed.astype(np.int64), count)
    if method == "roundrobin":
        if numbered:
            return None, np.mod(frame.column(SEQ).to_numpy(), count)
        hashed = spark_hash_columns([frame.column(SEQ).combine_chunks(),
                                     frame.column(SUB).combine_chunks()], ["long", "long"])
        return None, np.mod(hashed.astype(np.int64), count)
    return None


_SCHEMAS: dict[tuple[tuple[str, str], ...], pa.Schema] = {}  # by the element's columns


def _schema(element: Element) -> pa.Schema:
    """The processor output schema of ``element`` as Arrow (it depends on the columns only)."""
    key = tuple(columns_of(element))
    schema = _SCHEMAS.get(key)
    if schema is None:
        from pyspark.sql.pandas.types import to_arrow_schema
        schema = _SCHEMAS[key] = to_arrow_schema(output_schema(element),
                                                 timezone="UTC")
    return schema


def _arrow_type(ccl_type: str) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    from .types import spark_type
    return to_arrow_type(spark_type(ccl_type), timezone="UTC")
