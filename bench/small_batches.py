"""The fixed costs of small micro-batches: bench/project.py's project, a few trades per batch.

    python bench/small_batches.py capture FILE [--sizes 1,5,20] [--batches 30] [--prefill 10000]
    python bench/small_batches.py replay FILE [--repeat 3] [--code DIR] [--json OUT]
    python bench/small_batches.py alternate FILE --code BASE [--code BRANCH] [--rounds 4]

Real-time use means batches of a few rows. ``capture`` runs the whole project (join with the
broadcast Instruments window, ``KEEP 20 ROWS PER (Sym)``, the GROUP BY aggregate, the Flex; 4
instances each, 8 buckets) on generated trades, one batch per trade file: first the instruments
and ``--prefill`` trades (the windows filled; not counted), then ``--batches`` batches of each
size of ``--sizes`` trades. Each batch goes through what ``ccl run``'s project query does with a
small batch on the driver (runtime/project_query.py, without Spark: the input parsed by
``rows_here``, ``arrow_frames.native_input``, then per element ``arrow_frames.processor_input``
and ``runtime.bucket_pool.run_buckets``, its rows handed on as ``changelog_frame``); every
``run_buckets`` call (one element's batch) is recorded with its arguments into FILE (pickled
Arrow tables). (Through ``run_plan`` and Spark, one small batch took seconds of Spark's own
scheduling on this machine: 10 batches in 7 minutes.)

``replay`` runs those calls again, in order, in this process (no Spark: the code ``ccl run`` runs
for a small batch, ``run_buckets`` with ``runtime.arrow_state.bucket_runner`` per bucket, the
state files and the RocksDB state store of every bucket included; ``prune`` after each batch, as
the project's query does), on new state directories, ``--repeat`` times, and prints per batch
size the CPU (``time.process_time``) and elapsed time per batch and per trade, by element, and
the state store's ``open``, ``commit`` and ``close`` (wrapped for the measurement). ``--code DIR``
runs another checkout's ``runtime`` (e.g. main exported with ``git archive``) on the same calls.
``alternate`` runs ``replay`` in fresh processes, the checkouts taking turns, and prints each
round's figures and the least and median per checkout.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def _code(directory: str | None) -> None:
    """Put the checkout ``directory`` (default: this one) first on the import path."""
    sys.path.insert(0, os.path.abspath(directory) if directory else os.path.dirname(HERE))
    sys.path.insert(1, HERE)


# --- capture ------------------------------------------------------------------------------------

def _write_trades(trades: str, sizes: list[int], batches: int, prefill: int, instruments: int) -> list[int]:
    """The trade files, one per batch in name order; the trades of each file."""
    rnd = random.Random(11)
    syms = [f"S{k:05d}" for k in range(instruments)]
    os.makedirs(trades, exist_ok=True)
    counts = [prefill] + [size for size in sizes for _ in range(batches)]
    trade_id = 0
    for f, count in enumerate(counts):
        lines = ["TradeId,Sym,Price,Qty\n"]
        for _ in range(count):
            trade_id += 1
            lines.append(f"{trade_id},{rnd.choice(syms)},{rnd.randrange(1, 10**6) / 100:.2f},"
                         f"{rnd.randrange(1, 1000)}\n")
        with open(os.path.join(trades, f"t{f:05d}.csv"), "w") as out:
            out.write("".join(lines))
        # Spark's file source takes the oldest files first: distinct times in name order
        os.utime(os.path.join(trades, f"t{f:05d}.csv"), (1_700_000_000 + f, 1_700_000_000 + f))
    return counts


def capture(path: str, sizes: list[int], batches: int, prefill: int, instruments: int) -> None:
    """Run the project on small batches and record its bucket calls into ``path``."""
    _code(None)
    import pyarrow.compute as pc

    import project as bench_project
    from ccl.plan.planner import plan_project
    from runtime import arrow_frames
    from runtime.arrow_state import prepare_rows
    from runtime.bucket_pool import run_buckets
    from runtime.inputs.file_input import input_format, rows_here
    from runtime.json_plan import engine_plan_text
    from runtime.processor import KIND
    from runtime.run_dir import RunDirs
    from runtime.run_setup import RunOptions, element_files, layout_of, prepare_run_dir
    from runtime.topology import first_ports, is_input

    root = tempfile.mkdtemp(prefix="ccl-bench-small-")
    calls: list[dict] = []
    try:
        with open(os.path.join(root, "instruments.csv"), "w") as out:
            out.write("Sym,Sector,LotSize\n")
            out.write("".join(f"S{k:05d},SEC{k % 11},{100 * (1 + k % 5)}\n" for k in range(instruments)))
        trades = os.path.join(root, "trades")
        counts = _write_trades(trades, sizes, batches, prefill, instruments)
        ccl = os.path.join(root, "p.ccl")
        with open(ccl, "w") as f:
            f.write(bench_project.project_text(len(bench_project.ELEMENTS)))
        plan, diags = plan_project(ccl)
        if plan is None:
            raise SystemExit("\n".join(str(d) for d in diags))
        run_dir = os.path.join(root, "run")
        options = RunOptions(inputs={"Trades": trades,
                                     "Instruments": os.path.join(root, "instruments.csv")},
                             base_dir=root, run_dir=run_dir, until_idle=True, buckets=8)
        prepare_run_dir(plan, options)
        dirs = RunDirs(run_dir)
        layout = layout_of(run_dir)
        plan_text = engine_plan_text(plan)
        stages = [plan.element(name) for name in layout.project]
        specs = {}
        for e in stages:
            if is_input(e):
                files, props = element_files(e, plan, options)
                specs[e.name] = (files, input_format(e, {k: str(v) for k, v in props.items()}))
        for e in stages:
            if not is_input(e):
                prepare_rows(dirs.of("state", e.name), e, layout.buckets)
        began = time.perf_counter()
        # batch 0: the instruments and the prefill; then one trade file per batch (the trade
        # files numbered after the instruments' file, as they would have arrived)
        names = sorted(os.listdir(trades))
        for batch_id, name in enumerate(names):
            inputs = {"Trades": {name: batch_id + 1}}
            if batch_id == 0:
                inputs["Instruments"] = {"instruments.csv": 0}
            now = 1_700_000_000_000 + 1000 * batch_id
            outputs: dict[str, Any] = {}
            for e in stages:
                if is_input(e):
                    if e.name not in inputs:
                        continue
                    files, fmt = specs[e.name]
                    frame = arrow_frames.input_frame(rows_here(e, files, fmt, inputs[e.name]))
                    out = arrow_frames.native_input(e, frame)
                else:
                    frames = [outputs.get(src) for _, src in e.ports()]
                    if all(f is None for f in frames):
                        continue
                    proc_in = arrow_frames.processor_input(plan, e, frames, layout.buckets,
                                                           layout.by_group.get(e.name, ()))
                    runner = (plan_text, e.name, first_ports(plan, e), dirs.of("state", e.name),
                              batch_id, now, False)
                    calls.append({"args": runner, "table": proc_in, "element": e.name,
                                  "parallel_rows": options.parallel_rows})
                    out = run_buckets(runner, proc_in, e, 1, options.parallel_rows)
                kept = out.filter(pc.equal(out.column(KIND), "row"))
                outputs[e.name] = (arrow_frames.changelog_frame(kept, [c.name for c in e.columns])
                                   if kept.num_rows else None)
        wall = time.perf_counter() - began
        for c in calls:  # state directories relative to the run directory (replayed elsewhere)
            args = list(c["args"])
            args[3] = os.path.relpath(args[3], run_dir)
            c["args"] = tuple(args)
        with open(path, "wb") as f:
            pickle.dump({"calls": calls, "counts": counts, "sizes": sizes, "batches": batches,
                         "prefill": prefill, "buckets": layout.buckets, "run_seconds": wall}, f,
                        protocol=5)
        print(f"{len(calls)} bucket calls over {len(counts)} batches; they took {wall:.1f} s",
              file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- replay -------------------------------------------------------------------------------------

class Meter:
    """CPU (process_time) and elapsed seconds and counts, by name."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = collections.defaultdict(float)
        self.wall: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` adding its time to ``name``."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            c, w = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu[name] += time.process_time() - c
                self.wall[name] += time.perf_counter() - w
                self.calls[name] += 1
        return timed


def _batches_of(calls: list[dict]) -> list[tuple[int, list[dict]]]:
    """The calls grouped by batch id, in order."""
    out: list[tuple[int, list[dict]]] = []
    for c in calls:
        batch_id = c["args"][4]
        if not out or out[-1][0] != batch_id:
            out.append((batch_id, []))
        out[-1][1].append(c)
    return out


def trades_per_batch(calls: list[dict]) -> dict[int, int]:
    """Per recorded batch id, its trades: the join's rows of its first port (Trades, one
    instance per trade)."""
    trades = {}
    for batch_id, batch in _batches_of(calls):
        for c in batch:
            if c["element"] == "Enriched":
                trades[batch_id] = sum(1 for p in c["table"].column("__port").to_pylist() if p == 0)
    return trades


def replay_once(data: dict, meter: Meter, root: str) -> list[dict]:
    """Every recorded call once, on new state under ``root``; per batch its figures."""
    from runtime import arrow_state
    from runtime.bucket_pool import run_buckets
    from runtime.state.store import create

    elements: dict[str, Any] = {}
    prepared: set[str] = set()
    out = []
    for batch_id, calls in _batches_of(data["calls"]):
        meter.cpu.clear()
        meter.wall.clear()
        meter.calls.clear()
        c0, w0 = time.process_time(), time.perf_counter()
        by_element = {}
        for c in calls:
            args = list(c["args"])
            args[3] = os.path.join(root, args[3])
            if args[3] not in prepared:  # as prepare_rows does before the first batch
                create(arrow_state.rows_root(args[3]), data["buckets"])
                prepared.add(args[3])
            element = elements.get(c["element"])
            if element is None:
                from runtime.json_plan import engine_plan
                element = elements[c["element"]] = engine_plan(args[0]).element(c["element"])
            e_c, e_w = time.process_time(), time.perf_counter()
            run_buckets(tuple(args), c["table"], element, 1, c["parallel_rows"])
            by_element[c["element"]] = (time.process_time() - e_c, time.perf_counter() - e_w)
        for c in calls:
            arrow_state.prune(os.path.join(root, c["args"][3]), batch_id)
        out.append({"batch": batch_id, "cpu": time.process_time() - c0,
                    "wall": time.perf_counter() - w0, "elements": by_element,
                    "store_cpu": dict(meter.cpu), "store_wall": dict(meter.wall),
                    "store_calls": dict(meter.calls)})
    return out


def _install(meter: Meter) -> None:
    from runtime.state.store import BucketStore
    BucketStore.open = classmethod(meter.wrap("open", BucketStore.open.__func__))  # type: ignore[method-assign]
    BucketStore.commit = meter.wrap("commit", BucketStore.commit)  # type: ignore[method-assign]
    BucketStore.close = meter.wrap("close", BucketStore.close)  # type: ignore[method-assign]


def _finish() -> None:
    """Close whatever the checkout keeps open between batches (none on main)."""
    try:
        from runtime.arrow_state import release_stores  # type: ignore[attr-defined]
    except ImportError:
        return
    release_stores()


def replay(path: str, repeat: int) -> dict:
    """``repeat`` replays of ``path``; per batch size the least and median of each figure."""
    import gc
    with open(path, "rb") as f:
        data = pickle.load(f)
    meter = Meter()
    _install(meter)
    runs = []
    for _ in range(repeat):
        root = tempfile.mkdtemp(prefix="ccl-bench-small-replay-")
        try:
            gc.collect()
            runs.append(replay_once(data, meter, root))
            _finish()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    trades = trades_per_batch(data["calls"])
    summary: dict[str, Any] = {}
    for size in data["sizes"]:
        figures: dict[str, list[float]] = collections.defaultdict(list)
        for run in runs:
            picked = [b for b in run if trades.get(b["batch"]) == size]
            if not picked:
                continue
            n = len(picked)
            figures["cpu ms/batch"].append(1e3 * sum(b["cpu"] for b in picked) / n)
            figures["wall ms/batch"].append(1e3 * sum(b["wall"] for b in picked) / n)
            figures["cpu µs/trade"].append(1e6 * sum(b["cpu"] for b in picked) / n / size)
            for name in sorted({e for b in picked for e in b["elements"]}):
                figures[f"{name} cpu ms"].append(1e3 * sum(b["elements"].get(name, (0, 0))[0] for b in picked) / n)
                figures[f"{name} wall ms"].append(1e3 * sum(b["elements"].get(name, (0, 0))[1] for b in picked) / n)
            for what in ("open", "commit", "close"):
                figures[f"store {what} calls"].append(sum(b["store_calls"].get(what, 0) for b in picked) / n)
                figures[f"store {what} cpu ms"].append(1e3 * sum(b["store_cpu"].get(what, 0) for b in picked) / n)
                figures[f"store {what} wall ms"].append(1e3 * sum(b["store_wall"].get(what, 0) for b in picked) / n)
        summary[str(size)] = {k: {"least": min(v), "median": statistics.median(v), "runs": v}
                              for k, v in figures.items()}
    return {"summary": summary, "load": os.getloadavg()}


def _print(result: dict, label: str = "") -> None:
    for size, figures in result["summary"].items():
        print(f"{label}{size} trade(s) per batch (least, median of the runs):")
        for name, v in figures.items():
            print(f"  {name:>28} {v['least']:9.3f} {v['median']:9.3f}")
    print("load average: " + ", ".join(f"{x:.1f}" for x in result["load"]))


def alternate(path: str, codes: list[str], rounds: int, repeat: int) -> dict:
    """``replay`` of each checkout of ``codes`` in a process of its own, taking turns."""
    results: dict[str, list[dict]] = {c: [] for c in codes}
    for r in range(rounds):
        order = codes if r % 2 == 0 else codes[::-1]
        for code in order:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "replay", path,
                                   "--repeat", str(repeat), "--code", code, "--json", "-"],
                                  check=True, capture_output=True, text=True)
            result = json.loads(done.stdout)
            results[code].append(result)
            s = result["summary"]
            print(f"round {r + 1} {code}: " + "; ".join(
                f"{size}: cpu {f['cpu ms/batch']['least']:.2f} ms, wall {f['wall ms/batch']['least']:.2f} ms"
                for size, f in s.items()) + f" (load {result['load'][0]:.1f})", flush=True)
    print("per checkout, over the rounds (each round's least): least / median, ms per batch")
    for code in codes:
        for size in results[code][0]["summary"]:
            for what in ("cpu ms/batch", "wall ms/batch"):
                v = [r["summary"][size][what]["least"] for r in results[code]]
                print(f"  {code} {size} rows {what}: {min(v):.2f} / {statistics.median(v):.2f}")
    return results


def main(argv: list[str] | None = None) -> int:
    """Capture, replay or alternate; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("file")
    c.add_argument("--sizes", default="1,5,20")
    c.add_argument("--batches", type=int, default=30)
    c.add_argument("--prefill", type=int, default=10_000)
    c.add_argument("--instruments", type=int, default=2_000)
    r = sub.add_parser("replay")
    r.add_argument("file")
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--code", help="a checkout whose runtime runs the calls (default: this one)")
    r.add_argument("--json", metavar="OUT", help="write the figures as JSON (-: stdout only)")
    a = sub.add_parser("alternate")
    a.add_argument("file")
    a.add_argument("--code", action="append", required=True)
    a.add_argument("--rounds", type=int, default=4)
    a.add_argument("--repeat", type=int, default=2)
    a.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        capture(args.file, [int(s) for s in args.sizes.split(",")], args.batches, args.prefill,
                args.instruments)
    elif args.cmd == "replay":
        _code(args.code)
        result = replay(args.file, args.repeat)
        if args.json == "-":
            json.dump(result, sys.stdout)
            return 0
        _print(result)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    else:
        results = alternate(args.file, args.code, args.rounds, args.repeat)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
