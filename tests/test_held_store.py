"""A bucket's state store kept open between small batches (``BucketStore.held``, the driver's
``run_buckets``) against the store opened and closed every batch (the reference path): on
generated batches of a KEEP window run by its kernel over the state store, with the last batch
run again (as Spark does after a crash), a batch that fails half-way and is run again, a state
directory removed and made again, and the process killed (SIGKILL) with its stores open, the
outputs, state files and every committed store entry are the reference's."""
from __future__ import annotations

import math
import os
import pickle
import shutil
import signal
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import arrow_state
from runtime.arrow_state import bucket_runner, load_states
from runtime.state import BucketStore
from runtime.state import store as store_module
from runtime.state.store import release_held
from test_kernel_keep import WINDOWS, event, same, store_plans, table

HERE = os.path.dirname(os.path.abspath(__file__))


def _rows(out):
    return sorted(out.to_pylist(), key=lambda r: (r["__inst"], r["__kind"] == "stat", r["__seq"] or 0,
                                                  r["__sub"] or 0))


def _committed(state_dir) -> list:
    """Every committed entry of bucket 0's store, read through the store kept open when there is
    one (opening it again would close that one), else through a store opened for the purpose."""
    held = store_module._HELD.get((os.path.abspath(str(state_dir / "rows")), 0))
    if held is not None:
        return list(held[0]._db.items())
    with BucketStore.open(str(state_dir / "rows"), 0) as store:
        return list(store._db.items())


def _added_as_sets(entries: list) -> list:
    """``entries`` with each batch's record of the keys it added (``u BATCH``: each key as its
    4-byte length and bytes) as the sorted list of those keys: the order they are listed in is
    the order of a set, which another process may iterate otherwise (Python 3.11 hashes None by
    address), and a rollback removes them all whatever their order."""
    out = []
    for key, value in entries:
        if key[:1] == b"u" and len(key) == 9:
            keys, at = [], 0
            while at < len(value):
                n = int.from_bytes(value[at:at + 4], "big")
                keys.append(value[at + 4:at + 4 + n])
                at += 4 + n
            value = sorted(keys)
        out.append((key, value))
    return out


class Boom(Exception):
    pass


@pytest.mark.parametrize("name", ["per", "slack"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.lists(event, min_size=1, max_size=30), min_size=1, max_size=5),
       fail_at=st.integers(0, 5))
def test_a_store_kept_open_gives_the_outputs_state_and_entries_of_one_opened_per_batch(
        tmp_path, monkeypatch, name, data, fail_at):
    """Batch after batch, the last one twice; batch ``fail_at`` (when there is one) first fails
    after the kernel ran (its changes in the kept store, not committed) and is then run again."""
    plan_text = store_plans(tmp_path, WINDOWS[name])[0]
    example = uuid.uuid4().hex
    kept, reference = tmp_path / f"kept{example}", tmp_path / f"ref{example}"
    opened = []
    real_open = BucketStore.open.__func__
    monkeypatch.setattr(BucketStore, "open", classmethod(
        lambda cls, root, bucket: opened.append(root) or real_open(cls, root, bucket)))
    real_detach = arrow_state.detach
    try:
        for b, events in enumerate(data + data[-1:]):
            batch_id = min(b, len(data) - 1)
            t = table(events, 1000 * (batch_id + 1))
            if b == fail_at:
                def failing(states, store):
                    real_detach(states, store)
                    raise Boom()
                monkeypatch.setattr(arrow_state, "detach", failing)
                with pytest.raises(Boom):
                    bucket_runner(plan_text, "W", frozenset(), str(kept), batch_id, 0, keep_open=True)((None,), t)
                monkeypatch.setattr(arrow_state, "detach", real_detach)
            before = len(opened)
            got = _rows(bucket_runner(plan_text, "W", frozenset(), str(kept), batch_id, 0,
                                      keep_open=True)((None,), t))
            if b > 0 and b != fail_at:
                assert len(opened) == before  # kept open: not opened again
            want = _rows(bucket_runner(plan_text, "W", frozenset(), str(reference), batch_id, 0)((None,), t))
            assert same(got, want)
            assert same(load_states(str(kept), 0, batch_id + 1), load_states(str(reference), 0, batch_id + 1))
            assert _committed(kept) == _committed(reference)
    finally:
        release_held()
    assert _committed(kept) == _committed(reference)  # and as read again from the disk


def test_a_state_directory_made_again_is_not_read_through_the_store_kept_open(tmp_path):
    plan_text = store_plans(tmp_path, WINDOWS["per"])[0]
    first = [(0, "i", None, {"k": "a", "p": 1.0, "v": 1, "n": 1}, False)]
    second = [(0, "i", None, {"k": "a", "p": 2.0, "v": 2, "n": 2}, False)]
    try:
        bucket_runner(plan_text, "W", frozenset(), str(tmp_path / "s"), 0, 0, keep_open=True)((None,), table(first, 1000))
        shutil.rmtree(tmp_path / "s")
        got = _rows(bucket_runner(plan_text, "W", frozenset(), str(tmp_path / "s"), 1, 0,
                                  keep_open=True)((None,), table(second, 2000)))
        want = _rows(bucket_runner(plan_text, "W", frozenset(), str(tmp_path / "r"), 1, 0)((None,), table(second, 2000)))
        assert same(got, want)
        assert _committed(tmp_path / "s") == _committed(tmp_path / "r")
    finally:
        release_held()


def test_opening_a_kept_store_again_in_this_process_closes_the_kept_one(tmp_path):
    plan_text = store_plans(tmp_path, WINDOWS["per"])[0]
    rows = [(0, "i", None, {"k": "a", "p": 1.0, "v": 1, "n": 1}, False)]
    try:
        bucket_runner(plan_text, "W", frozenset(), str(tmp_path / "s"), 0, 0, keep_open=True)((None,), table(rows, 1000))
        assert store_module._HELD
        with BucketStore.open(str(tmp_path / "s" / "rows"), 0) as store:  # no RocksDB lock error
            assert store.version == 0
        assert not store_module._HELD
    finally:
        release_held()


_CHILD = """
import pickle, os, signal, sys
sys.path[:0] = [{tests!r}, {root!r}]
from runtime.arrow_state import bucket_runner
plan_text, state_dir, tables, keep = pickle.load(open({job!r}, "rb"))
for batch_id, t in enumerate(tables):
    bucket_runner(plan_text, "W", frozenset(), state_dir, batch_id, 0, keep_open=keep)((None,), t)
if keep:
    os.kill(os.getpid(), signal.SIGKILL)  # its stores open: nothing closed, flushed or synced
"""


def _child(tmp_path, example: str, plan_text: str, state_dir, tables: list, keep: bool) -> int:
    """The batches run in a process of their own (the same string hashes in both runs: a set
    pickles its items in their order), killed at the end when ``keep``; its exit code."""
    job = tmp_path / f"job{example}{keep}.pkl"
    job.write_bytes(pickle.dumps((plan_text, str(state_dir), tables, keep)))
    child = _CHILD.format(tests=HERE, root=os.path.dirname(HERE), job=str(job))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    assert not done.stderr.strip() or done.returncode == -signal.SIGKILL, done.stderr
    return done.returncode


# no NaN: a NaN hashes by its object's address, so a set holding one orders its items otherwise in
# another process (the same state, other bytes)
no_nan = event.filter(lambda e: not (isinstance(e[3]["p"], float) and math.isnan(e[3]["p"])))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.lists(no_nan, min_size=1, max_size=30), min_size=1, max_size=3))
def test_a_process_killed_with_its_stores_open_loses_no_committed_batch(tmp_path, data):
    plan_text = store_plans(tmp_path, WINDOWS["per"])[0]
    example = uuid.uuid4().hex
    kept, reference = tmp_path / f"kept{example}", tmp_path / f"ref{example}"
    tables = [table(events, 1000 * (b + 1)) for b, events in enumerate(data)]
    assert _child(tmp_path, example, plan_text, kept, tables, True) == -signal.SIGKILL
    assert _child(tmp_path, example, plan_text, reference, tables, False) == 0
    assert _added_as_sets(_committed(kept)) == _added_as_sets(_committed(reference))
    # and the killed run's last batch, run again (Spark had not recorded it), gives the same rows
    last = len(tables) - 1
    again = _rows(bucket_runner(plan_text, "W", frozenset(), str(kept), last, 0)((None,), tables[last]))
    want = _rows(bucket_runner(plan_text, "W", frozenset(), str(reference), last, 0)((None,), tables[last]))
    assert same(again, want)
    assert _added_as_sets(_committed(kept)) == _added_as_sets(_committed(reference))
