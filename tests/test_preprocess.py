"""The CCL preprocessor (ccl/syntax/preprocess.py): #define/#undef, conditions, #include, and errors that
are diagnostics with the file's own line numbers."""
import pytest

from ccl.syntax.parser import parse_text
from planned import plan_json
from ccl.syntax.preprocess import preprocess
from ccl.syntax.printer import to_ccl


def run(text, defines=None):
    problems = []
    out = preprocess(text, lambda code, line, col, msg: problems.append((code, line, col, msg)), defines)
    return out, problems


def test_text_without_directives_is_returned_as_it_is():
    text = "CREATE INPUT STREAM S SCHEMA (a integer); // # not at the start\n"
    assert run(text)[0] is text


def test_macros_replace_whole_names_outside_strings_and_comments():
    out, problems = run("#define N 10\n#define TWICE N * 2\n"
                        "x := TWICE; s := 'N'; // N\n/* N\nN */ y := N; NN := N_1;")
    assert problems == []
    assert out.split("\n") == ["", "", "x := 10 * 2; s := 'N'; // N", "/* N", "N */ y := 10; NN := N_1;"]
    out, _ = run("#define A B\n#define B A\nA B")  # a macro is not replaced inside itself
    assert out.split("\n")[-1] == "A B"
    out, _ = run("#define X 1\n#undef X\nX")
    assert out.split("\n")[-1] == "X"


def test_macros_with_parameters_take_their_arguments_expanded():
    out, problems = run("#define MAX(a, b) case when (a) > (b) then (a) else (b) end\n"
                        "#define TWICE(x) (x) * 2\n#define N 3\n#define E() 42\n"
                        "MAX(s.a, TWICE(N)) E() MAX 'MAX(1)' // MAX(1)\n"
                        "MAX(f(1, 2), 'a,b')  MAX (1, 2)")
    assert problems == []
    assert out.split("\n")[4:] == [
        "case when (s.a) > ((3) * 2) then (s.a) else ((3) * 2) end 42 MAX 'MAX(1)' // MAX(1)",
        "case when (f(1, 2)) > ('a,b') then (f(1, 2)) else ('a,b') end  "
        "case when (1) > (2) then (1) else (2) end"]
    out, _ = run("#define F(x) F(x + 1)\nF(0)")  # not replaced inside itself
    assert out.split("\n")[-1] == "F(0 + 1)"


def test_a_directive_goes_on_after_a_backslash_and_lines_keep_their_numbers():
    out, problems = run("#define SUM(a, b) \\\n  (a) + \\\n  (b)\nx := SUM(1, 2);")
    assert problems == []
    assert out.split("\n") == ["", "", "", "x := (1) +    (2);"]


@pytest.mark.parametrize("condition, defines, taken", [
    ("#ifdef DEBUG", {}, "else"), ("#ifdef DEBUG", {"DEBUG": ""}, "if"),
    ("#ifndef DEBUG", {}, "if"), ("#if LEVEL > 2 && defined(DEBUG)", {"LEVEL": "3", "DEBUG": "1"}, "if"),
    ("#if LEVEL > 2 && defined DEBUG", {"LEVEL": "2", "DEBUG": "1"}, "else"),
    ("#if !(UNDEFINED_NAME) || 0", {}, "if"), ("#if (7 / -2) == -3 && -7 % 3 == -1", {}, "if"),
])
def test_conditions(condition, defines, taken):
    out, problems = run(f"{condition}\nin_if\n#else\nin_else\n#endif\nafter", defines)
    assert problems == []
    assert [line for line in out.split("\n") if line] == [f"in_{taken}", "after"]


def test_elif_chains_and_nesting_take_one_branch():
    text = "#define V 2\n#if V == 1\none\n#elif V == 2\n#ifdef W\ntwo_w\n#else\ntwo\n#endif\n" \
           "#elif V >= 2\nlater\n#else\nnone\n#endif\n#if 0\n#if 1\nhidden\n#endif\n#endif"
    out, problems = run(text)
    assert problems == [] and [line for line in out.split("\n") if line] == ["two"]
    assert len(out.split("\n")) == len(text.split("\n"))  # every line keeps its number


def test_directive_lines_inside_a_comment_are_text():
    out, problems = run("/*\n#ifdef X\n*/\nkept")
    assert problems == [] and out == "/*\n#ifdef X\n*/\nkept"


@pytest.mark.parametrize("text, message", [
    ("#pragma once", "unknown preprocessor directive '#pragma'"),
    ("#define F(x y) x", "#define F(: the parameters must be names"),
    ("#define F(x, x) x", "#define F: a parameter is named twice"),
    ("#define F(x, y) x\n\nF(1)", "macro F takes 2 argument(s), given 1"),
    ("#endif", "#endif without #if"), ("#else", "#else without #if"),
    ("#if 1\n#else\n#else\n#endif", "#else after #else"),
    ("x\n#ifdef A", "#if without #endif"),
    ("#if 1 +\n#endif", "#if 1 +: not an expression of integers and macros"),
    ("#if 1 / 0\n#endif", "division by zero"), ("#if 'a'\n#endif", "#if: cannot read"),
    ("#include file.ccl", "#include needs a file name"),
])
def test_mistakes_are_diagnostics(text, message):
    _, problems = run(text)
    assert len(problems) == 1 and problems[0][0] == "CCL1006" and message in problems[0][3]


def test_a_project_with_directives_and_include_checks_and_plans(tmp_path):
    (tmp_path / "schemas.ccl").write_text("CREATE SCHEMA TradeSchema (Sym string, Px float);\n")
    main = tmp_path / "main.ccl"
    main.write_text('#include "schemas.ccl"\n#define MIN_PX 10.0\n'
                    "CREATE INPUT STREAM Trades SCHEMA TradeSchema;\n"
                    "#ifndef NO_FILTER\n"
                    "CREATE OUTPUT STREAM Dear AS SELECT * FROM Trades WHERE Trades.Px >= MIN_PX;\n"
                    "#endif\n")
    plan, diags = plan_json(str(main))
    assert plan is not None, [str(d) for d in diags]
    assert [e["name"] for e in plan["elements"]] == ["Trades", "Dear"]
    assert "Trades.Px >= 10.0" in to_ccl(parse_text(main.read_text())[0])


def test_errors_keep_the_files_line_numbers():
    _, diags = parse_text("#define T integer\n#ifdef X\nCREATE ???\n#endif\n\nCREATE INPUT STREAM S SCHEMA (a T)\n"
                          "#bogus\n", "t.ccl")
    assert [(d.code, d.span.line) for d in diags] == [("CCL1102", 6), ("CCL1006", 7)]
