"""SPLASH statements: declarations, assignments and control flow, checked in nested scopes."""
from __future__ import annotations

from typing import Callable, Optional

from ..syntax import nodes as n
from .expressions import Report, Typer
from .symbols import Context, Variable
from ..splash.types import ANY, Type, widens


class StatementChecker:
    """Checks SPLASH blocks; collects the RETURN statements with the types of their values."""

    def __init__(self, typer: Typer, report: Report, type_spec: Callable[..., Type],
                 output: Optional[Type] = None) -> None:
        """``output``: the row type of the Flex output that ``output`` statements write to."""
        self.typer = typer
        self.report = report
        self.type_spec = type_spec
        self.output = output
        self.returns: list[tuple[n.Return, Type]] = []
        self.loops = 0  # loops around the statement being checked
        self.switches = 0  # switch statements around it

    def declare(self, ctx: Context, decl: n.VarDecl, where: str) -> None:
        """Declare the variables of ``decl`` in ``ctx.scope`` (checking initialisers)."""
        t = self.type_spec(decl.type, ctx.scope)
        for d in decl.declarators:
            if d.init is not None:
                self.assignable(self.typer.type_of(d.init, ctx), t, d.init)
            name = d.name.name
            if name in ctx.scope.vars:
                self.report("CCL2002", d.name.span, f"'{name}' is already declared in this scope")
                continue
            ctx.scope.vars[name] = Variable(name, t, where, d.name.span)

    def assignable(self, value: Type, target: Type, at: n.Node) -> None:
        if not _fits(value, target, at):
            self.report("CCL2103", at.span, f"cannot assign {value} to {target}")

    def block(self, block: n.Block, ctx: Context) -> None:
        inner = ctx.with_scope(ctx.scope.child())
        for stmt in block.stmts:
            self.stmt(stmt, inner)

    def stmt(self, s: n.Node, ctx: Context) -> None:
        if isinstance(s, n.Block):
            self.block(s, ctx)
        elif isinstance(s, n.VarDecl):
            self.declare(ctx, s, "local")
        elif isinstance(s, n.Assign):
            if isinstance(s.target, n.Var):
                var = ctx.scope.lookup(s.target.name.name)
                if var is not None and var.where == "parameter":
                    self.report("CCL2214", s.target.span, f"'{var.name}' is a PARAMETER: it cannot "
                                                          "be assigned")
            target = self.typer.type_of(s.target, ctx)
            self.assignable(self.typer.type_of(s.value, ctx), target, s.value)
        elif isinstance(s, n.If):
            self.typer.type_of(s.cond, ctx)
            self.nested(s.then, ctx)
            if s.otherwise is not None:
                self.nested(s.otherwise, ctx)
        elif isinstance(s, n.While):
            self.typer.type_of(s.cond, ctx)
            self.loop_body(s.body, ctx)
        elif isinstance(s, n.ForIn):
            it = self.typer.type_of(s.iterable, ctx)
            if it.name == "record" and isinstance(s.iterable, n.Var):
                # `for (r in W)`: ESP's older spelling of `for (r in W_stream)`
                stream = ctx.scope.lookup(s.iterable.name.name + "_stream")
                if stream is not None and stream.type.name == "window":
                    it = stream.type
            if it.name == "eventcache":
                # ESP iterates a cache's bucket with cacheSize() and getCache(), not with for-in;
                # the runtime refuses it, so every event would be a bad record
                self.report("CCL2101", s.iterable.span, "for-in needs a vector, a dictionary or a "
                            "window, not an event cache: read it with cacheSize() and getCache()")
            inner = ctx.with_scope(ctx.scope.child())
            element = ANY
            if it.name in ("vector", "eventcache", "window") and it.args:
                element = it.args[0]
            elif it.name == "dictionary" and it.args:
                element = it.args[0]
            for cond in s.where:
                self.typer.type_of(cond.value, ctx)
                if it.name != "window" and not it.is_vague:
                    self.report("CCL2101", cond.span, f"'where' in a for loop needs a window "
                                                      f"(W_stream), not {it}")
                    break
                if element.name == "record" and element.fields and element.field(cond.name.name) is None:
                    self.report("CCL2003", cond.name.span, f"no column '{cond.name.name}' in the window")
            inner.scope.vars[s.var.name] = Variable(s.var.name, element, "local", s.var.span)
            self.loop_body(s.body, inner)
        elif isinstance(s, n.Switch):
            self.typer.type_of(s.subject, ctx)
            for case in s.cases:
                for v in case.values:
                    self.typer.type_of(v, ctx)
                inner = ctx.with_scope(ctx.scope.child())
                self.switches += 1
                for st in case.stmts:
                    self.stmt(st, inner)
                self.switches -= 1
        elif isinstance(s, (n.Break, n.Continue)):
            word = "break" if isinstance(s, n.Break) else "continue"
            if not self.loops and not (word == "break" and self.switches):
                self.report("CCL2216", s.span, f"'{word}' outside a loop"
                            + (" or switch" if word == "break" else ""))
        elif isinstance(s, n.Return):
            t = self.typer.type_of(s.value, ctx) if s.value is not None else ANY
            self.returns.append((s, t))
        elif isinstance(s, n.OutputStmt):
            self.output_record(s.value, self.typer.type_of(s.value, ctx))
        elif isinstance(s, n.ExprStmt):
            self.typer.type_of(s.expr, ctx)
        elif isinstance(s, n.TypeDef):
            pass  # typedefs inside blocks are rare; global ones are registered by the analyzer

    def output_record(self, value: n.Node, typed: Type) -> None:
        """The fields of a record literal written by ``output`` (possibly in setOpcode) should be
        columns of the Flex output (others are dropped, as ESP drops them: CCL2106), of types that
        widen to theirs."""
        if isinstance(value, n.Call) and value.func.name.lower() == "setopcode" and value.args:
            value = value.args[0]
        if self.output is None or not self.output.fields or not isinstance(value, n.RecordLit):
            return
        for init in value.key_fields + value.fields:
            column = self.output.field(init.name.name)
            given = typed.field(init.name.name) if typed.name == "record" else None
            if column is None:
                self.report("CCL2106", init.name.span, f"the Flex output has no column "
                                                       f"'{init.name.name}': the field is dropped")
            elif given is not None and not _fits(given, column, init.value):
                self.report("CCL2103", init.value.span, f"cannot output {given} into column "
                                                        f"'{init.name.name}' ({column})")

    def loop_body(self, s: n.Node, ctx: Context) -> None:
        self.loops += 1
        self.nested(s, ctx)
        self.loops -= 1

    def nested(self, s: n.Node, ctx: Context) -> None:
        self.stmt(s, ctx.with_scope(ctx.scope.child()))


def _fits(value: Type, target: Type, at: n.Node) -> bool:
    """Whether the value of ``at`` (of type ``value``) may be stored where ``target`` is kept."""
    literal = at.operand if isinstance(at, n.Unary) else at
    if isinstance(literal, n.Literal) and literal.kind == "float" and target.name in ("money", "decimal"):
        return True  # a decimal constant written as a float literal
    return widens(value, target)


def can_end_without_value(stmts: list[n.Node]) -> bool:
    """Whether some path through ``stmts`` ends without a value: no RETURN, or RETURN NULL."""
    if not always_returns_value(stmts):
        return True
    return any(isinstance(x, n.Return) and (x.value is None or _is_null(x.value))
               for s in stmts for x in s.walk())


def _is_null(e: n.Node) -> bool:
    return isinstance(e, n.Literal) and e.kind == "null"


def always_returns_value(stmts: list[n.Node]) -> bool:
    """Whether every path through ``stmts`` ends in ``return <non-null value>``."""
    for s in stmts:
        if isinstance(s, n.Return):
            return s.value is not None and not (isinstance(s.value, n.Literal) and s.value.kind == "null")
        if isinstance(s, n.Exit):
            return False
        if isinstance(s, n.Block) and always_returns_value(s.stmts):
            return True
        if isinstance(s, n.If) and s.otherwise is not None:
            if always_returns_value([s.then]) and always_returns_value([s.otherwise]):
                return True
        if isinstance(s, n.Switch) and any(not c.values for c in s.cases):
            if all(always_returns_value(c.stmts) for c in s.cases):
                return True
    return False

