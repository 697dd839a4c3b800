"""SPLASH built-in functions and operators (ccl/splash): one test per built-in, nulls included.

The expected values were checked against Spark 4.3 with spark.sql.ansi.enabled=false (the
semantics the Spark compiler of partition functions must reproduce).
"""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import pytest

from ccl.syntax.parser import parse_text
from ccl.splash import (BUILTINS, Dec, Interpreter, Interval, Long, SplashError, Vector,
                        make_dec)
from ccl.splash.convert import java_double
from tests.splash_eval import evaluator, same

ROW_TYPES = {"i": "integer", "l": "long", "f": "float", "s": "string", "d": "decimal(10,2)",
             "m": "money(2)", "t": "timestamp", "b": "boolean", "n": "integer"}
ROW = {"i": 7, "l": 10_000_000_000, "f": 2.5, "s": "hello", "d": Decimal("-1.25"),
       "m": Decimal("3.10"), "t": dt.datetime(2020, 3, 4, 5, 6, 7, 500_000), "b": True, "n": None}
INTERP = Interpreter(source_types={"r": ROW_TYPES})


ev = evaluator(INTERP, ROW)  # ev(code, **row): r.x reads ROW updated with row


# --- strings --------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("ascii('A')", 65), ("ascii('US0378')", 85), ("ascii('')", 0), ("ascii('é')", 233),
    ("ascii('😀x')", 128512), ("ascii(null)", None), ("ascii(r.n)", None),
])
def test_ascii(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("substr('hello', 1, 1)", "h"), ("substr('hello', 2, 3)", "ell"), ("substr('hello', 0, 2)", "he"),
    ("substr('hello', -3, 2)", "ll"), ("substr('hello', -10, 8)", "hel"), ("substr('hello', 2, -1)", ""),
    ("substr('hello', 2, 100)", "ello"), ("substr('hello', 6, 1)", ""), ("substr('hello', 2)", "ello"),
    ("substr('hello', 2147483647, 2147483647)", ""), ("substr(null, 1, 1)", None),
    ("substr('hello', null, 1)", None), ("substr('hello', 1, null)", None),
])
def test_substr(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("left('hello', 2)", "he"), ("left('hello', 0)", ""), ("left('hello', -1)", ""),
    ("left('hello', 10)", "hello"), ("left(null, 1)", None), ("left('a', null)", None),
])
def test_left(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("right('hello', 2)", "lo"), ("right('hello', 0)", ""), ("right('hello', -2)", ""),
    ("right('hello', 10)", "hello"), ("right(null, 1)", None), ("right('a', null)", None),
])
def test_right(code, expected):
    assert same(ev(code), expected)


def test_upper_and_lower():
    assert ev("upper('straße é')") == "STRASSE É"
    assert ev("lower('ΣΑΣ İ')") == "σας i̇"
    assert ev("upper(null)") is None and ev("lower(r.n)") is None


def test_length_counts_characters():
    assert same(ev("length('😀é')"), 2)
    assert ev("length('')") == 0 and ev("length(null)") is None


def test_trims_remove_spaces_only():
    assert ev("trim('  a b \t ')") == "a b \t"
    assert ev("ltrim('  a ')") == "a " and ev("rtrim('  a ')") == "  a"
    assert ev("trim(null)") is None and ev("ltrim(null)") is None and ev("rtrim(null)") is None


@pytest.mark.parametrize("code, expected", [
    ("replace('aaa', 'aa', 'b')", "ba"), ("replace('abc', '', 'x')", "abc"),
    ("replace('abc', 'b', '')", "ac"), ("replace(null, 'a', 'b')", None), ("replace('a', null, 'b')", None),
    ("replace('a', 'a', null)", None),
])
def test_replace(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, expected", [
    ("'abc' like 'a%'", True), ("'abc' like 'a_c'", True), ("'abc' like 'A%'", False),
    ("'a_c' like 'a\\_c'", True), ("'abc' like 'a\\_c'", False), ("'a%' like 'a\\%'", True),
    ("'a\\c' like 'a\\\\c'", True), ("'a.c' like 'a.c'", True), ("'abc' like 'a.c'", False),
    ("like('xy', '_y')", True), ("null like 'a'", None), ("'a' like null", None),
])
def test_like(code, expected):
    assert same(ev(code), expected)


def test_like_with_newline_and_bad_escapes():
    assert ev("r.s like 'a_c'", s="a\nc") is True
    with pytest.raises(SplashError, match="escape"):
        ev("'abc' like 'a\\b%'")
    with pytest.raises(SplashError, match="escape"):
        ev("'ab' like 'a\\'")


def test_concat():
    assert ev("concat('a', 'b', 'c')") == "abc"
    assert ev("concat('a', null)") is None


def test_string_functions_reject_numbers():
    with pytest.raises(SplashError, match="must be a string"):
        ev("upper(1)")


# --- numbers --------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("abs(-3)", 3), ("abs(-2147483647 - 1)", -2147483648), ("abs(r.l)", Long(10_000_000_000)),
    ("abs(-2.5)", 2.5), ("abs(r.d)", Decimal("1.25")), ("abs(null)", None),
])
def test_abs(code, expected):
    assert same(ev(code), expected) or (isinstance(expected, Decimal) and ev(code) == expected)


def test_abs_keeps_decimal_type():
    v = ev("abs(r.d)")
    assert isinstance(v, Dec) and (v.precision, v.scale) == (10, 2)


@pytest.mark.parametrize("code, expected", [
    ("ceil(1.5)", Long(2)), ("ceil(-1.5)", Long(-1)), ("ceil(5)", Long(5)), ("ceil(1e300)", Long(2**63 - 1)),
    ("ceil(0.0 / 0.0)", None), ("ceil(null)", None),
    ("floor(-1.5)", Long(-2)), ("floor(2.5)", Long(2)), ("floor(-1e300)", Long(-2**63)), ("floor(null)", None),
])
def test_ceil_floor(code, expected):
    assert same(ev(code), expected)


def test_ceil_floor_of_nan_and_decimal():
    assert same(ev("ceil(to_float('NaN'))"), Long(0))
    up, down = ev("ceil(r.d)"), ev("floor(r.d)")
    assert up == -1 and down == -2 and (up.precision, up.scale) == (9, 0)


@pytest.mark.parametrize("code, expected", [
    ("round(2.5)", 3.0), ("round(-2.5)", -3.0), ("round(2.675, 2)", 2.68), ("round(123.456, -1)", 120.0),
    ("round(-0.4)", 0.0), ("round(15, -1)", 20), ("round(25, -1)", 30), ("round(14, 1)", 14),
    ("round(2147483647, -1)", -2147483646), ("round(1e300, 2)", 1e300), ("round(null)", None),
    ("round(1.5, null)", None),
])
def test_round(code, expected):
    assert same(ev(code), expected)


def test_round_decimal_and_nan():
    assert math.isnan(ev("round(to_float('NaN'), 1)"))
    r = ev("round(to_decimal(1.255, 10, 3), 2)")
    assert r == Decimal("1.26") and (r.precision, r.scale) == (10, 2)
    r = ev("round(to_decimal(1.255, 10, 3), -1)")
    assert r == 0 and (r.precision, r.scale) == (8, 0)


@pytest.mark.parametrize("code, expected", [
    ("power(2, 10)", 1024.0), ("2 ^ 0.5", math.sqrt(2)), ("power(0, -1)", math.inf),
    ("power(-8, 3)", -512.0), ("power(-10, 309)", -math.inf), ("power(2, null)", None),
    ("power(to_float('NaN'), 0)", 1.0),
])
def test_power(code, expected):
    assert same(ev(code), expected)


def test_power_nan_cases_follow_java():
    assert math.isnan(ev("power(-8, 1.0 / 3)"))
    assert math.isnan(ev("power(1, to_float('NaN'))"))
    assert math.isnan(ev("power(-1, to_float('Infinity'))"))
    assert same(ev("power(-0.0, -3)"), -math.inf)


def test_sqrt():
    assert same(ev("sqrt(4)"), 2.0)
    assert math.isnan(ev("sqrt(-1)"))
    assert ev("sqrt(null)") is None


def test_exp_ln_log10_pi():
    assert ev("exp(0)") == 1.0 and ev("exp(1000)") == math.inf and ev("exp(null)") is None
    assert ev("ln(1)") == 0.0 and ev("ln(0)") is None and ev("ln(-1)") is None
    assert ev("log10(1000)") == 3.0 and ev("log10(0)") is None
    assert ev("pi()") == math.pi


@pytest.mark.parametrize("code, expected", [
    ("mod(-7, 3)", -1), ("mod(7, -3)", 1), ("mod(7, 0)", None), ("mod(-7.5, 2)", -1.5), ("mod(null, 2)", None),
])
def test_mod(code, expected):
    assert same(ev(code), expected)


# --- nulls and conversions ------------------------------------------------------------------------

def test_isnull():
    assert ev("isnull(null)") is True and ev("isnull(r.n)") is True
    assert ev("isnull(0)") is False and ev("isnull('')") is False


def test_firstnonnull_and_coalesce_are_lazy():
    assert ev("firstnonnull(null, r.n, 2, 3)") == 2
    assert ev("coalesce(null, null)") is None
    assert ev("coalesce(1, to_integer('not a number'))") == 1  # the second is never evaluated
    with pytest.raises(SplashError):
        ev("coalesce(null, to_integer('not a number'))")


@pytest.mark.parametrize("code, expected", [
    ("string(1)", "1"), ("string(1.0)", "1.0"), ("string(1e10)", "1.0E10"), ("string(0.0001)", "1.0E-4"),
    ("string(123456789.0)", "1.23456789E8"), ("string(-0.0)", "-0.0"), ("string(true)", "true"),
    ("string(r.d)", "-1.25"), ("string(r.m)", "3.10"), ("string(r.t)", "2020-03-04 05:06:07.5"),
    ("string(null)", None), ("to_string(42)", "42"), ("string(to_float('NaN'))", "NaN"),
])
def test_string(code, expected):
    assert same(ev(code), expected)


def test_java_double_formatting():
    assert java_double(1e7) == "1.0E7" and java_double(9999999.0) == "9999999.0"
    assert java_double(0.001) == "0.001" and java_double(5e-324) == "4.9E-324"
    assert java_double(246607568800031744.0) == "2.46607568800031744E17"  # Java 17's integral form
    assert java_double(1e17) == "1.0E17" and java_double(-math.inf) == "-Infinity"


def test_to_string_with_a_format_it_cannot_apply_is_an_error():
    """(Date-time and integer formats: tests/test_builtins_time.py.)"""
    with pytest.raises(SplashError, match="format"):
        ev("to_string('text', 'YYYY')")


@pytest.mark.parametrize("code, expected", [
    ("to_integer(' 12 ')", 12), ("to_integer('1.9')", 1), ("to_integer('-1.9')", -1), ("to_integer('.5')", 0),
    ("to_integer('+5')", 5), ("to_integer(2.9)", 2), ("to_integer(-2.9)", -2), ("to_integer(1e20)", 2147483647),
    ("to_integer(r.l)", 1410065408), ("to_integer(true)", 1), ("to_integer(r.d)", -1),
    ("to_integer(to_float('NaN'))", 0), ("to_integer(null)", None),
])
def test_to_integer(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("text", ["abc", "", " ", "1e3", "0x10", "2147483648", "1_000", "+", "12 3"])
def test_to_integer_of_invalid_text_is_an_error(text):
    with pytest.raises(SplashError, match="cannot convert"):
        ev(f"to_integer('{text}')")


def test_to_long():
    assert same(ev("to_long('9223372036854775807')"), Long(2**63 - 1))
    assert same(ev("to_long(1e20)"), Long(2**63 - 1))
    assert same(ev("to_long(3)"), Long(3))
    assert ev("to_long(null)") is None
    with pytest.raises(SplashError):
        ev("to_long('9223372036854775808')")


@pytest.mark.parametrize("code, expected", [
    ("to_float('1e3')", 1000.0), ("to_float(' 1.5 ')", 1.5), ("to_float('1.5d')", 1.5), ("to_float('0x1p3')", 8.0),
    ("to_float('inf')", math.inf), ("to_float('-Infinity')", -math.inf), ("to_float(3)", 3.0),
    ("to_float(r.d)", -1.25), ("to_float(null)", None),
])
def test_to_float(code, expected):
    assert same(ev(code), expected)


def test_to_float_nan_and_errors():
    assert math.isnan(ev("to_float('nan')")) and math.isnan(ev("to_float('+NaN')"))
    for bad in ("-nan", "1.5e", "e5", "1_0", "x"):
        with pytest.raises(SplashError):
            ev(f"to_float('{bad}')")


@pytest.mark.parametrize("code, expected", [
    ("to_decimal(1.555, 10, 2)", Decimal("1.56")), ("to_decimal(-1.555, 10, 2)", Decimal("-1.56")),
    ("to_decimal('1e3', 10, 2)", Decimal("1000.00")), ("to_decimal(' .5 ', 10, 2)", Decimal("0.50")),
    ("to_decimal(123.4, 3, 1)", None), ("to_decimal(to_float('Infinity'), 10, 2)", None),
    ("to_decimal(7, 5, 0)", Decimal(7)), ("to_decimal(null, 5, 0)", None),
])
def test_to_decimal(code, expected):
    value = ev(code)
    assert value == expected and (expected is None or isinstance(value, Dec))


def test_to_decimal_errors():
    with pytest.raises(SplashError, match="cannot convert"):
        ev("to_decimal('abc', 10, 2)")
    with pytest.raises(SplashError, match="precision"):
        ev("to_decimal(1, 40, 2)")


def test_to_boolean():
    assert ev("to_boolean(' Yes ')") is True and ev("to_boolean('f')") is False
    assert ev("to_boolean(5)") is True and ev("to_boolean(0.0)") is False and ev("to_boolean(null)") is None
    with pytest.raises(SplashError):
        ev("to_boolean('maybe')")


@pytest.mark.parametrize("code, expected", [
    ("cast(integer, '42')", 42), ("cast(long, 5)", Long(5)), ("cast(float, 2)", 2.0),
    ("cast(string, 2.5)", "2.5"), ("cast(boolean, 'no')", False), ("cast(interval, 3)", Interval(3)),
    ("cast(integer, null)", None), ("cast(integer, 3000000000)", -1294967296),
])
def test_cast(code, expected):
    assert same(ev(code), expected)


def test_cast_to_money_and_temporals():
    m = ev("cast(money(2), 1.005)")
    assert m == Decimal("1.01") and (m.precision, m.scale) == (18, 2)
    assert ev("cast(timestamp, '2020-01-02T03:04:05.123456')") == dt.datetime(2020, 1, 2, 3, 4, 5, 123000)
    assert ev("cast(date, r.t)") == dt.datetime(2020, 3, 4, 5, 6, 7)
    assert ev("cast(bigdatetime, '2020-01-02')") == dt.datetime(2020, 1, 2)
    with pytest.raises(SplashError):
        ev("cast(timestamp, '2020-13-01')")
    with pytest.raises(SplashError):
        ev("cast(integer, r.t)")


# --- date-times -----------------------------------------------------------------------------------

def test_now_is_fixed_within_a_call():
    clock_calls = []

    def clock() -> dt.datetime:
        clock_calls.append(1)
        return dt.datetime(2021, 5, 6, 7, 8, 9)
    assert evaluator(Interpreter(clock=clock), {})("now() = now()") is True
    assert len(clock_calls) == 1


def test_now_without_a_clock_is_utc():
    value = ev("now()")
    assert isinstance(value, dt.datetime) and value.tzinfo is None
    assert abs(value - dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)) < dt.timedelta(minutes=1)


@pytest.mark.parametrize("fn, expected", [("year", 2020), ("month", 3), ("dayofmonth", 4), ("hour", 5),
                                          ("minute", 6), ("second", 7)])
def test_date_parts(fn, expected):
    assert same(ev(f"{fn}(r.t)"), expected)
    assert ev(f"{fn}(null)") is None
    with pytest.raises(SplashError, match="date-time"):
        ev(f"{fn}('2020-01-01')")
    assert same(ev(f"{fn}(r.t, 'UTC')"), expected)  # (other zones: tests/test_builtins_time.py)
    with pytest.raises(SplashError, match="time zone"):
        ev(f"{fn}(r.t, 'No/Such_Zone')")


# --- containers and print -------------------------------------------------------------------------

def run_block(code: str, **options: object) -> object:
    project, diags = parse_text(f"CREATE OUTPUT STREAM o PARTITION BY r {{ {code} }} PARTITIONS 2 AS SELECT * FROM r;")
    assert not diags, diags
    outcome = Interpreter(**options).run_block(project.statements[0].partition.specs[0].body)
    return outcome.value


def test_size_and_push_back():
    assert run_block("vector(long) v := new vector(long); push_back(v, 1); push_back(v, null); "
                     "return size(v);") == 2
    v = run_block("vector(long) v := new vector(long); return push_back(v, 1);")
    assert isinstance(v, Vector) and same(v[0], Long(1))
    assert run_block("dictionary(string, integer) d := new dictionary(string, integer); d['a'] := 1; "
                     "return size(d);") == 1
    assert run_block("vector(integer) v; return size(v);") is None
    with pytest.raises(SplashError, match="vector"):
        run_block("vector(integer) v; push_back(v, 1);")


def test_resize():
    assert run_block("vector(integer) v := new vector(integer); resize(v, 3); return v[2];") is None
    assert run_block("vector(integer) v := new vector(integer); push_back(v, 1); push_back(v, 2); "
                     "resize(v, 1); return size(v);") == 1
    with pytest.raises(SplashError, match="resize"):
        run_block("vector(integer) v := new vector(integer); resize(v, -1);")


def test_remove_and_clear():
    assert run_block("dictionary(integer, string) d := new dictionary(integer, string); d[1] := 'a'; "
                     "d[2] := 'b'; remove(d, 1); remove(d, 9); return size(d);") == 1
    assert run_block("vector(integer) v := new vector(integer); push_back(v, 1); clear(v); "
                     "return size(v);") == 0
    with pytest.raises(SplashError):
        run_block("vector(integer) v := new vector(integer); remove(v, 0);")


def test_print_goes_to_the_printer():
    lines: list[str] = []
    assert run_block("print('x = ', 1, ' ', null, 2.5); return 0;", printer=lines.append) == 0
    assert lines == ["x = 1 2.5"]


def test_window_iterators_over_a_snapshot():
    from ccl.splash import as_type
    from ccl.splash.machine import Cell
    from ccl.splash.windows import WindowView

    rows = {(1,): {"k": 1, "v": "a"}, (2,): {"k": 2, "v": "b"}}
    view = WindowView("W", rows, ["k"], {"k": as_type("integer"), "v": as_type("string")})
    project, _ = parse_text("CREATE OUTPUT STREAM o PARTITION BY r { "
                            "W_iterator := getiterator(W_stream); string s := ''; "
                            "typeof(r) x := getnext(W_iterator); "
                            "while (not isnull(x)) { s := s + x.v; x := getNext(W_iterator); } "
                            "resetiterator(W_iterator); s := s + getNext(W_iterator).v; "
                            "deleteiterator(W_iterator); return s + to_string(W_stream[[k = 2;|]].v); "
                            "} PARTITIONS 2 AS SELECT * FROM r;")
    body = project.statements[0].partition.specs[0].body
    cells = {"W_stream": Cell(view, const=True), "W_iterator": Cell(None)}
    assert Interpreter().run_block(body, extra_globals=cells).value == "abab"
    with pytest.raises(SplashError, match="needs a window iterator"):
        run_block("return getNext(1);")
    with pytest.raises(SplashError, match="needs a window"):
        run_block("return getIterator('W');")


def test_every_builtin_is_documented_and_tested():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "functions.md").read_text(encoding="utf-8")
    here = Path(__file__).resolve().parent
    source = "".join(p.read_text(encoding="utf-8") for p in [Path(__file__), *here.glob("test_builtins_*.py"),
                                                               here / "test_splash_interpreter.py"])
    for name in BUILTINS:
        assert f"`{name}(" in doc, name
        assert f"{name}(" in source or f'"{name}"' in source, name


# --- operators ------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("2147483647 + 1", -2147483648), ("-2147483647 - 2", 2147483647), ("46341 * 46341", -2147479015),
    ("-(-2147483647 - 1)", -2147483648), ("9223372036854775807 + 1", Long(-2**63)),
    ("2147483647 + r.l", Long(2147483647 + 10_000_000_000)), ("-7 / 2", -3), ("7 / -2", -3),
    ("(-2147483647 - 1) / -1", -2147483648), ("-7 % 3", -1), ("7 % -3", 1), ("-7 % -3", -1),
    ("7 % 0", None), ("7 / 0", None), ("1.0 / 0.0", None), ("1.0 % 0", None), ("7.0 / 2", 3.5),
    ("1 + null", None), ("null * 2", None), ("'a' + 'b'", "ab"), ("'a' + null", None),
    ("-7.5 % 2", -1.5), ("1 + 2.5", 3.5), ("r.i * 2", 14),
])
def test_arithmetic(code, expected):
    assert same(ev(code), expected)


def test_decimal_arithmetic_follows_spark_types():
    a = make_dec(Decimal("1.5"), 2, 1)
    b = make_dec(Decimal("1.25"), 3, 2)
    interp = Interpreter(globals={"a": a, "b": b})

    def run(code: str) -> Dec:
        project, _ = parse_text(f"CREATE OUTPUT STREAM o PARTITION BY r {{ return {code}; }} "
                                "PARTITIONS 2 AS SELECT * FROM r;")
        return interp.evaluate(project.statements[0].partition.specs[0].body.stmts[0].value)
    for code, value, p, s in [("a + b", "2.75", 4, 2), ("a * b", "1.875", 6, 3),
                              ("a / b", "1.200000", 9, 6), ("a % b", "0.25", 3, 2), ("-a", "-1.5", 2, 1)]:
        r = run(code)
        assert r == Decimal(value) and (r.precision, r.scale) == (p, s), code
    assert run("a / 0") is None
    assert isinstance(run("a + 1.0"), float) and run("a + 1.0") == 2.5


def test_decimal_overflow_is_null():
    big = make_dec(Decimal(10) ** 37 * 9, 38, 0)
    interp = Interpreter(globals={"big": big})
    project, _ = parse_text("CREATE OUTPUT STREAM o PARTITION BY r { return big + big; } PARTITIONS 2 AS "
                            "SELECT * FROM r;")
    assert interp.evaluate(project.statements[0].partition.specs[0].body.stmts[0].value) is None


@pytest.mark.parametrize("code, expected", [
    ("1 = 1.0", True), ("'Z' < 'a'", True), ("'a' < 'b'", True), ("true > false", True), ("1 <> 2", True),
    ("1 != 1", False), ("null = null", None), ("1 < null", None), ("r.d < 0", True), ("r.m = 3.1", True),
    ("to_float('NaN') = to_float('NaN')", True), ("to_float('NaN') > 1e308", True), ("-0.0 = 0.0", True),
    ("9007199254740993 = 9007199254740992.0", True),
])
def test_comparisons(code, expected):
    assert same(ev(code), expected)


def test_comparing_unlike_types_is_an_error():
    with pytest.raises(SplashError, match="compare"):
        ev("'1' = 1")
    with pytest.raises(SplashError, match="cannot take"):
        ev("'a' + 1")


@pytest.mark.parametrize("code, expected", [
    ("null and false", False), ("null and true", None), ("null or true", True), ("null or false", None),
    ("not null", None), ("not 0", True), ("1 and 2", True), ("1 in (2, null)", None),
    ("1 in (1, null)", True), ("null in (1)", None), ("3 not in (1, 2)", True), ("1 not in (2, null)", None),
    ("case when r.i > 5 then 'big' else 'small' end", "big"), ("case r.n when 1 then 'one' end", None),
    ("case 2 when 1 then 'one' when 2 then 'two' end", "two"),
])
def test_logic_in_and_case(code, expected):
    assert same(ev(code), expected)


def test_and_or_short_circuit():
    assert ev("false and to_integer('x') = 1") is False
    assert ev("true or to_integer('x') = 1") is True
    with pytest.raises(SplashError):
        ev("null and to_integer('x') = 1")


def test_temporal_arithmetic():
    assert ev("r.t + 1000000") == dt.datetime(2020, 3, 4, 5, 6, 8, 500_000)
    assert same(ev("r.t - cast(timestamp, '2020-03-04')"), Interval(18_367_500_000))
    with pytest.raises(SplashError, match="out of range"):
        ev("r.t + 9223372036854775807")


# --- opcodes and event caches (the runtime of Flex operators: docs/runtime-flex.md) ----------------

def test_opcodes_and_event_cache_builtins():
    from ccl.splash.types import Type
    from ccl.splash.caches import EventCache
    cache = EventCache("c", "r", ["k"], [], [("k", Type("string")), ("v", Type("integer"))],
                       count=3, order=[("v", False)])
    for v in (5, 2, 9):
        cache.add("i", {"k": "a", "v": v}, 0)
    cache.add("i", {"k": "b", "v": 1}, 0)
    interp = Interpreter({"c": cache})
    interp.bind({"c": cache})
    # built-in names are case-insensitive: written in lower case here
    code = """keycache(c, [k = 'a';|]);
              integer n := cachesize(c);
              integer first := getcache(c, 0).v;
              deletecache(c, 0);
              insertcache(c, [k = 'a'; v = 4;]);
              typeof(r) x := insertintocache(c, [k = 'a'; v = 7;]);
              return n * 1000 + first * 100 + getcache(c, 0).v * 10 + getopcode(setopcode(x, upsert));"""
    project, diags = parse_text(f"CREATE OUTPUT STREAM o PARTITION BY r {{ {code} }} PARTITIONS 2 AS SELECT * FROM r;")
    assert not diags, diags
    body = project.statements[0].partition.specs[0].body
    # 3 records, smallest 2; then [5, 9] + 4 = [4, 5, 9]; insertintocache(7) evicts 4 -> [5, 7, 9]
    assert interp.run_block(body).value == 3 * 1000 + 200 + 50 + 7
    with pytest.raises(SplashError, match="opcode"):
        INTERP.evaluate(parse_text("create output stream o as select setopcode(r, 2) from r;")[0]
                        .statements[0].query.items[0].expr, {"r": {}})


# --- error-stream records (recordDataToString / recordDataToRecord) --------------------------------

ERROR_SCHEMAS = ('{"Orders": {"columns": [["Symbol", "string"], ["Id", "integer"], ["At", "date"], '
                 '["Price", "float"]], "key": ["Id"]}, "Log": {"columns": [["Msg", "string"]], "key": []}}')


def test_record_data_to_string_and_record_read_an_error_record_by_its_schema():
    record = b'{"At": "2024-01-02 03:04:06+00:00", "Id": 7, "Price": null, "Symbol": "IBM"}'
    ev_err = evaluator(Interpreter(source_types={"r": {"name": "string", "rec": "binary", "s": "string"}}),
                       {"name": "Orders", "rec": record, "s": ERROR_SCHEMAS})
    assert ev_err("recorddatatostring(r.name, r.rec, r.s)") == (
        "[ Id=7; | Symbol=IBM; At=2024-01-02 03:04:06; Price=; ]")
    rec = ev_err("recordDataToRecord(r.name, r.rec, r.s)")
    assert list(rec.items()) == [("Id", 7), ("Symbol", "IBM"), ("At", dt.datetime(2024, 1, 2, 3, 4, 6)),
                                 ("Price", None)]
    assert rec.key_fields == ("Id",) and str(rec.types["Price"]) == "float"
    assert ev_err("recorddatatostring('Log', r.rec, r.s)") == (
        '[ At=2024-01-02 03:04:06+00:00; Id=7; Price=; Symbol=IBM; ]')  # no column of Log: as stored
    assert ev_err("recorddatatostring('Log', r.rec, r.s)", rec=b'{"Msg": "x"}') == "[ Msg=x; ]"
    assert ev_err("recorddatatostring(r.name, r.rec)", rec=b'{"line": "a,b"}') == "[ line=a,b; ]"
    assert ev_err("recorddatatostring(r.name, r.rec)", rec=None) is None
    with pytest.raises(SplashError, match="not a record this runtime wrote"):
        ev_err("recorddatatostring(r.name, r.rec)", rec=b"\xff")
    with pytest.raises(SplashError, match="must be binary"):
        ev_err("recorddatatorecord(r.name, 5)")
