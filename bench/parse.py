"""Parse and check throughput on generated projects (CPU time of this process, on one core).

    python bench/parse.py [--statements 10000] [--elements 4000] [--repeat 3] [--only parse|check]

Part 1 (issue 2), parse only: N statements of six shapes (schemas, input windows with adapters,
derived windows with joins, aggregation and partitioning, Flex operators with SPLASH), at N and 2N
statements, with the ratio of their times (linear growth gives about 2.0). Targets: at least 20,000
lines/s at N = 10,000, and a ratio of at most 2.2.

Part 2 (issue 22), a large realistic project: rounds of 13 statements (a schema, input windows, a
reference, an adapter, GROUP BY aggregates with KEEP and HAVING, joins with the reference and
between windows of different rounds, a custom PARTITION BY block, a filter stream, a module
instance, a Flex operator with dictionaries, loops and if/else), about 31,000 lines at the default
4,000 elements, at 1x, 2x and 4x that size. Both the parse alone and a full ``ccl check`` of the
file (load, parse, configuration, analysis, partition and safety checks, diagnostics rendered) are
timed. Target: a full check at 20,000 lines/s or more, growing linearly with the size.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time

from ccl.cli.main import main as ccl_main
from ccl.syntax.parser import get_parser

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
    """Best CPU time of ``repeat`` parses (seconds); fails loudly if the text does not parse."""
    parser = get_parser()
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        project, diags = parser.parse(text, "bench.ccl")
        best = min(best, time.process_time() - start)
        if diags:
            sys.exit(f"generated project does not parse: {diags[0].header()}")
    return best


# Part 2: a large project. The header is declared once; the round is repeated with {i} numbered and
# {j} an earlier round (joins across rounds, as a real project's shared reference data has).
_PROJECT_HEADER = """/* generated: a large project of market-data pipelines */
CREATE MEMORY STORE MainStore PROPERTIES INDEXTYPE = 'TREE';

DECLARE
    integer threshold := 1000;
    float jumpFactor := 1.1;
END;

CREATE MODULE Spread IN Quotes OUT Spreads
BEGIN
    DECLARE
        PARAMETER float minSpread := 0.0;
    END;
    CREATE INPUT WINDOW Quotes
        SCHEMA (Symbol string, Bid float, Ask float)
        PRIMARY KEY (Symbol);
    CREATE OUTPUT WINDOW Spreads
        PRIMARY KEY DEDUCED
    AS SELECT Quotes.Symbol Symbol, max(Quotes.Ask - Quotes.Bid) MaxSpread
       FROM Quotes
       WHERE Quotes.Ask - Quotes.Bid >= minSpread
       GROUP BY Quotes.Symbol;
END;
"""

_PROJECT_ROUND = """
CREATE SCHEMA Trade{i}Schema (
    TradeId long, Symbol string, Price float, Volume integer,
    TradeTime timestamp, Venue string);

CREATE INPUT WINDOW Trades{i}
    SCHEMA Trade{i}Schema
    PRIMARY KEY (TradeId)
    KEEP 10 MINUTES;

CREATE INPUT WINDOW Quotes{i}
    SCHEMA (Symbol string, Bid float, Ask float)
    PRIMARY KEY (Symbol);

CREATE REFERENCE Ref{i}
    SCHEMA (Symbol string, Sector string, LotSize integer)
    PRIMARY KEY (Symbol)
    PROPERTIES service = 'hana', source = 'INSTRUMENTS{i}';

ATTACH INPUT ADAPTER Trades{i}In TYPE toolkit_file_csv_input TO Trades{i}
    PROPERTIES dir = '/data/trades', file = 'trades{i}.csv', hasHeader = true;

/* volume-weighted price per symbol */
CREATE OUTPUT WINDOW Avg{i}
    PRIMARY KEY DEDUCED
    KEEP 1 HOUR
    PARTITION BY Trades{i} HASH(Symbol) PARTITIONS 4
AS SELECT t.Symbol, avg(t.Price) AvgPrice, sum(t.Volume) TotalVolume, count(*) Trades,
          sum(t.Price * t.Volume) / sum(t.Volume) Vwap
    FROM Trades{i} t
    WHERE t.Price > 0 AND t.Venue IN ('XETR', 'XLON', 'XPAR')
    GROUP BY t.Symbol
    HAVING sum(t.Volume) > 1000;

CREATE OUTPUT WINDOW Enriched{i}
    PRIMARY KEY (TradeId)
    KEEP 10000 ROWS
AS SELECT t.TradeId, t.Symbol, r.Sector, t.Volume / r.LotSize Lots, t.Price
    FROM Trades{i} t INNER JOIN Ref{i} r ON t.Symbol = r.Symbol;

CREATE OUTPUT WINDOW Joined{i}
    PRIMARY KEY DEDUCED
    PARTITION BY Trades{i} {{
        integer h := ascii(substr(Trades{i}.Symbol, 1, 1));
        if (h > 77) {{ return h % Joined{i}_partitions; }} else {{ return (h * 7) % Joined{i}_partitions; }}
    }}
    PARTITIONS 2
AS SELECT t.TradeId, t.Symbol, t.Price * t.Volume Notional, a.Vwap,
       CASE WHEN t.Volume > 10000 THEN 'BLOCK' ELSE 'RETAIL' END Kind
    FROM Trades{i} t LEFT JOIN Avg{i} a ON t.Symbol = a.Symbol;

CREATE OUTPUT WINDOW Sector{i}
    PRIMARY KEY DEDUCED
AS SELECT e.Sector, sum(e.Lots) Lots, max(e.Price) High, min(e.Price) Low
    FROM Enriched{i} e
    GROUP BY e.Sector;

CREATE OUTPUT WINDOW Cmp{i}
    PRIMARY KEY DEDUCED
AS SELECT a.Symbol, a.Vwap, b.Vwap OtherVwap, a.Vwap - b.Vwap Gap
    FROM Avg{i} a INNER JOIN Avg{j} b ON a.Symbol = b.Symbol;

CREATE OUTPUT STREAM Blocks{i}
AS SELECT t.TradeId, t.Symbol, t.Volume FROM Trades{i} t
    WHERE t.Volume > threshold AND t.Venue <> 'OTC';

LOAD MODULE Spread AS Spread{i}
    IN Quotes = Quotes{i}
    OUT Spreads = Spreads{i}
    PARAMETERS minSpread = 0.01;

CREATE FLEX Alerts{i}
    IN Trades{i}, Quotes{i}
    OUT OUTPUT STREAM Alerts{i}Out SCHEMA (Symbol string, Msg string, Level integer)
BEGIN
    DECLARE
        dictionary(string, float) lastPrice;
        dictionary(string, float) lastBid;
        integer seen := 0;
    END;
    ON Trades{i} {{
        seen := seen + 1;
        float p := Trades{i}.Price;
        if (not isnull(lastPrice[Trades{i}.Symbol]) and p > lastPrice[Trades{i}.Symbol] * jumpFactor) {{
            output [Symbol = Trades{i}.Symbol; | Msg = 'jump ' + string(p); Level = 2;];
        }} else if (p <= 0) {{
            output [Symbol = Trades{i}.Symbol; | Msg = 'bad price'; Level = 3;];
        }}
        lastPrice[Trades{i}.Symbol] := p;
    }};
    ON Quotes{i} {{
        integer wide := 0;
        for (sym in lastBid) {{
            if (lastBid[sym] > Quotes{i}.Bid) {{ wide := wide + 1; }}
        }}
        lastBid[Quotes{i}.Symbol] := Quotes{i}.Bid;
        if (wide > 10) {{
            output [Symbol = Quotes{i}.Symbol; | Msg = 'wide'; Level = wide;];
        }}
    }};
END;
"""

_ROUND_STATEMENTS = 13


def generate_project(elements: int) -> str:
    """A large project of about ``elements`` statements (rounds of :data:`_PROJECT_ROUND`)."""
    rounds = max(1, elements // _ROUND_STATEMENTS)
    return _PROJECT_HEADER + "".join(_PROJECT_ROUND.format(i=i, j=i // 2) for i in range(rounds))


def time_check(text: str, repeat: int) -> float:
    """Best CPU time of ``repeat`` runs of ``ccl check`` on ``text`` written to a file (seconds);
    fails loudly if the check reports an error."""
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.ccl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        for _ in range(repeat):
            out, err = io.StringIO(), io.StringIO()
            start = time.process_time()
            status = ccl_main(["check", path], out=out, err=err)
            best = min(best, time.process_time() - start)
            if status != 0:
                sys.exit(f"generated project does not check:\n{err.getvalue()[:2000]}")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--statements", type=int, default=10_000, help="part 1 size (statements)")
    ap.add_argument("--elements", type=int, default=4_000, help="part 2 size at 1x (statements)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=("parse", "check"), help="run only part 1 or part 2")
    args = ap.parse_args()
    if args.only != "check":
        print("part 1: parse only")
        results = []
        for count in (args.statements, 2 * args.statements):
            text = generate(count)
            lines = text.count("\n")
            seconds = time_parse(text, args.repeat)
            results.append(seconds)
            print(f"{count:>7} statements  {lines:>8} lines  {seconds:7.3f} s  {lines / seconds:>10,.0f} lines/s")
        print(f"time ratio {2 * args.statements} / {args.statements} statements: {results[1] / results[0]:.2f}")
    if args.only != "parse":
        print("part 2: large project, parse only and full check")
        first: dict[str, float] = {}
        for factor in (1, 2, 4):
            text = generate_project(factor * args.elements)
            lines = text.count("\n")
            row = f"{factor}x {factor * args.elements:>7} elements  {lines:>8} lines"
            for what, timer in (("parse", time_parse), ("check", time_check)):
                seconds = timer(text, args.repeat)
                first.setdefault(what, seconds)
                row += (f"  {what} {seconds:6.2f} s {lines / seconds:>8,.0f} lines/s"
                        f" (x{seconds / first[what]:.2f})")
            print(row)


if __name__ == "__main__":
    main()
