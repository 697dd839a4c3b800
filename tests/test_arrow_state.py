"""runtime/arrow_state.py without Spark: a bucket's batches through bucket_runner, its state files,
a batch run again after a crash, and pruning."""
import json
import os

import pyarrow as pa
import pytest

from planned import plan_json, typed
from runtime.arrow_state import bucket_runner, load_states, prune, state_path

PROJECT = """
create input stream s schema (k string, v integer);
create output window w primary key deduced partition by s roundrobin partitions 2
  as select s.k, sum(s.v) total, count(*) n from s group by s.k having count(*) > 0;
"""
ROW = pa.struct([("k", pa.string()), ("v", pa.int32())])


def _plan(tmp_path):
    path = tmp_path / "p.ccl"
    path.write_text(PROJECT)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return json.dumps(plan)


def _table(rows, first_seq):
    """Processor input of one bucket: (instance, key, value) rows on port 0; a value None makes
    the row one that did not parse."""
    n = len(rows)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()), "__seq": pa.array(range(first_seq, first_seq + n), pa.int64()),
        "__sub": pa.array([0] * n, pa.int64()), "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array(["i"] * n), "__inst": pa.array([i for i, _, _ in rows], pa.int32()),
        "__why": pa.array([None if v is not None else "v is not an integer" for _, _, v in rows], pa.string()),
        "__raw": pa.array([None if v is not None else f"{k},x" for _, k, v in rows], pa.string()),
        "__p0": pa.array([{"k": k, "v": v} for _, k, v in rows], ROW),
        "__bucket": pa.array([0] * n, pa.int32())})


def _run(plan_text, state_dir, batch_id, table):
    out = bucket_runner(plan_text, "w", frozenset(), state_dir, batch_id, 0)((pa.scalar(0, pa.int32()),), table)
    return out.to_pylist()


def test_batches_carry_state_per_instance_and_a_rerun_batch_gives_the_same_rows(tmp_path):
    plan_text, state = _plan(tmp_path), str(tmp_path / "state")
    first = _run(plan_text, state, 0, _table([(0, "a", 1), (1, "a", 10), (0, "a", 2)], 0))
    # (nothing reads w's changes one by one: one change per group and batch, runtime/engine/columnar.py)
    assert [(r["__kind"], r["__inst"], r["__op"], r["k"], r["total"], r["n"]) for r in first] == [
        ("stat", 0, None, None, None, None), ("row", 0, "i", "a", 3, 2),
        ("stat", 1, None, None, None, None), ("row", 1, "i", "a", 10, 1)]
    batch = _table([(0, "a", 4), (1, "b", None), (1, "b", 5)], 3)
    second = _run(plan_text, state, 1, batch)
    assert [(r["__kind"], r["__inst"], r["__op"], r["k"], r["total"]) for r in second if r["__kind"] != "stat"] == [
        ("row", 0, "u", "a", 7), ("bad", 1, None, None, None), ("row", 1, "i", "b", 5)]
    bad = next(r for r in second if r["__kind"] == "bad")
    assert json.loads(bad["__info"]) == {"reason": "v is not an integer", "row": {"line": "b,x"}}
    # Spark runs batch 1 again (a crash before its commit): it starts from batch 0's state again
    assert _run(plan_text, state, 1, batch) == second
    assert load_states(state, 0, 2)[0] != load_states(state, 0, 1)[0]
    # a later batch prunes what no rerun can need: the newest file before it stays
    _run(plan_text, state, 2, _table([(1, "b", 1)], 6))
    prune(state, 2)
    assert sorted(f for f in os.listdir(state) if f.endswith(".pkl")) == [
        os.path.basename(state_path(state, 0, b)) for b in (1, 2)]
    third = _run(plan_text, state, 2, _table([(1, "b", 1)], 6))
    assert [(r["__op"], r["total"], r["n"]) for r in third if r["__kind"] == "row"] == [("u", 6, 2)]


def test_bucket_keys_spread_evenly_over_spark_shuffle_partitions(spark):
    """spark_hash_int is Spark's hash() of an int; the spread keys of 8 buckets land 4/4 on 2
    shuffle partitions, 2 each on 4 and one each on 8 (the bucket numbers 0..7 landed 5/3)."""
    from pyspark.sql import functions as F

    from runtime.arrow_state import spread_keys
    from runtime.spark_hash import spark_hash_int
    values = [0, 1, -1, 7, 12345, -2**31, 2**31 - 1]
    got = spark.createDataFrame([(v,) for v in values], "v int").select(F.hash("v")).collect()
    assert [r[0] for r in got] == [spark_hash_int(v) for v in values]
    keys = spread_keys(8)
    for n in (2, 4, 8):
        parts = [r[0] for r in spark.createDataFrame([(k,) for k in keys], "k int").select(
            F.pmod(F.hash("k"), F.lit(n))).collect()]
        assert sorted(parts) == sorted(list(range(n)) * (8 // n))


def test_a_run_directory_of_the_older_layout_is_refused(tmp_path):
    """A run directory whose plan.json is a version 1 plan with the run's layout merged in (the
    layout before the plan held its decisions) is refused, not misread."""
    import json

    import pytest

    from runtime.run_setup import RunError, layout_of
    (tmp_path / "plan.json").write_text(json.dumps(
        {"format": "ccl-plan", "version": 1, "elements": [], "buckets": 8, "arrow_state": ["w"],
         "spread_timed": True}))
    with pytest.raises(RunError, match="written by an older ccl .plan version 1.*new checkpoint"):
        layout_of(str(tmp_path))


KEEP_ALL = """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key (id) keep all partition by o hash(acct) partitions 2
  as select * from o;
"""
ORDER = pa.struct([("id", pa.int32()), ("acct", pa.string()), ("qty", pa.int32())])


def _orders(rows, first_seq):
    """Processor input of bucket 0: (instance, id, qty) orders on port 0."""
    n = len(rows)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()), "__seq": pa.array(range(first_seq, first_seq + n), pa.int64()),
        "__sub": pa.array([0] * n, pa.int64()), "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array(["i"] * n), "__inst": pa.array([i for i, _, _ in rows], pa.int32()),
        "__why": pa.array([None] * n, pa.string()), "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array([{"id": k, "acct": "a", "qty": q} for _, k, q in rows], ORDER),
        "__bucket": pa.array([0] * n, pa.int32())})


def test_window_rows_live_in_the_state_store_and_a_rerun_batch_starts_from_the_state_before_it(tmp_path):
    """A KEEP ALL window's rows are in the bucket's RocksDB store, not in the pickled state (which
    holds their count); a batch updates the rows it touches, and a batch run again after its
    commit (Spark did not record it) is rolled back to the state before it."""
    from runtime.arrow_state import rows_root
    from runtime.state import BucketStore

    path = tmp_path / "k.ccl"
    path.write_text(KEEP_ALL)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    plan_text, state = json.dumps(plan), str(tmp_path / "state")

    def run(batch_id, rows, seq):
        out = bucket_runner(plan_text, "w", frozenset(), state, batch_id, 0)((None,), _orders(rows, seq))
        return [(r["__inst"], r["__op"], r["id"], r["qty"]) for r in out.to_pylist() if r["__kind"] == "row"]

    assert run(0, [(0, 1, 10), (0, 2, 20), (1, 3, 30)], 0) == [(0, "i", 1, 10), (0, "i", 2, 20), (1, "i", 3, 30)]
    windows = {inst: s["output"]["rows"] for inst, s in load_states(state, 0, 1).items()}
    assert windows == {0: 2, 1: 1}   # counts: the rows themselves are not pickled
    second = [(0, 2, 21), (1, 4, 40), (0, 5, 50)]
    assert run(1, second, 3) == [(0, "u", 2, 21), (0, "i", 5, 50), (1, "i", 4, 40)]
    # batch 1 again: the same changes (an update of 2, not of 21; 5 is new again)
    assert run(1, second, 3) == [(0, "u", 2, 21), (0, "i", 5, 50), (1, "i", 4, 40)]
    assert run(2, [(0, 5, 51)], 6) == [(0, "u", 5, 51)]
    with BucketStore.open(rows_root(state), 0) as store:
        held = sorted((k, v["qty"]) for k, v in store.scan("w.output", ()))
    assert held == [((0, 1), 10), ((0, 2), 21), ((0, 5), 51), ((1, 3), 30), ((1, 4), 40)]
    assert {i: s["output"]["rows"] for i, s in load_states(state, 0, 3).items()} == {0: 3, 1: 2}


DIFFERENTIAL = {
    "keep rows per": """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key (id) keep 2 rows per (acct) partition by o hash(acct) partitions 2
  as select * from o;
""",
    "keep last": """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key (id) keep last partition by o hash(acct) partitions 2
  as select * from o;
""",
    "window source": """
create input stream o schema (id integer, acct string, qty integer);
create window h primary key (id) keep all as select * from o;
create output window w primary key (acct) partition by h hash(acct) partitions 2
  as select h.acct, sum(h.qty) total from h group by h.acct;
""",
    "stream group by": """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key deduced partition by o hash(acct) partitions 2
  as select o.id, sum(o.qty) total, count(*) n from o group by o.id having count(*) > 0;
""",
    "groups that move": """
create input stream o schema (id integer, acct string, qty integer);
create window h primary key (id) keep all as select * from o;
create output window w primary key deduced partition by h hash(acct) partitions 2
  as select h.qty, count(*) n, max(h.id) top, avg(h.id) mean from h group by h.qty
  having count(*) > 0;
""",
    "time keep": """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key (id) keep 2 seconds partition by o hash(acct) partitions 2
  as select * from o;
""",
    "group by over a time keep": """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key deduced partition by o hash(acct) partitions 2
  as select o.qty, sum(o.id) total, count(*) n from o keep 2 seconds group by o.qty;
""",
}


def _differential_plan(tmp_path, name: str) -> str:
    """The plan (JSON text) of ``DIFFERENTIAL[name]``, whose element ``w`` keeps its window rows
    in the state store."""
    import runtime.arrow_state as arrow_state

    path = tmp_path / "k.ccl"
    path.write_text(DIFFERENTIAL[name])
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert arrow_state.uses_window_store(typed(plan).element("w"))
    return json.dumps(plan)


@pytest.mark.parametrize("name", sorted(DIFFERENTIAL))
def test_the_state_store_gives_the_rows_of_the_pickled_state(tmp_path, name):
    """The same batches (inserts, updates of held keys, evictions, a batch run again) through the
    state store and through the pickled layout give the same output rows."""
    import runtime.arrow_state as arrow_state

    plan_text = _differential_plan(tmp_path, name)
    batches = [[(0, 1, 10), (0, 2, 20), (1, 3, 30), (0, 4, 5)],
               [(0, 2, 21), (1, 4, 40), (0, 5, 50), (0, 1, 11)],
               [(0, 6, 60), (0, 2, 22), (1, 3, 31)],
               [(0, 4, 5), (0, 6, 60), (1, 3, 31), (0, 7, 70)]]
    # over a window (h) the rows are its changes: updates of held keys, and deletes in the last batch
    ops = ([["i", "i", "i", "i"], ["u", "u", "i", "u"], ["i", "u", "u"], ["d", "d", "d", "i"]]
           if "from h" in DIFFERENTIAL[name] else None)

    def run(state, plan_text=plan_text):
        outs, seq = [], 0
        for batch_id in (0, 1, 1, 2, 3):
            table = _orders(batches[batch_id], seq)
            if ops is not None:
                table = table.set_column(table.schema.get_field_index("__op"), "__op",
                                         pa.array(ops[batch_id]))
            out = bucket_runner(plan_text, "w", frozenset(), state, batch_id, 0)((None,), table)
            outs.append(out.to_pylist())
            seq = 100 * (batch_id + 1)
        return outs

    stored = run(str(tmp_path / "store"))
    for inst, st in load_states(str(tmp_path / "store"), 0, 4).items():  # counts, not the maps
        agg = st["selects"][0]["agg"]
        assert agg is None or all(type(agg[part]) is int for part in ("groups", "inputs", "out"))
        assert type(st["output"]["rows"]) is int
    # the plan's decision flipped (the compiler's, which the runtime reads): the pickled layout
    plan = json.loads(plan_text)
    next(e for e in plan["elements"] if e["name"] == "w")["physical"]["window_store"] = False
    assert run(str(tmp_path / "pickle"), json.dumps(plan)) == stored
    assert not os.path.exists(arrow_state.rows_root(str(tmp_path / "pickle")))
    assert os.path.exists(arrow_state.rows_root(str(tmp_path / "store")))
    assert [r["__op"] for r in stored[1] if r["__kind"] == "row"]  # the batches changed something


def test_a_run_directory_whose_windows_were_in_the_state_files_is_refused(tmp_path):
    """A run directory made before the state store (its run.json does not say which elements keep
    their window rows there) is refused with the reason, not misread."""
    from ccl.plan.model import PLAN_VERSION
    from runtime.run_dir import older_layout
    from runtime.run_setup import RunError, layout_of
    (tmp_path / "plan.json").write_text(json.dumps({"format": "ccl-plan", "version": PLAN_VERSION,
                                                    "elements": []}))
    run = {"buckets": 8, "unrecorded": [], "file_source": [], "project_query": []}
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(RunError, match="kept the rows of windows in the state files.*new checkpoint"):
        layout_of(str(tmp_path))
    (tmp_path / "run.json").write_text(json.dumps({**run, "window_store": []}))
    with pytest.raises(RunError, match="kept the groups of aggregates.*in the state files.*new checkpoint"):
        layout_of(str(tmp_path))  # (window rows in the store, groups and time KEEPs pickled)
    (tmp_path / "run.json").write_text(json.dumps({**run, "window_store": [], "state_store": 2,
                                                   "numbering": "arrival"}))
    with pytest.raises(RunError, match="kept the dictionaries of Flex elements in the state files"
                                       ".*new checkpoint"):
        layout_of(str(tmp_path))  # (Flex dictionaries pickled)
    (tmp_path / "run.json").write_text(json.dumps({**run, "window_store": [], "state_store": 3,
                                                   "numbering": "arrival"}))
    with pytest.raises(RunError, match="kept the rows and indexes of joins and the buckets of Flex "
                                       "event caches in the state files.*new checkpoint"):
        layout_of(str(tmp_path))  # (joins' state pickled)
    (tmp_path / "run.json").write_text(json.dumps({**run, "window_store": [], "state_store": 4}))
    with pytest.raises(RunError, match="numbered the rows of each input by itself.*new checkpoint"):
        layout_of(str(tmp_path))
    (tmp_path / "run.json").write_text(json.dumps({**run, "window_store": [], "state_store": 4,
                                                   "numbering": "arrival"}))
    assert older_layout(str(tmp_path), {"version": PLAN_VERSION}) is None
    assert layout_of(str(tmp_path)).buckets == 8


def test_an_element_without_windows_opens_no_state_store(tmp_path):
    """A stream aggregation's state is its groups: no window rows, so no RocksDB store per task."""
    from runtime.arrow_state import rows_root
    text = """
create input stream o schema (id integer, acct string, qty integer);
create output stream w partition by o hash(acct) partitions 2
  as select o.id, o.qty * 2 q from o where o.qty > 1;
"""
    path = tmp_path / "k.ccl"
    path.write_text(text)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    state = str(tmp_path / "state")
    out = bucket_runner(json.dumps(plan), "w", frozenset(), state, 0, 0)((None,), _orders([(0, 1, 10)], 0))
    assert [r["q"] for r in out.to_pylist() if r["__kind"] == "row"] == [20]
    assert not os.path.exists(rows_root(state))


@pytest.mark.parametrize("name", sorted(DIFFERENTIAL))
def test_the_state_store_gives_the_rows_of_the_pickled_state_at_moving_times(tmp_path, monkeypatch, name):
    """As above, each batch at a later time through the timed runner (a time KEEP expires rows
    after the batch's rows): the store and the pickled layout give the same rows (the deletes of
    one expiry compared as a set: the store's time index orders rows of one time by key, the
    pickled dict by their changes) and the same deadline at the head of the state file."""
    import runtime.arrow_state as arrow_state
    from runtime.arrow_state import saved_deadline

    plan_text = _differential_plan(tmp_path, name)
    batches = [[(0, 1, 10), (0, 2, 20), (1, 3, 30), (0, 4, 5)],
               [(0, 2, 21), (1, 4, 40), (0, 5, 50), (0, 1, 11)],
               [(0, 6, 60), (0, 2, 22), (1, 3, 31)],
               [(1, 7, 70)],
               [(0, 8, 80), (0, 6, 61)]]
    times = [1_000, 2_000, 3_500, 6_000, 6_500]

    def run(state, plan_text=plan_text):
        outs, seq = [], 0
        for batch_id in (0, 1, 2, 2, 3, 4):
            table = _orders(batches[batch_id], seq)
            out = bucket_runner(plan_text, "w", frozenset(), state, batch_id,
                                times[batch_id], True)((None,), table)
            rows = [(r["__inst"], r["__op"], tuple(sorted((k, v) for k, v in r.items()
                                                          if not k.startswith("__"))))
                    for r in out.to_pylist() if r["__kind"] == "row"]
            outs.append((sorted(rows), saved_deadline(state, 0, batch_id)))
            seq = 100 * (batch_id + 1)
        return outs

    stored = run(str(tmp_path / "store"))
    monkeypatch.setattr(arrow_state, "uses_window_store", lambda element: False)
    assert run(str(tmp_path / "pickle")) == stored
    assert any(op == "d" for rows, _ in stored for _, op, _ in rows) or "time" not in name
    assert any(deadline != (True, None) for _, deadline in stored) or "time" not in name


KEEP_HOUR = """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key (id) keep 1 hour partition by o hash(acct) partitions 2
  as select * from o;
"""


def test_a_time_keep_expires_through_the_stores_time_index(tmp_path):
    """A KEEP 1 HOUR window's rows and times are in the store (the state file holds counts); an
    expiry deletes the due rows (an updated row is due an hour after its update), the deadline at
    the head of the state file is the earliest time held plus the hour, and a batch run again
    after its commit gives the same deletes."""
    from runtime.arrow_state import MARK, rows_root, saved_deadline
    from runtime.state import BucketStore

    path = tmp_path / "k.ccl"
    path.write_text(KEEP_HOUR)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    plan_text, state = json.dumps(plan), str(tmp_path / "state")
    hour = 3_600_000

    def run(batch_id, rows, now):
        table = _orders(rows, 10 * batch_id) if rows else pa.table(  # a marker row
            {"__bucket": pa.array([0], pa.int32()), "__inst": pa.array([MARK], pa.int32())})
        out = bucket_runner(plan_text, "w", frozenset(), state, batch_id, now, True)((None,), table)
        return [(r["__inst"], r["__op"], r["id"]) for r in out.to_pylist() if r["__kind"] == "row"]

    assert run(0, [(0, 1, 10), (0, 2, 20), (1, 3, 30)], 1_000) == [(0, "i", 1), (0, "i", 2), (1, "i", 3)]
    assert saved_deadline(state, 0, 0) == (True, 1_000 + hour)
    assert {i: (s["output"]["rows"], s["output"]["times"]) for i, s in load_states(state, 0, 1).items()} == {
        0: (2, 2), 1: (1, 1)}
    assert run(1, [(0, 2, 21), (1, 4, 40)], 2_000) == [(0, "u", 2), (1, "i", 4)]
    assert run(2, [(0, 5, 50)], 1_000 + hour) == [(0, "d", 1), (0, "i", 5), (1, "d", 3)]
    assert saved_deadline(state, 0, 2) == (True, 2_000 + hour)
    assert run(2, [(0, 5, 50)], 1_000 + hour) == [(0, "d", 1), (0, "i", 5), (1, "d", 3)]  # again
    assert run(3, [], 2_000 + hour) == [(0, "d", 2), (1, "d", 4)]
    assert saved_deadline(state, 0, 3) == (True, 1_000 + 2 * hour)
    with BucketStore.open(rows_root(state), 0) as store:
        assert [k for k, _ in store.scan("w.output", ())] == [(0, 5)]
        assert store.next_time("w.output.t0") == 1_000 + hour and store.next_time("w.output.t1") is None
