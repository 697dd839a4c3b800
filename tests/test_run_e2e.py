"""End to end on local Spark: the seed examples, per-instance state, bad records and opcodes.

Each test writes generated CSV inputs, runs the project until idle through runtime.run.run_plan
(the code behind `ccl run`) on the session's Spark, and compares the output files with what the
semantics say, computed here independently of the runtime.
"""
from __future__ import annotations

import glob
import json
import os
import random
from decimal import Decimal

import pytest

from tests.runner_e2e import run_project, write_rows

SEEDS = os.path.join(os.path.dirname(__file__), "projects", "seeds")


def seed(name: str) -> str:
    with open(os.path.join(SEEDS, name), encoding="utf-8") as f:
        return f.read()


def spark_instance(spark, values: list[str], count: int) -> dict[str, int]:
    """The instance HASH gives each value: Spark's own hash, computed here in a batch query."""
    from pyspark.sql import functions as F
    df = spark.createDataFrame([(v,) for v in values], "v string")
    rows = df.select("v", F.pmod(F.hash("v"), F.lit(count)).alias("i")).collect()
    return {r["v"]: r["i"] for r in rows}


def test_roundrobin_filter_splits_rows_evenly(spark, tmp_path):
    rnd = random.Random(1)
    rows = [(f"2026-01-01T10:00:{i // 10:02d}.{i % 10:03d}", f"S{i % 7}", f"{rnd.uniform(1, 99):.2f}",
             rnd.randint(0, 20000)) for i in range(40)]
    path = write_rows(str(tmp_path / "in" / "trades.csv"), ["Ts", "Symbol", "Price", "Volume"], rows)
    out = run_project(spark, tmp_path, seed("roundrobin_tradewindow.ccl"), {"TradeWindow": path})
    got = sorted((r["Ts"], int(r["Volume"])) for r in out.rows("TradeOutWindow"))
    want = sorted((ts[:23], v) for ts, _, _, v in rows if v > 10000)
    assert [v for _, v in got] == [v for _, v in want] and len(got) == len(want)
    stats = out.stats("TradeOutWindow")
    assert stats["rows_in"] == 40
    # ROUNDROBIN over a window rotates its keys (Spark's hash of the key): every key on one instance
    assert sum(stats["instances"].values()) == 40 and min(stats["instances"].values()) >= 10


def test_roundrobin_filter_keeps_each_keys_changes_on_one_instance(spark, tmp_path):
    """ESP's ROUNDROBIN example over an input window whose updates and deletes follow inserts of
    other rows: every change of a key reaches the instance of its insert, so the partitioned
    filter holds exactly what the unpartitioned one holds, each key once, without conflicts."""
    rnd = random.Random(7)
    ts = [f"2026-01-01T10:00:{i // 10:02d}.{i % 10:03d}" for i in range(60)]
    changes = [("i", t, f"S{i % 5}", "1.00", rnd.randint(0, 20000)) for i, t in enumerate(ts)]
    for i in rnd.sample(range(60), 30):  # updates across the threshold, both ways
        changes.append(("u", ts[i], f"S{i % 5}", "2.00", rnd.choice([500, 15000, 30000])))
    for i in rnd.sample(range(60), 15):
        changes.append(("d", ts[i], f"S{i % 5}", "2.00", 0))
    for i in rnd.sample(range(60), 10):  # re-inserted after their delete, or upserted
        changes.append(("p", ts[i], f"S{i % 5}", "3.00", 25000))
    path = write_rows(str(tmp_path / "in" / "trades.csv"), ["ESP_OPS", "Ts", "Symbol", "Price", "Volume"],
                      changes)
    window: dict[str, tuple] = {}
    for op, t, sym, price, vol in changes:
        if op == "d":
            window.pop(t, None)
        else:
            window[t] = (sym, price, vol)
    want = sorted((t[:23], vol) for t, (_, _, vol) in window.items() if vol > 10000)
    out = run_project(spark, tmp_path, seed("roundrobin_tradewindow.ccl"), {"TradeWindow": path})
    got = sorted((r["Ts"][:23], int(r["Volume"])) for r in out.rows("TradeOutWindow"))
    assert got == want
    stats = out.stats("TradeOutWindow")
    assert len(stats["instances"]) == 2 and stats["bad_records"] == {}
    assert [b for b in out.bad_records() if b["element"] == "TradeOutWindow"] == []


def test_a_key_on_two_instances_is_held_once_and_counted(spark, tmp_path):
    """HASH on a column that is not the window's key (CCL3011): an update that changes it goes to
    another instance than the row's insert, and the old row stays there. The window's output
    holds the key once, the later change's row, and the stale row is a bad record."""
    from runtime.outputs import CONFLICT
    accounts = [f"A{i}" for i in range(20)]
    inst = spark_instance(spark, accounts, 2)
    a, b = next(x for x in accounts if inst[x] == 0), next(x for x in accounts if inst[x] == 1)
    text = """
    create input window Orders schema (Id integer, Account string, Qty integer) primary key (Id);
    create output window Open primary key deduced
      partition by Orders hash(Account) partitions 2
      as select * from Orders where Orders.Qty > 0;
    """
    changes = [("i", 1, a, 10), ("i", 2, a, 20), ("i", 3, b, 30), ("u", 1, b, 11), ("u", 3, a, 31),
               ("u", 3, b, 32), ("u", 2, a, 21)]
    path = write_rows(str(tmp_path / "in" / "o.csv"), ["ESP_OPS", "Id", "Account", "Qty"], changes)
    out = run_project(spark, tmp_path, text, {"Orders": path})
    got = sorted((int(r["Id"]), r["Account"], int(r["Qty"])) for r in out.rows("Open"))
    assert got == [(1, b, 11), (2, a, 21), (3, b, 32)]
    conflicts = [r for r in out.bad_records() if r["reason"] == CONFLICT]
    # key 1: a's instance keeps its insert; key 3: b's instance holds 30 then 32, a's holds 31
    assert sorted((r["row"]["Id"], r["row"]["Qty"], r["instance"]) for r in conflicts) == [
        (1, 10, 0), (3, 31, 0)]
    assert out.stats("Open")["bad_records"][CONFLICT] == 2


def test_hash_maxprice_keeps_a_maximum_per_instance(spark, tmp_path):
    rnd = random.Random(2)
    isins = [f"{c}{k:03d}" for c in "ABC" for k in range(6)]
    rows = [(rnd.choice(isins), f"{rnd.uniform(1, 500):.2f}") for _ in range(200)]
    path = write_rows(str(tmp_path / "in" / "prices.csv"), ["isin", "price"], rows)
    out = run_project(spark, tmp_path, seed("hash_maxprice.ccl"), {"priceW": path})
    inst = spark_instance(spark, isins, 5)
    want: dict[tuple[int, str], Decimal] = {}
    changed: dict[tuple[int, str], int] = {}  # the row that last changed an instance's maximum
    for n, (isin, price) in enumerate(rows):  # HASH(isin) splits a letter's isins: a max per instance
        k = (inst[isin], isin[0])
        if Decimal(price) > want.get(k, Decimal("-1")):
            want[k], changed[k] = Decimal(price), n
    # the window holds each letter once: the maximum of the instance that changed it last (CCL3002)
    last = {letter: max((n, i) for (i, x), n in changed.items() if x == letter)[1] for _, letter in want}
    got = sorted((r["isin"], Decimal(r["maxPrice"])) for r in out.rows("maxPriceW"))
    assert got == sorted((letter, want[(i, letter)]) for letter, i in last.items())
    stats = out.stats("maxPriceW")
    assert sum(stats["instances"].values()) == 200
    held = len(want) - len(last)  # the maxima of the other instances
    assert held > 0 and sum(stats["bad_records"].values()) == held


def test_custom_partition_function_with_target_partitions(spark, tmp_path):
    rnd = random.Random(3)
    rows = [(rnd.choice("ABCDEFG") + str(rnd.randint(0, 99)), f"{rnd.uniform(1, 500):.2f}") for _ in range(150)]
    path = write_rows(str(tmp_path / "in" / "prices.csv"), ["isin", "price"], rows)
    out = run_project(spark, tmp_path, seed("custom_maxprice.ccl"), {"priceW": path})
    want: dict[str, Decimal] = {}
    for isin, price in rows:  # partitioned by the first letter, grouped by it: one row per letter
        want[isin[0]] = max(want.get(isin[0], Decimal("-1")), Decimal(price))
    got = {r["isin"]: Decimal(r["maxPrice"]) for r in out.rows("maxPriceW")}
    assert got == want and len(out.rows("maxPriceW")) == len(want)
    inst = out.stats("maxPriceW")["instances"]
    assert sum(inst.values()) == 150
    assert inst == {str(i): sum(1 for isin, _ in rows if ord(isin[0]) % 2 == i) for i in (0, 1) if
                    any(ord(isin[0]) % 2 == i for isin, _ in rows)}


def test_vwap_join_with_broadcast_input_matches_unpartitioned(spark, tmp_path):
    rnd = random.Random(4)
    isins = [f"I{k:02d}" for k in range(12)]
    prices = [(i, f"{rnd.uniform(10, 20):.3f}") for i in isins]
    prices += [("I03", "99.5"), ("I05", "12.25")]  # sent as updates of earlier rows
    volumes = [(i, rnd.randint(1, 1000)) for i in isins[:9]]
    ops_prices = [("i",) + p for p in prices[:12]] + [("u",) + p for p in prices[12:]]
    p_path = write_rows(str(tmp_path / "in" / "p" / "prices.csv"), ["ESP_OPS", "isin", "price"], ops_prices)
    v_path = write_rows(str(tmp_path / "in" / "v" / "volumes.csv"), ["isin", "volume"], volumes)
    text = seed("hash_vwap_broadcast.ccl")
    part = run_project(spark, tmp_path / "partitioned", text, {"priceW": p_path, "volumeW": v_path})
    flat_text = text.replace("PARTITION\n    by priceW HASH (isin)\nPARTITIONS 2\n", "")
    assert flat_text != text
    flat = run_project(spark, tmp_path / "flat", flat_text, {"priceW": p_path, "volumeW": v_path})
    got = sorted((r["isin"], r["vwap_val"]) for r in part.rows("vwapW"))
    assert got == sorted((r["isin"], r["vwap_val"]) for r in flat.rows("vwapW"))
    final_price = {i: float(p) for i, p in prices}
    vol = dict(volumes)
    assert {i: (float(v) if v else None) for i, v in got} == {
        i: (final_price[i] if i in vol else None) for i in isins}
    # volumeW is broadcast: both instances received every volume row
    assert part.stats("vwapW")["rows_in"] == len(ops_prices) + 2 * len(volumes)


def test_keep_rows_is_per_instance(spark, tmp_path):
    text = """
    create input stream s schema (id integer, v integer);
    create output window w schema (id integer, v integer) primary key (id) keep 3 rows
      partition by s roundrobin partitions 2
    as select s.id, s.v from s;
    """
    path = write_rows(str(tmp_path / "in" / "s.csv"), ["id", "v"], [(i, i * 10) for i in range(20)])
    out = run_project(spark, tmp_path, text, {"s": path})
    got = sorted(int(r["id"]) for r in out.rows("w"))
    assert got == [14, 15, 16, 17, 18, 19]  # the last 3 of each instance: n*k rows, not k
    assert out.stats("w")["rows_out_by_opcode"] == {"i": 20, "d": 14}


def test_null_partition_results_are_bad_records(spark, tmp_path):
    text = """
    create input stream s schema (isin string, price float);
    create output stream o schema (isin string, price float)
      partition by s { integer x; if (s.price >= 0) x := ascii(substr(s.isin, 1, 1)) % o_partitions; return x; }
      partitions 3
    as select s.isin, s.price from s;
    """
    rows = [("A1", 1.0), ("B2", -5.0), ("C3", 3.0), ("D4", -1.0), ("E5", 5.0)]
    path = write_rows(str(tmp_path / "in" / "s.csv"), ["isin", "price"], rows)
    out = run_project(spark, tmp_path, text, {"s": path})
    assert sorted(r["isin"] for r in out.rows("o")) == ["A1", "C3", "E5"]
    stats = out.stats("o")
    assert sum(stats["bad_records"].values()) == 2
    # the two rows that got no instance came in, but no instance received them
    assert stats["rows_in"] == 5 and sum(stats["instances"].values()) == 3
    bad = [b for b in out.bad_records() if b["element"] == "o"]
    assert sorted(b["row"]["isin"] for b in bad) == ["B2", "D4"]
    assert all(b["reason"] for b in bad)


def test_opcodes_through_window_aggregation_and_join(spark, tmp_path):
    text = """
    create input window orders schema (id integer, cust string, amount float) primary key (id);
    create input window custs schema (cust string, country string) primary key (cust);
    create output window big primary key deduced as select o.id, o.amount from orders o where o.amount > 10;
    create output window totals primary key deduced
      as select o.cust, sum(o.amount) total, count(*) n from orders o group by o.cust;
    create output window joined primary key (id)
      as select o.id, c.country from orders o left join custs c on o.cust = c.cust;
    """
    orders = [("i", 1, "a", 5.0), ("i", 2, "a", 20.0), ("i", 3, "b", 30.0), ("i", 4, "c", 1.0),
              ("u", 1, "b", 50.0), ("d", 2, "a", None), ("u", 3, "b", 2.0), ("d", 2, "a", None)]
    custs = [("i", "a", "FR"), ("i", "b", "DE"), ("u", "b", "AT"), ("d", "a", None)]
    o = write_rows(str(tmp_path / "in" / "o.csv"), ["ESP_OPS", "id", "cust", "amount"], orders)
    c = write_rows(str(tmp_path / "in" / "c.csv"), ["ESP_OPS", "cust", "country"], custs)
    out = run_project(spark, tmp_path, text, {"orders": o, "custs": c})
    # final orders: 1 b 50, 3 b 2, 4 c 1 (the second delete of 2 is a bad record)
    assert sorted((int(r["id"]), float(r["amount"])) for r in out.rows("big")) == [(1, 50.0)]
    assert sorted((r["cust"], float(r["total"]), int(r["n"])) for r in out.rows("totals")) == [
        ("b", 52.0, 2), ("c", 1.0, 1)]
    assert sorted((int(r["id"]), r["country"]) for r in out.rows("joined")) == [
        (1, "AT"), (3, "AT"), (4, "")]
    assert out.stats("orders")["bad_records"] and sum(out.stats("orders")["bad_records"].values()) == 1


def test_rows_that_do_not_parse_are_bad_records(spark, tmp_path):
    text = "create input stream s schema (id integer, v float); create output stream o as select * from s;"
    path = write_rows(str(tmp_path / "in" / "s.csv"), ["id", "v"], [(1, 1.5), ("x", 2.0), (3, "y"), (4, 4.0)])
    out = run_project(spark, tmp_path, text, {"s": path})
    assert [int(r["id"]) for r in out.rows("o")] == [1, 4]
    assert sum(out.stats("s")["bad_records"].values()) == 2
    assert out.stats("s")["rows_in"] == 4 and out.stats("s")["instances"] == {"0": 2}
    assert out.stats("o")["bad_records"] == {}


def test_error_streams_carry_the_bad_records_of_their_sources(spark, tmp_path):
    """An error stream gets one row per bad record of the elements it is ON, with ESP's schema; a
    window counting them by errorCode (ESP's own example) works on both paths."""
    text = """
    create input window w schema (k string, v integer) primary key (k);
    create output stream picked partition by w { integer x; if (w.v > 0) x := 0; return x; }
      partitions 2 as select w.k, w.v from w;
    create output error stream errs on w, picked;
    create output window byCode schema (code integer, n long) primary key deduced
      as select e.errorCode as code, count(*) as n from errs e group by e.errorCode;
    """
    rows = [("i", "a", 1), ("i", "a", 2), ("i", "b", "x"), ("d", "c", 3), ("i", "d", -4)]
    path = write_rows(str(tmp_path / "in" / "w.csv"), ["ESP_OPS", "k", "v"], rows)
    for native, collect_bytes in ((True, None), (False, None), (True, 0)):  # 0: batches distributed
        where = tmp_path / f"{native}{collect_bytes}"
        out = run_project(spark, where, text, {"w": path}, native_operators=native,
                          collect_bytes=collect_bytes)
        errs = sorted(out.rows("errs"), key=lambda r: r["errorMessage"])
        bad = sorted(out.bad_records(), key=lambda b: b["reason"])
        assert [e["errorMessage"] for e in errs] == [b["reason"] for b in bad] and len(bad) == 4
        assert [(e["errorCode"], e["errorStreamName"], e["sourceStreamName"]) for e in errs] == [
            ("1", "w", "w"), ("2", "w", "w"), ("2", "w", "w"), ("3", "picked", "w")]
        assert [json.loads(bytes.fromhex(e["errorRecord"])) for e in errs] == [b["row"] for b in bad]
        assert all(e["errorTime"] for e in errs)
        assert sorted((r["code"], r["n"]) for r in out.rows("byCode")) == [("1", "1"), ("2", "2"), ("3", "1")]
        assert out.stats("errs")["rows_in"] == 4
        # the error stream and its reader are stages of the project's query, no query of their own
        run = where / "run"
        assert json.loads((run / "run.json").read_text())["project_query"] == ["w", "picked", "errs", "byCode"]
        assert not os.listdir(run / "queries")


def test_nextval_keys_a_window_over_a_stream_across_batches(spark, tmp_path):
    """ESP derives a window from a stream by GROUP BY or a nextval() key: the count lives in the
    instance's state, so ids go on across micro-batches."""
    text = """
    create input stream s schema (k string);
    create output window w primary key (id) as select nextval() id, s.k from s;
    """
    data = tmp_path / "in"
    write_rows(str(data / "a.csv"), ["k"], [("x",), ("y",)])
    write_rows(str(data / "b.csv"), ["k"], [("z",)])
    out = run_project(spark, tmp_path, text, {"s": str(data)}, max_files_per_batch=1)
    assert sorted((int(r["id"]), r["k"]) for r in out.rows("w")) == [(1, "x"), (2, "y"), (3, "z")]
    assert out.stats("w")["batches"] == 2


def test_a_reference_is_there_before_the_rows_that_look_it_up(spark, tmp_path):
    """ESP looks a reference up in its database when a stream row arrives: with a bound file,
    every stream row of the batch finds the reference's rows, even the first line of the stream's
    file, whose sequence number ties with the reference's first line. So does a stream joined with
    a window: the rows of two files in one batch have no order between them, and the window's are
    taken to be there first."""
    text = """
    create input stream s schema (k string, v integer);
    create reference r schema (k string, name string) primary key (k);
    create input window w schema (k string, name string) primary key (k);
    create output stream j as select s.k, s.v, r.name from s inner join r on s.k = r.k;
    create output stream jw as select s.k, s.v, w.name from s inner join w on s.k = w.k;
    """
    write_rows(str(tmp_path / "s.csv"), ["k", "v"], [("b", 1), ("a", 2), ("b", 3), ("c", 4)])
    for name in ("r", "w"):
        write_rows(str(tmp_path / f"{name}.csv"), ["k", "name"], [("a", "A"), ("b", "B")])
    out = run_project(spark, tmp_path, text, {e: str(tmp_path / f"{e}.csv") for e in ("s", "r", "w")})
    for name in ("j", "jw"):
        assert [(r["k"], int(r["v"]), r["name"]) for r in out.rows(name)] == [
            ("b", 1, "B"), ("a", 2, "A"), ("b", 3, "B")]


def test_native_aggregation_equals_the_per_instance_path(spark, tmp_path):
    text = """
    create input stream trades schema (sym string, venue string, price float, qty integer);
    create output window stats primary key deduced keep all
      partition by trades hash(sym) partitions 3
      as select t.sym, t.venue, count(*) n, sum(t.qty) qty, min(t.price) lo, max(t.price) hi,
                avg(t.price) mean, count(t.price) priced
         from trades t group by t.sym, t.venue;
    create output window flat primary key deduced
      as select t.sym, max(t.qty) top from trades t group by t.sym;
    create output window rr primary key deduced keep all
      partition by trades roundrobin partitions 3
      as select t.sym, count(*) n, sum(t.qty) qty, max(t.price) hi from trades t group by t.sym;
    create output window odd primary key deduced keep all
      partition by trades { integer x; if (trades.qty < 90) x := trades.qty % odd_partitions; return x; }
      partitions 2
      as select t.sym, t.venue, min(t.price) lo, avg(t.qty) mean from trades t group by t.sym, t.venue;
    create output stream picked partition by trades roundrobin partitions 2
      as select t.sym, t.price p, t.qty from trades t
      where (t.price >= 5 or t.venue = 'X') and not (t.qty < 20) or t.price <> t.price;
    create output window perSym primary key deduced keep all
      as select p.sym, count(*) n, max(p.qty) q from picked p group by p.sym;
    """
    from runtime.outputs import CONFLICT
    rnd = random.Random(9)
    data = tmp_path / "in"
    rows = []

    def row():  # some prices missing, some NaN (in venue "" only)
        venue = rnd.choice(["X", "Y", ""])
        price = "" if rnd.random() < 0.1 else f"{rnd.uniform(1, 9):.2f}"
        return (rnd.choice("ABCDE"), venue, "NaN" if venue == "" and rnd.random() < 0.15 else price,
                rnd.randint(1, 99))
    for f in range(2):  # two files, one per micro-batch: groups are created, then updated
        batch = [row() for _ in range(90)]
        write_rows(str(data / f"t{f}.csv"), ["sym", "venue", "price", "qty"], batch)
        rows += batch
    native = run_project(spark, tmp_path / "native", text, {"trades": str(data)}, max_files_per_batch=1)
    assert [e["physical"]["path"] for e in native.plan["elements"]] == ["native"] * 7
    # every derived element ran inside the batches of its source: one query, two batches each
    assert os.listdir(tmp_path / "native" / "run" / "queries") == ["trades"]
    assert {e: native.stats(e)["batches"] for e in ("stats", "picked", "perSym")} == {
        "stats": 2, "picked": 2, "perSym": 2}
    # nothing reads the input's changelog (its readers run in its batches): none is written
    changelogs = "run/changelog/trades/*.parquet"
    assert not glob.glob(str(tmp_path / "native" / changelogs))
    assert native.stats("trades")["rows_in"] == len(rows) == 180
    slow = run_project(spark, tmp_path / "slow", text, {"trades": str(data)}, max_files_per_batch=1,
                       native_operators=False)
    # the per-instance path (runtime/arrow_state.py) runs in the input's batches too
    assert [e["name"] for e in slow.plan["elements"] if e["physical"]["arrow"]] == [
        "stats", "flat", "rr", "odd", "picked", "perSym"]
    assert os.listdir(tmp_path / "slow" / "run" / "queries") == ["trades"]
    assert not glob.glob(str(tmp_path / "slow" / changelogs))
    # the input handed over to its one reader is counted in that reader's pass
    assert slow.stats("trades") == native.stats("trades")
    # the aggregations grouped by a plain column spread each instance's groups over the buckets
    per_sym = next(e for e in slow.plan["elements"] if e["name"] == "perSym")
    assert per_sym["physical"]["group_columns"] == ["sym"]
    for name in ("stats", "flat", "rr", "odd", "picked", "perSym"):
        def table(out):  # float sums may differ in the last digit (another summation order)
            def value(v):  # as text: NaN equals NaN
                try:
                    return repr(round(float(v), 9))
                except ValueError:
                    return v
            return sorted(tuple(sorted((k, value(v)) for k, v in r.items())) for r in out.rows(name))
        assert table(native) == table(slow) and len(table(native)) >= 5
        assert native.stats(name)["instances"] == slow.stats(name)["instances"]
        assert native.stats(name)["bad_records"] == slow.stats(name)["bad_records"]
    # ROUNDROBIN: a symbol's groups in several instances, the window holding each once (the
    # others are bad records); custom: rows with qty >= 90 get no instance
    assert len(native.rows("rr")) == len(native.rows("flat"))
    assert native.stats("rr")["bad_records"][CONFLICT] >= len(native.rows("rr"))
    unplaced = [b for b in native.bad_records() if b["element"] == "odd" and b["reason"] != CONFLICT]
    bad = sorted((b["row"]["sym"], int(b["row"]["qty"])) for b in unplaced)
    assert bad == sorted((r[0], r[3]) for r in rows if r[3] >= 90) and bad
    assert bad == sorted((b["row"]["sym"], int(b["row"]["qty"])) for b in slow.bad_records()
                         if b["element"] == "odd" and b["reason"] != CONFLICT)
    # a bad record's row holds the element's columns only (the native path leaked "__kind")
    assert {k for b in unplaced for k in b["row"]} == {"sym", "venue", "price", "qty"}
    for run in (native, slow):  # rows that got no instance are in rows_in, not in an instance's count
        assert sum(run.stats("odd")["instances"].values()) == run.stats("odd")["rows_in"] - len(bad)
    a = [r for r in native.rows("stats") if r["sym"] == "A" and r["venue"] == "X"][0]
    prices = [float(p) for s, v, p, _ in rows if s == "A" and v == "X" and p]
    assert int(a["n"]) == sum(1 for s, v, _, _ in rows if s == "A" and v == "X")
    assert float(a["hi"]) == max(prices) and int(a["priced"]) == len(prices)
    assert abs(float(a["mean"]) - sum(prices) / len(prices)) < 1e-9
    assert native.stats("stats")["rows_out_by_opcode"]["u"] > 0  # batch 2 updates groups


def test_an_input_is_recorded_when_something_reads_its_changelog(tmp_path):
    """unrecorded_inputs: an input read by nothing or only by consumers fused into its batches;
    not one with an output adapter or one a query of its own reads (a join runs per instance)."""
    from ccl.plan.codec import plan_from_json
    from ccl.plan.decisions import fused_consumers, unrecorded_inputs
    from planned import plan_json
    path = tmp_path / "p.ccl"
    path.write_text("""
    create input stream a schema (k string, v integer);
    create input stream b schema (k string, v integer);
    create input window w schema (k string, x integer) primary key (k);
    create input stream d schema (k string);
    create input stream e schema (k string);
    create output window s primary key deduced as select a.k, sum(a.v) v from a group by a.k;
    create output window t primary key deduced keep 1 minute as select d.k, count(*) n from d group by d.k;
    create output stream j as select b.k, w.x from b join w on b.k = w.k;
    attach output adapter o type toolkit_file_csv_output to d properties dir = 'out';
    """)
    def decided(native_operators):
        plan, diags = plan_json(str(path), native_operators=native_operators)
        assert plan is not None, [str(d) for d in diags]
        return (plan, [e["name"] for e in plan["elements"] if e["physical"]["arrow"]],
                [e["name"] for e in plan["elements"] if e["physical"]["unrecorded"]])
    plan, arrow, unrecorded = decided(True)
    assert arrow == ["w", "j"]  # t has timers (woken by the project's query); s and the streams are native
    assert unrecorded == ["a", "e"]
    # on the per-instance path s runs in a's batches too (it has one source), j does not (two)
    plan, arrow, unrecorded = decided(False)
    assert arrow == ["w", "s", "j"]
    assert unrecorded == ["a", "e"]
    # without the applyInArrow elements only the native ones are fused
    typed = plan_from_json(plan)
    native = {e["name"]: e["physical"]["native"] for e in plan["elements"]}
    assert unrecorded_inputs(typed, fused_consumers(typed, native)) == ["e"]


def test_a_run_directory_of_the_older_layout_is_refused(spark, tmp_path):
    """A run directory written before the plan held its decisions (a version 1 plan.json with
    the run's layout merged in) is refused with a message, not misread."""
    from runtime.run_setup import RunError
    text = """
    create input stream s schema (k string, v integer);
    create output window w primary key deduced keep all
      as select s.k, sum(s.v) total from s group by s.k;
    """
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "plan.json").write_text(json.dumps(
        {"format": "ccl-plan", "version": 1, "elements": [], "buckets": 2, "fused": {}}))
    data = tmp_path / "in"
    write_rows(str(data / "a.csv"), ["k", "v"], [("x", 1), ("y", 2)])
    with pytest.raises(RunError, match="older ccl .plan version 1.*new checkpoint directory"):
        run_project(spark, tmp_path, text, {"s": str(data)})


def test_partitioned_module_instances_multiply(spark, tmp_path):
    text = """
    CREATE MODULE m IN i OUT o
    BEGIN
      DECLARE PARAMETER integer lim := 0; END;
      CREATE INPUT STREAM i SCHEMA (k string, v integer);
      CREATE LOCAL WINDOW last3 PRIMARY KEY (v) KEEP 3 ROWS
        PARTITION BY i ROUNDROBIN PARTITIONS 3
        AS SELECT i.k, i.v FROM i WHERE i.v > lim;
      CREATE OUTPUT WINDOW o PRIMARY KEY DEDUCED KEEP ALL
        AS SELECT last3.k, count(*) n FROM last3 GROUP BY last3.k;
    END;
    CREATE INPUT STREAM src SCHEMA (k string, v integer);
    LOAD MODULE m AS one IN i = src OUT o = counts PARAMETERS lim = 1
      PARTITION BY src HASH(k) PARTITIONS 2;
    """
    rows = [("AB"[i % 2] + str(i % 3), i) for i in range(40)]
    path = write_rows(str(tmp_path / "in" / "src.csv"), ["k", "v"], rows)
    out = run_project(spark, tmp_path, text, {"src": path})
    assert out.stats("one.last3")["partition_instances"] == 6
    hashed = spark_instance(spark, sorted({k for k, _ in rows}), 2)
    # each module instance m gets the keys HASH(k) sends it; its window is split ROUNDROBIN 3 ways
    # (by the input's sequence number) and every one of the 6 windows keeps its last 3 rows
    kept: dict[int, list] = {}
    for line, (k, v) in enumerate(rows, start=2):  # data rows are lines 2.. of the file
        if v <= 1:
            continue
        inst = hashed[k] * 3 + line % 3
        kept.setdefault(inst, []).append(k)
        kept[inst] = kept[inst][-3:]
    want: dict[tuple[int, str], int] = {}
    for inst, keys in kept.items():
        for k in keys:
            want[(inst // 3, k)] = want.get((inst // 3, k), 0) + 1
    got = sorted((r["k"], int(r["n"])) for r in out.rows("counts"))
    assert got == sorted((k, n) for (_, k), n in want.items())
    assert sorted(int(i) for i in out.stats("one.last3")["instances"]) == sorted(kept)


def test_input_adapter_properties_resolve_esp_aliases_before_defaults(tmp_path):
    """dsv_in matches stream names unless told otherwise, also under ESP's csv-prefixed name;
    an xmllist adapter reads XML list files."""
    from ccl.plan.codec import plan_from_json
    from runtime.run_setup import RunOptions, element_files
    from tests.test_planner import plan_text

    def props(kind, **given):
        properties = ", ".join(["dir='d'"] + [f"{k}='{v}'" for k, v in given.items()])
        plan = plan_from_json(plan_text(tmp_path, "CREATE INPUT STREAM S SCHEMA (a integer);\n"
                                        f"ATTACH INPUT ADAPTER inp TYPE {kind} TO S PROPERTIES {properties};"))
        return element_files(plan.element("S"), plan, RunOptions(base_dir=str(tmp_path)))[1]
    assert props("dsv_in")["matchstreamname"] == "true"
    assert props("dsv_in", csvMatchStreamName="false")["matchstreamname"] == "false"
    assert "matchstreamname" not in props("toolkit_file_csv_input")
    assert props("toolkit_file_xmllist_input")["fileformat"] == "xmllist"


def test_local_python_workers_import_compiled_pyspark_not_the_zip(spark):
    """runtime/worker_path/sitecustomize.py: a worker imports the installed pyspark (compiled
    once) rather than SPARK_HOME's pyspark.zip, which Python compiles again in every process."""
    def where(_):
        import pyspark
        yield pyspark.__file__

    paths = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert paths and ".zip" not in paths[0]


def test_stream_outputs_are_written_in_order_chunk_by_chunk(spark, tmp_path, monkeypatch):
    """NAME.csv of a stream is its changelog read a few batches at a time (runtime/outputs.py
    changelog_chunks), each chunk sorted on the driver: the same file with chunks of one batch."""
    from runtime import outputs
    text = """
    create input stream s schema (k string, v integer);
    create output stream o as select s.k, s.v from s where s.v % 3 <> 0;
    """
    rows = [(f"k{i % 5}", i) for i in range(90)]
    for f in range(3):
        write_rows(str(tmp_path / "in" / f"p{f}.csv"), ["k", "v"], rows[f * 30:(f + 1) * 30])
    whole = run_project(spark, tmp_path / "a", text, {"s": str(tmp_path / "in")}, max_files_per_batch=1)
    monkeypatch.setattr(outputs, "CHUNK_BYTES", 1)
    chunked = run_project(spark, tmp_path / "b", text, {"s": str(tmp_path / "in")}, max_files_per_batch=1)
    assert whole.stats("o")["batches"] == 3
    assert [int(r["v"]) for r in chunked.rows("o")] == [v for _, v in rows if v % 3]
    assert chunked.rows("o") == whole.rows("o")


def test_native_window_contents_come_from_its_snapshot(spark, tmp_path, monkeypatch):
    """A native aggregation's NAME.csv is its latest snapshot (runtime/native_agg.py
    final_contents): the same rows, in the same order, as the last change of each key in its
    changelog; a snapshot from before the snapshot kept each group's last batch goes on without."""
    import pyarrow.parquet as pq

    from ccl.plan.codec import plan_from_json
    from runtime.run_dir import RunDirs
    from runtime.native_agg import final_contents
    from runtime import outputs
    from runtime.outputs import CONFLICT, final_rows, last_changes, records
    text = """
    create input stream s schema (k string, v integer);
    create output window w primary key deduced keep all partition by s roundrobin partitions 2
      as select s.k, sum(s.v) t, max(s.v) top, avg(s.v) mean from s group by s.k;
    """
    rows = [(f"k{(i * 7) % 11}", i) for i in range(120)]
    for f in range(3):
        write_rows(str(tmp_path / "in" / f"p{f}.csv"), ["k", "v"], rows[f * 40:(f + 1) * 40])
    out = run_project(spark, tmp_path, text, {"s": str(tmp_path / "in")}, max_files_per_batch=1)
    dirs = RunDirs(str(tmp_path / "run"))
    w = plan_from_json(out.plan).element("w")
    names = [c.name for c in w.columns]
    state_dir = dirs.of("native", "w")

    def without_op(frames):
        return [{k: v for k, v in r.items() if k != "__op"} for r in records(frames)]
    assert final_contents(names, state_dir) is not None
    assert len(last_changes(dirs, w)) == 22  # 11 keys in each of the 2 instances
    native = final_rows(dirs, w)
    with monkeypatch.context() as m:  # the same window's contents from its changelog
        m.setattr(outputs, "final_contents", lambda *_: None)
        from_changelog = final_rows(dirs, w)
    assert without_op(native.tables) == without_op(from_changelog.tables)
    assert without_op(native.replaced) == without_op(from_changelog.replaced)
    # each key once (CCL3001: the instance that changed it last wins), the other a bad record
    assert [(r["k"], r["t"]) for r in out.rows("w")] == [
        (r["k"], str(r["t"])) for r in without_op(native.tables)]
    assert len(out.rows("w")) == 11 and out.stats("w")["bad_records"] == {CONFLICT: 11}
    # an older snapshot (no last batch): the next batch's snapshot has none either, and the
    # outputs come from the changelog
    latest = sorted(glob.glob(os.path.join(state_dir, "state-*.parquet")))[-1]
    table = pq.read_table(latest)
    pq.write_table(table.drop(["__last_batch", "__seq"]), latest)
    write_rows(str(tmp_path / "in" / "p3.csv"), ["k", "v"], [("k1", 1000), ("new", 5)])
    out = run_project(spark, tmp_path, text, {"s": str(tmp_path / "in")}, max_files_per_batch=1)
    assert final_contents(names, state_dir) is None
    files = [rows[f * 40:(f + 1) * 40] for f in range(3)] + [[("k1", 1000), ("new", 5)]]
    totals: dict[tuple[int, str], int] = {}
    last: dict[str, int] = {}  # the instance of each key's last row, whose total the window keeps
    for part in files:  # ROUNDROBIN on the sequence number: the line's parity (header: line 1)
        for j, (k, v) in enumerate(part):
            totals[(j % 2, k)] = totals.get((j % 2, k), 0) + v
            last[k] = j % 2
    assert sorted((r["k"], int(r["t"])) for r in out.rows("w")) == sorted(
        (k, totals[(i, k)]) for k, i in last.items())


def test_single_parquets_writes_every_part_in_one_job(spark, tmp_path):
    """runtime.batch_writers.single_parquets: each frame in its own file, rows counted by ``__op``; an
    empty frame gets a file only when asked to."""
    import datetime as dt

    import pyarrow.parquet as pq

    from runtime.batch_writers import single_parquets
    changes = spark.createDataFrame(
        [("i", 1, Decimal("1.50"), dt.datetime(2026, 1, 2, 3, 4, 5)), ("u", 2, None, None),
         ("i", 3, Decimal("-2.25"), dt.datetime(2026, 1, 2, 3, 4, 6))],
        "__op string, k int, m decimal(10,2), ts timestamp")
    state = spark.createDataFrame([(1, "a"), (2, None)], "k int, `a b` string")
    empty = state.where("k > 9")
    paths = [str(tmp_path / n / "f.parquet") for n in ("c", "s", "e1", "e2")]
    counts = single_parquets([(changes, paths[0], False), (state, paths[1], True),
                              (empty, paths[2], False), (empty, paths[3], True)])
    assert counts == [{"i": 2, "u": 1}, {None: 2}, {}, {}]
    assert sorted(pq.read_table(paths[0]).to_pylist(), key=lambda r: r["k"]) == [
        {"__op": "i", "k": 1, "m": Decimal("1.50"), "ts": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)},
        {"__op": "u", "k": 2, "m": None, "ts": None},
        {"__op": "i", "k": 3, "m": Decimal("-2.25"), "ts": dt.datetime(2026, 1, 2, 3, 4, 6, tzinfo=dt.UTC)}]
    assert spark.read.parquet(paths[1]).orderBy("k").collect() == state.orderBy("k").collect()
    assert not os.path.exists(paths[2]) and pq.read_table(paths[3]).num_rows == 0
    assert not [f for f in glob.glob(str(tmp_path / "*" / ".*")) if f.endswith(".tmp")]


def test_bad_records_of_an_input_read_only_by_a_native_aggregation_hold_its_columns(spark, tmp_path):
    """The input's batch goes to the aggregation unread; a row the partition function refuses is
    a bad record whose row is the input's columns (the internal "__kind" column leaked into it)."""
    text = """
    create input stream s schema (k string, v integer);
    create output window w primary key deduced keep all
      partition by s { integer i := 0; while (i < 1) i := i + 1; if (s.v < 90) return i; } partitions 2
      as select s.k, count(*) n from s group by s.k;
    """
    data = tmp_path / "in"
    write_rows(str(data / "a.csv"), ["k", "v"], [("a", 1), ("b", 95), ("a", 2)])
    out = run_project(spark, tmp_path, text, {"s": str(data)})
    assert [(b["reason"], b["row"]) for b in out.bad_records()] == [("no return", {"k": "b", "v": 95})]
    assert {r["k"]: r["n"] for r in out.rows("w")} == {"a": "2"}


def test_a_file_of_a_header_only_is_a_batch_without_rows(spark, tmp_path):
    """A header-only file makes a micro-batch without rows. An input whose one reader runs per
    instance is counted by Spark's observed metrics, which an empty batch does not collect: the
    run goes on and counts it as nothing (it stopped the element before)."""
    text = """
    create input stream trades schema (id integer, sym string, px float);
    create output window top primary key deduced keep 3 rows
      as select trades.sym, max(trades.px) mx from trades keep 3 rows group by trades.sym;
    """
    data = tmp_path / "in"
    write_rows(str(data / "a.csv"), ["id", "sym", "px"], [(1, "A", 1.0), (2, "B", 2.0)])
    write_rows(str(data / "b.csv"), ["id", "sym", "px"], [])
    write_rows(str(data / "c.csv"), ["id", "sym", "px"], [(3, "A", 3.0), ("x", "C", 1.0)])
    out = run_project(spark, tmp_path, text, {"trades": str(data)}, max_files_per_batch=1)
    assert sorted((r["sym"], r["mx"]) for r in out.rows("top")) == [("A", "3.0"), ("B", "2.0")]
    assert out.stats("trades")["rows_in"] == 4 and out.stats("trades")["batches"] == 3
    assert [r["reason"] for r in out.bad_records()] and len(out.bad_records()) == 1
