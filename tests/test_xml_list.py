"""ESP's XML list input files (runtime/inputs/xml_list.py): records, opcodes, bad records, line numbers."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from runtime.inputs.formats import CsvFormat
from runtime.inputs.xml_list import parse_xml_list

COLS = [["Id", "integer"], ["Symbol", "string"], ["Price", "money(2)"], ["TradeTime", "date"]]
FMT = CsvFormat.from_options({"fileformat": "xmllist"})


def rows(text: str, fmt: CsvFormat = FMT) -> list[tuple]:
    return list(parse_xml_list(text, COLS, fmt, file_no=1))


def test_records_columns_opcodes_and_line_numbers():
    text = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<MarketIn ESP_OPS="i" Id="1" Symbol="EBAY" Price="40.64" TradeTime="2010-08-23T09:37:33"/>\n'
            '\n'
            '<MarketIn ESP_OPS="u" id="1" symbol="a &amp; b" Extra="x"/>\n'
            '<MarketIn Id="2" Symbol=""/><MarketIn ESP_OPS="delete" Id="3"/>\n')
    base = 1 << 32
    assert rows(text) == [
        (base + 2, "i", None, None, 1, "EBAY", Decimal("40.64"), dt.datetime(2010, 8, 23, 9, 37, 33)),
        (base + 4, "u", None, None, 1, "a & b", None, None),  # names in any case, &amp; decoded
        (base + 5, "i", None, None, 2, None, None, None),     # no ESP_OPS: insert; "" is null
        (base + 5, "d", None, None, 3, None, None, None)]


def test_a_root_element_and_records_spread_over_lines():
    text = ('<Rows>\n'
            '  <MarketIn Id="1"\n'
            '            Symbol="X"/>\n'
            '  <MarketIn Id="2" Symbol="Y"/>\n'
            '</Rows>\n')
    assert [(r[0] & 0xFFFFFFFF, r[4], r[5]) for r in rows(text)] == [(2, 1, "X"), (4, 2, "Y")]


def test_bad_records_and_the_file_goes_on():
    text = ('<MarketIn Id="x1" Symbol="A"/>\n'
            '<MarketIn Id="2" Symbol="B">\n'         # never closed: one bad line
            '<MarketIn Id="3" ESP_OPS="z"/>\n'
            '<Other Foo="1"/>\n'
            '<MarketIn Id="4" Price="abc"/>\n'
            '<MarketIn Id="5"/>\n')
    got = [(r[0] & 0xFFFFFFFF, r[1], r[2]) for r in rows(text)]
    assert got == [
        (1, "i", "column Id: 'x1' is not an integer"),
        (2, None, "not well-formed XML: mismatched tag"),
        (3, None, "unknown opcode 'z'"),
        (4, None, "element <Other> has no attribute naming a column"),
        (5, "i", "column Price: 'abc' is not a money(2)"),
        (6, "i", None)]
    assert rows(text)[0][3] == '<MarketIn Id="x1" Symbol="A"/>'


def test_no_entity_can_be_declared_and_date_formats_apply():
    """A DOCTYPE cannot stand inside the element each piece is parsed in: a bad line; a reference
    to an entity is one too."""
    got = rows('<!DOCTYPE r [<!ENTITY e "x">]>\n<MarketIn Id="1" Symbol="&e;"/>\n<MarketIn Id="2"/>\n')
    assert [(r[0] & 0xFFFFFFFF, r[2]) for r in got] == [
        (1, "not well-formed XML: not well-formed (invalid token)"),
        (2, "not well-formed XML: undefined entity"), (3, None)]
    fmt = CsvFormat.from_options({"fileformat": "xmllist", "xmllistSecondDateFormat": "dd/MM/yyyy HH:mm:ss"})
    (r,) = rows('<MarketIn Id="1" TradeTime="23/08/2010 09:37:33"/>', fmt)
    assert r[7] == dt.datetime(2010, 8, 23, 9, 37, 33)
