"""runtime/appended.py without Spark: a stream output's NAME.csv copied from the lines appended as
its batches were written is the file made from its changelog, across batches run again after a
kill, lines cut short and batches not yet complete."""
import os
import shutil
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

from ccl.plan.codec import element_from_json
from runtime import appended, outputs
from runtime.csv_output import write_csv_tables
from runtime.run_dir import RunDirs
from runtime.types import columns_of


def _element(kind: str):
    return element_from_json({"name": "s", "kind": kind, "role": "output",
                              "columns": [["t", "string"], ["x", "float"], ["n", "integer"]]})


def _changelog(dirs: RunDirs, element, batch: int, rows: list[tuple]) -> pa.Table:
    """Write batch ``batch``'s changelog file of ``rows`` (inst, seq, sub, op, t, x, n)."""
    schema = outputs._arrow_schema(element)
    table = pa.Table.from_pylist(
        [dict(zip(schema.names, (batch, *r))) for r in rows], schema=schema)
    path = dirs.batch_file("changelog", element.name, batch, "parquet")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)
    return table


def _reference(dirs: RunDirs, element, path: str, upto) -> None:
    """NAME.csv as made from the changelog (runtime/outputs.py without the appended lines)."""
    write_csv_tables(path, columns_of(element),
                     outputs.sorted_tables(outputs.final_rows(dirs, element, upto).tables),
                     opcodes=element.kind == "delta stream")


def test_appended_lines_are_the_changelogs_file():
    """Batches appended one by one, some run again after a kill (the process's cache gone, the
    batch's lines or index line possibly cut short or already complete), give, up to any last
    complete batch, the bytes of the file made from the changelog; a changelog batch without
    appended lines (a run directory of an older ccl) makes the copy refuse."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.sampled_from(["a", "b,c", 'q"', "", "é", "x\ny", None])
    row = st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 1), st.sampled_from("iud"),
                    text, st.sampled_from([0.5, 1e20, -0.0, float("nan"), None]),
                    st.integers(-5, 5) | st.none())
    kill = st.sampled_from(["none", "after", "cut lines", "cut index"])

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.tuples(st.lists(row, max_size=6), kill), max_size=5),
           st.sampled_from(["stream", "delta stream"]), st.integers(-1, 5), st.booleans())
    def check(batches, kind, upto, unappended):
        element = _element(kind)
        root = tempfile.mkdtemp()
        try:
            dirs = RunDirs(root)
            folder = dirs.of(appended.APPENDED, element.name)
            appended._cache.clear()
            for b, (rows, how) in enumerate(batches):
                placed = {(r[0], r[1], r[2]): r[3:] for r in rows}  # a row's place is its own
                rows = [(*place, *rest) for place, rest in placed.items()]
                if not rows:
                    continue  # a batch without rows writes no changelog file
                table = _changelog(dirs, element, b, rows)
                if unappended and b == 0:
                    continue
                appended.append_batch(dirs, element, b, table if b % 2 else None)
                if how == "none":
                    continue
                appended._cache.clear()  # killed: the batch runs again in a new process
                if how == "cut lines":
                    with open(os.path.join(folder, appended.ROWS), "a") as f:
                        f.write("half a li")
                elif how == "cut index":
                    with open(os.path.join(folder, appended.INDEX), "a") as f:
                        f.write(f"{b} 12")
                appended.append_batch(dirs, element, b, table)
            last = None if upto < 0 else upto
            files = outputs._batch_paths(dirs.of("changelog", element.name), "batch-*.parquet", last)
            got, want = os.path.join(root, "got.csv"), os.path.join(root, "want.csv")
            copied = appended.copy_appended(dirs, element, got, files, last)
            if unappended and any(b == 0 for b, _ in files):
                assert not copied and not os.path.exists(got)
                return
            assert copied
            _reference(dirs, element, want, last)
            with open(got, "rb") as f, open(want, "rb") as g:
                assert f.read() == g.read()
        finally:
            shutil.rmtree(root)

    check()


def test_only_output_streams_append():
    assert appended.appends(_element("stream")) and appended.appends(_element("delta stream"))
    window = element_from_json({"name": "w", "kind": "window", "role": "output", "key": ["t"],
                                "columns": [["t", "string"]]})
    local = element_from_json({"name": "l", "kind": "stream", "role": "local",
                               "columns": [["t", "string"]]})
    assert not appended.appends(window) and not appended.appends(local)
