"""The parts of timers in the project's query that need no Spark: the batch's kept time, the
deadline at the head of a state file and the tick thread (runtime/project_query.py,
runtime/arrow_state.py)."""
from __future__ import annotations

import json
import os
import time

from runtime.arrow_state import load_states, save_states, saved_deadline
from runtime.project_query import Ticker, batch_clock
from runtime.run_dir import RunDirs


def test_a_batch_keeps_its_time_for_a_replay_and_time_never_goes_back(tmp_path):
    dirs = RunDirs(str(tmp_path))
    first = batch_clock(dirs, 0)
    assert abs(first - time.time() * 1000) < 60_000
    time.sleep(0.01)
    assert batch_clock(dirs, 0) == first  # run again: the same time
    future = int(time.time() * 1000) + 3_600_000
    with open(dirs.batch_file("clock", "project", 1, "json"), "w", encoding="utf-8") as f:
        json.dump({"now": future}, f)
    assert batch_clock(dirs, 2) == future  # not before the batch before's


def test_a_state_file_of_an_element_with_timers_starts_with_its_deadline(tmp_path):
    d = str(tmp_path)
    states = {0: {"rows": [1, 2]}, 3: {"rows": []}}
    save_states(d, 1, 4, states, (1234,))
    save_states(d, 2, 4, states, (None,))
    save_states(d, 5, 4, states)  # an element without timers: the states alone
    assert load_states(d, 1, 5) == states and load_states(d, 5, 5) == states
    assert load_states(d, 1, 4) == {}  # (only files of earlier batches)
    assert saved_deadline(d, 1, 4) == (True, 1234)
    assert saved_deadline(d, 2, 4) == (True, None)
    assert saved_deadline(d, 5, 4) == (False, None)


def test_the_ticker_writes_a_tick_file_when_the_deadline_comes(tmp_path):
    ticks = str(tmp_path / "ticks")
    ticker = Ticker(ticks).start()
    try:
        ticker.arm(None)
        time.sleep(0.2)
        assert os.listdir(ticks) == []
        at = int(time.time() * 1000) + 400
        ticker.arm(at + 100_000)
        ticker.arm(at)  # replaces the one before
        def published() -> list[str]:  # the ticker writes a hidden temporary file, then renames it
            return [n for n in os.listdir(ticks) if not n.startswith((".", "_"))]
        deadline = time.monotonic() + 30
        while not published() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = time.time() * 1000
        names = published()
        assert len(names) == 1
        assert seen >= at
        with open(os.path.join(ticks, names[0]), encoding="utf-8") as f:
            assert json.load(f) == {"time": at}
        time.sleep(0.3)
        assert os.listdir(ticks) == names  # once per arming
    finally:
        ticker.stop()
    ticker.arm(int(time.time() * 1000))
    time.sleep(0.2)
    assert len(os.listdir(ticks)) == 1  # stopped: no more ticks


TIMED = """
create input stream s schema (k string, v integer);
create output window w primary key (k) keep 2 seconds partition by s hash(k) partitions 2
  as select s.k, s.v from s;
"""


def test_a_due_bucket_expires_on_a_marker_row_and_records_its_next_deadline(tmp_path):
    """A timed element's bucket runner: rows insert at the batch's time; a batch that brings the
    bucket only a marker row expires what is due in every instance, and the state file's head
    says when the next row is due."""
    import pyarrow as pa

    from planned import plan_json
    from runtime.arrow_state import BUCKET, MARK, bucket_runner

    path = tmp_path / "p.ccl"
    path.write_text(TIMED)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    plan_text, state = json.dumps(plan), str(tmp_path / "state")
    row = pa.struct([("k", pa.string()), ("v", pa.int32())])
    rows = [(0, "a", 1, 0), (1, "b", 2, 1)]
    table = pa.table({
        "__seq": pa.array([r[3] for r in rows], pa.int64()),
        "__inst": pa.array([r[0] for r in rows], pa.int32()),
        "__p0": pa.array([{"k": r[1], "v": r[2]} for r in rows], row),
        BUCKET: pa.array([0, 0], pa.int32())})

    def run(batch_id, t, now):
        key = (pa.scalar(0, pa.int32()),)
        out = bucket_runner(plan_text, "w", frozenset(), state, batch_id, now, True)(key, t)
        return [(r["__inst"], r["__op"], r["k"]) for r in out.to_pylist() if r["__kind"] == "row"]

    assert run(0, table, 1_000) == [(0, "i", "a"), (1, "i", "b")]
    assert saved_deadline(state, 0, 0) == (True, 3_000)
    marker = pa.table({BUCKET: pa.array([0], pa.int32()), "__inst": pa.array([MARK], pa.int32())})
    assert run(1, marker, 2_999) == []
    assert saved_deadline(state, 0, 1) == (True, 3_000)
    assert sorted(run(2, marker, 3_000)) == [(0, "d", "a"), (1, "d", "b")]
    assert saved_deadline(state, 0, 2) == (True, None)
    assert sorted(run(2, marker, 3_000)) == [(0, "d", "a"), (1, "d", "b")]  # run again: the same
