"""PARAMETER resolution: command line > .ccr > CCL default, typed values, PARTITIONS ranges, errors."""
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from cli_runner import run

from ccl.config.ccr import parse_ccr
from ccl.diagnostics import render
from ccl.config.parameters import parse_param_options, resolve_parameters
from ccl.syntax.project import UsageError, load_text
from ccl.config.project_config import load_project_config
from ccl.config.secret import Secret

CCR_DIR = Path(__file__).parent / "ccr"

PROJECT = """\
DECLARE
    PARAMETER integer numParts := 4;
    PARAMETER float threshold := 2.5;
    PARAMETER string region;
END;
CREATE INPUT STREAM Trades SCHEMA (sym string, px float);
CREATE OUTPUT STREAM Big
    PARTITION BY Trades HASH(sym)
    PARTITIONS numParts
AS SELECT * FROM Trades WHERE Trades.px > threshold;
CREATE OUTPUT STREAM Small PARTITION BY Trades ROUNDROBIN PARTITIONS numParts
AS SELECT * FROM Trades;
"""




def ccr_text(**params):
    body = "".join(f'    <Parameter name="{k}">{v}</Parameter>\n' for k, v in params.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<Configuration xmlns="http://www.sybase.com/esp/project_config/2010/08/">\n'
            "  <Runtime>\n   <Parameters>\n" + body + "   </Parameters>\n  </Runtime>\n"
            "</Configuration>\n")


def resolve(ccl=PROJECT, ccr=None, cli=None):
    project = load_text(ccl, "p.ccl")
    assert project.diagnostics == []
    parsed = None
    if ccr is not None:
        parsed, diags = parse_ccr(ccr.encode(), "p.ccr", project.sources)
        assert diags == []
    params, diags = resolve_parameters(project, parsed, cli)
    return params, diags, project


# --- precedence ----------------------------------------------------------------------------------

def test_ccl_default_then_ccr_then_command_line():
    params, diags, _ = resolve(ccr=ccr_text(region="EU"))
    assert diags == []
    assert {n: (p.value, p.source) for n, p in params.items()} == {
        "numParts": (4, "CCL default"), "threshold": (2.5, "CCL default"), "region": ("EU", ".ccr")}
    params, _, _ = resolve(ccr=ccr_text(region="EU", numParts="16"))
    assert (params["numParts"].value, params["numParts"].source) == (16, ".ccr")
    assert (params["numParts"].origin.file, params["numParts"].origin.line) == ("p.ccr", 6)
    assert (params["numParts"].span.line, params["numParts"].span.col) == (2, 23)  # the declaration
    params, _, _ = resolve(ccr=ccr_text(region="EU", numParts="16"), cli={"numParts": "32"})
    assert (params["numParts"].value, params["numParts"].source, params["numParts"].origin) == (
        32, "command line", None)
    assert params["threshold"].type == "float" and params["numParts"].type == "integer"


def test_parameters_of_imported_files_are_resolved_and_module_parameters_are_not(tmp_path):
    (tmp_path / "lib.ccl").write_text("DECLARE PARAMETER long retention := 100; END;\n")
    (tmp_path / "main.ccl").write_text(
        "IMPORT 'lib.ccl';\n"
        "CREATE MODULE m IN i OUT o BEGIN DECLARE PARAMETER integer depth; END;\n"
        "CREATE INPUT STREAM i SCHEMA (a integer); CREATE OUTPUT STREAM o AS SELECT * FROM i; END;\n")
    config = load_project_config(str(tmp_path / "main.ccl"))
    assert config.all_diagnostics == []
    assert {n: p.value for n, p in config.parameters.items()} == {"retention": 100}


# --- types ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("decl,text,expected", [
    ("integer", "-12", -12),
    ("long", "9000000000", 9_000_000_000),
    ("float", "1e3", 1000.0),
    ("money", "12.5", Decimal("12.5000")),
    ("money(2)", "0.07", Decimal("0.07")),
    ("decimal(6, 2)", "1234.5", Decimal("1234.50")),
    ("boolean", "TRUE", True),
    ("string", "EU-West", "EU-West"),
    ("date", "2024-03-01T08:30:00", datetime(2024, 3, 1, 8, 30)),
    ("timestamp", "2024-03-01T08:30:00.250", datetime(2024, 3, 1, 8, 30, 0, 250000)),
    ("bigdatetime", "2024-03-01 08:30:00.000001", datetime(2024, 3, 1, 8, 30, 0, 1)),
    ("interval", "1 MINUTE 30 SECONDS", 90_000_000),
    ("binary", "0xCAFE", b"\xca\xfe"),
    ("myint", "7", 7),  # a typedef of integer
])
def test_values_are_read_as_the_declared_type(decl, text, expected):
    ccl = f"DECLARE typedef integer myint; PARAMETER {decl} p; END;\n"
    params, diags, _ = resolve(ccl, ccr_text(p=text))
    assert diags == [] and params["p"].value == expected


@pytest.mark.parametrize("decl,text,reason", [
    ("integer", "4.5", "'4.5' is not an integer"),
    ("integer", "2147483648", "does not fit a 32-bit integer"),
    ("long", "ten", "'ten' is not a long"),
    ("float", "fast", "'fast' is not a float"),
    ("money(2)", "1.234", "more than 2 decimal places"),
    ("decimal(4, 2)", "123.4", "more than 2 digits before the point"),
    ("boolean", "maybe", "is not a boolean"),
    ("date", "01/03/2024", "is not a date"),
    ("interval", "soon", "is not an interval"),
    ("binary", "xyz", "is not binary"),
])
def test_wrong_type_in_the_ccr_is_an_error_at_the_ccr_line(decl, text, reason):
    ccl = f"DECLARE PARAMETER {decl} p := NULL; END;\n"
    params, diags, project = resolve(ccl, ccr_text(p=text))
    assert "p" not in params
    (diag,) = diags
    assert (diag.code, diag.span.file, diag.span.line) == ("CCL1311", "p.ccr", 5)
    assert reason in diag.message
    assert diag.notes == [f"declared at p.ccl:1:{19 + len(decl) + 1}"]  # the name after the type
    assert render(diag, project.sources).splitlines()[1] == f'        <Parameter name="p">{text}</Parameter>'


def test_wrong_ccl_defaults():
    ccl = ("DECLARE PARAMETER integer a := 2.5; PARAMETER boolean b := 'yes';\n"
           "PARAMETER integer c := e + 4; PARAMETER vector(integer) d; PARAMETER float e := -1;\n"
           "PARAMETER money(2) f := 0.005; PARAMETER date g := 'noon'; PARAMETER string h := NULL;\n"
           "END;\n")
    params, diags, _ = resolve(ccl)
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [
        ("CCL1311", 1, 32), ("CCL1311", 1, 60), ("CCL1316", 2, 24), ("CCL1315", 2, 57),
        ("CCL1311", 3, 25), ("CCL1311", 3, 52)]
    assert "a float literal cannot be an integer" in diags[0].message
    assert "vector(...)" in diags[3].message
    assert {n: p.value for n, p in params.items()} == {"e": -1.0, "h": None}


def test_command_line_values_are_checked_and_unknown_names_refused():
    with pytest.raises(UsageError, match=r"--param numParts=many: 'many' is not an integer "
                                         r"\(the parameter is declared integer at p.ccl:2:23\)"):
        resolve(ccr=ccr_text(region="x"), cli={"numParts": "many"})
    with pytest.raises(UsageError, match="declares no parameter 'numPart'; did you mean 'numParts'"):
        resolve(ccr=ccr_text(region="x"), cli={"numPart": "4"})
    with pytest.raises(UsageError, match="expected NAME=VALUE"):
        parse_param_options(["numParts"])
    with pytest.raises(UsageError, match="given twice"):
        parse_param_options(["a=1", "a=2"])
    assert parse_param_options(["a=x=y", "b="]) == {"a": "x=y", "b": ""}


# --- missing and unknown -------------------------------------------------------------------------

def test_parameter_without_default_or_value_is_an_error_at_the_declaration():
    params, diags, project = resolve()
    (diag,) = diags
    assert (diag.code, diag.span.file, diag.span.line, diag.span.col) == ("CCL1312", "p.ccl", 4, 22)
    assert "'region' has no default and no value" in diag.message
    assert render(diag, project.sources).splitlines()[1] == "        PARAMETER string region;"
    assert "region" not in params and "numParts" in params


def test_ccl_config_prints_no_configuration_when_there_are_errors(tmp_path):
    (tmp_path / "p.ccl").write_text(PROJECT)
    code, out, err = run("config", str(tmp_path / "p.ccl"))
    assert code == 1 and out == ""
    assert f"{tmp_path / 'p.ccl'}:4:22: error CCL1312" in err
    assert err.endswith("1 error(s); no configuration printed\n")
    code, out, err = run("config", str(tmp_path / "p.ccl"), "--param", "region=EU")
    assert code == 0 and "  region     string   'EU'  command line\n" in out


def test_unknown_ccr_parameter_is_a_warning_with_did_you_mean(tmp_path):
    params, diags, _ = resolve(ccr=ccr_text(region="EU", numparts="8"))
    assert [(d.code, d.severity, d.span.line) for d in diags] == [("CCL1310", "warning", 6)]
    assert "no parameter 'numparts'" in diags[0].message and "did you mean 'numParts'" in diags[0].message
    assert params["numParts"].value == 4
    (tmp_path / "p.ccl").write_text(PROJECT)
    (tmp_path / "p.ccr").write_text(ccr_text(region="EU", numparts="8"))
    code, out, err = run("check", str(tmp_path / "p.ccl"))
    assert code == 0 and "warning CCL1310" in err and "1 warning(s)" in out


# --- PARTITIONS ----------------------------------------------------------------------------------

@pytest.mark.parametrize("count", ["0", "65536", "-3"])
def test_partitions_out_of_range_names_the_ccr_line_and_the_clause(count):
    params, diags, project = resolve(ccr=ccr_text(region="EU", numParts=count))
    (diag,) = diags
    assert (diag.code, diag.span.file, diag.span.line) == ("CCL1313", "p.ccr", 6)
    assert diag.message == (f"partition count {count} of parameter 'numParts' (from the .ccr) is out "
                            f"of range 1..65535")
    assert diag.notes == ["used by PARTITIONS numParts of Big at p.ccl:9:16",
                          "used by PARTITIONS numParts of Small at p.ccl:11:70"]
    text = render(diag, project.sources)
    assert f'<Parameter name="numParts">{count}</Parameter>' in text


@pytest.mark.parametrize("count", ["1", "65535"])
def test_partitions_at_the_bounds_are_fine(count):
    params, diags, _ = resolve(ccr=ccr_text(region="EU", numParts=count))
    assert diags == [] and params["numParts"].value == int(count)


def test_partitions_out_of_range_from_the_default_and_the_command_line():
    _, diags, _ = resolve(PROJECT.replace(":= 4", ":= 0"), ccr_text(region="EU"))
    assert [(d.code, d.span.file, d.span.line, d.span.col) for d in diags] == [
        ("CCL1313", "p.ccl", 2, 35)]
    assert "(from its CCL default)" in diags[0].message and len(diags[0].notes) == 2
    _, diags, _ = resolve(ccr=ccr_text(region="EU"), cli={"numParts": "70000"})
    assert [(d.code, d.span.file, d.span.line, d.span.col) for d in diags] == [
        ("CCL1313", "p.ccl", 9, 16)]
    assert "(--param numParts=70000)" in diags[0].message
    assert diags[0].notes == ["used by PARTITIONS numParts of Small at p.ccl:11:70"]


def test_partitions_parameter_must_be_an_integer():
    ccl = PROJECT.replace("PARAMETER integer numParts := 4", "PARAMETER float numParts := 4.0")
    _, diags, _ = resolve(ccl, ccr_text(region="EU"))
    assert [(d.code, d.span.line) for d in diags] == [("CCL1314", 9), ("CCL1314", 11)]
    assert "parameter 'numParts' is float" in diags[0].message


def test_partition_count_comes_from_the_ccr_and_changes_with_it(tmp_path):
    ccl = tmp_path / "weather.ccl"
    ccl.write_text((CCR_DIR / "weather.ccl").read_text())
    ccr = tmp_path / "weather.ccr"

    def partitions():
        code, out, err = run("config", str(ccl), "--format", "json")
        assert code == 0, err
        param = json.loads(out)["parameters"]["stationPartitions"]
        return param["value"], param["source"]

    assert partitions() == (8, "CCL default")
    ccr.write_text((CCR_DIR / "weather.ccr").read_text())
    assert partitions() == (16, ".ccr")
    ccr.write_text((CCR_DIR / "weather.ccr").read_text().replace(">16<", ">48<"))
    assert partitions() == (48, ".ccr")
    ccr.write_text((CCR_DIR / "weather.ccr").read_text().replace(">16<", ">0<"))
    code, out, err = run("check", str(ccl))
    assert code == 1 and f"{ccr}:34:7: error CCL1313" in err
    assert f"note: used by PARTITIONS stationPartitions of StationStats at {ccl}:24:16" in err


# --- adapter property sets -----------------------------------------------------------------------

def test_property_set_overrides_ccl_properties_and_secrets_stay_masked():
    config = load_project_config(str(CCR_DIR / "weather.ccl"))
    (adapter,) = config.adapters
    assert adapter.property_set == "synopFiles"
    props = {name: (p.value, p.source) for name, p in adapter.properties.items()}
    assert props["dir"] == ("/srv/met/synop", ".ccr")       # the set overrides dir = feedDir
    assert props["delimiter"] == (";", ".ccr")
    assert props["file"] == ("obs", "CCL") and props["hasHeader"] == (True, "CCL")
    assert isinstance(props["sftpPassword"][0], Secret)


def test_property_set_missing_or_without_ccr(tmp_path):
    ccl = ("CREATE INPUT STREAM s SCHEMA (a integer);\n"
           "ATTACH INPUT ADAPTER a TYPE dsv_in TO s PROPERTIES propertyset = 'nope', dir = '/x';\n")
    (tmp_path / "p.ccl").write_text(ccl)
    config = load_project_config(str(tmp_path / "p.ccl"))
    assert [(d.code, d.severity, d.span.line, d.span.col) for d in config.diagnostics] == [
        ("CCL1331", "warning", 2, 66)]
    (tmp_path / "p.ccr").write_text(ccr_text())
    config = load_project_config(str(tmp_path / "p.ccl"))
    assert [(d.code, d.span.line) for d in config.diagnostics] == [("CCL1330", 2)]
    assert "which" in config.diagnostics[0].message and "(defined: none)" in config.diagnostics[0].message


def test_adapter_property_may_name_a_parameter():
    ccl = ("DECLARE PARAMETER string inDir := '/in'; END;\n"
           "CREATE INPUT STREAM s SCHEMA (a integer);\n"
           "ATTACH INPUT ADAPTER a TYPE dsv_in TO s PROPERTIES dir = inDir;\n")
    project = load_text(ccl, "p.ccl")
    config = load_project_config("p.ccl", project=project, params=["inDir=/data"])
    prop = config.adapters[0].properties["dir"]
    assert (prop.value, prop.note) == ("/data", "parameter inDir")


def test_a_money_literal_is_a_parameter_default():
    """ESP's module example: parameter money(2) minimumPrice := 10.00d2 (also a float, a decimal,
    negative); a money literal cannot be an integer."""
    params, diags, _ = resolve("DECLARE PARAMETER money(2) m := 10.00d2; PARAMETER float f := -2.5d1;\n"
                               "PARAMETER decimal(6, 3) d := 1.25d2; PARAMETER integer i := 3d2; END;\n")
    assert [(d.code, d.span.col) for d in diags] == [("CCL1311", 61)]
    assert {k: p.value for k, p in params.items()} == {
        "m": Decimal("10.00"), "f": -2.5, "d": Decimal("1.250")}


def test_parameter_defaults_may_be_constant_expressions_and_lists():
    """ESP: parameter typeName name1 [:= constant_expression] [, name2 [:= constant_expression]];
    an expression of literals is evaluated once; one that reads a name is not constant."""
    params, diags, _ = resolve("DECLARE PARAMETER integer lo := 1, hi := 2 * 5; PARAMETER float r := sqrt(16.0);\n"
                               "PARAMETER string s := 'a' + 'b'; PARAMETER integer bad := lo + 1; END;\n")
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [("CCL1316", 2, 59)]
    assert {k: p.value for k, p in params.items()} == {"lo": 1, "hi": 10, "r": 4.0, "s": "ab"}
