"""An aggregate over a stream under a time KEEP (``FROM S KEEP 3 SECONDS``) run by the window
aggregation kernel (runtime/engine/kernels/window_agg.py: its rows keyed by sequence number,
expired by the batch's time) against the engine row by row, on generated batches: each with its
own time (ticks with no rows among them), rows of every opcode into the stream (deletes and
updates are no deletes of a stream), NaN and both zeros, rows that came bad, rows sharing a
sequence number, runs of several events of one group in one batch, three instances. After every
batch and its expiry (as runtime/arrow_state.py runs a timed bucket: the rows, then every
instance's expiry at the batch's time) both leave the same state and next deadline, and the
kernel's outputs are the engine's, change for change (sequence and sub-numbers, the expiry's from
2^40, included), whether something reads the window's changes or not: under a time KEEP each
event is its own transaction and gives its own change (the compiler never takes batch mode,
which gave one change per group per batch). Through the state store too (layout format 3), the
last batch run again as after a crash."""
from __future__ import annotations

import json
import pickle
import struct
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from buckets import bucket_table
from planned import plan_json, typed
from runtime.arrow_state import (MARK, bucket_runner, load_states, rows_root, saved_deadline,
                                 uses_window_store)
from runtime.engine.kernels.window_agg import WindowAggregation
from runtime.processor import EXPIRY_SUB, BucketRun, received_rows
from runtime.state.store import FORMAT, BucketStore, _read_layout
from test_engine_columnar import OBSERVED, outputs, same
from test_kernel_window_agg import canonical

SOURCE = "CREATE INPUT STREAM S SCHEMA (k string, p float, v integer, n long);\n"
KEEP = "KEEP 3 SECONDS"
QUERIES = {
    "count sum avg max": ("SELECT S.k, count(*) c, sum(S.v) sv, avg(S.p) ap, max(S.p) mx "
                          f"FROM S {KEEP} GROUP BY S.k"),
    "min max with retraction, PER": ("SELECT S.k, min(S.p) lo, max(S.p) hi, min(S.v) mv, "
                                     "count(S.p) cp, sum(S.p) sp "
                                     f"FROM S {KEEP} PER (k) GROUP BY S.k"),
    "filters": ("SELECT S.k, sum(S.v) sv, max(S.p) mp, S.p last_p "
                f"FROM S {KEEP} WHERE S.v > -3 GROUP FILTER S.p <> 0.1 GROUP BY S.k"),
    "engine aggregates": ("SELECT S.k, first(S.v) f, last(S.p) l, median(S.p) md, "
                          f"count(S.n) cn, max(S.v * 2) m2 FROM S {KEEP} GROUP BY S.k"),
    "float group": f"SELECT S.p, count(*) c, sum(S.v) sv FROM S {KEEP} GROUP BY S.p",
    "failing argument": ("SELECT S.k, sum(cast(integer, CASE WHEN S.v = 1 THEN 'x' ELSE '2' END)) q, "
                         f"count(*) c FROM S {KEEP} GROUP BY S.k"),
}
QUERIES.update({
    # select items that are not aggregates and plain columns, HAVING: the kernel's engine steps
    "having and expressions": ("SELECT upper(S.k) k, max(S.p) - min(S.p) spread, count(*) c "
                               f"FROM S {KEEP} GROUP BY upper(S.k) HAVING count(*) > 1"),
    "failing item": ("SELECT S.k, cast(integer, CASE WHEN count(*) = 2 THEN 'x' ELSE '1' END) q "
                     f"FROM S {KEEP} GROUP BY S.k"),
})

SCHEMA = pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64())])
row = st.fixed_dictionaries({
    "k": st.sampled_from([None, "a", "b", "B"]),
    "p": st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, float("nan"), 0.1, 1e308]),
    "v": st.sampled_from([None, 0, 1, 2, -3]),
    "n": st.sampled_from([None, 0, 5, 2**40])})
event = st.tuples(st.integers(0, 2),
                  st.sampled_from(["i", "i", "i", "i", "u", "p", "d", "s", "x"]),
                  st.sampled_from([None] * 9 + ["does not parse"]),
                  row,
                  st.sampled_from([False] * 5 + [True]))  # shares the sequence number before it


@st.composite
def run_of_one_group(draw) -> list:
    """2 to 8 events of one instance and group (``k``) in a row, each its own transaction: the
    engine gives a change for each, which a fold per batch does not."""
    inst, k = draw(st.integers(0, 2)), draw(st.sampled_from([None, "a", "b"]))
    rows = draw(st.lists(row, min_size=2, max_size=8))
    return [(inst, "i", None, {**r, "k": k}, False) for r in rows]


rows_of_a_batch = st.lists(st.one_of(event.map(lambda e: [e]), run_of_one_group()),
                           max_size=12).map(lambda parts: [e for part in parts for e in part])
# batches: (milliseconds since the batch before, its rows; none: a tick)
batches = st.lists(st.tuples(st.sampled_from([0, 1, 500, 1000, 2999, 3000, 3001, 4000]),
                             rows_of_a_batch), min_size=1, max_size=6)
T0 = 1_700_000_000_000


def plan_of(tmp_path, query: str, observed: bool) -> dict:
    """The plan of window W over S defined by ``query``, its changes written by an output adapter
    (``observed``) or read by nothing: rows mode either way."""
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED AS {query};\n"
                    + (OBSERVED if observed else ""))
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    physical = plan["elements"][1]["physical"]
    assert (physical["kernel"], physical["columnar"], physical["uses_time"]) == \
        ("window_aggregation", "rows", True)
    return plan


def runs(tmp_path, query: str, observed: bool) -> tuple[BucketRun, BucketRun]:
    """The element run by its kernel, and by the engine alone."""
    text = json.dumps(plan_of(tmp_path, query, observed))
    kernel, engine = BucketRun(text, "W"), BucketRun(text, "W")
    assert isinstance(kernel.columnar, WindowAggregation) and kernel.columnar.timed
    engine.columnar = None
    return kernel, engine


def table(events: list, first_seq: int) -> pa.Table:
    return bucket_table(events, first_seq, SCHEMA)


def order(o: tuple) -> tuple:
    return (o[1], o[0] == "stat", o[3] or 0)  # (instance; a change's sub-number is its place)


def timed_batch(run: BucketRun, states: dict, events: list, first_seq: int, now: int,
                kernel: bool) -> list[tuple]:
    """A timed bucket's batch as runtime/arrow_state.py runs it: its rows (if any), then every
    instance's expiry at ``now``."""
    got: list[tuple] = []
    if events:
        t = table(events, first_seq)
        got = (outputs(run, run.process_table(states, t, now)) if kernel
               else run.process(states, received_rows(t), now))
    return got + run.expire(states, now)


def assert_same_state(a: dict, b: dict) -> None:
    assert canonical(a) == canonical(b)


def engine_changes(kernel: BucketRun, engine: BucketRun, data: list) -> None:
    """``data``'s batches through both: the same outputs (sorted only by instance: a change's
    sub-number is its place), states and next deadlines after each."""
    by_kernel: dict = {}
    by_engine: dict = {}
    now = T0
    for b, (step, events) in enumerate(data):
        now += step
        got = timed_batch(kernel, by_kernel, events, 1000 * (b + 1), now, True)
        expected = timed_batch(engine, by_engine, events, 1000 * (b + 1), now, False)
        assert same(sorted(got, key=order), sorted(expected, key=order))
        assert_same_state(by_kernel, by_engine)
        assert kernel.next_deadline(by_kernel) == engine.next_deadline(by_engine)


@pytest.mark.parametrize("observed", [True, False], ids=["observed", "unobserved"])
@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_the_kernel_gives_the_engine_changes_and_expiries(tmp_path, name, observed, data):
    """Outputs change for change, whether an output adapter reads W's changes or nothing does
    (where batch mode folded each group's changes of a batch into one)."""
    kernel, engine = runs(tmp_path, QUERIES[name], observed)
    engine_changes(kernel, engine, data)


def test_every_event_of_one_group_in_one_batch_gives_its_change(tmp_path):
    """projects/stock_prices' StockSession (first, last, min, max, count over ``KEEP 8 HOURS``,
    nothing reading it): 40 events of one symbol in one batch give 40 changes, as the engine's."""
    query = ("SELECT S.k, first(S.p) o, last(S.p) l, min(S.p) lo, max(S.p) hi, count(*) c "
             "FROM S KEEP 8 HOURS GROUP BY S.k")
    kernel, engine = runs(tmp_path, query, False)
    events = [(0, "i", None, {"k": "a", "p": float(i % 7), "v": i, "n": None}, False)
              for i in range(40)]
    got = timed_batch(kernel, {}, events, 1, T0, True)
    expected = timed_batch(engine, {}, events, 1, T0, False)
    assert len([o for o in got if o[0] == "row"]) == 40
    assert same(got, expected)


def test_expiry_is_one_transaction_numbered_from_2_40(tmp_path):
    """Rows of one group expire together as one change (the engine's merged transaction), with
    the instance's last sequence number and sub-numbers from 2^40 when the bucket has no rows;
    first in the batch, from 0, when it has."""
    kernel, _ = runs(tmp_path, QUERIES["count sum avg max"], True)
    states: dict = {}
    a = {"k": "a", "p": 1.0, "v": 1, "n": None}
    timed_batch(kernel, states, [(0, "i", None, a, False), (0, "i", None, {**a, "v": 2}, False),
                                 (1, "i", None, a, False)], 10, T0, True)
    assert kernel.next_deadline(states) == T0 + 3000
    got = timed_batch(kernel, states, [(1, "i", None, {**a, "k": "b"}, False)], 20, T0 + 3000, True)
    rows = [o for o in got if o[0] == "row"]
    assert [(o[1], o[2], o[3], o[4], o[6]["c"]) for o in rows] == [
        (1, 12, 0, "d", 1), (1, 20, 1, "i", 1), (0, 11, EXPIRY_SUB, "d", 2)]
    assert kernel.next_deadline(states) == T0 + 6000


def store_plans(tmp_path, query: str, observed: bool) -> dict[str, str]:
    """The plan text run by the kernel and by the engine, rows in the bucket's state store, and
    by the engine with its rows in the state file (the pickled layout)."""
    plan = plan_of(tmp_path, query, observed)
    assert uses_window_store(typed(plan).element("W"))
    kernel = json.dumps(plan)
    plan["elements"][1]["physical"]["kernel"] = None
    engine = json.dumps(plan)
    plan["elements"][1]["physical"]["window_store"] = False
    return {"kernel": kernel, "engine": engine, "pickled": json.dumps(plan)}


def stored(state_dir) -> list[tuple[bytes, bytes]]:
    """Every committed entry of bucket 0's state store (values, time index, undo records,
    history), a batch's list of the keys it added in key order: the kernel writes the
    aggregate's groups and the window's rows once per batch, where the engine writes them at
    every change, so it adds them in another order (which its undo does not depend on)."""
    with BucketStore.open(str(state_dir / "rows"), 0) as store:
        entries = list(store._db.items())
    out = []
    for key, value in entries:
        if len(key) == 9 and key[:1] == b"u":  # ``u BATCH``: the keys the batch added
            keys, at = [], 0
            while at < len(value):
                size = struct.unpack(">I", value[at:at + 4])[0]
                keys.append(value[at + 4:at + 4 + size])
                at += 4 + size
            value = b"|".join(sorted(keys))
        out.append((key, _decoded(value)))
    return out


def _decoded(value: bytes) -> object:
    """A stored value with its pickled part read back as text (:func:`canonical`): the kernel
    keeps a group's last row as equal dicts whose key objects may be shared otherwise (the
    pickle's memo), which changes no value."""
    at = value.find(b"\x80\x05")
    if 0 <= at <= 9:
        try:
            return value[:at], canonical(pickle.loads(value[at:]))
        except Exception:  # (not a pickle after all)
            pass
    return value


@pytest.mark.parametrize("observed", [True, False], ids=["observed", "unobserved"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # (shrinking: minutes)
@given(data=batches)
def test_over_the_state_store_and_after_a_crash(tmp_path, observed, data):
    """Batch after batch through runtime/arrow_state.py with timers (rows attached from the state
    store of the current layout, format 3, expired through its time index, a tick a marker row;
    the last batch run again as after a crash): the kernel gives the engine's outputs and leaves
    its state file (counts where the store holds the parts), next deadline and very store
    entries."""
    example = uuid.uuid4().hex
    plans = store_plans(tmp_path, QUERIES["min max with retraction, PER"], observed)
    dirs = {which: tmp_path / f"{which}{example}" for which in plans}
    now = T0
    times = []
    for step, _ in data:
        now += step
        times.append(now)
    for b, (_, events) in enumerate(data + data[-1:]):
        batch_id = min(b, len(data) - 1)  # the last batch twice: run again, as after a crash
        mark = (MARK, "i", None, None, False)
        t = table(events or [mark], 1000 * (batch_id + 1))
        got = {}
        for which, plan_text in plans.items():
            run = bucket_runner(plan_text, "W", frozenset(), str(dirs[which]), batch_id,
                                times[batch_id], True)
            got[which] = sorted(run((None,), t).to_pylist(),
                                key=lambda r: (r["__inst"], r["__kind"] == "stat", r["__sub"] or 0))
        assert same(got["kernel"], got["engine"])
        assert same(got["kernel"], got["pickled"])
        states = load_states(str(dirs["kernel"]), 0, batch_id + 1)
        assert same(states, load_states(str(dirs["engine"]), 0, batch_id + 1))
        for state in states.values():  # (format 3: the stored parts are counts in the file)
            sstate = state["selects"][0]
            assert type(sstate["agg"]["groups"]) is int
            assert type(sstate["sources"][0]["rows"]) is int
            assert type(sstate["sources"][0]["groups"]) is int
        assert saved_deadline(str(dirs["kernel"]), 0, batch_id) == \
            saved_deadline(str(dirs["engine"]), 0, batch_id) == \
            saved_deadline(str(dirs["pickled"]), 0, batch_id)
        assert stored(dirs["kernel"]) == stored(dirs["engine"])
    assert _read_layout(rows_root(str(dirs["kernel"])))[1] == FORMAT == 3


# a window with a time KEEP of its own over the stream, no aggregate: the keep kernel
# (runtime/engine/kernels/keep.py) after the engine's expiry
WINDOWS = {
    "all columns by k": "PRIMARY KEY (k) KEEP 3 SECONDS AS SELECT * FROM S",
    "computed, WHERE, PER": ("PRIMARY KEY (k, v) KEEP 3 SECONDS PER (v) AS SELECT S.k, S.v, "
                             "S.p * 2.0 q, cast(integer, S.n) ni FROM S WHERE S.v > -3"),
}


@pytest.mark.parametrize("name", list(WINDOWS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_keep_kernel_time_window_gives_the_engine_changes_and_expiries(tmp_path, name, data):
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W {WINDOWS[name]};\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    assert plan["elements"][1]["physical"]["kernel"] == "keep"
    text = json.dumps(plan)
    kernel, engine = BucketRun(text, "W"), BucketRun(text, "W")
    assert kernel.kernel is not None
    engine.kernel = None
    engine_changes(kernel, engine, data)


@pytest.mark.parametrize("text, kernel", [
    (SOURCE + "CREATE WINDOW W PRIMARY KEY DEDUCED AS SELECT S.k, count(*) c "
     "FROM S KEEP 3 SECONDS GROUP BY S.k;\n", "window_aggregation"),
    # a row-count FROM KEEP evicts as rows come: not the kernel's
    (SOURCE + "CREATE WINDOW W PRIMARY KEY DEDUCED AS SELECT S.k, count(*) c "
     "FROM S KEEP 3 ROWS GROUP BY S.k;\n", None),
    # a time FROM KEEP over a window (its updates and deletes as well as expiry): not taken
    ("CREATE INPUT WINDOW S SCHEMA (k string, p float, v integer, n long) PRIMARY KEY (k);\n"
     "CREATE WINDOW W PRIMARY KEY DEDUCED AS SELECT S.k, count(*) c "
     "FROM S KEEP 3 SECONDS GROUP BY S.k;\n", None),
    (SOURCE + "CREATE WINDOW W PRIMARY KEY (k) KEEP 2 MINUTES AS SELECT * FROM S;\n", "keep"),
])
def test_the_compiler_names_the_kernel(tmp_path, text, kernel):
    path = tmp_path / "p.ccl"
    path.write_text(text)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    physical = plan["elements"][1]["physical"]
    assert physical["kernel"] == kernel
    assert physical["group_columns"] is None
