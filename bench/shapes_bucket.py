"""CPU of one bench/shapes.py element over one bucket of trades, with its plan's kernel and with
the engine row by row, alternating in one process.

    python bench/shapes_bucket.py [--shape derived] [--element NAME] [--rows 100000]
                                  [--instruments 2000] [--rounds 5]

Builds the shape's plan (bench/shapes.py ``SHAPES``), one bucket of ``--rows`` generated trades
(bench/project.py's generator, every row an insert on port 0 of the element, spread over 4
instances by symbol) and runs it through ``BucketRun.process_table`` on fresh states: once with
the kernel the plan names (``kernel``), once with the kernel taken away (``engine``) and once
with that engine's calls, CASE and casts evaluated by the SPLASH interpreter per row, as before
they had direct closures (``interp.``), in turn,
``--rounds`` times, timing each with ``time.thread_time`` (the cycle collector paused). Prints
the least and the median µs per row of each, and the outputs' equality. An element that reads a derived element (*deduced_window*'s Notional reads
the window Recent) gets that element's changes over the trades as its bucket (made once, by the
plan's path for it, and not timed); one that joins derived elements (*copart_join*'s Both) gets
each source's changes on its port. A UNION element (*union*'s Edges, the default element of a
shape that has one) gets each select's source's changes on that select's port, one after the
other (the instance 0 when the element has one instance). With ``--expire`` (an element with a
time KEEP) each run is followed by the expiry of every row (``BucketRun.expire`` at a time past
the KEEP), timed apart, and the windows the runs leave are compared too."""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402

import project as bench_project  # noqa: E402
import shapes as bench_shapes  # noqa: E402
from ccl.plan.codec import plan_to_json  # noqa: E402
from ccl.plan.planner import plan_project  # noqa: E402
from ccl.syntax import nodes as n  # noqa: E402
from runtime.processor import BucketRun  # noqa: E402


def bucket(rows: int, instruments: int, ports: int = 1) -> pa.Table:
    """``rows`` generated trades as one bucket of inserts (the processor's input table), each on
    ports ``0..ports-1`` (a self-join reads the trades on each of its ports)."""
    with tempfile.TemporaryDirectory() as d:
        bench_project.generate(d, rows, instruments, 1)
        import pyarrow.csv as pcsv
        t = pcsv.read_csv(os.path.join(d, "trades", "part000.csv"), convert_options=pcsv.ConvertOptions(
            column_types={"TradeId": pa.int64(), "Sym": pa.string(), "Price": pa.float64(),
                          "Qty": pa.int32()}))
    n = t.num_rows
    syms = t.column("Sym").to_pylist()
    inst = [hash(s) % 4 for s in syms]
    values = pa.StructArray.from_arrays([t.column(c).combine_chunks() for c in t.column_names],
                                        names=t.column_names)
    empty = pa.nulls(n, values.type)
    tables = [pa.table({"__port": pa.array([p] * n, pa.int32()),
                        "__seq": pa.array(range(1, n + 1), pa.int64()),
                        "__sub": pa.array([0] * n, pa.int64()), "__src": pa.array([0] * n, pa.int32()),
                        "__op": pa.array(["i"] * n, pa.string()), "__inst": pa.array(inst, pa.int32()),
                        "__why": pa.array([None] * n, pa.string()),
                        "__raw": pa.array([None] * n, pa.string()),
                        **{f"__p{q}": values if q == p else empty for q in range(ports)},
                        "__bucket": pa.array([0] * n, pa.int32())}) for p in range(ports)]
    return pa.concat_tables(tables)


def changes_of(run: BucketRun, table: pa.Table, port: int = 0, ports: int = 1) -> pa.Table:
    """The changes ``run``'s element makes of a bucket (its ``row`` outputs) as the bucket of an
    element reading it on ``port`` (of ``ports``): their instance, sequence and sub-number,
    opcode and row."""
    out = run.process_table({}, table, 0)
    out = out.filter(pa.compute.equal(out.column("__kind"), "row"))
    out = out.sort_by([("__inst", "ascending"), ("__seq", "ascending"), ("__sub", "ascending")])
    n = out.num_rows
    values = pa.StructArray.from_arrays([out.column(c).combine_chunks() for c in run.columns],
                                        names=run.columns)
    return pa.table({"__port": pa.array([port] * n, pa.int32()), "__seq": out.column("__seq"),
                     "__sub": out.column("__sub"), "__src": pa.array([0] * n, pa.int32()),
                     "__op": out.column("__op"), "__inst": out.column("__inst"),
                     "__why": pa.array([None] * n, pa.string()),
                     "__raw": pa.array([None] * n, pa.string()),
                     **{f"__p{q}": values if q == port else pa.nulls(n, values.type)
                        for q in range(ports)},
                     "__bucket": pa.array([0] * n, pa.int32())})


def union_bucket(text: str, plan, name: str, trades: pa.Table) -> pa.Table:
    """The bucket of UNION element ``name``: select k's source's rows on port k (the trades for
    an input, else that element's changes over them), the ports one after the other."""
    from ccl.plan.physical import instance_count
    selects = plan.element(name).query.selects
    sources = []
    for sel in selects:
        source = sel.sources[0].element
        sources.append(trades if plan.element(source).role == "input"
                       else changes_of(BucketRun(text, source), trades))
    values = [t.column("__p0").combine_chunks() for t in sources]
    parts = []
    for k, t in enumerate(sources):
        n = t.num_rows
        cols = {c: t.column(c) for c in ("__seq", "__sub", "__src", "__op", "__inst", "__why", "__raw")}
        cols["__port"] = pa.array([k] * n, pa.int32())
        if instance_count(plan.element(name)) == 1:
            cols["__inst"] = pa.array([0] * n, pa.int32())
        for q, v in enumerate(values):
            cols[f"__p{q}"] = v if q == k else pa.nulls(n, v.type)
        cols["__bucket"] = pa.array([0] * n, pa.int32())
        parts.append(pa.table(cols))
    order = ["__port", "__seq", "__sub", "__src", "__op", "__inst", "__why", "__raw",
             *[f"__p{q}" for q in range(len(values))], "__bucket"]
    return pa.concat_tables([t.select(order) for t in parts])


def main(argv: list[str] | None = None) -> int:
    """Time the element both ways; exit code 0."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="derived", choices=list(bench_shapes.SHAPES))
    ap.add_argument("--element", help="the element (default: the shape's first derived element)")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--instruments", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ports", type=int, default=1, help="each trade on this many ports (a self-join's)")
    ap.add_argument("--columnar", choices=["rows", "batch"],
                    help="run an aggregation kernel in this mode, whatever the plan says (rows: "
                         "the changes as if read one by one)")
    ap.add_argument("--expire", action="store_true",
                    help="then expire every row (a time KEEP), timed apart")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.ccl")
        with open(path, "w") as f:
            f.write(bench_shapes.shape_text(args.shape))
        plan, diags = plan_project(path)
        if plan is None:
            raise SystemExit("\n".join(str(x) for x in diags))
    derived = [e for e in plan.elements if e.role != "input"]
    name = args.element or next((e.name for e in derived
                                 if e.query is not None and len(e.query.selects) > 1),
                                derived[0].name)
    as_json = plan_to_json(plan)
    if args.columnar:
        for e in as_json["elements"]:
            if e["name"] == name and e["physical"]["columnar"] is not None:
                e["physical"]["columnar"] = args.columnar
    text = json.dumps(as_json)
    runs = {"kernel": BucketRun(text, name), "engine": BucketRun(text, name)}
    runs["engine"].kernel = runs["engine"].columnar = None
    # the engine as it was before calls, CASE and casts had direct closures (runtime/engine/expr.py)
    from runtime.engine.expr import Expressions
    saved = Expressions._call, Expressions._case, Expressions._direct
    Expressions._call = Expressions._case = lambda self, node: None  # type: ignore[method-assign]
    Expressions._direct = (lambda self, node: None if isinstance(node, n.Cast)  # type: ignore[method-assign]
                           else saved[2](self, node))
    try:
        runs["interp."] = BucketRun(text, name)
    finally:
        Expressions._call, Expressions._case, Expressions._direct = saved  # type: ignore[method-assign]
    runs["interp."].kernel = runs["interp."].columnar = None
    print(f"{args.shape}/{name}: plan's kernel {plan.element(name).physical.kernel}")
    table = bucket(args.rows, args.instruments, args.ports)
    query = plan.element(name).query
    selects = query.selects if query is not None else ()
    sources = ([s.element for s in selects[0].sources] if selects
               else [src for _, src in plan.element(name).ports()])  # a Flex: its inputs
    if len(selects) > 1:  # a UNION: each select's source on its own port
        table = union_bucket(text, plan, name, table)
    elif plan.element(sources[0]).role != "input":
        # each source's changes on its port (a join of two windows reads both)
        table = pa.concat_tables([changes_of(BucketRun(text, s), table, p, len(sources))
                                  for p, s in enumerate(sources)], promote_options="permissive")
    spent: dict[str, list[float]] = {k: [] for k in runs}
    expiring: dict[str, list[float]] = {k: [] for k in runs}
    outs = {}
    windows = {}
    now = 1_700_000_000_000
    gc.disable()
    try:
        for _ in range(args.rounds):
            for how, run in runs.items():
                states: dict = {}
                began = time.thread_time()
                out = run.process_table(states, table, now)
                spent[how].append(time.thread_time() - began)
                outs[how] = out
                if args.expire:
                    windows[how] = repr(sorted((i, sorted(map(repr, s["output"]["rows"].items())))
                                               for i, s in states.items()))
                    began = time.thread_time()
                    expired = run.expire(states, now + 86_400_000)
                    expiring[how].append(time.thread_time() - began)
                    windows[how] += repr(sorted((i, sorted(map(repr, s["output"]["rows"].items())))
                                                for i, s in states.items())) + str(len(expired))
                gc.collect()
    finally:
        gc.enable()
    for how, s in spent.items():
        print(f"{how:>7}: least {min(s) / table.num_rows * 1e6:6.2f} µs/row, median "
              f"{statistics.median(s) / table.num_rows * 1e6:6.2f} µs/row ({outs[how].num_rows} output rows)"
              + (f"; expiry least {min(expiring[how]) / table.num_rows * 1e6:6.2f}, median "
                 f"{statistics.median(expiring[how]) / table.num_rows * 1e6:6.2f} µs/row"
                 if args.expire else ""))
    if args.expire:
        print(f"windows equal (after the rows, after the expiry): "
              f"{len(set(windows.values())) == 1}")
    same = all(outs[k].sort_by([("__inst", "ascending"), ("__seq", "ascending"),
                                ("__sub", "ascending"), ("__kind", "ascending")]).equals(
        outs["interp."].sort_by([("__inst", "ascending"), ("__seq", "ascending"),
                                 ("__sub", "ascending"), ("__kind", "ascending")])) for k in ("kernel",)) and \
        outs["kernel"].sort_by([("__inst", "ascending"), ("__seq", "ascending"),
                                   ("__sub", "ascending"), ("__kind", "ascending")]).equals(
        outs["engine"].sort_by([("__inst", "ascending"), ("__seq", "ascending"),
                                ("__sub", "ascending"), ("__kind", "ascending")]))
    print(f"outputs equal: {same}; load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
