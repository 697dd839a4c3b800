"""A row-count KEEP's PER groups and a Flex's input mirrors in the bucket's state store
(runtime/state/rows.py ``StoredMembers``, ``StoredMirror``, ``mirror_parts``), written per entry
a batch touches, against the pickled layout (everything in the state files): generated batches
with the last batch run again (as Spark does after a crash), a batch failing half-way (its
changes written to the store, not committed) and run again, a process killed (SIGKILL) with its
stores open, and a run directory whose state files hold the groups and mirrors (the layout before)
continued: the same outputs, and the same state (the store's entries read back)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buckets import bucket_table, variable_store_plan
from runtime import arrow_state, processor
from runtime.arrow_state import bucket_runner, load_states
from runtime.state import BucketStore, create
from runtime.state import rows as rows_module
from runtime.state.rows import StoredMembers, mirror_parts, stored_parts
from runtime.state.store import release_held
from test_kernel_keep import WINDOWS, event, same, store_plans, table

HERE = os.path.dirname(os.path.abspath(__file__))

# KEEP windows with PER groups (and without: SLACK), run by the keep kernel and by the engine
KEEPS = ["per", "one row per float", "last per, where, expressions", "every", "casts", "slack"]

FLEXES = {
    # a window input mirrored without KEEP, its key holding a float (NaN, -0.0 and 0.0 keys)
    "window": ("create input window w schema (k string, p float, v integer) primary key (k, p);\n"
               "create flex f in w out output stream o schema (k string, p float, v integer, "
               "op integer)\nbegin\n  on w { output [k = w.k; p = w.p; v = w.v; "
               "op = getOpcode(w);]; };\nend;\n"),
    # the old row read (w_old): the engine's general path
    "old": ("create input window w schema (k string, p float, v integer) primary key (k);\n"
            "create flex f in w out output stream o schema (k string, v integer, ov integer, "
            "op integer)\nbegin\n  on w { output [k = w.k; v = w.v; ov = w_old.v; "
            "op = getOpcode(w);]; };\nend;\n"),
    # a KEEP with PER on a stream input: rows by sequence number, PER groups in the store too
    "stream keep": ("create input stream w schema (k string, p float, v integer);\n"
                    "create flex f in w keep 2 rows per (k) out output stream o schema "
                    "(k string, v integer, op integer)\nbegin\n  on w { output [k = w.k; "
                    "v = w.v; op = getOpcode(w);]; };\nend;\n"),
    # a KEEP with PER on a window input (PER by a float)
    "window keep": ("create input window w schema (k string, p float, v integer) primary key (k);\n"
                    "create flex f in w keep 2 rows per (p) out output stream o schema "
                    "(k string, v integer, op integer)\nbegin\n  on w { output [k = w.k; "
                    "v = w.v; op = getOpcode(w);]; };\nend;\n"),
}
FLEX_ROW = pa.struct([("k", pa.string()), ("p", pa.float64()), ("v", pa.int32())])
floats = st.sampled_from([None, 0.0, -0.0, 1.5, float("nan"), 0.1])
flex_event = st.tuples(st.integers(0, 2), st.sampled_from(["i", "i", "u", "p", "d", "s", "x"]),
                       st.sampled_from([None] * 6 + ["does not parse"]),
                       st.fixed_dictionaries({"k": st.sampled_from([None, "a", "b", "c"]),
                                              "p": floats, "v": st.sampled_from([None, 1, 2, 3])}),
                       st.sampled_from([False] * 5 + [True]))


class Boom(Exception):
    pass


def _rows(out) -> list:
    return sorted(out.to_pylist(), key=lambda r: (r["__inst"], r["__kind"] == "stat",
                                                  r["__seq"] or 0, r["__sub"] or 0))


class _Project:
    """A project run through runtime/arrow_state.py in the new layout and in the pickled one."""

    def __init__(self, tmp_path, kind: str, name: str) -> None:
        self.kind = kind
        if kind == "keep":
            kernel, _, pickled = store_plans(tmp_path, WINDOWS[name])
            self.plans, self.element = {"new": kernel, "pickled": pickled}, "W"
        else:
            plan = variable_store_plan(tmp_path, FLEXES[name])
            self.plans, self.element = {"new": plan, "pickled": plan}, "o"

    def table(self, events: list, first_seq: int) -> pa.Table:
        return table(events, first_seq) if self.kind == "keep" else \
            bucket_table(events, first_seq, FLEX_ROW)

    @contextlib.contextmanager
    def layout(self, which: str):
        """For a Flex, the pickled layout is the store turned off (no dictionaries to keep)."""
        real = arrow_state.uses_variable_store
        if which == "pickled" and self.kind == "flex":
            arrow_state.uses_variable_store = lambda element: False
        try:
            yield
        finally:
            arrow_state.uses_variable_store = real

    def run(self, which: str, state_dir, batch_id: int, t: pa.Table, keep_open: bool = False) -> list:
        with self.layout(which):
            return _rows(bucket_runner(self.plans[which], self.element, frozenset(), str(state_dir),
                                       batch_id, 0, keep_open=keep_open)((None,), t))

    def parts(self, state: dict, inst: int):
        if self.kind == "keep":
            return [p for p in stored_parts(state, inst) if p[1] in ("rows", "groups")]
        return list(mirror_parts(state, inst, tuple(range(len(state.get("sources") or [])))))


def _nan(key) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for v in key)


def _held(project: _Project, state_dir, batch_id: int, pickled: bool) -> dict:
    """(instance, part) -> its entries after ``batch_id`` (key -> value, in order for a group),
    read from the state files, and from the store where they hold a count; keys holding a NaN
    left out (a dict finds them by their very NaN object only: nothing can find them again) and
    the number of entries (NaN keys included)."""
    states = load_states(str(state_dir), 0, batch_id + 1)
    out = {}
    store = None
    try:
        for inst, state in sorted(states.items()):
            for owner, field, ns, kind in project.parts(state, inst):
                held = owner[field]
                size = held if type(held) is int else len(held)
                if type(held) is int:
                    assert not pickled
                    if store is None:
                        store = BucketStore.open(str(state_dir / "rows"), 0)
                        store.begin(batch_id + 1)
                    unpack = getattr(kind, "unpack", None)
                    held = {k[1:]: v if unpack is None else unpack(v) for k, v in store.scan(ns, (inst,))}
                out[inst, field, ns] = (size, {k: (list(v) if field == "groups" else v)
                                               for k, v in held.items() if not _nan(k)})
    finally:
        if store is not None:
            store.close()
    return out


def _same_state(project, new_dir, pickled_dir, batch_id) -> None:
    got, want = _held(project, new_dir, batch_id, False), _held(project, pickled_dir, batch_id, True)
    assert set(got) == set(want)
    for part, (size, entries) in want.items():
        assert got[part][0] == size, part
        mine = got[part][1]
        assert len(mine) == len(entries), part
        for key, value in entries.items():  # (a dict key: -0.0 and 0.0 are one key)
            assert key in mine and same(mine[key], value), (part, key)


CASES = [("keep", n) for n in KEEPS] + [("flex", n) for n in FLEXES]


@pytest.mark.parametrize("kind,name", CASES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_groups_and_mirrors_in_the_store_give_the_outputs_and_state_of_the_pickled_layout(
        tmp_path, kind, name, data):
    """Batch after batch, the last one twice; batch ``fail_at`` first fails after the stored
    parts were written to the store (not committed) and is then run again; the store kept open
    between batches or opened per batch."""
    project = _Project(tmp_path, kind, name)
    events = event if kind == "keep" else flex_event
    batches = data.draw(st.lists(st.lists(events, min_size=1, max_size=30), min_size=1, max_size=5))
    fail_at = data.draw(st.integers(0, 5))
    keep_open = data.draw(st.booleans())
    example = uuid.uuid4().hex
    new, pickled = tmp_path / f"new{example}", tmp_path / f"pickled{example}"
    real_detach = arrow_state.detach
    try:
        for b, batch in enumerate(batches + batches[-1:]):
            batch_id = min(b, len(batches) - 1)
            t = project.table(batch, 1000 * (batch_id + 1))
            if b == fail_at:
                def failing(*args, **kwargs):
                    real_detach(*args, **kwargs)
                    raise Boom()
                arrow_state.detach = failing
                try:
                    with pytest.raises(Boom):
                        project.run("new", new, batch_id, t, keep_open)
                finally:
                    arrow_state.detach = real_detach
            got = project.run("new", new, batch_id, t, keep_open)
            want = project.run("pickled", pickled, batch_id, t)
            assert same(got, want)
            release_held()
            _same_state(project, new, pickled, batch_id)
    finally:
        arrow_state.detach = real_detach
        release_held()


@pytest.mark.parametrize("kind,name", [("keep", "per"), ("flex", "window keep"), ("flex", "window")])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_state_files_of_the_layout_before_are_continued(tmp_path, monkeypatch, kind, name, data):
    """A run directory whose state files hold the PER groups and mirrors whole (what the runtime
    before wrote: its store's layout format 2) is continued: the dicts go to the store at the next
    batch, the outputs and state are the pickled layout's, the root is marked format 3."""
    project = _Project(tmp_path, kind, name)
    events = event if kind == "keep" else flex_event
    batches = data.draw(st.lists(st.lists(events, min_size=1, max_size=30), min_size=2, max_size=4))
    before = data.draw(st.integers(1, len(batches) - 1))
    example = uuid.uuid4().hex
    new, pickled = tmp_path / f"new{example}", tmp_path / f"pickled{example}"
    old_parts = stored_parts

    def parts_before(state, inst):  # the runtime before: no groups in the store
        return (p for p in old_parts(state, inst) if p[1] != "groups")
    for b, batch in enumerate(batches):
        t = project.table(batch, 1000 * (b + 1))
        if b < before:
            with monkeypatch.context() as m:
                m.setattr(rows_module, "stored_parts", parts_before)
                m.setattr(processor, "_RUNS", {})  # (new runners: what they store worked out anew)
                from runtime.engine.flex import FlexEngine
                m.setattr(FlexEngine, "stored_mirrors", lambda self: ())
                got = project.run("new", new, b, t)
            if b == before - 1 and (new / "rows" / "layout.json").exists():
                layout = json.loads((new / "rows" / "layout.json").read_text())
                (new / "rows" / "layout.json").write_text(json.dumps({**layout, "format": 2}))
        else:
            got = project.run("new", new, b, t)
            assert json.loads((new / "rows" / "layout.json").read_text())["format"] == 3
        assert same(got, project.run("pickled", pickled, b, t))
        _same_state(project, new, pickled, b)


_CHILD = """
import pickle, os, signal, sys
sys.path[:0] = [{tests!r}, {root!r}]
from runtime.arrow_state import bucket_runner
plan_text, element, state_dir, tables = pickle.load(open({job!r}, "rb"))
for batch_id, t in enumerate(tables):
    bucket_runner(plan_text, element, frozenset(), state_dir, batch_id, 0, keep_open=True)((None,), t)
os.kill(os.getpid(), signal.SIGKILL)  # its stores open: nothing closed, flushed or synced
"""


@pytest.mark.parametrize("kind,name", [("keep", "per"), ("flex", "window keep")])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_process_killed_with_its_stores_open_continues_as_the_pickled_layout(tmp_path, kind, name,
                                                                               data):
    """The batches in a process SIGKILLed after its last commit; its last batch run again (Spark
    had not recorded it) and one more batch: the pickled layout's outputs and state."""
    project = _Project(tmp_path, kind, name)
    events = event if kind == "keep" else flex_event
    batches = data.draw(st.lists(st.lists(events, min_size=1, max_size=30), min_size=2, max_size=4))
    example = uuid.uuid4().hex
    new, pickled = tmp_path / f"new{example}", tmp_path / f"pickled{example}"
    tables = [project.table(batch, 1000 * (b + 1)) for b, batch in enumerate(batches)]
    job = tmp_path / f"job{example}.pkl"
    job.write_bytes(pickle.dumps((project.plans["new"], project.element, str(new), tables[:-1])))
    child = _CHILD.format(tests=HERE, root=os.path.dirname(HERE), job=str(job))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    for b, t in enumerate(tables[:-1]):
        project.run("pickled", pickled, b, t)
    last = len(tables) - 2
    for b in (last, len(tables) - 1):
        assert same(project.run("new", new, b, tables[b]), project.run("pickled", pickled, b, tables[b]))
        _same_state(project, new, pickled, b)


def test_a_batch_reads_and_writes_the_groups_it_touches(tmp_path):
    """After 200 PER groups, a batch of one row reads one group (and its oldest row) and writes
    that group back, as a tuple of its keys; the state file holds the number of groups."""
    project = _Project(tmp_path, "keep", "per")
    rows = [(0, "i", None, {"k": f"g{i % 200}", "p": 1.0, "v": i, "n": 1}, False) for i in range(600)]
    project.run("new", tmp_path / "s", 0, project.table(rows, 1))
    states = load_states(str(tmp_path / "s"), 0, 1)
    assert states[0]["output"]["groups"] == 200 and states[0]["output"]["rows"] == 400
    reads, writes = [], []
    real_get_many, real_put_all = BucketStore.get_many, BucketStore.put_all
    try:
        BucketStore.get_many = lambda self, ns, keys, *a: reads.append((ns, len(keys))) or \
            real_get_many(self, ns, keys, *a)
        BucketStore.put_all = lambda self, ns, inst, items, **kw: writes.append(
            (ns, list(items))) or real_put_all(self, ns, inst, items, **kw)
        project.run("new", tmp_path / "s", 1, project.table(
            [(0, "i", None, {"k": "g7", "p": 2.0, "v": 1000, "n": 1}, False)], 2000))
    finally:
        BucketStore.get_many, BucketStore.put_all = real_get_many, real_put_all
    assert ("w.output.p", 1) in reads
    assert [(ns, items) for ns, items in writes if ns == "w.output.p"] == [
        ("w.output.p", [(("g7",), (("g7", 407), ("g7", 1000)))])]
    assert StoredMembers.unpack((("g7", 1),)) == {("g7", 1): None}


def test_a_flex_that_walks_its_input_keeps_the_mirror_in_the_state_file(tmp_path):
    text = FLEXES["window"].replace("output [k = w.k;", "integer n := 0; for (r in w_stream) "
                                    "{ n := n + 1; } output [k = w.k;")
    plan = variable_store_plan(tmp_path, text)
    rows = [(0, "i", None, {"k": "a", "p": 1.0, "v": 1}, False)]
    bucket_runner(plan, "o", frozenset(), str(tmp_path / "s"), 0, 0)((None,), bucket_table(rows, 1, FLEX_ROW))
    state = load_states(str(tmp_path / "s"), 0, 1)[0]
    assert isinstance(state["sources"][0]["rows"], dict) and len(state["sources"][0]["rows"]) == 1
    stored = _Project(tmp_path, "flex", "window")
    stored.run("new", tmp_path / "t", 0, bucket_table(rows, 1, FLEX_ROW))
    assert load_states(str(tmp_path / "t"), 0, 1)[0]["sources"][0]["rows"] == 1


def test_a_root_of_format_3_is_refused_by_a_runtime_of_format_2_and_read_here(tmp_path):
    """The runtime before reads formats 1 and 2 (its message names them); a root this one opened
    says 3."""
    root = tmp_path / "r"
    create(str(root), 1)
    assert json.loads((root / "layout.json").read_text())["format"] == 3
    with BucketStore.open(str(root), 0) as s:
        assert s.version is None
