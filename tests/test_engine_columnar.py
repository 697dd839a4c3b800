"""The columnar run of stream aggregations (runtime/engine/columnar.py) against the engine run row
by row (BucketRun.process), on generated buckets. After every batch both leave the same state and
give the same bad records and counts. In batch mode (nothing reads the window's changes one by
one) the columnar changes are exactly the window's rows that differ from before the batch (one per
group, with the sequence number of the group's last row); in per-row mode (an output adapter reads
them) they are the engine's, row for row."""
from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from buckets import bucket_table
from planned import plan_json, typed_element
from ccl.plan.physical import columnar_aggregation
from runtime.processor import BucketRun, bucket_rows, received_rows

SOURCE = "CREATE INPUT STREAM S SCHEMA (k string, p float, v integer, n long);\n"
QUERIES = {
    "max and sum by column": "SELECT S.k, max(S.p) mp, sum(S.v) sv, count(*) c FROM S GROUP BY S.k",
    "filters and more": ("SELECT S.k, min(S.p) lo, avg(S.p) ap, avg(S.v) av, count(S.p) cp, min(S.v) mv, "
                         "max(S.v) xv, sum(S.p) sp FROM S WHERE S.v > -3 GROUP BY S.k "
                         "HAVING count(*) > 1"),
    "expressions": ("SELECT upper(S.k) k, max(S.p) - min(S.p) spread, first(S.v) f, last(S.v) l, "
                    "vwap(S.p, S.v) w, sum(S.n) sn, count(S.n) cn, max(S.v * 2) m2 FROM S "
                    "GROUP FILTER S.p > 0.0 GROUP BY upper(S.k)"),
    "two group columns": "SELECT S.k, S.v, sum(S.p) s, median(S.p) md FROM S GROUP BY S.k, S.v",
    # an integer group shown as a float: 1 and 1.0 are one key (and one group)
    "widened key": ("SELECT S.v, count(*) c FROM S GROUP BY S.v", "SCHEMA (v float, c integer) "
                    "PRIMARY KEY (v)"),
    # a cast of 'x' fails: such rows become bad records
    "failing argument": ("SELECT S.k, sum(cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END)) q, "
                         "count(*) c FROM S GROUP BY S.k"),
    # a failing output row: the instance is handed back to the engine
    "failing item": ("SELECT S.k, cast(integer, CASE WHEN count(*) > 2 THEN 'x' ELSE '1' END) q "
                     "FROM S GROUP BY S.k"),
}

# Per-row mode takes select items that are aggregates and plain columns, with no HAVING.
ROW_QUERIES = {
    "max and sum by column": QUERIES["max and sum by column"],
    "filters and more": ("SELECT S.k, min(S.p) lo, avg(S.p) ap, avg(S.v) av, count(S.p) cp, min(S.v) mv, "
                         "max(S.v) xv, sum(S.p) sp, S.p last_p FROM S WHERE S.v > -3 "
                         "GROUP FILTER S.p <> 0.1 GROUP BY S.k"),
    "others": ("SELECT S.k, first(S.v) f, last(S.p) l, vwap(S.p, S.v) w, sum(S.n) sn, count(S.n) cn, "
               "max(S.v * 2) m2, median(S.p) md FROM S GROUP BY S.k"),
    "two group columns": QUERIES["two group columns"],
    "widened key": QUERIES["widened key"],
    "failing argument": QUERIES["failing argument"],
}
OBSERVED = "ATTACH OUTPUT ADAPTER o TYPE toolkit_file_csv_output TO W PROPERTIES dir = 'out';\n"

floats = st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, 3.0, float("nan"), float("inf"), -float("inf"),
                          0.1, 0.2, 1e308])
row = st.fixed_dictionaries({
    "k": st.sampled_from([None, "a", "b", "B", "c"]), "p": floats,
    "v": st.sampled_from([None, 0, 1, 2, -3, 2**31 - 1, -2**31]),
    "n": st.sampled_from([None, 0, 5, 2**40, -2**62])})
event = st.tuples(st.integers(0, 3),                                   # instance
                  st.sampled_from(["i", "i", "i", "u", "p", "d", "s", "x"]),  # opcode
                  st.sampled_from([None, None, None, None, "does not parse"]),
                  row,
                  st.sampled_from([False] * 9 + [True]))  # shares the sequence number before it
batches = st.lists(st.lists(event, max_size=40), min_size=1, max_size=4)
SCHEMA = pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())])


def bucket_run(tmp_path, query, mode: str = "batch") -> BucketRun:
    text, key = (query, "PRIMARY KEY DEDUCED") if isinstance(query, str) else query
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W {key} AS {text};\n"
                    + (OBSERVED if mode == "rows" else ""))
    plan, diags = plan_json(str(path), native_operators=False)  # (per-instance, as BucketRun runs)
    assert plan is not None, [str(d) for d in diags]
    assert columnar_aggregation(*typed_element(plan, 1)) == mode
    run = BucketRun(json.dumps(plan), "W")
    assert run.columnar is not None
    return run


def table(events: list, first_seq: int) -> pa.Table:
    return bucket_table(events, first_seq, SCHEMA)


def same(a, b) -> bool:
    """Equality with NaN equal to NaN and -0.0 told from 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, int) and isinstance(b, int) and bool not in (type(a), type(b)):
        return a == b  # (a long is an int subclass in the engine, a plain int out of Arrow)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def outputs(run: BucketRun, got: pa.Table) -> list[tuple]:
    """process_table's output rows as BucketRun.process gives them."""
    return [(r["__kind"], r["__inst"], r["__seq"], r["__sub"], r["__op"], r["__info"],
             {} if r["__kind"] != "row" else {c: r[c] for c in run.columns}) for r in got.to_pylist()]


def window(states: dict, inst: int) -> dict:
    state = states.get(inst)
    return dict(state["output"]["rows"]) if state else {}


@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
# a group's rows -0.0 then 0.0: its sum and median go from -0.0 to 0.0, an update the engine once
# dropped as equal (so the window kept -0.0) while a batch folded at once showed 0.0
@example(data=[[(0, "i", None, {"k": None, "p": -0.0, "v": 1, "n": None}, False),
                (0, "i", None, {"k": None, "p": 0.0, "v": 1, "n": None}, False)]])
def test_columnar_run_matches_the_engine(tmp_path, name, data):
    """Same states, bad records and counts; the columnar changes are the window's net changes."""
    run = bucket_run(tmp_path, QUERIES[name])
    by_rows: dict = {}
    columnar: dict = {}
    for b, events in enumerate(data):
        t = table(events, 1000 * (b + 1))
        before = {inst: window(columnar, inst) for inst in range(4)}
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(columnar, t, 0))
        assert same(columnar, by_rows)  # the same state, groups and window rows
        assert sorted(o for o in got if o[0] == "stat") == sorted(o for o in expected if o[0] == "stat")
        bad = sorted((o[1], o[2], o[5]) for o in expected if o[0] == "bad")
        assert sorted((o[1], o[2], o[5]) for o in got if o[0] == "bad") == bad
        key = list(run.element.key)
        for inst in range(4):
            after = window(columnar, inst)
            changes = [o for o in got if o[0] == "row" and o[1] == inst]
            if same(changes, [o for o in expected if o[0] == "row" and o[1] == inst]):
                continue  # handed back to the engine (or the same either way)
            keys = [tuple(o[6][c] for c in key) for o in changes]
            assert len(set(keys)) == len(keys)  # one change per window row
            # changed as the engine tells (Python's ==: a new NaN differs, 0.0 equals -0.0)
            changed = {k for k in before[inst].keys() | after.keys() if before[inst].get(k) != after.get(k)}
            assert set(keys) == changed
            for o, k in zip(changes, keys):
                op = "d" if k not in after else "i" if k not in before[inst] else "u"
                assert o[4] == op
                assert same(o[6], after[k] if op != "d" else before[inst][k])
            last = {}  # the largest sequence number of each key's engine changes this batch
            for o in expected:
                if o[0] == "row" and o[1] == inst:
                    last[tuple(o[6][c] for c in key)] = o[2]
            for o, k in zip(changes, keys):
                assert o[2] >= last.get(k, o[2])


@pytest.mark.parametrize("name", list(ROW_QUERIES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_per_row_mode_gives_the_engine_changes(tmp_path, name, data):
    """Same states and the same output rows, change for change (sequence and sub-numbers too)."""
    run = bucket_run(tmp_path, ROW_QUERIES[name], "rows")
    by_rows: dict = {}
    columnar: dict = {}
    for b, events in enumerate(data):
        t = table(events, 1000 * (b + 1))
        expected = run.process(by_rows, received_rows(t), 0)
        got = outputs(run, run.process_table(columnar, t, 0))
        assert same(columnar, by_rows)

        def order(o):
            return (o[1], o[0] == "stat", o[2] or 0, o[3] or 0)
        assert same(sorted(got, key=order), sorted(expected, key=order))


def test_an_instance_whose_output_row_fails_is_run_by_the_engine(tmp_path):
    """The third row of a group makes its output row fail: that instance's batch is the engine's,
    row by row, bad records included; the other instance's is folded."""
    run = bucket_run(tmp_path, QUERIES["failing item"])
    events = [(0, "i", None, {"k": "a", "p": 1.0, "v": 1, "n": 1}, False)] * 4 + \
        [(1, "i", None, {"k": "a", "p": 1.0, "v": 1, "n": 1}, False)] * 2
    t = table(events, 10)
    runs, left, _ = run.columnar.run({}, bucket_rows(t), 0)
    assert [r.inst for r in runs] == [1] and left == [0]
    got = outputs(run, run.process_table({}, t, 0))
    by_rows = run.process({}, received_rows(t), 0)
    assert [o for o in got if o[1] == 0] == [o for o in by_rows if o[1] == 0]
    assert any(o[0] == "bad" and o[1] == 0 for o in got)
    assert [(o[0], o[4], o[6]["q"]) for o in got if o[1] == 1 and o[0] == "row"] == [("row", "i", 1)]


def test_per_row_mode_runs_every_instance_itself(tmp_path):
    """Rows with sequence numbers of their own: no instance is handed back; a max that stays NaN
    keeps its object, and the row after it, whose count alone moves, is one update."""
    run = bucket_run(tmp_path, "SELECT S.k, max(S.p) mp, count(*) c FROM S GROUP BY S.k", "rows")
    nan = float("nan")
    events = [(i % 2, "i", None, {"k": "a", "p": p, "v": 1, "n": 1}, False)
              for i, p in enumerate([1.0, 2.0, nan, nan, 3.0, 0.5])]
    runs, left, changes = run.columnar.run({}, bucket_rows(table(events, 10)), 0)
    assert left == [] and [r.inst for r in runs] == [0, 1]
    assert list(zip(changes.inst, changes.op, changes.values[2])) == [
        (0, "i", 1), (0, "u", 2), (0, "u", 3), (1, "i", 1), (1, "u", 2), (1, "u", 3)]
    assert [math.isnan(v) for v in changes.values[1]] == [False, True, True, False, True, True]
