"""Aggregator (runtime/engine/aggregate.py): every aggregate with retraction, HAVING and GROUP
FILTER transitions, insert-only mode, KEEP eviction, pickled state, and a randomized run checked
against aggregates recomputed from scratch."""
import math
import pickle
import random
from decimal import Decimal

import pytest

from ccl import nodes as n
from ccl.parser import parse_text
from ccl.splash import SplashError
from runtime.engine.aggregate import Aggregator
from runtime.engine.changes import Change
from runtime.engine.expr import Expressions

TYPES = {"p": [["isin", "string"], ["price", "float"], ["vol", "integer"], ["m", "money(2)"]]}
AGGS = {"count", "sum", "avg", "min", "max", "first", "last", "vwap", "valueinserted"}


def _strip(node):
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("line", "col")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _replace_aggs(node, aggs):
    """Replace aggregate calls by Var("__aggN"), collecting them in ``aggs``."""
    if isinstance(node, list):
        return [_replace_aggs(v, aggs) for v in node]
    if not isinstance(node, dict):
        return node
    if node.get("node") == "Call" and node["func"]["name"].lower() in AGGS:
        spec = {"fn": node["func"]["name"].lower(), "args": node["args"],
                "distinct": node["distinct"]}
        if spec not in [{k: a[k] for k in spec} for a in aggs]:
            aggs.append({"name": f"__agg{len(aggs)}", **spec})
        name = next(a["name"] for a in aggs if {k: a[k] for k in spec} == spec)
        return {"node": "Var", "name": {"node": "Ident", "name": name}}
    return {k: _replace_aggs(v, aggs) for k, v in node.items()}


def plan_select(sql):
    """A plan Select from ``SELECT ...`` (CCL text with qualified columns)."""
    project, diags = parse_text(f"CREATE OUTPUT WINDOW o PRIMARY KEY DEDUCED AS {sql};")
    assert not diags, diags
    q = _strip(n.to_json(project.statements[0].query))
    aggs = []
    items = []
    for it in q["items"]:
        name = it["alias"]["name"] if it["alias"] else it["expr"]["field"]["name"]
        items.append({"name": name, "expr": _replace_aggs(it["expr"], aggs)})
    return {"sources": [{"alias": "p", "element": "P", "keep": None}], "joins": [],
            "where": None, "group_by": q["group_by"],
            "group_filter": _replace_aggs(q["group_filter"], aggs),
            "having": _replace_aggs(q["having"], aggs), "aggregates": aggs, "items": items}


def make(sql, columns, key=("isin",), retracting=True):
    agg = Aggregator(plan_select(sql), Expressions({}, TYPES), [list(c) for c in columns],
                     list(key), retracting=retracting)
    return agg, agg.initial_state()


def row(isin, price=None, vol=None, m=None):
    return {"p": {"isin": isin, "price": price, "vol": vol, "m": m}}


class Feed:
    """Sends i/u/d changes of keyed input rows, remembering each row's current value."""

    def __init__(self, agg, state):
        self.agg, self.state, self.rows, self.seq = agg, state, {}, 0

    def __call__(self, op, key, new=None):
        self.seq += 1
        old = self.rows.get(key)
        if op == "d":
            del self.rows[key]
        else:
            self.rows[key] = new
        return self.agg.apply(self.state, Change(op, (key,), old, new, self.seq))


def ops(changes):
    return [(c.op, c.key, c.new) for c in changes]


def test_max_retraction_and_moving_between_groups():
    agg, st = make("SELECT p.isin, max(p.price) mx, min(p.price) mn, count(*) c FROM P p "
                   "GROUP BY p.isin", [["isin", "string"], ["mx", "float"], ["mn", "float"],
                                       ["c", "long"]])
    f = Feed(agg, st)
    assert ops(f("i", 1, row("A", 10))) == [("i", ("A",), {"isin": "A", "mx": 10.0, "mn": 10.0,
                                                          "c": 1})]
    f("i", 2, row("A", 30))
    f("i", 3, row("A", 20))
    out = f("d", 2)  # delete of the current max
    assert [(c.op, c.new["mx"], c.new["c"]) for c in out] == [("u", 20.0, 2)]
    out = f("u", 3, row("B", 5))  # moves to group B
    assert [(c.op, c.key, c.new["mx"]) for c in out] == [("u", ("A",), 10.0), ("i", ("B",), 5.0)]
    out = f("d", 1)
    assert [(c.op, c.key, c.old["mx"]) for c in out] == [("d", ("A",), 10.0)]
    assert list(st["groups"]) == [("B",)]


def test_sum_avg_count_nulls_and_types():
    agg, st = make("SELECT p.isin, sum(p.vol) s, avg(p.vol) a, count(p.price) c, sum(p.m) sm, "
                   "avg(p.m) am FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["s", "long"], ["a", "float"], ["c", "long"],
                    ["sm", "money(2)"], ["am", "money(2)"]])
    f = Feed(agg, st)
    out = f("i", 1, row("A", None, None, None))
    assert out[0].new == {"isin": "A", "s": None, "a": None, "c": 0, "sm": None, "am": None}
    f("i", 2, row("A", 1.0, 3, Decimal("1.10")))
    out = f("i", 3, row("A", 2.0, 4, Decimal("2.20")))
    assert out[0].new == {"isin": "A", "s": 7, "a": 3.5, "c": 2, "sm": Decimal("3.30"),
                          "am": Decimal("1.65")}
    out = f("d", 2)
    assert out[0].new == {"isin": "A", "s": 4, "a": 4.0, "c": 1, "sm": Decimal("2.20"),
                          "am": Decimal("2.20")}
    out = f("d", 3)
    assert out[0].new["s"] is None and out[0].new["c"] == 0


def test_first_last_valueinserted_and_non_aggregated_column():
    agg, st = make("SELECT p.isin, first(p.price) f, last(p.price) l, valueinserted(p.price) v, "
                   "p.vol vol FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["f", "float"], ["l", "float"], ["v", "float"],
                    ["vol", "integer"]])
    f = Feed(agg, st)
    f("i", 1, row("A", 1, 10))
    f("i", 2, row("A", 2, 20))
    out = f("i", 3, row("A", 3, 30))
    assert out[0].new == {"isin": "A", "f": 1.0, "l": 3.0, "v": 3.0, "vol": 30}
    out = f("u", 2, row("A", 22, 21))  # update in place: keeps its position, is the latest value
    assert out[0].new == {"isin": "A", "f": 1.0, "l": 3.0, "v": 22.0, "vol": 21}
    out = f("d", 1)
    assert (out[0].new["f"], out[0].new["vol"]) == (22.0, 10)  # delete: the deleted row's vol
    out = f("d", 3)
    assert out[0].new == {"isin": "A", "f": 22.0, "l": 22.0, "v": 22.0, "vol": 30}


def test_count_distinct_and_vwap():
    agg, st = make("SELECT p.isin, count(distinct p.vol) d, vwap(p.price, p.vol) w FROM P p "
                   "GROUP BY p.isin", [["isin", "string"], ["d", "long"], ["w", "float"]])
    f = Feed(agg, st)
    f("i", 1, row("A", 10.0, 100))
    f("i", 2, row("A", 20.0, 100))
    out = f("i", 3, row("A", 40.0, 200))
    assert out[0].new == {"isin": "A", "d": 2, "w": 27.5}
    out = f("d", 3)
    assert out[0].new == {"isin": "A", "d": 1, "w": 15.0}
    out = f("u", 2, row("A", 20.0, 300))
    assert out[0].new == {"isin": "A", "d": 2, "w": 17.5}


def test_having_transitions_and_unchanged_output():
    agg, st = make("SELECT p.isin, sum(p.vol) s FROM P p GROUP BY p.isin HAVING sum(p.vol) > 10",
                   [["isin", "string"], ["s", "long"]])
    f = Feed(agg, st)
    assert f("i", 1, row("A", 1, 5)) == []
    assert ops(f("i", 2, row("A", 1, 7))) == [("i", ("A",), {"isin": "A", "s": 12})]
    assert [c.op for c in f("u", 2, row("A", 1, 8))] == ["u"]
    assert f("u", 2, row("A", 2, 8)) == []  # output row unchanged
    assert [(c.op, c.old) for c in f("d", 1)] == [("d", {"isin": "A", "s": 13})]
    assert f("d", 2) == []


def test_group_filter_transitions():
    agg, st = make("SELECT p.isin, count(*) c FROM P p GROUP FILTER p.vol > 0 GROUP BY p.isin",
                   [["isin", "string"], ["c", "long"]])
    f = Feed(agg, st)
    assert f("i", 1, row("A", 1, 0)) == []
    assert ops(f("u", 1, row("A", 1, 5))) == [("i", ("A",), {"isin": "A", "c": 1})]
    f("i", 2, row("A", 1, 5))
    assert [(c.op, c.new["c"]) for c in f("u", 1, row("A", 1, -1))] == [("u", 1)]
    assert f("d", 1) == []
    assert [c.op for c in f("u", 2, row("A", 1, -1))] == ["d"]


def test_insert_only_mode_and_drop_group():
    agg, st = make("SELECT p.isin, max(p.price) mx, first(p.price) f, last(p.price) l FROM P p "
                   "GROUP BY p.isin", [["isin", "string"], ["mx", "float"], ["f", "float"],
                                       ["l", "float"]], retracting=False)
    f = Feed(agg, st)
    f("i", 1, row("A", 3))
    out = f("i", 2, row("A", 1))
    assert out[0].new == {"isin": "A", "mx": 3.0, "f": 3.0, "l": 1.0}
    assert st["inputs"] == {} and st["groups"][("A",)]["rows"] == {}
    with pytest.raises(SplashError):
        agg.apply(st, Change("d", (1,), row("A", 3), None, 9))
    agg.drop_group(st, ("A",))
    assert ops(f("i", 3, row("A", 2))) == [("i", ("A",), {"isin": "A", "mx": 2.0, "f": 2.0,
                                                          "l": 2.0})]


def test_drop_group_retracting_forgets_rows():
    agg, st = make("SELECT p.isin, count(*) c FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["c", "long"]])
    f = Feed(agg, st)
    f("i", 1, row("A"))
    agg.drop_group(st, ("A",))
    assert f("d", 1) == [] and st == agg.initial_state()


def test_no_group_by_and_expression_errors_propagate():
    agg, st = make("SELECT count(*) c, max(p.price) / p.vol r FROM P p", [["c", "long"],
                                                                           ["r", "float"]], key=())
    f = Feed(agg, st)
    assert ops(f("i", 1, row("A", 4.0, 2))) == [("i", (), {"c": 1, "r": 2.0})]
    with pytest.raises(SplashError):
        f("i", 2, {"p": {"isin": "A", "price": 4.0}})  # no column vol


def _reference(rows, since):
    """Aggregates recomputed from the current input rows (for the randomized test)."""
    groups = {}
    for k, r in rows.items():
        groups.setdefault(r["p"]["isin"], []).append((since[k], r["p"]["price"]))
    out = {}
    for g, items in groups.items():
        prices = [p for _, p in items if p is not None]
        items.sort()
        out[(g,)] = {"isin": g, "c": len(items), "s": float(sum(prices)) if prices else None,
                     "mx": max(prices) if prices else None, "mn": min(prices) if prices else None,
                     "d": len(set(prices)), "f": items[0][1], "l": items[-1][1]}
    return out


def test_randomized_against_recomputation_with_pickling():
    agg, st = make("SELECT p.isin, count(*) c, sum(p.price) s, max(p.price) mx, min(p.price) mn, "
                   "count(distinct p.price) d, first(p.price) f, last(p.price) l FROM P p "
                   "GROUP BY p.isin", [["isin", "string"], ["c", "long"], ["s", "float"],
                                       ["mx", "float"], ["mn", "float"], ["d", "long"],
                                       ["f", "float"], ["l", "float"]])
    f = Feed(agg, st)
    rnd = random.Random(5)
    view, since = {}, {}
    for step in range(300):
        key = rnd.randrange(8)
        if key in f.rows and rnd.random() < 0.35:
            changes = f("d", key)
            del since[key]
        else:
            price = rnd.choice([None, 1.0, 2.0, 3.0, 5.0])
            new = row(rnd.choice("AB"), price)
            op = "u" if key in f.rows else "i"
            if op == "i" or f.rows[key]["p"]["isin"] != new["p"]["isin"]:
                since[key] = f.seq + 1
            changes = f(op, key, new)
        for c in changes:
            if c.op == "d":
                assert view.pop(c.key) == c.old
            else:
                assert view.get(c.key) == c.old
                view[c.key] = c.new
        assert view == _reference(f.rows, since), step
        if step % 40 == 0:
            f.state = pickle.loads(pickle.dumps(f.state))


@pytest.mark.parametrize("retracting", [True, False])
def test_nan_is_the_largest_float_for_min_and_max(retracting):
    """SPLASH (and Spark) order NaN after every number: max is NaN once a NaN arrives, min
    ignores it unless only NaN is left; the order of arrival does not matter."""
    nan = float("nan")
    cols = [["isin", "string"], ["hi", "float"], ["lo", "float"]]
    for prices in ([1.0, nan, 3.0], [nan, 1.0, 3.0], [3.0, 1.0, nan]):
        agg, st = make("SELECT p.isin, max(p.price) hi, min(p.price) lo FROM P p GROUP BY p.isin",
                       cols, retracting=retracting)
        f = Feed(agg, st)
        last = None
        for key, price in enumerate(prices):
            out = f("i", key, row("A", price))
            last = out[-1].new if out else last  # no change, no output
        assert math.isnan(last["hi"]) and last["lo"] == 1.0
    if retracting:  # the NaN leaves: max from the rest; then only NaN is left, for min too
        out = f("d", prices.index(nan))
        assert out[-1].new["hi"] == 3.0 and out[-1].new["lo"] == 1.0
        f("i", 9, row("A", nan))
        f("d", prices.index(3.0))
        out = f("d", prices.index(1.0))
        assert math.isnan(out[-1].new["hi"]) and math.isnan(out[-1].new["lo"])
