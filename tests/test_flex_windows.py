"""A Flex's code reading windows (ccl/splash/windows.py): W_stream[rec], W_stream{rec},
for (r in W_stream [where ...]), for (r in W), window iterators; checked and run without Spark."""
import pickle

import pytest

from ccl.syntax.parser import parse_text
from ccl.plan.physical import uses_time
from planned import plan_json, typed_element
from ccl.syntax.printer import to_ccl
from ccl.splash import SplashError, as_type
from ccl.splash.windows import WindowIterator, WindowView
from runtime.engine.changes import Emit
from tests.test_engine_flex import build, ev, ops

HEAD = """
CREATE INPUT WINDOW Earnings SCHEMA (Symbol string, Quarter string, Value float) PRIMARY KEY (Symbol, Quarter);
CREATE INPUT STREAM Trades SCHEMA (Symbol string, Shares integer);
CREATE FLEX Checker IN Trades, Earnings
OUT OUTPUT WINDOW Flags SCHEMA (Symbol string, Negative integer, Quarters integer, Latest string,
                                Q1 float, AnyQuarter string, Seen integer) PRIMARY KEY (Symbol)
BEGIN
  DECLARE
    typeof(Earnings) kept;
  END;
  ON Trades {
"""
TAIL = """
  };
END;
"""

BODY = """
    integer negative := 0;
    integer quarters := 0;
    integer seen := 0;
    string latest;
    for (e in Earnings_stream where Symbol = Trades.Symbol) {
      quarters := quarters + 1;
      if (e.Value < 0) { negative := 1; }
    }
    typeof(Earnings) q1 := Earnings_stream[[Symbol = Trades.Symbol; Quarter = '2008Q1';|]];
    typeof(Earnings) one := Earnings_stream{[Symbol = Trades.Symbol;|]};
    Earnings_iterator := getIterator(Earnings_stream);
    typeof(Earnings) r := getNext(Earnings_iterator);
    while (not isnull(r)) {
      if (r.Symbol = Trades.Symbol and (isnull(latest) or r.Quarter > latest)) { latest := r.Quarter; }
      r := getNext(Earnings_iterator);
    }
    resetIterator(Earnings_iterator);
    if (isnull(latest) and not isnull(getNext(Earnings_iterator))) { latest := 'none'; }
    deleteIterator(Earnings_iterator);
    for (f in Flags) { if (f.Symbol = Trades.Symbol) { seen := f.Quarters; } }
    output setOpcode([Symbol = Trades.Symbol; | Negative = negative; Quarters = quarters;
                      Latest = latest; Q1 = q1.Value; AnyQuarter = one.Quarter; Seen = seen;], upsert);
"""


def quarter(op, seq, symbol, q, value):
    return ev(op, seq, 1, Symbol=symbol, Quarter=q, Value=value)


def test_lookups_loops_and_iterators_read_the_window_as_it_is(tmp_path):
    engine, _ = build(tmp_path, HEAD + BODY + TAIL, "Flags")
    state = engine.initial_state()
    engine.process(state, [quarter("i", 1, "T", "2008Q1", 5.0), quarter("i", 2, "T", "2008Q2", -1.0),
                           quarter("i", 3, "X", "2008Q1", 3.0)], 0)
    out = ops(engine.process(state, [ev("i", 4, 0, Symbol="T", Shares=1)], 0))
    assert out == [("i", {"Symbol": "T", "Negative": 1, "Quarters": 2, "Latest": "2008Q2", "Q1": 5.0,
                          "AnyQuarter": "2008Q1", "Seen": 0})]
    state = pickle.loads(pickle.dumps(state))  # views live in one handler run only
    engine.process(state, [quarter("d", 5, "T", "2008Q2", None), quarter("u", 6, "T", "2008Q1", 7.0)], 0)
    out = ops(engine.process(state, [ev("i", 7, 0, Symbol="T", Shares=1), ev("i", 8, 0, Symbol="Z", Shares=1)], 0))
    assert out == [("u", {"Symbol": "T", "Negative": 0, "Quarters": 1, "Latest": "2008Q1", "Q1": 7.0,
                          "AnyQuarter": "2008Q1", "Seen": 2}),  # Flags' own row from event 4
                   ("i", {"Symbol": "Z", "Negative": 0, "Quarters": 0, "Latest": "none", "Q1": None,
                          "AnyQuarter": None, "Seen": 0})]


def test_a_record_copied_out_stays_and_a_stored_iterator_is_closed(tmp_path):
    body = """
    if (isnull(kept.Symbol)) { kept := Earnings_stream{[Symbol = Trades.Symbol;|]}; }
    output setOpcode([Symbol = Trades.Symbol; | Latest = kept.Quarter;], upsert);
    """
    engine, _ = build(tmp_path, HEAD + body + TAIL, "Flags")
    state = engine.initial_state()
    engine.process(state, [quarter("i", 1, "T", "2008Q1", 5.0)], 0)
    out = engine.process(state, [ev("i", 2, 0, Symbol="T", Shares=1)], 0)
    assert [o.values["Latest"] for o in out if isinstance(o, Emit)] == ["2008Q1"]
    engine.process(state, [quarter("d", 3, "T", "2008Q1", 5.0)], 0)
    out = engine.process(state, [ev("i", 4, 0, Symbol="T", Shares=1)], 0)
    assert [o.values["Latest"] for o in out] == ["2008Q1"]

    view = WindowView("W", {("a",): {"k": "a", "v": 1}}, ["k"], {"k": as_type("string"), "v": as_type("integer")})
    it = WindowIterator(view)
    assert dict(it.next()) == {"k": "a", "v": 1} and it.next() is None
    with pytest.raises(SplashError, match="deleted, or made in an earlier event"):
        pickle.loads(pickle.dumps(it)).next()
    assert pickle.loads(pickle.dumps(view)).rows == {}

    bad = HEAD + """
    typeof(Earnings) r := Earnings_stream[[Symbol = Trades.Symbol;|]];
    output setOpcode([Symbol = Trades.Symbol; |], upsert);
    """ + TAIL
    engine, _ = build(tmp_path, bad, "Flags")
    out = ops(engine.process(engine.initial_state(), [ev("i", 1, 0, Symbol="T", Shares=1)], 0))
    assert out == [("bad", "Earnings_stream[...]: the record has no key field 'Quarter'")]


def test_checks_know_the_window_variables(tmp_path):
    text = HEAD + BODY + TAIL
    path = tmp_path / "p.ccl"
    path.write_text(text)
    plan, diags = plan_json(str(path))
    assert plan is not None and [d.code for d in diags] == []
    path.write_text(text.replace("where Symbol = Trades.Symbol", "where Sym = Trades.Symbol")
                    .replace("e.Value < 0", "e.Valu < 0"))
    plan, diags = plan_json(str(path))
    assert [d.code for d in diags] == ["CCL2003", "CCL2003"]
    # a window of another element is not visible: ESP's iterator names exist for inputs only
    path.write_text(text.replace("Earnings_stream{", "Other_stream{"))
    plan, diags = plan_json(str(path))
    assert [d.code for d in diags] == ["CCL2010"]


def test_where_and_find_print_back_as_they_parse():
    tree, diags = parse_text(HEAD + BODY + TAIL)
    assert diags == []
    printed = to_ccl(tree)
    assert "for (e in Earnings_stream where Symbol = Trades.Symbol)" in printed
    assert "Earnings_stream{[Symbol = Trades.Symbol; |]}" in printed
    again, _ = parse_text(printed)
    assert to_ccl(again) == printed


KEPT = """
CREATE INPUT STREAM Ticks SCHEMA (Sym string, Px float);
CREATE FLEX Recent IN Ticks KEEP {keep}
OUT OUTPUT WINDOW Last SCHEMA (Sym string, N integer, Total float, Deletes integer) PRIMARY KEY (Sym)
BEGIN
  DECLARE integer deletes := 0; END;
  ON Ticks {
    if (getOpcode(Ticks) = delete) { deletes := deletes + 1; }
    integer n := 0; float total := 0;
    for (t in Ticks_stream where Sym = Ticks.Sym) { n := n + 1; total := total + t.Px; }
    output setOpcode([Sym = Ticks.Sym; | N = n; Total = total; Deletes = deletes;], upsert);
  };
END;
"""


def test_keep_on_a_flex_input_shapes_what_it_sees_and_evictions_are_deletes(tmp_path):
    engine, plan = build(tmp_path, KEPT.replace("{keep}", "2 ROWS"), "Last")
    assert plan["elements"][1]["flex"]["input_keeps"][0]["count"] == 2
    state = engine.initial_state()
    out = ops(engine.process(state, [ev("i", s, Sym="A", Px=float(s)) for s in (1, 2, 3)], 0))
    # the third tick evicts the first: a delete run first (the window already as the KEEP left it)
    assert out == [("i", {"Sym": "A", "N": 1, "Total": 1.0, "Deletes": 0}),
                   ("u", {"Sym": "A", "N": 2, "Total": 3.0, "Deletes": 0}),
                   ("u", {"Sym": "A", "N": 2, "Total": 5.0, "Deletes": 1}),
                   ("u", {"Sym": "A", "N": 2, "Total": 5.0, "Deletes": 1})]

    assert not uses_time(typed_element(plan, 1)[0])
    engine, plan = build(tmp_path, KEPT.replace("{keep}", "10 SECONDS"), "Last")
    assert uses_time(typed_element(plan, 1)[0])  # timers: the project's query wakes it
    state = engine.initial_state()
    engine.process(state, [ev("i", 1, Sym="A", Px=1.0)], 0)
    engine.process(state, [ev("i", 2, Sym="A", Px=2.0)], 5_000)
    assert engine.next_deadline(state) == 10_000
    assert ops(engine.expire(state, 10_000)) == [("u", {"Sym": "A", "N": 1, "Total": 2.0, "Deletes": 1})]
    assert engine.next_deadline(state) == 15_000


def test_where_rows_of_a_lasting_view_are_those_of_a_plain_one():
    """A lasting view's index finds the rows a plain view's scan finds, in the same order: equal
    numbers of other types, booleans apart from 1, NaN and null matching nothing, several tests."""
    from ccl.splash.windows import window_rows
    nan = float("nan")
    values = [1, 1.0, True, 0, False, nan, None, "1", 2.5]
    rows = {(i,): {"k": i, "c": v, "d": i % 3} for i, v in enumerate(values * 3)}
    types = {"k": as_type("integer"), "c": as_type("float"), "d": as_type("integer")}
    plain = WindowView("W", rows, ["k"], types, True)
    lasting = WindowView("W", rows, ["k"], types, True).lasting()
    for v in values + [nan, 7]:
        for extra in ({}, {"d": 1}):
            equal = {"c": v, **extra}
            assert ([r["k"] for r in window_rows(lasting, equal)]
                    == [r["k"] for r in window_rows(plain, equal)]), equal
    assert [r["k"] for r in window_rows(lasting, {"c": 1})] == [0, 1, 9, 10, 18, 19]


def test_a_where_sees_the_window_rows_changed_in_the_same_batch(tmp_path):
    engine, _ = build(tmp_path, HEAD + BODY + TAIL, "Flags")
    state = engine.initial_state()
    out = ops(engine.process(state, [quarter("i", 1, "T", "2008Q1", 5.0), ev("i", 2, 0, Symbol="T", Shares=1),
                                     quarter("i", 3, "T", "2008Q2", -1.0), ev("i", 4, 0, Symbol="T", Shares=1),
                                     quarter("d", 5, "T", "2008Q2", None), ev("i", 6, 0, Symbol="T", Shares=1)], 0))
    assert [(op, row["Quarters"], row["Negative"]) for op, row in out] == [("i", 1, 0), ("u", 2, 1), ("u", 1, 0)]
