"""MATCHING [interval : pattern] ON cond in the per-instance engine (runtime/engine/matching.py):
no Spark. Ports follow FROM order; the clock is the now_ms the caller passes."""
from __future__ import annotations

import pickle

from planned import plan_json, typed_parts
from runtime.engine.changes import Bad, Emit, Event
from runtime.engine.element import Engine

SRC = ("create input stream T schema (id integer, temp float);\n"
       "create input stream D schema (id integer, what string);\n")


def engine(tmp_path, query: str, name: str = "o") -> Engine:
    (tmp_path / "p.ccl").write_text(SRC + query)
    plan, diags = plan_json(str(tmp_path / "p.ccl"))
    assert plan is not None, [str(d) for d in diags]
    return Engine(*typed_parts({"name": name}, plan))


def feed(eng: Engine, state: dict, events: list[tuple], now: int) -> list:
    """``events``: (ports, seq, values): the same row arrives on each of ``ports`` (a self-join)."""
    out = eng.process(state, [Event(p, "i", seq, values) for ports, seq, values in events
                              for p in ports], now)
    return [dict(o.values) if isinstance(o, Emit) else ("bad", o.reason) for o in out]


def test_followed_by_with_conditions_on_one_and_both_events(tmp_path):
    """ESP's thermostat example: two readings over 80 of one thermostat within 10 seconds. A row
    is never matched with itself; an extended partial is consumed."""
    eng = engine(tmp_path, "create output stream o as select T1.id, T1.temp t1, T2.temp t2 "
                           "from T T1, T T2 matching [10 seconds: T1, T2] "
                           "on T1.id = T2.id and T1.temp > 80 and T2.temp > 80;\n")
    state = eng.initial_state()
    rows = feed(eng, state, [((0, 1), 1, {"id": 1, "temp": 85.0}), ((0, 1), 2, {"id": 2, "temp": 70.0}),
                             ((0, 1), 3, {"id": 1, "temp": 90.0}), ((0, 1), 4, {"id": 2, "temp": 95.0})],
                now=1_000)
    assert rows == [{"id": 1, "t1": 85.0, "t2": 90.0}]
    state = pickle.loads(pickle.dumps(state))  # state is plain data, kept between batches
    # 90.0 (seq 3) still waits as a first event; 11 s after it arrived it has expired
    assert feed(eng, state, [((0, 1), 5, {"id": 1, "temp": 99.0})], now=12_500) == []
    # 95.0 (id 2) arrived at 1 s: expired too, so 97.0 only starts a partial
    assert feed(eng, state, [((0, 1), 6, {"id": 2, "temp": 97.0})], now=12_600) == []
    assert feed(eng, state, [((0, 1), 7, {"id": 1, "temp": 81.0})], now=13_000) == [
        {"id": 1, "t1": 99.0, "t2": 81.0}]


def test_a_negated_event_ends_a_partial_and_its_absence_completes_one(tmp_path):
    """[20 sec: A, !B]: a power-off not followed by a power-on of the same machine within 20 s
    is emitted once the interval has passed (negated alias columns are null)."""
    eng = engine(tmp_path, "create output stream o as select A.id, B.what back "
                           "from D A, D B matching [20 sec: A, !B] "
                           "on A.id = B.id and A.what = 'off' and B.what = 'on';\n")
    state = eng.initial_state()
    both = (0, 1)
    assert feed(eng, state, [(both, 1, {"id": 1, "what": "off"}), (both, 2, {"id": 2, "what": "off"}),
                             (both, 3, {"id": 2, "what": "on"})], now=0) == []
    assert eng.next_deadline(state) == 20_001
    # machine 2 came back; machine 1 did not: its alarm once 20 s have passed (at expiry)
    assert [dict(o.values) for o in eng.expire(state, 20_001)] == [{"id": 1, "back": None}]
    assert eng.expire(state, 40_000) == []


def test_a_sequence_of_three_with_a_guard_between(tmp_path):
    """[1 minute: A, !C, B]: A then B of the same id with no C of that id between them."""
    eng = engine(tmp_path, "create output stream o as select A.id, B.temp "
                           "from T A, T B, D C matching [1 minute: A, !C, B] "
                           "on A.id = B.id and A.id = C.id;\n")
    state = eng.initial_state()
    rows = feed(eng, state, [((0, 1), 1, {"id": 1, "temp": 1.0}), ((0, 1), 2, {"id": 2, "temp": 2.0}),
                             ((2,), 1, {"id": 1, "what": "x"}),
                             ((0, 1), 3, {"id": 1, "temp": 3.0}), ((0, 1), 4, {"id": 2, "temp": 4.0})],
                now=0)
    # id 1: its first A was cancelled by C, the second A (seq 3) waits; id 2: A (seq 2) then B (seq 4)
    assert rows == [{"id": 2, "temp": 4.0}]


def test_and_needs_both_in_any_order_and_or_either(tmp_path):
    """[1 minute: A && B, C]: an A and a B of one id in either order, then a C of that id;
    [1 minute: A, B || C]: an A then a B or a C (the other alias is null in the row)."""
    eng = engine(tmp_path, "create output stream o as select A.id, B.temp b, C.what c "
                           "from T A, T B, D C matching [1 minute: A && B, C] "
                           "on A.id = B.id and B.id = C.id and A.temp < B.temp;\n")
    state = eng.initial_state()
    rows = feed(eng, state, [((1,), 1, {"id": 1, "temp": 5.0}),    # B first
                             ((0,), 2, {"id": 1, "temp": 2.0}),    # then A (A.temp < B.temp)
                             ((2,), 1, {"id": 1, "what": "x"}),    # then C: a match
                             ((0,), 3, {"id": 2, "temp": 9.0}), ((1,), 4, {"id": 2, "temp": 1.0}),
                             ((2,), 2, {"id": 2, "what": "y"})],   # id 2: A.temp > B.temp
                now=0)
    assert rows == [{"id": 1, "b": 5.0, "c": "x"}]
    eng = engine(tmp_path, "create output stream o as select A.id, B.temp b, C.what c "
                           "from T A, T B, D C matching [1 minute: A, B || C] "
                           "on A.id = B.id and A.id = C.id;\n")
    state = eng.initial_state()
    rows = feed(eng, state, [((0, 1), 1, {"id": 1, "temp": 1.0}), ((2,), 1, {"id": 1, "what": "c"}),
                             ((0, 1), 2, {"id": 2, "temp": 2.0}), ((0, 1), 3, {"id": 2, "temp": 3.0})],
                now=0)
    assert rows == [{"id": 1, "b": None, "c": "c"}, {"id": 2, "b": 3.0, "c": None}]


def test_a_negation_inside_and_is_a_bad_record(tmp_path):
    eng = engine(tmp_path, "create output stream o as select A.id from T A, D B "
                           "matching [1 second: A && !B] on A.id = B.id;\n")
    out = eng.process(eng.initial_state(), [Event(0, "i", 1, {"id": 1, "temp": 1.0})], 0)
    assert [o.reason for o in out if isinstance(o, Bad)] == [
        "MATCHING patterns with a negation inside && or || are not run"]


def test_partials_are_kept_by_the_column_on_equates_across_aliases(tmp_path):
    """T1.id = T2.id: partials are filed by id, so an event meets only its id's partials (a
    replay of a file arrives within one interval); without such an equality, one bucket."""
    eng = engine(tmp_path, "create output stream o as select T1.id, T2.temp from T T1, T T2 "
                           "matching [10 seconds: T1, T2] on T1.id = T2.id;\n")
    matcher = eng.selects[0].matcher
    assert matcher.bucket_by == {"T1": "id", "T2": "id"}
    state = eng.initial_state()
    events = [((0, 1), k, {"id": k % 1000, "temp": float(k)}) for k in range(2000)]
    rows = feed(eng, state, events, now=0)
    assert sorted((r["id"], r["temp"]) for r in rows) == [(k, float(k + 1000)) for k in range(1000)]
    assert len(state["selects"][0]["match"]["partial"]) == 1000  # each id's second reading waits
    # stored as before: bucket value -> [partials]
    stored = pickle.loads(pickle.dumps(state))["selects"][0]["match"]["partial"]
    assert type(stored) is dict and sorted(stored) == list(range(1000))
    assert all(type(v) is list and len(v) == 1 and v[0][2]["T1"]["id"] == k for k, v in stored.items())
    loose = engine(tmp_path, "create output stream o as select T1.id from T T1, T T2 "
                             "matching [10 seconds: T1, T2] on T1.id < T2.id;\n")
    assert loose.selects[0].matcher.bucket_by == {}


def test_one_event_completing_two_partials_gives_two_matches(tmp_path):
    """Both waiting readings are followed by the event: two matches (the changes of one input row
    are merged per key, and matches have none: the earlier one was lost)."""
    eng = engine(tmp_path, "create output stream o as select T.id, T.temp, D.what from T, D "
                           "matching [10 seconds: T, D] on T.id = D.id;\n")
    state = eng.initial_state()
    rows = feed(eng, state, [((0,), 1, {"id": 1, "temp": 1.0}), ((0,), 2, {"id": 1, "temp": 2.0}),
                             ((1,), 3, {"id": 1, "what": "x"})], now=1_000)
    assert sorted(r["temp"] for r in rows) == [1.0, 2.0] and {r["what"] for r in rows} == {"x"}
