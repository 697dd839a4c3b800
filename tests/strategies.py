"""Hypothesis strategies for random CCL/SPLASH syntax trees.

Every strategy produces only trees that the parser itself can build (its canonical forms), so that
``parse_text(to_ccl(Project(stmts))) == Project(stmts)`` must hold without diagnostics. The module
docstring of ``ccl/syntax/parser.py`` and its grammar rules define those forms; the comments next to each
strategy say which rule a restriction comes from.

Entry points: ``statements()`` (a list of top-level statements), ``statement``, ``expressions``,
``deep_expressions``, ``splash_statements``, ``blocks``, ``deep_blocks``, ``type_specs``,
``selects``, ``queries``, ``identifiers``, ``literals``, ``intervals``, ``keeps``, ``partitions``.
"""
from __future__ import annotations

from hypothesis import strategies as st

from ccl.syntax import nodes as n
from ccl.syntax.lexer import BASE_TYPES, INT_MAX, KEYWORDS, LONG_MAX
from ccl.syntax.parser import SOFT_KEYWORDS
from ccl.syntax.printer import ends_with_open_if


def _named(name: str, strategy: st.SearchStrategy) -> st.SearchStrategy:
    """``strategy`` with the short repr ``deferred(name)``: Hypothesis would otherwise spell out the
    whole nested strategy (hundreds of kB) in warnings and failure reports."""
    def definition():
        return strategy
    definition.__name__ = definition.__qualname__ = name
    return st.deferred(definition)


def _opt(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


# --------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------

HARD_KEYWORDS = frozenset(k for k, v in KEYWORDS.items() if v not in SOFT_KEYWORDS)


def is_name(word: str) -> bool:
    """Whether ``word`` lexes as an identifier (ID) or as a soft keyword usable as one."""
    low = word.lower()
    return low not in HARD_KEYWORDS and low not in BASE_TYPES


# Plain names, including words that matter at one place of the grammar only (interval units,
# eventCache options, START/TRANSACTION of Flex handlers, store kinds): they stay usable as names.
_PLAIN = ["a", "b", "c", "x", "Price", "Symbol", "trades", "_t1", "T_2", "e", "L", "e1",
          "minutes", "sec", "MS", "usecs", "Days", "events", "start", "transaction", "manual",
          "auto", "coalesce", "memory", "LOG", "nostart", "groups", "vwap", "count", "Größe"]
_FIRST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_SOFT = [w for kw in SOFT_KEYWORDS for w in (kw, kw.lower(), kw.capitalize())]

names = _named("names", st.one_of(
    st.sampled_from(_PLAIN),
    st.sampled_from(_SOFT),
    # [A-Za-z_][A-Za-z0-9_]{0,7} (st.from_regex is several times slower)
    st.builds(str.__add__, st.sampled_from(_FIRST), st.text(_FIRST + "0123456789", max_size=7))
      .filter(is_name),
))
identifiers = _named("identifiers", names.map(n.Ident))


def ident_lists(min_size: int = 1, max_size: int = 3) -> st.SearchStrategy:
    return st.lists(identifiers, min_size=min_size, max_size=max_size)


# column_name and field_name also take a built-in type name (BASETYPE, always lower-cased).
_base_type_idents = st.sampled_from(sorted(BASE_TYPES)).map(n.Ident)
column_names = st.one_of(identifiers, _base_type_idents)

# --------------------------------------------------------------------------------------------------
# Literals, constants, intervals
# --------------------------------------------------------------------------------------------------

# A string literal must end on its line; quotes are doubled by the printer.
_strings = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=8),
    st.sampled_from(["", "'", "it's", "''", "//", "/*", "*/", "\\", "a\tb", "\r", "[x]", "é→"]),
)
_floats = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False).map(abs)  # no -0.0

# Negative numbers are Unary('-', literal); an integer above INT_MAX is a long.
literals = _named("literals", st.one_of(
    st.integers(0, INT_MAX).map(lambda v: n.Literal("integer", v)),
    st.integers(0, LONG_MAX).map(lambda v: n.Literal("long", v)),
    _floats.map(lambda v: n.Literal("float", v)),
    _strings.map(lambda s: n.Literal("string", s)),
    st.booleans().map(lambda b: n.Literal("boolean", b)),
    st.just(n.Literal("null", None)),
))

# const_value : literal | var | MINUS INTEGER | MINUS FLOAT
const_values = _named("const_values", st.one_of(
    literals,
    identifiers.map(n.Var),
    st.integers(0, INT_MAX).map(lambda v: n.Unary("-", n.Literal("integer", v))),
    st.integers(0, LONG_MAX).map(lambda v: n.Unary("-", n.Literal("long", v))),
    _floats.map(lambda v: n.Unary("-", n.Literal("float", v))),
))

UNITS = ["day", "hour", "minute", "second", "millisecond", "microsecond"]  # canonical units
_amounts = st.integers(0, LONG_MAX)  # an INTEGER token (KEEP counts, SLACK, interval amounts)
intervals = _named("intervals", st.builds(
    n.Interval, st.lists(st.builds(n.IntervalPart, _amounts, st.sampled_from(UNITS)),
                         min_size=1, max_size=3)))

# --------------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------------

_named_types = st.one_of(
    # BASETYPE [ LPAREN expr_list RPAREN ]: arguments are integer constants
    st.builds(n.NamedType, st.sampled_from(sorted(BASE_TYPES)),
              st.lists(st.integers(0, LONG_MAX), max_size=2)),
    names.map(n.NamedType),  # a typedef name: keeps its case, never has arguments
)

_cache_options = st.one_of(
    st.builds(lambda c: n.CacheOption("events", count=c), _amounts),
    st.builds(lambda i: n.CacheOption("interval", interval=i), intervals),
    st.sampled_from(["manual", "auto", "coalesce"]).map(n.CacheOption),
    # `col ASC|DESC` (the printer always writes the direction, so any column name works)
    st.builds(lambda col, d: n.CacheOption("order", column=col, descending=d), identifiers,
              st.booleans()),
)
_event_caches = st.builds(n.EventCacheType, identifiers, _opt(ident_lists(0, 2)),
                          st.lists(_cache_options, max_size=3))


def _record_types(children):
    field = st.builds(n.RecordField, children, identifiers)
    some = st.lists(field, min_size=1, max_size=2)
    # Without a bar there must be fields; with a bar `[|]` is not a type (`[ | fields ]` needs one).
    # (min_size=1 rather than .filter(bool): Hypothesis 6.155 trips an internal assertion on that.)
    return st.one_of(
        st.builds(lambda f: n.RecordType([], f, False), some),
        st.builds(lambda f: n.RecordType([], f, True), some),
        st.builds(lambda k, f: n.RecordType(k, f, True), some, st.lists(field, max_size=2)),
    )


type_specs = _named("type_specs", st.recursive(
    st.one_of(_named_types, identifiers.map(n.TypeOf), _event_caches),
    lambda children: st.one_of(
        st.builds(n.DictType, children, children),
        st.builds(n.VectorType, children),
        _record_types(children),
    ),
    max_leaves=4,
))

# --------------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------------

BINARY_OPS = ["or", "and", "=", "!=", "<", "<=", ">", ">=", "like", "+", "-", "*", "/", "%", "^"]
UNARY_OPS = ["-", "+", "not"]
_OPS_BY_LEVEL = [["or"], ["and"], ["=", "!=", "<", "<=", ">", ">=", "like"], ["+", "-"],
                 ["*", "/", "%"], ["^"]]
KEYWORD_FUNCS = ["left", "right", "last", "like"]  # func_name : LEFT | RIGHT | LAST | LIKE

func_names = st.one_of(identifiers, st.sampled_from(KEYWORD_FUNCS).map(n.Ident))


def _record_lits(children):
    init = st.builds(n.FieldInit, identifiers, children)
    inits = st.lists(init, max_size=2)
    return st.one_of(
        st.builds(lambda f: n.RecordLit([], f, False), st.lists(init, min_size=1, max_size=2)),
        st.builds(lambda k, f: n.RecordLit(k, f, True), inits, inits),  # `[|]` is a record literal
    )


def _calls(children):
    return st.one_of(
        st.builds(n.Call, func_names, st.lists(children, max_size=3)),
        # BASETYPE LPAREN expr_list RPAREN: `string(x)`, at least one argument
        st.builds(n.Call, _base_type_idents, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda f: n.Call(f, [n.Star()]), func_names),  # count(*)
        # func_name LPAREN DISTINCT expr_list RPAREN: count(DISTINCT x)
        st.builds(lambda f, a: n.Call(f, a, True), func_names,
                  st.lists(children, min_size=1, max_size=2)),
    )


def _binaries(children):
    return st.builds(n.Binary, st.sampled_from(BINARY_OPS), children, children)


def _extend_expr(children):
    return st.one_of(
        st.builds(n.FieldAccess, children, column_names),
        st.builds(n.IndexAccess, children, children),
        _calls(children),
        st.builds(n.Cast, type_specs, children),
        st.builds(n.New, type_specs),
        st.builds(n.Unary, st.sampled_from(UNARY_OPS), children),
        # operators are where parenthesisation can go wrong: drawn three times as often
        _binaries(children), _binaries(children), _binaries(children),
        st.builds(n.InList, children, st.lists(children, min_size=1, max_size=3), st.booleans()),
        st.builds(n.Case, _opt(children),
                  st.lists(st.builds(n.WhenThen, children, children), min_size=1, max_size=2),
                  _opt(children)),
        _record_lits(children),
    )


_expr_leaves = st.one_of(literals, identifiers.map(n.Var))

expressions = _named("expressions", st.recursive(_expr_leaves, _extend_expr, max_leaves=6))

_operator_leaves = st.one_of(
    literals, identifiers.map(n.Var), st.builds(n.Call, func_names, st.just([])),
    st.builds(n.New, _named_types),
    st.builds(n.Case, st.none(), st.lists(st.builds(n.WhenThen, identifiers.map(n.Var), literals),
                                          min_size=1, max_size=1), st.none()),
)


@st.composite
def _operator_trees(draw, depth: int = 0):
    """Operator nests drawn top-down (st.recursive seldom puts an operator under an operator)."""
    if depth >= 5 or draw(st.integers(0, 4)) == 0:
        return draw(_operator_leaves)
    sub = _operator_trees(depth + 1)
    kind = draw(st.sampled_from(["binary"] * 4 + ["unary", "in", "field", "index"]))
    if kind == "binary":
        # a precedence level first, so that every level ('^' alone in its own) is drawn often
        level = draw(st.sampled_from(_OPS_BY_LEVEL))
        return n.Binary(draw(st.sampled_from(level)), draw(sub), draw(sub))
    if kind == "unary":
        return n.Unary(draw(st.sampled_from(UNARY_OPS)), draw(sub))
    if kind == "in":
        return n.InList(draw(sub), draw(st.lists(sub, min_size=1, max_size=2)), draw(st.booleans()))
    if kind == "field":
        return n.FieldAccess(draw(sub), draw(column_names))
    return n.IndexAccess(draw(sub), draw(sub))


# Larger expressions, for tests that draw one expression at a time: any node kind, or operator
# nests (precedence, associativity, NOT / IN, parenthesised postfix bases).
deep_expressions = _named("deep_expressions", st.one_of(
    st.recursive(_expr_leaves, _extend_expr, max_leaves=16),
    _operator_trees(),
))

# --------------------------------------------------------------------------------------------------
# SPLASH statements and DECLARE blocks
# --------------------------------------------------------------------------------------------------


def _make_if(cond, then, otherwise):
    # `if (c) if (d) x; else y;` gives the ELSE to the inner IF, so a tree whose THEN branch ends in
    # an open IF and which has an ELSE only comes from `if (c) { ... } else ...`.
    if otherwise is not None and ends_with_open_if(then):
        then = n.Block([then])
    return n.If(cond, then, otherwise)


_declarators = st.lists(st.builds(n.Declarator, identifiers, _opt(expressions)),
                        min_size=1, max_size=2)
var_decls = st.builds(n.VarDecl, type_specs, _declarators)
type_defs = st.builds(n.TypeDef, type_specs, identifiers)

# Assignment targets and expression statements may be any expression: the printer puts a
# non-postfix one in parentheses, and `postfix : LPAREN expr RPAREN` gives it back.
_simple_stmts = st.one_of(
    var_decls,
    type_defs,
    st.builds(n.Assign, expressions, expressions),
    st.builds(n.ExprStmt, expressions),
    st.builds(n.Break),
    st.builds(n.Continue),
    st.builds(n.Return, _opt(expressions)),
    st.builds(n.Exit),
    st.builds(n.OutputStmt, expressions),
)


def _extend_stmt(children):
    stmt_lists = st.lists(children, max_size=3)
    return st.one_of(
        st.builds(n.Block, stmt_lists),
        st.builds(_make_if, expressions, children, _opt(children)),
        st.builds(n.While, expressions, children),
        st.builds(n.ForIn, identifiers, expressions, children),
        # a case with no values is `default:`
        st.builds(n.Switch, expressions, st.lists(
            st.builds(n.SwitchCase, st.lists(expressions, max_size=2), stmt_lists), max_size=3)),
    )


splash_statements = _named("splash_statements",
                           st.recursive(_simple_stmts, _extend_stmt, max_leaves=5))
blocks = _named("blocks", st.builds(n.Block, st.lists(splash_statements, max_size=3)))
# Larger statement nests, for tests that draw one block at a time.
deep_blocks = _named("deep_blocks", st.builds(n.Block, st.lists(
    st.recursive(_simple_stmts, _extend_stmt, max_leaves=10), max_size=4)))

# declare_item : var_decl | func_def | typedef | PARAMETER ...
declare_items = st.one_of(
    var_decls,
    type_defs,
    st.builds(n.ParamDecl, type_specs, identifiers, _opt(expressions)),
    st.builds(n.FuncDef, type_specs, identifiers,
              st.lists(st.builds(n.Param, type_specs, identifiers), max_size=2), blocks),
)
declare_blocks = _named("declare_blocks",
                        st.builds(n.DeclareBlock, st.lists(declare_items, max_size=3)))

# --------------------------------------------------------------------------------------------------
# Clauses
# --------------------------------------------------------------------------------------------------

columns = st.lists(st.builds(n.Column, column_names, type_specs), min_size=1, max_size=3)
schema_specs = st.one_of(st.builds(n.SchemaName, identifiers), st.builds(n.InlineSchema, columns))
primary_keys = st.one_of(st.builds(n.PrimaryKey, ident_lists()), st.just(n.PrimaryKey([], True)))
store_refs = st.builds(n.StoreRef, identifiers)

_per = ident_lists(0, 2)
# As p_keep_* build them: only `n ROWS` takes SLACK or a parameter count; ALL / LAST take nothing.
keeps = _named("keeps", st.one_of(
    st.builds(lambda c, s, p: n.Keep("rows", c, None, s, p),
              st.one_of(_amounts, identifiers), _opt(_amounts), _per),
    st.builds(lambda c, p: n.Keep("every_rows", c, None, None, p), _amounts, _per),
    st.builds(lambda i, p: n.Keep("time", None, i, None, p), intervals, _per),
    st.builds(lambda i, p: n.Keep("every_time", None, i, None, p), intervals, _per),
    st.just(n.Keep("all")),
    st.just(n.Keep("last")),
))

autogenerates = st.builds(n.Autogenerate, ident_lists(), _opt(const_values))

# [BY src] HASH(cols) | ROUNDROBIN | { block }
partition_specs = st.one_of(
    st.builds(lambda s, c: n.PartitionSpec(s, "hash", c), _opt(identifiers), ident_lists()),
    st.builds(lambda s: n.PartitionSpec(s, "roundrobin"), _opt(identifiers)),
    st.builds(lambda s, b: n.PartitionSpec(s, "custom", [], b), _opt(identifiers), blocks),
)
partitions = _named("partitions", st.builds(
    n.Partition, st.lists(partition_specs, min_size=1, max_size=3),
    st.one_of(st.integers(1, 65535), identifiers)))

properties = st.lists(st.builds(n.Property, identifiers, const_values), max_size=3)

# --------------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------------

from_sources = st.builds(n.FromSource, identifiers, _opt(identifiers), _opt(keeps))


@st.composite
def from_items(draw):
    """A source or a left-deep chain of joins (the right side of a JOIN is always a source)."""
    item = draw(from_sources)
    for kind in draw(st.lists(st.sampled_from(["inner", "left", "right", "full"]), max_size=2)):
        item = n.Join(kind, item, draw(from_sources), draw(expressions))
    return item


patterns = st.recursive(
    identifiers.map(n.PatternRef),
    lambda children: st.one_of(
        st.builds(n.PatternNot, children),
        st.builds(n.PatternOp, st.sampled_from([",", "&&", "||"]), children, children),
    ),
    max_leaves=5,
)
matchings = st.builds(n.Matching, intervals, patterns, _opt(expressions))

select_items = st.one_of(
    st.builds(n.SelectItem, expressions, _opt(identifiers)),
    st.just(n.Star()),
    st.builds(n.Star, identifiers),
)
order_items = st.builds(n.OrderItem, expressions, st.sampled_from([None, True, False]))

selects = _named("selects", st.builds(
    n.Select,
    st.lists(select_items, min_size=1, max_size=3),
    st.lists(from_items(), min_size=1, max_size=2),
    matching=_opt(matchings),
    where=_opt(expressions),
    group_filter=_opt(expressions),
    group_by=st.lists(expressions, max_size=2),
    group_order_by=st.lists(order_items, max_size=2),
    having=_opt(expressions),
))
queries = _named("queries", st.one_of(
    selects, st.builds(n.Union_, st.lists(selects, min_size=2, max_size=3))))

# --------------------------------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------------------------------

ROLES = [None, "input", "output", "local"]
KINDS = ["stream", "window", "delta stream"]
roles = st.sampled_from(ROLES)
kinds = st.sampled_from(KINDS)

create_schemas = st.builds(n.CreateSchema, identifiers, ident_lists(0, 2),
                           st.lists(st.builds(n.Column, column_names, type_specs), max_size=3))


@st.composite
def create_elements(draw):
    role = draw(roles)
    node = n.CreateElement(
        role, draw(kinds), draw(identifiers),
        schema=draw(_opt(schema_specs)),
        primary_key=draw(_opt(primary_keys)),
        store=draw(_opt(store_refs)),
        keep=draw(_opt(keeps)),
        declare=draw(_opt(declare_blocks)),
        partition=draw(_opt(partitions)),
    )
    if role == "input":  # AUTOGENERATE and WHERE only on inputs, which have no query (CCL1105)
        node.autogenerate = draw(_opt(autogenerates))
        node.where = draw(_opt(st.builds(n.InputWhere, expressions)))
    else:  # a derived element needs AS SELECT (CCL1105)
        node.query = draw(queries)
    return _keyed(node)


def _keyed(node):
    """A stream with a PRIMARY KEY parses as a keyed stream (kind delta stream, keyed)."""
    if node.kind == "stream" and node.primary_key is not None:
        node.kind, node.keyed = "delta stream", True
    return node


create_error_streams = st.builds(n.CreateErrorStream, roles, identifiers, ident_lists(),
                                 _opt(partitions))
create_splitters = st.builds(
    n.CreateSplitter, roles, identifiers,
    st.lists(st.builds(n.SplitBranch, expressions, ident_lists()), min_size=1, max_size=2),
    ident_lists(0, 2), selects, _opt(partitions))
create_references = st.builds(n.CreateReference, roles, identifiers, _opt(schema_specs),
                              _opt(primary_keys), properties, _opt(partitions))
create_stores = st.builds(n.CreateStore, st.sampled_from(["memory", "log"]), st.booleans(),
                          identifiers, properties)
attach_adapters = st.builds(n.AttachAdapter, st.sampled_from(["input", "output"]), identifiers,
                            identifiers, identifiers, _opt(identifiers), properties,
                            _opt(partitions))
adapter_starts = st.builds(n.AdapterStart, ident_lists(1, 3), st.booleans())
imports = st.builds(n.Import, _strings)
global_declares = st.builds(n.GlobalDeclare, declare_blocks)

flex_outputs = st.builds(n.FlexOutput, roles, kinds, identifiers, _opt(schema_specs),
                         _opt(primary_keys), _opt(keeps), _opt(store_refs)).map(_keyed)
flex_handlers = st.one_of(
    st.builds(lambda s, b: n.OnHandler("row", s, b), identifiers, blocks),
    st.builds(lambda e, b: n.OnHandler(e, None, b),
              st.sampled_from(["start_transaction", "end_transaction"]), blocks),
    st.builds(n.EveryHandler, intervals, blocks),
)
create_flexes = st.builds(n.CreateFlex, identifiers, ident_lists(1, 2), flex_outputs,
                          _opt(partitions), _opt(declare_blocks),
                          st.lists(flex_handlers, min_size=1, max_size=3))

# IN / OUT / STORES / REFERENCES bind names (Ident values); PARAMETERS bind const_values.
_name_bindings = st.lists(st.builds(n.Binding, identifiers, identifiers), min_size=1, max_size=2)
_param_bindings = st.lists(st.builds(n.Binding, identifiers, const_values), min_size=1, max_size=2)
LOAD_CLAUSES = ["inputs", "outputs", "parameters", "stores", "references", "partition"]


@st.composite
def load_modules(draw):
    """LOAD MODULE: each used clause once (a repeated clause is CCL1104), in any order."""
    order = draw(st.lists(st.sampled_from(LOAD_CLAUSES), unique=True))
    node = n.LoadModule(draw(identifiers), draw(identifiers), [], [], [], [], clauses=order)
    for kind in order:
        if kind == "partition":
            node.partition = draw(partitions)
        else:
            setattr(node, kind, draw(_param_bindings if kind == "parameters" else _name_bindings))
    return node


_leaf_statements = st.one_of(
    # CREATE [role] STREAM/WINDOW/DELTA STREAM carries most clauses: drawn three times as often.
    create_elements(), create_elements(), create_elements(),
    create_schemas, create_error_streams, create_splitters, create_references, create_stores,
    attach_adapters, adapter_starts, imports, global_declares, create_flexes, load_modules(),
)


def _modules(body):
    return st.builds(n.CreateModule, identifiers, ident_lists(0, 2), ident_lists(0, 2),
                     ident_lists(0, 2), ident_lists(0, 2), st.lists(body, max_size=3))


# A module holds statements, possibly another module (two levels deep at most).
create_modules = _modules(st.one_of(_leaf_statements, _modules(_leaf_statements)))
statement = _named("statement", st.one_of(_leaf_statements, create_modules))


def statements(min_size: int = 1, max_size: int = 3) -> st.SearchStrategy:
    """A list of top-level statements."""
    return st.lists(statement, min_size=min_size, max_size=max_size)
