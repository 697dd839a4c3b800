"""The parser: statement shapes, the seed examples, clause checks and error recovery."""
from pathlib import Path

import pytest

from ccl.syntax import nodes as n
from ccl.syntax.parser import parse_text

SEEDS = Path(__file__).parent / "projects" / "seeds"


def parse_ok(text):
    project, diags = parse_text(text, "t.ccl")
    assert [d.header() for d in diags] == []
    return project.statements


def parse_one(text):
    (stmt,) = parse_ok(text)
    return stmt


def codes(text):
    _, diags = parse_text(text, "t.ccl")
    return [(d.code, d.span.line, d.span.col) for d in diags]


def seed(name):
    return parse_ok((SEEDS / name).read_text())


# --- the seed examples ------------------------------------------------------------------------

def test_seed_roundrobin_filter():
    _, out = seed("roundrobin_tradewindow.ccl")
    assert out.kind == "window" and out.role == "output"
    (spec,) = out.partition.specs
    assert (spec.source.name, spec.method, out.partition.count) == ("TradeWindow", "roundrobin", 2)
    assert isinstance(out.query.items[0], n.Star)
    assert out.query.where == n.Binary(">", n.FieldAccess(n.Var(n.Ident("TradeWindow")), n.Ident("Volume")),
                                       n.Literal("integer", 10000))


def test_seed_hash_with_deduced_key_and_time_keep():
    _, out = seed("hash_maxprice.ccl")
    assert out.primary_key.deduced
    assert out.keep.kind == "time" and out.keep.interval.microseconds == 5 * 60 * 1_000_000
    (spec,) = out.partition.specs
    assert spec.method == "hash" and [c.name for c in spec.columns] == ["isin"]
    assert out.partition.count == 5
    assert [i.alias.name for i in out.query.items] == ["isin", "maxPrice"]
    assert out.query.group_by[0].func.name == "upper"


def test_seed_custom_partition_block_is_splash():
    _, out = seed("custom_maxprice.ccl")
    (spec,) = out.partition.specs
    assert spec.method == "custom"
    decl, ret = spec.body.stmts
    assert isinstance(decl, n.VarDecl) and decl.type == n.NamedType("integer")
    assert ret == n.Return(n.Binary("%", n.Var(n.Ident("hashValue")), n.Var(n.Ident("maxPriceW_partitions"))))


def test_seed_join_with_broadcast_input():
    _, _, out = seed("hash_vwap_broadcast.ccl")
    (join,) = out.query.sources
    assert isinstance(join, n.Join) and join.kind == "left"
    assert (join.left.name.name, join.right.name.name) == ("priceW", "volumeW")
    assert [s.source.name for s in out.partition.specs] == ["priceW"]  # volumeW is broadcast


def test_seed_custom_partition_of_two_inputs():
    _, _, out = seed("custom_vwap_two_inputs.ccl")
    assert [(s.source.name, s.method) for s in out.partition.specs] == [
        ("priceW", "custom"), ("volumeW", "custom")]


def test_seed_event_cache_in_local_declare():
    _, out = seed("eventcache_example1.ccl")
    (decl,) = out.declare.items
    cache = decl.type
    assert isinstance(cache, n.EventCacheType)
    assert cache.source.name == "priceW" and [k.name for k in cache.keys] == ["isin"]
    assert cache.options == [n.CacheOption("events", count=10)]


def test_seed_flex_with_key_cache():
    _, _, flex = seed("flex_keycache_example2.ccl")
    assert isinstance(flex, n.CreateFlex)
    assert flex.output.kind == "window" and [c.name for c in flex.output.primary_key.columns] == ["Symbol", "Price"]
    assert flex.partition.count == 3
    cache = flex.declare.items[0].type
    assert cache.options == [n.CacheOption("manual"), n.CacheOption("order", column=n.Ident("Price"))]
    (handler,) = flex.handlers
    assert handler.source.name == "QTrades"
    call = handler.body.stmts[0].expr
    assert call.func.name == "keyCache"
    assert call.args[1] == n.RecordLit([n.FieldInit(n.Ident("Symbol"), n.FieldAccess(
        n.Var(n.Ident("QTrades")), n.Ident("Symbol2")))], [], True)


# --- statements ---------------------------------------------------------------------------------

def test_schema_with_inheritance():
    s = parse_one("CREATE SCHEMA Ext INHERITS FROM Base, Other (extra long);")
    assert [i.name for i in s.inherits] == ["Base", "Other"]
    assert s.columns == [n.Column(n.Ident("extra"), n.NamedType("long"))]


def test_input_stream_with_where_and_autogenerate():
    s = parse_one("CREATE INPUT STREAM s SCHEMA (id long, v integer) AUTOGENERATE (id) FROM 100 WHERE v > 0;")
    assert s.autogenerate.columns == [n.Ident("id")] and s.autogenerate.start == n.Literal("integer", 100)
    assert isinstance(s.where.cond, n.Binary)


@pytest.mark.parametrize("clause, expected", [
    ("KEEP 10 ROWS", n.Keep("rows", 10)),
    ("KEEP 1 ROW", n.Keep("rows", 1)),
    ("KEEP 10 ROWS SLACK 2 PER (a, b)", n.Keep("rows", 10, None, 2, [n.Ident("a"), n.Ident("b")])),
    ("KEEP rowsParam ROWS", n.Keep("rows", n.Ident("rowsParam"))),
    ("KEEP EVERY 5 ROWS PER (a)", n.Keep("every_rows", 5, per=[n.Ident("a")])),
    ("KEEP ALL", n.Keep("all")),
    ("KEEP ALL ROWS", n.Keep("all")),
    ("KEEP LAST ROW", n.Keep("last")),
    ("KEEP LAST", n.Keep("last")),
    ("KEEP LAST PER (b)", n.Keep("last", per=[n.Ident("b")])),
    ("KEEP LAST ROW PER (a, b)", n.Keep("last", per=[n.Ident("a"), n.Ident("b")])),
])
def test_keep_forms(clause, expected):
    s = parse_one(f"CREATE INPUT WINDOW w SCHEMA (a integer, b integer) PRIMARY KEY (a) {clause};")
    assert s.keep == expected


@pytest.mark.parametrize("text, micros", [
    ("30 SEC", 30_000_000), ("5 MINUTES", 300_000_000), ("3 MINUTES 30 SECONDS", 210_000_000),
    ("100 MILLISECONDS", 100_000), ("1 DAY", 86_400_000_000), ("2 hours", 7_200_000_000),
    ("250", 250),
])
def test_interval_phrases(text, micros):
    s = parse_one(f"CREATE INPUT WINDOW w SCHEMA (a integer) PRIMARY KEY (a) KEEP EVERY {text};")
    assert s.keep.kind == "every_time" and s.keep.interval.microseconds == micros


def test_soft_keywords_are_names():
    s = parse_one("CREATE INPUT WINDOW Key SCHEMA (Type string, Order integer, Load float, Key long) "
                  "PRIMARY KEY (Key);")
    assert [c.name.name for c in s.schema.columns] == ["Type", "Order", "Load", "Key"]


def test_type_names_as_column_names_keep_their_spelling():
    schema, stream = parse_ok("CREATE SCHEMA s (Date DATE, Timestamp timestamp);"
                              "CREATE OUTPUT STREAM o AS SELECT Date, x.Timestamp, string(Date) FROM x;")
    assert schema.columns[0] == n.Column(n.Ident("Date"), n.NamedType("date"))
    items = [i.expr for i in stream.query.items]
    assert items[0] == n.Var(n.Ident("Date"))
    assert items[1].field == n.Ident("Timestamp")
    assert items[2] == n.Call(n.Ident("string"), [n.Var(n.Ident("Date"))])


def test_type_names_as_key_per_hash_alias_and_record_field_names():
    w, o, f = parse_ok(
        "CREATE INPUT WINDOW W SCHEMA (id integer, Date date, Interval integer) "
        "PRIMARY KEY (id, Date) KEEP 5 ROWS PER (Date);"
        "CREATE OUTPUT WINDOW O PRIMARY KEY DEDUCED PARTITION BY W HASH(Date) PARTITIONS 2 "
        "AS SELECT w.Date, max(w.Interval) AS Interval, w.id Timestamp FROM W w GROUP BY w.Date;"
        "CREATE FLEX F IN W OUT OUTPUT STREAM S SCHEMA (Date date) "
        "BEGIN ON W { output [Date = W.Date; | Money = 1]; }; END;")
    assert w.primary_key.columns == [n.Ident("id"), n.Ident("Date")]
    assert w.keep.per == [n.Ident("Date")]
    assert o.partition.specs[0].columns == [n.Ident("Date")]
    assert [i.alias for i in o.query.items] == [None, n.Ident("Interval"), n.Ident("Timestamp")]
    record = f.handlers[0].body.stmts[0].value
    assert [fi.name for fi in record.key_fields + record.fields] == [n.Ident("Date"), n.Ident("Money")]


def test_last_is_a_name_too_and_reserved_words_are_named_as_such():
    w, o = parse_ok("CREATE INPUT WINDOW W SCHEMA (id integer, Last float) PRIMARY KEY (id) KEEP LAST;"
                    "CREATE OUTPUT WINDOW O PRIMARY KEY DEDUCED AS SELECT w.id, last(w.Last) Last "
                    "FROM W w GROUP BY w.id;")
    assert w.schema.columns[1].name == n.Ident("Last") and w.keep == n.Keep("last")
    assert o.query.items[1] == n.SelectItem(n.Call(n.Ident("last"), [n.FieldAccess(n.Var(n.Ident("w")),
                                                                              n.Ident("Last"))]),
                                            n.Ident("Last"))
    _, diags = parse_text("CREATE INPUT WINDOW W SCHEMA (id integer, Store float) PRIMARY KEY (id);")
    assert [d.message for d in diags] == [
        "syntax error at 'Store'; expected a name or a type ('Store' is a reserved word and cannot be a name)"]
    _, diags = parse_text("CREATE OUTPUT STREAM t AS SELECT a, FROM s;")
    assert "reserved" not in diags[0].message


def test_select_forms():
    s = parse_one("""CREATE OUTPUT STREAM o AS
        SELECT t.*, 'TEMP'EVENT_NAME, t.a AS x, count(*) c, -t.b
        FROM T t KEEP 50 ROWS PER (a), U
        WHERE t.a NOT IN (1, 2) AND NOT t.c LIKE 'x%'
        GROUP FILTER t.a > 0 GROUP BY t.a GROUP ORDER BY t.b DESC, t.c HAVING count(*) > 1;""")
    q = s.query
    assert q.items[0] == n.Star(n.Ident("t"))
    assert q.items[1] == n.SelectItem(n.Literal("string", "TEMP"), n.Ident("EVENT_NAME"))
    assert q.items[3].expr == n.Call(n.Ident("count"), [n.Star()])
    assert q.sources[0].keep == n.Keep("rows", 50, per=[n.Ident("a")])
    assert q.where.left == n.InList(n.FieldAccess(n.Var(n.Ident("t")), n.Ident("a")),
                                    [n.Literal("integer", 1), n.Literal("integer", 2)], negated=True)
    assert q.where.right.op == "not" and q.where.right.operand.op == "like"
    assert [o.descending for o in q.group_order_by] == [True, None]


def test_joins_chain_left_to_right():
    s = parse_one("CREATE OUTPUT STREAM o AS SELECT * FROM A a JOIN B b ON a.k = b.k "
                  "FULL OUTER JOIN C ON a.k = C.k;")
    outer = s.query.sources[0]
    assert outer.kind == "full" and outer.left.kind == "inner"


def test_matching_pattern():
    s = parse_one("CREATE OUTPUT STREAM o AS SELECT A.k FROM A, B, C "
                  "MATCHING [20 SEC : A, !B && C || (A, C)] ON A.k = B.k;")
    m = s.query.matching
    assert m.interval.microseconds == 20_000_000
    assert m.pattern.op == ","
    assert m.pattern.right.op == "||" and isinstance(m.pattern.right.left.left, n.PatternNot)


def test_operator_precedence():
    e = parse_one("CREATE OUTPUT STREAM o AS SELECT a + b * c ^ d ^ e - f x FROM T;").query.items[0].expr
    assert e.op == "-" and e.left.op == "+"
    pow_ = e.left.right.right
    assert pow_.op == "^" and pow_.right.op == "^"  # right-associative


def test_union_splitter_reference_store_adapter_import_error_stream():
    stmts = parse_ok("""
        CREATE OUTPUT STREAM u AS SELECT * FROM A UNION SELECT * FROM B UNION SELECT * FROM C;
        CREATE SPLITTER sp AS WHEN a > 1 THEN Big, Audit WHEN a > 0 THEN Small ELSE Rest SELECT * FROM A;
        CREATE REFERENCE r SCHEMA (k integer) PRIMARY KEY (k) PROPERTIES service = 'hana', source = 'T';
        CREATE DEFAULT MEMORY STORE ms PROPERTIES INDEXTYPE = 'tree';
        CREATE LOG STORE ls PROPERTIES filename = 'x.log', sync = false, maxfilesize = -1;
        ATTACH INPUT ADAPTER in1 TYPE dsv_in TO A GROUP g1 PROPERTIES dir = '/d', hasHeader = true;
        IMPORT 'lib/other.ccl';
        CREATE ERROR STREAM errs ON A, B;
    """)
    union, splitter, ref, mem, log, adapter, imp, err = stmts
    assert len(union.query.selects) == 3
    assert [[t.name for t in b.targets] for b in splitter.branches] == [["Big", "Audit"], ["Small"]]
    assert [t.name for t in splitter.otherwise] == ["Rest"]
    assert [p.name.name for p in ref.properties] == ["service", "source"]
    assert (mem.kind, mem.is_default, log.kind) == ("memory", True, "log")
    assert log.properties[2].value == n.Unary("-", n.Literal("integer", 1))
    assert (adapter.direction, adapter.type.name, adapter.group.name) == ("input", "dsv_in", "g1")
    assert imp.path == "lib/other.ccl"
    assert [s.name for s in err.sources] == ["A", "B"]


def test_global_declare_with_functions_and_types():
    (decl,) = parse_ok("""
        DECLARE
            PARAMETER integer numParts := 4;
            typedef [integer k; | string v;] KV;
            dictionary(string, vector(float)) hist;
            integer fib(integer x) {
                if (x < 2) return x; else return fib(x - 1) + fib(x - 2);
            }
        END;""")
    param, typedef, var, func = decl.block.items
    assert param.default == n.Literal("integer", 4)
    assert isinstance(typedef.type, n.RecordType) and typedef.type.bar
    assert var.type == n.DictType(n.NamedType("string"), n.VectorType(n.NamedType("float")))
    assert func.name.name == "fib" and isinstance(func.body.stmts[0], n.If)


def test_splash_statements():
    (decl,) = parse_ok("""
        DECLARE
            integer f(vector(integer) v) {
                integer total := 0, i;
                for (x in v) { if (x < 0) continue; total := total + x; }
                while (total > 100) { total := total / 2; }
                switch (total) { case 1, 2: return 1; default: break; }
                v[0] := total; exit;
            }
        END;""")
    body = decl.block.items[0].body.stmts
    assert [type(s).__name__ for s in body] == [
        "VarDecl", "ForIn", "While", "Switch", "Assign", "Exit"]
    assert [len(c.values) for c in body[3].cases] == [2, 0]
    assert isinstance(body[4].target, n.IndexAccess)


def test_modules():
    create, load = parse_ok("""
        CREATE MODULE m IN i1, i2 OUT o1 REFERENCES r1 BEGIN
            CREATE INPUT STREAM i1 SCHEMA (a integer);
            CREATE INPUT STREAM i2 SCHEMA (a integer);
            CREATE OUTPUT STREAM o1 AS SELECT * FROM i1;
        END;
        LOAD MODULE m AS m1 IN i1 = S1, i2 = S2 OUT o1 = Out1 PARAMETERS p = 5, q = 'x'
            PARTITION BY i1 HASH(a) PARTITIONS 4;""")
    assert [i.name for i in create.inputs] == ["i1", "i2"] and len(create.body) == 3
    assert [b.value.name for b in load.inputs] == ["S1", "S2"]
    assert load.parameters[1].value == n.Literal("string", "x")
    assert load.clauses == ["inputs", "outputs", "parameters", "partition"]


def test_load_module_references_and_adapter_start():
    load, start, start2 = parse_ok("""
        LOAD MODULE m AS m1 IN i1 = S1 OUT o1 = O1 REFERENCES ref1 = CustomerRef STORES st = S;
        ADAPTER START GROUPS g1, g2 NOSTART;
        adapter start groups g3;""")
    assert [(b.name.name, b.value.name) for b in load.references] == [("ref1", "CustomerRef")]
    assert load.clauses == ["inputs", "outputs", "references", "stores"]
    assert ([g.name for g in start.groups], start.nostart) == (["g1", "g2"], True)
    assert ([g.name for g in start2.groups], start2.nostart) == (["g3"], False)
    assert codes("ADAPTER BEGIN GROUPS g1;") != []
    assert codes("ADAPTER START TEAMS g1;") == [("CCL1103", 1, 15)]


def test_count_distinct_and_new_containers():
    (decl,) = parse_ok("""
        DECLARE
            dictionary(string, vector(string)) rules := new dictionary(string, vector(string));
            eventCache(S, auto) c;
        END;""")
    var, cache = decl.block.items
    assert var.declarators[0].init == n.New(n.DictType(n.NamedType("string"),
                                                       n.VectorType(n.NamedType("string"))))
    assert cache.type.options == [n.CacheOption("auto")]
    s = parse_one("CREATE OUTPUT WINDOW w PRIMARY KEY DEDUCED AS "
                  "SELECT t.k, count(DISTINCT t.v) c FROM T t GROUP BY t.k;")
    assert s.query.items[1].expr == n.Call(n.Ident("count"), [n.FieldAccess(n.Var(n.Ident("t")), n.Ident("v"))],
                                           distinct=True)


def test_flex_handlers():
    (flex,) = parse_ok("""
        CREATE FLEX f IN a, b OUT OUTPUT DELTA STREAM o SCHEMA (k integer) PRIMARY KEY (k)
        BEGIN
            DECLARE integer n := 0; END;
            ON a { n := n + 1; output setOpcode([k = n;], upsert); };
            ON b { };
            ON START TRANSACTION { n := 0; };
            ON END TRANSACTION { };
            EVERY 10 SECONDS { print('tick'); };
        END;""")
    assert flex.output.kind == "delta stream"
    assert [h.event if isinstance(h, n.OnHandler) else "every" for h in flex.handlers] == [
        "row", "row", "start_transaction", "end_transaction", "every"]


# --- clause checks -------------------------------------------------------------------------------

def test_duplicate_and_misplaced_clauses():
    assert codes("CREATE INPUT WINDOW w SCHEMA (a integer) PRIMARY KEY (a) KEEP 1 ROW KEEP 2 ROWS;") == [
        ("CCL1104", 1, 69)]
    assert codes("CREATE INPUT STREAM s SCHEMA (a integer) AS SELECT * FROM x;") == [("CCL1105", 1, 45)]
    assert codes("CREATE OUTPUT STREAM s SCHEMA (a integer);") == [("CCL1105", 1, 22)]
    assert codes("CREATE OUTPUT STREAM s AUTOGENERATE (a) AS SELECT * FROM x;") == [("CCL1105", 1, 24)]
    assert codes("CREATE OUTPUT STREAM s AS SELECT * FROM x WHERE a > 1 WHERE b > 2;") == [
        ("CCL1104", 1, 55)]


def test_duplicate_load_module_clauses():
    assert codes("LOAD MODULE m AS m1 IN a = A IN b = B PARTITION HASH(x) PARTITIONS 2 "
                 "PARTITION ROUNDROBIN PARTITIONS 3;") == [("CCL1104", 1, 30), ("CCL1104", 1, 70)]


def test_unknown_words():
    assert codes("CREATE INPUT WINDOW w SCHEMA (a integer) PRIMARY KEY (a) KEEP 5 FORTNIGHTS;") == [
        ("CCL1103", 1, 65)]
    assert codes("CREATE FAST STORE s;") == [("CCL1103", 1, 8)]


# --- error recovery ------------------------------------------------------------------------------

def test_every_syntax_error_of_a_file_is_reported():
    text = "\n".join([
        "CREATE INPUT STREAM a SCHEMA (x integer);",
        "CREATE OUTPUT STREAM b AS SELECT x, FROM a;",            # error at 2:37
        "CREATE OUTPUT STREAM c AS SELECT x FROM a;",             # fine
        "CREATE OUTPUT STREAM d AS SELECT x FROM a WHERE x > ;",  # error at 4:53
        "DECLARE integer f() { integer y := ; return 1; } END;",  # error inside a block at 5:36
        "CREATE OUTPUT STREAM e AS SELECT x FROM a;",             # fine
    ])
    project, diags = parse_text(text, "t.ccl")
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [
        ("CCL1101", 2, 37), ("CCL1101", 4, 53), ("CCL1101", 5, 36)]
    names = [s.name.name for s in project.statements if isinstance(s, n.CreateElement)]
    assert names == ["a", "c", "e"]


def test_messages_name_the_token_and_what_was_expected():
    _, (d,) = parse_text("CREATE INPUT WINDOW w SCHEMA (a integer b string);", "t.ccl")
    assert d.message == "syntax error at name 'b'; expected ')' or ','"


def test_unexpected_end_of_file_points_at_the_last_token():
    _, diags = parse_text("CREATE INPUT STREAM s SCHEMA (a integer)\n\n", "t.ccl")
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [("CCL1102", 1, 41)]


def test_positions_are_one_based_and_count_tabs_as_one_column():
    _, (d,) = parse_text("\n\tCREATE OUTPUT STREAM s AS SELECT FROM x;", "t.ccl")
    assert (d.span.line, d.span.col) == (2, 35)


def test_a_missing_semicolon_between_statements_says_so():
    _, diags = parse_text("CREATE INPUT WINDOW W SCHEMA (a integer) PRIMARY KEY (a)\n"
                          "CREATE OUTPUT WINDOW O PRIMARY KEY (a) AS SELECT w.a FROM W w;", "t.ccl")
    assert [(d.span.line, d.span.col, d.message) for d in diags] == [
        (2, 1, "syntax error at 'CREATE'; expected ';' to end the statement before it")]


def test_partition_by_a_method_without_the_input_says_what_to_write():
    _, diags = parse_text("CREATE OUTPUT STREAM O PARTITION BY HASH(a) PARTITIONS 2 AS SELECT s.a FROM S s;")
    assert [d.message for d in diags] == [
        "syntax error at '('; PARTITION BY names the input before the method: PARTITION BY <input> "
        "HASH..., or PARTITION HASH... for the element's only input"]
