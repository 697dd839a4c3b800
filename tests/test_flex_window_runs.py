"""ON handlers that read window views (``W_stream``, ``W_iterator``, ``for (r in W)``) run through
``FlexEngine._window_run`` (the batch's view cells set per run, the session's globals merged with
them once: ``Session.run_with``); ``window_runs = False`` runs them through ``_run`` (a merge and
a general write-back per run), the reference. Generated batches over both ports (inserts, updates,
deletes of a keyed input window, trades, rows that do not cast), handler bodies reading the input's
and the output's views, a stored iterator, ``nextval``, a global named as a window's iterator, a
failing run, small budgets: the same outputs and the same states, batch by batch."""
from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.engine.changes import Event
from runtime.engine.flex import FlexEngine

INPUTS = """
CREATE INPUT WINDOW Lim SCHEMA (Sym string, Desk string, Max integer) PRIMARY KEY (Sym, Desk);
CREATE INPUT STREAM Tr SCHEMA (Sym string, Vol integer);
"""
FLEX = """
CREATE FLEX FOut IN Tr, Lim
OUT OUTPUT WINDOW Out SCHEMA (Sym string, N integer, Room integer, Seq long, Seen integer)
    PRIMARY KEY (Sym)
BEGIN
  DECLARE
    integer total := 0;
    long LAST;
    GLOBALS
  END;
  ON Tr {
TRBODY
  };
  ON Lim {
LIMBODY
  };
END;
"""
TR_BODIES = [
    # a where loop, a keyed lookup, the output's rows
    """integer n := 0; integer room := 0; integer seen := 0;
    for (r in Lim_stream where Sym = Tr.Sym) { n := n + 1; room := room + r.Max - Tr.Vol; }
    typeof(Lim) main := Lim_stream[[Sym = Tr.Sym; Desk = 'main';|]];
    for (o in Out) { if (o.Sym = Tr.Sym) { seen := o.N; } }
    total := total + n;
    output setOpcode([Sym = Tr.Sym; | N = n; Room = room + main.Max; Seen = seen;], upsert);""",
    # an iterator, walked, reset, deleted
    """integer n := 0;
    Lim_iterator := getIterator(Lim_stream);
    typeof(Lim) r := getNext(Lim_iterator);
    while (not isnull(r)) { if (r.Sym = Tr.Sym) { n := n + 1; } r := getNext(Lim_iterator); }
    resetIterator(Lim_iterator);
    if (not isnull(getNext(Lim_iterator))) { n := n + 100; }
    deleteIterator(Lim_iterator);
    output setOpcode([Sym = Tr.Sym; | N = n;], upsert);""",
    # an iterator made but never reset: the next run's must start null
    """integer n := 0;
    if (isnull(Lim_iterator)) { n := 1; }
    Lim_iterator := getIterator(Lim_stream);
    output setOpcode([Sym = Tr.Sym; | N = n + cacheless(Tr.Vol);], upsert);""",
    # nextval (adds a global cell in the first run), failing runs, Out_stream
    """LAST := nextval();
    integer n := 0;
    for (o in Out_stream where Sym = Tr.Sym) { n := o.N + 1; }
    if (Tr.Vol > 900) { n := cast(integer, 'x'); }
    output setOpcode([Sym = Tr.Sym; | N = n; Seq = LAST;], upsert);""",
    # a global named as the window's iterator is: the iterator's cell hides it
    """integer n := 0;
    for (r in Lim_stream) { n := n + 1; }
    total := total + n;
    output setOpcode([Sym = Tr.Sym; | N = total;], upsert);""",
]
LIM_BODIES = [
    "integer n := 0; for (r in Lim_stream where Sym = Lim.Sym) { n := n + 1; }"
    " output setOpcode([Sym = Lim.Sym; | N = n; Room = Lim.Max;], upsert);",
    "total := total + 1;",
]
GLOBALS = ["", "integer Lim_iterator := 3;"]
FUNCTION = "  integer cacheless(integer v) { return v - v; }\n"


def engines(tr: int, lim: int, glob: int, budget: int) -> tuple[FlexEngine, FlexEngine]:
    """The engine of the Flex of those bodies with that budget, and its reference (window_runs
    off). One project holds every combination (one compile)."""
    key = (tr, lim, glob, budget)
    found = _ENGINES.get(key)
    if found is None:
        plan = _project()
        element = plan.element(_name(tr, lim, glob))
        fast = FlexEngine(element, plan, budget=budget)
        slow = FlexEngine(element, plan, budget=budget)
        slow.window_runs = False
        found = _ENGINES[key] = (fast, slow)
    return found


def _name(tr: int, lim: int, glob: int) -> str:
    return f"Out{tr}{lim}{glob}"


def _project():  # type: ignore[no-untyped-def]
    if "plan" not in _PLAN:
        from planned import plan_json, typed_parts
        text = INPUTS + "".join(
            FLEX.replace("TRBODY", TR_BODIES[tr]).replace("LIMBODY", LIM_BODIES[lim])
            .replace("GLOBALS", GLOBALS[glob] + "\n" + FUNCTION).replace("Out", _name(tr, lim, glob))
            for tr in range(len(TR_BODIES)) for lim in range(len(LIM_BODIES))
            for glob in range(len(GLOBALS)))
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "p.ccl"
            src.write_text(text)
            plan, diags = plan_json(str(src))
        assert plan is not None, [str(d) for d in diags]
        element = next(e for e in plan["elements"] if e["name"] == _name(0, 0, 0))
        _PLAN["plan"] = typed_parts(element, plan)[1]
    return _PLAN["plan"]


_ENGINES: dict = {}
_PLAN: dict = {}

SYMS = st.sampled_from(["A", "B", "C"])
LIM_EVENT = st.builds(lambda op, s, d, m: (1, op, {"Sym": s, "Desk": d, "Max": m}),
                      st.sampled_from(["i", "u", "d", "p"]), SYMS, st.sampled_from(["main", "alt"]),
                      st.sampled_from([10, 500, None, "x"]))
TR_EVENT = st.builds(lambda s, v: (0, "i", {"Sym": s, "Vol": v}), SYMS,
                     st.sampled_from([1, 50, 950, None]))
BATCHES = st.lists(st.lists(st.one_of(LIM_EVENT, TR_EVENT), max_size=8), min_size=1, max_size=4)


def _run(engine: FlexEngine, batches: list) -> list:
    state = engine.initial_state()
    got = []
    seq = 0
    for i, batch in enumerate(batches):
        events = []
        for port, op, values in batch:
            seq += 1
            events.append(Event(port, op, seq, dict(values)))
        out = engine.process(state, events, 1_000 + i)
        got.append((repr(out), repr(state["vars"]), repr(state["sources"]), repr(state["output"])))
        if i == 1:
            state = pickle.loads(pickle.dumps(state))  # across a restart
    return got


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(TR_BODIES) - 1), st.integers(0, len(LIM_BODIES) - 1),
       st.integers(0, len(GLOBALS) - 1), st.sampled_from([25, 60, 100_000]), BATCHES)
def test_window_runs_give_what_run_gives(tr, lim, glob, budget, batches):
    fast, slow = engines(tr, lim, glob, budget)
    assert _run(fast, batches) == _run(slow, batches)


def test_the_window_path_is_taken():
    fast, slow = engines(0, 0, 0, 100_000)
    calls = []
    original = fast._window_run

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(*args, **kwargs)
    fast._window_run = spy  # type: ignore[method-assign]
    try:
        _run(fast, [[(1, "i", {"Sym": "A", "Desk": "main", "Max": 5}), (0, "i", {"Sym": "A", "Vol": 1})]])
    finally:
        del fast._window_run
    assert len(calls) == 2
