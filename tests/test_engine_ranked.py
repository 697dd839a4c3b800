"""GROUP ORDER BY and rank() in GROUP FILTER (runtime/engine/ranked.py), against a brute-force
model that sorts, ranks, filters and aggregates every group from scratch after each event."""
from __future__ import annotations

import random

import pytest

from planned import plan_json, typed_parts
from runtime.engine.changes import Emit, Event
from runtime.engine.flex import make_engine

SOURCE = "CREATE INPUT WINDOW Q SCHEMA (Id integer, Sym string, Bid float, Qty integer) PRIMARY KEY (Id);\n"


def engine_of(tmp_path, query: str, source: str = SOURCE):
    path = tmp_path / "p.ccl"
    path.write_text(source + "CREATE OUTPUT WINDOW B PRIMARY KEY DEDUCED AS " + query + ";\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    element = next(e for e in plan["elements"] if e["name"] == "B")
    return make_engine(*typed_parts(element, plan), 0)


def apply_emits(window: dict, outputs: list) -> None:
    for o in outputs:
        assert isinstance(o, Emit), o
        if o.op == "d":
            del window[o.values["Sym"]]
        else:
            assert (o.op == "i") == (o.values["Sym"] not in window)
            window[o.values["Sym"]] = dict(o.values)


def _desc(value):
    """Sort key of a DESC column: largest first, nulls last."""
    return (value is None, -(value or 0))


def _asc(value):
    return (value is not None, value or 0)


MODELS = {
    # query, (sort key of a row, which ranked rows pass)
    "top2 by bid": ("SELECT Q.Sym, max(Q.Bid) Best, sum(Q.Qty) Qty, count(*) N, first(Q.Id) F, "
                    "last(Q.Id) L, nth(1, Q.Id) S FROM Q GROUP FILTER rank() <= 2 GROUP BY Q.Sym "
                    "GROUP ORDER BY Q.Bid DESC, Q.Qty",
                    lambda r: (_desc(r["Bid"]), _asc(r["Qty"]), r["since"]),
                    lambda rank, r: rank <= 2),
    "after the first, big ones": ("SELECT Q.Sym, max(Q.Bid) Best, sum(Q.Qty) Qty, count(*) N, "
                                  "first(Q.Id) F, last(Q.Id) L, nth(1, Q.Id) S FROM Q "
                                  "GROUP FILTER rank() >= 2 AND Q.Qty > 3 GROUP BY Q.Sym "
                                  "GROUP ORDER BY Q.Qty",
                                  lambda r: (_asc(r["Qty"]), r["since"]),
                                  lambda rank, r: rank >= 2 and r["Qty"] is not None and r["Qty"] > 3),
    # no group order: the engine's plain aggregation, rows in order of arrival in their group
    "arrival": ("SELECT Q.Sym, max(Q.Bid) Best, sum(Q.Qty) Qty, count(*) N, first(Q.Id) F, "
                "last(Q.Id) L, nth(1, Q.Id) S FROM Q GROUP BY Q.Sym",
                lambda r: r["since"], lambda rank, r: True),
}


def model_window(rows: dict, sort_key, passes) -> dict:
    groups: dict = {}
    for r in rows.values():
        groups.setdefault(r["Sym"], []).append(r)
    out = {}
    for sym, members in groups.items():
        kept = [r for rank, r in enumerate(sorted(members, key=sort_key), 1) if passes(rank, r)]
        if not kept:
            continue
        bids = [r["Bid"] for r in kept if r["Bid"] is not None]
        qtys = [r["Qty"] for r in kept if r["Qty"] is not None]
        out[sym] = {"Sym": sym, "Best": max(bids) if bids else None, "Qty": sum(qtys) if qtys else None,
                    "N": len(kept), "F": kept[0]["Id"], "L": kept[-1]["Id"],
                    "S": kept[1]["Id"] if len(kept) > 1 else None}
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("seed", range(4))
def test_random_changes_match_the_model(tmp_path, name, seed):
    query, sort_key, passes = MODELS[name]
    engine = engine_of(tmp_path, query)
    state = engine.initial_state()
    rnd = random.Random(seed)
    rows: dict = {}  # Id -> row with "since" (arrival in its group)
    window: dict = {}
    for seq in range(1, 400):
        values = {"Sym": rnd.choice("ABC"), "Bid": rnd.choice([None, *range(8)]) and float(rnd.randrange(8)),
                  "Qty": rnd.choice([None, *range(6)])}
        if rows and rnd.random() < 0.25:
            ident = rnd.choice(sorted(rows))
            event = Event(0, "d", seq, {"Id": ident, **{k: rows[ident][k] for k in values}})
            del rows[ident]
        elif rows and rnd.random() < 0.4:
            ident = rnd.choice(sorted(rows))
            same_group = values["Sym"] == rows[ident]["Sym"]
            rows[ident] = {"Id": ident, **values, "since": rows[ident]["since"] if same_group else seq}
            event = Event(0, "u", seq, {"Id": ident, **values})
        else:
            ident = seq
            rows[ident] = {"Id": ident, **values, "since": seq}
            event = Event(0, "i", seq, {"Id": ident, **values})
        apply_emits(window, engine.process(state, [event], 0))
        assert window == model_window(rows, sort_key, passes), f"after event {seq}: {event}"


def test_top_n_of_a_stream_and_a_failing_order_leaves_no_trace(tmp_path):
    source = "CREATE INPUT STREAM T SCHEMA (Sym string, Px float, Code string);\n"
    engine = engine_of(tmp_path, "SELECT T.Sym, sum(T.Px) Top2, count(*) N FROM T GROUP FILTER rank() <= 2 "
                                 "GROUP BY T.Sym GROUP ORDER BY to_integer(T.Code) DESC", source)
    state = engine.initial_state()
    out = engine.process(state, [Event(0, "i", 1, {"Sym": "A", "Px": 10.0, "Code": "1"}),
                                 Event(0, "i", 2, {"Sym": "A", "Px": 30.0, "Code": "3"}),
                                 Event(0, "i", 3, {"Sym": "A", "Px": 5.0, "Code": "x"}),  # not a number
                                 Event(0, "i", 4, {"Sym": "A", "Px": 20.0, "Code": "2"})], 0)
    assert [type(o).__name__ for o in out] == ["Emit", "Emit", "Bad", "Emit"]
    assert out[-1].values == {"Sym": "A", "Top2": 50.0, "N": 2}  # 30 and 20; the bad row never ranked
    # a stream only inserts: under rank() <= 2 the group keeps its best 2 rows, not all 3
    assert [len(g["rows"]) for g in state["selects"][0]["agg"]["groups"].values()] == [2]


@pytest.mark.parametrize("group_filter, passes, most_kept", [
    ("RANK() < 4", lambda rank, r: rank < 4, 3),   # ranks count from 1: the best 3
    ("3 >= rank()", lambda rank, r: rank <= 3, 3),
    ("rank() <= 3 OR T.Qty = 0", lambda rank, r: rank <= 3 or r["Qty"] == 0, None),
])
def test_stream_top_n_keeps_only_the_rows_that_can_rank(tmp_path, group_filter, passes, most_kept):
    source = "CREATE INPUT STREAM T SCHEMA (Id integer, Sym string, Bid float, Qty integer);\n"
    engine = engine_of(tmp_path, "SELECT T.Sym, max(T.Bid) Best, sum(T.Qty) Qty, count(*) N, first(T.Id) F, "
                                 f"last(T.Id) L, nth(1, T.Id) S FROM T GROUP FILTER {group_filter} GROUP BY T.Sym "
                                 "GROUP ORDER BY T.Bid DESC", source)
    state = engine.initial_state()
    rnd = random.Random(5)
    rows: dict = {}
    window: dict = {}
    for seq in range(1, 300):
        values = {"Id": seq, "Sym": rnd.choice("AB"), "Bid": float(rnd.randrange(50)), "Qty": rnd.randrange(4)}
        rows[seq] = {**values, "since": seq}
        apply_emits(window, engine.process(state, [Event(0, "i", seq, values)], 0))
        assert window == model_window(rows, lambda r: (_desc(r["Bid"]), r["since"]), passes)
    agg = state["selects"][0]["agg"]
    kept = sorted(len(g["rows"]) for g in agg["groups"].values())
    assert kept == [most_kept] * 2 if most_kept else sum(kept) == len(rows)
    assert agg["inputs"] == {}


def test_rank_without_order_is_arrival_and_is_checked_only_in_group_filter(tmp_path):
    query = "SELECT Q.Sym, last(Q.Id) L, count(*) N FROM Q GROUP FILTER rank() = 1 GROUP BY Q.Sym"
    engine = engine_of(tmp_path, query)  # no diagnostic at all (before: CCL2010, every row bad)
    state = engine.initial_state()
    out = engine.process(state, [Event(0, "i", 1, {"Id": 7, "Sym": "A"}), Event(0, "i", 2, {"Id": 3, "Sym": "A"}),
                                 Event(0, "d", 3, {"Id": 7, "Sym": "A"})], 0)
    assert [(o.op, o.values) for o in out] == [("i", {"Sym": "A", "L": 7, "N": 1}),
                                               ("u", {"Sym": "A", "L": 3, "N": 1})]
    path = tmp_path / "bad.ccl"
    path.write_text(SOURCE + "CREATE OUTPUT WINDOW B PRIMARY KEY DEDUCED AS "
                    + query.replace("GROUP FILTER rank() = 1", "WHERE rank() = 1") + ";\n")
    plan, diags = plan_json(str(path))
    assert plan is None and [d.code for d in diags] == ["CCL2212"]


def test_a_group_state_without_rows_is_refused_not_misread(tmp_path):
    engine = engine_of(tmp_path, MODELS["top2 by bid"][0])
    state = engine.initial_state()
    agg = state["selects"][0]["agg"]
    del agg["ranked"]  # as an earlier version kept it: running values, no rows
    agg["groups"][("A",)] = {"n": 1, "acc": [], "rows": {}, "row": None, "emitted": None}
    out = engine.process(state, [Event(0, "i", 1, {"Id": 1, "Sym": "A", "Bid": 1.0, "Qty": 1})], 0)
    assert [o.reason for o in out] == ["the group state comes from a checkpoint of a version without "
                                       "GROUP ORDER BY / rank(): start this element from a new checkpoint"]
