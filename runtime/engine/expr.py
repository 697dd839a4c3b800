"""Plan expressions evaluated in Python, by the SPLASH interpreter (no eval/exec).

The typed plan carries each expression as a SPLASH tree (docs/plan.md). Rows are mappings of
column to value, passed per source alias; aggregate results and other names the runtime binds are
passed as variables.
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping, Optional, Sequence

from ccl.plan.lowering.columnar import IMPURE_FUNCTIONS
from ccl.syntax import nodes as n
from ccl.splash import Declarations, Interpreter, SplashError, as_type
from ccl.splash.builtins import lookup
from ccl.splash.machine import Machine
from ccl.splash.convert import PLAIN_KINDS, cast, from_python, to_text
from ccl.splash.operators import (arithmetic, comparison, like, logical_and, logical_not, logical_or,
                                  negate, plus, temporal_number, truth)
from runtime.engine.trees import tree

Rows = Mapping[str, Mapping[str, object]]
Compiled = Callable[..., object]

__all__ = ["Expressions", "SplashError", "coerce_column", "coerce_row", "splash_value"]

# SPLASH in elements and Flex handlers: ESP sets no step or depth limit, and summing over a window of
# a million rows or recursing a thousand deep is ordinary code. The limits only stop a runaway row
# (a bad record) before it stalls its query: about a minute of steps, 1,000 nested calls.
ENGINE_LIMITS = {"budget": 50_000_000, "max_depth": 1000}


class Expressions:
    """Compiles plan expressions once and evaluates them on rows.

    ``variables`` are names every expression may read (``<target>_partitions``, globals);
    ``source_types`` gives each alias's column types (CCL type text), so that values are typed as
    declared (a whole number in a ``float`` column is a float).
    """

    def __init__(self, variables: Optional[Mapping[str, object]] = None,
                 source_types: Optional[Mapping[str, Sequence[Sequence[str]]]] = None,
                 declarations: Optional[Declarations] = None) -> None:
        types = {alias: {name: t for name, t in cols} for alias, cols in (source_types or {}).items()}
        self._types = {alias: {c: _type(t) for c, t in cols.items()} for alias, cols in types.items()}
        self._shadowing = set(variables or {}) | set(declarations.values if declarations else ())
        self._ctx: Optional[Machine] = None
        if declarations is not None:
            # Plan globals and the element's local DECLARE (runtime/engine/cache.py): variables
            # read from the instance's store once bound (see bind), functions callable.
            self._interp = Interpreter(declarations, constants=set(variables or {}),
                                       global_types={}, source_types=types, **ENGINE_LIMITS)
        else:
            self._interp = Interpreter(dict(variables or {}), constants=set(variables or {}),
                                       source_types=types, **ENGINE_LIMITS)

    def bind(self, store: Optional[dict]) -> None:
        """Read and write DECLAREd variables in ``store`` (one instance's) from now on."""
        self._interp.bind(store)

    def set_row_id(self, seq: Optional[int]) -> None:
        """What ``getrowid()`` gives from now on: the sequence number of the input row at hand."""
        self._interp.row_id = seq

    def compile(self, expr: object) -> Compiled:
        """A function ``f(rows, variables={})`` giving the value of ``expr`` (a tree, or its JSON
        form).

        It raises :class:`SplashError` when the expression fails (the caller makes the row a bad
        record)."""
        node = tree(expr)
        direct = self._direct(node)
        if direct is None:
            return self._interpreted(node)
        if not isinstance(node, (n.Unary, n.Binary, n.Call, n.Case, n.Cast)):
            return direct  # a leaf: raises nothing but SplashError

        def guarded(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            try:
                return direct(rows, variables)  # type: ignore[misc]
            except SplashError:
                raise
            except RecursionError:
                raise SplashError("code nested too deeply") from None
            except Exception as e:  # as the interpreter's guard: never a traceback for a row
                raise SplashError(f"internal error: {type(e).__name__}: {e}") from None
        return guarded

    def _interpreted(self, node: n.Node) -> Compiled:
        interp = self._interp

        def run(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            return interp.evaluate(node, rows, variables)
        return run

    def _direct(self, node: n.Node) -> Optional[Compiled]:
        """``node`` as Python closures calling SPLASH's own operators, without setting up an
        interpreter call per row (which converts every column of every row into a SPLASH record):
        literals, columns of a source, bound variables, and unary and binary operators, casts,
        CASE and calls of pure built-in functions over them.
        None for anything else (the interpreter evaluates the whole expression)."""
        if isinstance(node, n.Literal):
            try:
                value = self._interp.compiler.expr(node)(None, None)
            except Exception:  # a literal the interpreter refuses (too large): it says why
                return None
            return lambda rows, variables={}: value
        if isinstance(node, n.Var):  # a value the runtime binds (an aggregate's result)
            name, run = node.name.name, self._interpreted(node)

            def bound(rows: Rows, variables: Mapping[str, object] = {}) -> object:
                if name not in variables:
                    return run(rows, variables)
                return splash_value(variables[name])
            return bound
        ref = self._column(node)
        if ref is not None:
            # A column of a source: the value the interpreter would read, without making a SPLASH
            # record of every row (the interpreter runs when anything is unusual).
            alias, column, ctype = ref
            plain, run = _PLAIN.get(ctype.name), self._interpreted(node)  # type: ignore[attr-defined]

            def read(rows: Rows, variables: Mapping[str, object] = {}) -> object:
                row = rows.get(alias)
                if alias in variables or type(row) is not dict or column not in row:
                    return run(rows, variables)
                v = row[column]
                return v if type(v) is plain and _is_plain(v) else from_python(v, ctype)
            return read
        if isinstance(node, n.Unary) and node.op in _UNARY:
            operand, unary = self._direct(node.operand), _UNARY[node.op]
            if operand is None:
                return None
            return lambda rows, variables={}: unary(operand(rows, variables))
        if isinstance(node, n.Binary):
            return self._binary(node)
        if isinstance(node, n.Call):
            return self._call(node)
        if isinstance(node, n.Case):
            return self._case(node)
        if isinstance(node, n.Cast):
            try:
                t = self._interp.compiler.type(node.type)
            except Exception:  # the interpreter says why
                return None
            operand = self._direct(node.expr)
            if operand is None or t.name == "any":  # type: ignore[attr-defined]
                return None
            return lambda rows, variables={}: cast(operand(rows, variables), t)
        return None

    def _call(self, node: n.Call) -> Optional[Compiled]:
        """A call of a built-in function whose value depends on its arguments alone, over direct
        arguments: the interpreter's call (ccl/splash/expressions.py ``_e_Call``: arguments
        evaluated in order, null for a strict function given a null, coalesce lazily) without
        its per-row set-up. None for user functions, clocks, counters, containers, caches and
        the like."""
        name = node.func.name
        if (node.library is not None or node.distinct or not node.args
                or any(isinstance(a, n.Star) for a in node.args)
                or name in self._interp.compiler.function_defs):
            return None
        builtin = lookup(name)
        if builtin is None and name.lower() in ("max", "min") and len(node.args) > 1:
            builtin = lookup(name.lower() + "of")
        if builtin is None or builtin.name in _NOT_DIRECT or name.lower() in _NOT_DIRECT:
            return None
        if len(node.args) < builtin.min_args or (builtin.max_args is not None
                                                 and len(node.args) > builtin.max_args):
            return None
        args = [self._direct(a) for a in node.args]
        if any(a is None for a in args):
            return None
        fn, strict, ctx = builtin.fn, builtin.strict, self._context()
        if builtin.name in ("coalesce", "firstnonnull"):
            def first(rows: Rows, variables: Mapping[str, object] = {}) -> object:
                for a in args:
                    value = a(rows, variables)  # type: ignore[misc]
                    if value is not None:
                        return value
                return None
            return first
        if len(args) == 1:
            arg = args[0]

            def call_1(rows: Rows, variables: Mapping[str, object] = {}) -> object:
                value = arg(rows, variables)  # type: ignore[misc]
                if strict and value is None:
                    return None
                return fn(ctx, value)
            return call_1

        def call(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            values = [a(rows, variables) for a in args]  # type: ignore[misc]
            if strict and None in values:
                return None
            return fn(ctx, *values)
        return call

    def _case(self, node: n.Case) -> Optional[Compiled]:
        """``CASE [subject] WHEN ... THEN ... [ELSE ...] END`` over direct parts, as the interpreter
        runs it (the subject compared with ``=``, the first hit's value, the ELSE or null)."""
        subject = self._direct(node.subject) if node.subject is not None else None
        whens = [(self._direct(w.when), self._direct(w.then)) for w in node.whens]
        default = self._direct(node.default) if node.default is not None else None
        if ((node.subject is not None and subject is None) or (node.default is not None and default is None)
                or any(w is None or t is None for w, t in whens)):
            return None

        def run(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            value = subject(rows, variables) if subject is not None else None
            for when, then in whens:
                hit = (comparison("=", value, when(rows, variables)) if subject is not None  # type: ignore[misc]
                       else truth(when(rows, variables)))  # type: ignore[misc]
                if hit:
                    return then(rows, variables)  # type: ignore[misc]
            return default(rows, variables) if default is not None else None
        return run

    def _context(self) -> Machine:
        """The call context built-ins get: one per Expressions (the functions called directly
        read none of it: no clock, counter, row id or output)."""
        if self._ctx is None:
            interp = self._interp
            self._ctx = Machine(interp.budget, interp.max_depth, {}, interp.clock, None)
        return self._ctx

    def _binary(self, node: n.Binary) -> Optional[Compiled]:
        left, right, op = self._direct(node.left), self._direct(node.right), node.op
        if left is None or right is None:
            return None
        if op in ("and", "or"):  # three-valued; the right side only when it can matter
            logic = logical_and if op == "and" else logical_or
            return lambda rows, variables={}: logic(left(rows, variables), lambda: right(rows, variables))
        if op == "like":
            return lambda rows, variables={}: like(left(rows, variables), right(rows, variables))
        if node.temporal is not None:
            temporal = node.temporal
            return lambda rows, variables={}: temporal_number(op, left(rows, variables),
                                                              right(rows, variables), temporal)
        if op in ("=", "!=", "<>", "<", "<=", ">", ">="):
            return lambda rows, variables={}: comparison(op, left(rows, variables), right(rows, variables))
        if op in ("+", "-", "*", "/", "%", "^"):
            return lambda rows, variables={}: arithmetic(op, left(rows, variables), right(rows, variables))
        return None

    def _column(self, node: n.Node) -> Optional[tuple[str, str, object]]:
        if not (isinstance(node, n.FieldAccess) and isinstance(node.base, n.Var)):
            return None
        alias, column = node.base.name.name, node.field.name
        ctype = self._types.get(alias, {}).get(column)
        if ctype is None or alias in self._shadowing:
            return None
        return alias, column, ctype


@functools.lru_cache(maxsize=None)
def _type(text: str) -> object:
    return as_type(text)


_UNARY = {"-": negate, "+": plus, "not": logical_not}

# Built-ins never called directly (``Expressions._call``): their value is not their arguments'
# alone (clocks, counters, the row id, random), or they read or change containers, caches,
# iterators, opcodes or the output.
_NOT_DIRECT = IMPURE_FUNCTIONS | frozenset((
    "size", "push_back", "resize", "remove", "clear", "print", "getopcode", "setopcode",
    "cachesize", "getcache", "deletecache", "insertcache", "keycache", "insertintocache",
    "getiterator", "getnext", "resetiterator", "deleteiterator", "recorddatatostring",
    "recorddatatorecord"))

# Column type -> the Python type whose values are already in SPLASH form for it (from_python and
# cast return them unchanged): a hot path that skips both.
_PLAIN = {kind: python for python, kind in PLAIN_KINDS.items()}


def splash_value(v: object) -> object:
    """A value the runtime binds (an aggregate's result) in SPLASH form, as expressions read it."""
    return v if _is_plain(v) else from_python(v)


def _is_plain(v: object) -> bool:
    """Whether ``v`` is a str, float, bool or 32-bit int (a SPLASH value as it is)."""
    t = type(v)
    return t is str or t is float or t is bool or (t is int and -2**31 <= v < 2**31)  # type: ignore[operator]


def coerce_row(values: Mapping[str, object], columns: Sequence[Sequence[str]]) -> dict[str, object]:
    """``values`` cast to the declared column types, in column order (missing columns are null)."""
    get = values.get
    return {name: _coerced(get(name), ctype, plain, as_text)
            for name, ctype, plain, as_text in _coercion(columns)}


def coerce_column(values: Sequence[object], ctype: str) -> list[object]:
    """Values of one column cast to its type ``ctype`` (CCL type text), as :func:`coerce_row`."""
    t = _type(ctype)
    plain, as_text = _PLAIN.get(t.name), t.name in ("any", "null")  # type: ignore[attr-defined]
    return [_coerced(v, t, plain, as_text) for v in values]


def _coerced(v: object, ctype: object, plain: Optional[type], as_text: bool) -> object:
    if v is None:
        return None
    if as_text:  # a column of no known type is carried as text (runtime.types)
        return to_text(v)
    if type(v) is plain and (plain is not int or -2**31 <= v < 2**31):  # type: ignore[operator]
        return v  # already in SPLASH form: the cast would give it back
    return cast(v, ctype)  # type: ignore[arg-type]


_COERCIONS: dict[int, tuple[Sequence, list[tuple]]] = {}


def _coercion(columns: Sequence[Sequence[str]]) -> list[tuple]:
    """Per column of ``columns`` (a plan's list, the same object row after row): its name, type,
    the Python type its values have when already in SPLASH form, and whether it is carried as
    text; worked out once per list."""
    hit = _COERCIONS.get(id(columns))
    if hit is not None and hit[0] is columns:
        return hit[1]
    steps = []
    for name, t in columns:
        ctype = _type(t)
        steps.append((name, ctype, _PLAIN.get(ctype.name), ctype.name in ("any", "null")))  # type: ignore[attr-defined]
    if len(_COERCIONS) > 4096:
        _COERCIONS.clear()
    _COERCIONS[id(columns)] = (columns, steps)  # the list is kept: its id is not reused meanwhile
    return steps
