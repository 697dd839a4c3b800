"""A join's per-port state (runtime/engine/join.py) kept in the bucket's state store key by key
(runtime/state/rows.py), for joins run by runtime/arrow_state.py, the join kernel's included:
the same batches (replays included) through the store and through the pickled layout give the
same rows, the state files hold counts, and a batch reads only the keys it touches."""
from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from planned import plan_json
from runtime.arrow_state import bucket_runner, load_states
from runtime.state import BucketStore
from runtime.state.rows import StoredGroups, StoredRows, attach, holds_stored_state
from test_kernel_join import CHOICES, QUERIES, SCHEMAS, SOURCES, random_events, same, table

# joins the engine runs (no kernel): a window joined with a window (its changes propagate), a
# residual ON condition, a right side changing the left's match counts (outer join)
ENGINE = {
    "window with window": ("SELECT w.k k, w.name name, x.id id FROM W w LEFT JOIN X x "
                           "ON x.tag = w.name", ["W", "X"], "", "window"),
    "residual condition": ("SELECT s.k k, w.name name FROM S s INNER JOIN W w "
                           "ON s.k = w.k AND w.f > s.p", ["W"], "", "stream"),
}
CROSS = ("SELECT s.k k, w.name name FROM S s INNER JOIN W w ON w.f > s.p", ["W"], "", "stream")
# joins ON float columns, whose values include NaN, -0.0 and 0.0 (tests/test_kernel_join.py
# CHOICES): the kernel's, and the engine's (a residual condition)
FLOAT_KEYS = {
    "kernel, float key": ("SELECT s.k k, s.p p, w.name name, w.f f FROM S s LEFT JOIN W w "
                          "ON s.p = w.f", ["W"]),
    "engine, float key": ("SELECT s.k k, s.p p, w.name name FROM S s INNER JOIN W w "
                          "ON w.f = s.p AND w.k >= s.k", ["W"], "", "stream"),
}


def _plan(tmp_path, query: tuple) -> str:
    kind = query[3] if len(query) > 3 else "stream"
    key = " PRIMARY KEY DEDUCED" if kind == "window" else ""
    path = tmp_path / "j.ccl"
    path.write_text(SOURCES + f"CREATE OUTPUT {kind.upper()} J {query[2] if len(query) > 2 else ''}"
                              f"{key} AS {query[0]};\n")
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return json.dumps(plan)


def _events(rnd: random.Random, windows: list[str], n: int, no_stream: bool) -> list:
    """``n`` events of the ports of S and ``windows`` (``no_stream``: of W and X, the ports of a
    query of windows alone)."""
    if not no_stream:
        return random_events(rnd, windows, n)
    # the window-with-window query: W on port 0, X on port 1
    choices = CHOICES["W"]
    return [e if e[1][0] else (e[0], (0, {c: rnd.choice(choices[c]) for c in choices}), *e[2:])
            for e in random_events(rnd, ["X"], n)]


def _table(windows: list[str], data: list, first_seq: int, no_stream: bool) -> pa.Table:
    if not no_stream:
        return table(windows, data, first_seq)
    t = table(["X"], [e if e[1][0] else (e[0], (0, None), *e[2:]) for e in data], first_seq)
    w = pa.array([e[1][1] if e[1][0] == 0 else None for e in data], SCHEMAS["W"])
    return t.set_column(t.schema.get_field_index("__p0"), "__p0", w)


def _run_all(plan_text: str, query: tuple, state_dir: str, seed: str) -> list:
    rnd = random.Random(seed)
    windows, no_stream = query[1], len(query) > 3 and query[3] == "window"
    batches = [_events(rnd, windows, 200, no_stream) for _ in range(5)]
    outs = []
    for batch_id in (0, 1, 2, 2, 3, 4, 4):  # batches 2 and 4 run again (a crash before commit)
        t = _table(windows, batches[batch_id], 1000 * (batch_id + 1), no_stream)
        out = bucket_runner(plan_text, "J", frozenset(), state_dir, batch_id, 0)((None,), t)
        outs.append(out.to_pylist())
    return outs


def _join_state(states: dict) -> dict:
    return next(iter(states.values()))["selects"][0]["join"]


# (the kernel's queries that join: those with no window keep no join state)
JOINS = {name: query for name, query in QUERIES.items() if query[1]}


@pytest.mark.parametrize("name", list(JOINS) + list(ENGINE) + list(FLOAT_KEYS))
def test_the_store_gives_the_rows_of_the_pickled_join_state(tmp_path, monkeypatch, name):
    """Random batches (replays included) through the store and the pickled layout. Joined ON a
    float column, a NaN matches nothing from another batch as in the engine's dict (the store's
    index keeps no entry under a NaN) and -0.0 matches 0.0."""
    import runtime.arrow_state as arrow_state

    query = {**JOINS, **ENGINE, **FLOAT_KEYS}[name]
    plan_text = _plan(tmp_path, query)
    stored = _run_all(plan_text, query, str(tmp_path / "store"), name)
    join = _join_state(load_states(str(tmp_path / "store"), 0, 5))
    assert join["keyed"]
    assert all(type(x) is int for part in ("src", "acc", "lidx", "ridx", "lcnt", "rcnt")
               for x in join[part])
    assert sum(join["src"][1:]) > 0  # rows held, in the store
    monkeypatch.setattr(arrow_state, "uses_window_store", lambda element: False)
    pickled = _run_all(plan_text, query, str(tmp_path / "pickle"), name)
    assert isinstance(_join_state(load_states(str(tmp_path / "pickle"), 0, 5))["src"][1], dict)
    assert same(stored, pickled)
    assert same(stored[2], stored[3]) and same(stored[5], stored[6])  # a replay gives the same rows
    assert sum(1 for out in stored for r in out if r["__kind"] == "row") > 20
    if name in FLOAT_KEYS:  # -0.0 found 0.0 (or -0.0); NaN rows came (a LEFT join shows them)
        seen = [str(r["p"]) for out in stored for r in out if r["__kind"] == "row"]
        assert "-0.0" in seen and ("nan" in seen) == name.startswith("kernel")


def test_a_join_that_walks_a_sides_rows_stays_pickled(tmp_path):
    """Without an equality a level walks a side's rows in the order they came, which the store
    does not keep: that join's state stays in the state file (and still runs)."""
    plan_text = _plan(tmp_path, CROSS)
    outs = _run_all(plan_text, CROSS, str(tmp_path / "store"), "cross")
    join = _join_state(load_states(str(tmp_path / "store"), 0, 5))
    assert not join["keyed"] and isinstance(join["src"][1], dict) and join["src"][1]
    assert any(r["__kind"] == "row" for out in outs for r in out)


def test_a_batch_reads_only_the_join_keys_it_touches(tmp_path, monkeypatch):
    """With many window rows held, a batch of stream rows of two keys reads a handful of
    entries from the store, and the state file holds counts, not rows."""
    plan_text = _plan(tmp_path, QUERIES["enrich"])
    state_dir = str(tmp_path / "store")
    windows = ["W"]
    rows = [(0, (1, {"k": f"k{i}", "name": f"n{i}", "f": 1.0}), "i", None, False, 0)
            for i in range(2000)]
    bucket_runner(plan_text, "J", frozenset(), state_dir, 0, 0)((None,), table(windows, rows, 1))
    states = load_states(state_dir, 0, 1)
    assert _join_state(states)["src"][1] == 2000
    reads: list = []
    real_get, real_many = BucketStore.get, BucketStore.get_many
    monkeypatch.setattr(BucketStore, "get", lambda self, ns, key, default=None:
                        reads.append(key) or real_get(self, ns, key, default))
    monkeypatch.setattr(BucketStore, "get_many", lambda self, ns, keys, default=None:
                        reads.extend(keys) or real_many(self, ns, keys, default))
    stream = [(0, (0, {"k": k, "p": 1.0, "v": 1, "n": 1}), "i", None, False, 0)
              for k in ["k5", "k7", "k5", "nope"] * 50]
    out = bucket_runner(plan_text, "J", frozenset(), state_dir, 1, 0)((None,),
                                                                      table(windows, stream, 5000))
    names = [r["name"] for r in out.to_pylist() if r["__kind"] == "row"]
    assert names == ["n5", "n7", "n5"] * 50
    assert 0 < len(reads) <= 20


def test_attach_puts_mappings_over_the_store_in_a_join_states_place(tmp_path):
    from runtime.state import create
    from runtime.state.rows import detach

    plan_text = _plan(tmp_path, QUERIES["enrich"])
    from runtime.processor import BucketRun
    state = BucketRun(plan_text, "J", frozenset()).engine.initial_state()
    assert holds_stored_state(state)
    state["selects"][0]["join"]["src"][1][("a",)] = {"k": "a", "name": "x", "f": None}
    state["selects"][0]["join"]["ridx"][0][("a",)] = {("a",): True}
    root = str(tmp_path / "root")
    create(root, 1)
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        detach({3: state}, store)
        store.commit(0)
        join = state["selects"][0]["join"]
        assert join["src"][1] == 1 and join["ridx"][0] == 1 and join["lcnt"][0] == 0
        store.begin(1)
        attach({3: state}, store)
        assert isinstance(join["src"][1], StoredRows) and isinstance(join["ridx"][0], StoredGroups)
        assert join["src"][1][("a",)]["name"] == "x"
        join["ridx"][0][("a",)][("b",)] = True  # changed in place, as the Joiner does
        detach({3: state}, store)
        store.commit(1)
        attach({3: state}, store)
        assert list(join["ridx"][0][("a",)]) == [("a",), ("b",)]
