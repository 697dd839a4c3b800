"""SPLASH date/time and conversion built-ins of ccl/splash/builtins_time.py, called through the
interpreter: normal values, nulls, wrong types, calendar edge cases and precision."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from ccl.splash import BUILTINS, Dec, Interpreter, Interval, Long, SplashError
from tests.splash_eval import evaluator, same

ROW_TYPES = {"t": "timestamp", "b": "bigdatetime", "i": "integer", "s": "string", "f": "float",
             "n": "timestamp"}
T = dt.datetime(2020, 3, 4, 5, 6, 7, 500_000)       # a Wednesday
B = dt.datetime(2021, 12, 31, 23, 59, 59, 123_456)  # a Friday
ROW = {"t": T, "b": B, "i": 7, "s": "hello", "f": 2.5, "n": None}
NOW = dt.datetime(2021, 5, 6, 7, 8, 9, 123_456)
INTERP = Interpreter(source_types={"r": ROW_TYPES}, clock=lambda: NOW)


ev = evaluator(INTERP, ROW)  # ev(code, **row): r.x reads ROW updated with row


def ts(text: str) -> str:
    """A SPLASH expression for the timestamp ``text``."""
    return f"to_bigdatetime('{text}')"


NAMES = ("dateadd datediff datepart datefloor dateceiling dayofweek dayofyear weekofyear microsecond "
         "millisecond getdate sysdate systimestamp sysbigdatetime sysseconddate to_timestamp to_date "
         "to_bigdatetime to_interval to_money trunc").split()


@pytest.mark.parametrize("name", NAMES)
def test_registered(name):
    assert name in BUILTINS


# --- dateadd --------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("dateadd('dd', 1, r.t)", dt.datetime(2020, 3, 5, 5, 6, 7, 500_000)),
    ("dateadd('DAY', -4, r.t)", dt.datetime(2020, 2, 29, 5, 6, 7, 500_000)),
    ("dateadd('hh', 19, r.t)", dt.datetime(2020, 3, 5, 0, 6, 7, 500_000)),
    ("dateadd('mi', -7, r.t)", dt.datetime(2020, 3, 4, 4, 59, 7, 500_000)),
    ("dateadd('ss', 60, r.t)", dt.datetime(2020, 3, 4, 5, 7, 7, 500_000)),
    ("dateadd('ms', 500, r.t)", dt.datetime(2020, 3, 4, 5, 6, 8)),
    ("dateadd('us', 1, r.t)", dt.datetime(2020, 3, 4, 5, 6, 7, 500_001)),
    ("dateadd('wk', 2, r.t)", dt.datetime(2020, 3, 18, 5, 6, 7, 500_000)),
    ("dateadd('qq', 1, r.t)", dt.datetime(2020, 6, 4, 5, 6, 7, 500_000)),
    ("dateadd('yy', -20, r.t)", dt.datetime(2000, 3, 4, 5, 6, 7, 500_000)),
    ("dateadd(' Month ', -13, r.t)", dt.datetime(2019, 2, 4, 5, 6, 7, 500_000)),
    # month ends and leap years: the day is cut to the last day of a shorter month
    (f"dateadd('mm', 1, {ts('2020-01-31')})", dt.datetime(2020, 2, 29)),
    (f"dateadd('mm', 1, {ts('2021-01-31')})", dt.datetime(2021, 2, 28)),
    (f"dateadd('mm', 3, {ts('2021-01-31')})", dt.datetime(2021, 4, 30)),
    (f"dateadd('mm', -1, {ts('2021-03-31 12:00')})", dt.datetime(2021, 2, 28, 12)),
    (f"dateadd('yy', 1, {ts('2020-02-29')})", dt.datetime(2021, 2, 28)),
    (f"dateadd('yy', 4, {ts('2020-02-29')})", dt.datetime(2024, 2, 29)),
    (f"dateadd('dd', 1, {ts('2020-02-28')})", dt.datetime(2020, 2, 29)),
    (f"dateadd('dd', 1, {ts('2021-02-28')})", dt.datetime(2021, 3, 1)),
    (f"dateadd('mm', 12, {ts('2020-12-15')})", dt.datetime(2021, 12, 15)),
    ("dateadd('dd', null, r.t)", None), ("dateadd(null, 1, r.t)", None), ("dateadd('dd', 1, r.n)", None),
])
def test_dateadd(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("dateadd('xx', 1, r.t)", "'xx' is not a date part"),
    ("dateadd(3, 1, r.t)", "argument 1 must be a date part string"),
    ("dateadd('dd', 1.5, r.t)", "argument 2 must be an integer, not a float"),
    ("dateadd('dd', 1, 'x')", "needs a date-time, not a string"),
    ("dateadd('yy', 8000, r.t)", "out of range"),
    ("dateadd('wk', 2147483647, r.t)", "out of range"),
    (f"dateadd('dd', -1, {ts('0001-01-01')})", "out of range"),
])
def test_dateadd_errors(code, message):
    with pytest.raises(SplashError, match=message):
        ev(code)


# --- datediff -------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    # boundaries crossed, not whole units elapsed
    (f"datediff('ss', {ts('2020-01-01 12:00:00.900')}, {ts('2020-01-01 12:00:01.100')})", 1),
    (f"datediff('ss', {ts('2020-01-01 12:00:00.100')}, {ts('2020-01-01 12:00:00.900')})", 0),
    (f"datediff('ms', {ts('2020-01-01 12:00:00.100')}, {ts('2020-01-01 12:00:00.900')})", 800),
    (f"datediff('us', {ts('2020-01-01')}, {ts('2020-01-01 00:00:01')})", 1_000_000),
    (f"datediff('dd', {ts('2020-01-01 23:59')}, {ts('2020-01-02 00:01')})", 1),
    (f"datediff('dd', {ts('2020-02-01')}, {ts('2020-03-01')})", 29),
    (f"datediff('hh', {ts('2020-01-01 10:59')}, {ts('2020-01-01 12:00')})", 2),
    (f"datediff('mi', {ts('2020-01-01 10:00:59')}, {ts('2020-01-01 10:01:00')})", 1),
    (f"datediff('wk', {ts('2020-03-07')}, {ts('2020-03-08')})", 1),   # Saturday -> Sunday
    (f"datediff('wk', {ts('2020-03-08')}, {ts('2020-03-14')})", 0),   # Sunday -> Saturday
    (f"datediff('mm', {ts('2020-12-31')}, {ts('2021-01-01')})", 1),
    (f"datediff('qq', {ts('2020-03-31')}, {ts('2020-04-01')})", 1),
    (f"datediff('yy', {ts('2020-12-31 23:59:59')}, {ts('2021-01-01')})", 1),
    (f"datediff('year', {ts('2020-01-01')}, {ts('2020-12-31')})", 0),
    # negative differences: end before start
    (f"datediff('dd', r.t, {ts('2020-03-01')})", -3),
    (f"datediff('mm', {ts('2021-01-01')}, {ts('2020-12-31')})", -1),
    (f"datediff('ss', {ts('2020-01-01 12:00:01.100')}, {ts('2020-01-01 12:00:00.900')})", -1),
    (f"datediff('wk', {ts('2020-03-08')}, {ts('2020-03-07')})", -1),
    (f"datediff('us', {ts('0001-01-01')}, {ts('9999-12-31')})", 315_537_811_200_000_000),
])
def test_datediff(code, expected):
    assert same(ev(code), Long(expected))


def test_datediff_nulls_and_errors():
    assert ev("datediff('dd', r.n, r.t)") is None
    assert ev("datediff(null, r.t, r.t)") is None
    with pytest.raises(SplashError, match="needs a date-time, not an integer"):
        ev("datediff('dd', r.i, r.t)")
    with pytest.raises(SplashError, match="'fortnight' is not a date part"):
        ev("datediff('fortnight', r.t, r.t)")


# --- datepart, calendar parts ---------------------------------------------------------------------

@pytest.mark.parametrize("part, expected", [
    ("yy", 2020), ("year", 2020), ("qq", 1), ("mm", 3), ("wk", 10), ("dd", 4), ("dy", 64),
    ("dw", 4), ("hh", 5), ("mi", 6), ("ss", 7), ("ms", 500), ("us", 500_000), ("MS", 500),
])
def test_datepart(part, expected):
    assert same(ev(f"datepart('{part}', r.t)"), expected)


@pytest.mark.parametrize("day, week", [
    ("2020-01-01", 1), ("2020-01-04", 1), ("2020-01-05", 2),   # 2020-01-05 is a Sunday
    ("2021-01-01", 1), ("2021-01-02", 1), ("2021-01-03", 2), ("2020-12-31", 53),
])
def test_datepart_week_starts_on_sunday(day, week):
    assert ev(f"datepart('wk', {ts(day)})") == week


def test_datepart_nulls_and_errors():
    assert ev("datepart('dd', r.n)") is None
    assert ev("datepart(null, r.t)") is None
    with pytest.raises(SplashError, match="'xx' is not a date part"):
        ev("datepart('xx', r.t)")
    with pytest.raises(SplashError, match="needs a date-time, not a string"):
        ev("datepart('dd', r.s)")


@pytest.mark.parametrize("code, expected", [
    ("dayofweek(r.t)", 4), ("dayofweek(r.b)", 6), (f"dayofweek({ts('2020-03-08')})", 1),
    (f"dayofweek({ts('2020-03-07')})", 7),
    ("dayofyear(r.t)", 64), (f"dayofyear({ts('2020-12-31')})", 366), (f"dayofyear({ts('2021-12-31')})", 365),
    # ISO 8601 weeks: 2021-01-01 (a Friday) belongs to week 53 of 2020
    ("weekofyear(r.t)", 10), (f"weekofyear({ts('2021-01-01')})", 53), (f"weekofyear({ts('2021-01-04')})", 1),
    ("millisecond(r.t)", 500), ("millisecond(r.b)", 123), ("microsecond(r.b)", 123_456),
    ("microsecond(r.t)", 500_000),
    # in a time zone: 23:59 UTC on a Friday is Saturday in Tokyo
    ("dayofweek(r.b, 'Asia/Tokyo')", 7), ("dayofyear(r.b, 'Asia/Tokyo')", 1),
    ("dayofweek(r.b, 'UTC')", 6), ("weekofyear(r.b, 'America/New_York')", 52),
    ("dayofweek(r.n)", None), ("dayofyear(r.n)", None), ("weekofyear(r.n)", None),
    ("millisecond(r.n)", None), ("microsecond(r.n)", None), ("dayofweek(r.t, null)", None),
])
def test_calendar_parts(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("fn", ["dayofweek", "dayofyear", "weekofyear", "millisecond", "microsecond"])
def test_calendar_parts_errors(fn):
    with pytest.raises(SplashError, match=f"{fn}\\(\\) needs a date-time, not a string"):
        ev(f"{fn}('2020-01-01')")
    with pytest.raises(SplashError, match="unknown time zone 'Mars/Base'"):
        ev(f"{fn}(r.t, 'Mars/Base')")
    with pytest.raises(SplashError, match="argument 2 must be a string"):
        ev(f"{fn}(r.t, 1)")


def test_time_zone_out_of_range():
    with pytest.raises(SplashError, match="out of range"):
        ev(f"dayofweek({ts('9999-12-31 23:00')}, 'Asia/Tokyo')")


# --- datefloor, dateceiling -----------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    # ESP's documented example (R5)
    ("datefloor('MINUTE', to_timestamp('2010-05-04T12:00:01.123', 'YYYY-MM-DDTHH24:MI:SS.FF'))",
     dt.datetime(2010, 5, 4, 12, 0)),
    ("dateceiling('MINUTE', to_timestamp('2010-05-04T12:00:01.123', 'YYYY-MM-DDTHH24:MI:SS.FF'))",
     dt.datetime(2010, 5, 4, 12, 1)),
    ("datefloor('yy', r.t)", dt.datetime(2020, 1, 1)), ("dateceiling('yy', r.t)", dt.datetime(2021, 1, 1)),
    ("datefloor('qq', r.t)", dt.datetime(2020, 1, 1)), ("dateceiling('qq', r.t)", dt.datetime(2020, 4, 1)),
    ("datefloor('mm', r.t)", dt.datetime(2020, 3, 1)), ("dateceiling('mm', r.t)", dt.datetime(2020, 4, 1)),
    ("datefloor('wk', r.t)", dt.datetime(2020, 3, 1)), ("dateceiling('wk', r.t)", dt.datetime(2020, 3, 8)),
    ("datefloor('dd', r.t)", dt.datetime(2020, 3, 4)), ("dateceiling('dd', r.t)", dt.datetime(2020, 3, 5)),
    ("datefloor('hh', r.t)", dt.datetime(2020, 3, 4, 5)), ("dateceiling('hh', r.t)", dt.datetime(2020, 3, 4, 6)),
    ("datefloor('ss', r.t)", dt.datetime(2020, 3, 4, 5, 6, 7)),
    ("dateceiling('ss', r.t)", dt.datetime(2020, 3, 4, 5, 6, 8)),
    ("datefloor('ms', r.b)", dt.datetime(2021, 12, 31, 23, 59, 59, 123_000)),
    ("dateceiling('ms', r.b)", dt.datetime(2021, 12, 31, 23, 59, 59, 124_000)),
    # multiples
    ("datefloor('mi', r.t, 10)", dt.datetime(2020, 3, 4, 5, 0)),
    ("dateceiling('mi', r.t, 10)", dt.datetime(2020, 3, 4, 5, 10)),
    ("datefloor('hh', r.t, 6)", dt.datetime(2020, 3, 4, 0)),
    ("dateceiling('hh', r.t, 24)", dt.datetime(2020, 3, 5)),
    ("datefloor('ms', r.t, 250)", dt.datetime(2020, 3, 4, 5, 6, 7, 500_000)),
    ("datefloor('mm', r.t, 6)", dt.datetime(2020, 1, 1)), ("dateceiling('mm', r.t, 6)", dt.datetime(2020, 7, 1)),
    ("datefloor('yy', r.t, 10)", dt.datetime(2020, 1, 1)), ("dateceiling('yy', r.b, 10)", dt.datetime(2030, 1, 1)),
    ("datefloor('dd', r.t, 2)", dt.datetime(2020, 3, 3)),   # 2-day buckets counted from 1970-01-01
    ("datefloor('mi', r.t, null)", dt.datetime(2020, 3, 4, 5, 6)),   # a null multiple is 1
    # a value on a boundary is its own ceiling
    (f"dateceiling('dd', {ts('2020-03-04')})", dt.datetime(2020, 3, 4)),
    (f"dateceiling('mm', {ts('2020-04-01')}, 3)", dt.datetime(2020, 4, 1)),
    (f"dateceiling('mm', {ts('2020-03-01')}, 3)", dt.datetime(2020, 4, 1)),
    (f"datefloor('mi', {ts('2020-03-04 05:10')}, 10)", dt.datetime(2020, 3, 4, 5, 10)),
    # leap day
    (f"dateceiling('dd', {ts('2020-02-28 00:00:01')})", dt.datetime(2020, 2, 29)),
    (f"dateceiling('mm', {ts('2020-02-29 01:00')})", dt.datetime(2020, 3, 1)),
])
def test_datefloor_dateceiling(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("datefloor('mi', r.n)", "must not be null"),        # ESP: a null required argument is an error
    ("dateceiling(null, r.t)", "must not be null"),
    ("datefloor('mi', r.t, 7)", "multiple of 'mi' must be 1, 2, 3, 4, 5, 6, 10"),
    ("datefloor('hh', r.t, 5)", "multiple of 'hh'"),
    ("dateceiling('ms', r.t, 3)", "multiple of 'ms'"),
    ("datefloor('dd', r.t, 0)", "must be a positive integer, not 0"),
    ("datefloor('yy', r.t, -1)", "must be a positive integer"),
    ("datefloor('mi', r.t, 2.0)", "multiple of 'mi'"),
    ("datefloor('us', r.t)", "'us' is not a date part"),
    ("datefloor('dw', r.t)", "'dw' is not a date part"),
    ("datefloor('mi', 'x')", "needs a date-time, not a string"),
    ("datefloor(5, r.t)", "must be a date part string"),
    (f"datefloor('wk', {ts('0001-01-02')})", "out of range"),
    (f"dateceiling('yy', {ts('9999-06-01')})", "out of range"),
])
def test_datefloor_dateceiling_errors(code, message):
    with pytest.raises(SplashError, match=message):
        ev(code)


# --- clocks ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("getdate()", dt.datetime(2021, 5, 6, 7, 8, 9, 123_000)),
    ("systimestamp()", dt.datetime(2021, 5, 6, 7, 8, 9, 123_000)),
    ("sysdate()", dt.datetime(2021, 5, 6, 7, 8, 9)),
    ("sysseconddate()", dt.datetime(2021, 5, 6, 7, 8, 9)),
    ("sysbigdatetime()", dt.datetime(2021, 5, 6, 7, 8, 9, 123_456)),
])
def test_clocks_cut_to_their_type(code, expected):
    assert same(ev(code), expected)


def test_clock_is_read_once_per_call():
    calls = []

    def clock() -> dt.datetime:
        calls.append(1)
        return NOW
    clocked = evaluator(Interpreter(clock=clock), {})
    assert clocked("getdate() = systimestamp() and sysdate() = sysseconddate()") is True
    assert len(calls) == 1


def test_clock_without_a_fixed_clock_is_utc_now():
    value = evaluator(Interpreter(), {})("sysbigdatetime()")
    assert abs(value - dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)) < dt.timedelta(minutes=1)


def test_clocks_take_no_arguments():
    with pytest.raises(SplashError, match="takes 0 argument"):
        ev("getdate(1)")


# --- to_timestamp, to_date, to_bigdatetime --------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("to_timestamp('2020-01-02 03:04:05.678912')", dt.datetime(2020, 1, 2, 3, 4, 5, 678_000)),
    ("to_date('2020-01-02T03:04:05.678')", dt.datetime(2020, 1, 2, 3, 4, 5)),
    ("to_bigdatetime('2020-01-02 03:04:05.678912')", dt.datetime(2020, 1, 2, 3, 4, 5, 678_912)),
    ("to_timestamp('2020-01-02')", dt.datetime(2020, 1, 2)),
    # from a date-time: cut to the type's precision
    ("to_timestamp(r.b)", dt.datetime(2021, 12, 31, 23, 59, 59, 123_000)),
    ("to_date(r.b)", dt.datetime(2021, 12, 31, 23, 59, 59)),
    ("to_bigdatetime(r.b)", B),
    # from a number: seconds (date), milliseconds (timestamp), microseconds (bigdatetime) since 1970
    ("to_date(86400)", dt.datetime(1970, 1, 2)),
    ("to_timestamp(to_long(1500))", dt.datetime(1970, 1, 1, 0, 0, 1, 500_000)),
    ("to_bigdatetime(-1)", dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)),
    # with a format
    ("to_timestamp('2010-05-04T12:00:01.123', 'YYYY-MM-DDTHH24:MI:SS.FF')", dt.datetime(2010, 5, 4, 12, 0, 1, 123_000)),
    ("to_bigdatetime('2010-05-04T12:00:01.123456789', 'YYYY-MM-DD\"T\"HH24:MI:SS.FF9')",
     dt.datetime(2010, 5, 4, 12, 0, 1, 123_456)),
    ("to_date('04/05/2010 23:59:59.999', 'DD/MM/YYYY HH24:MI:SS.FF3')", dt.datetime(2010, 5, 4, 23, 59, 59)),
    ("to_timestamp('05/03/2021 1:02 PM', 'DD/MM/YYYY HH:MI AM')", dt.datetime(2021, 3, 5, 13, 2)),
    ("to_timestamp('12:30 am', 'HH12:MI PM')", dt.datetime(1970, 1, 1, 0, 30)),
    ("to_timestamp('3 mar 2021', 'DD MON YYYY')", dt.datetime(2021, 3, 3)),
    ("to_timestamp('March 5, 2020', 'MONTH DD, YYYY')", dt.datetime(2020, 3, 5)),
    ("to_timestamp('20-01-01', 'YY-MM-DD')", dt.datetime(2020, 1, 1)),
    ("to_timestamp('2020-02-29', 'yyyy-mm-dd')", dt.datetime(2020, 2, 29)),
    ("to_timestamp('14:15', 'HH24:MI')", dt.datetime(1970, 1, 1, 14, 15)),
    # with a time zone: the text is wall-clock time there
    ("to_timestamp('2021-03-03 10:00', 'YYYY-MM-DD HH24:MI', 'America/New_York')", dt.datetime(2021, 3, 3, 15)),
    ("to_timestamp('2021-07-03 10:00', 'YYYY-MM-DD HH24:MI', 'America/New_York')", dt.datetime(2021, 7, 3, 14)),
    ("to_date('2021-01-01 00:30', 'YYYY-MM-DD HH24:MI', 'Europe/Paris')", dt.datetime(2020, 12, 31, 23, 30)),
    # nulls
    ("to_timestamp(r.n)", None), ("to_date(null)", None), ("to_timestamp('2020-01-01', null)", None),
    ("to_timestamp('2020-01-01', 'YYYY-MM-DD', null)", None),
])
def test_to_temporal(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("to_timestamp('2020-13-01')", "cannot convert '2020-13-01' to timestamp"),
    ("to_timestamp('2021-02-29', 'YYYY-MM-DD')", "cannot convert '2021-02-29' to timestamp with format"),
    ("to_date('13/40/2020', 'MM/DD/YYYY')", "to date with format 'MM/DD/YYYY'"),
    ("to_timestamp('2020-01-01 x', 'YYYY-MM-DD')", "with format"),
    ("to_timestamp('2020/01/01', 'YYYY-MM-DD')", "with format"),
    ("to_timestamp('13:00 PM', 'HH:MI PM')", "with format"),
    ("to_timestamp('Foo 2020', 'MON YYYY')", "with format"),
    ("to_timestamp('2020', 1)", "argument 2 must be a string"),
    ("to_timestamp('2020', 'YYYY', 'Nowhere/City')", "unknown time zone 'Nowhere/City'"),
    ("to_timestamp(r.t, 'YYYY')", "apply only to a string, not to a timestamp"),
    ("to_timestamp(2.5)", "cannot convert a float to timestamp"),
    ("to_date(true)", "cannot convert a boolean to date"),
    ("to_bigdatetime(to_interval(5))", "cannot convert an interval to bigdatetime"),
    ("to_timestamp(9223372036854775807)", "out of range"),
    ("to_timestamp('0001-01-01 00:00', 'YYYY-MM-DD HH24:MI', 'Asia/Tokyo')", "out of range"),
])
def test_to_temporal_errors(code, message):
    with pytest.raises(SplashError, match=message):
        ev(code)


# --- to_interval, to_money ------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("to_interval(5)", Interval(5)), ("to_interval(to_long(10000000000))", Interval(10_000_000_000)),
    ("to_interval(2.9)", Interval(2)), ("to_interval('12')", Interval(12)),
    ("to_interval('1 HOUR 30 MINUTES')", Interval(5_400_000_000)),
    ("to_interval('2 days')", Interval(172_800_000_000)), ("to_interval('1 second')", Interval(1_000_000)),
    ("to_interval('-3 MILLISECONDS')", Interval(-3000)), ("to_interval('7 microsecond')", Interval(7)),
    ("to_interval(r.n)", None),
])
def test_to_interval(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, message", [
    ("to_interval('3 weeks')", "cannot convert '3 weeks' to interval"),
    ("to_interval('1 HOUR and')", "cannot convert"),
    ("to_interval('abc')", "cannot convert"),
    ("to_interval('9223372036854775807 DAYS')", "out of range"),
    ("to_interval(r.t)", "cannot convert a timestamp to interval"),
])
def test_to_interval_errors(code, message):
    with pytest.raises(SplashError, match=message):
        ev(code)


@pytest.mark.parametrize("code, value, scale", [
    ("to_money(3)", "3.0000", 4), ("to_money('1.23456')", "1.2346", 4), ("to_money(1.005, 2)", "1.01", 2),
    ("to_money(-2.5, 1)", "-2.5", 1), ("to_money(to_decimal('12.345', 5, 3), 2)", "12.35", 2),
    ("to_money(to_long(12345678901234), 4)", "12345678901234.0000", 4),
])
def test_to_money(code, value, scale):
    result = ev(code)
    assert isinstance(result, Dec) and result == Decimal(value)
    assert (result.precision, result.scale) == (18, scale) and str(result) == value


def test_to_money_nulls_overflow_and_errors():
    assert ev("to_money(r.n)") is None
    assert ev("to_money(1, null)") is None
    assert ev("to_money(1e20)") is None             # does not fit decimal(18, 4): null, as to_decimal
    assert ev("to_money(to_long(123456789012345))") is None
    with pytest.raises(SplashError, match="scale of money must be 1 to 15, not 16"):
        ev("to_money(1, 16)")
    with pytest.raises(SplashError, match="not 0"):
        ev("to_money(1, 0)")
    with pytest.raises(SplashError, match="cannot convert a timestamp to money"):
        ev("to_money(r.t)")
    with pytest.raises(SplashError, match="cannot convert 'abc' to decimal"):
        ev("to_money('abc')")


# --- trunc ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, expected", [
    ("trunc(2.7)", 2.0), ("trunc(-2.7)", -2.0), ("trunc(-0.5)", 0.0), ("trunc(2.79, 1)", 2.7),
    ("trunc(1.5e300, -300)", 1e300), ("trunc(1.5, -2147483648)", 0.0), ("trunc(1.5, 2147483647)", 1.5),
    ("trunc(to_float('NaN'))", math.nan), ("trunc(to_float('-Infinity'))", -math.inf),
    ("trunc(1299, -2)", 1200), ("trunc(-1299, -2)", -1200), ("trunc(12, 3)", 12),
    ("trunc(15, -2147483648)", 0), ("trunc(to_long(-1299), -2)", Long(-1200)),
    ("trunc(to_interval(1234567), -3)", Interval(1_234_000)),
    ("trunc(r.n)", None), ("trunc(1.5, null)", None),
])
def test_trunc(code, expected):
    assert same(ev(code), expected)


@pytest.mark.parametrize("code, value, precision, scale", [
    ("trunc(to_decimal('12.345', 5, 3), 1)", "12.300", 5, 3),
    ("trunc(to_decimal('-12.345', 5, 3))", "-12.000", 5, 3),
    ("trunc(to_decimal('-12.345', 5, 3), -1)", "-10.000", 5, 3),
    ("trunc(to_decimal('12.345', 5, 3), 5)", "12.345", 5, 3),
    ("trunc(to_decimal('12.345', 5, 3), -2147483648)", "0.000", 5, 3),
])
def test_trunc_decimal_keeps_its_type(code, value, precision, scale):
    result = ev(code)
    assert isinstance(result, Dec) and str(result) == value
    assert (result.precision, result.scale) == (precision, scale)


def test_trunc_errors():
    with pytest.raises(SplashError, match="trunc\\(\\) needs a number, not a string"):
        ev("trunc('x')")
    with pytest.raises(SplashError, match="trunc\\(\\) needs a number, not a timestamp"):
        ev("trunc(r.t)")
    with pytest.raises(SplashError, match="argument 2 must be an integer, not a float"):
        ev("trunc(1.5, 1.5)")


@pytest.mark.parametrize("code, expected", [
    ("to_string(r.t, 'YYYY-MM-DD')", "2020-03-04"),
    ("to_string(r.t, 'YYYY-MM-DDTHH24:MI:SS.FF')", "2020-03-04T05:06:07.500"),
    ("to_string(r.b, 'YY/MM/DD HH24:MI:SS.FF')", "21/12/31 23:59:59.123456"),
    ("to_string(r.b, 'HH:MI PM, DD MON YYYY (MONTH)')", "11:59 PM, 31 DEC 2021 (DECEMBER )"),
    ("to_string(r.t, 'SS.FF2 \"at\" HH12 A.M.')", "07.50 at 05 A.M."),
    ("to_string(r.t, 'YYYY-MM-DD HH24:MI', 'America/New_York')", "2020-03-04 00:06"),
    ("to_string(r.t, 'DD', 'Asia/Tokyo')", "04"),
    # ESP's other date/time format codes (2020-03-04 was a Wednesday, day 64, week 10, quarter 1)
    ("to_string(r.t, 'DY Dy DAY DDD Q D W WW RM SSSSS YYY Y')",
     "WED Wed WEDNESDAY 064 1 4 1 10 III 18367 020 0"),
    ("to_string(r.t, 'Month|month|Mon')", "March    |march    |Mar"),
    ("to_string(r.i, '%05d')", "00007"),
    ("to_string(r.i, 'id-%d!')", "id-7!"),
    ("to_string(to_long(255), '%llx')", "ff"),
    ("to_string(r.n, 'YYYY')", None),
    ("hour(r.t, 'America/New_York')", 0),
    ("dayofmonth(r.t, 'America/New_York')", 4),
    ("minute(r.t, 'Asia/Kolkata')", 36),
    ("year(r.b, 'Asia/Tokyo')", 2022),
])
def test_to_string_formats_and_time_parts_in_a_time_zone(code, expected):
    """ESP's to_string(value, format[, time zone]) (R7) and the calendar parts in a time zone."""
    assert ev(code) == expected


@pytest.mark.parametrize("code", ["to_string(r.f, '%05d')", "to_string(r.i, '%s')",
                                  "to_string(r.i, '%d %d')", "hour(r.t, 'Mars/Base')"])
def test_to_string_formats_it_cannot_apply_are_errors(code):
    with pytest.raises(SplashError):
        ev(code)


# --- a date-time with a number in * / % and comparisons (issue 28; docs/language.md "Dates as numbers")

def _typed(code: str, columns: str) -> tuple[str, object]:
    """The analysed type of ``code`` over ``r(columns)`` and the tree's marked Binary node."""
    from ccl.analysis import analyze
    from ccl.syntax.project import load_text
    project = load_text(f"CREATE INPUT STREAM r SCHEMA ({columns});\n"
                        f"CREATE OUTPUT STREAM o AS SELECT {code} x FROM r;")
    analysis = analyze(project, {})
    errors = [d.code for d in analysis.diagnostics if d.severity == "error"]
    return (errors[0] if errors else str(analysis.elements["o"].columns["x"]),
            project.statements[1].query.items[0].expr)


@pytest.mark.parametrize("code, want", [
    ("(r.d / 3600) * 3600", "date"), ("r.d % 60", "date"), ("2 * r.t", "timestamp"),
    ("r.b / 1000000", "bigdatetime"), ("r.d > 3600", "boolean"), ("3600 = r.b", "boolean"),
    ("r.d + 60", "date"), ("r.d - r.d", "interval"), ("r.b - 5", "bigdatetime"),
    ("r.d + r.i", "date"), ("r.b - r.i", "bigdatetime"), ("r.b - r.b", "interval"),
    ("r.d * r.i", "CCL2101"), ("r.b > r.i", "CCL2101"),
    ("3600 / r.d", "CCL2101"), ("r.d / 2.5", "CCL2101"), ("r.d * r.d", "CCL2101")])
def test_a_date_time_with_a_number_is_typed(code, want):
    assert _typed(code, "d date, t timestamp, b bigdatetime, i interval")[0] == want


def test_a_date_counts_seconds_a_timestamp_milliseconds_a_bigdatetime_microseconds():
    ts_row = dt.datetime(2023, 11, 14, 22, 13, 20, 123_456)
    for temporal, divisor, want in [("date", 3600, dt.datetime(2023, 11, 14, 22)),
                                    ("timestamp", 1000, dt.datetime(2023, 11, 14, 22, 13, 20)),
                                    ("bigdatetime", 1000, dt.datetime(2023, 11, 14, 22, 13, 20, 123_000))]:
        interp = Interpreter(source_types={"r": {"t": temporal}})
        _, node = _typed(f"(r.t / {divisor}) * {divisor}", f"t {temporal}")
        assert node.temporal == node.left.temporal == temporal
        assert interp.evaluate(node, {"r": {"t": ts_row}}) == want
    interp = Interpreter(source_types={"r": {"t": "date"}})
    _, node = _typed("r.t < 1700000001", "t date")
    assert interp.evaluate(node, {"r": {"t": dt.datetime(2023, 11, 14, 22, 13, 20)}}) is True
    assert interp.evaluate(node, {"r": {"t": dt.datetime(2023, 11, 14, 22, 13, 21)}}) is False
    _, node = _typed("r.t % 0", "t date")
    assert interp.evaluate(node, {"r": {"t": ts_row}}) is None
