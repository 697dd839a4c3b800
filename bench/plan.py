"""Planning time (``ccl.plan.planner.plan_project``, the physical decisions included) of a
generated project, no Spark.

    python bench/plan.py [--rounds 60] [--repeat 5]

Each round adds seven elements, one of each kind of physical decision: an input stream and an
input window, a stream aggregation whose changes a stream observes (per instance, the
``aggregation`` kernel), an aggregation of a window (``window_aggregation``), a stream joined with
a window (``join``) and a window with a row-count KEEP (``keep``). Prints the best CPU time of
``repeat`` plannings. Compare two checkouts by running each (``PYTHONPATH=CHECKOUT``), alternately
and more than once: the machine's load moves single figures.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ccl.plan.planner import plan_project  # noqa: E402

ROUND = """create input stream s{i} schema (sym string, px float, q integer);
create input window w{i} schema (sym string, px float) primary key (sym);
create window a{i} primary key deduced keep all as select s{i}.sym, sum(s{i}.q) n from s{i} group by s{i}.sym;
create output stream b{i} as select a{i}.sym from a{i};
create output window c{i} primary key deduced as select w{i}.sym, count(*) n from w{i} group by w{i}.sym;
create output stream j{i} as select s{i}.sym, w{i}.px from s{i} inner join w{i} on s{i}.sym = w{i}.sym;
create output window k{i} primary key (sym) keep 3 rows as select s{i}.sym, s{i}.px from s{i};
"""


def main() -> None:
    """Plan the generated project ``--repeat`` times and print the best CPU time."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    path = os.path.join(tempfile.mkdtemp(prefix="ccl-bench-plan-"), "p.ccl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(ROUND.format(i=i) for i in range(args.rounds)))
    best = float("inf")
    for _ in range(args.repeat):
        start = time.process_time()
        plan, diags = plan_project(path)
        best = min(best, time.process_time() - start)
        assert plan is not None, [str(d) for d in diags][:3]
    kernels = sorted({e.physical.kernel or "-" for e in plan.elements})
    print(f"{args.rounds * 7} elements, kernels {', '.join(kernels)}: planned in {best:.3f} s "
          f"(best of {args.repeat})")


if __name__ == "__main__":
    main()
