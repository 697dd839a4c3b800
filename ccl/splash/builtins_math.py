"""Built-in numeric, bit and string functions beyond the core set of :mod:`ccl.splash.builtins`.

Trigonometry, cube root, logarithm and sign; greatest/least (maxof/minof); the ESP bit functions on
integers (32 bits) and longs (64 bits); char/chr, instr, patindex and the regular-expression
functions; hex_binary/hex_string/to_binary; random; distance/distancesquared.

ESP's exact semantics of most of these were not found in any retrieved reference page (the
catalogue, ccl/splash/functions_data.py, marks them "unverified"); where this module had to choose, the
comment at the function says what it chose and why. In short:

* float functions follow Java's ``Math`` (as Spark does): NaN outside the domain, infinity on
  overflow, never an error;
* bit positions count from 0 (the least significant bit); a position outside the value's width is
  an error; a negative shift count shifts the other way; ``bitshiftright`` keeps the sign;
* string positions count from 1 and 0 means "not found"; regular expressions are the ``regex``
  module's (Python's ``re`` syntax, close to Perl's; a match may take at most
  :data:`REGEX_SECONDS`); ``regexp_replace`` replaces the first match only;
* ``random()`` is not reproducible: a replay of the same input gives other numbers.
"""
from __future__ import annotations

import math
import random
import re
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Optional

import regex

from .calls import Builtin, CallContext, check_length, logarithm, need_int, need_number, need_str
from .operators import compare, to_float
from .values import (MAX_PRECISION, Interval, Long, SplashError, a_kind, dec_type, is_number,
                     make_dec, wrap32, wrap64)

# --- float functions ----------------------------------------------------------------------------


def _cbrt(x: float) -> float:
    """Cube root keeping the sign, as Java's Math.cbrt: exact for perfect cubes (the C library's
    cbrt may be one unit off, cbrt(27) = 3.0000000000000004), so the neighbour whose cube is
    closest to ``x`` is taken."""
    cbrt = getattr(math, "cbrt", None)  # Python 3.11+
    y = cbrt(x) if cbrt is not None else math.copysign(abs(x) ** (1 / 3), x)
    if y == 0.0 or not math.isfinite(y):
        return y
    target = Fraction(x)
    return min((y, math.nextafter(y, -math.inf), math.nextafter(y, math.inf)),
               key=lambda c: abs(Fraction(c) ** 3 - target))


def _float_fn(name: str, f: Callable[[float], float],
              overflow: Callable[[float], float] = lambda x: math.inf) -> Callable[..., float]:
    """A one-argument float function with Java's ``Math`` behaviour: an argument outside the
    domain (acos(2), sin(infinity)) gives NaN, an overflow gives ``overflow(x)`` (an infinity)."""
    def run(ctx: CallContext, v: object) -> float:
        need_number(name, v)
        x = to_float(v)
        try:
            return f(x)
        except ValueError:
            return math.nan
        except OverflowError:
            return overflow(x)
    return run


def _atan2(ctx: CallContext, y: object, x: object) -> float:
    need_number("atan2", y)
    need_number("atan2", x)
    # + 0.0 turns -0.0 into 0.0, as Spark does (atan2(-0.0, -1) is pi, not -pi).
    return math.atan2(to_float(y) + 0.0, to_float(x) + 0.0)


def _java_divide(a: float, b: float) -> float:
    """``a / b`` on doubles as Java computes it (division by zero gives an infinity or NaN)."""
    if b != 0.0:
        return a / b
    if a == 0.0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


_ln = logarithm("log", math.log)


def _log_fn(ctx: CallContext, a: object, *rest: object) -> Optional[float]:
    """``log(x)``: natural logarithm; ``log(base, x)``: logarithm to a base (base first, as in
    Spark, Oracle and PostgreSQL; ESP's argument order is unverified). Null when an argument is 0
    or negative, as Spark's non-ANSI ``log``."""
    if not rest:
        return _ln(ctx, a)
    b = rest[0]
    need_number("log", a)
    need_number("log", b)
    base, x = to_float(a), to_float(b)
    if base <= 0 or x <= 0:
        return None
    return _java_divide(math.log(x), math.log(base))


def _sign(ctx: CallContext, v: object) -> Optional[int]:
    """-1, 0 or 1 (an integer); NaN has no sign and gives null (the result type has no NaN)."""
    need_number("sign", v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return (v > 0) - (v < 0)  # type: ignore[operator]


# --- greatest / least ---------------------------------------------------------------------------


def _decimal_type_of(v: object) -> tuple[int, int]:
    """(precision, scale) a number takes when it meets a decimal (Spark's implicit widening)."""
    if isinstance(v, Decimal):
        return dec_type(v)
    return (20, 0) if isinstance(v, (Long, Interval)) else (10, 0)


def _widen(best: object, values: list[object]) -> object:
    """``best`` as the widest type of ``values``: float > decimal > long (interval) > integer."""
    if not all(is_number(v) for v in values):
        return best
    if any(isinstance(v, float) for v in values):
        return to_float(best)
    if any(isinstance(v, Decimal) for v in values):
        types = [_decimal_type_of(v) for v in values]
        scale = max(s for _, s in types)
        digits = max(p - s for p, s in types)
        return make_dec(best, min(digits + scale, MAX_PRECISION), min(scale, MAX_PRECISION))  # type: ignore[arg-type]
    if any(isinstance(v, Interval) for v in values):
        return Interval(best)  # type: ignore[call-overload]
    if any(isinstance(v, Long) for v in values):
        return Long(best)  # type: ignore[call-overload]
    return best


def _extreme(name: str, direction: int) -> Callable[..., object]:
    """greatest (direction 1) or least (-1) of the arguments, nulls skipped (null when all are
    null), as Spark's greatest/least; numbers of different types give the widest type."""
    def run(ctx: CallContext, *args: object) -> object:
        values = [a for a in args if a is not None]
        if not values:
            return None
        best = values[0]
        try:
            for v in values[1:]:
                if compare(v, best) == direction:
                    best = v
        except SplashError as e:
            raise SplashError(f"{name}(): {e.reason}") from None
        return _widen(best, values)
    return run


# --- bits ---------------------------------------------------------------------------------------


def _need_bits(name: str, i: int, v: object) -> tuple[int, int]:
    """An integer or long argument and its width in bits (32 or 64)."""
    if isinstance(v, (bool, Interval)) or not isinstance(v, int):
        raise SplashError(f"{name}() argument {i} must be an integer or a long, not {a_kind(v)}")
    return int(v), 64 if isinstance(v, Long) else 32


def _fit(v: int, width: int) -> int:
    """``v`` wrapped to ``width`` bits: an integer for 32, a :class:`Long` for 64."""
    return wrap64(v) if width == 64 else wrap32(v)


def _need_position(name: str, i: int, v: object, width: int) -> int:
    """A bit position from 0 (least significant) to ``width`` - 1 (ESP's numbering unverified)."""
    pos = need_int(name, i, v)
    if not 0 <= pos < width:
        raise SplashError(f"{name}(): bit position {pos} is outside 0..{width - 1}")
    return pos


def _bitwise(name: str, op: Callable[[int, int], int]) -> Callable[..., int]:
    """bitand/bitor/bitxor: a long when either argument is a long, else an integer."""
    def run(ctx: CallContext, a: object, b: object) -> int:
        (x, wx), (y, wy) = _need_bits(name, 1, a), _need_bits(name, 2, b)
        return _fit(op(x, y), max(wx, wy))
    return run


def _bitnot(ctx: CallContext, a: object) -> int:
    x, width = _need_bits("bitnot", 1, a)
    return _fit(~x, width)


def _bit_at(name: str, op: Callable[[int, int], int]) -> Callable[..., int]:
    """bitset/bitclear/bittoggle: ``op(value, 1 << position)``, of the value's type."""
    def run(ctx: CallContext, a: object, pos: object) -> int:
        x, width = _need_bits(name, 1, a)
        return _fit(op(x, 1 << _need_position(name, 2, pos, width)), width)
    return run


def _bittest(ctx: CallContext, a: object, pos: object) -> bool:
    """Whether the bit at a position is set (a boolean: the catalogue leaves the type open)."""
    x, width = _need_bits("bittest", 1, a)
    return bool((x >> _need_position("bittest", 2, pos, width)) & 1)


def _shift(name: str, left: bool) -> Callable[..., int]:
    """bitshiftleft/bitshiftright by a count: bits shifted out are lost (a count of the width or
    more gives 0, or -1 for a negative value shifted right); the right shift keeps the sign (as
    Java's >>); a negative count shifts the other way (ESP's behaviour unverified)."""
    def run(ctx: CallContext, a: object, count: object) -> int:
        x, width = _need_bits(name, 1, a)
        n = need_int(name, 2, count)
        to_left = left if n >= 0 else not left
        n = min(abs(n), width)
        return _fit(x << n if to_left else x >> n, width)
    return run


def _bitflag(name: str, width: int) -> Callable[..., int]:
    """bitflag/bitflaglong: only the bit at a position set."""
    def run(ctx: CallContext, pos: object) -> int:
        return _fit(1 << _need_position(name, 1, pos, width), width)
    return run


def _bitmask(name: str, width: int) -> Callable[..., int]:
    """bitmask/bitmasklong(first, last): the bits from ``first`` to ``last`` (inclusive, either
    order) set; ESP's exact arguments are unverified."""
    def run(ctx: CallContext, a: object, b: object) -> int:
        low, high = sorted((_need_position(name, 1, a, width), _need_position(name, 2, b, width)))
        return _fit((1 << (high + 1)) - (1 << low), width)
    return run


# --- characters and positions -------------------------------------------------------------------


def _char(name: str) -> Callable[..., str]:
    """char/chr: the character with a Unicode code point (the inverse of ascii())."""
    def run(ctx: CallContext, code: object) -> str:
        c = need_int(name, 1, code)
        if not 0 <= c <= 0x10FFFF or 0xD800 <= c <= 0xDFFF:
            raise SplashError(f"{name}(): {c} is not a character code")
        return chr(c)
    return run


def _instr(ctx: CallContext, s: object, sub: object, start: object = 1, nth: object = 1) -> int:
    """Oracle's INSTR (ESP's form unverified): the 1-based position of the ``nth`` occurrence of
    ``sub`` at or after ``start``; a negative ``start`` counts from the end and searches backwards;
    0 when not found (and for ``start`` 0); occurrences may overlap."""
    text, needle = need_str("instr", 1, s), need_str("instr", 2, sub)
    pos, count = need_int("instr", 3, start), need_int("instr", 4, nth)
    if count < 1:
        raise SplashError(f"instr(): the occurrence must be 1 or more, not {count}")
    if pos == 0:
        return 0
    found = -1
    if pos > 0:
        at = pos - 1
        for _ in range(count):
            found = text.find(needle, at)
            if found < 0:
                return 0
            at = found + 1
    else:
        end = len(text) + pos + len(needle)  # the match may start at the character -pos from the end
        for _ in range(count):
            found = text.rfind(needle, 0, max(end, 0))
            if found < 0:
                return 0
            end = found - 1 + len(needle)
    return found + 1


# --- regular expressions ------------------------------------------------------------------------

_MAX_PATTERN = 10_000  # characters
REGEX_SECONDS = 1.0  # longest one match may take: a pattern that backtracks for ever is an error


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern:
    try:
        return regex.compile(pattern)
    except (regex.error, RecursionError, OverflowError, ValueError) as e:
        raise SplashError(f"bad regular expression {pattern!r}: {e}") from None


def _need_regex(name: str, i: int, v: object) -> regex.Pattern:
    """A regular-expression argument, compiled (the ``regex`` module's syntax, which is Python's
    ``re`` syntax, close to Perl's)."""
    pattern = need_str(name, i, v)
    if len(pattern) > _MAX_PATTERN:
        raise SplashError(f"{name}(): regular expression longer than {_MAX_PATTERN} characters")
    return _compiled(pattern)


def _search(name: str, rx: regex.Pattern, text: str, pos: int = 0) -> Optional[regex.Match]:
    """The first match of ``rx`` in ``text`` at or after ``pos``; a match that takes longer than
    :data:`REGEX_SECONDS` is an error (the ``regex`` module can stop one, Python's ``re`` cannot)."""
    try:
        return rx.search(text, pos, timeout=REGEX_SECONDS)
    except TimeoutError:
        raise SplashError(f"{name}(): the regular expression took longer than {REGEX_SECONDS:g} s "
                          f"on a string of {len(text)} characters") from None


def _patindex(ctx: CallContext, s: object, pattern: object, start: object = 1) -> int:
    """1-based position of the first match of a regular expression at or after ``start`` (a start
    below 1 counts as 1), 0 when there is none. ESP's argument order is unverified."""
    text, rx = need_str("patindex", 1, s), _need_regex("patindex", 2, pattern)
    pos = max(need_int("patindex", 3, start), 1)
    if pos > len(text) + 1:
        return 0
    m = _search("patindex", rx, text, pos - 1)
    return m.start() + 1 if m else 0


def _regexp_search(ctx: CallContext, s: object, pattern: object) -> bool:
    """Whether a regular expression matches somewhere in the string (a boolean)."""
    rx = _need_regex("regexp_search", 2, pattern)
    return _search("regexp_search", rx, need_str("regexp_search", 1, s)) is not None


def _regexp_firstsearch(ctx: CallContext, s: object, pattern: object) -> Optional[str]:
    """The first substring that matches a regular expression, null when none does."""
    rx = _need_regex("regexp_firstsearch", 2, pattern)
    m = _search("regexp_firstsearch", rx, need_str("regexp_firstsearch", 1, s))
    return m.group(0) if m else None


_GROUP_REF = re.compile(r"\\(\d|\\)")


def _regexp_replace(ctx: CallContext, s: object, pattern: object, replacement: object) -> str:
    """The string with the first match of a regular expression replaced (ESP says "the match";
    whether it replaces all is unverified). In the replacement ``\\0``..``\\9`` stand for the match
    and its groups, ``\\\\`` for a backslash; everything else is literal."""
    text = need_str("regexp_replace", 1, s)
    rx = _need_regex("regexp_replace", 2, pattern)
    rep = need_str("regexp_replace", 3, replacement)
    for ref in _GROUP_REF.findall(rep):
        if ref != "\\" and int(ref) > rx.groups:
            raise SplashError(f"regexp_replace(): the replacement refers to group {ref}, but the "
                              f"expression has {rx.groups} group(s)")
    m = _search("regexp_replace", rx, text)
    if m is None:
        return text
    new = _GROUP_REF.sub(lambda g: "\\" if g.group(1) == "\\" else (m.group(int(g.group(1))) or ""), rep)
    return check_length(text[:m.start()] + new + text[m.end():])


# --- binary -------------------------------------------------------------------------------------

_HEX = re.compile(r"[0-9A-Fa-f]*")


def _hex_binary(ctx: CallContext, s: object) -> bytes:
    """The bytes a string of hex digits spells (an odd count gets a leading 0, as Spark's unhex)."""
    text = need_str("hex_binary", 1, s)
    if not _HEX.fullmatch(text):
        raise SplashError(f"hex_binary(): {text[:40]!r} is not a string of hex digits")
    return bytes.fromhex(text if len(text) % 2 == 0 else "0" + text)


def _hex_string(ctx: CallContext, b: object) -> str:
    """A binary value as upper-case hex digits (as Spark's hex)."""
    if not isinstance(b, (bytes, bytearray)):
        raise SplashError(f"hex_string() needs a binary value, not {a_kind(b)}")
    return check_length(bytes(b).hex().upper())


def _to_binary(ctx: CallContext, v: object) -> bytes:
    """A string as its UTF-8 bytes; a binary value unchanged. Other types are an error: how ESP
    turns a number into bytes is unknown, and guessing would give wrong bytes silently."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        try:
            return v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SplashError(f"to_binary(): cannot encode the string: {e.reason}") from None
    raise SplashError(f"to_binary() needs a string or a binary value, not {a_kind(v)}")


# --- random and geometry ------------------------------------------------------------------------

_RANDOM = random.Random()


def _random(ctx: CallContext, *seed: object) -> float:
    """A pseudo-random float in [0, 1). NOT reproducible: a replay gives other numbers. With a
    seed (unverified in ESP) the number is the first of a generator seeded with it, so the same
    seed always gives the same number."""
    if not seed:
        return _RANDOM.random()
    s = seed[0]
    need_number("random", s)
    key: int | str = int(s) if isinstance(s, int) else repr(to_float(s))  # type: ignore[arg-type]
    return random.Random(key).random()


def _deltas(name: str, args: tuple[object, ...]) -> list[float]:
    """Coordinate differences of two points: (x1, y1, x2, y2) or (x1, y1, z1, x2, y2, z2)."""
    if len(args) not in (4, 6):
        raise SplashError(f"{name}() takes the coordinates of two 2-D points (4 arguments) or two "
                          f"3-D points (6 arguments), not {len(args)}")
    for a in args:
        need_number(name, a)
    xs = [to_float(a) for a in args]
    half = len(xs) // 2
    return [q - p for p, q in zip(xs[:half], xs[half:])]


def _distance(ctx: CallContext, *args: object) -> float:
    """Euclidean distance between two points (argument order unverified in ESP)."""
    return math.hypot(*_deltas("distance", args))


def _distance_squared(ctx: CallContext, *args: object) -> float:
    """Squared euclidean distance between two points."""
    return sum(d * d for d in _deltas("distancesquared", args))


ENTRIES: tuple[Builtin, ...] = (
    Builtin("acos", 1, 1, _float_fn("acos", math.acos), spark="acos"),
    Builtin("asin", 1, 1, _float_fn("asin", math.asin), spark="asin"),
    Builtin("atan", 1, 1, _float_fn("atan", math.atan), spark="atan"),
    Builtin("atan2", 2, 2, _atan2, spark="atan2"),
    Builtin("cos", 1, 1, _float_fn("cos", math.cos), spark="cos"),
    Builtin("cosh", 1, 1, _float_fn("cosh", math.cosh), spark="cosh"),
    Builtin("sin", 1, 1, _float_fn("sin", math.sin), spark="sin"),
    Builtin("sinh", 1, 1, _float_fn("sinh", math.sinh, lambda x: math.copysign(math.inf, x)),
            spark="sinh"),
    Builtin("tan", 1, 1, _float_fn("tan", math.tan), spark="tan"),
    Builtin("tanh", 1, 1, _float_fn("tanh", math.tanh), spark="tanh"),
    Builtin("cbrt", 1, 1, _float_fn("cbrt", _cbrt), spark="cbrt"),
    Builtin("log", 1, 2, _log_fn, spark="log"),
    Builtin("sign", 1, 1, _sign),
    Builtin("greatest", 2, None, _extreme("greatest", 1), strict=False, spark="greatest"),
    Builtin("least", 2, None, _extreme("least", -1), strict=False, spark="least"),
    Builtin("maxof", 2, None, _extreme("maxof", 1), strict=False, spark="greatest"),
    Builtin("minof", 2, None, _extreme("minof", -1), strict=False, spark="least"),
    Builtin("bitand", 2, 2, _bitwise("bitand", lambda x, y: x & y)),
    Builtin("bitor", 2, 2, _bitwise("bitor", lambda x, y: x | y)),
    Builtin("bitxor", 2, 2, _bitwise("bitxor", lambda x, y: x ^ y)),
    Builtin("bitnot", 1, 1, _bitnot),
    Builtin("bitclear", 2, 2, _bit_at("bitclear", lambda x, m: x & ~m)),
    Builtin("bitset", 2, 2, _bit_at("bitset", lambda x, m: x | m)),
    Builtin("bittoggle", 2, 2, _bit_at("bittoggle", lambda x, m: x ^ m)),
    Builtin("bittest", 2, 2, _bittest),
    Builtin("bitshiftleft", 2, 2, _shift("bitshiftleft", left=True)),
    Builtin("bitshiftright", 2, 2, _shift("bitshiftright", left=False)),
    Builtin("bitflag", 1, 1, _bitflag("bitflag", 32)),
    Builtin("bitflaglong", 1, 1, _bitflag("bitflaglong", 64)),
    Builtin("bitmask", 2, 2, _bitmask("bitmask", 32)),
    Builtin("bitmasklong", 2, 2, _bitmask("bitmasklong", 64)),
    Builtin("char", 1, 1, _char("char")),
    Builtin("chr", 1, 1, _char("chr")),
    Builtin("instr", 2, 4, _instr),
    Builtin("patindex", 2, 3, _patindex),
    Builtin("regexp_firstsearch", 2, 2, _regexp_firstsearch),
    Builtin("regexp_replace", 3, 3, _regexp_replace),
    Builtin("regexp_search", 2, 2, _regexp_search),
    Builtin("hex_binary", 1, 1, _hex_binary),
    Builtin("hex_string", 1, 1, _hex_string, spark="hex"),
    Builtin("to_binary", 1, 1, _to_binary),
    Builtin("random", 0, 1, _random),
    Builtin("distance", 4, 6, _distance),
    Builtin("distancesquared", 4, 6, _distance_squared),
)
