"""One query per project (runtime/project_query.py): the elements that can run as stages of one
streaming query's batches do, with the results of one query per element."""
from __future__ import annotations

import json
import os
import random
from concurrent.futures import wait

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.runner_e2e import run_project, write_rows

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Price float, Qty integer);
CREATE INPUT WINDOW Instruments SCHEMA (Sym string, Sector string, LotSize integer)
    PRIMARY KEY (Sym);
CREATE LOCAL STREAM Enriched PARTITION BY Trades HASH(Sym) PARTITIONS 2
AS SELECT t.TradeId TradeId, t.Sym Sym, t.Price Price, t.Qty Qty, i.Sector Sector
   FROM Trades t INNER JOIN Instruments i ON t.Sym = i.Sym;
CREATE LOCAL WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 3 ROWS PER (Sym)
    PARTITION BY Enriched HASH(Sym) PARTITIONS 2
AS SELECT * FROM Enriched;
CREATE OUTPUT WINDOW SymStats PRIMARY KEY DEDUCED
    PARTITION BY Recent HASH(Sym) PARTITIONS 2
AS SELECT r.Sym Sym, count(*) Trades, sum(r.Qty) Volume, max(r.TradeId) LastId
   FROM Recent r GROUP BY r.Sym;
CREATE OUTPUT STREAM Big AS SELECT t.TradeId TradeId, t.Qty Qty FROM Trades t WHERE t.Qty > 90;
"""


def _inputs(tmp_path, seed: int = 7) -> tuple[dict[str, str], list[tuple]]:
    rng = random.Random(seed)
    syms = [f"S{i}" for i in range(8)]
    trades = [(i, rng.choice(syms + ["UNKNOWN"]), round(rng.uniform(1, 100), 2), rng.randint(1, 100))
              for i in range(1, 301)]
    tdir, idir = os.path.join(str(tmp_path), "trades"), os.path.join(str(tmp_path), "inst")
    for f in range(3):  # three files: one batch each or all in one, the results are the same
        write_rows(os.path.join(tdir, f"t{f}.csv"), ["TradeId", "Sym", "Price", "Qty"],
                   trades[f * 100:(f + 1) * 100])
    write_rows(os.path.join(idir, "i.csv"), ["Sym", "Sector", "LotSize"],
               [(s, "X", 10) for s in syms])
    return {"Trades": tdir, "Instruments": idir}, trades


def _expected(trades: list[tuple]) -> dict[str, dict]:
    """SymStats computed here: per symbol with an instrument, its last three trades."""
    by_sym: dict[str, list[tuple]] = {}
    for t in trades:
        if t[1] != "UNKNOWN":
            by_sym.setdefault(t[1], []).append(t)
    return {s: {"Sym": s, "Trades": str(len(ts[-3:])), "Volume": str(sum(t[3] for t in ts[-3:])),
                "LastId": str(ts[-1][0])} for s, ts in by_sym.items()}


def test_a_project_runs_as_one_query_with_the_results_of_one_query_per_element(spark, tmp_path):
    inputs, trades = _inputs(tmp_path)
    out = run_project(spark, tmp_path, PROJECT, inputs)
    got = {r["Sym"]: {k: r[k] for k in ("Sym", "Trades", "Volume", "LastId")}
           for r in out.rows("SymStats")}
    assert got == _expected(trades)
    assert sorted(int(r["TradeId"]) for r in out.rows("Big")) == [t[0] for t in trades if t[3] > 90]
    run = os.path.join(str(tmp_path), "run")
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        layout = json.load(f)
    assert layout["project_query"] == ["Trades", "Instruments", "Enriched", "Recent", "SymStats", "Big"]
    assert os.path.isdir(os.path.join(run, "project_query", "commits"))
    assert not os.listdir(os.path.join(run, "queries"))  # no element has a query of its own
    # what nothing reads is not written: the inputs and the local elements are read inside the
    # batches; the output elements' changelogs give their NAME.csv
    assert sorted(layout["unrecorded"]) == ["Enriched", "Instruments", "Recent", "Trades"]
    assert sorted(os.listdir(os.path.join(run, "changelog"))) == ["Big", "SymStats"]
    # Enriched: every trade, and every instrument in each of its 2 instances (broadcast)
    assert out.stats("Trades")["rows_in"] == 300 and out.stats("Enriched")["rows_in"] == 300 + 8 * 2


@pytest.mark.parametrize("collect_bytes,parallel_rows", [(0, None), (1 << 30, None), (1 << 30, 0)])
def test_collected_and_distributed_batches_write_the_same(spark, tmp_path, collect_bytes,
                                                          parallel_rows):
    """A batch is written on the driver (small) or by Spark jobs (large), a small batch's
    buckets in this process or in worker processes: the same files."""
    inputs, trades = _inputs(tmp_path / "in")
    with open(os.path.join(inputs["Trades"], "t9.csv"), "w", encoding="utf-8") as f:
        f.write("TradeId,Sym,Price,Qty\n999,S1,not a price,5\n1000,S2\n")  # two bad rows
    runs = {}
    for how, limit in (("default", None), ("other", collect_bytes)):
        out = run_project(spark, tmp_path / how, PROJECT, inputs, collect_bytes=limit,
                          parallel_rows=parallel_rows if how == "other" else None)
        runs[how] = ({r["Sym"]: r for r in out.rows("SymStats")}, sorted(map(str, out.rows("Big"))),
                     out.report["elements"], sorted(map(str, out.bad_records())))
    assert runs["default"] == runs["other"]
    assert len(runs["other"][3]) == 2
    assert {s: {k: r[k] for k in ("Sym", "Trades", "Volume", "LastId")}
            for s, r in runs["other"][0].items()} == _expected(trades)


def test_an_input_window_read_by_one_aggregation_in_a_large_batch(spark, tmp_path):
    """An input window whose one reader aggregates it: the same in a batch held on the driver and
    in one that stays distributed (an input window's batch goes through its own processor)."""
    text = """
CREATE INPUT WINDOW Positions SCHEMA (Id integer, Book string, Qty integer) PRIMARY KEY (Id);
CREATE OUTPUT WINDOW Books PRIMARY KEY DEDUCED PARTITION BY Positions HASH(Book) PARTITIONS 2
AS SELECT p.Book Book, sum(p.Qty) Total, count(*) N FROM Positions p GROUP BY p.Book;
"""
    pdir = os.path.join(str(tmp_path), "pos")
    # each Id 5 times: the first insert holds, the others are duplicate keys (bad records)
    rows = [(i % 40, f"B{i % 5}", i) for i in range(200)]
    write_rows(os.path.join(pdir, "p.csv"), ["Id", "Book", "Qty"], rows)
    first: dict[int, tuple] = {}
    for i, b, q in rows:
        first.setdefault(i, (b, q))
    expected: dict[str, tuple] = {}
    for b, q in first.values():
        total, n = expected.get(b, (0, 0))
        expected[b] = (total + q, n + 1)
    reports = {}
    for how, limit in (("small", None), ("large", 0)):
        out = run_project(spark, tmp_path / how, text, {"Positions": pdir}, collect_bytes=limit)
        assert {r["Book"]: (int(r["Total"]), int(r["N"])) for r in out.rows("Books")} == expected, how
        assert len(out.bad_records()) == 160, how
        reports[how] = out.report["elements"]
    assert reports["small"] == reports["large"]
    assert reports["large"]["Positions"]["rows_in"] == 200


def test_elements_with_timers_and_their_readers_are_stages_of_the_project_query(spark, tmp_path):
    text = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE WINDOW Last PRIMARY KEY (TradeId) KEEP 1 HOUR AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Counts PRIMARY KEY DEDUCED
AS SELECT l.Sym Sym, count(*) N FROM Last l GROUP BY l.Sym;
CREATE OUTPUT STREAM Copy AS SELECT t.TradeId TradeId, t.Qty * 2 Twice FROM Trades t;
"""
    tdir = os.path.join(str(tmp_path), "trades")
    write_rows(os.path.join(tdir, "t.csv"), ["TradeId", "Sym", "Qty"], [(1, "A", 1), (2, "A", 2), (3, "B", 3)])
    out = run_project(spark, tmp_path, text, {"Trades": tdir})
    assert {r["Sym"]: r["N"] for r in out.rows("Counts")} == {"A": "2", "B": "1"}
    assert sorted((r["TradeId"], r["Twice"]) for r in out.rows("Copy")) == [("1", "2"), ("2", "4"), ("3", "6")]
    run = os.path.join(str(tmp_path), "run")
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        assert json.load(f)["project_query"] == ["Trades", "Last", "Counts", "Copy"]
    assert os.listdir(os.path.join(run, "queries")) == []
    assert not os.path.exists(os.path.join(run, "changelog", "Trades"))  # read in the batch


TIMED = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE OUTPUT WINDOW Recent PRIMARY KEY (TradeId) KEEP 3 SECONDS AS SELECT * FROM Trades;
CREATE OUTPUT WINDOW Counts PRIMARY KEY DEDUCED
AS SELECT r.Sym Sym, count(*) N FROM Recent r GROUP BY r.Sym;
CREATE FLEX Beat IN Trades
OUT OUTPUT STREAM Beats SCHEMA (Seen integer)
BEGIN
    DECLARE
        integer seen := 0;
    END;
    ON Trades { seen := seen + 1; };
    EVERY 4 SECONDS { output [Seen = seen;]; };
END;
"""


def _commits(run: str) -> int:
    commits = os.path.join(run, "project_query", "commits")
    return len([n for n in os.listdir(commits) if n.isdigit()]) if os.path.isdir(commits) else 0


def _changes(run: str, element: str) -> list[dict]:
    import pyarrow.parquet as pq

    folder = os.path.join(run, "changelog", element)
    if not os.path.isdir(folder):
        return []
    return [r for n in sorted(os.listdir(folder)) if n.endswith(".parquet")
            for r in pq.read_table(os.path.join(folder, n)).to_pylist()]


def test_timers_fire_in_the_project_query_and_an_idle_project_runs_no_batch(spark, tmp_path):
    """A time KEEP and a Flex EVERY run as stages of the project's query (no query of their
    own): a row leaves the window once its time is up, though no file arrives (the query is woken
    by a tick file), the EVERY handler runs, and between timers no batch runs."""
    import threading
    import time

    from ccl.plan.planner import plan_project
    from runtime.run import run_plan
    from runtime.run_setup import RunOptions

    path = os.path.join(str(tmp_path), "p.ccl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(TIMED)
    plan, diags = plan_project(path)
    assert plan is not None, [str(d) for d in diags]
    tdir, run = os.path.join(str(tmp_path), "trades"), os.path.join(str(tmp_path), "run")
    os.makedirs(tdir)
    options = RunOptions(inputs={"Trades": tdir}, base_dir=str(tmp_path), run_dir=run,
                         until_idle=False, buckets=2)
    stop, failed = threading.Event(), []

    def go() -> None:
        try:
            run_plan(spark, plan, options, os.path.join(str(tmp_path), "out"), stop=stop)
        except Exception as exc:  # reported by the test's thread
            failed.append(exc)
    runner = threading.Thread(target=go)
    runner.start()
    try:
        def wait_for(what, seconds: float = 120.0):
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not failed:
                found = what()
                if found:
                    return found
                time.sleep(0.05)
            assert not failed, failed
            raise AssertionError("timed out")

        wait_for(lambda: _commits(run) == 0 and os.path.exists(os.path.join(run, "run.json")))
        with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
            assert json.load(f)["project_query"] == ["Trades", "Recent", "Counts", "Beats"]
        time.sleep(3)  # the query started
        tmp = os.path.join(str(tmp_path), "t.csv")
        write_rows(tmp, ["TradeId", "Sym", "Qty"], [(1, "A", 1), (2, "A", 2), (3, "B", 3)])
        written = time.time()
        os.replace(tmp, os.path.join(tdir, "t.csv"))
        wait_for(lambda: [r for r in _changes(run, "Recent") if r["__op"] == "d"])
        gone = time.time()
        inserts = [r for r in _changes(run, "Recent") if r["__op"] == "i"]
        assert len(inserts) == 3
        wait_for(lambda: len([r for r in _changes(run, "Recent") if r["__op"] == "d"]) == 3)
        # not before their time, and well before a second's tick would be late by much
        assert gone - written >= 3.0
        # Counts is written after Recent in the same batch: its file may come a moment later
        wait_for(lambda: {r["Sym"] for r in _changes(run, "Counts") if r["__op"] == "d"} == {"A", "B"},
                 30)
        wait_for(lambda: _changes(run, "Beats"), 30)
        assert _changes(run, "Beats")[0]["Seen"] == 3
        # idle: only the EVERY's ticks (one per 4 s) run batches; a trigger per poll would run 60
        before = _commits(run)
        time.sleep(6.0)
        idle = _commits(run) - before
        assert 1 <= idle <= 3, idle
        assert not os.path.exists(os.path.join(run, "queries", "Recent"))
        assert not os.path.exists(os.path.join(run, "queries", "Beats"))
    finally:
        stop.set()
        runner.join(300)
    assert not runner.is_alive() and not failed, failed


def test_a_checkpoint_of_one_query_per_element_is_refused(spark, tmp_path):
    from runtime.run_setup import RunError

    inputs, _ = _inputs(tmp_path)
    run = os.path.join(str(tmp_path), "run")
    os.makedirs(run)
    with open(os.path.join(run, "plan.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "ccl-plan", "version": 2, "project": "p", "elements": []}, f)
    with open(os.path.join(run, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"buckets": 2, "unrecorded": [], "file_source": []}, f)
    with pytest.raises(RunError, match=r"older ccl \(plan version 2\).*new checkpoint directory"):
        run_project(spark, tmp_path, PROJECT, inputs)


ARRIVALS = """
CREATE INPUT STREAM A SCHEMA (id integer);
CREATE INPUT STREAM B SCHEMA (id integer);
CREATE FLEX F IN A, B OUT OUTPUT STREAM O SCHEMA (n integer, src string, id integer)
BEGIN
    DECLARE integer n := 0; END;
    ON A { n := n + 1; output [n = n; src = 'A'; id = A.id;]; };
    ON B { n := n + 1; output [n = n; src = 'B'; id = B.id;]; };
END;
"""


@pytest.mark.parametrize("collect_bytes", [0, None])
def test_rows_of_different_inputs_are_processed_in_the_order_their_files_arrived(spark, tmp_path,
                                                                               collect_bytes):
    """Three files of two inputs in one batch: the Flex counts its events in the order the files
    arrived (their modification times: a1, then b1, then a2), not input by input or line by
    line; within a file, in line order."""
    adir, bdir = os.path.join(str(tmp_path), "a"), os.path.join(str(tmp_path), "b")
    files = [(os.path.join(adir, "a1.csv"), [1, 2]), (os.path.join(bdir, "b1.csv"), [10, 11, 12]),
             (os.path.join(adir, "a2.csv"), [3])]
    for k, (path, ids) in enumerate(files):
        write_rows(path, ["id"], [(i,) for i in ids])
        os.utime(path, ns=(10**18 + k * 10**9, 10**18 + k * 10**9))
    out = run_project(spark, tmp_path, ARRIVALS, {"A": adir, "B": bdir}, collect_bytes=collect_bytes)
    got = sorted((int(r["n"]), r["src"], int(r["id"])) for r in out.rows("O"))
    assert got == [(1, "A", 1), (2, "A", 2), (3, "B", 10), (4, "B", 11), (5, "B", 12), (6, "A", 3)]


def test_a_stop_that_cuts_a_batch_short_waits_for_its_files(caplog):
    """The guard stops the query between two batches; when the batch running outlasts the bound,
    the query is stopped under it, and the stop then waits for the batch's Python side (which
    goes on writing files) before the caller reads the run directory; a batch after the stop is
    refused before it runs anything."""
    import threading
    import time

    from runtime.project_query import BatchGuard, BatchRefused

    guard = BatchGuard()
    events: list[str] = []
    inside, stopped = threading.Event(), threading.Event()

    def batch() -> None:
        with guard.batch():
            inside.set()
            stopped.wait(30)  # outlasts the bound: the query is stopped under it
            time.sleep(0.05)
            events.append("batch wrote its files")

    class Query:
        name = "ccl:project"

        def stop(self) -> None:
            events.append("query stopped")
            stopped.set()

    running = threading.Thread(target=batch)
    running.start()
    inside.wait(5)
    guard.stop(Query(), bound=1.0)
    events.append("stop returned")
    running.join()
    assert events == ["query stopped", "batch wrote its files", "stop returned"]
    assert not guard.refused
    with pytest.raises(BatchRefused):
        with guard.batch():
            events.append("refused batch ran")
    assert guard.refused and events[-1] == "stop returned"


class _StreamQuery:
    """A query whose stop, like Spark's, interrupts its stream thread and waits for it: the
    stream thread starts a batch (the foreachBatch function ``write``) as the stop begins, and
    an exception from the function ends the query without committing the batch."""

    name = "ccl:trades"

    def __init__(self, write) -> None:
        import threading

        self.write = write
        self.committed: list[int] = []
        self.error: Exception | None = None
        self.stream = threading.Thread(target=self._batch, args=(1,), daemon=True)

    def _batch(self, batch_id: int) -> None:
        try:
            self.write(None, batch_id)
            self.committed.append(batch_id)
        except Exception as exc:  # the query ends with it, the batch not committed
            self.error = exc

    def stop(self) -> None:
        self.stream.start()
        self.stream.join(10)


def test_a_batch_that_starts_while_the_query_stops_is_refused_not_waited_for():
    """The old guard held its lock across query.stop(): a batch Spark started meanwhile blocked
    on it in the Python callback while query.stop() waited for the stream thread: a deadlock
    (it hung the group-SIGTERM run of element queries). Now such a batch raises BatchRefused at
    once, so Spark does not commit it (it runs again from the checkpoint), and the stopper
    knows the query's error is its own stop's doing."""
    from runtime.project_query import BatchGuard, BatchRefused

    guard = BatchGuard()
    wrote: list[int] = []
    query = _StreamQuery(guard.guarded(lambda df, batch_id: wrote.append(batch_id)))
    guard.stop(query, bound=1.0)
    assert not query.stream.is_alive(), "the stop hung on the batch it let start"
    assert isinstance(query.error, BatchRefused) and guard.refused
    assert wrote == [] and query.committed == []


def test_a_failed_batch_is_not_taken_for_a_refused_one():
    from runtime.project_query import BatchGuard

    guard = BatchGuard()
    with pytest.raises(ZeroDivisionError):
        with guard.batch():
            1 / 0
    assert not guard.refused
    query = _StreamQuery(guard.guarded(lambda df, batch_id: None))
    guard.stop(query, bound=1.0)
    assert guard.refused and query.committed == []


def test_writes_behind_run_in_order_and_wait_raises_the_first_failure():
    from runtime.project_query import WriteBehind

    behind = WriteBehind()
    done: list[int] = []

    def fail(k: int) -> None:
        done.append(k)
        raise OSError(f"disk full {k}")
    for k in range(5):
        behind.submit(lambda k=k: done.append(k))
    behind.submit(lambda: fail(5))
    behind.submit(lambda: fail(6))
    behind.submit(lambda: done.append(7))  # a later write still runs
    with pytest.raises(OSError, match="disk full 5"):
        behind.wait()
    assert done == list(range(8))
    behind.wait()  # nothing pending: nothing raised again
    behind.submit(lambda: fail(8))
    behind.wait(quietly=True)
    assert done[-1] == 8


def test_outputs_written_in_the_pool_are_those_written_here(spark, tmp_path, monkeypatch):
    """With the bucket pool running, the output elements' files are written in its processes:
    byte for byte the files written one after another here, with the same report."""
    from types import SimpleNamespace

    from ccl.plan.codec import plan_from_json
    from runtime import bucket_pool, outputs
    from runtime.run_dir import RunDirs
    from runtime.run_setup import layout_of

    pooled = []

    def mapped(fn, *items):
        got = bucket_pool.map_if_running(fn, *items)
        pooled.append(got is not None)
        return got

    inputs, _ = _inputs(tmp_path / "in")
    out = run_project(spark, tmp_path / "p", PROJECT, inputs)
    monkeypatch.setattr(outputs, "map_if_running", mapped)
    plan, dirs = plan_from_json(out.plan), RunDirs(os.path.join(str(tmp_path), "p", "run"))
    session = SimpleNamespace(version=spark.version)
    bucket_pool._shut_down()  # noqa: SLF001 - a pool another test made: none, then one
    bucket_pool._POOL = None  # noqa: SLF001
    reports, files = {}, {}
    try:
        for how in ("here", "pool"):
            if how == "pool":
                wait(bucket_pool.warm(2), timeout=120)
            target = os.path.join(str(tmp_path), how)
            reports[how] = outputs.write_outputs(session, plan, dirs, layout_of(dirs.root), target,
                                                 str(tmp_path), 1.0)
            files[how] = {name: open(os.path.join(target, name), "rb").read()
                          for name in sorted(os.listdir(target))}
    finally:
        bucket_pool._shut_down()  # noqa: SLF001
        bucket_pool._POOL = None  # noqa: SLF001
    assert pooled == [False, True]
    assert reports["here"] == reports["pool"]
    assert files["here"] == files["pool"]
    assert {"SymStats.csv", "Big.csv", "_run.json"} <= set(files["pool"])
    assert files["pool"]["Big.csv"].count(b"\n") > 1


NATIVE_AGG = """
CREATE INPUT STREAM S SCHEMA (K string, P float, V integer);
CREATE OUTPUT WINDOW W PRIMARY KEY DEDUCED PARTITION BY S HASH(K) PARTITIONS 3
AS SELECT S.K K, max(S.P) Hi, min(S.P) Lo, sum(S.V) Vol, count(*) N, avg(S.P) Mean, sum(S.P) Total
   FROM S GROUP BY S.K;
"""
# halves up to 1000: every sum of them is exact, whatever order Spark adds them in
_ROW = st.tuples(st.sampled_from(["a", "b", "c", "", None, "d,e"]),
                 st.one_of(st.integers(-2000, 2000).map(lambda n: str(n / 2)), st.just("x"),
                           st.none()),
                 st.one_of(st.integers(-10**6, 10**6).map(str), st.just("1.5"), st.none()))


_GOOD = ("a", "1.0", "1")  # a file's first row: every batch aggregates a row


@given(files=st.lists(st.lists(_ROW, max_size=40).map(lambda rows: [_GOOD, *rows]),
                      min_size=1, max_size=3))
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_native_aggregation_scans_a_small_batch_from_parquet_with_the_same_results(
        spark, tmp_path_factory, monkeypatch, files):
    """A small batch's rows reach a native aggregation as a Parquet file Spark scans
    (project_query._spark_frames) or as a local relation: the same rows, counters and bad records,
    batch after batch (each file a run of its own, resumed: the snapshot merges)."""
    from runtime import project_query

    tmp = tmp_path_factory.mktemp("scan")
    scanned: list[bool] = []
    real = project_query._scannable

    def spied(schema):
        scanned.append(real(schema))
        return scanned[-1]
    monkeypatch.setattr(project_query, "_scannable", spied)
    runs = {}
    for how, limit in (("scan", 0), ("local", 10 ** 12)):
        monkeypatch.setattr(project_query, "SCAN_ROWS", limit)
        data = os.path.join(str(tmp), how + "-in")
        for f, rows in enumerate(files):
            write_rows(os.path.join(data, f"s{f}.csv"), ["K", "P", "V"], rows)
            out = run_project(spark, tmp / how, NATIVE_AGG, {"S": data},
                              checkpoint=os.path.join(str(tmp), how, "run"))
        runs[how] = (out.rows("W"), out.report["elements"], sorted(map(str, out.bad_records())))
    # the scan route, in the "scan" runs only: W's table every batch, S's too when it has bad rows
    assert len(scanned) >= len(files) and all(scanned)
    assert runs["scan"] == runs["local"]


LOCAL_ROUTES = """
CREATE INPUT STREAM S SCHEMA (K string, P float, V integer);
CREATE OUTPUT STREAM F AS SELECT s.K K, s.P P, s.V V FROM S s WHERE s.P > 1.5;
CREATE OUTPUT STREAM G PARTITION BY S { return ascii(substr(S.K, 1, 1)) % G_partitions; }
    PARTITIONS 3
AS SELECT s.K K, s.V V FROM S s WHERE s.V > 0;
CREATE OUTPUT WINDOW W PRIMARY KEY (K, V) KEEP 3 ROWS PER (K)
    PARTITION BY S { integer h := 0; integer k := 0;
                     while (k < 1) { h := ascii(substr(S.K, 2, 1)); k := k + 1; }
                     return h % W_partitions; }
    PARTITIONS 2
AS SELECT * FROM S;
"""
# mostly rows that pass (order shows only among several), some with NaN where F compares floats,
# unparsable fields (bad input rows), keys whose partition functions give no integer
_GOOD_ROW = st.tuples(st.sampled_from(["ab", "ba", "ca", "bb"]),
                      st.integers(-20, 20).map(lambda n: str(n / 4)), st.integers(1, 5).map(str))
_ODD_ROW = st.tuples(st.sampled_from(["b", "", None, "c,d"]),
                     st.sampled_from(["NaN", "x", None, "2.5"]), st.sampled_from(["1.5", None, "-1"]))
_ROUTE_FILE = st.lists(st.one_of(_GOOD_ROW, _GOOD_ROW, _GOOD_ROW, _ODD_ROW), min_size=2, max_size=30)


def _changelogs(run: str, element: str) -> list[str]:
    """Every row of ``element``'s changelog files under the run directory ``run``, in batch and
    file order (as strings: a NaN equals itself)."""
    import pyarrow.parquet as pq

    directory = os.path.join(run, "changelog", element)
    if not os.path.isdir(directory):
        return []
    return [str(row) for name in sorted(os.listdir(directory)) if name.endswith(".parquet")
            for row in pq.read_table(os.path.join(directory, name)).to_pylist()]


@given(files=st.lists(_ROUTE_FILE, min_size=1, max_size=2))
@example(files=[[("ab", "2.0", "1"), ("ba", "3.0", "2"), ("ca", "NaN", "3"), ("b", "4", "4"),
                 (None, "x", "1.5"), ("ab", "5", "5")], [("bb", "NaN", "1"), ("ca", "7", "2")]])
@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_filters_and_partition_functions_scan_a_small_batch_from_parquet_in_order(
        spark, tmp_path_factory, monkeypatch, files):
    """A small batch's rows reach the stages Arrow cannot compute (an input with bad rows, a
    filter comparing a NaN, custom partition functions compiled and interpreted, of a filter and
    of a per-instance window) as Parquet files Spark scans (project_query._spark_frames) or as
    local relations: the same changelog rows in the same order, counters and bad records, batch
    after batch (each file a run of its own, resumed)."""
    from runtime import project_query

    tmp = tmp_path_factory.mktemp("scanned")
    staged: list[tuple[str, str]] = []
    real = project_query._spark_frames

    def spied(spark_, element, frames, dirs, batch_id):
        staged.append((project_query.SCAN_ROWS and "local" or "scan", element.name))
        return real(spark_, element, frames, dirs, batch_id)
    monkeypatch.setattr(project_query, "_spark_frames", spied)
    runs = {}
    for how, limit in (("scan", 0), ("local", 10 ** 12)):
        monkeypatch.setattr(project_query, "SCAN_ROWS", limit)
        data, run = os.path.join(str(tmp), how + "-in"), os.path.join(str(tmp), how, "run")
        for f, rows in enumerate(files):
            write_rows(os.path.join(data, f"s{f}.csv"), ["K", "P", "V"], rows)
            out = run_project(spark, tmp / how, LOCAL_ROUTES, {"S": data}, checkpoint=run)
        runs[how] = ({e: _changelogs(run, e) for e in ("F", "G", "W")}, out.rows("W"),
                     out.report["elements"], sorted(map(str, out.bad_records())))
    for how in ("scan", "local"):  # every batch's G and W take Spark's expressions
        assert {name for h, name in staged if h == how} >= {"G", "W"}
    assert runs["scan"] == runs["local"]
