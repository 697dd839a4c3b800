"""Example project texts that tests/test_rescale.py runs and bench/rescale.py times (one copy:
the bench imports this module with the repository root on its path)."""

# a KEEP 2 ROWS PER (Sym) window and a GROUP BY Sym on Spark's group-by, both HASH(Sym)
PROJECT = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE OUTPUT WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 2 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Totals PRIMARY KEY DEDUCED
    PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
AS SELECT t.Sym, sum(t.Qty) Qty, count(*) N FROM Trades t GROUP BY t.Sym;
"""

# a Flex HASH(Sym) with two dictionaries and an event cache keyed by Sym (one dictionary entry
# removed by a row of quantity 0)
FLEX_PROJECT = """
DECLARE PARAMETER integer PARTS := 2; END;
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE FLEX F IN Trades
    OUT OUTPUT WINDOW Seen SCHEMA (Sym string, N integer, Total integer, Last3 float)
    PRIMARY KEY (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS PARTS
BEGIN
    DECLARE
        dictionary(string, integer) seen;
        dictionary(string, integer) total;
        eventCache(Trades[Sym], 3 events) recent;
    END;
    ON Trades {
        if (isnull(seen[Trades.Sym])) { seen[Trades.Sym] := 0; total[Trades.Sym] := 0; }
        seen[Trades.Sym] := seen[Trades.Sym] + 1;
        total[Trades.Sym] := total[Trades.Sym] + Trades.Qty;
        if (Trades.Qty = 0) { remove(total, Trades.Sym); }
        output setOpcode([Sym = Trades.Sym; N = seen[Trades.Sym]; Total = total[Trades.Sym];
                          Last3 = avg(recent.Qty);], upsert);
    };
END;
"""
