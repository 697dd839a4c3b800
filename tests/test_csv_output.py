"""CSV output files: value formatting, the written file, and reading it back with csv_source."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from runtime.csv_output import format_value, value_formatter, write_csv
from runtime.inputs.csv_text import read_file
from runtime.inputs.formats import CsvFormat

COLS = [["id", "integer"], ["n", "long"], ["price", "money(2)"], ["d", "decimal(10,3)"],
        ["x", "float"], ["ok", "boolean"], ["day", "date"], ["ts", "timestamp"],
        ["big", "bigdatetime"], ["iv", "interval"], ["s", "string"]]


def test_format_values():
    t = dt.datetime(2020, 1, 2, 3, 4, 5, 123456)
    assert format_value(None, "integer") == ""
    assert format_value(1.5, "float") == "1.5" and format_value(100.0, "float") == "100.0"
    assert format_value(math.nan, "float") == "NaN" and format_value(-math.inf, "float") == "-Infinity"
    assert format_value(Decimal("1.5"), "money(2)") == "1.50"
    assert format_value(Decimal("1E+2"), "decimal(10,3)") == "100.000"
    assert format_value(Decimal(12), "money") == "12.0000"
    assert format_value(True, "boolean") == "true" and format_value(False, "boolean") == "false"
    assert format_value(t, "timestamp") == "2020-01-02T03:04:05.123"
    assert format_value(t, "bigdatetime") == "2020-01-02T03:04:05.123456"
    assert format_value(t, "date") == "2020-01-02T03:04:05"
    assert format_value(t.replace(tzinfo=dt.timezone(dt.timedelta(hours=1))), "timestamp") == \
        "2020-01-02T02:04:05.123"
    assert format_value(7, "long") == "7" and format_value("a,b", "string") == "a,b"


def test_column_formatters_agree_with_format_value():
    values = [None, 0, -7, 2**40, True, False, 1.5, 100.0, -0.0, 1e20, math.nan, math.inf, -math.inf,
              "", "a,b", "12", Decimal("1.5"), dt.datetime(2020, 1, 2, 3, 4, 5, 6), b"\x01"]
    for ccl_type in ["integer", "LONG", "float", " Float ", "string", "boolean", "money(2)",
                     "timestamp", "interval", "binary"]:
        fmt = value_formatter(ccl_type)
        for v in values:
            try:
                expected = format_value(v, ccl_type)
            except (TypeError, ValueError, ArithmeticError, AttributeError) as exc:
                expected = type(exc)
            try:
                got = fmt(v)
            except (TypeError, ValueError, ArithmeticError, AttributeError) as exc:
                got = type(exc)
            assert got == expected, (ccl_type, v)


def test_write_csv_header_quoting_and_rename(tmp_path):
    path = str(tmp_path / "out.csv")
    rows = [{"id": 1, "s": 'say "hi", ok'}, {"id": None, "s": "two\nlines"}]
    assert write_csv(path, [["id", "integer"], ["s", "string"]], rows) == 2
    assert (tmp_path / "out.csv").read_text() == 'id,s\n1,"say ""hi"", ok"\n,"two\nlines"\n'
    assert not (tmp_path / "out.csv.tmp").exists()


def test_round_trip_through_csv_source(tmp_path):
    rows = [
        {"__op": "u", "id": -1, "n": 2 ** 40, "price": Decimal("1.50"), "d": Decimal("-0.125"),
         "x": 0.1, "ok": True, "day": dt.datetime(2020, 1, 2, 3, 4, 5),
         "ts": dt.datetime(2020, 1, 2, 3, 4, 5, 678000),
         "big": dt.datetime(2020, 1, 2, 3, 4, 5, 678901), "iv": 5_000_000, "s": 'a;"b"\nc\rd'},
        {"__op": "d", **{c: None for c, _ in COLS}},
        {"id": 3, "x": 1e300, "s": "x"},
    ]
    path = str(tmp_path / "rt.csv")
    assert write_csv(path, COLS, rows, delimiter=";", opcodes=True) == 3
    back = list(read_file(path, COLS, CsvFormat.from_options({"delimiter": ";"})))
    assert [r[2] for r in back] == [None, None, None]
    assert [r[1] for r in back] == ["u", "d", "i"]
    names = [c for c, _ in COLS]
    assert dict(zip(names, back[0][4:])) == {k: v for k, v in rows[0].items() if k != "__op"}
    assert back[1][4:] == (None,) * len(COLS)
    assert dict(zip(names, back[2][4:]))["x"] == 1e300


def test_esp_forms_without_header_read_back_with_the_same_properties(tmp_path):
    """An output adapter's csvExpectStreamNameOpcode (NAME,opcode,fields) and csvHasHeader=false
    (fields only) forms; each reads back with the same properties."""
    cols = [["id", "integer"], ["s", "string"]]
    rows = [{"__op": "u", "id": 1, "s": "a"}, {"__op": "d", "id": 2, "s": None}]
    named = tmp_path / "named.csv"
    write_csv(str(named), cols, rows, delimiter="|", opcodes=True, stream_name="W")
    assert named.read_text() == "W|u|1|a\nW|d|2|\n"
    props = {"csvExpectStreamNameOpcode": "true", "csvDelimiter": "|"}
    assert [r[1:] for r in read_file(str(named), cols, CsvFormat.from_options(props))] == [
        ("u", None, None, 1, "a"), ("d", None, None, 2, None)]
    plain = tmp_path / "plain.csv"
    write_csv(str(plain), cols, rows, opcodes=True, header=False)
    assert plain.read_text() == "1,a\n2,\n"
    assert [r[4:] for r in read_file(str(plain), cols, CsvFormat.from_options({"csvHasHeader": "false"}))] \
        == [(1, "a"), (2, None)]


def test_tables_write_the_same_file_as_rows(tmp_path):
    """write_csv_tables (Arrow tables, formatted column by column) and write_csv (a mapping per
    row) give the same bytes, in every layout."""
    import pyarrow as pa

    from runtime.csv_output import write_csv_tables
    t = dt.datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
    rows = [{"__op": "u", "id": 1, "n": 2**40, "price": Decimal("1.50"), "x": 1e20, "ok": True,
             "ts": t, "s": 'a "q", b'},
            {"__op": None, "id": None, "n": None, "price": None, "x": math.nan, "ok": None,
             "ts": None, "s": "two\nlines"},
            {"__op": "d", "id": -3, "n": 0, "price": Decimal("-2.25"), "x": -0.5, "ok": False,
             "ts": t, "s": ""}]
    table = pa.Table.from_pylist(rows)  # no column "d", "day", ...: missing columns are empty
    for opts in [{}, {"opcodes": True}, {"opcodes": True, "delimiter": ";"},
                 {"opcodes": True, "header": False}, {"opcodes": True, "stream_name": "W"}]:
        a, b = tmp_path / "a.csv", tmp_path / "b.csv"
        assert write_csv(str(a), COLS, rows, **opts) == 3
        assert write_csv_tables(str(b), COLS, [table.slice(0, 1), table.slice(1)], **opts) == 3
        assert a.read_bytes() == b.read_bytes(), opts


def test_output_adapters_are_checked_before_the_run(tmp_path):
    """A property the writer cannot use, or two adapters writing one file (the last one won),
    is refused before anything runs, not when the run ends."""
    from ccl.plan.codec import plan_from_json
    from ccl.plan.model import PLAN_FORMAT, PLAN_VERSION
    from runtime.run_setup import RunError
    from runtime.outputs import output_adapters

    def plan(*adapters):
        element = {"kind": "stream", "role": "output", "columns": [["x", "integer"]], "key": []}
        return plan_from_json(
            {"format": PLAN_FORMAT, "version": PLAN_VERSION,
             "elements": [{**element, "name": "a"}, {**element, "name": "b"}],
             "adapters": [{"direction": "output", "type": "dsv_out", "name": f"o{i}", "element": e,
                           "properties": props} for i, (e, props) in enumerate(adapters)]})
    found = output_adapters(plan(("a", {"dir": "x"}), ("b", {"dir": "x", "file": "f.csv"})), str(tmp_path))
    assert [p for _, p, _ in found] == [str(tmp_path / "x" / "a.csv"), str(tmp_path / "x" / "f.csv")]
    with pytest.raises(RunError, match="output adapters 'o0' and 'o1' both write .*same.x.csv"):
        output_adapters(plan(("a", {"dir": "same", "file": "x.csv"}), ("b", {"dir": "./same/", "file": "x.csv"})),
                        str(tmp_path))
    with pytest.raises(RunError, match="output adapter 'o0': hasHeader 'nope': must be true or false"):
        output_adapters(plan(("a", {"hasHeader": "nope"})), str(tmp_path))


# --------------------------------------------------------------------------------------------------
# write_csv_tables (columns formatted by pyarrow, lines joined) against write_csv (value by value,
# the csv module per row), on generated columns
# --------------------------------------------------------------------------------------------------

def _column_strategies():
    import pyarrow as pa
    from hypothesis import strategies as st

    text = st.text(alphabet=st.sampled_from(list('ab ,;|"\n\r\t\'é€0-.')), max_size=6)
    stamp = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
    return [  # (ccl type, arrow type, values)
        ("integer", pa.int32(), st.integers(-2**31, 2**31 - 1)),
        ("long", pa.int64(), st.integers(-2**63, 2**63 - 1)),
        ("interval", pa.int64(), st.integers(-10**12, 10**12)),
        ("float", pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
        ("float", pa.int64(), st.integers(-10**6, 10**6)),
        ("boolean", pa.bool_(), st.booleans()),
        ("boolean", pa.int64(), st.integers(0, 2)),
        ("string", pa.string(), text),
        ("string", pa.int64(), st.integers(-5, 5)),
        ("integer", pa.string(), st.sampled_from(["1", "x,y", ""])),
        ("money(2)", pa.decimal128(12, 2),
         st.decimals(min_value=-10**6, max_value=10**6, places=2, allow_nan=False)),
        ("timestamp", pa.timestamp("us", tz="UTC"), stamp.map(lambda t: t.replace(tzinfo=dt.UTC))),
        ("bigdatetime", pa.timestamp("us"), stamp),
    ]


def test_tables_write_the_same_bytes_as_rows_on_generated_columns(tmp_path, monkeypatch):
    """Also with the joined lines written a few rows at a time (``SLICE_ROWS`` 4: tables of
    up to 6 rows, in one slice or two)."""
    import pyarrow as pa
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from runtime import csv_output
    from runtime.csv_output import write_csv_tables
    monkeypatch.setattr(csv_output, "SLICE_ROWS", 4)
    kinds = _column_strategies()

    @st.composite
    def cases(draw):
        chosen = draw(st.lists(st.sampled_from(range(len(kinds))), min_size=1, max_size=4))
        rows = draw(st.integers(0, 6))
        cols, arrays = [], {}
        for k, i in enumerate(chosen):
            ccl_type, kind, values = kinds[i]
            name = f"c{k}"
            cols.append([name, ccl_type])
            if draw(st.booleans()) or k == 0:  # a column the tables lack is written empty
                arrays[name] = pa.array(draw(st.lists(st.none() | values, min_size=rows, max_size=rows)),
                                        type=kind)
        if draw(st.booleans()):
            arrays["__op"] = pa.array(draw(st.lists(st.sampled_from([None, "i", "u", "d", ""]),
                                                    min_size=rows, max_size=rows)), type=pa.string())
        cut = draw(st.integers(0, rows))
        opts = draw(st.sampled_from([{}, {"opcodes": True}, {"opcodes": True, "delimiter": ";"},
                                     {"delimiter": "|", "header": False}, {"delimiter": "0"},
                                     {"opcodes": True, "header": False},
                                     {"opcodes": True, "stream_name": "W"},
                                     {"opcodes": True, "stream_name": 'a"b', "delimiter": "\t"}]))
        return cols, pa.table(arrays), cut, opts

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def check(case):
        cols, table, cut, opts = case
        a, b = tmp_path / "a.csv", tmp_path / "b.csv"
        assert write_csv(str(a), cols, table.to_pylist(), **opts) == table.num_rows
        assert write_csv_tables(str(b), cols, [table.slice(0, cut), table.slice(cut)], **opts) \
            == table.num_rows
        assert a.read_bytes() == b.read_bytes(), (cols, opts)
    check()


def test_tables_of_one_column_keep_the_quoted_empty_line(tmp_path):
    """The csv module writes a line whose only field is empty as ``""`` (else it would be an empty
    line); the joined lines do the same."""
    import pyarrow as pa

    from runtime.csv_output import write_csv_tables
    path = tmp_path / "one.csv"
    table = pa.table({"s": pa.array(["a", "", None, "b"])})
    assert write_csv_tables(str(path), [["s", "string"]], [table]) == 4
    assert path.read_text() == 's\na\n""\n""\nb\n'


def test_float_columns_write_python_repr(tmp_path):
    """A float column written from Arrow has each value in :func:`format_value`'s text (Python's
    repr), on random bit patterns, short decimals, whole numbers and the plain/exponent borders."""
    import random
    import struct

    import pyarrow as pa

    from runtime.csv_output import write_csv_tables
    rnd = random.Random(24)
    values = [struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20000)]
    values += [rnd.randrange(-10**7, 10**7) / 10**rnd.randrange(0, 9) for _ in range(20000)]
    values += [float(rnd.randrange(-10**17, 10**17)) for _ in range(5000)]
    values += [rnd.uniform(0.5, 2) * 10.0**e * s for e in range(-8, 20) for s in (1, -1) for _ in range(50)]
    values += [m * 10.0**e for e in (-5, -4, 15, 16) for m in (1.0, 0.99999999, 9.999999999999998, 1.0000000001)]
    values += [0.0, -0.0, 5e-324, 1.7976931348623157e308, math.inf, -math.inf, math.nan, None]
    path = tmp_path / "f.csv"
    write_csv_tables(str(path), [["x", "float"]], [pa.table({"x": pa.array(values, pa.float64())})],
                     header=False)
    expected = [format_value(v, "float") or '""' for v in values]
    assert path.read_text().split("\n")[:-1] == expected
