"""`ccl verify`: the project with and without PARTITION BY on sample inputs (ccl/cli/verify.py,
runtime/verify.py). The engine path needs no Spark; one test runs both paths on Spark's session."""
import os
import random

import pytest

from ccl.cli.verify import without_partitions
from ccl.plan.planner import plan_project
from ccl.syntax import nodes as n
from ccl.syntax.project import load_project
from cli_runner import run
from runtime.verify import ENGINE, SPARK, engine_refusal, run_on_engine, verify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECTS = os.path.join(ROOT, "projects")
SEEDS = os.path.join(ROOT, "tests", "projects", "seeds")
TRADES_CSV = os.path.join(PROJECTS, "trades_roundrobin", "data", "trades.csv")

TRADES = """CREATE INPUT STREAM Trades SCHEMA (TradeId long, Ts bigdatetime, Symbol string,
    Price money(2), Volume integer);
"""

# The aggregate of projects/trades_roundrobin partitioned ROUNDROBIN itself (ESP: "ROUNDROBIN is
# sufficient for stateless operations like simple filters, but not for aggregation").
RR_AGGREGATE = TRADES + """
CREATE OUTPUT WINDOW VolumeBySymbol PRIMARY KEY DEDUCED
    PARTITION BY Trades ROUNDROBIN PARTITIONS 3
AS SELECT t.Symbol Symbol, count(*) Trades, sum(t.Volume) Volume
   FROM Trades t GROUP BY t.Symbol;
"""

HASH_AGGREGATE = RR_AGGREGATE.replace("ROUNDROBIN", "HASH(Symbol)")


def _write(tmp_path, text, name="p.ccl"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _prices(tmp_path, rows=200, seed=1, isins=("DE01", "DE02", "US01", "US02", "FR01", "GB07", "IT03")):
    rng = random.Random(seed)
    path = tmp_path / "prices.csv"
    with open(path, "w") as f:
        f.write("ts,isin,price\n")
        for i in range(rows):
            f.write(f"2024-01-01T10:{i // 60:02d}:{i % 60:02d},{rng.choice(isins)},"
                    f"{rng.randint(1000, 9000) / 100}\n")
    return str(path)


# --- the seed examples ----------------------------------------------------------------------------

def test_roundrobin_aggregate_differs_and_names_ccl3001(tmp_path):
    code, out, err = run("verify", _write(tmp_path, RR_AGGREGATE), "--input", f"Trades={TRADES_CSV}")
    assert code == 1, out + err
    assert "VolumeBySymbol: differs (window: by key" in out
    assert "partitioned" in out and "| unpartitioned" in out
    assert "key Symbol=" in out
    assert "predicted by CCL3001" in out and "no partition-safety warning" not in out
    assert "per-instance engine, no Spark" in out
    assert "Traceback" not in err


def test_the_same_aggregate_hashed_by_its_group_is_equivalent(tmp_path):
    code, out, err = run("verify", _write(tmp_path, HASH_AGGREGATE), "--input", f"Trades={TRADES_CSV}")
    assert code == 0, out + err
    assert "VolumeBySymbol: equivalent (window: by key; 6 rows partitioned, 6 unpartitioned)" in out
    assert "1 equivalent, 0 differ" in out


def test_eventcache_without_the_partition_key_differs_and_names_its_warnings(tmp_path):
    # the guidelines' first event cache case: a cache without a key, partitioned by HASH(isin)
    with open(os.path.join(SEEDS, "eventcache_example1.ccl")) as f:
        text = f.read().replace("eventCache(priceW[isin], 10 events)", "eventCache(priceW, 10 events)")
    code, out, err = run("verify", _write(tmp_path, text), "--input", f"priceW={_prices(tmp_path)}")
    assert code == 1, out + err
    assert "maxPriceW: differs (stream: rows as a multiset" in out
    assert "rows only in one run" in out
    assert "predicted by CCL3005" in out and "predicted by CCL3006" in out


def test_eventcache_example1_keyed_by_the_partition_key_is_equivalent(tmp_path):
    # ESP's Example 1: a 10 events cache keyed by isin, partitioned by HASH(isin). ESP limits the
    # size of each bucket ("Managing Bucket Size"), as the runtime does (ccl/splash/caches.py), and
    # every bucket lives in one instance, so the averages are those of the unpartitioned stream;
    # the checker warns of nothing (docs/analysis.md, "Event caches and partitioning").
    code, out, err = run("verify", os.path.join(SEEDS, "eventcache_example1.ccl"),
                         "--input", f"priceW={_prices(tmp_path)}")
    assert code == 0, out + err
    assert "maxPriceW: equivalent (stream: rows as a multiset; 200 rows partitioned, 200 unpartitioned)" in out
    assert "CCL3006" not in err + out


def _venue_prices(tmp_path, rows=200) -> str:
    rng = random.Random(5)
    path = tmp_path / "venue_prices.csv"
    with open(path, "w") as f:
        f.write("ts,isin,venue,price\n")
        for i in range(rows):
            f.write(f"2024-01-01T10:{i // 60:02d}:{i % 60:02d},"
                    f"{rng.choice(['DE01', 'DE02', 'US01', 'US02', 'FR01'])},"
                    f"{rng.choice(['XETR', 'XLON', 'XPAR'])},{rng.randint(1000, 9000) / 100}\n")
    return str(path)


def test_eventcache_keyed_by_another_column_differs_and_names_its_warnings(tmp_path):
    # the guidelines' case: the cache's key (venue) is not the partition key (isin), so a venue's
    # bucket is spread over the instances and each sums its own part, 10 events in each
    with open(os.path.join(SEEDS, "eventcache_example1.ccl")) as f:
        text = (f.read().replace("isin string,", "isin string, venue string,", 1)
                .replace("eventCache(priceW[isin], 10 events)", "eventCache(priceW[venue], 10 events)")
                .replace("avg(cache.price)", "sum(cache.price)"))
    code, out, err = run("verify", _write(tmp_path, text), "--input",
                         f"priceW={_venue_prices(tmp_path)}")
    assert code == 1, out + err
    assert "maxPriceW: differs (stream: rows as a multiset" in out
    assert "predicted by CCL3005" in out and "predicted by CCL3006" in out
    assert "no partition-safety warning" not in out


def _qtrades(tmp_path, rows=60) -> str:
    rng = random.Random(3)
    symbols = "ABCDEFG"
    path = tmp_path / "qtrades.csv"
    with open(path, "w") as f:
        f.write("Id,Symbol,Symbol2,Price,Shares\n")
        for i in range(rows):
            f.write(f"{i},{rng.choice(symbols)},{rng.choice(symbols)},{rng.randint(1, 20)},"
                    f"{rng.randint(1, 100)}\n")
    return str(path)


def test_flex_keycache_example2_reading_another_bucket_differs_and_names_ccl3007(tmp_path):
    # ESP's Example 2 keeps its top trades in the bucket of Symbol2 (keyCache), which under
    # HASH(Symbol) is another instance's: with the bucket's size limited to 3 (SAP's
    # insertIntoCache replaces the lowest price of a full bucket), the instances keep other trades
    with open(os.path.join(SEEDS, "flex_keycache_example2.ccl")) as f:
        text = f.read().replace("manual, Price asc", "manual, 3 events, Price asc")
    code, out, err = run("verify", _write(tmp_path, text), "--input", f"QTrades={_qtrades(tmp_path)}")
    assert code == 1, out + err
    assert "Top3Trades: differs (window: by key" in out
    assert "predicted by CCL3007" in out and "no partition-safety warning" not in out
    assert "CCL3006" not in out  # (its cache is keyed by the partition key: no bucket is spread)


def test_flex_keycache_example2_as_written_is_equivalent(tmp_path):
    # as the seed writes it the cache has no size limit: insertIntoCache returns the trade itself,
    # so the output never depends on which bucket the trade went to; CCL3007 still warns of the
    # lookup (its results would change as soon as anything read the bucket)
    code, out, err = run("verify", os.path.join(SEEDS, "flex_keycache_example2.ccl"),
                         "--input", f"QTrades={_qtrades(tmp_path)}")
    assert code == 0, out + err
    assert "Top3Trades: equivalent" in out


def test_hash_on_another_column_than_the_group_differs_and_names_ccl3002():
    # projects/max_price_hash: HASH(isin) under GROUP BY upper(left(isin, 1))
    code, out, err = run("verify", os.path.join(PROJECTS, "max_price_hash", "max_price.ccl"))
    assert code == 1, out + err
    assert "maxPriceW: differs" in out and "predicted by CCL3002" in out
    assert "maxPriceByIsin: equivalent" in out


def test_keep_rows_per_instance_differs_and_names_ccl3006(tmp_path):
    text = TRADES + """
CREATE OUTPUT WINDOW Recent PRIMARY KEY (TradeId) KEEP 5 ROWS
    PARTITION BY Trades HASH(Symbol) PARTITIONS 3
AS SELECT * FROM Trades;
"""
    code, out, err = run("verify", _write(tmp_path, text), "--input", f"Trades={TRADES_CSV}")
    assert code == 1, out + err
    assert "Recent: differs" in out and "predicted by CCL3006" in out


def test_downstream_element_names_the_upstream_warning(tmp_path):
    text = RR_AGGREGATE + """
CREATE OUTPUT WINDOW Busiest PRIMARY KEY DEDUCED
AS SELECT v.Symbol Symbol, max(v.Volume) Volume FROM VolumeBySymbol v GROUP BY v.Symbol;
"""
    code, out, _ = run("verify", _write(tmp_path, text), "--input", f"Trades={TRADES_CSV}")
    assert code == 1
    busiest = out[out.index("Busiest:"):]
    assert busiest.startswith("Busiest: differs")
    assert "predicted by CCL3001 (upstream, on VolumeBySymbol)" in busiest


@pytest.mark.parametrize("project", ["sales_by_country", "stock_prices", "meter_regions",
                                     "vwap_broadcast", "trades_roundrobin"])
def test_hash_and_roundrobin_filter_examples_are_equivalent(project):
    folder = os.path.join(PROJECTS, project)
    ccl = next(f for f in os.listdir(folder) if f.endswith(".ccl"))
    code, out, err = run("verify", os.path.join(folder, ccl))
    assert code == 0, out + err
    assert "differs" not in out and " 0 differ (per-instance engine, no Spark" in out


def test_hash_vwap_broadcast_seed_is_equivalent(tmp_path):
    rng = random.Random(3)
    prices, volumes = tmp_path / "prices.csv", tmp_path / "volumes.csv"
    isins = [f"IS{i:02d}" for i in range(12)]
    prices.write_text("isin,price\n" + "".join(f"{i},{rng.randint(100, 999) / 10}\n" for i in isins))
    volumes.write_text("isin,volume\n" + "".join(f"{i},{rng.randint(1, 500)}\n" for i in isins[::2]))
    code, out, err = run("verify", os.path.join(SEEDS, "hash_vwap_broadcast.ccl"),
                         "--input", f"priceW={prices}", "--input", f"volumeW={volumes}")
    assert code == 0, out + err
    assert "vwapW: equivalent (window: by key; 12 rows partitioned, 12 unpartitioned)" in out


def test_roundrobin_filter_seed_is_equivalent(tmp_path):
    trades = tmp_path / "trades.csv"
    trades.write_text("Ts,Symbol,Price,Volume\n" + "".join(
        f"2024-03-04T09:00:{i:02d}.000001,S{i % 4},{10 + i}.5,{(i * 3793) % 20000}\n" for i in range(50)))
    code, out, err = run("verify", os.path.join(SEEDS, "roundrobin_tradewindow.ccl"),
                         "--input", f"TradeWindow={trades}")
    assert code == 0, out + err
    assert "TradeOutWindow: equivalent" in out


# --- removing the clauses, and what runs where ----------------------------------------------------

def test_without_partitions_copies_and_strips_every_clause():
    project = load_project(os.path.join(PROJECTS, "sales_by_country", "sales_by_country.ccl"))
    stripped, removed = without_partitions(project)
    assert removed == 2
    assert not [s for s in stripped.statements if getattr(s, "partition", None) is not None]
    assert len([s for s in project.statements if getattr(s, "partition", None) is not None]) == 2


def test_without_partitions_reaches_modules(tmp_path):
    text = """CREATE MODULE m IN i OUT o BEGIN
    CREATE INPUT STREAM i SCHEMA (k string, v integer);
    CREATE OUTPUT WINDOW o PRIMARY KEY DEDUCED PARTITION BY i HASH(k) PARTITIONS 2
        AS SELECT i.k k, sum(i.v) v FROM i GROUP BY i.k;
END;
CREATE INPUT STREAM s SCHEMA (k string, v integer);
LOAD MODULE m AS m1 IN i = s OUT o = out1 PARTITION BY s HASH(k) PARTITIONS 2;
"""
    project = load_project(_write(tmp_path, text))
    assert not project.has_errors, project.diagnostics
    stripped, removed = without_partitions(project)
    assert removed == 2
    assert not [x for x in _all(stripped) if getattr(x, "partition", None) is not None]


def _all(project):
    stack = list(project.statements)
    while stack:
        node = stack.pop()
        if isinstance(node, n.Node):
            yield node
            stack.extend(getattr(node, f) for f in node.__dataclass_fields__ if f != "span")
        elif isinstance(node, (list, tuple)):
            stack.extend(node)


def test_engine_refuses_what_it_does_not_run(tmp_path):
    text = """CREATE INPUT STREAM s SCHEMA (k string, v integer);
CREATE OUTPUT STREAM o AS SELECT * FROM s WHERE s.v / 0 > 1;
CREATE ERROR STREAM errs ON o;
"""
    plan, diags = plan_project(_write(tmp_path, text))
    assert plan is not None, diags
    assert "errs is an error stream" == engine_refusal(plan)


def test_engine_path_bad_rows_do_not_stop_the_run(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("TradeId,Ts,Symbol,Price,Volume\n1,2024-03-04T09:00:00,A,1.5,10\n"
                    "2,not a time,A,1.5,10\nx,y\n3,2024-03-04T09:00:01,A,2.5,30\n")
    plan, _ = plan_project(_write(tmp_path, HASH_AGGREGATE))
    result = run_on_engine(plan, {"Trades": str(data)}, str(tmp_path))
    assert result["VolumeBySymbol"].rows == [{"Symbol": "A", "Trades": 2, "Volume": 40}]


# --- bad input ------------------------------------------------------------------------------------

def test_bad_input_is_a_diagnostic_never_a_traceback(tmp_path):
    src = _write(tmp_path, RR_AGGREGATE)
    code, _, err = run("verify", src, "--input", f"Trades={tmp_path / 'missing.csv'}")
    assert code == 2 and "does not exist" in err
    code, _, err = run("verify", src, "--input", f"Nope={TRADES_CSV}")
    assert code == 2 and "no input element" in err
    code, _, err = run("verify", src, "--input", "Trades")
    assert code == 2 and "ELEMENT=PATH" in err
    code, out, err = run("verify", _write(tmp_path, "create output stream o as select x.a from x;\n", "bad.ccl"))
    assert code == 1 and out == "" and "error CCL" in err and "not verified" in err
    code, _, err = run("verify", str(tmp_path / "nothing.ccl"))
    assert code == 2
    assert "Traceback" not in err


def test_a_project_without_partitions_is_trivially_equivalent(tmp_path):
    code, out, _ = run("verify", _write(tmp_path, HASH_AGGREGATE.replace(
        "PARTITION BY Trades HASH(Symbol) PARTITIONS 3", "")), "--input", f"Trades={TRADES_CSV}")
    assert code == 0
    assert "0 PARTITION BY clause(s) removed" in out


# --- the engine path gives Spark's verdicts -------------------------------------------------------

def test_engine_and_spark_give_the_same_verdicts(spark, tmp_path):
    partitioned, _ = plan_project(_write(tmp_path, RR_AGGREGATE))
    project = load_project(str(tmp_path / "p.ccl"))
    stripped, _ = without_partitions(project)
    plain, _ = plan_project(_write(tmp_path, HASH_AGGREGATE.replace(
        "PARTITION BY Trades HASH(Symbol) PARTITIONS 3", ""), "plain.ccl"))
    inputs = {"Trades": TRADES_CSV}
    on_engine = verify(partitioned, plain, inputs, str(tmp_path))
    on_spark = verify(partitioned, plain, inputs, str(tmp_path), spark_session=lambda: spark,
                      force_spark=True)
    assert (on_engine.runner, on_spark.runner) == (ENGINE, SPARK)
    assert [(c.name, c.equivalent, c.differing, c.rows) for c in on_engine.comparisons] == \
        [(c.name, c.equivalent, c.differing, c.rows) for c in on_spark.comparisons]
    assert not on_engine.equivalent
    assert stripped.statements  # the stripped copy plans as the text without the clause does


def test_custom_function_splitting_a_group_differs_and_names_ccl3002(tmp_path):
    # custom_maxprice on 3 instances: ascii('D') % 3 != ascii('d') % 3 but both rows are group 'D'.
    # verify found this difference with no warning (a gap in the checker, fixed: CCL3002 for a
    # custom function reading a column the GROUP BY does not group by as it is).
    with open(os.path.join(SEEDS, "custom_maxprice.ccl")) as f:
        text = f.read().replace("PARTITIONS 2", "PARTITIONS 3")
    data = tmp_path / "prices.csv"
    data.write_text("isin,price\nDE01,100\nde02,50\nUS01,10\nus02,20\n")
    code, out, err = run("verify", _write(tmp_path, text), "--input", f"priceW={data}")
    assert code == 1, out + err
    assert "key isin=D:" in out and "(isin=D, maxPrice=50) | (isin=D, maxPrice=100)" in out
    assert "predicted by CCL3002" in out and "no partition-safety warning" not in out


def test_custom_function_of_the_group_column_is_not_warned(tmp_path):
    text = TRADES + """
CREATE OUTPUT WINDOW VolumeBySymbol PRIMARY KEY DEDUCED
    PARTITION BY Trades { return ascii(substr(Trades.Symbol, 1, 1)) % VolumeBySymbol_partitions; }
    PARTITIONS 3
AS SELECT t.Symbol Symbol, count(*) Trades, sum(t.Volume) Volume FROM Trades t GROUP BY t.Symbol;
"""
    code, out, err = run("verify", _write(tmp_path, text), "--input", f"Trades={TRADES_CSV}")
    assert code == 0, out + err
    code, _, err = run("check", str(tmp_path / "p.ccl"))
    assert "CCL3002" not in err


def test_what_the_engine_does_not_run_goes_to_spark(spark, tmp_path):
    text = RR_AGGREGATE + "CREATE ERROR STREAM Errs ON VolumeBySymbol;\n"
    partitioned, diags = plan_project(_write(tmp_path, text))
    assert partitioned is not None, diags
    plain, _ = plan_project(_write(tmp_path, text.replace("PARTITION BY Trades ROUNDROBIN PARTITIONS 3", ""),
                                   "plain.ccl"))
    result = verify(partitioned, plain, {"Trades": TRADES_CSV}, str(tmp_path), spark_session=lambda: spark)
    assert result.runner == SPARK and "Errs is an error stream" in result.why
    by_name = {c.name: c for c in result.comparisons}
    assert not by_name["VolumeBySymbol"].equivalent and by_name["VolumeBySymbol"].rows == (6, 6)


def test_an_input_without_files_is_noted(tmp_path):
    code, out, err = run("verify", os.path.join(SEEDS, "hash_maxprice.ccl"))
    assert code == 0 and "maxPriceW: equivalent (window: by key; 0 rows partitioned" in out
    assert "note: input element priceW has no file" in err


def test_a_stream_of_one_instance_is_compared_in_order():
    from runtime.verify import ElementResult, compare

    rows = [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "c", "v": 3}]
    swapped = [rows[0], rows[2], rows[1]]
    ordered = compare(ElementResult("s", "stream", ["k", "v"], [], rows, True),
                      ElementResult("s", "stream", ["k", "v"], [], swapped, True))
    assert not ordered.equivalent and ordered.out_of_order == 1 and ordered.differing == 2
    assert ordered.differences[0].partitioned[0] == {"k": "b", "v": 2}
    unordered = compare(ElementResult("s", "stream", ["k", "v"], [], rows, False),
                        ElementResult("s", "stream", ["k", "v"], [], swapped, True))
    assert unordered.equivalent
    fewer = compare(ElementResult("s", "stream", ["k", "v"], [], rows[:2], False),
                    ElementResult("s", "stream", ["k", "v"], [], rows, False))
    assert fewer.differing == 1 and fewer.differences[0].unpartitioned == [rows[2]]


# --- input order: arrival across inputs, and orders the runtime does not fix ---------------------

TWO_INPUT_FLEX = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE INPUT STREAM Limits SCHEMA (Sym string, MaxQty integer);
CREATE FLEX F IN Trades, Limits
    OUT OUTPUT WINDOW Checked SCHEMA (TradeId long, Sym string, Over integer) PRIMARY KEY (TradeId)
    PARTITION BY Trades HASH(Sym), BY Limits HASH(Sym) PARTITIONS 3
BEGIN
    DECLARE dictionary(string, integer) limit; END;
    ON Limits { limit[Limits.Sym] := Limits.MaxQty; };
    ON Trades {
        if (isnull(limit[Trades.Sym])) {
            output setOpcode([TradeId = Trades.TradeId; Sym = Trades.Sym; Over = -1;], upsert);
        } else {
            output setOpcode([TradeId = Trades.TradeId; Sym = Trades.Sym;
                              Over = Trades.Qty - limit[Trades.Sym];], upsert);
        }
    };
END;
"""


def _arrived(directory, name: str, text: str, at: int) -> None:
    """A file whose modification time is ``at`` seconds after a fixed time (its arrival)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    os.utime(path, (1_700_000_000 + at, 1_700_000_000 + at))


def _limits_between_trades(tmp_path) -> dict:
    """Limits, then trades, then new limits, then trades: a trade sees the limits that arrived
    before it (a file of one input between two of the other)."""
    trades, limits = str(tmp_path / "trades"), str(tmp_path / "limits")
    _arrived(limits, "l0.csv", "Sym,MaxQty\nA,10\nB,20\n", 0)
    _arrived(trades, "t0.csv", "TradeId,Sym,Qty\n1,A,15\n2,B,15\n3,C,1\n", 1)
    _arrived(limits, "l1.csv", "Sym,MaxQty\nA,100\nC,0\n", 2)
    _arrived(trades, "t1.csv", "TradeId,Sym,Qty\n4,A,15\n5,C,1\n", 3)
    return {"Trades": trades, "Limits": limits}


def test_files_of_two_inputs_are_replayed_in_arrival_order_as_the_runtime_does(spark, tmp_path):
    """The engine path numbers the files of all inputs in one list by arrival (as a run's
    project query does): trade 1 sees limit 10, trade 4 the limit 100 that arrived after trade
    1's file; Spark's run of the same files gives the same rows."""
    from runtime.verify import arrival_numbers, run_on_spark

    inputs = _limits_between_trades(tmp_path)
    plan, diags = plan_project(_write(tmp_path, TWO_INPUT_FLEX))
    assert plan is not None, diags
    assert arrival_numbers(plan, inputs, str(tmp_path)) == {
        "Trades": {"t0.csv": 1, "t1.csv": 3}, "Limits": {"l0.csv": 0, "l1.csv": 2}}
    want = {(1, "A", 5), (2, "B", -5), (3, "C", -1), (4, "A", -85), (5, "C", 1)}
    on_engine = run_on_engine(plan, inputs, str(tmp_path))["Checked"].rows
    assert {(r["TradeId"], r["Sym"], r["Over"]) for r in on_engine} == want
    on_spark = run_on_spark(spark, plan, inputs, str(tmp_path))["Checked"].rows
    assert {(int(r["TradeId"]), r["Sym"], int(r["Over"])) for r in on_spark} == want
    code, out, err = run("verify", str(tmp_path / "p.ccl"), "--input", f"Trades={inputs['Trades']}",
                         "--input", f"Limits={inputs['Limits']}")
    assert code == 0, out + err
    assert "Checked: equivalent (window: by key; 5 rows partitioned, 5 unpartitioned)" in out


TWO_PATHS = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE OUTPUT STREAM Big PARTITION BY Trades HASH(Sym) PARTITIONS 3
    AS SELECT * FROM Trades WHERE Trades.Qty > 5;
CREATE OUTPUT STREAM Odd AS SELECT * FROM Trades WHERE Trades.Qty % 2 = 1;
CREATE FLEX Last IN Big, Odd
    OUT OUTPUT WINDOW LastSeen SCHEMA (Sym string, Via string) PRIMARY KEY (Sym)
BEGIN
    ON Big { output setOpcode([Sym = Big.Sym; Via = 'big';], upsert); };
    ON Odd { output setOpcode([Sym = Odd.Sym; Via = 'odd';], upsert); };
END;
CREATE FLEX Both IN Big, Odd
    OUT OUTPUT WINDOW Seen SCHEMA (Sym string, Via string) PRIMARY KEY (Sym, Via)
BEGIN
    ON Big { output setOpcode([Sym = Big.Sym; Via = 'big';], upsert); };
    ON Odd { output setOpcode([Sym = Odd.Sym; Via = 'odd';], upsert); };
END;
"""


def test_an_order_the_runtime_does_not_fix_is_named_not_compared(tmp_path):
    """A trade of odd quantity over 5 reaches the Flex Last along two paths with one sequence
    number, from an instance of the partitioned Big and from Odd: which comes first is fixed only
    by instance numbers, and LastSeen keeps the later one. Verify says so, naming the inputs,
    instead of a verdict; Seen, which keeps both, is compared (equivalent)."""
    data = tmp_path / "t.csv"
    data.write_text("TradeId,Sym,Qty\n" + "".join(f"{i},S{i % 7},{i % 10}\n" for i in range(40)))
    code, out, err = run("verify", _write(tmp_path, TWO_PATHS), "--input", f"Trades={data}")
    assert code == 1, out + err
    assert "LastSeen: order not fixed, not compared (window: by key;" in out
    assert "reach LastSeen (from Big, Odd)" in out  # (a Flex's element is its output)
    assert "LastSeen: differs" not in out and "LastSeen: equivalent" not in out
    assert "Seen: equivalent (window: by key" in out
    assert "3 equivalent, 0 differ, 1 order not fixed" in out
    # without the rows that take both paths, nothing meets and LastSeen is compared
    data.write_text("TradeId,Sym,Qty\n" + "".join(f"{i},S{i % 7},{2 * (i % 5)}\n"
                                                  for i in range(40)))
    code, out, err = run("verify", str(tmp_path / "p.ccl"), "--input", f"Trades={data}")
    assert code == 0, out + err
    assert "LastSeen: equivalent" in out and "order not fixed" not in out
