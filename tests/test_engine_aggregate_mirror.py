"""An aggregate over a window without the mirror of its source (runtime/engine/element.py
``_mirror_needed``, ``SourceStage.unmirror``) against the same aggregate with it: generated
batches of the window's changelog, consistent or not (inserts of present keys, updates and
deletes of missing ones, upserts, safedeletes, updates that move a row to another group or
through WHERE), run through the engine and the window-aggregation kernel taking turns on one
state, the last batch again on the state before it, and a state the mirrored engine wrote
continued without the mirror (an older run directory): the same changes and bad records, change
for change, as the mirrored engine's, and the same aggregator state but for each group's ``row``
(the row that last entered it or left it)."""
from __future__ import annotations

import copy
import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planned import plan_json
from runtime.engine import element as element_module
from runtime.processor import BucketRun, received_rows
from test_engine_columnar import OBSERVED, outputs, same
from test_kernel_window_agg import order, same_state

SOURCE = ("CREATE INPUT WINDOW T SCHEMA (id long, k string, g integer, p float, v integer, "
          "n long, b boolean) PRIMARY KEY (id);\n"
          "CREATE WINDOW R PRIMARY KEY (id) AS SELECT * FROM T;\n")
# Each runs without the mirror (checked below).
QUERIES = {
    "fast": ("SELECT R.k, count(*) c, sum(R.v) sv, avg(R.p) ap, max(R.id) mx, min(R.n) mn "
             "FROM R GROUP BY R.k"),
    "where column": ("SELECT R.k, R.g, count(*) c, sum(R.p) sp, min(R.v) lo FROM R WHERE R.b "
                     "GROUP BY R.k, R.g"),
    "where comparison": ("SELECT R.g, count(R.v) c, max(R.p) hi, avg(R.n) an FROM R "
                         "WHERE R.v > 0 and not (R.k = 'b') GROUP BY R.g"),
    "having and expressions": ("SELECT R.k, upper(R.k) uk, count(*) c, sum(R.v) + 1 sv FROM R "
                               "GROUP BY R.k HAVING count(*) > 1 and R.k <> 'c'"),
    "other aggregates": ("SELECT R.g, first(R.p) f, last(R.v) l, median(R.v) md, "
                         "count(distinct R.k) dk FROM R WHERE R.p >= 0.0 or R.p IS NULL "
                         "GROUP BY R.g"),
    "group filter": ("SELECT R.k, count(*) c, max(R.v) mx FROM R GROUP BY R.k "
                     "GROUP FILTER R.v < 5"),
}
# Each keeps the mirror: the items read a column the group does not fix (R.p, a float group
# column, the row's own v), or something before the state changes may fail (a LIKE whose
# pattern is a column: ``b\`` ends with the escape character), or a FROM-level KEEP.
MIRRORED = {
    "last value": "SELECT R.k, R.p, count(*) c FROM R GROUP BY R.k",
    "float group": "SELECT R.p, count(*) c FROM R GROUP BY R.p",
    "no group column": "SELECT R.k, R.v v, max(R.v) mx FROM R GROUP BY R.k",
    "where may fail": "SELECT R.g, count(*) c FROM R WHERE 'a' LIKE R.k GROUP BY R.g",
    "argument may fail": "SELECT R.g, max('a' LIKE R.k) m FROM R GROUP BY R.g",
    "filter may fail": "SELECT R.g, count(*) c FROM R GROUP BY R.g GROUP FILTER 'a' LIKE R.k",
    "from keep": "SELECT R.k, count(*) c FROM R KEEP 3 ROWS GROUP BY R.k",
}
R_TYPE = pa.struct([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32()),
                    ("p", pa.float64()), ("v", pa.int32()), ("n", pa.int64()),
                    ("b", pa.bool_())])

values = st.fixed_dictionaries({
    "id": st.integers(0, 6),
    "k": st.sampled_from([None, "a", "b", "c", "b\\", "%"]),
    "g": st.sampled_from([None, 0, 1, 2]),
    "p": st.sampled_from([None, 0.0, -0.0, 1.5, -2.25, float("nan"), float("inf")]),
    "v": st.sampled_from([None, 0, 1, -3, 7, 2**31 - 1]),
    "n": st.sampled_from([None, 0, 5, 2**62, -2**63]),
    "b": st.sampled_from([None, True, False])})
# (instance, opcode, values, same sequence number as the row before: one transaction)
events = st.tuples(st.integers(0, 1), st.sampled_from(["i", "i", "u", "u", "d", "p", "s"]),
                   values, st.booleans())
batches = st.lists(st.lists(events, max_size=20), min_size=1, max_size=4)
# per batch: the engine (False) or the kernel (True) runs it without the mirror
turns = st.lists(st.booleans(), min_size=4, max_size=4)


def plan_of(tmp_path, query: str) -> str:
    path = tmp_path / "p.ccl"
    path.write_text(SOURCE + f"CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED AS {query};\n"
                    + OBSERVED)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return json.dumps(plan)


def table(batch: list, first_seq: int) -> pa.Table:
    """The window's changelog ``batch`` as the aggregate's bucket (sequence numbers from
    ``first_seq``; a row flagged ``same`` shares its predecessor's)."""
    seqs, seq = [], first_seq
    for n, (_, _, _, same_seq) in enumerate(batch):
        if not (same_seq and n):
            seq += 1
        seqs.append(seq)
    n = len(batch)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()),
        "__seq": pa.array(seqs, pa.int64()),
        "__sub": pa.array(list(range(n)), pa.int64()),
        "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array([e[1] for e in batch], pa.string()),
        "__inst": pa.array([e[0] for e in batch], pa.int32()),
        "__why": pa.array([None] * n, pa.string()),
        "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array([e[2] for e in batch], R_TYPE),
        "__bucket": pa.array([0] * n, pa.int32())})


def mirrored_run(plan: str, monkeypatch) -> BucketRun:
    """The element's BucketRun with its source mirrored, whatever ``_mirror_needed`` says."""
    with monkeypatch.context() as m:
        m.setattr(element_module, "_mirror_needed", lambda *a: True)
        return BucketRun(plan, "W")


def without_rows(states: dict) -> dict:
    """The instances' aggregator states, each group's ``row`` left out."""
    out = {}
    for inst, state in states.items():
        agg = copy.deepcopy(state["selects"][0]["agg"])
        for group in agg["groups"].values():
            group.pop("row")
        out[inst] = (agg, state["output"], state["seq"])
    return out


def run_batch(run: BucketRun, states: dict, t: pa.Table, kernel: bool) -> list:
    if kernel and run.columnar is not None:
        return sorted(outputs(run, run.process_table(states, t, 0)), key=order)
    return sorted(run.process(states, received_rows(t), 0), key=order)


def assert_as_mirrored(plan: str, data: list, kernel_turns: list, monkeypatch,
                       handover: int = 0) -> None:
    """``data`` through the unmirrored element (engine or kernel by ``kernel_turns``, from batch
    ``handover`` on the mirrored element's state) and through the mirrored engine."""
    run, ref = BucketRun(plan, "W"), mirrored_run(plan, monkeypatch)
    assert not run.engine.selects[0].sources[0].mirrored
    assert ref.engine.selects[0].sources[0].mirrored
    mirrored: dict = {}
    states: dict = {}
    for b, batch in enumerate(data):
        t = table(batch, 1000 * (b + 1))
        expected = run_batch(ref, mirrored, t, False)
        if b < handover:
            states = copy.deepcopy(mirrored)
            continue
        before = copy.deepcopy(states)
        got = run_batch(run, states, t, kernel_turns[b])
        assert same(got, expected)
        assert same_state(without_rows(states), without_rows(mirrored))
    # the last batch again, on the state before it, by the other path: the same
    again = run_batch(run, before, t, not kernel_turns[len(data) - 1])
    assert same(again, got)
    assert same_state(without_rows(before), without_rows(states))


@pytest.mark.parametrize("query", list(QUERIES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches, kernel_turns=turns)
def test_an_aggregate_without_the_mirror_is_the_mirrored_one(tmp_path, monkeypatch, query, data,
                                                               kernel_turns):
    assert_as_mirrored(plan_of(tmp_path, QUERIES[query]), data, kernel_turns, monkeypatch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches, kernel_turns=turns, handover=st.integers(1, 3))
def test_a_state_written_with_the_mirror_goes_on_without_it(tmp_path, monkeypatch, data,
                                                           kernel_turns, handover):
    assert_as_mirrored(plan_of(tmp_path, QUERIES["where comparison"]), data, kernel_turns,
                       monkeypatch, handover=min(handover, len(data) - 1))


def test_the_fast_path_runs_without_the_mirror(tmp_path):
    run = BucketRun(plan_of(tmp_path, QUERIES["fast"]), "W")
    assert run.columnar is not None and run.columnar.fast
    assert run.engine.initial_state()["selects"][0]["sources"] == [None]


@pytest.mark.parametrize("query", list(MIRRORED))
def test_the_mirror_stays_where_the_aggregate_needs_it(tmp_path, query):
    run = BucketRun(plan_of(tmp_path, MIRRORED[query]), "W")
    assert run.engine.selects[0].sources[0].mirrored
