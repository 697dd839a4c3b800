"""ESP forms the grammar accepts: money literals (10.00d2), records whose last field has no ';',
`i++;` / `i--;` statements and chained equality in a MATCHING clause's ON."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest

from ccl.syntax import nodes as n
from ccl.analysis import analyze
from ccl.splash.types import Type
from ccl.syntax.lexer import tokenize
from ccl.syntax.parser import parse_text
from ccl.syntax.printer import to_ccl
from ccl.syntax.project import load_text
from ccl.splash import Interpreter
from ccl.splash.values import Dec
from tests.splash_eval import evaluator

SCHEMA = "CREATE INPUT STREAM S SCHEMA (a integer, p money(2));\n"


def parse_ok(text: str) -> n.Project:
    project, diags = parse_text(text)
    assert not diags, diags
    return project


def round_trip(text: str) -> n.Project:
    """Parses ``text``, prints it, parses the print: both trees must be equal."""
    project = parse_ok(text)
    again = parse_ok(to_ccl(project))
    assert again == project
    return project


def codes(text: str) -> list[str]:
    return [d.code for d in parse_text(text)[1]]


def declared(text: str) -> n.Node:
    """The first item of ``DECLARE text END;``."""
    return parse_ok(f"DECLARE {text} END;").statements[0].block.items[0]


def column_types(select: str) -> dict[str, Type]:
    analysis = analyze(load_text(SCHEMA + f"CREATE OUTPUT STREAM O AS SELECT {select} FROM S;"), {})
    assert not analysis.diagnostics, analysis.diagnostics
    return analysis.elements["O"].columns


# --- money literals ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [("10.00d2", "10.00"), ("15d2", "15.00"), (".5d1", "0.5"),
                                         ("1.25D3", "1.250"), ("1.005d2", "1.01")])
def test_money_literal_tokens(text, value):
    (tok,) = tokenize(text)
    assert tok.type == "MONEY" and str(tok.value) == value


@pytest.mark.parametrize("text", ["10d0", "10d16", "99999999999999999.99d2"])
def test_money_literal_out_of_range(text):
    assert codes(f"DECLARE money(2) m := {text}; END;") == ["CCL1004"]


def test_money_literal_parses_prints_and_serialises():
    project = round_trip("DECLARE money(2) minimumPrice := 10.00d2; money(3) m := -1.5d3; END;")
    lit = project.statements[0].block.items[0].declarators[0].init
    assert (lit.kind, lit.value) == ("money", Decimal("10.00"))
    assert "10.00d2" in to_ccl(project) and "1.500d3" in to_ccl(project)
    data = json.loads(json.dumps(n.to_json(project)))
    back = n.from_json(data)
    assert back == project
    assert back.statements[0].block.items[0].declarators[0].init.value.as_tuple().exponent == -2


def test_money_literal_in_a_query_and_as_a_property_value():
    round_trip(SCHEMA + "CREATE OUTPUT STREAM O AS SELECT S.p + 0.50d2 q FROM S WHERE S.p > 15.00d2;")
    round_trip("CREATE LOG STORE ls PROPERTIES x = -2.5d1, y = 3.00d2;")


def test_money_literal_types_as_money_of_its_scale():
    types = column_types("10.00d2 a, 1.5d3 b, S.p + 0.5d1 c")
    assert types["a"] == Type("money", (2,)) and types["b"] == Type("money", (3,))
    assert types["c"].name == "money"


def test_money_literal_checks_like_a_money_value():
    project = load_text(SCHEMA + "DECLARE integer x := 1.50d2; money(2) y := 1.50d2; END;")
    assert [d.code for d in analyze(project, {}).diagnostics] == ["CCL2103"]


def test_money_literal_evaluates_to_a_money_value():
    ev = evaluator(Interpreter(), {})
    value = ev("10.00d2")
    assert isinstance(value, Dec) and (value, value.scale) == (Decimal("10.00"), 2)
    assert ev("1.5d3 + 1.25d2") == Decimal("2.750")
    assert ev("cast(string, 15d2)") == "15.00"


# --- records whose last field has no ';' ---------------------------------------------------------

@pytest.mark.parametrize("short, full", [
    ("[integer key1; | string dataField; float otherData]", "[integer key1; | string dataField; float otherData;]"),
    ("[integer k]", "[integer k;]"),
    ("[| string v]", "[| string v;]"),
    ("[integer k; | string v]", "[integer k; | string v;]"),
])
def test_record_type_without_the_last_semicolon(short, full):
    project = round_trip(f"DECLARE {short} var2; END;")
    assert project == parse_ok(f"DECLARE {full} var2; END;")


@pytest.mark.parametrize("short, full", [
    ("[key1 = 1; | dataField = 'x']", "[key1 = 1; | dataField = 'x';]"),
    ("[key1 = 1; dataField = 'x' + 'y']", "[key1 = 1; dataField = 'x' + 'y';]"),
    ("[| dataField = 'x']", "[| dataField = 'x';]"),
])
def test_record_value_without_the_last_semicolon(short, full):
    decl = "DECLARE [integer key1; | string dataField;] v; integer f() { v := %s; return 0; } END;"
    project = round_trip(decl % short)
    assert project == parse_ok(decl % full)


def test_record_key_fields_still_end_with_a_semicolon():
    assert codes("DECLARE [integer k | string v;] r; END;") == ["CCL1101"]


# --- i++; and i--; -------------------------------------------------------------------------------

def run_block(code: str) -> object:
    """The value a partition block returns."""
    project = parse_ok(f"CREATE OUTPUT STREAM o PARTITION BY r {{ {code} }} PARTITIONS 2 AS SELECT * FROM r;")
    return Interpreter().run_block(project.statements[0].partition.specs[0].body, {"r": {}}).value


def test_increment_and_decrement_are_assignments():
    func = round_trip("DECLARE integer f() { integer i := 0; i++; i --; i++; return i; } END;")
    body = func.statements[0].block.items[0].body.stmts
    assert body[1] == parse_ok("DECLARE integer f() { i := i + 1; } END;").statements[0].block.items[0].body.stmts[0]
    assert (body[2].value.op, body[2].value.right.span.col) == ("-", 46)  # the '--'
    assert body[2].span.col == 44


def test_increment_in_loop_bodies_and_on_fields():
    code = ("integer i := 0; integer n := 0; while (i < 5) i++; "
            "vector(integer) v := new vector(integer); push_back(v, 7); push_back(v, 8); "
            "for (x in v) n++; [| integer c;] rec := [| c = 1;]; rec.c++; "
            "return i * 100 + n * 10 + rec.c;")
    assert run_block(code) == 522


def test_increment_is_a_statement_only():
    assert codes("DECLARE integer f() { integer i := 0; return i++; } END;") == ["CCL1101"]
    assert codes("DECLARE integer f() { integer i := 0; i+ +; return i; } END;") == ["CCL1101"]


# --- chained equality in MATCHING ... ON ---------------------------------------------------------

MATCHING = ("CREATE INPUT STREAM Q SCHEMA (Symbol string, Price float);\n"
            "CREATE OUTPUT STREAM O AS SELECT T1.Symbol FROM Q T1, Q T2, Q T3\n"
            "MATCHING [5 SECONDS: T1, T2, T3] ON {} WHERE T1.Price = 1.0;")


def matching_on(cond: str) -> n.Node:
    return round_trip(MATCHING.format(cond)).statements[1].query.matching.on


@pytest.mark.parametrize("chain, pairs", [
    ("T1.Symbol = T2.Symbol = T3.Symbol",
     "T1.Symbol = T2.Symbol AND T2.Symbol = T3.Symbol"),
    ("T1.Symbol = T2.Symbol = T3.Symbol = T1.Symbol AND T1.Price = T2.Price = T3.Price",
     "T1.Symbol = T2.Symbol AND T2.Symbol = T3.Symbol AND T3.Symbol = T1.Symbol AND "
     "(T1.Price = T2.Price AND T2.Price = T3.Price)"),
    ("T1.Price + 1 = T2.Price = T3.Price", "T1.Price + 1 = T2.Price AND T2.Price = T3.Price"),
    ("(T1.Price = T2.Price) = (T3.Price = T1.Price)", "(T1.Price = T2.Price) = (T3.Price = T1.Price)"),
])
def test_matching_on_equality_chains_become_and(chain, pairs):
    assert matching_on(chain) == matching_on(pairs)


def test_record_literal_inside_matching_on():
    assert matching_on("[k = 1; | v = 2] = [k = 1; | v = T1.Price]").op == "="


def test_matching_on_chain_spans_and_analysis():
    on = matching_on("T1.Symbol = T2.Symbol = T3.Symbol")
    assert on.op == "and" and on.right.op == "=" and on.right.span.col == 49
    analysis = analyze(load_text(MATCHING.format("T1.Symbol = T2.Symbol = T3.Symbol")), {})
    assert not analysis.diagnostics, analysis.diagnostics


def test_equality_stays_non_associative_elsewhere():
    assert codes(MATCHING.format("T1.Symbol = T2.Symbol").replace("1.0", "1.0 = TRUE")) == ["CCL1101"]
    assert codes("CREATE INPUT STREAM Q SCHEMA (a integer);\n"
                 "CREATE OUTPUT STREAM O AS SELECT * FROM Q T1, Q T2 MATCHING [1 SECOND: T1, T2] ON T1.a = ;\n"
                 "CREATE OUTPUT STREAM P AS SELECT * FROM Q WHERE Q.a = Q.a = 1;") == ["CCL1101", "CCL1101"]


# --- expression sequences ------------------------------------------------------------------------

def test_expression_sequence_parses_prints_types_and_runs():
    """ESP's Expressions page: "(var1 := v.Price; var2 := v.Quantity; 0.0)": the steps run in
    order, the last expression is the value (and its type)."""
    text = ("DECLARE float var1; integer var2; END;\n" + SCHEMA +
            "CREATE OUTPUT STREAM O AS SELECT (var1 := S.a * 2.5; var2 := S.a; var1 + var2) z, "
            "(var2 := 7; 'x') w FROM S;\n")
    project = round_trip(text)
    item = project.statements[-1].query.items[0].expr
    assert isinstance(item, n.Sequence) and len(item.steps) == 2
    analysis = analyze(load_text(text), {})
    assert not analysis.diagnostics
    assert analysis.elements["O"].columns["z"].name == "float"
    assert analysis.elements["O"].columns["w"].name == "string"
    bad = load_text(SCHEMA + "DECLARE integer v; END; CREATE OUTPUT STREAM O AS SELECT (v := 'x'; 1) z FROM S;")
    assert [d.code for d in analyze(bad, {}).diagnostics] == ["CCL2103"]
    store = {"var1": 0.0, "var2": 0}
    interp = Interpreter({"var1": 0.0, "var2": 0})
    interp.bind(store)
    value = interp.evaluate(item, {"S": {"a": 4, "p": None}})
    assert value == 14.0 and store == {"var1": 10.0, "var2": 4}
    assert json.loads(json.dumps(n.to_json(item))) == n.to_json(n.from_json(n.to_json(item)))


def test_flex_inputs_may_carry_keep():
    """ESP: CREATE FLEX name IN input1 [KEEP keep_spec], ...: parsed per input and printed back."""
    project = round_trip(
        "CREATE INPUT WINDOW A SCHEMA (k integer) PRIMARY KEY (k);\n"
        "CREATE INPUT WINDOW B SCHEMA (k integer) PRIMARY KEY (k);\n"
        "CREATE FLEX F IN A KEEP 10 ROWS, B OUT OUTPUT WINDOW O SCHEMA (k integer) PRIMARY KEY (k)\n"
        "BEGIN ON A { output setOpcode(A, upsert); }; ON B { output setOpcode(B, upsert); }; END;\n")
    flex = project.statements[2]
    assert [i.name for i in flex.inputs] == ["A", "B"]
    assert flex.input_keeps[0].count == 10 and flex.input_keeps[1] is None


def test_date_part_keywords_read_as_strings():
    """ESP writes date parts as keywords (datefloor(MINUTE, t)) or strings ('MINUTE'): both are the
    same call; a name that is no date part stays a name."""
    project = round_trip(SCHEMA + "CREATE OUTPUT STREAM O AS SELECT datefloor(MINUTE, now()) a, "
                                  "dateadd(dd, 1, now()) b, datepart(S.a, now()) c FROM S;\n")
    items = project.statements[-1].query.items
    assert [i.expr.args[0] for i in items[:2]] == [n.Literal("string", "MINUTE"), n.Literal("string", "dd")]
    assert isinstance(items[2].expr.args[0], n.FieldAccess)
    ev = evaluator(Interpreter(), {})
    assert ev("datepart(HOUR, to_timestamp('2024-01-02 03:04:05', 'YYYY-MM-DD HH24:MI:SS'))") == 3


# --- IS [NOT] NULL -------------------------------------------------------------------------------

def test_is_null_is_the_isnull_call():
    """SQL's `x IS NULL` / `x IS NOT NULL` (in CCL's operator table with LIKE and IN) read as
    isnull(x) / not isnull(x): typed boolean, evaluated as ESP's isnull; IS stays usable as a name."""
    text = (SCHEMA + "CREATE OUTPUT STREAM O AS SELECT S.a + 1 IS NULL n, S.p is not null m "
            "FROM S WHERE S.a IS NOT NULL AND NOT S.p IS NULL;\n"
            "CREATE INPUT STREAM T SCHEMA (is integer);\n")
    project = parse_ok(text)
    where = project.statements[1].query.where
    assert isinstance(where.left, n.Unary) and where.left.op == "not"
    assert isinstance(where.left.operand, n.Call) and where.left.operand.func.name == "isnull"
    assert to_ccl(parse_ok(to_ccl(project))) == to_ccl(project)
    analysis = analyze(load_text(text), {})
    assert not analysis.diagnostics
    assert analysis.elements["O"].columns["n"].name == "boolean"
    first = project.statements[1].query.items[0].expr  # + binds tighter: isnull(S.a + 1)
    assert isinstance(first, n.Call) and isinstance(first.args[0], n.Binary)
    interp = Interpreter({})
    assert interp.evaluate(where, {"S": {"a": 1, "p": None}}) is False
    assert interp.evaluate(where, {"S": {"a": 1, "p": Dec("2.00")}}) is True
    assert codes(SCHEMA + "CREATE OUTPUT STREAM O AS SELECT * FROM S WHERE S.a IS 1;") == ["CCL1101"]


KEYED = """CREATE INPUT STREAM KS SCHEMA (Id integer, V float) PRIMARY KEY (Id);
CREATE OUTPUT STREAM KS2 PRIMARY KEY DEDUCED AS SELECT KS.Id, KS.V * 2 V2 FROM KS WHERE KS.V > 0;
CREATE FLEX F IN KS OUT OUTPUT STREAM FO SCHEMA (Id integer, V float) PRIMARY KEY (Id)
BEGIN ON KS { output setOpcode(KS, getOpcode(KS)); }; END;
"""


def test_a_stream_with_a_primary_key_is_a_keyed_stream_run_as_a_delta_stream(tmp_path):
    project = round_trip(KEYED)
    ks, ks2, flex = project.statements
    assert (ks.kind, ks.keyed, ks2.kind, ks2.keyed) == ("delta stream", True, "delta stream", True)
    assert (flex.output.kind, flex.output.keyed) == ("delta stream", True)
    assert to_ccl(project).startswith("CREATE INPUT STREAM KS")
    plain = parse_ok("CREATE INPUT STREAM S SCHEMA (a integer);").statements[0]
    assert (plain.kind, plain.keyed) == ("stream", False)
    assert analyze(load_text(KEYED), {}).diagnostics == []

    from planned import plan_json, typed_parts
    from runtime.engine.changes import Event
    from runtime.engine.flex import make_engine
    path = tmp_path / "k.ccl"
    path.write_text(KEYED)
    plan, diags = plan_json(str(path))
    assert plan is not None, diags
    by_name = {e["name"]: e for e in plan["elements"]}
    assert by_name["KS2"]["key"] == ["Id"]
    events = [Event(0, "i", 1, {"Id": 1, "V": 1.5}), Event(0, "i", 2, {"Id": 2, "V": -1.0}),
              Event(0, "u", 3, {"Id": 1, "V": 3.0}), Event(0, "d", 4, {"Id": 2, "V": -1.0})]
    source = make_engine(*typed_parts(by_name["KS"], plan))  # opcodes pass, nothing is stored
    assert [(o.op, o.values["Id"]) for o in source.process(source.initial_state(), events, 0)] == \
        [("i", 1), ("i", 2), ("u", 1), ("d", 2)]
    derived = make_engine(*typed_parts(by_name["KS2"], plan))  # WHERE on a keyed stream: the update rule
    assert [(o.op, o.values) for o in derived.process(derived.initial_state(), events, 0)] == \
        [("i", {"Id": 1, "V2": 3.0}), ("u", {"Id": 1, "V2": 6.0})]


# --- NOT LIKE ------------------------------------------------------------------------------------

def test_not_like_is_the_negated_like():
    """`x NOT LIKE p` (as `x NOT IN (...)`) reads as NOT (x LIKE p)."""
    text = ("CREATE INPUT STREAM U SCHEMA (url string);\n"
            "CREATE OUTPUT STREAM O AS SELECT * FROM U WHERE U.url NOT LIKE '%.gif' AND U.url LIKE 'http%';\n")
    project = parse_ok(text)
    where = project.statements[1].query.where
    assert isinstance(where.left, n.Unary) and where.left.op == "not"
    assert isinstance(where.left.operand, n.Binary) and where.left.operand.op == "like"
    assert to_ccl(parse_ok(to_ccl(project))) == to_ccl(project)
    assert not analyze(load_text(text), {}).diagnostics
    interp = Interpreter({})
    assert interp.evaluate(where, {"U": {"url": "http://a/b.png"}}) is True
    assert interp.evaluate(where, {"U": {"url": "http://a/b.gif"}}) is False


# --- CREATE LIBRARY (CCL Reference; the Migration Guide's foreign-function example) ---------------

LIBRARIES = """\
CREATE LIBRARY Lib_0 LANGUAGE C FROM 'libforeign.so' ( INTEGER intfun ( ); );
CREATE LIBRARY JLib LANGUAGE java FROM 'com.sybase.Foo' (
    float scale(float, integer);
    money(2) price(string);
);
CREATE INPUT STREAM S SCHEMA (Id integer, Price float);
"""


def test_create_library_parses_prints_and_types_its_functions():
    text = LIBRARIES + ("CREATE OUTPUT STREAM O AS SELECT S.Id, Lib_0.intfun() A, "
                        "JLib.scale(S.Price, 2) B, JLib.price('x') + 1.00d2 C FROM S;")
    project = round_trip(text)
    lib = project.statements[1]
    assert isinstance(lib, n.CreateLibrary) and (lib.name.name, lib.language, lib.source) == (
        "JLib", "java", "com.sybase.Foo")
    assert [(f.name.name, len(f.params)) for f in lib.functions] == [("scale", 2), ("price", 1)]
    call = project.statements[3].query.items[1].expr
    assert (call.library.name, call.func.name, call.args) == ("Lib_0", "intfun", [])
    analysis = analyze(load_text(text), {})
    assert [str(t) for t in analysis.elements["O"].columns.values()] == [
        "integer", "integer", "float", "money(2)"]
    warnings = [d for d in analysis.diagnostics if d.code == "CCL2010"]
    assert len(warnings) == 3 and "Lib_0.intfun() is C code" in warnings[0].message
    assert "JLib.scale() is Java code (CREATE LIBRARY JLib FROM 'com.sybase.Foo')" in warnings[1].message


@pytest.mark.parametrize("call, code", [
    ("Nope.intfun()", "CCL2005"), ("Lib_0.other()", "CCL2005"), ("Lib_0.intfun(1)", "CCL2008"),
    ("JLib.scale('x', 1)", "CCL2102")])
def test_library_calls_are_checked_against_the_declaration(call, code):
    analysis = analyze(load_text(LIBRARIES + f"CREATE OUTPUT STREAM O AS SELECT {call} A FROM S;"), {})
    assert code in [d.code for d in analysis.diagnostics if d.severity == "error"]


def test_create_library_needs_its_keywords_and_a_known_language():
    assert codes("CREATE LIBRARY L LANGUAGE COBOL FROM 'x' ( integer f(); );") == ["CCL1103"]
    assert codes("CREATE LIBRARY L LINGO C FROM 'x' ( integer f(); );") == ["CCL1103"]
    assert codes("CREATE OUTPUT STREAM O AS SELECT (1 + 2).f() A FROM S;") == ["CCL1101"]


def test_a_library_function_named_like_an_aggregate_is_no_aggregate():
    text = ("CREATE LIBRARY M LANGUAGE C FROM 'libm.so' ( float max(float); );\n"
            "CREATE INPUT STREAM S SCHEMA (Id integer, Price float);\n"
            "CREATE OUTPUT STREAM O AS SELECT S.Id, M.max(S.Price) P FROM S WHERE M.max(S.Price) > 1.0;")
    analysis = analyze(load_text(text), {})
    assert [d.code for d in analysis.diagnostics] == ["CCL2010", "CCL2010"]
    assert str(analysis.elements["O"].columns["P"]) == "float"
