"""Native input streams read through Spark's file source (runtime/inputs/file_input.py) give what the
ccl_csv source gives: the same rows, sequence numbers, bad records and counters."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ccl.plan.model import Column, Element
from runner_e2e import run_project
from runtime.inputs.csv_text import read_file
from runtime.inputs.file_input import batch_rows, file_numbers
from runtime.inputs.formats import CsvFormat
from runtime.inputs.listing import Arrivals, FileSpec

COLUMNS = [["k", "string"], ["v", "integer"]]

# one consumer (the aggregation reads the input's batch in its own pass) or two (the batch is
# cached and read by both); the ROUNDROBIN stream places rows by sequence number
PROJECTS = {
    "one reader": """
    create input stream s schema (k string, v integer);
    create output window w primary key deduced keep all
      as select s.k, sum(s.v) t, count(*) n from s group by s.k;
    """,
    "two readers": """
    create input stream s schema (k string, v integer);
    create output stream o partition by s roundrobin partitions 3
      as select s.k, s.v from s where s.v > 0;
    create output window w primary key deduced keep all
      as select s.k, sum(s.v) t, count(*) n from s group by s.k;
    """,
}


def _element(name: str, columns: list) -> Element:
    """An input stream ``name`` of ``columns`` (``[name, ccl_type]`` pairs) as the plan has it."""
    return Element(name, "stream", "input", None, None, tuple(Column(c, t) for c, t in columns), ())


def _files(d) -> None:
    d.mkdir(parents=True)
    (d / "a.csv").write_text("k,v\nx,1\ny,oops\n\nz,3,4\n" + "".join(f"r{i % 7},{i}\n" for i in range(40)))
    (d / "b c%41.csv").write_text('ESP_OPS,k,v\ni,"q\nq",5\nd,x,1\nu,x,2\n')
    # never input: hidden, being written, in a subdirectory
    (d / ".hidden.csv").write_text("k,v\nh,100\n")
    (d / "_meta.csv").write_text("k,v\nh,100\n")
    (d / "c.csv.tmp").write_text("k,v\nh,100\n")
    (d / "sub").mkdir()
    (d / "sub" / "s.csv").write_text("k,v\nh,100\n")
    # named like a partition directory: Spark's partition discovery failed the query on it
    (d / "day=1").mkdir()
    (d / "day=1" / "s.csv").write_text("k,v\nh,100\n")


def _summary(out, elements) -> dict:
    return {"rows": {e: out.rows(e) for e in elements if e != "s"},
            "bad": sorted(json.dumps(b, sort_keys=True) for b in out.bad_records()),
            "stats": {e: {k: out.stats(e)[k] for k in ("rows_in", "rows_out_by_opcode",
                                                       "bad_records", "instances")}
                      for e in elements}}


@pytest.mark.parametrize("shape", sorted(PROJECTS))
def test_file_source_gives_what_the_ccl_csv_source_gives(spark, tmp_path, shape):
    text = PROJECTS[shape]
    data = tmp_path / "in"
    _files(data)
    old = tmp_path / "old"
    (old / "run").mkdir(parents=True)
    runs, groups = {}, {}
    for second in (False, True):
        if second:  # a new file: numbered after the first two, in both runs
            (data / "d.csv").write_text("v,k\n7,x\n8,zz\n")
        new = run_project(spark, tmp_path / "new", text, {"s": str(data)})
        if not second:
            # a run directory whose input was not read through the file source (run.json):
            # its input keeps the ccl_csv source
            run = json.loads((tmp_path / "new" / "run" / "run.json").read_text())
            (old / "run" / "run.json").write_text(json.dumps({**run, "file_source": []}))
            (old / "run" / "plan.json").write_text(json.dumps(new.plan))
        runs[second] = (new, run_project(spark, old, text, {"s": str(data)}))
        groups[second] = len(new.rows("w"))  # the output files of the run just made
        elements = [e["name"] for e in new.plan["elements"]]
        assert _summary(runs[second][0], elements) == _summary(runs[second][1], elements)
    saved = json.loads((tmp_path / "new" / "run" / "run.json").read_text())
    assert saved["file_source"] == ["s"]
    first, later = runs[False][0], runs[True][0]
    assert first.stats("s")["rows_in"] == 1 + 2 + 40 + 3  # the unreadable lines are rows in too
    assert later.stats("s")["rows_in"] == first.stats("s")["rows_in"] + 2
    reasons = sorted(b["reason"] for b in later.bad_records())
    assert reasons == ["column v: 'oops' is not an integer", "expected 2 fields, got 3"]
    w = {r["k"]: (int(r["t"]), int(r["n"])) for r in later.rows("w")}
    assert "h" not in w and w["q\nq"] == (5, 1) and w["zz"] == (8, 1)
    assert w["x"] == (1 + 2 + 7, 3)  # the delete is dropped by the stream, the update inserted
    # one change per group and batch: all new in the first batch; of d.csv's, x was there
    assert first.stats("w")["rows_out_by_opcode"] == {"i": groups[False]}
    assert groups[True] == len(w) == groups[False] + 1  # zz
    assert later.stats("w")["rows_out_by_opcode"] == {"i": len(w), "u": 1}


def test_batch_rows_numbers_files_and_slices_them_as_the_ccl_csv_source(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    lines = "".join(f"k{i},{i}\n" for i in range(300))
    (d / "big.csv").write_text("k,v\n" + lines)
    (d / "small.csv").write_text("k,v\nx,1\n")
    element = _element("s", COLUMNS)
    spec, fmt = FileSpec(str(d), None, "*"), CsvFormat.from_options({}, "s")
    arrivals = Arrivals(str(tmp_path / "arrivals"))

    def rows(names, slice_bytes):
        numbers = file_numbers(arrivals, [("s", spec, ["file:" + str(d / n) for n in names])])["s"]
        df = batch_rows(spark, element, spec, fmt, numbers, slice_bytes=slice_bytes)
        return sorted(tuple(r) for r in df.collect()), df.rdd.getNumPartitions()

    got, parts = rows(["small.csv"], 64)
    assert got == sorted(read_file(str(d / "small.csv"), COLUMNS, fmt, 0)) and parts == 1
    # the second batch's file is numbered 1; cut in slices of about 64 bytes, one task each
    got, parts = rows(["big.csv", "small.csv"], 64)
    assert got == sorted([*read_file(str(d / "big.csv"), COLUMNS, fmt, 1),
                          *read_file(str(d / "small.csv"), COLUMNS, fmt, 0)])
    assert parts > 10
    assert open(arrivals.manifest.path).read() == "s/small.csv\ns/big.csv\n"


def test_a_missing_directory_is_made_and_one_that_cannot_be_is_a_clear_error(spark, tmp_path):
    from runtime.run_setup import RunError
    adapter = "attach input adapter a type toolkit_file_csv_input to s properties dir = '{}';\n"
    text = PROJECTS["one reader"] + adapter.format("later/in")
    out = run_project(spark, tmp_path / "a", text, {})
    assert out.stats("s")["rows_in"] == 0 and (tmp_path / "a" / "later" / "in").is_dir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "plain").write_text("not a directory")
    text = PROJECTS["one reader"] + adapter.format("plain/in")
    with pytest.raises(RunError, match="input of 's'"):
        run_project(spark, tmp_path / "b", text, {})


def test_a_query_spark_refuses_to_start_is_a_run_error_naming_the_element(monkeypatch):
    from pyspark.errors import AnalysisException

    from runtime import run
    from runtime.run_setup import RunError

    def refuse(*args):
        raise AnalysisException(message="[PATH_NOT_FOUND] no such path\n\tat org.apache.x")
    monkeypatch.setattr(run, "_start_query", refuse)
    with pytest.raises(RunError, match=r"^element 's' could not start: \[PATH_NOT_FOUND\] no such path$"):
        run._start(None, None, SimpleNamespace(name="s"), None, None, None)


@pytest.mark.parametrize("directory", ["in [x]{y}*", "h#sh?q=1 %41", "back\\slash"])
def test_directory_names_are_not_globs_or_urls(spark, tmp_path, directory):
    """Spark's file source reads its path as a glob and lists URLs: neither may lose a file."""
    data = tmp_path / directory
    data.mkdir()
    (data / "a [1]?.csv").write_text("k,v\na,1\nb,2\n")
    out = run_project(spark, tmp_path / "p", PROJECTS["one reader"], {"s": str(data)})
    assert {r["k"]: r["t"] for r in out.rows("w")} == {"a": "1", "b": "2"}


def test_xml_list_files_through_the_file_source(spark, tmp_path):
    """An xmllist adapter's files are read whole (no slices) by the same reader."""
    text = """
    create input stream S schema (k string, v integer);
    create output window w primary key deduced keep all
      as select S.k, sum(S.v) t, count(*) n from S group by S.k;
    attach input adapter a type toolkit_file_xmllist_input to S properties dir = 'xml';
    """
    (tmp_path / "new" / "xml").mkdir(parents=True)
    (tmp_path / "new" / "xml" / "s.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<S ESP_OPS="i" k="a" v="1"/>\n'
        '<S k="b" v="2"/>\n<S k="a" v="x"/>\n<S ESP_OPS="i" k="a" v="4"/>\n')
    out = run_project(spark, tmp_path / "new", text, {})
    assert json.loads((tmp_path / "new" / "run" / "run.json").read_text())["file_source"] == ["S"]
    assert {r["k"]: (r["t"], r["n"]) for r in out.rows("w")} == {"a": ("5", "2"), "b": ("2", "1")}
    assert [b["reason"] for b in out.bad_records()] == ["column v: 'x' is not an integer"]
    assert out.stats("S")["rows_in"] == 4


def test_a_named_file_is_read_whatever_its_name_and_wherever_under_dir(spark, tmp_path):
    """Spark's file source never lists ``_x``/``.x`` names (Hadoop's hidden files), so an input
    stream whose adapter named such a file read nothing; a file in a subdirectory of ``dir``
    (``file = 'sub/in.csv'``) was never taken either. ESP reads the file it is told to."""
    text = """
    create input stream s schema (k string, v integer);
    create input stream t schema (k string, v integer);
    create output window w primary key deduced keep all
      as select s.k, sum(s.v) t, count(*) n from s group by s.k;
    create output window x primary key deduced keep all
      as select t.k, sum(t.v) t, count(*) n from t group by t.k;
    attach input adapter a type toolkit_file_csv_input to s properties dir = 'in', file = '_under.csv';
    attach input adapter b type toolkit_file_csv_input to t properties dir = 'in', file = 'sub/in.csv';
    """
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "_under.csv").write_text("k,v\na,1\na,2\n")
    (tmp_path / "in" / "sub" / "in.csv").write_text("k,v\nb,5\n")
    out = run_project(spark, tmp_path, text, {})
    assert {r["k"]: (r["t"], r["n"]) for r in out.rows("w")} == {"a": ("3", "2")}
    assert {r["k"]: (r["t"], r["n"]) for r in out.rows("x")} == {"b": ("5", "1")}
    assert json.loads((tmp_path / "run" / "run.json").read_text())["file_source"] == ["t"]


def test_files_are_numbered_in_the_order_they_arrived_across_inputs(tmp_path):
    """Arrivals numbers the files of several inputs by modification time, in name order within an
    input (a file named after a newer one counts as no older), and gives a replayed batch the
    numbers it had; the numbers survive a new Arrivals over the same directory."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for directory, name, second in [(a, "2.csv", 1), (a, "1.csv", 3), (b, "x.csv", 2), (b, "y.csv", 5)]:
        (directory / name).write_text("id\n1\n")
        os.utime(directory / name, ns=(second * 10**9, second * 10**9))
    arrivals = Arrivals(str(tmp_path / "arrivals"))
    first = arrivals.numbers([("A", str(a), ["1.csv", "2.csv"]), ("B", str(b), ["x.csv"])])
    # a/1.csv (3 s) comes before a/2.csv (1 s) by name: 2.csv counts as 3 s too, after b/x (2 s)
    assert first == {"A": {"1.csv": 1, "2.csv": 2}, "B": {"x.csv": 0}}
    assert arrivals.numbers([("A", str(a), ["1.csv", "2.csv"]), ("B", str(b), ["x.csv"])]) == first
    again = Arrivals(str(tmp_path / "arrivals"))
    assert again.numbers([("B", str(b), ["x.csv", "y.csv"])]) == {"B": {"x.csv": 0, "y.csv": 3}}
    assert arrivals.numbers([("B", str(b), ["y.csv"])]) == {"B": {"y.csv": 3}}


def _listed(spark, tmp_path, spec: FileSpec, name: str) -> list[str]:
    """The local paths Spark's file source (:func:`file_stream`) lists for ``spec`` in one
    query run until idle."""
    import shutil

    from runtime.inputs.file_input import file_stream, local_path

    seen: list[str] = []
    checkpoint = tmp_path / f"ck-{name}"
    shutil.rmtree(checkpoint, ignore_errors=True)
    query = (file_stream(spark, spec).writeStream
             .foreachBatch(lambda df, _: seen.extend(r[0] for r in df.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return sorted(local_path(p) for p in seen)


_NAMES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
                 min_size=1, max_size=12).filter(lambda n: n not in (".", "..")
                                                 and not n.startswith((".", "_")))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_NAMES, others=st.lists(_NAMES, max_size=3))
@example(name="0", others=[":"])  # (the glob failed the query on a name beside it)
def test_one_named_file_is_listed_alone(spark, tmp_path, name, others):
    """An input bound to one file lists that file only (runtime.inputs.file_input.listed_path):
    what the reference, its directory listed and filtered by read_paths, reads; nothing of the
    rest of the directory (before, every file under it was listed at every poll, a checkpoint
    beside the file included, and the files a batch wrote there ran another batch)."""
    from runtime.inputs.file_input import read_paths

    import pathlib
    import tempfile

    d = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))
    (d / "sub").mkdir()
    for n in {name, *others}:
        (d / n).write_text("k,v\n")
    (d / "sub" / name).write_text("k,v\n")
    spec = FileSpec(str(d), name, None)
    listed = _listed(spark, tmp_path, spec, d.name)
    reference = read_paths(spec, ["file:" + str(p) for p in d.rglob("*") if p.is_file()])
    assert read_paths(spec, listed) == sorted(reference) == [str(d / name)]
    if any(c.isascii() and c.isalnum() for c in name) and ":" not in "".join([name, *others]):
        # (else its directory: Hadoop's glob fails on a name with a colon beside the file)
        assert listed == [str(d / name)]


def test_a_named_file_that_comes_later_is_listed_then(spark, tmp_path):
    """The glob of one file matches nothing while the file is not there: the query starts (Spark
    refuses a missing path that is no glob) and lists the file once it is."""
    d = tmp_path / "in"
    d.mkdir()
    spec = FileSpec(str(d), "ref.csv", None)
    assert _listed(spark, tmp_path, spec, "later") == []
    (d / "ref.csv").write_text("k,v\n")
    (d / "other.csv").write_text("k,v\n")
    assert _listed(spark, tmp_path, spec, "later") == [str(d / "ref.csv")]
