"""The error-stream record functions of ESP's Programmers Guide: ``recordDataToString(streamName,
errorRecord)`` and ``recordDataToRecord(streamName, errorRecord)``.

An error stream's ``errorRecord`` is the bad row as JSON (UTF-8 bytes, runtime/bad_records.py), and
``sourceStreamName`` names the element whose row it is. The planner appends a third argument, the
plan's element schemas as JSON text (``{name: {"columns": [[col, type], ...], "key": [...]}}``), so
that the row reads in its element's column order and types, key columns first. Without it (or for a
name it does not know) the record's own fields are used, as stored.
"""
from __future__ import annotations

import datetime as dt
import functools
import json
from typing import Optional

from .types import Type
from .convert import cast, from_python, to_text
from .values import Record, SplashError, a_kind, as_type


@functools.lru_cache(maxsize=64)
def _schemas(text: str) -> dict:
    try:
        found = json.loads(text)
    except ValueError:
        raise SplashError("the element schemas of recordDataToString() are not JSON") from None
    return found if isinstance(found, dict) else {}


def _fields(name: object, data: object, schemas: Optional[str]) -> tuple[list[tuple[str, object]],
                                                                       tuple, dict[str, Type]]:
    """The record's (field, value) pairs in its element's column order (typed as its columns), its
    key fields and the field types."""
    if not isinstance(data, (bytes, bytearray, str)):
        raise SplashError(f"the error record must be binary (errorRecord), not {a_kind(data)}")
    try:
        row = json.loads(bytes(data).decode("utf-8") if not isinstance(data, str) else data)
    except (ValueError, UnicodeDecodeError):
        raise SplashError("the error record is not a record this runtime wrote (errorRecord)") from None
    if not isinstance(row, dict):
        raise SplashError("the error record is not a record this runtime wrote (errorRecord)")
    schema = _schemas(schemas).get(name) if isinstance(schemas, str) and isinstance(name, str) else None
    columns = (schema or {}).get("columns") or []
    if not columns or not any(col in row for col, _ in columns):  # an unreadable line: {"line": ...}
        return list(row.items()), (), {}
    key = tuple(schema.get("key") or ())
    ordered = [c for c in columns if c[0] in key] + [c for c in columns if c[0] not in key]
    out, types = [], {}
    for col, type_text in ordered:
        value, types[col] = row.get(col), as_type(type_text)
        try:
            value = cast(value, types[col])
        except SplashError:
            value = _date_time(value)  # else a value its column cannot hold: kept as written
        out.append((col, value))
    return out, key, types


def _date_time(value: object) -> object:
    """A date-time written as Python writes one (``2024-01-02 03:04:06+00:00``), else ``value``."""
    if isinstance(value, str):
        try:
            return from_python(dt.datetime.fromisoformat(value))
        except ValueError:
            pass
    return value


def record_data_to_string(ctx: object, name: object, data: object, schemas: object = None) -> str:
    """``[ k1=v1; | c1=v1; c2=v2; ]`` (key fields before the bar; no bar without key fields; a
    null value is written as nothing: ``c=;``)."""
    fields, key, _ = _fields(name, data, schemas)  # type: ignore[arg-type]
    parts = ["["]
    for i, (col, value) in enumerate(fields):
        if key and i == len(key):
            parts.append("|")
        text = to_text(value) if not isinstance(value, (list, dict)) else json.dumps(value)
        parts.append(f"{col}={'' if text is None else text};")
    if key and len(key) == len(fields):
        parts.append("|")
    parts.append("]")
    return " ".join(parts)


def record_data_to_record(ctx: object, name: object, data: object, schemas: object = None) -> Record:
    """The error record as a SPLASH record of its element's row type (its key fields marked)."""
    fields, key, types = _fields(name, data, schemas)  # type: ignore[arg-type]
    return Record(fields, types, key)
