"""AGES EVERY interval SET column [n TIMES] [FROM column] (runtime/engine/store.py): rows not
changed for an interval get their age column counted up; any change makes them young again."""
import datetime as dt

from ccl.plan.physical import uses_time
from ccl.plan.codec import plan_from_json
from planned import plan_json, typed_parts
from runtime.engine.flex import make_engine
from tests.test_engine_core import ev, ops

PROJECT = """
CREATE INPUT WINDOW Orders SCHEMA (Id integer, Sym string, Placed msdate, Age integer) PRIMARY KEY (Id)
  AGES EVERY 10 SECONDS SET Age {times};
CREATE OUTPUT WINDOW Stale PRIMARY KEY DEDUCED
  AGES EVERY 1 MINUTE SET Age FROM Placed
  AS SELECT o.Id, o.Placed, o.Age FROM Orders o;
CREATE OUTPUT WINDOW BySym PRIMARY KEY DEDUCED AGES EVERY 5 SECONDS SET Idle
  AS SELECT o.Sym, count(*) N, 0 Idle FROM Orders o GROUP BY o.Sym;
"""


def engines(tmp_path, times="3 TIMES"):
    path = tmp_path / "p.ccl"
    path.write_text(PROJECT.replace("{times}", times))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    by_name = {e["name"]: e for e in plan["elements"]}
    assert by_name["Orders"]["aging"] == {"millis": 10_000, "column": "Age", "times": 3 if times else 1,
                                          "start": None}
    assert all(uses_time(e) for e in plan_from_json(plan).elements)
    return {name: make_engine(*typed_parts(e, plan)) for name, e in by_name.items()}


def test_rows_age_once_per_period_up_to_the_limit_and_a_change_makes_them_young(tmp_path):
    orders = engines(tmp_path)["Orders"]
    state = orders.initial_state()
    out = ops(orders.process(state, [ev("i", 1, Id=1, Sym="A", Age=7), ev("i", 2, Id=2, Sym="B")], 0))
    assert [v["Age"] for _, v in out] == [0, 0]  # a new row is young, whatever it says
    assert orders.next_deadline(state) == 10_000
    assert ops(orders.expire(state, 9_999)) == []
    out = ops(orders.expire(state, 10_000))
    assert out == [("u", {"Id": 1, "Sym": "A", "Placed": None, "Age": 1}),
                   ("u", {"Id": 2, "Sym": "B", "Placed": None, "Age": 1})]
    out = ops(orders.process(state, [ev("u", 3, Id=2, Sym="B", Age=1)], 15_000))
    assert out == [("u", {"Id": 2, "Sym": "B", "Placed": None, "Age": 0})]
    assert orders.next_deadline(state) == 20_000
    # a late timer: every period that passed counts, one update per row, never past 3 TIMES
    out = ops(orders.expire(state, 45_000))
    assert out == [("u", {"Id": 1, "Sym": "A", "Placed": None, "Age": 3}),
                   ("u", {"Id": 2, "Sym": "B", "Placed": None, "Age": 3})]
    assert orders.next_deadline(state) is None and ops(orders.expire(state, 90_000)) == []
    orders.process(state, [ev("d", 4, Id=1, Sym="A")], 91_000)
    assert list(state["input"]["store"]["ages"]) == []


def test_default_is_once_from_a_start_column_and_aggregates_see_the_updates(tmp_path):
    built = engines(tmp_path, times="")
    stale, by_sym = built["Stale"], built["BySym"]
    placed = dt.datetime(1970, 1, 1, 0, 0, 30)  # 30,000 ms
    state = stale.initial_state()
    out = ops(stale.process(state, [ev("i", 1, Id=1, Placed=placed, Age=5)], 0))
    assert out == [("i", {"Id": 1, "Placed": placed, "Age": 0})]
    assert stale.next_deadline(state) == 90_000  # one minute from Placed, not from now
    assert ops(stale.expire(state, 90_000)) == [("u", {"Id": 1, "Placed": placed, "Age": 1})]
    assert stale.next_deadline(state) is None  # once: no TIMES
    # an aggregate's row that aged is still its group's row: the next order counts on
    agg = by_sym.initial_state()
    assert ops(by_sym.process(agg, [ev("i", 1, Id=1, Sym="A")], 0)) == [("i", {"Sym": "A", "N": 1, "Idle": 0})]
    assert ops(by_sym.expire(agg, 5_000)) == [("u", {"Sym": "A", "N": 1, "Idle": 1})]
    assert ops(by_sym.process(agg, [ev("i", 2, Id=2, Sym="A")], 6_000)) == [("u", {"Sym": "A", "N": 2, "Idle": 0})]


def test_keep_rows_with_slack_purges_slack_rows_at_once(tmp_path):
    path = tmp_path / "s.ccl"
    path.write_text("DECLARE PARAMETER integer depth := 3; END;\n"
                    "CREATE INPUT WINDOW W SCHEMA (k integer) PRIMARY KEY (k) KEEP depth ROWS SLACK depth - 1;\n")
    plan, diags = plan_json(str(path))
    assert plan is not None and plan["elements"][0]["keep"]["slack"] == 2, [str(d) for d in diags]
    engine = make_engine(*typed_parts(plan["elements"][0], plan))
    state = engine.initial_state()
    out = ops(engine.process(state, [ev("i", k, k=k) for k in range(1, 8)], 0))
    # up to 3 + 2 - 1 = 4 rows; the 5th and the 7th purge the 2 oldest
    assert [(op, v["k"]) for op, v in out] == [("i", 1), ("i", 2), ("i", 3), ("i", 4), ("d", 1), ("d", 2),
                                               ("i", 5), ("i", 6), ("d", 3), ("d", 4), ("i", 7)]
    path.write_text("CREATE INPUT WINDOW W SCHEMA (k integer) PRIMARY KEY (k) KEEP 3 ROWS SLACK 0;\n")
    plan, diags = plan_json(str(path))
    assert plan is None and [d.code for d in diags] == ["CCL2303"]
