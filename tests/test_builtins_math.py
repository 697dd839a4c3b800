"""SPLASH built-ins of ccl/splash/builtins_math.py: trigonometry, log, sign, greatest/least, bits,
char/instr/patindex, regular expressions, hex/binary, random and distance.

The functions run through the SPLASH interpreter, as in test_splash_builtins.py. CCL string literals
keep backslashes as they are, so the regular expressions below are written as raw strings.
"""
from __future__ import annotations

import math
from decimal import Decimal

import pytest

from ccl.analysis import analyze
from ccl.syntax.project import load_text
from ccl.splash import BUILTINS, Dec, Interpreter, Long, SplashError
from ccl.splash.values import kind
from tests.splash_eval import evaluator, same

ROW_TYPES = {"i": "integer", "l": "long", "f": "float", "s": "string", "d": "decimal(10,2)",
             "m": "money(2)", "b": "boolean", "n": "integer"}
ROW = {"i": 7, "l": 10_000_000_000, "f": 2.5, "s": "hello", "d": Decimal("-1.25"),
       "m": Decimal("3.10"), "b": True, "n": None}
INTERP = Interpreter(source_types={"r": ROW_TYPES})


ev = evaluator(INTERP, ROW)  # ev(code, **row): r.x reads ROW updated with row


def fails(code: str, message: str) -> None:
    """``code`` raises a SplashError whose message contains ``message``."""
    with pytest.raises(SplashError, match=message):
        ev(code)


def test_all_functions_are_registered():
    names = ("acos asin atan atan2 cos cosh sin sinh tan tanh cbrt log sign greatest least maxof "
             "minof bitand bitor bitxor bitnot bitclear bitset bittest bittoggle bitshiftleft "
             "bitshiftright bitflag bitflaglong bitmask bitmasklong char chr instr patindex "
             "regexp_firstsearch regexp_replace regexp_search hex_binary hex_string to_binary "
             "random distance distancesquared").split()
    assert [n for n in names if n not in BUILTINS] == []


# --- float functions ------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("cos(0)", 1.0), ("sin(0)", 0.0), ("tan(0)", 0.0), ("acos(1)", 0.0), ("asin(1)", math.pi / 2),
    ("atan(1)", math.pi / 4), ("cosh(0)", 1.0), ("sinh(0)", 0.0), ("tanh(1000)", 1.0),
    ("cbrt(27)", 3.0), ("cbrt(-8)", -2.0), ("cos(r.d)", math.cos(-1.25)), ("sin(r.l)", math.sin(1e10)),
    ("cosh(1000)", math.inf), ("sinh(-1000)", -math.inf), ("sinh(1000)", math.inf),
    ("cos(null)", None), ("cbrt(r.n)", None),
])
def test_float_functions(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code", ["acos(2)", "asin(-1.5)", "sin(to_float('Infinity'))",
                                  "cos(to_float('NaN'))", "tan(to_float('-Infinity'))"])
def test_float_functions_outside_the_domain_give_nan(code):
    v = ev(code)
    assert isinstance(v, float) and math.isnan(v)


def test_atan2_and_negative_zero():
    assert same(ev("atan2(1, 1)"), math.pi / 4)
    assert same(ev("atan2(-0.0, -1)"), math.pi)  # Spark adds 0.0: no -pi
    assert same(ev("atan2(0, 0)"), 0.0)
    assert ev("atan2(null, 1)") is None and ev("atan2(1, null)") is None


@pytest.mark.parametrize("code, expected", [
    ("log(1)", 0.0), ("log(r.f)", math.log(2.5)), ("log(0)", None), ("log(-1)", None),
    ("log(2, 8)", 3.0), ("log(10, 1000)", pytest.approx(3.0)), ("log(1, 5)", math.inf),
    ("log(1, 0.5)", -math.inf), ("log(0, 5)", None), ("log(2, -1)", None), ("log(null)", None),
    ("log(2, null)", None),
])
def test_log(code, expected):
    v = ev(code)
    assert (v == expected and isinstance(v, float)) if isinstance(expected, type(pytest.approx(0))) \
        else same(v, expected)


def test_log_one_to_base_one_is_nan():
    assert math.isnan(ev("log(1, 1)"))


@pytest.mark.parametrize("code, expected", [
    ("sign(-3)", -1), ("sign(0)", 0), ("sign(r.l)", 1), ("sign(r.d)", -1), ("sign(-0.0)", 0),
    ("sign(to_float('-Infinity'))", -1), ("sign(to_float('NaN'))", None), ("sign(null)", None),
])
def test_sign_is_an_integer(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code", ["cos('a')", "sign(true)", "atan2(1, 'x')", "log(2, 'x')",
                                  "cbrt(r.s)"])
def test_float_functions_reject_non_numbers(code):
    fails(code, "needs a number")


# --- greatest / least -----------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("greatest(1, 3, 2)", 3), ("least(1, 3, 2)", 1), ("maxof(r.i, 9)", 9), ("minof(r.i, 9)", 7),
    ("greatest(1, r.l)", Long(10_000_000_000)), ("least(1, r.l)", Long(1)),
    ("greatest(1, 2.5)", 2.5), ("greatest(3, 2.5)", 3.0), ("least(r.l, 2.5)", 2.5),
    ("greatest('apple', 'pear')", "pear"), ("least('apple', 'pear')", "apple"),
    ("greatest(false, true)", True),
    ("greatest(null, 2)", 2), ("least(2, null, 1)", 1), ("greatest(null, null)", None),
    ("greatest(1.0, to_float('NaN'))", math.nan), ("least(1.0, to_float('NaN'))", 1.0),
])
def test_greatest_least(code, expected):
    assert same(ev(code), expected)


def test_greatest_least_of_decimals_widen_to_a_common_decimal():
    v = ev("greatest(r.i, r.d)")
    assert isinstance(v, Dec) and v == 7 and (v.precision, v.scale) == (12, 2)
    v = ev("least(r.d, r.m, 3)")
    assert isinstance(v, Dec) and v == Decimal("-1.25") and (v.precision, v.scale) == (18, 2)
    assert same(ev("greatest(r.d, 0.5)"), 0.5)


def test_greatest_of_incomparable_values_is_an_error():
    fails("greatest(1, 'a')", r"greatest\(\): cannot compare")
    fails("minof(true, 1)", r"minof\(\): cannot compare")


# --- bits -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("bitand(12, 10)", 8), ("bitor(12, 10)", 14), ("bitxor(12, 10)", 6),
    ("bitand(-1, r.l)", Long(10_000_000_000)), ("bitor(r.i, r.l)", Long(10_000_000_007)),
    ("bitxor(r.l, r.l)", Long(0)), ("bitnot(0)", -1), ("bitnot(2147483647)", -2147483648),
    ("bitnot(r.l)", Long(-10_000_000_001)), ("bitand(null, 1)", None), ("bitnot(null)", None),
])
def test_bitwise(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("bitset(0, 3)", 8), ("bitset(0, 31)", -2147483648), ("bitset(r.l, 63)", Long(10_000_000_000 - 2**63)),
    ("bitclear(15, 0)", 14), ("bitclear(-1, 31)", 2147483647), ("bittoggle(5, 1)", 7),
    ("bittoggle(7, 1)", 5), ("bittest(5, 2)", True), ("bittest(5, 1)", False),
    ("bittest(-1, 31)", True), ("bittest(r.l, 40)", False), ("bitset(null, 1)", None),
    ("bittest(1, null)", None),
])
def test_bit_at_a_position(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("bitshiftleft(1, 4)", 16), ("bitshiftleft(1, 31)", -2147483648), ("bitshiftleft(1, 32)", 0),
    ("bitshiftleft(3, 1000)", 0), ("bitshiftleft(to_long(1), 40)", Long(2**40)),
    ("bitshiftright(256, 4)", 16), ("bitshiftright(-8, 1)", -4), ("bitshiftright(-8, 100)", -1),
    ("bitshiftright(8, 100)", 0), ("bitshiftleft(8, -2)", 2), ("bitshiftright(8, -2)", 32),
    ("bitshiftleft(5, 0)", 5), ("bitshiftleft(null, 1)", None), ("bitshiftright(1, null)", None),
])
def test_shifts(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("bitflag(0)", 1), ("bitflag(4)", 16), ("bitflag(31)", -2147483648),
    ("bitflaglong(40)", Long(2**40)), ("bitflaglong(63)", Long(-2**63)),
    ("bitmask(0, 3)", 15), ("bitmask(3, 0)", 15), ("bitmask(2, 2)", 4), ("bitmask(0, 31)", -1),
    ("bitmasklong(0, 63)", Long(-1)), ("bitmasklong(32, 33)", Long(3 << 32)), ("bitflag(null)", None),
])
def test_flags_and_masks(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("bitand(1.5, 1)", "argument 1 must be an integer or a long, not a float"),
    ("bitor(1, r.d)", "argument 2 must be an integer or a long, not a decimal"),
    ("bitnot('1')", "must be an integer or a long, not a string"),
    ("bitand(true, 1)", "not a boolean"),
    ("bitset(1, 32)", r"bit position 32 is outside 0..31"),
    ("bittest(r.l, 64)", r"bit position 64 is outside 0..63"),
    ("bitclear(1, -1)", r"bit position -1 is outside"),
    ("bitflag(32)", r"bitflag\(\): bit position 32"),
    ("bitmask(0, 32)", r"bitmask\(\): bit position 32"),
    ("bitshiftleft(1, 1.5)", "must be an integer"),
])
def test_bit_functions_reject_bad_arguments(code, message):
    fails(code, message)


# --- characters and positions ---------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("char(65)", "A"), ("chr(97)", "a"), ("chr(233)", "é"), ("char(128512)", "😀"), ("chr(0)", "\x00"),
    ("char(ascii('Z'))", "Z"), ("char(null)", None),
])
def test_char(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("char(-1)", "-1 is not a character code"), ("chr(1114112)", "not a character code"),
    ("chr(55296)", "not a character code"), ("char('A')", "must be an integer"),
])
def test_char_rejects_bad_codes(code, message):
    fails(code, message)


@pytest.mark.parametrize("code, expected", [
    ("instr('hello', 'l')", 3), ("instr('hello', 'x')", 0), ("instr('hello', 'l', 4)", 4),
    ("instr('hello', 'l', 5)", 0), ("instr('CORPORATE FLOOR', 'OR', 3, 2)", 14),
    ("instr('CORPORATE FLOOR', 'OR', -3, 2)", 2), ("instr('CORPORATE FLOOR', 'OR', -1)", 14),
    ("instr('aaa', 'aa', 1, 2)", 2), ("instr('aaa', 'aa', 1, 3)", 0), ("instr('hello', 'l', 0)", 0),
    ("instr('hello', 'l', 100)", 0), ("instr('hello', 'l', -100)", 0), ("instr('abc', '')", 1),
    ("instr('', '')", 1), ("instr('', 'a')", 0), ("instr(null, 'a')", None),
    ("instr('a', 'a', null)", None),
])
def test_instr(code, expected):
    assert same(ev(code), expected)


def test_instr_rejects_bad_arguments():
    fails("instr('a', 'a', 1, 0)", "occurrence must be 1 or more, not 0")
    fails("instr('a', 1)", "argument 2 must be a string")


@pytest.mark.parametrize("code, expected", [
    (r"patindex('hello world', 'o\s')", 5), ("patindex('hello', 'l+')", 3),
    ("patindex('hello', 'l', 4)", 4), ("patindex('hello', 'h', 2)", 0), ("patindex('hello', 'x')", 0),
    ("patindex('hello', 'l', -5)", 3), ("patindex('', '')", 1), ("patindex('ab', '', 3)", 3),
    ("patindex('ab', '', 9)", 0), ("patindex(null, 'a')", None), ("patindex('a', null)", None),
])
def test_patindex(code, expected):
    assert same(ev(code), expected)


# --- regular expressions --------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("regexp_search('abc', 'b+')", True), ("regexp_search('abc', '^b')", False),
    ("regexp_search('', '')", True), (r"regexp_search('a1', '\d')", True),
    ("regexp_search(null, 'a')", None),
    ("regexp_firstsearch('Tom and Jerry', '[a-z]+')", "om"), (r"regexp_firstsearch('x=12, y=345', '\d+')", "12"),
    ("regexp_firstsearch('abc', 'z')", None), ("regexp_firstsearch('abc', '')", ""),
    ("regexp_firstsearch('abc', null)", None),
])
def test_regexp_search(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    (r"regexp_replace('a1b2', '\d', '#')", "a#b2"),
    (r"regexp_replace('a1b2', '(\w)(\d)', '\2\1')", "1ab2"),
    (r"regexp_replace('a1b2', '\d', '<\0>')", "a<1>b2"),
    (r"regexp_replace('ab', 'b', '\\')", "a\\"),
    (r"regexp_replace('ab', 'b', '$1 \n')", "a$1 \\n"),
    ("regexp_replace('abc', 'z', 'y')", "abc"), ("regexp_replace('abc', '', '-')", "-abc"),
    ("regexp_replace('abc', 'b', '')", "ac"), ("regexp_replace('', 'x*', 'y')", "y"),
    ("regexp_replace(null, 'a', 'b')", None), ("regexp_replace('a', 'a', null)", None),
])
def test_regexp_replace_replaces_the_first_match(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("regexp_search('a', '(')", "bad regular expression"),
    ("regexp_firstsearch('a', '[z-a]')", "bad regular expression"),
    ("patindex('a', 'a{2,1}')", "bad regular expression"),
    (r"regexp_replace('a', 'a', '\1')", "refers to group 1, but the expression has 0 group"),
    ("regexp_search(1, 'a')", "argument 1 must be a string"),
    ("regexp_search('a', 1)", "argument 2 must be a string"),
])
def test_regexp_errors(code, message):
    fails(code, message)


def test_regexp_pattern_length_is_limited():
    with pytest.raises(SplashError, match="longer than"):
        ev("regexp_search('a', r.s)", s="a" * 10_001)


# --- binary ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("hex_binary('0aFF')", b"\x0a\xff"), ("hex_binary('abc')", b"\x0a\xbc"), ("hex_binary('')", b""),
    ("hex_string(hex_binary('0aff'))", "0AFF"), ("hex_string(to_binary('AB'))", "4142"),
    ("to_binary('é')", b"\xc3\xa9"), ("to_binary(hex_binary('00'))", b"\x00"),
    ("hex_binary(null)", None), ("hex_string(null)", None), ("to_binary(null)", None),
])
def test_binary(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("hex_binary('0x12')", "is not a string of hex digits"), ("hex_binary('1 2')", "hex digits"),
    ("hex_binary(12)", "must be a string"), ("hex_string('12')", "needs a binary value, not a string"),
    ("to_binary(12)", "needs a string or a binary value, not an integer"),
])
def test_binary_errors(code, message):
    fails(code, message)


# --- random and distance --------------------------------------------------------------------------

def test_random():
    values = {ev("random()") for _ in range(20)}
    assert all(isinstance(v, float) and 0.0 <= v < 1.0 for v in values)
    assert len(values) > 1  # not a constant
    assert same(ev("random(42)"), ev("random(42)")) and ev("random(42)") != ev("random(43)")
    assert 0.0 <= ev("random(r.d)") < 1.0
    assert ev("random(null)") is None
    fails("random('x')", "needs a number")


@pytest.mark.parametrize("code, expected", [
    ("distance(0, 0, 3, 4)", 5.0), ("distance(1, 1, 1, 1)", 0.0), ("distance(0, 0, 0, 1, 2, 2)", 3.0),
    ("distancesquared(0, 0, 3, 4)", 25.0), ("distancesquared(0, 0, 0, 1, 2, 2)", 9.0),
    ("distance(r.d, 0, 1.75, 4)", 5.0), ("distance(0, 0, 1e200, 1e200)", math.hypot(1e200, 1e200)),
    ("distancesquared(0, 0, 1e200, 0)", math.inf), ("distance(0, 0, null, 1)", None),
])
def test_distance(code, expected):
    assert same(ev(code), expected)


def test_distance_errors():
    fails("distance(0, 0, 0, 1, 2)", "not 5")
    fails("distancesquared(0, 0, 'a', 1)", "needs a number")


# --- checker and runtime agree on result types ----------------------------------------------------

TYPED = {
    "a": "bitand(s.i, s.l)", "b": "bitnot(s.i)", "c": "bitshiftleft(s.l, 1)", "d": "bitflaglong(s.i)",
    "e": "bitmask(1, 2)", "f": "sign(s.f)", "g": "cos(s.i)", "h": "log(2, s.l)", "k": "greatest(s.i, s.l)",
    "p": "least(s.i, s.f)", "q": "chr(s.i)", "r": "instr(s.s, 'l')", "t": "hex_binary('ab')",
    "u": "atan2(s.i, s.f)", "v": "bitset(s.i, 3)", "w": "distance(s.i, s.i, s.f, s.f)",
}


def test_checker_result_types_match_the_runtime():
    select = ", ".join(f"{expr} AS {name}" for name, expr in TYPED.items())
    analysis = analyze(load_text("CREATE INPUT STREAM s SCHEMA (i integer, l long, f float, s string);\n"
                                 f"CREATE OUTPUT STREAM o AS SELECT {select} FROM s;"), {})
    assert not analysis.diagnostics, analysis.diagnostics
    columns = analysis.elements["o"].columns
    for name, expr in TYPED.items():
        runtime = kind(ev(expr.replace("s.", "r."), i=7, l=Long(40), f=2.5, s="hello"))
        assert (name, runtime) == (name, columns[name].name), expr


def test_a_regular_expression_that_backtracks_for_ever_is_an_error():
    """A catastrophic pattern stops after builtins_math.REGEX_SECONDS with an error (a bad record),
    instead of hanging the element."""
    import time

    from ccl.splash import builtins_math
    from ccl.splash.builtins import lookup
    from ccl.splash.values import SplashError
    began = time.monotonic()
    with pytest.raises(SplashError, match="took longer than"):
        lookup("regexp_search").fn(None, "a" * 35 + "b", "(a|aa)+$")
    assert time.monotonic() - began < builtins_math.REGEX_SECONDS + 2


def test_max_and_min_of_several_arguments_are_scalar():
    """ESP: "max(), which returns the maximum value of a comma-separated list of values"; with
    one argument they stay aggregates (over an event cache in SPLASH)."""
    assert same(ev("max(1, 4, 2)"), 4) and same(ev("min(r.f, 1.5)"), 1.5)
    assert same(ev("max(r.i, r.l)"), Long(10_000_000_000))
