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

from ccl.plan.model import Element

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


def prepare_json(text: str, name: str, columns: list[tuple[str, str]], fmt: CsvFormat) -> Prepared:
    """Posted JSON (objects, arrays of objects, or one object a line; ``ESP_OPS`` the opcode) for
    the input element ``name`` with ``columns`` (``(name, CCL type)`` pairs) whose reader reads
    ``fmt``: the JSON itself for a JSON reader, else CSV lines."""
    if fmt.json:
        rows = list(parse_json_text(text, columns, fmt))
        if not rows:
            raise PostError("no records in the request (post JSON objects, or an array of them)")
        return Prepared(text.encode("utf-8"), "json", len(rows), _bad(rows, "record"))
    as_json = dataclasses.replace(fmt, json=True, json_root=None, json_columns=())
    items = json_items(text)
    if not items:
        raise PostError("no records in the request (post JSON objects, or an array of them)")
    names = [c for c, _ in columns]
    out = io.StringIO()
    writer = csv.writer(out, delimiter=fmt.delimiter, lineterminator="\n")
    width = len(names) + 1
    if fmt.stream_opcode:
        width += 1
    elif fmt.has_header is not False:
        writer.writerow([OPS_COLUMN] + names)
    # the JSON reader's own checks, on the records one a line (so each line is one row)
    objects = [record for record, reason, _ in items if reason is None and isinstance(record, dict)]
    checked = iter(parse_json_text("\n".join(json.dumps(r) for r in objects), columns, as_json))
    bad = []
    for n, (record, reason, raw) in enumerate(items, 1):
        op = None
        if reason is None and not isinstance(record, dict):
            reason = f"a JSON {_json_kind(record)} is not a record (an object)"
        if reason is None:
            row = next(checked)
            reason, op = row[2], row[1]
        if reason is None and fmt.has_header is False and not fmt.stream_opcode and op != "i":
            reason = "this input reads files without a header, where every row is an insert"
        if reason is not None:
            bad.append({"record": n, "reason": reason, "raw": raw})
            # a line of one field too many: the reader counts it as a bad record too
            writer.writerow([raw] + [""] * width)
            continue
        lower = {str(k).lower(): v for k, v in record.items()}
        values = [_field_text(record[nm] if nm in record else lower.get(nm.lower())) for nm in names]
        if fmt.stream_opcode:
            writer.writerow([fmt.stream_name or name, op] + values)
        elif fmt.has_header is False:
            writer.writerow(values)
        else:
            writer.writerow([op] + values)
    return Prepared(out.getvalue().encode("utf-8"), "csv", len(items), bad)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "object"


_SPACE = " \t\r\n\ufeff"


def json_items(text: str) -> list[tuple[Any, Optional[str], str]]:
    """The records of posted JSON as ``(value, None, raw)``, and text that is not JSON as
    ``(None, reason, raw)`` (reading goes on at the next line): the values of the text one after
    the other, a top-level array's elements one by one (a bad element does not lose the others)."""
    decoder = json.JSONDecoder()
    out: list[tuple[Any, Optional[str], str]] = []
    pos, end = 0, len(text)

    def skip(at: int, also: str = "") -> int:
        while at < end and (text[at] in _SPACE or text[at] in also):
            at += 1
        return at

    def not_json(at: int, exc: json.JSONDecodeError) -> int:
        line_end = text.find("\n", at)
        line_end = end if line_end < 0 else line_end
        out.append((None, f"not JSON: {exc.msg}", text[at:line_end].rstrip("\r")))
        return line_end + 1

    while True:
        pos = skip(pos)
        if pos >= end:
            return out
        try:
            value, stop = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if text[pos] != "[":
                pos = not_json(pos, exc)
                continue
            pos += 1  # an array that does not parse whole: element by element
            while True:
                pos = skip(pos, ",")
                if pos >= end:
                    out.append((None, "not JSON: an array is not closed before the end of the text", ""))
                    return out
                if text[pos] == "]":
                    pos += 1
                    break
                try:
                    value, stop = decoder.raw_decode(text, pos)
                except json.JSONDecodeError as inner:
                    pos = not_json(pos, inner)
                    continue
                out.append((value, None, text[pos:stop]))
                pos = stop
            continue
        if isinstance(value, list):
            out.extend((v, None, json.dumps(v, ensure_ascii=False)) for v in value)
        else:
            out.append((value, None, text[pos:stop]))
        pos = stop


def prepare_csv(text: str, name: str, columns: list[tuple[str, str]], fmt: CsvFormat) -> Prepared:
    """Posted CSV text for the input element ``name`` with ``columns`` whose reader reads CSV
    ``fmt``: the text itself, as ``ccl publish`` copies a file."""
    if fmt.json or fmt.xml_list:
        raise PostError(f"input {name} reads {'JSON' if fmt.json else 'XML'}: post JSON", 415)
    rows = list(parse_file_text(text, columns, fmt))
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

    def __init__(self, run_dir: str, element: Element) -> None:
        self.run_dir = run_dir
        self.name = element.name
        self.key = list(element.key)
        self.columns = [(c.name, c.type) for c in element.columns]
        self.stream = element.kind == "stream" and not self.key
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self._keyed: dict[tuple, dict] = {}
        self._rows: list[dict] = []
        self.batch: Optional[int] = None

    def current(self) -> dict:
        """``{"batch": last batch read, "rows": [...]}`` after reading the new changelog files."""
        with self._lock:
            for path in changelog_files(self.run_dir, self.name):
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
