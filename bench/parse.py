"""Parse throughput: a generated project of N statements, timed on one core.

    python bench/parse.py [--statements 10000] [--repeat 3]

Prints lines per second for N and 2N statements and the ratio of their times (linear growth gives
about 2.0). Targets (issue 2): at least 20,000 lines/s at N = 10,000, and a ratio of at most 2.2.
The statements mix the shapes real projects have: schemas, input windows with adapters, derived
windows with joins, aggregation and partitioning, Flex operators with SPLASH, modules.
"""
from __future__ import annotations

import argparse
import sys
import time

from ccl.parser import get_parser

_TEMPLATES = [
    """CREATE SCHEMA Trade{i}Schema (
    TradeId long, Symbol string, Price money(4), Volume integer,
    TradeTime timestamp, Venue string);""",
    """CREATE INPUT WINDOW Trades{i}
    SCHEMA Trade{i}Schema
    PRIMARY KEY (TradeId)
    KEEP 10 MINUTES;""",
    """ATTACH INPUT ADAPTER Trades{i}In TYPE toolkit_file_csv_input TO Trades{i}
    PROPERTIES dir = '/data/trades', file = 'trades{i}.csv', hasHeader = true, delimiter = ',';""",
    """/* moving average per symbol, partitioned by symbol */
CREATE OUTPUT WINDOW Avg{i}
    PRIMARY KEY DEDUCED
    KEEP 1 HOUR
    PARTITION BY Trades{i} HASH(Symbol) PARTITIONS 4
AS SELECT t.Symbol, avg(t.Price) AvgPrice, sum(t.Volume) TotalVolume, count(*) Trades
    FROM Trades{i} t
    WHERE t.Price > 0 AND t.Venue IN ('XETR', 'XLON', 'XPAR')
    GROUP BY t.Symbol
    HAVING sum(t.Volume) > 1000;""",
    """CREATE OUTPUT WINDOW Joined{i}
    PRIMARY KEY DEDUCED
    PARTITION BY Trades{i} {{
        integer h := ascii(substr(Trades{i}.Symbol, 1, 1));
        if (h > 77) {{ return h % Joined{i}_partitions; }} else {{ return (h * 7) % Joined{i}_partitions; }}
    }}
    PARTITIONS 2
AS SELECT t.TradeId, t.Symbol, t.Price * t.Volume Notional,
       CASE WHEN t.Volume > 10000 THEN 'BLOCK' ELSE 'RETAIL' END Kind
    FROM Trades{i} t LEFT JOIN Avg{i} a ON t.Symbol = a.Symbol;""",
    """CREATE FLEX Alerts{i}
    IN Trades{i}
    OUT OUTPUT STREAM Alerts{i}Out SCHEMA (Symbol string, Msg string)
BEGIN
    DECLARE
        dictionary(string, money(4)) lastPrice;
        integer seen := 0;
    END;
    ON Trades{i} {{
        seen := seen + 1;
        if (not isnull(lastPrice[Trades{i}.Symbol]) and Trades{i}.Price > lastPrice[Trades{i}.Symbol] * 1.1) {{
            output [Symbol = Trades{i}.Symbol; | Msg = 'jump ' + string(Trades{i}.Price);];
        }}
        lastPrice[Trades{i}.Symbol] := Trades{i}.Price;
    }};
END;""",
]


def generate(statements: int) -> str:
    """CCL text with ``statements`` statements (templates cycled, names numbered)."""
    parts = []
    per_round = len(_TEMPLATES)
    for k in range(statements):
        parts.append(_TEMPLATES[k % per_round].format(i=k // per_round))
    return "\n\n".join(parts) + "\n"


def time_parse(text: str, repeat: int) -> float:
    """Best wall time of ``repeat`` parses (seconds); fails loudly if the text does not parse."""
    parser = get_parser()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        project, diags = parser.parse(text, "bench.ccl")
        best = min(best, time.perf_counter() - start)
        if diags:
            sys.exit(f"generated project does not parse: {diags[0].header()}")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--statements", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    results = []
    for count in (args.statements, 2 * args.statements):
        text = generate(count)
        lines = text.count("\n")
        seconds = time_parse(text, args.repeat)
        results.append(seconds)
        print(f"{count:>7} statements  {lines:>8} lines  {seconds:7.3f} s  {lines / seconds:>10,.0f} lines/s")
    print(f"time ratio {2 * args.statements} / {args.statements} statements: {results[1] / results[0]:.2f}")


if __name__ == "__main__":
    main()
