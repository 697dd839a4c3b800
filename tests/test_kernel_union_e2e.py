"""The union kernel end to end on local Spark: a UNION of a partitioned derived stream and an
input stream (a UNION itself is not partitioned: CCL2401), run until idle through runtime.run.run_plan,
gives the same output rows, bad records and counts as the same plan run with the kernel taken
out."""
from __future__ import annotations

import random

from tests.runner_e2e import RunOutput, run_project, write_rows

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer, Code string);
CREATE INPUT STREAM Quotes SCHEMA (Sym string, Bid float, Code string);

CREATE STREAM Big PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT t.Sym Sym, t.Price * t.Qty Amount, t.Code Code FROM Trades t WHERE t.Qty > 20;

CREATE OUTPUT STREAM Events SCHEMA (Sym string, Amount float, Code integer) AS SELECT b.Sym Sym, b.Amount Amount, cast(integer, b.Code) Code FROM Big b
   UNION SELECT upper(q.Sym) Sym, q.Bid * 2.0 Amount, cast(integer, q.Code) Code FROM Quotes q
         WHERE q.Bid > 3.0;
"""


def run(spark, tmp_path, inputs: dict, kernels: bool) -> RunOutput:
    """The project run until idle, Events on the union kernel or (``kernels`` False) the engine."""
    out = run_project(spark, tmp_path, PROJECT, inputs, no_kernel=() if kernels else ["Events"])
    if kernels:
        assert [e["physical"]["kernel"] for e in out.plan["elements"] if e["name"] == "Events"] == \
            ["union"]
    return out


def test_a_union_of_streams_gives_the_engine_outputs(spark, tmp_path):
    rnd = random.Random(11)
    data = tmp_path / "in"
    for f in range(1):
        trades = [(100 * f + k, rnd.choice("ABCDEFG"),
                   "" if rnd.random() < 0.1 else f"{rnd.uniform(1, 9):.2f}", rnd.randint(1, 40),
                   rnd.choice(["1", "2", "x"])) for k in range(100)]   # 'x': a failing cast
        write_rows(str(data / "trades" / f"t{f}.csv"), ["TradeId", "Sym", "Price", "Qty", "Code"], trades)
        quotes = [(rnd.choice("abcdefg"), f"{rnd.uniform(1, 9):.2f}", rnd.choice(["3", "x"]))
                  for _ in range(100)]
        write_rows(str(data / "quotes" / f"q{f}.csv"), ["Sym", "Bid", "Code"], quotes)
    inputs = {"Trades": str(data / "trades"), "Quotes": str(data / "quotes")}
    kernel = run(spark, tmp_path / "kernel", inputs, kernels=True)
    engine = run(spark, tmp_path / "engine", inputs, kernels=False)

    def rows(out: RunOutput) -> list:
        return sorted(tuple(sorted(r.items())) for r in out.rows("Events"))
    assert rows(kernel) == rows(engine) and len(rows(kernel)) > 50
    assert kernel.stats("Events") == engine.stats("Events")

    def bad(out: RunOutput) -> list:
        return sorted(sorted((k, str(v)) for k, v in b.items()) for b in out.bad_records())
    assert bad(kernel) == bad(engine)
    assert any(b["element"] == "Events" for b in kernel.bad_records())  # the failing casts
