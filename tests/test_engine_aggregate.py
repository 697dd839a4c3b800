"""Aggregator (runtime/engine/aggregate.py): every aggregate with retraction, HAVING and GROUP
FILTER transitions, insert-only mode, KEEP eviction, pickled state, randomized runs checked
against aggregates recomputed from scratch (statistics module), and aggregates the engine does
not implement turning their rows into bad records."""
import datetime as dt
import math
import pickle
import random
import statistics
from decimal import Decimal

import pytest

from ccl.syntax import nodes as n
from ccl.splash.functions_data import FUNCTIONS
from ccl.syntax.parser import parse_text
from ccl.splash import SplashError
from runtime.engine.aggregate import SUPPORTED, Aggregator
from runtime.engine.changes import Change
from runtime.engine.element import Engine
from runtime.engine.expr import Expressions
from planned import typed_parts, typed_select
from tests.test_engine_core import element, ev, plan, run

TYPES = {"p": [["isin", "string"], ["price", "float"], ["vol", "integer"], ["m", "money(2)"],
               ["t", "timestamp"]]}
AGGS = {name for name, f in FUNCTIONS.items() if f["kind"] == "aggregate"}


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
    agg = Aggregator(typed_select(plan_select(sql)), Expressions({}, TYPES), [list(c) for c in columns],
                     list(key), retracting=retracting)
    return agg, agg.initial_state()


def row(isin, price=None, vol=None, m=None, t=None):
    return {"p": {"isin": isin, "price": price, "vol": vol, "m": m, "t": t}}


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
    rnd = random.Random(5)

    def new_row():
        return row(rnd.choice("AB"), rnd.choice([None, 1.0, 2.0, 3.0, 5.0]))

    def check(view, rows, since, step):
        assert view == _reference(rows, since), step
    _random_walk(Feed(agg, st), rnd, 300, 8, new_row, check, pickle_every=40)


def _random_walk(f, rnd, steps, keys, new_row, check, pickle_every):
    """Random inserts, updates (in place and between groups) and deletes of ``keys`` row keys
    fed to ``f``; after each step the emitted changes, applied to a view, must match what they
    replace, and ``check(view, rows, since, step)`` (``since``: where each row's group began)."""
    view, since = {}, {}
    for step in range(steps):
        key = rnd.randrange(keys)
        if key in f.rows and rnd.random() < 0.35:
            changes = f("d", key)
            del since[key]
        else:
            new = new_row()
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
        check(view, f.rows, since, step)
        if step % pickle_every == 0:
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


# --- statistics, median, ordered averages, and aggregates the engine does not implement ---------

STATS_SQL = ("SELECT p.isin, stddev(p.price) sd, stddev_samp(p.price) ss, stddev_pop(p.price) sp, "
             "variance(p.price) va, var_samp(p.price) vs, var_pop(p.price) vp, "
             "median(p.price) md, meandeviation(p.price) mdv, weighted_avg(p.price) w, "
             "exp_weighted_avg(p.price, 3) e, lastnonnull(p.price) lnn, "
             "corr(p.price, p.vol) c, covar_pop(p.price, p.vol) cp, covar_samp(p.price, p.vol) cs, "
             "regr_count(p.price, p.vol) rc, regr_avgx(p.price, p.vol) ax, "
             "regr_avgy(p.price, p.vol) ay, regr_sxx(p.price, p.vol) sxx, "
             "regr_syy(p.price, p.vol) syy, regr_sxy(p.price, p.vol) sxy, "
             "regr_slope(p.price, p.vol) sl, regr_intercept(p.price, p.vol) ic, "
             "regr_r2(p.price, p.vol) r2 FROM P p GROUP BY p.isin")
STATS_COLS = [["isin", "string"], ["rc", "long"]] + [
    [c, "float"] for c in ("sd ss sp va vs vp md mdv w e lnn c cp cs ax ay sxx syy sxy sl ic r2"
                           .split())]


def _pairs_reference(pairs):
    """covar/corr/regr_* of (y, x) pairs by the two-pass textbook formulas."""
    n = len(pairs)
    if n == 0:
        return {"rc": 0, **dict.fromkeys("c cp cs ax ay sxx syy sxy sl ic r2".split())}
    ys, xs = [p[0] for p in pairs], [p[1] for p in pairs]
    ay, ax = math.fsum(ys) / n, math.fsum(xs) / n
    sxx = math.fsum((x - ax) ** 2 for x in xs)
    syy = math.fsum((y - ay) ** 2 for y in ys)
    sxy = math.fsum((x - ax) * (y - ay) for y, x in pairs)
    slope = sxy / sxx if sxx else None
    return {"rc": n, "c": sxy / math.sqrt(sxx * syy) if sxx and syy else None, "cp": sxy / n,
            "cs": sxy / (n - 1) if n > 1 else None, "ax": ax, "ay": ay, "sxx": sxx,
            "syy": syy, "sxy": sxy, "sl": slope,
            "ic": None if slope is None else ay - slope * ax,
            "r2": None if not sxx else 1.0 if not syy else sxy * sxy / (sxx * syy)}


def _ordered_reference(prices):
    """weighted_avg (linear weights, newest heaviest) and exp_weighted_avg(., 3) (alpha 1/2) of
    the non-null prices in the order their rows entered the group."""
    if not prices:
        return None, None
    weighted = math.fsum((i + 1) * p for i, p in enumerate(prices))
    ema = prices[0]
    for p in prices[1:]:
        ema = 0.5 * p + 0.5 * ema
    return weighted / (len(prices) * (len(prices) + 1) / 2), ema


def _stats_reference(rows, since):
    groups = {}
    for k, r in rows.items():
        groups.setdefault(r["p"]["isin"], []).append((since[k], r["p"]["price"], r["p"]["vol"]))
    out = {}
    for g, items in groups.items():
        items.sort()
        prices = [p for _, p, _ in items if p is not None]
        two = len(prices) > 1
        mean = statistics.fmean(prices) if prices else None
        w, e = _ordered_reference(prices)
        out[(g,)] = {
            "isin": g, "sd": statistics.stdev(prices) if two else None,
            "ss": statistics.stdev(prices) if two else None,
            "sp": statistics.pstdev(prices) if prices else None,
            "va": statistics.variance(prices) if two else None,
            "vs": statistics.variance(prices) if two else None,
            "vp": statistics.pvariance(prices) if prices else None,
            "md": statistics.median(prices) if prices else None,
            "mdv": statistics.fmean(abs(p - mean) for p in prices) if prices else None,
            "w": w, "e": e, "lnn": prices[-1] if prices else None,
            **_pairs_reference([(p, float(v)) for _, p, v in items
                                if p is not None and v is not None])}
    return out


def _assert_rows_close(got, want, where):
    assert got.keys() == want.keys(), where
    for key, row_ in want.items():
        for col, value in row_.items():
            if value is None or isinstance(value, str):
                assert got[key][col] == value, (where, key, col, got[key][col])
            else:
                assert got[key][col] == pytest.approx(value, rel=1e-9, abs=1e-9), (where, key, col)


def test_statistics_randomized_with_updates_deletes_and_pickling():
    """Every new aggregate over random inserts, updates (in place and between groups) and
    deletes, against the statistics module / textbook formulas over the rows left."""
    agg, st = make(STATS_SQL, STATS_COLS)
    rnd = random.Random(11)

    def new_row():
        return row(rnd.choice("AB"), rnd.choice([None, -4.0, 1.0, 2.5, 2.5, 7.25, 1e6 + 0.1]),
                   rnd.choice([None, 1, 2, 2, 9]))

    def check(view, rows, since, step):
        _assert_rows_close(view, _stats_reference(rows, since), step)
    _random_walk(Feed(agg, st), rnd, 400, 7, new_row, check, pickle_every=50)


def test_statistics_single_row_all_null_and_constant_groups():
    agg, st = make(STATS_SQL, STATS_COLS)
    f = Feed(agg, st)
    out = f("i", 1, row("A", None, None))  # nulls ignored: like an empty group, count 0
    assert out[0].new == {"isin": "A", "rc": 0, **dict.fromkeys(c for c, _ in STATS_COLS[2:])}
    out = f("i", 2, row("A", 5.0, 3))  # one row: sample statistics null, population ones 0
    new = out[0].new
    assert (new["sd"], new["ss"], new["va"], new["vs"], new["cs"]) == (None,) * 5
    assert (new["sp"], new["vp"], new["mdv"], new["cp"], new["sxx"], new["sxy"]) == (0.0,) * 6
    assert (new["md"], new["w"], new["e"], new["lnn"], new["rc"], new["ax"]) == \
        (5.0, 5.0, 5.0, 5.0, 1, 3.0)
    assert (new["c"], new["sl"], new["ic"], new["r2"]) == (None,) * 4  # x is constant
    out = f("i", 3, row("A", 7.0, 3))  # x still constant; y constant gives r2 1 (SQL)
    assert (out[0].new["c"], out[0].new["sl"], out[0].new["r2"]) == (None, None, None)
    f("u", 3, row("A", 5.0, 4))
    out = f("i", 4, row("A", 5.0, 9))
    assert (out[0].new["sd"], out[0].new["r2"], out[0].new["sl"], out[0].new["c"]) == \
        (0.0, 1.0, 0.0, None)  # y constant: exactly 0, no rounding residue


def test_statistics_insert_only_mode():
    agg, st = make(STATS_SQL, STATS_COLS, retracting=False)
    f = Feed(agg, st)
    rows_, since, last = {}, {}, None
    for key, (price, vol) in enumerate([(1.0, 2), (None, 3), (4.0, None), (2.5, 5), (9.0, 1)]):
        rows_[key], since[key] = row("A", price, vol), key + 1
        out = f("i", key, rows_[key])
        last = out[-1].new if out else last  # a row of nulls changes nothing
        _assert_rows_close({("A",): last}, _stats_reference(rows_, since), key)
    assert st["groups"][("A",)]["rows"] == {}


def test_non_finite_values_make_statistics_nan_until_they_leave():
    agg, st = make("SELECT p.isin, stddev(p.price) sd, corr(p.price, p.vol) c, "
                   "regr_count(p.price, p.vol) rc FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["sd", "float"], ["c", "float"], ["rc", "long"]])
    f = Feed(agg, st)
    f("i", 1, row("A", 1.0, 1))
    f("i", 2, row("A", 3.0, 2))
    out = f("i", 3, row("A", math.inf, 3))
    assert math.isnan(out[0].new["sd"]) and math.isnan(out[0].new["c"]) and out[0].new["rc"] == 3
    assert f("u", 3, row("A", float("nan"), 3)) == []  # still NaN
    out = f("d", 3)
    assert out[0].new == {"isin": "A", "sd": pytest.approx(math.sqrt(2)), "c": 1.0, "rc": 2}


def test_huge_values_do_not_crash():
    agg, st = make("SELECT p.isin, var_pop(p.price) v, corr(p.price, p.vol) c FROM P p "
                   "GROUP BY p.isin", [["isin", "string"], ["v", "float"], ["c", "float"]])
    f = Feed(agg, st)
    f("i", 1, row("A", 1e300, 1))
    out = f("i", 2, row("A", -1e300, 2))
    assert out[0].new == {"isin": "A", "v": math.inf, "c": -1.0}


def test_median_types_and_distinct():
    agg, st = make("SELECT p.isin, median(p.vol) mi, median(p.m) mm, median(p.isin) ms, "
                   "median(p.t) mt, median(distinct p.price) md, stddev(distinct p.price) sd "
                   "FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["mi", "integer"], ["mm", "money(2)"], ["ms", "string"],
                    ["mt", "timestamp"], ["md", "float"], ["sd", "float"]])
    f = Feed(agg, st)
    t0 = dt.datetime(2024, 1, 1)
    f("i", 1, row("A", 1.0, -3, Decimal("1.10"), t0))
    out = f("i", 2, row("A", 1.0, 6, Decimal("2.20"), t0 + dt.timedelta(seconds=3)))
    assert out[0].new == {"isin": "A", "mi": 1, "mm": Decimal("1.65"), "ms": "A",
                          "mt": t0 + dt.timedelta(seconds=1.5), "md": 1.0, "sd": None}
    out = f("i", 3, row("A", 4.0, 1, Decimal("0.50"), t0))
    assert out[0].new == {"isin": "A", "mi": 1, "mm": Decimal("1.10"), "ms": "A", "mt": t0,
                          "md": 2.5, "sd": pytest.approx(statistics.stdev([1.0, 4.0]))}
    out = f("d", 2)  # one of the two 1.0 leaves: distinct values unchanged
    assert (out[0].new["md"], out[0].new["mi"]) == (2.5, -1)


def test_weighted_avg_order_updates_and_timestamps():
    agg, st = make("SELECT p.isin, weighted_avg(p.price) w, weighted_avg(p.t) wt, "
                   "lastnonnull(p.price) l FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["w", "float"], ["wt", "timestamp"], ["l", "float"]])
    f = Feed(agg, st)
    t0 = dt.datetime(2024, 1, 1)
    f("i", 1, row("A", 1.0, t=t0))
    f("i", 2, row("A", 2.0, t=t0 + dt.timedelta(seconds=6)))
    out = f("i", 3, row("A", 3.0, t=t0 + dt.timedelta(seconds=12)))
    assert out[0].new == {"isin": "A", "w": 14 / 6, "wt": t0 + dt.timedelta(seconds=8),
                          "l": 3.0}
    out = f("u", 2, row("A", 8.0, t=t0))  # updated in place: keeps its (middle) weight
    assert out[0].new["w"] == (1 + 16 + 9) / 6
    out = f("u", 3, row("A", None, t=t0))  # a null leaves weights to the others
    assert (out[0].new["w"], out[0].new["l"]) == ((1 + 16) / 3, 8.0)
    out = f("d", 1)
    assert (out[0].new["w"], out[0].new["wt"], out[0].new["l"]) == (8.0, t0, 8.0)


def test_exp_weighted_avg_refolds_on_retraction_and_checks_its_period():
    agg, st = make("SELECT p.isin, exp_weighted_avg(p.price, p.vol) e FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["e", "float"]])
    f = Feed(agg, st)
    f("i", 1, row("A", 2.0, 3))
    assert f("i", 2, row("A", 4.0, 3))[0].new["e"] == 3.0         # 0.5 * 4 + 0.5 * 2
    assert f("i", 3, row("A", 10.0, 1))[0].new["e"] == 10.0       # period 1: alpha 1
    assert f("d", 1) == []  # still 10.0: the last row has alpha 1
    assert f("u", 3, row("A", 0.0, 3))[0].new["e"] == 2.0         # 4, then 0.5 * 0 + 0.5 * 4
    before = pickle.dumps(st)
    with pytest.raises(SplashError, match="positive period"):
        f("i", 4, row("A", 1.0, 0))
    assert pickle.dumps(st) == before  # refused before any state changed


def test_statistic_of_a_non_number_is_refused():
    agg, st = make("SELECT p.isin, stddev(p.isin) s FROM P p GROUP BY p.isin",
                   [["isin", "string"], ["s", "float"]])
    with pytest.raises(SplashError, match="numeric"):
        agg.apply(st, Change("i", (1,), None, row("A"), 1))
    assert st == agg.initial_state()


def test_every_catalogue_aggregate_but_two_is_implemented():
    assert AGGS - SUPPORTED == {"recent", "xmlagg"}
    assert SUPPORTED <= AGGS


@pytest.mark.parametrize("call", ["recent(p.price)", "xmlagg(p.isin)"])
def test_unimplemented_aggregate_refuses_each_row_without_breaking_the_engine(call):
    agg, st = make(f"SELECT p.isin, {call} x, count(*) c FROM P p "
                   "GROUP FILTER p.vol > 0 GROUP BY p.isin",
                   [["isin", "string"], ["x", "string"], ["c", "long"]])
    fn = call.split("(")[0]
    with pytest.raises(SplashError, match=rf"aggregate function {fn}\(\) is not supported"):
        agg.apply(st, Change("i", (1,), None, row("A", 1.0, 1), 1))
    assert st == agg.initial_state()
    assert agg.apply(st, Change("i", (2,), None, row("A", 1.0, 0), 2)) == []  # filtered: fine
    assert agg.apply(st, Change("d", (1,), row("A", 1.0, 1), None, 3)) == []  # never added


def test_unimplemented_aggregate_makes_bad_records_in_the_element():
    s = element("s", "stream", [("g", "string"), ("v", "float")])
    sel = plan_select("SELECT p.isin, recent(p.price) x, sum(p.price) t FROM P p "
                      "GROUP BY p.isin")
    sel["sources"] = [{"alias": "p", "element": "s", "keep": None}]
    sel = _rename_columns(sel, {"isin": "g", "price": "v"})
    d = element("d", "window", [("isin", "string"), ("x", "float"), ("t", "float")], ("isin",),
                query={"selects": [sel]})
    eng = Engine(*typed_parts(d, plan(s, d)))  # building the engine does not fail
    out, state = run(eng, [ev("i", 1, g="a", v=1.0), ev("i", 2, g="b", v=2.0)])
    assert out == [("bad", "aggregate function recent() is not supported by the engine")] * 2
    assert state["selects"][0]["agg"]["groups"] == {}


def _rename_columns(node, names):
    if isinstance(node, list):
        return [_rename_columns(v, names) for v in node]
    if not isinstance(node, dict):
        return node
    if node.get("node") == "Ident" and node.get("name") in names:
        return {**node, "name": names[node["name"]]}
    return {k: _rename_columns(v, names) for k, v in node.items()}


def test_the_checker_knows_which_aggregates_the_engine_runs():
    """ccl.splash.functions_data.ENGINE_AGGREGATES (what `ccl check` does not warn about, CCL2010) is
    exactly what this engine implements."""
    from ccl.splash.functions_data import ENGINE_AGGREGATES
    from runtime.engine import aggregate
    assert ENGINE_AGGREGATES == set(aggregate._INIT)
