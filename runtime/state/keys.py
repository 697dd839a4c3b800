"""Order-preserving encoding of state keys: tuples of scalars whose first item is the instance
(an item may itself be a tuple of such items: encoded by its length and its items).

Every item is self-delimiting and the encoding of a tuple is the concatenation of its items', so
the encoding of a tuple prefix is a byte prefix of the encoding of the whole tuple (a scan of one
instance is a scan of a byte prefix), and for items of the same type byte order is value order:
ints, floats, strings (by code point), bytes, dates and times, decimals. Items of different types
order by type code (None first). Keys that Python treats as equal must encode equally, so a
``Decimal`` is normalised (``Decimal("1.0")`` and ``Decimal("1.00")`` are one key and decode as
``Decimal("1")``); ``True`` and ``1`` are the exception: they encode differently (a column has one
type, so one key never meets the other).
"""
from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

_NONE, _BYTES, _STR, _FALSE, _TRUE, _INT, _FLOAT, _DECIMAL, _DATE, _NAIVE, _AWARE = range(11)
_BIG_INT = 11  # ints outside 64 bits: length-prefixed, ordered within their sign
_TUPLE = 12  # a tuple inside a key (a group or row key kept as one item): its length, its items
_Q = struct.Struct(">Q")
_TQ = struct.Struct(">BQ")
_D = struct.Struct(">d")
_SIGN = 1 << 63
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)
_US = dt.timedelta(microseconds=1)


def encode_key(key: tuple) -> bytes:
    """The bytes of ``key``; its first item must be the instance number (an int)."""
    if not key or type(key[0]) is not int:
        raise TypeError(f"a state key is a tuple starting with the instance number, not {key!r}")
    return encode_items(key)


def encode_items(items: tuple) -> bytes:
    """The bytes of any tuple of scalars (also a key prefix)."""
    parts = []
    for v in items:
        t = type(v)
        # the common items inline: this runs for every key a batch touches
        if t is int and -_SIGN <= v < _SIGN:
            parts.append(_TQ.pack(_INT, v + _SIGN))
        elif t is str and "\x00" not in v:
            parts.append(b"\x02" + v.encode("utf-8") + b"\x00")
        elif t is not bool and isinstance(v, int) and -_SIGN <= v < _SIGN:
            # SPLASH's Long (every long key column) and Interval: keyed as their int (_encode's)
            parts.append(_TQ.pack(_INT, int(v) + _SIGN))
        else:
            out = bytearray()
            _encode(v, out)
            parts.append(bytes(out))
    return b"".join(parts)


def _escape(raw: bytes, out: bytearray) -> None:
    # 0x00 ends the item; a 0x00 inside becomes 0x00 0xFF, which sorts after the terminator
    out += raw.replace(b"\x00", b"\x00\xff")
    out += b"\x00"


def _encode(v: Any, out: bytearray) -> None:
    t = type(v)
    if t is int:
        if -_SIGN <= v < _SIGN:
            out.append(_INT)
            out += _Q.pack(v + _SIGN)
        else:
            raw = abs(v).to_bytes((abs(v).bit_length() + 7) // 8, "big")
            out.append(_BIG_INT)
            if v < 0:  # fewer bytes is larger for negatives: invert length and digits
                out.append(127 - len(raw))
                out += bytes(255 - b for b in raw)
            else:
                out.append(128 + len(raw))
                out += raw
    elif t is str:
        out.append(_STR)
        _escape(v.encode("utf-8"), out)
    elif v is None:
        out.append(_NONE)
    elif t is float:
        bits = _Q.unpack(_D.pack(v))[0]
        out.append(_FLOAT)
        out += _Q.pack(bits ^ 0xFFFFFFFFFFFFFFFF if bits & _SIGN else bits | _SIGN)
    elif t is bool:
        out.append(_TRUE if v else _FALSE)
    elif t is bytes or t is bytearray:
        out.append(_BYTES)
        _escape(bytes(v), out)
    elif t is Decimal:
        out.append(_DECIMAL)
        _encode_decimal(v, out)
    elif t is dt.datetime:
        if v.tzinfo is None:
            out.append(_NAIVE)
            out += _Q.pack((v - _EPOCH) // _US + _SIGN)
        else:
            out.append(_AWARE)
            out += _Q.pack((v - _EPOCH_UTC) // _US + _SIGN)
    elif t is dt.date:
        out.append(_DATE)
        out += _Q.pack((v - _EPOCH_DATE).days + _SIGN)
    elif isinstance(v, bool):
        out.append(_TRUE if v else _FALSE)
    elif isinstance(v, int):  # SPLASH's Long and Interval: equal to (and keyed as) their int
        _encode(int(v), out)
    elif isinstance(v, Decimal):  # SPLASH's Dec
        _encode(Decimal(v), out)
    elif isinstance(v, float):
        _encode(float(v), out)
    elif isinstance(v, str):
        _encode(str(v), out)
    elif isinstance(v, tuple):
        out.append(_TUPLE)
        out += _Q.pack(len(v))
        for item in v:
            _encode(item, out)
    else:
        raise TypeError(f"cannot use {t.__name__} {v!r} in a state key")


def _encode_decimal(v: Decimal, out: bytearray) -> None:
    """Sign class, then (for non-zero) the adjusted exponent and the digits, inverted for
    negatives: numeric order, and equal values (any scale) give equal bytes."""
    if not v.is_finite():
        raise TypeError(f"cannot use {v} in a state key")
    if v == 0:
        out.append(1)
        return
    sign, digits, _ = v.normalize().as_tuple()
    body = _Q.pack(v.adjusted() + _SIGN) + "".join(map(str, digits)).encode() + b"\x00"
    if sign:
        out.append(0)
        out += bytes(255 - b for b in body)
    else:
        out.append(2)
        out += body


def decode_key(raw: bytes) -> tuple:
    """The tuple :func:`encode_items` encoded as ``raw``."""
    items, pos = [], 0
    n = len(raw)
    while pos < n:
        v, pos = _decode(raw, pos)
        items.append(v)
    return tuple(items)


def decode_instance(raw: bytes) -> int:
    """The instance number at the start of an encoded key (no need to decode the rest)."""
    v, _ = _decode(raw, 0)
    if type(v) is not int:
        raise ValueError("the key does not start with an instance number")
    return v


def _unescape(raw: bytes, pos: int) -> tuple[bytes, int]:
    out = bytearray()
    while True:
        end = raw.index(b"\x00", pos)
        out += raw[pos:end]
        if end + 1 < len(raw) and raw[end + 1] == 0xFF:
            out.append(0)
            pos = end + 2
        else:
            return bytes(out), end + 1


def _decode(raw: bytes, pos: int) -> tuple[Any, int]:
    code = raw[pos]
    pos += 1
    if code == _INT:
        return _Q.unpack_from(raw, pos)[0] - _SIGN, pos + 8
    if code == _STR:
        b, pos = _unescape(raw, pos)
        return b.decode("utf-8"), pos
    if code == _NONE:
        return None, pos
    if code == _FLOAT:
        bits = _Q.unpack_from(raw, pos)[0]
        bits = bits ^ _SIGN if bits & _SIGN else bits ^ 0xFFFFFFFFFFFFFFFF
        return _D.unpack(_Q.pack(bits))[0], pos + 8
    if code in (_TRUE, _FALSE):
        return code == _TRUE, pos
    if code == _BYTES:
        return _unescape(raw, pos)
    if code == _NAIVE:
        return _EPOCH + (_Q.unpack_from(raw, pos)[0] - _SIGN) * _US, pos + 8
    if code == _AWARE:
        return _EPOCH_UTC + (_Q.unpack_from(raw, pos)[0] - _SIGN) * _US, pos + 8
    if code == _DATE:
        return _EPOCH_DATE + dt.timedelta(days=_Q.unpack_from(raw, pos)[0] - _SIGN), pos + 8
    if code == _DECIMAL:
        return _decode_decimal(raw, pos)
    if code == _TUPLE:
        items = []
        count, pos = _Q.unpack_from(raw, pos)[0], pos + 8
        for _ in range(count):
            item, pos = _decode(raw, pos)
            items.append(item)
        return tuple(items), pos
    if code == _BIG_INT:
        lead = raw[pos]
        if lead >= 128:
            size = lead - 128
            return int.from_bytes(raw[pos + 1:pos + 1 + size], "big"), pos + 1 + size
        size = 127 - lead
        return -int.from_bytes(bytes(255 - b for b in raw[pos + 1:pos + 1 + size]), "big"), \
            pos + 1 + size
    raise ValueError(f"not a state key: type code {code} at {pos - 1}")


def _decode_decimal(raw: bytes, pos: int) -> tuple[Decimal, int]:
    cls = raw[pos]
    pos += 1
    if cls == 1:
        return Decimal(0), pos
    end = raw.index(b"\xff" if cls == 0 else b"\x00", pos + 8)
    body = raw[pos:end + 1]
    if cls == 0:
        body = bytes(255 - b for b in body)
    exp = _Q.unpack_from(body, 0)[0] - _SIGN
    digits = body[8:-1].decode()
    # digits d0.d1d2... times 10**exp
    value = Decimal((1 if cls == 0 else 0, tuple(int(c) for c in digits), exp - len(digits) + 1))
    return value, end + 1
