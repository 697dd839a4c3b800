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


GROUPED = """
create input stream s schema (k string, j long, v integer);
create output window w primary key deduced keep all
    as select s.k, s.j, sum(s.v) v, count(*) n from s group by s.k, s.j;
create input window u schema (k string, j long, v integer) primary key (k, j);
create output window x primary key deduced keep all
    as select u.k, max(u.v) top, sum(u.v) v, count(*) n from u group by u.k;
"""


def _grouped_files(root, batches: int) -> None:
    """``batches`` files of the stream ``s`` and of the window ``u`` (whose later files update
    and delete rows of the earlier ones: their groups' retractions need the moved state)."""
    for b in range(batches):
        write_rows(str(root / "s" / f"s{b}.csv"), ["k", "j", "v"],
                   [(f"k{(b + i) % 11}", i % 3, i + 10 * b) for i in range(25)])
        write_rows(str(root / "u" / f"u{b}.csv"), ["k", "j", "v"],
                   [(f"k{i % 7}", i % 4 + b % 2, i * (b + 1)) for i in range(20)])


def _grouped_outputs(out) -> dict:
    return {"w": sorted((r["k"], r["j"], r["v"], r["n"]) for r in out.rows("w")),
            "x": sorted((r["k"], r["top"], r["v"], r["n"]) for r in out.rows("x"))}


def _stored_buckets(run: str, element: str) -> dict[int, set[int]]:
    """Instance -> the buckets whose state files hold a state of it."""
    from runtime.arrow_state import load_states, newest_batches
    state_dir = os.path.join(run, "state", element)
    held: dict[int, set[int]] = {}
    for bucket in newest_batches(state_dir, 10 ** 6):
        for inst in load_states(state_dir, bucket, 10 ** 6):
            held.setdefault(inst, set()).add(bucket)
    return held


@pytest.mark.parametrize("first,then", [(2, 5), (4, 3)])
def test_groups_spread_over_buckets_move_to_the_bucket_their_key_hashes_to(spark, tmp_path, first,
                                                                          then):
    """A ``by_group`` aggregation (each instance's groups spread over the buckets by a hash of the
    instance and the group columns) resumed with another bucket count: each group's state goes to
    its new bucket, and the outputs after more batches are those of a run that had that count from
    the start (a window source's updates retract from groups that moved)."""
    from ccl.plan.codec import plan_from_json
    from runtime.run_dir import by_group

    def run(root, buckets):
        return run_project(spark, root, GROUPED, {"s": str(root / "s"), "u": str(root / "u")},
                           buckets=buckets, native_operators=False)
    whole = tmp_path / "whole"  # the same batches, with the new count from the start
    _grouped_files(whole, 2)
    run(whole, then)
    _grouped_files(whole, 3)
    expected = run(whole, then)
    assert set(by_group(plan_from_json(expected.plan))) == {"w", "x"}
    split = tmp_path / "split"
    _grouped_files(split, 2)
    run(split, first)
    run_dir = str(split / "run")
    assert len(_stored_buckets(run_dir, "w")[0]) > 1  # one instance's groups in several buckets
    _grouped_files(split, 3)
    got = run(split, then)
    assert _grouped_outputs(got) == _grouped_outputs(expected)
    assert json.loads(open(os.path.join(run_dir, "run.json")).read())["buckets"] == then
    assert not os.path.exists(os.path.join(run_dir, "rebucket.json"))
    for name in ("w", "x"):
        assert set().union(*_stored_buckets(run_dir, name).values()) <= set(range(then))
        # the state each bucket holds is that of the run with the new count from the start
        assert _group_state(run_dir, name) == _group_state(str(whole / "run"), name)


def _group_state(run: str, element: str) -> dict:
    """(bucket, instance, namespace, key) -> value of every entry of the element's state store."""
    from runtime.arrow_state import rows_root
    from runtime.state.store import BucketStore, read_layout
    root = rows_root(os.path.join(run, "state", element))
    out = {}
    for b in range(read_layout(root).buckets):
        with BucketStore.open(root, b) as store:
            it = store._db.iter()
            it.seek(b"d")
            spaces = set()
            while it.valid() and it.key()[:1] == b"d":
                spaces.add(it.key()[1:it.key().index(b"\x00", 1)].decode())
                it.next()
            del it
            for ns in spaces:
                for key, value in store.scan(ns):
                    out[(b, key[0], ns, key[1:])] = value
    return out


def test_a_group_move_cut_short_after_the_stores_switched_is_finished(spark, tmp_path,
                                                                      monkeypatch):
    """A crash after the stores of a ``by_group`` aggregation moved, before its state files were
    written: the next run counts what the new buckets hold and finishes the move."""
    import runtime.rebucket as rb

    def run(root, buckets):
        return run_project(spark, root, GROUPED, {"s": str(root / "s"), "u": str(root / "u")},
                           buckets=buckets, native_operators=False)
    whole = tmp_path / "whole"
    _grouped_files(whole, 1)
    run(whole, 3)
    _grouped_files(whole, 2)
    expected = _grouped_outputs(run(whole, 3))
    split = tmp_path / "split"
    _grouped_files(split, 1)
    run(split, 2)
    _grouped_files(split, 2)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")
    monkeypatch.setattr(rb, "save_states", killed)
    with pytest.raises(KeyboardInterrupt):
        run(split, 3)
    job = json.loads((split / "run" / "rebucket.json").read_text())
    assert job["swapping"] is False and set(job["groups"]) == {"w", "x"}
    monkeypatch.undo()
    assert _grouped_outputs(run(split, 3)) == expected


def test_a_journal_whose_group_spread_does_not_decode_is_refused_saying_so(tmp_path):
    """The spread of a ``by_group`` aggregation in RUN/rebucket.json is decoded with the plan's
    codec: one that is not a spread stops the run with a RunError naming the journal, which
    stays in place."""
    from runtime.rebucket import finish_rebucket
    from runtime.run_dir import RunDirs
    from runtime.run_setup import RunError
    journal = tmp_path / "rebucket.json"
    journal.write_text(json.dumps({"from": 2, "to": 3, "batch": 0, "elements": ["W"],
                                   "swapping": False, "groups": {"W": {"columns": ["k"]}}}))
    with pytest.raises(RunError, match="holds a move to other buckets that this ccl cannot read "
                                       r".*rebucket.json: not a valid group spread: missing "
                                       "'types'"):
        finish_rebucket(RunDirs(str(tmp_path)))
    assert journal.exists()
