"""Which elements run natively (ccl/physical.py): the rule ccl explain prints and the runtime uses."""
import pytest

from ccl.physical import NATIVE, PER_INSTANCE, native_aggregation, path_of
from ccl.planner import plan_project

SRC = "create input stream s schema (sym string, venue string, px float, q integer);\n"
WIN = "create input window w schema (sym string, px float) primary key (sym);\n"


def _element(tmp_path, body, name="a"):
    path = tmp_path / "p.ccl"
    path.write_text(SRC + WIN + body)
    plan, diags = plan_project(str(path))
    assert plan is not None, [str(d) for d in diags]
    return next(e for e in plan["elements"] if e["name"] == name), plan


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
    assert spec["groups"] == [("sym", "sym"), ("venue", "venue")]
    assert spec["aggregates"] == [("n", "count", None), ("m", "avg", "px"), ("top", "max", "q")]


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


def test_input_elements(tmp_path):
    e, plan = _element(tmp_path, "create output stream a as select * from s;", name="s")
    assert path_of(e, plan)[0] == NATIVE
    w, _ = _element(tmp_path, "create output stream a as select * from s;", name="w")
    assert path_of(w)[0] == PER_INSTANCE
