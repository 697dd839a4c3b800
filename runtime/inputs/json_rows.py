"""JSON input files (``toolkit_file_json_input``, and the inboxes of ``toolkit_socket_json_input``):
one JSON object per record, as JSON lines (one object a line), concatenated objects, or arrays of
objects (a file holding one array, or one array a line).

:func:`parse_json_text` yields the rows :func:`runtime.inputs.csv_text.parse_file_text` yields for a
CSV file, ``(seq, op, bad, raw, *values)``, so the data source, its replay and its bad records work
the same. A record's sequence number is ``file_no * 2**32 + n`` where ``n`` counts the file's
records and bad pieces from 1 (several records may stand on one line, so lines cannot number them).

Values: an object's keys name the columns (exact, else in any case; other keys are ignored, missing
columns are null), ``ESP_OPS`` holds the opcode (as in CSV files). With ESP's ``jsonColsMappingList``
(comma-separated paths such as ``price`` or ``$.trade.px`` or ``legs[0].qty``) the n-th path gives
the n-th column instead; with ``jsonRootpath`` (a path) the records are the array (or object) at that
path of each JSON document. A JSON value must fit its column: ``null`` is null; a string is parsed
as a CSV field is (so date-times and money may come as strings; for a string column it is the
value); an integer fits integer, long, interval, float, money and decimal columns; a number with a
fraction or exponent fits float, money and decimal columns; ``true``/``false`` fit boolean columns.
Anything else (``"id": 1.5`` for an integer, ``"name": 7`` for a string, an object or array for
any column) is a bad record naming the column and the JSON type. Text that is not JSON is one bad
record per line (``not JSON: ...``): the parser goes on at the next line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Sequence
from typing import Any, Callable

from .csv_text import Row
from .formats import LINE_BITS, OPCODES, OPS_COLUMN, CsvFormat
from .values import BadValue, column_parser

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n\ufeff]*")
_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")
_INTEGRAL = ("integer", "long", "interval")
_NUMERIC = ("float", "money", "decimal")


def parse_path(path: str) -> list[str | int]:
    """ESP's simple JSONPath (``$.a.b[0].c``, ``a.b``, ``[2]``) as keys and indexes; ValueError
    for anything else."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    out: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _PATH_PART.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"JSON path {path!r}: expected names separated by '.' and [index]")
        out.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return out


def _follow(value: Any, path: Sequence[str | int]) -> Any:
    """The value at ``path`` in ``value``; None when a step is missing."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, dict):
                return None
            if step in value:
                value = value[step]
            else:
                low = step.lower()
                value = next((v for k, v in value.items() if k.lower() == low), None)
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def value_converter(ccl_type: str, fmt: CsvFormat) -> Callable[[Any], Any]:
    """A function from a JSON value (not null) to the column's Python value; BadValue with the
    reason's tail when the value does not fit (see the module docstring)."""
    t = ccl_type.strip().lower()
    base = re.match(r"[a-z]+", t)
    name = base.group(0) if base else t
    text = column_parser(ccl_type, fmt)
    a_t = f"{'an' if t[:1] in 'aeiou' else 'a'} {t}"

    high = 2 ** 31 - 1 if name == "integer" else 2 ** 63 - 1

    def convert(v: Any) -> Any:
        cls = v.__class__
        if cls is str:
            return text(v) if v != "" or name == "string" else None
        if cls is int and name in _INTEGRAL and -high - 1 <= v <= high:
            return v
        if cls is float and name == "float":
            return v
        kind = _json_type(v)
        if kind == "boolean" and name == "boolean":
            return v
        if kind == "integer" and (name in _INTEGRAL or name in _NUMERIC):
            return text(str(v))
        if kind == "number" and name in _NUMERIC:
            return text(repr(v))
        raise BadValue(f"is a JSON {kind}, not {a_t}")
    return convert


def parse_json_text(text: str, columns: Sequence[Sequence[str]], fmt: CsvFormat,
                    file_no: int = 0) -> Iterator[Row]:
    """The rows of one JSON file's ``text`` (see the module docstring)."""
    names = [c[0] for c in columns]
    converters = [value_converter(c[1], fmt) for c in columns]
    paths = [parse_path(p) for p in fmt.json_columns] if fmt.json_columns else None
    root = parse_path(fmt.json_root) if fmt.json_root else None
    nulls = (None,) * len(columns)
    base = file_no << LINE_BITS
    count = 0
    keys_seen: dict = {}
    for value, raw, error in _documents(text):
        if error is not None:
            count += 1
            yield (base + count, None, error, raw) + nulls
            continue
        if root is not None:
            value = _follow(value, root)
            if value is None:
                count += 1
                yield (base + count, None, f"no value at the root path {fmt.json_root!r}", raw) + nulls
                continue
        for record in (value if isinstance(value, list) else [value]):
            count += 1
            yield _record(base + count, record, names, converters, paths, nulls, keys_seen)


def _documents(text: str) -> Iterator[tuple[Any, str, str | None]]:
    """(value, raw text, None) for every JSON value of ``text`` in order, an array's elements one
    by one (a top-level array being a list of records, its elements are yielded as a list each so
    that a bad element does not lose the others); (None, the rest of the line, why) for text that
    is not JSON, after which reading goes on at the next line."""
    pos, end = 0, len(text)
    while True:
        pos = _SPACE.match(text, pos).end()
        if pos >= end:
            return
        if text[pos] == "[":
            pos = yield from _array(text, pos)
            continue
        try:
            value, stop = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            line_end = text.find("\n", pos)
            line_end = end if line_end < 0 else line_end
            yield None, text[pos:line_end].rstrip("\r"), f"not JSON: {exc.msg}"
            pos = line_end + 1
            continue
        yield value, text[pos:stop], None
        pos = stop


def _array(text: str, pos: int) -> Generator[tuple[Any, str, str | None], None, int]:
    """The elements of the top-level array starting at ``pos`` (see :func:`_documents`); returns
    where reading goes on after it."""
    try:  # the common case: the whole array parses
        value, stop = _DECODER.raw_decode(text, pos)
        yield value, text[pos:stop], None
        return stop
    except json.JSONDecodeError:
        pass
    pos += 1
    while True:
        pos = _SPACE.match(text, pos).end()
        if pos >= len(text):
            yield None, "", "not JSON: an array is not closed before the end of the text"
            return pos
        if text[pos] == "]":
            return pos + 1
        if text[pos] == ",":
            pos += 1
            continue
        try:
            value, stop = _DECODER.raw_decode(text, pos)
            yield [value], text[pos:stop], None
            pos = stop
        except json.JSONDecodeError as exc:
            line_end = text.find("\n", pos)
            line_end = len(text) if line_end < 0 else line_end
            yield None, text[pos:line_end].rstrip("\r"), f"not JSON: {exc.msg}"
            pos = line_end + 1


def _key_map(keys: tuple, names: list[str]) -> tuple[list, Any]:
    """For records with the keys ``keys`` (in this order): the key of each column (exact, else in
    any case; None when missing) and the key of the opcode."""
    lower: dict[str, str] = {}
    for k in keys:
        lower.setdefault(k.lower(), k)
    at = [n if n in keys else lower.get(n.lower()) for n in names]
    ops = OPS_COLUMN if OPS_COLUMN in keys else lower.get(OPS_COLUMN.lower())
    return at, ops


def _record(seq: int, record: Any, names: list[str], converters: list, paths: list | None,
            nulls: tuple, keys_seen: dict) -> Row:
    def raw() -> str:
        return json.dumps(record, ensure_ascii=False, default=str)
    if paths is None and not isinstance(record, dict):
        return (seq, None, f"a JSON {_json_type(record)} is not a record (an object)", raw()) + nulls
    if isinstance(record, dict):
        keys = tuple(record)
        mapped = keys_seen.get(keys)
        if mapped is None:
            if len(keys_seen) > 1000:
                keys_seen.clear()
            mapped = keys_seen[keys] = _key_map(keys, names)
        at, ops_key = mapped
    else:
        at, ops_key = [None] * len(names), None
    op_text = record[ops_key] if ops_key is not None else None
    op = OPCODES.get(str(op_text if op_text is not None else "").strip().lower())
    if op is None:
        return (seq, None, f"unknown opcode '{op_text}'", raw()) + nulls
    values: list[Any] = []
    for k, name in enumerate(names):
        if paths is not None:
            v = _follow(record, paths[k]) if k < len(paths) else None
        else:
            key = at[k]
            v = record[key] if key is not None else None
        if v is None:
            values.append(None)
            continue
        try:
            values.append(converters[k](v))
        except BadValue as e:
            shown = json.dumps(v, ensure_ascii=False, default=str)
            return (seq, op, f"column {name}: {shown} {e}", raw()) + nulls
    return (seq, op, None, None, *values)
