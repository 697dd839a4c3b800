"""The lowering of a custom SPLASH partition function to one Spark expression.

A block lowers when it is straight-line code (declarations, assignments to local variables,
IF/ELSE, nested blocks, RETURN) over scalar values, using only the operators and built-ins whose
Spark equivalents have the interpreter's exact semantics (:data:`COMPILABLE_FUNCTIONS`, under
spark.sql.ansi.enabled=false: Java integer wrap-around, null on division by zero), with values
whose kinds fit (numbers widen, null fits any kind; a string compared with a number does not
lower), returning an integer or long. :func:`lower_partition_function` walks the block: first the
statements and expressions it allows (:func:`why_not_syntax`, whose reasons the plan records),
then the values, which it types and has a :class:`PartitionBackend` build. The compiler's checker
(``ccl.plan.partition_functions.why_not_compilable``) builds nothing; the runtime's
(runtime/partition_fn.py) builds Spark Columns. Anything else runs the SPLASH interpreter in an
Arrow UDF.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Iterable, Mapping, Optional, Protocol, TypeVar

from ...syntax import nodes as n
from ..model import Column
from . import Unsupported

C = TypeVar("C")

# Built-ins with a Spark function of identical semantics (nulls included); argument counts allowed.
COMPILABLE_FUNCTIONS: dict[str, tuple[int, int]] = {
    "ascii": (1, 1), "substr": (2, 3), "left": (2, 2), "right": (2, 2), "upper": (1, 1),
    "lower": (1, 1), "length": (1, 1), "trim": (1, 1), "ltrim": (1, 1), "rtrim": (1, 1),
    "abs": (1, 1), "coalesce": (1, 16), "firstnonnull": (1, 16), "isnull": (1, 1), "mod": (2, 2),
}
COMPILABLE_OPERATORS = {"+", "-", "*", "%", "=", "!=", "<", "<=", ">", ">=", "and", "or"}
SCALAR_TYPES = {"integer", "long", "float", "string", "boolean"}
NUMERIC = ("integer", "long", "float")

# The kind of a column of each CCL type as the runtime stores it (runtime/types.py: an interval is
# a long of microseconds; dates, money, decimals and binaries are no kind a block lowers with;
# an unknown type is carried as text).
_KIND_OF_TYPE = {"integer": "integer", "long": "long", "float": "float", "string": "string",
                 "boolean": "boolean", "interval": "long", "date": None, "timestamp": None,
                 "bigdatetime": None, "binary": None}


def column_kinds(columns: Iterable[Column]) -> dict[str, str]:
    """The kind of each of a plan element's ``columns`` a block may lower with (as the runtime's
    ``column_kinds`` gives them from the Spark schema of those columns)."""
    out = {}
    for column in columns:
        text = str(column.type).strip().lower()
        kind = (_KIND_OF_TYPE[text] if text in _KIND_OF_TYPE
                else None if text.startswith(("money", "decimal")) else "string")
        if kind is not None:
            out[column.name] = kind
    return out


class PartitionBackend(Protocol[C]):
    """What builds the pieces of a block :func:`lower_partition_function` accepts (each value of
    a SPLASH kind: integer, long, float, string, boolean, or null)."""

    def null(self) -> C:
        """A null."""

    def literal(self, value: object, kind: str) -> C:
        """A literal of ``kind``."""

    def column(self, name: str, kind: str) -> C:
        """The input row's column ``name``."""

    def cast(self, value: C, kind: str) -> C:
        """``value`` as ``kind`` (a number widened, or a null typed)."""

    def when(self, branches: list[tuple[C, C]], default: C) -> C:
        """CASE WHEN: the value of the first branch whose test is true, else ``default``."""

    def nonzero(self, value: C) -> C:
        """A number as a condition (null stays null)."""

    def not_(self, value: C) -> C:
        """Three-valued NOT."""

    def logic(self, op: str, left: C, right: C) -> C:
        """Three-valued ``and`` / ``or``."""

    def negate(self, value: C) -> C:
        """Unary minus (Java wrap-around)."""

    def compare(self, op: str, left: C, right: C) -> C:
        """``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` (null when either side is)."""

    def concat(self, left: C, right: C) -> C:
        """String ``+``."""

    def arithmetic(self, op: str, left: C, right: C) -> C:
        """``+``, ``-``, ``*``, ``%`` of two numbers of one kind (Java semantics, null on % 0)."""

    def call(self, name: str, args: list[C]) -> C:
        """A built-in of :data:`COMPILABLE_FUNCTIONS` but ``mod`` (lowered as ``%``) and
        ``firstnonnull`` (as ``coalesce``); for ``coalesce`` the arguments are of one kind."""

    def instance(self, value: C, kind: str, count: int, in_range: bool) -> C:
        """The instance of the block's result ``value`` (integer or long): its modulo ``count``
        that is never negative, as an integer; ``in_range``: it lies in 0..count-1 already."""


@dataclass(frozen=True)
class Typed(Generic[C]):
    """A value the walk built, with its kind and what is known of it."""

    col: C
    kind: str  # integer | long | float | string | boolean | null
    nonneg: bool = False  # never negative (when not null)
    in_range: bool = False  # always in 0..count-1 (when not null): the final modulo is the identity


# --- which statements and expressions lower (the plan's recorded reasons) --------------------

def why_not_syntax(block: n.Block, source: str) -> Optional[str]:
    """None when every statement and expression of ``block`` is of a form that lowers, else the
    first reason it is not."""
    for stmt in block.stmts:
        reason = _stmt(stmt, source)
        if reason:
            return reason
    return None


def _stmt(s: n.Node, source: str) -> Optional[str]:
    if isinstance(s, n.Block):
        return why_not_syntax(s, source)
    if isinstance(s, n.VarDecl):
        if not (isinstance(s.type, n.NamedType) and s.type.name in SCALAR_TYPES and not s.type.args):
            return "a variable of a non-scalar type"
        return _first(_expr(d.init, source) for d in s.declarators if d.init is not None)
    if isinstance(s, n.Assign):
        if not isinstance(s.target, n.Var):
            return "an assignment to a field or element"
        return _expr(s.value, source)
    if isinstance(s, n.If):
        return _first([_expr(s.cond, source), _stmt(s.then, source),
                       _stmt(s.otherwise, source) if s.otherwise is not None else None])
    if isinstance(s, n.Return):
        return _expr(s.value, source) if s.value is not None else None
    return {n.While: "a while loop", n.ForIn: "a for loop", n.Switch: "a switch",
            n.Break: "break", n.Continue: "continue", n.Exit: "exit", n.OutputStmt: "output",
            n.ExprStmt: "a statement with side effects"}.get(type(s), f"a {type(s).__name__}")


def _expr(e: n.Node, source: str) -> Optional[str]:
    if isinstance(e, n.Literal) and e.kind == "money":
        return "a money literal"
    if isinstance(e, (n.Literal, n.Var)):
        return None
    if isinstance(e, n.FieldAccess):
        if isinstance(e.base, n.Var) and e.base.name.name == source:
            return None
        return "a field of something other than the input row"
    if isinstance(e, n.Binary):
        if e.op not in COMPILABLE_OPERATORS:
            return "division" if e.op == "/" else f"the operator {e.op}"
        return _first([_expr(e.left, source), _expr(e.right, source)])
    if isinstance(e, n.Unary):
        return _expr(e.operand, source)
    if isinstance(e, n.Call):
        name = e.func.name.lower()
        arity = COMPILABLE_FUNCTIONS.get(name)
        if arity is None or e.distinct or e.library is not None:
            return f"a call to {e.func.name}()"
        if not arity[0] <= len(e.args) <= arity[1]:
            return f"{e.func.name}() with {len(e.args)} arguments"
        return _first(_expr(a, source) for a in e.args)
    if isinstance(e, n.Case):
        parts = [e.subject] if e.subject is not None else []
        parts += [x for w in e.whens for x in (w.when, w.then)]
        parts += [e.default] if e.default is not None else []
        return _first(_expr(p, source) for p in parts)
    return f"a {type(e).__name__} expression"


def _first(reasons: Iterable[Optional[str]]) -> Optional[str]:
    for r in reasons:
        if r:
            return r
    return None


# --- the values: typed, and built by the backend ----------------------------------------------

class _Walk(Generic[C]):
    def __init__(self, count_name: str, count: int, columns: Mapping[str, str],
                 backend: PartitionBackend[C]) -> None:
        self.count_name, self.count, self.columns, self.b = count_name, count, columns, backend

    # a sequence of statements becomes the value of the first RETURN it reaches
    def seq(self, stmts: list[n.Node], env: dict[str, Typed[C]]) -> Typed[C]:
        b = self.b
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(s, n.Block):
                return self.seq(list(s.stmts) + rest, dict(env))
            if isinstance(s, n.VarDecl):
                kind = s.type.name
                for d in s.declarators:
                    value = self.expr(d.init, env) if d.init is not None else Typed(b.null(), "null")
                    env[d.name.name] = self._coerce(value, kind)
            elif isinstance(s, n.Assign):
                old = env.get(s.target.name.name)
                if old is None:
                    raise Unsupported(f"assignment to '{s.target.name.name}', which is not a local")
                env[s.target.name.name] = self._coerce(self.expr(s.value, env), old.kind)
            elif isinstance(s, n.If):
                cond = self._condition(self.expr(s.cond, env))
                then = self.seq([s.then] + rest, dict(env))
                other = self.seq(([s.otherwise] if s.otherwise is not None else []) + rest, dict(env))
                kind = _unify(then.kind, other.kind)
                if kind is None:  # (a boolean and a number: not an instance either way)
                    raise Unsupported(f"branches returning {then.kind} and {other.kind}")
                return Typed(b.when([(cond, then.col)], other.col), kind,
                             then.nonneg and other.nonneg, then.in_range and other.in_range)
            elif isinstance(s, n.Return):
                return self.expr(s.value, env) if s.value is not None else Typed(b.null(), "null")
            else:
                raise Unsupported(f"a {type(s).__name__}")
        return Typed(b.null(), "null")  # ends without RETURN: null, a bad record

    def _coerce(self, value: Typed[C], kind: str) -> Typed[C]:
        if value.kind == kind:
            return value
        if value.kind == "null" or (value.kind in NUMERIC and kind in NUMERIC
                                    and NUMERIC.index(value.kind) < NUMERIC.index(kind)):
            return Typed(self.b.cast(value.col, kind), kind, value.nonneg, value.in_range)
        raise Unsupported(f"a {value.kind} value stored in a {kind} variable")

    def _condition(self, t: Typed[C]) -> C:
        if t.kind == "boolean":
            return t.col
        if t.kind in NUMERIC:
            return self.b.nonzero(t.col)
        if t.kind == "null":
            return self.b.literal(False, "boolean")
        raise Unsupported(f"a {t.kind} condition")

    def expr(self, e: n.Node, env: dict[str, Typed[C]]) -> Typed[C]:
        b = self.b
        if isinstance(e, n.Literal):
            if e.kind == "null":
                return Typed(b.null(), "null")
            if e.kind not in SCALAR_TYPES:
                raise Unsupported(f"a {e.kind} literal")
            nonneg = e.kind in NUMERIC and e.value >= 0
            return Typed(b.literal(e.value, e.kind), e.kind, nonneg,
                         nonneg and e.kind != "float" and e.value < self.count)
        if isinstance(e, n.Var):
            name = e.name.name
            if name in env:
                return env[name]
            if name == self.count_name:
                return Typed(b.literal(self.count, "integer"), "integer", nonneg=True)
            raise Unsupported(f"the name '{name}'")
        if isinstance(e, n.FieldAccess):
            kind = self.columns.get(e.field.name)
            if kind is None:
                raise Unsupported(f"column '{e.field.name}' of an unsupported type")
            return Typed(b.column(e.field.name, kind), kind)
        if isinstance(e, n.Unary):
            v = self.expr(e.operand, env)
            if e.op == "not":
                return Typed(b.not_(self._condition(v)), "boolean")
            if v.kind not in NUMERIC + ("null",):
                raise Unsupported(f"unary {e.op} on {v.kind}")
            return Typed(b.negate(v.col) if e.op == "-" else v.col, v.kind)
        if isinstance(e, n.Binary):
            return self._binary(e, env)
        if isinstance(e, n.Call):
            return self._call(e, env)
        if isinstance(e, n.Case):
            return self._case(e, env)
        raise Unsupported(f"a {type(e).__name__}")

    def _binary(self, e: n.Binary, env: dict[str, Typed[C]]) -> Typed[C]:
        b = self.b
        left, right = self.expr(e.left, env), self.expr(e.right, env)
        op = e.op
        if op in ("and", "or"):
            return Typed(b.logic(op, self._condition(left), self._condition(right)), "boolean")
        if op in ("=", "!=", "<", "<=", ">", ">="):
            if _unify(left.kind, right.kind) is None:
                raise Unsupported(f"comparison of {left.kind} with {right.kind}")
            return Typed(b.compare(op, left.col, right.col), "boolean")
        if op == "+" and "string" in (left.kind, right.kind):
            if {left.kind, right.kind} <= {"string", "null"}:
                return Typed(b.concat(left.col, right.col), "string")
            raise Unsupported("+ of a string and a non-string")
        kind = _unify(left.kind, right.kind)
        if kind not in NUMERIC + ("null",) or op not in ("+", "-", "*", "%"):
            raise Unsupported(f"{op} on {left.kind} and {right.kind}")
        if kind == "null":
            return Typed(b.null(), "null")
        lcol, rcol = (b.cast(t.col, kind) if t.kind != kind else t.col for t in (left, right))
        # Java's remainder of a non-negative value by the partition count lies in 0..count-1.
        in_range = op == "%" and left.nonneg and kind != "float" and self._is_count(e.right)
        return Typed(b.arithmetic(op, lcol, rcol), kind, in_range, in_range)

    def _call(self, e: n.Call, env: dict[str, Typed[C]]) -> Typed[C]:
        b = self.b
        name = e.func.name.lower()
        if e.library is not None or e.distinct or name not in COMPILABLE_FUNCTIONS:
            raise Unsupported(f"a call to {e.func.name}()")
        low, high = COMPILABLE_FUNCTIONS[name]
        if not low <= len(e.args) <= high:
            raise Unsupported(f"{e.func.name}() with {len(e.args)} arguments")
        if name == "mod":
            return self._binary(n.Binary("%", e.args[0], e.args[1]), env)
        if name == "ascii" and _leading_substring(e.args[0]):
            # ascii(substr(s, 1, k)) with k >= 1 reads the first character of s: same result
            # (nulls and '' included) without copying a substring for every row.
            e = n.Call(e.func, [e.args[0].args[0]])  # type: ignore[attr-defined]
        args = [self.expr(a, env) for a in e.args]
        if name in ("coalesce", "firstnonnull"):
            kind: Optional[str] = args[0].kind
            for a in args[1:]:
                kind = _unify(kind, a.kind)
                if kind is None:
                    raise Unsupported(f"{name}() of mixed types")
            if kind == "null":
                return Typed(b.null(), "null")
            cast = [b.cast(a.col, kind) for a in args]  # type: ignore[arg-type]
            return Typed(b.call("coalesce", cast), kind)  # type: ignore[arg-type]
        cols = [a.col for a in args]
        if name not in ("abs", "isnull"):  # string functions: a string, then integer positions
            if args[0].kind not in ("string", "null") \
                    or any(a.kind not in ("integer", "long", "null") for a in args[1:]):
                raise Unsupported(f"{name}() of {', '.join(a.kind for a in args)}")
        if name in ("ascii", "length"):
            return Typed(b.call(name, cols), "integer", nonneg=True)
        if name == "abs":
            if args[0].kind not in NUMERIC + ("null",):
                raise Unsupported(f"abs() of a {args[0].kind}")
            return Typed(b.call(name, cols), args[0].kind)
        if name == "isnull":
            return Typed(b.call(name, cols), "boolean")
        return Typed(b.call(name, cols), "string")  # substr, left, right, upper, lower, *trim

    def _is_count(self, e: n.Node) -> bool:
        """Whether ``e`` is the partition count (<target>_partitions or the same constant)."""
        if isinstance(e, n.Var):
            return e.name.name == self.count_name
        return isinstance(e, n.Literal) and e.kind in ("integer", "long") and e.value == self.count

    def _case(self, e: n.Case, env: dict[str, Typed[C]]) -> Typed[C]:
        b = self.b
        subject = self.expr(e.subject, env) if e.subject is not None else None
        tests, values, kind = [], [], "null"
        for w in e.whens:
            cond = self.expr(w.when, env)
            tests.append(b.compare("=", subject.col, cond.col) if subject is not None
                         else self._condition(cond))
            value = self.expr(w.then, env)
            kind = _unify(kind, value.kind)  # type: ignore[assignment]
            values.append(value)
        default = self.expr(e.default, env) if e.default is not None else Typed(b.null(), "null")
        kind = _unify(kind, default.kind)  # type: ignore[assignment]
        if kind is None:
            raise Unsupported("CASE branches of different types")

        def cast(t: Typed[C]) -> C:
            return b.cast(t.col, kind) if kind != "null" else t.col
        return Typed(b.when([(t, cast(v)) for t, v in zip(tests, values)], cast(default)), kind)


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
    if a in NUMERIC and b in NUMERIC:
        return NUMERIC[max(NUMERIC.index(a), NUMERIC.index(b))]
    return None


def lower_partition_function(block: n.Block, source: str, count_name: str, count: int,
                             columns: Mapping[str, str], backend: PartitionBackend[C]) -> C:
    """The instance of a row (0..count-1, null when the block gives no integer) as ``backend``
    builds it, for ``block`` reading the row as ``source``, the partition count as ``count_name``
    and the row's ``columns`` (name to kind, see :func:`column_kinds`); or
    :class:`Unsupported` with the reason the block does not lower."""
    why = why_not_syntax(block, source)
    if why:
        raise Unsupported(why)
    result = _Walk(count_name, count, columns, backend).seq(list(block.stmts), {})
    if result.kind == "null":
        return backend.cast(backend.null(), "integer")
    if result.kind not in ("integer", "long"):
        raise Unsupported(f"the block returns {result.kind}")
    return backend.instance(result.col, result.kind, count, result.in_range)
