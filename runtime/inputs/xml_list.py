"""ESP's XML list files (``toolkit_file_xmllist_input``): one record per element, columns as
attributes, the opcode in ``ESP_OPS``::

    <MarketIn ESP_OPS="i" Id="1" Symbol="EBAY" Price="40.64" TradeTime="2010-08-23T09:37:33"/>

:func:`parse_xml_list` yields the rows :func:`runtime.inputs.csv_text.parse_file_text` yields for a CSV
file, ``(seq, op, bad, raw, *values)``, so the data source, its replay and its bad records work
the same. A record is an element with an attribute that names a column of the element (exact, else
in any case) or ``ESP_OPS``; elements around records (a root) are not records, and an element
without child elements or such attributes is a bad record. Missing columns are null, unknown
attributes are ignored, values are parsed as CSV fields are (an empty attribute is null).

A well-formed file (with or without a root element) is parsed at once. Otherwise it goes line by
line, so a malformed line is one bad record and the file goes on: a line is joined with the
following ones while it does not end with ``>`` (an element spread over lines), at most
:data:`MAX_JOINED_LINES` lines. A record's sequence number is its file number and the line its
start tag is on. Each piece is parsed inside an element
of ours, where a DOCTYPE cannot stand, so no entity can be declared (a reference to one is a
malformed line); an XML declaration line is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from xml.parsers import expat

from .csv_text import Row, split_lines
from .formats import LINE_BITS, OPCODES, OPS_COLUMN, CsvFormat, find_column
from .values import BadValue, column_parser

MAX_JOINED_LINES = 10_000


def _elements(text: str) -> list[tuple[int, str, dict[str, str], bool]]:
    """(line within ``text``, tag, attributes, has child elements) of every element of the XML
    fragment ``text``, in document order; raises ExpatError."""
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    found: list[list[Any]] = []
    open_: list[int] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        if open_:
            found[open_[-1]][3] = True
        open_.append(len(found))
        found.append([parser.CurrentLineNumber, name, attrs, False])

    def end(_name: str) -> None:
        open_.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.Parse("<r>" + text + "</r>", True)
    return [(line, tag, attrs, nested) for line, tag, attrs, nested in found[1:]]


def parse_xml_list(text: str, columns: Sequence[Sequence[str]], fmt: CsvFormat,
                   file_no: int = 0) -> Iterator[Row]:
    """The rows of one XML list file's ``text`` (see the module docstring)."""
    names = [c[0] for c in columns]
    parsers = [column_parser(c[1], fmt) for c in columns]
    nulls = (None,) * len(columns)
    base = file_no << LINE_BITS
    lines = split_lines(text)
    if lines and lines[0].lstrip().startswith("<?xml"):
        lines[0] = ""  # the declaration cannot stand inside our element; keep the numbering
    try:
        pieces: Iterator[tuple[int, list, str | None]] = iter([(0, _elements("\n".join(lines)), None)])
    except expat.ExpatError:
        pieces = _line_pieces(lines)
    for first, elements, error in pieces:
        if error is not None:
            yield (base + first + 1, None, error, lines[first]) + nulls
            continue
        for line, tag, attrs, nested in elements:
            yield from _record(base + first + line, tag, attrs, nested, names, parsers, nulls)


def _line_pieces(lines: list[str]) -> Iterator[tuple[int, list, str | None]]:
    """A file that is not well-formed as a whole, piece by piece: a line, joined with the next
    ones while it does not end with ``>`` (an element spread over lines); (first line index,
    elements, None) or (first line index, [], why) for a piece that does not parse."""
    i = 0
    while i < len(lines):
        first, chunk = i, lines[i]
        i += 1
        if not chunk.strip():
            continue
        while not chunk.rstrip().endswith(">") and i < len(lines) and i - first < MAX_JOINED_LINES:
            chunk += "\n" + lines[i]
            i += 1
        try:
            yield first, _elements(chunk), None
        except expat.ExpatError as exc:
            yield first, [], f"not well-formed XML: {expat.ErrorString(exc.code)}"


def _record(seq: int, tag: str, attrs: dict[str, str], nested: bool, names: list[str],
            parsers: list, nulls: tuple) -> Iterator[Row]:
    keys = list(attrs)
    index = [find_column(keys, name) for name in names]
    ops_at = find_column(keys, OPS_COLUMN)
    raw = "<" + " ".join([tag] + [f'{k}="{v}"' for k, v in attrs.items()]) + "/>"
    if ops_at is None and all(k is None for k in index):
        if not nested:
            yield (seq, None, f"element <{tag}> has no attribute naming a column", raw) + nulls
        return
    op_text = attrs[keys[ops_at]] if ops_at is not None else ""
    op = OPCODES.get(op_text.strip().lower())
    if op is None:
        yield (seq, None, f"unknown opcode '{op_text}'", raw) + nulls
        return
    values: list[Any] = []
    for name, k, parse in zip(names, index, parsers):
        s = attrs[keys[k]] if k is not None else ""
        if s == "":
            values.append(None)
            continue
        try:
            values.append(parse(s))
        except BadValue as e:
            yield (seq, op, f"column {name}: '{s}' {e}", raw) + nulls
            return
    yield (seq, op, None, None, *values)
