"""A Spark Python worker keeps an element's runner across tasks (runtime/processor.py
``runner_of``, called by runtime/arrow_state.py's ``bucket_runner``): tasks shipped as Spark ships
them (the ``applyInArrow`` function pickled with cloudpickle on the driver, unpickled per task)
share the worker's runner, another plan or element never does, and what the tasks give equals a
runner built afresh for each task."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle

from planned import plan_json
from runtime import arrow_state
from runtime.arrow_state import bucket_runner, load_states
from runtime import processor
from runtime.processor import BucketRun, runner_of
from runtime.state.store import create, read_layout

PROJECT = """
create input stream o schema (id integer, acct string, qty integer);
create output window w primary key (id) keep 2 rows per (acct) partition by o hash(acct) partitions 4
  as select * from o;
create output window g primary key deduced partition by o hash(acct) partitions 4
  as select o.acct, sum(o.qty) total, count(*) n from o group by o.acct having count(*) > {least};
"""
ORDER = pa.struct([("id", pa.int32()), ("acct", pa.string()), ("qty", pa.int32())])


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> list[str]:
    """Two versions of one project (their aggregate's HAVING differs), as plan JSON text."""
    texts = []
    for least in (0, 1):
        path = tmp_path_factory.mktemp("plans") / f"p{least}.ccl"
        path.write_text(PROJECT.format(least=least))
        plan, diags = plan_json(str(path))
        assert plan is not None, [str(d) for d in diags]
        texts.append(json.dumps(plan))
    return texts


def _bucket(bucket: int, rows: list[tuple], first_seq: int) -> pa.Table:
    """Processor input of ``bucket``: (instance, id, acct, qty) orders on port 0."""
    n = len(rows)
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()), "__seq": pa.array(range(first_seq, first_seq + n), pa.int64()),
        "__sub": pa.array([0] * n, pa.int64()), "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array(["i"] * n), "__inst": pa.array([r[0] for r in rows], pa.int32()),
        "__why": pa.array([None] * n, pa.string()), "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array([{"id": i, "acct": a, "qty": q} for _, i, a, q in rows], ORDER),
        "__bucket": pa.array([bucket] * n, pa.int32())})


def _task(plan_text: str, element: str, state_dir: str, batch_id: int, table: pa.Table) -> list[dict]:
    """One bucket's task as a Spark worker runs it: the batch's function pickled on the driver,
    unpickled and called in the worker (the state store of 2 buckets made first, as
    ``prepare_rows`` does on the driver)."""
    root = arrow_state.rows_root(state_dir)
    if read_layout(root) is None:
        create(root, 2)
    shipped = cloudpickle.dumps(bucket_runner(plan_text, element, frozenset(), state_dir, batch_id, 0))
    return cloudpickle.loads(shipped)(None, table).to_pylist()


def test_tasks_in_one_worker_share_the_runner_and_another_plan_or_element_gets_its_own(tmp_path, monkeypatch,
                                                                                      plans):
    built: list[tuple[str, str]] = []
    init = BucketRun.__init__

    def counted(self, plan_text, element_name, first_ports=frozenset()):
        built.append((plan_text, element_name))
        init(self, plan_text, element_name, first_ports)
    monkeypatch.setattr(BucketRun, "__init__", counted)
    monkeypatch.setattr(processor, "_RUNS", {})
    first, second = plans
    rows = [(0, 1, "a", 5), (2, 2, "b", 6)]
    for batch_id in range(3):  # three batches, two buckets each: six tasks of w
        for bucket in (0, 1):
            _task(first, "w", str(tmp_path / "s1w"), batch_id, _bucket(bucket, rows, 10 * batch_id))
    assert built == [(first, "w")]
    runner = runner_of(first, "w", frozenset())
    _task(first, "g", str(tmp_path / "s1g"), 0, _bucket(0, rows, 0))
    _task(second, "w", str(tmp_path / "s2w"), 0, _bucket(0, rows, 0))
    _task(second, "g", str(tmp_path / "s2g"), 0, _bucket(0, rows, 0))
    assert built == [(first, "w"), (first, "g"), (second, "w"), (second, "g")]
    assert runner_of(first, "w", frozenset()) is runner
    assert runner_of(second, "w", frozenset()) is not runner
    assert runner_of(first, "w", frozenset({1})) is not runner
    # a different first ports' order built a runner of its own
    assert built[-1] == (first, "w")


_rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.sampled_from("abc"), st.integers(-5, 5)),
                 min_size=1, max_size=5)
# a task: (run, element, bucket, worker, its rows, run again after it)
_tasks = st.lists(st.tuples(st.integers(0, 1), st.sampled_from("wg"), st.integers(0, 1), st.integers(0, 1),
                            _rows, st.booleans()), min_size=1, max_size=3)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_tasks, min_size=1, max_size=3), versions=st.tuples(st.integers(0, 1), st.integers(0, 1)))
def test_runners_kept_across_tasks_give_what_a_runner_per_task_gives(tmp_path_factory, monkeypatch, plans, batches,
                                                                     versions):
    """Tasks of two runs (each of one of the plan's versions, its own state) over the batches,
    each on one of two workers (each with its runners kept, as Spark's reused workers), some run
    again (a retried task): outputs and state files equal those of a runner built per task."""
    tmp = tmp_path_factory.mktemp("runners")
    workers: list[dict] = [{}, {}]
    ran: list[set] = [set(), set()]
    seq = 0
    for batch_id, tasks in enumerate(batches):
        for run, element, bucket, worker, rows, again in tasks:
            plan = plans[versions[run]]
            table = _bucket(bucket, rows, seq)
            seq += len(rows)
            kept, fresh = (str(tmp / f"{how}{run}{element}") for how in ("kept", "fresh"))
            ran[worker].add((plan, element))
            for _ in range(2 if again else 1):
                monkeypatch.setattr(processor, "_RUNS", workers[worker])
                got = _task(plan, element, kept, batch_id, table)
                monkeypatch.setattr(processor, "_RUNS", {})
                want = _task(plan, element, fresh, batch_id, table)
                assert got == want
                assert load_states(kept, bucket, batch_id + 1) == load_states(fresh, bucket, batch_id + 1)
    for kept, pairs in zip(workers, ran):  # one runner per plan and element in each worker
        assert len({id(r) for r in kept.values()}) == len(pairs)
