"""The CCL/SPLASH parser (PLY, LALR(1)).

``parse_text`` turns a CCL file into a :class:`nodes.Project` and a list of diagnostics; it never
raises on bad input. Syntax errors are recovered at the next ``;`` (at statement level and inside
SPLASH blocks and DECLARE blocks), so one run reports every error of a file.

Grammar notes
-------------
* Keywords that may also be names (a column called ``Type`` or ``Key``) are listed in
  ``SOFT_KEYWORDS`` and accepted wherever an identifier is. The hard ones cannot be names.
* Words that only matter at one place (interval units, ``events``/``manual``/``coalesce`` in an
  eventCache, ``START TRANSACTION``, ``MEMORY``/``LOG`` store kinds) are identifiers checked by the
  rule that uses them (CCL1103), so they stay usable as names everywhere else.
* Statement-level expressions and assignment targets are ``postfix`` expressions (names, calls,
  field and index access). This keeps ``case`` labels of a SWITCH and record-literal brackets from
  colliding with the start of a statement.
* Clauses of CREATE statements are parsed as a list in any order and checked afterwards, which gives
  better messages (CCL1104 duplicate, CCL1105 not allowed here) than a fixed-order grammar would.
* Shift/reduce conflicts: the only ones are resolved by the precedence table (operators, unary minus,
  the dangling ELSE, which binds to the nearest IF as in C). PLY reports none; the test suite checks
  that the table builds with zero shift/reduce and zero reduce/reduce conflicts.
"""
from __future__ import annotations

import contextlib
import copy
import importlib
import os
import shutil
import sys
import tempfile
from decimal import Decimal
from typing import Optional, Union

import ply.yacc as yacc
from ply.lex import LexToken

from . import nodes as n
from ..diagnostics import Diagnostic, article, sort_key
from ..splash.functions_data import DATE_PART_FUNCTIONS, DATE_PARTS
from .lexer import KEYWORDS, PUNCTUATION, LineIndex, make_lexer, tokens
from .preprocess import preprocess

# Keywords that may also be used as names (columns, elements, aliases, variables).
SOFT_KEYWORDS = """
    KEY DEDUCED FILTER ORDER TYPE HASH ROUNDROBIN SLACK PER ROW ROWS INHERITS REFERENCES STORES
    PARAMETERS MODULE ADAPTER LOAD ERROR SPLITTER FLEX REFERENCE IMPORT ATTACH DELTA
    ASC DESC TO PARTITIONS PROPERTIES OUT IS LAST AGES SET
""".split()

INTERVAL_UNITS = {
    "day": "day", "days": "day",
    "hour": "hour", "hours": "hour",
    "minute": "minute", "minutes": "minute", "min": "minute", "mins": "minute",
    "second": "second", "seconds": "second", "sec": "second", "secs": "second",
    "millisecond": "millisecond", "milliseconds": "millisecond", "msec": "millisecond",
    "msecs": "millisecond", "ms": "millisecond",
    "microsecond": "microsecond", "microseconds": "microsecond", "usec": "microsecond",
    "usecs": "microsecond",
}

_CLAUSE_TITLES = {
    "schema": "SCHEMA", "primary_key": "PRIMARY KEY", "keep": "KEEP", "store": "STORE",
    "autogenerate": "AUTOGENERATE", "where": "WHERE", "declare": "DECLARE", "partition": "PARTITION",
    "properties": "PROPERTIES", "aging": "AGES",
}


class _Clause:
    """A clause of a CREATE statement before it is attached to its statement."""

    __slots__ = ("kind", "value", "span")

    def __init__(self, kind: str, value: object, span: n.Span) -> None:
        self.kind, self.value, self.span = kind, value, span


class CCLParser:
    """Holds the PLY tables; ``parse`` may be called many times (not concurrently)."""

    # MEQ is an '=' inside a MATCHING clause's ON, where ESP allows chains (a = b = c); the lexer
    # never makes it: parse() retypes EQ tokens while the parser is in that ON (see _matching_on).
    tokens = tokens + ("MEQ",)
    start = "project"

    precedence = (
        ("nonassoc", "IFX"),
        ("nonassoc", "ELSE"),
        ("left", "OR"),
        ("left", "AND"),
        ("right", "NOT"),
        ("left", "MEQ"),
        ("nonassoc", "EQ", "NE", "LT", "LE", "GT", "GE", "IN", "LIKE", "IS"),
        ("left", "PLUS", "MINUS"),
        ("left", "TIMES", "DIVIDE", "MOD"),
        ("right", "POW"),
        ("right", "UMINUS"),
    )

    def __init__(self, **yacc_args) -> None:
        args = dict(debug=False, optimize=False, tabmodule=_TABMODULE, errorlog=yacc.NullLogger())
        args.update(yacc_args)
        self._parser = _yacc(self, args)
        self.diagnostics: list[Diagnostic] = []
        self.index: Optional[LineIndex] = None
        self._statements: list = []
        self._text = ""
        self._matching_on = False  # inside MATCHING ... ON: '=' is MEQ
        # id(an unparenthesized `a = b` of a MATCHING ON) -> (that node, its last operand)
        self._chain_ends: dict[int, tuple[n.Node, n.Node]] = {}

    # ------------------------------------------------------------------------------------------
    # Entry point
    # ------------------------------------------------------------------------------------------

    def parse(self, text: str, file: str) -> tuple[n.Project, list[Diagnostic]]:
        """Parse one file's text; returns the project (possibly partial) and its diagnostics."""
        self.diagnostics = []
        text = preprocess(text, lambda code, line, col, message: self.diagnostics.append(
            Diagnostic(code, message, n.Span(file, line, col))))
        self.index = LineIndex(text, file)
        self._statements = []
        self._text = text
        lexer = make_lexer(self._lex_error)
        self._matching_on = False
        self._chain_ends = {}
        lexer.eq_type = lambda: "MEQ" if self._matching_on else "EQ"
        with n.gc_paused():
            # On an unrecoverable error PLY returns None; the statements list built so far is kept.
            self._parser.parse(text, lexer=lexer)
        project = n.Project(self._statements, span=self.index.span(0))
        diagnostics = sorted(self.diagnostics, key=sort_key)
        # The parser is shared by the process: it keeps no reference to this parse's tree, text or
        # stacks, so the tree is freed with its project (not held until the next parse or the exit).
        self.diagnostics, self._statements, self._text, self.index = [], [], "", None
        self._chain_ends = {}
        self._parser.symstack = self._parser.statestack = []
        return project, diagnostics

    # ------------------------------------------------------------------------------------------
    # Helpers
    # ------------------------------------------------------------------------------------------

    def _lex_error(self, code: str, pos: int, message: str) -> None:
        self.diagnostics.append(Diagnostic(code, message, self.index.span(pos)))

    def _error(self, code: str, span: n.Span, message: str) -> None:
        self.diagnostics.append(Diagnostic(code, message, span))

    def _at(self, p, i: int = 1) -> n.Span:
        """The span of the i-th symbol of a production (or of the first later one that has a span)."""
        for sym in p.slice[i:]:  # (not len(p): PLY's p has a Python-level __len__)
            if isinstance(sym, LexToken):
                return self.index.span(sym.lexpos)
            v = sym.value
            if isinstance(v, list):
                v = v[0] if v else None
            if isinstance(v, (n.Node, _Clause)):
                return v.span
        return self.index.span(len(self._text))

    def _ident(self, p, i: int) -> n.Ident:
        return n.Ident(p[i], span=self._at(p, i))

    # ------------------------------------------------------------------------------------------
    # Error handling
    # ------------------------------------------------------------------------------------------

    def p_error(self, tok) -> None:
        self._matching_on = False
        self._chain_ends.clear()
        names = self._expected_tokens()
        expected = describe_expected(set(names))
        hint = f"; expected {expected}" if expected else ""
        ends_statement = tok is not None and tok.type in _STATEMENT_START and "SEMI" in names
        if ends_statement:
            hint = "; expected ';' to end the statement before it"
        method = self._method_read_as_input()
        if tok is not None and method:
            hint = (f"; PARTITION BY names the input before the method: PARTITION BY <input> "
                    f"{method}..., or PARTITION {method}... for the element's only input")
        # only a name fits here (not an expression, where a keyword may well be a mistake)
        if (tok is not None and "ID" in names and "INTEGER" not in names and not ends_statement
                and tok.type in KEYWORDS.values()):
            hint += f" ('{tok.value}' is a reserved word and cannot be a name)"
        if tok is None:
            self._error("CCL1102", self.index.span(len(self._text.rstrip())),
                        f"unexpected end of file{hint}")
        else:
            self._error("CCL1101", self.index.span(tok.lexpos),
                        f"syntax error at {describe_token(tok)}{hint}")

    def _method_read_as_input(self) -> str:
        """``HASH`` or ``ROUNDROBIN`` when the parser stopped just after reading one as the input
        name of ``PARTITION BY`` (``PARTITION BY HASH(a)``), else ''."""
        try:
            stack = self._parser.symstack
            if stack[-2].type == "BY" and stack[-1].type == "ident" and stack[-3].type == "PARTITION":
                name = stack[-1].value.name.upper()
                return name if name in ("HASH", "ROUNDROBIN") else ""
        except (AttributeError, IndexError):
            pass
        return ""

    def _expected_tokens(self) -> list[str]:
        """The tokens the parser could have accepted where it stopped."""
        try:
            state = self._parser.statestack[-1]
            return [t for t in self._parser.action[state] if t not in ("error", "$end")]
        except (AttributeError, IndexError, KeyError):
            return []

    # ------------------------------------------------------------------------------------------
    # Project and statements
    # ------------------------------------------------------------------------------------------

    def p_project(self, p):
        "project : statements"
        p[0] = p[1]

    def p_statements_first(self, p):
        "statements : "
        p[0] = self._statements

    def p_statements_more(self, p):
        "statements : statements statement"
        if p[2] is not None:
            p[1].append(p[2])
        p[0] = p[1]

    def p_statement(self, p):
        """statement : create_schema SEMI
                     | create_element SEMI
                     | create_error_stream SEMI
                     | create_splitter SEMI
                     | create_reference SEMI
                     | create_store SEMI
                     | create_library SEMI
                     | attach_adapter SEMI
                     | adapter_start SEMI
                     | import_stmt SEMI
                     | global_declare SEMI
                     | create_flex SEMI
                     | create_module SEMI
                     | load_module SEMI"""
        p[0] = p[1]

    def p_statement_empty(self, p):
        "statement : SEMI"
        p[0] = None

    def p_statement_error(self, p):
        "statement : error SEMI"
        p[0] = None

    # --- CREATE SCHEMA -----------------------------------------------------------------------

    def p_create_schema(self, p):
        "create_schema : CREATE SCHEMA ident inherits_opt columns_opt"
        p[0] = n.CreateSchema(p[3], p[4], p[5], span=self._at(p))

    def p_inherits_opt(self, p):
        """inherits_opt : INHERITS ident_list
                        | INHERITS FROM ident_list
                        | """
        p[0] = p[len(p) - 1] if len(p) > 1 else []

    def p_columns_opt(self, p):
        """columns_opt : LPAREN column_defs RPAREN
                       | """
        p[0] = p[2] if len(p) > 1 else []

    def p_column_defs(self, p):
        """column_defs : column_def
                       | column_defs COMMA column_def"""
        p[0] = _items(p)

    def p_column_def(self, p):
        "column_def : column_name type_spec"
        p[0] = n.Column(p[1], p[2], span=p[1].span)

    def p_column_name(self, p):
        """column_name : ident
                       | BASETYPE"""
        p[0] = p[1] if isinstance(p[1], n.Ident) else self._ident(p, 1)

    # --- CREATE [role] STREAM | WINDOW | DELTA STREAM ------------------------------------------

    def p_create_element(self, p):
        "create_element : CREATE role_opt element_kind ident clauses as_query_opt"
        role, kind, name, clauses, query = p[2], p[3], p[4], p[5], p[6]
        node = n.CreateElement(role, kind, name, span=self._at(p))
        allowed = {"schema", "primary_key", "store", "keep", "declare", "partition", "aging"}
        if role == "input":
            allowed |= {"autogenerate", "where"}
            if query is not None:
                self._error("CCL1105", query.span,
                            f"an input {kind} cannot have AS SELECT: it is fed by adapters or publishers")
        elif query is None:
            self._error("CCL1105", name.span,
                        f"a derived {kind} needs AS SELECT ... (only INPUT elements have no query)")
        self._attach_clauses(node, clauses, allowed, f"{role or 'derived'} {kind}")
        node.query = query
        _keyed_stream(node)
        p[0] = node

    def p_role_opt(self, p):
        """role_opt : INPUT
                    | OUTPUT
                    | LOCAL
                    | """
        p[0] = p[1].lower() if len(p) > 1 else None

    def p_element_kind(self, p):
        """element_kind : STREAM
                        | WINDOW
                        | DELTA STREAM"""
        p[0] = "delta stream" if len(p) == 3 else p[1].lower()

    def p_as_query_opt(self, p):
        """as_query_opt : AS query
                        | """
        p[0] = p[2] if len(p) > 1 else None

    def _attach_clauses(self, node: n.Node, clauses: list[_Clause], allowed: set[str], what: str) -> None:
        seen: dict[str, _Clause] = {}
        for clause in clauses:
            title = _CLAUSE_TITLES[clause.kind]
            if clause.kind not in allowed:
                self._error("CCL1105", clause.span, f"{title} is not allowed on {article(what.lower())} {what}")
                continue
            if clause.kind in seen:
                self._error("CCL1104", clause.span, f"{title} is given twice (first at line "
                                                    f"{seen[clause.kind].span.line})")
                continue
            seen[clause.kind] = clause
            setattr(node, clause.kind, clause.value)

    # --- clauses ---------------------------------------------------------------------------------

    def p_clauses(self, p):
        """clauses : clauses clause
                   | """
        p[0] = _items(p)

    def p_clause_schema(self, p):
        "clause : SCHEMA schema_body"
        p[0] = _Clause("schema", p[2], self._at(p))

    def p_schema_body_name(self, p):
        "schema_body : ident"
        p[0] = n.SchemaName(p[1], span=p[1].span)

    def p_schema_body_inline(self, p):
        "schema_body : LPAREN column_defs RPAREN"
        p[0] = n.InlineSchema(p[2], span=self._at(p))

    def p_clause_primary_key(self, p):
        """clause : PRIMARY KEY LPAREN name_list RPAREN
                  | PRIMARY KEY DEDUCED"""
        span = self._at(p)
        pk = n.PrimaryKey(p[4], span=span) if len(p) == 6 else n.PrimaryKey([], True, span=span)
        p[0] = _Clause("primary_key", pk, span)

    def p_clause_store(self, p):
        "clause : STORE ident"
        p[0] = _Clause("store", n.StoreRef(p[2], span=p[2].span), self._at(p))

    def p_clause_keep(self, p):
        "clause : keep_clause"
        p[0] = _Clause("keep", p[1], p[1].span)

    def p_clause_autogenerate(self, p):
        """clause : AUTOGENERATE LPAREN name_list RPAREN
                  | AUTOGENERATE LPAREN name_list RPAREN FROM const_value"""
        start = p[6] if len(p) == 7 else None
        p[0] = _Clause("autogenerate", n.Autogenerate(p[3], start, span=self._at(p)), self._at(p))

    def p_clause_aging(self, p):
        """clause : AGES EVERY interval SET column_name aging_times aging_start"""
        aging = n.Aging(p[3], p[5], p[6], p[7], span=self._at(p))
        p[0] = _Clause("aging", aging, self._at(p))

    def p_aging_times(self, p):
        """aging_times : INTEGER ID
                       | """
        if len(p) == 1:
            p[0] = None
            return
        if p[2].lower() != "times":
            self._error("CCL1103", self._at(p, 2), f"{p[2]!r} is not expected here (n TIMES)")
        p[0] = p[1][0]

    def p_aging_start(self, p):
        """aging_start : FROM column_name
                       | """
        p[0] = p[2] if len(p) == 3 else None

    def p_clause_where(self, p):
        "clause : WHERE expr"
        p[0] = _Clause("where", n.InputWhere(p[2], span=self._at(p)), self._at(p))

    def p_clause_declare(self, p):
        "clause : local_declare"
        p[0] = _Clause("declare", p[1], p[1].span)

    def p_local_declare(self, p):
        "local_declare : DECLARE declare_items END"
        p[0] = n.DeclareBlock(p[2], span=self._at(p))

    def p_clause_partition(self, p):
        "clause : partition_clause"
        p[0] = _Clause("partition", p[1], p[1].span)

    def p_clause_properties(self, p):
        "clause : PROPERTIES properties"
        p[0] = _Clause("properties", p[2], self._at(p))

    def p_properties(self, p):
        """properties : property
                      | properties COMMA property"""
        p[0] = _items(p)

    def p_property(self, p):
        "property : ident EQ const_value"
        p[0] = n.Property(p[1], p[3], span=p[1].span)

    def p_const_value(self, p):
        """const_value : literal
                       | var"""
        p[0] = p[1]

    def p_const_value_negative(self, p):
        """const_value : MINUS INTEGER
                       | MINUS FLOAT
                       | MINUS MONEY"""
        p[0] = n.Unary("-", self._number(p, 2), span=self._at(p))

    # --- KEEP --------------------------------------------------------------------------------

    def p_keep_clause(self, p):
        "keep_clause : KEEP keep_spec"
        p[2].span = self._at(p)
        p[0] = p[2]

    def p_keep_rows(self, p):
        """keep_spec : expr ROWS slack_opt per_opt
                     | INTEGER ROW slack_opt per_opt"""
        # `n ROW` only for a number: `KEEP LAST ROW` is the LAST policy, not a parameter Last
        p[0] = n.Keep("rows", _keep_count(p[1]), None, p[3], p[4])

    def p_keep_every_rows(self, p):
        """keep_spec : EVERY expr ROWS per_opt
                     | EVERY INTEGER ROW per_opt"""
        p[0] = n.Keep("every_rows", _keep_count(p[2]), None, None, p[4])

    def p_keep_time(self, p):
        "keep_spec : interval per_opt"
        p[0] = n.Keep("time", None, p[1], None, p[2])

    def p_keep_every_time(self, p):
        "keep_spec : EVERY interval per_opt"
        p[0] = n.Keep("every_time", None, p[2], None, p[3])

    def p_keep_all(self, p):
        """keep_spec : ALL
                     | ALL ROWS"""
        p[0] = n.Keep("all")

    def p_keep_last(self, p):
        """keep_spec : LAST per_opt
                     | LAST ROW per_opt"""
        p[0] = n.Keep("last", None, None, None, p[len(p) - 1])

    def p_slack_opt(self, p):
        """slack_opt : SLACK expr
                     | """
        p[0] = _keep_count(p[2]) if len(p) > 1 else None  # ESP: "an integer value or an expression"

    def p_per_opt(self, p):
        """per_opt : PER LPAREN name_list RPAREN
                   | """
        p[0] = p[3] if len(p) > 1 else []

    # --- intervals -----------------------------------------------------------------------------

    def p_interval_bare(self, p):
        "interval : INTEGER"
        p[0] = n.Interval([n.IntervalPart(p[1][0], "microsecond", span=self._at(p))], span=self._at(p))

    def p_interval_parts(self, p):
        "interval : interval_parts"
        p[0] = self._interval(p[1])

    def _interval(self, raw: list[tuple[int, str, n.Span, n.Span]]) -> n.Interval:
        """An Interval from (amount, unit word, amount span, word span) parts."""
        parts = []
        for amount, word, span, word_span in raw:
            unit = INTERVAL_UNITS.get(word.lower())
            if unit is None:
                self._error("CCL1103", word_span, f"{word!r} is not an interval unit (use DAYS, HOURS, "
                                             "MINUTES, SECONDS, MILLISECONDS or MICROSECONDS)")
                unit = "microsecond"
            parts.append(n.IntervalPart(amount, unit, span=span))
        return n.Interval(parts, span=parts[0].span)

    def p_interval_parts_list(self, p):
        """interval_parts : INTEGER ID
                          | interval_parts INTEGER ID"""
        if len(p) == 3:
            p[0] = [(p[1][0], p[2], self._at(p, 1), self._at(p, 2))]
        else:
            p[0] = p[1] + [(p[2][0], p[3], self._at(p, 2), self._at(p, 3))]

    # --- PARTITION -----------------------------------------------------------------------------

    def p_partition_clause(self, p):
        "partition_clause : PARTITION partition_specs PARTITIONS partition_count"
        p[0] = n.Partition(p[2], p[4], span=self._at(p))

    def p_partition_specs(self, p):
        """partition_specs : partition_spec
                           | partition_specs COMMA partition_spec"""
        p[0] = _items(p)

    def p_partition_spec(self, p):
        """partition_spec : BY ident partition_method
                          | partition_method"""
        source, (method, cols, body, method_at) = (p[2], p[3]) if len(p) == 4 else (None, p[1])
        p[0] = n.PartitionSpec(source, method, cols, body, span=self._at(p) if source else method_at)

    def p_partition_method(self, p):
        """partition_method : HASH LPAREN name_list RPAREN
                            | ROUNDROBIN
                            | block"""
        at = self._at(p)
        if len(p) == 5:
            p[0] = ("hash", p[3], None, at)
        elif isinstance(p[1], n.Block):
            p[0] = ("custom", [], p[1], at)
        else:
            p[0] = ("roundrobin", [], None, at)

    def p_partition_count(self, p):
        """partition_count : INTEGER
                           | ident"""
        p[0] = p[1][0] if isinstance(p[1], tuple) else p[1]

    # --- queries -------------------------------------------------------------------------------

    def p_query_select(self, p):
        "query : select"
        p[0] = p[1]

    def p_query_union(self, p):
        "query : query UNION select"
        if isinstance(p[1], n.Union_):
            p[1].selects.append(p[3])
            p[0] = p[1]
        else:
            p[0] = n.Union_([p[1], p[3]], span=p[1].span)

    def p_select(self, p):
        "select : SELECT select_items FROM from_list select_clauses"
        node = n.Select(p[2], p[4], span=self._at(p))
        seen: dict[str, n.Span] = {}
        for kind, value, span in p[5]:
            if kind in seen:
                self._error("CCL1104", span, f"{_SELECT_TITLES[kind]} is given twice in one SELECT "
                                             f"(first at line {seen[kind].line})")
                continue
            seen[kind] = span
            setattr(node, kind, value)
        p[0] = node

    def p_select_items(self, p):
        """select_items : select_item
                        | select_items COMMA select_item"""
        p[0] = _items(p)

    def p_select_item_expr(self, p):
        """select_item : expr
                       | expr column_name
                       | expr AS column_name"""
        p[0] = n.SelectItem(p[1], p[len(p) - 1] if len(p) > 2 else None, span=p[1].span)

    def p_select_item_star(self, p):
        "select_item : TIMES"
        p[0] = n.Star(span=self._at(p))

    def p_select_item_qualified_star(self, p):
        "select_item : postfix DOT TIMES"
        if not isinstance(p[1], n.Var):
            self._error("CCL1101", self._at(p, 2), "syntax error: '.*' must follow a source name")
            p[0] = n.Star(span=p[1].span)
        else:
            p[0] = n.Star(p[1].name, span=p[1].span)

    def p_from_list(self, p):
        """from_list : from_item
                     | from_list COMMA from_item"""
        p[0] = _items(p)

    def p_from_item(self, p):
        "from_item : from_source"
        p[0] = p[1]

    def p_from_item_join(self, p):
        "from_item : from_item join_kind JOIN from_source ON expr"
        p[0] = n.Join(p[2], p[1], p[4], p[6], span=p[1].span)

    def p_join_kind(self, p):
        """join_kind : INNER
                     | LEFT outer_opt
                     | RIGHT outer_opt
                     | FULL outer_opt
                     | """
        p[0] = p[1].lower() if len(p) > 1 else "inner"

    def p_outer_opt(self, p):
        """outer_opt : OUTER
                     | """

    def p_from_source(self, p):
        """from_source : ident alias_opt
                       | ident alias_opt keep_clause"""
        p[0] = n.FromSource(p[1], p[2], p[3] if len(p) == 4 else None, span=p[1].span)

    def p_alias_opt(self, p):
        """alias_opt : ident
                     | AS ident
                     | """
        p[0] = p[len(p) - 1] if len(p) > 1 else None

    def p_select_clauses(self, p):
        """select_clauses : select_clauses select_clause
                          | """
        p[0] = _items(p)

    def p_select_clause_matching(self, p):
        """select_clause : MATCHING LBRACKET interval COLON pattern RBRACKET
                         | MATCHING LBRACKET interval COLON pattern RBRACKET matching_on expr"""
        on = p[8] if len(p) == 9 else None
        self._matching_on = False
        self._chain_ends.clear()
        p[0] = ("matching", n.Matching(p[3], p[5], on, span=self._at(p)), self._at(p))

    def p_matching_on(self, p):
        "matching_on : ON"
        # Reduced as soon as ON is shifted: the '=' tokens of the condition then come as MEQ.
        self._matching_on = True

    def p_expr_matching_eq(self, p):
        "expr : expr MEQ expr"
        # ESP's MATCHING ON takes `T1.a = T2.a = T3.a`: read as `T1.a = T2.a AND T2.a = T3.a`.
        left, right = p[1], p[3]
        chain, last = self._chain_ends.pop(id(left), (None, None))
        if chain is not left:
            node = n.Binary("=", left, right, span=left.span)
        else:
            step = n.Binary("=", copy.deepcopy(last), right, span=last.span)
            node = n.Binary("and", left, step, span=left.span)
        self._chain_ends[id(node)] = (node, right)
        p[0] = node

    def p_select_clause_where(self, p):
        "select_clause : WHERE expr"
        p[0] = ("where", p[2], self._at(p))

    def p_select_clause_group_filter(self, p):
        "select_clause : GROUP FILTER expr"
        p[0] = ("group_filter", p[3], self._at(p))

    def p_select_clause_group_by(self, p):
        "select_clause : GROUP BY expr_list"
        p[0] = ("group_by", p[3], self._at(p))

    def p_select_clause_group_order(self, p):
        "select_clause : GROUP ORDER BY order_items"
        p[0] = ("group_order_by", p[4], self._at(p))

    def p_select_clause_having(self, p):
        "select_clause : HAVING expr"
        p[0] = ("having", p[2], self._at(p))

    def p_order_items(self, p):
        """order_items : order_item
                       | order_items COMMA order_item"""
        p[0] = _items(p)

    def p_order_item(self, p):
        """order_item : expr
                      | expr ASC
                      | expr DESC"""
        desc = None if len(p) == 2 else p[2].lower() == "desc"
        p[0] = n.OrderItem(p[1], desc, span=p[1].span)

    # MATCHING patterns: ',' (followed by) binds loosest, then '||', then '&&', then '!'.
    def p_pattern(self, p):
        """pattern : pattern_or
                   | pattern COMMA pattern_or"""
        p[0] = p[1] if len(p) == 2 else n.PatternOp(",", p[1], p[3], span=p[1].span)

    def p_pattern_or(self, p):
        """pattern_or : pattern_and
                      | pattern_or OROR pattern_and"""
        p[0] = p[1] if len(p) == 2 else n.PatternOp("||", p[1], p[3], span=p[1].span)

    def p_pattern_and(self, p):
        """pattern_and : pattern_unary
                       | pattern_and ANDAND pattern_unary"""
        p[0] = p[1] if len(p) == 2 else n.PatternOp("&&", p[1], p[3], span=p[1].span)

    def p_pattern_unary(self, p):
        """pattern_unary : ident
                         | BANG pattern_unary
                         | LPAREN pattern RPAREN"""
        if len(p) == 2:
            p[0] = n.PatternRef(p[1], span=p[1].span)
        elif len(p) == 3:
            p[0] = n.PatternNot(p[2], span=self._at(p))
        else:
            p[0] = p[2]

    # --- other CREATE statements -------------------------------------------------------------

    def p_create_error_stream(self, p):
        "create_error_stream : CREATE role_opt ERROR STREAM ident ON ident_list clauses"
        node = n.CreateErrorStream(p[2], p[5], p[7], span=self._at(p))
        # PARTITION parses here so that analysis can say why it is wrong for an error stream.
        self._attach_clauses(node, p[8], {"partition"}, "error stream")
        p[0] = node

    def p_create_splitter(self, p):
        "create_splitter : CREATE role_opt SPLITTER ident clauses AS split_branches split_else select"
        node = n.CreateSplitter(p[2], p[4], p[7], p[8], p[9], span=self._at(p))
        self._attach_clauses(node, p[5], {"partition"}, "splitter")
        p[0] = node

    def p_split_branches(self, p):
        """split_branches : split_branch
                          | split_branches split_branch"""
        p[0] = _items(p)

    def p_split_branch(self, p):
        "split_branch : WHEN expr THEN ident_list"
        p[0] = n.SplitBranch(p[2], p[4], span=self._at(p))

    def p_split_else(self, p):
        """split_else : ELSE ident_list
                      | """
        p[0] = p[2] if len(p) > 1 else []

    def p_create_reference(self, p):
        "create_reference : CREATE role_opt REFERENCE ident clauses"
        node = n.CreateReference(p[2], p[4], None, None, [], span=self._at(p))
        self._attach_clauses(node, p[5], {"schema", "primary_key", "properties", "partition"},
                             "reference")
        p[0] = node

    def p_create_store(self, p):
        """create_store : CREATE ID STORE ident clauses
                        | CREATE DEFAULT ID STORE ident clauses"""
        is_default = len(p) == 7
        kind_at = 3 if is_default else 2
        kind = p[kind_at].lower()
        if kind not in ("memory", "log"):
            self._error("CCL1103", self._at(p, kind_at),
                        f"{p[kind_at]!r} is not a store kind (use MEMORY STORE or LOG STORE)")
        node = n.CreateStore(kind, is_default, p[kind_at + 2], [], span=self._at(p))
        self._attach_clauses(node, p[kind_at + 3], {"properties"}, "store")
        p[0] = node

    def p_create_library(self, p):
        "create_library : CREATE ID ident ID ident FROM STRING LPAREN library_functions RPAREN"
        for at, want in ((2, "LIBRARY"), (4, "LANGUAGE")):
            if p[at].upper() != want:
                self._error("CCL1103", self._at(p, at), f"{p[at]!r} is not expected here "
                            "(CREATE LIBRARY name LANGUAGE C|JAVA FROM '...' (functions))")
        language = p[5].name.lower()
        if language not in ("c", "java"):
            self._error("CCL1103", p[5].span, f"{p[5].name!r} is not a library language (C or JAVA)")
        p[0] = n.CreateLibrary(p[3], language, p[7], p[9], span=self._at(p))

    def p_library_functions(self, p):
        """library_functions : library_function
                             | library_functions library_function"""
        p[0] = _items(p)

    def p_library_function(self, p):
        """library_function : type_spec ident LPAREN RPAREN SEMI
                            | type_spec ident LPAREN library_params RPAREN SEMI"""
        p[0] = n.LibraryFunction(p[1], p[2], p[4] if len(p) == 7 else [], span=p[1].span)

    def p_library_params(self, p):
        """library_params : type_spec
                          | library_params COMMA type_spec"""
        p[0] = _items(p)

    def p_attach_adapter(self, p):
        """attach_adapter : ATTACH INPUT ADAPTER ident TYPE ident TO ident group_opt clauses
                          | ATTACH OUTPUT ADAPTER ident TYPE ident TO ident group_opt clauses"""
        node = n.AttachAdapter(p[2].lower(), p[4], p[6], p[8], p[9], [], span=self._at(p))
        self._attach_clauses(node, p[10], {"properties", "partition"}, "adapter")
        p[0] = node

    def p_adapter_start(self, p):
        """adapter_start : ADAPTER ID ID ident_list
                         | ADAPTER ID ID ident_list ID"""
        words = [p[2], p[3]] + ([p[5]] if len(p) == 6 else [])
        expected = ["start", "groups", "nostart"][: len(words)]
        for k, (word, want) in enumerate(zip(words, expected)):
            if word.lower() != want:
                at = self._at(p, 5 if k == 2 else k + 2)
                self._error("CCL1103", at, f"{word!r} is not expected here "
                                           "(ADAPTER START GROUPS g1, g2 [NOSTART])")
        p[0] = n.AdapterStart(p[4], len(p) == 6, span=self._at(p))

    def p_group_opt(self, p):
        """group_opt : GROUP ident
                     | """
        p[0] = p[2] if len(p) > 1 else None

    def p_import(self, p):
        "import_stmt : IMPORT STRING"
        p[0] = n.Import(p[2], span=self._at(p))

    def p_global_declare(self, p):
        "global_declare : DECLARE declare_items END"
        p[0] = n.GlobalDeclare(n.DeclareBlock(p[2], span=self._at(p)), span=self._at(p))

    # --- CREATE FLEX ---------------------------------------------------------------------------

    def p_create_flex(self, p):
        """create_flex : CREATE FLEX ident IN flex_inputs OUT role_opt element_kind ident clauses BEGIN flex_declare flex_handlers END"""
        out = n.FlexOutput(p[7], p[8], p[9], span=self._at(p, 7))
        holder = n.CreateElement(None, "stream", p[9])
        self._attach_clauses(holder, p[10], {"schema", "primary_key", "keep", "store", "partition"},
                             "Flex output")
        out.schema, out.primary_key, out.keep, out.store = (
            holder.schema, holder.primary_key, holder.keep, holder.store)
        _keyed_stream(out)
        inputs = [name for name, _ in p[5]]
        keeps = [keep for _, keep in p[5]]
        p[0] = n.CreateFlex(p[3], inputs, out, holder.partition, p[12], p[13],
                            keeps if any(keeps) else [], span=self._at(p))

    def p_flex_inputs(self, p):
        """flex_inputs : flex_input
                       | flex_inputs COMMA flex_input"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_flex_input(self, p):
        """flex_input : ident
                      | ident keep_clause"""
        p[0] = (p[1], p[2] if len(p) == 3 else None)

    def p_flex_declare(self, p):
        """flex_declare : DECLARE declare_items END SEMI
                        | DECLARE declare_items END
                        | DECLARE declare_items
                        | """
        p[0] = n.DeclareBlock(p[2], span=self._at(p)) if len(p) > 1 else None

    def p_flex_handlers(self, p):
        """flex_handlers : flex_handler
                         | flex_handlers flex_handler"""
        p[0] = _items(p)

    def p_flex_handler_on(self, p):
        """flex_handler : ON ident block semi_opt"""
        p[0] = n.OnHandler("row", p[2], p[3], span=self._at(p))

    def p_flex_handler_transaction(self, p):
        """flex_handler : ON ID ID block semi_opt
                        | ON END ID block semi_opt"""
        first, second = p[2].lower(), p[3].lower()
        if first not in ("start", "end") or second != "transaction":
            self._error("CCL1103", self._at(p, 2), f"'ON {p[2]} {p[3]}' is not a handler "
                                                   "(use ON source, ON START TRANSACTION or ON END TRANSACTION)")
        event = "start_transaction" if first == "start" else "end_transaction"
        p[0] = n.OnHandler(event, None, p[4], span=self._at(p))

    def p_flex_handler_every(self, p):
        "flex_handler : EVERY interval block semi_opt"
        p[0] = n.EveryHandler(p[2], p[3], span=self._at(p))

    def p_semi_opt(self, p):
        """semi_opt : SEMI
                    | """

    # --- modules ---------------------------------------------------------------------------------

    def p_create_module(self, p):
        "create_module : CREATE MODULE ident module_clauses BEGIN statements_inner END"
        lists = {"in": [], "out": [], "references": [], "stores": []}
        for kind, idents, span in p[4]:
            lists[kind].extend(idents)
        p[0] = n.CreateModule(p[3], lists["in"], lists["out"], lists["references"], lists["stores"],
                              p[6], span=self._at(p))

    def p_statements_inner(self, p):
        """statements_inner : statements_inner statement
                            | """
        if len(p) == 1:
            p[0] = []
        elif isinstance(p[2], list):  # PARAMETER t a, b := 1;
            p[0] = p[1] + p[2]
        else:
            p[0] = p[1] + ([p[2]] if p[2] is not None else [])

    def p_module_clauses(self, p):
        """module_clauses : module_clauses module_clause
                          | """
        p[0] = _items(p)

    def p_module_clause(self, p):
        """module_clause : IN ident_list
                         | OUT ident_list
                         | REFERENCES ident_list
                         | STORES ident_list"""
        p[0] = (p[1].lower(), p[2], self._at(p))

    def p_load_module(self, p):
        "load_module : LOAD MODULE ident AS ident load_clauses"
        node = n.LoadModule(p[3], p[5], [], [], [], [], span=self._at(p))
        first_at: dict[str, n.Span] = {}
        for kind, value, span, keyword in p[6]:
            if kind in first_at:
                self._error("CCL1104", span, f"{keyword} is given twice (first at line "
                                             f"{first_at[kind].line})")
                continue
            first_at[kind] = span
            node.clauses.append(kind)
            if kind == "partition":
                node.partition = value
            else:
                setattr(node, kind, value)
        p[0] = node

    def p_load_clauses(self, p):
        """load_clauses : load_clauses load_clause
                        | """
        p[0] = _items(p)

    def p_load_clause(self, p):
        """load_clause : IN bindings
                       | OUT bindings
                       | PARAMETERS bindings
                       | STORES bindings
                       | REFERENCES bindings"""
        kind = {"in": "inputs", "out": "outputs"}.get(p[1].lower(), p[1].lower())
        if kind != "parameters":
            for b in p[2]:
                if not isinstance(b.value, n.Var):
                    self._error("CCL1101", b.value.span, f"syntax error: {p[1].upper()} binds names, "
                                                         "not values")
                else:
                    b.value = b.value.name
        p[0] = (kind, p[2], self._at(p), p[1].upper())

    def p_load_clause_partition(self, p):
        "load_clause : partition_clause"
        p[0] = ("partition", p[1], p[1].span, "PARTITION")

    def p_bindings(self, p):
        """bindings : binding
                    | bindings COMMA binding"""
        p[0] = _items(p)

    def p_binding(self, p):
        "binding : ident EQ const_value"
        p[0] = n.Binding(p[1], p[3], span=p[1].span)

    # ------------------------------------------------------------------------------------------
    # DECLARE blocks and SPLASH
    # ------------------------------------------------------------------------------------------

    def p_declare_items(self, p):
        """declare_items : declare_items declare_item
                         | """
        if len(p) == 1:
            p[0] = []
        elif isinstance(p[2], list):  # PARAMETER t a, b := 1;
            p[0] = p[1] + p[2]
        else:
            p[0] = p[1] + ([p[2]] if p[2] is not None else [])

    def p_declare_item(self, p):
        """declare_item : var_decl
                        | func_def
                        | typedef"""
        p[0] = p[1]

    def p_declare_item_parameter(self, p):
        "declare_item : PARAMETER type_spec param_declarators SEMI"
        # ESP: parameter t name1 [:= e] [, name2 [:= e] ...]; one ParamDecl each, the first
        # placed at PARAMETER, the others at their names.
        p[0] = [n.ParamDecl(p[2], name, default, span=self._at(p) if i == 0 else name.span)
                for i, (name, default) in enumerate(p[3])]

    def p_param_declarators(self, p):
        """param_declarators : param_declarator
                             | param_declarators COMMA param_declarator"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_param_declarator(self, p):
        """param_declarator : ident
                            | ident ASSIGN expr"""
        p[0] = (p[1], p[3] if len(p) == 4 else None)

    def p_declare_item_error(self, p):
        "declare_item : error SEMI"
        p[0] = None

    def p_typedef(self, p):
        "typedef : TYPEDEF type_spec ident SEMI"
        p[0] = n.TypeDef(p[2], p[3], span=self._at(p))

    def p_func_def(self, p):
        """func_def : type_spec ident LPAREN params RPAREN block
                    | type_spec ident LPAREN RPAREN block"""
        params = p[4] if len(p) == 7 else []
        p[0] = n.FuncDef(p[1], p[2], params, p[len(p) - 1], span=p[1].span)

    def p_params(self, p):
        """params : param
                  | params COMMA param"""
        p[0] = _items(p)

    def p_param(self, p):
        "param : type_spec ident"
        p[0] = n.Param(p[1], p[2], span=p[1].span)

    def p_var_decl(self, p):
        "var_decl : type_spec declarators SEMI"
        p[0] = n.VarDecl(p[1], p[2], span=p[1].span)

    def p_declarators(self, p):
        """declarators : declarator
                       | declarators COMMA declarator"""
        p[0] = _items(p)

    def p_declarator(self, p):
        """declarator : ident
                      | ident ASSIGN expr"""
        p[0] = n.Declarator(p[1], p[3] if len(p) == 4 else None, span=p[1].span)

    # --- types ---------------------------------------------------------------------------------

    def p_type_spec_base(self, p):
        "type_spec : BASETYPE"
        p[0] = n.NamedType(p[1].lower(), span=self._at(p))

    def p_type_spec_base_args(self, p):
        "type_spec : BASETYPE LPAREN expr_list RPAREN"
        args = []
        for e in p[3]:
            if isinstance(e, n.Literal) and e.kind in ("integer", "long"):
                args.append(e.value)
            else:
                self._error("CCL1101", e.span, f"syntax error: the arguments of {p[1]}(...) must be "
                                               "integer constants")
        p[0] = n.NamedType(p[1].lower(), args, span=self._at(p))

    def p_type_spec_named(self, p):
        "type_spec : ident"
        p[0] = n.NamedType(p[1].name, span=p[1].span)

    def p_type_spec_typeof(self, p):
        "type_spec : TYPEOF LPAREN ident RPAREN"
        p[0] = n.TypeOf(p[3], span=self._at(p))

    def p_type_spec_dict(self, p):
        "type_spec : DICTIONARY LPAREN type_spec COMMA type_spec RPAREN"
        p[0] = n.DictType(p[3], p[5], span=self._at(p))

    def p_type_spec_vector(self, p):
        "type_spec : VECTOR LPAREN type_spec RPAREN"
        p[0] = n.VectorType(p[3], span=self._at(p))

    def p_type_spec_record(self, p):
        """type_spec : LBRACKET record_fields_end RBRACKET
                     | LBRACKET record_fields BAR record_fields_opt RBRACKET
                     | LBRACKET BAR record_fields_end RBRACKET"""
        p[0] = n.RecordType(*_record_parts(p), span=self._at(p))

    def p_record_fields_opt(self, p):
        """record_fields_opt : record_fields_end
                             | """
        p[0] = p[1] if len(p) > 1 else []

    def p_record_fields_end(self, p):
        """record_fields_end : record_fields
                             | record_fields record_field_last
                             | record_field_last"""
        p[0] = _items(p) if len(p) == 3 else ([p[1]] if isinstance(p[1], n.RecordField) else p[1])

    def p_record_field_last(self, p):
        "record_field_last : type_spec ident"
        # ESP lets the last field before ']' go without its ';': [integer k; | float v]
        p[0] = n.RecordField(p[1], p[2], span=p[1].span)

    def p_record_fields(self, p):
        """record_fields : record_field
                         | record_fields record_field"""
        p[0] = _items(p)

    def p_record_field(self, p):
        "record_field : type_spec ident SEMI"
        p[0] = n.RecordField(p[1], p[2], span=p[1].span)

    def p_type_spec_event_cache(self, p):
        """type_spec : EVENTCACHE LPAREN ident cache_keys cache_options RPAREN"""
        p[0] = n.EventCacheType(p[3], p[4], p[5], span=self._at(p))

    def p_cache_keys(self, p):
        """cache_keys : LBRACKET name_list RBRACKET
                      | LBRACKET RBRACKET
                      | """
        p[0] = None if len(p) == 1 else (p[2] if len(p) == 4 else [])

    def p_cache_options(self, p):
        """cache_options : cache_options COMMA cache_option
                         | """
        p[0] = _items(p)

    def p_cache_option_amount(self, p):
        "cache_option : interval_parts"
        parts = p[1]
        amount, word, span, _ = parts[0]
        if len(parts) == 1 and word.lower() in ("event", "events", "row", "rows"):
            p[0] = n.CacheOption("events", count=amount, span=span)
            return
        p[0] = n.CacheOption("interval", interval=self._interval(parts), span=span)

    def p_cache_option_word(self, p):
        """cache_option : ident
                        | ident ASC
                        | ident DESC"""
        word = p[1].name.lower()
        if len(p) == 2 and word in ("manual", "auto", "coalesce"):
            p[0] = n.CacheOption(word, span=p[1].span)
        else:
            desc = len(p) == 3 and p[2].lower() == "desc"
            p[0] = n.CacheOption("order", column=p[1], descending=desc, span=p[1].span)

    # --- SPLASH statements -------------------------------------------------------------------

    def p_block(self, p):
        "block : LBRACE stmts RBRACE"
        p[0] = n.Block(p[2], span=self._at(p))

    def p_stmts(self, p):
        """stmts : stmts stmt
                 | """
        if len(p) == 1:
            p[0] = []
        elif isinstance(p[2], list):  # PARAMETER t a, b := 1;
            p[0] = p[1] + p[2]
        else:
            p[0] = p[1] + ([p[2]] if p[2] is not None else [])

    def p_stmt_simple(self, p):
        """stmt : block
                | var_decl
                | typedef
                | if_stmt"""
        p[0] = p[1]

    def p_stmt_error(self, p):
        "stmt : error SEMI"
        p[0] = None

    def p_stmt_empty(self, p):
        "stmt : SEMI"
        p[0] = None

    def p_stmt_assign(self, p):
        "stmt : postfix ASSIGN expr SEMI"
        p[0] = n.Assign(p[1], p[3], span=p[1].span)

    def p_stmt_expr(self, p):
        "stmt : postfix SEMI"
        p[0] = n.ExprStmt(p[1], span=p[1].span)

    def p_stmt_step(self, p):
        """stmt : postfix PLUS PLUS SEMI
                | postfix MINUS MINUS SEMI"""
        # ESP's `i++;` and `i--;` (statements only) become `i := i + 1;` and `i := i - 1;`.
        first, second = p.slice[2], p.slice[3]
        if second.lexpos != first.lexpos + 1:
            self._error("CCL1101", self.index.span(second.lexpos),
                        f"syntax error at '{second.value}'; write {p[2]}{p[2]} without a space")
        one = n.Literal("integer", 1, span=self._at(p, 2))
        step = n.Binary(p[2], copy.deepcopy(p[1]), one, span=p[1].span)
        p[0] = n.Assign(p[1], step, span=p[1].span)

    def p_if_stmt(self, p):
        """if_stmt : IF LPAREN expr RPAREN stmt %prec IFX
                   | IF LPAREN expr RPAREN stmt ELSE stmt"""
        otherwise = p[7] if len(p) == 8 else None
        p[0] = n.If(p[3], p[5], otherwise, span=self._at(p))

    def p_stmt_while(self, p):
        "stmt : WHILE LPAREN expr RPAREN stmt"
        p[0] = n.While(p[3], p[5], span=self._at(p))

    def p_stmt_for(self, p):
        "stmt : FOR LPAREN ident IN expr RPAREN stmt"
        p[0] = n.ForIn(p[3], p[5], p[7], span=self._at(p))

    def p_stmt_for_where(self, p):
        "stmt : FOR LPAREN ident IN expr WHERE for_conditions RPAREN stmt"
        p[0] = n.ForIn(p[3], p[5], p[9], p[7], span=self._at(p))

    def p_for_conditions(self, p):
        """for_conditions : for_condition
                          | for_conditions COMMA for_condition"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[3]]

    def p_for_condition(self, p):
        "for_condition : field_name EQ expr"
        p[0] = n.FieldInit(p[1], p[3], span=p[1].span)

    def p_stmt_switch(self, p):
        "stmt : SWITCH LPAREN expr RPAREN LBRACE switch_cases RBRACE"
        p[0] = n.Switch(p[3], p[6], span=self._at(p))

    def p_switch_cases(self, p):
        """switch_cases : switch_cases switch_case
                        | """
        p[0] = _items(p)

    def p_switch_case(self, p):
        """switch_case : CASE expr_list COLON stmts
                       | DEFAULT COLON stmts"""
        if len(p) == 5:
            p[0] = n.SwitchCase(p[2], p[4], span=self._at(p))
        else:
            p[0] = n.SwitchCase([], p[3], span=self._at(p))

    def p_stmt_break(self, p):
        "stmt : BREAK SEMI"
        p[0] = n.Break(span=self._at(p))

    def p_stmt_continue(self, p):
        "stmt : CONTINUE SEMI"
        p[0] = n.Continue(span=self._at(p))

    def p_stmt_return(self, p):
        """stmt : RETURN SEMI
                | RETURN expr SEMI"""
        p[0] = n.Return(p[2] if len(p) == 4 else None, span=self._at(p))

    def p_stmt_exit(self, p):
        "stmt : EXIT SEMI"
        p[0] = n.Exit(span=self._at(p))

    def p_stmt_output(self, p):
        "stmt : OUTPUT expr SEMI"
        p[0] = n.OutputStmt(p[2], span=self._at(p))

    # ------------------------------------------------------------------------------------------
    # Expressions
    # ------------------------------------------------------------------------------------------

    def p_expr_binary(self, p):
        """expr : expr OR expr
                | expr AND expr
                | expr EQ expr
                | expr NE expr
                | expr LT expr
                | expr LE expr
                | expr GT expr
                | expr GE expr
                | expr LIKE expr
                | expr PLUS expr
                | expr MINUS expr
                | expr TIMES expr
                | expr DIVIDE expr
                | expr MOD expr
                | expr POW expr"""
        op = p[2].lower()
        if op == "<>":
            op = "!="
        p[0] = n.Binary(op, p[1], p[3], span=p[1].span)

    def p_expr_not(self, p):
        "expr : NOT expr"
        p[0] = n.Unary("not", p[2], span=self._at(p))

    def p_expr_unary(self, p):
        """expr : MINUS expr %prec UMINUS
                | PLUS expr %prec UMINUS"""
        p[0] = n.Unary(p[1], p[2], span=self._at(p))

    def p_expr_not_like(self, p):
        "expr : expr NOT LIKE expr %prec LIKE"
        p[0] = n.Unary("not", n.Binary("like", p[1], p[4], span=p[1].span), span=p[1].span)

    def p_expr_in(self, p):
        """expr : expr IN LPAREN expr_list RPAREN
                | expr NOT IN LPAREN expr_list RPAREN %prec IN"""
        negated = len(p) == 7
        p[0] = n.InList(p[1], p[5] if negated else p[4], negated, span=p[1].span)

    def p_expr_is_null(self, p):
        """expr : expr IS NULL
                | expr IS NOT NULL"""
        # SQL's null test is ESP's isnull(x): kept as that call, so the printer writes isnull().
        test = n.Call(n.Ident("isnull", span=self._at(p, 2)), [p[1]], span=p[1].span)
        p[0] = n.Unary("not", test, span=p[1].span) if len(p) == 5 else test

    def p_expr_primary(self, p):
        """expr : postfix
                | literal
                | case_expr
                | record_lit
                | new_expr"""
        p[0] = p[1]

    def p_expr_list(self, p):
        """expr_list : expr
                     | expr_list COMMA expr"""
        p[0] = _items(p)

    def p_postfix_atom(self, p):
        """postfix : var
                   | call
                   | cast"""
        p[0] = p[1]

    def p_postfix_paren(self, p):
        "postfix : LPAREN expr RPAREN"
        self._chain_ends.pop(id(p[2]), None)  # (a = b) = c is no chain
        p[0] = p[2]

    def p_postfix_sequence(self, p):
        "postfix : LPAREN sequence_steps expr RPAREN"
        p[0] = n.Sequence(p[2], p[3], span=self._at(p))

    def p_sequence_steps(self, p):
        """sequence_steps : sequence_step
                          | sequence_steps sequence_step"""
        p[0] = [p[1]] if len(p) == 2 else p[1] + [p[2]]

    def p_sequence_step(self, p):
        """sequence_step : postfix ASSIGN expr SEMI
                         | expr SEMI"""
        if len(p) == 5:
            p[0] = n.Assign(p[1], p[3], span=p[1].span)
        else:
            p[0] = n.ExprStmt(p[1], span=p[1].span)

    def p_postfix_field(self, p):
        "postfix : postfix DOT field_name"
        s = p.slice  # (see p_ident)
        base = s[1].value
        s[0].value = n.FieldAccess(base, s[3].value, span=base.span)

    def p_postfix_index(self, p):
        "postfix : postfix LBRACKET expr RBRACKET"
        p[0] = n.IndexAccess(p[1], p[3], span=p[1].span)

    def p_postfix_find(self, p):
        "postfix : postfix LBRACE expr RBRACE"
        p[0] = n.WindowFind(p[1], p[3], span=p[1].span)

    def p_field_name(self, p):
        """field_name : ident
                      | BASETYPE"""
        p[0] = p[1] if isinstance(p[1], n.Ident) else self._ident(p, 1)

    def p_var(self, p):
        """var : ident
               | BASETYPE"""
        name = p.slice[1].value  # (p.slice: see p_ident)
        if not isinstance(name, n.Ident):
            name = self._ident(p, 1)
        p.slice[0].value = n.Var(name, span=name.span)

    def p_call(self, p):
        """call : func_name LPAREN RPAREN
                | func_name LPAREN expr_list RPAREN
                | BASETYPE LPAREN expr_list RPAREN"""
        func = p[1] if isinstance(p[1], n.Ident) else self._ident(p, 1)
        args = p[3] if len(p) == 5 else []
        if (func.name.lower() in DATE_PART_FUNCTIONS and args and isinstance(args[0], n.Var)
                and args[0].name.name.lower() in DATE_PARTS):
            # ESP writes the date part as a keyword too (datefloor(MINUTE, t)): read it as 'MINUTE'
            args = [n.Literal("string", args[0].name.name, span=args[0].span)] + args[1:]
        p[0] = n.Call(func, args, span=self._at(p))

    def p_call_library(self, p):
        """call : postfix DOT field_name LPAREN RPAREN
                | postfix DOT field_name LPAREN expr_list RPAREN"""
        if not isinstance(p[1], n.Var):
            self._error("CCL1101", p[3].span, "syntax error: only a library's functions are called "
                                              "with a dot (Library.function(...))")
        library = p[1].name if isinstance(p[1], n.Var) else None
        p[0] = n.Call(p[3], p[5] if len(p) == 7 else [], library=library, span=p[1].span)

    def p_call_distinct(self, p):
        "call : func_name LPAREN DISTINCT expr_list RPAREN"
        p[0] = n.Call(p[1], p[4], True, span=self._at(p))

    def p_new(self, p):
        "new_expr : NEW type_spec"
        p[0] = n.New(p[2], span=self._at(p))

    def p_call_star(self, p):
        "call : func_name LPAREN TIMES RPAREN"
        p[0] = n.Call(p[1], [n.Star(span=self._at(p, 3))], span=self._at(p))

    def p_func_name(self, p):
        "func_name : ident"
        p[0] = p[1]

    def p_func_name_keyword(self, p):
        """func_name : LEFT
                     | RIGHT
                     | LIKE"""
        p[0] = n.Ident(p[1].lower(), span=self._at(p))

    def p_cast(self, p):
        "cast : CAST LPAREN type_spec COMMA expr RPAREN"
        p[0] = n.Cast(p[3], p[5], span=self._at(p))

    def p_case_expr(self, p):
        """case_expr : CASE when_list else_opt END
                     | CASE expr when_list else_opt END"""
        if len(p) == 5:
            p[0] = n.Case(None, p[2], p[3], span=self._at(p))
        else:
            p[0] = n.Case(p[2], p[3], p[4], span=self._at(p))

    def p_when_list(self, p):
        """when_list : when_then
                     | when_list when_then"""
        p[0] = _items(p)

    def p_when_then(self, p):
        "when_then : WHEN expr THEN expr"
        p[0] = n.WhenThen(p[2], p[4], span=self._at(p))

    def p_else_opt(self, p):
        """else_opt : ELSE expr
                    | """
        p[0] = p[2] if len(p) > 1 else None

    def p_record_lit(self, p):
        """record_lit : LBRACKET field_inits_end RBRACKET
                      | LBRACKET field_inits BAR field_inits_opt RBRACKET
                      | LBRACKET BAR field_inits_opt RBRACKET"""
        p[0] = n.RecordLit(*_record_parts(p), span=self._at(p))

    def p_field_inits_opt(self, p):
        """field_inits_opt : field_inits_end
                           | """
        p[0] = p[1] if len(p) > 1 else []

    def p_field_inits_end(self, p):
        """field_inits_end : field_inits
                           | field_inits field_init_last
                           | field_init_last"""
        p[0] = _items(p) if len(p) == 3 else ([p[1]] if isinstance(p[1], n.FieldInit) else p[1])

    def p_field_init_last(self, p):
        """field_init_last : field_name EQ expr
                           | field_name MEQ expr"""
        # ESP lets the last field before ']' go without its ';': [k = 1; | v = 'x']
        p[0] = n.FieldInit(p[1], p[3], span=p[1].span)

    def p_field_inits(self, p):
        """field_inits : field_init
                       | field_inits field_init"""
        p[0] = _items(p)

    def p_field_init(self, p):
        """field_init : field_name EQ expr SEMI
                      | field_name MEQ expr SEMI"""
        p[0] = n.FieldInit(p[1], p[3], span=p[1].span)

    def p_literal_number(self, p):
        """literal : INTEGER
                   | FLOAT
                   | MONEY"""
        p[0] = self._number(p, 1)

    def _number(self, p, i: int) -> n.Literal:
        v = p[i]
        if isinstance(v, tuple):
            return n.Literal("long" if v[1] else "integer", v[0], span=self._at(p, i))
        if isinstance(v, Decimal):
            return n.Literal("money", v, span=self._at(p, i))
        return n.Literal("float", v, span=self._at(p, i))

    def p_literal_string(self, p):
        "literal : STRING"
        p[0] = n.Literal("string", p[1], span=self._at(p))

    def p_literal_bool(self, p):
        """literal : TRUE
                   | FALSE"""
        p[0] = n.Literal("boolean", p[1].lower() == "true", span=self._at(p))

    def p_literal_null(self, p):
        "literal : NULL"
        p[0] = n.Literal("null", None, span=self._at(p))

    # --- names -----------------------------------------------------------------------------------

    def p_ident(self, p):
        "ident : ID"
        # The most frequent action: it reads the token through p.slice, not PLY's Python-level
        # p[i], and makes the token's span directly (what _at does for a token).
        tok = p.slice[1]
        p.slice[0].value = n.Ident(tok.value, span=self.index.span(tok.lexpos))

    def p_ident_list(self, p):
        """ident_list : ident
                      | ident_list COMMA ident"""
        p[0] = _items(p)

    def p_name_list(self, p):
        """name_list : column_name
                     | name_list COMMA column_name"""
        p[0] = _items(p)


def _add_soft_keyword_rule() -> None:
    def p_ident_soft(self, p):
        p[0] = n.Ident(p[1], span=self._at(p))
    p_ident_soft.__doc__ = "ident : " + "\n| ".join(SOFT_KEYWORDS)
    CCLParser.p_ident_soft = p_ident_soft


_add_soft_keyword_rule()


def _keep_count(expr: n.Node) -> object:
    """The count of ``KEEP count ROWS``: an int for an integer literal, the name of a parameter, or
    (ESP: "an integer value or an expression") the expression, evaluated when the project is
    planned."""
    if isinstance(expr, tuple):  # an INTEGER token
        return expr[0]
    if isinstance(expr, n.Literal) and expr.kind in ("integer", "long"):
        return expr.value
    if isinstance(expr, n.Var):
        return expr.name
    return expr


def _items(p) -> list:
    """A list rule (`x : item | x item`, `x : item | x COMMA item`, `x : | x item`): the list so far
    with the new item appended in place (copying would make long lists quadratic)."""
    s = p.slice  # (PLY's len(p) and p[i] are Python-level calls)
    size = len(s)
    if size == 1:
        return []
    if size == 2:
        return [s[1].value]
    items = s[1].value
    items.append(s[size - 1].value)
    return items


def _record_parts(p) -> tuple[list, list, bool]:
    """(key fields, other fields, bar written) of `[a] | [a | b] | [| b]` record rules."""
    if len(p) == 4:
        return [], p[2], False
    if len(p) == 6:
        return p[2], p[4], True
    return [], p[3], True


_SELECT_TITLES = {"matching": "MATCHING", "where": "WHERE", "group_filter": "GROUP FILTER",
                  "group_by": "GROUP BY", "group_order_by": "GROUP ORDER BY", "having": "HAVING"}


_EXPR_START = {"ID", "INTEGER", "FLOAT", "MONEY", "STRING", "LPAREN", "MINUS", "PLUS", "NOT", "CASE",
               "CAST", "LBRACKET", "NULL", "TRUE", "FALSE", "BASETYPE", "LEFT", "RIGHT", "LAST", "LIKE",
               "NEW"}
_STATEMENT_START = {"CREATE", "ATTACH", "LOAD", "DECLARE", "IMPORT"}


def describe_expected(names: set[str]) -> str:
    """A short phrase for the tokens the parser could have accepted ('' when there are too many)."""
    if "ID" in names:
        names -= set(SOFT_KEYWORDS)
    phrases = []
    if {"INTEGER", "STRING", "LPAREN", "ID"} <= names:
        names -= _EXPR_START
        phrases.append("an expression")
    if _STATEMENT_START <= names:
        names -= _STATEMENT_START | {"END"}
        phrases.append("a statement (CREATE, ATTACH, LOAD, DECLARE or IMPORT)")
    phrases += sorted({_token_text(t) for t in names})
    if not phrases or len(phrases) > 8:
        return ""
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " or " + phrases[-1]


def _token_text(name: str) -> str:
    if name in PUNCTUATION:
        return f"'{PUNCTUATION[name]}'"
    return {"ID": "a name", "MEQ": "'='", "BASETYPE": "a type", "INTEGER": "a number", "FLOAT": "a number",
            "MONEY": "a number",
            "STRING": "a string"}.get(name, name)


def describe_token(tok) -> str:
    """How a token is named in a message: ``'FROM'``, ``name 'x'``, ``string 'abc'``."""
    if tok.type in PUNCTUATION:
        return f"'{tok.value}'"
    if tok.type == "ID":
        return f"name '{tok.value}'"
    if tok.type == "STRING":
        return f"string '{tok.value}'"
    if tok.type in ("INTEGER",):
        return f"number {tok.value[0]}"
    if tok.type in ("FLOAT", "MONEY"):
        return f"number {tok.value}"
    return f"'{tok.value}'"


_PARSER: Optional[CCLParser] = None


_TABMODULE = "ccl.syntax._parsetab"


def _yacc(module: CCLParser, args: dict) -> yacc.LRParser:
    """PLY's parser for ``module``, its tables read from ccl/syntax/_parsetab.py and, when PLY had
    to build them, written there atomically: into a directory of their own first, then renamed, so
    that another process (a second test worker, another ``ccl`` command) never imports a
    half-written file. A file that does not import (one cut short before this) is built again."""
    if "write_tables" in args or "outputdir" in args:
        return yacc.yacc(module=module, **args)
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        importlib.import_module(_TABMODULE)
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - a broken file (SyntaxError...): PLY would raise it
        sys.modules.pop(_TABMODULE, None)
        with contextlib.suppress(OSError):
            os.remove(os.path.join(here, "_parsetab.py"))
    try:
        scratch = tempfile.mkdtemp(prefix=".parsetab-", dir=here)
    except OSError:  # a read-only installation: the tables are built in memory
        return yacc.yacc(module=module, write_tables=False, **args)
    try:
        parser = yacc.yacc(module=module, write_tables=True, outputdir=scratch, **args)
        built = os.path.join(scratch, "_parsetab.py")
        if os.path.exists(built):
            os.replace(built, os.path.join(here, "_parsetab.py"))
        return parser
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def get_parser() -> CCLParser:
    """The process-wide parser (tables are built or loaded once)."""
    global _PARSER
    if _PARSER is None:
        _PARSER = CCLParser()
    return _PARSER


def parse_text(text: str, file: str = "<string>") -> tuple[n.Project, list[Diagnostic]]:
    """Parse CCL source text. Never raises on bad input: problems come back as diagnostics."""
    return get_parser().parse(text, file)


def _keyed_stream(node: Union[n.CreateElement, n.FlexOutput]) -> None:
    """A STREAM with a PRIMARY KEY is ESP's keyed stream (5.1 SP08 on): it stores nothing and passes
    inserts, updates and deletes on, which is what a delta stream does; it runs as one."""
    if node.kind == "stream" and node.primary_key is not None:
        node.kind, node.keyed = "delta stream", True
