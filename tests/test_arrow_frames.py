"""runtime/arrow_frames.py builds a small batch's frames and processor input with Arrow and numpy:
on generated rows they equal what the Spark expressions of runtime/topology.py, frames.py and native_stages.py give, row for row."""
from __future__ import annotations

import math
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ccl.plan.codec import plan_from_json
from ccl.syntax import nodes
from runtime import arrow_frames
from runtime.frames import changelog_frame, frame_layout
from runtime.native_stages import native_frame, native_input
from runtime.processor import BATCH, INST, OP, PORT, RAW, SEQ, SRC, SUB, WHY
from runtime.topology import ports_of, processor_input
from runtime.inputs.csv_text import output_schema as source_schema
from runtime.run_dir import by_group
from tests.planned import plan_json

PROJECT = """
CREATE INPUT STREAM S SCHEMA (a integer, s string, f float, l long, b boolean);
CREATE INPUT WINDOW W SCHEMA (s string, v integer) PRIMARY KEY (s);
CREATE OUTPUT STREAM Hashed PARTITION BY S HASH(s, a, f, l, b) PARTITIONS 3
AS SELECT x.a a, x.s s, x.f f, x.l l, x.b b FROM S x;
CREATE OUTPUT STREAM Joined PARTITION BY S HASH(s) PARTITIONS 4
AS SELECT x.a a, x.s s, w.v v FROM S x INNER JOIN W w ON x.s = w.s;
CREATE OUTPUT STREAM Rotated PARTITION BY S ROUNDROBIN PARTITIONS 3
AS SELECT x.a a, x.s s FROM S x;
CREATE OUTPUT STREAM RotatedAgain PARTITION BY Joined ROUNDROBIN PARTITIONS 2
AS SELECT j.a a, j.v v FROM Joined j;
CREATE OUTPUT WINDOW Keyed PRIMARY KEY (s) PARTITION BY W ROUNDROBIN PARTITIONS 2
AS SELECT * FROM W;
CREATE OUTPUT WINDOW Totals PRIMARY KEY DEDUCED
AS SELECT x.s s, sum(x.a) v FROM S x GROUP BY x.s;
"""
BUCKETS = 4


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = os.path.join(str(tmp_path_factory.mktemp("p")), "p.ccl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(PROJECT)
    plan, diags = plan_json(path, native_operators=False)
    assert plan is not None, diags
    return plan


def _parsed(element: dict, rows: list[tuple], ops: list[str]) -> pa.Table:
    """Rows as the ``ccl_csv`` source gives them (sequence numbers 1.., no bad rows)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(source_schema(element["columns"]), timezone="UTC")
    columns = list(zip(*rows)) if rows else [[] for _ in element["columns"]]
    n = len(rows)
    return pa.Table.from_arrays([pa.array(range(1, n + 1), pa.int64()), pa.array(ops, pa.string()),
                                 pa.nulls(n, pa.string()), pa.nulls(n, pa.string())]
                                + [pa.array(list(c), f.type) for c, f in zip(columns, list(schema)[4:])],
                                schema=schema)


def _spark_frame(spark, table: pa.Table):
    return spark.createDataFrame(table)


def _sorted(table: pa.Table) -> list[dict]:
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def _same(got: pa.Table, want: pa.Table) -> None:
    assert got.num_rows == want.num_rows
    cols = [c for c in want.column_names if c in got.column_names]
    assert set(want.column_names) - set(got.column_names) <= {PORT, SUB, SRC, RAW,
                                                               WHY, OP}
    assert _sorted(got.select(cols)) == _sorted(want.select(cols))


floats = st.floats(allow_nan=False, width=64) | st.sampled_from([-0.0, 0.0, math.inf, -math.inf])
stream_rows = st.lists(st.tuples(st.none() | st.integers(-2**31, 2**31 - 1),
                                 st.none() | st.text(max_size=6),
                                 st.none() | floats,
                                 st.none() | st.integers(-2**63, 2**63 - 1),
                                 st.none() | st.booleans()), max_size=25)
window_rows = st.lists(st.tuples(st.text(max_size=4), st.none() | st.integers(-100, 100)),
                       max_size=12, unique_by=lambda r: r[0])


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(stream=stream_rows, window=window_rows)
@example(stream=[(1, "a", -0.0, 5, True), (1, "a", 0.0, 5, True), (None, None, None, None, None)],
         window=[("a", 1), ("", None)])
def test_processor_input_equals_sparks(spark, plan, stream, window):
    by_name = {e["name"]: e for e in plan["elements"]}
    s_rows = _parsed(by_name["S"], stream, ["i"] * len(stream))
    w_rows = _parsed(by_name["W"], window, ["u"] * len(window))
    arrow_in = {"S": arrow_frames.input_frame(s_rows), "W": arrow_frames.input_frame(w_rows)}
    spark_in = {k: frame_layout(_spark_frame(spark, v)) for k, v in (("S", s_rows), ("W", w_rows))}
    # a derived source: Joined's changelog rows, numbered with gaps and sub-numbers
    joined = [(r[0], r[1], 7) for r in stream]
    changelog = pa.table({BATCH: pa.array([0] * len(joined), pa.int64()),
                          INST: pa.array([i % 4 for i in range(len(joined))], pa.int32()),
                          SEQ: pa.array([3 * i for i in range(len(joined))], pa.int64()),
                          SUB: pa.array([i % 2 for i in range(len(joined))], pa.int64()),
                          OP: pa.array(["i"] * len(joined), pa.string()),
                          "a": pa.array([r[0] for r in joined], pa.int32()),
                          "s": pa.array([r[1] for r in joined], pa.string()),
                          "v": pa.array([r[2] for r in joined], pa.int32())})
    arrow_in["Joined"] = arrow_frames.changelog_frame(changelog, ["a", "s", "v"])
    spark_in["Joined"] = changelog_frame(_spark_frame(spark, changelog), ["a", "s", "v"])
    groups = by_group(plan_from_json(plan))
    assert groups.get("Totals")  # the case of buckets by group is covered
    typed = plan_from_json(plan)
    for name in ("Hashed", "Joined", "Rotated", "RotatedAgain", "Keyed", "Totals"):
        element = typed.element(name)
        sources = [src for _, src in ports_of(element)]
        got = arrow_frames.processor_input(typed, element, [arrow_in[s] for s in sources], BUCKETS,
                                           groups.get(name, ()))
        assert got is not None, name
        want = processor_input(typed, element, [spark_in[s] for s in sources], BUCKETS,
                                   groups.get(name, ())).toArrow()
        _same(got, want)


@given(ops=st.lists(st.sampled_from(["i", "u", "d", "p", "s"]), max_size=20))
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
def test_native_input_equals_sparks(spark, plan, ops):
    element = next(e for e in plan["elements"] if e["name"] == "S")
    rows = [(i, f"s{i}", i / 3, i, i % 2 == 0) for i in range(len(ops))]
    parsed = _parsed(element, rows, ops)
    typed = plan_from_json(plan).element("S")
    got = arrow_frames.native_input(typed, arrow_frames.input_frame(parsed))
    want = native_input(typed, frame_layout(_spark_frame(spark, parsed))).toArrow()
    assert got is not None
    assert [(f.name, f.type) for f in got.schema] == [(f.name, f.type) for f in want.schema]
    assert got.to_pylist() == want.to_pylist()


def test_a_bad_row_or_a_custom_function_is_left_to_spark(plan, tmp_path):
    element = next(e for e in plan["elements"] if e["name"] == "S")
    parsed = _parsed(element, [(1, "a", 1.0, 1, True)], ["x"])  # an unknown opcode
    assert arrow_frames.native_input(plan_from_json(plan).element("S"),
                                     arrow_frames.input_frame(parsed)) is None
    path = os.path.join(str(tmp_path), "c.ccl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("""CREATE INPUT STREAM S SCHEMA (a integer);
CREATE OUTPUT STREAM C PARTITION BY S { return S.a % 2; } PARTITIONS 2
AS SELECT x.a a FROM S x;""")
    custom, diags = plan_json(path, native_operators=False)
    assert custom is not None, diags
    by_name = {e["name"]: e for e in custom["elements"]}
    frame = arrow_frames.input_frame(_parsed(by_name["S"], [(1,)], ["i"]))
    typed = plan_from_json(custom)
    assert arrow_frames.processor_input(typed, typed.element("C"), [frame], BUCKETS) is None


FILTERS = """
CREATE INPUT STREAM S SCHEMA (a integer, s string, f float, l long, b boolean);
CREATE OUTPUT STREAM Some PARTITION BY S HASH(s) PARTITIONS 2
AS SELECT x.a a2, x.f f FROM S x WHERE x.a > 3 AND (x.f <= 1.5 OR NOT x.b);
CREATE OUTPUT STREAM Others AS SELECT x.s s, x.l l FROM S x WHERE x.s = 'a' OR x.l <> x.a OR x.f = 0;
"""


@given(stream=stream_rows, ops=st.lists(st.sampled_from(["i", "d", "u"]), min_size=25, max_size=25))
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@example(stream=[(4, "a", -0.0, 4, False), (5, None, None, 1, None), (9, "b", 1.5, None, True)],
         ops=["i"] * 25)
def test_native_stream_equals_sparks(spark, tmp_path_factory, stream, ops):
    path = os.path.join(str(tmp_path_factory.mktemp("f")), "f.ccl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(FILTERS)
    plan, diags = plan_json(path)
    assert plan is not None, diags
    by_name = {e["name"]: e for e in plan["elements"]}
    parsed = _parsed(by_name["S"], stream, ops[:len(stream)])
    typed = plan_from_json(plan)
    for name in ("Some", "Others"):
        element = typed.element(name)
        assert element.physical.native == "stream"
        got = arrow_frames.native_stream(element, typed.element("S"), arrow_frames.input_frame(parsed))
        assert got is not None, name
        want = native_frame(element, typed.element("S"), frame_layout(_spark_frame(spark, parsed))).toArrow()
        assert got.to_pylist() == want.to_pylist(), name


def test_a_nan_compared_is_left_to_spark(plan):
    path_rows = [(1, "a", float("nan"), 1, True)]
    by_name = {e["name"]: e for e in plan["elements"]}
    frame = arrow_frames.input_frame(_parsed(by_name["S"], path_rows, ["i"]))
    from runtime.lowering_arrow import condition_mask
    where = nodes.Binary(">", nodes.FieldAccess(nodes.Var(nodes.Ident("x")), nodes.Ident("f")),
                         nodes.Literal("float", 1.0))
    assert condition_mask(where, "x", {"f": "float"}, frame) is None
    assert condition_mask(where, "x", {"f": "float"},
                          arrow_frames.input_frame(_parsed(by_name["S"], [(1, "a", 2.0, 1, True)],
                                                           ["i"]))).to_pylist() == [True]
