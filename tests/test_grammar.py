"""Grammar hygiene: no conflicts, tables cached in the package, no PLY output for users."""
import re
import subprocess
import sys
from pathlib import Path

import ply.yacc as yacc

from ccl.diagnostics import CATALOGUE
from ccl.syntax.parser import CCLParser

ROOT = Path(__file__).resolve().parent.parent


class _Collect(yacc.PlyLogger):
    def __init__(self):
        self.messages = []

    def warning(self, msg, *args, **kwargs):
        self.messages.append(msg % args)

    error = critical = warning

    def info(self, *args, **kwargs):
        pass

    debug = info


def test_grammar_has_no_conflicts(tmp_path):
    log = _Collect()
    # a table module that does not exist: PLY builds the tables (a cached table hides conflicts)
    CCLParser(write_tables=False, debug=True, debugfile=str(tmp_path / "parser.out"),
              outputdir=str(tmp_path), errorlog=log, tabmodule="no_such_parsetab")
    conflicts = [m for m in log.messages if "conflict" in m]
    assert conflicts == []
    assert [m for m in log.messages if "unused" in m.lower() or "undefined" in m.lower()] == []


def test_tables_are_built_once_into_the_package_and_nothing_is_printed():
    table = ROOT / "ccl" / "syntax" / "_parsetab.py"
    build = [sys.executable, "-c", "from ccl.syntax.parser import parse_text; parse_text('CREATE SCHEMA s (a integer);')"]
    runs = []
    for _ in range(2):  # the second process loads the tables the first one wrote (or found)
        proc = subprocess.run(build, capture_output=True, text=True, cwd=ROOT, timeout=120)
        runs.append((proc.returncode, proc.stdout, proc.stderr, table.stat().st_mtime_ns))
    assert [r[:3] for r in runs] == [(0, "", "")] * 2
    assert runs[0][3] == runs[1][3]
    assert not (ROOT / "ccl" / "parser.out").exists() and not (ROOT / "parser.out").exists()


def test_every_diagnostic_code_is_documented():
    doc = (ROOT / "docs" / "diagnostics.md").read_text()
    documented = set(re.findall(r"^### (CCL\d{4})", doc, flags=re.M))
    assert documented == set(CATALOGUE)
    for code in CATALOGUE.values():
        assert f"### {code.code}: {code.title} ({code.severity})" in doc


def test_processes_building_the_tables_at_once_never_read_a_half_written_file(tmp_path):
    """A fresh clone's first processes (two test workers, two `ccl` commands) all build the tables:
    each writes them atomically, so none imports another's half-written file; a file cut short
    (written before that) is built again, not raised as a SyntaxError. On a copy of the package."""
    import shutil
    shutil.copytree(ROOT / "ccl", tmp_path / "ccl", ignore=shutil.ignore_patterns("__pycache__"))
    table = tmp_path / "ccl" / "syntax" / "_parsetab.py"
    build = [sys.executable, "-c", "from ccl.syntax.parser import parse_text; "
             "print(len(parse_text('CREATE SCHEMA s (a integer);')[0].statements))"]
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    for start in ("absent", "cut short"):
        if start == "absent":
            table.unlink(missing_ok=True)
        else:
            text = table.read_text()
            table.write_text(text[: len(text) // 2])
        procs = [subprocess.Popen(build, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  cwd=tmp_path, env=env) for _ in range(4)]
        results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
        assert results == [(0, "1\n", "")] * 4, start
        compile(table.read_text(), str(table), "exec")  # whole
        assert not [p for p in (tmp_path / "ccl" / "syntax").iterdir() if p.name.startswith(".parsetab-")]
