"""A run directory resumed with another number of buckets (runtime/rebucket.py): the state of its
per-instance elements moves to the buckets their instances now map to, and the outputs are those
of a run that had that many buckets from the start."""
from __future__ import annotations

import json
import os

import pytest

from tests.runner_e2e import run_project, write_rows

PROJECT = """
CREATE INPUT STREAM Trades SCHEMA (TradeId long, Sym string, Qty integer);
CREATE OUTPUT WINDOW Recent PRIMARY KEY (Sym, TradeId) KEEP 2 ROWS PER (Sym)
    PARTITION BY Trades HASH(Sym) PARTITIONS 6
AS SELECT * FROM Trades;
CREATE INPUT WINDOW Names SCHEMA (Sym string, Name string) PRIMARY KEY (Sym);
CREATE OUTPUT STREAM Named PARTITION BY Trades HASH(Sym) PARTITIONS 6
AS SELECT t.TradeId TradeId, n.Name Name FROM Trades t INNER JOIN Names n ON t.Sym = n.Sym;
CREATE FLEX Moves IN Trades OUT OUTPUT STREAM Seen SCHEMA (Sym string, N integer)
    PARTITION BY Trades HASH(Sym) PARTITIONS 6
BEGIN
    DECLARE dictionary(string, integer) seen; eventCache(Trades[Sym], 2 events) last; END;
    ON Trades {
        if (isnull(seen[Trades.Sym])) { seen[Trades.Sym] := 0; }
        seen[Trades.Sym] := seen[Trades.Sym] + 1;
        output [Sym = Trades.Sym; N = seen[Trades.Sym] * 1000 + sum(last.Qty);];
    };
END;
"""


def _files(directory: str, batches: int) -> None:
    """``batches`` files of trades over 9 symbols (one file a batch, in name order), and the
    names of the symbols (in the first batch)."""
    write_rows(os.path.join(directory, "..", "names", "n.csv"), ["Sym", "Name"],
               [(f"S{k}", f"name {k}") for k in range(9)])
    for b in range(batches):
        write_rows(os.path.join(directory, f"t{b}.csv"), ["TradeId", "Sym", "Qty"],
                   [(b * 30 + i, f"S{(b + i * 7) % 9}", i + b) for i in range(30)])


def _inputs(root) -> dict[str, str]:
    return {"Trades": str(root / "in"), "Names": str(root / "names")}


def _outputs(out) -> dict:
    return {"Recent": sorted((r["Sym"], r["TradeId"]) for r in out.rows("Recent")),
            "Named": sorted((r["TradeId"], r["Name"]) for r in out.rows("Named")),
            "Seen": sorted((r["Sym"], r["N"]) for r in out.rows("Seen"))}


def _state_buckets(run: str, element: str) -> set[int]:
    return {int(n[1:6]) for n in os.listdir(os.path.join(run, "state", element)) if n.endswith(".pkl")}


@pytest.mark.parametrize("first,then", [(2, 5), (5, 2)])
def test_a_run_directory_resumed_with_other_buckets_gives_the_same_outputs(spark, tmp_path, first,
                                                                           then):
    whole = tmp_path / "whole"
    _files(str(whole / "in"), 3)
    expected = _outputs(run_project(spark, whole, PROJECT, _inputs(whole),
                                    buckets=then, max_files_per_batch=None))
    split = tmp_path / "split"
    _files(str(split / "in"), 2)
    run_project(spark, split, PROJECT, _inputs(split), buckets=first)
    run = str(split / "run")
    assert 1 < len(_state_buckets(run, "Seen")) and _state_buckets(run, "Seen") <= set(range(first))
    _files(str(split / "in"), 3)  # a third file: the state of the first two moved, then used
    got = run_project(spark, split, PROJECT, _inputs(split), buckets=then)
    assert _outputs(got) == expected
    assert json.loads(open(os.path.join(run, "run.json")).read())["buckets"] == then
    assert 1 < len(_state_buckets(run, "Seen")) and _state_buckets(run, "Seen") <= set(range(then))
    assert not os.path.exists(os.path.join(run, "rebucket.json"))
    # the window rows' store moved too: its layout has the new count
    from runtime.arrow_state import rows_root
    from runtime.state.store import read_layout
    assert read_layout(rows_root(os.path.join(run, "state", "Recent"))).buckets == then


def test_a_move_cut_short_is_finished_by_the_next_run(spark, tmp_path, monkeypatch):
    """A crash while the state files are swapped: the journal makes the next run finish the move
    (the files already swapped are kept, the rest moved) before its query starts."""
    import runtime.rebucket as rb
    whole = tmp_path / "whole"
    _files(str(whole / "in"), 2)
    expected = _outputs(run_project(spark, whole, PROJECT, _inputs(whole), buckets=3))
    split = tmp_path / "split"
    _files(str(split / "in"), 1)
    run_project(spark, split, PROJECT, _inputs(split), buckets=2)
    _files(str(split / "in"), 2)
    swapped = []

    def crash_after_one(state_dir: str) -> None:
        if swapped:
            raise KeyboardInterrupt("killed")
        swapped.append(state_dir)
        real_swap(state_dir)
    real_swap = rb._swap
    monkeypatch.setattr(rb, "_swap", crash_after_one)
    with pytest.raises(KeyboardInterrupt):
        run_project(spark, split, PROJECT, _inputs(split), buckets=3)
    assert json.loads((split / "run" / "rebucket.json").read_text())["swapping"] is True
    monkeypatch.setattr(rb, "_swap", real_swap)
    got = run_project(spark, split, PROJECT, _inputs(split), buckets=3)
    assert _outputs(got) == expected


def test_state_split_by_group_is_not_moved(spark, tmp_path):
    """An aggregation whose groups spread over buckets keeps no state by instance alone: resuming
    with other buckets is refused, naming it, and the count it was made with is the way on."""
    from runtime.run_setup import RunError
    text = """create input stream s schema (k string, v integer);
    create output window w primary key deduced keep all as select s.k, sum(s.v) v from s group by s.k;
    """
    write_rows(str(tmp_path / "in" / "a.csv"), ["k", "v"], [("a", 1), ("b", 2)])
    run_project(spark, tmp_path, text, {"s": str(tmp_path / "in")}, native_operators=False, buckets=2)
    with pytest.raises(RunError, match=r"with 4 buckets \(it has 2\): element 'w' spreads.*"
                                       r"runtime.buckets=2"):
        run_project(spark, tmp_path, text, {"s": str(tmp_path / "in")}, native_operators=False,
                    buckets=4)
