"""runtime/outputs.py without Spark: a window's final contents from changelog files read with
pyarrow, chunk by chunk."""
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ccl.plan.codec import element_from_json
from runtime import outputs
from runtime.changelog_order import ORDER
from runtime.run_dir import RunDirs

ELEMENT = element_from_json({"name": "w", "kind": "window", "role": "output", "key": ["k", "x"],
                             "columns": [["k", "string"], ["x", "float"], ["v", "integer"]]})


def _write(dirs: RunDirs, batch: int, rows: list[tuple]) -> None:
    """Changelog rows (inst, seq, sub, op, k, x, v) of one batch."""
    import os
    path = dirs.of("changelog", "w")
    os.makedirs(path, exist_ok=True)
    names = ["__inst", "__seq", "__sub", "__op", "k", "x", "v"]
    columns = list(zip(*rows))
    table = pa.table([pa.array([batch] * len(rows), pa.int64())]
                     + [pa.array(c) for c in columns], names=["__batch"] + names)
    pq.write_table(table, os.path.join(path, f"batch-{batch:08d}.parquet"))


@pytest.mark.parametrize("chunk", [1, 64 << 20])
def test_last_change_of_each_key_per_instance(tmp_path, monkeypatch, chunk):
    """The last change (by batch, sequence number, sub-number) of each key in each instance, a
    delete dropping the key; -0.0 and 0.0 are one key, every NaN one key, null a key of its own,
    as Spark's window partitions grouped them. Read a batch at a time or all at once."""
    monkeypatch.setattr(outputs, "CHUNK_BYTES", chunk)
    dirs = RunDirs(str(tmp_path))
    _write(dirs, 0, [(0, 1, 0, "i", "a", 0.0, 1), (0, 2, 0, "i", "b", float("nan"), 2),
                     (1, 1, 0, "i", "a", 0.0, 10), (0, 3, 0, "i", None, 1.5, 3),
                     (0, 4, 0, "i", "c", 1.0, 4)])
    _write(dirs, 1, [(0, 9, 1, "u", "a", -0.0, 5), (0, 9, 0, "u", "a", 0.0, 6),
                     (0, 8, 0, "u", "b", float("nan"), 7), (0, 10, 0, "d", "c", 1.0, 4)])
    _write(dirs, 2, [(0, 1, 0, "u", None, 1.5, 8)])
    got = outputs.last_changes(dirs, ELEMENT).to_pylist()
    rows = sorted(((r["__inst"], r["k"] or "", r["v"]) for r in got))
    assert rows == [(0, "", 8), (0, "a", 5), (0, "b", 7), (1, "a", 10)]
    assert math.isnan(next(r["x"] for r in got if r["k"] == "b"))


def test_no_changelog_gives_no_rows(tmp_path):
    assert outputs.last_changes(RunDirs(str(tmp_path)), ELEMENT).num_rows == 0


def test_outputs_hold_only_the_batches_that_ran_to_their_end(tmp_path):
    """A batch of the project's query a stop cut short wrote the files of some elements and not
    of others: the outputs count its elements' batches up to the last one the query finished
    (its batch record), so an input's rows and its readers' counts agree; an element outside the
    project's query keeps every file."""
    import json
    import os

    from runtime.run_dir import BATCHES, PROJECT_QUERY
    from runtime.run_setup import RunLayout

    dirs = RunDirs(str(tmp_path))
    other = element_from_json({"name": "x", "kind": "stream", "role": "output",
                               "columns": [["v", "integer"]]})
    layout = RunLayout(buckets=1, fused={}, unrecorded=frozenset(), project=("w",))

    def stats(name: str, batch: int) -> None:
        path = dirs.batch_file("stats", name, batch, "json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"rows_in": 10, "rows_out": {"i": 1}, "bad": {}, "instances": {"0": 10}}, f)

    for batch in range(3):  # batch 2 was cut short: no record of its end
        _write(dirs, batch, [(0, batch, 0, "i", f"k{batch}", 1.0, batch)])
        stats("w", batch)
        stats("x", batch)
    for batch in range(2):
        path = dirs.batch_file(BATCHES, PROJECT_QUERY, batch, "json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"start": 0, "seconds": 0.1}, f)
    upto = outputs.last_complete(dirs, layout)
    assert upto == {"w": 1}
    assert outputs.element_stats(dirs, ELEMENT, upto.get("w"))["rows_in"] == 20
    assert outputs.element_stats(dirs, other, upto.get("x"))["rows_in"] == 30
    kept = outputs.final_rows(dirs, ELEMENT, upto["w"]).tables[0].column("k").to_pylist()
    assert sorted(kept) == ["k0", "k1"]
    assert outputs.element_stats(dirs, ELEMENT)["rows_in"] == 30  # live readers: every file


_TYPES = ["string", "integer", "long", "float", "boolean", "timestamp", "money(4)", "binary"]
_CONFLICTED = element_from_json({"name": "w", "kind": "window", "role": "output", "key": ["c0"],
                                 "columns": [[f"c{i}", t] for i, t in enumerate(_TYPES)]})


def _conflict_rows():
    import datetime

    from hypothesis import strategies as st

    values = [st.text(), st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
              st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
              st.datetimes(datetime.datetime(1, 1, 2), timezones=st.just(datetime.timezone.utc)),
              st.decimals(-10**13, 10**13, places=4, allow_nan=False), st.binary(max_size=4)]
    row = st.tuples(st.integers(0, 9), st.integers(0, 65535), st.integers(0, 2**40),
                    *[st.none() | v for v in values])
    return st.lists(row, max_size=30)


def test_conflict_lines_are_json_dumps_of_each_record():
    """The conflict bad records, built a column at a time, are the lines ``json.dumps(record,
    default=str, sort_keys=True)`` gives for each row's record (NaN, infinities, -0.0, nulls,
    escapes, non-ASCII text, timestamps, money, binary), in batch and sequence order."""
    import json

    from hypothesis import given, settings

    schema = outputs._arrow_schema(_CONFLICTED)
    names = [c.name for c in _CONFLICTED.columns]

    @settings(max_examples=150, deadline=None)
    @given(_conflict_rows())
    def check(rows):
        table = pa.Table.from_pylist(
            [dict(zip(["__batch", "__inst", "__seq", "__sub", "__op", *names], (b, i, s, 0, "i", *v)))
             for b, i, s, *v in rows], schema=schema)
        expected = [json.dumps({"element": "w", "reason": outputs.CONFLICT, "batch": r["__batch"],
                                "instance": r["__inst"], "row": {n: r[n] for n in names}},
                               default=str, sort_keys=True) + "\n"
                    for r in outputs.records([table])]
        assert outputs.conflict_lines(_CONFLICTED, [table]) == expected

    check()


def _reference_last_positions(table: pa.Table, key: list[str]):
    """runtime/outputs.py's ``_last_positions`` before the ranks: the whole table sorted in ORDER,
    then the position of each key's last row in it (the reference of the generated test below)."""
    table = table.take(pa.compute.sort_indices(table, [(c, "ascending") for c in ORDER]))
    keyed = pa.table({"__i": pa.array(range(table.num_rows), pa.int64())})
    for i, name in enumerate(key):
        values = table.column(name)
        if pa.types.is_floating(values.type):
            values = pa.compute.if_else(pa.compute.is_nan(values), float("nan"),
                                        pa.compute.add(values, 0.0))
        keyed = keyed.append_column(f"__k{i}", values)
    last = keyed.group_by([f"__k{i}" for i in range(len(key))], use_threads=False).aggregate(
        [("__i", "max")])
    return table, last.column("__i_max").combine_chunks()


def _reference_final_rows(dirs: RunDirs, element) -> outputs.Contents:
    """A window's ``final_rows`` as it was computed before the ranks (the whole changelog sorted
    per chunk, every table sorted again)."""
    import pyarrow.compute as pc

    key = ["__inst", *element.key]
    latest = None
    for chunk in outputs.changelog_chunks(dirs, element):
        table, positions = _reference_last_positions(
            chunk if latest is None else pa.concat_tables([latest, chunk]), key)
        latest = table.take(positions)
    if latest is None:
        latest = outputs._arrow_schema(element).empty_table()
    held = latest.filter(pc.not_equal(latest.column("__op"), "d"))
    if element.physical.instances == 1:
        return outputs.Contents([held])
    table, positions = _reference_last_positions(held, list(element.key))
    kept = pc.is_in(pa.array(range(table.num_rows), pa.int64()), value_set=positions)
    return outputs.Contents([table.take(positions)], [table.filter(pc.invert(kept))])


def _rows(tables) -> list[str]:
    """The rows of ``tables`` as text (NaN equal to NaN, -0.0 not to 0.0)."""
    return [repr(r) for t in tables for r in t.to_pylist()]


def test_final_rows_of_a_window_match_the_whole_sort():
    """A window's final contents and the rows another instance's later change replaced, from the
    ranks of the order's columns (runtime/outputs.py ``_last_of_keys``), are those of sorting the
    whole changelog as before: same rows, same order (the tables as ``sorted_tables`` gives them,
    and in ORDER already), on generated changelogs of several batches and instances, read a batch
    at a time or at once, with float keys (-0.0, NaN), null keys and deletes. (Two rows of a batch and instance
    never share a sequence and sub-number: where they did, the rows' order would have followed
    the keys' hash groups before.)"""
    import dataclasses
    import shutil
    import tempfile

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ccl.plan.model import Physical

    change = st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 2),
                       st.sampled_from("iuud"), st.sampled_from(["a", "b", None]),
                       st.sampled_from([0.0, -0.0, 1.5, float("nan"), None]), st.integers(0, 99))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.lists(change, max_size=12), min_size=1, max_size=4), st.integers(1, 3),
           st.booleans())
    def check(batches, instances, one_chunk):
        element = dataclasses.replace(ELEMENT, physical=Physical("per-instance", "test",
                                                                 instances=instances))
        root = tempfile.mkdtemp()
        try:
            dirs = RunDirs(root)
            for b, rows in enumerate(batches):
                # a row's place (instance, sequence and sub-number) is its own in its batch
                placed = {(i % instances, s, u): (op, k, x, v) for i, s, u, op, k, x, v in rows}
                if placed:
                    _write(dirs, b, [(*place, *rest) for place, rest in placed.items()])
            outputs.CHUNK_BYTES = 64 << 20 if one_chunk else 1
            got, want = outputs.final_rows(dirs, element), _reference_final_rows(dirs, element)
            for mine, theirs in ((got.tables, want.tables), (got.replaced, want.replaced)):
                ours = _rows(outputs.sorted_tables(mine))
                assert ours == _rows(outputs.sorted_tables(theirs))
                assert ours == _rows(mine)  # in ORDER already
        finally:
            outputs.CHUNK_BYTES = 64 << 20
            shutil.rmtree(root)

    check()


def test_sorted_tables_sort_stably_as_arrow_does():
    """``sorted_tables`` (NumPy's lexsort, Arrow's sort when an order column has nulls) gives the
    rows in the order of Arrow's stable sort, equal order keys in their table's order."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    row = st.tuples(st.integers(0, 2), st.integers(0, 3) | st.none(), st.integers(0, 2),
                    st.integers(0, 2))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(row, max_size=30))
    def check(rows):
        table = pa.table({"__batch": pa.array([r[0] for r in rows], pa.int64()),
                          "__seq": pa.array([r[1] for r in rows], pa.int64()),
                          "__inst": pa.array([r[2] for r in rows], pa.int32()),
                          "__sub": pa.array([r[3] for r in rows], pa.int64()),
                          "n": pa.array(range(len(rows)), pa.int64())})
        got = _rows(outputs.sorted_tables([table]))
        assert got == _rows([table.sort_by([(c, "ascending") for c in ORDER])])

    check()
