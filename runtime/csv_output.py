"""CSV output files in the form :mod:`runtime.inputs` reads back (ESP's DSV file format).

A header row of column names (``ESP_OPS`` first when the rows carry opcodes), then one row per
record; null is an empty field (so an empty string reads back as null); fields are quoted only when
they must be. Files are written to ``PATH.tmp`` and renamed, so a directory reader never sees a
partial file.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from functools import partial
from typing import Any

_DECIMAL = re.compile(r"^(money|decimal)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


def _scale(ccl_type: str) -> int | None:
    m = _DECIMAL.match(ccl_type)
    if not m:
        return None
    if m.group(1) == "money":
        return int(m.group(2)) if m.group(2) else 4
    return int(m.group(3)) if m.group(3) else 0


def _utc(v: dt.datetime) -> dt.datetime:
    return v.astimezone(dt.UTC).replace(tzinfo=None) if v.tzinfo is not None else v


def format_value(v: Any, ccl_type: str) -> str:
    """The CSV text of value ``v`` of CCL type ``ccl_type``: null is ``""``; booleans ``true`` /
    ``false``; floats in Python's shortest form (``1.5``, ``100.0``, ``1e+20``, ``NaN``,
    ``Infinity``); money and decimals in plain notation with their scale (``1.50``); ``date`` as
    ``YYYY-MM-DDTHH:MM:SS``, ``timestamp`` with milliseconds, ``bigdatetime`` with microseconds;
    binary as hex; intervals (microseconds) and integers as digits; strings as they are."""
    if v is None:
        return ""
    t = ccl_type.strip().lower()
    if isinstance(v, bool) or t == "boolean":
        return "true" if v else "false"
    if t == "float" or isinstance(v, float):
        x = float(v)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return repr(x)
    scale = _scale(t)
    if scale is not None:
        d = Decimal(v) if not isinstance(v, Decimal) else v
        return format(d.quantize(Decimal(1).scaleb(-scale)), "f")
    if isinstance(v, dt.datetime) or t in ("date", "timestamp", "bigdatetime"):
        if isinstance(v, str):
            return v
        if not isinstance(v, dt.datetime):  # a date
            v = dt.datetime(v.year, v.month, v.day)
        v = _utc(v)
        text = v.strftime("%Y-%m-%dT%H:%M:%S")
        if t == "date":
            return text
        if t == "bigdatetime":
            return f"{text}.{v.microsecond:06d}"
        return f"{text}.{v.microsecond // 1000:03d}"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.timedelta):
        return str(v // dt.timedelta(microseconds=1))
    return str(v)


def value_formatter(ccl_type: str) -> Callable[[Any], str]:
    """:func:`format_value` for one column of ``ccl_type``: the same text, with the checks that
    depend only on the type made once (a column of 50,000 values formats about 3 times faster)."""
    t = ccl_type.strip().lower()
    if t == "float":
        def fmt(v: Any) -> str:
            if v.__class__ is float and math.isfinite(v):
                return repr(v)
            return format_value(v, t)
    elif t in ("integer", "long"):
        def fmt(v: Any) -> str:
            return str(v) if v.__class__ is int else format_value(v, t)
    elif t == "string":
        def fmt(v: Any) -> str:
            return v if v.__class__ is str else format_value(v, t)
    else:
        def fmt(v: Any) -> str:
            return format_value(v, t)
    return fmt


def _get(row: Any, key: str) -> Any:
    try:
        return row[key]
    except (KeyError, ValueError, IndexError):
        return None


def write_csv(path: str, columns: list[list[str]], rows: Iterable[Mapping[str, Any]], *,
              delimiter: str = ",", opcodes: bool = False, header: bool = True,
              stream_name: str | None = None) -> int:
    """Write ``rows`` (mappings, or pyspark Rows, by column name) as a CSV file at ``path`` with a
    header of the ``columns`` names (``[[name, ccl_type], ...]``); with ``opcodes`` the first column
    is ``ESP_OPS``, taken from each row's ``__op`` (``i`` when missing). Without ``header`` there is
    no header row and no ``ESP_OPS`` column; with ``stream_name`` (ESP's expectStreamNameOpcode
    form) each line starts with that name and the opcode, and there is no header. Written to
    ``path + ".tmp"`` and renamed; returns the number of rows written."""
    names = [c[0] for c in columns]
    formatters = [value_formatter(c[1]) for c in columns]

    def lines() -> Iterator[tuple[str | None, list[str]]]:
        for row in rows:
            get = row.get if isinstance(row, dict) else partial(_get, row)
            yield get("__op"), [fmt(get(n)) for n, fmt in zip(names, formatters)]
    return _write(path, names, lines(), delimiter, opcodes, header, stream_name)


def write_csv_tables(path: str, columns: list[list[str]], tables: Iterable[Any], *,
                     delimiter: str = ",", opcodes: bool = False, header: bool = True,
                     stream_name: str | None = None) -> int:
    """:func:`write_csv` for rows given as pyarrow Tables (or RecordBatches) with the columns by
    name (and ``__op``): the same file, each column formatted as a whole (pyarrow casts where they
    give the same text as :func:`format_value`) and the lines joined as text, with the csv module
    writing only the lines with a field that may need quoting."""
    if stream_name is not None:
        header = False
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        if header:
            f.write(csv_header(columns, delimiter=delimiter, opcodes=opcodes))
        count = write_csv_rows(f, columns, tables, delimiter=delimiter, opcodes=opcodes,
                               header=header, stream_name=stream_name)
    os.replace(tmp, path)
    return count


def csv_header(columns: list[list[str]], *, delimiter: str = ",", opcodes: bool = False) -> str:
    """The header line :func:`write_csv_tables` writes (``ESP_OPS`` first with ``opcodes``)."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerow(
        (["ESP_OPS"] if opcodes else []) + [c[0] for c in columns])
    return out.getvalue()


def write_csv_rows(f: Any, columns: list[list[str]], tables: Iterable[Any], *,
                   delimiter: str = ",", opcodes: bool = False, header: bool = True,
                   stream_name: str | None = None) -> int:
    """The lines of :func:`write_csv_tables` after its header (written to the open text file
    ``f``, opened with ``newline=""``); returns the number of rows. Each row's line depends on
    that row only: the lines of tables written one after another are those of the tables
    written at once. ``header`` and ``stream_name`` as for :func:`write_csv_tables` (the
    ``ESP_OPS`` field is written only with a header)."""
    names = [c[0] for c in columns]
    types = [c[1].strip().lower() for c in columns]
    formatters = [value_formatter(t) for t in types]
    if stream_name is not None:
        header = False
    count = 0
    writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
    quoted = csv.writer(f, delimiter=delimiter, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for table in tables:
        rows = table.num_rows
        if not rows:
            continue
        have = set(table.schema.names)
        texts = [_column_arrow(table.column(n), t, fmt) if n in have else None
                 for n, t, fmt in zip(names, types, formatters)]
        if stream_name is None and not (opcodes and header) and _plain(texts, delimiter):
            _write_joined(f, texts, delimiter)
            count += rows
            continue
        fields = [x.to_pylist() if x is not None else [""] * rows for x in texts]
        if stream_name is not None or (opcodes and header):
            ops = ([op or "i" for op in table.column("__op").to_pylist()] if "__op" in have
                   else ["i"] * rows)
            fields[:0] = [[stream_name] * rows, ops] if stream_name is not None else [ops]
        _write_lines(f, fields, rows, delimiter, writer, quoted)
        count += rows
    return count


def _column_arrow(column: Any, ccl_type: str, fmt: Callable[[Any], str]) -> Any:
    """The CSV text of each value of an Arrow ``column`` of ``ccl_type`` (as ``fmt`` gives it), as
    an Arrow string array without nulls: integers, booleans and strings through pyarrow, where
    its text is exactly :func:`format_value`'s, everything else value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_boolean(kind) or (pa.types.is_integer(kind) and ccl_type in _DIGITS):
        # Arrow writes integers in digits and booleans as true/false, as str() and format_value do
        return pc.fill_null(pc.cast(column, pa.string()), "")
    if ccl_type == "string" and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return pc.fill_null(column, "").cast(pa.string())
    if ccl_type == "float" and pa.types.is_float64(kind):
        return _float_text(column, fmt)
    return pa.array(list(map(fmt, column.to_pylist())), pa.string())


def _plain(texts: list[Any], delimiter: str) -> bool:
    """Whether the lines of ``texts`` (the columns' text, None: a column written empty) can be
    joined as they are: at least one column, no field with a character that may need quoting,
    and no empty field alone on its line (which the csv module writes as ``""``). The text's
    UTF-8 bytes are searched: a character's encoding matches only that character."""
    import numpy as np

    if not texts or (len(texts) == 1 and texts[0] is None):
        return False
    specials = [c.encode("utf-8") for c in {delimiter, '"', "\n", "\r"}]
    for text in texts:
        if text is None:
            continue
        offsets, raw = _utf8_of(text)
        if len(texts) == 1 and (np.diff(offsets) == 0).any():
            return False
        if any(special in raw for special in specials):
            return False
    return True


SLICE_ROWS = 100_000  # lines joined in Arrow at a time (bounds the joined text's size)


def _write_joined(f: Any, texts: list[Any], delimiter: str) -> None:
    """Write the lines of ``texts`` (see :func:`_plain`, which they pass) to ``f``: each row's
    fields joined with ``delimiter`` and a line feed, in Arrow, the text written as it lies in
    the joined array's buffer (no Python string per value or line)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = len(next(t for t in texts if t is not None))
    for start in range(0, rows, SLICE_ROWS):
        parts = [t.slice(start, SLICE_ROWS) if t is not None else pa.scalar("") for t in texts]
        lines = pc.binary_join_element_wise(*parts, delimiter) if len(parts) > 1 else parts[0]
        lines = pc.binary_join_element_wise(lines, pa.scalar(""), "\n")  # each line and "\n"
        f.write(_utf8_of(lines)[1].decode("utf-8"))


def _utf8_of(text: Any) -> tuple[Any, bytes]:
    """The value offsets (a NumPy array, one more than the values) of an Arrow string array and
    the UTF-8 bytes its values span."""
    import numpy as np

    offsets = np.frombuffer(text.buffers()[1], np.int32)[text.offset:text.offset + len(text) + 1]
    data = text.buffers()[2]
    return offsets, b"" if data is None else memoryview(data)[offsets[0]:offsets[-1]].tobytes()


def _float_text(column: Any, fmt: Callable[[Any], str]) -> Any:
    """The text of each value of a float64 ``column`` (an Arrow string array): Python's ``repr``
    (``fmt``'s text). Arrow's
    cast to string writes the same shortest digits, in plain notation when it does not use an
    exponent, but without ``.0`` on a whole number (``100`` for ``100.0``): its text is used, with
    that ``.0`` added, for the values Python writes in plain notation (0, and magnitudes from 1e-4
    to 1e16) and Arrow writes without an exponent; every other value is formatted by ``fmt``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    text = pc.cast(column, pa.string())
    magnitude = pc.abs(column)
    plain = pc.and_(pc.and_(pc.is_finite(column), pc.invert(pc.match_substring(text, "e"))),
                    pc.or_(pc.equal(magnitude, 0.0),
                           pc.and_(pc.greater_equal(magnitude, 1e-4), pc.less(magnitude, 1e16))))
    plain = pc.fill_null(plain, False)
    whole = pc.invert(pc.match_substring(text, "."))
    out = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    others = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    if not len(others):
        return out
    listed = out.to_pylist()
    for i in others.tolist():
        listed[i] = fmt(column[i].as_py())
    return pa.array(listed, pa.string())


_DIGITS = frozenset({"integer", "long", "interval"})  # types format_value writes an int of as str(v)


def _write_lines(f: Any, fields: list[list[str]], rows: int, delimiter: str, writer: Any,
                 quoted: Any) -> None:
    """Write ``rows`` lines of the column-wise ``fields`` to ``f``: joined with ``delimiter``, but
    through the csv ``writer`` (``quoted``: with a carriage return, which the csv module does not
    quote) when a field has a character that may need quoting, or is the line's only field and
    empty (which the csv module writes as ``""``)."""
    specials = {delimiter, '"', "\n", "\r"}
    careful: list[bool] | None = None
    for col in fields:
        text = "\0".join(col)
        if any(c in text for c in specials):
            marks = [any(c in x for c in specials) for x in col]
            careful = marks if careful is None else [a or b for a, b in zip(careful, marks)]
    if len(fields) == 1:
        empty = [not x for x in fields[0]]
        careful = empty if careful is None else [a or b for a, b in zip(careful, empty)]
    if not fields:  # no columns: empty lines
        f.write("\n" * rows)
        return
    lines = zip(*fields)
    if careful is None or not any(careful):
        f.write("\n".join(map(delimiter.join, lines)))
        f.write("\n")
        return
    plain: list[str] = []
    for line, care in zip(lines, careful):
        if not care:
            plain.append(delimiter.join(line))
            continue
        if plain:
            f.write("\n".join(plain))
            f.write("\n")
            plain = []
        (quoted if any("\r" in x for x in line) else writer).writerow(line)
    if plain:
        f.write("\n".join(plain))
        f.write("\n")


def _write(path: str, names: list[str], lines: Iterable[tuple[str | None, list[str]]],
           delimiter: str, opcodes: bool, header: bool, stream_name: str | None) -> int:
    """The file of :func:`write_csv` from ``(opcode, formatted fields)`` per row."""
    tmp = path + ".tmp"
    count = 0
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        # the csv module quotes a field with a line feed but not one with a lone carriage return,
        # which the reader (and any CSV reader splitting lines) would take for a line break
        quoted = csv.writer(f, delimiter=delimiter, lineterminator="\n", quoting=csv.QUOTE_ALL)
        if stream_name is not None:
            header = False
        if header:
            writer.writerow((["ESP_OPS"] if opcodes else []) + names)
        for op, fields in lines:
            if stream_name is not None:
                fields[:0] = [stream_name, op or "i"]
            elif opcodes and header:
                fields.insert(0, op or "i")
            (quoted if any("\r" in x for x in fields) else writer).writerow(fields)
            count += 1
    os.replace(tmp, path)
    return count
