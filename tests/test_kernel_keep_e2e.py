"""The keep kernel end to end on local Spark: a project with KEEP n ROWS PER windows, run until idle
through runtime.run.run_plan, gives the same output files, bad records and counts as the same
plan run with the kernel taken out (the engine row by row)."""
from __future__ import annotations

import random

from tests.runner_e2e import RunOutput, run_project, write_rows

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer, Code string);

CREATE OUTPUT WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 3 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT * FROM Trades;

CREATE OUTPUT WINDOW Big PRIMARY KEY (TradeId) KEEP 4 ROWS
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price * t.Qty Notional, cast(integer, t.Code) Code
   FROM Trades t WHERE t.Qty > 20;

CREATE OUTPUT WINDOW LastBySym PRIMARY KEY (Sym) KEEP LAST PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT t.Sym Sym, t.TradeId TradeId, t.Price Price FROM Trades t;
"""
KEPT = ["Recent", "Big", "LastBySym"]


def run(spark, tmp_path, inputs: dict, kernels: bool) -> RunOutput:
    """The project run until idle, its KEPT elements on their kernel or (``kernels`` False) on
    the engine."""
    out = run_project(spark, tmp_path, PROJECT, inputs, max_files_per_batch=1,
                      no_kernel=() if kernels else KEPT)
    if kernels:
        assert [e["physical"]["kernel"] for e in out.plan["elements"] if e["name"] in KEPT] == \
            ["keep"] * 3
    return out


def test_keep_windows_give_the_engine_outputs(spark, tmp_path):
    rnd = random.Random(3)
    data = tmp_path / "in"
    trade_id = 0
    for f in range(3):  # three files, one per micro-batch: windows fill, then evict
        rows = []
        for _ in range(50):
            trade_id += 1
            rows.append((trade_id if rnd.random() > 0.05 else rnd.randint(1, trade_id),  # ids again
                         rnd.choice("ABCDEFG"), "" if rnd.random() < 0.1 else f"{rnd.uniform(1, 9):.2f}",
                         rnd.randint(1, 40), rnd.choice(["1", "2", "x"])))   # 'x': a failing cast
        write_rows(str(data / f"t{f}.csv"), ["TradeId", "Sym", "Price", "Qty", "Code"], rows)
    kernel = run(spark, tmp_path / "kernel", {"Trades": str(data)}, kernels=True)
    engine = run(spark, tmp_path / "engine", {"Trades": str(data)}, kernels=False)
    assert [e["physical"]["kernel"] for e in engine.plan["elements"] if e["name"] in KEPT] == [None] * 3

    def rows(out: RunOutput, name: str) -> list:
        return sorted(tuple(sorted(r.items())) for r in out.rows(name))
    for name in KEPT:
        assert rows(kernel, name) == rows(engine, name) and rows(kernel, name)
        assert kernel.stats(name) == engine.stats(name)
    assert len(kernel.rows("Recent")) <= 3 * 7 and len(kernel.rows("Big")) <= 4

    def bad(out: RunOutput) -> list:
        return sorted(sorted((k, str(v)) for k, v in b.items()) for b in out.bad_records())
    assert bad(kernel) == bad(engine)
    assert any(b["element"] == "Big" for b in kernel.bad_records())  # the failing casts
