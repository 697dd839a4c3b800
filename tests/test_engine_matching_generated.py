"""runtime/engine/matching.py against its reference, the scan: every event tested against every
open partial of its instance in creation order (the matcher as it was, with one bucket), its ON
conjuncts evaluated on the rows with a null row for each unbound alias.

Generated patterns (sequences of aliases, ``&&``, ``||``, negations, self-joins and two sources)
with generated ON conditions (equalities within and across column types, integer against long
and float, comparisons, a LIKE that fails on some rows: bad records) over generated events (several
values, nulls, distinct NaN objects, -0.0, deletes, timeouts), with the state pickled between
batches as the processor does and batches run again from an earlier state: the outputs (rows, bad
records, their order and sequence numbers) and the states' partials are equal after every batch."""
from __future__ import annotations

import math
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planned import plan_json, typed_parts
from runtime.engine.changes import Emit, Event
from runtime.engine.element import Engine
from runtime.engine.expr import SplashError
from runtime.engine.matching import Matcher
from runtime.engine.stages import truth

SRC = ("create input stream T schema (id integer, temp float, tag string, n long);\n"
       "create input stream D schema (id integer, what string, tag string, x float);\n")
COLUMNS = {"T": {"id": "int", "temp": "float", "tag": "str", "n": "long"},
           "D": {"id": "int", "what": "str", "tag": "str", "x": "float"}}
QUERIES = [
    "select T1.id, T1.temp t1, T2.temp t2 from T T1, T T2 matching [10 seconds: T1, T2] "
    "on T1.id = T2.id and T2.temp > T1.temp",
    "select T.tag, T.temp from T, D matching [5 seconds: T, !D] on T.tag = D.tag and D.what = 'x'",
    "select A.id, B.temp, C.what from T A, T B, D C matching [8 seconds: A, B && C] "
    "on A.id = B.id and A.id = C.id and B.temp / A.id > 0.5",
    "select A.id, L.what, B.temp from T A, D N, D L, T B matching [6 seconds: A, !N, L || B] "
    "on A.id < L.id and N.id = A.id and B.id = A.id",
    "select T1.temp, T2.id from T T1, T T2 matching [10 seconds: T1, T2] on T1.temp = T2.temp",
    "select T1.id, T1.tag, T2.temp from T T1, T T2 matching [10 seconds: T1, T2] "
    "on T1.id = T2.id and T1.tag = T2.tag",
    # no shared column: A-B by id, B-C by tag (C's bucket is not A's)
    "select A.id, C.what from T A, T B, D C matching [10 seconds: A, B, C] "
    "on A.id = B.id and B.tag = C.tag",
    # a condition that fails (a LIKE pattern ending with the escape character) before the
    # equality: not indexed
    "select A.id from T A, T B matching [10 seconds: A, B] on B.tag like A.tag and A.id = B.id",
    # integer against long, and against float (not indexed)
    "select A.id from T A, D B matching [10 seconds: A, B] on A.n = B.id and A.temp = B.id",
    # the bucket's equality and an indexed one across two columns
    "select A.id, B.what from T A, D B matching [10 seconds: A, B] on A.id = B.id and A.tag = B.what",
    # no bucket; C indexed by B's tag, B by A's n, a negation by the first event's temp
    "select A.id, C.what from T A, T B, D N, D C matching [10 seconds: A, B, !N, C] "
    "on A.n = B.id and C.what = B.tag and N.x = A.temp",
]
# range conjuncts (the range index), with the (step index, alias) pairs whose events use it
RANGES = [
    # after the bucket's equality, as bench/shapes.py's pattern
    "select T1.id, T2.id i2 from T T1, T T2 matching [10 seconds: T1, T2] "
    "on T1.tag = T2.tag and T2.temp > T1.temp * 5.0",
    # first, the event's column on the right: a float against a long (2**53 + 1 >= 2.0**53)
    "select A.id, B.n from T A, T B matching [10 seconds: A, B] on A.n <= B.temp and B.n * 2 >= A.id",
    # a negation's range, and a bound side that fails (to_integer of a tag)
    "select A.id from T A, D N, T B matching [8 seconds: A, !N, B] "
    "on N.x < A.temp and B.id >= to_integer(A.tag)",
    # inside &&: B's range on A; C's over A and B (B not bound in every partial: not indexed)
    "select A.id, C.what from T A, T B, D C matching [10 seconds: A, B && C] "
    "on A.id = C.id and B.n < A.n and C.x > A.temp + B.n",
    # ||, an equality after the range conjunct
    "select A.id from T A, D B, T C matching [10 seconds: A, B || C] "
    "on B.x >= A.temp and A.temp > C.n and A.id = B.id",
    # behind a conjunct that may raise (a LIKE pattern ending with the escape character): not
    # indexed, the scan's bad records
    "select A.id from T A, T B matching [10 seconds: A, B] on B.tag like A.tag and B.n > A.n",
]
RANGED = [{(1, "T2")}, {(1, "B")}, {(1, "N"), (1, "B")}, {(1, "B")}, {(1, "B"), (1, "C")}, set()]
# a long above 2**53 and the float it rounds to: equal as floats, not as longs
VALUES = {"int": [None, 0, 1, 2], "long": [None, 0, 1, 2, 2**53 + 1],
          "float": [None, 0.0, -0.0, 1.0, 1.5, "nan", 2.0**53], "str": [None, "a", "b", "\\", "1"]}


class Scan(Matcher):
    """The matcher as it was, with every partial in one bucket."""

    def initial_state(self):  # type: ignore[override]
        return {"partial": {}, "oldest": None}

    def _holds(self, bound, alias, conds=None):  # type: ignore[override]
        names = set(bound)
        rows = self._rows(bound)
        return all(truth(test(rows)) for needs, test in self.conds
                   if alias in needs and needs <= names)

    def apply(self, state, index, change, now_ms):  # type: ignore[override]
        if self.steps is None:
            raise SplashError("MATCHING patterns with a negation inside && or || are not run")
        out = self.expire(state, now_ms, change.seq)
        row = change.new
        if change.op == "d" or row is None:
            return out
        alias, ident = self.aliases[index], (self.elements[index], change.seq)
        kept = []
        for partial in state["partial"].get(None, []):
            guards, nxt = self._waiting(partial[1])
            bound, ids = partial[2], partial[3]
            if alias in guards and ident not in ids and self._holds({**bound, alias: row}, alias):
                continue
            if (nxt is not None and alias in self.refs[nxt] and alias not in bound
                    and ident not in ids and self._holds({**bound, alias: row}, alias)):
                extended = self._bind(partial, nxt, alias, row, ident)
                if not self._complete(extended, change.seq, out, timed_out=False):
                    kept.append(extended)
                continue
            kept.append(partial)
        negated, _tree = self.steps[0]
        if not negated and alias in self.refs[0] and self._holds({alias: row}, alias):
            partial = self._bind([now_ms, 0, {}, []], 0, alias, row, ident)
            if not self._complete(partial, change.seq, out, timed_out=False):
                kept.append(partial)
                if state["oldest"] is None:
                    state["oldest"] = now_ms
        if kept:
            state["partial"][None] = kept
        else:
            state["partial"].pop(None, None)
        return out

    def expire(self, state, now_ms, seq):  # type: ignore[override]
        out = []
        if state["oldest"] is None or now_ms - state["oldest"] <= self.millis:
            return out
        for bucket, partials in list(state["partial"].items()):
            kept = [p for p in partials
                    if not (now_ms - p[0] > self.millis and self._complete(p, seq, out, timed_out=True))]
            if kept:
                state["partial"][bucket] = kept
            else:
                del state["partial"][bucket]
        starts = [p[0] for bucket in state["partial"].values() for p in bucket]
        state["oldest"] = min(starts) if starts else None
        return out


def engines(tmp_path, query: str) -> tuple[Engine, Engine]:
    (tmp_path / "p.ccl").write_text(SRC + f"create output stream o as {query};\n")
    plan, diags = plan_json(str(tmp_path / "p.ccl"))
    assert plan is not None, [str(d) for d in diags]
    fast, slow = Engine(*typed_parts({"name": "o"}, plan)), Engine(*typed_parts({"name": "o"}, plan))
    slow.selects[0].matcher.__class__ = Scan
    slow.selects[0].matcher.bucket_by = {}
    return fast, slow


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(x == y and same(a[x], b[y]) for x, y in zip(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def shown(out: list) -> list:
    return [("row", o.op, o.seq, dict(o.values)) if isinstance(o, Emit) else ("bad", o.seq, o.reason)
            for o in out]


def partials(state: dict) -> list:
    """The matcher's partials as stored (pickled), in creation order (start, first event, and the
    first alias for a row starting partials on two ports)."""
    match = pickle.loads(pickle.dumps(state))["selects"][0]["match"]
    flat = [p for ps in match["partial"].values() for p in ps]
    return sorted(flat, key=lambda p: (p[0], p[3][0][1], repr(list(p[2])))) + [match["oldest"]]


def run(tmp_path, query: str, sources: list[str], data) -> None:
    """Generated batches through the matcher and the scan; equal outputs and partials."""
    fast, slow = engines(tmp_path, query)
    a, b = fast.initial_state(), slow.initial_state()
    seq, now = 0, 0
    for _ in range(data.draw(st.integers(1, 5), label="batches")):
        now += data.draw(st.sampled_from([0, 0, 1000, 4000, 9000]), label="ms")
        events = []
        for _ in range(data.draw(st.integers(0, 25), label="rows")):
            source = data.draw(st.sampled_from(sorted(set(sources))))
            values = {c: data.draw(st.sampled_from(VALUES[kind]).map(
                lambda v: float("nan") if v == "nan" else v)) for c, kind in COLUMNS[source].items()}
            seq += 1
            # a row arrives on every port that reads its source (a self-join's ports)
            events += [Event(p, data.draw(st.sampled_from(["i", "i", "i", "d"])), seq, values)
                       for p in range(len(sources)) if sources[p] == source]
        before = (pickle.dumps(a), pickle.dumps(b))
        got, want = fast.process(a, events, now), slow.process(b, events, now)
        assert same(shown(got), shown(want))
        assert same(partials(a), partials(b))
        how = data.draw(st.sampled_from(["kept", "loaded", "again"]), label="state")
        if how == "loaded":  # the processor's round trip: the partials filed again
            a = pickle.loads(pickle.dumps(a))
        elif how == "again":  # the batch run again from the state before it
            a, b = pickle.loads(before[0]), pickle.loads(before[1])
            got, want = fast.process(a, events, now), slow.process(b, events, now)
            assert same(shown(got), shown(want))
            assert same(partials(a), partials(b))


PORTS = [["T", "T"], ["T", "D"], ["T", "T", "D"], ["T", "D", "D", "T"], ["T", "T"], ["T", "T"],
         ["T", "T", "D"], ["T", "T"], ["T", "D"], ["T", "D"], ["T", "T", "D", "D"]]
RANGE_PORTS = [["T", "T"], ["T", "T"], ["T", "D", "T"], ["T", "T", "D"], ["T", "D", "T"], ["T", "T"]]


@pytest.mark.parametrize("k", range(len(QUERIES)))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_matcher_gives_the_scans_matches_and_states(tmp_path, k, data):
    run(tmp_path, QUERIES[k], PORTS[k], data)


@pytest.mark.parametrize("k", range(len(RANGES)))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_range_conjuncts_give_the_scans_matches_and_states(tmp_path, k, data):
    fast, _slow = engines(tmp_path, RANGES[k])
    matcher = fast.selects[0].matcher
    assert {key for key, r in matcher._ranges.items() if r is not None} == RANGED[k]
    run(tmp_path, RANGES[k], RANGE_PORTS[k], data)


# generated patterns: aliases over T and D, steps of one alias, two under && or ||, or a negation;
# ON: equalities of columns of one kind or of integer, long and float, comparisons, a division
# (null on a zero id), a LIKE that fails on some values, a condition on one alias, range conjuncts
# (a numeric column of one alias against an expression of others, either side, all four operators;
# the expression a column, arithmetic, a division, a conversion that fails, or over two aliases)
KIND = {"id": "num", "n": "num", "temp": "num", "x": "num", "tag": "str", "what": "str"}


@st.composite
def patterns(draw) -> tuple[str, list[str]]:
    count = draw(st.integers(2, 4))
    sources = [draw(st.sampled_from("TD")) if i else "T" for i in range(count)]
    names = [f"{s}{i}" for i, s in enumerate(sources)]
    cols = {x: list(COLUMNS[s]) for x, s in zip(names, sources)}
    floats = {x: "temp" if s == "T" else "x" for x, s in zip(names, sources)}
    steps, i = [], 0
    while i < count:
        kind = draw(st.sampled_from(["one", "one", "and", "or", "not"])) if i < count - 1 else \
            draw(st.sampled_from(["one", "not"]))
        if kind in ("and", "or") and i + 1 < count:
            steps.append(f"{names[i]} {'&&' if kind == 'and' else '||'} {names[i + 1]}")
            i += 2
            continue
        steps.append(("!" if kind == "not" and steps else "") + names[i])
        i += 1
    conds = []
    for _ in range(draw(st.integers(1, 4))):
        a, b = draw(st.permutations(names))[:2]
        what = draw(st.sampled_from(["eq", "eq", "eq", "gt", "range", "range", "range", "range", "div",
                                     "like", "one"]))
        if what == "range":  # mostly on the later alias (the one an event of meets partials)
            if names.index(a) < names.index(b) and draw(st.integers(0, 3)):
                a, b = b, a
            nums = [c for c in cols[b] if KIND[c] == "num"]
            ca = draw(st.sampled_from([c for c in cols[a] if KIND[c] == "num"]))
            cb = draw(st.sampled_from(nums))
            other = draw(st.sampled_from(
                [f"{b}.{cb}", f"{b}.{cb} * 2.0", f"{b}.{cb} + 1", f"{b}.{floats[b]} / {b}.id",
                 f"to_integer({b}.tag)"] + [f"{b}.{cb} - {c}.id" for c in names if c not in (a, b)]))
            op = draw(st.sampled_from(["<", "<=", ">", ">="]))
            conds.append(draw(st.sampled_from([f"{a}.{ca} {op} {other}", f"{other} {op} {a}.{ca}"])))
        elif what == "like":  # fails on a pattern ending with the escape character
            conds.append(f"{a}.tag like {b}.tag")
        elif what == "one":
            conds.append(f"{a}.tag = 'a'")
        elif what == "div":
            conds.append(f"{a}.{floats[a]} / {b}.id > 0.5")
        else:
            ca = draw(st.sampled_from(cols[a]))
            cb = draw(st.sampled_from([c for c in cols[b] if KIND[c] == KIND[ca]]))
            conds.append(f"{a}.{ca} {'=' if what == 'eq' or KIND[ca] == 'str' else '>'} {b}.{cb}")
    secs = draw(st.sampled_from([1, 5, 10]))
    query = (f"select {names[0]}.id from " + ", ".join(f"{s} {x}" for s, x in zip(sources, names))
             + f" matching [{secs} seconds: {', '.join(steps)}] on " + " and ".join(conds))
    return query, sources


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns(), data=st.data())
def test_generated_patterns_give_the_scans_matches_and_states(tmp_path, pattern, data):
    run(tmp_path, pattern[0], pattern[1], data)
