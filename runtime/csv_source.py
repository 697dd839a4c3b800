"""CSV input files as a Spark stream with replay-stable sequence numbers (the ``ccl_csv`` source).

An input adapter of type ``toolkit_file_csv_input`` (ESP's DSV file input) becomes
:func:`read_input`: a streaming DataFrame with the columns ``__seq`` (long), ``__op`` (one letter
``i u d p s``), ``__bad`` (the reason a row is bad, null for good rows), ``__raw`` (the original line
of a bad row, else null), then the element's columns typed as in :mod:`runtime.types`.

Files: one file, or every file of a directory matching a glob, including files that appear later.
New files are picked up by later micro-batches, sorted by name within one directory listing. A file
is read once, whole, when it is first seen: writers must write it under another name (one starting
with ``.`` or ``_``, or ending in ``.tmp``; those are ignored) and rename it when complete.

A batch has one Spark partition per file, or per slice of a file larger than ``slice_bytes``
(default 4 MiB) without quote characters (cut just after a newline).

The reader parses a slice in one of two ways, with the same rows either way:

* the fast path, :func:`runtime.csv_arrow.parse_slice_arrow`: pyarrow's CSV reader and compute
  kernels (C++) parse the whole slice into one arrow table, yielded in RecordBatches of
  ``FAST_BATCH_ROWS``. It takes only slices it handles exactly like the Python path: no quote
  character, blank line, bare ``\r`` or invalid UTF-8, every row with the header's number of
  fields and a known opcode, every value in a strict plain form of its type (see that module), no
  binary column and no date/timestamp format option for a date-time column. For anything else it
  answers None, for the whole slice, and the reader uses
* the Python path, :func:`parse_file_text` (``csv.reader`` and the per-field parsers of
  :func:`column_parser`), about ten times slower, which also produces the bad rows. It is the
  reference: tests compare the fast path with it row for row. Its rows become RecordBatches of
  ``ARROW_BATCH_ROWS`` (faster than tuples, see ``bench/csv_source.py``), or tuples with the
  option ``rows_as_tuples`` (which always takes this path).

Sequence numbers: ``__seq = file_no * 2**32 + line_no`` where ``file_no`` is the file's place in the
discovery list (0-based) and ``line_no`` the 1-based physical line where the record starts. The
discovery list lives in the offsets (``{"files": [...]}``) or, with the option ``manifest_dir``, in
an append-only manifest file there (offsets are then ``{"count": n}``), so a replayed micro-batch
reads the same files with the same numbers whatever the directory looks like at replay time.

The parsing here (:class:`CsvFormat`, :func:`parse_file_text`) runs without Spark; the data source
classes import pyspark lazily enough for the Python worker, which gets everything from the options.
The fast path needs pyarrow (which pyspark's arrow support needs anyway).
"""
from __future__ import annotations

import csv
import datetime as dt
import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ccl.diagnostics import article
from ccl.splash.convert import (
    parse_boolean,
    parse_decimal,
    parse_double,
    parse_integral,
    parse_timestamp,
    truncate_time,
)
from ccl.splash.values import SplashError, make_dec

SOURCE_NAME = "ccl_csv"
SEQ, OP, BAD, RAW = "__seq", "__op", "__bad", "__raw"
META_COLUMNS = (SEQ, OP, BAD, RAW)
LINE_BITS = 32
OPS_COLUMN = "ESP_OPS"
ARROW_BATCH_ROWS = 8192  # rows per RecordBatch of the Python path
FAST_BATCH_ROWS = 65536  # rows per RecordBatch of the pyarrow fast path (runtime/csv_arrow.py)
DEFAULT_SLICE_BYTES = 4 << 20  # files larger than this are read by several tasks

# A field may be as long as a file (the csv module's default limit of 128 KB made a long text
# field, or a stray quote that runs to the end of a file, fail the whole query).
csv.field_size_limit(2**31 - 1)

_OPCODES = {"i": "i", "u": "u", "d": "d", "p": "p", "s": "s", "": "i",
            "insert": "i", "update": "u", "delete": "d", "upsert": "p", "safedelete": "s"}


@dataclass(frozen=True)
class FileSpec:
    """Where an input adapter reads: ``dir`` and either one ``file`` or a glob ``pattern``
    (neither: every file of ``dir``)."""

    dir: str
    file: str | None = None
    pattern: str | None = None


# --------------------------------------------------------------------------------------------------
# Options and formats
# --------------------------------------------------------------------------------------------------

def _flag(value: object, name: str = "") -> bool:
    """An adapter's boolean property; ValueError for a value that is neither true nor false (a
    misspelt true silently meant false)."""
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "y", "t"):
        return True
    if text in ("false", "0", "no", "n", "f", ""):
        return False
    raise ValueError(f"{name or 'property'} {value!r}: must be true or false")


_JAVA_FIELDS = {"y": ("year", r"\d{4}", r"\d{2}"), "Y": ("year", r"\d{4}", r"\d{2}"),
                "M": ("month", r"\d{1,2}", r"\d{2}"), "d": ("day", r"\d{1,2}", r"\d{2}"),
                "H": ("hour", r"\d{1,2}", r"\d{2}"), "m": ("minute", r"\d{1,2}", r"\d{2}"),
                "s": ("second", r"\d{1,2}", r"\d{2}")}


def java_pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression with named groups for a Java date-time pattern made of ``yyyy yy MM M
    dd d HH H mm ss SSS`` (any number of ``S``: a fraction of exactly that many digits), quoted
    literals (``'T'``) and punctuation; other letters are refused with ValueError. As in Java's
    parsing, ``dd`` also reads ``5`` unless another number follows without a separator
    (``yyyyMMdd``)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        j = i
        while j < len(pattern) and pattern[j] == c:
            j += 1
        run = j - i
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"date format {pattern!r}: unclosed quote")
            out.append(re.escape(pattern[i + 1:end]) if end > i + 1 else "'")
            i = end + 1
            continue
        if c in _JAVA_FIELDS:
            name, wide, two = _JAVA_FIELDS[c]
            if f"(?P<{name}>" in "".join(out):
                raise ValueError(f"date format {pattern!r}: {c!r} given twice")
            if c in "yY":
                body = r"\d{2}" if run == 2 else r"\d{4}"
            else:  # as Java parses: the letter count matters only between adjacent numbers
                adjacent = j < len(pattern) and (pattern[j] in _JAVA_FIELDS or pattern[j] == "S")
                body = two if run >= 2 and adjacent else wide
            out.append(f"(?P<{name}>{body})")
        elif c == "S":
            out.append(f"(?P<fraction>\\d{{{run}}})")
        elif c.isalpha():
            raise ValueError(f"date format {pattern!r}: unsupported letter {c!r}")
        else:
            out.append(re.escape(pattern[i:j]))
        i = j
    return re.compile("".join(out))


_STRFTIME_FIELDS = {"Y": ("year", r"\d{4}"), "y": ("year", r"\d{2}"), "m": ("month", r"\d{1,2}"),
                    "d": ("day", r"\d{1,2}"), "H": ("hour", r"\d{1,2}"), "M": ("minute", r"\d{1,2}"),
                    "S": ("second", r"\d{1,2}"), "f": ("fraction", r"\d{1,6}")}


def strftime_pattern_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a C ``strftime`` pattern (ESP's C++ adapters write formats so,
    ``%Y-%m-%dT%H:%M:%S``) made of ``%Y %y %m %d %H %M %S %f %%`` and literal text; other
    directives are refused with ValueError."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c != "%":
            out.append(re.escape(c))
            i += 1
            continue
        if i + 1 >= len(pattern):
            raise ValueError(f"date format {pattern!r}: '%' at the end")
        d = pattern[i + 1]
        if d == "%":
            out.append("%")
        elif d in _STRFTIME_FIELDS:
            name, body = _STRFTIME_FIELDS[d]
            if f"(?P<{name}>" in "".join(out):
                raise ValueError(f"date format {pattern!r}: {name} given twice")
            out.append(f"(?P<{name}>{body})")
        else:
            raise ValueError(f"date format {pattern!r}: unsupported directive '%{d}'")
        i += 2
    return re.compile("".join(out))


def _pattern_parser(pattern: str) -> Callable[[str], dt.datetime]:
    rx = strftime_pattern_regex(pattern) if "%" in pattern else java_pattern_regex(pattern)

    def parse(text: str) -> dt.datetime:
        m = rx.fullmatch(text.strip())
        if m is None:
            raise ValueError(text)
        g = m.groupdict()
        year = int(g.get("year") or 1970)
        if g.get("year") and len(g["year"]) == 2:
            year += 2000
        micros = int((g.get("fraction") or "0")[:6].ljust(6, "0"))
        return dt.datetime(year, int(g.get("month") or 1), int(g.get("day") or 1),
                           int(g.get("hour") or 0), int(g.get("minute") or 0),
                           int(g.get("second") or 0), micros)
    return parse


# ESP's adapters spell some properties with a ``csv`` prefix (toolkit_file_csv_input: csvDelimiter,
# csvHasHeader, ...) and name date formats by ESP type: SecondDate is ``date``, MsDate ``timestamp``.
_PROPERTY_ALIASES = {
    "csvdelimiter": "delimiter", "csvhasheader": "hasheader",
    "csvexpectstreamnameopcode": "expectstreamnameopcode",
    "csvdateformat": "dateformat", "csvtimestampformat": "timestampformat",
    "csvseconddateformat": "dateformat", "seconddateformat": "dateformat",
    "csvmsdateformat": "timestampformat", "msdateformat": "timestampformat",
    "csvbigdatetimeformat": "bigdatetimeformat", "csvmatchstreamname": "matchstreamname",
    "xmllistseconddateformat": "dateformat", "xmllistmsdateformat": "timestampformat",
    "xmllistbigdatetimeformat": "bigdatetimeformat",
}
XML_LIST = "xmllist"  # the ``fileformat`` property of a toolkit_file_xmllist_input adapter


def adapter_properties(options: dict | None) -> dict[str, Any]:
    """Adapter ``options`` with lower-case keys and ESP's aliases (:data:`_PROPERTY_ALIASES`)
    under the names this reader uses; a property given under its own name wins over an alias."""
    out: dict[str, Any] = {}
    for k, v in (options or {}).items():
        key = str(k).lower()
        out.setdefault(_PROPERTY_ALIASES.get(key, key), v)
        if key not in _PROPERTY_ALIASES:
            out[key] = v
    return out


@dataclass(frozen=True)
class CsvFormat:
    """The adapter properties that shape parsing (keys are case-insensitive in :meth:`from_options`).

    ``has_header`` None means "look": the first line of a file is a header when it names the
    element's columns (:func:`looks_like_header`), else it is data."""

    delimiter: str = ","
    has_header: bool | None = True
    stream_opcode: bool = False
    date_format: str | None = None
    timestamp_format: str | None = None
    bigdatetime_format: str | None = None
    stream_name: str | None = None  # with stream_opcode: read only the lines of this stream
    xml_list: bool = False  # ESP's XML list format (runtime/xml_list.py) instead of CSV

    @classmethod
    def from_options(cls, options: dict | None = None, element: str | None = None) -> CsvFormat:
        """The format of adapter ``options`` (``delimiter``, ``hasHeader``, ``expectStreamNameOpcode``,
        ``dateFormat``, ``timestampFormat``, ``bigdatetimeFormat``, ``matchStreamName`` and ESP's
        aliases of them; any case). ``\\t`` or ``tab`` is a tab; a delimiter must be one character.
        Without ``hasHeader`` a file's first line is a header only when it looks like one. With
        ``expectStreamNameOpcode`` and ``matchStreamName``, lines naming another stream than
        ``element`` are skipped: one file may hold the rows of several streams."""
        o = adapter_properties(options)
        delimiter = str(o.get("delimiter", ",") or ",")
        if delimiter.replace("\\\\", "\\") in ("\\t", "tab", "TAB"):  # \\t: an escaped escape
            delimiter = "\t"
        if len(delimiter) != 1:
            raise ValueError(f"delimiter {delimiter!r}: must be one character")
        stream_opcode = _flag(o.get("expectstreamnameopcode", "false"), "expectStreamNameOpcode")
        header = _flag(o["hasheader"], "hasHeader") if "hasheader" in o else None
        has_header = False if stream_opcode else header
        match = _flag(o.get("matchstreamname", "false"), "matchStreamName")
        match = stream_opcode and element is not None and match
        return cls(delimiter, has_header, stream_opcode, o.get("dateformat") or None,
                   o.get("timestampformat") or None, o.get("bigdatetimeformat") or None,
                   element if match else None, str(o.get("fileformat", "")).lower() == XML_LIST)

    def time_format(self, kind: str) -> str | None:
        """The pattern of date-time columns of ``kind`` (date, timestamp, bigdatetime), if any."""
        if kind == "date":
            return self.date_format
        if kind == "bigdatetime":
            return self.bigdatetime_format or self.timestamp_format
        return self.timestamp_format


def looks_like_header(fields: Sequence[str], columns: Sequence[Sequence[str]], fmt: "CsvFormat") -> bool:
    """Whether a file's first line (its ``fields``) is a header for an element with ``columns``
    (``[[name, ccl_type], ...]``): one of its fields names a column or ``ESP_OPS`` (in any case),
    and the line is not also a data row (the element's fields in order, each a value of its
    column's type) with a field that names nothing: ``1,name`` for ``(id integer, name string)``
    is data, ``id,name`` and ``name,extra`` are headers."""
    known = {str(c[0]).lower() for c in columns} | {OPS_COLUMN.lower()}
    named = [f.strip().lower() in known for f in fields]
    if not any(named):
        return False
    if all(named) or len(fields) != len(columns) or fmt.stream_opcode:
        return True
    for field, (_, ccl_type) in zip(fields, columns):
        if field.strip() == "":
            continue
        try:
            column_parser(ccl_type, fmt)(field)
        except _BadValue:
            return True  # not a value of its column: a name
    return False


class _BadValue(Exception):
    pass


_PLAIN_DECIMAL = re.compile(r"-?0*([0-9]*)(?:\.([0-9]*))?")
_ISO = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
                  r"(?:\.([0-9]{1,9}))?")


def _iso_timestamp(s: str) -> dt.datetime:
    """:func:`parse_timestamp` with a fast path for its most common form."""
    m = _ISO.fullmatch(s)
    if m:
        y, mo, d, h, mi, sec, frac = m.groups()
        try:
            return dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec),
                               int((frac or "0")[:6].ljust(6, "0")))
        except ValueError:
            pass
    return parse_timestamp(s)


def column_parser(ccl_type: str, fmt: CsvFormat) -> Callable[[str], Any]:
    """A function from a non-empty field to the Python value of ``ccl_type`` (the value a Spark
    column of :func:`runtime.types.spark_type` holds); it raises :class:`_BadValue` with the
    reason's tail (``is not a float``) when the text is not a value of the type."""
    t = ccl_type.strip().lower()
    base = re.match(r"[a-z]+", t)
    name = base.group(0) if base else t
    not_a = f"is not {article(t)} {t}"

    def guarded(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        def parse(s: str) -> Any:
            try:
                return fn(s)
            except _BadValue:
                raise
            except (SplashError, ValueError, ArithmeticError):
                raise _BadValue(not_a) from None
        return parse

    if name in ("integer", "long", "interval"):
        bits = 32 if name == "integer" else 64
        high = 2 ** (bits - 1) - 1

        def integral(s: str) -> int:
            if s.isascii() and s.isdigit():
                v = int(s)
                if v <= high:
                    return v
            if "." in s:  # parse_integral (SPLASH's cast) drops a fraction; a file's value must not lose one
                raise _BadValue(not_a)
            return parse_integral(s, bits)
        return guarded(integral)
    if name == "float":
        def double(s: str) -> float:
            try:
                if s.isascii() and s.replace(".", "", 1).lstrip("-").isdigit():
                    return float(s)
            except ValueError:
                pass
            return parse_double(s)
        return guarded(double)
    if name in ("money", "decimal"):
        from .types import spark_type
        st = spark_type(t)
        precision, scale = st.precision, st.scale  # type: ignore[attr-defined]

        def decimal(s: str) -> Decimal:
            m = _PLAIN_DECIMAL.fullmatch(s)
            if m and len(m.group(2) or "") <= scale and len(m.group(1)) <= precision - scale:
                return Decimal(s)  # exact: arrow scales it to the column's scale
            d = make_dec(parse_decimal(s), precision, scale)
            if d is None:
                raise _BadValue(f"does not fit in {t}")
            return Decimal(d)
        return guarded(decimal)
    if name == "boolean":
        return guarded(parse_boolean)
    if name in ("date", "timestamp", "bigdatetime"):
        pattern = fmt.time_format(name)
        base_parse = _pattern_parser(pattern) if pattern else _iso_timestamp
        return guarded(lambda s: truncate_time(base_parse(s), name))
    if name == "binary":
        return guarded(lambda s: bytes.fromhex(s.strip()))
    return lambda s: s


# --------------------------------------------------------------------------------------------------
# Parsing a file
# --------------------------------------------------------------------------------------------------

Row = tuple  # (seq, op, bad, raw, *values)


_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape keeps it


def _lines(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.removesuffix("\r") for ln in lines]


def _find(header: Sequence[str], name: str) -> int | None:
    for i, h in enumerate(header):
        if h == name:
            return i
    low = name.lower()
    for i, h in enumerate(header):
        if h.lower() == low:
            return i
    return None


def _unclosed_quote(text: str, delimiter: str) -> bool:
    """Whether a field of ``text`` opens a quote that never closes (the csv module then takes the
    rest of the file as that field)."""
    i, n, at_start = 0, len(text), True
    while i < n:
        if at_start and text[i] == '"':
            i += 1
            while True:
                i = text.find('"', i)
                if i < 0:
                    return True
                if text.startswith('""', i):
                    i += 2
                    continue
                break
            at_start = False
        else:
            at_start = text[i] in (delimiter, "\n")
        i += 1
    return False


def header_problem(header: Sequence[str], names: Sequence[str]) -> str | None:
    """Why a file's ``header`` does not fit the element's column ``names``, or None: a name given
    twice, or a column missing while a name matches none (most likely a misspelt or renamed
    column, whose values would be dropped and the column left null without a word). A header
    that only lacks columns (they are null) or only has extra names (ignored) is fine."""
    seen: set[str] = set()
    for h in header:
        if h.lower() in seen:
            return f"the header names '{h}' twice"
        seen.add(h.lower())
    known = {nm.lower() for nm in names} | {OPS_COLUMN.lower()}
    unknown = [h for h in header if h.lower() not in known]
    missing = [nm for nm in names if nm.lower() not in seen]
    if unknown and missing:
        return (f"the header has no column {', '.join(repr(m) for m in missing)} and names no "
                f"column with {', '.join(repr(u) for u in unknown)}; those values are not read")
    return None


def parse_file_text(text: str, columns: Sequence[Sequence[str]], fmt: CsvFormat,
                    file_no: int = 0, *, first_line: int = 0,
                    header: list[str] | None = None) -> Iterator[Row]:
    """The rows of one file's ``text``: ``(seq, op, bad, raw, *values)`` per record, values typed
    for ``columns`` (``[[name, ccl_type], ...]``). Blank lines are skipped; a header row (with
    ``fmt.has_header``) names the columns in any order, unknown names are ignored, missing element
    columns are null, and ``ESP_OPS`` holds the opcode. For a slice of a file, ``first_line`` is the
    number of lines before ``text`` and ``header`` the file's header fields."""
    lines = _lines(text)
    undecoded = _UNDECODED.search(text) is not None  # bytes that are not UTF-8 (surrogateescape)
    names = [c[0] for c in columns]
    parsers = [column_parser(c[1], fmt) for c in columns]
    n = len(columns)
    nulls = (None,) * n
    base = file_no << LINE_BITS
    reader = csv.reader([ln + "\n" for ln in lines], delimiter=fmt.delimiter)
    index: list[int | None] = list(range(n))
    ops_at: int | None = None
    lead = 2 if fmt.stream_opcode else 0
    width = n + lead
    # A slice after the first has no header line; the file's header (if any) comes as ``header``.
    header_done = fmt.has_header is False or first_line > 0
    if header is not None and fmt.has_header is not False:
        header = [h.strip() for h in header]
        index = [_find(header, nm) for nm in names]
        ops_at = _find(header, OPS_COLUMN)
        width = len(header)
        header_done = True
    prev = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            start, prev = prev, reader.line_num
            header_done = True
            why = ("a carriage return inside an unquoted field" if "new-line character" in str(e)
                   else f"not a CSV record: {e}")
            yield (base + first_line + start + 1, None, why, "\n".join(lines[start:prev])) + nulls
            continue
        start, prev = prev, reader.line_num
        if not fields or fields == [""] and n != 1:
            continue
        line_no = first_line + start + 1
        if undecoded and any(_UNDECODED.search(f) for f in fields):
            header_done = True
            raw = "\n".join(lines[start:prev]).encode("utf-8", "surrogateescape")
            yield (base + line_no, None, "not UTF-8 text", raw.decode("utf-8", "backslashreplace")) + nulls
            continue
        if prev == len(lines) and _unclosed_quote("\n".join(lines[start:prev]), fmt.delimiter):
            yield (base + line_no, None, "a quoted field is not closed before the end of the file",
                   "\n".join(lines[start:prev])) + nulls
            continue
        if not header_done and (fmt.has_header or looks_like_header(fields, columns, fmt)):
            header = [h.strip() for h in fields]
            index = [_find(header, nm) for nm in names]
            ops_at = _find(header, OPS_COLUMN)
            width = len(header)
            header_done = True
            problem = header_problem(header, names)
            if problem is not None:  # a bad record, so that it is counted and seen; rows go on
                yield (base + line_no, None, problem, "\n".join(lines[start:prev])) + nulls
            continue
        header_done = True
        if fmt.stream_name is not None and fields[0].strip() != fmt.stream_name:
            continue  # a line of another stream (ESP's adapter discards it the same way)
        seq = base + line_no
        if len(fields) != width:
            yield (seq, None, f"expected {width} fields, got {len(fields)}",
                   "\n".join(lines[start:prev])) + nulls
            continue
        if fmt.stream_opcode:
            op_text = fields[1]
        elif ops_at is not None:
            op_text = fields[ops_at]
        else:
            op_text = ""
        op = _OPCODES.get(op_text.strip().lower())
        if op is None:
            yield (seq, None, f"unknown opcode '{op_text}'", "\n".join(lines[start:prev])) + nulls
            continue
        values: list[Any] = []
        bad = None
        for k in range(n):
            i = index[k]
            if i is None:
                values.append(None)
                continue
            s = fields[i + lead]
            if s == "":
                values.append(None)
                continue
            try:
                values.append(parsers[k](s))
            except _BadValue as e:
                bad = f"column {names[k]}: '{s}' {e}"
                break
        if bad is not None:
            yield (seq, op, bad, "\n".join(lines[start:prev])) + nulls
        else:
            yield (seq, op, None, None, *values)


def read_file(path: str, columns: Sequence[Sequence[str]], fmt: CsvFormat,
              file_no: int = 0) -> Iterator[Row]:
    """The rows of the file at ``path`` (UTF-8; a record with bytes that are not is bad), see
    :func:`parse_file_text`."""
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
        text = f.read()
    return parse_file_text(text, columns, fmt, file_no)


def read_slice_bytes(path: str, fmt: CsvFormat, start: int, end: int,
                     columns: Sequence[Sequence[str]] = ()) -> tuple[bytes, list[str] | None]:
    """Bytes ``start..end`` of the file at ``path``, and the file's header fields when the slice
    is not the first one of a file with a header (else None). ``columns`` are the element's, to
    tell whether the file has a header when ``fmt`` leaves it open."""
    with open(path, "rb") as f:
        header = None
        if fmt.has_header is not False and start > 0:
            for raw in f:
                line = raw.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")
                if line:
                    header = next(csv.reader([line], delimiter=fmt.delimiter))
                    break
            if header is not None and not fmt.has_header and not looks_like_header(header, columns, fmt):
                header = None
        f.seek(start)
        data = f.read(end - start)
    return data, header


def read_slice(path: str, columns: Sequence[Sequence[str]], fmt: CsvFormat, file_no: int,
               start: int, end: int, first_line: int) -> Iterator[Row]:
    """The rows of bytes ``start..end`` of the file at ``path`` (cut just after a newline, in a file
    without quote characters), ``first_line`` lines into the file; see :func:`parse_file_text`.
    This is the Python path, the reference of :mod:`runtime.csv_arrow`."""
    data, header = read_slice_bytes(path, fmt, start, end, columns)
    return parse_file_text(data.decode("utf-8", "surrogateescape"), columns, fmt, file_no,
                           first_line=first_line, header=header)


def file_slices(path: str, slice_bytes: int) -> list[tuple[int, int, int]]:
    """``(start, end, lines before start)`` of the slices of a file: one slice for the whole file
    when it is small or holds a quote character (a quoted field may span lines), else cuts just
    after the first newline at or beyond every ``slice_bytes`` bytes. The cut depends only on the
    file's content, and sequence numbers only on lines, so a replay reads the same rows."""
    size = os.path.getsize(path)
    if slice_bytes <= 0 or size <= slice_bytes:
        return [(0, size, 0)]
    with open(path, "rb") as f:
        data = f.read()
    if b'"' in data:
        return [(0, len(data), 0)]
    out = []
    start, lines = 0, 0
    while start < len(data):
        cut = data.find(b"\n", start + slice_bytes)
        end = len(data) if cut < 0 else cut + 1
        out.append((start, end, lines))
        lines += data.count(b"\n", start, end)
        start = end
    return out


def rows_to_arrow(rows: Sequence[Row], schema: Any) -> Any:
    """``rows`` as one pyarrow RecordBatch of the arrow form of the Spark ``schema``."""
    import pyarrow as pa
    arrays = []
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    for field, values in zip(schema, columns):
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------------------------------
# File discovery and the manifest
# --------------------------------------------------------------------------------------------------

def wanted(spec: FileSpec, name: str) -> bool:
    """Whether a file called ``name`` in ``spec.dir`` is one of ``spec``'s input files: the named
    file, or one matching the pattern; hidden ``.x``/``_x`` names and ``*.tmp`` (files being
    written) are never taken."""
    if spec.file:
        return name == spec.file
    return (not name.startswith((".", "_")) and not name.endswith(".tmp")
            and (not spec.pattern or any(fnmatch.fnmatchcase(name, p) for p in _braces(spec.pattern))))


def _braces(pattern: str) -> list[str]:
    """A glob's ``{a,b}`` alternatives spelled out (Java's globs have them, fnmatch does not)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    return [alt for part in m.group(1).split(",")
            for alt in _braces(pattern[:m.start()] + part + pattern[m.end():])]


def list_new_files(spec: FileSpec, known: Iterable[str]) -> list[str]:
    """Names of complete, not yet known files of ``spec`` (see :func:`wanted`), sorted."""
    seen = set(known)
    if spec.file:
        names = [spec.file] if os.path.isfile(os.path.join(spec.dir, spec.file)) else []
    else:
        try:
            names = [e.name for e in os.scandir(spec.dir) if e.is_file()]
        except FileNotFoundError:
            names = []
        names = [nm for nm in names if wanted(spec, nm)]
    return sorted(nm for nm in names if nm not in seen)


class Manifest:
    """An append-only list of discovered file names, one per line, in ``DIR/files.txt``."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "files.txt")
        os.makedirs(directory, exist_ok=True)

    def read(self) -> list[str]:
        """The complete lines (a torn last line from a crash is not a name)."""
        try:
            with open(self.path, encoding="utf-8", newline="") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        return data.split("\n")[:-1]

    def append(self, names: Sequence[str]) -> None:
        """Add ``names`` after the complete lines, durably."""
        if not names:
            return
        with open(self.path, "a+b") as f:
            f.seek(0)
            data = f.read()
            good = data.rfind(b"\n") + 1
            if good != len(data):
                f.truncate(good)
            f.seek(0, os.SEEK_END)
            f.write("".join(nm + "\n" for nm in names).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())


def read_partition(path: str, columns: Sequence[Sequence[str]], fmt: CsvFormat, file_no: int,
                   start: int, end: int, first_line: int, schema: Any = None) -> Iterator[Any]:
    """The rows of bytes ``start..end`` of the file at ``path`` (a slice of :func:`file_slices`,
    ``first_line`` lines into the file, numbered ``file_no``): pyarrow RecordBatches of the arrow
    ``schema`` (the fast path when it takes the slice, else the Python path's rows converted), or
    with no ``schema`` tuples of the Python path."""
    data, header = read_slice_bytes(path, fmt, start, end, columns)
    rows: Iterator[Row]
    if fmt.xml_list:
        from .xml_list import parse_xml_list
        rows = parse_xml_list(data.decode("utf-8", "replace"), columns, fmt, file_no)
    else:
        if schema is not None:
            from .csv_arrow import parse_slice_arrow
            table = parse_slice_arrow(data, columns, fmt, file_no, first_line=first_line,
                                      header=header, schema=schema)
            if table is not None:
                for batch in table.to_batches(max_chunksize=FAST_BATCH_ROWS):
                    if batch.num_rows:
                        yield batch
                return
        rows = parse_file_text(data.decode("utf-8", "surrogateescape"), columns, fmt, file_no,
                               first_line=first_line, header=header)
    if schema is None:
        yield from rows
        return
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= ARROW_BATCH_ROWS:
            yield rows_to_arrow(chunk, schema)
            chunk = []
    if chunk:
        yield rows_to_arrow(chunk, schema)


# --------------------------------------------------------------------------------------------------
# The Spark data source
# --------------------------------------------------------------------------------------------------

def output_schema(columns: Sequence[Sequence[str]]) -> Any:
    """The Spark schema of the source: the four meta columns, then ``columns``."""
    from pyspark.sql import types as T

    from .types import spark_type
    meta = [T.StructField(SEQ, T.LongType(), False), T.StructField(OP, T.StringType(), True),
            T.StructField(BAD, T.StringType(), True), T.StructField(RAW, T.StringType(), True)]
    return T.StructType(meta + [T.StructField(nm, spark_type(t), True) for nm, t in columns])


def _make_source_classes() -> tuple[type, type]:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamReader,
        InputPartition,
    )
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxFiles,
        SupportsTriggerAvailableNow,
    )

    class FilePartition(InputPartition):
        def __init__(self, file_no: int, path: str, start: int, end: int, first_line: int) -> None:
            super().__init__((file_no, path, start, end, first_line))
            self.file_no, self.path = file_no, path
            self.start, self.end, self.first_line = start, end, first_line

    class CclCsvStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        """Offsets ``{"files": [names in discovery order]}`` or, with a manifest, ``{"count": n}``."""

        def __init__(self, schema: Any, options: dict) -> None:
            self.schema = schema
            self.columns = json.loads(options["columns"])
            self.spec = FileSpec(options["dir"], options.get("file") or None,
                                 options.get("pattern") or None)
            self.fmt = CsvFormat.from_options(json.loads(options.get("adapter") or "{}"),
                                              options.get("element") or None)
            self.max_files = int(options.get("max_files_per_batch") or 0)
            self.manifest_dir = options.get("manifest_dir") or None
            self.as_tuples = _flag(options.get("rows_as_tuples", "false"))
            self.slice_bytes = int(options.get("slice_bytes") or DEFAULT_SLICE_BYTES)
            self.target: set[str] | None = None  # files present when AvailableNow began

        # driver side -----------------------------------------------------------------------
        def _names(self, offset: dict) -> list[str]:
            if "files" in offset:
                return list(offset["files"])
            return Manifest(self.manifest_dir).read()[:offset["count"]]  # type: ignore[arg-type]

        def _offset(self, names: list[str]) -> dict:
            return {"count": len(names)} if self.manifest_dir else {"files": names}

        def _discover(self, done: list[str]) -> list[str]:
            """``done`` (the files of the start offset), then the files known or found since, in
            discovery order (the manifest's order, or new names sorted)."""
            if self.manifest_dir:
                manifest = Manifest(self.manifest_dir)
                known = manifest.read()
                new = list_new_files(self.spec, known)
                manifest.append(new)
                return known + new
            return done + list_new_files(self.spec, done)

        def initialOffset(self) -> dict:
            return self._offset([])

        def getDefaultReadLimit(self) -> Any:
            return ReadMaxFiles(self.max_files) if self.max_files > 0 else ReadAllAvailable()

        def prepareForTriggerAvailableNow(self) -> None:
            self.target = set(list_new_files(self.spec, ()))

        def latestOffset(self, start: dict, limit: Any) -> dict:
            done = self._names(start)
            names = self._discover(done)
            end = len(names)
            if self.target is not None:  # Trigger.AvailableNow: only files present at its start
                end = len(done)
                while end < len(names) and names[end] in self.target:
                    end += 1
            if isinstance(limit, ReadMaxFiles) and limit.max_files > 0:
                end = min(end, len(done) + limit.max_files)
            return self._offset(names[:end])

        def partitions(self, start: dict, end: dict) -> Sequence[Any]:
            first = len(self._names(start))
            names = self._names(end)
            out = []
            for no in range(first, len(names)):
                path = os.path.join(self.spec.dir, names[no])
                slice_bytes = 0 if self.fmt.xml_list else self.slice_bytes
                for start_byte, end_byte, lines in file_slices(path, slice_bytes):
                    out.append(FilePartition(no, path, start_byte, end_byte, lines))
            return out

        def commit(self, end: dict) -> None:
            pass

        # worker side -----------------------------------------------------------------------
        def read(self, partition: Any) -> Iterator[Any]:
            schema = None
            if not self.as_tuples:
                from pyspark.sql.pandas.types import to_arrow_schema
                schema = to_arrow_schema(self.schema, timezone="UTC")
            return read_partition(partition.path, self.columns, self.fmt, partition.file_no,
                                  partition.start, partition.end, partition.first_line, schema)

    class CclCsvDataSource(DataSource):
        """``spark.readStream.format("ccl_csv")``: options ``columns`` (JSON ``[[name, type]]``),
        ``dir``, ``file``, ``pattern``, ``adapter`` (JSON of the adapter properties),
        ``max_files_per_batch``, ``manifest_dir``."""

        @classmethod
        def name(cls) -> str:
            return SOURCE_NAME

        def schema(self) -> Any:
            return output_schema(json.loads(self.options["columns"]))

        def streamReader(self, schema: Any) -> Any:
            return CclCsvStreamReader(schema, dict(self.options))

    return CclCsvDataSource, CclCsvStreamReader


_CLASSES: tuple[type, type] | None = None


def data_source_class() -> type:
    """The ``ccl_csv`` DataSource class (defined on first use, so that importing this module does
    not need pyspark)."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _make_source_classes()
    return _CLASSES[0]


def read_input(spark: Any, element: dict, files: FileSpec, *,
               options: dict | None = None) -> Any:
    """A streaming DataFrame of the CSV files ``files`` for the plan element ``element`` (its
    ``columns`` are ``[[name, ccl_type], ...]``): ``__seq, __op, __bad, __raw`` then the element's
    columns. ``options`` are the adapter properties (``delimiter``, ``hasHeader``,
    ``expectStreamNameOpcode``, ``dateFormat``, ``timestampFormat``; any case) plus the runtime's
    ``max_files_per_batch`` and ``manifest_dir``. Bad rows are returned, not dropped."""
    spark.dataSource.register(data_source_class())
    opts = dict(options or {})
    runtime_keys = {"max_files_per_batch", "manifest_dir", "rows_as_tuples", "slice_bytes"}
    runtime = {k.lower(): str(v) for k, v in opts.items() if k.lower() in runtime_keys}
    adapter = {k: v for k, v in opts.items() if k.lower() not in runtime_keys}
    CsvFormat.from_options(adapter)  # fail early on a bad delimiter or date format
    for _, t in element["columns"]:
        column_parser(t, CsvFormat.from_options(adapter))
    reader = (spark.readStream.format(SOURCE_NAME)
              .option("columns", json.dumps(element["columns"]))
              .option("element", str(element.get("name", "")))
              .option("dir", os.path.abspath(files.dir))
              .option("file", files.file or "").option("pattern", files.pattern or "")
              .option("adapter", json.dumps(adapter)))
    for k, v in runtime.items():
        reader = reader.option(k, v)
    return reader.load()
