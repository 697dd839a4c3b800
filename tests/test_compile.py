"""`ccl compile`: the .ccx plan, the generated job (no user text in it, fixed code), the runtime
bundle, runtime.submit's options, and one in-process run of a compiled plan on Spark."""
from __future__ import annotations

import ast
import csv
import io
import json
import os
import runpy
import subprocess
import sys
import tokenize
import types
import zipfile

import pytest

from ccl.ops.compile import bundle_bytes, job_view, render_job, render_view, safe_text
from ccl.plan.codec import plan_to_json
from ccl.plan.model import PLAN_VERSION
from ccl.plan.planner import plan_project
from runtime import submit
from tests.cli_runner import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "tests", "projects", "seeds")

# Text a project may carry that must never become code (nor appear in the generated job).
HOSTILE = [
    'He said "hi" and \'bye\'',
    '"""; import os; os.system("echo pwned"); """',
    "{{ 7 * 7 }} {% for x in y %}{{ x }}{% endfor %} {# c #}",
    "__import__('os').system('id')",
    "line one\nline two\r\n# not a comment\n\"\"\"",
    "\\N \\x41 \\\\ ${HOME} `id` $(id)",
]

HOSTILE_FILE = "ev'il\"{{x}}{%y%}\"\"\"$(id)"

PROJECT = """\
DECLARE
    PARAMETER string note := 'plain';
END;
CREATE INPUT STREAM trades SCHEMA (sym string, qty integer);
CREATE OUTPUT STREAM tagged AS
    SELECT trades.sym, note tag, {literal} quoted
    FROM trades WHERE trades.sym <> {literal2};
CREATE OUTPUT WINDOW total PRIMARY KEY DEDUCED
    PARTITION BY trades HASH(sym) PARTITIONS 2
AS SELECT trades.sym, sum(trades.qty) q FROM trades KEEP ALL GROUP BY trades.sym;
ATTACH INPUT ADAPTER feed TYPE toolkit_file_csv_input TO trades
    PROPERTIES dir = {literal3}, file = 'trades.csv';
"""


def ccl_literal(text: str) -> str:
    """A CCL string literal (no line breaks possible: those travel in parameter values)."""
    return "'" + text.replace("'", "''") + "'"


def _strings(value) -> set[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return set().union(*map(_strings, value)) if value else set()
    if isinstance(value, dict):
        return set(value) | (set().union(*map(_strings, value.values())) if value else set())
    return set()


def _comments(code: str) -> str:
    return "\n".join(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                     if t.type == tokenize.COMMENT)


def _code_only(code: str) -> str:
    return "".join(t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                   if t.type not in (tokenize.COMMENT, tokenize.NL))


def compile_hostile(tmp_path, literal: str, note: str, name: str = HOSTILE_FILE):
    one_line = literal.replace("\r", " ").replace("\n", " ")  # a CCL string literal has no line break
    path = tmp_path / (name + ".ccl")
    path.write_text(PROJECT.format(literal=ccl_literal(one_line), literal2=ccl_literal(one_line[::-1]),
                                   literal3=ccl_literal("data/" + one_line)), encoding="utf-8")
    out = tmp_path / "build"
    code, _, stderr = run("compile", str(path), "-o", str(out), "--param", f"note={note}")
    assert code == 0, stderr
    assert "Traceback" not in stderr
    return path, out, one_line


@pytest.mark.parametrize("text", HOSTILE)
def test_generated_job_holds_no_user_text_and_the_plan_round_trips(tmp_path, text):
    path, out, one_line = compile_hostile(tmp_path, text, note=text)
    job_file = out / (HOSTILE_FILE + "_job.py")
    ccx_file = out / (HOSTILE_FILE + ".ccx")
    job = job_file.read_text(encoding="utf-8")
    ast.parse(job)  # valid Python
    for user in (text, one_line, one_line[::-1], HOSTILE_FILE, HOSTILE_FILE + ".ccl", "data/" + one_line):
        assert user not in job
    for fragment in ("{{", "{%", "{#", "os.system", "__import__", "$(id)", "pwned"):
        assert fragment not in job
    # The executable code is the fixed code of any other project's job.
    plain, _ = plan_project(os.path.join(SEEDS, "hash_maxprice.ccl"))
    assert ast.dump(ast.parse(job)) == ast.dump(ast.parse(render_job(plain)))
    assert _code_only(job) == _code_only(render_job(plain))
    # Element names appear in comments only.
    for name in ("trades", "tagged", "total"):
        assert name in _comments(job)
        assert name not in _code_only(job)
    # The plan carries every string exactly.
    with open(ccx_file, encoding="utf-8") as f:
        data = json.load(f)
    assert data["format"] == "ccl-plan" and data["version"] == PLAN_VERSION
    assert data["parameters"]["note"] == text  # line breaks and all
    strings = _strings(data)
    assert {one_line, one_line[::-1], "data/" + one_line, HOSTILE_FILE} <= strings
    assert os.path.basename(data["elements"][0]["file"]) == HOSTILE_FILE + ".ccl"
    planned, _ = plan_project(str(path), params={"note": text})
    assert data == json.loads(json.dumps(plan_to_json(planned)))


def test_comment_lines_point_back_to_ccl_lines(tmp_path):
    path = tmp_path / "trades.ccl"
    path.write_text(PROJECT.format(literal="'x'", literal2="'y'", literal3="'data'"))
    code, _, err = run("compile", "-i", str(path), "-o", str(tmp_path / "b"))
    assert code == 0, err
    job = (tmp_path / "b" / "trades_job.py").read_text()
    assert "# element 1: trades, input stream, line 4 of trades.ccl" in job
    assert "# element 2: tagged, output stream, line 5 of trades.ccl" in job
    assert "# element 3: total, output window, line 8 of trades.ccl" in job
    assert "#   2 instance(s), per-instance path; reads trades" in job


def test_view_is_numbers_fixed_words_and_safe_names():
    assert safe_text('a"b\n{{c}}') == "a?b???c??"
    assert safe_text("x" * 100) == "x" * 57 + "..."
    plan = {"project": 'p"', "version": 1, "elements": [
        {"name": "ok.name", "kind": "window\n", "role": "import os", "line": "12", "file": "/a/b\"c",
         "query": None, "stateful": True}]}
    view = job_view(plan)
    e = view["elements"][0]
    assert (e["name"], e["kind"], e["role"], e["line"], e["file"]) == ("ok.name", "element", "", "?", "b?c")
    ast.parse(render_view(view))


def test_running_the_job_only_loads_the_plan_and_calls_the_entry(tmp_path, monkeypatch):
    _, out, _ = compile_hostile(tmp_path, HOSTILE[1], note=HOSTILE[4])
    job_file = str(out / (HOSTILE_FILE + "_job.py"))
    ccx_file = str(out / (HOSTILE_FILE + ".ccx"))
    calls = []

    def fake_main(argv, plan=None, plan_path=None):
        calls.append((list(argv), plan, plan_path))
        return 0

    fake = types.ModuleType("runtime.submit")
    fake.main = fake_main
    monkeypatch.setitem(sys.modules, "runtime.submit", fake)
    monkeypatch.setattr(sys, "argv", [job_file, "--until-idle", "--output-dir", "o"])

    # Imported (not run as a script): nothing is called.
    runpy.run_path(job_file, run_name="not_main")
    assert calls == []

    events = []

    def hook(event, args):
        if recording and (event in ("open", "os.system", "os.exec", "os.posix_spawn", "os.remove",
                                    "os.rename", "shutil.rmtree", "os.mkdir", "os.chmod")
                          or event.startswith(("subprocess", "socket", "urllib", "ctypes"))):
            events.append((event, args[0] if args else None))

    recording = True
    sys.addaudithook(hook)  # cannot be removed: it records only while `recording` is set
    try:
        with pytest.raises(SystemExit) as stop:
            runpy.run_path(job_file, run_name="__main__")
    finally:
        recording = False
    assert stop.value.code == 0
    assert len(calls) == 1
    argv, plan, plan_path = calls[0]
    assert argv == ["--until-idle", "--output-dir", "o"]
    assert plan_path == ccx_file
    with open(ccx_file, encoding="utf-8") as f:
        assert plan == json.load(f)
    opened = {os.path.abspath(str(a)) for e, a in events if e == "open" and isinstance(a, str)}
    assert opened <= {job_file, ccx_file}, opened
    assert ccx_file in opened
    assert [e for e, _ in events if e != "open"] == []


def test_compile_refuses_a_project_with_errors(tmp_path):
    bad = tmp_path / "bad.ccl"
    bad.write_text("CREATE OUTPUT STREAM o AS SELECT * FROM nowhere;\n")
    code, _, err = run("compile", str(bad), "-o", str(tmp_path / "b"))
    assert code == 1 and "CCL2001" in err and "nothing written" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
    assert run("compile")[0] == 2
    assert run("compile", str(bad), "-i", str(bad))[0] == 2


def test_compile_writes_beside_the_project_by_default_and_prints_what_it_wrote(tmp_path):
    src = tmp_path / "maxp.ccl"
    with open(os.path.join(SEEDS, "hash_maxprice.ccl"), encoding="utf-8") as f:
        src.write_text(f.read())
    code, out, _ = run("compile", str(src))
    assert code == 0
    assert (tmp_path / "maxp.ccx").is_file() and (tmp_path / "maxp_job.py").is_file()
    assert f"maxp.ccx (plan ccl-plan version {PLAN_VERSION}" in out and "maxp_job.py" in out
    assert not (tmp_path / "ccl_runtime.zip").exists()


def test_bundle_imports_the_runtime_from_the_zip(tmp_path):
    src = os.path.join(SEEDS, "hash_maxprice.ccl")
    code, _, err = run("compile", src, "-o", str(tmp_path), "--bundle")
    assert code == 0, err
    bundle = tmp_path / "ccl_runtime.zip"
    names = zipfile.ZipFile(bundle).namelist()
    assert "runtime/submit.py" in names and "ccl/syntax/nodes.py" in names
    assert "ccl/ops/templates/job.py.j2" in names and "ccl/config/default_config.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert bundle.read_bytes() == bundle_bytes()  # deterministic
    # -S: no site-packages, so the installed (editable) packages cannot answer the imports.
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import runtime.submit, ccl.syntax.nodes; "
              "print(runtime.submit.__file__); print(ccl.syntax.nodes.__file__)")
    proc = subprocess.run([sys.executable, "-S", "-c", script, str(bundle)], capture_output=True,
                          text=True, timeout=60, cwd=str(tmp_path), check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split()
    assert lines == [os.path.join(str(bundle), "runtime", "submit.py"),
                     os.path.join(str(bundle), "ccl", "syntax", "nodes.py")]


# --- runtime.submit without Spark ----------------------------------------------------------------

def _plan():
    plan, _ = plan_project(os.path.join(SEEDS, "hash_maxprice.ccl"))
    return plan_to_json(plan)


def test_submit_refuses_bad_plans_and_options_before_starting_spark(tmp_path, monkeypatch):
    monkeypatch.setattr(submit, "session", lambda *a: pytest.fail("no session for a usage error"))
    out, err = io.StringIO(), io.StringIO()
    assert submit.main(["--until-idle"], out=out, err=err) == 2 and "--plan" in err.getvalue()
    other = dict(_plan(), version=99)
    assert submit.main([], plan=other, out=out, err=err) == 2 and "version 99" in err.getvalue()
    assert submit.main([], plan={"format": "x"}, out=out, err=err) == 2
    bad_json = tmp_path / "p.ccx"
    bad_json.write_text("{not json")
    assert submit.main(["--plan", str(bad_json)], out=out, err=err) == 2
    assert submit.main(["--input", "nosuch=/tmp"], plan=_plan(), out=out, err=err) == 2
    assert "no input element 'nosuch'" in err.getvalue()
    assert submit.main(["--input", f"priceW={tmp_path}/missing.csv"], plan=_plan(), out=out, err=err) == 2
    assert submit.main(["--frobnicate"], plan=_plan(), out=out, err=err) == 2
    assert submit.main(["--help"], out=out, err=err) == 0 and "--output-dir" in out.getvalue()


def test_a_job_whose_plan_is_of_an_older_version_says_to_compile_again(tmp_path, monkeypatch, capsys):
    """A ``.ccx`` written by an older ccl (version 3: before the kernel and state-store decisions
    were in the plan), run by its generated job: one line saying to run `ccl compile` again, exit
    code 2, no traceback and no Spark session."""
    src = tmp_path / "maxp.ccl"
    with open(os.path.join(SEEDS, "hash_maxprice.ccl"), encoding="utf-8") as f:
        src.write_text(f.read())
    assert run("compile", str(src))[0] == 0
    ccx = tmp_path / "maxp.ccx"
    old = json.loads(ccx.read_text())
    assert old["version"] == PLAN_VERSION == 4
    ccx.write_text(json.dumps({**old, "version": 3}))
    monkeypatch.setattr(submit, "session", lambda *a: pytest.fail("no session for an old plan"))
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "maxp_job.py"), "--until-idle"])
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(tmp_path / "maxp_job.py"), run_name="__main__")
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err == ("ccl job: error: plan version 3 is not supported (this ccl reads version 4): "
                   "run `ccl compile` again on the project\n")


def test_submit_options_and_defaults(tmp_path):
    ccx = tmp_path / "x.ccx"
    ccx.write_text(json.dumps(_plan()))
    args, plan = submit.parse(["--plan", str(ccx), "--until-idle", "--checkpoint", "ck",
                               "--input", f"priceW={ccx}"])
    assert plan.project == "hash_maxprice" and args.until_idle and args.checkpoint == "ck"
    assert args.inputs == {"priceW": str(ccx)}
    args, _ = submit.parse([], plan=plan, plan_path=str(ccx))
    assert args.plan_path == str(ccx) and not args.until_idle and args.base_dir is None


# --- one run on Spark ------------------------------------------------------------------------------

def test_compiled_plan_runs_in_process(spark, tmp_path):
    src = tmp_path / "tiny.ccl"
    src.write_text("CREATE INPUT STREAM trades SCHEMA (sym string, qty integer);\n"
                   "CREATE OUTPUT STREAM big AS SELECT trades.sym, trades.qty * 2 dbl FROM trades "
                   "WHERE trades.qty > 10;\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "trades.csv").write_text("sym,qty\nA,20\nB,5\nC,11\n")
    code, _, err = run("compile", str(src), "-o", str(tmp_path / "build"))
    assert code == 0, err
    ccx = str(tmp_path / "build" / "tiny.ccx")
    with open(ccx, encoding="utf-8") as f:
        plan = json.load(f)
    out_dir = str(tmp_path / "out")
    args, plan = submit.parse(["--until-idle", "--input", f"trades={tmp_path}/data/trades.csv",
                               "--output-dir", out_dir, "--checkpoint", str(tmp_path / "ck")],
                              plan=plan, plan_path=ccx)
    out, err = io.StringIO(), io.StringIO()
    assert submit.run_job(spark, plan, args, out, err) == 0, err.getvalue()
    assert "big: 3 in, 2 out" in out.getvalue()
    with open(os.path.join(out_dir, "big.csv"), newline="", encoding="utf-8") as f:
        rows = sorted((r["sym"], int(r["dbl"])) for r in csv.DictReader(f))
    assert rows == [("A", 40), ("C", 22)]
