"""Flex operators, SPLASH state and event caches in the per-instance engine (no Spark):
runtime/engine/flex.py, runtime/engine/cache.py, docs/runtime-flex.md. Plans come from CCL text
through the planner."""
import datetime as dt
import pickle

import pytest

from planned import plan_json, typed, typed_parts
from ccl.splash import Dictionary
from runtime.engine.changes import Bad, Emit, Event
from runtime.engine.element import Engine
from runtime.engine.flex import FlexEngine, make_engine

T0 = dt.datetime(2024, 1, 1)


def build(tmp_path, text, name):
    src = tmp_path / "p.ccl"
    src.write_text(text)
    plan, diags = plan_json(str(src))
    assert plan is not None, [str(d) for d in diags]
    element = next(e for e in plan["elements"] if e["name"] == name)
    return make_engine(*typed_parts(element, plan)), plan


def ev(op, seq, port=0, **values):
    return Event(port, op, seq, values)


def ops(out):
    return [(o.op, dict(o.values)) if isinstance(o, Emit) else ("bad", o.reason) for o in out]


def roundtrip(state):
    return pickle.loads(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


# --- POWER_OUTAGES: a dictionary of off-times per machine -------------------------------------------

POWER = """
CREATE INPUT STREAM DEVICE_EVENTS SCHEMA (MACHINEID string, EVENT_TIME msdate, EVENT_NAME string,
                                          EVENT_VALUE string, MAX_TEMP float);
CREATE FLEX POWER_OUTAGES IN DEVICE_EVENTS
OUT OUTPUT STREAM POWER_OUTAGES
    SCHEMA (MACHINEID string, POWER_OFF_TIME msdate, POWER_ON_TIME msdate, DURATION_MIN float)
BEGIN
    DECLARE
        dictionary(string, msdate) offtime;
        typeof(POWER_OUTAGES) outrec;
        msdate offts;
    END;
    ON DEVICE_EVENTS {
        if (DEVICE_EVENTS.EVENT_VALUE = 'Power off') {
            offtime[DEVICE_EVENTS.MACHINEID] := DEVICE_EVENTS.EVENT_TIME;
        }
        if (DEVICE_EVENTS.EVENT_VALUE = 'Power on' AND not isnull(offtime[DEVICE_EVENTS.MACHINEID])) {
            offts := offtime[DEVICE_EVENTS.MACHINEID];
            outrec.MACHINEID := DEVICE_EVENTS.MACHINEID;
            outrec.POWER_OFF_TIME := offts;
            outrec.POWER_ON_TIME := DEVICE_EVENTS.EVENT_TIME;
            outrec.DURATION_MIN := cast(float, DEVICE_EVENTS.EVENT_TIME - offts) / 60000000;
            remove(offtime, DEVICE_EVENTS.MACHINEID);
            output setOpcode(outrec, insert);
        }
    };
END;
"""


def power(seq, machine, minutes, value, name="POWER", temp=None):
    return ev("i", seq, MACHINEID=machine, EVENT_TIME=T0 + dt.timedelta(minutes=minutes),
              EVENT_NAME=name, EVENT_VALUE=value, MAX_TEMP=temp)


def test_power_outages_durations_and_dictionary_survives_pickling(tmp_path):
    eng, _ = build(tmp_path, POWER, "POWER_OUTAGES")
    assert isinstance(eng, FlexEngine) and eng.ports == ["DEVICE_EVENTS"]
    state = eng.initial_state()
    out = eng.process(state, [power(1, "m1", 0, "Power off"), power(2, "m2", 5, "Power off"),
                              power(3, "m3", 6, "Power on")], 0)
    assert out == []                       # m3 was never off: no outage
    state = roundtrip(state)               # a new micro-batch on another worker
    offtime = state["vars"]["offtime"]
    assert isinstance(offtime, Dictionary) and offtime.value.name == "timestamp"
    assert sorted(offtime) == ["m1", "m2"]
    out = eng.process(state,
                      [power(4, "m2", 50, "Power on"), power(5, "m1", 90, "Power on"),
                       power(6, "m1", 95, "Power on")], 0)
    assert ops(out) == [
        ("i", {"MACHINEID": "m2", "POWER_OFF_TIME": T0 + dt.timedelta(minutes=5),
               "POWER_ON_TIME": T0 + dt.timedelta(minutes=50), "DURATION_MIN": 45.0}),
        ("i", {"MACHINEID": "m1", "POWER_OFF_TIME": T0,
               "POWER_ON_TIME": T0 + dt.timedelta(minutes=90), "DURATION_MIN": 90.0})]
    assert [o.seq for o in out] == [4, 5]
    assert dict(state["vars"]["offtime"]) == {}


def test_instances_have_their_own_variables(tmp_path):
    eng, _ = build(tmp_path, POWER, "POWER_OUTAGES")
    a, b = eng.initial_state(), eng.initial_state()
    eng.process(a, [power(1, "m1", 0, "Power off")], 0)
    assert eng.process(b, [power(2, "m1", 10, "Power on")], 0) == []   # b never saw m1 go off
    assert len(eng.process(a, [power(3, "m1", 10, "Power on")], 0)) == 1


# --- DASHBOARD: upserts into a keyed output window ----------------------------------------------------

DASHBOARD = POWER.split("CREATE FLEX")[0] + """
CREATE FLEX DASHBOARD IN DEVICE_EVENTS
OUT OUTPUT WINDOW DASHBOARD
    SCHEMA (MACHINEID string, POWER_STATUS integer, CURR_TEMP float, MAX_TEMP float)
    PRIMARY KEY (MACHINEID)
    KEEP ALL
BEGIN
    DECLARE
        typeof(DASHBOARD) outrec;
        dictionary(string, typeof(DASHBOARD)) prev;
        integer eventsSeen := 0;
    END;
    ON DEVICE_EVENTS {
        eventsSeen := eventsSeen + 1;
        outrec := [MACHINEID = DEVICE_EVENTS.MACHINEID; | POWER_STATUS = null; CURR_TEMP = null;
                   MAX_TEMP = null;];
        if (not isnull(prev[DEVICE_EVENTS.MACHINEID])) {
            outrec := prev[DEVICE_EVENTS.MACHINEID];
        }
        if (DEVICE_EVENTS.EVENT_NAME = 'POWER') {
            if (DEVICE_EVENTS.EVENT_VALUE = 'Power on') { outrec.POWER_STATUS := 0; }
            else { outrec.POWER_STATUS := 10; }
        }
        if (DEVICE_EVENTS.EVENT_NAME = 'TEMP') {
            outrec.CURR_TEMP := to_float(DEVICE_EVENTS.EVENT_VALUE);
            outrec.MAX_TEMP := DEVICE_EVENTS.MAX_TEMP;
        }
        output setOpcode(outrec, upsert);
        prev[DEVICE_EVENTS.MACHINEID] := outrec;
    };
    EVERY 60 SECONDS {
        output setOpcode([MACHINEID = 'heartbeat'; | POWER_STATUS = eventsSeen;], upsert);
    };
END;
"""


def test_dashboard_upserts_into_keyed_window(tmp_path):
    eng, _ = build(tmp_path, DASHBOARD, "DASHBOARD")
    state = eng.initial_state()
    out = eng.process(state, [power(1, "m1", 0, "Power on"),
                              power(2, "m1", 1, "21.5", name="TEMP", temp=30.0),
                              power(3, "m2", 2, "Power off")], 1_000)
    assert ops(out) == [
        ("i", {"MACHINEID": "m1", "POWER_STATUS": 0, "CURR_TEMP": None, "MAX_TEMP": None}),
        ("u", {"MACHINEID": "m1", "POWER_STATUS": 0, "CURR_TEMP": 21.5, "MAX_TEMP": 30.0}),
        ("i", {"MACHINEID": "m2", "POWER_STATUS": 10, "CURR_TEMP": None, "MAX_TEMP": None})]
    # the record kept in the dictionary is a copy: changing outrec for m2 did not change m1's
    assert state["vars"]["prev"]["m1"]["MACHINEID"] == "m1"
    state = roundtrip(state)
    out = eng.process(state, [power(4, "m1", 3, "Power off")], 2_000)
    assert ops(out) == [("u", {"MACHINEID": "m1", "POWER_STATUS": 10, "CURR_TEMP": 21.5,
                               "MAX_TEMP": 30.0})]
    assert sorted(state["output"]["rows"]) == [("m1",), ("m2",)]


def test_every_handler_runs_on_processing_time(tmp_path):
    eng, _ = build(tmp_path, DASHBOARD, "DASHBOARD")
    state = eng.initial_state()
    eng.process(state, [power(1, "m1", 0, "Power on")], 1_000)
    assert eng.next_deadline(state) == 61_000
    assert eng.expire(state, 60_999) == []
    out = eng.expire(state, 61_000)
    assert ops(out) == [("i", {"MACHINEID": "heartbeat", "POWER_STATUS": 1, "CURR_TEMP": None,
                               "MAX_TEMP": None})]
    assert eng.next_deadline(state) == 121_000
    # three periods late: runs once, next time on the period grid
    eng.process(state, [power(2, "m1", 1, "Power on")], 250_000)
    assert eng.next_deadline(state) == 301_000
    assert state["vars"]["eventsSeen"] == 2


# --- output rules and bad records ---------------------------------------------------------------------

RULES = """
CREATE INPUT STREAM S SCHEMA (k string, v integer, what string);
CREATE FLEX F IN S OUT OUTPUT WINDOW W SCHEMA (k string, v integer) PRIMARY KEY (k)
BEGIN
    DECLARE integer n := 0; END;
    ON S {
        n := n + 1;
        if (S.what = 'loop') { while (true) { n := n; } }
        if (S.what = 'fail') { integer x := cast(integer, 'not a number'); }
        typeof(W) r := [k = S.k; | v = S.v;];
        if (S.what = 'ins') { output setOpcode(r, insert); }
        if (S.what = 'upd') { output setOpcode(r, update); }
        if (S.what = 'del') { output setOpcode(r, delete); }
        if (S.what = 'ups') { output setOpcode(r, upsert); }
        if (S.what = 'sdel') { output setOpcode(r, safedelete); }
    };
END;
CREATE FLEX G IN S OUT OUTPUT STREAM G SCHEMA (k string, v integer)
BEGIN
    ON S {
        output setOpcode([k = S.k; v = S.v;], upsert); output [k = S.k; v = S.v + 1;];
        output setOpcode([k = S.k; v = S.v + 2;], delete); output setOpcode([k = S.k; v = 4;], update);
    };
END;
"""


def test_window_output_applies_opcodes_with_strict_keys(tmp_path):
    eng, _ = build(tmp_path, RULES, "W")
    state = eng.initial_state()
    out = eng.process(state, [ev("i", 1, k="a", v=1, what="ins"), ev("i", 2, k="a", v=2, what="ins"),
                              ev("i", 3, k="a", v=3, what="upd"), ev("i", 4, k="b", v=4, what="upd"),
                              ev("i", 5, k="b", v=5, what="ups"), ev("i", 6, k="c", v=0, what="del"),
                              ev("i", 7, k="c", v=0, what="sdel"), ev("i", 8, k="a", v=0, what="del")], 0)
    assert ops(out) == [("i", {"k": "a", "v": 1}), ("bad", "output: duplicate key ('a') in W"),
                        ("u", {"k": "a", "v": 3}), ("bad", "output: no row with key ('b') in W"),
                        ("i", {"k": "b", "v": 5}), ("bad", "output: no row with key ('c') in W"),
                        ("d", {"k": "a", "v": 3})]
    assert isinstance(out[1], Bad) and out[1].seq == 2 and out[1].values == {"k": "a", "v": 2}


def test_stream_output_turns_updates_into_inserts_and_drops_deletes(tmp_path):
    """As every plain stream does (ESP: a stream keeps no rows to update or delete)."""
    eng, _ = build(tmp_path, RULES, "G")
    out = eng.process(eng.initial_state(), [ev("i", 1, k="a", v=1, what="")], 0)
    assert ops(out) == [("i", {"k": "a", "v": 1}), ("i", {"k": "a", "v": 2}), ("i", {"k": "a", "v": 4})]


def test_failing_handler_makes_the_row_bad_and_processing_goes_on(tmp_path):
    eng, _ = build(tmp_path, RULES, "W")
    eng_small = FlexEngine(eng.element, typed(_plan_of(tmp_path)), budget=500)
    state = eng_small.initial_state()
    out = eng_small.process(state, [ev("i", 1, k="a", v=1, what="fail"),
                                    ev("i", 2, k="b", v=2, what="loop"),
                                    ev("i", 3, k="c", v=3, what="ins")], 0)
    assert [type(o) for o in out] == [Bad, Bad, Emit]
    assert "not a number" in out[0].reason or "cast" in out[0].reason
    assert "budget" in out[1].reason
    assert (out[0].seq, out[0].port, out[0].values["k"]) == (1, 0, "a")
    assert ops(out)[2] == ("i", {"k": "c", "v": 3})
    assert state["vars"]["n"] == 3        # changes made before a failure stay


def _plan_of(tmp_path):
    plan, _ = plan_json(str(tmp_path / "p.ccl"))
    return plan


def test_bad_port_opcode_and_cast(tmp_path):
    eng, _ = build(tmp_path, RULES, "W")
    state = eng.initial_state()
    out = eng.process(state, [ev("x", 1, k="a"), ev("i", 2, port=3, k="a"),
                              ev("i", 3, k="a", v="zz", what="ins")], 0)
    assert [o.reason for o in out][:2] == ["unknown opcode 'x'", "no input port 3 on W"]
    assert isinstance(out[2], Bad)


# --- transactions, two inputs, input_old ------------------------------------------------------------

GRID = """
CREATE INPUT STREAM Flows SCHEMA (Sid string, Mw float);
CREATE INPUT WINDOW Caps SCHEMA (Sid string, Cap float) PRIMARY KEY (Sid);
CREATE FLEX Grid IN Flows, Caps
OUT OUTPUT WINDOW Balance SCHEMA (Sid string, Net float, Util float, Blocks long) PRIMARY KEY (Sid)
BEGIN
    DECLARE
        dictionary(string, float) net;
        dictionary(string, float) cap;
        vector(string) touched;
        long blocks := 0;
        float lastOldCap;
    END;
    ON START TRANSACTION { resize(touched, 0); };
    ON Flows {
        if (isnull(net[Flows.Sid])) { net[Flows.Sid] := 0.0; }
        net[Flows.Sid] := net[Flows.Sid] + Flows.Mw;
        push_back(touched, Flows.Sid);
    };
    ON Caps {
        cap[Caps.Sid] := Caps.Cap;
        if (getOpcode(Caps) = update) { lastOldCap := Caps_old.Cap; }
    };
    ON END TRANSACTION {
        blocks := blocks + 1;
        for (sid in touched) {
            output setOpcode([Sid = sid; | Net = net[sid]; Util = net[sid] / cap[sid]; Blocks = blocks;], upsert);
        }
    };
END;
"""


def test_transactions_wrap_each_batch_and_two_inputs(tmp_path):
    eng, _ = build(tmp_path, GRID, "Balance")
    assert eng.ports == ["Flows", "Caps"]
    state = eng.initial_state()
    out = eng.process(state, [ev("i", 1, port=1, Sid="s1", Cap=100.0),
                              ev("i", 2, Sid="s1", Mw=10.0), ev("i", 3, Sid="s1", Mw=30.0)], 0)
    assert ops(out) == [("i", {"Sid": "s1", "Net": 40.0, "Util": 0.4, "Blocks": 1}),
                        ("u", {"Sid": "s1", "Net": 40.0, "Util": 0.4, "Blocks": 1})]
    out = eng.process(state, [ev("u", 4, port=1, Sid="s1", Cap=50.0), ev("i", 5, Sid="s1", Mw=10.0)], 0)
    assert ops(out) == [("u", {"Sid": "s1", "Net": 50.0, "Util": 1.0, "Blocks": 2})]
    assert state["vars"]["lastOldCap"] == 100.0      # Caps_old: the row before the update
    assert eng.process(state, [], 0) == []           # no events: no transaction


# --- event caches in a derived element: the seeds' Example 1 ---------------------------------------

EXAMPLE1 = """
CREATE input stream priceW schema (ts timestamp, isin string, price float);
CREATE output stream maxPriceW schema (ts timestamp, isin string, price float)
declare
        eventCache(priceW[isin], 10 events) cache;
end
PARTITION
    by priceW HASH(isin)
PARTITIONS 2
as
SELECT priceW.ts, priceW.isin isin, avg(cache.price) price FROM priceW;
"""


def prices(n, isins="AB"):
    return [ev("i", i, ts=T0, isin=isins[i % len(isins)], price=float(i)) for i in range(n)]


def test_example1_avg_over_the_last_ten_rows_of_the_isin(tmp_path):
    eng, _ = build(tmp_path, EXAMPLE1, "maxPriceW")
    assert isinstance(eng, Engine)
    state = eng.initial_state()
    out = eng.process(state, prices(30), 0)
    got = [(o.values["isin"], o.values["price"]) for o in out]
    assert got[:3] == [("A", 0.0), ("B", 1.0), ("A", 1.0)]        # A: 0; B: 1; A: (0+2)/2
    assert got[-2:] == [("A", 19.0), ("B", 20.0)]                  # A: 10..28 even, B: 11..29 odd
    state = roundtrip(state)
    out = eng.process(state, [ev("i", 30, ts=T0, isin="A", price=100.0)], 0)
    assert out[0].values["price"] == (sum(range(12, 29, 2)) + 100.0) / 10
    cache = state["vars"]["cache"]
    assert {k: len(v) for k, v in cache.buckets.items()} == {("A",): 10, ("B",): 10}


def test_example1_on_two_instances(tmp_path):
    """Hash partitioning on the cache key: each instance keeps only its own isins' buckets, and
    the results equal the unpartitioned ones. A bucket split over instances (here: every isin row
    alternates between instances, as ROUNDROBIN would) keeps k rows in each instance, n*k in all,
    and the averages differ (CCL3005/CCL3006)."""
    eng, _ = build(tmp_path, EXAMPLE1, "maxPriceW")
    rows = prices(80, isins="ABC")
    single = eng.initial_state()
    expected = [o.values["price"] for o in eng.process(single, rows, 0)]
    by_hash = [eng.initial_state(), eng.initial_state()]
    got = []
    for e in rows:
        inst = 0 if e.values["isin"] == "A" else 1
        got += [o.values["price"] for o in eng.process(by_hash[inst], [e], 0)]
    assert got == expected
    assert sorted(by_hash[0]["vars"]["cache"].buckets) == [("A",)]
    assert sorted(by_hash[1]["vars"]["cache"].buckets) == [("B",), ("C",)]
    split = [eng.initial_state(), eng.initial_state()]
    got = []
    for i, e in enumerate(rows):
        got += [o.values["price"] for o in eng.process(split[i % 2], [e], 0)]
    kept = [len(s["vars"]["cache"].buckets[("A",)]) for s in split]
    assert kept == [10, 10] and len(single["vars"]["cache"].buckets[("A",)]) == 10
    assert got != expected


def test_row_retention_without_coalesce_keeps_insert_update_delete_apart(tmp_path):
    text = """
    CREATE INPUT WINDOW P SCHEMA (id integer, isin string, price float) PRIMARY KEY (id);
    CREATE OUTPUT STREAM plain
    DECLARE eventCache(P[isin], 3 events) c; END
    AS SELECT P.isin isin, count(c.price) n, sum(c.price) total FROM P;
    CREATE OUTPUT STREAM merged
    DECLARE eventCache(P[isin], 3 events, coalesce) c; END
    AS SELECT P.isin isin, count(c.price) n, sum(c.price) total FROM P;
    """
    plain, plan = build(tmp_path, text, "plain")
    merged = Engine(*typed_parts({"name": "merged"}, plan))
    events = [ev("i", 1, id=1, isin="A", price=1.0), ev("u", 2, id=1, isin="A", price=2.0),
              ev("i", 3, id=2, isin="A", price=5.0), ev("d", 4, id=1, isin="A", price=2.0)]
    got_plain = [(o.values["n"], o.values["total"]) for o in plain.process(plain.initial_state(), events, 0)]
    got_merged = [(o.values["n"], o.values["total"]) for o in merged.process(merged.initial_state(), events, 0)]
    assert got_plain == [(1, 1.0), (2, 3.0), (3, 8.0)]     # the delete event is cached but a
    assert got_merged == [(1, 1.0), (1, 2.0), (2, 7.0)]    # stream emits nothing for it
    state = merged.initial_state()
    merged.process(state, events, 0)
    assert [e[0]["id"] for e in state["vars"]["c"].buckets[("A",)]] == [2]
    state = plain.initial_state()
    plain.process(state, events, 0)
    assert [e[1] for e in state["vars"]["c"].buckets[("A",)]] == ["u", "i", "d"]


def test_time_cache_and_globals_bound_in_a_derived_element(tmp_path):
    text = """
    DECLARE integer seen := 0; integer bump() { seen := seen + 1; return seen; } END;
    CREATE INPUT STREAM P SCHEMA (isin string, price float);
    CREATE OUTPUT STREAM o
    DECLARE eventCache(P[isin], 10 seconds) c; END
    AS SELECT P.isin isin, count(c.price) n, bump() k FROM P;
    """
    eng, _ = build(tmp_path, text, "o")
    state = eng.initial_state()
    out = eng.process(state, [ev("i", 1, isin="A", price=1.0)], 0)
    out += eng.process(state, [ev("i", 2, isin="A", price=1.0)], 5_000)
    state = roundtrip(state)
    out += eng.process(state, [ev("i", 3, isin="A", price=1.0)], 12_000)
    assert [(o.values["n"], o.values["k"]) for o in out] == [(1, 1), (2, 2), (2, 3)]
    other = eng.initial_state()                        # another instance: its own copy of 'seen'
    assert eng.process(other, [ev("i", 1, isin="A", price=1.0)], 0)[0].values["k"] == 1


# --- keyCache and manual caches: the seeds' Example 2 ------------------------------------------------

EXAMPLE2 = """
CREATE SCHEMA TradesSchema (Id integer, Symbol string, Symbol2 string, Price float, Shares integer);
CREATE INPUT STREAM QTrades SCHEMA TradesSchema;
CREATE FLEX TradesFlex IN QTrades
OUT OUTPUT WINDOW Top3Trades SCHEMA TradesSchema PRIMARY KEY (Symbol, Price)
PARTITION BY QTrades HASH (Symbol) PARTITIONS 3
BEGIN
    DECLARE
        eventCache(QTrades[Symbol], 3 events, manual, Price asc) tradesCache;
        dictionary(string, long) seenOther;
    END;
    ON QTrades {
        keyCache(tradesCache, [Symbol = QTrades.Symbol2;|]);
        seenOther[QTrades.Symbol2] := cacheSize(tradesCache);
        keyCache(tradesCache, [Symbol = QTrades.Symbol;|]);
        typeof(QTrades) rec := insertIntoCache(QTrades);
        if (rec.Id) {
            if (rec.Id <> QTrades.Id) { output setOpcode(rec, delete); }
            output setOpcode(QTrades, upsert);
        }
    };
END;
"""


def trade(seq, id_, sym, price, sym2="X"):
    return ev("i", seq, Id=id_, Symbol=sym, Symbol2=sym2, Price=price, Shares=1)


def test_top3_with_manual_cache_and_insert_into_cache(tmp_path):
    eng, _ = build(tmp_path, EXAMPLE2, "Top3Trades")
    state = eng.initial_state()
    out = eng.process(state, [trade(i, i + 1, "S", p) for i, p in enumerate([5.0, 3.0, 8.0, 1.0, 6.0])], 0)
    assert [(op, v["Price"]) for op, v in ops(out)] == [
        ("i", 5.0), ("i", 3.0), ("i", 8.0),       # three trades fill the bucket
        ("d", 3.0), ("i", 6.0)]                   # 1.0 sorts before the lowest: nothing; 6.0 evicts 3.0
    assert sorted(k[1] for k in state["output"]["rows"]) == [5.0, 6.0, 8.0]


def test_keycache_of_another_partitions_key_finds_nothing(tmp_path):
    eng, _ = build(tmp_path, EXAMPLE2, "Top3Trades")
    one = eng.initial_state()
    eng.process(one, [trade(1, 1, "A", 1.0), trade(2, 2, "A", 2.0), trade(3, 3, "B", 1.0, sym2="A")], 0)
    assert one["vars"]["seenOther"]["A"] == 2       # unpartitioned: B's row sees A's bucket
    inst = [eng.initial_state() for _ in range(3)]  # HASH(Symbol): A and B in different instances
    eng.process(inst[0], [trade(1, 1, "A", 1.0), trade(2, 2, "A", 2.0)], 0)
    eng.process(inst[1], [trade(3, 3, "B", 1.0, sym2="A")], 0)
    assert inst[1]["vars"]["seenOther"]["A"] == 0


def test_users_own_insert_into_cache_function_wins(tmp_path):
    text = EXAMPLE2.replace("eventCache(QTrades[Symbol], 3 events, manual, Price asc) tradesCache;", """
        eventCache(QTrades[Symbol], manual, Price asc) tradesCache;
        typeof(QTrades) insertIntoCache(typeof(QTrades) qTrade) {
            if (cacheSize(tradesCache) < 2) { insertCache(tradesCache, qTrade); return qTrade; }
            typeof(QTrades) rec := getCache(tradesCache, 0);
            if (rec.Price <= qTrade.Price) {
                deleteCache(tradesCache, 0);
                insertCache(tradesCache, qTrade);
                return rec;
            }
            return null;
        }""")
    eng, _ = build(tmp_path, text, "Top3Trades")
    state = eng.initial_state()
    out = eng.process(state, [trade(i, i + 1, "S", p) for i, p in enumerate([5.0, 3.0, 8.0, 1.0])], 0)
    assert [(op, v["Price"]) for op, v in ops(out)] == [("i", 5.0), ("i", 3.0), ("d", 3.0), ("i", 8.0)]


def test_make_engine_and_state_is_plain_enough_to_pickle(tmp_path):
    eng, plan = build(tmp_path, GRID, "Balance")
    assert isinstance(make_engine(*typed_parts(plan["elements"][0], plan)), Engine)
    state = eng.initial_state()
    eng.process(state, [ev("i", 1, port=1, Sid="s1", Cap=10.0), ev("i", 2, Sid="s1", Mw=1.0)], 0)
    again = roundtrip(state)
    assert again["vars"]["touched"].elem.name == "string"
    out = eng.process(again, [ev("i", 3, Sid="s1", Mw=1.0)], 0)
    assert ops(out) == [("u", {"Sid": "s1", "Net": 2.0, "Util": 0.2, "Blocks": 2})]


@pytest.mark.parametrize("code, reason", [
    ("output 1;", "output needs a record"),
    ("output setOpcode([k = S.k;], 99);", "not an opcode"),
])
def test_output_mistakes_are_bad_records(tmp_path, code, reason):
    text = f"""CREATE INPUT STREAM S SCHEMA (k string);
    CREATE FLEX F IN S OUT OUTPUT STREAM O SCHEMA (k string) BEGIN ON S {{ {code} }}; END;"""
    eng, _ = build(tmp_path, text, "O")
    out = eng.process(eng.initial_state(), [ev("i", 1, k="a")], 0)
    assert len(out) == 1 and isinstance(out[0], Bad) and reason in out[0].reason


def test_event_cache_aggregates_grouped_by_the_cache_key(tmp_path):
    """ESP's example: a window GROUP BY Symbol over a source with an event cache keyed by Symbol;
    each change upserts its symbol's row, computed over that symbol's bucket (a delete included).
    Mixing cache aggregates with plain aggregates makes bad records, not a broken engine."""
    text = """
    CREATE INPUT WINDOW Trades SCHEMA (Id integer, Symbol string, Price float, Shares long)
      PRIMARY KEY (Id);
    CREATE OUTPUT WINDOW Last2 SCHEMA (symbol string, MaxPrice float, Volume long)
      PRIMARY KEY DEDUCED
      DECLARE eventCache(Trades[Symbol], 2 events) stats; END
      AS SELECT Trades.Symbol AS symbol, max(stats.Price) AS MaxPrice, sum(stats.Shares) AS Volume
      FROM Trades GROUP BY Trades.Symbol;
    CREATE OUTPUT WINDOW Mixed PRIMARY KEY DEDUCED
      DECLARE eventCache(Trades[Symbol], 2 events) stats; END
      AS SELECT Trades.Symbol, max(stats.Price) m, count(*) n FROM Trades GROUP BY Trades.Symbol;
    """
    eng, plan = build(tmp_path, text, "Last2")
    out = eng.process(eng.initial_state(), [
        ev("i", 1, Id=1, Symbol="A", Price=5.0, Shares=10), ev("i", 2, Id=2, Symbol="B", Price=1.0, Shares=1),
        ev("i", 3, Id=3, Symbol="A", Price=7.0, Shares=20), ev("i", 4, Id=4, Symbol="A", Price=6.0, Shares=30)], 0)
    assert [(o.op, o.values["symbol"], o.values["MaxPrice"], o.values["Volume"]) for o in out] == [
        ("i", "A", 5.0, 10), ("i", "B", 1.0, 1), ("u", "A", 7.0, 30), ("u", "A", 7.0, 50)]
    mixed, _ = build(tmp_path, text, "Mixed")
    bad = mixed.process(mixed.initial_state(), [ev("i", 1, Id=1, Symbol="A", Price=5.0, Shares=10)], 0)
    assert [type(o).__name__ for o in bad] == ["Bad"] and "cannot be mixed" in bad[0].reason


def test_a_reference_with_rows_is_a_keyed_table(tmp_path):
    """A file bound to a reference (--input) gives it rows: it is a window keyed by its PRIMARY
    KEY (an insert of a present key is a bad record), and a stream joins it like a window."""
    text = """
    CREATE REFERENCE customerRef SCHEMA (customerID integer, fullName string)
      PRIMARY KEY (customerID) PROPERTIES service='databaseLookup', source='customerAddr';
    CREATE INPUT STREAM orders SCHEMA (orderID integer, customerID integer);
    CREATE OUTPUT STREAM named AS SELECT orders.orderID, customerRef.fullName
      FROM orders, customerRef WHERE orders.customerID = customerRef.customerID;
    """
    ref, plan = build(tmp_path, text, "customerRef")
    out = ref.process(ref.initial_state(), [ev("i", 1, customerID=1, fullName="Ann"),
                                            ev("i", 2, customerID=1, fullName="Bob")], 0)
    assert [(type(o).__name__, getattr(o, "op", None)) for o in out] == [("Emit", "i"), ("Bad", None)]
    join, _ = build(tmp_path, text, "named")
    state = join.initial_state()
    out = join.process(state, [ev("i", 1, port=1, customerID=7, fullName="Cy"),
                               ev("i", 2, port=0, orderID=100, customerID=7)], 0)
    assert [dict(o.values) for o in out] == [{"orderID": 100, "fullName": "Cy"}]


def test_long_else_if_chains_and_flat_expressions_compile_and_run(tmp_path):
    """Generated code nests deeply: a 1,000-branch else-if chain and a 2,000-term sum (each needs
    more than Python's default 1,000 frames) check, compile and run."""
    chain = " else ".join(f"if (S.a = {i}) r := 'v{i}';" for i in range(1000))
    total = " + ".join("S.a" for _ in range(2000))
    eng, _ = build(tmp_path, "CREATE INPUT STREAM S SCHEMA (a integer);\n"
                   "CREATE FLEX F IN S OUT OUTPUT STREAM O SCHEMA (r string, t long) BEGIN ON S { "
                   f"string r; {chain} output [r = r; t = {total};]; }}; END;", "O")
    out = eng.process(eng.initial_state(), [ev("i", 1, a=999), ev("i", 2, a=1000)], 0)
    assert ops(out) == [("i", {"r": "v999", "t": 1998000}), ("i", {"r": None, "t": 2000000})]


LONG_CODE = """
CREATE INPUT STREAM S SCHEMA (n integer);
DECLARE
    integer sumto(integer n) { if (n <= 0) return 0; return n + sumto(n - 1); }
END;
CREATE FLEX F IN S OUT OUTPUT STREAM O SCHEMA (n integer, loop long, rec integer)
BEGIN
    ON S {
        long t := 0; integer i := 0;
        while (i < 300000) { t := t + i; i := i + 1; }
        output [n = S.n; loop = t; rec = sumto(S.n);];
    };
END;
"""


def test_handlers_run_long_loops_and_deep_recursion(tmp_path):
    """ESP sets no step or depth limit: a 300,000-round loop and 900 nested calls are ordinary
    code (the engine's limits, runtime/engine/expr.py ENGINE_LIMITS, only stop runaway rows)."""
    eng, _ = build(tmp_path, LONG_CODE, "O")
    out = eng.process(eng.initial_state(), [ev("i", 1, n=900)], 0)
    assert ops(out) == [("i", {"n": 900, "loop": 299999 * 300000 // 2, "rec": 900 * 901 // 2})]


def test_a_record_is_a_dictionary_key_by_its_key_fields(tmp_path):
    """SAP's "Internal Pulsing" example keys a dictionary by the input record
    (``dictionary(typeof(InStream), integer)``): records were unhashable, every row a bad record.
    Records with one key are one entry; iterating gives the records back; the state pickles."""
    eng, _ = build(tmp_path, """
    CREATE INPUT WINDOW W SCHEMA (id integer, v integer) PRIMARY KEY (id);
    CREATE FLEX F IN W OUT OUTPUT STREAM O SCHEMA (n integer, ids string, v integer)
    BEGIN
      DECLARE dictionary(typeof(W), integer) versions; END;
      ON W {
        versions[W] := W.v;
        string ids := '';
        for (k in versions) { ids := ids + string(k.id); }
        output setOpcode([n = size(versions); ids = ids; v = versions[W];], insert);
      };
    END;""", "O")
    state = eng.initial_state()
    out = eng.process(state, [ev("i", 1, id=1, v=10), ev("u", 2, id=1, v=20)], 0)
    state = roundtrip(state)
    out += eng.process(state, [ev("i", 3, id=2, v=5)], 0)
    assert [(v["n"], v["ids"], v["v"]) for _, v in ops(out)] == [(1, "1", 10), (1, "1", 20), (2, "12", 5)]


# --- what the per-event hot path must keep (bench/flex.py) ---------------------------------------------

TWO_HANDLERS = """
CREATE INPUT WINDOW P SCHEMA (k string, v integer) PRIMARY KEY (k);
CREATE FLEX F IN P
OUT OUTPUT STREAM O SCHEMA (k string, op integer, v integer, oldv integer, w integer)
BEGIN
    DECLARE
        typeof(O) rec;
        dictionary(string, typeof(O)) kept;
    END;
    ON P {
        setOpcode(P, safedelete);
        rec.k := P.k; rec.op := getOpcode(P); rec.v := P.v;
        output rec;
        kept[P.k] := rec;
        rec.v := 99;
        output rec;
        output [k = P.k; | op = 0;];
        rec.k := 'changed';
    };
    ON P {
        rec.op := getOpcode(P); rec.oldv := P_old.v; rec.w := kept[P.k].v;
        output rec;
    };
END;
"""


def test_each_handler_run_gets_its_own_input_record_and_outputs_are_copies(tmp_path):
    eng, _ = build(tmp_path, TWO_HANDLERS, "O")
    state = eng.initial_state()
    out = eng.process(state, [ev("i", 1, k="a", v=1), ev("u", 2, k="a", v=2)], 0)
    row = {"k": "a", "op": 13, "v": 1, "oldv": None, "w": None}
    assert ops(out) == [
        ("i", row), ("i", {**row, "v": 99}), ("i", {"k": "a", "op": 0, "v": None, "oldv": None, "w": None}),
        # setOpcode on the first handler's record of P is not seen by the second
        ("i", {"k": "changed", "op": 1, "v": 99, "oldv": None, "w": 1}),
        ("i", {"k": "a", "op": 13, "v": 2, "oldv": None, "w": 1}),
        ("i", {"k": "a", "op": 13, "v": 99, "oldv": None, "w": 1}),
        ("i", {"k": "a", "op": 0, "v": None, "oldv": None, "w": None}),
        ("i", {"k": "changed", "op": 3, "v": 99, "oldv": 1, "w": 2})]
    # the record put in the dictionary did not change with the variable
    assert dict(state["vars"]["kept"]["a"]) == {"k": "a", "op": 13, "v": 2, "oldv": None, "w": 1}
