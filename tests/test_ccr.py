"""Reading .ccr files: realistic files, every error with its .ccr line, safe XML, masked passwords."""
import json
import logging
import pickle
import time
from pathlib import Path

import pytest
from cli_runner import run

from ccl.config.ccr import NAMESPACE, ccr_beside, parse_ccr, read_ccr
from ccl.config.ccr_settings import DEBUG_LEVELS, settings_from_ccr
from ccl.diagnostics import SourceCache, render
from ccl.syntax.project import UsageError
from ccl.config.secret import Secret, redact_xml

CCR_DIR = Path(__file__).parent / "ccr"
WEATHER_CCL = CCR_DIR / "weather.ccl"
WEATHER_CCR = CCR_DIR / "weather.ccr"
DEV_CCR = CCR_DIR / "dev.ccr"
PASSWORDS = ["Tr0ub4dor&3", "Tr0ub4dor&amp;3", "hunter2-remote", "s3cret-sftp", "studio-dev-pw"]




def parse(text, name="t.ccr"):
    sources = SourceCache()
    ccr, diags = parse_ccr(text.encode(), name, sources)
    return ccr, diags, sources


def wrap(runtime="", deployment=""):
    return (f'<?xml version="1.0"?>\n<Configuration xmlns="{NAMESPACE}">\n'
            f"<Runtime>{runtime}</Runtime>\n<Deployment>{deployment}</Deployment>\n</Configuration>\n")


# --- realistic files ---------------------------------------------------------------------------

def test_full_file_is_read_with_every_line():
    ccr, diags = read_ccr(str(WEATHER_CCR), SourceCache())
    assert diags == []
    assert [(p.name, p.value, p.span.line) for p in ccr.parameters] == [
        ("stationPartitions", "16", 34), ("regionPartitions", "4", 35), ("gustThresholdKmh", "75.5", 36)]
    prod, feeds = ccr.clusters
    assert (prod.name, prod.type, prod.username, prod.span.line) == ("prod", "local", "espadmin", 6)
    assert isinstance(prod.password, Secret) and prod.password.reveal() == "Tr0ub4dor&3"
    assert [(m.value, m.span.line) for m in prod.managers] == [
        ("spark://spark-a.example.net:7077", 11), ("spark://spark-b.example.net:7077", 12)]
    assert (feeds.type, feeds.password.reveal()) == ("remote", "hunter2-remote")
    (binding,) = ccr.bindings
    assert binding.name == "Observations" and binding.fields["RemoteStream"] == "RawObservations"
    (pset,) = ccr.property_sets
    assert [(p.name, p.span.line) for p in pset.properties] == [
        ("dir", 42), ("delimiter", 43), ("sftpPassword", 44)]
    assert pset.properties[1].value == ";"  # value attribute form
    assert isinstance(pset.properties[2].value, Secret)
    deployment = ccr.deployment
    assert deployment.ha is False and deployment.span.line == 49
    assert [(o.name, o.value, o.span.line) for o in deployment.options][:3] == [
        ("time-granularity", "5", 51), ("debug-level", "6", 52),
        ("bad-record-file", "/var/log/weather/bad.records", 53)]
    (instance,) = deployment.instances
    assert instance.failover is False and instance.affinities == []


def test_file_without_namespace_and_attribute_values():
    ccr, diags = read_ccr(str(DEV_CCR), SourceCache())
    assert diags == []
    assert [(p.name, p.value) for p in ccr.parameters] == [("stationPartitions", "2"),
                                                           ("regionPartitions", "1")]
    assert ccr.clusters[0].managers[0].value == "http://localhost:19011"


def test_ccr_beside_the_ccl(tmp_path):
    ccl = tmp_path / "p.ccl"
    ccl.write_text("")
    assert ccr_beside(str(ccl)) is None
    (tmp_path / "p.ccr").write_text(wrap())
    assert ccr_beside(str(ccl)) == str(tmp_path / "p.ccr")


def test_unreadable_ccr_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read_ccr(str(tmp_path / "missing.ccr"), SourceCache())
    with pytest.raises(UsageError, match="is a directory"):
        read_ccr(str(tmp_path), SourceCache())
    code, out, err = run("check", str(WEATHER_CCL), "--ccr", str(tmp_path / "missing.ccr"))
    assert code == 2 and err.count("\n") == 1 and "missing.ccr: no such file" in err


# --- errors with the .ccr line -------------------------------------------------------------------

def test_malformed_xml_reports_line_and_column():
    text = wrap('<Parameters>\n<Parameter name="n">4</Parameter>\n</Parameterz>\n')
    ccr, diags, sources = parse(text)
    assert ccr is None
    (diag,) = diags
    assert (diag.code, diag.severity, diag.span.file, diag.span.line, diag.span.col) == (
        "CCL1301", "error", "t.ccr", 5, 3)
    assert diag.message == "mismatched tag"
    lines = render(diag, sources).splitlines()
    assert lines[1] == "    </Parameterz>" and lines[2] == "      ^"


def test_malformed_ccr_fails_ccl_check_with_the_ccr_position(tmp_path):
    (tmp_path / "p.ccl").write_text("CREATE INPUT STREAM s SCHEMA (a integer);\n")
    (tmp_path / "p.ccr").write_text("<Configuration>\n  <Runtime>\n</Configuration>\n")
    code, out, err = run("check", str(tmp_path / "p.ccl"))
    assert code == 1
    assert err.startswith(f"{tmp_path / 'p.ccr'}:3:3: error CCL1301: mismatched tag\n")


def test_empty_file_and_wrong_root():
    _, diags, _ = parse("")
    assert [d.code for d in diags] == ["CCL1301"]
    _, diags, _ = parse('<project name="x"/>')
    assert [d.code for d in diags] == ["CCL1303"] and "root element is <project>" in diags[0].message
    _, diags, _ = parse('<Configuration xmlns="urn:other"/>')
    assert [d.code for d in diags] == ["CCL1303"] and "urn:other" in diags[0].message


def test_unknown_elements_are_warned_about_but_foreign_namespaces_are_not():
    text = wrap('<Paramaters/><x:Note xmlns:x="urn:editor">hi</x:Note>')
    ccr, diags, _ = parse(text)
    assert ccr is not None
    assert [(d.code, d.severity, d.span.line) for d in diags] == [("CCL1304", "warning", 3)]
    assert "<Paramaters>" in diags[0].message


def test_invalid_and_duplicate_entries():
    text = wrap('<Parameters>\n'
                '<Parameter>4</Parameter>\n'
                '<Parameter name="a" value="1">2</Parameter>\n'
                '<Parameter name="b">1</Parameter>\n'
                '<Parameter name="b">2</Parameter>\n'
                '</Parameters>',
                '<Project ha="maybe"><Options><Option name="utf8" value="true"/>'
                '<Option name="utf8" value="false"/></Options></Project>')
    ccr, diags, _ = parse(text)
    found = [(d.code, d.span.line) for d in diags]
    assert found == [("CCL1305", 4), ("CCL1305", 5), ("CCL1306", 7), ("CCL1305", 9), ("CCL1306", 9)]
    assert "first at line 6" in diags[2].message
    assert [p.name for p in ccr.parameters] == ["b"] and ccr.parameters[0].value == "1"


def test_parameter_value_text_is_trimmed_but_attribute_kept():
    ccr, _, _ = parse(wrap('<Parameters><Parameter name="a">\n  x y \n</Parameter>'
                           '<Parameter name="b" value=" p "/></Parameters>'))
    assert [p.value for p in ccr.parameters] == ["x y", " p "]


# --- safe XML ------------------------------------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE Configuration [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<Configuration><Runtime><Parameters><Parameter name="n">&lol9;</Parameter></Parameters></Runtime></Configuration>
"""


def test_billion_laughs_is_refused_quickly(tmp_path):
    path = tmp_path / "bomb.ccr"
    path.write_text(BILLION_LAUGHS)
    started = time.perf_counter()
    ccr, diags = read_ccr(str(path), SourceCache())
    assert time.perf_counter() - started < 1.0
    assert ccr is None
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [("CCL1302", 2, 1)]
    assert "DOCTYPE" in diags[0].message


@pytest.mark.parametrize("doctype", [
    '<!DOCTYPE Configuration [<!ENTITY leak SYSTEM "file://{secret}">]>',
    '<!DOCTYPE Configuration [<!ENTITY % leak SYSTEM "file://{secret}"> %leak;]>',
    '<!DOCTYPE Configuration SYSTEM "file://{secret}">',
])
def test_external_entities_are_refused_and_no_file_is_read(tmp_path, doctype):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    (tmp_path / "p.ccl").write_text("DECLARE PARAMETER string n := 'x'; END;\n")
    ccr_path = tmp_path / "p.ccr"
    ccr_path.write_text('<?xml version="1.0"?>\n' + doctype.format(secret=secret) + "\n"
                        '<Configuration><Runtime><Parameters><Parameter name="n">&leak;</Parameter>'
                        '</Parameters></Runtime></Configuration>\n')
    ccr, diags = read_ccr(str(ccr_path), SourceCache())
    assert ccr is None and [(d.code, d.span.line) for d in diags] == [("CCL1302", 2)]
    code, out, err = run("config", str(tmp_path / "p.ccl"), "--format", "json")
    assert code == 1 and "TOP-SECRET-CONTENT" not in out + err
    assert [d["code"] for d in json.loads(out)["diagnostics"]] == ["CCL1302"]


def test_undefined_entity_without_dtd_is_malformed():
    _, diags, _ = parse(wrap('<Parameters><Parameter name="n">&leak;</Parameter></Parameters>'))
    assert [d.code for d in diags] == ["CCL1301"] and diags[0].message == "undefined entity"


# --- what the .ccr means for the settings -------------------------------------------------------

def test_settings_from_the_full_file_and_one_warning_per_ignored_option():
    ccr, _ = read_ccr(str(WEATHER_CCR), SourceCache())
    settings, diags = settings_from_ccr(ccr)
    assert [(s.key, s.value, s.span.line) for s in settings] == [
        ("spark.master", "spark://spark-a.example.net:7077,spark-b.example.net:7077", 11),
        ("runtime.log_level", "INFO", 52),
        ("runtime.bad_record_path", "/var/log/weather/bad.records", 53)]
    assert all(d.code == "CCL1307" and d.severity == "warning" for d in diags)
    messages = {d.span.line: d.message for d in diags}
    for line, option in [(51, "time-granularity"), (54, "java-max-heap"),
                         (55, "ignore-config-topology"), (56, "utf8")]:
        assert messages[line].startswith(f"option '{option}' has no meaning on Spark")
    assert "binding 'Observations'" in messages[25]
    assert "http://esp-feeds.example.net:19011" in messages[20]
    assert len(diags) == 6


def test_ha_failover_affinities_and_extra_instances_are_warned_about():
    ccr, _, _ = parse(wrap(deployment=(
        '\n<Project ha="true"><Instances>\n'
        '<Instance><Failover enable="true"/><Affinities>\n'
        '<Affinity charge="positive" strength="strong" type="controller" value="node1"/>\n'
        '</Affinities></Instance>\n<Instance/>\n</Instances></Project>')))
    _, diags = settings_from_ccr(ccr)
    assert [(d.code, d.span.line) for d in diags] == [
        ("CCL1307", 5), ("CCL1307", 6), ("CCL1307", 7), ("CCL1307", 9)]
    assert "ha=" in diags[0].message and "Failover" in diags[1].message
    assert "Affinity" in diags[2].message and "second <Instance>" in diags[3].message


@pytest.mark.parametrize("level,expected", sorted(DEBUG_LEVELS.items()))
def test_debug_level_maps_to_the_log_level(level, expected):
    ccr, _, _ = parse(wrap(deployment=f'<Project><Options><Option name="debug-level" '
                                      f'value="{level}"/></Options></Project>'))
    settings, diags = settings_from_ccr(ccr)
    assert diags == [] and [(s.key, s.value) for s in settings] == [("runtime.log_level", expected)]


def test_bad_option_values_are_errors_at_the_option():
    ccr, _, _ = parse(wrap(deployment='<Project><Options>\n<Option name="debug-level" value="9"/>\n'
                                      '<Option name="bad-record-file" value=" "/>\n</Options></Project>'))
    settings, diags = settings_from_ccr(ccr)
    assert settings == []
    assert [(d.code, d.span.line) for d in diags] == [("CCL1322", 5), ("CCL1322", 6)]


def test_master_from_the_local_cluster_and_single_managers():
    ccr, _, _ = parse(wrap(
        '<Clusters><Cluster name="far" type="remote"><Managers><Manager>spark://far:7077</Manager>'
        '</Managers></Cluster>\n<Cluster name="here" type="local"><Managers>'
        '<Manager>local[2]</Manager><Manager>spark://x:7077</Manager></Managers></Cluster>'
        '</Clusters>'))
    settings, diags = settings_from_ccr(ccr)
    assert [(s.key, s.value) for s in settings] == [("spark.master", "local[2]")]
    assert sorted(d.message.split(":")[0] for d in diags) == [
        "cluster 'far' is ignored", "cluster manager 'spark"]


# --- passwords never shown -----------------------------------------------------------------------

def _assert_no_password(text):
    for password in PASSWORDS:
        assert password not in text


def test_passwords_are_masked_in_objects_and_logs(caplog):
    caplog.set_level(logging.DEBUG, logger="ccl")
    sources = SourceCache()
    ccr, _ = read_ccr(str(WEATHER_CCR), sources)
    assert "read " in caplog.text and "espadmin" in caplog.text  # the log does show the clusters
    _assert_no_password(caplog.text)
    _assert_no_password(repr(ccr) + str(ccr))
    secret = ccr.clusters[0].password
    assert (str(secret), repr(secret), f"{secret}", f"{secret:>6}") == (
        "****", "Secret('****')", "****", "  ****")
    with pytest.raises(TypeError):
        json.dumps({"p": secret})
    with pytest.raises(TypeError):
        pickle.dumps(secret)
    _assert_no_password("\n".join(sources.line(str(WEATHER_CCR), i) or "" for i in range(1, 70)))


@pytest.mark.parametrize("argv", [
    ["config"], ["config", "--format", "json"], ["check"], ["check", "--format", "json"]])
def test_passwords_never_in_cli_output(argv):
    code, out, err = run(*argv[:1], str(WEATHER_CCL), *argv[1:])
    assert code == 0
    assert "espadmin" in out + err or argv[0] == "check"
    _assert_no_password(out + err)


def test_password_line_with_an_error_is_masked_under_the_diagnostic(tmp_path):
    (tmp_path / "p.ccl").write_text("CREATE INPUT STREAM s SCHEMA (a integer);\n")
    (tmp_path / "p.ccr").write_text(
        "<Configuration><Runtime><Clusters>\n<Cluster name='c'>\n"
        "<Password>hunter2-remote</Pasword>\n</Cluster></Clusters></Runtime></Configuration>\n")
    code, out, err = run("check", str(tmp_path / "p.ccl"))
    assert code == 1 and "CCL1301" in err
    assert "    <Password>****</Pasword>" in err
    _assert_no_password(out + err)


def test_redaction_keeps_line_numbers_and_masks_secret_properties():
    text = ('<Password encrypted="true">\nabc\n</Password><Property name="dbPassword" value="pw"/>\n'
            '<Property name="apiToken"><![CDATA[x<y]]></Property><Property name="dir">/d</Property>')
    redacted = redact_xml(text)
    assert redacted.count("\n") == text.count("\n")
    assert "abc" not in redacted and "pw" not in redacted.replace("Password", "")
    assert "x<y" not in redacted and "/d" in redacted


def test_ccr_and_param_need_a_single_project():
    code, out, err = run("check", str(WEATHER_CCL), str(WEATHER_CCL), "--ccr", str(DEV_CCR))
    assert code == 2 and err == "ccl: error: --ccr and --param apply to one project: check one FILE.ccl at a time\n"


def test_check_with_another_ccr_reports_its_warnings_in_json():
    code, out, _ = run("check", str(WEATHER_CCL), "--ccr", str(DEV_CCR), "--format", "json")
    assert code == 0
    assert [(d["file"], d["line"], d["code"]) for d in json.loads(out)] == [
        (str(DEV_CCR), 10, "CCL1307")]  # the ESP manager URL http://localhost:19011
