"""runtime/engine/matching.py against its reference (the matcher as it was before the ON conjuncts
were filtered per alias, bucket equalities skipped and unbound aliases left out of the rows):
generated events over self-joins and two sources, negations, ``&&``/``||``, buckets and none,
nulls, NaN, failing conditions and timeouts; the outputs and states after every batch are equal."""
from __future__ import annotations

import math
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planned import plan_json, typed_parts
from runtime.engine.changes import Emit, Event
from runtime.engine.element import Engine
from runtime.engine.matching import Matcher
from runtime.engine.stages import truth

SRC = ("create input stream T schema (id integer, temp float, tag string);\n"
       "create input stream D schema (id integer, what string, tag string);\n")
QUERIES = [
    # a self-join by a bucket column (its equality skipped) and a condition across the events
    "select T1.id, T1.temp t1, T2.temp t2 from T T1, T T2 matching [10 seconds: T1, T2] "
    "on T1.id = T2.id and T2.temp > T1.temp",
    # a negation, a string bucket
    "select T.tag, T.temp from T, D matching [5 seconds: T, !D] on T.tag = D.tag and D.what = 'x'",
    # three aliases, && and a condition that fails on a zero id (integer division)
    "select A.id, B.temp, C.what from T A, T B, D C matching [8 seconds: A, B && C] "
    "on A.id = B.id and A.id = C.id and B.temp / A.id > 0.5",
    # ||, a guard between, no bucket (a comparison instead of an equality)
    "select A.id, L.what, B.temp from T A, D N, D L, T B matching [6 seconds: A, !N, L || B] "
    "on A.id < L.id and N.id = A.id and B.id = A.id",
    # a float bucket column: the equality is not skipped (NaN)
    "select T1.temp, T2.id from T T1, T T2 matching [10 seconds: T1, T2] on T1.temp = T2.temp",
    # two equalities: the bucket's (skipped) and another (tested)
    "select T1.id, T1.tag, T2.temp from T T1, T T2 matching [10 seconds: T1, T2] "
    "on T1.id = T2.id and T1.tag = T2.tag",
]
PORTS = [(0, 1), (0, 1), (0, 1, 2), (0, 1, 2, 3), (0, 1), (0, 1)]
# per query, per port: the source the port reads ("T" or "D")
SOURCES = [["T", "T"], ["T", "D"], ["T", "T", "D"], ["T", "D", "D", "T"], ["T", "T"], ["T", "T"]]

ROW = {"T": st.fixed_dictionaries({"id": st.sampled_from([None, 0, 1, 2]),
                                   "temp": st.sampled_from([None, 0.0, 1.5, 3.0, float("nan")]),
                                   "tag": st.sampled_from([None, "a", "b"])}),
       "D": st.fixed_dictionaries({"id": st.sampled_from([None, 0, 1, 2]),
                                   "what": st.sampled_from([None, "x", "y"]),
                                   "tag": st.sampled_from([None, "a", "b"])})}


class Reference(Matcher):
    """The matcher's ON tests and event loop as they were."""

    def _holds(self, bound, alias, conds=None):  # type: ignore[override]
        names = set(bound)
        rows = self._rows(bound)
        return all(truth(test(rows)) for needs, test in self.conds
                   if alias in needs and needs <= names)

    def apply(self, state, index, change, now_ms):  # type: ignore[override]
        from runtime.engine.expr import SplashError
        if self.steps is None:
            raise SplashError("MATCHING patterns with a negation inside && or || are not run")
        out = self.expire(state, now_ms, change.seq)
        row = change.new
        if change.op == "d" or row is None:
            return out
        alias, ident = self.aliases[index], (self.elements[index], change.seq)
        column = self.bucket_by.get(alias)
        bucket = row.get(column) if column is not None else None
        kept = []
        for partial in state["partial"].get(bucket, []):
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
            state["partial"][bucket] = kept
        else:
            state["partial"].pop(bucket, None)
        return out


def engines(tmp_path, k: int) -> tuple[Engine, Engine]:
    (tmp_path / "p.ccl").write_text(SRC + f"create output stream o as {QUERIES[k]};\n")
    plan, diags = plan_json(str(tmp_path / "p.ccl"))
    assert plan is not None, [str(d) for d in diags]
    fast, slow = Engine(*typed_parts({"name": "o"}, plan)), Engine(*typed_parts({"name": "o"}, plan))
    slow.selects[0].matcher.__class__ = Reference
    return fast, slow


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        # (in order, keys compared as values: a NaN bucket's key is another object after pickling)
        return len(a) == len(b) and all(same(x, y) and same(a[x], b[y]) for x, y in zip(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def shown(out: list) -> list:
    return [("row", o.op, o.seq, dict(o.values)) if isinstance(o, Emit) else ("bad", o.seq, o.reason)
            for o in out]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, len(QUERIES) - 1), data=st.data())
def test_the_matcher_gives_its_references_matches_and_states(tmp_path, k, data):
    fast, slow = engines(tmp_path, k)
    a, b = fast.initial_state(), slow.initial_state()
    assert fast.selects[0].matcher.bucket_by == slow.selects[0].matcher.bucket_by
    ports = PORTS[k]
    seq, now = 0, 0
    for _ in range(data.draw(st.integers(1, 4))):
        now += data.draw(st.sampled_from([0, 1000, 4000, 9000]))
        events = []
        for _ in range(data.draw(st.integers(0, 25))):
            source = data.draw(st.sampled_from(sorted(set(SOURCES[k]))))
            values = data.draw(ROW[source])
            seq += 1
            # a row arrives on every port that reads its source (a self-join's ports)
            events += [Event(p, data.draw(st.sampled_from(["i", "i", "i", "d"])), seq, values)
                       for p in ports if SOURCES[k][p] == source]
        got, want = fast.process(a, events, now), slow.process(b, events, now)
        assert same(shown(got), shown(want))
        assert same(pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b)))
