"""What the web service reads and writes: posted rows turned into an input element's inbox file,
and an element's changelog files turned into JSON.

Posted rows are checked with the parsers the element's reader uses (:mod:`runtime.inputs`), so the
answer names the same bad records the run will count. The file written holds every posted record,
bad ones included, so that the reader counts them as bad records as it does for ``ccl publish``.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from ..csv_output import format_value
from ..inputs.csv_text import parse_file_text
from ..inputs.formats import LINE_BITS, OPS_COLUMN, CsvFormat
from ..inputs.json_rows import parse_json_text
from ..run_dir import RunDirs

_LINE_MASK = (1 << LINE_BITS) - 1
_BATCH = re.compile(r"batch-(\d+)")


class PostError(ValueError):
    """A request that cannot be written at all (wrong media type, nothing in it): its reason."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class Prepared:
    """An inbox file's bytes for a request, and what the reader will make of its records."""

    data: bytes
    ext: str
    records: int
    bad: list[dict] = field(default_factory=list)


def _field_text(value: Any) -> str:
    """A JSON value as the CSV field the JSON reader would have parsed it from."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _bad(rows: list, label: str) -> list[dict]:
    return [{label: r[0] & _LINE_MASK, "reason": r[2], "raw": r[3]} for r in rows if r[2] is not None]


def prepare_json(text: str, element: dict, fmt: CsvFormat) -> Prepared:
    """Posted JSON (objects, arrays of objects, or one object a line; ``ESP_OPS`` the opcode) for
    an element whose reader reads ``fmt``: the JSON itself for a JSON reader, else CSV lines."""
    columns = element["columns"]
    as_json = fmt if fmt.json else dataclasses.replace(fmt, json=True, json_root=None, json_columns=())
    rows = list(parse_json_text(text, columns, as_json))
    if not rows:
        raise PostError("no records in the request (post JSON objects, or an array of them)")
    if fmt.json:
        return Prepared(text.encode("utf-8"), "json", len(rows), _bad(rows, "record"))
    names = [c[0] for c in columns]
    out = io.StringIO()
    writer = csv.writer(out, delimiter=fmt.delimiter, lineterminator="\n")
    width = len(names) + 1
    if fmt.stream_opcode:
        width += 1
    elif fmt.has_header is not False:
        writer.writerow([OPS_COLUMN] + names)
    bad = []
    records = _records(text)
    for n, row in enumerate(rows, 1):
        reason = row[2]
        if reason is None and fmt.has_header is False and not fmt.stream_opcode and row[1] != "i":
            reason = "this input reads files without a header, where every row is an insert"
        if reason is not None:
            raw = row[3] if row[3] is not None else json.dumps(records[n - 1] if n <= len(records) else None)
            bad.append({"record": n, "reason": reason, "raw": raw})
            # a line of one field too many: the reader counts it as a bad record too
            writer.writerow([raw] + [""] * width)
            continue
        record = records[n - 1] if n <= len(records) else {}
        lower = {str(k).lower(): v for k, v in record.items()} if isinstance(record, dict) else {}
        values = [_field_text(record.get(nm, lower.get(nm.lower())) if isinstance(record, dict) else None)
                  for nm in names]
        if fmt.stream_opcode:
            writer.writerow([fmt.stream_name or element["name"], row[1]] + values)
        elif fmt.has_header is False:
            writer.writerow(values)
        else:
            writer.writerow([row[1]] + values)
    return Prepared(out.getvalue().encode("utf-8"), "csv", len(rows), bad)


def _records(text: str) -> list[Any]:
    """The posted JSON values as records, in the order :func:`parse_json_text` numbers them
    (records it could not read stand as None)."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos, end = 0, len(text)
    while pos < end:
        while pos < end and text[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= end:
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            if text[pos] == "[":  # an array with a bad element: the rest is read element-wise
                return out + _array_records(text[pos:])
            line_end = text.find("\n", pos)
            out.append(None)
            pos = end if line_end < 0 else line_end + 1
            continue
        out.extend(value if isinstance(value, list) else [value])
    return out


def _array_records(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = 1
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
            out.append(value)
        except json.JSONDecodeError:
            out.append(None)
            line_end = text.find("\n", pos)
            pos = len(text) if line_end < 0 else line_end + 1
    return out


def prepare_csv(text: str, element: dict, fmt: CsvFormat) -> Prepared:
    """Posted CSV text for an element whose reader reads CSV ``fmt``: the text itself, as ``ccl
    publish`` copies a file."""
    if fmt.json or fmt.xml_list:
        raise PostError(f"input {element['name']} reads {'JSON' if fmt.json else 'XML'}: post JSON",
                        415)
    rows = list(parse_file_text(text, element["columns"], fmt))
    if not rows:
        raise PostError("no records in the request")
    if not text.endswith("\n"):
        text += "\n"
    return Prepared(text.encode("utf-8"), "csv", len(rows), _bad(rows, "line"))


# --------------------------------------------------------------------------------------------------
# Changelogs
# --------------------------------------------------------------------------------------------------

def json_value(v: Any, ccl_type: str) -> Any:
    """A changelog value for JSON: numbers, strings and booleans as they are; dates, money,
    decimals, binary and non-finite floats as the CSV outputs write them."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    return format_value(v, ccl_type)


def batch_number(path: str) -> int:
    m = _BATCH.search(os.path.basename(path))
    return int(m.group(1)) if m else -1


def changelog_files(run_dir: str, element: str) -> list[str]:
    """The complete changelog files of ``element`` in batch order."""
    return sorted(RunDirs(run_dir).batch_files("changelog", "parquet", element), key=batch_number)


def read_changes(path: str, columns: list) -> list[dict]:
    """``{"op": ..., "row": {column: value}}`` per change of one changelog file, in the order the
    runtime writes outputs (sequence number, instance, sub-position)."""
    import pyarrow.parquet as pq

    data = pq.read_table(path).to_pylist()
    data.sort(key=lambda r: (r.get("__seq") or 0, r.get("__inst") or 0, r.get("__sub") or 0))
    return [{"op": str(r.get("__op") or "i"),
             "row": {name: json_value(r.get(name), str(t)) for name, t in columns}} for r in data]


class Contents:
    """An element's current rows, kept up to date from its changelog: by key for an element with
    a key (inserts, updates and upserts set the row, deletes remove it); without a key, a window
    keeps its inserted rows (a delete removes an equal row) and a stream the rows of its last
    batch."""

    def __init__(self, run_dir: str, element: dict) -> None:
        self.run_dir = run_dir
        self.element = element
        self.key = list(element.get("key") or [])
        self.columns = element["columns"]
        self.stream = element.get("kind") == "stream" and not self.key
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._keyed: dict[tuple, dict] = {}
        self._rows: list[dict] = []
        self.batch: Optional[int] = None

    def current(self) -> dict:
        """``{"batch": last batch read, "rows": [...]}`` after reading the new changelog files."""
        with self._lock:
            for path in changelog_files(self.run_dir, self.element["name"]):
                if path in self._seen:
                    continue
                try:
                    changes = read_changes(path, self.columns)
                except (OSError, ValueError):  # pyarrow's errors are ValueErrors
                    continue
                self._seen.add(path)
                self._apply(changes)
                self.batch = batch_number(path)
            rows = list(self._keyed.values()) if self.key else list(self._rows)
            return {"batch": self.batch, "rows": rows}

    def _apply(self, changes: list[dict]) -> None:
        if self.stream:
            self._rows = [c["row"] for c in changes if c["op"] not in ("d", "s")]
            return
        for c in changes:
            row = c["row"]
            if self.key:
                k = tuple(json.dumps(row.get(name), sort_keys=True) for name in self.key)
                if c["op"] in ("d", "s"):
                    self._keyed.pop(k, None)
                else:
                    self._keyed[k] = row
            elif c["op"] in ("d", "s"):
                if row in self._rows:
                    self._rows.remove(row)
            else:
                self._rows.append(row)
