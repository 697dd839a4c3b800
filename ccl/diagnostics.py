"""Diagnostics: the catalogue of codes, the Diagnostic record, and its text and JSON renderings.

A diagnostic prints as ``file:line:col: error CCL1101: message``, then the source line and a caret
under the column. Codes are stable: once published in docs/diagnostics.md a code keeps its meaning.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .syntax.nodes import Span


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
    _c("CCL1005", "warning", "file is not UTF-8",
       "The file holds bytes that are not UTF-8 (often a comment or string saved by a Windows "
       "editor). It is read as Windows-1252, so accented letters there keep their meaning; save "
       "the file as UTF-8 to silence this."),
    # 11xx: syntax
    _c("CCL1006", "error", "preprocessor directive error",
       "A #define, #undef, #if, #ifdef, #ifndef, #elif, #else, #endif or #include line is not "
       "understood: an unknown directive, a macro with parameters, an #if expression that is not "
       "made of integers and macros, an #else or #endif without #if, or an #if never closed."),
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
       "The default of a PARAMETER must be a constant: a literal (a number, possibly signed, a "
       "string, TRUE, FALSE or NULL) or an expression of literals (2 * 5, sqrt(16.0)), evaluated "
       "once when the project is loaded; it cannot read variables or other parameters."),
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
    # 20xx: names
    _c("CCL2001", "error", "unknown element",
       "A stream, window, reference, module, schema or store is used before it is created, or "
       "never created. CCL resolves names in declaration order: move the CREATE above its first use."),
    _c("CCL2002", "error", "duplicate name",
       "Two elements, schemas, modules, global variables, parameters, functions or typedefs have the "
       "same name, or a local variable repeats one of its scope. Rename one."),
    _c("CCL2003", "error", "unknown column",
       "The column is not in the schema of the source it is read from (names are case-sensitive)."),
    _c("CCL2004", "error", "ambiguous column",
       "An unqualified column exists in more than one source of the FROM clause. Qualify it with the "
       "source name or alias (src.col)."),
    _c("CCL2005", "error", "unknown function",
       "No built-in function (docs/functions-esp.md) or SPLASH function of the project has this name."),
    _c("CCL2006", "error", "duplicate column",
       "A schema has two columns of the same name, directly or through INHERITS, or a select list "
       "produces two columns with one name. Rename or alias one."),
    _c("CCL2007", "error", "unknown name",
       "A name in an expression is neither a column of a source in scope, a source, a variable, a "
       "parameter nor a constant."),
    _c("CCL2008", "error", "wrong number of arguments",
       "The function is called with fewer or more arguments than it takes."),
    _c("CCL2009", "error", "unknown type",
       "A type name is neither a built-in type nor a typedef declared before it."),
    _c("CCL2010", "warning", "function not available at run time",
       "ESP has this function but this runtime does not run it (W_stream / W_iterator of a window "
       "that is neither an input nor the output of the Flex whose code names it, the iterator "
       "functions setRange and setSearch, getData, the XML functions, the recent and xmlagg "
       "aggregates, a negation inside && or || of a MATCHING pattern): the project runs, and "
       "every row that calls it becomes a bad record."),
    _c("CCL2011", "error", "event cache over an element not read",
       "A local event cache holds rows of one of the element's own inputs (a FROM source, a Flex "
       "input): they fill it as they arrive. Cache an input, or read the other element in FROM."),
    # 21xx: types
    _c("CCL2101", "error", "type mismatch",
       "An operand has a type the operator does not accept (a string in arithmetic, a number "
       "compared with a string, a non-boolean operand of AND/OR/NOT). The caret points at the "
       "operand. Convert it explicitly (to_string, to_integer, cast)."),
    _c("CCL2102", "error", "argument of the wrong type",
       "A function argument has a type the function does not accept."),
    _c("CCL2103", "error", "assignment of the wrong type",
       "A value is assigned to (or initialises) a variable, column or field of a type it cannot be "
       "widened to. Numbers widen integer -> long -> money/decimal -> float."),
    _c("CCL2104", "error", "select list does not match the schema",
       "A derived element with an explicit SCHEMA selects a different number of columns, or a "
       "column whose type cannot be widened to the schema's."),
    _c("CCL2105", "error", "invalid type arguments",
       "money(n) takes n in 1..15; decimal(p, s) takes p in 1..34 and s in 0..p."),
    _c("CCL2106", "warning", "record field not in the Flex output",
       "A record that a Flex outputs has a field that is no column of its output. As ESP's SPLASH "
       "records page says, the field is dropped, and the output's columns the record does not have "
       "are null (a row with a null key column is a bad record). Rename the field or add the column."),
    # 22xx: elements, keys, clauses
    _c("CCL2201", "error", "missing primary key",
       "Windows and delta streams are keyed: give PRIMARY KEY (cols) or, on a derived element, "
       "PRIMARY KEY DEDUCED."),
    _c("CCL2202", "error", "primary key cannot be deduced",
       "PRIMARY KEY DEDUCED needs a single source whose key columns are all selected unchanged, or a "
       "GROUP BY whose columns are all selected. Name the key explicitly."),
    _c("CCL2203", "error", "PRIMARY KEY DEDUCED not allowed here",
       "Input windows and Flex outputs have no query to deduce a key from: name the key columns."),
    _c("CCL2204", "error", "key column not in the schema",
       "A PRIMARY KEY, PER, AUTOGENERATE or AGES column is not a column of the element."),
    _c("CCL2205", "error", "aggregate in WHERE",
       "WHERE filters rows before they are grouped, so it cannot use aggregate functions. Move the "
       "condition to HAVING. Nor can GROUP BY, a join's ON, a splitter's WHEN or another "
       "aggregate's argument."),
    _c("CCL2206", "error", "local variable in WHERE",
       "Variables of the element's DECLARE block may be used in the select list, not in WHERE."),
    _c("CCL2207", "error", "aggregation in a stream",
       "A stream keeps no state, so it cannot GROUP BY. Make the element a window (with PRIMARY KEY "
       "DEDUCED) or aggregate over an event cache."),
    _c("CCL2209", "error", "clause not allowed on a stream",
       "Streams keep no rows: KEEP belongs to windows (a KEEP on a FROM source is allowed), AGES and "
       "STORE to windows. (A stream with a PRIMARY KEY is a keyed stream.)"),
    _c("CCL2210", "error", "missing schema",
       "An input element, reference or Flex output needs SCHEMA name or SCHEMA (cols)."),
    _c("CCL2211", "error", "not a source",
       "FROM, IN, ON or a binding names something rows cannot come from (a schema, a module, an "
       "adapter, an output of a module not loaded), or a STORE names something that is not a store."),
    _c("CCL2212", "error", "rank() outside GROUP FILTER",
       "rank() is the rank of a row in its group (0 for the first row, in GROUP ORDER BY order, or "
       "in order of arrival without GROUP ORDER BY). It exists only while GROUP FILTER picks the "
       "rows a group aggregates: use it there."),
    _c("CCL2213", "error", "input adapter on a derived element",
       "An input adapter publishes rows into an INPUT stream or window; a derived element gets its "
       "rows from its query. Attach the adapter to the input the query reads."),
    _c("CCL2214", "error", "assignment to a parameter",
       "A PARAMETER is a constant of the project, set by its default or the .ccr file when the "
       "project starts. Keep a value that changes in a variable."),
    _c("CCL2215", "error", "join of two streams",
       "A stream keeps no rows, so a row of one stream would never find its match in the other: one "
       "side of a join must be a window (or carry a KEEP in FROM)."),
    # 23xx: parameters
    _c("CCL2216", "error", "break or continue outside a loop",
       "break leaves the innermost while, for or switch, continue goes on with the next round of "
       "the innermost loop: outside them there is nothing to leave. Use return to leave a "
       "function or handler."),
    _c("CCL2301", "error", "PARTITIONS names no parameter",
       "PARTITIONS takes an integer constant or the name of a PARAMETER declared in a global "
       "DECLARE block."),
    _c("CCL2302", "error", "partition count out of range",
       "A constant partition count is outside 1..65535."),
    _c("CCL2303", "error", "KEEP row count not a positive integer",
       "KEEP n ROWS (and KEEP EVERY n ROWS, and the s of SLACK s) takes an integer, the name of an integer PARAMETER or an "
       "expression of literals and parameters (ESP: \"an integer value or an expression\"), evaluated "
       "with the parameters' values when the project is checked and planned; it must give a "
       "positive integer."),
    # 24xx: partitioning
    _c("CCL2401", "error", "element cannot be partitioned",
       "PARTITION BY is not allowed on input streams and windows, references, unions, splitters, "
       "adapters and error streams (ESP makes it a syntax error). Partition the element that reads "
       "from it, or put it in a module and partition the LOAD MODULE."),
    _c("CCL2402", "error", "partition without BY on several inputs",
       "An element with several inputs must say which input each partition function applies to: "
       "PARTITION BY src HASH(...). Inputs named by no BY are broadcast to every instance."),
    _c("CCL2403", "error", "BY names no input",
       "The source after BY is not an input of the partitioned element (not in its FROM clause, IN "
       "list or module IN bindings)."),
    _c("CCL2404", "error", "input partitioned twice",
       "Two BY parts of one PARTITION clause name the same input."),
    _c("CCL2405", "error", "HASH column not in the input",
       "A HASH column is not a column of the input being partitioned."),
    _c("CCL2406", "error", "custom partition function does not return an integer",
       "A custom partition block must return an integer (or long): the instance is the value modulo "
       "the partition count. Every path should end in return."),
    _c("CCL2407", "error", "reserved partition count name",
       "ESP defines <target>_partitions as the partition count of <target> inside its custom "
       "partition block; a user variable or parameter of that name is an error."),
    _c("CCL2408", "error", "PARTITION clause of LOAD MODULE not last",
       "In LOAD MODULE the partition clause must be the last clause."),
    # 25xx: modules
    _c("CCL2501", "error", "module input or output not bound",
       "LOAD MODULE must bind every IN and OUT of the module exactly once, and only those."),
    _c("CCL2502", "error", "module parameter not bound",
       "A PARAMETER of the module has no default and LOAD MODULE does not bind it, or LOAD MODULE "
       "binds a parameter the module does not declare."),
    _c("CCL2503", "error", "not allowed in a module",
       "CREATE MODULE and ATTACH ADAPTER cannot appear inside a module."),
    _c("CCL2504", "error", "bound input lacks a column of the module input",
       "The element bound to a module input must have every column of that input, by name, of a "
       "type that widens to the input's: the module's queries read those columns."),
    # 30xx: partition-safety warnings
    _c("CCL3001", "warning", "ROUNDROBIN on a stateful element",
       "Consequence: rows of one key are spread over all instances, so each instance aggregates, "
       "joins or retains a different part of them and results differ from the unpartitioned "
       "element. Fix: partition by HASH on the key (or GROUP BY) columns. A filter or projection "
       "of a keyed input that keeps its key does not warn: ROUNDROBIN rotates that input's keys, "
       "each with all its changes."),
    _c("CCL3002", "warning", "GROUP BY not determined by the partition key",
       "Consequence: rows of one group can reach several instances, and each instance emits its own "
       "partial row for that group. Fix: HASH on columns that the GROUP BY expressions are computed "
       "from only (or on the GROUP BY columns themselves)."),
    _c("CCL3003", "warning", "global variable written by a partitioned element",
       "Consequence: in ESP the instances race on the variable; here each instance has its own copy, "
       "so no instance sees the others' writes. Fix: keep the state local and partition by its key, "
       "or do not partition the element."),
    _c("CCL3004", "warning", "local variable counts per instance",
       "Consequence: a local variable of a partitioned element is per instance, so a counter counts "
       "only the rows of its instance. Fix: count per key with GROUP BY, or do not partition."),
    _c("CCL3005", "warning", "event cache key differs from the partition key",
       "Consequence: one cache bucket's rows are spread over several instances, so aggregates over "
       "the cache see only part of the bucket. Fix: partition by HASH on the cache's key columns."),
    _c("CCL3006", "warning", "row-based retention multiplied by partitioning",
       "Consequence: a KEEP n ROWS window, or a row-based event cache without coalesce, keeps n rows "
       "in each of the N instances, N*n rows in all, instead of n. Fix: use a time-based KEEP, a "
       "per-key KEEP (PER) on the partition key, or do not partition."),
    _c("CCL3007", "warning", "keyCache reads another key",
       "Consequence: keyCache(c, key) with a key other than the partition key looks in this "
       "instance's cache only, and the bucket may live in another instance. Fix: partition by the "
       "key that is looked up, or do not partition."),
    _c("CCL3008", "warning", "custom partition function can return null",
       "Consequence: rows for which the block returns null (or ends without return) are bad records "
       "and reach no instance. Fix: return an integer on every path (firstnonnull(x, 0))."),
    _c("CCL3009", "warning", "custom partition function ignores the partition count",
       "Consequence: the block's result does not use <target>_partitions, so after the modulo some "
       "instances may get no rows when the count changes (skew). Fix: return expr % "
       "<target>_partitions."),
    _c("CCL3010", "warning", "Flex reads a partitioned window",
       "A partitioned Flex reads the rows of a partitioned input (W_stream lookups, for loops, "
       "iterators) or of its own output: each instance holds only its share, so a row another "
       "instance holds is not found and a loop sees part of the window. Look rows up by the "
       "partition key (every HASH column given from a HASH column of the input being handled), "
       "or leave the input unpartitioned so every instance gets all of it."),
    _c("CCL3011", "warning", "an update can move a row to another instance",
       "Consequence: the input has a key and sends updates, and the partition function reads columns "
       "that are not its key: an update that changes them goes to another instance than the row's "
       "insert, so the first instance keeps the old row (ESP routes each event by its values, as "
       "this runtime does). Fix: partition by HASH on the input's key columns (or columns an "
       "update cannot change), or do not partition."),
    _c("CCL3012", "warning", "global variable shared by elements",
       "Consequence: ESP keeps one copy of a global DECLARE variable for the whole project, so a "
       "value one element writes is what the others read; here each element runs in its own query "
       "with its own copy, and the others keep the initial value. Fix: carry the value as data "
       "(a window the readers join with, or the readers' inputs), or do the reading in the "
       "writing element (one Flex)."),
    _c("CCL3013", "warning", "rows that join can land on different instances",
       "Consequence: two inputs of a join are HASH-partitioned, and a row of one meets only the "
       "rows of the other in its own instance; when the ON condition does not equate their HASH "
       "columns (in order), or equates columns of different types (an integer and a long of one "
       "value hash differently), matching rows can be in different instances and the join loses "
       "them, in ESP as here. Fix: HASH both inputs on the columns the join equates, of one type."),
    _c("CCL3014", "warning", "broadcast input kept by an outer join",
       "Consequence: an input that no BY names is broadcast, so every instance sees all its rows; "
       "on the preserved side of a LEFT, RIGHT or FULL join each instance emits the rows that found "
       "no match in its own part of the partitioned input, so an unmatched row comes out once per "
       "instance (N null-padded copies), and a row matched in one instance also comes out "
       "unmatched from the others. Fix: partition the preserved input too (by the join columns), "
       "or put the broadcast input on the other side."),
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


def article(word: str) -> str:
    """``a`` or ``an`` before ``word`` in a message."""
    return "an" if word[:1] in "aeiou" else "a"


def sort_key(diag: Diagnostic) -> tuple:
    return (diag.span.file, diag.span.line, diag.span.col, diag.code)
