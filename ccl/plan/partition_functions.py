"""Which custom partition functions run as one Spark expression, and which need the interpreter.

A block compiles when it is straight-line code (declarations, assignments to local variables, IF/ELSE,
nested blocks, RETURN) over scalar values, using only the operators and built-ins whose Spark
equivalents have the interpreter's exact semantics (``COMPILABLE_FUNCTIONS``). Anything else (loops,
containers, records, side effects, integer division, other built-ins) runs the SPLASH interpreter in
an Arrow UDF. The runtime's compiler (runtime/partition_fn.py) implements exactly this subset.
"""
from __future__ import annotations

from typing import Optional

from ..syntax import nodes as n

# Built-ins with a Spark function of identical semantics (nulls included); argument counts allowed.
COMPILABLE_FUNCTIONS: dict[str, tuple[int, int]] = {
    "ascii": (1, 1), "substr": (2, 3), "left": (2, 2), "right": (2, 2), "upper": (1, 1),
    "lower": (1, 1), "length": (1, 1), "trim": (1, 1), "ltrim": (1, 1), "rtrim": (1, 1),
    "abs": (1, 1), "coalesce": (1, 16), "firstnonnull": (1, 16), "isnull": (1, 1), "mod": (2, 2),
}
COMPILABLE_OPERATORS = {"+", "-", "*", "%", "=", "!=", "<", "<=", ">", ">=", "and", "or"}
SCALAR_TYPES = {"integer", "long", "float", "string", "boolean"}


def why_not_compilable(block: n.Block, source: str) -> Optional[str]:
    """None when ``block`` compiles to a Spark expression, else the first reason it does not."""
    for stmt in block.stmts:
        reason = _stmt(stmt, source)
        if reason:
            return reason
    return None


def _stmt(s: n.Node, source: str) -> Optional[str]:
    if isinstance(s, n.Block):
        return why_not_compilable(s, source)
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


def _first(reasons) -> Optional[str]:
    for r in reasons:
        if r:
            return r
    return None
