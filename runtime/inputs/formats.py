"""Input adapter properties: the CSV and XML-list formats they set, header checks and opcodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


LINE_BITS = 32  # a row's sequence number is file_no * 2**LINE_BITS + line_no
OPS_COLUMN = "ESP_OPS"

OPCODES = {"i": "i", "u": "u", "d": "d", "p": "p", "s": "s", "": "i",
            "insert": "i", "update": "u", "delete": "d", "upsert": "p", "safedelete": "s"}


def property_flag(value: object, name: str = "") -> bool:
    """An adapter's boolean property; ValueError for a value that is neither true nor false (a
    misspelt true silently meant false)."""
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "y", "t"):
        return True
    if text in ("false", "0", "no", "n", "f", ""):
        return False
    raise ValueError(f"{name or 'property'} {value!r}: must be true or false")


_PROPERTY_ALIASES = {
    "csvdelimiter": "delimiter", "csvhasheader": "hasheader",
    "csvexpectstreamnameopcode": "expectstreamnameopcode",
    "csvdateformat": "dateformat", "csvtimestampformat": "timestampformat",
    "csvseconddateformat": "dateformat", "seconddateformat": "dateformat",
    "csvmsdateformat": "timestampformat", "msdateformat": "timestampformat",
    "csvbigdatetimeformat": "bigdatetimeformat", "csvmatchstreamname": "matchstreamname",
    "xmllistseconddateformat": "dateformat", "xmllistmsdateformat": "timestampformat",
    "xmllistbigdatetimeformat": "bigdatetimeformat",
    "jsonseconddateformat": "dateformat", "jsonmsdateformat": "timestampformat",
    "jsonbigdatetimeformat": "bigdatetimeformat",
}
XML_LIST = "xmllist"  # the ``fileformat`` property of a toolkit_file_xmllist_input adapter
JSON = "json"  # the ``fileformat`` of JSON input adapters (runtime/inputs/json_rows.py)


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
    xml_list: bool = False  # ESP's XML list format (runtime/inputs/xml_list.py) instead of CSV
    json: bool = False  # JSON records (runtime/inputs/json_rows.py) instead of CSV
    json_root: str | None = None  # ESP's jsonRootpath: where the records are in a JSON document
    json_columns: tuple[str, ...] = ()  # ESP's jsonColsMappingList: a path per column

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
        stream_opcode = property_flag(o.get("expectstreamnameopcode", "false"), "expectStreamNameOpcode")
        header = property_flag(o["hasheader"], "hasHeader") if "hasheader" in o else None
        has_header = False if stream_opcode else header
        match = property_flag(o.get("matchstreamname", "false"), "matchStreamName")
        match = stream_opcode and element is not None and match
        file_format = str(o.get("fileformat", "")).lower()
        mapping = str(o.get("jsoncolsmappinglist") or "").strip()
        json_columns = tuple(p.strip() for p in mapping.split(",")) if mapping not in ("", "*") else ()
        return cls(delimiter, has_header, stream_opcode, o.get("dateformat") or None,
                   o.get("timestampformat") or None, o.get("bigdatetimeformat") or None,
                   element if match else None, file_format == XML_LIST, file_format == JSON,
                   str(o.get("jsonrootpath") or "").strip() or None, json_columns)

    @property
    def whole_files(self) -> bool:
        """Whether a file is read by one task (XML lists and JSON are not cut into slices)."""
        return self.xml_list or self.json

    def time_format(self, kind: str) -> str | None:
        """The pattern of date-time columns of ``kind`` (date, timestamp, bigdatetime), if any."""
        if kind == "date":
            return self.date_format
        if kind == "bigdatetime":
            return self.bigdatetime_format or self.timestamp_format
        return self.timestamp_format


def find_column(header: Sequence[str], name: str) -> int | None:
    for i, h in enumerate(header):
        if h == name:
            return i
    low = name.lower()
    for i, h in enumerate(header):
        if h.lower() == low:
            return i
    return None



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

