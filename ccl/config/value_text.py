"""Reading a CCL value of a given built-in type from text (a .ccr parameter, --param, a file field).

``parse_value(text, type_name, args)`` returns the Python value or raises ``ValueError`` whose message
says what was wrong, for example ``'4x' is not an integer``. Types and their Python values:

| CCL type | text | Python value |
|---|---|---|
| integer | ``-12`` (32-bit) | int |
| long | ``12``, ``12L`` (64-bit) | int |
| float | ``1.5``, ``2e3``, ``.5`` | float |
| money, money(n) | ``12.3456`` (at most n decimals, 4 by default) | Decimal |
| decimal(p, s) | ``123.45`` (at most p digits, s after the point) | Decimal |
| boolean | ``true``/``false`` (any case), ``1``/``0`` | bool |
| string | anything | str |
| date | ``2024-03-01T12:00:00`` (a space for T works too; a date alone is midnight) | datetime |
| timestamp, msdate | ``2024-03-01T12:00:00.123`` | datetime (milliseconds) |
| bigdatetime | ``2024-03-01T12:00:00.123456`` | datetime (microseconds) |
| interval | ``30000000`` (microseconds) or ``30 SECONDS``, ``1 MINUTE 30 SEC`` | int microseconds |
| binary | hex digits, ``0x`` optional | bytes |

``double`` (HANA Smart Data Streaming) is read as float and ``seconddate`` as date.
"""
from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Optional, Sequence

from ..syntax.nodes import Interval
from ..syntax.parser import INTERVAL_UNITS

SCALAR_TYPES = ("integer", "long", "float", "money", "decimal", "boolean", "string", "date",
                "timestamp", "msdate", "bigdatetime", "interval", "binary")
ALIASES = {"double": "float", "seconddate": "date"}
INTEGER_TYPES = ("integer", "long")

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?)?")
_INTERVAL_PART = re.compile(r"(\d+)\s*([A-Za-z]+)")

_LIMITS = {"integer": (-2**31, 2**31 - 1), "long": (-2**63, 2**63 - 1)}
_FRACTION_DIGITS = {"date": 0, "timestamp": 3, "msdate": 3, "bigdatetime": 6}


def type_text(type_name: str, args: Sequence[int] = ()) -> str:
    """The type as CCL writes it: ``integer``, ``money(2)``, ``decimal(10, 2)``."""
    return f"{type_name}({', '.join(map(str, args))})" if args else type_name


def canonical_type(type_name: str) -> Optional[str]:
    """The built-in type a name stands for (aliases resolved), or None if it is not one."""
    name = ALIASES.get(type_name.lower(), type_name.lower())
    return name if name in SCALAR_TYPES else None


def parse_value(text: str, type_name: str, args: Sequence[int] = ()) -> object:
    """The value of ``text`` read as CCL type ``type_name`` (see the module table)."""
    name = canonical_type(type_name)
    if name is None:
        raise ValueError(f"values of type {type_name} cannot be written as text")
    if name == "string":
        return text
    text = text.strip()
    if name in _LIMITS:
        body = text[:-1] if name == "long" and text[-1:] in ("L", "l") else text
        if not _INT.fullmatch(body):
            raise ValueError(f"'{text}' is not {'an integer' if name == 'integer' else 'a long'}")
        value = int(body)
        low, high = _LIMITS[name]
        if not low <= value <= high:
            raise ValueError(f"{value} does not fit {'a 32-bit integer' if name == 'integer' else 'a 64-bit long'} "
                             f"({low} to {high})")
        return value
    if name == "float":
        if not _FLOAT.fullmatch(text):
            raise ValueError(f"'{text}' is not a float")
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"'{text}' is too large for a float")
        return value
    if name in ("money", "decimal"):
        return _parse_decimal(text, name, args)
    if name == "boolean":
        lowered = text.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise ValueError(f"'{text}' is not a boolean (true or false)")
    if name in _FRACTION_DIGITS:
        return _parse_datetime(text, name)
    if name == "interval":
        return _parse_interval(text)
    return _parse_binary(text)


def _parse_decimal(text: str, name: str, args: Sequence[int]) -> Decimal:
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"'{text}' is not a {name} number")
    try:
        value = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern already rules this out
        raise ValueError(f"'{text}' is not a {name} number") from None
    digits = text.lstrip("+-")
    whole, _, fraction = digits.partition(".")
    whole = whole.lstrip("0")
    fraction = fraction.rstrip("0")
    if name == "money":
        scale = args[0] if args else 4
        if len(fraction) > scale:
            raise ValueError(f"'{text}' has more than {scale} decimal places for {type_text(name, args)}")
        units = int(value.scaleb(scale))
        if not -2**63 <= units <= 2**63 - 1:
            raise ValueError(f"'{text}' does not fit {type_text(name, args)}")
        return value.quantize(Decimal(1).scaleb(-scale))
    precision, scale = (args[0], args[1]) if len(args) == 2 else (34, max(len(fraction), 0))
    if len(fraction) > scale:
        raise ValueError(f"'{text}' has more than {scale} digits after the point for "
                         f"{type_text(name, args)}")
    if len(whole) > precision - scale:
        raise ValueError(f"'{text}' has more than {precision - scale} digits before the point for "
                         f"{type_text(name, args)}")
    return value.quantize(Decimal(1).scaleb(-scale)) if len(args) == 2 else value


def _parse_datetime(text: str, name: str) -> datetime:
    match = _DATETIME.fullmatch(text)
    if not match:
        raise ValueError(f"'{text}' is not a {name} (YYYY-MM-DDTHH:MM:SS"
                         f"{'.' + 'S' * _FRACTION_DIGITS[name] if _FRACTION_DIGITS[name] else ''})")
    year, month, day, hour, minute, second, fraction = match.groups()
    if fraction and len(fraction) > _FRACTION_DIGITS[name]:
        raise ValueError(f"'{text}' has more than {_FRACTION_DIGITS[name]} fractional digits for a {name}")
    micros = int((fraction or "0").ljust(6, "0"))
    try:
        return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                        int(second or 0), micros)
    except ValueError as exc:
        raise ValueError(f"'{text}' is not a valid {name}: {exc}") from None


def _parse_interval(text: str) -> int:
    if _INT.fullmatch(text):
        return int(text)
    pos, total = 0, 0
    stripped = text.strip()
    for match in _INTERVAL_PART.finditer(stripped):
        if stripped[pos:match.start()].strip():
            break
        unit = INTERVAL_UNITS.get(match.group(2).lower())
        if unit is None:
            raise ValueError(f"'{match.group(2)}' is not an interval unit")
        total += int(match.group(1)) * Interval._MICROS[unit]
        pos = match.end()
    if pos == 0 or stripped[pos:].strip():
        raise ValueError(f"'{text}' is not an interval (microseconds, or such as '30 SECONDS')")
    return total


def _parse_binary(text: str) -> bytes:
    body = text[2:] if text[:2].lower() == "0x" else text
    if len(body) % 2 or not re.fullmatch(r"[0-9A-Fa-f]*", body):
        raise ValueError(f"'{text}' is not binary (an even number of hex digits)")
    return bytes.fromhex(body)
