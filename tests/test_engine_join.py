"""Joiner (runtime/engine/join.py): every join kind, both sides changing, checked against a join
recomputed from scratch after each change; stream-window joins; pickled state."""
import pickle
import random

import pytest

from ccl.syntax import nodes as n
from ccl.syntax.parser import parse_text
from runtime.engine.changes import Change
from runtime.engine.expr import Expressions
from runtime.engine.join import Joiner, JoinSource
from planned import typed_select

COLS = {"a": [["k", "integer"], ["x", "integer"]],
        "b": [["k", "integer"], ["y", "integer"]],
        "c": [["k", "integer"], ["z", "integer"]]}


def expr(text: str) -> dict:
    """The plan JSON of a CCL expression (columns qualified by alias)."""
    project, diags = parse_text(f"CREATE OUTPUT STREAM o AS SELECT {text} e FROM a;")
    assert not diags, diags
    return n.to_json(project.statements[0].query.items[0].expr)


def make(kinds, ons, source_kinds=None):
    """A Joiner over sources a, b[, c] joined left-deep with ``kinds``/``ons``."""
    aliases = ["a", "b", "c"][: len(kinds) + 1]
    source_kinds = source_kinds or ["window"] * len(aliases)
    select = {"sources": [{"alias": al, "element": al.upper(), "keep": None} for al in aliases],
              "joins": [{"kind": k, "on": expr(on)} for k, on in zip(kinds, ons)]}
    sources = [JoinSource(al, sk, [c for c, _ in COLS[al]]) for al, sk in zip(aliases, source_kinds)]
    exprs = Expressions({}, {al: COLS[al] for al in aliases})
    return Joiner(typed_select(select), exprs, sources), select


def reference(select, tables):
    """The joined rows, recomputed from the sources' rows (brute force, left-deep)."""
    aliases = [s["alias"] for s in select["sources"]]
    exprs = Expressions({}, COLS)
    acc = {(k,): {aliases[0]: r} for k, r in tables[0].items()}
    for j, join in enumerate(select["joins"]):
        on, right, ral = exprs.compile(join["on"]), tables[j + 1], aliases[j + 1]
        left_als = aliases[: j + 1]

        def ok(lrow, rrow):
            rows = {al: (lrow.get(al) or {c: None for c, _ in COLS[al]}) for al in left_als}
            rows[ral] = rrow
            return on(rows) is True
        out, matched_right = {}, set()
        for lk, lrow in acc.items():
            hit = [rk for rk, rrow in right.items() if ok(lrow, rrow)]
            matched_right.update(hit)
            for rk in hit:
                out[lk + (rk,)] = {**lrow, ral: right[rk]}
            if not hit and join["kind"] in ("left", "full"):
                out[lk + (None,)] = {**lrow, ral: None}
        if join["kind"] in ("right", "full"):
            for rk, rrow in right.items():
                if rk not in matched_right:
                    out[(None,) * len(left_als) + (rk,)] = {**{a: None for a in left_als}, ral: rrow}
        acc = out
    return acc


def apply_to(view, changes):
    """Apply output changes to a materialised view, checking each is consistent with it."""
    for ch in changes:
        if ch.op == "i":
            assert ch.key not in view, ch
            view[ch.key] = ch.new
        elif ch.op == "u":
            assert view.get(ch.key) == ch.old, ch
            assert ch.old != ch.new
            view[ch.key] = ch.new
        else:
            assert view.get(ch.key) == ch.old, ch
            del view[ch.key]


def random_run(kinds, ons, steps=120, seed=1, pickle_every=25):
    joiner, select = make(kinds, ons)
    state = joiner.initial_state()
    tables = [{} for _ in range(len(kinds) + 1)]
    view = {}
    rnd = random.Random(seed)
    for step in range(steps):
        i = rnd.randrange(len(tables))
        key = (rnd.randrange(4),)
        col = COLS["abc"[i]][1][0]
        old = tables[i].get(key)
        if old is not None and rnd.random() < 0.4:
            change = Change("d", key, old, None, step)
            del tables[i][key]
        else:
            new = {"k": key[0], col: rnd.randrange(3)}
            change = Change("u" if old else "i", key, old, new, step)
            tables[i][key] = new
        apply_to(view, joiner.apply(state, i, change))
        assert view == reference(select, tables), (step, change)
        if step % pickle_every == 0:
            state = pickle.loads(pickle.dumps(state))
    return view


@pytest.mark.parametrize("kind", ["inner", "left", "right", "full"])
@pytest.mark.parametrize("on", ["a.x = b.y", "a.x < b.y", "a.x = b.y and a.k <> b.k", "true"])
def test_two_way_matches_recomputed_join(kind, on):
    random_run([kind], [on])


@pytest.mark.parametrize("kinds", [["left", "inner"], ["full", "left"], ["inner", "right"],
                                   ["right", "full"]])
def test_three_way_left_deep(kinds):
    random_run(kinds, ["a.x = b.y", "b.y = c.z or a.x = c.z"], steps=150, seed=7)
    random_run(kinds, ["a.x = b.y", "c.z = b.y"], steps=150, seed=3)


def test_left_join_transitions():
    joiner, _ = make(["left"], ["a.x = b.y"])
    st = joiner.initial_state()
    out = joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 5}, 1))
    assert [(c.op, c.key, c.new["b"]) for c in out] == [("i", ((1,), None), None)]
    out = joiner.apply(st, 1, Change("i", (7,), None, {"k": 7, "y": 5}, 2))
    assert [(c.op, c.key) for c in out] == [("d", ((1,), None)), ("i", ((1,), (7,)))]
    out = joiner.apply(st, 1, Change("u", (7,), {"k": 7, "y": 5}, {"k": 7, "y": 6}, 3))
    assert [(c.op, c.key) for c in out] == [("d", ((1,), (7,))), ("i", ((1,), None))]


def test_update_keeps_match_is_update():
    joiner, _ = make(["inner"], ["a.k = b.k"])
    st = joiner.initial_state()
    joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 5}, 1))
    joiner.apply(st, 1, Change("i", (1,), None, {"k": 1, "y": 2}, 2))
    out = joiner.apply(st, 1, Change("u", (1,), {"k": 1, "y": 2}, {"k": 1, "y": 3}, 3))
    assert [(c.op, c.old["b"]["y"], c.new["b"]["y"]) for c in out] == [("u", 2, 3)]



def test_update_to_the_other_zero_is_an_update():
    # -0.0 where 0.0 was shows differently: a change (same_row), as for every other engine row;
    # the same row again is none
    joiner, _ = make(["inner"], ["a.k = b.k"])
    st = joiner.initial_state()
    joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 0.0}, 1))
    joiner.apply(st, 1, Change("i", (1,), None, {"k": 1, "y": 2}, 2))
    out = joiner.apply(st, 0, Change("u", (1,), {"k": 1, "x": 0.0}, {"k": 1, "x": -0.0}, 3))
    assert [(c.op, c.key, repr(c.old["a"]["x"]), repr(c.new["a"]["x"])) for c in out] == \
        [("u", ((1,), (1,)), "0.0", "-0.0")]
    assert joiner.apply(st, 0, Change("u", (1,), {"k": 1, "x": -0.0}, {"k": 1, "x": -0.0}, 4)) == []
    out = joiner.apply(st, 1, Change("u", (1,), {"k": 1, "y": 2}, {"k": 1, "y": 2.0}, 5))
    assert out == []  # (equal, no zero)
    # the missing side of an outer join stays missing: no change either
    joiner, _ = make(["left"], ["a.x = b.y"])
    st = joiner.initial_state()
    joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 0.0}, 1))
    out = joiner.apply(st, 0, Change("u", (1,), {"k": 1, "x": 0.0}, {"k": 1, "x": -0.0}, 2))
    assert [(c.op, c.key, repr(c.new["a"]["x"]), c.new["b"]) for c in out] == \
        [("u", ((1,), None), "-0.0", None)]
    assert joiner.apply(st, 0, Change("u", (1,), {"k": 1, "x": -0.0}, {"k": 1, "x": -0.0}, 3)) == []

def test_null_keys_never_match():
    joiner, _ = make(["full"], ["a.x = b.y"])
    st = joiner.initial_state()
    joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": None}, 1))
    out = joiner.apply(st, 1, Change("i", (1,), None, {"k": 1, "y": None}, 2))
    assert [(c.op, c.key) for c in out] == [("i", (None, (1,)))]


def test_stream_window_join_inserts_only():
    joiner, _ = make(["left"], ["a.x = b.y"], ["stream", "window"])
    st = joiner.initial_state()
    assert joiner.apply(st, 1, Change("i", (1,), None, {"k": 1, "y": 5}, 1)) == []
    out = joiner.apply(st, 0, Change("i", (2,), None, {"k": 0, "x": 5}, 2))
    assert [(c.op, c.key, c.new["b"]["y"]) for c in out] == [("i", ((2,), (1,)), 5)]
    assert joiner.apply(st, 1, Change("d", (1,), {"k": 1, "y": 5}, None, 3)) == []
    out = joiner.apply(st, 0, Change("i", (4,), None, {"k": 0, "x": 5}, 4))
    assert [(c.op, c.key, c.new["b"]) for c in out] == [("i", ((4,), None), None)]
    assert st["acc"][0] == {}  # the stream's rows are not stored


def test_window_stream_inner_and_three_way_with_stream_first():
    joiner, _ = make(["inner", "left"], ["a.x = b.y", "c.k = b.k"], ["stream", "window", "window"])
    st = joiner.initial_state()
    joiner.apply(st, 1, Change("i", (1,), None, {"k": 1, "y": 5}, 1))
    joiner.apply(st, 2, Change("i", (1,), None, {"k": 1, "z": 9}, 2))
    out = joiner.apply(st, 0, Change("i", (3,), None, {"k": 0, "x": 5}, 3))
    assert [(c.op, c.key, c.new["c"]["z"]) for c in out] == [("i", ((3,), (1,), (1,)), 9)]
    # the window on the left, stream on the right
    joiner, _ = make(["inner"], ["a.x = b.y"], ["window", "stream"])
    st = joiner.initial_state()
    joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 5}, 1))
    out = joiner.apply(st, 1, Change("i", (2,), None, {"k": 0, "y": 5}, 2))
    assert [(c.op, c.key) for c in out] == [("i", ((1,), (2,)))]
    assert joiner.apply(st, 0, Change("d", (1,), {"k": 1, "x": 5}, None, 3)) == []


def test_lax_input_and_single_source():
    joiner, _ = make(["inner"], ["a.k = b.k"])
    st = joiner.initial_state()
    assert joiner.apply(st, 0, Change("d", (9,), {"k": 9, "x": 1}, None, 1)) == []
    joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 1}, 2))
    joiner.apply(st, 1, Change("i", (1,), None, {"k": 1, "y": 1}, 3))
    out = joiner.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 2}, 4))  # insert = update
    assert [c.op for c in out] == ["u"]
    single = Joiner(typed_select({"sources": [{"alias": "a", "element": "A", "keep": None}],
                                  "joins": []}),
                    Expressions({}, COLS), [JoinSource("a", "window", ["k", "x"])])
    st = single.initial_state()
    out = single.apply(st, 0, Change("i", (1,), None, {"k": 1, "x": 1}, 1))
    assert out == [Change("i", ((1,),), None, {"a": {"k": 1, "x": 1}}, 1)]
