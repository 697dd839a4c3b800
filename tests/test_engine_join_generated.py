"""The engine's join of windows (runtime/engine/join.py, its path for an update whose equated
values stay, and runtime/engine/element.py's inner join without null filling) against the
Joiner as it was (tests/join_reference.py), on generated batches: both sides interleaved, every
opcode (inserts, updates, upserts, deletes, safedeletes, unknown ones), nulls, NaN and -0.0 in
the join keys, several rows per key on the many side, INNER, LEFT, RIGHT and FULL OUTER joins,
two equated columns, a residual ON condition, three sources, a failing item (bad records),
several instances, several batches and the last batch run again (after a crash). After every
batch both give the same outputs (changes and bad records, in order) and the same state (dicts
in the same order)."""
from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import join_reference
from planned import plan_text_of
from ccl.plan.codec import plan_from_json
from runtime.engine.changes import Event
from runtime.engine.element import Engine

SOURCES = """CREATE INPUT WINDOW A SCHEMA (k string, s string, x float) PRIMARY KEY (k);
CREATE INPUT WINDOW B SCHEMA (k string, y integer, s string, p float) PRIMARY KEY (k, y);
CREATE INPUT WINDOW C SCHEMA (k string, z integer) PRIMARY KEY (k);
"""
ITEMS = "a.k ak, b.k bk, b.y y, a.x x, b.p p, 10 / b.y r"
QUERIES = {
    "inner": f"SELECT {ITEMS} FROM A a INNER JOIN B b ON a.s = b.s",
    "left": f"SELECT {ITEMS} FROM A a LEFT OUTER JOIN B b ON a.s = b.s",
    "right": f"SELECT {ITEMS} FROM A a RIGHT OUTER JOIN B b ON a.s = b.s",
    "full": f"SELECT {ITEMS} FROM A a FULL OUTER JOIN B b ON a.s = b.s",
    # a float equated column: NaN and -0.0 in the index
    "two columns": f"SELECT {ITEMS} FROM A a INNER JOIN B b ON a.s = b.s AND a.x = b.p",
    "residual": f"SELECT {ITEMS} FROM A a LEFT OUTER JOIN B b ON a.s = b.s AND a.x < b.p",
    "three": (f"SELECT {ITEMS}, c.z z FROM A a INNER JOIN B b ON b.s = a.s "
              "LEFT OUTER JOIN C c ON c.k = b.k"),
    "where": f"SELECT {ITEMS} FROM A a INNER JOIN B b ON a.s = b.s WHERE b.y > 0 OR a.x > 0.0",
}

floats = st.sampled_from([None, 0.0, -0.0, 1.5, float("nan"), 2.0])
strings = st.sampled_from([None, "a", "b", "c"])
COLUMNS = [("k", "s", "x"), ("k", "y", "s", "p"), ("k", "z")]
# rows in their columns' order, as the engine's sources hold them (same_row reads two rows'
# values in order)
rows = [st.tuples(*parts).map(lambda t, c=c: dict(zip(c, t))) for c, parts in zip(COLUMNS, [
    (st.sampled_from(["a1", "a2", "a3", "a4"]), strings, floats),
    (st.sampled_from(["b1", "b2", "b3"]), st.sampled_from([0, 1, 2, -3]), strings, floats),
    (st.sampled_from(["b1", "b2", "b3"]), st.sampled_from([None, 0, 7]))])]
event = st.tuples(st.integers(0, 2),                                           # instance
                  st.integers(0, 2),                                           # port
                  st.sampled_from(["i", "i", "u", "u", "u", "p", "d", "s", "x"]),
                  st.data(),
                  st.sampled_from([False, False, False, True]))                # shares its seq
batches = st.lists(st.lists(event, max_size=30), min_size=1, max_size=3)


_ENGINES: dict[str, tuple[Engine, Engine]] = {}


def engines(tmp_path, query: str) -> tuple[Engine, Engine]:
    """The join element's engine, and one whose Joiner is the reference's (planned once per
    query: an engine keeps its state in the dicts it is given)."""
    if query in _ENGINES:
        return _ENGINES[query]
    text = plan_text_of(tmp_path, SOURCES + f"CREATE OUTPUT WINDOW J PRIMARY KEY DEDUCED AS {query};\n")
    plan = plan_from_json(json.loads(text))
    element = plan.element("J")
    new, ref = Engine(element, plan), Engine(element, plan)
    joiner = ref.selects[0].joiner
    joiner.__class__ = join_reference.Joiner
    joiner.outer = True  # element.py fills missing sides for every join, as it did
    _ENGINES[query] = new, ref
    return new, ref


def same(a, b) -> bool:
    """Equality with NaN equal to NaN, -0.0 told from 0.0, types and dict order compared."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return same(list(a.items()), list(b.items()))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__") and type(a) is type(b):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return type(a) is type(b) and a == b


def events_of(batch: list, ports: int, base: int) -> dict[int, list[Event]]:
    """Each instance's events of a generated batch (a row for a port the query lacks goes to
    port 0, with port 0's columns)."""
    out: dict[int, list[Event]] = {}
    seq = base
    for inst, port, op, data, shared in batch:
        port = port if port < ports else 0
        seq += 0 if shared else 1
        out.setdefault(inst, []).append(Event(port, op, seq, data.draw(rows[port])))
    return out


def run_batch(engines: dict[str, Engine], states: dict[str, dict[int, dict]],
              events: dict[int, list[Event]]) -> dict[str, list]:
    """Each engine's outputs of one batch over its instances' states (changed in place)."""
    outs: dict[str, list] = {how: [] for how in engines}
    for inst in sorted(events):
        for how, engine in engines.items():
            state = states[how].setdefault(inst, engine.initial_state())
            outs[how].append((inst, engine.process(state, events[inst], 0)))
    return outs


@pytest.mark.parametrize("name", list(QUERIES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_join_gives_the_reference_outputs_and_state(tmp_path, name, data):
    new, ref = engines(tmp_path, QUERIES[name])
    both = {"new": new, "ref": ref}
    ports = len(new.ports)
    states: dict[str, dict[int, dict]] = {"new": {}, "ref": {}}
    for b, batch in enumerate(data):
        events = events_of(batch, ports, 1000 * (b + 1))
        before = copy.deepcopy(states)
        outs = run_batch(both, states, events)
        assert same(outs["new"], outs["ref"]), (name, b)
        assert same(states["new"], states["ref"]), (name, b)
    # the last batch again from the states before it (a crash after it ran): the same again
    again = run_batch(both, before, events)
    assert same(again["new"], outs["new"]) and same(again["ref"], outs["ref"]), name
    assert same(before["new"], states["new"]) and same(before["ref"], states["ref"]), name
