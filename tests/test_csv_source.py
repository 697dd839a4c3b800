"""The ccl_csv input source: parsing rules without Spark, then a few streaming runs on Spark."""
from __future__ import annotations

import datetime as dt
import os
import shutil
from decimal import Decimal

import pytest

from ccl.plan.model import Column, Element
from runtime.inputs.csv_text import file_slices, parse_file_text, read_file, read_slice
from runtime.inputs.formats import LINE_BITS, CsvFormat
from runtime.inputs.listing import FileSpec, Manifest, list_new_files
from runtime.inputs.source import read_input
from runtime.inputs.values import column_parser, java_pattern_regex

COLS = [["id", "integer"], ["price", "money(2)"], ["ts", "timestamp"], ["ok", "boolean"],
        ["x", "float"], ["s", "string"]]


def _element(name: str, columns: list) -> Element:
    """An input stream ``name`` of ``columns`` (``[name, ccl_type]`` pairs) as the plan has it."""
    return Element(name, "stream", "input", None, None, tuple(Column(c, t) for c, t in columns), ())


def parse(text: str, columns=COLS, **options):
    return list(parse_file_text(text, columns, CsvFormat.from_options(options)))


# --------------------------------------------------------------------------------------------------
# Parsing (no Spark)
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("first, header", [
    ("1,name", False),      # a data row whose value happens to be a column name
    ("id,name", True),
    ("name,id", True),
    ("ESP_OPS,id,name", True),
    ("name,extra,more", True),  # not the element's field count: not a data row
    ("x,name", True),       # 'x' is not an integer: a name
    ("1,bob", False),
])
def test_without_has_header_the_first_line_is_a_header_only_when_it_cannot_be_data(first, header):
    columns = [["id", "integer"], ["name", "string"]]
    rows = parse(first + "\n2,x\n", columns)
    if header:  # only the second line is a row (good or bad under that header)
        assert [r[0] for r in rows if not (r[2] or "").startswith("the header")] == [2]
    else:
        assert [(r[4], r[5]) for r in rows] == [(int(first.split(",")[0]), first.split(",")[1]), (2, "x")]


def test_header_of_string_columns_is_a_header():
    rows = parse("name,sym\nbob,A\n", [["sym", "string"], ["name", "string"]])
    assert [(r[4], r[5]) for r in rows] == [("A", "bob")]


def test_header_in_any_order_unknown_ignored_missing_null():
    rows = parse("s,x,id\nhi,1.5,7\n")
    assert rows == [(2, "i", None, None, 7, None, None, None, 1.5, "hi")]
    assert parse("s,zz,x,id,price,ok,ts\nhi,?,1.5,7,,,\n")[0][2:5] == (None, None, 7)


def test_a_header_that_does_not_fit_is_a_bad_record_and_rows_go_on():
    """A misspelt column name left the column null and dropped its values without a word."""
    cols = [["id", "integer"], ["name", "string"]]
    rows = parse("id,nmae\n1,a\n", columns=cols)
    assert [(r[0], r[2], r[3], r[4:]) for r in rows] == [
        (1, "the header has no column 'name' and names no column with 'nmae'; those values are not read",
         "id,nmae", (None, None)),
        (2, None, None, (1, None))]
    rows = parse("name,name\n7,seven\n", columns=cols, hasHeader="true")
    assert rows[0][2] == "the header names 'name' twice" and rows[1][4:] == (None, "7")


def test_values_of_each_type():
    text = ("id,price,ts,ok,x,s\n"
            "-3,1.235,2020-01-02T03:04:05.1239,yes,1e3,\"a,b\"\n"
            "4,7,2020-01-02 03:04,false,NaN,\n")
    (r1, r2) = parse(text)
    assert r1[4:] == (-3, Decimal("1.24"), dt.datetime(2020, 1, 2, 3, 4, 5, 123000), True, 1000.0, "a,b")
    assert r2[4:9] == (4, Decimal("7.00"), dt.datetime(2020, 1, 2, 3, 4), False, r2[8])
    assert r2[8] != r2[8] and r2[9] is None  # NaN; empty field is null


def test_no_header_columns_in_order_and_delimiter():
    rows = parse("1|2.5|||0.5|x\n", hasHeader="false", DELIMITER="|")
    assert rows == [(1, "i", None, None, 1, Decimal("2.50"), None, None, 0.5, "x")]


def test_without_has_header_the_first_line_tells():
    """No hasHeader property: a first line naming a column is a header, any other is data (ESP's
    toolkit_file_csv_input reads files without a header by default)."""
    assert parse("S,ID\nhi,7\n")[0][4:] == (7, None, None, None, None, "hi")
    rows = parse("7,1.5,,,,hi\n8,2,,,,ho\n")
    assert [(r[0], r[4], r[9]) for r in rows] == [(1, 7, "hi"), (2, 8, "ho")]


def test_esp_csv_property_names():
    """toolkit_file_csv_input's properties: csvDelimiter, csvHasHeader, csvExpectStreamNameOpcode,
    csvSecondDateFormat (date), csvMsDateFormat (timestamp), csvBigDatetimeFormat."""
    fmt = CsvFormat.from_options({"csvDelimiter": "|", "csvHasHeader": "TRUE",
                                  "csvSecondDateFormat": "dd/MM/yyyy HH:mm:ss",
                                  "csvMsDateFormat": "dd/MM/yyyy HH:mm:ss.SSS",
                                  "csvBigDatetimeFormat": "yyyy-MM-dd HH:mm:ss.SSSSSS"})
    assert (fmt.delimiter, fmt.has_header, fmt.date_format, fmt.timestamp_format,
            fmt.time_format("bigdatetime")) == ("|", True, "dd/MM/yyyy HH:mm:ss",
                                                "dd/MM/yyyy HH:mm:ss.SSS", "yyyy-MM-dd HH:mm:ss.SSSSSS")
    rows = parse("Trades,u,7,2.5,02/01/2020 03:04:05.250,,,x\n", csvExpectStreamNameOpcode="TRUE",
                 csvMsDateFormat="dd/MM/yyyy HH:mm:ss.SSS")
    assert rows == [(1, "u", None, None, 7, Decimal("2.50"), dt.datetime(2020, 1, 2, 3, 4, 5, 250000),
                     None, None, "x")]
    # A tab as ESP projects write it, escaped once or twice ('\\t' in a shell-generated .ccl).
    assert {CsvFormat.from_options({"csvDelimiter": d}).delimiter for d in ("\\t", "\\\\t", "tab")} == {"\t"}
    # The property's own name wins over ESP's alias.
    assert CsvFormat.from_options({"csvDelimiter": "|", "delimiter": ";"}).delimiter == ";"


def test_lines_of_other_streams_are_skipped_when_names_must_match():
    """One file may hold several streams' rows (NAME,opcode,fields): with matchStreamName (ESP's
    csvMatchStreamName; always for dsv_in) an element reads its own lines only, numbered by line."""
    text = "Trades,i,1,2.5,,,,a\nQuotes,i,9,9\nTrades,u,2,3,,,,b\n"
    fmt = CsvFormat.from_options({"csvExpectStreamNameOpcode": "true", "csvMatchStreamName": "true"},
                                 "Trades")
    rows = list(parse_file_text(text, COLS, fmt))
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [(1, "i", None, 1), (3, "u", None, 2)]
    # Without matchStreamName the name is not looked at: the Quotes line is a bad row.
    rows = list(parse_file_text(text, COLS, CsvFormat.from_options({"expectStreamNameOpcode": "1"}, "Trades")))
    assert [r[2] for r in rows] == [None, "expected 8 fields, got 4", None]


def test_esp_ops_letters_words_and_empty():
    text = "ESP_OPS,id\ni,1\nU,2\ndelete,3\nupsert,4\nSafeDelete,5\n,6\np,7\n"
    assert [r[1] for r in parse(text)] == ["i", "u", "d", "p", "s", "i", "p"]


def test_stream_name_opcode_prefix():
    rows = parse("priceW,u,1,2\npriceW,d,3,\n", columns=[["a", "long"], ["b", "integer"]],
                 expectStreamNameOpcode="true")
    assert [(r[1], r[4], r[5]) for r in rows] == [("u", 1, 2), ("d", 3, None)]


def test_bad_rows_have_reason_and_raw_line():
    text = "id,price,x\n1,abc,2\n2,3\n3,1,q\nx,1,1\n99999999999,1,1\n"
    rows = parse(text, columns=[["id", "integer"], ["price", "float"], ["x", "float"]])
    assert [(r[2], r[3]) for r in rows] == [
        ("column price: 'abc' is not a float", "1,abc,2"),
        ("expected 3 fields, got 2", "2,3"),
        ("column x: 'q' is not a float", "3,1,q"),
        ("column id: 'x' is not an integer", "x,1,1"),
        ("column id: '99999999999' is not an integer", "99999999999,1,1")]
    assert all(r[4:] == (None, None, None) for r in rows)
    fractions = parse("k,n\n3.7,1\n4,2.\n5, 6 \n", columns=[["k", "integer"], ["n", "long"]])
    assert [(r[2], r[4:]) for r in fractions] == [
        ("column k: '3.7' is not an integer", (None, None)),
        ("column n: '2.' is not a long", (None, None)), (None, (5, 6))]
    bad_op = parse("ESP_OPS,id\nz,1\n")
    assert bad_op[0][1:4] == (None, "unknown opcode 'z'", "z,1")


def test_text_the_csv_module_refuses_is_a_bad_record_and_reading_goes_on():
    """A carriage return in an unquoted field, and a field longer than the csv module's 128 KB
    default (a stray quote running to the end of the file), made the whole query fail."""
    rows = parse("id,v\n1,ok\n2,bare\rcr\n3,after\n", columns=[["id", "integer"], ["v", "string"]])
    assert [(r[2], r[3], r[4:]) for r in rows] == [
        (None, None, (1, "ok")), ("a carriage return inside an unquoted field", "2,bare\rcr", (None, None)),
        (None, None, (3, "after"))]
    assert [r[0] & 0xFFFFFFFF for r in rows] == [2, 3, 4]
    long = "x" * 200_000
    rows = parse(f"id,v\n1,{long}\n2,\"stray\n" + "3,y\n" * 20_000,
                 columns=[["id", "integer"], ["v", "string"]])
    assert rows[0][4:] == (1, long)
    assert rows[1][2] == "a quoted field is not closed before the end of the file" and len(rows) == 2
    assert rows[1][3].count("\n") == 20_000
    closed = parse('id,v\n1,"a ""b""\nc",\n2,12" screen\n', columns=[["id", "integer"], ["v", "string"]])
    assert [r[2] for r in closed] == ["expected 2 fields, got 3", None] and closed[1][5] == '12" screen'


def test_a_record_that_is_not_utf8_is_bad(tmp_path):
    """Latin-1 bytes were replaced by U+FFFD and the row went on as good."""
    path = tmp_path / "l1.csv"
    path.write_bytes("id,v\n1,café\n2,ok\n".encode("latin-1"))
    rows = list(read_file(str(path), [["id", "integer"], ["v", "string"]], CsvFormat()))
    assert [(r[2], r[3], r[4:]) for r in rows] == [
        ("not UTF-8 text", "1,caf\\xe9", (None, None)), (None, None, (2, "ok"))]


def test_decimal_overflow_is_bad():
    rows = parse("p\n123456789012345678\n", columns=[["p", "money(2)"]])
    assert rows[0][2] == "column p: '123456789012345678' does not fit in money(2)"


def test_sequence_numbers_are_file_and_line():
    rows = list(parse_file_text("id\n1\n\n2\n\"3\n\"\n4\n", [["id", "string"]],
                                CsvFormat.from_options({}), file_no=3))
    base = 3 << LINE_BITS
    assert [(r[0] - base, r[4]) for r in rows] == [(2, "1"), (4, "2"), (5, "3\n"), (7, "4")]


def test_slices_read_the_same_rows_as_the_whole_file(tmp_path):
    cols = [["id", "integer"], ["s", "string"]]
    path = tmp_path / "f.csv"
    path.write_text("\ufeffs,id\n" + "".join(f"x{i},{i}\n" if i % 7 else "\n" for i in range(300)))
    whole = list(read_file(str(path), cols, CsvFormat()))
    for size in (5, 64, 1000, 100_000):
        slices = file_slices(str(path), size)
        assert (len(slices) > 1) == (size < 100_000)
        assert [r for a, b, n in slices for r in read_slice(str(path), cols, CsvFormat(), 0, a, b, n)] \
            == whole
    quoted = tmp_path / "q.csv"
    quoted.write_text('s\n"a\nb"\n' * 50)
    assert file_slices(str(quoted), 5) == [(0, quoted.stat().st_size, 0)]


def test_date_and_timestamp_formats():
    fmt = CsvFormat.from_options({"dateFormat": "dd/MM/yyyy",
                                  "timestampformat": "yyyy-MM-dd'T'HH:mm:ss.SSS"})
    assert column_parser("date", fmt)("02/01/2020") == dt.datetime(2020, 1, 2)
    # Java's parser ignores the letter count between separators, not between adjacent numbers
    assert column_parser("date", fmt)("5/1/2024") == dt.datetime(2024, 1, 5)
    compact = CsvFormat.from_options({"dateFormat": "yyyyMMddHHmm"})
    assert column_parser("date", compact)("202401051502") == dt.datetime(2024, 1, 5, 15, 2)
    with pytest.raises(Exception, match="is not a date"):
        column_parser("date", compact)("2024151502")
    assert column_parser("timestamp", fmt)("2020-01-02T03:04:05.678") == \
        dt.datetime(2020, 1, 2, 3, 4, 5, 678000)
    with pytest.raises(Exception, match="is not a timestamp"):
        column_parser("timestamp", fmt)("2020-01-02 03:04:05")
    with pytest.raises(ValueError):
        java_pattern_regex("yyyy-MM-dd EEE")
    default = CsvFormat()
    assert column_parser("date", default)("2020-01-02T03:04:05.9") == dt.datetime(2020, 1, 2, 3, 4, 5)
    assert column_parser("bigdatetime", default)("2020-01-02 03:04:05.1234567") == \
        dt.datetime(2020, 1, 2, 3, 4, 5, 123456)


def test_strftime_date_formats_of_the_cpp_adapters():
    """ESP's C++ adapters write formats as strftime patterns (%Y-%m-%dT%H:%M:%S): a format with a
    '%' is read so; other directives are refused when the input is set up."""
    fmt = CsvFormat.from_options({"timestampFormat": "%Y-%m-%dT%H:%M:%S", "dateFormat": "%d/%m/%y"})
    assert column_parser("timestamp", fmt)("2024-01-02T03:04:05") == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert column_parser("date", fmt)("02/01/24") == dt.datetime(2024, 1, 2)
    fraction = CsvFormat.from_options({"timestampFormat": "%H:%M:%S.%f %Y%m%d %%"})
    assert column_parser("timestamp", fraction)("03:04:05.12 20240102 %") == \
        dt.datetime(2024, 1, 2, 3, 4, 5, 120000)
    with pytest.raises(Exception, match="is not a timestamp"):
        column_parser("timestamp", fmt)("2024-01-02 03:04:05")
    for bad in ("%b %d %Y", "%Y-%m-%d %Y", "%H:%"):
        with pytest.raises(ValueError, match="date format"):
            column_parser("timestamp", CsvFormat.from_options({"timestampFormat": bad}))


def test_options_are_case_insensitive_and_checked():
    fmt = CsvFormat.from_options({"Delimiter": "\\t", "HASHEADER": "false"})
    assert fmt.delimiter == "\t" and not fmt.has_header
    with pytest.raises(ValueError):
        CsvFormat.from_options({"delimiter": ";;"})
    assert CsvFormat.from_options({"hasHeader": " Yes "}).has_header is True
    for prop in ("hasHeader", "expectStreamNameOpcode", "csvMatchStreamName"):  # a typo meant false
        with pytest.raises(ValueError, match="must be true or false"):
            CsvFormat.from_options({prop: "maybe"})


def test_discovery_skips_hidden_temporary_and_known(tmp_path):
    for name in ["b.csv", "a.csv", ".x.csv", "_y.csv", "c.csv.tmp", "d.txt"]:
        (tmp_path / name).write_text("id\n")
    spec = FileSpec(str(tmp_path), pattern="*.csv")
    assert list_new_files(spec, []) == ["a.csv", "b.csv"]
    assert list_new_files(spec, ["a.csv"]) == ["b.csv"]
    assert list_new_files(FileSpec(str(tmp_path)), []) == ["a.csv", "b.csv", "d.txt"]
    assert list_new_files(FileSpec(str(tmp_path), file="d.txt"), []) == ["d.txt"]
    assert list_new_files(FileSpec(str(tmp_path), file="nope.csv"), []) == []
    # Java glob alternatives, nested too
    assert list_new_files(FileSpec(str(tmp_path), pattern="{a,d}.{csv,txt}"), []) == ["a.csv", "d.txt"]
    assert list_new_files(FileSpec(str(tmp_path), pattern="{b{.csv,x},q}"), []) == ["b.csv"]


def test_manifest_is_append_only_and_ignores_a_torn_line(tmp_path):
    m = Manifest(str(tmp_path / "m"))
    m.append(["a.csv", "b.csv"])
    with open(m.path, "a") as f:
        f.write("torn")
    assert m.read() == ["a.csv", "b.csv"]
    m.append(["c.csv"])
    assert m.read() == ["a.csv", "b.csv", "c.csv"]


# --------------------------------------------------------------------------------------------------
# Spark
# --------------------------------------------------------------------------------------------------

def run_available(df, checkpoint):
    """Run ``df`` with trigger(availableNow) into foreachBatch; the batches' rows by batch id."""
    batches: list[tuple[int, list]] = []

    def collect(batch, batch_id):
        batches.append((batch_id, batch.collect()))
    q = (df.writeStream.foreachBatch(collect).trigger(availableNow=True)
         .option("checkpointLocation", str(checkpoint)).start())
    q.awaitTermination()
    return batches


def test_spark_directory_types_ops_and_bad_rows(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.csv").write_text("s,id,ESP_OPS,price,ts,ok,x\nhi,1,u,1.234,2020-01-02 03:04:05.1234,true,1.5\n"
                             "lo,2,d,abc,,,\n")
    # Another delimiter: its first line names no column, so it is no header; both lines are bad.
    (d / "b.csv").write_text("x;id\n2.5;3\n")
    (d / "_hidden.csv").write_text("id\n9\n")
    element = _element("priceW", COLS)
    df = read_input(spark, element, FileSpec(str(d), pattern="*.csv"),
                    options={"max_files_per_batch": 1, "slice_bytes": 16})
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("__seq", "bigint"), ("__op", "string"), ("__bad", "string"), ("__raw", "string"),
        ("id", "int"), ("price", "decimal(18,2)"), ("ts", "timestamp"), ("ok", "boolean"),
        ("x", "double"), ("s", "string")]
    batches = run_available(df, tmp_path / "ck")
    assert [len(rows) for _, rows in batches] == [2, 2]  # one file per batch
    (r1, r2), (r3, r4) = batches[0][1], batches[1][1]
    assert r1.asDict() == {"__seq": 2, "__op": "u", "__bad": None, "__raw": None, "id": 1,
                           "price": Decimal("1.23"), "ts": dt.datetime(2020, 1, 2, 3, 4, 5, 123000),
                           "ok": True, "x": 1.5, "s": "hi"}
    assert (r2["__op"], r2["__bad"], r2["__raw"], r2["id"]) == \
        ("d", "column price: 'abc' is not a money(2)", "lo,2,d,abc,,,", None)
    assert [(r["__seq"], r["__bad"], r["__raw"]) for r in (r3, r4)] == [
        ((1 << 32) + 1, "expected 6 fields, got 1", "x;id"),
        ((1 << 32) + 2, "expected 6 fields, got 1", "2.5;3")]


def test_spark_replay_is_stable_and_new_files_continue(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    cols = [["id", "long"]]
    (d / "m.csv").write_text("1\n2\n")
    (d / "n.csv").write_text("3\n")
    ck = tmp_path / "ck"

    def start():
        df = read_input(spark, _element("e", cols), FileSpec(str(d), pattern="*.csv"),
                        options={"hasHeader": "false", "max_files_per_batch": 1,
                                 "slice_bytes": 2})
        return run_available(df, ck)

    first = start()
    seqs = {r["id"]: r["__seq"] for _, rows in first for r in rows}
    assert sorted(seqs) == [1, 2, 3]
    # Forget that the last batch was committed, and add a file that sorts first: the replayed batch
    # reads the same file with the same numbers; the new file comes after it.
    last = max(b for b, _ in first)
    os.remove(ck / "commits" / str(last))
    (ck / "commits" / f".{last}.crc").unlink(missing_ok=True)
    (d / "a.csv").write_text("4\n5\n")
    second = start()
    assert [(r["id"], r["__seq"]) for r in second[0][1]] == [(3, seqs[3])]
    new = [r for _, rows in second[1:] for r in rows]
    assert [r["id"] for r in new] == [4, 5]
    assert min(r["__seq"] for r in new) > max(seqs.values())
    # A third run sees nothing new.
    (d / "b.csv.tmp").write_text("6\n")
    assert [r for _, rows in start() for r in rows] == []


def test_spark_manifest_and_stream_name_opcode(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "x.csv").write_text("e,i,1,a\ne,u,1,b\ne,zz,1,c\n")
    manifest = tmp_path / "manifest"
    df = read_input(spark, _element("e", [["k", "integer"], ["v", "string"]]),
                    FileSpec(str(d), file="x.csv"),
                    options={"expectStreamNameOpcode": "true", "manifest_dir": str(manifest)})
    rows = [r for _, rows in run_available(df, tmp_path / "ck") for r in rows]
    assert [(r["__op"], r["v"], r["__bad"]) for r in rows] == [
        ("i", "a", None), ("u", "b", None), (None, None, "unknown opcode 'zz'")]
    assert Manifest(str(manifest)).read() == ["x.csv"]
    shutil.rmtree(d)


def test_spark_fast_path_rows_equal_the_python_path(spark, tmp_path):
    """The reader's pyarrow fast path (plain slices) and its Python path (a slice with a bad row,
    and ``rows_as_tuples``) give the same rows."""
    d = tmp_path / "in"
    d.mkdir()
    plain = "".join(f"{i},x{i},2020-01-02T03:04:{i % 60:02d}.{i:04d},{i}.25,{i % 2}\r\n"
                    for i in range(300))
    (d / "a.csv").write_text("id,s,ts,price,ok\r\n" + plain, newline="")
    (d / "b.csv").write_text("ok,id\nyes,1\nmaybe,2\n\nno,3\n")
    cols = [["id", "integer"], ["s", "string"], ["ts", "timestamp"], ["price", "money(2)"],
            ["ok", "boolean"]]
    files = FileSpec(str(d), pattern="*.csv")

    def rows(**options):
        df = read_input(spark, _element("e", cols), files,
                        options={"slice_bytes": 2000, **options})
        out = [r for _, batch in run_available(df, tmp_path / f"ck{len(options)}") for r in batch]
        return sorted(out, key=lambda r: r["__seq"])

    fast, python = rows(), rows(rows_as_tuples="true")
    assert fast == python and len(fast) == 303
    assert [r["__bad"] for r in fast[-3:]] == [None, "column ok: 'maybe' is not a boolean", None]


def test_spark_reads_xml_list_files(spark, tmp_path):
    """fileformat=xmllist (a toolkit_file_xmllist_input adapter): the same rows and sequence
    numbers as runtime.inputs.xml_list gives, bad records included, one file per batch."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.xml").write_text('<?xml version="1.0"?>\n<S ESP_OPS="u" id="7" s="x" price="1.5"/>\n'
                             '<S id="oops"/>\n')
    (d / "b.xml").write_text('<S id="8"/>\n')
    df = read_input(spark, _element("S", COLS), FileSpec(str(d), pattern="*.xml"),
                    options={"fileformat": "xmllist", "max_files_per_batch": 1})
    batches = run_available(df, tmp_path / "ck")
    got = [(r["__seq"], r["__op"], r["__bad"], r["id"], r["s"], r["price"])
           for _, rows in batches for r in rows]
    assert got == [(2, "u", None, 7, "x", Decimal("1.50")),
                   (3, "i", "column id: 'oops' is not an integer", None, None, None),
                   ((1 << 32) + 1, "i", None, 8, None, None)]
