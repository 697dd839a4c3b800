"""runtime/state/variables.py: a Flex's dictionaries in the bucket's state store, entry by entry,
against the pickled layout (the same batches, a replayed batch included), and what a batch reads
and writes."""
import datetime as dt
import json

import pyarrow as pa
import pytest

from ccl.splash.types import INTEGER, LONG, STRING, Type
from ccl.splash.values import Dictionary, Long
from buckets import bucket_table, variable_store_plan
from planned import plan_json
from runtime.arrow_state import bucket_runner, load_states
from runtime.state import BucketStore, create
from runtime.state.variables import (HeldDictionary, StoredDictionary, attach, detach, storable)

FLEX = """
create input stream s schema (k string, v integer);
create flex f in s out output stream o schema (k string, n integer, total integer, keys string,
                                               others integer)
  partition by s roundrobin partitions 2
begin
  declare
    dictionary(string, integer) counts;
    dictionary(string, integer) other;
    dictionary(string, typeof(s)) last;
    integer seen := 0;
  end;
  on s {
    seen := seen + 1;
    if (s.v < 0) { remove(counts, s.k); }
    else if (s.v = 0) { clear(counts); }
    else if (s.v = 99) { counts := new dictionary(string, integer); counts['fresh'] := seen; }
    else if (s.v = 98) { other := counts; }
    else if (s.v = 97) { other := new dictionary(string, integer); other['x'] := 1; }
    else {
      if (isnull(counts[s.k])) { counts[s.k] := 0; }
      counts[s.k] := counts[s.k] + s.v;
    }
    last[s.k] := s;
    string keys := '';
    for (x in counts) { keys := keys + x + ','; }
    output [k = s.k; n = size(counts); total = counts[s.k]; keys = keys; others = size(other);];
  };
end;
"""
ROW = pa.struct([("k", pa.string()), ("v", pa.int32())])


def _table(rows, first_seq):
    """Processor input of one bucket: (instance, key, value) rows on port 0."""
    return bucket_table([(inst, "i", None, {"k": k, "v": v}, False) for inst, k, v in rows],
                        first_seq, ROW)


BATCHES = [
    [(0, "a", 1), (0, "b", 2), (1, "a", 5), (0, "c", 3)],
    [(0, "b", 1), (0, "a", -1), (0, "a", 4), (1, "z", 1), (1, "a", 2)],   # a removed, then last
    [(0, "d", 1), (0, "x", 98), (0, "e", 2), (1, "q", 0), (1, "r", 1)],   # shared; cleared
    [(0, "b", 3), (0, "y", 99), (0, "g", 1), (1, "r", 2), (1, "w", 97)],  # replaced by a new one
    [(0, "x", 98), (0, "h", 1), (0, "y", 97), (0, "b", 1), (1, "s", 1)],  # shared, then not
    [(0, "b", 2), (0, "i", 1), (1, "s", -1), (1, "t", 4)],
]


def _run_all(plan_text, state_dir):
    outs = []
    for batch_id in (0, 1, 2, 2, 3, 4, 4, 5):  # batches 2 and 4 run again (a crash before commit)
        table = _table(BATCHES[batch_id], 100 * batch_id)
        out = bucket_runner(plan_text, "o", frozenset(), state_dir, batch_id, 0)((None,), table)
        outs.append(out.to_pylist())
    return outs


def test_the_store_gives_the_outputs_of_the_pickled_dictionaries(tmp_path, monkeypatch):
    """The same batches through the store and through the pickled layout (updates, removes,
    clear, a dictionary replaced, one shared by two variables, replayed batches) give the same
    rows; the state files hold marks, not the entries."""
    import runtime.arrow_state as arrow_state

    plan_text = variable_store_plan(tmp_path, FLEX)
    stored = _run_all(plan_text, str(tmp_path / "store"))
    states = load_states(str(tmp_path / "store"), 0, 6)
    assert isinstance(states[1]["vars"]["counts"], HeldDictionary)
    assert states[1]["vars"]["counts"].size == 2  # r, t (s removed)
    assert isinstance(states[1]["vars"]["last"], HeldDictionary)  # records of scalars: stored too
    monkeypatch.setattr(arrow_state, "uses_variable_store", lambda element: False)
    pickled = _run_all(plan_text, str(tmp_path / "pickle"))
    assert pickled == stored
    rows = [r for r in stored[-1] if r["__kind"] == "row"]
    assert [(r["k"], r["keys"]) for r in rows][:2] == [("b", "fresh,g,h,b,"),
                                                        ("i", "fresh,g,h,b,i,")]
    assert stored[2] == stored[3] and stored[5] == stored[6]  # a replay gives the same rows


def _dict(*items):
    return Dictionary(items, STRING, INTEGER)


def test_a_batch_writes_the_entries_it_changes_and_keeps_insertion_order(tmp_path):
    """A batch that touches one key of a dictionary of many writes that key only; iteration
    follows insertion order across batches (a removed key inserted again goes last)."""
    root = str(tmp_path / "root")
    create(root, 1)
    states = {7: {"vars": {"d": _dict(*[(f"k{i:04d}", i) for i in range(1000)]), "n": 3}}}
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        attached = attach(states, store)
        assert attached == {}
        assert detach(states, store, attached) == 1000
        store.commit(0)
    assert states[7]["vars"]["d"] == HeldDictionary(1000, 1000, STRING, INTEGER)
    with BucketStore.open(root, 0) as store:
        written = []
        put, delete = store.put, store.delete
        store.put = lambda ns, key, value, **kw: (written.append(("put", ns, key)),
                                                  put(ns, key, value, **kw))
        store.delete = lambda ns, key: (written.append(("delete", ns, key)), delete(ns, key))
        put_all = store.put_all

        def spy_put_all(ns, inst, items, **kw):
            items = list(items)
            written.extend(("put", ns, (inst, *key)) for key, _ in items)
            put_all(ns, inst, items, **kw)
        store.put_all = spy_put_all
        store.begin(1)
        attached = attach(states, store)
        d = states[7]["vars"]["d"]
        assert isinstance(d, StoredDictionary) and len(d) == 1000
        d["k0005"] = d["k0005"] + 100
        assert d.get("nope") is None and "k0999" in d
        d.pop("k0001")
        d["k0001"] = -1
        detach(states, store, attached)
        store.commit(1)
    assert sorted(written) == sorted([
        ("put", "v.d", (7, "k0005")), ("put", "v.d", (7, "k0001")),
        ("delete", "v.d.o", (7, 1)), ("put", "v.d.o", (7, 1000))])
    with BucketStore.open(root, 0) as store:
        store.begin(2)
        attach(states, store)
        d = states[7]["vars"]["d"]
        keys = list(d)
        assert len(keys) == 1000 and keys[:2] == ["k0000", "k0002"] and keys[-1] == "k0001"
        assert d["k0005"] == 105 and d["k0001"] == -1
        assert d == _dict(*[(k, d[k]) for k in keys])
        d.clear()
        assert len(d) == 0 and list(d) == []


def test_a_replayed_batch_starts_from_the_dictionary_before_it(tmp_path):
    """Batch 1 committed, then run again: it sees the entries as batch 0 left them."""
    root = str(tmp_path / "root")
    create(root, 1)
    base = {0: {"vars": {"d": Dictionary([(Long(5), "a")], LONG, STRING)}}}
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        detach(base, store, attach(base, store))
        store.commit(0)
    held = base[0]["vars"]["d"]

    def batch_one():
        states = {0: {"vars": {"d": held}}}
        with BucketStore.open(root, 0) as store:
            store.begin(1)
            attached = attach(states, store)
            d = states[0]["vars"]["d"]
            before = list(d.items())
            d[Long(6)] = "b"
            del d[Long(5)]
            detach(states, store, attached)
            store.commit(1)
        return before, states[0]["vars"]["d"]

    first, after = batch_one()
    again, after_again = batch_one()
    assert first == again == [(5, "a")] and type(first[0][0]) is Long  # the key's type kept
    assert after == after_again == HeldDictionary(1, 2, LONG, STRING)


def test_which_dictionaries_are_kept_by_entry():
    assert storable(_dict())
    assert storable(Dictionary((), Type("timestamp"), Type("money", (2,))))
    assert storable(Dictionary((), STRING, Type("vector", (INTEGER,))))
    assert storable(Dictionary((), LONG, Type("dictionary", (STRING, Type("vector", (INTEGER,))))))
    assert not storable(Dictionary((), STRING, Type("vector", (Type("any"),))))
    assert not storable(Dictionary((), STRING, Type("vector", (Type("eventcache", (INTEGER,)),))))
    assert not storable(Dictionary((), Type("vector", (INTEGER,)), INTEGER))  # key not scalar
    assert not storable(Dictionary((), STRING, Type("record")))
    assert not storable(Dictionary())  # types not known
    assert not storable({"a": 1})


def test_a_stored_dictionary_pickles_and_copies_as_a_plain_one(tmp_path):
    import copy
    import pickle

    root = str(tmp_path / "root")
    create(root, 1)
    states = {0: {"vars": {"d": _dict(("b", 2), ("a", 1))}}}
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        detach(states, store, attach(states, store))
        store.commit(0)
        store.begin(1)
        attach(states, store)
        d = states[0]["vars"]["d"]
        d["c"] = 3
        for twin in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d), d.copy()):
            assert type(twin) is Dictionary and list(twin.items()) == [("b", 2), ("a", 1), ("c", 3)]
            assert twin.key == STRING and twin.value == INTEGER and twin == d
        assert d != _dict(("b", 2))


@pytest.mark.parametrize("key", [1.5, dt.datetime(2026, 1, 2, 3, 4, 5), b"\x00raw"])
def test_keys_of_other_scalar_types(tmp_path, key):
    root = str(tmp_path / "root")
    create(root, 1)
    kind = {float: "float", dt.datetime: "timestamp", bytes: "binary"}[type(key)]
    states = {3: {"vars": {"d": Dictionary([(key, 1)], Type(kind), INTEGER)}}}
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        detach(states, store, attach(states, store))
        store.commit(0)
        store.begin(1)
        attach(states, store)
        d = states[3]["vars"]["d"]
        assert d[key] == 1 and list(d) == [key]


RECORDS = """
create input stream s schema (k string, v integer);
create flex g in s out output stream o schema (k string, n integer, total integer, last integer)
  partition by s roundrobin partitions 2
begin
  declare
    typeof(o) cur;
    dictionary(string, typeof(o)) acc;
  end;
  on s {
    if (s.v = 50) { cur.total := cur.total + 1000; }
    if (isnull(acc[s.k])) { acc[s.k] := [k = s.k; n = 0; total = 0; last = 0;]; }
    acc[s.k].n := acc[s.k].n + 1;
    acc[s.k].total := acc[s.k].total + s.v;
    if (s.v = 7) { cur := acc[s.k]; }
    if (s.v < 0) { remove(acc, s.k); }
    output [k = s.k; n = acc[s.k].n; total = acc[s.k].total; last = cur.total;];
  };
end;
"""
RECORD_BATCHES = [
    [(0, "a", 1), (0, "b", 7), (0, "a", 2), (1, "a", 4)],
    [(0, "c", 50), (0, "b", 1), (0, "a", 7), (1, "a", -1)],
    [(0, "a", 3), (0, "d", 50), (0, "b", 2), (1, "a", 2)],
    [(0, "a", 1), (0, "b", 50), (1, "z", 7)],
]


def test_dictionaries_of_records_in_the_store_give_the_rows_of_the_pickled_ones(tmp_path,
                                                                              monkeypatch):
    """A dictionary of records (of scalar fields) changed in place (``acc[k].n := ...``), read
    into a variable and removed from: kept in the store entry by entry, it gives the rows of the
    pickled layout, replays included."""
    import runtime.arrow_state as arrow_state
    path = tmp_path / "g.ccl"
    path.write_text(RECORDS)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    plan_text = json.dumps(plan)

    def run_all(state_dir):
        outs = []
        for batch_id in (0, 1, 1, 2, 3, 3):
            table = _table(RECORD_BATCHES[batch_id], 100 * batch_id)
            out = bucket_runner(plan_text, "o", frozenset(), state_dir, batch_id, 0)((None,), table)
            outs.append(out.to_pylist())
        return outs
    stored = run_all(str(tmp_path / "store"))
    held = load_states(str(tmp_path / "store"), 0, 4)[0]["vars"]["acc"]
    assert isinstance(held, HeldDictionary) and held.size == 4  # a, b, c, d
    monkeypatch.setattr(arrow_state, "uses_variable_store", lambda element: False)
    pickled = run_all(str(tmp_path / "pickle"))
    assert pickled == stored
    assert stored[1] == stored[2] and stored[4] == stored[5]
    rows = [(r["k"], r["n"], r["total"]) for r in stored[-1] if r["__kind"] == "row"
            and r["__inst"] == 0]
    assert rows == [("a", 5, 14), ("b", 4, 60)]  # in-place changes kept across batches


def test_a_dictionary_whose_record_another_variable_holds_stays_pickled(tmp_path):
    """A record held both by a dictionary and by another variable (one object): the state file
    keeps them one object, the store could not, so the dictionary stays plain while it is so,
    and goes to the store once it is not."""
    from ccl.splash.values import Record
    rtype = Type("record", fields=(("x", INTEGER),))
    rec = Record([("x", 1)], types={"x": INTEGER})
    d = Dictionary([("a", rec), ("b", Record([("x", 2)], types={"x": INTEGER}))], STRING, rtype)
    assert storable(d)
    states = {0: {"vars": {"d": d, "r": rec}}}
    root = str(tmp_path / "root")
    create(root, 1)
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        detach(states, store, attach(states, store))
        store.commit(0)
        assert states[0]["vars"]["d"] is d  # shared with r: plain
        states[0]["vars"]["r"] = Record([("x", 1)], types={"x": INTEGER})  # a copy now
        store.begin(1)
        detach(states, store, attach(states, store))
        store.commit(1)
        assert states[0]["vars"]["d"] == HeldDictionary(2, 2, STRING, rtype)
        store.begin(2)
        attached = attach(states, store)
        assert states[0]["vars"]["d"]["a"]["x"] == 1
        detach(states, store, attached)
        store.commit(2)


VECTORS = """
create input stream s schema (k string, v integer);
create flex f in s out output stream o schema (k string, n integer, total integer, keys string,
                                               held integer)
  partition by s roundrobin partitions 2
begin
  declare
    dictionary(string, vector(integer)) hist;
    dictionary(string, dictionary(string, vector(integer))) nest;
    vector(integer) kept;
  end;
  on s {
    vector(integer) v;
    integer total := 0;
    string keys := '';
    if (s.v < 0) { remove(hist, s.k); }
    else if (s.v = 0) { clear(hist); }
    else if (s.v = 99) { kept := hist[s.k]; }
    else if (s.v = 98) { kept := new vector(integer); push_back(kept, 1); }
    else if (s.v = 97) { hist['shared'] := hist[s.k]; }
    else if (s.v = 96) { push_back(kept, 96); }
    else if (s.v = 95) { v := new vector(integer); push_back(v, 95); hist[s.k] := v; }
    else {
      if (isnull(hist[s.k])) { hist[s.k] := new vector(integer); }
      v := hist[s.k];
      push_back(v, s.v);
    }
    if (isnull(nest[s.k])) { nest[s.k] := new dictionary(string, vector(integer)); }
    if (isnull(nest[s.k]['a'])) { nest[s.k]['a'] := new vector(integer); }
    push_back(nest[s.k]['a'], s.v);
    if (not isnull(hist[s.k])) { for (x in hist[s.k]) { total := total + x; } }
    for (x in hist) { keys := keys + x + ':' + to_string(size(hist[x])) + ','; }
    output [k = s.k; n = size(nest[s.k]['a']); total = total; keys = keys; held = size(kept);];
  };
end;
"""
VECTOR_BATCHES = [
    [(0, "a", 1), (0, "b", 2), (0, "a", 3), (1, "a", 5)],
    [(0, "a", 99), (0, "a", 4), (0, "x", 96), (1, "z", 1)],   # kept shares hist['a']
    [(0, "a", 5), (0, "y", 96), (0, "b", 97), (0, "b", 6)],   # still; two entries share b's
    [(0, "a", 98), (0, "a", 7), (0, "shared", 8), (0, "b", 9), (1, "a", -1)],
    [(0, "c", 95), (0, "c", 2), (0, "a", 1), (1, "q", 0), (1, "r", 1)],
    [(0, "b", 0), (0, "d", 3), (0, "c", 1), (1, "r", 2)],
]


def test_dictionaries_of_vectors_in_the_store_give_the_rows_of_the_pickled_ones(tmp_path,
                                                                              monkeypatch):
    """Dictionaries of vectors and of dictionaries of vectors changed in place through a local
    (``v := d[k]; push_back(v, x)``), an entry shared by a variable and by two entries across
    batches, removes, clear, assignment of a new vector, replays: the store gives the rows of
    the pickled layout, and keeps the dictionaries by entry once nothing else holds them."""
    import runtime.arrow_state as arrow_state
    plan_text = variable_store_plan(tmp_path, VECTORS)

    def run_all(state_dir):
        outs = []
        for batch_id in (0, 1, 1, 2, 3, 3, 4, 5, 5):
            table = _table(VECTOR_BATCHES[batch_id], 100 * batch_id)
            out = bucket_runner(plan_text, "o", frozenset(), state_dir, batch_id, 0)((None,), table)
            outs.append(out.to_pylist())
        return outs
    stored = run_all(str(tmp_path / "store"))
    after = [load_states(str(tmp_path / "store"), 0, b)[0]["vars"] for b in (2, 5, 6)]
    assert not isinstance(after[0]["hist"], HeldDictionary)  # kept shares an entry: pickled
    assert isinstance(after[0]["nest"], HeldDictionary)
    assert after[1]["hist"]["b"] is after[1]["hist"]["shared"]  # two entries share: pickled
    assert isinstance(after[2]["hist"], HeldDictionary)  # nothing shared any more: stored
    monkeypatch.setattr(arrow_state, "uses_variable_store", lambda element: False)
    pickled = run_all(str(tmp_path / "pickle"))
    assert pickled == stored
    assert stored[1] == stored[2] and stored[4] == stored[5] and stored[7] == stored[8]
    fourth = {(r["__inst"], r["k"]): r for r in stored[6] if r["__kind"] == "row"}
    assert (fourth[0, "c"]["total"], fourth[0, "c"]["n"]) == (97, 2)  # 95 assigned, 2 pushed
    last = {(r["__inst"], r["k"]): r for r in stored[-1] if r["__kind"] == "row"}
    assert (last[0, "c"]["total"], last[0, "c"]["n"]) == (1, 3)  # hist cleared, nest not
