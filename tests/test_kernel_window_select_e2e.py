"""The window_select kernel end to end on local Spark: projections and filters of a KEEP n ROWS
PER window (a window and a delta stream), run until idle through runtime.run.run_plan, give the
same output files, bad records and counts as the same plan run with the kernel taken out."""
from __future__ import annotations

import dataclasses
import os
import random

from ccl.plan.codec import plan_to_json
from ccl.plan.planner import plan_project
from runtime.run import run_plan
from runtime.run_setup import RunOptions
from tests.runner_e2e import RunOutput, write_rows

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
    os.makedirs(str(tmp_path), exist_ok=True)
    path = os.path.join(str(tmp_path), "p.ccl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(PROJECT)
    plan, diags = plan_project(path)
    assert plan is not None, [str(d) for d in diags]
    assert [e.physical.kernel for e in plan.elements if e.name in PROJECTED] == ["window_select"] * 2
    if not kernels:
        plan = dataclasses.replace(plan, elements=tuple(
            dataclasses.replace(e, physical=dataclasses.replace(e.physical, kernel=None))
            if e.physical is not None and e.name in PROJECTED else e for e in plan.elements))
    out_dir = os.path.join(str(tmp_path), "out")
    options = RunOptions(inputs=dict(inputs), base_dir=str(tmp_path), run_dir=os.path.join(str(tmp_path), "run"),
                         until_idle=True, buckets=2)
    result = run_plan(spark, plan, options, out_dir)
    return RunOutput(out_dir, result.report, plan_to_json(plan))


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
