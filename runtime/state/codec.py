"""How a state store value is turned into bytes and back (runtime/state/store.py).

A value is a pickle. Pickle writes the class of every object that is not a built-in type (the
SPLASH ``Long`` of every ``long`` column, ``Interval``, money and decimals, dates, records...) as
a reference by module and name, once per ``dumps``, and ``loads`` imports and looks it up again:
for a row of plain values with one ``Long`` that reference is most of the pickle's cost, both
ways, since the store pickles each value alone (docs/runtime.md, "The state store's per-batch
cost").

:class:`ValueCodec` is a pickle whose memo starts with a fixed table of those classes
(:data:`PRESET_V1`): the pickler finds them there and writes a 2-byte memo reference, and the
unpickler, whose memo starts with the same table, reads them back without an import. Everything
else is the C pickle of protocol 3 (the last protocol whose memo writes give the index: a
protocol 4 or 5 memo write takes the next free index, which the preset table would shift), so
every value pickle takes still round-trips, objects shared within one value stay shared, and a
class not in the table is written by name as before.

The table is part of the format: a value written with it is read with the same table, in the
same order. Another table is another codec number (the store's header byte).
"""
from __future__ import annotations

import copyreg
import datetime as dt
import decimal
import io
import pickle
from typing import Any

from ccl.splash.types import Type
from ccl.splash.values import Dec, Dictionary, Interval, Long, Record, RecordKey, Vector, make_dec

# The codec's table, in memo order (never reorder: stored values name them by index). Dec pickles
# as make_dec on a Decimal; a Record, Vector, Dictionary or Type as its class (NEWOBJ) and state.
PRESET_V1: tuple = (Long, Interval, make_dec, decimal.Decimal, Dec, Record, Vector, Dictionary,
                    RecordKey, Type, dt.datetime, dt.date, dt.time, dt.timedelta, dt.timezone,
                    set, frozenset, bytearray, copyreg._reconstructor, object)
_PROTOCOL = 3


class CodecError(Exception):
    """A stored value the codec cannot read (a store damaged or written otherwise)."""


def _prefetch_size() -> int:
    """How many bytes the C unpickler asks of its file's ``peek`` (a CPython constant, found
    rather than assumed)."""
    asked: list[int] = []

    class Probe:
        def peek(self, n: int) -> bytes:
            asked.append(n)
            return b"N."

        def read(self, n: int) -> bytes:
            return b""

        def readline(self) -> bytes:
            return b""
    pickle.Unpickler(Probe()).load()
    return asked[0]


_PREFETCH = _prefetch_size()


class _Source:
    """The unpickler's "file": ``peek`` gives the value being read, whole, once (a C dict pop, not
    a Python call: bytes cut short fail on the second peek instead of being read again), and
    ``read`` is called once at the end with the bytes consumed (a C list append), which
    :meth:`ValueCodec.decode` checks."""

    def __init__(self, current: dict[int, bytes], consumed: list[int]) -> None:
        self.peek = current.pop
        self.read = consumed.append
        self.readline = bytes


class _Sink:
    """The pickler's "file": each ``dump`` writes its pickle in one call (protocol 3 has no
    frames), a C list append."""

    def __init__(self, out: list[bytes]) -> None:
        self.write = out.append


class ValueCodec:
    """Values to bytes and back with the class table :data:`PRESET_V1` preset in the pickle memo
    (see the module docstring). One per store: its pickler and unpickler are reused, value
    after value, and are not shared between threads (the unpickler's memo keeps the objects of
    the last values read until later values take their places: a store's, for a task)."""

    def __init__(self, preset: tuple = PRESET_V1) -> None:
        template = pickle.Pickler(io.BytesIO(), _PROTOCOL)
        template.memo = {id(obj): (i, obj) for i, obj in enumerate(preset)}
        self._memo = template.memo  # a proxy: setting it copies the table in C
        self._out: list[bytes] = []
        self._pickler = pickle.Pickler(_Sink(self._out), _PROTOCOL)
        # the unpickler's memo: the same objects at the same indexes (set from another
        # unpickler's memo: CPython's unpickler drops a memo given as a dict)
        text = bytearray()
        for i, obj in enumerate(preset):
            text += b"c%s\n%s\nr%s0" % (obj.__module__.encode(), obj.__qualname__.encode(),
                                        i.to_bytes(4, "little"))
        reader = pickle.Unpickler(io.BytesIO(bytes(text + b"N.")))
        reader.load()
        self._read_memo = reader.memo
        table = self._read_memo.copy()
        for i, obj in enumerate(preset):
            if table.get(i) is not obj:
                raise CodecError(f"the codec's table does not read back: {obj!r}")
        self._current: dict[int, bytes] = {}
        self._consumed: list[int] = []
        self._unpickler = self._new_unpickler()

    def _new_unpickler(self) -> Any:
        u = pickle.Unpickler(_Source(self._current, self._consumed))
        u.memo = self._read_memo
        return u

    def encode(self, value: Any) -> bytes:
        """The bytes of ``value`` (``PicklingError`` and the like for a value pickle refuses)."""
        p = self._pickler
        p.memo = self._memo
        p.dump(value)
        return self._out.pop()

    def encode_all(self, values: list) -> list[bytes]:
        """:meth:`encode` of each of ``values`` (no Python call per value)."""
        p, memo, out = self._pickler, self._memo, self._out
        dump = p.dump
        try:
            for value in values:
                p.memo = memo
                dump(value)
            if len(out) != len(values):  # (protocol 3 writes a value in one call)
                raise CodecError("the pickler wrote a value in parts")
            return out[:]
        finally:
            out.clear()

    def decode(self, data: bytes) -> Any:
        """The value of ``data`` (bytes :meth:`encode` gave); :class:`CodecError` when they are
        not such bytes."""
        self._current[_PREFETCH] = data
        consumed = self._consumed
        try:
            value = self._unpickler.load()
            ok = len(consumed) == 1 and consumed[0] == len(data)
        except Exception as e:  # (any error of the bytes: pickle raises many kinds)
            ok, value = False, e
        consumed.clear()
        if not ok:
            self._current.clear()
            # the unpickler may hold the rest of the bytes, or memo entries over the table
            self._unpickler = self._new_unpickler()
            why = (" (cut short)" if isinstance(value, KeyError) else f": {value!r}"
                   if isinstance(value, Exception) else " (bytes left over)")
            raise CodecError(f"a stored value does not decode{why}")
        return value


_PLAIN = frozenset({type(None), bool, int, float, str, bytes})


def holds_classes(value: Any, limit: int = 10_000) -> bool:
    """Whether ``value`` holds an object of a type other than None, bool, int, float, str,
    bytes, tuple, list and dict (each written by class reference in a plain pickle), looking at
    ``limit`` objects at most: what a store asks of a namespace's first value to choose between
    :class:`ValueCodec` and a plain pickle."""
    stack = [value]
    seen = 0
    while stack and seen < limit:
        v = stack.pop()
        seen += 1
        t = type(v)
        if t in _PLAIN:
            continue
        if t is tuple or t is list:
            stack.extend(v)
        elif t is dict:
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            return True
    return False
