"""Which elements run natively (ccl/plan/physical.py): the rule ccl explain prints and the runtime uses."""
import pytest

from ccl.plan.physical import (NATIVE, PER_INSTANCE, input_adapter, native_aggregation, native_filter, path_of,
                          unread_adapters)
from ccl.plan.planner import plan_project

SRC = "create input stream s schema (sym string, venue string, px float, q integer);\n"
WIN = "create input window w schema (sym string, px float) primary key (sym);\n"


def _element(tmp_path, body, name="a"):
    path = tmp_path / "p.ccl"
    path.write_text(SRC + WIN + body)
    plan, diags = plan_project(str(path))
    assert plan is not None, [str(d) for d in diags]
    return plan.element(name), plan


@pytest.mark.parametrize("partition", ["", "partition by s hash(sym) partitions 4",
                                       "partition by s hash(sym, venue) partitions 4",
                                       # groups span instances: grouped by (instance, group)
                                       "partition by s roundrobin partitions 2",
                                       "partition by s hash(q) partitions 3",
                                       "partition by s { return s.q % 2; } partitions 2"])
def test_stream_aggregations_are_native_under_any_partitioning(tmp_path, partition):
    e, plan = _element(tmp_path, f"""create output window a primary key deduced keep all {partition}
      as select s.sym, s.venue, count(*) n, avg(s.px) m, max(s.q) top from s group by s.sym, s.venue;""")
    assert path_of(e, plan)[0] == NATIVE
    spec = native_aggregation(e, plan)
    assert spec.groups == (("sym", "sym"), ("venue", "venue"))
    assert spec.aggregates == (("n", "count", None), ("m", "avg", "px"), ("top", "max", "q"))


@pytest.mark.parametrize("body", [
    # retention other than KEEP ALL, a window source (retractions), WHERE, an expression
    "create output window a primary key deduced keep 3 rows as select s.sym, count(*) n from s group by s.sym;",
    "create output window a primary key deduced as select w.sym, max(w.px) m from w group by w.sym;",
    "create output window a primary key deduced keep all as select s.sym, count(*) n from s "
    "where s.q > 1 group by s.sym;",
    "create output window a primary key deduced keep all as select s.sym, max(s.px * 2) m from s "
    "group by s.sym;",
    "create output window a primary key deduced keep all as select s.sym, count(distinct s.venue) n "
    "from s group by s.sym;",
])
def test_other_aggregations_run_per_instance(tmp_path, body):
    e, plan = _element(tmp_path, body)
    assert native_aggregation(e, plan) is None and path_of(e, plan)[0] == PER_INSTANCE


AGG = "create window a primary key deduced keep all as select s.sym, max(s.px) m from s group by s.sym;\n"


@pytest.mark.parametrize("body, why", [
    ("attach output adapter o type toolkit_file_csv_output to a properties dir = 'out';",
     "an output adapter writes its changes"),
    ("create output stream b as select a.sym from a;", "stream 'b' reads its changes"),
    ("create output delta stream b primary key deduced as select a.sym from a;", "delta stream 'b'"),
    ("create flex f in a out output stream b schema (sym string) begin on a { output setOpcode(a, insert); }; end;",
     "Flex 'b' reads its changes"),
    ("create output window b primary key deduced keep 2 rows as select a.sym from a;", "order of its changes"),
    ("create output window b primary key deduced as select a.sym, last(a.m) m from a group by a.sym;",
     "order of its changes"),
    # transitively: a window that only projects, read by a stream
    ("create window b primary key deduced as select a.sym, a.m from a;\n"
     "create output stream c as select b.sym from b;", "window 'b' reads it, and stream 'c'"),
])
def test_aggregations_whose_changes_are_observed_run_per_instance(tmp_path, body, why):
    """Spark's group-by emits one change per group per batch, ESP one per input row: wherever the
    changes themselves (not only the window's contents) reach a result, the engine runs it."""
    e, plan = _element(tmp_path, AGG + body)
    assert native_aggregation(e, plan) is None
    path, reason = path_of(e, plan)
    assert path == PER_INSTANCE and why in reason, reason


@pytest.mark.parametrize("body", [
    "create output window b primary key deduced as select a.sym, a.m * 2 m from a where a.m > 1;",
    "create output window b primary key deduced as select a.sym, count(*) n, max(a.m) m, avg(a.m) v from a group by a.sym;",
    "create output window b primary key deduced as select a.sym, w.px from a join w on a.sym = w.sym;",
])
def test_aggregations_read_only_for_their_contents_stay_native(tmp_path, body):
    e, plan = _element(tmp_path, AGG + body)
    assert path_of(e, plan)[0] == NATIVE and native_aggregation(e, plan) is not None


def test_input_elements(tmp_path):
    e, plan = _element(tmp_path, "create output stream a as select * from s;", name="s")
    assert path_of(e, plan)[0] == NATIVE
    w, _ = _element(tmp_path, "create output stream a as select * from s;", name="w")
    assert path_of(w)[0] == PER_INSTANCE


@pytest.mark.parametrize("body", [
    "create output stream a as select s.sym, s.px price from s;",
    "create output stream a partition by s roundrobin partitions 2 as select s.q from s "
    "where s.px > 1 and (s.sym = 'A' or not (s.q <> 3)) or s.px <> s.px;",
])
def test_filters_and_projections_of_a_stream_are_native(tmp_path, body):
    e, plan = _element(tmp_path, body)
    assert path_of(e, plan)[0] == NATIVE and native_filter(e, plan).source == "s"


@pytest.mark.parametrize("body", [
    "create output stream a as select s.sym, s.px * 2 px from s;",           # an expression
    "create output stream a schema (sym string, px long) as select s.sym, s.q px from s;",  # a cast
    "create output stream a as select s.sym from s where s.sym like 'A%';",  # LIKE
    "create output stream a as select s.sym from s where s.q;",              # number as condition
    "create output stream a as select s.sym from s where s.px + 1 > 2;",     # arithmetic
    "create output stream a as select w.sym from w;",                        # a window source
    "create output window a primary key (sym) keep 2 rows as select s.sym from s;",
])
def test_other_stateless_elements_run_per_instance(tmp_path, body):
    e, plan = _element(tmp_path, body)
    assert native_filter(e, plan) is None and path_of(e, plan)[0] == PER_INSTANCE


def test_only_delimited_file_adapters_are_read(tmp_path):
    """An element gets rows from its toolkit_file_csv_input / dsv_in / xmllist adapter; a Kafka or
    JSON adapter is listed as unread unless --input binds the element (it used to be read as CSV
    from its dir, by default every file of the project's directory)."""
    _, plan = _element(tmp_path, """
    attach input adapter x type toolkit_json_input to s properties dir = 'd', file = 'f.json';
    attach input adapter k type kafka_in to w properties kafkaTopicPartition = 't';
    attach input adapter c type DSV_IN to w properties dir = 'd', file = 'w.csv';
    """, "s")
    assert input_adapter(plan, "s") is None
    assert input_adapter(plan, "w").name == "c"
    assert [a.name for a in unread_adapters(plan, [])] == ["x"]
    assert unread_adapters(plan, ["s"]) == []


COLUMNAR = "create output window a primary key deduced keep all as select {items} from s {rest};"
ROWS_READER = "create output stream o as select a.sym from a;"


@pytest.mark.parametrize("items, rest, reader, mode", [
    # nothing reads the changes one by one: a batch at a time, any expression and HAVING
    ("s.sym, max(s.px) m", "where s.q > 1 group by s.sym", "", "batch"),
    ("upper(s.sym) sym, max(s.px) - min(s.px) r", "group by upper(s.sym) having count(*) > 1", "", "batch"),
    # a stream reads them: per row, for aggregates and plain columns without HAVING
    ("s.sym, max(s.px) m, s.q, median(s.px) md", "group filter s.q > 0 group by s.sym", ROWS_READER, "rows"),
    ("s.sym, max(s.px) + 1 m", "group by s.sym", ROWS_READER, None),
    ("s.sym, count(*) n", "group by s.sym having count(*) > 1", ROWS_READER, None),
    # under a time KEEP every event gives its change: per row, read or not, any items and HAVING
    ("s.sym, max(s.px) m, count(*) n", "keep 8 hours group by s.sym", "", "rows"),
    ("s.sym, max(s.px) m", "keep 8 hours group by s.sym", ROWS_READER, "rows"),
    ("upper(s.sym) sym, max(s.px) - min(s.px) r", "keep 2 seconds group by upper(s.sym) "
     "having count(*) > 1", "", "rows"),
    # functions whose value is not their arguments', a key that is no GROUP BY expression
    ("s.sym, max(s.px) m, now() t", "group by s.sym", "", None),
    ("s.sym, count(*) n", "where getrowid(s) > 0 group by s.sym", "", None),
])
def test_columnar_aggregations(tmp_path, items, rest, reader, mode):
    from ccl.plan.physical import columnar_aggregation
    e, plan = _element(tmp_path, COLUMNAR.format(items=items, rest=rest) + "\n" + reader)
    assert columnar_aggregation(e, plan) == mode
    assert path_of(e, plan)[0] == PER_INSTANCE


WINDOW_COLUMNAR = "create output window a primary key deduced as select {items} from {src} {rest};"
DELTA = "create input delta stream d schema (id integer, sym string, px float) primary key (id);\n"
REF = ("create reference r schema (sym string, px float) primary key (sym) "
       "properties service = 'hana', source = 't';\n")


@pytest.mark.parametrize("src, items, rest, reader, mode, spread", [
    # a window source (updates and deletes retract): the window kernel, a batch at a time; its
    # groups spread over buckets by its key columns only
    ("w", "w.sym, max(w.px) m, count(*) n", "group by w.sym", "", "batch", ["sym"]),
    ("w", "upper(w.sym) u, avg(w.px) m", "group by upper(w.sym) having count(*) > 1", "", "batch", None),
    # ... and per row when its changes are read one by one
    ("w", "w.sym, min(w.px) m, w.px last", "where w.px > 0.0 group by w.sym", ROWS_READER,
     "rows", ["sym"]),
    ("w", "w.sym, max(w.px) + 1 m", "group by w.sym", ROWS_READER, None, None),
    # a delta stream source, grouped by a column that is not its key: one bucket per instance
    ("d", "d.sym, sum(d.px) s", "group by d.sym", "", "batch", None),
    # not a reference (its rows come from its table), nor a window with a FROM KEEP
    ("r", "r.sym, max(r.px) m", "group by r.sym", "", None, None),
    ("w", "w.sym, max(w.px) m", "keep 2 rows group by w.sym", "", None, None),
])
def test_columnar_aggregations_of_windows(tmp_path, src, items, rest, reader, mode, spread):
    from ccl.plan.physical import columnar_aggregation, group_columns
    e, plan = _element(tmp_path, DELTA + REF + WINDOW_COLUMNAR.format(items=items, src=src, rest=rest)
                       + "\n" + reader)
    assert columnar_aggregation(e, plan) == mode
    assert group_columns(e, plan) == spread
    assert path_of(e, plan)[0] == PER_INSTANCE


@pytest.mark.parametrize("body", [
    "create output window a primary key deduced keep 3 rows as select s.sym, count(*) n from s group by s.sym;",
    "create output window a primary key deduced keep 3 rows as select w.sym, max(w.px) m from w group by w.sym;",
    "create output window a primary key deduced keep all as select s.sym, count(*) n from s keep 2 rows "
    "group by s.sym;",
    "create output window a primary key deduced keep all declare integer c := 0; end "
    "as select s.sym, count(*) n from s group by s.sym;",
    # a key that is no GROUP BY expression: 'b' and 'B' would meet on one key
    "create output window a schema (u string, n integer) primary key (u) keep all "
    "as select upper(s.sym) u, count(*) n from s group by s.sym;",
])
def test_other_aggregations_are_not_columnar(tmp_path, body):
    from ccl.plan.physical import columnar_aggregation
    e, plan = _element(tmp_path, body)
    assert columnar_aggregation(e, plan) is None


WIN2 = "create input window v schema (venue string, country string) primary key (venue);\n"


@pytest.mark.parametrize("body", [
    "create output stream a partition by s hash(sym) partitions 4 as select s.sym, s.px, w.px wpx "
    "from s inner join w on s.sym = w.sym;",
    "create output stream a as select s.sym, w.px wpx from s left join w on w.sym = s.sym "
    "where s.q > 0 and upper(s.venue) = 'X';",
    # two windows, the second equated with a column of the first window and of the stream
    "create output stream a as select s.sym, v.country from s left join w on s.sym = w.sym "
    "inner join v on v.venue = s.venue and v.country = w.sym;",
])
def test_joins_of_a_stream_with_windows_take_the_join_kernel(tmp_path, body):
    from ccl.plan.physical import columnar_kernel, join_kernel
    e, plan = _element(tmp_path, WIN2 + body)
    assert join_kernel(e, plan) and columnar_kernel(e, plan) == "join"
    assert e.physical.kernel == "join" and path_of(e, plan)[0] == PER_INSTANCE


@pytest.mark.parametrize("body", [
    # ON with more than equalities, a right join, the window first
    "create output stream a as select s.sym from s inner join w on s.sym = w.sym and s.px > w.px;",
    "create output stream a as select s.sym from s right join w on s.sym = w.sym;",
    "create output stream a as select s.sym from w inner join s on s.sym = w.sym;",
    # a window (not a stream) over the join, a FROM KEEP
    "create output window a primary key (sym) as select s.sym, w.px from s inner join w on s.sym = w.sym;",
    "create output stream a as select s.sym from s keep 2 rows inner join w on s.sym = w.sym;",
    # an aggregate, a function whose value is not its arguments'
    "create output stream a as select s.sym, w.px, getrowid(s) r from s inner join w on s.sym = w.sym;",
])
def test_other_shapes_do_not_take_the_join_kernel(tmp_path, body):
    from ccl.plan.physical import join_kernel
    e, plan = _element(tmp_path, WIN2 + body)
    assert not join_kernel(e, plan) and e.physical.kernel is None


def test_one_stream_without_a_join_takes_the_select_kernel(tmp_path):
    """A filter or projection of one stream that the native stream path does not take runs on
    the join kernel with no window (``select``); not a window's rows, a FROM KEEP, an impure
    function, an aggregate."""
    from ccl.plan.physical import join_kernel, select_kernel
    e, plan = _element(tmp_path, WIN2 + "create output stream a as select s.sym, s.px * 2 p2 "
                       "from s where s.q > 1 and upper(s.venue) = 'X';")
    assert select_kernel(e, plan) and not join_kernel(e, plan) and e.physical.kernel == "select"
    for body in ["create output stream a as select w.sym, w.px * 2 p from w;",
                 "create output stream a as select s.sym, s.px * 2 p from s keep 2 rows;",
                 "create output stream a as select s.sym, getrowid(s) r from s;",
                 "create output window a primary key deduced as select s.sym, count(*) c from s "
                 "group by s.sym;"]:
        e, plan = _element(tmp_path, WIN2 + body)
        assert not select_kernel(e, plan) and e.physical.kernel != "select", body
@pytest.mark.parametrize("body", [
    "create output window a primary key (sym, q) keep 20 rows per (sym) as select * from s;",
    "create output window a primary key (q) keep 3 rows as select s.q, s.sym from s where s.px > 1.0;",
    "create output window a primary key (q) keep 3 rows slack 2 as select s.q, upper(s.sym) u from s;",
    "create output window a primary key (q) keep last per (sym) as select * from s;",
    "create output window a primary key (q) keep every 5 rows as select s.q, s.px * 2 p from s;",
    "create output window a primary key (q) keep 2 rows partition by s hash(sym) partitions 2 "
    "as select s.q, s.px from s where s.q % a_partitions = 0;",
    "create output window a primary key (q) keep 4 rows partition by s hash(sym) partitions 4 "
    "as select * from s;",
    # a sliding time KEEP (the engine's expiry, then the rows: runtime/engine/kernels/keep.py)
    "create output window a primary key (q) keep 10 seconds as select * from s;",
])
def test_keep_windows_over_a_stream_run_in_the_keep_kernel(tmp_path, body):
    from ccl.plan.physical import columnar_kernel, keep_kernel
    e, plan = _element(tmp_path, body)
    assert keep_kernel(e, plan) and columnar_kernel(e, plan) == "keep"
    assert e.physical.kernel == "keep" and e.physical.path == PER_INSTANCE


@pytest.mark.parametrize("body", [
    # no row-count KEEP
    "create output window a primary key (q) as select * from s;",
    "create output window a primary key (q) keep all as select * from s;",
    # a window source, a FROM KEEP, a join, an aggregation
    "create output window a primary key (sym) keep 3 rows as select * from w;",
    "create output window a primary key (q) keep 3 rows as select * from s keep 2 rows;",
    "create output window a primary key (q) keep 3 rows as select s.q, w.px from s join w "
    "on s.sym = w.sym;",
    "create output window a primary key deduced keep 3 rows as select s.sym, count(*) n from s "
    "group by s.sym;",
    # AGES, DECLARE, functions whose value is not their arguments'
    "create output window a schema (q integer, age integer) primary key (q) keep 3 rows "
    "ages every 1 second set age as select s.q, 0 age from s;",
    "create output window a primary key (q) keep 3 rows declare integer c := 0; end "
    "as select * from s;",
    "create output window a primary key (q) keep 3 rows as select s.q, now() t from s;",
    "create output window a primary key (q) keep 3 rows as select s.q, getrowid(s) r from s;",
    # a stream, not a window
    "create output stream a as select * from s;",
])
def test_other_elements_are_not_for_the_keep_kernel(tmp_path, body):
    from ccl.plan.physical import keep_kernel
    e, plan = _element(tmp_path, body)
    assert not keep_kernel(e, plan)
    # (a projection of a window is the window_select kernel's)
    assert e.physical.kernel == ("window_select" if body.endswith("from w;") else None)


@pytest.mark.parametrize("body", [
    "create output window a primary key deduced as select w.sym, w.px * 2.0 p2 from w "
    "where w.px > 1.0;",
    "create output window a primary key (sym) keep 3 rows as select * from w;",
    "create output window a schema (u string, px float) primary key (u) "
    "as select upper(w.sym) u, w.px px from w;",
    "create output delta stream a schema (sym string, px float) primary key (sym) "
    "as select w.sym, w.px from w where w.px > 0.0;",
    "create output stream a as select w.sym from w;",
    "create output stream a as select w.sym, w.px * 2 p from w where w.px > 1.0;",
])
def test_a_projection_of_a_window_takes_the_window_select_kernel(tmp_path, body):
    from ccl.plan.physical import window_select_kernel
    e, plan = _element(tmp_path, body)
    assert window_select_kernel(e, plan) and e.physical.kernel == "window_select"


@pytest.mark.parametrize("body", [
    "create output window a primary key (sym) keep 10 seconds as select * from w;",
    "create output window a primary key (sym) as select * from w keep 2 rows;",
    "create output window a primary key deduced as select w.sym, now() t from w;",
    "create output stream a as select w.sym from w keep 2 rows;",
    "create output window a primary key deduced as select w.sym, count(*) n from w group by w.sym;",
    "create output window a primary key (sym) declare integer c := 0; end as select * from w;",
    "create output window a primary key (sym) as select * from s;",
])
def test_other_elements_are_not_for_the_window_select_kernel(tmp_path, body):
    from ccl.plan.physical import window_select_kernel
    e, plan = _element(tmp_path, body)
    assert not window_select_kernel(e, plan) and e.physical.kernel != "window_select"


def test_elements_with_timers_and_their_readers_are_project_stages_decided_by_the_compiler(tmp_path):
    """The plan's ``project_stage`` includes an element with timers (the project's query wakes it)
    and its readers; the run takes the plan's stages as they are, leaving out only what depends
    on the run (a file limit per batch)."""
    from runtime.run_setup import RunOptions, project_members

    _, plan = _element(tmp_path, """create output window t primary key (sym) keep 1 minute
      as select w.sym, w.px from w;
    create output stream r as select t.sym, t.px * 2 px2 from t;""", name="t")
    physical = {e.name: e.physical for e in plan.elements}
    assert physical["t"].uses_time and not physical["t"].arrow
    stages = [e.name for e in plan.elements if e.physical.project_stage]
    assert stages == ["s", "w", "t", "r"]
    assert project_members(plan, RunOptions()) == stages
    assert project_members(plan, RunOptions(max_files_per_batch=2)) == []


def test_explain_prints_the_plans_decisions_as_the_plan_holds_them(tmp_path):
    """``ccl explain``'s ``decided:`` line is read from each element's ``physical`` record: change
    the record and the line changes (nothing is recomputed)."""
    import dataclasses

    from ccl.cli.explain import explain_physical
    from ccl.plan.planner import plan_project

    path = tmp_path / "p.ccl"
    path.write_text(SRC + """create output window a primary key deduced keep all
      as select s.sym, count(*) n from s group by s.sym;
    create output window k primary key (sym) keep 3 rows as select s.sym, s.px from s;""")
    typed, diags = plan_project(str(path))
    assert typed is not None, [str(d) for d in diags]
    text = explain_physical(typed)
    assert ("    decided: native input; a stage of the project's query; runs in its batches: a, k; "
            "changelog not written (nothing reads it)\n") in text
    assert ("    decided: native aggregation; columnar aggregation (batch mode, buckets by instance and "
            "(sym)); a stage of the project's query\n") in text
    k = next(e for e in typed.elements if e.name == "k")
    assert k.physical.arrow and k.physical.kernel == "keep"
    assert ("    decided: keep kernel; applyInArrow with state files; keyed state in the state store; "
            "a stage of the project's query\n") in text
    changed = dataclasses.replace(typed, elements=tuple(
        dataclasses.replace(e, physical=dataclasses.replace(e.physical, kernel=None, project_stage=False,
                                                            window_store=False))
        if e.name == "k" else e for e in typed.elements))
    assert "    decided: applyInArrow with state files; a query of its own\n" in explain_physical(changed)


@pytest.mark.parametrize("body, name, kernel, store", [
    # a stream aggregation the runtime runs per instance (its changes observed): the aggregation
    # kernel; over a window the window aggregation's
    (AGG + "create output stream b as select a.sym from a;", "a", "aggregation", True),
    ("create output window a primary key deduced as select w.sym, count(*) n from w group by w.sym;",
     "a", "window_aggregation", True),
    ("create output window a primary key (sym) keep 3 rows as select s.sym, s.px from s;", "a", "keep", True),
    # a time KEEP: timers (state in the store in the project's query), the keep kernel
    ("create output window a primary key (sym) keep 1 minute as select s.sym, s.px from s;", "a", "keep", True),
    # a Flex: its window iterators walk rows in insertion order, not in the store's key order
    ("create flex f in s out output stream a schema (sym string) begin on s { output setOpcode(s, insert); }; "
     "end;", "a", None, False),
    ("create output stream a as select s.sym from s where s.q > 1;", "a", None, False),   # native
])
def test_the_kernel_and_the_state_store_are_decided_by_the_compiler(tmp_path, body, name, kernel, store):
    """``kernel`` (aggregations included) and ``window_store`` are in the plan, so the runtime
    (runtime/engine/kernels, runtime/state/rows.py) builds what it names and chooses nothing."""
    from runtime.engine.kernels import AGGREGATIONS, KERNELS
    from dataclasses import replace

    from runtime.state.rows import uses_window_store

    from ccl.plan.model import KERNELS as NAMES
    assert sorted(NAMES) == sorted([*AGGREGATIONS, *KERNELS])  # a class for every name a plan may hold
    e, plan = _element(tmp_path, body, name)
    assert e.physical.kernel == kernel and e.physical.window_store is store
    assert (e.physical.columnar is not None) == (kernel in AGGREGATIONS)
    assert uses_window_store(e) is store
    flipped = replace(e, physical=replace(e.physical, window_store=not store))
    assert uses_window_store(flipped) is not store
