"""Flex operators and event caches on local Spark: SPLASH state across runs from a checkpoint,
handler errors as bad records, a keyed output window, eventCache partitioned and not."""
import datetime as dt

from runner_e2e import run_project, write_rows

T0 = dt.datetime(2024, 1, 1)

DEVICES = """
CREATE INPUT STREAM DEVICE_EVENTS SCHEMA (MACHINEID string, EVENT_TIME msdate, EVENT_NAME string,
                                          EVENT_VALUE string, MAX_TEMP float);
"""

POWER = DEVICES + """
CREATE FLEX POWER_OUTAGES IN DEVICE_EVENTS
OUT OUTPUT STREAM POWER_OUTAGES
    SCHEMA (MACHINEID string, POWER_OFF_TIME msdate, POWER_ON_TIME msdate, DURATION_MIN float)
BEGIN
    DECLARE
        dictionary(string, msdate) offtime;
        typeof(POWER_OUTAGES) outrec;
    END;
    ON DEVICE_EVENTS {
        if (DEVICE_EVENTS.EVENT_NAME = 'CHECK') {
            integer code := cast(integer, DEVICE_EVENTS.EVENT_VALUE);
        }
        if (DEVICE_EVENTS.EVENT_VALUE = 'Power off') {
            offtime[DEVICE_EVENTS.MACHINEID] := DEVICE_EVENTS.EVENT_TIME;
        }
        if (DEVICE_EVENTS.EVENT_VALUE = 'Power on' AND not isnull(offtime[DEVICE_EVENTS.MACHINEID])) {
            outrec.MACHINEID := DEVICE_EVENTS.MACHINEID;
            outrec.POWER_OFF_TIME := offtime[DEVICE_EVENTS.MACHINEID];
            outrec.POWER_ON_TIME := DEVICE_EVENTS.EVENT_TIME;
            outrec.DURATION_MIN := cast(float, DEVICE_EVENTS.EVENT_TIME - outrec.POWER_OFF_TIME) / 60000000;
            remove(offtime, DEVICE_EVENTS.MACHINEID);
            output setOpcode(outrec, insert);
        }
    };
END;
"""

HEADER = ["MACHINEID", "EVENT_TIME", "EVENT_NAME", "EVENT_VALUE", "MAX_TEMP"]


def _ts(minutes: float) -> str:
    return (T0 + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_power_outages_dictionary_survives_a_restart_and_errors_are_bad_records(spark, tmp_path):
    machines = [f"m{i}" for i in range(6)]
    offs = [(m, _ts(i), "POWER", "Power off", "") for i, m in enumerate(machines)]
    offs.insert(3, ("m9", _ts(3), "CHECK", "not a number", ""))  # the handler fails on this row
    ons = [(m, _ts(10 + 7 * i), "POWER", "Power on", "") for i, m in enumerate(machines)]
    ons.append(("m7", _ts(50), "POWER", "Power on", ""))        # never switched off: no outage
    data = tmp_path / "in"
    checkpoint = str(tmp_path / "ckpt")
    write_rows(str(data / "1.csv"), HEADER, offs)
    first = run_project(spark, tmp_path, POWER, {"DEVICE_EVENTS": str(data)}, checkpoint=checkpoint)
    assert first.rows("POWER_OUTAGES") == []
    bad = [b for b in first.bad_records() if b["element"] == "POWER_OUTAGES"]
    assert len(bad) == 1 and bad[0]["row"]["MACHINEID"] == "m9" and bad[0]["reason"]

    write_rows(str(data / "2.csv"), HEADER, ons)  # a second run: the off-times come from the state
    second = run_project(spark, tmp_path, POWER, {"DEVICE_EVENTS": str(data)}, checkpoint=checkpoint)
    got = sorted((r["MACHINEID"], float(r["DURATION_MIN"])) for r in second.rows("POWER_OUTAGES"))
    assert got == [(m, float(10 + 7 * i - i)) for i, m in enumerate(machines)]
    assert sum(second.stats("POWER_OUTAGES")["bad_records"].values()) == 1


DASHBOARD = DEVICES + """
CREATE FLEX DASHBOARD IN DEVICE_EVENTS
OUT OUTPUT WINDOW DASHBOARD
    SCHEMA (MACHINEID string, POWER_STATUS integer, CURR_TEMP float, MAX_TEMP float)
    PRIMARY KEY (MACHINEID)
PARTITION BY DEVICE_EVENTS HASH (MACHINEID) PARTITIONS 2
BEGIN
    DECLARE
        typeof(DASHBOARD) outrec;
        dictionary(string, typeof(DASHBOARD)) prev;
    END;
    ON DEVICE_EVENTS {
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
END;
"""


def test_dashboard_upserts_one_row_per_machine(spark, tmp_path):
    events, want = [], {}
    for i in range(60):
        m = f"m{i % 7}"
        status, temp, top = want.get(m, (None, None, None))
        if i % 3 == 0:
            on = i % 2 == 0
            events.append((m, _ts(i), "POWER", "Power on" if on else "Power off", ""))
            status = 0 if on else 10
        else:
            temp, top = 20.0 + i, 50.0 + i
            events.append((m, _ts(i), "TEMP", str(temp), top))
        want[m] = (status, temp, top)
    path = write_rows(str(tmp_path / "in" / "d.csv"), HEADER, events)
    out = run_project(spark, tmp_path, DASHBOARD, {"DEVICE_EVENTS": path})
    got = {r["MACHINEID"]: (int(r["POWER_STATUS"]) if r["POWER_STATUS"] else None,
                            float(r["CURR_TEMP"]) if r["CURR_TEMP"] else None,
                            float(r["MAX_TEMP"]) if r["MAX_TEMP"] else None)
           for r in out.rows("DASHBOARD")}
    assert got == want
    assert sum(out.stats("DASHBOARD")["instances"].values()) == len(events)


EXAMPLE1 = """
CREATE INPUT STREAM priceW SCHEMA (ts timestamp, isin string, price float);
CREATE OUTPUT STREAM flat SCHEMA (ts timestamp, isin string, price float)
    DECLARE eventCache(priceW[isin], 4 events) cache; END
AS SELECT priceW.ts, priceW.isin isin, avg(cache.price) price FROM priceW;
CREATE OUTPUT STREAM byHash SCHEMA (ts timestamp, isin string, price float)
    DECLARE eventCache(priceW[isin], 4 events) cache; END
PARTITION BY priceW HASH(isin) PARTITIONS 2
AS SELECT priceW.ts, priceW.isin isin, avg(cache.price) price FROM priceW;
CREATE OUTPUT STREAM byTurn SCHEMA (ts timestamp, isin string, price float)
    DECLARE eventCache(priceW[isin], 4 events) cache; END
PARTITION BY priceW ROUNDROBIN PARTITIONS 2
AS SELECT priceW.ts, priceW.isin isin, avg(cache.price) price FROM priceW;
"""


def test_event_cache_partitioned_by_its_key_or_round_robin(spark, tmp_path):
    rows = [(_ts(i), "AB"[i % 2] if i % 5 else "C", float(i)) for i in range(40)]
    path = write_rows(str(tmp_path / "in" / "p.csv"), ["ts", "isin", "price"], rows)
    out = run_project(spark, tmp_path, EXAMPLE1, {"priceW": path})

    def averages(instance_of):
        caches: dict = {}
        result = []
        for seq, (ts, isin, price) in enumerate(rows):
            bucket = caches.setdefault((instance_of(seq), isin), [])
            bucket[:] = (bucket + [price])[-4:]
            result.append((isin, price, sum(bucket) / len(bucket)))
        return sorted(result)

    by_time = {_ts(i): float(i) for i in range(40)}

    def got_with_price(name):  # the output's price is the average; the row's own price via ts
        return sorted((r["isin"], by_time[r["ts"].replace(" ", "T")[:23]], float(r["price"]))
                      for r in out.rows(name))
    flat = averages(lambda seq: 0)
    assert got_with_price("flat") == flat
    assert got_with_price("byHash") == flat      # a bucket lives in one instance: same result
    turn = averages(lambda seq: seq % 2)        # a bucket split over 2 instances: 2 x 4 rows kept
    assert got_with_price("byTurn") == turn and turn != flat


def test_a_flex_sees_every_change_of_a_stream_aggregation(spark, tmp_path):
    """A GROUP BY window over a stream changes once per input row, as in ESP, when a Flex reads
    its changes (Spark's native group-by would give one change per group per batch: 1, not 5)."""
    text = """
    create input stream s schema (k string, v integer);
    create window totals primary key deduced keep all as select s.k, sum(s.v) total from s group by s.k;
    create flex seen in totals out output stream changes schema (k string, total integer, op integer)
    begin on totals { output setOpcode([k = totals.k; | total = totals.total; op = getOpcode(totals);],
                                       insert); }; end;
    """
    data = tmp_path / "in"
    write_rows(str(data / "1.csv"), ["k", "v"], [("x", 1), ("x", 2), ("y", 5), ("x", 3), ("x", 4)])
    out = run_project(spark, tmp_path, text, {"s": str(data)})
    assert [(r["k"], int(r["total"]), int(r["op"])) for r in out.rows("changes")] == [
        ("x", 1, 1), ("x", 3, 3), ("y", 5, 1), ("x", 6, 3), ("x", 10, 3)]  # 1 insert, 3 update
