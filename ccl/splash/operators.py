"""SPLASH operators with Spark's non-ANSI semantics: arithmetic, comparison, logic, LIKE and IN.

Null in, null out (except AND/OR, which follow SQL's three-valued logic). Integers wrap like Java;
``/`` of two integers truncates toward zero; ``%`` takes the sign of the dividend; ``/`` and ``%``
by zero give null, for every numeric type. Decimals follow Spark's result-type rules.
"""
from __future__ import annotations

import datetime as dt
import functools
import math
import operator
import re
from decimal import Decimal
from typing import Callable, Optional

from .values import (EXACT, MAX_STRING, Dec, Interval, Long, SplashError, a_kind, as_dec,
                     dec_to_float, is_integral, is_number, kind, make_dec, wrap32, wrap64)


def _type_error(op: str, a: object, b: object) -> SplashError:
    return SplashError(f"operator {op} cannot take {a_kind(a)} and {a_kind(b)}")


# --------------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------------

def arithmetic(op: str, a: object, b: object) -> object:
    """``a op b`` for op in ``+ - * / % ^``."""
    if a is None or b is None:
        return None
    if op == "^":
        return power(a, b)
    ta, tb = type(a), type(b)
    if (ta is float or ta is int) and (tb is float or tb is int):  # plain numbers (no bool)
        if ta is int and tb is int:
            return _integral_op(op, a, b)  # type: ignore[arg-type]
        return _float_op(op, float(a), float(b))  # type: ignore[arg-type]
    if is_number(a) and is_number(b):
        if isinstance(a, float) or isinstance(b, float):
            return _float_op(op, to_float(a), to_float(b))
        if isinstance(a, Decimal) or isinstance(b, Decimal):
            if isinstance(a, Interval) or isinstance(b, Interval):
                raise _type_error(op, a, b)
            return decimal_op(op, as_dec(a), as_dec(b))  # type: ignore[arg-type]
        return _integral_op(op, a, b)  # type: ignore[arg-type]
    if isinstance(a, str) and isinstance(b, str) and op == "+":
        if len(a) + len(b) > MAX_STRING:
            raise SplashError(f"string longer than {MAX_STRING} characters")
        return a + b
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return _temporal_op(op, a, b)
    raise _type_error(op, a, b)


def to_float(v: object) -> float:
    """A number as a float (decimals the way Spark converts them)."""
    if isinstance(v, Decimal):
        return dec_to_float(v)
    return float(v)  # type: ignore[arg-type]


def _float_op(op: str, a: float, b: float) -> Optional[float]:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if op == "/":
        return a / b
    try:
        return math.fmod(a, b)
    except ValueError:  # fmod(inf, y): Java gives NaN
        return math.nan


def _integral_op(op: str, a: int, b: int) -> Optional[int]:
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif b == 0:
        return None
    elif op == "/":
        q = abs(a) // abs(b)
        r = q if (a < 0) == (b < 0) else -q
    else:
        r = abs(a) % abs(b)
        r = -r if a < 0 else r
    if isinstance(a, Interval) or isinstance(b, Interval):
        return Interval(wrap64(r))
    if isinstance(a, Long) or isinstance(b, Long):
        return wrap64(r)
    return wrap32(r)


def _adjust(p: int, s: int) -> tuple[int, int]:
    """Spark's DecimalType.adjustPrecisionScale (precision loss allowed)."""
    if p <= 38:
        return p, s
    return 38, max(38 - (p - s), min(s, 6))


def decimal_result_type(op: str, p1: int, s1: int, p2: int, s2: int) -> tuple[int, int]:
    """(precision, scale) of ``decimal(p1,s1) op decimal(p2,s2)`` by Spark's rules."""
    if op in ("+", "-"):
        s = max(s1, s2)
        return _adjust(max(p1 - s1, p2 - s2) + s + 1, s)
    if op == "*":
        return _adjust(p1 + p2 + 1, s1 + s2)
    if op == "/":
        s = max(6, s1 + p2 + 1)
        return _adjust(p1 - s1 + s2 + s, s)
    s = max(s1, s2)
    return _adjust(min(p1 - s1, p2 - s2) + s, s)


def decimal_op(op: str, a: Dec, b: Dec) -> Optional[Dec]:
    """``a op b`` on decimals: Spark's result type, the exact result rounded half-up once to its
    scale, null on overflow or on a division by zero."""
    p, s = decimal_result_type(op, a.precision, a.scale, b.precision, b.scale)
    if op == "+":
        r = EXACT.add(a, b)
    elif op == "-":
        r = EXACT.subtract(a, b)
    elif op == "*":
        r = EXACT.multiply(a, b)
    elif b.is_zero():
        return None
    elif op == "/":
        return make_dec(_divide(a, b, s), p, s)
    else:
        quotient = str(abs(int(EXACT.divide_int(a, b)))).rstrip("0")
        if len(quotient) > 38:  # Java's BigDecimal.remainder(b, MathContext(38)) throws
            raise SplashError("decimal remainder impossible: the quotient has more than 38 digits")
        r = EXACT.remainder(a, b)
    return make_dec(r, p, s)


def _divide(a: Dec, b: Dec, scale: int) -> Decimal:
    """``a / b`` rounded half-up to ``scale`` digits, exactly (one rounding, as Spark does)."""
    ua, ub = int(a.scaleb(a.scale, EXACT)), int(b.scaleb(b.scale, EXACT))
    k = scale + b.scale - a.scale
    num, den = (ua * 10 ** k, ub) if k >= 0 else (ua, ub * 10 ** -k)
    q, r = divmod(abs(num), abs(den))
    if 2 * r >= abs(den):
        q += 1
    return Decimal(-q if (num < 0) != (den < 0) else q).scaleb(-scale, EXACT)


def _temporal_op(op: str, a: object, b: object) -> object:
    try:
        if op == "+" and isinstance(a, dt.datetime) and is_integral(b):
            return a + dt.timedelta(microseconds=int(b))  # type: ignore[arg-type]
        if op == "+" and isinstance(b, dt.datetime) and is_integral(a):
            return b + dt.timedelta(microseconds=int(a))  # type: ignore[arg-type]
        if op == "-" and isinstance(a, dt.datetime) and is_integral(b):
            return a - dt.timedelta(microseconds=int(b))  # type: ignore[arg-type]
        if op == "-" and isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
            return Interval(wrap64((a - b) // dt.timedelta(microseconds=1)))
    except OverflowError:
        raise SplashError("date-time out of range") from None
    raise _type_error(op, a, b)


# Microseconds per unit of each date-time type counted as a number (see temporal_number).
TEMPORAL_UNITS = {"date": 1_000_000, "timestamp": 1000, "bigdatetime": 1}
EPOCH = dt.datetime(1970, 1, 1)


def temporal_number(op: str, a: object, b: object, temporal: str) -> object:
    """``a op b`` where a date-time of type ``temporal`` meets an integer (``* / %`` or a
    comparison, as the analysis marked it): the date-time counts as its whole units since
    1970-01-01 (seconds for a date, milliseconds for a timestamp, microseconds for a bigdatetime),
    and an arithmetic result is that many units after the epoch again, so ``(t / 3600) * 3600`` is
    a date ``t`` cut to the hour."""
    if a is None or b is None:
        return None
    unit = TEMPORAL_UNITS[temporal]
    x, y = (Long((v - EPOCH) // dt.timedelta(microseconds=unit)) if isinstance(v, dt.datetime)
            else v for v in (a, b))
    if not (is_integral(x) and is_integral(y)):
        raise _type_error(op, a, b)
    if op in ("=", "!=", "<>", "<", "<=", ">", ">="):
        return comparison(op, int(x), int(y))  # type: ignore[arg-type]
    r = _integral_op(op, Long(x), Long(y))  # type: ignore[arg-type]
    if r is None:
        return None
    try:
        return EPOCH + dt.timedelta(microseconds=r * unit)
    except OverflowError:
        raise SplashError("date-time out of range") from None


def negate(v: object) -> object:
    """Unary minus: integers wrap (``-(-2147483648)`` is -2147483648), decimals keep their type."""
    if v is None:
        return None
    if isinstance(v, bool) or not is_number(v):
        raise SplashError(f"unary - cannot take {a_kind(v)}")
    if isinstance(v, Interval):
        return Interval(wrap64(-v))
    if isinstance(v, Long):
        return wrap64(-v)
    if isinstance(v, int):
        return wrap32(-v)
    if isinstance(v, Dec):
        return make_dec(-v, v.precision, v.scale)
    return -v  # type: ignore[operator]


def plus(v: object) -> object:
    """Unary plus: the number itself."""
    if v is not None and (isinstance(v, bool) or not is_number(v)):
        raise SplashError(f"unary + cannot take {a_kind(v)}")
    return v


def _odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == math.floor(y) and math.fmod(y, 2.0) != 0


def java_pow(x: float, y: float) -> float:
    """Java's ``Math.pow`` (what Spark's ``power`` computes), without Python's exceptions."""
    if math.isnan(y):
        return math.nan
    if y == 0:
        return 1.0
    if math.isnan(x) or (math.isinf(y) and abs(x) == 1.0):
        return math.nan
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and _odd_integer(y) else math.inf
    except ValueError:
        if x == 0:  # zero to a negative power
            return -math.inf if math.copysign(1.0, x) < 0 and _odd_integer(y) else math.inf
        return math.nan  # a negative number to a non-integer power


def power(a: object, b: object) -> Optional[float]:
    """``a ^ b`` and ``power(a, b)``: always a float."""
    if a is None or b is None:
        return None
    if not (is_number(a) and is_number(b)):
        raise _type_error("^", a, b)
    return java_pow(to_float(a), to_float(b))


# --------------------------------------------------------------------------------------------------
# Comparison and logic
# --------------------------------------------------------------------------------------------------

def compare(a: object, b: object, op: str = "<") -> Optional[int]:
    """-1, 0 or 1 as ``a`` is less than, equal to or greater than ``b``; None when either is null.

    Numbers compare by value (as floats when either side is a float, with Spark's rules: NaN equals
    NaN and is larger than every other number, -0.0 equals 0.0); strings by code point; false < true;
    date-times by time."""
    if a is None or b is None:
        return None
    if is_number(a) and is_number(b):
        if isinstance(a, float) or isinstance(b, float):
            x, y = to_float(a), to_float(b)
            xn, yn = math.isnan(x), math.isnan(y)
            if xn or yn:
                return int(xn) - int(yn)
            return (x > y) - (x < y)
        return (a > b) - (a < b)  # type: ignore[operator]
    for t in (str, bool, dt.datetime):
        if isinstance(a, t) and isinstance(b, t) and (t is bool or not isinstance(a, bool)):
            return (a > b) - (a < b)  # type: ignore[operator]
    raise SplashError(f"cannot compare {a_kind(a)} with {a_kind(b)}")


_PY_COMPARE = {"=": operator.eq, "!=": operator.ne, "<>": operator.ne, "<": operator.lt,
               "<=": operator.le, ">": operator.gt, ">=": operator.ge}
PY_COMPARE = _PY_COMPARE  # for compiled comparisons' inline copy of comparison()'s first case


def comparison(op: str, a: object, b: object) -> Optional[bool]:
    """``a op b`` for ``= != <> < <= > >=``; null when either side is null. Vectors, dictionaries
    and records can be tested for (in)equality."""
    if a is None or b is None:
        return None
    ta = type(a)
    if ta is type(b) and (ta is str or ta is int or (ta is float and a == a and b == b)):
        return _PY_COMPARE[op](a, b)  # what compare() gives for two strings, integers or non-NaN floats
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        if op not in ("=", "!=", "<>") or kind(a) != kind(b):
            raise SplashError(f"cannot compare {a_kind(a)} with {a_kind(b)} using {op}")
        return (a == b) if op == "=" else (a != b)
    c = compare(a, b, op)
    if op == "=":
        return c == 0
    if op in ("!=", "<>"):
        return c != 0
    if op == "<":
        return c < 0  # type: ignore[operator]
    if op == "<=":
        return c <= 0  # type: ignore[operator]
    if op == ">":
        return c > 0  # type: ignore[operator]
    return c >= 0  # type: ignore[operator]


def truth(v: object) -> Optional[bool]:
    """A condition's value: booleans as they are, numbers true when non-zero (NaN is true), null
    stays null."""
    if v is None or isinstance(v, bool):
        return v
    if is_number(v):
        return v != 0
    raise SplashError(f"{a_kind(v)} cannot be used as a condition")


def logical_and(left: object, right: Callable[[], object]) -> Optional[bool]:
    """``left and right()``, three-valued: ``right()`` is evaluated only when ``left`` is not false;
    false when either is false, else null when either is null."""
    a = truth(left)
    if a is False:
        return False
    b = truth(right())
    if b is False:
        return False
    return None if a is None or b is None else True


def logical_or(left: object, right: Callable[[], object]) -> Optional[bool]:
    """``left or right()``, three-valued: ``right()`` is evaluated only when ``left`` is not true;
    true when either is true, else null when either is null."""
    a = truth(left)
    if a is True:
        return True
    b = truth(right())
    if b is True:
        return True
    return None if a is None or b is None else False


def logical_not(v: object) -> Optional[bool]:
    """``not v``: null stays null."""
    t = truth(v)
    return None if t is None else not t


def in_list(v: object, items: list[object]) -> Optional[bool]:
    """``v in (items)``: true on a match; otherwise null when ``v`` or any item is null, else false."""
    if v is None:
        return None
    saw_null = False
    for item in items:
        c = comparison("=", v, item)
        if c is None:
            saw_null = True
        elif c:
            return True
    return None if saw_null else False


@functools.lru_cache(maxsize=512)
def like_regex(pattern: str) -> re.Pattern:
    """The regular expression of a LIKE pattern: ``%`` any string, ``_`` any one character, ``\\``
    escapes ``%``, ``_`` and itself (Spark's rules: any other escaped character is an error)."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 == len(pattern):
                raise SplashError(f"LIKE pattern '{pattern}' ends with the escape character")
            nxt = pattern[i + 1]
            if nxt not in "_%\\":
                raise SplashError(f"LIKE pattern '{pattern}': the escape character cannot precede '{nxt}'")
            out.append(re.escape(nxt))
            i += 2
            continue
        out.append("." if c == "_" else ".*" if c == "%" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def like(s: object, pattern: object) -> Optional[bool]:
    """``s like pattern`` (case-sensitive, the whole string must match); null if either is null."""
    if s is None or pattern is None:
        return None
    if not (isinstance(s, str) and isinstance(pattern, str)):
        raise SplashError(f"LIKE needs strings, not {a_kind(s)} and {a_kind(pattern)}")
    return like_regex(pattern).fullmatch(s) is not None
