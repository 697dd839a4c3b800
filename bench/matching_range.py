"""CPU of a MATCHING element over one bucket of trades: this tree's matcher against another
version of ``runtime/engine/matching.py`` (by default main's), alternating in one process.

    python bench/matching_range.py [--rows 25000] [--instruments 2000] [--rounds 3]
                                   [--base FILE] [--on 'a.Sym = b.Sym AND ...']

Builds bench/shapes.py's *pattern* element (``MATCHING [10 SECONDS : a, b]``; ``--on`` replaces
its ON condition) and one bucket of ``--rows`` generated trades, each an insert on both ports
(bench/shapes_bucket.py ``bucket``), and runs it through ``BucketRun.process_table`` on fresh
states, once with the matcher of ``--base`` (swapped in while its ``BucketRun`` is made) and once
with this tree's, in turn, ``--rounds`` times, timing each with ``time.thread_time`` (the cycle
collector paused). Prints the least and the median µs per trade of each and whether the outputs
(rows, bad records, sequence and sub-numbers) are equal."""
from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import shapes as bench_shapes  # noqa: E402
import shapes_bucket  # noqa: E402
from ccl.plan.codec import plan_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from runtime.processor import BucketRun  # noqa: E402
import runtime.engine.matching as matching  # noqa: E402


def base_matcher(path: str | None) -> type:
    """The ``Matcher`` class of ``path`` (default: main's runtime/engine/matching.py)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        if path is None:
            path = os.path.join(d, "base_matching.py")
            with open(path, "w") as f:
                f.write(subprocess.run(["git", "-C", here, "show", "main:runtime/engine/matching.py"],
                                       check=True, capture_output=True, text=True).stdout)
        spec = importlib.util.spec_from_file_location("base_matching", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.Matcher


def main(argv: list[str] | None = None) -> int:
    """Time both matchers; exit code 0 when their outputs are equal."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=25_000)
    ap.add_argument("--instruments", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", help="the matching.py to compare with (default: main's)")
    ap.add_argument("--on", help="the ON condition instead of the shape's")
    args = ap.parse_args(argv)
    text = bench_shapes.shape_text("pattern")
    if args.on:
        text = re.sub(r"\bON .*;", lambda _m: f"ON {args.on};", text)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.ccl")
        with open(path, "w") as f:
            f.write(text)
        plan, diags = plan_project(path)
        if plan is None:
            raise SystemExit("\n".join(str(x) for x in diags))
    import json
    plan_text = json.dumps(plan_to_json(plan))
    new = matching.Matcher
    matching.Matcher = base_matcher(args.base)  # type: ignore[misc]
    try:
        runs = {"base": BucketRun(plan_text, "Jumps")}
    finally:
        matching.Matcher = new  # type: ignore[misc]
    runs["branch"] = BucketRun(plan_text, "Jumps")
    table = shapes_bucket.bucket(args.rows, args.instruments, 2)
    spent: dict[str, list[float]] = {k: [] for k in runs}
    outs = {}
    now = 1_700_000_000_000
    gc.disable()
    try:
        for _ in range(args.rounds):
            for how, run in runs.items():
                began = time.thread_time()
                outs[how] = run.process_table({}, table, now)
                spent[how].append(time.thread_time() - began)
                gc.collect()
    finally:
        gc.enable()
    trades = args.rows
    for how, s in spent.items():
        print(f"{how:>7}: least {min(s) / trades * 1e6:7.2f} µs/trade, median "
              f"{statistics.median(s) / trades * 1e6:7.2f} ({outs[how].num_rows} output rows)")
    order = [("__inst", "ascending"), ("__seq", "ascending"), ("__sub", "ascending"),
             ("__kind", "ascending")]
    same = outs["base"].sort_by(order).equals(outs["branch"].sort_by(order))
    print(f"outputs equal: {same} (in the same order: {outs['base'].equals(outs['branch'])}); load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
