"""Regression suite of the semantic analysis (issue 3): tests/compile_errors/*.ccl.

Each file is a small project carrying its expected diagnostics as comments, one per diagnostic:

    WHERE Trades.Volume > 10000;  // expect: error CCL2003 at 8:17

LINE:COL is 1-based and is the place the diagnostic points at (a tab would count as one column; the
files use spaces only). `CODE_description.ccl` files expect at least their own code;
`valid_description.ccl` files are correct projects close to an error case and expect nothing at all.
`ccl check --format json` is run in-process on each file, and the set of (severity, code, line,
column) it reports must equal the set of expect lines.
"""
from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ccl.cli.main import main
from ccl.diagnostics import CATALOGUE

CASES_DIR = Path(__file__).parent / "compile_errors"
CASES = sorted(CASES_DIR.glob("*.ccl"))

EXPECT = re.compile(r"// expect: (error|warning) (CCL\d{4}) at (\d+):(\d+)")
FILE_NAME = re.compile(r"(CCL\d{4}|valid)_[a-z0-9]+(_[a-z0-9]+)*\.ccl")

Key = tuple[str, str, int, int]  # severity, code, line, column


def expectations(path: Path) -> set[Key]:
    """The expect lines of a file; a line mentioning `expect:` in another form is an error."""
    found: list[Key] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        matches = EXPECT.findall(line)
        if len(matches) != len(re.findall(r"expect\s*:", line, flags=re.I)):
            pytest.fail(f"{path.name}:{lineno}: malformed expect comment: {line.strip()!r} "
                        "(write: // expect: error CCL2003 at 5:31)")
        found.extend((sev, code, int(ln), int(col)) for sev, code, ln, col in matches)
    duplicates = [k for k, n in Counter(found).items() if n > 1]
    assert not duplicates, f"{path.name}: expect line given twice: {duplicates}"
    return set(found)


def run_check(path: Path) -> tuple[int, list[dict]]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", str(path)], out, err)
    assert status in (0, 1), f"{path.name}: ccl check exited {status}: {err.getvalue()}"
    return status, json.loads(out.getvalue())


def _fmt(key: Key) -> str:
    sev, code, line, col = key
    return f"{sev} {code} at {line}:{col}"


def describe_mismatch(path: Path, expected: set[Key], got: dict[Key, dict]) -> str:
    """Missing, extra and misplaced diagnostics (same severity and code at another place)."""
    missing = sorted(expected - set(got))
    extra = sorted(set(got) - expected)
    misplaced = []
    for want in list(missing):
        for have in extra:
            if have[:2] == want[:2]:
                misplaced.append((want, have))
                missing.remove(want)
                extra.remove(have)
                break
    lines = [f"{path.name}: diagnostics differ from the expect lines"]
    for want, have in misplaced:
        lines.append(f"  misplaced: expected {_fmt(want)}, reported at {have[2]}:{have[3]}: "
                     f"{got[have]['message']}")
    lines += [f"  missing:   {_fmt(k)}" for k in missing]
    lines += [f"  extra:     {_fmt(k)}: {got[k]['message']}" for k in extra]
    return "\n".join(lines)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_compile_errors(path: Path) -> None:
    expected = expectations(path)
    status, diags = run_check(path)
    got = {(d["severity"], d["code"], d["line"], d["column"]): d for d in diags}
    if set(got) != expected:
        pytest.fail(describe_mismatch(path, expected, got), pytrace=False)
    wants_error = any(sev == "error" for sev, *_ in expected)
    assert status == (1 if wants_error else 0), \
        f"{path.name}: ccl check exited {status}, expected {1 if wants_error else 0}"


def test_suite_layout() -> None:
    """Names, sizes and expect lines follow the suite's conventions."""
    assert len(CASES) >= 90, f"only {len(CASES)} files in {CASES_DIR}"
    valid = [p for p in CASES if p.name.startswith("valid_")]
    assert len(valid) >= 20, f"only {len(valid)} valid_ files"
    problems = []
    for path in CASES:
        text = path.read_text(encoding="utf-8")
        codes = {code for _, code, _, _ in expectations(path)}
        prefix = path.name.split("_", 1)[0]
        if not FILE_NAME.fullmatch(path.name):
            problems.append(f"{path.name}: name is not CODE_description.ccl or valid_description.ccl")
        if "\t" in text:
            problems.append(f"{path.name}: contains a tab (use spaces: columns count characters)")
        if not 5 <= len(text.splitlines()) <= 25:
            problems.append(f"{path.name}: {len(text.splitlines())} lines (keep cases to 5-25)")
        if path.with_suffix(".ccr").exists():
            problems.append(f"{path.name}: has a .ccr beside it; cases must not depend on one")
        if prefix == "valid" and codes:
            problems.append(f"{path.name}: a valid_ file expects {sorted(codes)}")
        if prefix != "valid" and prefix not in codes:
            problems.append(f"{path.name}: does not expect its own code {prefix}")
        unknown = codes - set(CATALOGUE)
        if unknown:
            problems.append(f"{path.name}: expects codes not in the catalogue: {sorted(unknown)}")
        for sev, code, _, _ in expectations(path):
            if code in CATALOGUE and CATALOGUE[code].severity != sev:
                problems.append(f"{path.name}: {code} is an {CATALOGUE[code].severity}, not {sev}")
    assert not problems, "\n".join(problems)


def test_every_semantic_code_is_covered() -> None:
    """Every catalogue code of the analysis (CCL2xxx, CCL3xxx) is expected by some file."""
    covered = {code for path in CASES for _, code, _, _ in expectations(path)}
    semantic = {code for code in CATALOGUE if code[3] in "23"}
    assert semantic, "the catalogue has no CCL2xxx/CCL3xxx codes"
    assert not semantic - covered, f"codes without a case: {sorted(semantic - covered)}"
