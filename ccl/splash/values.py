"""SPLASH run-time values: errors, the Python representation of each CCL type, and type descriptors.

A value is a plain Python object; where one Python type stands for several CCL types a subclass
carries the difference:

| CCL type | Python value |
|---|---|
| null | ``None`` |
| integer (32-bit) | ``int`` |
| long (64-bit) | :class:`Long` (an ``int``) |
| interval (microseconds) | :class:`Interval` (an ``int``) |
| float | ``float`` |
| money(n), decimal(p, s) | :class:`Dec` (a ``decimal.Decimal`` that knows its precision and scale) |
| string, boolean | ``str``, ``bool`` |
| date, timestamp, bigdatetime | naive ``datetime.datetime`` in UTC |
| vector, dictionary, record | :class:`Vector` (a ``list``), :class:`Dictionary` (a ``dict``), :class:`Record` |

``money(n)`` is ``decimal(18, n)`` (18 digits always fit ESP's 64-bit money); ``money`` is
``money(4)``. Values coming from outside (input rows, global values) are brought into this form by
:func:`from_python`.
"""
from __future__ import annotations

import copyreg
import datetime as dt
import re
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Iterable, Optional

from ..syntax import nodes as n
from .types import ANY, Type, scalar

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
MAX_PRECISION = 38          # Spark's largest decimal precision
MONEY_PRECISION = 18        # money(n) is decimal(18, n)
MAX_STRING = 10_000_000     # longest string a SPLASH program may build (characters)
MAX_CONTAINER = 1_000_000   # most elements a vector may be resized to

# Exact arithmetic on decimals of up to 38 digits (and on doubles written as decimals), rounding
# half-up where a result is cut to a scale.
EXACT = Context(prec=1000, rounding=ROUND_HALF_UP, Emax=999_999, Emin=-999_999)


class SplashError(Exception):
    """A SPLASH run-time failure (bad cast, unknown name, recursion, budget, ...): ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BudgetExhausted(SplashError):
    """The step budget of one call ran out (an endless or very long loop)."""


class Long(int):
    """A 64-bit SPLASH ``long``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Long({int(self)})"


class Interval(int):
    """A SPLASH ``interval``: a number of microseconds."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Interval({int(self)})"


def _reduce_int(value: int) -> tuple:
    """How pickle writes a :class:`Long` or :class:`Interval`: its class called on its int.
    Engine state is pickled value by value (runtime/state/store.py), and the default
    (``object.__reduce_ex__``: ``copyreg.__newobj__``, the class's new-args and state) made a
    pickle of an aggregate group holding 14 Longs cost 3 times the same group of ints (19 against
    6.4 µs); with this, 14 µs. What was pickled the old way loads as before."""
    return type(value), (int(value),)


copyreg.pickle(Long, _reduce_int)
copyreg.pickle(Interval, _reduce_int)


class Dec(Decimal):
    """A ``decimal(precision, scale)`` value (money(n) is decimal(18, n)); build it with :func:`make_dec`."""

    __slots__ = ("precision", "scale")

    def __repr__(self) -> str:
        return f"Dec('{self}', {self.precision}, {self.scale})"

    def __reduce__(self):  # type: ignore[override]
        # Decimal's own reduce would drop precision and scale (engine states are pickled).
        return (make_dec, (Decimal(str(self)), self.precision, self.scale))


class Vector(list):
    """A SPLASH vector; ``elem`` is the declared element type (ANY when not known)."""

    def __init__(self, items: Iterable[object] = (), elem: Type = ANY) -> None:
        super().__init__(items)
        self.elem = elem


class Dictionary(dict):
    """A SPLASH dictionary; ``key`` and ``value`` are the declared types (ANY when not known)."""

    def __init__(self, items: Iterable[tuple[object, object]] = (), key: Type = ANY,
                 value: Type = ANY) -> None:
        super().__init__(items)
        self.key = key
        self.value = value


class Record(dict):
    """A SPLASH record: field name -> value, in field order; ``types`` holds declared field types.

    ``opcode`` is the record's operation code once ``setOpcode`` set it (or the opcode of the event
    an input row came with), else ``None`` (an ``output`` then counts it as an insert)."""

    opcode: Optional[int] = None
    # set on the records of input rows (read-only, and the source they come from): class-level
    # defaults make reading them on any other record a plain attribute read
    readonly: bool = False
    source: Optional[str] = None

    def __init__(self, items: Iterable[tuple[str, object]] = (), types: Optional[dict[str, Type]] = None,
                 key_fields: tuple[str, ...] = ()) -> None:
        super().__init__(items)
        self.types = types or {}
        self.key_fields = key_fields

    def copy_record(self) -> "Record":
        """A writable copy (same fields, types, key fields and opcode)."""
        out = _new_record(Record)
        dict.update(out, self)
        # records never change their types dict in place (a new record gets its own or a shared
        # one, as input rows share their source's): shared, not copied
        out.types, out.key_fields = self.types, self.key_fields
        if self.opcode is not None:
            out.opcode = self.opcode
        return out


# Records made on the hot paths (a record literal, an input row, a copy) skip __init__: half the
# cost of making one. Whoever does so sets ``types`` and ``key_fields``.
_new_record = Record.__new__


class RecordKey:
    """A record used as a dictionary key (``dictionary(typeof(S), integer) d; d[S] := 1;``, as in
    SAP's examples): equal and hashed by its key fields (all fields when it has none), a copy of
    the record kept so that iterating the dictionary gives records back."""

    __slots__ = ("record", "ident")

    def __init__(self, record: Record) -> None:
        self.record = record.copy_record()
        fields = record.key_fields or tuple(record)
        self.ident = tuple((f, record.get(f)) for f in fields)

    def __hash__(self) -> int:
        return hash(self.ident)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordKey) and self.ident == other.ident

    def __getstate__(self) -> tuple:
        return (self.record, self.ident)

    def __setstate__(self, state: tuple) -> None:
        self.record, self.ident = state


def dictionary_key(key: object) -> object:
    """``key`` as a dictionary stores it (a record by its key fields)."""
    return RecordKey(key) if isinstance(key, Record) else key


def stored_key(key: object) -> object:
    """A dictionary's stored key as SPLASH sees it (the record of a :class:`RecordKey`)."""
    return key.record.copy_record() if isinstance(key, RecordKey) else key


def wrap32(v: int) -> int:
    """``v`` wrapped to a 32-bit two's-complement integer (Java ``int`` overflow)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v > INT_MAX else v


def wrap64(v: int) -> Long:
    """``v`` wrapped to a 64-bit two's-complement long (Java ``long`` overflow)."""
    v &= 0xFFFFFFFFFFFFFFFF
    return Long(v - (1 << 64) if v > LONG_MAX else v)


def make_dec(value: Decimal | int, precision: int, scale: int) -> Optional[Dec]:
    """``value`` rounded half-up to ``scale`` digits, or None when it needs more than ``precision``
    digits (Spark's non-ANSI decimal overflow)."""
    try:
        q = EXACT.quantize(Decimal(value), Decimal(1).scaleb(-scale))
    except InvalidOperation:
        return None
    if not q.is_finite():
        return None
    if q.is_zero():
        q = q.copy_abs()
    elif len(q.as_tuple().digits) > precision:
        return None
    out = Dec(q)
    out.precision, out.scale = precision, scale
    return out


def dec_type(d: Decimal) -> tuple[int, int]:
    """(precision, scale) of a decimal: its own for a :class:`Dec`, the smallest that holds it otherwise."""
    if isinstance(d, Dec):
        return d.precision, d.scale
    _, digits, exp = d.as_tuple()
    if not isinstance(exp, int):
        raise SplashError(f"decimal value {d} is not a number")
    scale = max(0, -exp)
    precision = max(len(digits) + max(exp, 0), scale, 1)
    if precision > MAX_PRECISION:
        raise SplashError(f"decimal value {d} has more than {MAX_PRECISION} digits")
    return precision, scale


def as_dec(v: int | Decimal) -> Dec:
    """An integer, long or decimal as a :class:`Dec` (integer is decimal(10,0), long decimal(20,0))."""
    if isinstance(v, Dec):
        return v
    if isinstance(v, Decimal):
        p, s = dec_type(v)
    else:
        p, s = (20, 0) if isinstance(v, (Long, Interval)) else (10, 0)
    out = make_dec(v, p, s)
    assert out is not None
    return out


def dec_to_float(d: Decimal) -> float:
    """A decimal as the nearest double (as Spark converts it)."""
    return float(d)


def kind(v: object) -> str:
    """The CCL type name of a value, for messages: integer, long, float, decimal, string, ..."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, Long):
        return "long"
    if isinstance(v, Interval):
        return "interval"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "float"
    if isinstance(v, Decimal):
        return "decimal"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dt.datetime):
        return "timestamp"
    if isinstance(v, list):
        return "vector"
    if isinstance(v, Record):
        return "record"
    if isinstance(v, dict):
        return "dictionary"
    if isinstance(v, (bytes, bytearray)):
        return "binary"
    return type(v).__name__


def a_kind(v: object) -> str:
    """The type name of a value with its article, for messages: ``an integer``, ``a string``."""
    k = kind(v)
    return f"an {k}" if k[0] in "aeiou" else f"a {k}"


def is_number(v: object) -> bool:
    """Whether ``v`` is an integer, long, interval, float or decimal (booleans are not numbers)."""
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def is_integral(v: object) -> bool:
    """Whether ``v`` is an integer, long or interval."""
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------------

_TYPE_TEXT = re.compile(r"\s*([A-Za-z_]\w*)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


def as_type(t: object) -> Type:
    """A type descriptor from a :class:`Type`, a type node, or text such as ``'money(2)'``."""
    if isinstance(t, Type):
        return normal_type(t)
    if isinstance(t, str):
        m = _TYPE_TEXT.match(t)
        if not m:
            raise ValueError(f"not a type: {t!r}")
        args = tuple(int(a) for a in m.groups()[1:] if a is not None)
        return normal_type(scalar(m.group(1), args))
    if isinstance(t, n.Node):
        return resolve_type(t, {})
    raise ValueError(f"not a type: {t!r}")


def normal_type(t: Type) -> Type:
    """``money`` -> ``money(4)``, ``decimal`` -> ``decimal(10, 0)``; other types unchanged."""
    if t.name == "money" and not t.args:
        return Type("money", (4,))
    if t.name == "decimal" and len(t.args) != 2:
        return Type("decimal", (10, 0))
    return t


def decimal_args(t: Type) -> tuple[int, int]:
    """(precision, scale) of a money or decimal type."""
    t = normal_type(t)
    if t.name == "money":
        return MONEY_PRECISION, t.args[0]
    return t.args[0], t.args[1]


def resolve_type(spec: n.Node, typedefs: dict[str, Type],
                 sources: Optional[dict[str, dict[str, Type]]] = None) -> Type:
    """The type a type node names; unknown names (and event caches) give ANY."""
    if isinstance(spec, n.NamedType):
        if spec.name in typedefs:
            return typedefs[spec.name]
        return normal_type(scalar(spec.name, tuple(spec.args)))
    if isinstance(spec, n.DictType):
        return Type("dictionary", (resolve_type(spec.key, typedefs, sources),
                                   resolve_type(spec.value, typedefs, sources)))
    if isinstance(spec, n.VectorType):
        return Type("vector", (resolve_type(spec.element, typedefs, sources),))
    if isinstance(spec, n.RecordType):
        return Type("record", fields=tuple((f.name.name, resolve_type(f.type, typedefs, sources))
                                           for f in spec.key_fields + spec.fields))
    if isinstance(spec, n.TypeOf):
        cols = (sources or {}).get(spec.source.name)
        return Type("record", fields=tuple(cols.items())) if cols else Type("record")
    return ANY
