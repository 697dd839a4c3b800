"""SPLASH statements compiled to closures ``run(m, f) -> signal`` (see :mod:`.machine`), and the
compiler of user functions."""
from __future__ import annotations

from typing import Optional

from ..syntax import nodes as n
from .types import ANY, Type
from .convert import SAME_KIND, coerce
from .expressions import COMPARISONS, MISSING, PLAIN_OPS, ExpressionCompiler, field_of, local_names
from .builtins import lookup
from .machine import (BREAK, CONTINUE, OPCODES, RETURN, Cell, ExitSignal, Expr, Frame, Function, Machine,
                      Stmt, fail, find_cell, set_element)
from .operators import arithmetic, comparison, truth
from .values import Dictionary, Record, SplashError, a_kind, stored_key
from .windows import WindowView, window_records, window_rows


_STOP = "#stop"  # what a fused while's test gives when the condition does not hold (no signal)
set_opcode = lookup("setopcode").fn  # type: ignore[union-attr]


def store_field(rec: object, field: str, value: object) -> bool:
    """``rec.field := value`` with the assignment's checks (a record, not an input row, that has
    the field), the value coerced to the field's type; True when it was stored as it is (null,
    no declared type, or a value of the field's kind: coerce's own first checks, without its
    call), so that the next value of this type for the same record needs none of the checks."""
    if not isinstance(rec, Record):
        raise SplashError(f"cannot set field '{field}' of {a_kind(rec)}")
    if rec.readonly:
        raise SplashError(f"the input row cannot be assigned (field '{field}')")
    if field not in rec:
        raise SplashError(f"the record has no field '{field}'")
    t = rec.types.get(field, ANY)
    if value is None or SAME_KIND.get(type(value)) == t.name or t.name in ("any", "null"):
        rec[field] = value
        return True
    rec[field] = coerce(value, t, f"field '{field}'")
    return False


class Compiler(ExpressionCompiler):
    """Compiles SPLASH statements and expressions; user functions are compiled on first call."""

    def __init__(self, functions: dict[str, n.FuncDef], typedefs: dict[str, Type],
                 source_types: dict[str, dict[str, Type]]) -> None:
        super().__init__(functions, typedefs, source_types)
        self._functions: dict[str, Function] = {}

    def function(self, name: str) -> Function:
        """The compiled user function ``name`` (compiled once)."""
        fn = self._functions.get(name)
        if fn is None:
            node = self.function_defs[name]
            params = [(p.name.name, self.type(p.type)) for p in node.params]
            body = self.unit(node.body, [p for p, _ in params])
            fn = self._functions[name] = Function(node, params, self.type(node.return_type), body)
        return fn

    def unit(self, block: n.Block, params: list[str] = []) -> Stmt:
        """A block run in a frame of its own (a handler's, a function's body with ``params``):
        names it never declares are looked up without going through its scopes."""
        outer, self.locals = self.locals, local_names(block, params)
        try:
            return self.block(block, loops=0, switches=0)
        finally:
            self.locals = outer

    def _e_Sequence(self, e: n.Sequence) -> Expr:
        """``(v := x; w := y; value)``: the steps run as statements, then the value."""
        steps = [self.stmt(s, loops=0, switches=0) for s in e.steps]
        value = self.expr(e.value)

        def ev(m: Machine, f: Frame) -> object:
            for step in steps:
                step(m, f)
            return value(m, f)
        return ev

    # --- statements ------------------------------------------------------------------------------

    def block(self, block: n.Block, loops: int, switches: int) -> Stmt:
        """A block: a new scope around its statements."""
        stmts = self._statements(block.stmts, loops, switches)
        if not any(isinstance(x, n.VarDecl) for s in block.stmts for x in s.walk()):
            # Nothing here declares a variable: its scope would stay empty, and an empty scope
            # only makes every name lookup below it longer.
            if len(stmts) == 1:
                return stmts[0]  # what run_plain would do with it, without the call
            def run_plain(m: Machine, f: Frame) -> Optional[str]:
                for s in stmts:
                    signal = s(m, f)
                    if signal is not None:
                        return signal
                return None
            return run_plain

        def run(m: Machine, f: Frame) -> Optional[str]:
            f.scopes.append({})
            for s in stmts:
                signal = s(m, f)
                if signal is not None:
                    f.scopes.pop()
                    return signal
            f.scopes.pop()
            return None
        return run

    def _statements(self, items: list, loops: int, switches: int) -> list[Stmt]:
        """The statements of a block, a run of two or more field copies ``r.a := X.b;`` of the
        same names (see :meth:`_field_copies`) as one closure when fusing."""
        out: list[Stmt] = []
        i = 0
        while i < len(items):
            names = self._field_copy(items[i])
            j = i + 1
            if names is not None:
                while j < len(items) and self._field_copy(items[j]) == names:
                    j += 1
            if j - i >= 2:
                out.append(self._field_copies(items[i:j], names))  # type: ignore[arg-type]
            else:
                out.append(self.stmt(items[i], loops, switches))
            i = j
        return out

    def _field_copy(self, s: n.Node) -> Optional[tuple[str, str]]:
        """``(r, X)`` when fusing and ``s`` is ``r.a := X.b;``, both names no scope of the frame
        can hold (a global record, an input row), else None."""
        if not (self.fuse and self.locals is not None and isinstance(s, n.Assign)
                and isinstance(s.target, n.FieldAccess) and isinstance(s.target.base, n.Var)
                and isinstance(s.value, n.FieldAccess) and isinstance(s.value.base, n.Var)):
            return None
        r, x = s.target.base.name.name, s.value.base.name.name
        if r in self.locals or x in self.locals:
            return None
        return r, x

    def _field_copies(self, items: list[n.Assign], names: tuple[str, str]) -> Stmt:
        """``r.a := X.b; r.c := X.d; ...`` as one closure: ``r`` and ``X`` looked up once (no
        statement of the run can change what they name), then per statement what ``run_field``
        does with them: its step, ``X.b`` read, the checks of ``r.a`` decided once per record and
        value type, the value stored. When ``r`` is no global or ``X`` is no record, each
        statement's own closure runs instead."""
        base, vname = names
        singles = [self._assign(s) for s in items]
        fields = [(s.target.field.name, s.value.field.name) for s in items]  # type: ignore[union-attr]
        last: list = [(None, None)] * len(items)  # per statement: record, value type stored last
        count = len(items)

        def run_field_copies(m: Machine, f: Frame) -> None:
            cell = m.globals.get(base)
            c = m.globals.get(vname)
            if c is not None:
                src = c.value
            else:
                sources = f.sources
                src = sources.get(vname) if sources is not None else None
            if cell is None or not isinstance(src, Record):
                for single in singles:
                    single(m, f)
                return
            rec = cell.value
            for i in range(count):
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                field, vfield = fields[i]
                value = src.get(vfield, MISSING)
                if value is MISSING:
                    value = field_of(src, vfield)
                seen = last[i]
                if rec is seen[0] and type(value) is seen[1]:
                    rec[field] = value  # what the checks below decided for this record and type
                    continue
                if store_field(rec, field, value):
                    last[i] = (rec, type(value))
        return run_field_copies

    def stmt(self, s: n.Node, loops: int, switches: int) -> Stmt:
        """One statement."""
        if isinstance(s, n.Block):
            return self.block(s, loops, switches)
        if isinstance(s, n.VarDecl):
            return self._var_decl(s)
        if isinstance(s, n.Assign):
            return self._assign(s)
        if isinstance(s, n.ExprStmt):
            ev = self.expr(s.expr)

            def run_expr(m: Machine, f: Frame) -> None:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                ev(m, f)
            return run_expr
        if isinstance(s, n.If):
            return self._if(s, loops, switches)
        if isinstance(s, n.While):
            return self._while(s, loops)
        if isinstance(s, n.ForIn):
            return self._for_in(s, loops)
        if isinstance(s, n.Switch):
            return self._switch(s, loops, switches)
        if isinstance(s, n.Return):
            return self._return(s)
        if isinstance(s, n.Break):
            return self._jump(BREAK, "break outside a loop or switch" if not (loops or switches) else None)
        if isinstance(s, n.Continue):
            return self._jump(CONTINUE, None if loops else "continue outside a loop")
        if isinstance(s, n.Exit):
            def run_exit(m: Machine, f: Frame) -> None:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                raise ExitSignal()
            return run_exit
        if isinstance(s, n.TypeDef):
            self.typedefs[s.name.name] = self.type(s.type)
            return lambda m, f: None
        if isinstance(s, n.OutputStmt):
            return self._output(s)
        what = {"ParamDecl": "a parameter can only be declared in a DECLARE block",
                "FuncDef": "a function can only be declared in a DECLARE block"}
        return fail(what.get(type(s).__name__, f"unsupported statement {type(s).__name__}"))  # type: ignore[return-value]

    def _output(self, s: n.OutputStmt) -> Stmt:
        if self.builtin_call(s.value, "setopcode", 2):
            fused = self._output_opcode(s.value)  # type: ignore[arg-type]
            if fused is not None:
                return fused
        ev = self.expr(s.value)
        fresh = self._fresh_record(s.value)

        def run(m: Machine, f: Frame) -> None:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            value = ev(m, f)
            if m.emit is None:
                raise SplashError("output is only allowed in a Flex handler")
            if not isinstance(value, Record):
                raise SplashError(f"output needs a record, not {a_kind(value)}")
            # later changes to the variable do not change the output (a new record has none,
            # and an emit that copies what it keeps needs none)
            m.emit(value if fresh or m.emit_copies else value.copy_record())
        return run

    def _output_opcode(self, call: n.Call) -> Optional[Stmt]:
        """``output setOpcode(r, insert);`` (ESP's idiom: an opcode name no scope holds) as one
        closure: what the output statement, the call, its two argument closures and setOpcode do,
        with their steps, lookups and errors, in that order. None for any other second argument."""
        rec_node, code_node = call.args
        code_name, local = self.var_operand(code_node)
        code = OPCODES.get(code_name.lower()) if code_name is not None else None
        if code is None:
            return None
        rec_ev = self.expr(rec_node)
        rname, _ = self.var_operand(rec_node)
        fresh = self._fresh_record(call)

        def run_output_opcode(m: Machine, f: Frame) -> None:
            m.steps += 1  # the output statement's step, then the call's
            if m.steps > m.limit:
                m.exhausted()
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            if rname is not None:  # the record read as its closure (ev_outer) reads it
                cell = m.globals.get(rname)
                if cell is not None:
                    rec = cell.value
                else:
                    sources = f.sources
                    rec = sources.get(rname) if sources is not None else None
                    if rec is None:
                        rec = rec_ev(m, f)
            else:
                rec = rec_ev(m, f)
            cell = m.globals.get(code_name)  # the opcode's name, as ev_outer reads it
            if cell is not None:
                c = cell.value
            else:
                sources = f.sources
                c = sources.get(code_name) if sources is not None else None
                if c is None:
                    c = code
            if c is code and isinstance(rec, Record):  # what setOpcode does with an opcode
                rec.opcode = code
            else:
                rec = set_opcode(m, rec, c)  # its checks and errors
            if m.emit is None:
                raise SplashError("output is only allowed in a Flex handler")
            if not isinstance(rec, Record):
                raise SplashError(f"output needs a record, not {a_kind(rec)}")
            m.emit(rec if fresh or m.emit_copies else rec.copy_record())
        return run_output_opcode

    def _fresh_record(self, e: n.Node) -> bool:
        """Whether ``e`` always gives a record made by itself that nothing else refers to: a
        record literal, or the built-in ``setOpcode`` of one."""
        if isinstance(e, n.RecordLit):
            return True
        return (isinstance(e, n.Call) and e.library is None and len(e.args) == 2
                and e.func.name not in self.function_defs and e.func.name.lower() == "setopcode"
                and not e.distinct and isinstance(e.args[0], n.RecordLit))

    def _jump(self, signal: str, error: Optional[str]) -> Stmt:
        if error is not None:
            return fail(error)  # type: ignore[return-value]

        def run(m: Machine, f: Frame) -> str:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            return signal
        return run

    def _var_decl(self, s: n.VarDecl) -> Stmt:
        t = self.type(s.type)
        decls = [(d.name.name, self.expr(d.init) if d.init is not None else None) for d in s.declarators]

        def run(m: Machine, f: Frame) -> None:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            scope = f.scopes[-1]
            for name, init in decls:
                if name in scope:
                    raise SplashError(f"'{name}' is already declared in this scope")
                value = init(m, f) if init is not None else None
                # coerce's own first checks, without its call: null, no declared type, same kind
                if not (value is None or SAME_KIND.get(type(value)) == t.name
                        or t.name in ("any", "null")):
                    value = coerce(value, t, f"variable '{name}'")
                scope[name] = Cell(value, t)
        return run

    def _return(self, s: n.Return) -> Stmt:
        ev = self.expr(s.value) if s.value is not None else None

        def run(m: Machine, f: Frame) -> str:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            f.ret = ev(m, f) if ev is not None else None
            return RETURN
        return run

    def _if(self, s: n.If, loops: int, switches: int) -> Stmt:
        def branches() -> tuple[Stmt, Optional[Stmt]]:
            return (self._nested(s.then, loops, switches),
                    self._nested(s.otherwise, loops, switches) if s.otherwise is not None else None)

        cond_node = s.cond
        if (self.fuse and isinstance(cond_node, n.Binary) and cond_node.op in COMPARISONS
                and cond_node.temporal is None):
            return self.compare_if(cond_node, branches)  # type: ignore[arg-type,return-value]
        if self.builtin_call(cond_node, "isnull", 1):
            arg = self.expr(cond_node.args[0])  # type: ignore[attr-defined]
            then, otherwise = branches()

            def run_if_isnull(m: Machine, f: Frame) -> Optional[str]:
                # ``if (isnull(x))``: the if's step, then the call's (call_isnull's test inline)
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                if arg(m, f) is None:
                    return then(m, f)
                return otherwise(m, f) if otherwise is not None else None
            return run_if_isnull
        cond = self.expr(s.cond)
        then, otherwise = branches()

        def run(m: Machine, f: Frame) -> Optional[str]:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            c = cond(m, f)
            if c is True or (c is not None and c is not False and truth(c)):  # truth() of a boolean inline
                return then(m, f)
            return otherwise(m, f) if otherwise is not None else None
        return run

    def _nested(self, s: n.Node, loops: int, switches: int) -> Stmt:
        """A statement that is the body of if/while/for: it gets its own scope."""
        if isinstance(s, n.Block):
            return self.block(s, loops, switches)
        return self.block(n.Block([s]), loops, switches)

    def _while(self, s: n.While, loops: int) -> Stmt:
        cond_node = s.cond
        if (self.fuse and isinstance(cond_node, n.Binary) and cond_node.op in COMPARISONS
                and cond_node.temporal is None):
            return self._while_compare(s, cond_node, loops)
        cond = self.expr(s.cond)
        body = self._nested(s.body, loops + 1, 0)

        def run(m: Machine, f: Frame) -> Optional[str]:
            while True:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                if not truth(cond(m, f)):
                    return None
                signal = body(m, f)
                if signal == BREAK:
                    return None
                if signal == RETURN:
                    return signal
        return run

    def _while_compare(self, s: n.While, cond: n.Binary, loops: int) -> Stmt:
        """``while (a <op> b) body`` (a comparison, not temporal): each round is what
        ``if (a <op> b) body else <stop>`` fused does (:meth:`compare_if`): the while's step and
        the comparison's, its operands read inline, the test, then the body."""
        def stop(m: Machine, f: Frame) -> str:
            return _STOP
        test = self.compare_if(cond, lambda: (self._nested(s.body, loops + 1, 0), stop))

        def run_while_compare(m: Machine, f: Frame) -> Optional[str]:
            while True:
                signal = test(m, f)
                if signal is not None:
                    if signal is _STOP or signal == BREAK:
                        return None
                    if signal == RETURN:
                        return signal
        return run_while_compare

    def _for_in(self, s: n.ForIn, loops: int) -> Stmt:
        var = s.var.name
        iterable = self.expr(s.iterable)
        body = self._nested(s.body, loops + 1, 0)
        where = [(c.name.name, self.expr(c.value)) for c in s.where]
        # `for (r in W)`: ESP's older form of `for (r in W_stream)`, W naming the window
        stream = f"{s.iterable.name.name}_stream" if isinstance(s.iterable, n.Var) else None
        columns = tuple(name for name, _ in where)
        values = [value for _, value in where]
        # where's columns once each (a repeated one: the dict of window_rows keeps its last value)
        eager = self.fuse and len(set(columns)) == len(columns)
        fuse = self.fuse

        def run(m: Machine, f: Frame) -> Optional[str]:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            cell = m.globals.get(stream) if stream is not None else None
            view = cell.value if cell is not None and isinstance(cell.value, WindowView) else None
            try:
                it = iterable(m, f)
            except SplashError:
                if view is None:
                    raise
                it = None  # the window's own name, which is no variable here
            if view is not None and (it is None or isinstance(it, Record)):
                it = view
            if it is None:
                return None
            if isinstance(it, WindowView):
                if eager and it.splash_form:  # the same records, made at once (window_records)
                    items = window_records(it, columns, [value(m, f) for value in values])
                else:
                    items = window_rows(it, {name: value(m, f) for name, value in where})
                t: Type = ANY
            elif where:
                raise SplashError(f"for-in with where needs a window (W_stream), not {a_kind(it)}")
            elif isinstance(it, list):
                items, t = list(it), getattr(it, "elem", ANY)
            elif isinstance(it, dict) and not isinstance(it, Record):
                items, t = [stored_key(k) for k in it], getattr(it, "key", ANY)
            else:
                raise SplashError(f"for-in needs a vector, a dictionary or a window, not {a_kind(it)}")
            if not fuse:
                for item in items:
                    m.steps += 1
                    if m.steps > m.limit:
                        m.exhausted()
                    f.scopes.append({var: Cell(item, t)})
                    signal = body(m, f)
                    f.scopes.pop()
                    if signal == BREAK:
                        return None
                    if signal == RETURN:
                        return signal
                return None
            # One scope and cell for the whole loop, the cell given each item in turn: nothing
            # but the loop variable is ever in that scope (a body that declares has a scope of
            # its own, see block), no block leaves a scope of its own on the stack when it ends,
            # and a cell is never kept past its scope, so what the body sees is a fresh cell's.
            cell = Cell(None, t)
            scopes = f.scopes
            scopes.append({var: cell})
            for item in items:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                cell.value = item
                signal = body(m, f)
                if signal is not None:
                    if signal == BREAK:
                        scopes.pop()
                        return None
                    if signal == RETURN:
                        scopes.pop()
                        return signal
            scopes.pop()
            return None
        return run

    def _switch(self, s: n.Switch, loops: int, switches: int) -> Stmt:
        subject = self.expr(s.subject)
        cases = [([self.expr(v) for v in c.values], [self.stmt(st, loops, switches + 1) for st in c.stmts])
                 for c in s.cases]
        default = next((i for i, c in enumerate(s.cases) if not c.values), None)

        def run(m: Machine, f: Frame) -> Optional[str]:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            value = subject(m, f)
            start = None
            for i, (values, _) in enumerate(cases):
                if any(comparison("=", value, v(m, f)) for v in values):
                    start = i
                    break
            if start is None:
                start = default
            if start is None:
                return None
            f.scopes.append({})
            for _, stmts in cases[start:]:
                for st in stmts:
                    signal = st(m, f)
                    if signal is not None:
                        f.scopes.pop()
                        return None if signal == BREAK else signal
            f.scopes.pop()
            return None
        return run

    # --- assignment ------------------------------------------------------------------------------

    def _assign(self, s: n.Assign) -> Stmt:
        target = s.target
        value = s.value
        if (self.fuse and isinstance(target, n.Var) and isinstance(value, n.Binary)
                and value.op in PLAIN_OPS and value.temporal is None):
            return self._assign_arith(target.name.name, value)
        value_ev = self.expr(s.value)
        if isinstance(target, n.Var):
            name = target.name.name

            outer = self.locals is not None and name not in self.locals
            near = self.fuse

            def run_var(m: Machine, f: Frame) -> None:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                if outer:
                    cell = m.globals.get(name)
                else:  # find_cell's, the innermost scope first without its call
                    scopes = f.scopes
                    cell = scopes[-1].get(name) if scopes else None
                    if cell is None and near and len(scopes) > 1:  # the next scope out (a loop body's)
                        cell = scopes[-2].get(name)
                    if cell is None:
                        cell = find_cell(m, f, name)
                if cell is None:
                    if f.sources is not None and name in f.sources:
                        raise SplashError(f"the input row '{name}' cannot be assigned")
                    raise SplashError(f"unknown variable '{name}'")
                if cell.const:
                    raise SplashError(f"parameter '{name}' cannot be assigned")
                value, t = value_ev(m, f), cell.type
                # coerce's own first checks, without its call: null, no declared type, same kind
                if value is None or SAME_KIND.get(type(value)) == t.name or t.name in ("any", "null"):
                    cell.value = value
                else:
                    cell.value = coerce(value, t, f"variable '{name}'")
            return run_var
        if isinstance(target, n.FieldAccess):
            base_ev, field = self.expr(target.base), target.field.name
            base = target.base
            # ``r.x := ...`` of a record no scope holds (a global): looked up without base_ev's call
            global_base = (base.name.name if isinstance(base, n.Var) and self.locals is not None
                           and base.name.name not in self.locals else None)

            # a value that is a literal or ``X.field`` of an input row or global is read here,
            # without the call of value_ev
            const = self.constant(s.value)
            vname, vfield, vbase = self.outer_field(s.value)

            def run_field(m: Machine, f: Frame) -> None:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                cell = m.globals.get(global_base) if global_base is not None else None
                rec = cell.value if cell is not None else base_ev(m, f)
                if vname is not None:  # what value_ev (ev_outer_field) does
                    cell = m.globals.get(vname)
                    if cell is not None:
                        src = cell.value
                    else:
                        sources = f.sources
                        src = sources.get(vname) if sources is not None else None
                        if src is None:
                            src = vbase(m, f)
                    value = src.get(vfield, MISSING) if isinstance(src, Record) else MISSING
                    if value is MISSING:
                        value = field_of(src, vfield)
                elif const is not MISSING:
                    value = const
                else:
                    value = value_ev(m, f)
                nonlocal last_rec, last_type
                if rec is last_rec and type(value) is last_type:
                    rec[field] = value  # what the checks below decided for this record and type
                    return
                if store_field(rec, field, value):
                    # A record keeps its fields, types and read-only flag: the next value of this
                    # type for the same record needs none of the checks
                    last_rec, last_type = rec, type(value)
            last_rec: object = None  # the record and value type last stored without coercion
            last_type: object = None
            return run_field
        if isinstance(target, n.IndexAccess):
            base_ev, index_ev = self.expr(target.base), self.expr(target.index)
            base = target.base
            global_base = (base.name.name if isinstance(base, n.Var) and self.locals is not None
                           and base.name.name not in self.locals else None)

            iname, ifield, ibase = self.outer_field(target.index)
            vname, vfield, vbase = self.outer_field(s.value)

            def run_index(m: Machine, f: Frame) -> None:
                m.steps += 1
                if m.steps > m.limit:
                    m.exhausted()
                # a global container looked up without base_ev's call
                cell = m.globals.get(global_base) if global_base is not None else None
                container = cell.value if cell is not None else base_ev(m, f)
                # an index or value ``X.field`` read as ev_outer_field does, without its call
                if iname is not None:
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
                else:
                    index = index_ev(m, f)
                if vname is not None:
                    cell = m.globals.get(vname)
                    if cell is not None:
                        src = cell.value
                    else:
                        sources = f.sources
                        src = sources.get(vname) if sources is not None else None
                        if src is None:
                            src = vbase(m, f)
                    value = src.get(vfield, MISSING) if isinstance(src, Record) else MISSING
                    if value is MISSING:
                        value = field_of(src, vfield)
                else:
                    value = value_ev(m, f)
                # set_element's common case, without its call: a dictionary, a key and a value
                # (or null) of its kinds
                if (type(container) is Dictionary and SAME_KIND.get(type(index)) == container.key.name
                        and (value is None or SAME_KIND.get(type(value)) == container.value.name)):
                    container[index] = value
                else:
                    set_element(container, index, value)
            return run_index
        return fail("this expression cannot be assigned to")  # type: ignore[return-value]

    def _assign_arith(self, name: str, e: n.Binary) -> Stmt:
        """``x := a + b`` (``+ - *``) as one closure: what ``run_var`` does around what
        ``run_plain_arith`` of the value does, inline (the variable found and checked, then the
        operator's step, its operands and result, then the value stored)."""
        left, right, op = self.expr(e.left), self.expr(e.right), e.op
        (lname, lfield, lbase, lconst, louter, llocal, lvar, rname, rfield, rbase, rconst, router,
         rlocal, rvar) = self._operands(e)
        plain_op = PLAIN_OPS[op]
        outer = self.locals is not None and name not in self.locals

        def run_var_arith(m: Machine, f: Frame) -> None:
            m.steps += 1
            if m.steps > m.limit:
                m.exhausted()
            if outer:  # the variable, as run_var finds and checks it
                cell = m.globals.get(name)
            else:
                scopes = f.scopes
                cell = scopes[-1].get(name) if scopes else None
                if cell is None and len(scopes) > 1:  # the next scope out, without find_cell's call
                    cell = scopes[-2].get(name)
                if cell is None:
                    cell = find_cell(m, f, name)
            if cell is None:
                if f.sources is not None and name in f.sources:
                    raise SplashError(f"the input row '{name}' cannot be assigned")
                raise SplashError(f"unknown variable '{name}'")
            if cell.const:
                raise SplashError(f"parameter '{name}' cannot be assigned")
            m.steps += 1  # the operator's step, its operands read as run_plain_arith reads them
            if m.steps > m.limit:
                m.exhausted()
            if lname is not None:
                c = m.globals.get(lname)
                if c is not None:
                    a = c.value
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
                    c = m.globals.get(louter)
                else:
                    scopes = f.scopes
                    c = scopes[-1].get(llocal) if scopes else None
                    if c is None and len(scopes) > 1:  # the next scope out (a loop body's)
                        c = scopes[-2].get(llocal)
                if c is None:
                    a = left(m, f)
                elif lfield:  # ``r.f`` of a local record, read as field_of reads it
                    a = c.value
                    x = a.get(lfield, MISSING) if isinstance(a, Record) else MISSING
                    a = x if x is not MISSING else field_of(a, lfield)
                else:
                    a = c.value
            else:
                a = left(m, f)
            if rname is not None:
                c = m.globals.get(rname)
                if c is not None:
                    b = c.value
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
                    c = m.globals.get(router)
                else:
                    scopes = f.scopes
                    c = scopes[-1].get(rlocal) if scopes else None
                    if c is None and len(scopes) > 1:  # the next scope out (a loop body's)
                        c = scopes[-2].get(rlocal)
                if c is None:
                    b = right(m, f)
                elif rfield:  # ``r.f`` of a local record, read as field_of reads it
                    b = c.value
                    x = b.get(rfield, MISSING) if isinstance(b, Record) else MISSING
                    b = x if x is not MISSING else field_of(b, rfield)
                else:
                    b = c.value
            else:
                b = right(m, f)
            ta, tb = type(a), type(b)
            value: object = MISSING
            if (ta is float or ta is int) and (tb is float or tb is int):
                if ta is int and tb is int:
                    r = plain_op(a, b)
                    if -2147483648 <= r <= 2147483647:
                        value = r
                else:
                    value = plain_op(float(a), float(b))
            if value is MISSING:
                value = arithmetic(op, a, b)
            t = cell.type  # stored as run_var stores it
            if value is None or SAME_KIND.get(type(value)) == t.name or t.name in ("any", "null"):
                cell.value = value
            else:
                cell.value = coerce(value, t, f"variable '{name}'")
        return run_var_arith

    # --- expressions -----------------------------------------------------------------------------
