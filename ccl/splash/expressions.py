"""SPLASH expressions compiled to closures ``ev(m, f) -> value`` (see :mod:`.machine`).

Nothing is evaluated at compile time, so a mistake in code that never runs (an unknown name, a
wrong argument count) is an error only when, and if, it is reached.
"""
from __future__ import annotations

import operator
from typing import Callable, Iterable, Optional

from ..syntax import nodes as n
from .types import Type
from .builtins import is_null, lookup
from .caches import AGGREGATES, EventCache, aggregate, cache_names, nth_value
from .convert import SAME_KIND, cast
from .machine import OPCODES, Cell, Expr, Frame, Function, Machine, fail, find_cell, get_element
from .operators import (PY_COMPARE, arithmetic, comparison, in_list, like, logical_and, logical_not,
                        logical_or, negate, plus, temporal_number, truth)
from .values import (LONG_MAX, LONG_MIN, MONEY_PRECISION, Dictionary, Long, Record, SplashError,
                     Vector, a_kind, make_dec, resolve_type)
from .windows import WindowView

MISSING = object()  # a field a record lacks (a value no expression gives)
COMPARISONS = ("=", "!=", "<>", "<", "<=", ">", ">=")


def _no_expr(m: Machine, f: Frame) -> object:
    """The base closure of no outer field (never run)."""
    raise AssertionError("not an outer field")

# + - * of floats (or a float and an integer): arithmetic() gives what these do on the floats
# (IEEE, no wrapping, no null); of two (32-bit) integers too when the result fits
PLAIN_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
new_record = Record.__new__


def local_names(node: n.Node, params: Iterable[str] = ()) -> frozenset[str]:
    """Every name that running ``node`` (a handler's block or a function's body, with parameters
    ``params``) can put in the scopes of its frame: declared variables, for-in variables, and the
    names in the arguments of cache aggregates (which stand for each record in turn)."""
    names = set(params)
    for x in node.walk():
        if isinstance(x, n.VarDecl):
            names.update(d.name.name for d in x.declarators)
        elif isinstance(x, n.ForIn):
            names.add(x.var.name)
        elif isinstance(x, n.Call) and x.func.name.lower() in AGGREGATES:
            names.update(v.name.name for a in x.args for v in a.walk() if isinstance(v, n.Var))
    return frozenset(names)


def field_of(rec: object, field: str) -> object:
    """``rec.field``: null for a null record; an error for what is not a record or lacks it."""
    if rec is None:
        return None
    if not isinstance(rec, Record):
        raise SplashError(f"{a_kind(rec)} has no field '{field}'")
    value = rec.get(field, MISSING)
    if value is MISSING:
        source = getattr(rec, "source", None)
        raise SplashError(f"'{source}' has no column '{field}'" if source
                          else f"the record has no field '{field}'")
    return value


class ExpressionCompiler:
    """Compiles expressions; user functions are looked up by name when a call runs."""

    def __init__(self, functions: dict[str, n.FuncDef], typedefs: dict[str, Type],
                 source_types: dict[str, dict[str, Type]]) -> None:
        self.function_defs = functions
        self.typedefs = dict(typedefs)
        self.source_types = source_types
        # The names the code being compiled can put in its frame's scopes (see local_names), or
        # None when not known: any other name is looked up in the globals and input rows only.
        self.locals: Optional[frozenset[str]] = None
        # Whether simple statements and operands are compiled fused (fewer closures: a statement
        # reads its parts inline). False compiles one closure per node, the reference the
        # generated tests compare the fused forms with.
        self.fuse = True

    def type(self, spec: n.Node) -> Type:
        """The type a type node names."""
        return resolve_type(spec, self.typedefs, self.source_types)

    def function(self, name: str) -> Function:
        """The compiled user function ``name`` (the statement compiler provides it)."""
        raise NotImplementedError

    def outer_field(self, e: n.Node) -> tuple[Optional[str], str, Expr]:
        """``(name, field, base_ev)`` when ``e`` is ``X.field`` of a name ``X`` no scope of the
        frame can hold (an input row, a global record), for closures that read it inline as
        ``ev_outer_field`` does (one call less per value); ``(None, "", ...)`` otherwise."""
        if (isinstance(e, n.FieldAccess) and isinstance(e.base, n.Var) and self.locals is not None
                and e.base.name.name not in self.locals):
            return e.base.name.name, e.field.name, self.expr(e.base)
        return None, "", _no_expr

    def var_operand(self, e: n.Node) -> tuple[Optional[str], Optional[str]]:
        """``(outer, local)``: the name of ``e`` when it is a variable that no scope of the frame can
        hold (``outer``: a global, an input row) or that one can (``local``), for closures that
        read it inline when found at once (a global's cell; the innermost scope's) and through
        its closure otherwise; ``(None, None)`` for anything else, or when not fusing."""
        if not self.fuse or not isinstance(e, n.Var) or self.locals is None:
            return None, None
        name = e.name.name
        return (None, name) if name in self.locals else (name, None)

    def local_field(self, e: n.Node) -> tuple[Optional[str], str]:
        """``(name, field)`` when fusing and ``e`` is ``r.field`` of a name ``r`` a scope of the
        frame can hold (a loop's record, a local record), for closures that read the record from
        its cell when found at once and its field inline; ``(None, "")`` otherwise."""
        if (self.fuse and isinstance(e, n.FieldAccess) and isinstance(e.base, n.Var)
                and self.locals is not None and e.base.name.name in self.locals):
            return e.base.name.name, e.field.name
        return None, ""

    def builtin_call(self, e: n.Node, name: str, nargs: int) -> bool:
        """Whether ``e`` is a call of the built-in ``name`` (lower case) with ``nargs`` plain
        arguments, which no project function of that name replaces (a fused closure may then do
        what its call does)."""
        return (self.fuse and isinstance(e, n.Call) and e.library is None and not e.distinct
                and len(e.args) == nargs and e.func.name.lower() == name
                and e.func.name not in self.function_defs
                and not any(isinstance(a, n.Star) for a in e.args))

    def constant(self, e: n.Node) -> object:
        """The value of ``e`` when it is a literal that compiles to a constant, else ``MISSING``
        (a closure may then use the value instead of calling the literal's)."""
        if isinstance(e, n.Literal) and e.kind in ("string", "integer", "float", "boolean", "null"):
            ev = self.expr(e)
            return ev(None, None)  # type: ignore[arg-type]  # a literal's closure reads neither
        return MISSING

    def expr(self, e: n.Node) -> Expr:
        """One expression."""
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            return fail(f"{type(e).__name__} is not allowed in SPLASH code")
        return method(e)

    def _e_Literal(self, e: n.Literal) -> Expr:
        value = e.value
        if e.kind == "long":
            if not LONG_MIN <= int(value) <= LONG_MAX:  # type: ignore[call-overload]
                return fail(f"number {value} is too large for a long")
            value = Long(value)  # type: ignore[call-overload]
        elif e.kind == "float":
            value = float(value)  # type: ignore[arg-type]
        elif e.kind == "money":  # 10.00d2: a money(2) value
            value = make_dec(value, MONEY_PRECISION, -value.as_tuple().exponent)  # type: ignore[union-attr]
            if value is None:
                return fail(f"money literal {e.value} does not fit money")
        return lambda m, f: value

    def _e_Var(self, e: n.Var) -> Expr:
        name = e.name.name
        opcode = OPCODES.get(name.lower())

        def ev_outer(m: Machine, f: Frame) -> object:  # a name no scope of the frame holds
            cell = m.globals.get(name)
            if cell is not None:
                return cell.value
            sources = f.sources
            if sources is not None:
                row = sources.get(name)
                if row is not None:
                    return row
            if opcode is not None:
                return opcode
            raise SplashError(f"unknown name '{name}'")

        if self.locals is not None and name not in self.locals:
            return ev_outer  # declared nowhere in the body: no scope to search

        def ev(m: Machine, f: Frame) -> object:
            scopes = f.scopes
            if scopes:  # the innermost scope first, without a range to walk them
                cell = scopes[-1].get(name)
                if cell is not None:
                    return cell.value
                for i in range(len(scopes) - 2, -1, -1):
                    cell = scopes[i].get(name)
                    if cell is not None:
                        return cell.value
            return ev_outer(m, f)
        return ev

    def _e_FieldAccess(self, e: n.FieldAccess) -> Expr:
        base_ev, field = self.expr(e.base), e.field.name
        if isinstance(e.base, n.Var) and self.locals is not None and e.base.name.name not in self.locals:
            name = e.base.name.name

            def ev_outer_field(m: Machine, f: Frame) -> object:
                # ``X.field`` of a name no scope holds (an input row, a global record): the name
                # looked up as base_ev does, without its call; anything unusual goes through it
                cell = m.globals.get(name)
                if cell is not None:
                    rec = cell.value
                else:
                    sources = f.sources
                    rec = sources.get(name) if sources is not None else None
                    if rec is None:
                        rec = base_ev(m, f)
                if isinstance(rec, Record):
                    value = rec.get(field, MISSING)
                    if value is not MISSING:
                        return value
                return field_of(rec, field)
            return ev_outer_field

        local, _ = self.local_field(e)
        if local is not None:
            def ev_local_field(m: Machine, f: Frame) -> object:
                # ``r.field`` of a local (a loop's record): found in the innermost scope or the
                # next one out without base_ev's call (which still finds it anywhere else)
                scopes = f.scopes
                cell = scopes[-1].get(local) if scopes else None
                if cell is None and len(scopes) > 1:
                    cell = scopes[-2].get(local)
                rec = cell.value if cell is not None else base_ev(m, f)
                if isinstance(rec, Record):
                    value = rec.get(field, MISSING)
                    if value is not MISSING:
                        return value
                return field_of(rec, field)
            return ev_local_field

        def ev(m: Machine, f: Frame) -> object:
            return field_of(base_ev(m, f), field)
        return ev

    def _e_IndexAccess(self, e: n.IndexAccess) -> Expr:
        base_ev, index_ev = self.expr(e.base), self.expr(e.index)
        if isinstance(e.base, n.Var) and self.locals is not None and e.base.name.name not in self.locals:
            name = e.base.name.name

            iname, ifield, ibase = self.outer_field(e.index)

            def ev_outer_index(m: Machine, f: Frame) -> object:
                cell = m.globals.get(name)  # a global container, without base_ev's call
                container = cell.value if cell is not None else base_ev(m, f)
                if iname is None:
                    index = index_ev(m, f)
                    # get_element's common case, without its call: a dictionary, a key of its kind
                    if type(container) is Dictionary and SAME_KIND.get(type(index)) == container.key.name:
                        return container.get(index)
                    return get_element(container, index)
                # an index ``X.field`` read as index_ev (ev_outer_field) does, without its call
                cell = m.globals.get(iname)
                if cell is not None:
                    src = cell.value
                else:
                    sources = f.sources
                    src = sources.get(iname) if sources is not None else None
                    if src is None:
                        src = ibase(m, f)
                index = src.get(ifield, MISSING) if isinstance(src, Record) else MISSING
                if index is MISSING:
                    index = field_of(src, ifield)
                if type(container) is Dictionary and SAME_KIND.get(type(index)) == container.key.name:
                    return container.get(index)
                return get_element(container, index)
            return ev_outer_index

        def ev(m: Machine, f: Frame) -> object:
            return get_element(base_ev(m, f), index_ev(m, f))
        return ev

    def _e_WindowFind(self, e: n.WindowFind) -> Expr:
        base_ev, record_ev = self.expr(e.base), self.expr(e.record)

        def ev(m: Machine, f: Frame) -> object:
            view, probe = base_ev(m, f), record_ev(m, f)
            if view is None or probe is None:
                return None
            if not isinstance(view, WindowView):
                raise SplashError(f"{{...}} looks rows up in a window (W_stream), not in {a_kind(view)}")
            return view.find(probe)
        return ev

    def _e_Call(self, e: n.Call) -> Expr:
        name = e.func.name
        if e.library is not None:
            lib = e.library.name
            return fail(f"{lib}.{name}(): library {lib} is C or Java code (CREATE LIBRARY), which "
                        f"cannot run on Spark; write {name} as a SPLASH function in a DECLARE "
                        "block and call it by its name")
        args = [self.expr(a) for a in e.args]
        if e.distinct or any(isinstance(a, n.Star) for a in e.args):
            return fail(f"{name}(): aggregate forms are not allowed in SPLASH code")
        if name in self.function_defs:
            def call_user(m: Machine, f: Frame) -> object:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                return self.function(name).call(m, [a(m, f) for a in args])
            return call_user
        builtin = lookup(name)
        if builtin is None and name.lower() in ("max", "min") and len(e.args) > 1:
            builtin = lookup(name.lower() + "of")  # max(a, b, ...): the scalar form, as maxof()
        if builtin is None and name.lower() in AGGREGATES and e.args:
            return self._cache_aggregate(name.lower(), e.args)
        if builtin is None:
            return fail(f"unknown function '{name}'")
        low, high = builtin.min_args, builtin.max_args
        if len(args) < low or (high is not None and len(args) > high):
            takes = str(low) if low == high else (f"{low} to {high}" if high is not None else f"at least {low}")
            return fail(f"{name}() takes {takes} argument(s), not {len(args)}")
        fn, strict = builtin.fn, builtin.strict
        if builtin.name in ("coalesce", "firstnonnull"):
            def call_first(m: Machine, f: Frame) -> object:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                for a in args:  # lazily, like Spark: later arguments are not evaluated
                    value = a(m, f)
                    if value is not None:
                        return value
                return None
            return call_first

        if len(args) == 1:  # the common arities without a list per call
            arg = args[0]
            if fn is is_null:
                def call_isnull(m: Machine, f: Frame) -> object:  # is_null's test, without its call
                    m.steps += 1
                    if m.steps > m.limit:
                        m.exhausted()
                    return arg(m, f) is None
                return call_isnull

            def call_1(m: Machine, f: Frame) -> object:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                value = arg(m, f)
                if strict and value is None:
                    return None
                return fn(m, value)
            return call_1
        if len(args) == 2:
            first, second = args

            def call_2(m: Machine, f: Frame) -> object:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                a, b = first(m, f), second(m, f)
                if strict and (a is None or b is None):
                    return None
                return fn(m, a, b)
            return call_2

        def call_builtin(m: Machine, f: Frame) -> object:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            values = [a(m, f) for a in args]
            if strict and None in values:
                return None
            return fn(m, *values)
        return call_builtin

    def _cache_aggregate(self, fn: str, args: list) -> Expr:
        """``avg(cache.price)``: an aggregate over the current bucket of the event cache that a name
        of the (last) argument holds; the name stands for each record of the bucket in turn."""
        if fn == "nth" and len(args) != 2:
            return fail("nth() takes 2 argument(s) (index, expression)")
        if fn != "nth" and len(args) != 1:
            return fail(f"{fn}() over an event cache takes 1 argument, not {len(args)}")
        names = cache_names(args[-1:])
        value_ev = self.expr(args[-1])
        index_ev = self.expr(args[0]) if fn == "nth" else None

        def run(m: Machine, f: Frame) -> object:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            for name in names:
                cell = find_cell(m, f, name)
                if cell is not None and isinstance(cell.value, EventCache):
                    break
            else:
                raise SplashError(f"{fn}() in SPLASH code needs an event cache in its argument")
            values = []
            for rec in cell.value.records():
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                f.scopes.append({name: Cell(rec)})
                try:
                    values.append(value_ev(m, f))
                finally:
                    f.scopes.pop()
            if index_ev is not None:
                return nth_value(index_ev(m, f), values)
            return aggregate(fn, values)
        return run

    def _e_New(self, e: n.New) -> Expr:
        t = self.type(e.type)
        if t.name == "vector":
            return lambda m, f: Vector(elem=t.args[0])
        if t.name == "dictionary":
            return lambda m, f: Dictionary(key=t.args[0], value=t.args[1])
        return fail("new needs a vector or dictionary type")

    def _e_Cast(self, e: n.Cast) -> Expr:
        t, ev = self.type(e.type), self.expr(e.expr)
        if t.name == "any":
            return fail("cast to an unknown type")

        def run(m: Machine, f: Frame) -> object:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            return cast(ev(m, f), t)
        return run

    def _e_Unary(self, e: n.Unary) -> Expr:
        ev = self.expr(e.operand)
        op = {"-": negate, "+": plus, "not": logical_not}[e.op]

        def run(m: Machine, f: Frame) -> object:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            return op(ev(m, f))
        return run

    def _e_Binary(self, e: n.Binary) -> Expr:
        left, right, op = self.expr(e.left), self.expr(e.right), e.op
        if op in ("and", "or"):
            logic = logical_and if op == "and" else logical_or

            def run_logic(m: Machine, f: Frame) -> Optional[bool]:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                return logic(left(m, f), lambda: right(m, f))
            return run_logic
        if op == "like":
            def run_like(m: Machine, f: Frame) -> Optional[bool]:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                return like(left(m, f), right(m, f))
            return run_like
        if e.temporal is not None:
            temporal = e.temporal

            def run_temporal(m: Machine, f: Frame) -> object:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                return temporal_number(op, left(m, f), right(m, f), temporal)
            return run_temporal
        (lname, lfield, lbase, lconst, louter, llocal, lvar, rname, rfield, rbase, rconst, router,
         rlocal, rvar) = self._operands(e)
        if op in COMPARISONS:
            py_compare = PY_COMPARE[op]

            def run_compare(m: Machine, f: Frame) -> Optional[bool]:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                if lname is not None:
                    cell = m.globals.get(lname)
                    if cell is not None:
                        a = cell.value
                    else:
                        sources = f.sources
                        a = sources.get(lname) if sources is not None else None
                        if a is None:
                            a = lbase(m, f)
                    x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                    a = x if x is not MISSING else field_of(a, lfield)
                elif lconst is not MISSING:
                    a = lconst
                elif lvar:
                    if louter is not None:
                        cell = m.globals.get(louter)
                    else:
                        scopes = f.scopes
                        cell = scopes[-1].get(llocal) if scopes else None
                        if cell is None and len(scopes) > 1:  # the next scope out (a loop body's)
                            cell = scopes[-2].get(llocal)
                    if cell is None:
                        a = left(m, f)
                    elif lfield:  # ``r.f`` of a local record, read as field_of reads it
                        a = cell.value
                        x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                        a = x if x is not MISSING else field_of(a, lfield)
                    else:
                        a = cell.value
                else:
                    a = left(m, f)
                if rname is not None:
                    cell = m.globals.get(rname)
                    if cell is not None:
                        b = cell.value
                    else:
                        sources = f.sources
                        b = sources.get(rname) if sources is not None else None
                        if b is None:
                            b = rbase(m, f)
                    x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                    b = x if x is not MISSING else field_of(b, rfield)
                elif rconst is not MISSING:
                    b = rconst
                elif rvar:
                    if router is not None:
                        cell = m.globals.get(router)
                    else:
                        scopes = f.scopes
                        cell = scopes[-1].get(rlocal) if scopes else None
                        if cell is None and len(scopes) > 1:  # the next scope out (a loop body's)
                            cell = scopes[-2].get(rlocal)
                    if cell is None:
                        b = right(m, f)
                    elif rfield:  # ``r.f`` of a local record, read as field_of reads it
                        b = cell.value
                        x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                        b = x if x is not MISSING else field_of(b, rfield)
                    else:
                        b = cell.value
                else:
                    b = right(m, f)
                ta = type(a)
                # comparison()'s own first case inline: two strings, integers or non-NaN floats
                if ta is type(b) and (ta is str or ta is int or (ta is float and a == a and b == b)):
                    return py_compare(a, b)
                return comparison(op, a, b)
            return run_compare
        plain_op = PLAIN_OPS.get(op)
        if plain_op is not None:
            def run_plain_arith(m: Machine, f: Frame) -> object:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                if lname is not None:  # the operands read as run_compare does
                    cell = m.globals.get(lname)
                    if cell is not None:
                        a = cell.value
                    else:
                        sources = f.sources
                        a = sources.get(lname) if sources is not None else None
                        if a is None:
                            a = lbase(m, f)
                    x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                    a = x if x is not MISSING else field_of(a, lfield)
                elif lconst is not MISSING:
                    a = lconst
                elif lvar:
                    if louter is not None:
                        cell = m.globals.get(louter)
                    else:
                        scopes = f.scopes
                        cell = scopes[-1].get(llocal) if scopes else None
                        if cell is None and len(scopes) > 1:  # the next scope out (a loop body's)
                            cell = scopes[-2].get(llocal)
                    if cell is None:
                        a = left(m, f)
                    elif lfield:  # ``r.f`` of a local record, read as field_of reads it
                        a = cell.value
                        x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                        a = x if x is not MISSING else field_of(a, lfield)
                    else:
                        a = cell.value
                else:
                    a = left(m, f)
                if rname is not None:
                    cell = m.globals.get(rname)
                    if cell is not None:
                        b = cell.value
                    else:
                        sources = f.sources
                        b = sources.get(rname) if sources is not None else None
                        if b is None:
                            b = rbase(m, f)
                    x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                    b = x if x is not MISSING else field_of(b, rfield)
                elif rconst is not MISSING:
                    b = rconst
                elif rvar:
                    if router is not None:
                        cell = m.globals.get(router)
                    else:
                        scopes = f.scopes
                        cell = scopes[-1].get(rlocal) if scopes else None
                        if cell is None and len(scopes) > 1:  # the next scope out (a loop body's)
                            cell = scopes[-2].get(rlocal)
                    if cell is None:
                        b = right(m, f)
                    elif rfield:  # ``r.f`` of a local record, read as field_of reads it
                        b = cell.value
                        x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                        b = x if x is not MISSING else field_of(b, rfield)
                    else:
                        b = cell.value
                else:
                    b = right(m, f)
                ta, tb = type(a), type(b)
                if (ta is float or ta is int) and (tb is float or tb is int):
                    if ta is int and tb is int:
                        r = plain_op(a, b)  # two integers: the same unless it overflows (wraps)
                        if -2147483648 <= r <= 2147483647:
                            return r
                    else:
                        return plain_op(float(a), float(b))  # what arithmetic() gives (a float)
                return arithmetic(op, a, b)
            return run_plain_arith

        def run_arith(m: Machine, f: Frame) -> object:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            return arithmetic(op, left(m, f), right(m, f))
        return run_arith

    def _operands(self, e: n.Binary) -> tuple:
        """How a binary operator's closure reads its operands inline, left then right: an operand
        that is ``X.field`` of an input row or global (``name, field, base_ev``, as
        ev_outer_field reads it) or a literal (its constant) is read instead of through its
        closure; a variable (``outer`` or ``local`` name, and a flag) is read from its cell when
        found at once."""
        lname, lfield, lbase = self.outer_field(e.left)
        rname, rfield, rbase = self.outer_field(e.right)
        louter, llocal = self.var_operand(e.left)
        router, rlocal = self.var_operand(e.right)
        # ``r.f`` of a local (a loop's record): read as a local variable operand, then its field
        lrec, lrf = self.local_field(e.left)
        rrec, rrf = self.local_field(e.right)
        if lrec is not None:
            llocal, lfield = lrec, lrf
        if rrec is not None:
            rlocal, rfield = rrec, rrf
        return (lname, lfield, lbase, self.constant(e.left), louter, llocal,
                louter is not None or llocal is not None,
                rname, rfield, rbase, self.constant(e.right), router, rlocal,
                router is not None or rlocal is not None)

    def compare_if(self, e: n.Binary, branches: Callable[[], tuple[Expr, Optional[Expr]]]) -> Expr:
        """``if (a <op> b) then else otherwise`` (a comparison, not temporal) as one closure: the
        if's step and test around what ``run_compare`` of :meth:`_e_Binary` does, inline.
        ``branches`` compiles the two branches, after the condition (as the if compiles them)."""
        left, right, op = self.expr(e.left), self.expr(e.right), e.op
        (lname, lfield, lbase, lconst, louter, llocal, lvar, rname, rfield, rbase, rconst, router,
         rlocal, rvar) = self._operands(e)
        py_compare = PY_COMPARE[op]
        then, otherwise = branches()

        def run_if_compare(m: Machine, f: Frame) -> object:
            m.steps += 1  # the if's step, then the comparison's
            if m.steps > m.limit:
                m.exhausted()
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            if lname is not None:  # the operands read as run_compare reads them
                cell = m.globals.get(lname)
                if cell is not None:
                    a = cell.value
                else:
                    sources = f.sources
                    a = sources.get(lname) if sources is not None else None
                    if a is None:
                        a = lbase(m, f)
                x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                a = x if x is not MISSING else field_of(a, lfield)
            elif lconst is not MISSING:
                a = lconst
            elif lvar:
                if louter is not None:
                    cell = m.globals.get(louter)
                else:
                    scopes = f.scopes
                    cell = scopes[-1].get(llocal) if scopes else None
                    if cell is None and len(scopes) > 1:  # the next scope out (a loop body's)
                        cell = scopes[-2].get(llocal)
                if cell is None:
                    a = left(m, f)
                elif lfield:  # ``r.f`` of a local record, read as field_of reads it
                    a = cell.value
                    x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                    a = x if x is not MISSING else field_of(a, lfield)
                else:
                    a = cell.value
            else:
                a = left(m, f)
            if rname is not None:
                cell = m.globals.get(rname)
                if cell is not None:
                    b = cell.value
                else:
                    sources = f.sources
                    b = sources.get(rname) if sources is not None else None
                    if b is None:
                        b = rbase(m, f)
                x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                b = x if x is not MISSING else field_of(b, rfield)
            elif rconst is not MISSING:
                b = rconst
            elif rvar:
                if router is not None:
                    cell = m.globals.get(router)
                else:
                    scopes = f.scopes
                    cell = scopes[-1].get(rlocal) if scopes else None
                    if cell is None and len(scopes) > 1:  # the next scope out (a loop body's)
                        cell = scopes[-2].get(rlocal)
                if cell is None:
                    b = right(m, f)
                elif rfield:  # ``r.f`` of a local record, read as field_of reads it
                    b = cell.value
                    x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                    b = x if x is not MISSING else field_of(b, rfield)
                else:
                    b = cell.value
            else:
                b = right(m, f)
            ta = type(a)
            if ta is type(b) and (ta is str or ta is int or (ta is float and a == a and b == b)):
                c = py_compare(a, b)
            else:
                c = comparison(op, a, b)
            if c is True or (c is not None and c is not False and truth(c)):
                return then(m, f)
            return otherwise(m, f) if otherwise is not None else None
        return run_if_compare

    def _e_InList(self, e: n.InList) -> Expr:
        ev, items, negated = self.expr(e.expr), [self.expr(i) for i in e.items], e.negated

        def run(m: Machine, f: Frame) -> Optional[bool]:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            value = ev(m, f)
            found: Optional[bool] = None if value is None else False
            if value is not None:
                for item in items:  # stop at the first match, like Spark
                    hit = in_list(value, [item(m, f)])
                    if hit:
                        found = True
                        break
                    if hit is None:
                        found = None
            return logical_not(found) if negated else found
        return run

    def _e_Case(self, e: n.Case) -> Expr:
        subject = self.expr(e.subject) if e.subject is not None else None
        whens = [(self.expr(w.when), self.expr(w.then)) for w in e.whens]
        default = self.expr(e.default) if e.default is not None else None

        def run(m: Machine, f: Frame) -> object:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            value = subject(m, f) if subject is not None else None
            for when, then in whens:
                hit = comparison("=", value, when(m, f)) if subject is not None else truth(when(m, f))
                if hit:
                    return then(m, f)
            return default(m, f) if default is not None else None
        return run

    def _e_RecordLit(self, e: n.RecordLit) -> Expr:
        fields = [(fi.name.name, self.expr(fi.value)) for fi in e.key_fields + e.fields]
        keys = tuple(fi.name.name for fi in e.key_fields)

        def run(m: Machine, f: Frame) -> Record:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            rec = new_record(Record)  # Record(..., key_fields=keys) without __init__
            for name, ev in fields:
                rec[name] = ev(m, f)
            rec.types, rec.key_fields = {}, keys
            return rec
        return run
