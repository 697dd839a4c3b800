"""Planning time (``ccl.plan.planner.plan_project``, the physical decisions included) of a
generated project and the decoding of its JSON, no Spark; and (``--crossings``) where the runtime
calls into the compiler.

    python bench/plan.py [--rounds 60] [--repeat 5]
    python bench/plan.py --crossings [--project stock_prices]
    python bench/plan.py --sizes

Each round adds seven elements, one of each kind of physical decision: an input stream and an
input window, a stream aggregation whose changes a stream observes (per instance, the
``aggregation`` kernel), an aggregation of a window (``window_aggregation``), a stream joined with
a window (``join``) and a window with a row-count KEEP (``keep``). Prints the best CPU time of
``repeat`` plannings. Compare two checkouts by running each (``PYTHONPATH=CHECKOUT``), alternately
and more than once: the machine's load moves single figures.

``--crossings`` follows the plan from ``runtime.run.run_plan`` (issue 23's measure): it runs an
example project of projects/ until idle on a local Spark with a profiler on every thread of the
driver, and records each distinct call from a function of runtime/ into a function of ccl/. A
call into the plan's types and codec (``ccl.plan.model``, ``ccl.plan.codec``), the syntax trees
(``ccl.syntax.nodes``), the SPLASH interpreter (``ccl.splash``) or the lowerings
(``ccl.plan.lowering``) is a hand-over; any other is a *crossing* (the runtime asking the compiler
what the plan means). It also lists, read from the source as tests/test_layers.py reads it, every
import of ccl/ by the runtime modules ``runtime.run`` reaches, so that a crossing on a path the
run did not take shows too. (The executors' Python workers are not traced: what they import of
ccl/ is in the static list.)

``--sizes`` prints the largest module of each package of ccl/ and runtime/ (its lines, as ``wc -l``
counts them: docstrings and comments included; a subpackage is a package of its own).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

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


ROOT = Path(__file__).resolve().parent.parent
# what the runtime may take from ccl/ (tests/test_layers.py): the plan's types and codec, the
# syntax trees, the SPLASH interpreter, the lowerings
HAND_OVERS = ("ccl.plan.model", "ccl.plan.codec", "ccl.syntax.nodes", "ccl.splash",
              "ccl.plan.lowering")


def _module_of(path: str) -> str:
    """The dotted module of a source file of this checkout ('' outside ccl/ and runtime/)."""
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return ""
    if rel.parts[0] not in ("ccl", "runtime") or rel.suffix != ".py":
        return ""
    return ".".join(rel.with_suffix("").parts).removesuffix(".__init__")


def _hand_over(module: str) -> bool:
    return any(module == h or module.startswith(h + ".") for h in HAND_OVERS)


def static_imports() -> dict[str, set[str]]:
    """Per ccl/ module, the runtime modules reachable from ``runtime.run`` (by their imports,
    those inside functions included) that import it."""
    modules = {_module_of(str(p)): p for pkg in ("ccl", "runtime") for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = parts[:len(parts) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                           for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    seen, todo = set(), ["runtime.run"]
    while todo:
        m = todo.pop()
        if m not in seen and m.startswith("runtime"):
            seen.add(m)
            todo.extend(graph[m])
    out: dict[str, set[str]] = defaultdict(set)
    for m in seen:
        for t in graph[m]:
            if t.startswith("ccl"):
                out[t].add(m)
    return out


def traced_run(project: str) -> dict[tuple[str, str], int]:
    """Run ``projects/PROJECT`` until idle with a profiler on the driver's threads: the calls
    from runtime/ into ccl/, ``(caller, callee)`` as ``module:function`` -> how many."""
    from ccl.plan.planner import plan_project
    from runtime.run import run_plan
    from runtime.run_setup import RunOptions
    from runtime.session import get_session

    directory = ROOT / "projects" / project
    ccl_file = next(directory.glob("*.ccl"))
    spark = get_session("local[2]", app_name="ccl-bench-crossings", shuffle_partitions=2)
    calls: dict[tuple[str, str], int] = defaultdict(int)
    names: dict[object, str] = {}  # code object -> its module (one path lookup per code object)

    def module(code) -> str:
        if code not in names:
            names[code] = _module_of(code.co_filename)
        return names[code]

    def profile(frame, event, _arg):
        if event != "call":
            return
        callee = module(frame.f_code)
        if not callee.startswith("ccl"):
            return
        back = frame.f_back
        caller = module(back.f_code) if back is not None else ""
        if caller.startswith("runtime"):
            calls[(f"{caller}:{back.f_code.co_qualname}", f"{callee}:{frame.f_code.co_qualname}")] += 1

    work = tempfile.mkdtemp(prefix="ccl-bench-crossings-")
    plan, diags = plan_project(str(ccl_file))
    assert plan is not None, [str(d) for d in diags][:3]
    options = RunOptions(base_dir=str(directory), run_dir=os.path.join(work, "run"),
                         until_idle=True, buckets=2)
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run_plan(spark, plan, options, os.path.join(work, "out"))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        spark.stop()
    return calls


def crossings(project: str) -> None:
    """Print the runtime's calls into ccl/ on a run of ``project`` and its imports of ccl/."""
    calls = traced_run(project)
    crossing = sorted(c for c in calls if not _hand_over(c[1].partition(":")[0]))
    handed = sorted({c[1] for c in calls if _hand_over(c[1].partition(":")[0])})
    print(f"run_plan on projects/{project}: {len(crossing)} crossing(s), "
          f"{len(handed)} hand-over function(s) called from runtime/")
    for caller, callee in crossing:
        print(f"  crossing  {caller} -> {callee} ({calls[(caller, callee)]} calls)")
    for callee in handed:
        print(f"  hand-over {callee}")
    imports = static_imports()
    bad = {m: users for m, users in imports.items() if not _hand_over(m)}
    print(f"imports of ccl/ by the runtime modules runtime.run reaches: {len(imports)} module(s), "
          f"{len(bad)} outside the hand-overs")
    for m in sorted(imports):
        print(f"  {'crossing ' if m in bad else 'hand-over'} {m} <- {', '.join(sorted(imports[m]))}")


def module_sizes() -> None:
    """Print the largest module of each package of ccl/ and runtime/, in lines."""
    largest: dict[str, tuple[int, str]] = {}
    for path in sorted(p for pkg in ("ccl", "runtime") for p in (ROOT / pkg).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.name.startswith("_parsetab"):  # generated on first use, not committed
            continue
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        package = "/".join(rel.parts[:-1])
        if lines > largest.get(package, (-1, ""))[0]:
            largest[package] = (lines, rel.name)
    for package, (lines, name) in sorted(largest.items()):
        print(f"{package + '/':26} {name:22} {lines:>6,}")


def main() -> None:
    """Plan the generated project ``--repeat`` times and print the best CPU time; with
    ``--crossings`` count the runtime's calls into the compiler instead."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--crossings", action="store_true",
                   help="follow the plan from run_plan and count the calls into ccl/")
    p.add_argument("--project", default="stock_prices", help="the project of projects/ run")
    p.add_argument("--sizes", action="store_true",
                   help="the largest module of each package of ccl/ and runtime/")
    args = p.parse_args()
    if args.sizes:
        module_sizes()
        return
    if args.crossings:
        crossings(args.project)
        return
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
    # what reading a run directory's plan.json costs the runtime (runtime.run_dir.saved_run_plan,
    # once or twice per run start): JSON text to the typed plan
    from ccl.plan.codec import plan_from_json, plan_to_json
    text = json.dumps(plan_to_json(plan))
    decode = float("inf")
    for _ in range(args.repeat):
        start = time.process_time()
        plan_from_json(json.loads(text))
        decode = min(decode, time.process_time() - start)
    print(f"its JSON ({len(text):,} bytes) decoded to the typed plan in {decode:.3f} s")


if __name__ == "__main__":
    main()
