"""The per-event cost of a Flex operator in the per-instance engine (no Spark).

    python bench/flex.py [--rows 200000] [--batch 1000] [--repeat 3] [--only a,b,...] [--clock cpu|wall]
                         [--profile]

Each shape is a small CCL project planned with ``ccl.plan.planner.plan_project``; its Flex's
engine (``runtime.engine.flex.make_engine``) is driven directly with generated events, ``batch``
events per ``process()`` call (one micro-batch of one instance), as ``runtime/processor.py`` does.

- ``a``: a ``dictionary(string, float)`` running total per symbol, updated per event, and an upsert
  of a record literal per event into a keyed output window;
- ``b``: ON input with IF/ELSE logic filling a ``typeof(Out)`` record, ``setOpcode`` and ``output``
  of that record into an output stream;
- ``c``: a stream input joined by hand with a window input (100 rows) with a
  ``for (r in W_stream where ...)`` loop and a ``W_stream[...]`` lookup (the window's rows arrive
  first, then the trades);
- ``d``: a counter per event and an ``EVERY 1 SECOND`` handler, processing time advancing 100 ms per
  batch;
- ``bucket``: the Flex of bench/project.py's ``full`` prefix (a ``dictionary(string, float)`` and a
  ``typeof(Out)`` record, over the changelog of a window keyed by ``Sym``, 4 partitions) end to end
  through ``runtime.processor.BucketRun.process_table``: a generated Arrow bucket in the processor's
  input layout (``batch`` rows, spread over the 4 instances) in, the output Arrow table out. Its
  line also gives the engine alone (``FlexEngine.process`` on the same rows as events) for the
  share of the cost outside the engine, and the baseline ``process_table`` replaced for an element
  without a kernel (``table(process(received_rows(...)))``), alternating with it in this process,
  and their ratio.

Prints µs/event per shape (the best of ``repeat`` runs, a fresh state each run), in CPU time of the
process by default (``--clock wall`` for elapsed time: on a busy machine that mostly measures the
other processes); with
``--profile``, a cProfile top 25 (cumulative and internal time) of one run of each shape.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import sys
import tempfile
import time
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ccl.plan.codec import plan_from_json, plan_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from runtime.engine.changes import Event  # noqa: E402
from runtime.engine.flex import make_engine  # noqa: E402

from project import ELEMENTS as PROJECT_ELEMENTS  # noqa: E402  (bench/project.py)

TRADES = "CREATE INPUT STREAM Trades SCHEMA (Sym string, Price float, Volume integer);\n"

SHAPES: dict[str, tuple[str, str, str]] = {
    "a": ("dictionary running total, upsert per event", "Totals", TRADES + """
CREATE FLEX TotalsFlex IN Trades
OUT OUTPUT WINDOW Totals SCHEMA (Sym string, LastPrice float, Total float) PRIMARY KEY (Sym)
BEGIN
    DECLARE
        dictionary(string, float) total;
    END;
    ON Trades {
        float t := total[Trades.Sym];
        if (isnull(t)) { t := 0.0; }
        t := t + Trades.Price * Trades.Volume;
        total[Trades.Sym] := t;
        output setOpcode([Sym = Trades.Sym; | LastPrice = Trades.Price; Total = t;], upsert);
    };
END;
"""),
    "b": ("IF/ELSE, setOpcode, output of a typeof record", "Alerts", TRADES + """
CREATE FLEX AlertsFlex IN Trades
OUT OUTPUT STREAM Alerts SCHEMA (Sym string, Level string, Price float, Big integer)
BEGIN
    DECLARE
        typeof(Alerts) outrec;
        integer bigCount := 0;
    END;
    ON Trades {
        outrec.Sym := Trades.Sym;
        outrec.Price := Trades.Price;
        if (Trades.Price > 150.0) {
            outrec.Level := 'high';
        } else if (Trades.Price < 60.0) {
            outrec.Level := 'low';
        } else {
            outrec.Level := 'mid';
        }
        if (Trades.Volume >= 900) {
            bigCount := bigCount + 1;
            outrec.Big := 1;
        } else {
            outrec.Big := 0;
        }
        output setOpcode(outrec, insert);
    };
END;
"""),
    "c": ("window input read with for-in where and W_stream[...]", "Exposure", TRADES + """
CREATE INPUT WINDOW Limits SCHEMA (Sym string, Desk string, MaxVol integer) PRIMARY KEY (Sym, Desk);
CREATE FLEX ExposureFlex IN Trades, Limits
OUT OUTPUT STREAM Exposure SCHEMA (Sym string, Desks integer, Room integer, Main integer)
BEGIN
    ON Trades {
        integer desks := 0;
        integer room := 0;
        for (r in Limits_stream where Sym = Trades.Sym) {
            desks := desks + 1;
            room := room + r.MaxVol - Trades.Volume;
        }
        typeof(Limits) main := Limits_stream[[Sym = Trades.Sym; Desk = 'main';|]];
        output [Sym = Trades.Sym; | Desks = desks; Room = room; Main = main.MaxVol;];
    };
END;
"""),
    "d": ("counter per event, EVERY 1 SECOND timer", "Heartbeat", TRADES + """
CREATE FLEX HeartbeatFlex IN Trades
OUT OUTPUT WINDOW Heartbeat SCHEMA (Id integer, Seen long) PRIMARY KEY (Id)
BEGIN
    DECLARE
        long seen := 0;
    END;
    ON Trades {
        seen := seen + 1;
    };
    EVERY 1 SECOND {
        output setOpcode([Id = 1; | Seen = seen;], upsert);
    };
END;
"""),
}

# bench/project.py's Flex (``full`` prefix), over an input window standing for its SymStats
BUCKET = """
CREATE INPUT WINDOW SymStats
    SCHEMA (Sym string, Trades integer, Volume integer, AvgPrice float, LastId long)
    PRIMARY KEY (Sym);
""" + dict(PROJECT_ELEMENTS)["flex"].replace("{out}", "OUTPUT ")
INSTANCES = 4

SYMBOLS = [f"S{i:03d}" for i in range(100)]
DESKS = ["main", "alt"]


def plan_data(text: str) -> dict:
    """The plan (as the engine reads it) of the CCL project ``text``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.ccl")
        with open(path, "w") as f:
            f.write(text)
        plan, diags = plan_project(path)
    if plan is None:
        raise SystemExit("\n".join(str(d) for d in diags))
    return plan_to_json(plan)  # type: ignore[no-any-return]


def build(text: str, name: str):  # type: ignore[no-untyped-def]
    """The engine of output element ``name`` of the CCL project ``text``."""
    plan = plan_from_json(plan_data(text))
    return make_engine(plan.element(name), plan)


def trades(rows: int, seed: int = 1) -> list[dict]:
    """Generated trade rows (Sym, Price, Volume) over 100 symbols."""
    rnd = random.Random(seed)
    return [{"Sym": rnd.choice(SYMBOLS), "Price": round(rnd.uniform(20.0, 200.0), 2),
             "Volume": rnd.randrange(1, 1000)} for _ in range(rows)]


def events_for(shape: str, rows: list[dict]) -> list[Event]:
    """The events of one run: for shape c the Limits window's rows (port 1) first."""
    out: list[Event] = []
    if shape == "c":
        for sym in SYMBOLS:
            for desk in DESKS:
                out.append(Event(1, "i", len(out) + 1, {"Sym": sym, "Desk": desk, "MaxVol": 5000}))
    out += [Event(0, "i", len(out) + i + 1, row) for i, row in enumerate(rows)]
    return out


def run_once(engine, events: list[Event], batch: int,  # type: ignore[no-untyped-def]
             clock: Callable[[], float] = time.process_time) -> float:
    """Seconds to process ``events`` in batches from a fresh state (processing time +100 ms per
    batch)."""
    state = engine.initial_state()
    now = 1_000_000
    start = clock()
    for i in range(0, len(events), batch):
        engine.process(state, events[i:i + batch], now)
        now += 100
    return clock() - start


def buckets(rows: int, batch: int, seed: int = 2) -> list[tuple[list[dict], list[tuple]]]:
    """Generated buckets of SymStats changelog rows in the processor's input layout: per bucket its
    meta columns (``__inst``, ``__seq``, ``__op`` by row) and ``__p0`` rows. A symbol's first row
    is an insert, later ones updates; the instance is the symbol's number modulo 4."""
    rnd = random.Random(seed)
    seen: set[str] = set()
    out = []
    seq = 0
    for start in range(0, rows, batch):
        values, meta = [], []
        for _ in range(min(batch, rows - start)):
            i = rnd.randrange(len(SYMBOLS))
            sym = SYMBOLS[i]
            seq += 1
            op = "u" if sym in seen else "i"
            seen.add(sym)
            trades = rnd.randrange(1, 21)
            values.append({"Sym": sym, "Trades": trades, "Volume": trades * rnd.randrange(1, 1000),
                           "AvgPrice": round(rnd.uniform(20.0, 200.0), 4), "LastId": 10_000_000 + seq})
            meta.append((i % INSTANCES, seq, op))
        out.append((values, meta))
    return out


def bucket_tables(parts: list[tuple[list[dict], list[tuple]]]) -> list:
    """The buckets of :func:`buckets` as Arrow tables (the columns runtime/topology.py gives a one-port
    element: no ``__why``/``__raw``, which default)."""
    import pyarrow as pa
    schema = pa.struct([("Sym", pa.string()), ("Trades", pa.int32()), ("Volume", pa.int32()),
                        ("AvgPrice", pa.float64()), ("LastId", pa.int64())])
    tables = []
    for values, meta in parts:
        n = len(values)
        tables.append(pa.table({
            "__port": pa.array([0] * n, pa.int32()),
            "__seq": pa.array([m[1] for m in meta], pa.int64()),
            "__sub": pa.array([0] * n, pa.int64()),
            "__src": pa.array([0] * n, pa.int32()),
            "__op": pa.array([m[2] for m in meta], pa.string()),
            "__inst": pa.array([m[0] for m in meta], pa.int32()),
            "__p0": pa.array(values, schema)}))
    return tables


def run_bucket(run, tables: list,  # type: ignore[no-untyped-def]
               clock: Callable[[], float] = time.process_time, rows_path: bool = False) -> float:
    """Seconds to put every table through ``run.process_table`` from fresh states, with the cycle
    collector paused as runtime/arrow_state.py does (output rows checked for bad records, which the
    bench must not have). ``rows_path``: through what ``process_table`` replaced for an element
    without a kernel instead (``table(process(received_rows(...)))``, the baseline)."""
    from runtime.processor import gc_paused, received_rows
    states: dict = {}
    now = 1_000_000
    with gc_paused():  # as runtime/arrow_state.py runs a bucket
        start = clock()
        for t in tables:
            out = (run.table(run.process(states, received_rows(t), now)) if rows_path
                   else run.process_table(states, t, now))
            now += 100
        took = clock() - start
    kinds = out.column("__kind").to_pylist()
    assert "bad" not in kinds, out.to_pylist()[:3]
    return took


def run_bucket_engine(engine, parts: list,  # type: ignore[no-untyped-def]
                      clock: Callable[[], float] = time.process_time) -> float:
    """Seconds for the engine alone on the buckets' rows (events per instance, made beforehand)."""
    batches = []
    for values, meta in parts:
        per: dict[int, list[Event]] = {}
        for v, (inst, seq, op) in zip(values, meta):
            per.setdefault(inst, []).append(Event(0, op, seq, v))
        batches.append(per)
    from runtime.processor import gc_paused
    states: dict = {}
    now = 1_000_000
    with gc_paused():
        start = clock()
        for per in batches:
            for inst, events in per.items():
                state = states.get(inst)
                if state is None:
                    state = states[inst] = engine.initial_state()
                engine.process(state, events, now)
            now += 100
        return clock() - start


def bucket(args, clock: Callable[[], float]) -> None:  # type: ignore[no-untyped-def]
    """The ``bucket`` measure: BucketRun.process_table end to end, and the engine alone."""
    import json

    from runtime.processor import BucketRun

    data = plan_data(BUCKET)
    run = BucketRun(json.dumps(data), "Moves")
    parts = buckets(args.rows, args.batch)
    tables = bucket_tables(parts)
    wholes, rows_paths = [], []
    for _ in range(args.repeat):  # process_table and its baseline alternating in this process
        wholes.append(run_bucket(run, tables, clock))
        rows_paths.append(run_bucket(run, tables, clock, rows_path=True))
    whole, rows_path = min(wholes), min(rows_paths)
    alone = min(run_bucket_engine(run.engine, parts, clock) for _ in range(args.repeat))
    print(f"bucket  {whole / args.rows * 1e6:8.2f} µs/event through BucketRun.process_table, "
          f"{alone / args.rows * 1e6:.2f} µs/event in the engine alone, "
          f"{rows_path / args.rows * 1e6:.2f} µs/event through the rows path "
          f"(table(process(received_rows)), ratio {whole / rows_path:.3f}) ({args.rows} events in "
          f"buckets of {args.batch}, best of {args.repeat}, {args.clock} time)", flush=True)
    if args.profile:
        profile("bucket", lambda: run_bucket(run, tables))


def profile(label: str, go: Callable[[], object]) -> None:
    """A cProfile top 25 of ``go()`` by cumulative and by internal time."""
    prof = cProfile.Profile()
    prof.enable()
    go()
    prof.disable()
    print(f"--- profile {label}")
    stats = pstats.Stats(prof).strip_dirs()
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    """Parse arguments, run every shape, print µs/event."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="shapes to run, e.g. a,c")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    rows = trades(args.rows)
    wanted = [s for s in args.only.split(",") if s] or [*SHAPES, "bucket"]
    for shape in wanted:
        if shape == "bucket":
            bucket(args, clock)
            continue
        what, name, text = SHAPES[shape]
        engine = build(text, name)
        events = events_for(shape, rows)
        best = min(run_once(engine, events, args.batch, clock) for _ in range(args.repeat))
        print(f"{shape}  {best / args.rows * 1e6:8.2f} µs/event  ({what}; {args.rows} events, "
              f"best of {args.repeat}, {args.clock} time)", flush=True)
        if args.profile:
            profile(shape, lambda: run_once(engine, events, args.batch))


if __name__ == "__main__":
    main()
