"""The vectorized fast path of the ``ccl_csv`` source: one slice of a CSV file parsed by pyarrow.

:func:`parse_slice_arrow` takes what :func:`runtime.inputs.csv_text.parse_file_text` takes (the bytes or
text of one slice, the element's ``[[name, ccl_type]]`` columns, the :class:`CsvFormat`, the file
number, the lines before the slice and, for later slices, the file's header fields) and returns
the same rows as a pyarrow Table in the source's arrow schema, or None: "not sure, use the Python
path". It answers only when every record of the slice is a good row that the Python path would
produce in exactly the same way; anything else (a quote character, a blank line, a bare ``\\r``, a
NUL, invalid UTF-8, a row with another number of fields, an unknown opcode, a value that is not in
one of the strict forms below, a binary column, a date or timestamp format option for a date-time
column) gives None for the whole slice, and the Python path then produces the rows, bad ones
included, as it always has.

Accepted value forms (an empty field is null for every type, as in the Python path):

* integer, long, interval: ``-?[0-9]+``, cast with overflow checking (an overflow gives None);
* float: ``-?[0-9]+(.[0-9]*)?`` or ``-?.[0-9]+`` (no exponent, NaN, suffix or blank);
* money, decimal(p, s): the same plain forms with at most ``s`` fraction digits and at most
  ``p - s`` integer digits after leading zeros (``_PLAIN_DECIMAL`` of :mod:`runtime.inputs.values`);
* boolean: whatever :func:`ccl.splash.convert.parse_boolean` accepts (its distinct values are
  checked by that very function);
* date, timestamp, bigdatetime: ``YYYY-MM-DD[T ]HH:MM:SS[.f{1,9}]`` with a valid date and time,
  the fraction cut to microseconds, then to seconds (date) or milliseconds (timestamp);
* string and unknown types: the text unchanged.

The opcode (``ESP_OPS``, or the second field with ``expectStreamNameOpcode``) is mapped through
``OPCODES`` after ``strip().lower()`` of each distinct value, exactly as the Python path does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ccl.splash.convert import parse_boolean
from ccl.splash.values import SplashError

from .csv_text import looks_like_header
from .formats import LINE_BITS, OPCODES, OPS_COLUMN, CsvFormat, find_column, header_problem

_BOM = b"\xef\xbb\xbf"
_INTEGRAL = r"^-?[0-9]+$"
_FLOAT = r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$"
_ISO = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?$"
_TIME_LENGTH = {"date": 19, "timestamp": 23, "bigdatetime": 26}  # characters kept before the cast
_INTEGRAL_TYPES = {"integer": pa.int32(), "long": pa.int64(), "interval": pa.int64()}


class _Fallback(Exception):
    """The slice holds something the fast path does not handle exactly like the Python path."""


def source_arrow_schema(columns: Sequence[Sequence[str]]) -> pa.Schema:
    """The arrow schema of the ``ccl_csv`` source for ``columns`` (as the reader converts it from
    the Spark schema; needs pyspark)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from .csv_text import output_schema
    return to_arrow_schema(output_schema(columns), timezone="UTC")


def _type_name(ccl_type: str) -> str:
    """The base name of a CCL type as :func:`runtime.inputs.values.column_parser` picks its parser."""
    t = ccl_type.strip().lower()
    m = re.match(r"[a-z]+", t)
    return m.group(0) if m else t


def _all_match(col: pa.ChunkedArray | pa.Array, pattern: str) -> bool:
    """Whether every non-null value of ``col`` matches the RE2 ``pattern``."""
    if col.null_count == len(col):
        return True
    return bool(pc.all(pc.match_substring_regex(col, pattern)).as_py())


def _map_distinct(col: pa.Array, fn: Any, out_type: pa.DataType) -> pa.Array:
    """``fn`` applied to each distinct non-null value of the string array ``col`` (``fn`` raises
    :class:`_Fallback` to refuse); nulls stay null."""
    enc = pc.dictionary_encode(col)
    mapped = pa.array([fn(v) for v in enc.dictionary.to_pylist()], type=out_type)
    return pc.take(mapped, enc.indices)


def _boolean(s: str) -> bool:
    try:
        return parse_boolean(s)
    except SplashError:
        raise _Fallback from None


def _convert(col: pa.Array, name: str, target: pa.DataType) -> pa.Array:
    """The string array ``col`` (empty fields already null) as ``target`` for the CCL type base
    name ``name``; raises :class:`_Fallback` unless every value is in an accepted form."""
    if name in _INTEGRAL_TYPES:
        if target != _INTEGRAL_TYPES[name] or not _all_match(col, _INTEGRAL):
            raise _Fallback
        return pc.cast(col, target)  # ArrowInvalid on overflow
    if name == "float":
        if target != pa.float64() or not _all_match(col, _FLOAT):
            raise _Fallback
        return pc.cast(col, target)
    if name in ("money", "decimal"):
        if not pa.types.is_decimal(target):
            raise _Fallback
        whole, scale = target.precision - target.scale, target.scale
        if not (_all_match(col, rf"^-?0*[0-9]{{0,{whole}}}(?:\.[0-9]{{0,{scale}}})?$")
                and _all_match(col, r"[0-9]")):
            raise _Fallback
        return pc.cast(col, target)
    if name == "boolean":
        if target != pa.bool_():
            raise _Fallback
        return _map_distinct(col, _boolean, pa.bool_())
    if name in _TIME_LENGTH:
        if not pa.types.is_timestamp(target) or target.unit != "us" or not _all_match(col, _ISO):
            raise _Fallback
        if col.null_count < len(col) and pc.any(pc.starts_with(col, "0000")).as_py():
            raise _Fallback  # year 0: arrow takes it, Python's datetime does not
        cut = pc.utf8_slice_codeunits(col, 0, _TIME_LENGTH[name])
        return pc.cast(pc.cast(cut, pa.timestamp("us")), target)  # ArrowInvalid on a bad date
    if name == "binary" or not (pa.types.is_string(target) or pa.types.is_large_string(target)):
        raise _Fallback
    return col.cast(target)


def _checked_bytes(data: bytes | str, delimiter: str) -> bytes:
    """The slice as bytes without a leading BOM, or :class:`_Fallback` when it holds what the
    fast path does not split exactly like ``csv.reader`` over ``_lines``."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fallback from None
    if not (len(delimiter) == 1 and delimiter.isascii() and delimiter not in '"\r\n\x00'):
        raise _Fallback
    data = data.removeprefix(_BOM)
    if b'"' in data or b"\x00" in data:
        raise _Fallback
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        raise _Fallback  # a bare \r
    if data.startswith((b"\n", b"\r\n")) or b"\n\n" in data or b"\n\r\n" in data:
        raise _Fallback  # a blank line: line numbers would no longer be row numbers
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Fallback from None
    return data


def parse_slice_arrow(data: bytes | str, columns: Sequence[Sequence[str]], fmt: CsvFormat,
                      file_no: int = 0, *, first_line: int = 0, header: list[str] | None = None,
                      schema: pa.Schema | None = None, use_threads: bool = False
                      ) -> pa.Table | None:
    """The rows of one slice as a pyarrow Table of ``schema`` (default
    :func:`source_arrow_schema`), equal row for row to ``parse_file_text(text, columns, fmt,
    file_no, first_line=first_line, header=header)``; or None when the slice holds anything this
    path does not handle exactly like that function (see the module docstring). ``use_threads``:
    let pyarrow parse with its thread pool (off by default: Spark already runs one task per core,
    and on a 4 MiB slice one thread was as fast)."""
    try:
        return _parse(data, columns, fmt, file_no, first_line, header,
                      schema if schema is not None else source_arrow_schema(columns), use_threads)
    except (_Fallback, pa.ArrowException):  # ArrowInvalid: a field count, an overflow, a bad date
        return None


def _parse(data: bytes | str, columns: Sequence[Sequence[str]], fmt: CsvFormat, file_no: int,
           first_line: int, header: list[str] | None, schema: pa.Schema,
           use_threads: bool) -> pa.Table:
    names = [c[0] for c in columns]
    kinds = [_type_name(c[1]) for c in columns]
    n = len(columns)
    if (len(schema) != n + 4 or (fmt.has_header and fmt.stream_opcode) or "binary" in kinds
            or fmt.stream_name is not None):  # lines of other streams: the Python path skips them
        raise _Fallback
    if any(kind in _TIME_LENGTH and fmt.time_format(kind) for kind in kinds):
        raise _Fallback
    body = _checked_bytes(data, fmt.delimiter)
    lead = 2 if fmt.stream_opcode else 0
    index: list[int | None] = list(range(lead, n + lead))
    ops_at: int | None = 1 if fmt.stream_opcode else None
    width = n + lead
    header_lines = 0
    if fmt.has_header is not False and header is None and first_line == 0:
        cut = body.find(b"\n")
        line = (body if cut < 0 else body[:cut]).decode("utf-8").removesuffix("\r").split(fmt.delimiter)
        if fmt.has_header or looks_like_header(line, columns, fmt):
            header, body, header_lines = line, (b"" if cut < 0 else body[cut + 1:]), 1
            if header != [""] and header_problem([h.strip() for h in header], names) is not None:
                raise _Fallback  # the Python path makes the header a bad record
    if header is not None and fmt.has_header is not False:
        header = [h.strip() for h in header]
        index = [find_column(header, nm) for nm in names]
        ops_at = find_column(header, OPS_COLUMN)
        width = len(header)
    rows = body.count(b"\n") + (0 if not body or body.endswith(b"\n") else 1)
    if rows == 0:
        return schema.empty_table()
    fields = [f"f{i}" for i in range(width)]
    wanted = sorted({i for i in index if i is not None} | ({ops_at} - {None}) or {0})
    table = pacsv.read_csv(
        pa.py_buffer(body),
        read_options=pacsv.ReadOptions(column_names=fields, use_threads=use_threads),
        parse_options=pacsv.ParseOptions(delimiter=fmt.delimiter, quote_char=False,
                                         double_quote=False, escape_char=False,
                                         newlines_in_values=False, ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(
            column_types={fields[i]: pa.string() for i in wanted},
            include_columns=[fields[i] for i in wanted], null_values=[""],
            strings_can_be_null=True, quoted_strings_can_be_null=True))
    if table.num_rows != rows:
        raise _Fallback
    raw = {i: table.column(fields[i]).combine_chunks() for i in wanted}
    if ops_at is None:
        op = pa.repeat(pa.scalar("i", pa.string()), rows)
    else:
        def opcode(text: str) -> str:
            code = OPCODES.get(text.strip().lower())
            if code is None:
                raise _Fallback
            return code
        op = _map_distinct(raw[ops_at].fill_null(""), opcode, pa.string())
    base = (file_no << LINE_BITS) + first_line + header_lines + 1
    arrays: list[Any] = [pa.array(_arange(base, rows), type=pa.int64()), op,
                         pa.nulls(rows, pa.string()), pa.nulls(rows, pa.string())]
    for k in range(n):
        target = schema.field(k + 4).type
        i = index[k]
        if i is None:
            arrays.append(pa.nulls(rows, target))
        else:
            arrays.append(_convert(raw[i], kinds[k], target))
    return pa.Table.from_arrays(arrays, schema=schema)


def _arange(start: int, count: int) -> Any:
    """``start, start + 1, ...`` (``count`` values) as an int64 sequence."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with pyspark's arrow support
        return range(start, start + count)
    return np.arange(start, start + count, dtype=np.int64)
