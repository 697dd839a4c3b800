"""Runtime settings: config/default.yaml, --config, .ccr, --set; validation, did-you-mean, precedence."""
import json
from pathlib import Path

import pytest
from cli_runner import run

from ccl.config.secret import Secret
from ccl.config.settings import (
    DEFAULTS_FILE,
    SETTINGS,
    SOURCE_CCR,
    SOURCE_COMMAND_LINE,
    SOURCE_CONFIG_FILE,
    SOURCE_DEFAULTS,
    Setting,
    is_spark_master,
    parse_duration,
    parse_set_option,
    read_config_file,
    resolve_settings,
)
from ccl.diagnostics import SourceCache, render
from ccl.syntax.nodes import Span
from ccl.syntax.project import UsageError

ROOT = Path(__file__).resolve().parent.parent




def read_yaml(tmp_path, text):
    path = tmp_path / "site.yaml"
    path.write_text(text)
    sources = SourceCache()
    values, diags = read_config_file(str(path), SOURCE_CONFIG_FILE, sources)
    return values, diags, sources


def test_default_yaml_sets_every_key_and_is_the_packaged_file():
    assert Path(DEFAULTS_FILE).read_bytes() == (ROOT / "config" / "default.yaml").read_bytes()
    settings, diags = resolve_settings(project_name="wx")
    assert diags == []
    assert settings.as_dict() == {
        "spark.master": "local[*]", "spark.app_name": "ccl-wx", "spark.shuffle_partitions": 8,
        "spark.state_store": "rocksdb", "runtime.checkpoint_root": "checkpoints",
        "runtime.trigger_interval": "1 second", "runtime.poll_interval": "100 milliseconds",
        "runtime.max_files_per_batch": 0, "runtime.buckets": 0,
        "runtime.output_dir": "out",
        "runtime.bad_record_path": "out/bad-records", "runtime.log_level": "WARN",
        "runtime.workspace": "~/.ccl/workspace", "web.enabled": False, "web.host": "127.0.0.1",
        "web.port": 0, "web.token": Secret("")}
    assert all(s.source == SOURCE_DEFAULTS for s in settings.values.values())
    assert settings.setting("spark.master").span.line == 10


def test_nested_and_dotted_keys(tmp_path):
    values, diags, _ = read_yaml(tmp_path, "spark:\n  master: spark://h:7077\n"
                                           "runtime.log_level: info\n")
    assert diags == []
    assert {k: (v.value, v.span.line, v.span.col) for k, v in values.items()} == {
        "spark.master": ("spark://h:7077", 2, 11), "runtime.log_level": ("INFO", 3, 20)}


def test_empty_config_file_changes_nothing(tmp_path):
    values, diags, _ = read_yaml(tmp_path, "# nothing here\n")
    assert values == {} and diags == []


# --- precedence ----------------------------------------------------------------------------------

def test_each_level_overrides_the_next(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("spark:\n  master: local[2]\n  shuffle_partitions: 4\n"
                    "runtime:\n  log_level: ERROR\n")
    ccr = [Setting("spark.master", "spark://ccr:7077", SOURCE_CCR, Span("p.ccr", 9, 11)),
           Setting("runtime.log_level", "DEBUG", SOURCE_CCR, Span("p.ccr", 12, 9))]
    settings, diags = resolve_settings(config_file=str(site), ccr_settings=ccr,
                                       overrides=["spark.master=local[3]"])
    assert diags == []
    got = {key: (s.value, s.source) for key, s in settings.values.items()}
    assert got["spark.master"] == ("local[3]", SOURCE_COMMAND_LINE)       # command line > .ccr
    assert got["runtime.log_level"] == ("DEBUG", SOURCE_CCR)             # .ccr > --config
    assert got["spark.shuffle_partitions"] == (4, SOURCE_CONFIG_FILE)    # --config > defaults
    assert got["spark.state_store"] == ("rocksdb", SOURCE_DEFAULTS)      # defaults
    assert settings.setting("runtime.log_level").origin == ".ccr (p.ccr:12)"


def test_precedence_through_the_cli(tmp_path):
    (tmp_path / "p.ccl").write_text("CREATE INPUT STREAM s SCHEMA (a integer);\n")
    (tmp_path / "p.ccr").write_text(
        "<Configuration><Deployment><Project><Options>\n"
        "<Option name='bad-record-file' value='/ccr/bad'/>\n"
        "<Option name='debug-level' value='3'/>\n"
        "</Options></Project></Deployment></Configuration>\n")
    (tmp_path / "site.yaml").write_text("runtime:\n  bad_record_path: /yaml/bad\n"
                                        "  log_level: INFO\n  output_dir: /yaml/out\n")

    def settings(*extra):
        code, out, err = run("config", str(tmp_path / "p.ccl"), "--format", "json", *extra)
        assert code == 0, err
        return {k: (v["value"], v["source"]) for k, v in json.loads(out)["settings"].items()}

    got = settings("--config", str(tmp_path / "site.yaml"), "--set", "runtime.log_level=trace")
    assert got["runtime.log_level"] == ("TRACE", "command line")
    assert got["runtime.bad_record_path"] == ("/ccr/bad", ".ccr")
    assert got["runtime.output_dir"] == ("/yaml/out", "--config file")
    assert got["runtime.trigger_interval"] == ("1 second", "config/default.yaml")
    got = settings()
    assert got["runtime.log_level"] == ("ERROR", ".ccr")  # debug-level 3
    assert got["runtime.output_dir"] == ("out", "config/default.yaml")


def test_ccl_config_text_names_each_source(tmp_path):
    (tmp_path / "p.ccl").write_text("CREATE INPUT STREAM s SCHEMA (a integer);\n")
    (tmp_path / "site.yaml").write_text("spark:\n  shuffle_partitions: 12\n")
    code, out, err = run("config", str(tmp_path / "p.ccl"), "--config", str(tmp_path / "site.yaml"),
                         "--set", "spark.master=local[2]")
    assert code == 0 and err == ""
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert lines["spark.master"].split()[1:] == ["local[2]", "command", "line"]
    assert lines["spark.shuffle_partitions"].endswith(f"--config file ({tmp_path / 'site.yaml'}:2)")
    assert lines["spark.app_name"].split()[1:] == ["ccl-p", "config/default.yaml:12"]
    assert ".ccr: (none)" in out


# --- validation ----------------------------------------------------------------------------------

def test_unknown_keys_are_errors_with_did_you_mean(tmp_path):
    _, diags, sources = read_yaml(tmp_path, "spark:\n  mastr: local[2]\nruntme:\n  x: 1\n"
                                            "runtime.loglevel: INFO\nparameters:\n  n: 4\n")
    found = [(d.code, d.span.line, d.span.col, d.message) for d in diags]
    assert found == [
        ("CCL1321", 2, 3, "unknown setting 'spark.mastr'; did you mean 'spark.master'?"),
        ("CCL1321", 3, 1, "unknown setting 'runtme'; did you mean 'runtime'?"),
        ("CCL1321", 5, 1, "unknown setting 'runtime.loglevel'; did you mean 'runtime.log_level'?"),
        ("CCL1321", 6, 1, "unknown setting 'parameters' (parameters are set in the .ccr or with "
                          "--param NAME=VALUE)")]
    assert render(diags[0], sources).splitlines()[1:] == ["      mastr: local[2]", "      ^"]


@pytest.mark.parametrize("line,reason", [
    ("spark:\n  shuffle_partitions: eight\n", "'eight' is not an integer"),
    ("spark:\n  shuffle_partitions: 0\n", "0 is out of range"),
    ("spark:\n  shuffle_partitions: [1, 2]\n", "expected a single value, not a list"),
    ("spark:\n  master: 42\n", "'42' is not a Spark master URL"),
    ("spark:\n  master: esp://host:19011\n", "is not a Spark master URL"),
    ("spark:\n  state_store: memory\n", "'memory' is not one of rocksdb, hdfs"),
    ("spark:\n  app_name: ''\n", "expected a non-empty name"),
    ("runtime:\n  log_level: LOUD\n", "'LOUD' is not one of OFF, FATAL"),
    ("runtime:\n  trigger_interval: soon\n", "'soon' is not an interval"),
    ("runtime:\n  checkpoint_root: {a: 1}\n", "expected a single value, not a mapping"),
    ("runtime:\n  output_dir: ''\n", "expected a non-empty path"),
])
def test_invalid_values_in_yaml(tmp_path, line, reason):
    values, diags, _ = read_yaml(tmp_path, line)
    assert values == {}
    (diag,) = diags
    assert (diag.code, diag.span.line) == ("CCL1322", 2)
    assert reason in diag.message


def test_a_section_must_be_a_mapping_and_the_file_too(tmp_path):
    _, diags, _ = read_yaml(tmp_path, "spark: local[2]\n")
    assert [d.code for d in diags] == ["CCL1322"] and "'spark' is a section" in diags[0].message
    _, diags, _ = read_yaml(tmp_path, "- a\n- b\n")
    assert [d.code for d in diags] == ["CCL1322"]


def test_malformed_yaml_and_duplicate_keys(tmp_path):
    _, diags, _ = read_yaml(tmp_path, "spark:\n  master: [local\n")
    assert [(d.code, d.span.line) for d in diags] == [("CCL1320", 3)]
    _, diags, _ = read_yaml(tmp_path, "spark:\n  master: local\n  master: yarn\n")
    assert [(d.code, d.span.line) for d in diags] == [("CCL1306", 3)]
    assert "first at line 2" in diags[0].message


def test_config_file_errors_fail_check_with_file_and_line(tmp_path):
    (tmp_path / "p.ccl").write_text("CREATE INPUT STREAM s SCHEMA (a integer);\n")
    (tmp_path / "site.yaml").write_text("runtime:\n  trigger_interval: 5 parsecs\n")
    code, out, err = run("check", str(tmp_path / "p.ccl"), "--config", str(tmp_path / "site.yaml"))
    assert code == 1
    assert err.startswith(f"{tmp_path / 'site.yaml'}:2:21: error CCL1322: invalid value for "
                          f"runtime.trigger_interval: '5 parsecs' is not an interval")
    code, _, err = run("check", str(tmp_path / "p.ccl"), "--config", str(tmp_path / "nope.yaml"))
    assert code == 2 and err == f"ccl: error: {tmp_path / 'nope.yaml'}: no such file\n"


@pytest.mark.parametrize("item,message", [
    ("spark.mastr=local", "unknown setting 'spark.mastr'; did you mean 'spark.master'?"),
    ("parameters.n=4", "(set parameters with --param NAME=VALUE)"),
    ("spark.master", "expected KEY=VALUE"),
    ("spark.shuffle_partitions=-1", "invalid value for spark.shuffle_partitions: '-1' is not an integer"),
])
def test_bad_set_options_are_usage_errors(item, message):
    with pytest.raises(UsageError, match=None) as info:
        parse_set_option(item)
    assert message in str(info.value)
    code, out, err = run("config", str(ROOT / "tests" / "ccr" / "weather.ccl"), "--set", item)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_set_values_are_typed():
    assert parse_set_option("spark.shuffle_partitions=16").value == 16
    assert parse_set_option("runtime.log_level=debug").value == "DEBUG"
    assert parse_set_option("runtime.trigger_interval=500   Milliseconds").value == "500 milliseconds"


@pytest.mark.parametrize("url,ok", [
    ("local", True), ("local[*]", True), ("local[4]", True), ("local[4,2]", True),
    ("local[0]", False), ("spark://h:7077", True), ("spark://a:7077,b:7078", True),
    ("spark://h", False), ("spark://h:70000", False), ("yarn", True), ("k8s://https://k:6443", True),
    ("http://esp:19011", False), ("esp://h:19011", False), ("", False)])
def test_spark_master_urls(url, ok):
    assert is_spark_master(url) is ok


def test_durations():
    assert parse_duration("1 minute 30 seconds") == "1 minute 30 seconds"
    for bad in ("1", "second", "1.5 seconds", "-1 second"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_every_setting_is_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for key in SETTINGS:
        assert f"`{key}`" in doc


def test_config_help_has_examples():
    code, out, _ = run("config", "--help")
    assert code == 0 and "examples:" in out and "precedence:" in out
    code, out, _ = run("check", "--help")
    assert code == 0 and "--ccr" in out and "--param" in out and "--set" in out
