"""runtime/state: the key encoding, a bucket's RocksDB store (reads, writes, time index, commit,
replay by undo records), rebucketing, and a store used by two processes in turn; a property test
runs random batches with random crashes against a plain dict model."""
import datetime as dt
import json
import math
import os
import subprocess
import sys
import tempfile
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.state import (BucketStore, StateError, create, decode_key, encode_key, read_layout,
                           rebucket)
from runtime.state.keys import encode_items
from runtime.state.store import KEEP_UNDO, _load, count_keys, rebucket_keys

REPO = Path(__file__).resolve().parent.parent
_SHM = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# --- keys ----------------------------------------------------------------------------------------

_SCALARS = {
    "int": st.integers(-(1 << 63), (1 << 63) - 1),
    "bigint": st.integers(1 << 63, 1 << 80),
    "float": st.floats(allow_nan=False),
    "str": st.text(max_size=6),
    "bytes": st.binary(max_size=6),
    "decimal": st.decimals(allow_nan=False, allow_infinity=False, places=4,
                           min_value=-10**9, max_value=10**9),
    "naive": st.datetimes(),
    "aware": st.datetimes(timezones=st.just(dt.timezone.utc)),
    "date": st.dates(),
}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(_SCALARS)).flatmap(
    lambda kind: st.lists(st.tuples(st.integers(-5, 5), _SCALARS[kind]), min_size=2, max_size=6)))
def test_key_order_is_value_order_and_keys_round_trip(keys):
    for k in keys:
        assert decode_key(encode_key(k)) == k
    by_bytes = sorted(keys, key=encode_key)
    assert all(a <= b for a, b in zip(by_bytes, by_bytes[1:]))


def test_key_prefix_is_byte_prefix_and_equal_decimals_are_one_key():
    assert encode_key((3, "a", 1.5)).startswith(encode_items((3, "a")))
    assert not encode_key((3, "ab")).startswith(encode_key((3, "a")))
    assert encode_key((1, "a\x00b")) > encode_key((1, "a"))
    assert encode_key((1, Decimal("1.0"))) == encode_key((1, Decimal("1.00")))
    assert decode_key(encode_key((1, None, True, b"\x00\xff", -(1 << 70)))) == \
        (1, None, True, b"\x00\xff", -(1 << 70))
    with pytest.raises(TypeError):
        encode_key(("not an instance", 1))
    with pytest.raises(TypeError):
        encode_key((1, [1, 2]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.tuples(st.text(max_size=4), st.integers(-9, 9)),
                          st.tuples(st.none() | st.floats(allow_nan=False))), min_size=1, max_size=6))
def test_keys_with_tuple_items_round_trip_and_stay_distinct(keys):
    """A group or row key kept as one item of a state key (a tuple inside the tuple): decoded as
    it was, and two different keys never share bytes, nor is one a prefix of the other."""
    for k in keys:
        assert decode_key(encode_key(k)) == k
    for a in keys:
        for b in keys:
            if a != b:
                assert not encode_key(a).startswith(encode_key(b))


# --- a bucket store ------------------------------------------------------------------------------

@pytest.fixture
def fast_path(tmp_path):
    """A temporary directory, on tmpfs when there is one: RocksDB syncs its manifest at every open,
    and on a busy disk those syncs were most of these tests' time."""
    if _SHM is None:
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=_SHM) as tmp:
        yield Path(tmp)


@pytest.fixture
def root(fast_path):
    create(str(fast_path / "state"), 2)
    return str(fast_path / "state")


def _content(store, namespaces=("w", "t")):
    return {ns: {k: (v, store.time_of(ns, k)) for k, v in store.scan(ns)} for ns in namespaces}


def test_reads_see_the_batch_writes_and_scans_merge_them_in_key_order(root):
    row = {"Id": 7, "Px": Decimal("12.5000"), "At": dt.datetime(2026, 11, 26, 9, 30),
           "Raw": b"\x00\x01", "Note": None, "Q": 2.5}
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        for i in (3, 1, 2):
            s.put("w", (1, i), ("one", i))
        s.put("w", (2, 1), row)
        s.commit(0)
    with BucketStore.open(root, 0) as s:
        s.begin(1)
        s.put("w", (1, 0), ("new", 0))
        s.delete("w", (1, 2))
        s.put("w", (1, 3), ("upd", 3))
        assert list(s.scan("w", (1,))) == [((1, 0), ("new", 0)), ((1, 1), ("one", 1)),
                                            ((1, 3), ("upd", 3))]
        assert s.get("w", (2, 1)) == row and s.get("w", (1, 2), "gone") == "gone"
        assert s.get_many("w", [(1, 0), (1, 1), (1, 2), (9, 9)]) == \
            [("new", 0), ("one", 1), None, None]
        assert s.count("w") == 4 and s.count() == 4
        assert list(s.scan("other")) == []
        s.commit(1)
        stats = s.stats()
    assert stats.version == 1 and stats.disk_bytes > 0


def test_put_all_writes_what_put_writes_and_a_replay_undoes_it(root):
    from ccl.splash.values import Interval, Long
    # a long key column's values are SPLASH Longs: keyed as the int they equal
    assert encode_key((1, Long(5), Interval(-3))) == encode_key((1, 5, -3))
    assert encode_key((1, True)) != encode_key((1, 1))
    items = {("a", Long(2)): {"Id": Long(2)}, ("b", 1): ("two", 1), (): "empty key", ("c",): None}
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        s.put("w", (3, "a", 2), "before")
        s.commit(0)
        s.begin(1)
        s.put_all("w", 3, items.items())
        s.put_all("w", 4, [])
        assert s.get("w", (3, "a", 2)) == {"Id": 2} and s.get("w", (3,)) == "empty key"
        assert list(s.scan("w", (3,))) == sorted(((3, *k), v) for k, v in items.items())
        s.commit(1)
    with BucketStore.open(root, 0) as s:
        assert dict(s.scan("w")) == {(3, *k): v for k, v in items.items()}
        assert type(s.get("w", (3, "a", 2))["Id"]) is Long
        s.begin(1)  # batch 1 again: put_all's writes are undone
        assert dict(s.scan("w")) == {(3, "a", 2): "before"}
        with pytest.raises(StateError, match="outside a batch"):
            s.commit(1)
            s.put_all("w", 3, items.items())


def _same(a, b) -> bool:
    """``a`` and ``b`` equal and of the same types all the way down (a NaN equals a NaN, -0.0
    is not 0.0, a dict's keys in the same order, a subclass's attributes too)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)):
        same = len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    elif isinstance(a, dict):
        same = _same(list(a), list(b)) and all(_same(a[k], b[k]) for k in a)
    else:
        same = a == b
    if isinstance(a, Decimal):  # (a Dec's precision and scale are slots)
        same = same and str(a) == str(b) and all(getattr(a, n, None) == getattr(b, n, None)
                                                 for n in ("precision", "scale"))
    return same and getattr(a, "__dict__", None) == getattr(b, "__dict__", None)


def _stored_values():
    """Values the engine keeps in the store: rows (dicts of column values, tuples), groups and
    indexes (nested dicts and lists), Flex entries (records, vectors), of every scalar a column
    or SPLASH variable holds."""
    from ccl.splash.types import FLOAT, INTEGER
    from ccl.splash.values import Interval, Long, Record, Vector, make_dec
    longs = st.integers(-(1 << 63), (1 << 63) - 1)
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.integers(-(1 << 200), 1 << 200),
        st.floats(), st.sampled_from([-0.0, 0.0, float("nan"), float("inf")]),
        st.text(max_size=5), st.binary(max_size=5), longs.map(Long), longs.map(Interval),
        _SCALARS["decimal"], _SCALARS["naive"], _SCALARS["aware"], _SCALARS["date"],
        st.decimals(-10**6, 10**6, places=2).map(lambda d: make_dec(d, 10, 2)))
    keys = st.one_of(st.text(max_size=4), st.integers(-3, 3), longs.map(Long))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(
            lambda d: Record(d.items(), {"x": INTEGER})),
        st.lists(scalars, max_size=3).map(lambda v: Vector(v, FLOAT))), max_leaves=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(_stored_values(), min_size=1, max_size=6))
def test_every_value_the_engine_stores_reads_back_equal_and_of_the_same_types(fast_path, values):
    """Put, put whole (put_all), put timed, committed, read by another open: each value equal
    to the one written and of the same types (a SPLASH Long stays a Long, -0.0 stays -0.0)."""
    root = str(fast_path / f"v{uuid.uuid4().hex}")
    create(root, 1)
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        for i, v in enumerate(values):
            s.put("p", (0, i), v)
            s.put_timed("t", (0, i), v, i)
        s.put_all("a", 1, [((i,), v) for i, v in enumerate(values)])
        s.commit(0)
    with BucketStore.open(root, 0) as s:
        for ns, inst in (("p", 0), ("t", 0), ("a", 1)):
            got = [v for _, v in s.scan(ns, (inst,))]
            assert len(got) == len(values) and all(_same(a, b) for a, b in zip(got, values))
            assert all(_same(s.get(ns, (inst, i)), v) for i, v in enumerate(values))


def test_values_pickled_before_the_long_reducer_still_read_back():
    """A Long or Interval pickled the way the store wrote it before ccl/splash/values.py's
    reducer (``copyreg.__newobj__``: state committed by an older runtime) loads as it was."""
    import io
    import pickle

    from ccl.splash.values import Interval, Long
    value = {"Id": Long(7), "Gap": Interval(-3), "rows": [Long(1 << 62)]}
    old = io.BytesIO()
    pickler = pickle.Pickler(old, 5)
    pickler.dispatch_table = {}  # the default reduction, as before the reducer
    pickler.dump(value)
    assert old.getvalue() != pickle.dumps(value, 5)
    assert _same(_load(b"\x00" + old.getvalue()), value)
    assert _same(_load(b"\x00" + pickle.dumps(value, 5)), value)


class _SpyDb:
    """A store's RocksDB that records the keys of every read (``reads``) and every iterator
    opened (``iters``)."""

    def __init__(self, real):
        self.real, self.reads, self.iters = real, [], []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def get(self, keys, *rest):
        self.reads.append(keys)
        return self.real.get(keys, *rest)

    def iter(self, *rest):
        self.iters.append(rest)
        return self.real.iter(*rest)


def test_a_fresh_instance_written_whole_is_not_read_and_its_undo_is_one_value(root):
    """put_all of an instance holding nothing committed in the namespace (new in the batch): its
    keys are known absent (no read at commit), and their undo records are the batch mark's value
    (one RocksDB value, not one a key); a replay removes them and restores the others."""
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        s.put("w", (1, "x"), 1)
        s.put("w", (1, "y"), 1)
        s.commit(0)
        real = s._db
        s._db = spy = _SpyDb(real)
        s.begin(1)
        s.put_all("w", 2, [((k,), k) for k in "abc"])  # instance 2 holds nothing in w
        s.put_all("w", 1, [(("y",), 2)])  # instance 1 does: its key read for its undo record
        s.commit(1)
        s._db = real
        assert spy.reads == [[b"dw\x00" + encode_key((1, "y"))]]
        mark = b"u" + (1 + (1 << 63)).to_bytes(8, "big")
        undo = [k for k, _ in real.items() if k.startswith(mark)]
        assert len(undo) == 2  # the mark (holding the 3 new keys) and (1, "y")'s record
        s.begin(1)  # batch 1 again
        assert dict(s.scan("w")) == {(1, "x"): 1, (1, "y"): 1}


def test_put_all_told_whether_the_instance_is_new_reads_only_the_keys_it_must(root):
    """put_all with ``absent`` (a mapping's flush knows whether its instance held anything when
    the batch began): True reads nothing at commit and seeks nothing; False reads each key for
    its undo record, as put does; a replay brings both back exactly."""
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        s.put("w", (1, "x"), 1)
        s.commit(0)
        real = s._db
        s._db = spy = _SpyDb(real)
        s.begin(1)
        s.put_all("w", 2, [(("a",), 1), (("b",), 2)], absent=True)
        s.put_all("w", 1, [(("x",), 5), (("y",), 6)], absent=False)
        assert spy.iters == []
        s.commit(1)
        s._db = real
        assert spy.reads == [[b"dw\x00" + encode_key((1, "x")),
                              b"dw\x00" + encode_key((1, "y"))]]
        assert dict(s.scan("w")) == {(1, "x"): 5, (1, "y"): 6, (2, "a"): 1, (2, "b"): 2}
        s.begin(1)  # batch 1 again
        assert dict(s.scan("w")) == {(1, "x"): 1}


def test_nothing_before_commit_survives_a_close(root):
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        s.put("w", (1, 1), "kept")
        s.commit(0)
        s.begin(1)
        s.put("w", (1, 2), "lost")
        s.delete("w", (1, 1))
    with BucketStore.open(root, 0) as s:
        assert s.version == 0
        s.begin(1)
        assert list(s.scan("w")) == [((1, 1), "kept")]


def test_misuse_is_refused(root):
    with BucketStore.open(root, 1) as s:
        with pytest.raises(StateError):
            s.put("w", (1, 1), 1)
        s.begin(0)
        with pytest.raises(StateError):
            s.commit(1)
        s.put("w", (1, 1), 1)
        with pytest.raises(StateError):
            s.begin(1)
        with pytest.raises(StateError):
            s.put("", (1, 1), 1)
        with pytest.raises(StateError):  # RocksDB locks the directory: one task at a time
            with BucketStore.open(root, 1):
                pass
    with pytest.raises(StateError):
        BucketStore.open(root, 2)
    with pytest.raises(StateError):
        BucketStore.open(root + "-none", 0)


def test_a_replayed_batch_starts_from_the_state_before_it(root):
    with BucketStore.open(root, 0) as s:
        for n in range(5):
            s.begin(n)
            s.put("w", (1, n), n)
            s.delete("w", (1, n - 1))
            s.put_timed("t", (1, 0), n, 100 * n)
            s.commit(n)
    with BucketStore.open(root, 0) as s:
        assert s.get("w", (1, 4)) == 4  # read before begin: not kept over the rollback
        s.begin(4)  # batch 4 committed, Spark did not record it: back to after 3
        assert s.get("w", (1, 4)) is None
        assert _content(s) == {"w": {(1, 3): (3, None)}, "t": {(1, 0): (3, 300)}}
        s.commit(4)
        s.begin(3)  # two back: still kept
        assert _content(s) == {"w": {(1, 2): (2, None)}, "t": {(1, 0): (2, 200)}}
        assert s.version == 2
        s.commit(3)
        with pytest.raises(StateError, match="undo records of its last"):
            s.begin(1)


def test_expire_returns_the_rows_older_than_the_bound_oldest_first(root):
    with BucketStore.open(root, 0) as s:
        s.begin(0)
        for i in range(10):
            s.put_timed("t", (i % 2, i), f"r{i}", 1000 - 10 * i)
        s.commit(0)
        s.begin(1)
        s.put_timed("t", (0, 8), "moved", 5000)       # its old time (920) no longer counts
        s.put_timed("t", (1, 99), "new", 1)            # this batch's, and the oldest
        s.put_timed("t", (1, 98), "at the bound", 960)  # not before it: stays
        s.put("t", (1, 9), "untimed now")              # out of the index
        s.delete("t", (0, 6))
        assert s.next_time("t") == 1
        got = s.expire("t", 960)
        assert got == [((1, 99), "new"), ((1, 7), "r7"), ((1, 5), "r5")]
        assert s.expire("t", 960) == []
        assert s.next_time("t") == 960
        s.delete("t", (1, 98))
        s.commit(1)
    with BucketStore.open(root, 0) as s:
        s.begin(2)
        assert [k for k, _ in s.expire("t", 10_000)] == \
            [(0, 4), (1, 3), (0, 2), (1, 1), (0, 0), (0, 8)]
        assert s.next_time("t") is None
        assert [k for k, _ in s.scan("t")] == [(1, 9)]
        s.commit(2)
        assert s.time_of("t", (1, 9)) is None


# --- property test: random batches and crashes against a dict model ------------------------------

_KEYS = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "c", "d"]))
_NS = st.sampled_from(["w", "t"])
_OPS = st.one_of(
    st.tuples(st.just("put"), _NS, _KEYS, st.integers(0, 99)),
    st.tuples(st.just("put_timed"), _NS, _KEYS, st.integers(0, 99), st.integers(0, 50)),
    st.tuples(st.just("delete"), _NS, _KEYS),
    st.tuples(st.just("expire"), _NS, st.integers(0, 55)),
    st.tuples(st.just("get"), _NS, st.lists(_KEYS, max_size=3)),
    # an instance's part written whole (put_all: an instance new in the batch, or not)
    st.tuples(st.just("put_all"), _NS, st.integers(0, 3),
              st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 99),
                              max_size=3)),
)
_BATCHES = st.lists(st.tuples(st.lists(_OPS, max_size=12), st.integers(1, 2),
                              st.sampled_from(["commit", "crash", "replay", "replay_two"])),
                    min_size=1, max_size=6)


def _apply_model(state, ops):
    """The model's state after ``ops`` and what each expire and get returned."""
    state = {ns: dict(rows) for ns, rows in state.items()}
    seen = []
    for op in ops:
        rows = state.setdefault(op[1], {})
        if op[0] == "put":
            rows[op[2]] = (op[3], None)
        elif op[0] == "put_timed":
            rows[op[2]] = (op[3], op[4])
        elif op[0] == "delete":
            rows.pop(op[2], None)
        elif op[0] == "put_all":
            rows.update(((op[2], k), (v, None)) for k, v in op[3].items())
        elif op[0] == "get":
            seen.append([rows[k][0] if k in rows else None for k in op[2]])
        else:
            due = sorted(((t, encode_key(k), k, v) for k, (v, t) in rows.items()
                          if t is not None and t < op[2]))
            seen.append([(k, v) for _, _, k, v in due])
            for _, _, k, _ in due:
                del rows[k]
    return {ns: rows for ns, rows in state.items() if rows}, seen


def _apply_store(store, ops):
    seen = []
    for op in ops:
        if op[0] == "put":
            store.put(op[1], op[2], op[3])
        elif op[0] == "put_timed":
            store.put_timed(op[1], op[2], op[3], op[4])
        elif op[0] == "delete":
            store.delete(op[1], op[2])
        elif op[0] == "put_all":
            store.put_all(op[1], op[2], [((k,), v) for k, v in op[3].items()])
        elif op[0] == "get":
            seen.append(store.get_many(op[1], op[2]) if len(op[2]) != 1
                           else [store.get(op[1], op[2][0])])
        else:
            seen.append(store.expire(op[1], op[2]))
    return seen


def _store_state(store):
    got = {ns: {k: (v, store.time_of(ns, k)) for k, v in store.scan(ns)} for ns in ("w", "t")}
    return {ns: rows for ns, rows in got.items() if rows}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_BATCHES)
def test_random_batches_and_crashes_match_a_dict_model(batches):
    with tempfile.TemporaryDirectory(dir=_SHM) as tmp:  # see fast_path
        root = os.path.join(tmp, "s")
        create(root, 1)
        model: dict = {}
        after: dict[int, dict] = {}  # batch id -> the model after it
        batch_id = -1
        prev_ops = None
        for ops, gap, mode in batches:
            batch_id += gap  # buckets without rows in a batch commit nothing for it
            want, want_seen = _apply_model(model, ops)
            with BucketStore.open(root, 0) as s:
                s.begin(batch_id)
                assert _store_state(s) == model
                assert _apply_store(s, ops) == want_seen
                assert _store_state(s) == want
                if mode != "crash":  # "crash": the task dies before its commit
                    s.commit(batch_id)
            if mode == "crash":
                with BucketStore.open(root, 0) as s:
                    s.begin(batch_id)
                    assert _store_state(s) == model
                    assert _apply_store(s, ops) == want_seen
                    s.commit(batch_id)
            elif mode == "replay":  # committed, not recorded by Spark: runs again, same rows
                with BucketStore.open(root, 0) as s:
                    s.begin(batch_id)
                    assert _store_state(s) == model
                    assert _apply_store(s, ops) == want_seen
                    s.commit(batch_id)
            elif mode == "replay_two" and prev_ops is not None and batch_id - gap in after:
                first = batch_id - gap  # both this batch and the one before run again
                with BucketStore.open(root, 0) as s:
                    s.begin(first)
                    before_first = max((b for b in after if b < first), default=None)
                    assert _store_state(s) == (after[before_first] if before_first is not None
                                               else {})
                    _apply_store(s, prev_ops)
                    s.commit(first)
                    s.begin(batch_id)
                    assert _store_state(s) == model
                    _apply_store(s, ops)
                    s.commit(batch_id)
            model = want
            after[batch_id] = want
            prev_ops = ops
        with BucketStore.open(root, 0) as s:
            assert s.version == batch_id
            s.begin(batch_id + 1)
            assert _store_state(s) == model
            assert s.count() == sum(len(rows) for rows in model.values())


# --- two processes ------------------------------------------------------------------------------

_CHILD = """
import sys
from runtime.state import BucketStore
with BucketStore.open(sys.argv[1], 1) as s:
    s.begin(1)
    seen = s.get("w", (5, "k"))
    s.put("w", (5, "k"), seen + ["child"])
    s.put_timed("t", (5, "x"), "timed", 42)
    s.commit(1)
print(seen)
"""


def test_a_bucket_closed_by_one_process_is_opened_by_another(root):
    with BucketStore.open(root, 1) as s:
        s.begin(0)
        s.put("w", (5, "k"), ["parent"])
        s.commit(0)
    out = subprocess.run([sys.executable, "-c", _CHILD, root], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['parent']"
    with BucketStore.open(root, 1) as s:
        assert s.version == 1
        s.begin(2)
        assert s.get("w", (5, "k")) == ["parent", "child"]
        assert s.expire("t", 100) == [((5, "x"), "timed")]


_KILLED = """
import os, signal, sys
from runtime.state import BucketStore
s = BucketStore.open(sys.argv[1], 0)
s.begin(1)
s.put("w", (1, "a"), "committed")
s.put_timed("t", (1, "b"), "timed", 10)
s.commit(1)
s.begin(2)
s.put("w", (1, "a"), "never committed")
s.delete("t", (1, "b"))
os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush: what a killed Spark task leaves
"""


def test_a_killed_process_leaves_its_last_commit(root):
    out = subprocess.run([sys.executable, "-c", _KILLED, root], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == -9, out.stderr
    with BucketStore.open(root, 0) as s:  # the lock died with the process
        assert s.version == 1
        s.begin(2)
        assert list(s.scan("w")) == [((1, "a"), "committed")]
        assert s.expire("t", 11) == [((1, "b"), "timed")]


# --- rebucketing and the layout -------------------------------------------------------------------

def _fill(root, buckets, bucket_of, batches):
    for n in range(batches):
        for b in range(buckets):
            with BucketStore.open(root, b) as s:
                s.begin(n)
                for inst in range(12):
                    if bucket_of(inst) == b:
                        s.put("w", (inst, n), f"{inst}/{n}")
                        s.put_timed("t", (inst,), n, 10 * n + inst)
                s.commit(n)


def _everything(root):
    layout = read_layout(root)
    out = {}
    for b in range(layout.buckets):
        with BucketStore.open(root, b) as s:
            s.begin((s.version or 0) + 1)
            for ns in ("w", "t"):
                for k, v in s.scan(ns):
                    out[(ns, k)] = (v, s.time_of(ns, k), b)
    return out


def test_rebucket_moves_every_key_to_its_instance_bucket(fast_path):
    root = str(fast_path / "s")
    create(root, 2)
    _fill(root, 2, lambda i: i % 2, 3)
    before = _everything(root)
    layout = rebucket(root, 2, 3, lambda i: i % 3, next_batch=2)  # batch 2 runs again
    assert layout.buckets == 3 and read_layout(root) == layout
    assert sorted(os.listdir(root)) == ["g00002", "layout.json"]
    after = _everything(root)
    want = {k: (v, t, k[1][0] % 3) for k, (v, t, _) in before.items() if k[0] != "w" or k[1][1] < 2}
    want.update({("t", (i,)): (1, 10 + i, i % 3) for i in range(12)})
    assert after == want
    with BucketStore.open(root, 2) as s:
        assert s.version == 1
        s.begin(2)
        assert s.expire("t", 16) == [((2,), 1), ((5,), 1)]
        with pytest.raises(StateError):  # undo records are not carried over
            s.begin(1)
    with pytest.raises(StateError, match="in 3 buckets"):
        create(root, 2)


def test_rebucket_by_key_moves_each_value_where_its_route_says_and_counts_them(fast_path):
    """rebucket_keys: the bucket of each value is the route's (namespace, key, value), not the
    instance's; the counts per (bucket, namespace, instance) are those count_keys finds after."""
    root = str(fast_path / "s")
    create(root, 2)
    _fill(root, 2, lambda i: i % 2, 3)
    before = _everything(root)
    seen = []

    def route(ns, key, load):
        seen.append((ns, key, load()))
        return (key[0] + (key[1] if ns == "w" else 0)) % 3
    layout, counts = rebucket_keys(root, 2, 3, route, next_batch=3)
    assert layout.buckets == 3 and len(seen) == len(before)
    assert all(before[(ns, key)][0] == value for ns, key, value in seen)
    after = _everything(root)
    assert after == {k: (v, t, route(k[0], k[1], lambda: v)) for k, (v, t, _) in before.items()}
    assert counts == count_keys(root)
    assert sum(counts.values()) == len(before)
    assert counts[(route("w", (4, 2), lambda: None), "w", 4)] >= 1


def test_a_rebucket_that_fails_midway_leaves_the_old_state_whole(fast_path):
    root = str(fast_path / "s")
    create(root, 2)
    _fill(root, 2, lambda i: i % 2, 2)
    before = _everything(root)

    def broken(instance):
        if instance == 7:
            raise RuntimeError("killed")
        return instance % 4
    with pytest.raises(RuntimeError):
        rebucket(root, 2, 4, broken, next_batch=2)
    with pytest.raises(StateError, match="maps to bucket"):
        rebucket(root, 2, 4, lambda i: 9, next_batch=2)
    assert read_layout(root).buckets == 2
    assert _everything(root) == before
    create(root, 2)  # the next start removes the half-written generation
    assert sorted(os.listdir(root)) == ["g00001", "layout.json"]
    with pytest.raises(StateError, match="not 3"):
        rebucket(root, 3, 4, lambda i: i % 4, next_batch=2)
    rebucket(root, 2, 4, lambda i: i % 4, next_batch=2)
    assert {k: v for k, (v, _, _) in _everything(root).items()} == \
        {k: v for k, (v, _, _) in before.items()}


def test_another_format_is_refused(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (root / "layout.json").write_text(json.dumps({"format": 0, "buckets": 2, "generation": 1}))
    with pytest.raises(StateError, match="format"):
        BucketStore.open(str(root), 0)
    assert KEEP_UNDO == 2


def test_a_time_keeps_stored_times_expire_by_the_index_and_walk_in_time_order(tmp_path):
    """runtime/state/rows.py StoredTimes: one instance's times in a namespace of their own; a
    walk goes in time order with the batch's own writes, pop_due takes exactly the keys due (and
    only this instance's), earliest is the oldest time held, and a later batch sees them all."""
    from runtime.state.rows import StoredTimes

    root = str(tmp_path / "root")
    create(root, 1)
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        t0, t1 = StoredTimes(store, "w.t0", 0, 0), StoredTimes(store, "w.t1", 1, 0)
        for key, at in [(("c",), 30), (("a",), 10), (("b",), 20), (("d",), 10)]:
            t0[key] = at
        t1[("x",)] = 5
        t0[("c",)] = 15  # a key set again moves to its new time
        assert list(t0) == [("a",), ("d",), ("c",), ("b",)] and len(t0) == 4
        assert t0.earliest() == 10 and t1.earliest() == 5
        store.commit(0)
    with BucketStore.open(root, 0) as store:
        store.begin(1)
        t0, t1 = StoredTimes(store, "w.t0", 0, 4), StoredTimes(store, "w.t1", 1, 1)
        assert t0[("c",)] == 15 and t0.get(("z",)) is None
        t0[("e",)] = 12
        assert t0.pop(("a",)) == 10
        assert list(t0) == [("d",), ("e",), ("c",), ("b",)]
        assert t0.pop_due(15) == [("d",), ("e",), ("c",)]  # 15 is due; the other instance not
        assert list(t0) == [("b",)] and len(t0) == 1 and t0.earliest() == 20
        assert ("d",) not in t0 and t1.earliest() == 5
        store.commit(1)
    with BucketStore.open(root, 0) as store:
        store.begin(2)
        assert list(StoredTimes(store, "w.t0", 0, 1)) == [("b",)]
        assert list(StoredTimes(store, "w.t1", 1, 1)) == [("x",)]
