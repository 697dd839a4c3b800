"""No input, however broken, produces a traceback: mutated projects give diagnostics only
(from the parser, and from the semantic analysis when they still parse).

2,000 deterministic mutations (byte flips, truncations, token deletions, swaps and duplications,
inserted keywords) of the valid projects under tests/projects/. A mutant that still parses without
errors must also survive the printer round trip.
"""
import random
from pathlib import Path

from ccl.analysis import analyze
from ccl.diagnostics import CATALOGUE, render
from ccl.syntax.lexer import KEYWORDS, tokenize
from ccl.syntax.printer import to_ccl
from ccl.syntax.project import load_text
from ccl.syntax.parser import parse_text

PROJECTS = Path(__file__).parent / "projects"
MUTATIONS = 2000
NOISE = list("';{}()[],.:=<>!|&^%*/+-\"#@$\\\t\n") + ["\x00", "é", "→", "\ufeff", "/*", "//", "'"]


def corpus():
    files = sorted(PROJECTS.rglob("*.ccl"))
    assert files, "no projects to mutate"
    return [f.read_text(encoding="utf-8") for f in files]


def mutate(text: str, rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:  # flip characters
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            chars[rng.randrange(len(chars))] = rng.choice(NOISE)
        return "".join(chars)
    if kind == 1:  # truncate
        return text[: rng.randrange(len(text))]
    spans = [(t.lexpos, t.lexpos + len(str(t.value)) if t.type != "STRING" else t.lexpos + 1)
             for t in tokenize(text)]
    if not spans:
        return text + rng.choice(NOISE)
    a, b = sorted(rng.sample(range(len(spans)), 2)) if len(spans) > 1 else (0, 0)
    (s1, e1), (s2, e2) = spans[a], spans[b]
    if kind == 2:  # delete a token
        return text[:s1] + text[e1:]
    if kind == 3 and a != b:  # swap two tokens
        return text[:s1] + text[s2:e2] + text[e1:s2] + text[s1:e1] + text[e2:]
    if kind == 4:  # duplicate a token
        return text[:e1] + " " + text[s1:e1] + text[e1:]
    word = rng.choice(sorted(KEYWORDS)).upper()  # insert a keyword
    return text[:s1] + f" {word} " + text[s1:]


def check_no_traceback(text: str) -> int:
    project = load_text(text, "fuzz.ccl")  # IMPORTs of mutants resolve to missing files: diagnostics
    lines = text.splitlines() or [""]
    for d in project.diagnostics:
        assert d.code in CATALOGUE, d.code
        if d.span.file == "fuzz.ccl":
            assert 1 <= d.span.line <= len(lines) + 1 and d.span.col >= 1, d.header()
        render(d, project.sources)
    errors = [d for d in project.diagnostics if d.is_error and d.span.file == "fuzz.ccl"]
    if not project.has_errors:
        for d in analyze(project, {}).diagnostics:
            assert d.code in CATALOGUE, d.code
            render(d, project.sources)
    if not errors:
        tree = project.files["fuzz.ccl"]
        again, diags = parse_text(to_ccl(tree), "printed.ccl")
        assert not diags and again == tree
    return len(project.diagnostics)


def test_mutations_give_diagnostics_not_tracebacks():
    rng = random.Random(20261122)
    texts = corpus()
    with_diagnostics = 0
    for i in range(MUTATIONS):
        mutant = mutate(rng.choice(texts), rng)
        try:
            with_diagnostics += check_no_traceback(mutant) > 0
        except Exception as exc:  # pragma: no cover - the message is what matters
            raise AssertionError(f"mutation {i} crashed: {exc!r}\n--- input ---\n{mutant}") from exc
    # The mutations must actually exercise error paths, not only produce valid text.
    assert with_diagnostics > MUTATIONS // 2


def test_pathological_inputs():
    for text in ["", ";", ";;;", "\ufeff", "CREATE", "'", "/*", "{" * 500, "(" * 2000, "END;" * 50,
                 "CREATE OUTPUT STREAM s AS SELECT " + "(" * 300 + "1" + ")" * 300 + " FROM t;",
                 "\x00\x01\x02", "DECLARE " + "integer x := 1; " * 1000 + "END;"]:
        check_no_traceback(text)
