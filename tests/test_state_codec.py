"""runtime/state/codec.py and its use by the store: every kind of value the store holds round-trips
through the codec exactly as through a plain pickle (the reference path); a namespace's values go
through the codec when its first value holds SPLASH value classes; values written by a runtime
of layout format 1 (plain pickles) still read, update and roll back; what cannot be read is
refused with a message."""
import datetime as dt
import json
import pickle
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.splash.types import FLOAT, LONG, STRING
from ccl.splash.values import (Dictionary, Interval, Long, Record, RecordKey, Vector, make_dec)
from runtime.state import BucketStore, StateError, create, read_layout
from runtime.state.codec import CodecError, ValueCodec, holds_classes
from runtime.state.store import FORMAT, _load
from tests.test_state_store import _same, _stored_values

_LONGS = st.integers(-(1 << 63), (1 << 63) - 1)
# every character, lone surrogates included (a Python str may hold them; pickle writes them)
_ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=8)


def _record(fields: dict, opcode) -> Record:
    r = Record(fields.items(), {"a": LONG, "b": STRING}, key_fields=tuple(fields)[:1])
    if opcode is not None:
        r.opcode = opcode
    return r


def _values():
    """The store's values (tests/test_state_store.py) and more: strings of any characters, money
    of every scale, longs at both ends, records with an opcode and key fields, record keys,
    dictionaries, sets, and objects shared within a value."""
    money = st.tuples(st.integers(-(10**17), 10**17), st.integers(0, 8)).map(
        lambda t: make_dec(str(t[0] / 10**t[1]) if t[1] else str(t[0]), 18, t[1]))
    extra = st.one_of(
        _ANY_TEXT, money, st.sampled_from([Long(-(1 << 63)), Long((1 << 63) - 1), Long(0),
                                           Interval(-(1 << 63)), float("-inf"), -0.0]),
        st.datetimes(), st.dates(), st.timedeltas(), st.binary(max_size=6).map(bytearray),
        st.frozensets(st.integers(-3, 3), max_size=3), st.sets(_ANY_TEXT, max_size=3))
    inner = st.one_of(_stored_values(), extra)

    def nest(inner):
        return st.one_of(
            st.tuples(st.dictionaries(_ANY_TEXT, inner, max_size=3), st.none() | st.integers(1, 13)).map(
                lambda t: _record(*t)),
            st.dictionaries(st.text(max_size=3), inner, max_size=3).map(
                lambda d: RecordKey(_record(d, None))),
            st.dictionaries(st.one_of(_LONGS.map(Long), _ANY_TEXT), inner, max_size=3).map(
                lambda d: Dictionary(d.items(), LONG, FLOAT)),
            st.lists(inner, max_size=3).map(lambda v: Vector(v, LONG)),
            st.lists(inner, min_size=1, max_size=3).map(lambda v: [v, v]),  # shared
            st.dictionaries(st.tuples(_ANY_TEXT, _LONGS.map(Long)), inner, max_size=3))
    return st.recursive(inner, nest, max_leaves=10)


def _same_value(a, b) -> bool:
    """tests/test_state_store.py ``_same`` (NaN equal to NaN, -0.0 not 0.0, same types all the
    way down), through record keys, sets and the attributes of records, vectors and
    dictionaries."""
    if type(a) is not type(b):
        return False
    if isinstance(a, RecordKey):
        return _same_value(a.record, b.record) and _same_value(a.ident, b.ident)
    if isinstance(a, (set, frozenset)):
        return a == b
    if isinstance(a, (list, tuple)):
        same = len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    elif isinstance(a, dict):  # (keys holding a NaN: compared in order, not looked up)
        same = _same_value(list(a), list(b)) and \
            all(_same_value(x, y) for x, y in zip(a.values(), b.values()))
    else:
        return _same(a, b)
    return same and getattr(a, "__dict__", None) == getattr(b, "__dict__", None)


def _sharing(v, seen=None) -> list:
    """The identity pattern of the containers in ``v``: for each, the index of its first
    occurrence (equal lists for two values: the same objects shared the same way)."""
    out, ids = [], {} if seen is None else seen
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, dict)):
            out.append(ids.setdefault(id(x), len(ids)))
            if id(x) in ids and out.count(ids[id(x)]) > 1:
                continue
            stack.extend(x.values() if isinstance(x, dict) else x)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_values(), min_size=1, max_size=5))
def test_the_codec_round_trips_every_value_as_a_plain_pickle_does(values):
    codec = ValueCodec()
    for v in values:  # one codec, value after value, as a store uses it
        reference = pickle.loads(pickle.dumps(v, 5))
        got = codec.decode(codec.encode(v))
        assert _same_value(got, v) and _same_value(got, reference)
        assert _sharing(got) == _sharing(reference)
    assert [_same_value(codec.decode(b), v) for b, v in zip(codec.encode_all(values), values)] \
        == [True] * len(values)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(_values(), min_size=1, max_size=5))
def test_the_store_reads_back_every_value_from_the_codec_and_from_plain_pickles(tmp_path, values):
    """A namespace whose first value holds a Long goes through the codec, one whose first value is
    an int stays plain; both give back every value, by get, get_many, scan and expire, after a
    reopen, and take the codec's headers (2, 3) or the plain ones (0, 1)."""
    root = str(tmp_path / uuid.uuid4().hex)
    create(root, 1)
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        for ns, first in (("c", Long(1)), ("p", 1)):
            s.put(ns, (0, -1), first)
            for i, v in enumerate(values):
                s.put(ns, (0, i), v)
                s.put_timed(ns + "t", (0, i), v, 1000 + i)
            s.put_all(ns + "a", 1, [((-1,), first)] + [((i,), v) for i, v in enumerate(values)])
        s.commit(0)
        headers = {ns: {raw[0] for k, raw in s.committed_data() if k[1:len(ns) + 2] ==
                        ns.encode() + b"\x00"} for ns in ("c", "p", "ca", "pa")}
    assert headers == {"c": {2}, "p": {0}, "ca": {2}, "pa": {0}}
    with BucketStore.open(root, 0) as s:
        s.begin(1)
        for ns in ("c", "p"):
            assert all(_same_value(s.get(ns, (0, i)), v) for i, v in enumerate(values))
            got = s.get_many(ns + "a", [(1, i) for i in range(len(values))])
            assert all(_same_value(a, b) for a, b in zip(got, values))
            scanned = [v for k, v in s.scan(ns, (0,)) if k != (0, -1)]
            assert all(_same_value(a, b) for a, b in zip(scanned, values))
            gone = s.expire(ns + "t", 1000 + len(values))
            assert [k for k, _ in gone] == [(0, i) for i in range(len(values))]
            assert all(_same_value(a, b) for (_, a), b in zip(gone, values))


def test_holds_classes_looks_through_containers():
    assert not holds_classes({"a": [1, 2.0, ("x", None, b"y", True)]})
    assert holds_classes({"a": [1, (2, Long(3))]})
    assert holds_classes([dt.date(2024, 1, 1)]) and holds_classes(make_dec("1.5", 18, 4))
    assert holds_classes(Record([("a", 1)]))


def test_bytes_that_are_not_the_codecs_are_refused_and_the_codec_reads_on():
    codec = ValueCodec()
    good = codec.encode({"Id": Long(7), "Px": [1.5, Long(2)]})
    for bad in (good[:-3], good + b"N.", good[:4], b"\x80\x03h\x7fN.", b"garbage"):
        with pytest.raises(CodecError):
            codec.decode(bad)
        assert _same_value(codec.decode(good), {"Id": Long(7), "Px": [1.5, Long(2)]})


def _main_raw(value, at=None) -> bytes:
    """A value's bytes as the store of layout format 1 (main before this codec) wrote them."""
    head = b"\x00" if at is None else b"\x01" + (at + (1 << 63)).to_bytes(8, "big")
    return head + pickle.dumps(value, 5)


def test_values_written_by_a_runtime_of_format_1_read_update_and_roll_back(tmp_path):
    """A root of layout format 1 whose values are plain pickles (untimed and timed), as main
    wrote them: read as they were, marked format 3 (the newest) by create, updated values go to the codec,
    and a replay of the batch restores the old bytes (and their time index)."""
    import rocksdict

    from runtime.state.keys import encode_key
    root = tmp_path / "s"
    create(str(root), 1)
    (root / "layout.json").write_text(json.dumps({"format": 1, "buckets": 1, "generation": 1}))
    assert read_layout(str(root)).buckets == 1
    rows = {i: {"TradeId": Long(i), "Px": 1.5 * i, "At": dt.datetime(2026, 1, 1, 0, 0, i)}
            for i in range(4)}
    with BucketStore.open(str(root), 0) as s:  # batch 0 the way format 1 committed it
        s.begin(0)
        for i, row in rows.items():
            s.put_timed("w", (0, i), row, 100 + i)
        s.commit(0)
    db = rocksdict.Rdict(str(root / "g00001" / "b00000"), rocksdict.Options(raw_mode=True))
    for i, row in rows.items():
        db[b"dw\x00" + encode_key((0, i))] = _main_raw(row, 100 + i)
        db[b"do\x00" + encode_key((0, i))] = _main_raw(row)
    db.close()
    create(str(root), 1)
    assert json.loads((root / "layout.json").read_text())["format"] == FORMAT == 3
    for batch in (1, 1):  # the second: a replay of batch 1
        with BucketStore.open(str(root), 0) as s:
            s.begin(batch)
            assert all(_same_value(s.get("o", (0, i)), row) for i, row in rows.items())
            assert all(_same_value(v, rows[k[1]]) for k, v in s.scan("w", (0,)))
            assert s.time_of("w", (0, 2)) == 102 and s.next_time("w") == 100
            s.put("o", (0, 1), dict(rows[1], Px=0.0))
            s.put_timed("w", (0, 3), rows[3], 50)
            assert [k for k, _ in s.expire("w", 102)] == [(0, 3), (0, 0), (0, 1)]
            s.commit(batch)
        with BucketStore.open(str(root), 0) as s:
            s.begin(batch + 1)
            assert s.get("o", (0, 1))["Px"] == 0.0 and s.next_time("w") == 102
            assert [raw[0] for k, raw in s.committed_data() if k.startswith(b"do")] == \
                [0, 2, 0, 0]


def test_what_cannot_be_read_is_refused_with_a_message(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (root / "layout.json").write_text(json.dumps({"format": 4, "buckets": 1, "generation": 1}))
    with pytest.raises(StateError, match="state format 4, this runtime reads formats 1, 2, 3"):
        BucketStore.open(str(root), 0)
    with pytest.raises(StateError, match="codec 2: this runtime reads codecs 0 and 1"):
        _load(b"\x04" + ValueCodec().encode(1))
    with pytest.raises(StateError, match="does not decode"):
        _load(b"\x02" + pickle.dumps(Long(1), 3)[:-2])


class _FromProtocol4:
    """A value only pickle protocols 4 and later write (the codec writes protocol 3)."""

    def __reduce_ex__(self, protocol):
        if protocol < 4:
            raise pickle.PicklingError("protocol 4 or later")
        return (_FromProtocol4, ())

    def __eq__(self, other):
        return type(other) is _FromProtocol4


def test_what_the_codec_cannot_write_goes_as_a_plain_pickle(tmp_path):
    root = str(tmp_path / "s")
    create(root, 1)
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        s.put_all("a", 0, [((0,), Long(1)), ((1,), [_FromProtocol4(), Long(2)])])
        s.put_all("a", 1, [((0,), Long(3))])
        s.commit(0)
        assert [raw[0] for _, raw in s.committed_data()] == [0, 0, 2]
        assert s.get_many("a", [(0, 0), (0, 1), (1, 0)]) == [Long(1), [_FromProtocol4(), 2], 3]
        assert type(s.get("a", (0, 1))[1]) is Long
