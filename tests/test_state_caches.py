"""Event caches kept in the bucket's state store bucket by bucket (runtime/state/variables.py), a
Flex's and those of a derived element's DECLARE block: the same batches (replays included)
through the store and through the pickled layout give the same rows; the state files hold the
counts of buckets; a batch reads only the cache buckets it touches; a cache with a time retention
is in the store's time index, and its sweep reads only the buckets with entries to drop."""
from __future__ import annotations


import pyarrow as pa

from buckets import bucket_table, variable_store_plan
from runtime.arrow_state import bucket_runner, load_states
from runtime.state import BucketStore
from runtime.state.variables import stored_cache

FLEX = """
create input stream s schema (k string, id integer, v integer);
create flex f in s out output stream o schema (k string, n integer, total integer, m integer,
                                               low integer, recent integer)
  partition by s roundrobin partitions 2
begin
  declare
    eventCache(s[k], 3 events) last3;
    eventCache(s[k], coalesce) byid;
    eventCache(s[k], 2 events, manual, v asc) lows;
    eventCache(s[k], 10 seconds) recent;
  end;
  on s {
    if (s.v > 5) { keyCache(lows, s); insertCache(lows, s); }
    keyCache(lows, s);
    output [k = s.k; n = count(last3.v); total = sum(last3.v); m = count(byid.v);
            low = first(lows.v); recent = count(recent.v);];
  };
end;
"""
ROW = pa.struct([("k", pa.string()), ("id", pa.int32()), ("v", pa.int32())])


def _table(rows, first_seq):
    """Processor input of one bucket: (instance, key, id, value) rows on port 0."""
    return bucket_table([(inst, "i", None, {"k": k, "id": i, "v": v}, False)
                         for inst, k, i, v in rows], first_seq, ROW)


BATCHES = [
    [(0, "a", 1, 1), (0, "b", 2, 7), (1, "a", 3, 9), (0, "a", 1, 2), (0, None, 4, 8)],
    [(0, "a", 5, 6), (0, "a", 1, 3), (1, "z", 6, 1), (1, "a", 3, 12), (0, None, 7, 1)],
    [(0, "b", 2, 9), (0, "c", 8, 2), (1, "a", 9, 6), (1, "a", 3, 7)],
    [(0, "a", 1, 10), (0, "b", 10, 11), (1, "z", 6, 8), (0, "a", 11, 4)],
]


def _run_all(plan_text, state_dir):
    outs = []
    for batch_id in (0, 1, 1, 2, 3, 3):  # batches 1 and 3 run again (a crash before commit)
        table = _table(BATCHES[batch_id], 100 * batch_id)
        out = bucket_runner(plan_text, "o", frozenset(), state_dir, batch_id, 1000)((None,), table)
        outs.append(out.to_pylist())
    return outs


def test_the_store_gives_the_outputs_of_the_pickled_caches(tmp_path, monkeypatch):
    import runtime.arrow_state as arrow_state

    plan_text = variable_store_plan(tmp_path, FLEX)
    stored = _run_all(plan_text, str(tmp_path / "store"))
    values = load_states(str(tmp_path / "store"), 0, 4)[0]["vars"]
    assert values["last3"].buckets == 4 and values["byid"].buckets == 4  # a, b, c, null
    assert values["lows"].buckets == 3  # (manual: the rows over 5: a, b, null)
    assert stored_cache(values["recent"]) and values["recent"].buckets == 4  # (time: in the index)
    monkeypatch.setattr(arrow_state, "uses_variable_store", lambda element: False)
    pickled = _run_all(plan_text, str(tmp_path / "pickle"))
    assert isinstance(load_states(str(tmp_path / "pickle"), 0, 4)[0]["vars"]["last3"].buckets, dict)
    assert pickled == stored
    assert stored[1] == stored[2] and stored[4] == stored[5]  # a replay gives the same rows
    rows = [(r["k"], r["n"], r["total"], r["m"], r["low"]) for r in stored[-1]
            if r["__kind"] == "row" and r["__inst"] == 0]
    # instance 0, key a: last3 holds v 3, 10 and 4 (1, 2 and 6 pushed out); byid all 6 (a
    # stream has no primary key to coalesce by); lows the rows over 5 (6, 10), lowest first
    assert rows[-1] == ("a", 3, 17, 6, 6)


def test_a_batch_reads_only_the_cache_buckets_it_touches(tmp_path, monkeypatch):
    plan_text = variable_store_plan(tmp_path, FLEX)
    state_dir = str(tmp_path / "store")
    many = [(0, f"k{i}", i, 1) for i in range(1000)]
    bucket_runner(plan_text, "o", frozenset(), state_dir, 0, 1000)((None,), _table(many, 0))
    assert load_states(state_dir, 0, 1)[0]["vars"]["last3"].buckets == 1000
    reads: list = []
    real_get, real_many = BucketStore.get, BucketStore.get_many
    monkeypatch.setattr(BucketStore, "get", lambda self, ns, key, default=None:
                        reads.append((ns, key)) or real_get(self, ns, key, default))
    monkeypatch.setattr(BucketStore, "get_many", lambda self, ns, keys, default=None:
                        reads.extend((ns, k) for k in keys) or real_many(self, ns, keys, default))
    out = bucket_runner(plan_text, "o", frozenset(), state_dir, 1, 1000)(
        (None,), _table([(0, "k5", 5, 2), (0, "k7", 7, 3)], 5000))
    rows = [(r["k"], r["n"], r["total"]) for r in out.to_pylist() if r["__kind"] == "row"]
    assert rows == [("k5", 2, 3), ("k7", 2, 4)]
    assert 0 < len(reads) <= 12


TIMED = """
create input stream s schema (k string, id integer, v integer);
create flex f in s out output stream o schema (k string, n integer, total integer, r integer)
  partition by s roundrobin partitions 2
begin
  declare
    eventCache(s[k], 3 events) last3;
    eventCache(s[k], 10 seconds) recent;
    eventCache(s[k], 5 seconds, v desc) top;
  end;
  on s {
    output [k = s.k; n = count(last3.v); total = sum(recent.v); r = first(top.v);];
  };
end;
"""

DERIVED = """
create input stream s schema (k string, id integer, v integer);
create output stream o
  declare
    eventCache(s[k], 3 events) last3;
    eventCache(s[k], 10 seconds) recent;
    eventCache(s[k], coalesce) byid;
    dictionary(string, integer) seen;
    integer bump(string k) {
      if (isnull(seen[k])) { seen[k] := 0; }
      seen[k] := seen[k] + 1;
      return seen[k];
    }
  end
  partition by s roundrobin partitions 2
  as select s.k k, count(last3.v) n, sum(recent.v) total, count(byid.v) m, bump(s.k) b from s;
"""

# (batch id, processing time ms): batch 1 and 3 run again; between batches time goes on, and the
# 10-second cache drops records as it does
TIMES = [(0, 1000), (1, 7000), (1, 7000), (2, 12500), (3, 30000), (3, 30000)]


def _run_timed(plan_text, state_dir, timed):
    outs = []
    for batch_id, now in TIMES:
        table = _table(BATCHES[batch_id], 100 * batch_id)
        out = bucket_runner(plan_text, "o", frozenset(), state_dir, batch_id, now, timed)(
            (None,), table)
        outs.append(out.to_pylist())
    return outs


def _both(tmp_path, monkeypatch, text, timed):
    """The rows of the batches of TIMES through the store and through the pickled layout."""
    import runtime.arrow_state as arrow_state
    plan_text = variable_store_plan(tmp_path, text)
    stored = _run_timed(plan_text, str(tmp_path / "store"), timed)
    with monkeypatch.context() as m:
        m.setattr(arrow_state, "uses_variable_store", lambda element: False)
        pickled = _run_timed(plan_text, str(tmp_path / "pickle"), timed)
    assert isinstance(load_states(str(tmp_path / "pickle"), 0, 4)[0]["vars"]["recent"].buckets,
                      dict)
    return stored, pickled


def test_time_caches_in_the_store_give_the_rows_of_the_pickled_ones(tmp_path, monkeypatch):
    """A Flex's time-retained caches (one ordered), with expiry at each batch's end (timed) or
    not: the store gives the rows of the pickled layout, replays included, the buckets whose
    records all expired are gone from the store, and the others are in its time index at their
    oldest record's time."""
    for timed in (True, False):
        here = tmp_path / str(timed)
        here.mkdir()
        stored, pickled = _both(here, monkeypatch, TIMED, timed)
        assert stored == pickled
        assert stored[1] == stored[2] and stored[4] == stored[5]
        values = load_states(str(here / "store"), 0, 4)[0]["vars"]
        assert values["recent"].buckets == 2  # swept (a Flex sweeps before each batch too)
        with BucketStore.open(str(here / "store" / "rows"), 0) as store:
            store.begin(4)
            assert sorted(k for k, _ in store.scan("c.recent.t0")) == [(0, "a"), (0, "b")]
            assert [t for t, _ in store.timed("c.recent.t0")] == [30000, 30000]


def test_caches_and_dictionaries_of_a_derived_elements_declare_are_in_the_store(tmp_path,
                                                                               monkeypatch):
    """A derived stream's DECLARE block: its event caches (count, time, coalesce) and its
    dictionary are in the store (the state file holds counts and marks), and the rows are those
    of the pickled layout, replays included."""
    from runtime.state.variables import HeldDictionary
    stored, pickled = _both(tmp_path, monkeypatch, DERIVED, True)
    assert stored == pickled
    assert stored[1] == stored[2] and stored[4] == stored[5]
    values = load_states(str(tmp_path / "store"), 0, 4)[0]["vars"]
    assert values["last3"].buckets == 4 and values["byid"].buckets == 4
    assert values["recent"].buckets == 2
    assert isinstance(values["seen"], HeldDictionary) and values["seen"].size == 3  # a, b, c
    rows = [(r["k"], r["n"], r["total"], r["m"], r["b"]) for r in stored[-1]
            if r["__kind"] == "row" and r["__inst"] == 0]
    # instance 0, key a at 30 s: last3 holds 3, 10, 4; recent only this batch's 10 and 4 (the
    # rest older than 10 s); byid all 6 (a stream: no key to coalesce by); seen: a's 6th row
    assert rows[-1] == ("a", 3, 14, 6, 6)


def test_a_sweep_reads_only_the_buckets_with_records_to_drop(tmp_path, monkeypatch):
    """1,000 buckets held in a time cache, 10 of them newer: a sweep before the old ones are due
    reads none of them; one after reads the old ones (found by time) and leaves the new."""
    plan_text = variable_store_plan(tmp_path, TIMED)
    state_dir = str(tmp_path / "store")
    bucket_runner(plan_text, "o", frozenset(), state_dir, 0, 1000, True)(
        (None,), _table([(0, f"k{i}", i, 1) for i in range(1000)], 0))
    bucket_runner(plan_text, "o", frozenset(), state_dir, 1, 8000, True)(
        (None,), _table([(0, f"k{i}", i, 2) for i in range(10)], 5000))
    reads: list = []
    real_get, real_many, real_expire = BucketStore.get, BucketStore.get_many, BucketStore.expire
    monkeypatch.setattr(BucketStore, "get", lambda self, ns, key, default=None:
                        reads.append((ns, key)) or real_get(self, ns, key, default))
    monkeypatch.setattr(BucketStore, "get_many", lambda self, ns, keys, default=None:
                        reads.extend((ns, k) for k in keys) or real_many(self, ns, keys, default))
    monkeypatch.setattr(BucketStore, "expire", lambda self, ns, before:
                        [reads.append((ns, k)) or (k, v) for k, v in real_expire(self, ns, before)])
    bucket_runner(plan_text, "o", frozenset(), state_dir, 2, 9000, True)(
        (None,), _table([(0, "k5", 5, 3)], 6000))
    assert 0 < len(reads) <= 12  # the row's own buckets; the sweep found nothing due
    assert load_states(state_dir, 0, 3)[0]["vars"]["recent"].buckets == 1000
    reads.clear()
    bucket_runner(plan_text, "o", frozenset(), state_dir, 3, 12000, True)(
        (None,), _table([(0, "k5", 5, 4)], 7000))
    swept = [k for ns, k in reads if ns == "c.recent.t0"]
    assert 990 <= len(swept) <= 1000  # those of batch 0 only (k0..k9 were touched at 8 s)
    assert load_states(state_dir, 0, 4)[0]["vars"]["recent"].buckets == 10
