"""The pyarrow fast path of the ccl_csv source (runtime/inputs/csv_arrow.py) against the Python path.

The differential test generates random small CSV texts (seeded, so a failure repeats) and checks
that whenever the fast path answers, its rows are those of ``parse_file_text`` in the source's
arrow schema; other tests check that it does answer on plain input and refuses what it must.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

import pyarrow as pa
import pytest

from runtime.inputs.csv_arrow import parse_slice_arrow, source_arrow_schema
from runtime.inputs.csv_text import file_slices, parse_file_text, read_slice, read_slice_bytes, rows_to_arrow
from runtime.inputs.formats import CsvFormat

TYPES = ["integer", "long", "interval", "float", "money(2)", "money", "decimal(5,2)",
         "decimal(10,0)", "boolean", "date", "timestamp", "bigdatetime", "string", "foo"]


def reference(text: str, columns: Sequence[Sequence[str]], fmt: CsvFormat, schema: pa.Schema,
              **kw) -> list[dict]:
    """The Python path's rows as the reader turns them into arrow."""
    return rows_to_arrow(list(parse_file_text(text, columns, fmt, **kw)), schema).to_pylist()


# --------------------------------------------------------------------------------------------------
# Random values: plain ones (the fast path must take them) and odd ones (either path may answer)
# --------------------------------------------------------------------------------------------------

def _timestamp(rnd: random.Random) -> str:
    frac = rnd.randint(0, 9)
    text = (f"{rnd.randint(1, 9999):04d}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}"
            f"{rnd.choice('T ')}{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:"
            f"{rnd.randint(0, 59):02d}")
    return text + ("." + "".join(rnd.choice("0123456789") for _ in range(frac)) if frac else "")


def _decimal(rnd: random.Random, whole: int, scale: int) -> str:
    text = ("-" if rnd.random() < 0.3 else "") + str(rnd.randrange(10 ** whole))
    if scale and rnd.random() < 0.7:
        text += "." + str(rnd.randrange(10 ** scale)).zfill(rnd.randint(1, scale))[:scale]
    return text


def plain_value(rnd: random.Random, ccl_type: str) -> str:
    """A value the fast path accepts for ``ccl_type`` (or an empty field)."""
    if rnd.random() < 0.1:
        return ""
    name = ccl_type.split("(")[0]
    if name == "integer":
        return str(rnd.choice([rnd.randint(-2**31, 2**31 - 1), 2**31 - 1, -2**31, 0, 7]))
    if name in ("long", "interval"):
        return str(rnd.choice([rnd.randint(-2**63, 2**63 - 1), 2**63 - 1, -2**63, -1]))
    if name == "float":
        return rnd.choice([f"{rnd.uniform(-1e6, 1e6):.{rnd.randint(0, 12)}f}", "1.", ".5", "-.5",
                           "-0", str(rnd.randint(-99, 99)), "123456789.123456789123"])
    if name == "money":
        scale = int(ccl_type[6:-1]) if "(" in ccl_type else 4
        return _decimal(rnd, rnd.randint(1, 18 - scale), scale)
    if name == "decimal":
        precision, scale = (int(x) for x in ccl_type[8:-1].split(","))
        return _decimal(rnd, rnd.randint(1, max(precision - scale, 1)), scale)
    if name == "boolean":
        return rnd.choice(["true", "false", "TRUE", "f", "Y", "no", "1", "0"])
    if name in ("date", "timestamp", "bigdatetime"):
        return _timestamp(rnd)
    return rnd.choice(["abc", "x y", " padded ", "é€", "ß", "0", "null", "a'b", "-"])


ODD = ["1e3", " 1", "1 ", "+1", "NaN", "inf", "1.5d", "0x1p3", "--1", "-", ".", "1.2.3", "007",
       "-0", "2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807",
       "9223372036854775808", "-9223372036854775809", "1.234", "123456789012345678",
       "0000000000001.5", "999.99", "1000.00", "99999.5", " yes ", "maybe", "T",
       "2024-02-30 00:00:00",
       "2023-02-29T00:00:00", "2024-02-29T23:59:59.999999999", "0000-01-01T00:00:00",
       "0001-01-01T00:00:00", "2024-01-01T24:00:00", "2024-01-01T00:60:00", "2024-01-01T00:00:60",
       "2024-01-01", "2024-01-01T00:00", " 2024-01-01T00:00:00", "2024-01-01T00:00:00Z",
       "2024-1-01T00:00:00", "2024-01-01T00:00:00.", "1969-12-31T23:59:59.9999", "\u00a0", "x\ty",
       "é", "1,5", "ff", "0a"]


def random_case(rnd: random.Random, plain: bool) -> tuple[str, list[list[str]], CsvFormat]:
    """A random CSV text, its element columns and its format; ``plain``: one the fast path takes."""
    columns = [[f"c{i}", rnd.choice(TYPES)] for i in range(rnd.randint(1, 5))]
    delimiter = rnd.choice([",", "|", "\t", ";"])
    stream_opcode = not plain and rnd.random() < 0.15
    has_header = not stream_opcode and rnd.random() < 0.8
    date_format = "yyyy-MM-dd HH:mm:ss" if not plain and rnd.random() < 0.05 else None
    # Without hasHeader (None) both paths look at the first line to tell a header from data.
    look = not stream_opcode and rnd.random() < 0.3
    fmt = CsvFormat(delimiter, None if look else has_header, stream_opcode, date_format, None)
    if has_header:
        header = [rnd.choice([nm, nm.upper(), f" {nm} "]) for nm, _ in columns
                  if plain or rnd.random() < 0.85]
        header += [f"extra{i}" for i in range(rnd.randint(0, 2))]
        with_ops = rnd.random() < 0.5
        if with_ops:
            header.append(rnd.choice(["ESP_OPS", "esp_ops"]))
        rnd.shuffle(header)
        if not header:
            header = ["extra"]
        kinds = {nm.strip().lower(): t for nm, t in columns}
        cells = [kinds.get(h.strip().lower(), "extra") for h in header]
        cells = ["ops" if h.strip().lower() == "esp_ops" else c for h, c in zip(header, cells)]
    else:
        header = []
        cells = ["stream", "ops"] * stream_opcode + [t for _, t in columns]
    newline = rnd.choice(["\n", "\r\n"])
    lines = [delimiter.join(header)] if has_header else []
    for _ in range(rnd.randint(0, 8)):
        fields = []
        for cell in cells:
            if cell == "ops":
                ops = ["i", "U", "delete", " d ", "", "upsert", "SafeDelete", "p"]
                fields.append(rnd.choice(ops if plain or rnd.random() < 0.9 else ["z", "ins"]))
            elif cell in ("stream", "extra"):
                fields.append(rnd.choice(["s", "", "anything"]))
            elif not plain and rnd.random() < 0.15:
                fields.append(rnd.choice(ODD))
            else:
                fields.append(plain_value(rnd, cell))
        while len(fields) == 1 and fields[0] == "":  # a blank line, skipped by both paths
            fields = [plain_value(rnd, cells[0]) if cells[0] in TYPES else "i"]
        lines.append(delimiter.join(fields))
        if not plain:
            r = rnd.random()
            if r < 0.03:
                lines.append("")  # a blank line
            elif r < 0.06:
                lines.append(lines[-1] + delimiter + "more")  # a wrong field count
            elif r < 0.08:
                lines.append('"q' + delimiter + 'x"' + delimiter * (len(cells) - 1))  # a quote
    text = newline.join(lines) + (newline if lines and rnd.random() < 0.8 else "")
    if rnd.random() < 0.2:
        text = "\ufeff" + text
    return text, columns, fmt


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------

def test_differential_random_texts():
    rnd = random.Random(20261123)
    accepted = 0
    total = 3000
    for case in range(total):
        plain = case % 3 == 0
        text, columns, fmt = random_case(rnd, plain)
        schema = source_arrow_schema(columns)
        file_no = rnd.randint(0, 3)
        data = text.encode("utf-8") if rnd.random() < 0.5 else text
        fast = parse_slice_arrow(data, columns, fmt, file_no, schema=schema)
        if plain:
            assert fast is not None, (text, columns, fmt)
        if fast is not None:
            accepted += 1
            assert fast.schema == schema
            assert fast.to_pylist() == reference(text, columns, fmt, schema, file_no=file_no), \
                (text, columns, fmt)
    assert accepted > total // 2


def test_slices_match_read_slice(tmp_path):
    rnd = random.Random(7)
    cols = [["id", "integer"], ["s", "string"], ["ts", "timestamp"], ["p", "money(2)"]]
    rows = [(f"x{i}", str(i), _timestamp(rnd), f"{i}.5") for i in range(400)]
    with_header = tmp_path / "h.csv"
    with_header.write_bytes(("\ufeffs,ID,ESP_OPS,ts,p\r\n" + "".join(
        f"{s},{i},u,{ts},{p}\r\n" for s, i, ts, p in rows)).encode())
    no_header = tmp_path / "n.csv"
    no_header.write_bytes("".join(f"{i},{s},{ts},{p}\n" for s, i, ts, p in rows).encode())
    schema = source_arrow_schema(cols)
    look = CsvFormat(has_header=None)  # no hasHeader property: the first line tells
    for path, fmt, has_header in ((with_header, CsvFormat(), True), (with_header, look, True),
                                  (no_header, CsvFormat(has_header=False), False),
                                  (no_header, look, False)):
        for size in (50, 1000, 4096, 1 << 20):
            slices = file_slices(str(path), size)
            assert (len(slices) > 1) == (size < 1 << 20)
            good = 0
            for start, end, first in slices:
                data, header = read_slice_bytes(str(path), fmt, start, end, cols)
                assert (header is not None) == (has_header and start > 0)
                fast = parse_slice_arrow(data, cols, fmt, 2, first_line=first, header=header,
                                         schema=schema)
                ref = read_slice(str(path), cols, fmt, 2, start, end, first)
                assert fast is not None
                assert fast.to_pylist() == rows_to_arrow(list(ref), schema).to_pylist()
                good += fast.column("__bad").null_count
            assert good == len(rows)


def test_plain_values_of_every_type():
    cols = [["i", "integer"], ["l", "long"], ["f", "float"], ["m", "money(2)"], ["d", "date"],
            ["t", "timestamp"], ["b", "bigdatetime"], ["ok", "boolean"], ["s", "string"]]
    text = ("\ufeffS,ok,b,t,d,m,f,l,I,esp_ops\r\n"
            "a,true,2020-01-02T03:04:05.1234567,2020-01-02 03:04:05.1239,2020-01-02T03:04:05.9,"
            "-001.5,-.5,-9223372036854775808,2147483647, Delete \r\n"
            ", yes ,,,,,,,,\r\n")
    fmt = CsvFormat()
    schema = source_arrow_schema(cols)
    fast = parse_slice_arrow(text, cols, fmt, 1, schema=schema)
    assert fast is not None
    rows = fast.to_pylist()
    assert rows == reference(text, cols, fmt, schema, file_no=1)
    assert [r["__seq"] for r in rows] == [(1 << 32) + 2, (1 << 32) + 3]
    assert [r["__op"] for r in rows] == ["d", "i"]
    assert rows[1]["s"] is None and rows[1]["ok"] is True


def test_stream_name_opcode_and_no_header():
    cols = [["a", "long"], ["b", "string"]]
    fmt = CsvFormat.from_options({"expectStreamNameOpcode": "true", "delimiter": "|"})
    text = "priceW|u|1|x\npriceW|D|2|\n"
    schema = source_arrow_schema(cols)
    fast = parse_slice_arrow(text, cols, fmt, schema=schema)
    assert fast is not None and fast.to_pylist() == reference(text, cols, fmt, schema)
    assert parse_slice_arrow("priceW|zz|1|x\n", cols, fmt, schema=schema) is None


@pytest.mark.parametrize("text, ccl_type", [
    ('c\n"1"\n', "string"),                        # a quote
    ("c\n1\n\n2\n", "integer"),                    # a blank line
    ("\nc\n1\n", "integer"),                       # a blank line first
    ("c\n1\r2\n", "string"),                       # a bare \r
    ("c,d\n1\n", "integer"),                       # a wrong field count
    ("c,ESP_OPS\n1,z\n", "integer"),               # an unknown opcode
    ("c\n2147483648\n", "integer"),                # overflow
    ("c\n9223372036854775808\n", "long"),          # overflow
    ("c\n 1\n", "integer"),                        # spaces
    ("c\n1.0\n", "integer"),                       # a fraction (the Python path drops it)
    ("c\n1e3\n", "float"),                         # an exponent
    ("c\nNaN\n", "float"),
    ("c\n1.234\n", "money(2)"),                    # too many fraction digits
    ("c\n1234\n", "decimal(5,2)"),                 # too many integer digits
    ("c\n-\n", "money(2)"),
    ("c\nmaybe\n", "boolean"),
    ("c\n2024-02-30T00:00:00\n", "timestamp"),     # no such day
    ("c\n0000-01-01T00:00:00\n", "timestamp"),     # year 0
    ("c\n2024-01-01\n", "date"),                   # another form
    ("c\n2024-01-01T00:00:00Z\n", "bigdatetime"),
    ("c\nff\n", "binary"),                         # binary columns
    (b"c\n\xff\n", "string"),                      # invalid UTF-8
    ("c\na\x00b\n", "string"),                     # NUL
])
def test_falls_back(text, ccl_type):
    cols = [["c", ccl_type]]
    assert parse_slice_arrow(text, cols, CsvFormat(), schema=source_arrow_schema(cols)) is None


def test_date_format_option_falls_back_for_date_columns_only():
    fmt = CsvFormat.from_options({"dateFormat": "dd/MM/yyyy"})
    text = "d,t\n,2024-01-01T00:00:00\n"
    assert parse_slice_arrow(text, [["d", "date"]], fmt) is None
    assert parse_slice_arrow(text, [["t", "timestamp"]], fmt) is not None


def test_empty_and_header_only():
    cols = [["c", "integer"]]
    for text in ("", "c\n", "c", "\ufeffc\r\n"):
        fast = parse_slice_arrow(text, cols, CsvFormat())
        assert fast is not None and fast.num_rows == 0
