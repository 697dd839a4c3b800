"""The cost of a ``runtime.built_once.once`` cache key per call (paid on every micro-batch by the
helpers that build Spark Columns per plan part), with the plan's elements as the typed
``Element`` (keyed by its ``repr``) against their JSON form (keyed by ``json.dumps`` with sorted
keys, as before the runtime's modules took the typed plan). No Spark.

    python bench/built_once_keys.py [--repeat 5] [--number 200]

For each project in projects/: the microseconds per key of all its elements, typed and JSON, and
their ratio, best of ``repeat`` rounds of ``number`` keys per element (same process, alternately:
the machine's load moves single figures).
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from ccl.plan.codec import element_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from runtime.built_once import _key  # noqa: E402


def _best(keys: list, number: int, repeat: int) -> float:
    """Best seconds per key over ``repeat`` rounds of ``number`` keys of each of ``keys``."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        for _ in range(number):
            for k in keys:
                _key(k)
        best = min(best, (time.perf_counter() - began) / (number * len(keys)))
    return best


def main() -> None:
    """Print the key cost per project, typed against JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--number", type=int, default=200)
    args = p.parse_args()
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "projects")
    for ccl in sorted(glob.glob(os.path.join(root, "*", "*.ccl"))):
        ccr = ccl[:-4] + ".ccr"
        plan, _ = plan_project(ccl, ccr if os.path.exists(ccr) else None)
        if plan is None:
            continue
        typed = list(plan.elements)
        as_json = [element_to_json(e) for e in typed]
        json_s = _best(as_json, args.number, args.repeat)
        typed_s = _best(typed, args.number, args.repeat)
        print(f"{os.path.basename(ccl):28s} {len(typed):3d} elements  json {json_s * 1e6:7.1f} us  "
              f"typed {typed_s * 1e6:7.1f} us  typed/json {typed_s / json_s:5.2f}")


if __name__ == "__main__":
    main()
