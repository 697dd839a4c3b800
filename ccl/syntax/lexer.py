"""The CCL/SPLASH lexer (PLY).

Keywords are case-insensitive; identifiers keep their case. Built-in type names (integer, money, ...)
are one token kind, BASETYPE (the parser lower-cases them where they name a type). Interval units (`5 MINUTES`) are
plain identifiers, checked by the parser where an interval is expected, so that a column may be called
`minutes`. A money literal is a number, ``d`` and the scale: ``10.00d2`` is money(2) (MONEY token,
a Decimal with that scale). Positions are character offsets (``lexpos``); :class:`LineIndex` turns them into line and
column only when a node or a diagnostic needs them.
"""
from __future__ import annotations

import bisect
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Callable, Iterator, Optional

import ply.lex as lex

from .nodes import Span

# Words with a grammatical role. Which of them may still be used as names is decided in the
# grammar (parser.SOFT_KEYWORDS), not here.
KEYWORDS = {w.lower(): w for w in """
    ADAPTER AGES ALL AND AS ASC ATTACH AUTOGENERATE BEGIN BREAK BY CASE CAST CONTINUE CREATE DECLARE
    DEDUCED DEFAULT DELTA DESC DICTIONARY DISTINCT ELSE END ERROR EVENTCACHE EVERY EXIT FALSE FILTER
    FLEX FOR FROM FULL GROUP HASH HAVING IF IMPORT IN INHERITS INNER INPUT IS JOIN KEEP KEY LAST LEFT LIKE
    LOAD LOCAL MATCHING MODULE NEW NOT NULL ON OR ORDER OUT OUTER OUTPUT PARAMETER PARAMETERS PARTITION
    PARTITIONS PER PRIMARY PROPERTIES REFERENCE REFERENCES RETURN RIGHT ROUNDROBIN ROW ROWS SCHEMA
    SELECT SET SLACK SPLITTER STORE STORES STREAM SWITCH THEN TO TRUE TYPE TYPEDEF TYPEOF UNION VECTOR
    WHEN WHERE WHILE WINDOW
""".split()}

BASE_TYPES = frozenset("""
    integer long float money decimal string boolean date timestamp msdate bigdatetime interval binary
""".split())

# The token type of a word other than ID, by its lower-case spelling: keywords, and BASETYPE for the
# built-in type names (the value keeps its spelling: a type name may also be a column name).
_WORD_TYPES = {**{name: "BASETYPE" for name in BASE_TYPES}, **KEYWORDS}

# Token names of punctuation, with their text (used in messages and by the printer).
PUNCTUATION = {
    "SEMI": ";", "COMMA": ",", "LPAREN": "(", "RPAREN": ")", "LBRACKET": "[", "RBRACKET": "]",
    "LBRACE": "{", "RBRACE": "}", "DOT": ".", "COLON": ":", "ASSIGN": ":=", "EQ": "=", "NE": "!=",
    "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "PLUS": "+", "MINUS": "-", "TIMES": "*",
    "DIVIDE": "/", "MOD": "%", "POW": "^", "BAR": "|", "ANDAND": "&&", "OROR": "||", "BANG": "!",
}

tokens = tuple(sorted(KEYWORDS.values())) + (
    "ID", "BASETYPE", "INTEGER", "FLOAT", "MONEY", "STRING") + tuple(PUNCTUATION)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
MONEY_SCALES = range(1, 16)  # money(1) .. money(15)
MONEY_DIGITS = 18            # a money(n) value is a decimal(18, n)


class _Rules:
    """PLY token rules. Lexical errors go to ``t.lexer.report(code, lexpos, message)``."""

    tokens = tokens
    t_ignore = " \t\r\n\f\v"

    # Function rules are tried in this order, before the string rules below.
    def t_COMMENT(self, t):
        r"//[^\n]*|/\*[\s\S]*?\*/"
        return None

    def t_BADCOMMENT(self, t):
        r"/\*[\s\S]*"
        t.lexer.report("CCL1003", t.lexpos, "unterminated comment: '/*' is never closed by '*/'")
        return None

    def t_STRING(self, t):
        r"'(?:[^'\n]|'')*'"
        t.value = t.value[1:-1].replace("''", "'")
        return t

    def t_BADSTRING(self, t):
        r"'[^'\n]*"
        t.lexer.report("CCL1002", t.lexpos,
                       "unterminated string literal: a string must end on the line it starts")
        t.type = "STRING"
        t.value = t.value[1:]
        return t

    def t_MONEY(self, t):
        r"(?:\d+\.\d*|\.\d+|\d+)[dD]\d+(?!\w)"
        number, _, digits = t.value.lower().partition("d")
        scale = int(digits)
        if scale not in MONEY_SCALES:
            t.lexer.report("CCL1004", t.lexpos,
                           f"money literal {t.value}: the scale after 'd' must be 1 to 15")
            scale = min(max(scale, MONEY_SCALES[0]), MONEY_SCALES[-1])
        try:
            value = Decimal(number).quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP)
        except InvalidOperation:  # more digits than Decimal's context holds
            value = Decimal(10) ** MONEY_DIGITS
        if len(value.as_tuple().digits) > MONEY_DIGITS:
            t.lexer.report("CCL1004", t.lexpos, f"money literal {t.value} does not fit money({scale})")
            value = Decimal(0).scaleb(-scale)
        t.value = value  # a Decimal whose exponent is -scale
        return t

    def t_FLOAT(self, t):
        r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+"
        t.value = float(t.value)
        return t

    def t_INTEGER(self, t):
        r"\d+[lL](?![\w])|\d+"
        text = t.value
        is_long = text[-1] in "lL"
        value = int(text.rstrip("lL"))
        if value > LONG_MAX:
            t.lexer.report("CCL1004", t.lexpos, f"integer literal {text} does not fit a 64-bit long")
            value = LONG_MAX
        t.value = (value, is_long or value > INT_MAX)
        return t

    def t_ID(self, t):
        r"[^\W\d]\w*"
        t.type = _WORD_TYPES.get(t.value.lower(), "ID")
        return t

    def t_QUOTED_NAME(self, t):
        r'"[^"\n]*"'
        # Not CCL. Read as the name it quotes, so that one error is reported and not one per
        # quote character with syntax errors after them.
        t.lexer.report("CCL1001", t.lexpos, f"double-quoted name {t.value}: CCL names are not "
                                            "quoted; write it without quotes (letters, digits, _)")
        t.type, t.value = "ID", t.value[1:-1]
        return t

    def t_error(self, t):
        t.lexer.report("CCL1001", t.lexpos, f"illegal character {t.value[0]!r}")
        t.lexer.skip(1)

    t_ASSIGN = r":="
    t_NE = r"!=|<>"
    t_LE = r"<="
    t_GE = r">="
    t_ANDAND = r"&&"
    t_OROR = r"\|\|"
    t_SEMI = r";"
    t_COMMA = r","
    t_LPAREN = r"\("
    t_RPAREN = r"\)"
    t_LBRACKET = r"\["
    t_RBRACKET = r"\]"
    t_LBRACE = r"\{"
    t_RBRACE = r"\}"
    t_DOT = r"\."
    t_COLON = r":"
    t_EQ = r"="
    t_LT = r"<"
    t_GT = r">"
    t_PLUS = r"\+"
    t_MINUS = r"-"
    t_TIMES = r"\*"
    t_DIVIDE = r"/"
    t_MOD = r"%"
    t_POW = r"\^"
    t_BAR = r"\|"
    t_BANG = r"!"


_BLANKS = re.compile(r"[ \t\r\n\f\v]*")  # t_ignore


class _Lexer(lex.Lexer):
    """PLY's lexer, with its rules and master regex, and a faster :meth:`token`.

    PLY's ``token`` skips ignored characters one at a time and calls a rule function for every word;
    here one regex skips the blanks and words are typed inline. ``eq_type``, when set, gives the
    type of each '=' as it is read (the parser's MATCHING ... ON), saving a wrapper per token.
    """

    eq_type: Optional[Callable[[], str]] = None

    def token(self) -> Optional[lex.LexToken]:
        data, end = self.lexdata, self.lexlen
        master, index = self.lexre[0]
        skip = _BLANKS.match
        pos = skip(data, self.lexpos).end()
        while pos < end:
            m = master.match(data, pos)
            if m is None:  # as PLY: t_error reports the character and skips it
                tok = lex.LexToken()
                tok.value, tok.lineno, tok.type = data[pos:], self.lineno, "error"
                tok.lexer, tok.lexpos = self, pos
                self.lexpos = pos
                self.lexerrorf(tok)
                pos = skip(data, self.lexpos).end()
                continue
            tok = lex.LexToken()
            tok.value = value = m.group()
            tok.lineno = self.lineno
            tok.lexpos = pos
            func, kind = index[m.lastindex]
            pos = m.end()
            if kind == "ID":  # t_ID, inline
                kind = _WORD_TYPES.get(value.lower(), "ID")
                func = None
            elif kind == "EQ" and self.eq_type is not None:
                kind = self.eq_type()
            tok.type = kind
            if func is None:
                self.lexpos = pos
                return tok
            tok.lexer = self
            self.lexmatch = m
            self.lexpos = pos
            tok = func(tok)
            if tok is not None:
                return tok
            pos = skip(data, self.lexpos).end()  # after a comment
        self.lexpos = pos + 1  # as PLY at the end of the text
        return None


_MASTER = lex.lex(module=_Rules(), optimize=False, errorlog=lex.NullLogger())
# PLY splits its master regex only past 100 groups, and there are no literals: _Lexer relies on both.
assert len(_MASTER.lexre) == 1 and not _MASTER.lexliterals
_MASTER.__class__ = _Lexer


def make_lexer(report: Callable[[str, int, str], None]) -> lex.Lexer:
    """A fresh lexer whose lexical errors go to ``report(code, lexpos, message)``."""
    lexer = _MASTER.clone()
    lexer.report = report
    return lexer


def tokenize(text: str) -> Iterator[lex.LexToken]:
    """All tokens of ``text`` (lexical errors are dropped); for tools and tests."""
    lexer = make_lexer(lambda code, pos, msg: None)
    lexer.input(text)
    yield from iter(lexer.token, None)


class LineIndex:
    """Maps character offsets of one text to 1-based (line, column)."""

    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self._starts = [0]
        find = text.find
        pos = find("\n")
        while pos >= 0:
            self._starts.append(pos + 1)
            pos = find("\n", pos + 1)

    def span(self, offset: int) -> Span:
        """The span of the character at ``offset``."""
        line = bisect.bisect_right(self._starts, offset)
        # Span's own __init__ (a frozen dataclass's) sets each field through object.__setattr__;
        # filling the new object's __dict__ at once halves the cost of the parser's many spans.
        span = _new_object(Span)
        span.__dict__.update(file=self.file, line=line, col=offset - self._starts[line - 1] + 1)
        return span


_new_object = object.__new__
