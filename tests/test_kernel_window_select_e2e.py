"""The window_select kernel end to end on local Spark: projections and filters of a KEEP n ROWS
PER window (a window and a delta stream), run until idle through runtime.run.run_plan, give the
same output files, bad records and counts as the same plan run with the kernel taken out."""
from __future__ import annotations

import random

from tests.runner_e2e import RunOutput, run_project, write_rows

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer, Code string);

CREATE WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 3 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT * FROM Trades;

CREATE OUTPUT WINDOW Notional PRIMARY KEY DEDUCED PARTITION BY Recent HASH(Sym) PARTITIONS 2
AS SELECT r.Sym Sym, r.TradeId TradeId, r.Price * r.Qty Notional, cast(integer, r.Code) Code
   FROM Recent r WHERE r.Qty > 10;

CREATE OUTPUT DELTA STREAM Moves SCHEMA (Sym string, TradeId long, Price float)
    PRIMARY KEY (Sym, TradeId)
AS SELECT r.Sym Sym, r.TradeId TradeId, r.Price Price FROM Recent r WHERE r.Price > 5.0;
"""
PROJECTED = ["Notional", "Moves"]


def run(spark, tmp_path, inputs: dict, kernels: bool) -> RunOutput:
    """The project run until idle, its PROJECTED elements on their kernel or (``kernels`` False) on
    the engine."""
    out = run_project(spark, tmp_path, PROJECT, inputs, no_kernel=() if kernels else PROJECTED)
    if kernels:
        assert [e["physical"]["kernel"] for e in out.plan["elements"] if e["name"] in PROJECTED] == \
            ["window_select"] * 2
    return out


def test_projections_of_a_window_give_the_engine_outputs(spark, tmp_path):
    rnd = random.Random(5)
    data = tmp_path / "in"
    trade_id = 0
    for f in range(3):  # read in one batch of the project's query: Recent fills, then evicts
        rows = []
        for _ in range(50):
            trade_id += 1
            rows.append((trade_id if rnd.random() > 0.05 else rnd.randint(1, trade_id),  # ids again
                         rnd.choice("ABCDEFG"), "" if rnd.random() < 0.1 else f"{rnd.uniform(1, 9):.2f}",
                         rnd.randint(1, 40), rnd.choice(["1", "2", "x"])))   # 'x': a failing cast
        write_rows(str(data / f"t{f}.csv"), ["TradeId", "Sym", "Price", "Qty", "Code"], rows)
    kernel = run(spark, tmp_path / "kernel", {"Trades": str(data)}, kernels=True)
    engine = run(spark, tmp_path / "engine", {"Trades": str(data)}, kernels=False)

    def rows(out: RunOutput, name: str) -> list:
        return sorted(tuple(sorted(r.items())) for r in out.rows(name))
    for name in PROJECTED:
        assert rows(kernel, name) == rows(engine, name) and rows(kernel, name)
        assert kernel.stats(name) == engine.stats(name)

    def bad(out: RunOutput) -> list:
        return sorted(sorted((k, str(v)) for k, v in b.items()) for b in out.bad_records())
    assert bad(kernel) == bad(engine)
    assert any(b["element"] == "Notional" for b in kernel.bad_records())  # the failing casts
