"""Spark's ``hash(col1, col2, ...)`` in plain Python: the partition instance of a row
(``pmod(hash(cols), N)``, docs/runtime.md) computed on the driver or in a worker without a Spark
job, bit for bit what Spark computes for the same values in columns of the runtime's types.

Spark's ``hash`` is Murmur3 x86 32-bit with seed 42, the columns chained: each column's hash is the
seed of the next, a null leaves the seed unchanged. By column type (the CCL type names of the
plan, stored as in ``runtime/types.py``):

- ``integer``, ``boolean`` (1/0): one 4-byte block; ``long``, ``interval`` (microseconds),
  ``date``/``timestamp``/``bigdatetime`` (microseconds since 1970, naive datetimes read as UTC):
  the low then the high 4 bytes of the long.
- ``float`` (a double): its IEEE bits as a long, -0.0 hashed as 0.0 and every NaN as Java's one
  NaN (``doubleToLongBits``); checked against Spark by tests/test_spark_hash.py.
- ``string`` (its UTF-8 bytes), ``binary``: Spark's ``hashUnsafeBytes``, which differs from
  standard Murmur3 in the tail: each of the last ``len % 4`` bytes is mixed alone, as a signed
  byte, like a full block.
- ``money(n)`` (``decimal(18,n)``) and ``decimal(p,s)`` with ``p <= 18``: the unscaled long at the
  type's scale; ``decimal(p,s)`` with ``p > 18``: ``hashUnsafeBytes`` of the unscaled
  BigInteger's two's-complement bytes (Java's ``toByteArray``). A type name this module does not
  know is carried as text, as ``runtime/types.py`` does.

No pyspark import: the module runs wherever the runtime's Python runs.
"""
from __future__ import annotations

import datetime as _dt
import re
import struct
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Optional, Sequence

import numpy as np

SEED = 42
_M = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_NAN_BITS = 0x7FF8000000000000
_EPOCH = _dt.datetime(1970, 1, 1)
_DOUBLE = struct.Struct("<d")
_ULONG = struct.Struct("<Q")
_DECIMAL = re.compile(r"^(money|decimal)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")

# A hasher takes a non-null value and the running hash (unsigned 32-bit) and returns the next.
_Hasher = Callable[[Any, int], int]


def _mix(h1: int, k1: int) -> int:
    """One 4-byte block ``k1`` (unsigned) mixed into ``h1``."""
    k1 = (k1 * _C1) & _M
    k1 = (((k1 << 15) | (k1 >> 17)) * _C2) & _M
    h1 ^= k1
    return ((((h1 << 13) | (h1 >> 19)) & _M) * 5 + 0xE6546B64) & _M


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M
    return h1 ^ (h1 >> 16)


def _hash_int(value: int, seed: int) -> int:
    return _fmix(_mix(seed, value & _M), 4)


def _hash_long(value: int, seed: int) -> int:
    return _fmix(_mix(_mix(seed, value & _M), (value >> 32) & _M), 8)


def _hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes``: little-endian 4-byte blocks, then each tail byte
    alone as a signed int."""
    n = len(data)
    aligned = n & ~3
    words = list(struct.unpack_from("<%dI" % (aligned >> 2), data)) if aligned else []
    for i in range(aligned, n):
        words.append(data[i] if data[i] < 128 else data[i] + 0xFFFFFF00)  # sign-extended
    h1 = seed
    for k1 in words:  # _mix inlined: the loop is the cost of a string
        k1 = (k1 * 0xCC9E2D51) & 0xFFFFFFFF
        k1 = (((k1 << 15) | (k1 >> 17)) * 0x1B873593) & 0xFFFFFFFF
        h1 ^= k1
        h1 = ((((h1 << 13) | (h1 >> 19)) & 0xFFFFFFFF) * 5 + 0xE6546B64) & 0xFFFFFFFF
    return _fmix(h1, n)


def _hash_bool(value: Any, seed: int) -> int:
    return _hash_int(1 if value else 0, seed)


def _hash_double(value: Any, seed: int) -> int:
    value = float(value)
    if value == 0.0:
        return _hash_long(0, seed)  # -0.0 as 0.0
    if value != value:
        return _hash_long(_NAN_BITS, seed)
    return _hash_long(_ULONG.unpack(_DOUBLE.pack(value))[0], seed)


def _hash_string(value: Any, seed: int) -> int:
    # Java's UTF-8 encoder writes '?' for a lone surrogate, as "replace" does.
    return _hash_bytes(str(value).encode("utf-8", "replace"), seed)


def _hash_binary(value: Any, seed: int) -> int:
    return _hash_bytes(bytes(value), seed)


def _micros(value: Any) -> int:
    """Microseconds since 1970 of a datetime (naive: UTC), a date (its midnight) or an int (already
    microseconds)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        delta = value - _EPOCH
    elif isinstance(value, _dt.date):
        delta = _dt.datetime(value.year, value.month, value.day) - _EPOCH
    elif isinstance(value, _dt.timedelta):
        delta = value
    else:
        return int(value)
    return (delta.days * 86400 + delta.seconds) * 1000000 + delta.microseconds


def _hash_micros(value: Any, seed: int) -> int:
    return _hash_long(_micros(value), seed)


def unscaled(value: Any, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale`` (rounded half up, as Spark rounds a decimal
    into its type)."""
    d = value if isinstance(value, Decimal) else Decimal(str(value))
    sign, digits, exponent = d.as_tuple()
    n = int("".join(map(str, digits)) or "0")
    shift = exponent + scale  # exact integer arithmetic: no decimal context precision limit
    if shift >= 0:
        n *= 10 ** shift
    else:
        q, r = divmod(n, 10 ** -shift)
        n = q + (1 if 2 * r >= 10 ** -shift else 0)
    return -n if sign else n


def _big_integer_bytes(n: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: minimal big-endian two's complement, with a sign bit."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _decimal_hasher(precision: int, scale: int) -> _Hasher:
    if precision <= 18:
        return lambda value, seed: _hash_long(unscaled(value, scale), seed)
    return lambda value, seed: _hash_bytes(_big_integer_bytes(unscaled(value, scale)), seed)


_SIMPLE: dict[str, _Hasher] = {
    "integer": lambda value, seed: _hash_int(value, seed),
    "long": lambda value, seed: _hash_long(value, seed),
    "float": _hash_double,
    "string": _hash_string,
    "boolean": _hash_bool,
    "binary": _hash_binary,
    "date": _hash_micros, "timestamp": _hash_micros, "bigdatetime": _hash_micros,
    "interval": _hash_micros,  # microseconds (an int, or a timedelta)
}


def decimal_type(ccl_type: str) -> Optional[tuple[int, int]]:
    """``(precision, scale)`` of a ``money``/``decimal`` type text as ``runtime/types.py`` stores it
    (``money(n)`` is ``decimal(18,n)``, ``money`` ``money(4)``, ``decimal`` ``decimal(10,0)``),
    None for any other type."""
    m = _DECIMAL.match(ccl_type.strip().lower())
    if not m:
        return None
    if m.group(1) == "money":
        return 18, int(m.group(2)) if m.group(2) else 4
    return (int(m.group(2)) if m.group(2) else 10), (int(m.group(3)) if m.group(3) else 0)


def _hasher(ccl_type: str) -> _Hasher:
    text = ccl_type.strip().lower()
    if text in _SIMPLE:
        return _SIMPLE[text]
    dec = decimal_type(text)
    if dec is not None:
        return _decimal_hasher(*dec)
    return _hash_string  # unknown types are carried as text


@lru_cache(maxsize=256)
def _hashers(types: tuple[str, ...]) -> tuple[_Hasher, ...]:
    return tuple(_hasher(t) for t in types)


def _signed(h: int) -> int:
    return h - 0x100000000 if h & 0x80000000 else h


def spark_hash(values: Sequence[object], types: Sequence[str], seed: int = SEED) -> int:
    """Spark's ``hash(values...)`` (a signed 32-bit int) of one row whose columns have the CCL
    types ``types`` (``integer``, ``long``, ``float``, ``string``, ``boolean``, ``binary``,
    ``date``, ``timestamp``, ``bigdatetime``, ``interval``, ``money(n)``, ``decimal(p,s)``);
    None is a null."""
    if len(values) != len(types):
        raise ValueError(f"{len(values)} values for {len(types)} types")
    h = seed & _M
    for value, hasher in zip(values, _hashers(tuple(types))):
        if value is not None:
            h = hasher(value, h)
    return _signed(h)


def spark_pmod_hash(values: Sequence[object], types: Sequence[str], n: int) -> int:
    """``pmod(hash(values...), n)``: the partition instance HASH gives the row among ``n``."""
    return spark_hash(values, types) % n  # Python's % of a positive n is pmod


def spark_hash_int(value: int, seed: int = SEED) -> int:
    """Spark's ``hash()`` of one int column (Murmur3 x86 32-bit, seed 42), as a signed int."""
    return _signed(_hash_int(value, seed & _M))


# --- vectorised: whole columns at once with numpy -----------------------------------------------

def _mix_np(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    k1 = k1 * np.uint32(_C1)
    k1 = ((k1 << np.uint32(15)) | (k1 >> np.uint32(17))) * np.uint32(_C2)
    h1 = h1 ^ k1
    return ((h1 << np.uint32(13)) | (h1 >> np.uint32(19))) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix_np(h1: np.ndarray, length: Any) -> np.ndarray:
    h1 = h1 ^ np.asarray(length).astype(np.uint32)
    h1 ^= h1 >> np.uint32(16)
    h1 *= np.uint32(0x85EBCA6B)
    h1 ^= h1 >> np.uint32(13)
    h1 *= np.uint32(0xC2B2AE35)
    h1 ^= h1 >> np.uint32(16)
    return h1


def _long_np(h: np.ndarray, longs: np.ndarray) -> np.ndarray:
    words = np.ascontiguousarray(longs, np.int64).view(np.uint32).reshape(-1, 2)  # little-endian
    return _fmix_np(_mix_np(_mix_np(h, words[:, 0]), words[:, 1]), 8)


def _bytes_np(h: np.ndarray, offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """``hashUnsafeBytes`` of every value ``data[offsets[i]:offsets[i+1]]``: one numpy pass per
    4-byte block position (over the values that long) and per tail byte."""
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    blocks = lengths >> 2
    data = np.concatenate([data, np.zeros(4, np.uint8)]).astype(np.uint32)
    h = h.copy()
    for i in range(int(blocks.max()) if len(blocks) else 0):
        rows = np.nonzero(blocks > i)[0]
        pos = starts[rows] + 4 * i
        word = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16) | (data[pos + 3] << 24)
        h[rows] = _mix_np(h[rows], word)
    tails = lengths & 3
    for j in range(3):
        rows = np.nonzero(tails > j)[0]
        if len(rows):
            byte = data[starts[rows] + 4 * blocks[rows] + j].astype(np.int32)
            h[rows] = _mix_np(h[rows], np.where(byte > 127, byte - 256, byte).astype(np.uint32))
    return _fmix_np(h, lengths)


def _bytes_column_np(h: np.ndarray, column: Any) -> np.ndarray:
    """``hashUnsafeBytes`` of every value of ``column`` (an Arrow string or binary array, nulls
    hashed as their empty slot: the caller keeps ``h`` for them) seeded by ``h``."""
    offsets = np.frombuffer(column.buffers()[1], np.int32)[column.offset:column.offset
                                                            + len(column) + 1]
    data = (np.frombuffer(column.buffers()[2], np.uint8) if column.buffers()[2] is not None
            else np.zeros(0, np.uint8))
    return _bytes_np(h, offsets, data)


def _distinct_bytes_np(h: np.ndarray, column: Any) -> Optional[np.ndarray]:
    """:func:`_bytes_column_np` computed once per distinct (running hash, value) pair and spread
    to the rows: a column of few distinct values (a symbol, a name) costs a hash per distinct
    value instead of per row. None when the pairs are not at most half the rows (the caller
    hashes every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(column)
    encoded = pc.dictionary_encode(column)
    values = encoded.dictionary
    if 2 * len(values) > n:
        return None
    if not len(values):  # every value null: the caller keeps h
        return h
    # a null's index is filled with 0: its hash is computed and then dropped by the caller
    index = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
    if (h == h[0]).all():  # one seed (the first column): the values are the pairs
        return _bytes_column_np(np.full(len(values), h[0], np.uint32), values)[index]
    pairs = pc.dictionary_encode(pa.array((h.astype(np.uint64) << np.uint64(32))
                                          | index.astype(np.uint64)))
    distinct = pairs.dictionary.to_numpy()
    if 2 * len(distinct) > n:
        return None
    seeds = (distinct >> np.uint64(32)).astype(np.uint32)
    picked = values.take(pa.array(distinct & np.uint64(_M)))
    return _bytes_column_np(seeds, picked)[pairs.indices.to_numpy()]


def _column_np(h: np.ndarray, column: Any, ccl_type: str) -> np.ndarray:
    """The running hashes ``h`` after the column ``column`` (an Arrow array or a Python list)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = ccl_type.strip().lower()
    dec = decimal_type(text)
    arrow_type = {
        "integer": pa.int32(), "long": pa.int64(), "interval": pa.int64(), "float": pa.float64(),
        "boolean": pa.int32(), "string": pa.string(), "binary": pa.binary(),
        "date": pa.timestamp("us"), "timestamp": pa.timestamp("us"),
        "bigdatetime": pa.timestamp("us"),
    }.get(text)
    if arrow_type is None and not (dec and dec[0] <= 18):
        # decimal(p > 18) and unknown types: row by row
        values = column.to_pylist() if hasattr(column, "to_pylist") else list(column)
        hasher = _hasher(text)
        return np.fromiter((hasher(v, int(s)) if v is not None else s for v, s in zip(values, h)),
                           np.uint32, len(h))
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    elif not isinstance(column, pa.Array):
        column = pa.array(column, pa.decimal128(*dec) if arrow_type is None else
                          (pa.bool_() if text == "boolean" else arrow_type))
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if dec:
        if column.type != pa.decimal128(*dec):
            column = column.cast(pa.decimal128(*dec))
        raw = np.frombuffer(column.buffers()[1], np.int64)[2 * column.offset:]
        out = _long_np(h, raw[0:2 * len(column):2])  # the low 8 bytes: the unscaled long
    elif text in ("string", "binary"):
        column = column.cast(arrow_type)
        out = _distinct_bytes_np(h, column)
        if out is None:
            out = _bytes_column_np(h, column)
    else:
        if text == "boolean" and column.type != arrow_type:
            column = column.cast(pa.int32())
        elif column.type != arrow_type:
            column = column.cast(arrow_type)
        if pa.types.is_timestamp(arrow_type):
            column = column.cast(pa.int64())
        values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
        if text == "float":
            values = np.where(values == 0.0, 0.0, values)  # -0.0 as 0.0
            bits = values.view(np.int64)
            out = _long_np(h, np.where(np.isnan(values), np.int64(_NAN_BITS), bits))
        elif text in ("integer", "boolean"):
            out = _fmix_np(_mix_np(h, values.astype(np.int32).view(np.uint32)), 4)
        else:
            out = _long_np(h, values)
    return np.where(valid, out, h)


def spark_hash_columns(columns: Sequence[Any], types: Sequence[str],
                       seed: int = SEED) -> np.ndarray:
    """:func:`spark_hash` of every row of ``columns`` (Arrow arrays, or Python lists of the values
    :func:`spark_hash` takes), as a numpy int32 array. Decimals of precision above 18 and unknown
    types are hashed row by row, the rest with numpy."""
    if len(columns) != len(types):
        raise ValueError(f"{len(columns)} columns for {len(types)} types")
    n = len(columns[0]) if columns else 0
    h = np.full(n, seed & _M, np.uint32)
    for column, ccl_type in zip(columns, types):
        if len(column) != n:
            raise ValueError("columns of different lengths")
        h = _column_np(h, column, ccl_type)
    return h.view(np.int32)


def spark_pmod_hash_columns(columns: Sequence[Any], types: Sequence[str], n: int) -> np.ndarray:
    """``pmod(hash(columns...), n)`` of every row (numpy int64 array)."""
    return np.mod(spark_hash_columns(columns, types).astype(np.int64), n)
