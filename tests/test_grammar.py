"""Grammar hygiene: no conflicts, tables cached in the package, no PLY output for users."""
import re
from pathlib import Path

import ply.yacc as yacc

from ccl.diagnostics import CATALOGUE
from ccl.parser import CCLParser

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
    CCLParser(write_tables=False, debug=True, debugfile=str(tmp_path / "parser.out"),
              outputdir=str(tmp_path), errorlog=log)
    conflicts = [m for m in log.messages if "conflict" in m]
    assert conflicts == []
    assert [m for m in log.messages if "unused" in m.lower() or "undefined" in m.lower()] == []


def test_tables_are_cached_in_the_package_and_nothing_is_printed(capsys):
    CCLParser()
    table = ROOT / "ccl" / "_parsetab.py"
    assert table.exists()
    before = table.stat().st_mtime_ns
    CCLParser()  # a second build loads the cached tables instead of regenerating them
    assert table.stat().st_mtime_ns == before
    assert not (ROOT / "ccl" / "parser.out").exists() and not Path("parser.out").exists()
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_every_diagnostic_code_is_documented():
    doc = (ROOT / "docs" / "diagnostics.md").read_text()
    documented = set(re.findall(r"^### (CCL\d{4})", doc, flags=re.M))
    assert documented == set(CATALOGUE)
    for code in CATALOGUE.values():
        assert f"### {code.code}: {code.title} ({code.severity})" in doc
