"""The `ccl` command line: output formats and exit codes (called in-process, plus one real subprocess)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

from ccl import __version__

SEEDS = Path(__file__).parent / "projects" / "seeds"




@pytest.fixture
def bad_file(tmp_path):
    path = tmp_path / "bad.ccl"
    path.write_text("CREATE INPUT STREAM s SCHEMA (a integer);\n"
                    "CREATE OUTPUT STREAM t AS SELECT a, FROM s;\n"
                    "CREATE OUTPUT STREAM u AS SELECT a FROM s WHERE;\n")
    return path


def test_check_ok_prints_a_summary_and_exits_0():
    code, out, err = run("check", str(SEEDS / "hash_vwap_broadcast.ccl"))
    assert code == 0 and err == ""
    assert "ok (2 input windows, 1 output window; 1 partitioned)" in out
    assert "  partitioned vwapW (window): HASH(isin) by priceW, 2 instances; broadcast: volumeW" in out


def test_check_reports_all_errors_with_source_line_and_caret(bad_file):
    code, out, err = run("check", str(bad_file))
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"{bad_file}:2:37: error CCL1101: syntax error at 'FROM'; expected an expression or '*'"
    assert lines[1] == "    CREATE OUTPUT STREAM t AS SELECT a, FROM s;"
    assert lines[2] == "    " + " " * 36 + "^"
    assert lines[3].startswith(f"{bad_file}:3:48: error CCL1101")
    assert lines[-1] == f"{bad_file}: 2 error(s), 0 warning(s)"


def test_check_json_format(bad_file):
    code, out, _ = run("check", "--format", "json", str(bad_file))
    assert code == 1
    diags = json.loads(out)
    assert [(d["line"], d["column"], d["code"], d["severity"]) for d in diags] == [
        (2, 37, "CCL1101", "error"), (3, 48, "CCL1101", "error")]


def test_missing_file_and_directory_are_one_line_usage_errors(tmp_path):
    code, out, err = run("check", str(tmp_path / "nope.ccl"))
    assert (code, out) == (2, "") and err == f"ccl: error: {tmp_path / 'nope.ccl'}: no such file\n"
    code, _, err = run("check", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_a_file_that_is_not_utf8_is_read_as_windows_1252(tmp_path):
    """CCL1005: a comment or string saved by a Windows editor; the text keeps its letters (the
    string literal's value is 'déjà €'), imported files too."""
    (tmp_path / "lib.ccl").write_bytes("// Stra\u00dfe\nCREATE SCHEMA s (a integer);\n".encode("cp1252"))
    main_file = tmp_path / "main.ccl"
    main_file.write_bytes(("IMPORT 'lib.ccl';\n// caf\u00e9\nCREATE INPUT STREAM i SCHEMA s;\n"
                           "CREATE OUTPUT STREAM o AS SELECT i.a, 'd\u00e9j\u00e0 \u20ac' t FROM i;\n")
                          .encode("cp1252") + b"// \x81\n")
    code, _, err = run("check", str(main_file))
    assert code == 0
    assert f"{main_file}:2:7: warning CCL1005: the file is not UTF-8 (byte 0xe9)" in err
    assert f"{tmp_path / 'lib.ccl'}:1:8: warning CCL1005" in err
    from ccl.syntax.project import load_project
    project = load_project(str(main_file))
    literal = project.files[str(main_file)].statements[-1].query.items[1].expr
    assert literal.value == "d\u00e9j\u00e0 \u20ac"
    assert project.sources.line(str(main_file), 5) == "// \x81"


def test_imports_are_checked_and_missing_ones_reported(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "schemas.ccl").write_text("CREATE SCHEMA S (a integer);\n")
    main_file = tmp_path / "main.ccl"
    main_file.write_text("IMPORT 'lib/schemas.ccl';\nIMPORT 'lib/missing.ccl';\n"
                         "CREATE INPUT STREAM x SCHEMA S;\n")
    code, _, err = run("check", str(main_file))
    assert code == 1
    assert f"{main_file}:2:1: error CCL1201: cannot import 'lib/missing.ccl'" in err


def test_an_import_inside_a_module_brings_its_statements_into_the_module(tmp_path):
    """SAP's "Parameters in Modules" example imports its schemas inside the module body: the
    import was dropped (unknown schema), and a missing file there was not reported."""
    from ccl.syntax.project import load_project
    (tmp_path / "schemas.ccl").write_text("CREATE SCHEMA TradesSchema (Id integer, Price float);\n")
    module = ("CREATE MODULE M{n} IN I OUT O BEGIN\n  IMPORT '{file}';\n"
              "  CREATE INPUT STREAM I SCHEMA TradesSchema;\n"
              "  CREATE OUTPUT STREAM O SCHEMA TradesSchema AS SELECT * FROM I WHERE I.Price > 20;\nEND;\n")
    main_file = tmp_path / "main.ccl"
    main_file.write_text(module.format(n=1, file="schemas.ccl") + module.format(n=2, file="schemas.ccl")
                         + "CREATE INPUT STREAM T SCHEMA (Id integer, Price float);\n"
                           "LOAD MODULE M1 AS a IN I = T OUT O = Big;\n")
    code, out, err = run("check", str(main_file))
    assert code == 0, err
    bodies = [s.body for s in load_project(str(main_file)).statements if type(s).__name__ == "CreateModule"]
    assert [[type(s).__name__ for s in body] for body in bodies] == [
        ["CreateSchema", "CreateElement", "CreateElement"]] * 2  # each module gets the schema
    main_file.write_text(module.format(n=1, file="missing.ccl"))
    code, _, err = run("check", str(main_file))
    assert code == 1 and f"{main_file}:2:3: error CCL1201: cannot import 'missing.ccl'" in err


def test_import_cycle(tmp_path):
    (tmp_path / "a.ccl").write_text("IMPORT 'b.ccl';\n")
    (tmp_path / "b.ccl").write_text("IMPORT 'a.ccl';\n")
    code, _, err = run("check", str(tmp_path / "a.ccl"))
    assert code == 1 and "CCL1202" in err and "import cycle" in err


def test_explain():
    code, out, _ = run("check", "--explain", "ccl1104")
    assert code == 0 and out.startswith("CCL1104 (error): duplicate clause")
    code, _, err = run("check", "--explain", "CCL9999")
    assert code == 2 and "unknown diagnostic code" in err


def test_parse_json_and_canonical_output():
    code, out, _ = run("parse", "--json", str(SEEDS / "hash_maxprice.ccl"))
    tree = json.loads(out)
    assert code == 0 and tree["node"] == "Project"
    window = tree["statements"][1]
    assert (window["node"], window["line"], window["col"]) == ("CreateElement", 4, 1)
    assert window["partition"]["specs"][0]["method"] == "hash"
    code, out, _ = run("parse", str(SEEDS / "hash_maxprice.ccl"))
    assert code == 0 and "PARTITION BY priceW HASH(isin) PARTITIONS 5" in out


def test_help_and_version():
    code, out, _ = run("--version")
    assert code == 0 and out.strip() == f"ccl {__version__}"
    code, out, _ = run("--help")
    assert code == 0 and "check" in out and "parse" in out
    for command in ("check", "parse"):
        code, out, _ = run(command, "--help")
        assert code == 0 and "examples:" in out and f"ccl {command} " in out


def test_usage_errors_exit_2():
    assert run("frobnicate")[0] == 2
    assert run("check")[0] == 2
    assert run()[0] == 2


def test_console_script_runs_as_a_process():
    proc = subprocess.run([sys.executable, "-m", "ccl.cli", "check", str(SEEDS / "custom_vwap_two_inputs.ccl")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout and proc.stderr == ""


def test_explain_shows_each_partition_function_and_its_path(tmp_path):
    code, out, _ = run("explain", str(SEEDS / "hash_vwap_broadcast.ccl"))
    assert code == 0
    assert out.splitlines()[:4] == ["vwapW (window): 2 instances",
                                    "  input priceW: HASH(isin) -> Spark expression pmod(hash(isin), 2)",
                                    "  input volumeW: broadcast to every instance", ""]
    project = tmp_path / "loop.ccl"
    project.write_text("CREATE INPUT STREAM s SCHEMA (k string);\n"
                       "CREATE OUTPUT STREAM o PARTITION BY s { integer h := 0;\n"
                       "  for (c in [k = 1;]) { h := h + 1; } return h % o_partitions; } PARTITIONS 4\n"
                       "AS SELECT * FROM s;\n")
    code, out, _ = run("explain", str(project))
    assert code == 0 and "o (stream): 4 instances" in out
    assert "SPLASH interpreter in an Arrow UDF (not compilable: a for loop)" in out
    code, out, _ = run("explain", str(SEEDS / "custom_maxprice.ccl"))
    assert "input priceW: custom function -> compiled to one Spark expression" in out


def test_check_and_explain_count_the_instances_of_elements_partitioned_inside_modules(tmp_path):
    project = tmp_path / "nested.ccl"
    project.write_text(
        "CREATE MODULE m IN inS OUT outW BEGIN\n"
        "  CREATE INPUT STREAM inS SCHEMA (isin string, price float);\n"
        "  CREATE OUTPUT WINDOW outW PRIMARY KEY DEDUCED PARTITION BY inS HASH(isin) PARTITIONS 2\n"
        "    AS SELECT inS.isin, max(inS.price) p FROM inS GROUP BY inS.isin;\n"
        "END;\n"
        "CREATE INPUT STREAM priceS SCHEMA (isin string, price float);\n"
        "LOAD MODULE m AS m1 IN inS = priceS OUT outW = a PARTITION BY priceS HASH(isin) PARTITIONS 3;\n"
        "LOAD MODULE m AS m2 IN inS = priceS OUT outW = b;\n")
    code, out, _ = run("check", str(project))
    assert code == 0 and "3 partitioned" in out
    # module 3 x window 2 = 6 instances; the unpartitioned module instance keeps the window's 2
    assert "partitioned m1.outW (window): HASH(isin) by inS, 6 instances" in out
    assert "partitioned m2.outW (window): HASH(isin) by inS, 2 instances" in out
    code, out, _ = run("explain", str(project))
    assert code == 0 and "m1.outW (window): 6 instances" in out
    # the partition function itself still takes the window's own count
    assert "input inS: HASH(isin) -> Spark expression pmod(hash(isin), 2)" in out


def test_explain_refuses_a_project_with_errors(tmp_path):
    project = tmp_path / "bad.ccl"
    project.write_text("CREATE OUTPUT STREAM o AS SELECT * FROM nowhere;\n")
    code, _, err = run("explain", str(project))
    assert code == 1 and "CCL2001" in err and "nothing to explain" in err


def test_an_import_of_a_name_with_a_nul_is_a_diagnostic_not_a_traceback():
    """Found by the round-trip property test: open() raises ValueError on a NUL in the name."""
    from ccl.syntax.project import load_text
    project = load_text("IMPORT 'a\x00b.ccl';\n", "p.ccl")
    assert [(d.code, d.span.line) for d in project.diagnostics] == [("CCL1201", 1)]
    assert "NUL" in project.diagnostics[0].message


def test_an_expression_nested_beyond_the_recursion_limit_is_an_error_not_a_traceback(tmp_path):
    path = tmp_path / "deep.ccl"
    path.write_text("CREATE INPUT STREAM s SCHEMA (a integer);\nCREATE OUTPUT STREAM t AS SELECT "
                    + " + ".join("s.a" for _ in range(30000)) + " AS b FROM s;\n")
    code, out, err = run("check", str(path))
    assert code == 1 and "nested too deeply" in err and "Traceback" not in err
