"""Built-in date/time and conversion functions beyond the core set of :mod:`ccl.splash.builtins`.

ESP's date-part functions (``dateadd``, ``datediff``, ``datepart``, ``datefloor``,
``dateceiling``), calendar parts (``dayofweek`` ... ``microsecond``), the clock functions
(``getdate``, ``sysdate`` ...) and the conversions ``to_timestamp``, ``to_date``,
``to_bigdatetime``, ``to_interval``, ``to_money`` and ``trunc``.

Date-time values are naive UTC ``datetime`` objects (see :mod:`ccl.splash.values`). A date part
is given as a string: ``'yy'``/``'year'``, ``'qq'``/``'quarter'``, ``'mm'``/``'month'``,
``'wk'``/``'week'``, ``'dd'``/``'day'``, ``'dy'``/``'dayofyear'``, ``'dw'``/``'weekday'``,
``'hh'``/``'hour'``, ``'mi'``/``'minute'``, ``'ss'``/``'second'``, ``'ms'``/``'millisecond'``,
``'us'``/``'microsecond'`` (any case). ESP also accepts the bare keyword (``datefloor(MINUTE, t)``);
SPLASH code here reads a bare word as a variable name, so the string form is needed.

Where ESP's documentation leaves the semantics open, the choice is the one of Sybase ASE / T-SQL
(ESP's family) and is said in the function's docstring.
"""
from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from decimal import ROUND_DOWN, Decimal
from typing import Callable, Optional
from zoneinfo import ZoneInfo

from .types import Type
from .functions_data import DATE_PARTS
from .calls import Builtin, CallContext, need_int, need_number, need_str, need_time
from .convert import cast, to_text, truncate_time
from .values import (EXACT, LONG_MAX, LONG_MIN, Dec, Interval, Long, SplashError,
                     a_kind, dec_type, is_integral, is_number, make_dec)

_EPOCH = dt.datetime(1970, 1, 1)
_US = dt.timedelta(microseconds=1)
_SUNDAY_OFFSET = 3 * 86_400_000_000  # 1970-01-04, the first Sunday after the epoch (microseconds)

# Date part keyword -> canonical part name.
_PARTS = DATE_PARTS
# Length of the fixed-length parts in microseconds.
_FIXED_US = {"week": 604_800_000_000, "day": 86_400_000_000, "hour": 3_600_000_000,
             "minute": 60_000_000, "second": 1_000_000, "millisecond": 1_000, "microsecond": 1}
# Length of the calendar parts in months.
_MONTHS = {"year": 12, "quarter": 3, "month": 1}
# Multiples datefloor()/dateceiling() allow (R5, R6); None = any positive integer.
_MULTIPLES: dict[str, Optional[frozenset[int]]] = {
    "year": None, "quarter": None, "month": None, "week": None, "day": None,
    "hour": frozenset((1, 2, 3, 4, 6, 8, 12, 24)),
    "minute": frozenset((1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)),
    "second": frozenset((1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)),
    "millisecond": frozenset((1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000)),
}


# --- helpers ------------------------------------------------------------------------------------

def _date_part(name: str, v: object, allowed: tuple[str, ...]) -> str:
    """The canonical name of the date part ``v`` (argument 1 of ``name``), one of ``allowed``."""
    if not isinstance(v, str):
        raise SplashError(f"{name}() argument 1 must be a date part string such as 'mm', not {a_kind(v)}")
    part = _PARTS.get(v.strip().lower())
    if part not in allowed:
        raise SplashError(f"{name}(): '{v}' is not a date part it takes "
                          f"({', '.join(k for k, p in _PARTS.items() if p in allowed and len(k) == 2)})")
    return part


def _micros(v: dt.datetime) -> int:
    """Microseconds since 1970-01-01 00:00 UTC."""
    return (v - _EPOCH) // _US


def _from_micros(name: str, us: int) -> dt.datetime:
    try:
        return _EPOCH + dt.timedelta(microseconds=us)
    except OverflowError:
        raise SplashError(f"{name}(): the result is out of range (years 1 to 9999)") from None


def _month_index(v: dt.datetime) -> int:
    """Months since January 1970."""
    return (v.year - 1970) * 12 + v.month - 1


def _add_months(name: str, v: dt.datetime, months: int) -> dt.datetime:
    """``v`` plus ``months`` months; a day past the end of the new month becomes its last day."""
    index = v.year * 12 + v.month - 1 + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise SplashError(f"{name}(): the result is out of range (years 1 to 9999)")
    return v.replace(year=year, month=month + 1, day=min(v.day, calendar.monthrange(year, month + 1)[1]))


def _zone(name: str, i: int, tz: object) -> ZoneInfo:
    """The IANA time zone that argument ``i`` names ('UTC', 'America/New_York', ...)."""
    tz = need_str(name, i, tz)
    try:
        return ZoneInfo(tz.strip())
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        raise SplashError(f"{name}(): unknown time zone '{tz}'") from None


def _local(name: str, v: dt.datetime, tz: tuple[object, ...]) -> dt.datetime:
    """``v`` (naive UTC) as wall-clock time in the optional time zone ``tz[0]``."""
    if not tz:
        return v
    try:
        return v.replace(tzinfo=dt.timezone.utc).astimezone(_zone(name, 2, tz[0])).replace(tzinfo=None)
    except OverflowError:
        raise SplashError(f"{name}(): the date-time is out of range in time zone '{tz[0]}'") from None


def _to_utc(name: str, v: dt.datetime, tz: object) -> dt.datetime:
    """The wall-clock time ``v`` of the time zone of argument 3 as naive UTC."""
    try:
        return v.replace(tzinfo=_zone(name, 3, tz)).astimezone(dt.timezone.utc).replace(tzinfo=None)
    except OverflowError:
        raise SplashError(f"{name}(): the date-time is out of range in UTC") from None


def _sunday_week_of_year(v: dt.datetime) -> int:
    """Sybase's week number: weeks start on Sunday and week 1 holds January 1."""
    jan1_weekday = dt.date(v.year, 1, 1).isoweekday() % 7  # Sunday = 0
    return (v.timetuple().tm_yday + jan1_weekday - 1) // 7 + 1


_EXTRACT: dict[str, Callable[[dt.datetime], int]] = {
    "year": lambda v: v.year,
    "quarter": lambda v: (v.month - 1) // 3 + 1,
    "month": lambda v: v.month,
    "week": _sunday_week_of_year,
    "day": lambda v: v.day,
    "dayofyear": lambda v: v.timetuple().tm_yday,
    "weekday": lambda v: v.isoweekday() % 7 + 1,  # Sunday = 1 ... Saturday = 7
    "hour": lambda v: v.hour,
    "minute": lambda v: v.minute,
    "second": lambda v: v.second,
    "millisecond": lambda v: v.microsecond // 1000,
    "microsecond": lambda v: v.microsecond,
}


# --- date parts ---------------------------------------------------------------------------------

def dateadd(ctx: CallContext, part: object, count: object, v: object) -> dt.datetime:
    """``dateadd(part, n, t)``: ``t`` plus ``n`` date parts (``n`` may be negative). Adding months,
    quarters or years keeps the day of the month, or takes the last day of a shorter month
    (Jan 31 + 1 month = Feb 28, or Feb 29 in a leap year). ``dy`` and ``dw`` add days (T-SQL)."""
    p = _date_part("dateadd", part, tuple(_PARTS.values()))
    n = need_int("dateadd", 2, count)
    t = need_time("dateadd", v)
    if p in _MONTHS:
        return _add_months("dateadd", t, n * _MONTHS[p])
    size = _FIXED_US["day" if p in ("dayofyear", "weekday") else p]
    return _from_micros("dateadd", _micros(t) + n * size)


def datediff(ctx: CallContext, part: object, start: object, end: object) -> Long:
    """``datediff(part, start, end)``: how many ``part`` boundaries lie between ``start`` and
    ``end`` (Sybase/T-SQL semantics: ``datediff('ss', 12:00:00.9, 12:00:01.1)`` is 1, ``'dd'``
    counts midnights, ``'wk'`` counts Sundays, ``'mm'`` month changes); negative when ``end`` is
    before ``start``."""
    p = _date_part("datediff", part, tuple(_PARTS.values()))
    a = need_time("datediff", start)
    b = need_time("datediff", end)
    if p in _MONTHS:
        return Long(_month_index(b) // _MONTHS[p] - _month_index(a) // _MONTHS[p])
    if p == "week":
        return Long((_micros(b) - _SUNDAY_OFFSET) // _FIXED_US["week"]
                    - (_micros(a) - _SUNDAY_OFFSET) // _FIXED_US["week"])
    size = _FIXED_US["day" if p in ("dayofyear", "weekday") else p]
    return Long(_micros(b) // size - _micros(a) // size)


def datepart(ctx: CallContext, part: object, v: object) -> int:
    """``datepart(part, t)``: the integer value of one part of ``t``: ``yy`` year, ``qq`` 1-4,
    ``mm`` 1-12, ``wk`` week of the year (Sybase: weeks start on Sunday, week 1 holds January 1),
    ``dd`` day of the month, ``dy`` day of the year, ``dw`` 1 (Sunday) to 7 (Saturday), ``hh``,
    ``mi``, ``ss``, ``ms`` 0-999, ``us`` 0-999999."""
    p = _date_part("datepart", part, tuple(_EXTRACT))
    return _EXTRACT[p](need_time("datepart", v))


def _floor(name: str, part: object, v: object, multiple: object) -> tuple[dt.datetime, dt.datetime, str, int]:
    """(``v``, its floor, part, multiple) for datefloor()/dateceiling()."""
    if part is None or v is None:
        # ESP: "an invalid argument error if the value of the required arguments evaluate to NULL"
        raise SplashError(f"{name}(): the date part and the date-time must not be null")
    p = _date_part(name, part, tuple(_MULTIPLES))
    t = need_time(name, v)
    k = 1 if multiple is None else multiple
    allowed = _MULTIPLES[p]
    if not is_integral(k) or k <= 0 or (allowed is not None and k not in allowed):  # type: ignore[operator]
        which = "a positive integer" if allowed is None else ", ".join(map(str, sorted(allowed)))
        raise SplashError(f"{name}(): the multiple of '{part}' must be {which}, not {k!r}")
    k = int(k)  # type: ignore[arg-type]
    if p in _MONTHS:
        size = k * _MONTHS[p]
        index = _month_index(t) // size * size
        year = 1970 + index // 12
        if not 1 <= year <= 9999:
            raise SplashError(f"{name}(): the result is out of range (years 1 to 9999)")
        return t, dt.datetime(year, index % 12 + 1, 1), p, k
    size = k * _FIXED_US[p]
    offset = _SUNDAY_OFFSET if p == "week" else 0
    return t, _from_micros(name, (_micros(t) - offset) // size * size + offset), p, k


def datefloor(ctx: CallContext, part: object, v: object, multiple: object = None) -> dt.datetime:
    """``datefloor(part, t[, multiple])``: ``t`` rounded down to a multiple of ``multiple`` date
    parts (default 1; null means 1). The buckets are counted from 1970-01-01 00:00 UTC (weeks from
    Sunday 1970-01-04), so with the multiples ESP allows for ``hh``/``mi``/``ss``/``ms`` a bucket
    starts at the start of the next larger part (10 minutes: :00, :10, ...). A null date part or
    date-time is an error, as in ESP."""
    return _floor("datefloor", part, v, multiple)[1]


def dateceiling(ctx: CallContext, part: object, v: object, multiple: object = None) -> dt.datetime:
    """``dateceiling(part, t[, multiple])``: ``t`` rounded up to a multiple of ``multiple`` date
    parts: ``t`` itself when it is on a bucket boundary, else the end of the bucket
    :func:`datefloor` finds."""
    t, low, p, k = _floor("dateceiling", part, v, multiple)
    if low == t:
        return t
    if p in _MONTHS:
        return _add_months("dateceiling", low, k * _MONTHS[p])
    return _from_micros("dateceiling", _micros(low) + k * _FIXED_US[p])


def _component(name: str, extract: Callable[[dt.datetime], int]) -> Callable[..., int]:
    """A calendar part of a date-time, in UTC or in the time zone of the optional argument 2."""
    def run(ctx: CallContext, v: object, *tz: object) -> int:
        return extract(_local(name, need_time(name, v), tz))
    return run


def _iso_week(v: dt.datetime) -> int:
    """ISO 8601 week number (weeks start on Monday; week 1 holds the year's first Thursday)."""
    return v.isocalendar()[1]


# --- clocks -------------------------------------------------------------------------------------

def _clock(kind: str) -> Callable[[CallContext], dt.datetime]:
    """The call's current time cut to the resolution of ``kind`` (date, timestamp, bigdatetime)."""
    def run(ctx: CallContext) -> dt.datetime:
        return truncate_time(ctx.now(), kind)
    return run


# --- conversions --------------------------------------------------------------------------------

# Format codes of to_timestamp()/to_date()/to_bigdatetime() (Oracle style, as in ESP's
# 'YYYY-MM-DDTHH24:MI:SS.FF'); other characters, and text in double quotes, stand for themselves.
_FORMAT_TOKEN = re.compile(r'"[^"]*"|HH24|HH12|HH|MI|SS|FF[1-9]?|YYYY|YY|MONTH|MON|MM|DD|A\.M\.|P\.M\.|AM|PM',
                           re.IGNORECASE)
_FIELD_WIDTH = {"HH24": 2, "HH12": 2, "HH": 2, "MI": 2, "SS": 2, "YYYY": 4, "YY": 2, "MM": 2, "DD": 2}
_MONTH_NAMES = [(calendar.month_name[i].lower(), calendar.month_abbr[i].lower(), i) for i in range(1, 13)]
_MERIDIAN = re.compile(r"([AP])\.?M\.?", re.IGNORECASE)


def _format_tokens(fmt: str, codes: re.Pattern[str] = _FORMAT_TOKEN) -> list[tuple[str, str]]:
    """The format split into ``(code in upper case, code as written)`` pairs and literal
    characters ``("", character)`` (the text of double quotes is literal too)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(fmt):
        m = codes.match(fmt, i)
        if m is None:
            out.append(("", fmt[i]))
            i += 1
        elif m.group().startswith('"'):
            out.extend(("", c) for c in m.group()[1:-1])
            i = m.end()
        else:
            out.append((m.group().upper(), m.group()))
            i = m.end()
    return out


def parse_with_format(text: str, fmt: str, target: str) -> dt.datetime:
    """``text`` read with an Oracle-style format: ``YYYY`` ``YY`` (20yy) ``MM`` ``MON`` ``MONTH``
    (English names, any case) ``DD`` ``HH24`` ``HH``/``HH12`` (12-hour with ``AM``/``PM`` in the
    format, else 0-23) ``MI`` ``SS`` ``FF``/``FF1``-``FF9`` (fraction) and ``AM``/``PM``; numbers
    may have fewer digits than the code; other characters must match (letters in any case); fields
    the format lacks default to 1970-01-01 00:00:00. ``target`` names the type for messages."""
    fields = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "micro": 0}
    pm: Optional[bool] = None
    twelve = False
    pos = 0

    def bad() -> SplashError:
        return SplashError(f"cannot convert '{text}' to {target} with format '{fmt}'")

    for token, written in _format_tokens(fmt):
        if not token:
            if pos >= len(text) or text[pos].lower() != written.lower():
                raise bad()
            pos += 1
            continue
        if token in ("MON", "MONTH"):
            rest = text[pos:].lower()
            for full, abbr, number in _MONTH_NAMES:
                name = full if token == "MONTH" and rest.startswith(full) else abbr
                if rest.startswith(name):
                    fields["month"], pos = number, pos + len(name)
                    break
            else:
                raise bad()
            continue
        if token in ("AM", "PM", "A.M.", "P.M."):
            m = _MERIDIAN.match(text, pos)
            if m is None:
                raise bad()
            pm, pos = m.group(1).upper() == "P", m.end()
            continue
        width = 9 if token.startswith("FF") and len(token) == 2 else int(token[2]) if token.startswith("FF") \
            else _FIELD_WIDTH[token]
        m = re.compile(r"[0-9]{1,%d}" % width).match(text, pos)
        if m is None:
            raise bad()
        digits, pos = m.group(), m.end()
        if token.startswith("FF"):
            fields["micro"] = int(digits[:6].ljust(6, "0"))
        elif token == "YYYY":
            fields["year"] = int(digits)
        elif token == "YY":
            fields["year"] = 2000 + int(digits)
        elif token in ("HH", "HH12", "HH24"):
            fields["hour"], twelve = int(digits), twelve or token != "HH24"
        else:
            fields[{"MM": "month", "DD": "day", "MI": "minute", "SS": "second"}[token]] = int(digits)
    if pos != len(text):
        raise bad()
    if pm is not None and twelve:
        if not 1 <= fields["hour"] <= 12:
            raise bad()
        fields["hour"] = fields["hour"] % 12 + (12 if pm else 0)
    try:
        return dt.datetime(fields["year"], fields["month"], fields["day"], fields["hour"],
                           fields["minute"], fields["second"], fields["micro"])
    except ValueError:
        raise bad() from None


# to_string() writes more codes than the parser reads (ESP's "Date/Time Format Codes").
_OUTPUT_TOKEN = re.compile(r'"[^"]*"|HH24|HH12|HH|MI|SSSSS|SS|FF[1-9]?|YYYY|YYY|YY|Y|MONTH|MON|MM|RM|DDD|DD'
                           r'|DAY|DY|D|WW|W|Q|A\.M\.|P\.M\.|AM|PM', re.IGNORECASE)
_ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]


def _cased(text: str, written: str) -> str:
    """A name in the case its code was written in: ``MONTH`` MARCH, ``Month`` March, ``month`` march."""
    if written.isupper():
        return text.upper()
    return text.capitalize() if written[0].isupper() else text.lower()


def format_datetime(v: dt.datetime, fmt: str) -> str:
    """``v`` written with Oracle-style codes (ESP's date/time format codes): ``YYYY`` ``YYY`` ``YY``
    ``Y`` (the last digits of the year), ``Q`` (quarter), ``MM``, ``MON`` / ``MONTH`` (English
    names, ``MONTH`` padded with blanks to 9 characters), ``RM`` (roman month), ``WW`` (week of the
    year, from January 1st), ``W`` (week of the month), ``DDD`` (day of the year), ``DD``, ``D``
    (day of the week, Sunday 1), ``DAY`` (padded to 9) / ``DY``, ``HH24``, ``HH``/``HH12``
    (1-12), ``MI``, ``SS``, ``SSSSS`` (seconds since midnight), ``FF`` (milliseconds, or
    microseconds when the value has them) or ``FF1``-``FF9``, ``AM``/``PM``. Names follow the
    case of their code (``Month``: March); text in double quotes and other characters stand for
    themselves."""
    out = []
    for token, written in _format_tokens(fmt, _OUTPUT_TOKEN):
        if not token:
            out.append(written)
        elif token.startswith("FF"):
            digits = int(token[2]) if len(token) == 3 else (3 if v.microsecond % 1000 == 0 else 6)
            out.append(f"{v.microsecond:06d}{'0' * 3}"[:digits])
        elif token in ("AM", "PM", "A.M.", "P.M."):
            half = "P" if v.hour >= 12 else "A"
            out.append(_cased(f"{half}.M." if "." in token else f"{half}M", written))
        elif token in ("MON", "MONTH"):
            name = calendar.month_abbr[v.month] if token == "MON" else f"{calendar.month_name[v.month]:<9}"
            out.append(_cased(name, written))
        elif token in ("DY", "DAY"):
            name = calendar.day_abbr[v.weekday()] if token == "DY" else f"{calendar.day_name[v.weekday()]:<9}"
            out.append(_cased(name, written))
        elif token == "RM":
            out.append(_cased(_ROMAN[v.month - 1], written))
        else:
            value, width = {
                "YYYY": (v.year, 4), "YYY": (v.year % 1000, 3), "YY": (v.year % 100, 2), "Y": (v.year % 10, 1),
                "Q": ((v.month - 1) // 3 + 1, 1), "MM": (v.month, 2),
                "WW": ((v.timetuple().tm_yday - 1) // 7 + 1, 2), "W": ((v.day - 1) // 7 + 1, 1),
                "DDD": (v.timetuple().tm_yday, 3), "DD": (v.day, 2), "D": ((v.weekday() + 1) % 7 + 1, 1),
                "HH24": (v.hour, 2), "HH": ((v.hour % 12) or 12, 2), "HH12": ((v.hour % 12) or 12, 2),
                "MI": (v.minute, 2), "SS": (v.second, 2),
                "SSSSS": (v.hour * 3600 + v.minute * 60 + v.second, 5)}[token]
            out.append(f"{value:0{width}d}")
    return "".join(out)


_PRINTF_INTEGER = re.compile(r"([^%]*)%([-+ 0#]*)([0-9]*)(?:l|ll|h)?([dixX])([^%]*)")


def to_string(ctx: CallContext, v: object, *options: object) -> Optional[str]:
    """``to_string(value[, format[, time zone]])``: a date-time with an Oracle-style format (in UTC
    or the time zone), an integer or long with one printf-style code (``%05d``, ``%lld``, ``%x``);
    without a format, the plain text form."""
    if v is None:
        return None
    if not options:
        return to_text(v)
    fmt = need_str("to_string", 2, options[0])
    if isinstance(v, dt.datetime):
        return format_datetime(_local("to_string", v, options[1:]), fmt)
    m = _PRINTF_INTEGER.fullmatch(fmt)
    if isinstance(v, int) and not isinstance(v, bool) and m is not None and len(options) == 1:
        head, flags, width, code, tail = m.groups()
        return head + ("%" + flags + width + code.replace("i", "d")) % v + tail
    raise SplashError(f"to_string() with a format takes a date-time, or an integer with a printf code "
                      f"such as '%05d'; not {type(v).__name__} with '{fmt}'")


# Microseconds per unit of a number converted to each date-time type (ESP keeps a date in seconds,
# a timestamp in milliseconds and a bigdatetime in microseconds since 1970-01-01 UTC).
_NUMBER_UNIT = {"date": 1_000_000, "timestamp": 1_000, "bigdatetime": 1}


def _to_temporal(kind: str) -> Callable[..., dt.datetime]:
    """``to_<kind>(value[, format[, time zone]])``."""
    name = f"to_{kind}"

    def run(ctx: CallContext, v: object, *options: object) -> dt.datetime:
        if isinstance(v, str):
            t = parse_with_format(v, need_str(name, 2, options[0]), kind) if options \
                else cast(v, Type(kind))
            if len(options) > 1:
                t = _to_utc(name, t, options[1])
            return truncate_time(t, kind)  # type: ignore[arg-type]
        if options:
            raise SplashError(f"{name}(): a format and a time zone apply only to a string, not to "
                              f"{a_kind(v)}")
        if isinstance(v, dt.datetime):
            return truncate_time(v, kind)
        if is_integral(v) and not isinstance(v, Interval):
            return _from_micros(name, int(v) * _NUMBER_UNIT[kind])  # type: ignore[arg-type]
        raise SplashError(f"cannot convert {a_kind(v)} to {kind}")
    return run


_INTERVAL_TEXT = re.compile(r"\s*([+-]?[0-9]{1,19})\s*(DAY|HOUR|MINUTE|SECOND|MILLISECOND|MICROSECOND)S?\s*",
                            re.IGNORECASE)
_INTERVAL_UNIT = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000,
                  "SECOND": 1_000_000, "MILLISECOND": 1_000, "MICROSECOND": 1}


def to_interval(ctx: CallContext, v: object) -> Interval:
    """``to_interval(v)``: a number is microseconds (a float or decimal is cut toward zero, as
    ``cast``); a string is a number of microseconds or one or more ``n UNIT`` pairs, UNIT one of
    DAY(S) HOUR(S) MINUTE(S) SECOND(S) MILLISECOND(S) MICROSECOND(S) (``'1 HOUR 30 MINUTES'``)."""
    if isinstance(v, str) and re.search("[A-Za-z]", v):
        pos, total = 0, 0
        while pos < len(v):
            m = _INTERVAL_TEXT.match(v, pos)
            if m is None or m.end() == pos:
                raise SplashError(f"cannot convert '{v}' to interval")
            total += int(m.group(1)) * _INTERVAL_UNIT[m.group(2).upper()]
            pos = m.end()
        if not LONG_MIN <= total <= LONG_MAX:
            raise SplashError(f"cannot convert '{v}' to interval: out of range")
        return Interval(total)
    if not (is_number(v) or isinstance(v, (str, bool))):
        raise SplashError(f"cannot convert {a_kind(v)} to interval")
    return cast(v, Type("interval"))  # type: ignore[return-value]


def to_money(ctx: CallContext, v: object, scale: object = 4) -> Optional[Dec]:
    """``to_money(v[, n])``: ``v`` as money(n) (default money(4)), that is decimal(18, n) rounded
    half-up; null when it does not fit, like ``to_decimal``. ``n`` must be 1 to 15."""
    n = need_int("to_money", 2, scale)
    if not 1 <= n <= 15:
        raise SplashError(f"to_money(): the scale of money must be 1 to 15, not {n}")
    if not (is_number(v) or isinstance(v, (str, bool))):
        raise SplashError(f"cannot convert {a_kind(v)} to money")
    return cast(v, Type("money", (n,)))  # type: ignore[return-value]


def trunc(ctx: CallContext, v: object, digits: object = 0) -> object:
    """``trunc(x[, d])``: ``x`` cut toward zero to ``d`` decimal places (default 0; a negative
    ``d`` cuts digits left of the point: trunc(1299, -2) = 1200). The result has the type of ``x``
    (a decimal keeps its precision and scale)."""
    need_number("trunc", v)
    d = need_int("trunc", 2, digits)

    def cut(x: Decimal) -> Decimal:
        # more than 400 places left of the point leave nothing of a float, a decimal or a long
        return x.quantize(Decimal(1).scaleb(-d), ROUND_DOWN, EXACT) if d >= -400 else Decimal(0)

    if isinstance(v, float):
        if not math.isfinite(v) or d > 340:
            return v
        r = cut(Decimal(repr(v)))
        return 0.0 if r.is_zero() else float(r)
    if isinstance(v, Decimal):
        p, s = dec_type(v)
        return make_dec(v if d >= s else cut(v), p, s)
    if d >= 0:
        return v
    r = int(cut(Decimal(v)))  # type: ignore[arg-type]
    return type(v)(r)  # int, Long or Interval


ENTRIES: tuple[Builtin, ...] = (
    Builtin("dateadd", 3, 3, dateadd),
    Builtin("datediff", 3, 3, datediff),
    Builtin("datepart", 2, 2, datepart),
    Builtin("datefloor", 2, 3, datefloor, strict=False),
    Builtin("dateceiling", 2, 3, dateceiling, strict=False),
    Builtin("dayofweek", 1, 2, _component("dayofweek", _EXTRACT["weekday"]), spark="dayofweek"),
    Builtin("dayofyear", 1, 2, _component("dayofyear", _EXTRACT["dayofyear"]), spark="dayofyear"),
    Builtin("weekofyear", 1, 2, _component("weekofyear", _iso_week), spark="weekofyear"),
    Builtin("to_string", 1, 3, to_string, spark="cast(x as string)"),
    Builtin("year", 1, 2, _component("year", _EXTRACT["year"]), spark="year"),
    Builtin("month", 1, 2, _component("month", _EXTRACT["month"]), spark="month"),
    Builtin("dayofmonth", 1, 2, _component("dayofmonth", _EXTRACT["day"]), spark="dayofmonth"),
    Builtin("hour", 1, 2, _component("hour", _EXTRACT["hour"]), spark="hour"),
    Builtin("minute", 1, 2, _component("minute", _EXTRACT["minute"]), spark="minute"),
    Builtin("second", 1, 2, _component("second", _EXTRACT["second"]), spark="second"),
    Builtin("millisecond", 1, 2, _component("millisecond", _EXTRACT["millisecond"])),
    Builtin("microsecond", 1, 2, _component("microsecond", _EXTRACT["microsecond"])),
    Builtin("getdate", 0, 0, _clock("timestamp")),
    Builtin("sysdate", 0, 0, _clock("date")),
    Builtin("sysseconddate", 0, 0, _clock("date")),
    Builtin("systimestamp", 0, 0, _clock("timestamp")),
    Builtin("sysbigdatetime", 0, 0, _clock("bigdatetime")),
    Builtin("to_timestamp", 1, 3, _to_temporal("timestamp")),
    Builtin("to_date", 1, 3, _to_temporal("date")),
    Builtin("to_bigdatetime", 1, 3, _to_temporal("bigdatetime")),
    Builtin("to_interval", 1, 1, to_interval),
    Builtin("to_money", 1, 2, to_money),
    Builtin("trunc", 1, 2, trunc),
)
