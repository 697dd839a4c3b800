"""A micro-batch through the runtime's own bucket function, before and after its state moved to the
state store (issue 27): batch time and peak memory as the state held grows.

    python bench/state_engine.py [--workload keepall|groupby|keephour|flexdict|flexrecords|flexvectors|join|
                                             cachehour]
                                 [--held 100000,1000000]
                                 [--batch 100000] [--batches 3] [--candidates pickle,store]

Workloads (``--held`` counts rows held, groups for ``groupby``):

- ``keepall`` (below): a KEEP ALL window keyed by OrderId, each batch new orders;
- ``groupby``: ``GROUP BY Account`` (count, sum, max, HAVING) over the orders stream, partitioned
  by Account over 4 instances: ``--held`` groups held (each its group, its output key and its
  window row), each batch's orders go to ``--batch`` distinct held groups (the columnar batch
  path: one change per group and batch);
- ``keephour``: a ``KEEP 1 HOUR`` window keyed by OrderId (an element with timers, run as the
  project's query runs it: rows at the batch's time, then expiry): the rows held are spread over
  the last hour, each batch inserts ``--batch`` new orders and the clock moves on so that about
  as many of the oldest expire;
- ``flexdict``: a Flex keeping a ``dictionary(integer, integer)`` entry per OrderId (each order
  reads its key's entry and sets it; ``--held`` entries held over the 4 instances, each batch new
  orders): ``store`` keeps the dictionary's entries in the bucket's RocksDB
  (runtime/state/variables.py), ``pickle`` in the state file;
- ``flexrecords``: as ``flexdict``, the dictionary's values the orders themselves
  (``dictionary(integer, typeof(Orders))``, records of four scalar fields): ``store`` keeps them
  in the bucket's RocksDB entry by entry (each entry read written back), ``pickle`` in the state
  file (where such a dictionary was kept before);
- ``flexvectors``: a Flex keeping a ``dictionary(string, vector(float))`` (key: the OrderId as a
  string; ``--held`` keys over the 4 instances, each a vector of 4 prices): each order pushes its
  price onto its key's vector through a local (``v := qty[k]; push_back(v, ...)``), the orders
  of a batch ``--batch`` distinct keys held (spread by a stride); ``store`` keeps the entries in
  the bucket's RocksDB (each entry read written back), ``pickle`` in the state file (where
  dictionaries of vectors were kept before);
- ``join``: the orders stream INNER JOINed with an accounts window (``ON o.Account =
  a.Account``, the join kernel) of ``--held`` accounts, one instance (one bucket): each batch's
  ``--batch`` orders touch ``--touched`` accounts; ``store`` keeps the window's rows and the
  join's rows and index in the bucket's RocksDB (runtime/state/rows.py), ``pickle`` in the
  state file;
- ``cachehour``: a derived stream whose DECLARE block has ``eventCache(Orders[OrderId], 1 hour)``
  (a bucket per order, partitioned by Account over 4 instances, run with expiry as ``keephour``):
  ``--held`` buckets of one record each spread over the last hour, each batch adds ``--batch``
  orders and the clock moves on so that about as many of the oldest expire; ``store`` keeps the
  cache's buckets in the bucket's RocksDB with its time index (runtime/state/variables.py),
  ``pickle`` in the state file.

``--rebucket N`` (``groupby``, ``store``): after the batches, the store's groups moved to ``N``
buckets by group (runtime/rebucket.py ``group_router``, ``state.rebucket_keys``: each value
decoded and its instance and Account hashed, as a ``by_group`` aggregation's rows go to buckets),
then back to 8 by instance (``state.rebucket``), both timed (the store only: the pickled states'
counts are not rewritten here).

The project: orders into a ``KEEP ALL`` window keyed by OrderId, ``PARTITION BY o HASH(Account)
PARTITIONS 4``. Each batch brings ``--batch`` new orders spread over the 4 instances (one bucket
each, as runtime/arrow_state.py gives them with 8 buckets). Every bucket of the batch goes through
:func:`runtime.arrow_state.bucket_runner` (the function applyInArrow runs) in this process, one
after the other: the batch time is the sum of the 4 buckets' work (Spark and its Arrow transfer
not included; on a cluster the buckets run side by side).

- ``pickle``: the layout before the state store (``uses_window_store`` patched to say no): every
  bucket's rows read from and written to its pickled state file in every batch;
- ``store``: the window's rows in the bucket's RocksDB (runtime/state/rows.py).

The rows held are loaded straight into the state (as the engine stores them: a dict per row, under
the key ``(OrderId,)``), not run through the engine. Each (candidate, H) runs in its own process:
its peak memory (VmHWM) is its own. Prints one JSON line per run and a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROJECT = """
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create output window Held primary key (OrderId) keep all
  partition by Orders hash(Account) partitions 4
  as select * from Orders;
"""
PROJECTS = {
    "keepall": (PROJECT, "Held"),
    "groupby": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create output window Totals primary key deduced partition by Orders hash(Account) partitions 4
  as select o.Account, count(*) n, sum(o.Qty) qty, max(o.Price) top from Orders o
  group by o.Account having count(*) > 0;
""", "Totals"),
    "flexdict": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create flex Keeper in Orders out output stream Seen schema (OrderId integer, Qty integer, Prev integer)
  partition by Orders hash(Account) partitions 4
begin
  declare dictionary(integer, integer) qty; end;
  on Orders {
    integer prev := qty[Orders.OrderId];
    qty[Orders.OrderId] := Orders.Qty;
    output [OrderId = Orders.OrderId; Qty = Orders.Qty; Prev = prev;];
  };
end;
""", "Seen"),
    "flexrecords": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create flex Keeper in Orders out output stream Seen schema (OrderId integer, Qty integer, Prev integer)
  partition by Orders hash(Account) partitions 4
begin
  declare dictionary(integer, typeof(Orders)) qty; end;
  on Orders {
    integer prev;
    if (not isnull(qty[Orders.OrderId])) { prev := qty[Orders.OrderId].Qty; }
    qty[Orders.OrderId] := Orders;
    output [OrderId = Orders.OrderId; Qty = Orders.Qty; Prev = prev;];
  };
end;
""", "Seen"),
    "flexvectors": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create flex Keeper in Orders out output stream Seen schema (OrderId integer, Qty integer, Prev integer)
  partition by Orders hash(Account) partitions 4
begin
  declare dictionary(string, vector(float)) qty; end;
  on Orders {
    string k := to_string(Orders.OrderId);
    vector(float) v := qty[k];
    if (isnull(v)) { v := new vector(float); qty[k] := v; }
    push_back(v, Orders.Price);
    output [OrderId = Orders.OrderId; Qty = Orders.Qty; Prev = size(v);];
  };
end;
""", "Seen"),
    "join": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create input window Accts schema (Account string, Name string, Lim integer) primary key (Account);
create output stream Enriched as select o.OrderId, o.Account, o.Qty, a.Name, a.Lim
  from Orders o inner join Accts a on o.Account = a.Account;
""", "Enriched"),
    "keephour": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create output window Held primary key (OrderId) keep 1 hour
  partition by Orders hash(Account) partitions 4
  as select * from Orders;
""", "Held"),
    "cachehour": ("""
create input stream Orders schema (OrderId integer, Account string, Qty integer, Price float);
create output stream Recent
  declare eventCache(Orders[OrderId], 1 hour) c; end
  partition by Orders hash(Account) partitions 4
  as select Orders.OrderId OrderId, count(c.Qty) n from Orders;
""", "Recent"),
}
TIMED = ("keephour", "cachehour")
INSTANCES = 4
LOAD_CHUNK = 200_000
HOUR = 3_600_000
T0 = 1_700_000_000_000  # the clock of the first batch (keephour)


def _row(order_id: int) -> dict:
    inst = order_id % INSTANCES
    return {"OrderId": order_id, "Account": f"A{(order_id // INSTANCES) % 250 * INSTANCES + inst}",
            "Qty": order_id % 97 + 1, "Price": float(order_id % 1000) / 8}


def _table(first: int, count: int, inst: int, seq: int):
    """The processor input of bucket ``inst``: its share of orders ``first .. first+count-1``."""
    ids = range(first + (inst - first) % INSTANCES, first + count, INSTANCES)
    return _arrow([_row(i) for i in ids], inst, seq)


def _group_table(held: int, batch: int, b: int, inst: int, seq: int):
    """groupby: the processor input of bucket ``inst`` in batch ``b``: ``batch / 4`` orders, each
    to another of its held groups (account ``G<g>``, ``g % 4 == inst``), spread by a stride."""
    per, span = batch // INSTANCES, held // INSTANCES
    groups = [inst + INSTANCES * ((k * 7919 + b * 104729) % span) for k in range(per)]
    rows = [{"OrderId": held + b * batch + k, "Account": f"G{g}", "Qty": (g + b) % 97 + 1,
             "Price": float((g * 31 + b) % 1000) / 8} for k, g in enumerate(groups)]
    return _arrow(rows, inst, seq)


def _held_table(held: int, batch: int, b: int, inst: int, seq: int):
    """flexvectors: the processor input of bucket ``inst`` in batch ``b``: ``batch / 4`` orders of
    OrderIds held by the instance (``i % 4 == inst``, ``4 <= i < held``), distinct, spread by a
    stride."""
    span = held // INSTANCES - 1
    ids = [INSTANCES * (1 + (k * 7919 + b * 104729) % span) + inst
           for k in range(min(batch // INSTANCES, span))]
    return _arrow([_row(i) for i in ids], inst, seq)


def _arrow(rows: list, inst: int, seq: int):
    """The processor input of bucket ``inst`` holding ``rows`` (orders), numbered from ``seq``."""
    import pyarrow as pa
    n = len(rows)
    struct = pa.struct([("OrderId", pa.int32()), ("Account", pa.string()), ("Qty", pa.int32()),
                        ("Price", pa.float64())])
    return pa.table({
        "__port": pa.array([0] * n, pa.int32()), "__seq": pa.array(range(seq, seq + n), pa.int64()),
        "__sub": pa.array([0] * n, pa.int64()), "__src": pa.array([0] * n, pa.int32()),
        "__op": pa.array(["i"] * n), "__inst": pa.array([inst] * n, pa.int32()),
        "__why": pa.array([None] * n, pa.string()), "__raw": pa.array([None] * n, pa.string()),
        "__p0": pa.array(rows, struct), "__bucket": pa.array([inst] * n, pa.int32())})


def _group(g: int) -> tuple:
    """groupby: a held group as the engine keeps it after one order (the columnar batch path's
    structure: count, accumulators of count/sum/max, last row, the row shown), its output row."""
    qty, price = g % 97 + 1, float(g % 1000) / 8
    acct = f"G{g}"
    shown = {"Account": acct, "n": 1, "qty": qty, "top": price}
    group = {"n": 1, "acc": [1, [qty, 1], price], "rows": {}, "emitted": shown,
             "row": {"o": {"OrderId": g, "Account": acct, "Qty": qty, "Price": price}}}
    return (acct,), group, shown


def _hour_time(i: int, held: int) -> int:
    """keephour: the time of held row ``i``: the rows spread over the hour before the first batch."""
    return T0 + (i * HOUR) // held


def _hour_now(held: int, batch: int, n: int) -> int:
    """keephour: the clock of timed batch ``n`` (0: the first after the load): about ``batch``
    more of the oldest rows are an hour old."""
    return T0 + HOUR + ((n + 1) * batch * HOUR) // held


def _load(workload: str, cand: str, held: int, state: str) -> tuple[float, int]:
    """Put ``held`` rows (groups) straight into the buckets' states as the engine keeps them,
    after batch 0 made each instance's state; the load's time and the next batch id."""
    from runtime.arrow_state import load_states, rows_root, save_states
    from runtime.state import BucketStore

    t0 = time.perf_counter()
    load_id = 1
    if workload == "join":
        return _load_join(cand, held, state)
    for inst in range(INSTANCES):
        states = load_states(state, inst, 1)
        st = states[inst]
        window = st.get("output")
        if workload == "groupby":
            agg = st["selects"][0]["agg"]
            gs = range(INSTANCES + inst, held + INSTANCES, INSTANCES)
            if cand == "pickle":
                for g in gs:
                    key, group, shown = _group(g)
                    agg["groups"][key] = group
                    agg["out"][key] = key
                    window["rows"][key] = shown
            else:
                with BucketStore.open(rows_root(state), inst) as s:
                    for lo in range(0, len(gs), LOAD_CHUNK):
                        s.begin(load_id)
                        for g in gs[lo:lo + LOAD_CHUNK]:
                            key, group, shown = _group(g)
                            s.put("a.selects.0.agg.g", (inst, *key), group)
                            s.put("a.selects.0.agg.o", (inst, *key), key)
                            s.put("w.output", (inst, *key), shown)
                        s.commit(load_id)
                        load_id += 1
                    s.compact()
                agg["groups"] += len(gs)
                agg["out"] += len(gs)
                window["rows"] += len(gs)
        elif workload in ("flexdict", "flexrecords", "flexvectors"):
            load_id = _load_dictionary(cand, state, st, inst, held, load_id)
        elif workload == "cachehour":
            load_id = _load_cache(cand, state, st, inst, held, load_id)
        else:
            ids = range(INSTANCES + inst, held, INSTANCES)
            timed = workload in TIMED
            if cand == "pickle":
                window["rows"].update(((i,), _row(i)) for i in ids)
                if timed:
                    window["times"].update(((i,), _hour_time(i, held)) for i in ids)
            else:
                with BucketStore.open(rows_root(state), inst) as s:
                    for lo in range(0, len(ids), LOAD_CHUNK):
                        s.begin(load_id)
                        for i in ids[lo:lo + LOAD_CHUNK]:
                            s.put("w.output", (inst, i), _row(i))
                            if timed:
                                s.put_timed(f"w.output.t{inst}", (inst, i), None, _hour_time(i, held))
                        s.commit(load_id)
                        load_id += 1
                    s.compact()
                window["rows"] += len(ids)
                if timed:
                    window["times"] += len(ids)
        save_states(state, inst, 1, states)
    return time.perf_counter() - t0, max(load_id, 2)


def _load_dictionary(cand: str, state: str, st: dict, inst: int, held: int, load_id: int) -> int:
    """flexdict: the entries of the dictionary ``qty`` of instance ``inst`` (keys ``OrderId``,
    values ``Qty``) put in its state (pickle) or its bucket's store (runtime/state/variables.py's
    namespaces: each entry its insertion number, key and value; the order by number); the next
    batch id of the load."""
    from runtime.arrow_state import rows_root
    from runtime.state import BucketStore
    from runtime.state.variables import HeldDictionary

    from ccl.splash.values import Record, Vector

    ids = range(INSTANCES + inst, held, INSTANCES)
    qty = st["vars"]["qty"]
    key = (lambda i: str(i)) if qty.key.name == "string" else (lambda i: i)
    if qty.value.name == "vector":  # flexvectors: 4 prices a key
        elem = qty.value.args[0]

        def value(i: int) -> object:
            return Vector([_row(i)["Price"]] * 4, elem)
    elif qty.value.name == "record":  # flexrecords: the order's row as the dictionary's value
        types = dict(qty.value.fields)

        def value(i: int) -> object:
            return Record(_row(i).items(), types=types)
    else:
        def value(i: int) -> object:
            return _row(i)["Qty"]
    if cand == "pickle":
        qty.update((key(i), value(i)) for i in ids)
        return load_id
    with BucketStore.open(rows_root(state), inst) as s:
        seq = qty.next
        for lo in range(0, len(ids), LOAD_CHUNK):
            s.begin(load_id)
            for i in ids[lo:lo + LOAD_CHUNK]:
                v = value(i)  # (a vector as the store keeps it: a tuple, runtime/state/variables.py)
                s.put("v.qty", (inst, key(i)), (seq, key(i), tuple(v) if isinstance(v, Vector) else v))
                s.put("v.qty.o", (inst, seq), key(i))
                seq += 1
            s.commit(load_id)
            load_id += 1
        s.compact()
    st["vars"]["qty"] = HeldDictionary(qty.size + len(ids), seq, qty.key, qty.value)
    return load_id


def _load_cache(cand: str, state: str, st: dict, inst: int, held: int, load_id: int) -> int:
    """cachehour: the buckets of the event cache ``c`` of instance ``inst`` (one record each, its
    time spread over the hour before the first batch) put in its state (pickle) or its bucket's
    store (runtime/state/variables.py's namespace of a time cache, in its time index at the
    record's time); the next batch id of the load."""
    from runtime.arrow_state import rows_root
    from runtime.state import BucketStore

    ids = range(INSTANCES + inst, held, INSTANCES)
    cache = st["vars"]["c"]
    cache.now_ms = T0
    if cand == "pickle":
        cache.buckets.update(((i,), [[_row(i), "i", _hour_time(i, held)]]) for i in ids)
        return load_id
    with BucketStore.open(rows_root(state), inst) as s:
        for lo in range(0, len(ids), LOAD_CHUNK):
            s.begin(load_id)
            for i in ids[lo:lo + LOAD_CHUNK]:
                t = _hour_time(i, held)
                s.put_timed(f"c.c.t{inst}", (inst, i), [[_row(i), "i", t]], t)
            s.commit(load_id)
            load_id += 1
        s.compact()
    cache.buckets += len(ids)
    return load_id


def _account(a: int) -> dict:
    """join: the row of account ``a`` in the accounts window."""
    return {"Account": f"A{a}", "Name": f"N{a % 1000}", "Lim": a % 5000}


def _load_join(cand: str, held: int, state: str) -> tuple[float, int]:
    """join: ``held`` accounts into instance 0's state as the engine keeps a window row joined
    on its key: the window's row (the select's source mirror), the join's right-side row and its
    index entry (equated value -> row keys); the load's time and the next batch id."""
    from runtime.arrow_state import load_states, rows_root, save_states
    from runtime.state import BucketStore

    t0 = time.perf_counter()
    load_id = 1
    states = load_states(state, 0, 1)
    st = states[0]
    mirror, join = st["selects"][0]["sources"][1], st["selects"][0]["join"]
    if cand == "pickle":
        for a in range(held):
            row, key = _account(a), (f"A{a}",)
            mirror["rows"][key] = join["src"][1][key] = row
            join["ridx"][0][key] = {key: True}
    else:
        with BucketStore.open(rows_root(state), 0) as s:
            for lo in range(0, held, LOAD_CHUNK):
                s.begin(load_id)
                for a in range(lo, min(held, lo + LOAD_CHUNK)):
                    row, acct = _account(a), f"A{a}"
                    s.put("w.selects.0.sources.1", (0, acct), row)
                    s.put("j.selects.0.join.src1", (0, acct), row)
                    s.put("j.selects.0.join.ridx0", (0, acct), {(acct,): True})
                s.commit(load_id)
                load_id += 1
            s.compact()
        mirror["rows"] += held
        join["src"][1] += held
        join["ridx"][0] += held
    save_states(state, 0, 1, states)
    return time.perf_counter() - t0, max(load_id, 2)


def _join_table(held: int, batch: int, touched: int, b: int, seq: int):
    """join: the orders of batch ``b``: ``batch`` orders over ``touched`` held accounts."""
    accts = [((k % touched) * 7919 + b * 104729) % held for k in range(batch)]
    rows = [{"OrderId": seq + k, "Account": f"A{a}", "Qty": k % 97 + 1, "Price": float(k % 1000) / 8}
            for k, a in enumerate(accts)]
    return _no_accounts(_arrow(rows, 0, seq))


def _no_accounts(table):
    """join: an orders table with the (empty) accounts port column the processor reads."""
    import pyarrow as pa
    struct = pa.struct([("Account", pa.string()), ("Name", pa.string()), ("Lim", pa.int32())])
    return table.append_column("__p1", pa.nulls(table.num_rows, struct))


def _reset_peak() -> None:
    """Start this process's peak memory (VmHWM) again from its present size, so that the peak
    reported after the batches is theirs, not the load's (Linux: /proc/self/clear_refs)."""
    import gc
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _du(path: str) -> int:
    from state_store import du
    return du(path)


def _plan(d: str, text: str = PROJECT) -> str:
    from planned import plan_json
    path = os.path.join(d, "p.ccl")
    with open(path, "w") as f:
        f.write(text)
    plan, diags = plan_json(path)
    assert plan is not None, [str(x) for x in diags]
    return json.dumps(plan)


def run_one(cand: str, held: int, batch: int, batches: int, d: str,
            workload: str = "keepall", touched: int = 100, rebucket: int = 0) -> dict:
    """Load ``held`` rows (groups) over the 4 buckets, then time ``batches`` batches of ``batch``
    orders."""
    import runtime.arrow_state as arrow_state
    from runtime.arrow_state import bucket_runner, load_states, rows_root
    from runtime.state import create
    from state_store import _peak_mb

    if cand == "pickle":
        arrow_state.uses_window_store = lambda element: False  # the layout before the store
        arrow_state.uses_variable_store = lambda element: False
    text, name = PROJECTS[workload]
    plan_text = _plan(d, text)
    state = os.path.join(d, "state")
    if cand == "store":
        create(rows_root(state), 8)
    timed = workload in TIMED

    ops: dict[str, int] = {}  # output row changes of the timed batches by opcode (a check)

    def run_batch(batch_id: int, n: int, tables: list) -> tuple[float, float]:
        now = _hour_now(held, batch, n) if timed else 0
        outs = []
        t, c = time.perf_counter(), time.process_time()
        for table in tables:
            runner = bucket_runner(plan_text, name, frozenset(), state, batch_id, now, timed)
            outs.append(runner(None, table))
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        for out in outs:
            for op in out.column("__op").to_pylist():
                if op is not None:
                    ops[op] = ops.get(op, 0) + 1
        return wall, cpu

    # batch 0: one order per instance, which makes every instance's state; then the load
    now0 = T0 if timed else 0
    for inst in range(1 if workload == "join" else INSTANCES):
        first = _group_table(INSTANCES, INSTANCES, 0, inst, 0) if workload == "groupby" else \
            _no_accounts(_table(0, 1, 0, 0)) if workload == "join" else _table(0, INSTANCES, inst, 0)
        bucket_runner(plan_text, name, frozenset(), state, 0, now0, timed)(None, first)
    load_s, first_id = _load(workload, cand, held, state)
    ops.clear()
    load_peak = _peak_mb()
    _reset_peak()
    times, cpus = [], []
    for n in range(batches):
        if workload == "groupby":
            tables = [_group_table(held, batch, n + 1, inst, held + n * batch) for inst in range(INSTANCES)]
        elif workload == "join":
            tables = [_join_table(held, batch, touched, n + 1, held + n * batch)]
        elif workload == "flexvectors":  # keys held: a batch's orders, another stride each
            tables = [_held_table(held, batch, n + 1, inst, held + n * batch)
                      for inst in range(INSTANCES)]
        else:
            first = held + n * batch
            tables = [_table(first, batch, inst, first) for inst in range(INSTANCES)]
        wall, cpu = run_batch(first_id + n, n, tables)
        times.append(wall)
        cpus.append(cpu)
    batch_peak = _peak_mb()  # the batches' own (_reset_peak after the load)
    final = load_states(state, 0, first_id + batches)[0]
    held_after = (final["selects"][0]["join"]["src"][1] if workload == "join"
                  else final["selects"][0]["agg"]["groups"] if workload == "groupby"
                  else final["vars"]["qty"] if workload.startswith("flex")
                  else final["vars"]["c"].buckets if workload == "cachehour"
                  else final["output"]["rows"])
    return {"workload": workload, "candidate": cand, "held": held, "batch": batch,
            "batch_s": times, "cpu_s": cpus, "load_s": load_s, "state_mb": _du(state) / 1e6,
            "held_after_bucket0": (held_after if isinstance(held_after, int)
                                   else getattr(held_after, "size", None) or len(held_after)),
            "ops": ops,
            "peak_mb": max(load_peak, batch_peak), "batch_peak_mb": batch_peak,
            **(_rebucket_times(state, first_id + batches, rebucket) if rebucket else {})}


def _rebucket_times(state: str, next_batch: int, buckets: int) -> dict:
    """groupby, store: the seconds to move the groups of the store to ``buckets`` buckets by
    group, and back to 8 by instance."""
    from ccl.plan.model import GroupSpread
    from runtime.arrow_state import rows_root
    from runtime.rebucket import group_router
    from runtime.state import rebucket
    from runtime.state.store import rebucket_keys

    root = rows_root(state)
    route = group_router(GroupSpread(("Account",), ("string",), ("Account",)), buckets)
    t = time.perf_counter()
    _, counts = rebucket_keys(root, 8, buckets, route, next_batch)
    by_group = time.perf_counter() - t
    t = time.perf_counter()
    rebucket(root, buckets, 8, lambda inst: inst % 8, next_batch)
    by_instance = time.perf_counter() - t
    return {"rebucket_values": sum(counts.values()), "rebucket_by_group_s": by_group,
            "rebucket_by_instance_s": by_instance}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held", default="100000,1000000,2000000")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--candidates", default="pickle,store")
    ap.add_argument("--workload", default="keepall", choices=sorted(PROJECTS))
    ap.add_argument("--touched", type=int, default=100, help="join: accounts a batch touches")
    ap.add_argument("--dir", default=None, help="where state is written (default: a temp dir)")
    ap.add_argument("--rebucket", type=int, default=0,
                    help="groupby, store: time moving the groups to this many buckets after")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # cand:held (a child)
    args = ap.parse_args()
    if args.one:
        cand, held = args.one.split(":")
        d = tempfile.mkdtemp(prefix=f"engine-{cand}-", dir=args.dir)
        try:
            print(json.dumps(run_one(cand, int(held), args.batch, args.batches, d, args.workload,
                                     args.touched,
                                     args.rebucket if workload_moves(args, cand) else 0)))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return
    results = []
    for held in [int(h) for h in args.held.split(",")]:
        for cand in args.candidates.split(","):
            cmd = [sys.executable, __file__, "--one", f"{cand}:{held}", "--batch", str(args.batch),
                   "--batches", str(args.batches), "--workload", args.workload,
                   "--touched", str(args.touched), "--rebucket", str(args.rebucket)] + (
                       ["--dir", args.dir] if args.dir else [])
            p = subprocess.run(cmd, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                   [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"),
                                    os.environ.get("PYTHONPATH", "")])})
            if p.returncode != 0:
                print(f"{cand} H={held}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            results.append(res)
            print(json.dumps(res), flush=True)
    print("\n| rows held | pickle s/batch (CPU s) | store s/batch (CPU s) | pickle peak MB "
          "| store peak MB | pickle / store peak MB of the batches | pickle state MB "
          "| store state MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = {(r["candidate"], r["held"]): r for r in results}
    for held in sorted({r["held"] for r in results}):
        p, s = by.get(("pickle", held)), by.get(("store", held))
        cell = (lambda r, f: f(r) if r else "-")
        print(f"| {held:,} | {cell(p, _times)} | {cell(s, _times)} "
              f"| {cell(p, lambda r: format(r['peak_mb'], '.0f'))} "
              f"| {cell(s, lambda r: format(r['peak_mb'], '.0f'))} "
              f"| {cell(p, _batch_peak)} / {cell(s, _batch_peak)} "
              f"| {cell(p, lambda r: format(r['state_mb'], '.0f'))} "
              f"| {cell(s, lambda r: format(r['state_mb'], '.0f'))} |")


def workload_moves(args: argparse.Namespace, cand: str) -> bool:
    """Whether ``--rebucket`` applies to this run (the groupby workload's store)."""
    return args.workload == "groupby" and cand == "store"


def _batch_peak(r: dict) -> str:
    peak = r.get("batch_peak_mb")
    return "-" if peak is None else format(peak, ".0f")


def _times(r: dict) -> str:
    med = statistics.median
    return f"{med(r['batch_s']):.2f} ({med(r['cpu_s']):.2f})"


if __name__ == "__main__":
    main()
