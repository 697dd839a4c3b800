"""Types of expressions and SPLASH statements, with the name, type and call checks on the way.

The :class:`Typer` reports CCL2003-CCL2010, CCL2101-CCL2103, CCL2205 and CCL2206, and records
which variable each name resolves to (the safety pass needs it).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Collection, Iterable, Iterator, Optional

from ..syntax import nodes as n
from ..splash.functions_data import ENGINE_AGGREGATES, FUNCTIONS
from .symbols import OPCODES, Context, Variable
from ..splash.types import (ANY, BOOLEAN, FLOAT, INTEGER, INTERVAL, LONG, NULL, SCALARS, STRING, Type,
                    comparable, record, scalar, truthy, widens, widest)

# Functions real projects call that are not ESP built-ins of the reference: the partitioning
# guide's insertIntoCache(row) (a user function in SAP's example, called without declaration).
EXTRA_FUNCTIONS = {
    "insertintocache": dict(kind="splash", min_args=1, max_args=2, args=("any",), result="arg1"),
}

_LITERAL_TYPES = {"integer": INTEGER, "long": LONG, "float": FLOAT, "string": STRING,
                  "boolean": BOOLEAN, "null": NULL}
_ARITH = {"+", "-", "*", "/", "%", "^"}
_COMPARE = {"=", "!=", "<", "<=", ">", ">="}

Report = Callable[[str, n.Span, str], None]


def function_info(name: str) -> Optional[dict]:
    """The catalogue entry of a built-in function (case-insensitive), or None."""
    low = name.lower()
    return FUNCTIONS.get(low) or EXTRA_FUNCTIONS.get(low)


def runs_at_run_time(name: str) -> bool:
    """Whether the runtime runs the catalogue function ``name`` (a SPLASH built-in, an engine
    GROUP BY aggregate or an event-cache aggregate; CAST is syntax)."""
    from ..splash.builtins import lookup
    from ..splash.caches import AGGREGATES

    low = name.lower()
    return (low == "cast" or lookup(low) is not None or low in ENGINE_AGGREGATES
            or low in AGGREGATES)


def is_aggregate_call(call: n.Call) -> bool:
    """An aggregate call: count, sum, ... (max/min with two or more arguments are scalar)."""
    if call.library is not None:
        return False
    info = function_info(call.func.name)
    if info is None or info["kind"] != "aggregate":
        return False
    return not (call.func.name.lower() in ("max", "min") and len(call.args) > 1)


def aggregate_calls(nodes: Iterable[n.Node], caches: Collection[str] = ()) -> Iterator[n.Call]:
    """The aggregate calls in ``nodes``, except those over a name in ``caches`` (an aggregate of
    an event cache is SPLASH's, evaluated per row)."""
    for x in (x for node in nodes for x in node.walk()):
        if (isinstance(x, n.Call) and is_aggregate_call(x)
                and not any(isinstance(v, n.Var) and v.name.name in caches for v in x.walk())):
            yield x


class Typer:
    """Computes expression types in a :class:`Context` and reports what is wrong."""

    def __init__(self, report: Report, type_spec: Callable[[n.Node], Type]) -> None:
        self.report = report
        self.type_spec = type_spec
        self.resolved: dict[int, Variable] = {}  # id(Var node) -> the variable it names
        self.global_uses = 0  # how many of those resolutions named a global variable
        self.libraries: dict[str, n.CreateLibrary] = {}  # CREATE LIBRARY statements seen so far

    # --- expressions ------------------------------------------------------------------------

    def type_of(self, e: n.Node, ctx: Context) -> Type:
        method = getattr(self, "_" + type(e).__name__, None)
        return method(e, ctx) if method is not None else ANY

    def _Literal(self, e: n.Literal, ctx: Context) -> Type:
        if e.kind == "money":  # 10.00d2 is money(2): the scale is the Decimal's exponent
            return Type("money", (-e.value.as_tuple().exponent,))  # type: ignore[attr-defined]
        return _LITERAL_TYPES[e.kind]

    def _Var(self, e: n.Var, ctx: Context) -> Type:
        name = e.name.name
        if ctx.in_splash:
            found = self._variable(e, ctx) or self._column(e, ctx)
        else:
            found = self._column(e, ctx) or self._variable(e, ctx)
        if found is not None:
            return found
        src = ctx.source(name)
        if src is not None:
            return src.element.row_type
        if name.lower() in OPCODES:
            return INTEGER
        if ctx.in_splash and name.endswith(("_stream", "_iterator")):
            # ESP's implicit W_stream / W_iterator of a window W (iterating its rows)
            self.report("CCL2010", e.name.span, f"{name} (iterating a window) is an ESP feature this "
                                                "runtime does not run: every row that reaches it "
                                                "becomes a bad record")
            return ANY
        self.report("CCL2007", e.name.span, f"unknown name '{name}'")
        return ANY

    def _variable(self, e: n.Var, ctx: Context) -> Optional[Type]:
        var = ctx.scope.lookup(e.name.name)
        if var is None:
            return None
        self.resolved[id(e)] = var
        if var.where == "global":
            self.global_uses += 1
        if ctx.in_where and var.where == "local":
            self.report("CCL2206", e.name.span, f"local variable '{var.name}' cannot be used in WHERE "
                                                "(use it in the select list)")
        return var.type

    def _column(self, e: n.Var, ctx: Context) -> Optional[Type]:
        name = e.name.name
        owners = [s for s in ctx.sources if name in s.element.columns]
        if not owners:
            return None
        if len({id(s) for s in owners}) > 1:
            names = " and ".join(s.alias for s in owners)
            self.report("CCL2004", e.name.span, f"column '{name}' is ambiguous: it is in {names}; "
                                                f"write {owners[0].alias}.{name}")
        return owners[0].element.columns[name]

    def _FieldAccess(self, e: n.FieldAccess, ctx: Context) -> Type:
        base, name = e.base, e.field.name
        if isinstance(base, n.Var) and not (ctx.in_splash and ctx.scope.lookup(base.name.name)):
            src = ctx.source(base.name.name)
            if src is not None:
                if src.element.open:
                    return ANY
                if name not in src.element.columns:
                    self.report("CCL2003", e.field.span, f"'{src.element.name}' has no column '{name}'")
                    return ANY
                return src.element.columns[name]
        base_type = self.type_of(base, ctx)
        if base_type.name == "eventcache" and base_type.args:
            base_type = base_type.args[0]
        if base_type.name == "record" and base_type.fields:
            found = base_type.field(name)
            if found is None:
                self.report("CCL2003", e.field.span, f"no column or field '{name}' here")
                return ANY
            return found
        if base_type.name in SCALARS:
            self.report("CCL2101", e.field.span, f"'.{name}': {base_type} has no fields")
        return ANY

    def _IndexAccess(self, e: n.IndexAccess, ctx: Context) -> Type:
        base = self.type_of(e.base, ctx)
        index = self.type_of(e.index, ctx)
        if base.name == "dictionary" and len(base.args) == 2:
            if not widens(index, base.args[0]):
                self.report("CCL2101", e.index.span, f"the keys of {base} are {base.args[0]}, not {index}")
            return base.args[1]
        if base.name in ("vector", "window") and base.args:
            if base.name == "vector" and not widens(index, LONG):
                self.report("CCL2101", e.index.span, f"a vector's index is an integer, not {index}")
            return base.args[0]
        if base.name in SCALARS:
            self.report("CCL2101", e.span, f"[...] indexes a vector or dictionary, not {base}")
        return ANY

    def _WindowFind(self, e: n.WindowFind, ctx: Context) -> Type:
        base = self.type_of(e.base, ctx)
        self.type_of(e.record, ctx)
        if base.name == "window" and base.args:
            return base.args[0]
        if not base.is_vague:
            self.report("CCL2101", e.base.span, f"{{...}} looks up rows of a window (W_stream), "
                                                f"not of {base}")
        return ANY

    def _Star(self, e: n.Star, ctx: Context) -> Type:
        return ANY

    def _New(self, e: n.New, ctx: Context) -> Type:
        return self.type_spec(e.type)

    def _Cast(self, e: n.Cast, ctx: Context) -> Type:
        self.type_of(e.expr, ctx)
        return self.type_spec(e.type)

    def _RecordLit(self, e: n.RecordLit, ctx: Context) -> Type:
        return record([(f.name.name, self.type_of(f.value, ctx)) for f in e.key_fields + e.fields])

    def _Sequence(self, e: n.Sequence, ctx: Context) -> Type:
        for step in e.steps:
            if isinstance(step, n.Assign):
                target, value = self.type_of(step.target, ctx), self.type_of(step.value, ctx)
                if not widens(value, target):
                    self.report("CCL2103", step.value.span, f"cannot assign {value} to {target}")
            else:
                self.type_of(step.expr, ctx)  # type: ignore[attr-defined]
        return self.type_of(e.value, ctx)

    def _Case(self, e: n.Case, ctx: Context) -> Type:
        if e.subject is not None:
            self.type_of(e.subject, ctx)
        results: list[tuple[Type, n.Node]] = []
        for w in e.whens:
            self.type_of(w.when, ctx)
            results.append((self.type_of(w.then, ctx), w.then))
        if e.default is not None:
            results.append((self.type_of(e.default, ctx), e.default))
        known = [(t, node) for t, node in results if not t.is_vague]
        so_far = known[0][0] if known else None
        for t, node in known[1:]:  # the first branch that fits no earlier one is reported
            common = widest([so_far, t])
            if common.is_vague:
                self.report("CCL2101", node.span, f"this CASE branch gives {t}, an earlier one "
                                                  f"{known[0][0]}: give all branches one type "
                                                  "(to_string, cast ...)")
                break
            so_far = common
        return widest([t for t, _ in results])

    def _InList(self, e: n.InList, ctx: Context) -> Type:
        left = self.type_of(e.expr, ctx)
        for item in e.items:
            t = self.type_of(item, ctx)
            if not comparable(left, t):
                self.report("CCL2101", item.span, f"cannot compare {left} with {t}")
        return BOOLEAN

    def _Unary(self, e: n.Unary, ctx: Context) -> Type:
        t = self.type_of(e.operand, ctx)
        if e.op == "not":
            if not truthy(t, ctx.in_splash):
                self.report("CCL2101", e.operand.span, f"NOT needs a boolean, not {t}")
            return BOOLEAN
        if not (t.is_vague or t.is_numeric or t.name == "interval"):
            self.report("CCL2101", e.operand.span, f"unary {e.op} needs a number, not {t}")
            return ANY
        return t

    def _Binary(self, e: n.Binary, ctx: Context) -> Type:
        left, right = self.type_of(e.left, ctx), self.type_of(e.right, ctx)
        op = e.op
        if op in ("and", "or"):
            for side, t in ((e.left, left), (e.right, right)):
                if not truthy(t, ctx.in_splash):
                    self.report("CCL2101", side.span, f"{op.upper()} needs a boolean, not {t}")
            return BOOLEAN
        temporal = _temporal_with_number(op, left, right)
        if temporal is not None:
            e.temporal = temporal  # the runtime counts the date-time in this type's units
            return BOOLEAN if op in _COMPARE else Type(temporal)
        if op in _COMPARE:
            if not comparable(left, right):
                self.report("CCL2101", e.right.span, f"cannot compare {left} with {right}")
            return BOOLEAN
        if op == "like":
            for side, t in ((e.left, left), (e.right, right)):
                if not (t.is_vague or t.name == "string"):
                    self.report("CCL2101", side.span, f"LIKE needs strings, not {t}")
            return BOOLEAN
        result = _arithmetic(op, left, right)
        if result is None:
            blame = e.left if not _arith_operand_ok(op, left, right) else e.right
            bad = left if blame is e.left else right
            self.report("CCL2101", blame.span, f"operator {op} cannot take {bad} "
                                               f"(operands are {left} and {right})")
            return ANY
        return result

    def _Call(self, e: n.Call, ctx: Context) -> Type:
        if e.library is not None:
            return self._library_call(e, ctx)
        name = e.func.name
        user = ctx.functions.get(name)
        args_ctx = ctx
        if user is None and not ctx.in_splash and is_aggregate_call(e):  # (SPLASH aggregates event caches)
            args_ctx = replace(ctx, no_aggregates=f"the argument of {name}()")
        arg_types = [self.type_of(a, args_ctx) for a in e.args]
        if user is not None:
            if len(e.args) != len(user.params):
                self.report("CCL2008", e.func.span, f"{name}() takes {len(user.params)} argument(s), "
                                                    f"not {len(e.args)}")
            for arg, t, param in zip(e.args, arg_types, user.params):
                want = self.type_spec(param.type)
                if not widens(t, want):
                    self.report("CCL2102", arg.span, f"argument '{param.name.name}' of {name}() is "
                                                     f"{want}, not {t}")
            return self.type_spec(user.return_type)
        info = function_info(name)
        if info is None:
            self.report("CCL2005", e.func.span, f"unknown function '{name}'")
            return ANY
        if name.lower() == "rank":
            if not ctx.in_group_filter:
                self.report("CCL2212", e.func.span, "rank() can only be used in GROUP FILTER (the "
                                                    "rank of a row in its group, by GROUP ORDER BY)")
        elif not runs_at_run_time(name):
            self.report("CCL2010", e.func.span, f"{name}() is an ESP function this runtime does not "
                                                "run: every row that calls it becomes a bad record")

        if is_aggregate_call(e):
            if ctx.in_where:
                self.report("CCL2205", e.func.span, f"aggregate {name}() cannot be used in WHERE "
                                                    "(move the condition to HAVING)")
            elif ctx.no_aggregates:
                self.report("CCL2205", e.func.span, f"aggregate {name}() cannot be used in "
                                                    f"{ctx.no_aggregates}")
        count = 0 if (len(e.args) == 1 and isinstance(e.args[0], n.Star)) else len(e.args)
        low, high = info["min_args"], info["max_args"]
        if count < low or (high is not None and count > high):
            takes = f"{low}" if low == high else (f"{low} to {high}" if high is not None
                                                 else f"at least {low}")
            self.report("CCL2008", e.func.span, f"{name}() takes {takes} argument(s), not {count}")
            return _result(info["result"], arg_types)
        if name.lower() in ("getiterator", "getnext") and arg_types[0].name in ("window", "iterator"):
            # getIterator(W_stream) iterates W's rows; getNext gives one of them
            row = arg_types[0].args[0]
            return Type("iterator", (row,)) if name.lower() == "getiterator" else row
        patterns = info["args"]
        for i, (arg, t) in enumerate(zip(e.args, arg_types)):
            pattern = patterns[min(i, len(patterns) - 1)] if patterns else "any"
            if not _fits(t, pattern):
                self.report("CCL2102", arg.span, f"argument {i + 1} of {name}() must be {pattern}, "
                                                 f"not {t}")
        return _scaled(name.lower(), e.args) or _result(info["result"], arg_types)

    def _library_call(self, e: n.Call, ctx: Context) -> Type:
        """``Lib.func(args)``: checked against the CREATE LIBRARY's declaration; C and Java code
        cannot run on Spark (CCL2010: each row that calls it becomes a bad record)."""
        arg_types = [self.type_of(a, ctx) for a in e.args]
        lib_name, name = e.library.name, e.func.name  # type: ignore[union-attr]
        lib = self.libraries.get(lib_name)
        if lib is None:
            self.report("CCL2005", e.library.span, f"unknown library '{lib_name}' in "  # type: ignore[union-attr]
                                                   f"{lib_name}.{name}() (CREATE LIBRARY it first)")
            return ANY
        fn = next((f for f in lib.functions if f.name.name == name), None)
        if fn is None:
            self.report("CCL2005", e.func.span, f"library '{lib_name}' declares no function '{name}'")
            return ANY
        if len(e.args) != len(fn.params):
            self.report("CCL2008", e.func.span, f"{lib_name}.{name}() takes {len(fn.params)} "
                                                f"argument(s), not {len(e.args)}")
        for i, (arg, t, spec) in enumerate(zip(e.args, arg_types, fn.params)):
            want = self.type_spec(spec)
            if not widens(t, want):
                self.report("CCL2102", arg.span, f"argument {i + 1} of {lib_name}.{name}() is "
                                                 f"{want}, not {t}")
        language = "Java" if lib.language == "java" else "C"
        self.report("CCL2010", e.func.span, f"{lib_name}.{name}() is {language} code "
                    f"(CREATE LIBRARY {lib_name} FROM '{lib.source}'), which cannot run on Spark: "
                    f"every row that calls it becomes a bad record; write {name} as a SPLASH "
                    "function in a DECLARE block and call it by its name")
        return self.type_spec(fn.return_type)


def _temporal_with_number(op: str, left: Type, right: Type) -> Optional[str]:
    """The temporal type when ``left op right`` treats a date-time as its count of units since
    the epoch (seconds for a date, milliseconds for a timestamp, microseconds for a bigdatetime):
    ``* / %`` with an integer or long (``(t / 3600) * 3600``), and comparisons with one; + and -
    keep reading the number as an interval (microseconds). None for anything else."""
    if op not in _COMPARE and op not in ("*", "/", "%"):
        return None
    for a, b in ((left, right), (right, left)):
        if a.is_temporal and b.name in ("integer", "long"):
            if op in ("/", "%") and a is right:
                return None  # a number divided by a date-time means nothing
            return a.name
    return None


def _arith_operand_ok(op: str, left: Type, right: Type) -> bool:
    """Whether the left operand alone is acceptable for ``op`` (to decide which side to blame)."""
    if left.is_vague or left.is_numeric or left.name == "interval":
        return True
    if op == "+" and left.name == "string":
        return True
    return op in ("+", "-", "*", "/", "%") and left.is_temporal  # (* / % with a number)


def _arithmetic(op: str, left: Type, right: Type) -> Optional[Type]:
    """The result type of an arithmetic operator, or None when the operands do not fit."""
    if left.is_vague or right.is_vague:
        if left.name == "string" or right.name == "string":
            return STRING if op == "+" else None
        return ANY if left.is_vague and right.is_vague else (right if left.is_vague else left)
    if left.is_numeric and right.is_numeric:
        return widest([left, right])
    if op == "+" and left.name == right.name == "string":
        return STRING
    ints = ("integer", "long", "interval")
    if op in ("+", "-") and left.is_temporal and right.name in ints:
        return left
    if op == "+" and right.is_temporal and left.name in ints:
        return right
    if op == "-" and left.is_temporal and right.is_temporal:
        return INTERVAL
    if left.name == "interval" and (right.name in ints or right.is_numeric):
        return INTERVAL
    if right.name == "interval" and left.name in ("integer", "long") and op in ("+", "-", "*"):
        return INTERVAL
    return None


def _fits(t: Type, pattern: str) -> bool:
    if t.is_vague:
        return True
    if pattern in ("numeric", "integer", "long", "float", "money", "decimal"):
        return t.is_numeric or t.name == "interval"
    if pattern == "string":
        return t.name == "string"
    if pattern == "temporal":
        return t.is_temporal
    return True  # any, record, containers, type names: not checked


def _scaled(name: str, args: list[n.Node]) -> Optional[Type]:
    """``to_decimal(x, p, s)`` is decimal(p, s) and ``to_money(x, n)`` money(n) when the precision
    and scale are integer literals (otherwise the catalogue's plain decimal / money)."""
    sizes = [a.value for a in args[1:] if isinstance(a, n.Literal) and isinstance(a.value, int)
             and not isinstance(a.value, bool)]
    if name == "to_decimal" and len(args) == 3 and len(sizes) == 2:
        return scalar("decimal", tuple(sizes))
    if name == "to_money" and len(args) == 2 and len(sizes) == 1:
        return scalar("money", tuple(sizes))
    return None


def _result(spec: str, args: list[Type]) -> Type:
    if spec.startswith("arg"):
        k = int(spec[3:]) - 1
        return args[k] if k < len(args) else ANY
    if spec == "widest":
        return widest(args) if args else ANY
    if spec == "average":  # money and decimals keep their exactness; other numbers give a float
        first = args[0] if args else ANY
        return first if first.name in ("money", "decimal", "any") else FLOAT
    if spec == "elem":
        first = args[0] if args else ANY
        return first.args[0] if first.name in ("vector", "eventcache") and first.args else ANY
    if spec == "value":
        first = args[0] if args else ANY
        return first.args[1] if first.name == "dictionary" and len(first.args) == 2 else ANY
    return scalar(spec) if spec not in ("unknown", "temporal", "record") else ANY
