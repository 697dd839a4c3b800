"""Conversions between SPLASH values: explicit casts (``cast``, ``to_*``), the implicit widening of an
assignment, text formatting and parsing, and bringing outside Python values into SPLASH form.

Explicit casts follow Spark's non-ANSI ``CAST`` (spark.sql.ansi.enabled=false) with one exception:
where Spark turns a string it cannot parse into null, SPLASH raises a :class:`SplashError`.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Optional

from .types import ANY, Type
from .values import (INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, Dec, Dictionary, Interval, Long,
                     Record, SplashError, Vector, a_kind, dec_to_float, dec_type, decimal_args,
                     is_integral, kind, make_dec, normal_type, wrap32, wrap64)

TEMPORALS = ("date", "timestamp", "bigdatetime")
_RESOLUTION = {"date": 1_000_000, "timestamp": 1_000, "bigdatetime": 1}  # microseconds


# --------------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------------

def java_double(x: float) -> str:
    """A double as Java 17's ``Double.toString`` writes it (which is Spark's cast to string):
    ``1.0``, ``1.0E10``, ``1.0E-4``, ``NaN``, ``Infinity``; integral values below 2^63 with all their
    significant digits (``2.46607568800031744E17``); other values with the fewest digits that read
    back to ``x``. Java 17 writes a longer form for a few rare values (2e23 is
    ``1.9999999999999998E23`` there; Java 19 and later agree with this function)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    minus = "-" if x < 0 else ""
    found = _java_integral_digits(abs(x))
    text, point = found if found is not None else _shortest_digits(abs(x))
    if 0 < point < 8:
        if point >= len(text):
            return f"{minus}{text}{'0' * (point - len(text))}.0"
        return f"{minus}{text[:point]}.{text[point:]}"
    if -3 < point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    return f"{minus}{text[0]}.{text[1:] or '0'}E{point - 1}"


def _shortest_digits(a: float) -> tuple[str, int]:
    """(digits, position of the decimal point) of the shortest decimal that reads back to ``a``
    (Java writes the smallest double, 5e-324, as 4.9E-324)."""
    if a == 5e-324:
        return "49", -323
    _, digits, exp = Decimal(repr(a)).as_tuple()
    return "".join(map(str, digits)).rstrip("0") or "0", len(digits) + exp  # type: ignore[operator]


# Java 17 FloatingDecimal: insignificant trailing digits of an integral double, by binary exponent.
_INSIGNIFICANT = (0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8,
                  8, 9, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15,
                  15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19)


def _java_integral_digits(a: float) -> Optional[tuple[str, int]]:
    """Java 17's digits of an integral double below 2^63 (FloatingDecimal's exact "long" path:
    all digits, less a few insignificant ones for the largest values), else None."""
    if not 1 <= a < 2.0 ** 63 or a != math.floor(a):
        return None
    value = int(a)
    bin_exp = value.bit_length() - 1
    p2 = bin_exp - 53 - 1
    insignificant = _INSIGNIFICANT[p2] if 1 < p2 < len(_INSIGNIFICANT) else 0
    exponent = 0
    if insignificant:
        pow10 = 10 ** insignificant
        value, residue = divmod(value, pow10)
        exponent = insignificant
        if residue >= pow10 // 2:
            value += 1
    text = str(value)
    return text.rstrip("0"), len(text) + exponent


def timestamp_text(v: dt.datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]`` without trailing zeros in the fraction (Spark's form)."""
    out = (f"{v.year:04d}-{v.month:02d}-{v.day:02d} "
           f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}")
    if v.microsecond:
        out += "." + f"{v.microsecond:06d}".rstrip("0")
    return out


def to_text(v: object) -> Optional[str]:
    """A value as a string, as Spark casts it: ``true``, ``1.0E10``, ``1.50``, ``2020-01-02 03:04:05``."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return java_double(v)
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return timestamp_text(v)
    raise SplashError(f"cannot convert {a_kind(v)} to a string")


# --------------------------------------------------------------------------------------------------
# Parsing (Spark's rules; what Spark turns into null is an error here)
# --------------------------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"([+-]?)([0-9]*)(?:\.[0-9]*)?")
_DOUBLE_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_HEX_TEXT = re.compile(r"([+-]?0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TIMESTAMP_TEXT = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
                             r"(?:[T ]([0-9]{1,2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?)?Z?")
_SPECIAL_DOUBLES = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                    "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan}
_TRUE = {"t", "true", "y", "yes", "1"}
_FALSE = {"f", "false", "n", "no", "0"}


def _trim(s: str) -> str:
    """Strip characters up to U+0020 from both ends (Java's ``String.trim``)."""
    return s.strip("".join(chr(c) for c in range(33)))


def _bad(s: str, target: str) -> SplashError:
    return SplashError(f"cannot convert '{s}' to {target}")


def parse_integral(s: str, bits: int) -> int:
    """A string as an integer (bits=32) or long (bits=64): optional sign, digits, and an optional
    fraction that is dropped (``' 1.9 '`` -> 1); anything else, or out of range, is an error."""
    t = _trim(s)
    m = _INT_TEXT.fullmatch(t)
    if not t or m is None or t in ("+", "-"):
        raise _bad(s, "integer" if bits == 32 else "long")
    value = int(m.group(2) or "0")
    value = -value if m.group(1) == "-" else value
    low, high = (INT_MIN, INT_MAX) if bits == 32 else (LONG_MIN, LONG_MAX)
    if not low <= value <= high:
        raise _bad(s, "integer" if bits == 32 else "long")
    return value


def parse_double(s: str) -> float:
    """A string as a float: Java's number syntax (``1.5``, ``1e3``, ``1.5d``, ``0x1p3``, ``NaN``,
    ``Infinity``) or Spark's ``inf``/``infinity``/``nan`` in any case."""
    t = _trim(s)
    special = _SPECIAL_DOUBLES.get(t.lower())
    if special is not None:
        return special
    if _DOUBLE_TEXT.fullmatch(t):
        return float(t[:-1] if t[-1] in "fFdD" else t)
    m = _HEX_TEXT.fullmatch(t)
    if m:
        return float.fromhex(m.group(1))
    raise _bad(s, "float")


def parse_decimal(s: str) -> Decimal:
    """A string as an exact decimal (Java ``BigDecimal`` syntax, surrounding blanks allowed)."""
    t = _trim(s)
    if not _DECIMAL_TEXT.fullmatch(t):
        raise _bad(s, "decimal")
    d = Decimal(t)
    if not -2 ** 31 < d.as_tuple().exponent < 2 ** 31:  # type: ignore[operator]
        raise _bad(s, "decimal")  # Java's BigDecimal scale is an int
    return d


def parse_boolean(s: str) -> bool:
    """``t true y yes 1`` / ``f false n no 0`` in any case, surrounding spaces allowed."""
    t = _trim(s).lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise _bad(s, "boolean")


def parse_timestamp(s: str) -> dt.datetime:
    """``YYYY-MM-DD``, ``YYYY-MM-DD[T| ]HH:MM[:SS[.fraction]]`` with an optional ``Z`` (UTC)."""
    m = _TIMESTAMP_TEXT.fullmatch(_trim(s))
    if m is None:
        raise _bad(s, "timestamp")
    y, mo, d, h, mi, sec, frac = m.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    try:
        return dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0), micros)
    except ValueError:
        raise _bad(s, "timestamp") from None


# --------------------------------------------------------------------------------------------------
# Casts
# --------------------------------------------------------------------------------------------------

def _float_to_integral(x: float, low: int, high: int) -> int:
    """Java's (int)/(long) of a double: NaN -> 0, saturating at the bounds, truncating otherwise."""
    if math.isnan(x):
        return 0
    if x >= high:
        return high
    if x <= low:
        return low
    return int(x)


def _to_integral(v: object, bits: int) -> int:
    wrap = wrap32 if bits == 32 else wrap64
    if isinstance(v, bool):
        return wrap(int(v))
    if isinstance(v, int):
        return wrap(v)
    if isinstance(v, float):
        low, high = (INT_MIN, INT_MAX) if bits == 32 else (LONG_MIN, LONG_MAX)
        return wrap(_float_to_integral(v, low, high))
    if isinstance(v, Decimal):
        return wrap(int(v))
    if isinstance(v, str):
        return wrap(parse_integral(v, bits))
    raise SplashError(f"cannot convert {a_kind(v)} to {'integer' if bits == 32 else 'long'}")


def _to_float(v: object) -> float:
    if isinstance(v, (bool, int)):
        return float(v)
    if isinstance(v, float):
        return v
    if isinstance(v, Decimal):
        return dec_to_float(v)
    if isinstance(v, str):
        return parse_double(v)
    raise SplashError(f"cannot convert {a_kind(v)} to float")


def to_decimal(v: object, precision: int, scale: int) -> Optional[Dec]:
    """``v`` as decimal(precision, scale), rounded half-up; null when it does not fit (or NaN/inf)."""
    if not (1 <= precision <= 38 and 0 <= scale <= precision):
        raise SplashError(f"decimal({precision}, {scale}): precision must be 1..38 and scale 0..precision")
    if isinstance(v, bool):
        return make_dec(int(v), precision, scale)
    if isinstance(v, (int, Decimal)):
        return make_dec(v, precision, scale)
    if isinstance(v, float):
        return make_dec(Decimal(repr(v)), precision, scale) if math.isfinite(v) else None
    if isinstance(v, str):
        return make_dec(parse_decimal(v), precision, scale)
    raise SplashError(f"cannot convert {a_kind(v)} to decimal")


def _to_boolean(v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, Decimal)):
        return v != 0
    if isinstance(v, str):
        return parse_boolean(v)
    raise SplashError(f"cannot convert {a_kind(v)} to boolean")


def truncate_time(v: dt.datetime, name: str) -> dt.datetime:
    """A date-time cut to the resolution of ``name``: date seconds, timestamp milliseconds."""
    res = _RESOLUTION.get(name, 1)
    if res == 1:
        return v
    return v.replace(microsecond=v.microsecond - v.microsecond % res)


def _to_temporal(v: object, name: str) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return truncate_time(v, name)
    if isinstance(v, str):
        return truncate_time(parse_timestamp(v), name)
    raise SplashError(f"cannot convert {a_kind(v)} to {name}")


def cast(v: object, t: Type) -> object:
    """``cast(t, v)``: an explicit conversion with Spark's non-ANSI CAST semantics (null stays null;
    numbers wrap or saturate like Java; decimals round half-up and become null when they overflow);
    a string that is not a valid literal of the target type is an error."""
    if v is None or t.name in ("any", "null"):
        return v
    name = t.name
    if name == "integer":
        return _to_integral(v, 32)
    if name == "long":
        return _to_integral(v, 64)
    if name == "interval":
        return Interval(_to_integral(v, 64))
    if name == "float":
        return _to_float(v)
    if name in ("money", "decimal"):
        return to_decimal(v, *decimal_args(t))
    if name == "string":
        return to_text(v)
    if name == "boolean":
        return _to_boolean(v)
    if name in TEMPORALS:
        return _to_temporal(v, name)
    if name == "binary" and isinstance(v, (bytes, bytearray)):
        return bytes(v)  # (an error stream's errorRecord)
    if name == "vector" and isinstance(v, list):
        return v
    if name == "dictionary" and isinstance(v, dict) and not isinstance(v, Record):
        return v
    if name == "record" and isinstance(v, dict) and not isinstance(v, (Dictionary,)):
        return v
    raise SplashError(f"cannot convert {a_kind(v)} to {t}")


# --------------------------------------------------------------------------------------------------
# Implicit conversion on assignment
# --------------------------------------------------------------------------------------------------

# Python type -> the one CCL type its values have (exactly that Python type, not a subclass)
_SAME_KIND = {str: "string", float: "float", bool: "boolean", int: "integer", Long: "long",
              Interval: "interval"}
SAME_KIND = _SAME_KIND  # for the compiled code's inline copies of coerce's fast path

_WIDENS = {
    "integer": {"integer", "long", "float", "money", "decimal", "interval"},
    "long": {"long", "float", "money", "decimal", "interval"},
    "interval": {"interval"},
    "decimal": {"money", "decimal", "float"},
    "float": {"float"},
    "string": {"string"},
    "boolean": {"boolean"},
    "binary": {"binary"},
    "timestamp": set(TEMPORALS),
    "vector": {"vector"},
    "dictionary": {"dictionary"},
    "record": {"record"},
}


def coerce(v: object, t: Type, what: str) -> object:
    """``v`` stored where type ``t`` is declared (``what`` names the place, for the message): the
    widenings integer -> long -> decimal/money -> float and integer/long -> interval convert; a
    narrowing (long into integer, float into money, ...) is an error."""
    if v is None or t.name in ("any", "null"):
        return v
    if _SAME_KIND.get(type(v)) == t.name:
        return v  # the value already has the type: what the checks below give back
    if t.name == "record" and isinstance(v, Record):
        return v.copy_record()  # what the checks below give a record, without kind()'s tests
    k = kind(v)
    if t.name not in _WIDENS.get(k, ()):
        raise SplashError(f"cannot assign {a_kind(v)} to {what} of type {t}")
    if t.name == "record":
        # Records have value semantics: storing one (in a variable, a field, a container) copies
        # it, so that changing a variable later does not change a row kept in a dictionary.
        return v.copy_record() if isinstance(v, Record) else v
    if t.name in ("vector", "dictionary"):
        return v
    if k == t.name or t.name in TEMPORALS:
        return v if t.name not in ("money", "decimal") else cast(v, t)
    return cast(v, t)


# --------------------------------------------------------------------------------------------------
# Values from outside
# --------------------------------------------------------------------------------------------------

# Python types whose values are already in SPLASH form for a column of the named type (an int only
# within 32 bits): from_python and cast give them back unchanged.
PLAIN_KINDS = {str: "string", float: "float", bool: "boolean", int: "integer"}


def from_python(v: object, t: Type = ANY) -> object:
    """An outside Python value (an input column, a global) in SPLASH form. With a type, the value is
    cast to it (a Spark column of that type holds it); without one an ``int`` is an integer when it
    fits in 32 bits and a long otherwise, a ``Decimal`` gets the smallest precision that holds it,
    a ``date`` is midnight, an aware ``datetime`` is turned into naive UTC, a ``timedelta`` is an
    interval."""
    if v is None:
        return None
    plain = PLAIN_KINDS.get(type(v))
    if plain is not None and t.name in (plain, "any", "null") and (plain != "integer"
                                                                    or INT_MIN <= v <= INT_MAX):  # type: ignore[operator]
        return v  # the common case, already in SPLASH form: what the checks below would give
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    elif isinstance(v, dt.date):
        v = dt.datetime(v.year, v.month, v.day)
    elif isinstance(v, dt.timedelta):
        v = Interval(wrap64(v // dt.timedelta(microseconds=1)))
    elif isinstance(v, Decimal) and not isinstance(v, Dec):
        p, s = dec_type(v)
        v = make_dec(v, p, s)
    elif is_integral(v) and type(v) is int and not INT_MIN <= v <= INT_MAX:
        if not LONG_MIN <= v <= LONG_MAX:
            raise SplashError(f"integer value {v} does not fit in a long")
        v = Long(v)
    elif isinstance(v, list) and not isinstance(v, Vector):
        v = Vector(v)
    elif isinstance(v, dict) and not isinstance(v, (Dictionary, Record)):
        v = Dictionary(v.items())
    elif getattr(v, "splash_value", False):
        return v  # an event cache (ccl.splash.caches)
    elif not isinstance(v, (bool, int, float, str, Decimal, list, dict, bytes)):
        raise SplashError(f"unsupported value {v!r}")
    t = normal_type(t)
    if t.name in ("any", "null") or (t.name == kind(v) and t.name not in ("money", "decimal")):
        return v
    if t.name in TEMPORALS and isinstance(v, dt.datetime):
        return v  # a date-time column keeps its value (no cut to the resolution of the type)
    if t.name == "interval" and is_integral(v):
        return Interval(wrap64(v))
    return cast(v, t)

