"""The planner (ccl/plan/planner.py): every corpus project plans, and the plan says what docs/plan.md says."""
import glob
import json
import os
from pathlib import Path

import pytest

from ccl.plan.planner import PlanError
from planned import plan_json, typed_parts

ROOT = Path(__file__).parent
CORPUS = sorted(glob.glob(str(ROOT / "projects" / "seeds" / "*.ccl"))
                + glob.glob(str(ROOT / "projects" / "valid" / "*.ccl")))


def col(alias, name):
    return {"node": "FieldAccess", "base": {"node": "Var", "name": {"node": "Ident", "name": alias}},
            "field": {"node": "Ident", "name": name}}


def var(name):
    return {"node": "Var", "name": {"node": "Ident", "name": name}}


def plan_of(path, **kw):
    plan, diags = plan_json(str(path), **kw)
    assert plan is not None, [str(d.message) for d in diags]
    return plan


def plan_text(tmp_path, text, name="p.ccl", **kw):
    path = tmp_path / name
    path.write_text(text)
    return plan_of(path, **kw)


def element(plan, name):
    return next(e for e in plan["elements"] if e["name"] == name)


def select(plan, name, i=0):
    return element(plan, name)["query"]["selects"][i]


def walk(value):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v)


@pytest.mark.parametrize("path", CORPUS, ids=[os.path.basename(p) for p in CORPUS])
def test_corpus_plans_and_round_trips(path):
    plan, diags = plan_json(path)
    if plan is None:
        pytest.skip("the project has analysis errors")
    text = json.dumps(plan, sort_keys=True)
    assert json.loads(text) == plan
    again, _ = plan_json(path)
    assert json.dumps(again, sort_keys=True) == text  # deterministic
    for node in walk(plan):
        assert "line" not in node or "node" not in node  # expressions carry no positions
    names = set()
    for el in plan["elements"]:
        for sel in (el["query"] or {"selects": []})["selects"]:
            for src in sel["sources"]:
                assert src["element"] in names, f"{el['name']} reads {src['element']} before it exists"
        names.add(el["name"])


def test_hash_vwap_broadcast():
    plan = plan_of(ROOT / "projects/seeds/hash_vwap_broadcast.ccl")
    vwap = element(plan, "vwapW")
    assert vwap["key"] == ["isin"]  # deduced
    assert vwap["keep"] == {"kind": "time", "count": None, "millis": 60000, "per": [], "slack": None}
    assert vwap["partition"]["count"] == 2
    assert vwap["partition"]["specs"] == [{"input": "priceW", "as": "priceW", "method": "hash",
                                           "columns": ["isin"], "block": None}]
    assert vwap["partition"]["broadcast"] == ["volumeW"]
    sel = select(plan, "vwapW")
    assert sel["aggregates"] == [{"name": "__agg0", "fn": "vwap", "distinct": False,
                                  "args": [col("priceW", "price"), col("volumeW", "volume")]}]
    assert sel["items"] == [{"name": "isin", "expr": col("priceW", "isin")},
                            {"name": "vwap_val", "expr": var("__agg0")}]
    assert sel["joins"][0]["kind"] == "left"
    assert sel["group_by"] == [col("priceW", "isin")]
    assert vwap["stateful"] is True
    assert element(plan, "priceW")["role"] == "input"


def test_custom_partition_block_is_splash_json():
    plan = plan_of(ROOT / "projects/seeds/custom_vwap_two_inputs.ccl")
    part = element(plan, "vwapW")["partition"]
    assert [s["input"] for s in part["specs"]] == ["priceW", "volumeW"]
    assert all(s["method"] == "custom" and s["block"]["node"] == "Block" for s in part["specs"])
    assert part["broadcast"] == []
    assert part["partitions_var"] == "vwapW_partitions"
    assert element(plan, "vwapW")["columns"] == [["isin", "string"], ["vwap", "float"]]
    assert [i["name"] for i in select(plan, "vwapW")["items"]] == ["isin", "vwap"]  # schema names


def test_custom_maxprice_types_and_group_by():
    plan = plan_of(ROOT / "projects/seeds/custom_maxprice.ccl")
    el = element(plan, "maxPriceW")
    assert el["columns"] == [["isin", "string"], ["maxPrice", "money(2)"]]
    assert el["key"] == ["isin"]
    assert el["partition"]["count"] == 2
    assert select(plan, "maxPriceW")["aggregates"][0]["fn"] == "max"


def test_star_expansion_roundrobin():
    plan = plan_of(ROOT / "projects/seeds/roundrobin_tradewindow.ccl")
    sel = select(plan, "TradeOutWindow")
    assert sel["items"] == [{"name": c, "expr": col("TradeWindow", c)}
                            for c in ("Ts", "Symbol", "Price", "Volume")]
    assert element(plan, "TradeOutWindow")["partition"]["specs"][0]["method"] == "roundrobin"
    assert element(plan, "TradeWindow")["columns"][0] == ["Ts", "bigdatetime"]


def test_roundrobin_names_the_key_it_rotates(tmp_path):
    """ROUNDROBIN over a keyed input rotates its keys: the spec's columns are the input's key,
    whether BY names the input, its alias or nothing; over a stream without key, none."""
    plan = plan_text(tmp_path, """
    create input window w schema (k1 string, k2 integer, v integer) primary key (k1, k2);
    create input stream s schema (a string);
    create output window byname primary key deduced partition by w roundrobin partitions 2
      as select * from w where w.v > 0;
    create output window byalias primary key deduced partition by t roundrobin partitions 2
      as select t.k1, t.k2 from w t;
    create output window nameless primary key deduced partition roundrobin partitions 2
      as select t.k2, t.k1, t.v from w t;
    create output stream rows partition roundrobin partitions 2 as select s.a from s;
    """)
    columns = {e["name"]: e["partition"]["specs"][0]["columns"] for e in plan["elements"]
               if e.get("partition")}
    assert columns == {"byname": ["k1", "k2"], "byalias": ["k1", "k2"], "nameless": ["k1", "k2"],
                       "rows": []}


def test_flex_and_local_declare():
    plan = plan_of(ROOT / "projects/seeds/flex_keycache_example2.ccl")
    el = element(plan, "Top3Trades")
    assert el["query"] is None and el["stateful"] is True and el["kind"] == "window"
    assert el["flex"]["inputs"] == ["QTrades"]
    assert el["flex"]["handlers"][0]["event"] == "row"
    assert el["flex"]["handlers"][0]["source"] == "QTrades"
    assert el["flex"]["declare"][0]["node"] == "VarDecl"
    assert el["partition"]["specs"][0]["columns"] == ["Symbol"]
    cache = plan_of(ROOT / "projects/seeds/eventcache_example1.ccl")
    stream = element(cache, "maxPriceW")
    assert stream["declare"][0]["node"] == "VarDecl" and stream["stateful"] is True


def test_parameters_from_ccr_are_folded_and_passwords_dropped():
    plan = plan_of(ROOT / "ccr/weather.ccl")
    assert plan["parameters"]["stationPartitions"] == 16
    assert element(plan, "StationStats")["partition"]["count"] == 16
    assert element(plan, "RegionPressure")["partition"]["count"] == 4
    where = select(plan, "GaleWarnings")["where"]
    assert where["right"] == {"node": "Literal", "kind": "float", "value": 75.5}
    adapter = plan["adapters"][0]
    assert adapter["properties"]["dir"] == "/srv/met/synop"  # the property set overrides CCL
    assert adapter["properties"]["delimiter"] == ";"
    assert not any("password" in k.lower() for k in adapter["properties"])
    assert "s3cret" not in json.dumps(plan)
    plan = plan_of(ROOT / "ccr/weather.ccl", params={"stationPartitions": "3"})
    assert element(plan, "StationStats")["partition"]["count"] == 3


def test_union_unqualified_columns_and_keep_parameter(tmp_path):
    plan = plan_text(tmp_path, """
DECLARE PARAMETER integer n := 7; PARAMETER interval gap := 2000000; END;
CREATE INPUT STREAM a SCHEMA (x integer, y string);
CREATE INPUT STREAM b SCHEMA (x integer, y string);
CREATE INPUT WINDOW w SCHEMA (k string, v float) PRIMARY KEY (k) KEEP n ROWS;
CREATE OUTPUT STREAM u AS SELECT x, y FROM a WHERE x > n UNION SELECT b.x, b.y FROM b;
CREATE OUTPUT WINDOW g PRIMARY KEY DEDUCED AS
  SELECT s.y y, count(*) c, sum(s.x) t, count(*) + sum(s.x) ct FROM a s KEEP 10 SECONDS GROUP BY s.y
  HAVING count(*) > 1;
""")
    assert plan["parameters"] == {"n": 7, "gap": 2000}
    assert element(plan, "w")["keep"]["count"] == 7
    first, second = element(plan, "u")["query"]["selects"]
    assert first["items"] == [{"name": "x", "expr": col("a", "x")}, {"name": "y", "expr": col("a", "y")}]
    assert first["where"]["right"] == {"node": "Literal", "kind": "integer", "value": 7}
    assert second["sources"] == [{"alias": "b", "element": "b", "keep": None}]
    assert element(plan, "u")["stateful"] is False
    g = select(plan, "g")
    assert [a["fn"] for a in g["aggregates"]] == ["count", "sum"]  # each distinct call once
    assert g["items"][3]["expr"]["left"] == var("__agg0")
    assert g["having"]["left"] == var("__agg0")
    assert g["sources"][0]["keep"]["millis"] == 10000
    assert element(plan, "g")["key"] == ["y"]


def test_module_instances(tmp_path):
    plan = plan_text(tmp_path, """
CREATE MODULE m IN i OUT o
BEGIN
  DECLARE PARAMETER integer lim := 1; END;
  CREATE INPUT STREAM i SCHEMA (k string, v integer);
  CREATE LOCAL STREAM mid AS SELECT i.k, i.v FROM i WHERE i.v > lim;
  CREATE OUTPUT WINDOW o PRIMARY KEY DEDUCED AS SELECT mid.k, sum(mid.v) s FROM mid KEEP 5 ROWS
    GROUP BY mid.k;
END;
CREATE INPUT STREAM src SCHEMA (k string, v integer);
LOAD MODULE m AS one IN i = src OUT o = outOne PARAMETERS lim = 5
  PARTITION BY src HASH(k) PARTITIONS 3;
LOAD MODULE m AS two IN i = src OUT o = outTwo;
CREATE OUTPUT STREAM after AS SELECT outOne.k FROM outOne;
""")
    names = [e["name"] for e in plan["elements"]]
    assert names == ["src", "one.mid", "outOne", "two.mid", "outTwo", "after"]
    mid = element(plan, "one.mid")
    assert mid["query"]["selects"][0]["sources"] == [{"alias": "i", "element": "src", "keep": None}]
    assert mid["query"]["selects"][0]["where"]["right"]["value"] == 5
    assert element(plan, "two.mid")["query"]["selects"][0]["where"]["right"]["value"] == 1
    assert select(plan, "outOne")["sources"][0]["element"] == "one.mid"
    assert element(plan, "outOne")["key"] == ["k"]
    part = mid["module_partition"]
    assert part["count"] == 3 and part["specs"][0]["input"] == "src"
    assert element(plan, "outOne")["module_partition"] == part
    assert element(plan, "two.mid")["module_partition"] is None


def test_errors_return_no_plan(tmp_path):
    path = tmp_path / "bad.ccl"
    path.write_text("CREATE OUTPUT STREAM s AS SELECT x.a FROM x;\n")
    plan, diags = plan_json(str(path))
    assert plan is None and any(d.is_error for d in diags)


def test_right_nested_join_is_a_plan_error(tmp_path):
    path = tmp_path / "j.ccl"
    path.write_text("""
CREATE INPUT WINDOW a SCHEMA (k string) PRIMARY KEY (k);
CREATE INPUT WINDOW b SCHEMA (k string) PRIMARY KEY (k);
CREATE INPUT WINDOW c SCHEMA (k string) PRIMARY KEY (k);
CREATE OUTPUT WINDOW j PRIMARY KEY (k) AS SELECT a.k k FROM a JOIN (b JOIN c ON b.k = c.k) ON a.k = b.k;
""")
    try:
        plan, diags = plan_json(str(path))
    except PlanError as exc:
        assert "j.ccl" in str(exc)
    else:
        assert plan is None or plan["elements"]  # the parser may not accept the nesting at all


def test_splitter_targets_are_filtered_streams():
    plan = plan_of(ROOT / "projects/valid/news_sentiment_splitter.ccl")
    neutral = select(plan, "NeutralNews")
    assert neutral["sources"][0]["element"] == "WatchedHeadlines"
    where = neutral["where"]
    assert where["node"] == "Binary" and where["op"] == "and"
    assert element(plan, "FlashAlerts")["splitter"] == "SentimentRouter"
    assert [i["name"] for i in neutral["items"]] == ["StoryId", "Ticker", "Desk", "Sentiment", "Relevance"]
    star = select(plan, "WatchedHeadlines")["items"]
    assert star[0] == {"name": "StoryId", "expr": col("Headlines", "StoryId")}
    assert star[-1] == {"name": "Desk", "expr": col("Watchlist", "Desk")}


def test_column_types_of_function_results(tmp_path):
    """Select items typed by what the functions give, so the runtime keeps the values: a
    to_decimal/to_money with literal sizes keeps them (a plain decimal would be decimal(10,0)),
    the clocks are timestamps, dateadd keeps its date-time's type."""
    plan = plan_text(tmp_path, """
    CREATE INPUT STREAM s SCHEMA (x float, d date, b bigdatetime, k string);
    CREATE OUTPUT STREAM o AS SELECT to_decimal(s.x, 12, 4) a, to_money(s.x, 2) m, now() t,
        getdate() g, dateadd('dd', 1, s.d) d1, dateadd('dd', 1, s.b) b1,
        regexp_search(s.k, 'a+') r, bittest(3, 1) bt FROM s;
    """)
    assert element(plan, "o")["columns"] == [
        ["a", "decimal(12,4)"], ["m", "money(2)"], ["t", "timestamp"], ["g", "timestamp"],
        ["d1", "date"], ["b1", "bigdatetime"], ["r", "boolean"], ["bt", "boolean"]]


def test_avg_is_a_float_except_of_money_and_decimals(tmp_path):
    """ESP's reference: avg "takes any numeric datatype as input; returns type FLOAT" (an
    integer column's average of 5 and 2 was 3); money and decimals keep their exact type."""
    plan = plan_text(tmp_path, """
    CREATE INPUT WINDOW W SCHEMA (id integer, x integer, l long, f float, m money(2), d decimal(10,3))
        PRIMARY KEY (id);
    CREATE OUTPUT WINDOW A PRIMARY KEY DEDUCED AS SELECT W.id, avg(W.x) ax, avg(W.l) al, avg(W.f) af,
        avg(W.m) am, avg(W.d) ad FROM W GROUP BY W.id;
    """)
    assert element(plan, "A")["columns"][1:] == [
        ["ax", "float"], ["al", "float"], ["af", "float"], ["am", "money(2)"], ["ad", "decimal(10,3)"]]


def test_splitter_targets_over_a_window_are_delta_streams_with_its_key(tmp_path):
    """ESP: the targets of a splitter over a window are delta streams keyed as the window, so a
    window can be deduced from one and updates/deletes go on; over a stream they are streams."""
    plan = plan_text(tmp_path, """
    CREATE INPUT WINDOW Trades SCHEMA (Id long, Symbol string, Price float) PRIMARY KEY (Id);
    CREATE INPUT STREAM Ticks SCHEMA (Symbol string, Price float);
    CREATE SPLITTER ByName AS WHEN t.Symbol = 'IBM' THEN Ibm ELSE Rest SELECT t.* FROM Trades t;
    CREATE SPLITTER TickSplit AS WHEN k.Price > 1 THEN Big ELSE Small SELECT k.* FROM Ticks k;
    CREATE OUTPUT WINDOW IbmWin PRIMARY KEY DEDUCED AS SELECT * FROM Ibm;
    """)
    assert [(element(plan, e)["kind"], element(plan, e)["key"]) for e in ("Ibm", "Rest", "Big")] == [
        ("delta stream", ["Id"]), ("delta stream", ["Id"]), ("stream", [])]
    assert element(plan, "IbmWin")["key"] == ["Id"]


def test_a_splitter_row_whose_condition_is_null_falls_through_to_else(tmp_path):
    """A WHEN that is not true (null included) passes the row on to the next branch and to ELSE."""
    from runtime.engine.changes import Event
    from runtime.engine.flex import make_engine
    plan = plan_text(tmp_path, """
    CREATE INPUT STREAM S SCHEMA (id integer, amt float);
    CREATE SPLITTER Sp AS WHEN s.amt > 100 THEN Big WHEN s.amt > 10 THEN Mid ELSE Small
        SELECT s.id, s.amt FROM S s;
    """)
    rows = [{"id": 1, "amt": 500.0}, {"id": 2, "amt": 50.0}, {"id": 3, "amt": None}, {"id": 4, "amt": 1.0}]
    events = [Event(0, "i", i, row) for i, row in enumerate(rows)]
    got = {}
    for target in ("Big", "Mid", "Small"):
        engine = make_engine(*typed_parts(element(plan, target), plan))
        got[target] = [o.values["id"] for o in engine.process(engine.initial_state(), events, 0)]
    assert got == {"Big": [1], "Mid": [2], "Small": [3, 4]}


def test_a_module_loading_a_module_binds_through_both(tmp_path):
    src = (ROOT / "compile_errors" / "valid_module_loads_a_module.ccl").read_text()
    plan = plan_text(tmp_path, src)
    assert [e["name"] for e in plan["elements"]] == ["Src", "Res", "Doubled"]
    assert select(plan, "Res")["sources"][0]["element"] == "Src"
    assert element(plan, "Res")["columns"] == [["Id", "integer"], ["Twice", "integer"]]


def test_a_module_reads_what_a_module_it_loads_produces(tmp_path):
    """The inner module's output bound to a name of the outer module's own (OUT io = mid), which
    the outer module's next element reads: the planner knows the inner module (it failed with "the
    analysis knows no such element")."""
    src = (ROOT / "compile_errors" / "valid_module_loads_a_module.ccl").read_text().replace(
        "LOAD MODULE InnerM AS in1 IN ii = oi OUT io = oo;",
        "LOAD MODULE InnerM AS in1 IN ii = oi OUT io = mid;\n"
        "  CREATE OUTPUT STREAM oo AS SELECT mid.Id, mid.Twice FROM mid WHERE mid.Id > 1;")
    plan = plan_text(tmp_path, src)
    assert [e["name"] for e in plan["elements"]] == ["Src", "o1.mid", "Res", "Doubled"]
    assert select(plan, "o1.mid")["sources"][0]["element"] == "Src"
    assert select(plan, "Res")["sources"][0]["element"] == "o1.mid"


def test_keep_row_counts_may_be_expressions_of_literals_and_parameters(tmp_path):
    """ESP: the number of rows "can be either an integer value or an expression"; a module's
    parameter is bound when the module is loaded (--param and the .ccr give the values)."""
    plan = plan_text(tmp_path, """
DECLARE PARAMETER integer depth := 3; END;
CREATE MODULE m IN i OUT o BEGIN
  DECLARE PARAMETER integer size := 1; END;
  CREATE INPUT STREAM i SCHEMA (k string, v integer);
  CREATE OUTPUT WINDOW o PRIMARY KEY (k) KEEP size * 4 ROWS AS SELECT i.k, i.v FROM i;
END;
CREATE INPUT STREAM s SCHEMA (k string, v integer);
CREATE OUTPUT WINDOW w PRIMARY KEY (k) KEEP depth * 2 ROWS AS SELECT s.k, s.v FROM s;
CREATE OUTPUT WINDOW e PRIMARY KEY (k) KEEP EVERY (depth + 1) ROWS AS SELECT s.k, s.v FROM s;
CREATE OUTPUT WINDOW c PRIMARY KEY (k) KEEP 2 * 5 ROWS AS SELECT s.k, s.v FROM s;
CREATE OUTPUT STREAM f AS SELECT s.k FROM s KEEP 7 / 2 ROWS;
LOAD MODULE m AS m1 IN i = s OUT o = mo PARAMETERS size = depth;
""", params={"depth": "5"})
    assert [element(plan, e)["keep"]["count"] for e in ("w", "e", "c", "mo")] == [10, 6, 10, 20]
    assert element(plan, "e")["keep"]["kind"] == "every_rows"
    assert element(plan, "f")["query"]["selects"][0]["sources"][0]["keep"]["count"] == 3


def test_keep_row_counts_that_are_not_positive_integer_constants_are_reported(tmp_path):
    from ccl.syntax.printer import to_ccl
    from ccl.syntax.parser import parse_text
    text = """DECLARE PARAMETER integer depth := 3; PARAMETER string label := 'x'; END;
CREATE INPUT STREAM s SCHEMA (k string, v integer);
CREATE OUTPUT STREAM a AS SELECT s.k FROM s KEEP depth - 3 ROWS;
CREATE OUTPUT STREAM b AS SELECT s.k FROM s KEEP nope ROWS;
CREATE OUTPUT WINDOW c PRIMARY KEY (k) KEEP label ROWS AS SELECT s.k FROM s;
CREATE OUTPUT WINDOW d PRIMARY KEY (k) KEEP s.v ROWS AS SELECT s.k FROM s;
"""
    path = tmp_path / "bad.ccl"
    path.write_text(text)
    plan, diags = plan_json(str(path))
    assert plan is None
    found = sorted((d.span.line, d.code) for d in diags)
    assert found == [(3, "CCL2303"), (4, "CCL2303"), (5, "CCL2303"), (6, "CCL2303")], [str(d) for d in diags]
    assert "it is 0, not a positive integer" in next(d.message for d in diags if d.span.line == 3)
    assert "no PARAMETER 'nope'" in next(d.message for d in diags if d.span.line == 4)
    # the expression forms print back and parse to the same tree
    project, errors = parse_text(text)
    again, errors2 = parse_text(to_ccl(project))
    assert errors == errors2 == [] and again == project


def test_splitter_targets_and_error_streams_are_local_unless_output(tmp_path):
    """ESP: a splitter's targets are local or output "depending on the visibility clause defined
    for the splitter. The default is local"; an error stream is LOCAL by default. They were
    written as outputs."""
    plan = plan_text(tmp_path, """
    CREATE INPUT STREAM S SCHEMA (k string, x integer);
    CREATE SPLITTER A AS WHEN S.x > 10 THEN T1 ELSE T2 SELECT S.k, S.x FROM S;
    CREATE OUTPUT SPLITTER B AS WHEN S.x > 10 THEN U1 ELSE U2 SELECT S.k, S.x FROM S;
    CREATE ERROR STREAM E ON S;
    CREATE OUTPUT ERROR STREAM F ON S;
    """)
    assert {e: element(plan, e)["role"] for e in ("T1", "T2", "U1", "U2", "E", "F")} == {
        "T1": "local", "T2": "local", "U1": "output", "U2": "output", "E": "local", "F": "output"}
