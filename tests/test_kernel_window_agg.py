"""The columnar run of aggregations over a window or delta stream (runtime/engine/kernels/
window_agg.py) against the engine run row by row (BucketRun.process), on generated buckets of the
source's changes: inserts, updates, deletes, upserts and safedeletes of a few keys, in several
instances and batches, with nulls, NaN, and rows sharing a sequence number (an upstream
transaction, such as a KEEP's eviction and the insert that caused it). After every batch both
leave the same state and give the same bad records and counts; in per-row mode the changes are the
engine's, change for change; in batch mode they are the window's net changes."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from buckets import bucket_table
from planned import plan_json, typed_element
from ccl.plan.physical import columnar_aggregation, group_columns
from runtime.engine.kernels.window_agg import WindowAggregation
from runtime.processor import BucketRun, received_rows
from test_engine_columnar import OBSERVED, outputs, same, window

SOURCES = {
    "window": "CREATE INPUT WINDOW S SCHEMA (id integer, k string, p float, v integer, n long) "
              "PRIMARY KEY (id);\n",
    "delta stream": "CREATE INPUT DELTA STREAM S SCHEMA (id integer, k string, p float, v integer, "
                    "n long) PRIMARY KEY (id);\n",
}
QUERIES = {
    "count sum avg max": ("SELECT S.k, count(*) c, sum(S.v) sv, avg(S.p) ap, max(S.id) mx "
                          "FROM S GROUP BY S.k"),
    "min max with retraction": ("SELECT S.k, min(S.p) lo, max(S.p) hi, min(S.v) mv, max(S.v) xv, "
                                "count(S.p) cp, sum(S.p) sp FROM S GROUP BY S.k"),
    "filters": ("SELECT S.k, sum(S.v) sv, max(S.p) mp, S.p last_p FROM S WHERE S.v > -3 "
                "GROUP FILTER S.p <> 0.1 GROUP BY S.k"),
    "engine aggregates": ("SELECT S.k, first(S.v) f, last(S.p) l, vwap(S.p, S.v) w, median(S.p) md, "
                          "stddev(S.p) sd, sum(S.n) sn, count(S.n) cn, max(S.v * 2) m2 "
                          "FROM S GROUP BY S.k"),
    "two group columns": "SELECT S.k, S.v, sum(S.p) s, count(*) c FROM S GROUP BY S.k, S.v",
    "long columns": ("SELECT S.k, max(S.n) mn, min(S.n) ln, count(S.n) cn, S.n last_n FROM S "
                     "GROUP BY S.k"),
    "long group": "SELECT S.n, count(*) c, max(S.p) mp, avg(S.v) av FROM S GROUP BY S.n",
    # 0.0 and -0.0 one group, each NaN its own
    "float group": "SELECT S.p, count(*) c, sum(S.v) sv FROM S GROUP BY S.p",
    "failing argument": ("SELECT S.k, sum(cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END)) q, "
                         "count(*) c FROM S GROUP BY S.k"),
}
# batch mode only: items the engine computes (and may fail), HAVING
BATCH_QUERIES = {
    **QUERIES,
    "having and expressions": ("SELECT upper(S.k) k, max(S.p) - min(S.p) spread, count(*) c "
                               "FROM S GROUP BY upper(S.k) HAVING count(*) > 1"),
    "failing item": ("SELECT S.k, cast(integer, CASE WHEN count(*) = 2 THEN 'x' ELSE '1' END) q "
                     "FROM S GROUP BY S.k"),
}

floats = st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, 3.0, float("nan"), float("inf"), 0.1, 1e308])
row = st.fixed_dictionaries({
    "id": st.integers(0, 5),
    "k": st.sampled_from([None, "a", "b", "B"]), "p": floats,
    "v": st.sampled_from([None, 0, 1, 2, -3, 2**31 - 1]),
    "n": st.sampled_from([None, 0, 5, 2**40, -2**62])})
# few keys, groups and values, zeros of both signs: a key inserted again, a group emptied and
# filled again, a row that comes back equal but for the sign of a zero
narrow_row = st.fixed_dictionaries({
    "id": st.integers(0, 2), "k": st.sampled_from([None, "a"]),
    "p": st.sampled_from([None, 0.0, -0.0, 0.0, -0.0, 1.5, float("nan")]),
    "v": st.sampled_from([None, 0, 1]), "n": st.sampled_from([None, 5])})


def events_of(values: st.SearchStrategy, instances: int) -> st.SearchStrategy:
    """Rows of the source's changelog: (instance, opcode, why it came bad, values, shares the
    sequence number of the one before)."""
    return st.tuples(st.integers(0, instances - 1),
                     st.sampled_from(["i", "i", "i", "u", "u", "p", "d", "d", "s", "x"]),
                     st.sampled_from([None] * 7 + ["does not parse"]),
                     values,
                     st.sampled_from([False] * 4 + [True]))


batches = st.one_of(st.lists(st.lists(events_of(row, 3), max_size=40), min_size=1, max_size=4),
                    st.lists(st.lists(events_of(narrow_row, 2), max_size=12), min_size=1, max_size=4))


def r(**values) -> dict:
    """A source row, the columns not given null."""
    return {"id": None, "k": None, "p": None, "v": None, "n": None, **values}


# Buckets on which the kernel once left another state than the engine (batch mode: its window
# kept a group's last row, where the engine's keeps the row of the group's last change, and
# ``-0.0 == 0.0`` makes a row equal to the one before no change), and neighbours.
FOUND = [
    # a duplicate insert: the group's average 0.05 -> 0.0 -> (the insert again) -0.0, no change
    [[(0, "i", None, r(id=1, k="a", p=-0.0), False), (0, "i", None, r(id=2, k="a", p=0.1), False),
      (0, "u", None, r(id=2), False), (0, "i", None, r(id=1, k="a", p=-0.0), False)]],
    # a group emptied and filled again in one transaction: its -0.0 row updated to 0.0
    [[(1, "p", None, r(id=2, p=-0.0, v=-3), False)],
     [(1, "s", None, r(id=2), False), (1, "i", None, r(id=0, p=0.0, v=-3), True)]],
    # ... in two transactions
    [[(0, "i", None, r(id=1, k="a", p=0.0), False)],
     [(0, "d", None, r(id=1), False), (0, "i", None, r(id=2, k="a", p=-0.0), False)]],
    # the last row's value 0.0 -> -0.0 -> 0.0, each equal to the one before
    [[(0, "i", None, r(id=1, p=0.0, v=0), False), (0, "i", None, r(id=2, p=-0.0, v=1), False),
      (0, "i", None, r(id=1), False)]],
    # an update to the other zero: no change, the window keeps -0.0
    [[(0, "i", None, r(id=0, k="a", p=-0.0, v=1), False)],
     [(0, "u", None, r(id=0, k="a", p=0.0, v=1), False)]],
    # a delete and an insert of the other zero: the window's row changes its zero's sign
    [[(0, "i", None, r(id=0, k="a", p=-0.0, v=1), False)],
     [(0, "d", None, r(id=0), False), (0, "i", None, r(id=0, k="a", p=0.0, v=1), False)]],
]
SCHEMA = pa.struct([("id", pa.int32()), ("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()),
                    ("n", pa.int64())])


def bucket_run(tmp_path, query: str, mode: str, source: str = "window") -> BucketRun:
    path = tmp_path / "p.ccl"
    path.write_text(SOURCES[source] + f"CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED AS {query};\n"
                    + (OBSERVED if mode == "rows" else ""))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert columnar_aggregation(*typed_element(plan, 1)) == mode
    run = BucketRun(json.dumps(plan), "W")
    assert isinstance(run.columnar, WindowAggregation)
    return run


def table(events: list, first_seq: int) -> pa.Table:
    """The bucket of ``events`` (see :func:`events_of`), numbered from ``first_seq``."""
    return bucket_table(events, first_seq, SCHEMA)


def canonical(x) -> str:
    """A state as text, dicts in key order: two states are the same when their texts are (types
    included; NaN equal to NaN, also as a dict key, where each side has its own NaN object)."""
    if isinstance(x, dict):
        return "{" + ", ".join(sorted(f"{canonical(k)}: {canonical(v)}" for k, v in x.items())) + "}"
    if isinstance(x, (list, tuple)):
        return type(x).__name__ + "[" + ", ".join(canonical(v) for v in x) + "]"
    return f"{type(x).__name__}:{x!r}"


def key_text(key: tuple) -> str:
    """A window key as text, a long as the plain int it is out of Arrow, -0.0 as 0.0 (a dict
    keeps the key it got first of two equal ones)."""
    return canonical(tuple(int(v) if isinstance(v, int) and not isinstance(v, bool)
                           else v + 0.0 if isinstance(v, float) else v for v in key))


def same_state(a: dict, b: dict) -> bool:
    return canonical(a) == canonical(b)


def order(o: tuple) -> tuple:
    return (o[1], o[0] == "stat", o[2] or 0, o[3] or 0)


def same_row(a, b) -> bool:
    """Whether window rows (or None) are the same: equal, with the same zeros (-0.0 is not 0.0)."""
    return a is b or (a is not None and b is not None and a == b and canonical(a) == canonical(b))


def has_nan(key: tuple) -> bool:
    return any(isinstance(v, float) and v != v for v in key)


def with_found(test):
    """``test`` given each bucket of :data:`FOUND` too, every run."""
    for data in FOUND:
        test = example(data=data)(test)
    return test


# rows mode reads plain items as the engine does only for ccl.plan.lowering.columnar.PLAIN_TYPES: a
# long item column keeps the query on the engine (tested below)
LONG_ITEMS = ("long columns", "long group")
ROWS_QUERIES = [name for name in QUERIES if name not in LONG_ITEMS]


@pytest.mark.parametrize("name", LONG_ITEMS)
def test_a_long_item_column_keeps_rows_mode_on_the_engine(tmp_path, name):
    path = tmp_path / "p.ccl"
    path.write_text(SOURCES["window"] + "CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED AS "
                    + QUERIES[name] + ";\n" + OBSERVED)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert columnar_aggregation(*typed_element(plan, 1)) is None


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", ROWS_QUERIES)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
@with_found
def test_per_row_mode_gives_the_engine_changes(tmp_path, source, name, data):
    """Same states and the same output rows, change for change (sequence and sub-numbers too)."""
    assert_rows_mode_is_the_engine(bucket_run(tmp_path, QUERIES[name], "rows", source), data)


def assert_rows_mode_is_the_engine(run, data: list) -> None:
    """After each batch of ``data`` through ``run``'s kernel and through the engine row by row:
    the same states, and the same output rows change for change."""
    by_rows: dict = {}
    columnar: dict = {}
    for b, events in enumerate(data):
        t = table(events, 1000 * (b + 1))
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(columnar, t, 0))
        assert same_state(columnar, by_rows)
        assert same(sorted(got, key=order), sorted(expected, key=order))


@pytest.mark.parametrize("name", list(BATCH_QUERIES))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
@with_found
def test_batch_mode_gives_the_net_changes(tmp_path, name, data):
    """Same states, bad records and counts; one change per window row that changed (a zero
    that changed its sign too), from its row before the batch to its row after, with the
    sequence number of its last engine change or later."""
    run = bucket_run(tmp_path, BATCH_QUERIES[name], "batch")
    by_rows: dict = {}
    columnar: dict = {}
    key = list(run.element.key)
    for b, events in enumerate(data):
        t = table(events, 1000 * (b + 1))
        before = {inst: window(columnar, inst) for inst in range(3)}
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(columnar, t, 0))
        assert same_state(columnar, by_rows)
        assert sorted(o for o in got if o[0] == "stat") == sorted(o for o in expected if o[0] == "stat")
        bad = sorted((o[1], o[2], o[5]) for o in expected if o[0] == "bad")
        assert sorted((o[1], o[2], o[5]) for o in got if o[0] == "bad") == bad
        for inst in range(3):
            after = window(columnar, inst)
            changes = [o for o in got if o[0] == "row" and o[1] == inst]
            if any(has_nan(k) for k in (*before[inst], *after)):
                # rows under NaN keys are told apart by object only (a NaN read back from the
                # output is another): at most one change per row
                assert len(changes) <= len(before[inst]) + len(after)
                continue
            # window keys as text (a long read back from the output is an int, -0.0 is 0.0)
            old = {key_text(k): v for k, v in before[inst].items()}
            new = {key_text(k): v for k, v in after.items()}
            keys = [key_text(tuple(o[6][c] for c in key)) for o in changes]
            assert len(set(keys)) == len(keys)
            assert set(keys) == {k for k in old.keys() | new.keys()
                                 if not same_row(old.get(k), new.get(k))}
            last = {}
            for o in expected:
                if o[0] == "row" and o[1] == inst:
                    last[key_text(tuple(o[6][c] for c in key))] = o[2]
            for o, k in zip(changes, keys):
                op = "d" if k not in new else "i" if k not in old else "u"
                assert o[4] == op
                assert same(o[6], new[k] if op != "d" else old[k])
                assert o[2] >= last[k]  # (the last row of its group)


@pytest.mark.parametrize("name, deferred", [("count sum avg max", True), ("long columns", True),
                                            ("long group", True), ("two group columns", True),
                                            ("float group", False),
                                            ("engine aggregates", False), ("failing item", False)])
def test_batch_mode_settles_once_per_batch_only_rows_that_cannot_fail(tmp_path, name, deferred):
    """Batch mode computes each touched group's row once per batch only when no output row in
    between could fail or differ: count/sum/avg/min/max cast into columns that hold them, groups
    of string, integer, long or boolean columns (not a float: 0.0 and -0.0, NaN)."""
    assert bucket_run(tmp_path, BATCH_QUERIES[name], "batch").columnar.deferred is deferred


def test_a_keep_eviction_and_its_insert_are_one_transaction(tmp_path):
    """A source row evicted and a row inserted under one sequence number (as a KEEP n ROWS window
    sends them): one update of the group, as the engine merges them; a group emptied by a delete
    is deleted, and its state forgotten."""
    run = bucket_run(tmp_path, QUERIES["count sum avg max"], "rows")
    row = {"k": "a", "p": 1.0, "v": 1, "n": 1}
    events = [(0, "i", None, {**row, "id": 1}, False), (0, "i", None, {**row, "id": 2, "v": 5}, False),
              (0, "d", None, {**row, "id": 1}, False), (0, "i", None, {**row, "id": 3}, True),
              (0, "d", None, {**row, "id": 2}, False), (0, "d", None, {**row, "id": 3}, False)]
    states: dict = {}
    got = [o for o in outputs(run, run.process_table(states, table(events, 10), 0)) if o[0] == "row"]
    assert [(o[2], o[4], o[6]["c"], o[6]["sv"], o[6]["mx"]) for o in got] == [
        (10, "i", 1, 1, 1), (11, "u", 2, 6, 2), (12, "u", 2, 6, 3), (14, "u", 1, 1, 3),
        (15, "d", 1, 1, 3)]
    assert states[0]["selects"][0]["agg"] == {"groups": {}, "inputs": {}, "out": {}}
    assert states[0]["output"]["rows"] == {}


def test_group_columns_over_a_window_are_source_key_columns(tmp_path):
    """A window source's rows spread over buckets by their group columns only when those are key
    columns of the source (a row's changes then stay in one bucket)."""
    def plan_of(source: str, query: str) -> dict:
        path = tmp_path / "g.ccl"
        path.write_text(source + f"CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED AS {query};\n")
        plan, diags = plan_json(str(path))
        assert plan is not None, [str(d) for d in diags]
        return plan
    keyed = plan_of("CREATE INPUT WINDOW S SCHEMA (k string, id integer, v integer) "
                    "PRIMARY KEY (k, id);\n", "SELECT S.k, sum(S.v) s FROM S GROUP BY S.k")
    assert columnar_aggregation(*typed_element(keyed, 1)) == "batch"
    assert group_columns(*typed_element(keyed, 1)) == ["k"]
    loose = plan_of(SOURCES["window"], "SELECT S.k, sum(S.v) s FROM S GROUP BY S.k")
    assert columnar_aggregation(*typed_element(loose, 1)) == "batch"
    assert group_columns(*typed_element(loose, 1)) is None
    stream = plan_of("CREATE INPUT STREAM S SCHEMA (k string, id integer, v integer);\n",
                     "SELECT S.k, sum(S.v) s FROM S GROUP BY S.k")
    assert group_columns(*typed_element(stream, 1)) == ["k"]


E2E = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer);
CREATE WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 3 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW SymStats PRIMARY KEY DEDUCED
    PARTITION BY Recent HASH(Sym) PARTITIONS 2
AS SELECT r.Sym Sym, count(*) Trades, sum(r.Qty) Volume, avg(r.Price) AvgPrice,
          max(r.TradeId) LastId, min(r.Price) Lo
   FROM Recent r GROUP BY r.Sym;
"""
MOVES = """CREATE OUTPUT STREAM Moves AS SELECT s.Sym Sym, s.Trades Trades, s.Lo Lo FROM SymStats s
    WHERE s.Volume > 100;
"""


def _run_e2e(spark, tmp_path, trades_dir: str, kernel: bool, text: str):
    """The project run until idle, with the window kernel or (``kernel`` False: the plan's
    ``columnar`` taken away) the engine row by row; its plan as JSON, and the outputs."""
    from ccl.plan.codec import plan_from_json, plan_to_json
    from ccl.plan.planner import plan_project
    from runtime.job import RunOptions
    from runtime.run import run_plan
    from tests.runner_e2e import RunOutput
    path = tmp_path / "p.ccl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    plan, diags = plan_project(str(path))
    assert plan is not None, [str(d) for d in diags]
    data = plan_to_json(plan)
    if not kernel:
        for e in data["elements"]:
            e["physical"]["columnar"] = e["physical"]["kernel"] = None
    options = RunOptions(inputs={"Trades": trades_dir}, base_dir=str(tmp_path),
                         run_dir=str(tmp_path / "run"), until_idle=True, buckets=2,
                         max_files_per_batch=1)
    result = run_plan(spark, plan_from_json(data), options, str(tmp_path / "out"))
    return RunOutput(str(tmp_path / "out"), result.report, data)


@pytest.mark.parametrize("mode", ["rows", "batch"])
def test_e2e_keep_rows_per_window_feeding_an_aggregate(spark, tmp_path, mode):
    """A KEEP 3 ROWS PER (Sym) window feeding a GROUP BY aggregate, whose changes a stream reads
    (per-row mode) or not (batch mode), over two micro-batches: the aggregate holds each
    symbol's last three trades (computed here by hand), and the window kernel gives what the
    engine gives (change for change in per-row mode, which the stream shows)."""
    text = E2E + (MOVES if mode == "rows" else "")
    import random

    from tests.runner_e2e import write_rows
    rnd = random.Random(5)
    rows, trade_id = [], 0
    for f in range(2):
        batch = []
        for _ in range(50):
            trade_id += 1
            batch.append((trade_id, rnd.choice(["A", "B", "C", "D", "E"]),
                          "" if rnd.random() < 0.1 else f"{rnd.randint(100, 999) / 100:.2f}",
                          rnd.randint(1, 99)))
        write_rows(str(tmp_path / "in" / f"t{f}.csv"), ["TradeId", "Sym", "Price", "Qty"], batch)
        rows += batch
    kernel = _run_e2e(spark, tmp_path / "kernel", str(tmp_path / "in"), True, text)
    stats = next(e for e in kernel.plan["elements"] if e["name"] == "SymStats")
    assert stats["physical"]["columnar"] == mode and stats["physical"]["path"] == "per-instance"
    last: dict[str, list] = {}
    for r in rows:
        last.setdefault(r[1], []).append(r)
    want = {}
    for sym, trades in last.items():
        kept = trades[-3:]
        prices = [float(t[2]) for t in kept if t[2] != ""]
        want[sym] = (len(kept), sum(t[3] for t in kept),
                     round(sum(prices) / len(prices), 6) if prices else None,
                     max(t[0] for t in kept), min(prices) if prices else None)
    got = {r["Sym"]: (int(r["Trades"]), int(r["Volume"]),
                      round(float(r["AvgPrice"]), 6) if r["AvgPrice"] else None, int(r["LastId"]),
                      float(r["Lo"]) if r["Lo"] else None) for r in kernel.rows("SymStats")}
    assert got == want
    engine = _run_e2e(spark, tmp_path / "engine", str(tmp_path / "in"), False, text)
    for name in ("SymStats", "Moves") if mode == "rows" else ("SymStats",):
        assert sorted(map(str, kernel.rows(name))) == sorted(map(str, engine.rows(name)))
        assert kernel.stats(name)["instances"] == engine.stats(name)["instances"]
        assert kernel.stats(name)["bad_records"] == engine.stats(name)["bad_records"]
    assert mode == "batch" or len(kernel.rows("Moves")) > 10


def test_an_instance_with_a_row_without_values_is_left_to_the_engine(tmp_path):
    """A row whose values are null (no struct at all) is the engine's to read: its instance's batch
    is handed back, the others run in the kernel; together they give the engine's outputs."""
    from runtime.processor import bucket_rows
    run = bucket_run(tmp_path, QUERIES["count sum avg max"], "rows")
    row = {"id": 1, "k": "a", "p": 1.0, "v": 1, "n": 1}
    events = [(0, "i", None, row, False), (1, "i", None, row, False), (1, "d", None, None, False)]
    runs, left, _ = run.columnar.run({}, bucket_rows(table(events, 10)), 0)
    assert [r.inst for r in runs] == [0] and left == [1]
    by_rows: dict = {}
    columnar: dict = {}
    expected = run.process(by_rows, received_rows(table(events, 10)), 0)
    got = outputs(run, run.process_table(columnar, table(events, 10), 0))
    assert same_state(columnar, by_rows)
    assert same(sorted(got, key=order), sorted(expected, key=order))
