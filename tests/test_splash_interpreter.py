"""The SPLASH interpreter (ccl/splash): statements, scopes, functions, budget, partition functions."""
from __future__ import annotations

import time
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.syntax import nodes as n
from ccl.syntax.parser import parse_text
from ccl.splash import (BudgetExhausted, Declarations, Interpreter, Long, PartitionFunction,
                        SplashError, declare_globals)

SEED = "integer hashValue := ascii(substr(priceW.isin,1,1)); return hashValue % maxPriceW_partitions;"


def block(code: str) -> n.Block:
    """The body of ``PARTITION BY priceW { code }``."""
    project, diags = parse_text(f"CREATE OUTPUT STREAM o PARTITION BY priceW {{ {code} }} PARTITIONS 4 "
                                "AS SELECT * FROM priceW;")
    assert not diags, diags
    return project.statements[0].partition.specs[0].body


def declare(code: str) -> list[n.Node]:
    """The items of ``DECLARE code END;``."""
    project, diags = parse_text(f"DECLARE {code} END;")
    assert not diags, diags
    return project.statements[0].block.items


def run(code: str, row: dict | None = None, **options: object) -> object:
    """The value the block returns (None when it does not return)."""
    interp = Interpreter(**options)
    return interp.run_block(block(code), {"priceW": row or {}}).value


def partition(code: str, count: int = 4, **options: object) -> PartitionFunction:
    return PartitionFunction(block(code), "priceW", "maxPriceW", count, **options)


# --- the partition function entry point -----------------------------------------------------------

@pytest.mark.parametrize("isin, count, expected", [
    ("US0378331005", 2, 1), ("DE0007164600", 2, 0), ("GB0002634946", 2, 1), ("A", 3, 2), ("é", 4, 1),
    ("", 2, 0),
])
def test_seed_block(isin, count, expected):
    pf = partition(SEED, count, column_types={"isin": "string", "price": "money(2)"})
    assert pf.assign({"isin": isin, "price": Decimal("1.50")}) == (expected, None)


def test_seed_block_with_null_and_missing_column():
    pf = partition(SEED, 2)
    assert pf.assign({"isin": None}) == (None, "returned null")
    assert pf.assign({"price": 1}) == (None, "'priceW' has no column 'isin'")


@pytest.mark.parametrize("value, count, expected", [
    ("-7", 3, 2), ("-1", 4, 3), ("7", 3, 1), ("0", 1, 0), ("-2147483647 - 1", 3, 1), ("9223372036854775807", 10, 7),
    ("-9223372036854775807 - 1", 7, 6),
])
def test_result_is_brought_into_range_by_pmod(value, count, expected):
    assert partition(f"return {value};", count).assign({}) == (expected, None)


@pytest.mark.parametrize("code, reason", [
    ("return null;", "returned null"),
    ("return;", "returned null"),
    ("integer x := 1;", "no return"),
    ("if (false) return 1;", "no return"),
    ("exit; return 1;", "no return"),
    ("return 1.5;", "returned float, not an integer"),
    ("return 'a';", "returned string, not an integer"),
    ("return true;", "returned boolean, not an integer"),
    ("return to_decimal(1, 5, 0);", "returned decimal, not an integer"),
    ("return cast(interval, 5);", "returned interval, not an integer"),
    ("return 1 / 0;", "returned null"),
    ("return nosuch;", "unknown name 'nosuch'"),
    ("return nosuch(1);", "unknown function 'nosuch'"),
    ("return to_integer('x');", "cannot convert 'x' to integer"),
    ("while (true) {}", "step budget of 100000 exhausted (endless loop?)"),
])
def test_reasons(code, reason):
    assert partition(code).assign({}) == (None, reason)


def test_count_variable_and_its_protection():
    assert partition("return maxPriceW_partitions * 10 + 1;", 7).assign({}) == (71 % 7, None)
    assert partition("maxPriceW_partitions := 2; return 0;").assign({}) == \
        (None, "parameter 'maxPriceW_partitions' cannot be assigned")


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError):
        partition("return 0;", 0)


def test_input_row_is_read_only():
    assert partition("priceW.isin := 'x'; return 0;").assign({"isin": "a"})[1] == \
        "the input row cannot be assigned (field 'isin')"
    assert partition("priceW := priceW; return 0;").assign({})[1] == "the input row 'priceW' cannot be assigned"


def test_column_types_decide_integer_or_long():
    code = "return priceW.n * 2;"
    assert partition(code, 1000, column_types={"n": "integer"}).run({"n": 2**30}).value == -2**31
    assert partition(code, 1000, column_types={"n": "long"}).run({"n": 2**30}).value == Long(2**31)
    assert partition(code, 1000).run({"n": 2**31}).value == Long(2**32)  # inferred: too big for integer


def test_globals_and_functions_from_declarations():
    decl = declare_globals(declare(
        "integer base := 10; long big := base * 2; PARAMETER integer shift := 1; PARAMETER integer other := 5;"
        "typedef money(2) price_t; price_t p := 1; "
        "integer f(integer x) { return x + base + shift; }"), parameters={"shift": 3})
    assert decl.values["big"] == 20 and isinstance(decl.values["big"], Long)
    assert decl.values["shift"] == 3 and decl.values["other"] == 5
    assert decl.constants == {"shift", "other"} and decl.types["p"].name == "money"
    pf = PartitionFunction(block("return f(priceW.v);"), "priceW", "t", 100, decl)
    assert pf.assign({"v": 1}) == (14, None)
    assert PartitionFunction(block("shift := 2; return 0;"), "priceW", "t", 2, decl).assign({})[1] == \
        "parameter 'shift' cannot be assigned"


def test_global_changes_do_not_outlive_a_call():
    decl = declare_globals(declare("integer counter := 0; vector(integer) seen := new vector(integer);"))
    pf = PartitionFunction(block("counter := counter + 1; push_back(seen, 1); return counter * 10 + size(seen);"),
                           "priceW", "t", 1000, decl)
    assert pf.assign({}) == (11, None)
    assert pf.assign({}) == (11, None)


def test_globals_given_as_a_mapping_with_types():
    interp = Interpreter({"g": 5}, global_types={"g": "long"})
    assert interp.run_block(block("return g * 2147483647;")).value == Long(5 * 2147483647)


# --- statements -----------------------------------------------------------------------------------

def test_declarations_and_initialisers():
    assert run("integer a := 1, b := a + 1; integer c; if (isnull(c)) return b; return 0;") == 2
    assert run("float f := 1; return f;") == 1.0 and isinstance(run("float f := 1; return f;"), float)
    assert run("long l := 5; return l * 2147483647;") == Long(5 * 2147483647)


def test_narrowing_assignment_is_an_error():
    with pytest.raises(SplashError, match="cannot assign a long to variable 'x' of type integer"):
        run("integer x := 3000000000;")
    with pytest.raises(SplashError, match="cannot assign a float"):
        run("money(2) m := 1.5;")
    with pytest.raises(SplashError, match="cannot assign a string"):
        run("integer x; x := 'a';")


def test_redeclaration_in_the_same_scope_is_an_error_but_shadowing_is_not():
    with pytest.raises(SplashError, match="already declared"):
        run("integer a := 1; integer a := 2;")
    assert run("integer a := 1; { integer a := 2; a := 3; } return a;") == 1
    assert run("integer a := 1; { a := 5; } return a;") == 5


def test_block_scopes_end():
    with pytest.raises(SplashError, match="unknown name 'local1'"):
        run("{ integer local1 := 1; } return local1;")
    with pytest.raises(SplashError, match="unknown variable 'nope'"):
        run("nope := 1;")


def test_if_else_and_null_condition():
    assert run("if (1 < 2) return 1; else return 2;") == 1
    assert run("if (null) return 1; else return 2;") == 2
    assert run("if (priceW.x = 1) return 1; else return 2;", {"x": None}) == 2
    assert run("if (0) return 1; return 2;") == 2
    with pytest.raises(SplashError, match="condition"):
        run("if ('yes') return 1;")


def test_while_break_continue():
    code = """integer i := 0, total := 0;
              while (true) { i := i + 1; if (i > 10) break; if (i % 2 = 0) continue; total := total + i; }
              return total;"""
    assert run(code) == 1 + 3 + 5 + 7 + 9
    assert run("integer i := 0; while (null) { i := 1; } return i;") == 0


def test_for_in_vectors_and_dictionaries():
    assert run("""vector(integer) v := new vector(integer); push_back(v, 3); push_back(v, 4);
                  integer s := 0; for (x in v) { s := s * 10 + x; } return s;""") == 34
    assert run("""dictionary(string, integer) d := new dictionary(string, integer); d['b'] := 1; d['a'] := 2;
                  string keys := ''; for (k in d) { keys := keys + k; } return keys;""") == "ba"
    assert run("vector(integer) v; integer n := 0; for (x in v) { n := n + 1; } return n;") == 0
    # a snapshot: growing the vector inside the loop does not extend it
    assert run("""vector(integer) v := new vector(integer); push_back(v, 1);
                  for (x in v) { push_back(v, x); } return size(v);""") == 2
    assert run("""vector(integer) v := new vector(integer); push_back(v, 1); push_back(v, 2); push_back(v, 3);
                  integer s := 0; for (x in v) { if (x = 2) continue; if (x = 3) break; s := s + x; }
                  return s;""") == 1


def test_switch_falls_through_until_break():
    code = """string out := '';
              switch (priceW.k) { case 1: out := out + 'a'; case 2, 3: out := out + 'b'; break;
                                  default: out := out + 'd'; case 4: out := out + 'e'; }
              return out;"""
    assert run(code, {"k": 1}) == "ab"
    assert run(code, {"k": 3}) == "b"
    assert run(code, {"k": 4}) == "e"
    assert run(code, {"k": 9}) == "de"
    assert run(code, {"k": None}) == "de"
    assert run("switch (1) { case 2: return 2; } return 0;") == 0


def test_break_in_a_switch_leaves_only_the_switch_and_continue_reaches_the_loop():
    code = """integer i := 0, n := 0;
              while (i < 5) { i := i + 1; switch (i) { case 2: break; case 3: continue; default: n := n + 1; }
                              n := n + 10; }
              return n;"""
    assert run(code) == (1 + 10) + 10 + 0 + (1 + 10) + (1 + 10)


def test_break_and_continue_outside_loops_are_errors():
    with pytest.raises(SplashError, match="break outside"):
        run("break;")
    with pytest.raises(SplashError, match="continue outside"):
        run("switch (1) { case 1: continue; }")


def test_return_and_exit():
    assert run("return;") is None
    interp = Interpreter()
    outcome = interp.run_block(block("exit; return 1;"))
    assert not outcome.returned and outcome.value is None
    assert interp.run_block(block("integer x := 1;")).returned is False


def test_expression_statements_and_output():
    assert run("vector(integer) v := new vector(integer); push_back(v, 1); (size(v)); return size(v);") == 1
    with pytest.raises(SplashError, match="Flex"):
        run("output 1;")


# --- containers and records -----------------------------------------------------------------------

def test_dictionaries():
    code = """dictionary(string, long) d := new dictionary(string, long);
              d['a'] := 1; d['a'] := d['a'] + 1; d['b'] := 7;
              if (isnull(d['missing'])) return d['a'] * 10 + size(d);"""
    assert run(code) == Long(22)
    assert run("dictionary(string, integer) d; return d['x'];") is None
    with pytest.raises(SplashError, match="null vector or dictionary"):
        run("dictionary(string, integer) d; d['x'] := 1;")
    with pytest.raises(SplashError, match="key cannot be null"):
        run("dictionary(string, integer) d := new dictionary(string, integer); d[null] := 1;")
    with pytest.raises(SplashError, match="cannot assign an integer"):
        run("dictionary(string, integer) d := new dictionary(string, integer); d[1] := 1;")


def test_dictionary_keys_are_converted_to_the_key_type():
    assert run("""dictionary(long, string) d := new dictionary(long, string); d[1] := 'one';
                  return d[1];""") == "one"


def test_vectors():
    code = "vector(string) v := new vector(string); push_back(v, 'a'); push_back(v, 'b'); v[1] := 'c';"
    assert run(code + "return v[0] + v[1];") == "ac"
    assert run(code + "return v[2];") is None
    assert run(code + "return v[-1];") is None
    assert run(code + "return v[null];") is None
    with pytest.raises(SplashError, match="out of range"):
        run(code + "v[5] := 'x';")
    with pytest.raises(SplashError, match="index must be an integer"):
        run(code + "return v[1.5];")


def test_containers_are_shared_references():
    assert run("""vector(integer) a := new vector(integer); vector(integer) b := a; push_back(b, 1);
                  return size(a);""") == 1


def test_records():
    code = "typeof(priceW) r := [isin = 'X'; | price = 2;]; r.price := r.price + 1;"
    assert run(code + "return r.price;") == 3
    assert run(code + "return r.isin;") == "X"
    with pytest.raises(SplashError, match="no field 'nope'"):
        run(code + "return r.nope;")
    with pytest.raises(SplashError, match="no field 'nope'"):
        run(code + "r.nope := 1;")
    assert run("typeof(priceW) r; return r.isin;") is None
    with pytest.raises(SplashError, match="cannot set field"):
        run("typeof(priceW) r; r.isin := 'a';")


def test_input_row_as_a_record_and_opcodes():
    assert run("return priceW.isin + '!';", {"isin": "A"}) == "A!"
    assert run("return upsert + delete;") == 12


# --- functions, recursion, budget -----------------------------------------------------------------

FUNCS = """
integer fact(integer n) { if (n <= 1) return 1; return n * fact(n - 1); }
long down(long n) { if (n = 0) return 0; return down(n - 1); }
integer forever(integer n) { return forever(n + 1); }
boolean isEven(integer n) { if (n = 0) return true; return isOdd(n - 1); }
boolean isOdd(integer n) { if (n = 0) return false; return isEven(n - 1); }
integer noReturn(integer n) { integer x := n; }
integer seesGlobals() { return g; }
integer seesRow() { return priceW.isin; }
integer stop() { exit; }
"""


@pytest.fixture(scope="module")
def funcs() -> Interpreter:
    decl = declare_globals(declare(FUNCS + " integer g := 42;"))
    return Interpreter(decl)


def test_recursion(funcs):
    assert funcs.call("fact", [10]) == 3628800
    assert funcs.call("fact", [13]) == 1932053504  # 13! wraps at 32 bits
    assert funcs.call("isEven", [50]) is True and funcs.call("isOdd", [7]) is True
    assert funcs.call("down", [150]) == 0


def test_recursion_limit(funcs):
    with pytest.raises(SplashError, match="nested deeper than 200"):
        funcs.call("forever", [0])
    with pytest.raises(SplashError, match="nested deeper than 200"):
        funcs.call("down", [250])
    deep = Interpreter(declare_globals(declare(FUNCS)), max_depth=1000, budget=1_000_000)
    assert deep.call("down", [900]) == 0


def test_function_scopes_and_results(funcs):
    assert funcs.call("noReturn", [1]) is None
    assert funcs.call("seesGlobals") == 42
    with pytest.raises(SplashError, match="unknown name 'priceW'"):
        funcs.call("seesRow")
    assert funcs.call("stop") is None
    with pytest.raises(SplashError, match="takes 1 argument"):
        funcs.call("fact", [1, 2])
    with pytest.raises(SplashError, match="unknown function"):
        funcs.call("nosuch")


def test_argument_and_result_conversion():
    interp = Interpreter(declare_globals(declare(
        "long widen(long x) { return x; } integer narrow(long x) { return x; }")))
    assert isinstance(interp.call("widen", [1]), Long)
    with pytest.raises(SplashError, match="result of narrow"):
        interp.call("narrow", [1])


def test_function_call_from_a_partition_block():
    decl = declare_globals(declare(FUNCS + " integer g := 42;"))
    pf = PartitionFunction(block("return fact(priceW.n) + maxPriceW_partitions;"), "priceW", "maxPriceW", 7, decl)
    assert pf.assign({"n": 4}) == ((24 + 7) % 7, None)


def test_endless_loop_ends_quickly_as_budget_exhausted():
    start = time.perf_counter()
    with pytest.raises(BudgetExhausted):
        run("while (true) {}")
    assert time.perf_counter() - start < 1.0
    with pytest.raises(BudgetExhausted, match="budget of 50"):
        run("integer i := 0; while (i < 100) { i := i + 1; }", budget=50)
    assert run("integer i := 0; while (i < 100) { i := i + 1; } return i;", budget=1000) == 100


def test_budget_is_per_call():
    pf = partition("integer i := 0; while (i < 30) { i := i + 1; } return i;", 100, budget=200)
    assert pf.assign({}) == (30, None) and pf.assign({}) == (30, None)


def test_string_growth_is_limited():
    with pytest.raises(SplashError, match="string longer"):
        run("string s := 'ab'; while (true) { s := s + s; }")


def test_declarations_object_can_be_extended():
    base = declare_globals(declare("integer a := 1;"))
    more = declare_globals(declare("integer b := a + 1;"), base=base)
    assert more.values == {"a": 1, "b": 2} and base.values == {"a": 1}
    assert isinstance(more, Declarations)


# --- nothing but SplashError escapes --------------------------------------------------------------

_LEAVES = ["1", "0", "-1", "2147483647", "9223372036854775807", "1.5", "0.0", "'a'", "''", "true",
           "null", "priceW.i", "priceW.l", "priceW.f", "priceW.s", "priceW.d", "priceW.t", "priceW.n",
           "v", "d", "rec", "maxPriceW_partitions"]
_UNARY = ["-{}", "not {}", "abs({})", "ceil({})", "round({}, 2)", "upper({})", "length({})", "ascii({})",
          "string({})", "to_integer({})", "to_float({})", "sqrt({})", "isnull({})", "size({})", "year({})",
          "to_decimal({}, 5, 2)", "cast(long, {})", "v[{}]", "d[{}]", "{}.price"]
_BINARY = ["{} + {}", "{} - {}", "{} * {}", "{} / {}", "{} % {}", "{} ^ {}", "{} = {}", "{} < {}",
           "{} and {}", "{} or {}", "{} like {}", "substr({}, {}, 2)", "coalesce({}, {})", "mod({}, {})",
           "replace({}, {}, 'x')", "{} in (1, {})", "power({}, {})", "left({}, {})"]


def _expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        st.sampled_from(_LEAVES),
        lambda inner: st.one_of(
            st.builds(lambda f, a: f.format(f"({a})"), st.sampled_from(_UNARY), inner),
            st.builds(lambda f, a, b: f.format(f"({a})", f"({b})"), st.sampled_from(_BINARY), inner, inner)),
        max_leaves=6)


_PRELUDE = ("vector(integer) v := new vector(integer); push_back(v, 1); "
            "dictionary(string, integer) d := new dictionary(string, integer); d['a'] := 1; "
            "typeof(priceW) rec := [i = 1; | price = 2;]; ")
_ROW = {"i": 3, "l": 2**40, "f": -0.0, "s": "x%", "d": Decimal("1.25"), "t": None, "n": None}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions(), st.sampled_from(["return {};", "if ({}) return 1; return 2;",
                                        "integer x := 0; while ({}) {{ x := x + 1; }} return x;"]))
def test_random_code_raises_only_splash_errors(expr, shape):
    pf = PartitionFunction(block(_PRELUDE + shape.format(expr)), "priceW", "maxPriceW", 5, budget=2000)
    instance, reason = pf.assign(_ROW)
    assert (instance is None) != (reason is None)
    assert instance is None or 0 <= instance < 5
    assert reason is None or not reason.startswith("internal error"), reason


def test_nextval_counts_in_the_bound_store():
    """nextval() (and uniqueval()) count 1, 2, ... in the bound store, so an engine's instance state
    keeps the sequence across calls and batches; without a store every call starts again."""
    interp = Interpreter()
    store: dict = {}
    interp.bind(store)
    assert [interp.run_block(block("return nextval();")).value for _ in range(3)] == [1, 2, 3]
    assert interp.run_block(block("long a := nextval(); return uniqueval() - a;")).value == 1
    other = Interpreter()
    other.bind(dict(store))  # a restored state goes on from where it was
    assert other.run_block(block("return nextval();")).value == 6
    assert isinstance(other.run_block(block("return nextval();")).value, Long)
    assert Interpreter().run_block(block("return nextval();")).value == 1


def test_getrowid_is_the_sequence_number_of_the_row_at_hand():
    """An engine sets the input row's sequence number (Interpreter.row_id) before evaluating:
    getrowid(rec) gives it as a long; with no row at hand it is null."""
    interp = Interpreter()
    assert interp.run_block(block("return getrowid(priceW);"), {"priceW": {}}).value is None
    interp.row_id = 4294967298
    value = interp.run_block(block("return getrowid(priceW);"), {"priceW": {}}).value
    assert value == 4294967298 and isinstance(value, Long)


def test_functions_of_one_declare_block_call_each_other():
    from ccl.splash import declare_globals
    decl = declare_globals(declare(
        "boolean odd(integer x) { if (x = 0) { return false; } else { return even(x - 1); } }"
        "boolean even(integer x) { if (x = 0) { return true; } else { return odd(x - 1); } }"))
    interp = Interpreter(decl)
    assert [interp.call("odd", [k]) for k in (1, 2, 5)] == [True, False, True]


# --- hot paths keep the rules (runtime-flex.md, per-event cost) -------------------------------------

def test_blocks_that_declare_nothing_see_and_change_the_variables_around_them():
    assert run("integer a := 1; if (true) { a := a + 1; } while (a < 5) { a := a + 1; } return a;") == 5
    assert run("integer a := 1; if (true) { if (true) { integer a := 7; a := 8; } a := a + 10; } "
               "return a;") == 11
    with pytest.raises(SplashError, match="unknown name 'b'"):
        run("if (true) { if (true) { integer b := 1; } } return b;")
    # a variable declared in a loop's body is new each time round
    assert run("integer n := 0; integer s := 0; while (n < 3) { n := n + 1; integer x; "
               "if (isnull(x)) { s := s + 1; } x := 5; } return s;") == 3


def test_plain_numbers_and_strings_compare_and_compute_as_before():
    from ccl.splash.operators import arithmetic, comparison
    nan = float("nan")
    assert comparison("=", nan, nan) is True and comparison("<", 1.0, nan) is True
    assert comparison("=", -0.0, 0.0) is True and comparison("<", "B", "a") is True
    assert comparison(">=", 3, 3) is True and comparison("<>", 2, 3.0) is True
    with pytest.raises(SplashError, match="cannot compare"):
        comparison("=", True, 1)
    assert arithmetic("+", 1, 2.5) == 3.5 and arithmetic("/", 7, -2) == -3
    assert arithmetic("+", 2**31 - 1, 1) == -2**31 and arithmetic("/", 1.0, 0) is None
    assert arithmetic("*", Long(2), 3) == Long(6) and type(arithmetic("*", Long(2), 3)) is Long


def test_input_records_are_typed_once_and_used_as_they_are():
    interp = Interpreter(source_types={"priceW": {"v": "long", "n": "integer", "s": "string"}})
    rec = interp.input_record("priceW", {"v": 5, "n": 3, "s": "x", "extra": 2**40}, opcode=3,
                              key_fields=["s"])
    assert type(rec["v"]) is Long and type(rec["n"]) is int and type(rec["extra"]) is Long
    assert rec.opcode == 3 and rec.key_fields == ("s",) and rec.readonly and rec.source == "priceW"
    code = block("return getOpcode(priceW) * 100 + priceW.v;")
    assert interp.run_block(code, {"priceW": rec}).value == 305
    with pytest.raises(SplashError, match="cannot be assigned"):
        interp.run_block(block("priceW.n := 1;"), {"priceW": rec})
    # a record of another source is made anew, as any mapping
    other = interp.input_record("other", {"v": 1})
    assert interp.run_block(block("return getOpcode(priceW);"), {"priceW": other}).value == 1


def test_names_resolve_to_locals_globals_and_rows_in_that_order():
    decl = declare_globals(declare("integer g := 1; integer priceW := 7; integer f(integer g) { return g * 10; } "
                                   "integer h() { return g; }"))
    interp = Interpreter(decl)

    def ret(code: str) -> object:
        return interp.run_block(block(code), {"priceW": {"v": 2}}).value
    assert ret("return g + h();") == 2
    assert ret("integer g := 5; return g + h() + f(3);") == 36   # a function sees no caller's locals
    assert ret("if (true) { integer g := 5; } return g;") == 1
    assert ret("return priceW;") == 7                            # a global hides an input row
    assert ret("vector(integer) v := new vector(integer); push_back(v, 4); integer s := 0; "
               "for (g in v) { s := s + g * 100; } return s + g;") == 401   # the loop's g ends with it


# --- dictionary reads and writes with their common case inline (against get/set_element) ---------

_KEY_VALUE_TYPES = ["integer", "long", "float", "string", "boolean", "money(2)", "interval"]
_ANY_VALUES = st.sampled_from([None, 0, 1, -1, 2**31, -2**31 - 1, 2**40, 2**63, Long(5), 1.5, -0.0,
                               float("nan"), "7", "x", "", True, False, Decimal("1.5")])


def _items(d: dict) -> list:
    """A dictionary's entries, comparable with NaN and -0.0 (type and repr of key and value)."""
    return [(type(k), repr(k), type(v), repr(v)) for k, v in d.items()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_KEY_VALUE_TYPES), st.sampled_from(_KEY_VALUE_TYPES), _ANY_VALUES, _ANY_VALUES,
       st.booleans())
def test_dictionary_index_of_an_input_field_is_get_and_set_element(kt, vt, key, value, plain_index):
    """``d[S.k] := S.v`` and ``d[S.k]`` of a global dictionary (read and written inline in their
    common case: a key and value of the dictionary's kinds) do what get_element and set_element do:
    the same entries, the same value back, the same errors."""
    from ccl.splash import Dictionary, as_type
    from ccl.splash.machine import get_element, set_element
    read = "d[coalesce(priceW.k, priceW.k)]" if plain_index else "d[priceW.k]"
    decl = declare_globals(declare(f"dictionary({kt}, {vt}) d := new dictionary({kt}, {vt});"))
    interp = Interpreter(decl)
    store = interp.initial_values()
    interp.bind(store)
    row = {"k": key, "v": value}
    try:
        got = ("ok", interp.run_block(block(f"d[priceW.k] := priceW.v; return {read};"),
                                      {"priceW": row}).value)
    except SplashError as e:
        got = ("error", e.reason)
    expected_d = Dictionary(key=as_type(kt), value=as_type(vt))
    try:
        rec = interp.input_record("priceW", row)
        set_element(expected_d, rec["k"], rec["v"])
        expected = ("ok", get_element(expected_d, rec["k"]))
    except SplashError as e:
        expected = ("error", e.reason)
    assert (got[0], type(got[1]), repr(got[1])) == (expected[0], type(expected[1]), repr(expected[1]))
    assert _items(store["d"]) == _items(expected_d)
