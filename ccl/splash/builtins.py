"""The SPLASH built-in functions the interpreter knows, with Spark's non-ANSI semantics.

Each :class:`Builtin` takes the call context and the evaluated arguments. A *strict* built-in
returns null as soon as one argument is null; the others (isnull, coalesce, containers, print)
handle nulls themselves. ``spark`` names the Spark SQL function with the same semantics, when there
is one. docs/functions.md describes every entry.
"""
from __future__ import annotations

import datetime as dt
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Callable, Optional

from .types import Type
from . import builtins_math
from . import builtins_time
from . import caches
from . import error_records
from . import windows
from .calls import Builtin, CallContext, check_length, logarithm, need_int, need_number, need_str
from .convert import cast, coerce, to_decimal, to_text
from .operators import arithmetic, java_pow, like, to_float
from .values import (EXACT, INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, MAX_CONTAINER, MAX_STRING, Dec,
                     Dictionary, Interval, Long, Record, SplashError, a_kind, dec_type, dictionary_key, is_integral,
                     make_dec, wrap32, wrap64)


# --- strings ------------------------------------------------------------------------------------

def spark_substring(s: str, pos: int, length: int = INT_MAX) -> str:
    """Spark's ``substring(s, pos, len)``: 1-based ``pos``; 0 acts as 1; a negative ``pos`` counts
    from the end; a start before the string shortens the result; ``len`` < 1 gives ''."""
    start = pos - 1 if pos > 0 else (len(s) + pos if pos < 0 else 0)
    end = max(min(start + length, INT_MAX), INT_MIN)
    start = max(start, 0)
    return s[start:end] if start < end else ""


def _ascii(ctx: CallContext, s: object) -> int:
    s = need_str("ascii", 1, s)
    return ord(s[0]) if s else 0


def _substr(ctx: CallContext, s: object, pos: object, length: object = INT_MAX) -> str:
    return spark_substring(need_str("substr", 1, s), need_int("substr", 2, pos),
                           need_int("substr", 3, length))


def _left(ctx: CallContext, s: object, k: object) -> str:
    return spark_substring(need_str("left", 1, s), 1, need_int("left", 2, k))


def _right(ctx: CallContext, s: object, k: object) -> str:
    text, count = need_str("right", 1, s), need_int("right", 2, k)
    return "" if count <= 0 else spark_substring(text, -count)


def _string_fn(name: str, f: Callable[[str], str]) -> Callable[..., str]:
    def run(ctx: CallContext, s: object) -> str:
        return f(need_str(name, 1, s))
    return run


def _replace(ctx: CallContext, s: object, search: object, rep: object) -> str:
    text, old, new = (need_str("replace", i + 1, v) for i, v in enumerate((s, search, rep)))
    if not old:
        return text
    if len(new) > len(old) and len(text) // len(old) * (len(new) - len(old)) + len(text) > MAX_STRING:
        raise SplashError(f"string longer than {MAX_STRING} characters")
    return text.replace(old, new)


def _like(ctx: CallContext, s: object, p: object) -> Optional[bool]:
    return like(s, p)


def _concat(ctx: CallContext, *args: object) -> str:
    return check_length("".join(need_str("concat", i + 1, a) for i, a in enumerate(args)))


# --- numbers ------------------------------------------------------------------------------------

def _abs(ctx: CallContext, v: object) -> object:
    need_number("abs", v)
    if isinstance(v, Interval):
        return Interval(wrap64(abs(v)))
    if isinstance(v, Long):
        return wrap64(abs(v))
    if isinstance(v, int):
        return wrap32(abs(v))
    if isinstance(v, Dec):
        return make_dec(abs(v), v.precision, v.scale)
    return abs(v)  # type: ignore[arg-type]


def _ceil_floor(name: str, rounding: str) -> Callable[..., object]:
    def run(ctx: CallContext, v: object) -> object:
        need_number(name, v)
        if isinstance(v, float):
            if math.isnan(v):
                return Long(0)
            if v >= LONG_MAX:
                return Long(LONG_MAX)
            if v <= LONG_MIN:
                return Long(LONG_MIN)
            return Long(math.ceil(v) if rounding == ROUND_CEILING else math.floor(v))
        if isinstance(v, Decimal):
            p, s = dec_type(v)
            return make_dec(v.to_integral_value(rounding=rounding), min(p - s + 1, 38), 0)
        return Long(v)  # type: ignore[arg-type]
    return run


def _round(ctx: CallContext, v: object, digits: object = 0) -> object:
    need_number("round", v)
    d = need_int("round", 2, digits)
    if isinstance(v, float):
        if not math.isfinite(v) or d > 340:
            return v
        if d < -340:
            return 0.0
        r = EXACT.quantize(Decimal(repr(v)), Decimal(1).scaleb(-d))
        return 0.0 if r.is_zero() else float(r)
    if isinstance(v, Decimal):
        p, s = dec_type(v)
        if d < 0:
            precision, scale = min(max(p - s + 1, -d + 1), 38), 0
        else:
            precision, scale = min(p - s + 1 + min(s, d), 38), min(s, d)
        if d > s:
            return make_dec(v, precision, scale)
        r = EXACT.quantize(v, Decimal(1).scaleb(-d)) if d >= -40 else Decimal(0)
        return make_dec(r, precision, scale)
    if d >= 0:
        return v
    r = int(EXACT.quantize(Decimal(v), Decimal(1).scaleb(-d))) if d >= -40 else 0  # type: ignore[arg-type]
    if isinstance(v, Interval):
        return Interval(wrap64(r))
    return wrap64(r) if isinstance(v, Long) else wrap32(r)


def _power(ctx: CallContext, a: object, b: object) -> float:
    need_number("power", a)
    need_number("power", b)
    return java_pow(to_float(a), to_float(b))


def _sqrt(ctx: CallContext, v: object) -> float:
    need_number("sqrt", v)
    x = to_float(v)
    return math.nan if x < 0 or math.isnan(x) else math.sqrt(x)


def _exp(ctx: CallContext, v: object) -> float:
    need_number("exp", v)
    try:
        return math.exp(to_float(v))
    except OverflowError:
        return math.inf


def _mod(ctx: CallContext, a: object, b: object) -> object:
    need_number("mod", a)
    need_number("mod", b)
    return arithmetic("%", a, b)


# --- nulls and conversions ----------------------------------------------------------------------

def _first_non_null(ctx: CallContext, *args: object) -> object:
    """The first argument that is not null (the interpreter evaluates the arguments lazily)."""
    return next((a for a in args if a is not None), None)


def is_null(ctx: CallContext, v: object) -> bool:
    """``isnull(v)`` (compiled code tests ``v is None`` itself, without calling this)."""
    return v is None


def _to_string(ctx: CallContext, v: object) -> Optional[str]:
    return to_text(v)


def _converter(type_name: str) -> Callable[..., object]:
    t = Type(type_name)

    def run(ctx: CallContext, v: object) -> object:
        return cast(v, t)
    return run


def _to_decimal(ctx: CallContext, v: object, p: object, s: object) -> Optional[Dec]:
    return to_decimal(v, need_int("to_decimal", 2, p), need_int("to_decimal", 3, s))


# --- date-times ---------------------------------------------------------------------------------

def _now(ctx: CallContext) -> dt.datetime:
    return ctx.now()


def _next_value(ctx: CallContext) -> int:
    return ctx.next_in_sequence()


def _row_id(ctx: CallContext, record: object) -> Optional[int]:
    row_id = ctx.current_row_id()
    return None if row_id is None else Long(row_id)


# --- containers and output ----------------------------------------------------------------------

def _size(ctx: CallContext, c: object) -> Optional[int]:
    if c is None:
        return None
    if isinstance(c, list) or (isinstance(c, dict) and not isinstance(c, Record)):
        return len(c)
    raise SplashError(f"size() needs a vector or a dictionary, not {a_kind(c)}")


def _need_vector(name: str, v: object) -> list:
    if not isinstance(v, list):
        raise SplashError(f"{name}() needs a vector, not {a_kind(v)}")
    return v


def _push_back(ctx: CallContext, v: object, item: object) -> list:
    vec = _need_vector("push_back", v)
    if len(vec) >= MAX_CONTAINER:
        raise SplashError(f"vector longer than {MAX_CONTAINER} elements")
    vec.append(coerce(item, getattr(vec, "elem", Type("any")), "a vector element"))
    return vec


def _resize(ctx: CallContext, v: object, size: object) -> list:
    vec = _need_vector("resize", v)
    if not is_integral(size) or not 0 <= size <= MAX_CONTAINER:  # type: ignore[operator]
        raise SplashError(f"resize() needs a size between 0 and {MAX_CONTAINER}, not {size}")
    del vec[size:]  # type: ignore[misc]
    vec.extend([None] * (size - len(vec)))  # type: ignore[operator]
    return vec


def _remove(ctx: CallContext, d: object, key: object) -> None:
    if not isinstance(d, Dictionary) and not (isinstance(d, dict) and not isinstance(d, Record)):
        raise SplashError(f"remove() needs a dictionary, not {a_kind(d)}")
    d.pop(dictionary_key(coerce(key, getattr(d, "key", Type("any")), "a dictionary key")), None)
    return None


def _clear(ctx: CallContext, c: object) -> None:
    if not isinstance(c, list) and not (isinstance(c, dict) and not isinstance(c, Record)):
        raise SplashError(f"clear() needs a vector or a dictionary, not {a_kind(c)}")
    c.clear()
    return None


def _print(ctx: CallContext, *args: object) -> None:
    ctx.print("".join("" if a is None else (to_text(a) or "") for a in args))
    return None


def _get_opcode(ctx: CallContext, r: object) -> Optional[int]:
    if r is None:
        return None
    if not isinstance(r, Record):
        raise SplashError(f"getOpcode() needs a record, not {a_kind(r)}")
    return r.opcode if r.opcode is not None else 1


_OPCODE_VALUES = (1, 3, 5, 7, 13)


def _set_opcode(ctx: CallContext, r: object, code: object) -> object:
    """Set the record's opcode in place and return the record (as ESP's setOpcode)."""
    if r is None:
        return None
    if not isinstance(r, Record):
        raise SplashError(f"setOpcode() needs a record, not {a_kind(r)}")
    if (type(code) is not int and not is_integral(code)) or code not in _OPCODE_VALUES:
        raise SplashError(f"setOpcode(): {code!r} is not an opcode (insert, update, delete, upsert, "
                          "safedelete)")
    r.opcode = int(code)  # type: ignore[arg-type]
    return r


def _table(*entries: Builtin) -> dict[str, Builtin]:
    return {b.name: b for b in entries}


BUILTINS: dict[str, Builtin] = _table(
    Builtin("ascii", 1, 1, _ascii, spark="ascii"),
    Builtin("substr", 2, 3, _substr, spark="substring"),
    Builtin("left", 2, 2, _left, spark="left"),
    Builtin("right", 2, 2, _right, spark="right"),
    Builtin("upper", 1, 1, _string_fn("upper", str.upper), spark="upper"),
    Builtin("lower", 1, 1, _string_fn("lower", str.lower), spark="lower"),
    Builtin("length", 1, 1, _string_fn("length", len), spark="char_length"),  # type: ignore[arg-type]
    Builtin("trim", 1, 1, _string_fn("trim", lambda s: s.strip(" ")), spark="trim"),
    Builtin("ltrim", 1, 1, _string_fn("ltrim", lambda s: s.lstrip(" ")), spark="ltrim"),
    Builtin("rtrim", 1, 1, _string_fn("rtrim", lambda s: s.rstrip(" ")), spark="rtrim"),
    Builtin("replace", 3, 3, _replace, spark="replace"),
    Builtin("like", 2, 2, _like, spark="like"),
    Builtin("concat", 1, None, _concat, spark="concat"),
    Builtin("abs", 1, 1, _abs, spark="abs"),
    Builtin("ceil", 1, 1, _ceil_floor("ceil", ROUND_CEILING), spark="ceil"),
    Builtin("floor", 1, 1, _ceil_floor("floor", ROUND_FLOOR), spark="floor"),
    Builtin("round", 1, 2, _round, spark="round"),
    Builtin("power", 2, 2, _power, spark="power"),
    Builtin("sqrt", 1, 1, _sqrt, spark="sqrt"),
    Builtin("exp", 1, 1, _exp, spark="exp"),
    Builtin("ln", 1, 1, logarithm("ln", math.log), spark="ln"),
    Builtin("log10", 1, 1, logarithm("log10", math.log10), spark="log10"),
    Builtin("pi", 0, 0, lambda ctx: math.pi, spark="pi"),
    Builtin("mod", 2, 2, _mod, spark="mod"),
    Builtin("isnull", 1, 1, is_null, strict=False, spark="isnull"),
    Builtin("firstnonnull", 1, None, _first_non_null, strict=False, spark="coalesce"),
    Builtin("coalesce", 1, None, _first_non_null, strict=False, spark="coalesce"),
    Builtin("string", 1, 1, _to_string, spark="cast(x as string)"),
    Builtin("to_integer", 1, 1, _converter("integer"), spark="cast(x as int)"),
    Builtin("to_long", 1, 1, _converter("long"), spark="cast(x as bigint)"),
    Builtin("to_float", 1, 1, _converter("float"), spark="cast(x as double)"),
    Builtin("to_boolean", 1, 1, _converter("boolean"), spark="cast(x as boolean)"),
    Builtin("to_decimal", 3, 3, _to_decimal, spark="cast(x as decimal(p, s))"),
    Builtin("now", 0, 0, _now, spark="current_timestamp"),
    Builtin("nextval", 0, 0, _next_value),
    Builtin("uniqueval", 0, 0, _next_value),
    Builtin("getrowid", 1, 1, _row_id, strict=False),
    Builtin("size", 1, 1, _size, strict=False),
    Builtin("push_back", 2, 2, _push_back, strict=False),
    Builtin("resize", 2, 2, _resize, strict=False),
    Builtin("remove", 2, 2, _remove, strict=False),
    Builtin("clear", 1, 1, _clear, strict=False),
    Builtin("print", 1, None, _print, strict=False),
    Builtin("getopcode", 1, 1, _get_opcode, strict=False),
    Builtin("setopcode", 2, 2, _set_opcode, strict=False),
    Builtin("cachesize", 1, 1, caches.cache_size, strict=False),
    Builtin("getcache", 2, 2, caches.get_cache, strict=False),
    Builtin("deletecache", 2, 2, caches.delete_cache, strict=False),
    Builtin("insertcache", 2, 2, caches.insert_cache, strict=False),
    Builtin("keycache", 2, 2, caches.key_cache, strict=False),
    Builtin("insertintocache", 1, 2, caches.insert_into_cache, strict=False),
)


def lookup(name: str) -> Optional[Builtin]:
    """The built-in called ``name`` (case-insensitive), or None."""
    return BUILTINS.get(name.lower())


def register(*entries: Builtin) -> None:
    """Add built-ins defined in other modules."""
    for b in entries:
        BUILTINS[b.name] = b


register(*builtins_math.ENTRIES, *builtins_time.ENTRIES, *windows.entries(),
         Builtin("recorddatatostring", 2, 3, error_records.record_data_to_string),
         Builtin("recorddatatorecord", 2, 3, error_records.record_data_to_record))
