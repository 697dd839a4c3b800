"""The example projects of projects/: each passes `ccl check`, and each runs end to end on Spark
from its own input adapter (no --input) with the outputs its README describes.

Expectations are computed here from the project's committed input CSV in plain Python (HASH
instances with Spark's own hash function in a batch query, ROUNDROBIN from the line numbers, the
custom partition function re-implemented), never hard-coded.
"""
from __future__ import annotations

import csv
import os
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

from ccl.plan.codec import plan_to_json
from ccl.plan.planner import plan_project
from runtime.run_setup import RunOptions
from runtime.outputs import CONFLICT
from runtime.run import run_plan
from tests.cli_runner import run as ccl
from tests.runner_e2e import RunOutput

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "projects")

# project directory -> its .ccl file
PROJECTS = {
    "stock_prices": "stock_prices.ccl",
    "trades_roundrobin": "trades_roundrobin.ccl",
    "max_price_hash": "max_price.ccl",
    "vwap_broadcast": "vwap_broadcast.ccl",
    "meter_regions": "meter_regions.ccl",
    "sales_by_country": "sales_by_country.ccl",
}
# the warnings a project's README explains
EXPECTED_WARNINGS = {"max_price_hash": ["CCL3002"]}


def ccl_path(project: str) -> str:
    return os.path.join(ROOT, project, PROJECTS[project])


def read_csv(project: str, name: str) -> list[dict]:
    with open(os.path.join(ROOT, project, "data", name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def run(spark, tmp_path, project: str) -> RunOutput:
    """Plan the project (its .ccr is read) and run it until idle from its input adapters."""
    plan, diags = plan_project(ccl_path(project))
    assert plan is not None, [str(d) for d in diags]
    out_dir = str(tmp_path / "out")
    options = RunOptions(base_dir=os.path.join(ROOT, project), run_dir=str(tmp_path / "run"),
                         until_idle=True, buckets=2)
    result = run_plan(spark, plan, options, out_dir)
    out = RunOutput(out_dir, result.report, plan_to_json(plan))
    # the example projects' data is clean; only a window that partitioning splits (the warning its
    # README explains) has keys held by two instances
    assert [b for b in out.bad_records() if b["reason"] != CONFLICT] == []
    return out


def hash_instances(spark, keys: list[tuple], count: int) -> dict[tuple, int]:
    """The instance HASH(cols) gives each key tuple: Spark's hash, computed in a batch query."""
    from pyspark.sql import functions as F
    keys = sorted(set(keys))
    cols = [f"c{i}" for i in range(len(keys[0]))]
    df = spark.createDataFrame(keys, ", ".join(f"{c} string" for c in cols))
    rows = df.select(*cols, F.pmod(F.hash(*cols), F.lit(count)).alias("i")).collect()
    return {tuple(r[c] for c in cols): r["i"] for r in rows}


def instances(out: RunOutput, element: str) -> dict[int, int]:
    return {int(k): v for k, v in out.stats(element)["instances"].items()}


# --------------------------------------------------------------------------------------------------
# ccl check (no Spark)
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("project", sorted(PROJECTS))
def test_project_checks(project):
    folder = os.path.join(ROOT, project)
    stem = os.path.splitext(PROJECTS[project])[0]
    for needed in (PROJECTS[project], stem + ".ccr", "README.md"):
        assert os.path.isfile(os.path.join(folder, needed)), needed
    code, out, err = ccl("check", ccl_path(project))
    assert code == 0, err
    assert "ok (" in out
    warnings = sorted({line.split("warning ")[1].split(":")[0] for line in err.splitlines()
                       if ": warning CCL" in line})
    assert warnings == EXPECTED_WARNINGS.get(project, []), err
    assert ".ccr" not in err  # the .ccr is read without complaint
    # the README's run command is the one these tests run
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert f"ccl run projects/{project}/{PROJECTS[project]} --until-idle" in readme


def test_partition_counts_come_from_the_ccr():
    code, out, _ = ccl("check", ccl_path("meter_regions"))
    assert code == 0 and "custom by MeterReadings, 4 instances" in out
    assert "meterPartitions = 4 (.ccr)" in out
    code, out, _ = ccl("check", ccl_path("meter_regions"), "--param", "meterPartitions=2")
    assert code == 0 and "custom by MeterReadings, 2 instances" in out
    code, out, _ = ccl("check", ccl_path("stock_prices"))
    assert code == 0 and "stockPartitions = 4 (.ccr)" in out


# --------------------------------------------------------------------------------------------------
# End to end, one run per project
# --------------------------------------------------------------------------------------------------

def test_stock_prices_state_partitioned_by_symbol(spark, tmp_path):
    updates = read_csv("stock_prices", "stock_updates.csv")
    out = run(spark, tmp_path, "stock_prices")
    last = {u["Symbol"]: u for u in updates}  # file order: the last update of a symbol wins
    got = {r["Symbol"]: (Decimal(r["Price"]), r["QuoteTime"]) for r in out.rows("StockPrices")}
    assert len(out.rows("StockPrices")) == len(last)  # one instance owns each symbol: no copies
    assert got == {s: (Decimal(u["Price"]), u["QuoteTime"]) for s, u in last.items()}

    session = defaultdict(list)
    for u in updates:
        session[u["Symbol"]].append(u)
    want = {s: (Decimal(us[0]["Price"]), Decimal(us[-1]["Price"]), min(Decimal(u["Price"]) for u in us),
                max(Decimal(u["Price"]) for u in us), len(us), us[-1]["QuoteTime"])
            for s, us in session.items()}
    rows = out.rows("StockSession")
    assert len(rows) == len(want)
    assert {r["Symbol"]: (Decimal(r["Open"]), Decimal(r["Price"]), Decimal(r["Low"]), Decimal(r["High"]),
                          int(r["Updates"]), r["LastQuote"]) for r in rows} == want

    # Every update went to the instance of its symbol, in both partitioned windows.
    inst = hash_instances(spark, [(s,) for s in session], 4)
    per_instance = Counter(inst[(u["Symbol"],)] for u in updates)
    for element in ("StockPrices", "StockSession"):
        assert out.stats(element)["partition_instances"] == 4  # stockPartitions from the .ccr
        assert instances(out, element) == dict(per_instance)
    # StockSession has a time KEEP (processing-time mode): in an until-idle run it has no batches
    # without data, so that it can be stopped between batches (run.py)
    assert out.stats("StockSession")["batches"] == out.stats("StockPrices")["batches"]


def test_trades_filtered_round_robin(spark, tmp_path):
    trades = read_csv("trades_roundrobin", "trades.csv")
    out = run(spark, tmp_path, "trades_roundrobin")
    large = [t for t in trades if int(t["Volume"]) > 10000]
    assert [(r["TradeId"], r["Ts"], r["Symbol"], Decimal(r["Price"]), r["Volume"])
            for r in out.rows("LargeTrades")] == [
        (t["TradeId"], t["Ts"], t["Symbol"], Decimal(t["Price"]), t["Volume"]) for t in large]
    # ROUNDROBIN follows the rows' sequence numbers: data line k (the header is line 1) of the
    # only file goes to instance (k + 1) % 3, so the three instances get a third each.
    want_inst = Counter((k + 2) % 3 for k in range(len(trades)))
    assert instances(out, "LargeTrades") == dict(want_inst)
    assert max(want_inst.values()) - min(want_inst.values()) <= 1

    per_symbol = defaultdict(list)
    for t in large:
        per_symbol[t["Symbol"]].append(t)
    want = {s: (len(ts), sum(int(t["Volume"]) for t in ts), max(int(t["Volume"]) for t in ts), ts[-1]["Ts"])
            for s, ts in per_symbol.items()}
    assert {r["Symbol"]: (int(r["LargeTrades"]), int(r["Volume"]), int(r["Biggest"]), r["LastTrade"])
            for r in out.rows("LargeTradeVolume")} == want
    assert len(out.rows("LargeTradeVolume")) == len(want)


def test_max_price_hash_keep_5_minutes(spark, tmp_path):
    prices = read_csv("max_price_hash", "prices.csv")
    out = run(spark, tmp_path, "max_price_hash")
    inst = hash_instances(spark, [(p["isin"],) for p in prices], 5)

    by_isin: dict[str, Decimal] = {}
    for p in prices:
        by_isin[p["isin"]] = max(by_isin.get(p["isin"], Decimal(-1)), Decimal(p["price"]))
    got = [(r["isin"], Decimal(r["maxPrice"])) for r in out.rows("maxPriceByIsin")]
    assert sorted(got) == sorted(by_isin.items())

    # Grouped by the first letter but partitioned by the whole ISIN: one maximum per (instance,
    # letter). The window holds each letter once, the maximum of the instance whose maximum
    # changed last; the others are bad records.
    partial: dict[tuple[int, str], Decimal] = {}
    changed: dict[tuple[int, str], int] = {}
    for n, p in enumerate(prices):
        k = (inst[(p["isin"],)], p["isin"][0].upper())
        if Decimal(p["price"]) > partial.get(k, Decimal(-1)):
            partial[k], changed[k] = Decimal(p["price"]), n
    last = {letter: max((n, i) for (i, x), n in changed.items() if x == letter)[1] for _, letter in partial}
    got = sorted((r["isin"], Decimal(r["maxPrice"])) for r in out.rows("maxPriceW"))
    assert got == sorted((letter, partial[(i, letter)]) for letter, i in last.items())
    letters = Counter(letter for _, letter in partial)
    assert any(n > 1 for n in letters.values())  # the data shows the effect the README explains
    assert sum(out.stats("maxPriceW")["bad_records"].values()) == len(partial) - len(last)

    per_instance = dict(Counter(inst[(p["isin"],)] for p in prices))
    assert instances(out, "maxPriceW") == per_instance == instances(out, "maxPriceByIsin")


def test_vwap_join_with_broadcast_fx_rates(spark, tmp_path):
    trades = read_csv("vwap_broadcast", "trades.csv")
    rates = {r["Currency"]: float(r["RateToEur"]) for r in read_csv("vwap_broadcast", "fx_rates.csv")}
    out = run(spark, tmp_path, "vwap_broadcast")
    per_isin = defaultdict(list)
    for t in trades:
        per_isin[t["Isin"]].append(t)
    rows = out.rows("VwapEur")
    assert len(rows) == len(per_isin)
    got = {r["Isin"]: r for r in rows}
    assert set(got) == set(per_isin)
    for isin, ts in per_isin.items():
        volume = sum(int(t["Volume"]) for t in ts)
        vwap = sum(float(t["Price"]) * rates[t["Currency"]] * int(t["Volume"]) for t in ts) / volume
        r = got[isin]
        assert float(r["VwapEur"]) == pytest.approx(vwap, rel=1e-9)
        assert (int(r["Volume"]), int(r["Trades"]), r["LastTrade"]) == (volume, len(ts), ts[-1]["TradeTime"])

    # Trades go to the instance of their ISIN; every FX rate goes to all three instances.
    inst = hash_instances(spark, [(t["Isin"],) for t in trades], 3)
    want = Counter(inst[(t["Isin"],)] for t in trades)
    for i in range(3):
        want[i] += len(rates)
    assert instances(out, "VwapEur") == dict(want)
    assert out.stats("VwapEur")["rows_in"] == len(trades) + 3 * len(rates)


def meter_instance(meter_id: str, count: int) -> int:
    """RegionLoad's partition function (meter_regions.ccl), in Python."""
    country = meter_id[:2]
    if country == "DE" or count == 1:
        return 0
    return 1 + (ord(country[0]) * 31 + ord(country[1])) % (count - 1)


def test_meter_regions_custom_partitioning_from_the_ccr(spark, tmp_path):
    readings = read_csv("meter_regions", "readings.csv")
    out = run(spark, tmp_path, "meter_regions")
    per_country = defaultdict(list)
    for r in readings:
        per_country[r["MeterId"][:2]].append(r)
    rows = out.rows("RegionLoad")
    assert len(rows) == len(per_country)  # a country's meters all reach one instance
    got = {r["Country"]: r for r in rows}
    for country, rs in per_country.items():
        r = got[country]
        assert int(r["Readings"]) == len(rs)
        assert float(r["TotalKwh"]) == pytest.approx(sum(float(x["Kwh"]) for x in rs), rel=1e-9)
        assert float(r["PeakKwh"]) == max(float(x["Kwh"]) for x in rs)
        assert r["LastReading"] == max(x["ReadingTime"] for x in rs)
    assert out.stats("RegionLoad")["partition_instances"] == 4  # meterPartitions in the .ccr
    want = Counter(meter_instance(r["MeterId"], 4) for r in readings)
    assert instances(out, "RegionLoad") == dict(want)
    assert want[0] == len(per_country["DE"])  # Germany alone on instance 0


def test_sales_totals_by_country_hourly(spark, tmp_path):
    sales = read_csv("sales_by_country", "sales.csv")
    out = run(spark, tmp_path, "sales_by_country")

    def totals(key):
        acc: dict = {}
        for s in sales:
            n, total = acc.get(key(s), (0, Decimal(0)))
            acc[key(s)] = (n + 1, total + Decimal(s["Value"]))
        return acc

    rows = out.rows("SalesByCountry")
    assert len(rows) == len({s["Country"] for s in sales})
    assert {r["Country"]: (int(r["Sales"]), Decimal(r["Total"])) for r in rows} == \
        totals(lambda s: s["Country"])
    rows = out.rows("SalesByCity")
    assert {(r["Country"], r["City"]): (int(r["Sales"]), Decimal(r["Total"])) for r in rows} == \
        totals(lambda s: (s["Country"], s["City"]))
    assert len(rows) == len({(s["Country"], s["City"]) for s in sales})
    [overall] = out.rows("OverallSales")
    assert (overall["Scope"], int(overall["Sales"]), Decimal(overall["Total"])) == \
        ("ALL",) + totals(lambda s: "ALL")["ALL"]

    by_country = hash_instances(spark, [(s["Country"],) for s in sales], 10)
    by_city = hash_instances(spark, [(s["Country"], s["City"]) for s in sales], 10)
    assert instances(out, "SalesByCountry") == dict(Counter(by_country[(s["Country"],)] for s in sales))
    assert instances(out, "SalesByCity") == dict(Counter(by_city[(s["Country"], s["City"])] for s in sales))
    assert out.stats("OverallSales")["partition_instances"] == 1
