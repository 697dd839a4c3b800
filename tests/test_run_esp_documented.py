"""CCL that ESP's own documentation shows, run end to end (issue 28): date arithmetic (the Examples
Guide's KEEP PER example), CREATE LIBRARY calls, the error-stream record functions and Flex records
carrying fields that are not the output's columns."""
from __future__ import annotations

from tests.runner_e2e import run_project, write_rows


def test_keep_per_example_groups_trades_by_the_hour_of_a_date(spark, tmp_path):
    """The Examples Guide's KEEP PER window: ``(trw.TradeTime/3600)*3600 TradeHour`` cuts a date to
    its hour (a date counts as seconds since the epoch in * / %)."""
    text = """
    CREATE INPUT WINDOW Trades SCHEMA (Id integer, Symbol string, TradeTime date, Volume integer,
        Stamp bigdatetime) PRIMARY KEY (Id) KEEP 10 ROWS PER (Symbol);
    CREATE OUTPUT WINDOW Hourly PRIMARY KEY DEDUCED AS
        SELECT trw.Symbol, (trw.TradeTime/3600)*3600 TradeHour, sum(trw.Volume) Volume
        FROM Trades trw GROUP BY trw.Symbol, (trw.TradeTime/3600)*3600;
    CREATE OUTPUT STREAM Checks AS SELECT t.Id, t.TradeTime + 3600000000 Later,
        t.TradeTime - 120000000 Earlier, t.Stamp + 5 Plus5us, t.Stamp - t.Stamp Zero,
        t.TradeTime >= 1700002800 Late, t.Stamp % 1000000 SubSecond, t.TradeTime / 0 ByZero
        FROM Trades t;
    """
    rows = [(1, "IBM", "2023-11-14T22:13:20", 10, "2023-11-14T22:13:20.123456"),
            (2, "IBM", "2023-11-14T22:59:59", 5, "2023-11-14T22:59:59.000001"),
            (3, "IBM", "2023-11-14T23:00:00", 7, "2023-11-14T23:00:00.5"),
            (4, "SAP", "2023-11-14T22:30:00", 1, "2023-11-14T22:30:00")]
    path = write_rows(str(tmp_path / "in" / "t.csv"), ["Id", "Symbol", "TradeTime", "Volume", "Stamp"], rows)
    out = run_project(spark, tmp_path, text, {"Trades": path})
    hourly = sorted((r["Symbol"], r["TradeHour"], r["Volume"]) for r in out.rows("Hourly"))
    assert hourly == [("IBM", "2023-11-14T22:00:00", "15"), ("IBM", "2023-11-14T23:00:00", "7"),
                      ("SAP", "2023-11-14T22:00:00", "1")]
    checks = {r["Id"]: r for r in out.rows("Checks")}
    assert checks["1"]["Later"] == "2023-11-14T23:13:20" and checks["1"]["Earlier"] == "2023-11-14T22:11:20"
    assert checks["1"]["Plus5us"] == "2023-11-14T22:13:20.123461" and checks["1"]["Zero"] == "0"
    # 1700002800 seconds after the epoch is 2023-11-14T23:00:00
    assert [checks[k]["Late"] for k in "1234"] == ["false", "false", "true", "false"]
    assert checks["3"]["SubSecond"] == "1970-01-01T00:00:00.500000"
    assert checks["1"]["ByZero"] == ""
    assert out.bad_records() == []


def test_a_library_call_makes_bad_records_that_name_the_library(spark, tmp_path):
    """The Migration Guide's foreign function: the project runs, rows calling it are bad records."""
    text = """
    CREATE LIBRARY Lib_0 LANGUAGE C FROM 'libforeign.so' ( INTEGER intfun ( ); );
    CREATE INPUT STREAM S SCHEMA (Id integer);
    CREATE OUTPUT STREAM O AS SELECT S.Id, Lib_0.intfun() N FROM S WHERE S.Id > 1;
    """
    path = write_rows(str(tmp_path / "in" / "s.csv"), ["Id"], [(1,), (2,)])
    out = run_project(spark, tmp_path, text, {"S": path})
    assert out.rows("O") == []
    [bad] = out.bad_records()
    assert bad["row"]["Id"] == 2 and "Lib_0.intfun(): library Lib_0 is C or Java code" in bad["reason"]
    assert "write intfun as a SPLASH function" in bad["reason"]


def test_error_stream_records_read_back_with_record_data_functions(spark, tmp_path):
    """The Programmers Guide's error-stream functions over the error stream's columns: the bad row
    as text (key columns before the bar) and as a record of the source's row type."""
    text = """
    CREATE INPUT WINDOW Orders SCHEMA (Id integer, Symbol string, Price float, At date)
        PRIMARY KEY (Id);
    CREATE OUTPUT ERROR STREAM Errors ON Orders;
    CREATE OUTPUT STREAM Described AS
        SELECT e.errorCode Code, recordDataToString(e.sourceStreamName, e.errorRecord) Row
        FROM Errors e;
    CREATE FLEX Readback IN Errors OUT OUTPUT STREAM Prices SCHEMA (Id integer, Price float, At date)
    BEGIN
        ON Errors {
            if (Errors.errorCode = 2) {
                typeof(Orders) rec := recordDataToRecord(Errors.sourceStreamName, Errors.errorRecord);
                output [Id = rec.Id; Price = rec.Price * 2; At = rec.At + 1000000;];
            }
        };
    END;
    """
    rows = [("i", 1, "IBM", 10.5, "2024-01-02T03:04:05"), ("i", 1, "IBM", 11.0, "2024-01-02T03:04:06"),
            ("i", "x", "SAP", 1.0, "")]
    path = write_rows(str(tmp_path / "in" / "o.csv"), ["ESP_OPS", "Id", "Symbol", "Price", "At"], rows)
    out = run_project(spark, tmp_path, text, {"Orders": path})
    described = sorted((r["Code"], r["Row"]) for r in out.rows("Described"))
    assert described == [("1", "[ line=i,x,SAP,1.0,; ]"),
                         ("2", "[ Id=1; | Symbol=IBM; Price=11.0; At=2024-01-02 03:04:06; ]")]
    assert [(r["Id"], r["Price"], r["At"]) for r in out.rows("Prices")] == [
        ("1", "22.0", "2024-01-02T03:04:07")]


def test_flex_record_fields_not_in_the_output_are_dropped_and_missing_columns_null(spark, tmp_path):
    """The Migration Guide's pattern stream: Symbol1/Symbol2 are no columns of the window (dropped),
    charData1/charData2 are not in the record (null); a record without the key is a bad record."""
    text = """
    CREATE INPUT STREAM Ticks SCHEMA (idloc integer, Symbol string);
    CREATE FLEX Pattern IN Ticks
        OUT OUTPUT WINDOW Matches SCHEMA (id integer, charData1 string, charData2 string)
        PRIMARY KEY (id)
    BEGIN
        ON Ticks {
            integer idloc := Ticks.idloc;
            if (Ticks.Symbol = 'nokey') output [ident = idloc; | charData1 = 'x';];
            else output [id = idloc; | Symbol1='aaa'; Symbol2='bbb'];
        };
    END;
    """
    path = write_rows(str(tmp_path / "in" / "t.csv"), ["idloc", "Symbol"], [(1, "a"), (2, "nokey"), (3, "b")])
    out = run_project(spark, tmp_path, text, {"Ticks": path})
    assert sorted(out.rows("Matches"), key=lambda r: r["id"]) == [
        {"id": "1", "charData1": "", "charData2": ""}, {"id": "3", "charData1": "", "charData2": ""}]
    [bad] = out.bad_records()
    assert bad["element"] == "Matches" and "null" in bad["reason"] and "key" in bad["reason"]
