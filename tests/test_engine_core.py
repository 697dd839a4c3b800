"""The per-instance element engine (runtime/engine/element.py, store.py, stages.py): no Spark."""
import importlib.util
import pickle

import pytest

from ccl.syntax import nodes as n
from ccl.syntax.parser import parse_text
from ccl.plan.codec import keep_from_json
from planned import typed_parts
from runtime.engine.changes import Bad, Change, Emit, Event
from runtime.engine.element import Engine
from runtime.engine.stages import consolidate
from runtime.engine.store import Store

HAS_AGG = importlib.util.find_spec("runtime.engine.aggregate") is not None
HAS_JOIN = importlib.util.find_spec("runtime.engine.join") is not None


# --- plan helpers -------------------------------------------------------------------------------

def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("line", "col")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def expr(text: str) -> dict:
    """The plan JSON of a CCL expression (column references written qualified: ``a.price``)."""
    project, diags = parse_text(f"create output stream o as select {text} as x from a;")
    assert not diags, diags
    return _strip(n.to_json(project.statements[0].query.items[0].expr))


def keep(kind, count=None, millis=None, per=()):
    return {"kind": kind, "count": count, "millis": millis, "per": list(per)}


def element(name, kind, columns, key=(), keep=None, query=None, autogenerate=None,
            input_where=None, partitions=None):
    return {"name": name, "kind": kind, "role": "output" if query else "input", "file": "t.ccl",
            "line": 1, "columns": [list(c) for c in columns], "key": list(key), "keep": keep,
            "autogenerate": autogenerate, "input_where": input_where, "query": query,
            "partition": {"count": partitions, "specs": [], "broadcast": []} if partitions else None,
            "stateful": True}


def select(sources, items, where=None, joins=()):
    """``sources``: (alias, element[, keep]); ``items``: (name, CCL expression text)."""
    return {"sources": [{"alias": s[0], "element": s[1], "keep": s[2] if len(s) > 2 else None}
                        for s in sources],
            "joins": list(joins), "where": expr(where) if where else None, "group_by": [],
            "group_filter": None, "having": None, "aggregates": [],
            "items": [{"name": name, "expr": expr(text)} for name, text in items]}


def plan(*elements):
    return {"format": "ccl-plan", "version": 1, "project": "t", "file": "t.ccl",
            "parameters": {}, "globals": [], "elements": list(elements), "adapters": []}


def ev(op, seq, port=0, **values):
    return Event(port, op, seq, values)


def ops(out):
    """Emits as (op, values) pairs, bad records as ("bad", reason)."""
    return [(o.op, dict(o.values)) if isinstance(o, Emit) else ("bad", o.reason) for o in out]


KV = [("k", "string"), ("v", "integer")]


def input_window(keep_=None, name="w", columns=KV, key=("k",), **kw):
    return element(name, "window", columns, key, keep=keep_, **kw)


def run(engine, events, now=0, state=None):
    state = engine.initial_state() if state is None else state
    return ops(engine.process(state, events, now)), state


# --- input windows: key rules -------------------------------------------------------------------

def test_strict_keys_without_keep():
    w = input_window()
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("i", 2, k="a", v=2), ev("u", 3, k="b", v=1),
                       ev("d", 4, k="b"), ev("u", 5, k="a", v=3), ev("d", 6, k="a", v=3)])
    assert out == [("i", {"k": "a", "v": 1}), ("bad", "duplicate key ('a') in w"),
                   ("bad", "no row with key ('b') in w"), ("bad", "no row with key ('b') in w"),
                   ("u", {"k": "a", "v": 3}), ("d", {"k": "a", "v": 3})]


def test_bad_record_keeps_seq_port_and_values():
    w = input_window()
    eng = Engine(*typed_parts(w, plan(w)))
    state = eng.initial_state()
    out = eng.process(state, [ev("i", 1, k="a", v=1), ev("i", 7, k="a", v=2)], 0)
    assert out[1] == Bad("duplicate key ('a') in w", 7, 0, {"k": "a", "v": 2})


def test_strict_keys_with_keep_all_and_upsert_safedelete():
    w = input_window(keep("all"))
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("p", 1, k="a", v=1), ev("p", 2, k="a", v=2), ev("s", 3, k="b"),
                       ev("s", 4, k="a"), ev("i", 5, k="a", v=5)])
    assert out == [("i", {"k": "a", "v": 1}), ("u", {"k": "a", "v": 2}),
                   ("d", {"k": "a", "v": 2}), ("i", {"k": "a", "v": 5})]


def test_lax_keys_with_other_keep():
    w = input_window(keep("rows", count=10))
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("i", 2, k="a", v=2), ev("u", 3, k="b", v=1),
                       ev("d", 4, k="c")])
    assert out == [("i", {"k": "a", "v": 1}), ("u", {"k": "a", "v": 2}),
                   ("i", {"k": "b", "v": 1})]


def test_values_are_cast_to_column_types_and_cast_failure_is_bad():
    w = input_window()
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v="12"), ev("i", 2, k="b", v="x"),
                       ev("x", 3, k="c", v=1)])
    assert out == [("i", {"k": "a", "v": 12}), ("bad", "cannot convert 'x' to integer"),
                   ("bad", "unknown opcode 'x'")]


# --- KEEP policies ------------------------------------------------------------------------------

def test_keep_rows_evicts_the_least_recently_inserted_or_updated():
    w = input_window(keep("rows", count=2))
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("i", 2, k="b", v=1), ev("u", 3, k="a", v=2),
                       ev("i", 4, k="c", v=1), ev("p", 5, k="c", v=2), ev("i", 6, k="d", v=1)])
    assert out[3:] == [("d", {"k": "b", "v": 1}), ("i", {"k": "c", "v": 1}),
                       ("u", {"k": "c", "v": 2}), ("d", {"k": "a", "v": 2}), ("i", {"k": "d", "v": 1})]
    assert all(isinstance(e, Emit) and e.seq == 4 for e in eng.process(
        eng.initial_state(), [ev("i", 4, k="x", v=1)], 0))


def test_keep_rows_per_group():
    w = input_window(keep("rows", count=1, per=["g"]), columns=KV + [("g", "string")])
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1, g="x"), ev("i", 2, k="b", v=1, g="y"),
                       ev("i", 3, k="c", v=1, g="x")])
    assert out == [("i", {"k": "a", "v": 1, "g": "x"}), ("i", {"k": "b", "v": 1, "g": "y"}),
                   ("d", {"k": "a", "v": 1, "g": "x"}), ("i", {"k": "c", "v": 1, "g": "x"})]


def test_keep_last_per():
    w = input_window(keep("last", per=["g"]), columns=KV + [("g", "string")])
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1, g="x"), ev("i", 2, k="b", v=2, g="x"),
                       ev("i", 3, k="c", v=3, g="y")])
    assert [o[0] for o in out] == ["i", "d", "i", "i"]
    assert out[1] == ("d", {"k": "a", "v": 1, "g": "x"})


def test_keep_every_rows_jumps():
    w = input_window(keep("every_rows", count=2))
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("i", 2, k="b", v=1), ev("i", 3, k="c", v=1)])
    assert out == [("i", {"k": "a", "v": 1}), ("i", {"k": "b", "v": 1}),
                   ("d", {"k": "a", "v": 1}), ("d", {"k": "b", "v": 1}),
                   ("i", {"k": "c", "v": 1})]


def test_keep_time_expires_after_last_change():
    w = input_window(keep("time", millis=100))
    eng = Engine(*typed_parts(w, plan(w)))
    state = eng.initial_state()
    eng.process(state, [ev("i", 1, k="a", v=1), ev("i", 2, k="b", v=1)], 1000)
    eng.process(state, [ev("u", 3, k="a", v=2)], 1050)
    assert eng.next_deadline(state) == 1100
    assert eng.expire(state, 1099) == []
    assert eng.expire(state, 1100) == [Emit("d", 3, {"k": "b", "v": 1})]
    assert eng.next_deadline(state) == 1150
    # process() evicts what is due before applying its events
    out = ops(eng.process(state, [ev("i", 4, k="c", v=1)], 2000))
    assert out == [("d", {"k": "a", "v": 2}), ("i", {"k": "c", "v": 1})]


def test_keep_every_time_clears_at_period_boundaries():
    w = input_window(keep("every_time", millis=1000))
    eng = Engine(*typed_parts(w, plan(w)))
    state = eng.initial_state()
    eng.process(state, [ev("i", 1, k="a", v=1)], 1500)
    eng.process(state, [ev("i", 2, k="b", v=1)], 1900)
    assert eng.next_deadline(state) == 2000
    assert eng.expire(state, 1999) == []
    assert [e.op for e in eng.expire(state, 2000)] == ["d", "d"]
    assert eng.next_deadline(state) is None
    eng.process(state, [ev("i", 3, k="c", v=1)], 2500)
    assert eng.next_deadline(state) == 3000


def test_store_directly():
    store = Store(keep_from_json(keep("rows", count=2)))
    st = store.initial_state()
    store.upsert(st, ("a",), {"k": "a"}, 1, 0)
    store.upsert(st, ("b",), {"k": "b"}, 2, 0)
    changes = store.upsert(st, ("c",), {"k": "c"}, 3, 0)
    assert [(c.op, c.key) for c in changes] == [("d", ("a",)), ("i", ("c",))]
    assert store.delete(st, ("zz",), 4) == []
    assert store.get(st, ("b",)) == {"k": "b"}


# --- input streams: AUTOGENERATE and WHERE ------------------------------------------------------

def test_input_stream_autogenerate_and_where():
    s = element("s", "stream", [("id", "long"), ("v", "integer")],
                autogenerate={"columns": ["id"], "start": expr("10 + 5")},
                input_where=expr("s.v > 0"))
    eng = Engine(*typed_parts(s, plan(s)))
    out, state = run(eng, [ev("i", 1, v=1), ev("i", 2, v=-1), ev("u", 3, v=2), ev("d", 4, v=3)])
    assert out == [("i", {"id": 15, "v": 1}), ("i", {"id": 16, "v": 2})]
    assert state["input"]["auto"] == {"id": 17}


def test_input_window_autogenerate_from_zero_on_inserts_only():
    w = input_window(columns=[("id", "long"), ("v", "integer")], key=("id",),
                     autogenerate={"columns": ["id"], "start": None})
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("i", 1, v=1), ev("i", 2, v=2), ev("u", 3, id=0, v=5)])
    assert out == [("i", {"id": 0, "v": 1}), ("i", {"id": 1, "v": 2}), ("u", {"id": 0, "v": 5})]


# --- derived elements ---------------------------------------------------------------------------

SRC = input_window(keep("all"), name="src")


def derived(kind, items=(("k", "a.k"), ("v", "a.v")), where=None, key=("k",), keep_=None,
            sources=(("a", "src"),), columns=KV, **kw):
    q = {"selects": [select(list(sources), list(items), where)]}
    return element("d", kind, columns, key if kind != "stream" else (), keep=keep_, query=q, **kw)


def test_derived_stream_from_window_emits_inserts_only():
    d = derived("stream", where="a.v > 0")
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("u", 2, k="a", v=2), ev("p", 3, k="b", v=3),
                       ev("d", 4, k="a", v=2)])
    assert out == [("i", {"k": "a", "v": 1}), ("i", {"k": "a", "v": 2}), ("i", {"k": "b", "v": 3})]


def test_where_transitions_on_a_window():
    d = derived("window", where="a.v > 0")
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="a", v=-1),   # neither: nothing
                       ev("u", 2, k="a", v=1),    # only new passes: insert
                       ev("u", 3, k="a", v=2),    # both: update
                       ev("u", 4, k="a", v=-2),   # only old: delete
                       ev("d", 5, k="a", v=-2)])  # neither
    assert out == [("i", {"k": "a", "v": 1}), ("u", {"k": "a", "v": 2}),
                   ("d", {"k": "a", "v": 2})]


def test_source_mirror_gives_old_rows_and_resolves_upsert_safedelete():
    d = derived("window", items=(("k", "a.k"), ("v", "a.v * 10")))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, state = run(eng, [ev("p", 1, k="a", v=1), ev("p", 2, k="a", v=2), ev("s", 3, k="z"),
                           ev("d", 4, k="a")])   # the delete carries only the key
    assert out == [("i", {"k": "a", "v": 10}), ("u", {"k": "a", "v": 20}),
                   ("d", {"k": "a", "v": 20})]
    assert state["selects"][0]["sources"][0]["rows"] == {}


def test_delta_stream_passes_changes_and_filtered_update_becomes_delete():
    d = derived("delta stream", where="a.v > 0")
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, state = run(eng, [ev("i", 1, k="a", v=1), ev("u", 2, k="a", v=2), ev("u", 3, k="a", v=-1),
                           ev("u", 4, k="a", v=5), ev("d", 5, k="a", v=5)])
    assert out == [("i", {"k": "a", "v": 1}), ("u", {"k": "a", "v": 2}),
                   ("d", {"k": "a", "v": 2}), ("i", {"k": "a", "v": 5}),
                   ("d", {"k": "a", "v": 5})]
    assert state["output"] is None


def test_derived_window_key_rules_are_lenient():
    # Two source keys map to the same output key: the second insert updates, a delete of a
    # key no longer there is nothing.
    d = derived("window", items=(("k", "left(a.k, 1)"), ("v", "a.v")))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="ax", v=1), ev("i", 2, k="ay", v=2), ev("d", 3, k="ax"),
                       ev("d", 4, k="ay")])
    assert out == [("i", {"k": "a", "v": 1}), ("u", {"k": "a", "v": 2}),
                   ("d", {"k": "a", "v": 2})]


def test_derived_window_update_changing_key_deletes_old_key():
    d = derived("window", items=(("k", "a.k + string(a.v)"), ("v", "a.v")))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("u", 2, k="a", v=2)])
    assert out == [("i", {"k": "a1", "v": 1}), ("d", {"k": "a1", "v": 1}),
                   ("i", {"k": "a2", "v": 2})]


def test_derived_window_keep_rows():
    d = derived("window", keep_=keep("rows", count=1))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("i", 2, k="b", v=2), ev("u", 3, k="a", v=3)])
    assert out == [("i", {"k": "a", "v": 1}), ("d", {"k": "a", "v": 1}),
                   ("i", {"k": "b", "v": 2}), ("d", {"k": "b", "v": 2}),
                   ("i", {"k": "a", "v": 3})]


def test_union_feeds_one_store_and_ports_number_select_sources():
    other = input_window(keep("all"), name="other")
    q = {"selects": [select([("a", "src")], [("k", "a.k"), ("v", "a.v")]),
                     select([("b", "other")], [("k", "b.k"), ("v", "b.v + 100")])]}
    d = element("u", "window", KV, ("k",), query=q)
    eng = Engine(*typed_parts(d, plan(SRC, other, d)))
    assert eng.ports == [(0, 0), (1, 0)]
    out, _ = run(eng, [ev("i", 1, 0, k="a", v=1), ev("i", 2, 1, k="a", v=2),
                       ev("i", 3, 1, k="b", v=3), ev("i", 4, 7, k="b", v=3)])
    assert out == [("i", {"k": "a", "v": 1}), ("u", {"k": "a", "v": 102}),
                   ("i", {"k": "b", "v": 103}), ("bad", "no input port 7 on u")]


def test_from_keep_makes_a_stream_source_a_window():
    s = element("s", "stream", KV)
    d = derived("window", sources=(("a", "s", keep("rows", count=2)),))
    eng = Engine(*typed_parts(d, plan(s, d)))
    out, _ = run(eng, [ev("i", 1, k="a", v=1), ev("i", 2, k="b", v=2), ev("i", 3, k="c", v=3)])
    assert out == [("i", {"k": "a", "v": 1}), ("i", {"k": "b", "v": 2}),
                   ("d", {"k": "a", "v": 1}), ("i", {"k": "c", "v": 3})]


def test_from_keep_time_on_a_source_expires_downstream():
    d = derived("window", sources=(("a", "src", keep("time", millis=10)),))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    state = eng.initial_state()
    eng.process(state, [ev("i", 1, k="a", v=1)], 100)
    assert eng.next_deadline(state) == 110
    assert eng.expire(state, 110) == [Emit("d", 1, {"k": "a", "v": 1})]
    assert eng.next_deadline(state) is None


def test_failing_expression_makes_a_bad_record_and_continues():
    d = derived("stream", items=(("k", "a.k"), ("v", "to_integer(a.k)")))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="x", v=1), ev("i", 2, k="7", v=1)])
    assert out == [("bad", "cannot convert 'x' to integer"), ("i", {"k": "7", "v": 7})]


def test_partitions_variable_is_bound():
    d = derived("stream", items=(("k", "a.k"), ("v", "d_partitions")), partitions=4)
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, _ = run(eng, [ev("i", 1, k="x", v=1)])
    assert out == [("i", {"k": "x", "v": 4})]


# --- state: pickling and sharing ----------------------------------------------------------------

def test_pickled_state_continues_the_same():
    d = derived("window", keep_=keep("rows", count=2), sources=(("a", "src", keep("time", millis=50)),))
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    events = [ev("i", 1, k="a", v=1), ev("i", 2, k="b", v=2), ev("u", 3, k="a", v=3),
              ev("i", 4, k="c", v=4), ev("d", 5, k="b")]
    whole, _ = run(eng, events)
    state = eng.initial_state()
    first = ops(eng.process(state, events[:2], 0))
    state = pickle.loads(pickle.dumps(state))
    rest = ops(eng.process(state, events[2:], 0))
    assert first + rest == whole
    assert ops(eng.expire(pickle.loads(pickle.dumps(state)), 50)) == ops(eng.expire(state, 50))


def test_one_engine_serves_many_instances():
    w = input_window(keep("rows", count=1))
    eng = Engine(*typed_parts(w, plan(w)))
    s1, s2 = eng.initial_state(), eng.initial_state()
    assert ops(eng.process(s1, [ev("i", 1, k="a", v=1)], 0)) == [("i", {"k": "a", "v": 1})]
    assert ops(eng.process(s2, [ev("i", 1, k="b", v=1)], 0)) == [("i", {"k": "b", "v": 1})]
    assert ops(eng.process(s1, [ev("i", 2, k="c", v=1)], 0))[0] == ("d", {"k": "a", "v": 1})
    assert list(s2["input"]["store"]["rows"]) == [("b",)]


# --- aggregation and join (the other engineer's Aggregator and Joiner) -------------------------

def agg_select(sources, items, aggregates, group_by, where=None, joins=()):
    sel = select(sources, items, where, joins)
    sel["aggregates"] = [{"name": name, "fn": fn, "args": [expr(a) for a in args],
                          "distinct": False} for name, fn, args in aggregates]
    sel["group_by"] = [expr(g) for g in group_by]
    return sel


@pytest.mark.skipif(not HAS_AGG, reason="runtime/engine/aggregate.py not there yet")
def test_avg_over_from_keep_rows_retracts_evicted_rows():
    s = element("s", "stream", [("g", "string"), ("v", "float")])
    sel = agg_select([("a", "s", keep("rows", count=2))], [("g", "a.g"), ("m", "__agg0")],
                     [("__agg0", "avg", ["a.v"])], ["a.g"])
    d = element("d", "window", [("g", "string"), ("m", "float")], ("g",),
                query={"selects": [sel]})
    eng = Engine(*typed_parts(d, plan(s, d)))
    out, _ = run(eng, [ev("i", 1, g="x", v=1.0), ev("i", 2, g="x", v=3.0),
                       ev("i", 3, g="x", v=5.0)])
    # row 3 evicts row 1 and joins the group: one update (avg of 3 and 5), not two
    assert out == [("i", {"g": "x", "m": 1.0}), ("u", {"g": "x", "m": 2.0}),
                   ("u", {"g": "x", "m": 4.0})]


def test_changes_of_one_upstream_row_are_one_transaction_downstream():
    """An upstream KEEP evicting a row and the insert that caused it arrive as two changes with
    one seq: the aggregate goes from the old state to the new one in one update, as with the KEEP
    on the FROM source (the test above); changes of different rows stay apart."""
    w = element("w", "window", [("id", "integer"), ("g", "string"), ("v", "float")], ("id",))
    sel = agg_select([("a", "w")], [("g", "a.g"), ("m", "__agg0"), ("n", "__agg1")],
                     [("__agg0", "avg", ["a.v"]), ("__agg1", "count", [])], ["a.g"])
    d = element("d", "window", [("g", "string"), ("m", "float"), ("n", "integer")], ("g",),
                query={"selects": [sel]})
    eng = Engine(*typed_parts(d, plan(w, d)))
    out, _ = run(eng, [ev("i", 1, id=1, g="x", v=1.0), ev("i", 2, id=2, g="x", v=3.0),
                       ev("d", 3, id=1, g="x", v=1.0), ev("i", 3, id=3, g="x", v=8.0),
                       ev("d", 4, id=2, g="x", v=3.0), ev("u", 5, id=3, g="x", v=9.0)])
    assert out == [("i", {"g": "x", "m": 1.0, "n": 1}), ("u", {"g": "x", "m": 2.0, "n": 2}),
                   ("u", {"g": "x", "m": 5.5, "n": 2}),  # not (3.0, 1) in between
                   ("u", {"g": "x", "m": 8.0, "n": 1}), ("u", {"g": "x", "m": 9.0, "n": 1})]


@pytest.mark.skipif(not HAS_AGG, reason="runtime/engine/aggregate.py not there yet")
def test_keep_time_on_aggregate_window_drops_the_group():
    s = element("s", "stream", [("g", "string"), ("v", "integer")])
    sel = agg_select([("a", "s")], [("g", "a.g"), ("m", "__agg0")],
                     [("__agg0", "max", ["a.v"])], ["a.g"])
    d = element("d", "window", [("g", "string"), ("m", "integer")], ("g",),
                keep=keep("time", millis=100), query={"selects": [sel]})
    eng = Engine(*typed_parts(d, plan(s, d)))
    state = eng.initial_state()
    eng.process(state, [ev("i", 1, g="x", v=9)], 0)
    assert ops(eng.expire(state, 100)) == [("d", {"g": "x", "m": 9})]
    # the group started again: the old maximum is gone
    assert ops(eng.process(state, [ev("i", 2, g="x", v=1)], 200)) == [("i", {"g": "x", "m": 1})]


@pytest.mark.skipif(not HAS_JOIN, reason="runtime/engine/join.py not there yet")
def test_join_of_two_windows_then_where():
    left = input_window(keep("all"), name="l")
    right = input_window(keep("all"), name="r")
    sel = select([("a", "l"), ("b", "r")], [("k", "a.k"), ("v", "a.v + b.v")],
                 where="b.v > 0", joins=[{"kind": "inner", "on": expr("a.k = b.k")}])
    d = element("j", "window", KV, ("k",), query={"selects": [sel]})
    eng = Engine(*typed_parts(d, plan(left, right, d)))
    out, _ = run(eng, [ev("i", 1, 0, k="a", v=1), ev("i", 2, 1, k="a", v=10),
                       ev("u", 3, 1, k="a", v=-1), ev("u", 4, 1, k="a", v=20)])
    assert out == [("i", {"k": "a", "v": 11}), ("d", {"k": "a", "v": 11}),
                   ("i", {"k": "a", "v": 21})]



@pytest.mark.skipif(not HAS_JOIN, reason="runtime/engine/join.py not there yet")
def test_join_output_row_from_zero_to_minus_zero_is_an_update():
    kf = [("k", "string"), ("v", "float")]
    left = input_window(keep("all"), name="l", columns=kf)
    right = input_window(keep("all"), name="r", columns=kf)
    sel = select([("a", "l"), ("b", "r")], [("k", "a.k"), ("v", "a.v * b.v")],
                 joins=[{"kind": "inner", "on": expr("a.k = b.k")}])
    d = element("j", "window", kf, ("k",), query={"selects": [sel]})
    eng = Engine(*typed_parts(d, plan(left, right, d)))
    out, _ = run(eng, [ev("i", 1, 0, k="a", v=0.0), ev("i", 2, 1, k="a", v=1.0),
                       ev("u", 3, 0, k="a", v=-0.0), ev("u", 4, 0, k="a", v=-0.0),
                       ev("u", 5, 1, k="a", v=-1.0)])
    assert [(op, row["k"], repr(row["v"])) for op, row in out] == [
        ("i", "a", "0.0"), ("u", "a", "-0.0"), ("u", "a", "0.0")]

# --- more edges ---------------------------------------------------------------------------------

def test_input_delta_stream_passes_opcodes_through():
    d = element("ds", "delta stream", KV, ("k",), autogenerate={"columns": ["v"], "start": None})
    eng = Engine(*typed_parts(d, plan(d)))
    out, state = run(eng, [ev("i", 1, k="a"), ev("p", 2, k="a", v=5), ev("s", 3, k="a", v=5)])
    assert out == [("i", {"k": "a", "v": 0}), ("u", {"k": "a", "v": 5}), ("d", {"k": "a", "v": 5})]
    assert state["input"]["store"] is None


def test_upsert_of_a_new_key_autogenerates():
    w = input_window(columns=[("k", "string"), ("n", "long")],
                     autogenerate={"columns": ["n"], "start": None})
    eng = Engine(*typed_parts(w, plan(w)))
    out, _ = run(eng, [ev("p", 1, k="a"), ev("p", 2, k="a", n=9), ev("p", 3, k="b")])
    assert out == [("i", {"k": "a", "n": 0}), ("u", {"k": "a", "n": 9}), ("i", {"k": "b", "n": 1})]


def test_update_moving_a_row_to_another_per_group():
    store = Store(keep_from_json(keep("rows", count=1, per=["g"])))
    st = store.initial_state()
    store.upsert(st, ("a",), {"g": 1}, 1, 0)
    store.upsert(st, ("b",), {"g": 2}, 2, 0)
    changes = store.upsert(st, ("a",), {"g": 2}, 3, 0)
    assert [(c.op, c.key) for c in changes] == [("d", ("b",)), ("u", ("a",))]
    assert st["groups"] == {(2,): {("a",): None}}


def test_unknown_opcode_on_a_derived_element_is_bad():
    d = derived("window")
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    assert run(eng, [ev("z", 1, k="a", v=1)])[0] == [("bad", "unknown opcode 'z'")]


def test_failing_where_is_bad_and_the_mirror_still_follows_the_source():
    d = derived("window", where="to_integer(a.k) > 0")
    eng = Engine(*typed_parts(d, plan(SRC, d)))
    out, state = run(eng, [ev("i", 1, k="x", v=1), ev("i", 2, k="5", v=1)])
    assert out == [("bad", "cannot convert 'x' to integer"), ("i", {"k": "5", "v": 1})]
    assert set(state["selects"][0]["sources"][0]["rows"]) == {("x",), ("5",)}


def test_many_rows_stay_fast():
    w = input_window(keep("rows", count=500))
    eng = Engine(*typed_parts(w, plan(w)))
    state = eng.initial_state()
    out = eng.process(state, [ev("i", i, k=str(i), v=i) for i in range(5000)], 0)
    assert len(out) == 5000 + 4500
    assert len(state["input"]["store"]["rows"]) == 500


def test_consolidate_merges_changes_of_one_event_per_key():
    a1, a2, b1 = {"v": 1}, {"v": 2}, {"v": 3}
    merged = consolidate([Change("u", ("a",), a1, a2, 1), Change("i", ("b",), None, b1, 1),
                          Change("u", ("a",), a2, b1, 1), Change("d", ("b",), b1, None, 1)])
    assert merged == [Change("u", ("a",), a1, b1, 1)]
    assert consolidate([Change("d", ("a",), a1, None, 1), Change("i", ("a",), None, a2, 1)]) == \
        [Change("u", ("a",), a1, a2, 1)]
    assert consolidate([Change("i", ("a",), None, a1, 1), Change("u", ("a",), a1, a2, 1),
                        Change("d", ("a",), a2, None, 1)]) == []


def test_plan_from_the_planner(tmp_path):
    from planned import plan_json
    src = tmp_path / "p.ccl"
    src.write_text(
        "create input stream priceS schema (isin string, price money(2));\n"
        "create output window lastW primary key (isin) as\n"
        "  select * from priceS keep 2 rows where priceS.price > 1;\n")
    built, diags = plan_json(str(src))
    assert built is not None, [str(d) for d in diags]
    last = next(e for e in built["elements"] if e["name"] == "lastW")
    eng = Engine(*typed_parts(last, built))
    out, _ = run(eng, [ev("i", i, isin=c, price=i) for i, c in enumerate("abcd")])
    assert [(op, v["isin"]) for op, v in out] == [("i", "c"), ("i", "d")]
    out, _ = run(eng, [ev("i", i, isin=c, price=5) for i, c in enumerate("abc")])
    assert [(op, v["isin"]) for op, v in out] == [("i", "a"), ("i", "b"), ("d", "a"), ("i", "c")]


def test_outer_join_reads_nulls_from_the_missing_side(tmp_path):
    from planned import plan_json
    src = tmp_path / "p.ccl"
    src.write_text(
        "create input window o schema (id integer, cust string) primary key (id);\n"
        "create input window c schema (cust string, country string) primary key (cust);\n"
        "create output window j primary key (id) as\n"
        "  select o.id, c.country from o left join c on o.cust = c.cust;\n")
    built, diags = plan_json(str(src))
    assert built is not None, [str(d) for d in diags]
    eng = Engine(*typed_parts(next(e for e in built["elements"] if e["name"] == "j"), built))
    state = eng.initial_state()
    out = eng.process(state, [Event(0, "i", 1, {"id": 1, "cust": "a"}),
                              Event(1, "i", 2, {"cust": "a", "country": "FR"}),
                              Event(1, "d", 3, {"cust": "a", "country": "FR"})], 0)
    assert [(o.op, o.values) for o in out] == [
        ("i", {"id": 1, "country": None}), ("u", {"id": 1, "country": "FR"}),
        ("u", {"id": 1, "country": None})]


def test_aggregation_over_a_stream_keeps_no_input_rows():
    """A stream source without FROM KEEP only inserts: groups keep running values, not rows (the
    same stream with a FROM KEEP, whose rows leave again, keeps them)."""
    s = element("s", "stream", [("g", "string"), ("v", "integer")])
    for source, stored in ((("a", "s"), False), (("a", "s", keep("rows", count=5)), True)):
        sel = agg_select([source], [("g", "a.g"), ("m", "__agg0"), ("t", "__agg1")],
                         [("__agg0", "max", ["a.v"]), ("__agg1", "sum", ["a.v"])], ["a.g"])
        d = element("d", "window", [("g", "string"), ("m", "integer"), ("t", "integer")], ("g",),
                    query={"selects": [sel]})
        eng = Engine(*typed_parts(d, plan(s, d)))
        out, state = run(eng, [ev("i", 1, g="x", v=4), ev("u", 2, g="x", v=9), ev("d", 3, g="x", v=1),
                               ev("i", 4, g="y", v=2)])
        assert out == [("i", {"g": "x", "m": 4, "t": 4}), ("u", {"g": "x", "m": 9, "t": 13}),
                       ("i", {"g": "y", "m": 2, "t": 2})]
        agg = state["selects"][0]["agg"]
        assert bool(agg["inputs"]) == stored
        assert all(bool(g["rows"]) == stored for g in agg["groups"].values())


def test_getrowid_and_nextval_in_a_select():
    """getrowid(src) is the sequence number of the row being processed; nextval() counts per
    instance state, across process() calls (batches)."""
    s = element("s", "stream", KV)
    o = element("o", "stream", [("k", "string"), ("rid", "long"), ("n", "long")],
                query={"selects": [select([("s", "s")], [("k", "s.k"), ("rid", "getrowid(s)"),
                                                          ("n", "nextval()")])]})
    eng = Engine(*typed_parts(o, plan(s, o)))
    out, state = run(eng, [ev("i", 10, k="a", v=1), ev("i", 4294967297, k="b", v=2)])
    assert out == [("i", {"k": "a", "rid": 10, "n": 1}), ("i", {"k": "b", "rid": 4294967297, "n": 2})]
    out, _ = run(eng, [ev("i", 11, k="c", v=3)], state=pickle.loads(pickle.dumps(state)))
    assert out == [("i", {"k": "c", "rid": 11, "n": 3})]


def test_a_column_of_no_known_type_is_carried_as_text():
    """runtime.types carries a column the analysis could not type as a string: the engine turns its
    values into text (a date-time given to pyarrow as a string column broke the query)."""
    import datetime as dt

    from runtime.engine.expr import coerce_row
    row = coerce_row({"a": dt.datetime(2024, 1, 2, 3, 4, 5), "b": 7, "c": None},
                     [["a", "any"], ["b", "any"], ["c", "any"]])
    assert row == {"a": "2024-01-02 03:04:05", "b": "7", "c": None}
