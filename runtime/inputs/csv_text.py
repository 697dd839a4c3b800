"""CSV text to rows: the Python parser (the reference), file slices, rows as Arrow."""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from .formats import LINE_BITS, OPCODES, OPS_COLUMN, CsvFormat, find_column, header_problem
from .values import BadValue, column_parser

SEQ, OP, BAD, RAW = "__seq", "__op", "__bad", "__raw"
META_COLUMNS = (SEQ, OP, BAD, RAW)
ARROW_BATCH_ROWS = 8192  # rows per RecordBatch of the Python path
DEFAULT_SLICE_BYTES = 4 << 20  # files larger than this are read by several tasks

# A field may be as long as a file (the csv module's default limit of 128 KB made a long text
# field, or a stray quote that runs to the end of a file, fail the whole query).
csv.field_size_limit(2**31 - 1)

Row = tuple  # (seq, op, bad, raw, *values)


_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape keeps it


def split_lines(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.removesuffix("\r") for ln in lines]



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
        except BadValue:
            return True  # not a value of its column: a name
    return False


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



def parse_file_text(text: str, columns: Sequence[Sequence[str]], fmt: CsvFormat,
                    file_no: int = 0, *, first_line: int = 0,
                    header: list[str] | None = None) -> Iterator[Row]:
    """The rows of one file's ``text``: ``(seq, op, bad, raw, *values)`` per record, values typed
    for ``columns`` (``[[name, ccl_type], ...]``). Blank lines are skipped; a header row (with
    ``fmt.has_header``) names the columns in any order, unknown names are ignored, missing element
    columns are null, and ``ESP_OPS`` holds the opcode. For a slice of a file, ``first_line`` is the
    number of lines before ``text`` and ``header`` the file's header fields."""
    lines = split_lines(text)
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
        index = [find_column(header, nm) for nm in names]
        ops_at = find_column(header, OPS_COLUMN)
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
            index = [find_column(header, nm) for nm in names]
            ops_at = find_column(header, OPS_COLUMN)
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
        op = OPCODES.get(op_text.strip().lower())
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
            except BadValue as e:
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
    This is the Python path, the reference of :mod:`runtime.inputs.csv_arrow`."""
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


def output_schema(columns: Sequence[Sequence[str]]) -> Any:
    """The Spark schema of the source: the four meta columns, then ``columns``."""
    from pyspark.sql import types as T

    from ..types import spark_type
    meta = [T.StructField(SEQ, T.LongType(), False), T.StructField(OP, T.StringType(), True),
            T.StructField(BAD, T.StringType(), True), T.StructField(RAW, T.StringType(), True)]
    return T.StructType(meta + [T.StructField(nm, spark_type(t), True) for nm, t in columns])
