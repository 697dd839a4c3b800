"""End to end on local Spark: a stream joined with windows, run through runtime.run.run_plan (the
code behind `ccl run`) once with the join kernel (runtime/engine/kernels/join.py, as the plan
decides) and once with the engine row by row (the kernel rule switched off while planning): the
same output CSV rows, bad records and counts."""
from __future__ import annotations

import random

from tests.runner_e2e import run_project, write_rows

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer);
CREATE INPUT WINDOW Instruments SCHEMA (Sym string, Sector string, LotSize integer)
    PRIMARY KEY (Sym);
CREATE INPUT WINDOW Sectors SCHEMA (Sector string, Region string) PRIMARY KEY (Sector);
CREATE OUTPUT STREAM Enriched
    PARTITION BY Trades HASH(Sym) PARTITIONS 3
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price * i.LotSize Notional, i.Sector Sector,
          s.Region Region, cast(integer, CASE WHEN t.Qty = 13 THEN 'x' ELSE '1' END) One
   FROM Trades t INNER JOIN Instruments i ON t.Sym = i.Sym
        LEFT JOIN Sectors s ON s.Sector = i.Sector
   WHERE t.Qty > 2;
"""


def _inputs(tmp_path) -> dict[str, str]:
    rnd = random.Random(11)
    syms = [f"S{k:02d}" for k in range(30)]
    instruments = [("i", s, f"SEC{k % 4}", 10 * (1 + k % 3)) for k, s in enumerate(syms[:25])]
    instruments += [("u", syms[3], "SEC9", 7), ("d", syms[4], "", "")]
    sectors = [("i", f"SEC{k}", f"R{k % 2}") for k in range(3)]
    paths = {"Instruments": write_rows(str(tmp_path / "in" / "i" / "instruments.csv"),
                                       ["ESP_OPS", "Sym", "Sector", "LotSize"], instruments),
             "Sectors": write_rows(str(tmp_path / "in" / "s" / "sectors.csv"),
                                   ["ESP_OPS", "Sector", "Region"], sectors)}
    trades = [(n, rnd.choice(syms), f"{rnd.uniform(1, 50):.2f}", rnd.choice([1, 5, 13, 40]))
              for n in range(300)]
    for f in range(3):
        write_rows(str(tmp_path / "in" / "t" / f"part{f}.csv"), ["TradeId", "Sym", "Price", "Qty"],
                   trades[f * 100:(f + 1) * 100])
    paths["Trades"] = str(tmp_path / "in" / "t")
    return paths


def test_join_kernel_gives_the_engine_csv_outputs(spark, tmp_path, monkeypatch):
    inputs = _inputs(tmp_path)
    kernel = run_project(spark, tmp_path / "kernel", PROJECT, inputs, max_files_per_batch=1)
    assert next(e for e in kernel.plan["elements"] if e["name"] == "Enriched")["physical"]["kernel"] == "join"
    import ccl.plan.physical as physical
    monkeypatch.setattr(physical, "_KERNELS", [])
    engine = run_project(spark, tmp_path / "engine", PROJECT, inputs, max_files_per_batch=1)
    assert next(e for e in engine.plan["elements"] if e["name"] == "Enriched")["physical"]["kernel"] is None

    def rows(out):
        return sorted(tuple(sorted(r.items())) for r in out.rows("Enriched"))
    got = rows(kernel)
    assert got == rows(engine) and len(got) > 100
    assert {dict(r)["Region"] for r in got} >= {"", "R0", "R1"}   # the LEFT join's missing side
    bad = sorted(str(sorted(b.items())) for b in kernel.bad_records() if "Enriched" in str(b))
    assert bad == sorted(str(sorted(b.items())) for b in engine.bad_records() if "Enriched" in str(b))
    assert bad  # the rows with Qty 13 fail the cast
    assert kernel.stats("Enriched")["rows_in"] == engine.stats("Enriched")["rows_in"]
