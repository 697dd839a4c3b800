"""Partition instance assignment on Spark: HASH, ROUNDROBIN and custom SPLASH functions.

A custom function in the compilable subset (ccl/plan/partition_functions.py) becomes one Spark Column
expression: local variables are inlined, IF/ELSE becomes CASE WHEN, built-ins map to Spark functions
of the same semantics (under spark.sql.ansi.enabled=false: Java integer wrap-around, null on division
by zero). Other functions run the SPLASH interpreter in a pandas (Arrow) UDF. Either way the row gets
an instance in 0..N-1 (a modulo that is never negative) or, when the function gives no integer, a
null instance and the reason, which makes it a bad record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Union

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.syntax import nodes as n

from .types import column

INSTANCE = "__instance"
BAD_REASON = "__bad_reason"

_NUMERIC = ("integer", "long", "float")
_SPARK_TYPES = {"integer": "int", "long": "bigint", "float": "double", "string": "string",
                "boolean": "boolean"}
_KIND_OF_SPARK = {T.IntegerType: "integer", T.ShortType: "integer", T.ByteType: "integer",
                  T.LongType: "long", T.DoubleType: "float", T.FloatType: "float",
                  T.StringType: "string", T.BooleanType: "boolean"}


class NotCompilable(Exception):
    """The block is outside the compilable subset (the message says why)."""


@dataclass(frozen=True)
class _Typed:
    col: Column
    kind: str  # integer | long | float | string | boolean | null
    nonneg: bool = False  # never negative (when not null)
    in_range: bool = False  # always in 0..count-1 (when not null): the final pmod is the identity


def column_kinds(schema: T.StructType) -> dict[str, str]:
    """The SPLASH kind of each column of a Spark schema (columns of other types are left out)."""
    out = {}
    for f in schema.fields:
        kind = _KIND_OF_SPARK.get(type(f.dataType))
        if kind is not None:
            out[f.name] = kind
    return out



class _Compiler:
    def __init__(self, source: str, target: str, count: int, columns: Mapping[str, str]) -> None:
        self.source, self.count, self.columns = source, count, columns
        self.count_name = f"{target}_partitions"

    # --- statements: a sequence becomes the value of the first RETURN it reaches --------------

    def seq(self, stmts: list[n.Node], env: dict[str, _Typed]) -> _Typed:
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(s, n.Block):
                return self.seq(list(s.stmts) + rest, dict(env))
            if isinstance(s, n.VarDecl):
                kind = s.type.name
                for d in s.declarators:
                    value = self.expr(d.init, env) if d.init is not None else _Typed(F.lit(None), "null")
                    env[d.name.name] = self._coerce(value, kind)
            elif isinstance(s, n.Assign):
                old = env.get(s.target.name.name)
                if old is None:
                    raise NotCompilable(f"assignment to '{s.target.name.name}', which is not a local")
                env[s.target.name.name] = self._coerce(self.expr(s.value, env), old.kind)
            elif isinstance(s, n.If):
                cond = self._condition(self.expr(s.cond, env))
                then = self.seq([s.then] + rest, dict(env))
                other = self.seq(([s.otherwise] if s.otherwise is not None else []) + rest, dict(env))
                return _Typed(F.when(cond, then.col).otherwise(other.col), _unify(then.kind, other.kind),
                              then.nonneg and other.nonneg, then.in_range and other.in_range)
            elif isinstance(s, n.Return):
                return self.expr(s.value, env) if s.value is not None else _Typed(F.lit(None), "null")
            else:
                raise NotCompilable(f"a {type(s).__name__}")
        return _Typed(F.lit(None), "null")  # ends without RETURN: null, a bad record

    def _coerce(self, value: _Typed, kind: str) -> _Typed:
        if value.kind == kind:
            return value
        if value.kind == "null" or (value.kind in _NUMERIC and kind in _NUMERIC
                                    and _NUMERIC.index(value.kind) < _NUMERIC.index(kind)):
            return _Typed(value.col.cast(_SPARK_TYPES[kind]), kind, value.nonneg, value.in_range)
        raise NotCompilable(f"a {value.kind} value stored in a {kind} variable")

    def _condition(self, t: _Typed) -> Column:
        if t.kind == "boolean":
            return t.col
        if t.kind in _NUMERIC:
            return t.col != F.lit(0)
        if t.kind == "null":
            return F.lit(False)
        raise NotCompilable(f"a {t.kind} condition")

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, e: n.Node, env: dict[str, _Typed]) -> _Typed:
        if isinstance(e, n.Literal):
            if e.kind == "null":
                return _Typed(F.lit(None), "null")
            kind = {"integer": "integer", "long": "long", "float": "float", "string": "string",
                    "boolean": "boolean"}[e.kind]
            nonneg = kind in _NUMERIC and e.value >= 0
            return _Typed(F.lit(e.value).cast(_SPARK_TYPES[kind]), kind, nonneg,
                          nonneg and kind != "float" and e.value < self.count)
        if isinstance(e, n.Var):
            name = e.name.name
            if name in env:
                return env[name]
            if name == self.count_name:
                return _Typed(F.lit(self.count).cast("int"), "integer", nonneg=True)
            raise NotCompilable(f"the name '{name}'")
        if isinstance(e, n.FieldAccess):
            kind = self.columns.get(e.field.name)
            if kind is None:
                raise NotCompilable(f"column '{e.field.name}' of an unsupported type")
            return _Typed(column(e.field.name), kind)
        if isinstance(e, n.Unary):
            v = self.expr(e.operand, env)
            if e.op == "not":
                return _Typed(~self._condition(v), "boolean")
            if v.kind not in _NUMERIC + ("null",):
                raise NotCompilable(f"unary {e.op} on {v.kind}")
            return _Typed(-v.col if e.op == "-" else v.col, v.kind)
        if isinstance(e, n.Binary):
            return self._binary(e, env)
        if isinstance(e, n.Call):
            return self._call(e, env)
        if isinstance(e, n.Case):
            return self._case(e, env)
        raise NotCompilable(f"a {type(e).__name__}")

    def _binary(self, e: n.Binary, env: dict[str, _Typed]) -> _Typed:
        left, right = self.expr(e.left, env), self.expr(e.right, env)
        op = e.op
        if op in ("and", "or"):
            lc, rc = self._condition(left), self._condition(right)
            return _Typed(lc & rc if op == "and" else lc | rc, "boolean")
        if op in ("=", "!=", "<", "<=", ">", ">="):
            if _unify(left.kind, right.kind) is None:
                raise NotCompilable(f"comparison of {left.kind} with {right.kind}")
            cols = (left.col, right.col)
            result = {"=": cols[0] == cols[1], "!=": cols[0] != cols[1], "<": cols[0] < cols[1],
                      "<=": cols[0] <= cols[1], ">": cols[0] > cols[1], ">=": cols[0] >= cols[1]}[op]
            return _Typed(result, "boolean")
        if op == "+" and "string" in (left.kind, right.kind):
            if {left.kind, right.kind} <= {"string", "null"}:
                return _Typed(F.concat(left.col, right.col), "string")
            raise NotCompilable("+ of a string and a non-string")
        kind = _unify(left.kind, right.kind)
        if kind not in _NUMERIC + ("null",):
            raise NotCompilable(f"{op} on {left.kind} and {right.kind}")
        if kind == "null":
            return _Typed(F.lit(None), "null")
        lcol, rcol = (t.col.cast(_SPARK_TYPES[kind]) if t.kind != kind else t.col for t in (left, right))
        result = {"+": lcol + rcol, "-": lcol - rcol, "*": lcol * rcol, "%": lcol % rcol}[op]
        # Java's remainder of a non-negative value by the partition count lies in 0..count-1.
        in_range = op == "%" and left.nonneg and kind != "float" and self._is_count(e.right)
        return _Typed(result, kind, in_range, in_range)

    def _call(self, e: n.Call, env: dict[str, _Typed]) -> _Typed:
        if e.library is not None:
            raise NotCompilable(f"a call to {e.library.name}.{e.func.name}()")
        name = e.func.name.lower()
        if name == "ascii" and _leading_substring(e.args[0]):
            # ascii(substr(s, 1, k)) with k >= 1 reads the first character of s: same result
            # (nulls and '' included) without copying a substring for every row.
            e = n.Call(e.func, [e.args[0].args[0]])
        args = [self.expr(a, env) for a in e.args]
        cols = [a.col for a in args]
        if name == "ascii":
            return _Typed(F.ascii(cols[0]), "integer", nonneg=True)
        if name == "substr":
            return _Typed(F.substr(cols[0], cols[1], cols[2]) if len(cols) == 3
                          else F.substr(cols[0], cols[1]), "string")
        if name in ("left", "right"):
            return _Typed((F.left if name == "left" else F.right)(cols[0], cols[1]), "string")
        if name in ("upper", "lower", "trim", "ltrim", "rtrim"):
            return _Typed(getattr(F, name)(cols[0]), "string")
        if name == "length":
            return _Typed(F.length(cols[0]), "integer", nonneg=True)
        if name == "abs":
            return _Typed(F.abs(cols[0]), args[0].kind)
        if name in ("coalesce", "firstnonnull"):
            kind = args[0].kind
            for a in args[1:]:
                kind = _unify(kind, a.kind)
                if kind is None:
                    raise NotCompilable(f"{name}() of mixed types")
            return _Typed(F.coalesce(*[c.cast(_SPARK_TYPES[kind]) for c in cols]) if kind != "null"
                          else F.lit(None), kind)
        if name == "isnull":
            return _Typed(F.isnull(cols[0]), "boolean")
        if name == "mod":
            return self._binary(n.Binary("%", e.args[0], e.args[1]), env)
        raise NotCompilable(f"a call to {e.func.name}()")

    def _is_count(self, e: n.Node) -> bool:
        """Whether ``e`` is the partition count (<target>_partitions or the same constant)."""
        if isinstance(e, n.Var):
            return e.name.name == self.count_name
        return isinstance(e, n.Literal) and e.kind in ("integer", "long") and e.value == self.count

    def _case(self, e: n.Case, env: dict[str, _Typed]) -> _Typed:
        subject = self.expr(e.subject, env) if e.subject is not None else None
        branches, kind = [], "null"
        for w in e.whens:
            cond = self.expr(w.when, env)
            test = (subject.col == cond.col) if subject is not None else self._condition(cond)
            value = self.expr(w.then, env)
            kind = _unify(kind, value.kind)
            branches.append((test, value))
        default = self.expr(e.default, env) if e.default is not None else _Typed(F.lit(None), "null")
        kind = _unify(kind, default.kind)
        if kind is None:
            raise NotCompilable("CASE branches of different types")
        cast = (lambda c: c.cast(_SPARK_TYPES[kind])) if kind != "null" else (lambda c: c)
        result = F.when(branches[0][0], cast(branches[0][1].col))
        for test, value in branches[1:]:
            result = result.when(test, cast(value.col))
        return _Typed(result.otherwise(cast(default.col)), kind)


def _leading_substring(e: n.Node) -> bool:
    """Whether ``e`` is substr(s, 1) or substr(s, 1, k) with a constant k >= 1."""
    def const(x: n.Node) -> Optional[int]:
        return x.value if isinstance(x, n.Literal) and x.kind in ("integer", "long") else None

    return (isinstance(e, n.Call) and e.func.name.lower() == "substr" and len(e.args) in (2, 3)
            and const(e.args[1]) == 1 and (len(e.args) == 2 or (const(e.args[2]) or 0) >= 1))


def _unify(a: Optional[str], b: Optional[str]) -> Optional[str]:
    """The common kind of two values (numbers widen; null fits any kind), or None."""
    if a is None or b is None:
        return None
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if a in _NUMERIC and b in _NUMERIC:
        return _NUMERIC[max(_NUMERIC.index(a), _NUMERIC.index(b))]
    return None


def compile_custom(block: n.Block, source: str, target: str, count: int,
                   columns: Mapping[str, str], why_not: Optional[str] = None) -> Column:
    """The instance Column of a compilable custom block (null when the block gives no integer).

    ``why_not`` is the compiler's decision (the plan's ``why``: why the block is outside the
    subset, None when it is not). Raises NotCompilable when the block is outside the subset or
    its column types make it so."""
    if why_not:
        raise NotCompilable(why_not)
    result = _Compiler(source, target, count, columns).seq(list(block.stmts), {})
    if result.kind == "null":
        return F.lit(None).cast("int")
    if result.kind not in ("integer", "long"):
        raise NotCompilable(f"the block returns {result.kind}")
    if result.in_range:
        return result.col.cast("int")
    return F.pmod(result.col, F.lit(count).cast(_SPARK_TYPES[result.kind])).cast("int")


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
