"""Field text to typed values: a parser per CCL column type, and date-time patterns."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ccl.splash.convert import (
    parse_boolean,
    parse_decimal,
    parse_double,
    parse_integral,
    parse_timestamp,
    truncate_time,
)
from ccl.splash.values import SplashError, make_dec

if TYPE_CHECKING:
    from .formats import CsvFormat


_JAVA_FIELDS = {"y": ("year", r"\d{4}", r"\d{2}"), "Y": ("year", r"\d{4}", r"\d{2}"),
                "M": ("month", r"\d{1,2}", r"\d{2}"), "d": ("day", r"\d{1,2}", r"\d{2}"),
                "H": ("hour", r"\d{1,2}", r"\d{2}"), "m": ("minute", r"\d{1,2}", r"\d{2}"),
                "s": ("second", r"\d{1,2}", r"\d{2}")}


def java_pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression with named groups for a Java date-time pattern made of ``yyyy yy MM M
    dd d HH H mm ss SSS`` (any number of ``S``: a fraction of exactly that many digits), quoted
    literals (``'T'``) and punctuation; other letters are refused with ValueError. As in Java's
    parsing, ``dd`` also reads ``5`` unless another number follows without a separator
    (``yyyyMMdd``)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        j = i
        while j < len(pattern) and pattern[j] == c:
            j += 1
        run = j - i
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"date format {pattern!r}: unclosed quote")
            out.append(re.escape(pattern[i + 1:end]) if end > i + 1 else "'")
            i = end + 1
            continue
        if c in _JAVA_FIELDS:
            name, wide, two = _JAVA_FIELDS[c]
            if f"(?P<{name}>" in "".join(out):
                raise ValueError(f"date format {pattern!r}: {c!r} given twice")
            if c in "yY":
                body = r"\d{2}" if run == 2 else r"\d{4}"
            else:  # as Java parses: the letter count matters only between adjacent numbers
                adjacent = j < len(pattern) and (pattern[j] in _JAVA_FIELDS or pattern[j] == "S")
                body = two if run >= 2 and adjacent else wide
            out.append(f"(?P<{name}>{body})")
        elif c == "S":
            out.append(f"(?P<fraction>\\d{{{run}}})")
        elif c.isalpha():
            raise ValueError(f"date format {pattern!r}: unsupported letter {c!r}")
        else:
            out.append(re.escape(pattern[i:j]))
        i = j
    return re.compile("".join(out))


_STRFTIME_FIELDS = {"Y": ("year", r"\d{4}"), "y": ("year", r"\d{2}"), "m": ("month", r"\d{1,2}"),
                    "d": ("day", r"\d{1,2}"), "H": ("hour", r"\d{1,2}"), "M": ("minute", r"\d{1,2}"),
                    "S": ("second", r"\d{1,2}"), "f": ("fraction", r"\d{1,6}")}


def strftime_pattern_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a C ``strftime`` pattern (ESP's C++ adapters write formats so,
    ``%Y-%m-%dT%H:%M:%S``) made of ``%Y %y %m %d %H %M %S %f %%`` and literal text; other
    directives are refused with ValueError."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c != "%":
            out.append(re.escape(c))
            i += 1
            continue
        if i + 1 >= len(pattern):
            raise ValueError(f"date format {pattern!r}: '%' at the end")
        d = pattern[i + 1]
        if d == "%":
            out.append("%")
        elif d in _STRFTIME_FIELDS:
            name, body = _STRFTIME_FIELDS[d]
            if f"(?P<{name}>" in "".join(out):
                raise ValueError(f"date format {pattern!r}: {name} given twice")
            out.append(f"(?P<{name}>{body})")
        else:
            raise ValueError(f"date format {pattern!r}: unsupported directive '%{d}'")
        i += 2
    return re.compile("".join(out))


def _pattern_parser(pattern: str) -> Callable[[str], dt.datetime]:
    rx = strftime_pattern_regex(pattern) if "%" in pattern else java_pattern_regex(pattern)

    def parse(text: str) -> dt.datetime:
        m = rx.fullmatch(text.strip())
        if m is None:
            raise ValueError(text)
        g = m.groupdict()
        year = int(g.get("year") or 1970)
        if g.get("year") and len(g["year"]) == 2:
            year += 2000
        micros = int((g.get("fraction") or "0")[:6].ljust(6, "0"))
        return dt.datetime(year, int(g.get("month") or 1), int(g.get("day") or 1),
                           int(g.get("hour") or 0), int(g.get("minute") or 0),
                           int(g.get("second") or 0), micros)
    return parse


# ESP's adapters spell some properties with a ``csv`` prefix (toolkit_file_csv_input: csvDelimiter,


class BadValue(Exception):
    pass


_PLAIN_DECIMAL = re.compile(r"-?0*([0-9]*)(?:\.([0-9]*))?")
_ISO = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
                  r"(?:\.([0-9]{1,9}))?")


def _iso_timestamp(s: str) -> dt.datetime:
    """:func:`parse_timestamp` with a fast path for its most common form."""
    m = _ISO.fullmatch(s)
    if m:
        y, mo, d, h, mi, sec, frac = m.groups()
        try:
            return dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec),
                               int((frac or "0")[:6].ljust(6, "0")))
        except ValueError:
            pass
    return parse_timestamp(s)


def column_parser(ccl_type: str, fmt: CsvFormat) -> Callable[[str], Any]:
    """A function from a non-empty field to the Python value of ``ccl_type`` (the value a Spark
    column of :func:`runtime.types.spark_type` holds); it raises :class:`BadValue` with the
    reason's tail (``is not a float``) when the text is not a value of the type."""
    t = ccl_type.strip().lower()
    base = re.match(r"[a-z]+", t)
    name = base.group(0) if base else t
    not_a = f"is not {'an' if t[:1] in 'aeiou' else 'a'} {t}"

    def guarded(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        def parse(s: str) -> Any:
            try:
                return fn(s)
            except BadValue:
                raise
            except (SplashError, ValueError, ArithmeticError):
                raise BadValue(not_a) from None
        return parse

    if name in ("integer", "long", "interval"):
        bits = 32 if name == "integer" else 64
        high = 2 ** (bits - 1) - 1

        def integral(s: str) -> int:
            if s.isascii() and s.isdigit():
                v = int(s)
                if v <= high:
                    return v
            if "." in s:  # parse_integral (SPLASH's cast) drops a fraction; a file's value must not lose one
                raise BadValue(not_a)
            return parse_integral(s, bits)
        return guarded(integral)
    if name == "float":
        def double(s: str) -> float:
            try:
                if s.isascii() and s.replace(".", "", 1).lstrip("-").isdigit():
                    return float(s)
            except ValueError:
                pass
            return parse_double(s)
        return guarded(double)
    if name in ("money", "decimal"):
        from ..types import spark_type
        st = spark_type(t)
        precision, scale = st.precision, st.scale  # type: ignore[attr-defined]

        def decimal(s: str) -> Decimal:
            m = _PLAIN_DECIMAL.fullmatch(s)
            if m and len(m.group(2) or "") <= scale and len(m.group(1)) <= precision - scale:
                return Decimal(s)  # exact: arrow scales it to the column's scale
            d = make_dec(parse_decimal(s), precision, scale)
            if d is None:
                raise BadValue(f"does not fit in {t}")
            return Decimal(d)
        return guarded(decimal)
    if name == "boolean":
        return guarded(parse_boolean)
    if name in ("date", "timestamp", "bigdatetime"):
        pattern = fmt.time_format(name)
        base_parse = _pattern_parser(pattern) if pattern else _iso_timestamp
        return guarded(lambda s: truncate_time(base_parse(s), name))
    if name == "binary":
        return guarded(lambda s: bytes.fromhex(s.strip()))
    return lambda s: s

