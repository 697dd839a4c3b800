"""Printer/parser round trip: ``parse_text(to_ccl(tree)) == tree`` without diagnostics.

A Hypothesis property over random trees of every statement, clause, SPLASH statement and expression
node (strategies in tests/strategies.py), and a deterministic pass over every .ccl file under
tests/projects/ (each must parse without diagnostics, print, and parse back to an equal tree).
"""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import strategies
from ccl.syntax import nodes as n
from ccl.analysis import analyze
from ccl.syntax.parser import parse_text
from ccl.syntax.project import load_text
from ccl.syntax.printer import to_ccl

PROJECTS = Path(__file__).parent / "projects"
FILES = sorted(PROJECTS.rglob("*.ccl"))


def _headers(diags):
    return [d.header() for d in diags]


def assert_round_trip(project: n.Project) -> None:
    text = to_ccl(project)
    parsed, diags = parse_text(text, "roundtrip.ccl")
    assert _headers(diags) == [], text
    assert parsed == project, text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategies.statements())
def test_random_trees_round_trip(stmts):
    assert_round_trip(n.Project(stmts))
    analyze(load_text(to_ccl(n.Project(stmts)), "random.ccl"), {})  # never a traceback


def _in_declare(item) -> n.Project:
    return n.Project([n.GlobalDeclare(n.DeclareBlock([item]))])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategies.deep_expressions)
def test_random_expressions_round_trip(e):
    """Deeper expressions than the statement test draws: precedence, associativity, postfixes."""
    decl = n.VarDecl(n.NamedType("integer"), [n.Declarator(n.Ident("v"), e)])
    assert_round_trip(_in_declare(decl))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategies.deep_blocks)
def test_random_splash_round_trip(body):
    """Deeper SPLASH statement nesting: dangling ELSE, loops, switch, blocks."""
    assert_round_trip(_in_declare(n.FuncDef(n.NamedType("integer"), n.Ident("f"), [], body)))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PROJECTS)))
def test_project_files_round_trip(path: Path):
    project, diags = parse_text(path.read_text(encoding="utf-8"), str(path))
    assert _headers(diags) == []
    assert_round_trip(project)


def test_record_literal_strings_are_printed_verbatim():
    record = n.RecordLit([], [n.FieldInit(n.Ident("s"), n.Literal("string", " ]"))], True)
    decl = n.VarDecl(n.NamedType("integer"), [n.Declarator(n.Ident("r"), record)])
    assert_round_trip(_in_declare(decl))

