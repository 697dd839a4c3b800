"""Every project under tests/projects/ (the seed examples and the valid corpus) checks clean."""
from pathlib import Path

import pytest

from ccl.project import load_project

PROJECTS = Path(__file__).parent / "projects"
FILES = sorted(PROJECTS.rglob("*.ccl"))


def test_corpus_is_large_enough():
    valid = [f for f in FILES if f.parent.name == "valid"]
    assert len(valid) >= 30


@pytest.mark.parametrize("path", FILES, ids=[str(f.relative_to(PROJECTS)) for f in FILES])
def test_project_checks_clean(path):
    project = load_project(str(path))
    assert [d.header() for d in project.diagnostics] == []
    assert project.statements
