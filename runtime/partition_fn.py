"""Partition instance assignment on Spark: HASH, ROUNDROBIN and custom SPLASH functions.

A custom function in the compilable subset becomes one Spark Column expression: the walk of
ccl/plan/lowering/partition.py, which the planner runs to decide (and record why not), with the
Spark backend :class:`SparkPartition` building each piece: local variables are inlined, IF/ELSE
becomes CASE WHEN, built-ins map to Spark functions of the same semantics (under
spark.sql.ansi.enabled=false: Java integer wrap-around, null on division by zero). Other functions
run the SPLASH interpreter in a pandas (Arrow) UDF. Either way the row gets an instance in 0..N-1 (a
modulo that is never negative) or, when the function gives no integer, a null instance and the
reason, which makes it a bad record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Union

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.plan.lowering import Unsupported
from ccl.plan.lowering.partition import lower_partition_function
from ccl.syntax import nodes as n

from .types import column

INSTANCE = "__instance"
BAD_REASON = "__bad_reason"

_SPARK_TYPES = {"integer": "int", "long": "bigint", "float": "double", "string": "string",
                "boolean": "boolean"}
_KIND_OF_SPARK = {T.IntegerType: "integer", T.ShortType: "integer", T.ByteType: "integer",
                  T.LongType: "long", T.DoubleType: "float", T.FloatType: "float",
                  T.StringType: "string", T.BooleanType: "boolean"}


NotCompilable = Unsupported  # the block is outside the compilable subset (the message says why)


def column_kinds(schema: T.StructType) -> dict[str, str]:
    """The SPLASH kind of each column of a Spark schema (columns of other types are left out)."""
    out = {}
    for f in schema.fields:
        kind = _KIND_OF_SPARK.get(type(f.dataType))
        if kind is not None:
            out[f.name] = kind
    return out



class SparkPartition:
    """Builds the pieces of a custom block (ccl/plan/lowering/partition.py) as Spark Columns, of
    the interpreter's semantics under spark.sql.ansi.enabled=false."""

    def null(self) -> Column:
        return F.lit(None)

    def literal(self, value: object, kind: str) -> Column:
        return F.lit(value).cast(_SPARK_TYPES[kind])

    def column(self, name: str, kind: str) -> Column:
        return column(name)

    def cast(self, value: Column, kind: str) -> Column:
        return value.cast(_SPARK_TYPES[kind])

    def when(self, branches: list[tuple[Column, Column]], default: Column) -> Column:
        result = F.when(*branches[0])
        for test, value in branches[1:]:
            result = result.when(test, value)
        return result.otherwise(default)

    def nonzero(self, value: Column) -> Column:
        return value != F.lit(0)

    def not_(self, value: Column) -> Column:
        return ~value

    def logic(self, op: str, left: Column, right: Column) -> Column:
        return left & right if op == "and" else left | right

    def negate(self, value: Column) -> Column:
        return -value

    def compare(self, op: str, left: Column, right: Column) -> Column:
        if op == "=":
            return left == right
        if op == "!=":
            return left != right
        return {"<": left.__lt__, "<=": left.__le__, ">": left.__gt__, ">=": left.__ge__}[op](right)

    def concat(self, left: Column, right: Column) -> Column:
        return F.concat(left, right)

    def arithmetic(self, op: str, left: Column, right: Column) -> Column:
        return {"+": left.__add__, "-": left.__sub__, "*": left.__mul__, "%": left.__mod__}[op](right)

    def call(self, name: str, args: list[Column]) -> Column:
        if name == "substr":
            return F.substr(*args)
        if name in ("left", "right"):
            return (F.left if name == "left" else F.right)(args[0], args[1])
        return getattr(F, name)(*args)  # ascii, upper, lower, *trim, length, abs, coalesce, isnull

    def instance(self, value: Column, kind: str, count: int, in_range: bool) -> Column:
        if in_range:
            return value.cast("int")
        return F.pmod(value, F.lit(count).cast(_SPARK_TYPES[kind])).cast("int")


def compile_custom(block: n.Block, source: str, target: str, count: int,
                   columns: Mapping[str, str], why_not: Optional[str] = None) -> Column:
    """The instance Column of a compilable custom block (null when the block gives no integer):
    the walk of ccl/plan/lowering/partition.py, which the planner ran to decide, with
    :class:`SparkPartition` building each piece.

    ``why_not`` is the compiler's decision (the plan's ``why``: why the block is outside the
    subset, None when it is not). Raises NotCompilable when the block is outside the subset or
    its column types make it so."""
    if why_not:
        raise NotCompilable(why_not)
    return lower_partition_function(block, source, f"{target}_partitions", count, columns,
                                    SparkPartition())


def interpreter_udf(block: n.Block, source: str, target: str, count: int,
                    columns: Mapping[str, str], globals_: Optional[Mapping[str, object]] = None,
                    functions: Optional[Mapping[str, n.FuncDef]] = None) -> Column:
    """A struct<instance:int, reason:string> Column that runs the SPLASH interpreter per row.

    ``columns`` maps each column the block may read to its SPLASH kind (integer, long, ...): the
    interpreter needs the declared types (a long holding a small value must not wrap at 32 bits).
    """
    from ccl.splash.types import scalar
    from ccl.splash.interpreter import PartitionFunction

    globals_ = dict(globals_ or {})
    functions = dict(functions or {})
    column_types = {name: scalar(kind) for name, kind in columns.items()}

    @F.pandas_udf("struct<instance:int,reason:string>")
    def assign(rows: pd.DataFrame) -> pd.DataFrame:
        fn = PartitionFunction(block, source, target, count, globals_, functions,
                               column_types=column_types)
        records = rows.astype(object).where(rows.notna(), None)
        out = [fn.assign(_plain(rec)) for rec in records.to_dict("records")]
        return pd.DataFrame({"instance": pd.array([i for i, _ in out], dtype="Int32"),
                             "reason": [r for _, r in out]})

    return assign(F.struct(*[column(c).alias(c) for c in columns]))


def _plain(record: dict) -> dict:
    """pandas gives numpy scalars and floats for nullable ints: back to Python values."""
    out = {}
    for k, v in record.items():
        if hasattr(v, "item"):
            v = v.item()
        out[k] = v
    return out


@dataclass(frozen=True)
class Assignment:
    """How instances were assigned: the path taken and, for the interpreter path, why."""

    path: str  # hash | roundrobin | compiled | interpreter
    why: str = ""


def assign_instances(df: DataFrame, spec: n.PartitionSpec, source: str, target: str, count: int,
                     sequence: Optional[str] = None,
                     globals_: Optional[Mapping[str, object]] = None,
                     functions: Optional[Mapping[str, n.FuncDef]] = None,
                     why_not: Optional[str] = None) -> tuple[DataFrame, Assignment]:
    """``df`` with an instance column (0..count-1, null for a bad record) and a bad-record reason
    (``why_not``: see :func:`compile_custom`)."""
    first, instance, reason, how = instance_columns(spec, source, target, count, df.schema, sequence,
                                                    globals_, functions, why_not=why_not)
    out = df.withColumns(first) if first else df
    return _with(out, instance, reason).drop(*first), how


def instance_columns(spec: n.PartitionSpec, source: str, target: str, count: int,
                     schema: T.StructType, sequence: Optional[Union[str, Sequence[str]]] = None,
                     globals_: Optional[Mapping[str, object]] = None,
                     functions: Optional[Mapping[str, n.FuncDef]] = None,
                     tmp: str = "__assignment", why_not: Optional[str] = None
                     ) -> tuple[dict[str, Column], Column, Optional[Column], Assignment]:
    """``(first, instance, reason, how)`` for ``spec`` over rows of ``schema``: columns to add
    first (the interpreter's result, as ``tmp``; none when the function is a Spark expression),
    then the instance (0..count-1, null for a bad record) and the bad-record reason (None: never
    one) as expressions over them, and how the function runs. ROUNDROBIN takes the row's number
    modulo the count when ``sequence`` is one column (rows numbered consecutively, as an input
    file's lines), else the hash of the ``sequence`` columns (a derived row carries the number of
    the input row that caused it: a filter's rows would keep its stride, a Flex's several rows of
    one event would all go to one instance). ``why_not``: see :func:`compile_custom`."""
    if spec.method == "hash":
        instance = F.pmod(F.hash(*[column(c.name) for c in spec.columns]), F.lit(count))
        return {}, instance, None, Assignment("hash")
    if spec.method == "roundrobin":
        if sequence is None:
            raise ValueError("ROUNDROBIN needs the sequence number column")
        if isinstance(sequence, str):  # consecutive numbers: a rotation
            instance = F.pmod(column(sequence), F.lit(count).cast("long")).cast("int")
        else:  # numbers with gaps or repeats (derived rows): spread by their hash
            instance = F.pmod(F.hash(*[column(c) for c in sequence]), F.lit(count))
        return {}, instance, None, Assignment("roundrobin")
    try:
        instance = compile_custom(spec.body, source, target, count, column_kinds(schema), why_not)
        reason = F.when(instance.isNull(), F.lit("the partition function returned no integer"))
        return {}, instance, reason, Assignment("compiled")
    except NotCompilable as exc:
        why = str(exc)
    result = interpreter_udf(spec.body, source, target, count, column_kinds(schema), globals_,
                             functions)
    return ({tmp: result}, F.col(f"{tmp}.instance"), F.col(f"{tmp}.reason"),
            Assignment("interpreter", why))


def _with(df: DataFrame, instance: Column, reason: Optional[Column]) -> DataFrame:
    return df.withColumn(INSTANCE, instance).withColumn(
        BAD_REASON, reason if reason is not None else F.lit(None).cast("string"))
