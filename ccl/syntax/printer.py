"""Writes CCL back from the AST: ``parse(to_ccl(tree)) == tree``.

Expressions get the fewest parentheses that keep their structure; statements are laid out one clause
per line. Comments and the original spelling of keywords are not kept.
"""
from __future__ import annotations

from functools import singledispatch
from typing import Union

from . import nodes as n
from .lexer import INT_MAX

INDENT = "    "

# Binding strength of operators (higher binds tighter); comparisons are non-associative.
_LEVEL = {"or": 1, "and": 2, "not": 3, "=": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
          "like": 4, "in": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "^": 7, "unary": 8,
          "postfix": 9}
_NONASSOC = 4
_PATTERN_LEVEL = {",": 1, "||": 2, "&&": 3}

_UNIT_WORDS = {"day": "DAYS", "hour": "HOURS", "minute": "MINUTES", "second": "SECONDS",
               "millisecond": "MILLISECONDS", "microsecond": "MICROSECONDS"}


def to_ccl(node: n.Node) -> str:
    """CCL text for a project, a statement, a clause, a type or an expression."""
    if isinstance(node, n.Project):
        return "".join(statement(s) + ";\n\n" for s in node.statements)
    if _is_statement(node):
        return statement(node) + ";"
    if isinstance(node, (n.Block,)):
        return "\n".join(_stmt_lines(node, 0))
    if _is_splash_stmt(node):
        return "\n".join(_stmt_lines(node, 0))
    if isinstance(node, (n.NamedType, n.TypeOf, n.DictType, n.VectorType, n.RecordType,
                         n.EventCacheType)):
        return type_text(node)
    return expr(node)


# --------------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------------

def _level(e: n.Node) -> int:
    if isinstance(e, n.Binary):
        return _LEVEL[e.op]
    if isinstance(e, n.Unary):
        return _LEVEL["not"] if e.op == "not" else _LEVEL["unary"]
    if isinstance(e, n.InList):
        return _LEVEL["in"]
    return _LEVEL["postfix"]


def _is_postfix(e: n.Node) -> bool:
    """Whether ``e`` prints as a postfix expression (usable as a statement or a field base)."""
    return isinstance(e, (n.Var, n.Call, n.Cast, n.FieldAccess, n.IndexAccess, n.WindowFind))


def _wrap(e: n.Node, need: bool) -> str:
    text = expr(e)
    return f"({text})" if need else text


def expr(e: n.Node) -> str:
    """CCL text of an expression."""
    return _expr(e)


@singledispatch
def _expr(e: n.Node) -> str:
    raise TypeError(f"not an expression: {type(e).__name__}")


@_expr.register
def _(e: n.Literal) -> str:
    if e.kind == "string":
        return "'" + str(e.value).replace("'", "''") + "'"
    if e.kind == "null":
        return "NULL"
    if e.kind == "boolean":
        return "TRUE" if e.value else "FALSE"
    if e.kind == "long":
        return f"{e.value}L" if e.value <= INT_MAX else str(e.value)
    if e.kind == "float":
        return repr(float(e.value))
    if e.kind == "money":
        return _money_text(e.value)
    return str(e.value)


def _money_text(value) -> str:
    """A money literal's CCL text: ``Decimal('10.00')`` -> ``10.00d2`` (the scale is the exponent)."""
    return f"{value:f}d{-value.as_tuple().exponent}"


@_expr.register
def _(e: n.Var) -> str:
    return e.name.name


@_expr.register
def _(e: n.Ident) -> str:
    return e.name


@_expr.register
def _(e: n.FieldAccess) -> str:
    return f"{_wrap(e.base, not _is_postfix(e.base))}.{e.field.name}"


@_expr.register
def _(e: n.IndexAccess) -> str:
    return f"{_wrap(e.base, not _is_postfix(e.base))}[{expr(e.index)}]"


@_expr.register
def _(e: n.WindowFind) -> str:
    return f"{_wrap(e.base, not _is_postfix(e.base))}{{{expr(e.record)}}}"


@_expr.register
def _(e: n.Star) -> str:
    return f"{e.qualifier.name}.*" if e.qualifier else "*"


@_expr.register
def _(e: n.Call) -> str:
    distinct = "DISTINCT " if e.distinct else ""
    library = f"{e.library.name}." if e.library is not None else ""
    return f"{library}{e.func.name}({distinct}{', '.join(expr(a) for a in e.args)})"


@_expr.register
def _(e: n.New) -> str:
    return f"new {type_text(e.type)}"


@_expr.register
def _(e: n.Cast) -> str:
    return f"cast({type_text(e.type)}, {expr(e.expr)})"


@_expr.register
def _(e: n.Unary) -> str:
    if e.op == "not":
        return "NOT " + _wrap(e.operand, _level(e.operand) < _LEVEL["not"])
    return e.op + _wrap(e.operand, _level(e.operand) < _LEVEL["unary"])


@_expr.register
def _(e: n.Binary) -> str:
    level = _LEVEL[e.op]
    left_need = _level(e.left) < level or (_level(e.left) == level and level in (_NONASSOC, 7))
    right_need = _level(e.right) < level or (_level(e.right) == level and level != 7)
    op = e.op.upper() if e.op.isalpha() else e.op
    return f"{_wrap(e.left, left_need)} {op} {_wrap(e.right, right_need)}"


@_expr.register
def _(e: n.InList) -> str:
    kw = "NOT IN" if e.negated else "IN"
    items = ", ".join(expr(i) for i in e.items)
    return f"{_wrap(e.expr, _level(e.expr) <= _LEVEL['in'])} {kw} ({items})"


@_expr.register
def _(e: n.Sequence) -> str:
    steps = [f"{_postfix_text(s.target)} := {expr(s.value)}" if isinstance(s, n.Assign)
             else expr(s.expr) for s in e.steps]  # type: ignore[attr-defined]
    return "(" + "; ".join(steps + [expr(e.value)]) + ")"


@_expr.register
def _(e: n.Case) -> str:
    parts = ["CASE"]
    if e.subject is not None:
        parts.append(expr(e.subject))
    parts.extend(f"WHEN {expr(w.when)} THEN {expr(w.then)}" for w in e.whens)
    if e.default is not None:
        parts.append(f"ELSE {expr(e.default)}")
    parts.append("END")
    return " ".join(parts)


def _record(keys: list[str], rest: list[str], bar: bool) -> str:
    """`[k = 1; | v = 2;]` from the printed key and non-key fields."""
    if not bar:
        return "[" + " ".join(rest) + "]"
    return "[" + " ".join(keys + ["|"] + rest) + "]"


@_expr.register
def _(e: n.RecordLit) -> str:
    return _record([f"{f.name.name} = {expr(f.value)};" for f in e.key_fields],
                   [f"{f.name.name} = {expr(f.value)};" for f in e.fields], e.bar)


# --------------------------------------------------------------------------------------------------
# Types, intervals, clauses
# --------------------------------------------------------------------------------------------------

def type_text(t: n.Node) -> str:
    """CCL text of a type."""
    if isinstance(t, n.NamedType):
        return t.name + (f"({', '.join(map(str, t.args))})" if t.args else "")
    if isinstance(t, n.TypeOf):
        return f"typeof({t.source.name})"
    if isinstance(t, n.DictType):
        return f"dictionary({type_text(t.key)}, {type_text(t.value)})"
    if isinstance(t, n.VectorType):
        return f"vector({type_text(t.element)})"
    if isinstance(t, n.RecordType):
        return _record([f"{type_text(f.type)} {f.name.name};" for f in t.key_fields],
                       [f"{type_text(f.type)} {f.name.name};" for f in t.fields], t.bar)
    if isinstance(t, n.EventCacheType):
        src = t.source.name
        if t.keys is not None:
            src += "[" + ", ".join(k.name for k in t.keys) + "]"
        return f"eventCache({', '.join([src] + [_cache_option(o) for o in t.options])})"
    raise TypeError(f"not a type: {type(t).__name__}")


def _cache_option(o: n.CacheOption) -> str:
    if o.kind == "events":
        return f"{o.count} events"
    if o.kind == "interval":
        return interval(o.interval)
    if o.kind == "order":
        return f"{o.column.name} {'DESC' if o.descending else 'ASC'}"
    return o.kind


def interval(i: n.Interval) -> str:
    """`3 MINUTES 30 SECONDS`."""
    return " ".join(f"{p.amount} {_UNIT_WORDS[p.unit]}" for p in i.parts)


def keep_count_text(count: object) -> str:
    """The row count of a KEEP clause as written: a number, a parameter or an expression."""
    if isinstance(count, n.Ident):
        return count.name
    return expr(count) if isinstance(count, n.Node) else str(count)


def keep(k: n.Keep) -> str:
    """A KEEP clause."""
    per = f" PER ({_names(k.per)})" if k.per else ""
    count = keep_count_text(k.count)
    if k.kind == "rows":
        slack = f" SLACK {keep_count_text(k.slack)}" if k.slack is not None else ""
        return f"KEEP {count} ROWS{slack}{per}"
    if k.kind == "every_rows":
        return f"KEEP EVERY {count} ROWS{per}"
    if k.kind == "time":
        return f"KEEP {interval(k.interval)}{per}"
    if k.kind == "every_time":
        return f"KEEP EVERY {interval(k.interval)}{per}"
    if k.kind == "all":
        return "KEEP ALL"
    return f"KEEP LAST ROW{per}"


def _names(idents: list[n.Ident]) -> str:
    return ", ".join(i.name for i in idents)


def _schema(s: n.Node) -> str:
    if isinstance(s, n.SchemaName):
        return f"SCHEMA {s.name.name}"
    return f"SCHEMA ({_columns(s.columns)})"


def _columns(cols: list[n.Column]) -> str:
    return ", ".join(f"{c.name.name} {type_text(c.type)}" for c in cols)


def _pk(pk: n.PrimaryKey) -> str:
    return "PRIMARY KEY DEDUCED" if pk.deduced else f"PRIMARY KEY ({_names(pk.columns)})"


def partition(p: n.Partition) -> str:
    """A PARTITION clause."""
    specs = []
    for s in p.specs:
        by = f"BY {s.source.name} " if s.source else ""
        if s.method == "hash":
            specs.append(f"{by}HASH({_names(s.columns)})")
        elif s.method == "roundrobin":
            specs.append(f"{by}ROUNDROBIN")
        else:
            specs.append(by + "\n".join(_block_lines(s.body, 0)))
    count = p.count.name if isinstance(p.count, n.Ident) else p.count
    return f"PARTITION {', '.join(specs)} PARTITIONS {count}"


def _properties(props: list[n.Property]) -> str:
    return "PROPERTIES " + ", ".join(f"{p.name.name} = {expr(p.value)}" for p in props)


def _pattern(p: n.Node, parent: int = 0) -> str:
    if isinstance(p, n.PatternRef):
        return p.name.name
    if isinstance(p, n.PatternNot):
        return "!" + _pattern(p.operand, 4)
    level = _PATTERN_LEVEL[p.op]
    sep = ", " if p.op == "," else f" {p.op} "
    text = _pattern(p.left, level - 1) + sep + _pattern(p.right, level)
    return f"({text})" if level <= parent else text


def select(s: n.Select) -> str:
    """A SELECT query, one clause per line."""
    items = []
    for it in s.items:
        if isinstance(it, n.Star):
            items.append(expr(it))
        else:
            items.append(expr(it.expr) + (f" AS {it.alias.name}" if it.alias else ""))
    lines = ["SELECT " + ", ".join(items), "FROM " + ", ".join(_from_item(f) for f in s.sources)]
    if s.matching is not None:
        m = s.matching
        on = f" ON {expr(m.on)}" if m.on is not None else ""
        lines.append(f"MATCHING [{interval(m.interval)} : {_pattern(m.pattern)}]{on}")
    if s.where is not None:
        lines.append(f"WHERE {expr(s.where)}")
    if s.group_filter is not None:
        lines.append(f"GROUP FILTER {expr(s.group_filter)}")
    if s.group_by:
        lines.append("GROUP BY " + ", ".join(expr(g) for g in s.group_by))
    if s.group_order_by:
        lines.append("GROUP ORDER BY " + ", ".join(_order_item(o) for o in s.group_order_by))
    if s.having is not None:
        lines.append(f"HAVING {expr(s.having)}")
    return "\n".join(lines)


def _order_item(o: n.OrderItem) -> str:
    suffix = "" if o.descending is None else (" DESC" if o.descending else " ASC")
    return expr(o.expr) + suffix


def _from_item(f: n.Node) -> str:
    if isinstance(f, n.Join):
        kind = "JOIN" if f.kind == "inner" else f"{f.kind.upper()} JOIN"
        return f"{_from_item(f.left)} {kind} {_from_item(f.right)} ON {expr(f.on)}"
    text = f.name.name
    if f.alias is not None:
        text += f" {f.alias.name}"
    if f.keep is not None:
        text += " " + keep(f.keep)
    return text


def query(q: n.Node) -> str:
    """A SELECT or a UNION of SELECTs."""
    if isinstance(q, n.Union_):
        return "\nUNION\n".join(select(s) for s in q.selects)
    return select(q)


# --------------------------------------------------------------------------------------------------
# SPLASH statements
# --------------------------------------------------------------------------------------------------

def _is_splash_stmt(node: n.Node) -> bool:
    return isinstance(node, (n.VarDecl, n.ParamDecl, n.TypeDef, n.FuncDef, n.Assign, n.If, n.While,
                             n.ForIn, n.Switch, n.Break, n.Continue, n.Return, n.Exit, n.OutputStmt,
                             n.ExprStmt))


def _block_lines(b: n.Block, depth: int) -> list[str]:
    pad = INDENT * depth
    lines = ["{"]
    for s in b.stmts:
        lines.extend(_stmt_lines(s, depth + 1))
    lines.append(pad + "}")
    return lines


def _postfix_text(e: n.Node) -> str:
    return _wrap(e, not _is_postfix(e))


def _stmt_lines(s: n.Node, depth: int) -> list[str]:
    pad = INDENT * depth
    if isinstance(s, n.Block):
        lines = _block_lines(s, depth)
        lines[0] = pad + lines[0]
        return lines
    if isinstance(s, n.VarDecl):
        decls = ", ".join(d.name.name + (f" := {expr(d.init)}" if d.init is not None else "")
                          for d in s.declarators)
        return [f"{pad}{type_text(s.type)} {decls};"]
    if isinstance(s, n.ParamDecl):
        default = f" := {expr(s.default)}" if s.default is not None else ""
        return [f"{pad}PARAMETER {type_text(s.type)} {s.name.name}{default};"]
    if isinstance(s, n.TypeDef):
        return [f"{pad}TYPEDEF {type_text(s.type)} {s.name.name};"]
    if isinstance(s, n.FuncDef):
        params = ", ".join(f"{type_text(p.type)} {p.name.name}" for p in s.params)
        body = _block_lines(s.body, depth)
        return [f"{pad}{type_text(s.return_type)} {s.name.name}({params}) {body[0]}"] + body[1:]
    if isinstance(s, n.Assign):
        return [f"{pad}{_postfix_text(s.target)} := {expr(s.value)};"]
    if isinstance(s, n.ExprStmt):
        return [f"{pad}{_postfix_text(s.expr)};"]
    if isinstance(s, n.If):
        then = s.then
        if s.otherwise is not None and ends_with_open_if(then):
            then = n.Block([then], span=then.span)  # keep the ELSE with this IF
        lines = _nested(f"{pad}if ({expr(s.cond)})", then, depth)
        if s.otherwise is not None:
            lines += _nested(f"{pad}else", s.otherwise, depth)
        return lines
    if isinstance(s, n.While):
        return _nested(f"{pad}while ({expr(s.cond)})", s.body, depth)
    if isinstance(s, n.ForIn):
        where = (" where " + ", ".join(f"{c.name.name} = {expr(c.value)}" for c in s.where)
                 if s.where else "")
        return _nested(f"{pad}for ({s.var.name} in {expr(s.iterable)}{where})", s.body, depth)
    if isinstance(s, n.Switch):
        lines = [f"{pad}switch ({expr(s.subject)}) {{"]
        for c in s.cases:
            head = f"case {', '.join(expr(v) for v in c.values)}:" if c.values else "default:"
            lines.append(pad + INDENT + head)
            for st in c.stmts:
                lines.extend(_stmt_lines(st, depth + 2))
        lines.append(pad + "}")
        return lines
    if isinstance(s, n.Break):
        return [pad + "break;"]
    if isinstance(s, n.Continue):
        return [pad + "continue;"]
    if isinstance(s, n.Return):
        return [pad + ("return;" if s.value is None else f"return {expr(s.value)};")]
    if isinstance(s, n.Exit):
        return [pad + "exit;"]
    if isinstance(s, n.OutputStmt):
        return [f"{pad}output {expr(s.value)};"]
    raise TypeError(f"not a SPLASH statement: {type(s).__name__}")


def ends_with_open_if(s: n.Node) -> bool:
    """Whether an ELSE written after ``s`` would bind to an IF inside ``s`` (the dangling else)."""
    while True:
        if isinstance(s, n.If):
            if s.otherwise is None:
                return True
            s = s.otherwise
        elif isinstance(s, (n.While, n.ForIn)):
            s = s.body
        else:
            return False


def _nested(head: str, body: n.Node, depth: int) -> list[str]:
    if isinstance(body, n.Block):
        lines = _block_lines(body, depth)
        return [f"{head} {lines[0]}"] + lines[1:]
    return [head] + _stmt_lines(body, depth + 1)


def _declare_lines(block: n.DeclareBlock, depth: int) -> list[str]:
    pad = INDENT * depth
    lines = [pad + "DECLARE"]
    for item in block.items:
        lines.extend(_stmt_lines(item, depth + 1))
    lines.append(pad + "END")
    return lines


# --------------------------------------------------------------------------------------------------
# CCL statements
# --------------------------------------------------------------------------------------------------

def _is_statement(node: n.Node) -> bool:
    return isinstance(node, (n.CreateSchema, n.CreateElement, n.CreateErrorStream, n.CreateSplitter,
                             n.CreateReference, n.CreateStore, n.AttachAdapter, n.AdapterStart, n.Import,
                             n.GlobalDeclare, n.CreateFlex, n.CreateModule, n.LoadModule,
                             n.CreateLibrary))


def _role(role: Union[str, None]) -> str:
    return f"{role.upper()} " if role else ""


def statement(s: n.Node) -> str:
    """One CCL statement without its final ';'."""
    lines: list[str]
    if isinstance(s, n.CreateSchema):
        head = f"CREATE SCHEMA {s.name.name}"
        if s.inherits:
            head += f" INHERITS FROM {_names(s.inherits)}"
        if s.columns:
            head += f" ({_columns(s.columns)})"
        lines = [head]
    elif isinstance(s, n.CreateElement):
        lines = [f"CREATE {_role(s.role)}{_kind(s)} {s.name.name}"]
        lines += _element_clauses(s)
        if s.query is not None:
            lines += ["AS"] + query(s.query).split("\n")
    elif isinstance(s, n.CreateErrorStream):
        lines = [f"CREATE {_role(s.role)}ERROR STREAM {s.name.name} ON {_names(s.sources)}"]
        if s.partition is not None:
            lines.append(partition(s.partition))
    elif isinstance(s, n.CreateSplitter):
        lines = [f"CREATE {_role(s.role)}SPLITTER {s.name.name}"]
        if s.partition is not None:
            lines.append(partition(s.partition))
        lines.append("AS")
        lines += [f"WHEN {expr(b.cond)} THEN {_names(b.targets)}" for b in s.branches]
        if s.otherwise:
            lines.append(f"ELSE {_names(s.otherwise)}")
        lines += select(s.select).split("\n")
    elif isinstance(s, n.CreateReference):
        lines = [f"CREATE {_role(s.role)}REFERENCE {s.name.name}"]
        if s.schema is not None:
            lines.append(_schema(s.schema))
        if s.primary_key is not None:
            lines.append(_pk(s.primary_key))
        if s.properties:
            lines.append(_properties(s.properties))
        if s.partition is not None:
            lines.append(partition(s.partition))
    elif isinstance(s, n.CreateStore):
        default = "DEFAULT " if s.is_default else ""
        lines = [f"CREATE {default}{s.kind.upper()} STORE {s.name.name}"]
        if s.properties:
            lines.append(_properties(s.properties))
    elif isinstance(s, n.CreateLibrary):
        lines = [f"CREATE LIBRARY {s.name.name} LANGUAGE {s.language.upper()} "
                 f"FROM {expr(n.Literal('string', s.source))} ("]
        lines += [f"{INDENT}{type_text(f.return_type)} {f.name.name}("
                  f"{', '.join(type_text(t) for t in f.params)});" for f in s.functions]
        lines.append(")")
    elif isinstance(s, n.AttachAdapter):
        lines = [f"ATTACH {s.direction.upper()} ADAPTER {s.name.name} TYPE {s.type.name} "
                 f"TO {s.target.name}" + (f" GROUP {s.group.name}" if s.group else "")]
        if s.properties:
            lines.append(_properties(s.properties))
        if s.partition is not None:
            lines.append(partition(s.partition))
    elif isinstance(s, n.AdapterStart):
        lines = [f"ADAPTER START GROUPS {_names(s.groups)}" + (" NOSTART" if s.nostart else "")]
    elif isinstance(s, n.Import):
        lines = [f"IMPORT {expr(n.Literal('string', s.path))}"]
    elif isinstance(s, n.GlobalDeclare):
        lines = _declare_lines(s.block, 0)
    elif isinstance(s, n.CreateFlex):
        lines = _flex_lines(s)
    elif isinstance(s, n.CreateModule):
        head = f"CREATE MODULE {s.name.name}"
        for kw, idents in (("IN", s.inputs), ("OUT", s.outputs), ("REFERENCES", s.references),
                           ("STORES", s.stores)):
            if idents:
                head += f" {kw} {_names(idents)}"
        lines = [head, "BEGIN"]
        for inner in s.body:
            lines += (INDENT + ln for ln in (statement(inner) + ";").split("\n"))
        lines.append("END")
    elif isinstance(s, n.LoadModule):
        lines = [f"LOAD MODULE {s.module.name} AS {s.instance.name}"]
        for kind in s.clauses:
            if kind == "partition":
                lines.append(partition(s.partition))
            else:
                kw = {"inputs": "IN", "outputs": "OUT"}.get(kind, kind.upper())  # PARAMETERS, STORES, REFERENCES
                bindings = getattr(s, kind)
                lines.append(f"{kw} " + ", ".join(
                    f"{b.name.name} = {expr(b.value)}" for b in bindings))
    else:
        raise TypeError(f"not a statement: {type(s).__name__}")
    return "\n".join(lines)


def _kind(s: Union[n.CreateElement, n.FlexOutput]) -> str:
    return "STREAM" if s.keyed else s.kind.upper()


def _element_clauses(s: Union[n.CreateElement, n.FlexOutput]) -> list[str]:
    lines = []
    if s.schema is not None:
        lines.append(_schema(s.schema))
    if s.primary_key is not None:
        lines.append(_pk(s.primary_key))
    if s.store is not None:
        lines.append(f"STORE {s.store.name.name}")
    if s.keep is not None:
        lines.append(keep(s.keep))
    if isinstance(s, n.CreateElement):
        if s.autogenerate is not None:
            start = f" FROM {expr(s.autogenerate.start)}" if s.autogenerate.start is not None else ""
            lines.append(f"AUTOGENERATE ({_names(s.autogenerate.columns)}){start}")
        if s.where is not None:
            lines.append(f"WHERE {expr(s.where.cond)}")
        if s.declare is not None:
            lines += _declare_lines(s.declare, 0)
        if s.partition is not None:
            lines.append(partition(s.partition))
        if s.aging is not None:
            a = s.aging
            lines.append(f"AGES EVERY {interval(a.interval)} SET {a.column.name}"
                         + (f" {a.times} TIMES" if a.times is not None else "")
                         + (f" FROM {a.start.name}" if a.start is not None else ""))
    return lines


def _flex_lines(s: n.CreateFlex) -> list[str]:
    out = s.output
    ins = ", ".join(i.name + (f" {keep(k)}" if k is not None else "")
                    for i, k in zip(s.inputs, s.input_keeps or [None] * len(s.inputs)))
    lines = [f"CREATE FLEX {s.name.name}", f"IN {ins}",
             f"OUT {_role(out.role)}{_kind(out)} {out.name.name}"]
    lines += _element_clauses(out)
    if s.partition is not None:
        lines.append(partition(s.partition))
    lines.append("BEGIN")
    if s.declare is not None:
        lines += _declare_lines(s.declare, 1)
        lines[-1] += ";"
    for h in s.handlers:
        if isinstance(h, n.EveryHandler):
            head = f"{INDENT}EVERY {interval(h.interval)}"
        elif h.event == "row":
            head = f"{INDENT}ON {h.source.name}"
        else:
            head = f"{INDENT}ON {'START' if h.event == 'start_transaction' else 'END'} TRANSACTION"
        body = _block_lines(h.body, 1)
        lines += [f"{head} {body[0]}"] + body[1:-1] + [body[-1] + ";"]
    lines.append("END")
    return lines
