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
