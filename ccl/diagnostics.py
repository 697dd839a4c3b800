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
    # 13xx: configuration (.ccr files, config files, parameters)
    _c("CCL1301", "error", "malformed project configuration",
       "The .ccr file is not well-formed XML (an unclosed or mismatched tag, a stray '&' or '<', an "
       "undefined entity). The position is where the XML parser stopped."),
    _c("CCL1302", "error", "DTD or entity refused",
       "The .ccr file has a DOCTYPE declaration. DTDs and entity declarations are refused so that a "
       "configuration can neither read local files (external entities) nor exhaust memory (entity "
       "expansion). ESP's own .ccr files have none: delete the declaration."),
    _c("CCL1303", "error", "not a project configuration",
       "The root element of the file is not <Configuration> in the namespace "
       "http://www.sybase.com/esp/project_config/2010/08/ (or without a namespace)."),
    _c("CCL1304", "warning", "unknown configuration element",
       "An element directly under <Configuration>, <Runtime>, <Deployment> or <Project> is not one "
       "this reader knows; it is ignored. Check its spelling."),
    _c("CCL1305", "error", "invalid configuration entry",
       "A Parameter, Option, PropertySet or Property has no name attribute, has both a value "
       "attribute and a different text, or a true/false attribute has another value."),
    _c("CCL1306", "error", "duplicate configuration entry",
       "The same parameter, option, property set, property or setting is given twice in one file. "
       "Remove one."),
    _c("CCL1307", "warning", "ignored on Spark",
       "A .ccr option or element has no meaning on Spark (time-granularity, java-max-heap, ha, "
       "failover, affinities, bindings to other ESP projects, ESP cluster manager URLs). It is "
       "ignored; the message says what takes its place."),
    _c("CCL1310", "warning", "unknown parameter",
       "The .ccr sets a parameter that no PARAMETER declaration of the project's global DECLARE "
       "blocks declares. The value is ignored. Check the spelling (names are case-sensitive)."),
    _c("CCL1311", "error", "parameter value of the wrong type",
       "A parameter's value (in the .ccr or as its CCL default) cannot be read as the declared type: "
       "integer (32-bit), long, float, money(n), decimal(p,s), boolean (true/false), date, "
       "timestamp, bigdatetime, interval, binary (hex) or string."),
    _c("CCL1312", "error", "parameter without a value",
       "A PARAMETER has no default in the CCL and no value in the .ccr or on the command line. Give "
       "it a default (PARAMETER integer n := 4;), a <Parameter> in the .ccr, or --param n=4."),
    _c("CCL1313", "error", "partition count out of range",
       "A parameter used as a PARTITIONS count has a value outside 1..65535. The diagnostic points "
       "at the value (the .ccr line, or the CCL default) and names the PARTITIONS clause in a note."),
    _c("CCL1314", "error", "partition count parameter is not an integer",
       "PARTITIONS names a parameter whose declared type is not integer or long."),
    _c("CCL1315", "error", "parameter type cannot be configured",
       "A PARAMETER has a type that no configuration text can give (a dictionary, vector, record, "
       "event cache, typeof, or an unknown type name). Parameters take built-in scalar types."),
    _c("CCL1316", "error", "parameter default is not a constant",
       "The default of a PARAMETER must be a literal (a number, possibly signed, a string, TRUE, "
       "FALSE or NULL): it is fixed when the project is loaded."),
    _c("CCL1320", "error", "configuration file is not valid YAML",
       "A --config file (or config/default.yaml) cannot be read as YAML. The position is where the "
       "YAML parser stopped."),
    _c("CCL1321", "error", "unknown setting",
       "A configuration file names a setting that does not exist. The message suggests the closest "
       "known key; the keys are listed in docs/configuration.md."),
    _c("CCL1322", "error", "invalid setting value",
       "A setting's value is not valid for its key (a Spark master URL, a positive integer, "
       "rocksdb or hdfs, an interval such as '1 second', a log level, a non-empty path), or a .ccr "
       "option that maps to a setting (debug-level 0-7, bad-record-file) has a bad value."),
    _c("CCL1330", "error", "unknown adapter property set",
       "An ATTACH ADAPTER names a property set (PROPERTIES propertyset = 'name') that the .ccr does "
       "not define under <AdaptersPropertySet>."),
    _c("CCL1331", "warning", "adapter property set without a .ccr",
       "An ATTACH ADAPTER names a property set but no .ccr file was loaded, so its properties are "
       "unknown. Put FILE.ccr beside FILE.ccl or give --ccr."),
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
