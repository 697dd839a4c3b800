"""Diagnostics: the catalogue of codes, the Diagnostic record, and its text and JSON renderings.

A diagnostic prints as ``file:line:col: error CCL1101: message``, then the source line and a caret
under the column. Codes are stable: once published in docs/diagnostics.md a code keeps its meaning.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .nodes import Span


@dataclass(frozen=True)
class Code:
    """One entry of the catalogue: severity, a one-line title and the long explanation."""

    code: str
    severity: str  # error | warning
    title: str
    explanation: str


def _c(code: str, severity: str, title: str, explanation: str) -> Code:
    return Code(code, severity, title, " ".join(explanation.split()))


CATALOGUE: dict[str, Code] = {c.code: c for c in [
    # 10xx: lexical
    _c("CCL1001", "error", "illegal character",
       "The character cannot start any CCL token. Remove it, or put it inside a single-quoted "
       "string if it is data."),
    _c("CCL1002", "error", "unterminated string literal",
       "A string opened with ' is not closed on the same line. Close it; write a quote inside a "
       "string as two quotes ('it''s')."),
    _c("CCL1003", "error", "unterminated comment",
       "A /* comment is not closed by */ before the end of the file."),
    _c("CCL1004", "error", "number out of range",
       "An integer literal does not fit a 64-bit long. Use a float literal or a smaller value."),
    # 11xx: syntax
    _c("CCL1101", "error", "syntax error",
       "The token cannot appear at this point of a statement. The message names what was found and "
       "what could have followed. The parser resumes at the next ';', so later statements are still "
       "checked."),
    _c("CCL1102", "error", "unexpected end of file",
       "The file ends inside a statement: a ';', END or closing bracket is missing."),
    _c("CCL1103", "error", "unknown word",
       "A word that must be one of a fixed set is not: an interval unit (DAY(S), HOUR(S), "
       "MINUTE(S)/MIN, SECOND(S)/SEC, MILLISECOND(S)/MSEC, MICROSECOND(S)/USEC), an eventCache option "
       "(EVENTS, MANUAL, COALESCE, ASC/DESC), or a word of a clause such as ON START TRANSACTION or "
       "CREATE MEMORY STORE."),
    _c("CCL1104", "error", "duplicate clause",
       "The same clause (SCHEMA, PRIMARY KEY, KEEP, STORE, PARTITION, ...) is given twice in one "
       "statement. Keep one."),
    _c("CCL1105", "error", "clause not allowed here",
       "The clause does not belong to this kind of statement: AS SELECT on an input stream or window, "
       "WHERE or AUTOGENERATE on a derived element, a derived element without AS, and so on."),
    # 12xx: project files
    _c("CCL1201", "error", "imported file cannot be read",
       "IMPORT names a file that does not exist, is a directory, or is not UTF-8 text. Paths are "
       "relative to the directory of the importing file."),
    _c("CCL1202", "error", "import cycle",
       "A file imports itself, directly or through other files. Remove one IMPORT of the cycle."),
]}


@dataclass
class Diagnostic:
    """A message about a place in a source file."""

    code: str
    message: str
    span: Span
    severity: str = ""
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.severity:
            self.severity = CATALOGUE[self.code].severity

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def header(self) -> str:
        return f"{self.span}: {self.severity} {self.code}: {self.message}"

    def to_json(self) -> dict:
        return {"file": self.span.file, "line": self.span.line, "column": self.span.col,
                "severity": self.severity, "code": self.code, "message": self.message,
                "notes": list(self.notes)}


class SourceCache:
    """Source texts by file name, for printing the offending line under a diagnostic."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}

    def add(self, name: str, text: str) -> None:
        self._lines[name] = text.splitlines()

    def line(self, name: str, line: int) -> Optional[str]:
        lines = self._lines.get(name)
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]


def render(diag: Diagnostic, sources: SourceCache) -> str:
    """The text form: header, source line, caret (tabs in the line are kept so the caret aligns)."""
    out = [diag.header()]
    text = sources.line(diag.span.file, diag.span.line)
    if text is not None:
        prefix = "".join(ch if ch == "\t" else " " for ch in text[: max(diag.span.col - 1, 0)])
        out.append(f"    {text}")
        out.append(f"    {prefix}^")
    out.extend(f"  note: {n}" for n in diag.notes)
    return "\n".join(out)


def render_json(diags: Iterable[Diagnostic]) -> str:
    """All diagnostics as one JSON array."""
    return json.dumps([d.to_json() for d in diags], indent=2)


def sort_key(diag: Diagnostic) -> tuple:
    return (diag.span.file, diag.span.line, diag.span.col, diag.code)
