"""The lexer: keywords, names, literals, comments, positions and lexical errors."""
from ccl.syntax.lexer import LineIndex, make_lexer, tokenize


def kinds(text):
    return [(t.type, t.value) for t in tokenize(text)]


def lex_errors(text):
    found = []
    lexer = make_lexer(lambda code, pos, msg: found.append((code, pos)))
    lexer.input(text)
    list(iter(lexer.token, None))
    return found


def test_keywords_are_case_insensitive_and_names_keep_their_case():
    assert [t for t, _ in kinds("CREATE create CrEaTe")] == ["CREATE"] * 3
    assert kinds("priceW PriceW") == [("ID", "priceW"), ("ID", "PriceW")]


def test_base_types_are_one_token_kind_and_keep_their_spelling():
    assert kinds("INTEGER Money bigdatetime") == [
        ("BASETYPE", "INTEGER"), ("BASETYPE", "Money"), ("BASETYPE", "bigdatetime")]


def test_strings_use_single_quotes_and_doubled_quote_escape():
    assert kinds("'it''s' ''") == [("STRING", "it's"), ("STRING", "")]


def test_numbers():
    assert kinds("42 10L 3000000000 1.5 .5 2e3 1.5E-2") == [
        ("INTEGER", (42, False)), ("INTEGER", (10, True)), ("INTEGER", (3000000000, True)),
        ("FLOAT", 1.5), ("FLOAT", 0.5), ("FLOAT", 2000.0), ("FLOAT", 0.015)]


def test_comments_and_studio_annotations_are_skipped():
    text = "a // line comment\n/**@SIMPLEQUERY=FILTER*/ b /* multi\nline */ c"
    assert kinds(text) == [("ID", "a"), ("ID", "b"), ("ID", "c")]


def test_literal_glued_to_alias():
    assert kinds("'TEMP'EVENT_NAME") == [("STRING", "TEMP"), ("ID", "EVENT_NAME")]


def test_interval_units_are_plain_names():
    assert kinds("3 MINUTES 30 sec") == [
        ("INTEGER", (3, False)), ("ID", "MINUTES"), ("INTEGER", (30, False)), ("ID", "sec")]


def test_operators():
    assert [t for t, _ in kinds(":= = != <> <= >= < > && || ! ^ %")] == [
        "ASSIGN", "EQ", "NE", "NE", "LE", "GE", "LT", "GT", "ANDAND", "OROR", "BANG", "POW", "MOD"]


def test_non_ascii_names():
    assert kinds("Größe") == [("ID", "Größe")]


def test_lexical_errors_are_reported_with_offsets():
    assert lex_errors("a # b") == [("CCL1001", 2)]
    assert lex_errors("x 'open\ny") == [("CCL1002", 2)]
    assert lex_errors("x /* never closed") == [("CCL1003", 2)]
    assert lex_errors("99999999999999999999") == [("CCL1004", 0)]


def test_unterminated_string_still_yields_a_string_token():
    assert kinds("'open\nnext") == [("STRING", "open"), ("ID", "next")]


def test_line_index_maps_offsets_to_lines_and_columns():
    idx = LineIndex("ab\ncde\n\nf", "x.ccl")
    assert (idx.span(0).line, idx.span(0).col) == (1, 1)
    assert (idx.span(4).line, idx.span(4).col) == (2, 2)
    assert (idx.span(8).line, idx.span(8).col) == (4, 1)
    assert str(idx.span(4)) == "x.ccl:2:2"


def test_a_double_quoted_name_is_one_error_and_reads_as_the_name():
    assert lex_errors('a "Trade Feed" b') == [("CCL1001", 2)]
    assert kinds('x "Sym" y') == [("ID", "x"), ("ID", "Sym"), ("ID", "y")]
    assert lex_errors('a "unclosed\nb') == [("CCL1001", 2)]  # no closing quote: the character alone
