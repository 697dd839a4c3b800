"""``for (r in W_stream [where ...])`` over a window view in SPLASH form (an engine's rows): the
fused compile reads the rows at once through ``window_records`` (its columns' checks found once
per view); the unfused compile (the reference) reads them through the ``window_rows`` generator.
Generated windows (rows of strings, integers, floats with NaN and -0.0, booleans and nulls, keyed
by one or two columns, lasting views or not) and generated loops (where over any columns, the key,
repeats, unknown columns, null and mixed-kind values; break, return and a small budget) must give
the same outcome or error, the same records seen in the same order, the same variables and steps."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ccl.splash import Interpreter, SplashError
from ccl.splash.interpreter import declare_state
from ccl.splash.machine import Cell
from ccl.splash.types import Type
from ccl.splash.windows import WindowView
from test_splash_interpreter import block, declare

COLUMNS = {"k": "string", "i": "integer", "v": "float", "b": "boolean"}
TYPES = {"k": Type("string"), "i": Type("integer"), "v": Type("float"), "b": Type("boolean")}
INPUT = {"k": "string", "v": "float", "i": "integer"}
ROW = {"k": "A", "v": 1.0, "i": 1}

VALUES = {"k": st.sampled_from([None, "A", "B", "A"]),
          "i": st.sampled_from([None, 1, 2, 1]),
          "v": st.sampled_from([None, 1.0, -0.0, 0.0, math.nan]),
          "b": st.none() | st.booleans()}
WINDOW_ROWS = st.lists(st.fixed_dictionaries(VALUES), max_size=12)
# where values: literals of every kind, the input row's fields (k 'A', i 1), a global (1), null
WHERE_VALUES = st.sampled_from(["'A'", "'B'", "1", "2", "1.0", "0.0", "true", "false", "null",
                                "priceW.k", "priceW.i", "priceW.v", "n"])
WHERE = st.one_of(
    st.lists(st.tuples(st.sampled_from(["k", "i", "v", "b", "k", "i", "nosuch"]), WHERE_VALUES),
             max_size=3),
    # the key's columns (in either order), maybe with another
    st.permutations(["k", "i", "b"]).flatmap(
        lambda cs: st.lists(WHERE_VALUES, min_size=3, max_size=3).map(lambda vs: list(zip(cs, vs)))),
    st.permutations(["k", "i"]).flatmap(
        lambda cs: st.lists(WHERE_VALUES, min_size=2, max_size=2).map(lambda vs: list(zip(cs, vs)))))
BODIES = ["c := c + 1; output r;",
          "c := c + 1; output r; if (c >= 2) { break; }",
          "output r; if (r.i = 2) { return c; } c := c + 1;",
          "n := n + 1; s := s + r.v; output r;",
          "for (q in W_stream where k = r.k) { c := c + 1; output q; }"]


def interpreter(fuse: bool, budget: int) -> Interpreter:
    decl, _ = declare_state(declare("integer n := 1; float s := 0.0;"), source_types={"priceW": INPUT})
    interp = Interpreter(decl, source_types={"priceW": INPUT}, budget=budget)
    interp.compiler.fuse = fuse
    return interp


def run_loops(fuse: bool, rows: list, key: tuple, lasting: bool, body: str, budget: int) -> list:
    """Three runs of ``body`` in one session (a lasting view serves them all, as the engine's
    does): per run the outcome or error, the records output and the variables after it."""
    interp = interpreter(fuse, budget)
    store = interp.initial_values()
    session = interp.session(store)
    window: dict = {}
    for row in rows:
        window[tuple(row[c] for c in key)] = {c: row[c] for c in COLUMNS}
    view = WindowView("W", window, key, TYPES, True)
    if lasting:
        view.lasting()
    code = block(body)
    got = []
    for _ in range(3):
        seen: list = []
        rec = interp.input_record("priceW", ROW, 1, ("k",), True)
        extra = {"W_stream": Cell(view if lasting else WindowView("W", window, key, TYPES, True),
                                  const=True),
                 "W_iterator": Cell(None)}
        try:
            r = session.run(code, {"priceW": rec}, extra,
                            lambda x: seen.append((repr(list(x.items())), x.opcode, x.readonly)),
                            copies=True)
            result: tuple = ("ok", r.returned, r.value, session.machine.steps)
        except SplashError as e:
            result = ("error", e.reason)
        got.append((result, seen, repr(store)))
    return got


@settings(max_examples=400, deadline=None)
@given(WINDOW_ROWS, st.sampled_from([("k",), ("k", "i"), ("i", "k"), ("b",)]), st.booleans(),
       WHERE, st.sampled_from(BODIES), st.sampled_from([100_000, 4, 12]))
def test_a_for_in_over_a_window_reads_its_rows_as_the_generator_does(rows, key, lasting, where,
                                                                      loop_body, budget):
    where_text = (" where " + ", ".join(f"{c} = {v}" for c, v in where)) if where else ""
    body = (f"integer c := 0; for (r in W_stream{where_text}) {{ {loop_body} }} "
            "output W_stream[[k = 'A'; i = 1; b = true; |]]; return c;")
    reference = run_loops(False, rows, key, lasting, body, budget)
    assert run_loops(True, rows, key, lasting, body, budget) == reference, body


def test_the_fused_loop_reads_through_window_records(monkeypatch):
    """The test above compares something: the fused loop calls window_records, the unfused one
    window_rows."""
    import ccl.splash.compiler as compiler
    calls: list = []
    records, rows = compiler.window_records, compiler.window_rows
    monkeypatch.setattr(compiler, "window_records", lambda *a: calls.append("records") or records(*a))
    monkeypatch.setattr(compiler, "window_rows", lambda *a: calls.append("rows") or rows(*a))
    for fuse in (True, False):
        run_loops(fuse, [{"k": "A", "i": 1, "v": 1.0, "b": True}], ("k",), True,
                  "for (r in W_stream where k = 'A') { output r; }", 1000)
    assert calls == ["records"] * 3 + ["rows"] * 3, calls
