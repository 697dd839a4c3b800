"""The compiled partition function and the SPLASH interpreter agree row for row (on Spark).

Hypothesis generates compilable custom blocks (locals, IF/ELSE, CASE, the built-ins of
ccl/plan/partition_functions.py) and rows with nulls, negatives, extreme integers, empty and non-ASCII
strings. Each example evaluates 30 blocks over all its rows in one Spark job and compares every
instance with the interpreter's. Also: HASH and ROUNDROBIN assignment, the UDF path, bad records.
"""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.syntax import nodes as n
from ccl.splash.types import INTEGER, STRING, scalar
from ccl.syntax.parser import parse_text
from ccl.plan.partition_functions import why_not_compilable
from ccl.syntax.printer import to_ccl
from ccl.splash.interpreter import PartitionFunction
from runtime.partition_fn import INSTANCE, BAD_REASON, assign_instances, column_kinds, compile_custom

SOURCE, TARGET = "src", "t"
COUNT_NAME = f"{TARGET}_partitions"
INT_MIN, INT_MAX = -2**31, 2**31 - 1
SCHEMA = "s string, u string, i int, j int"


def _ident(name):
    return n.Ident(name)


def _field(col):
    return n.FieldAccess(n.Var(_ident(SOURCE)), _ident(col))


def _call(name, *args):
    return n.Call(_ident(name), list(args))


def _int_lit(v):
    return n.Literal("integer", v) if v >= 0 else n.Unary("-", n.Literal("integer", -v)) \
        if v != INT_MIN else n.Binary("-", n.Unary("-", n.Literal("integer", INT_MAX)), n.Literal("integer", 1))


small_ints = st.integers(-4, 6)
int_values = st.one_of(small_ints, st.sampled_from([0, 1, 7, 255, INT_MAX, INT_MIN, -1, 65535]))
text = st.one_of(st.sampled_from(["", "a", "Z", "é", "日本", " x ", "US0378331005", "DE0001"]),
                 st.text(max_size=6))


def expressions(var_names):
    vars_ = st.sampled_from(var_names).map(lambda v: n.Var(_ident(v))) if var_names else None
    int_leaves = [int_values.map(_int_lit), st.sampled_from(["i", "j"]).map(_field),
                  st.just(n.Var(_ident(f"{TARGET}_partitions")))]
    if vars_ is not None:
        int_leaves.append(vars_)
    str_leaves = st.one_of(text.map(lambda s: n.Literal("string", s)),
                           st.sampled_from(["s", "u"]).map(_field))

    def extend(ints):
        strs = st.deferred(lambda: str_exprs)
        return st.one_of(
            st.builds(lambda op, a, b: n.Binary(op, a, b), st.sampled_from(["+", "-", "*", "%"]), ints, ints),
            ints.map(lambda a: n.Unary("-", a)),
            ints.map(lambda a: _call("abs", a)),
            st.builds(lambda a, b: _call("mod", a, b), ints, ints),
            st.builds(lambda a, b: _call("coalesce", a, b), ints, ints),
            strs.map(lambda s: _call("ascii", s)),
            strs.map(lambda s: _call("length", s)),
            st.builds(lambda c, a, b: n.Case(None, [n.WhenThen(c, a)], b), bools(ints, strs), ints, ints),
        )

    ints = st.recursive(st.one_of(*int_leaves), extend, max_leaves=6)

    str_exprs = st.recursive(str_leaves, lambda s: st.one_of(
        st.builds(lambda a, p, l: _call("substr", a, _int_lit(p), _int_lit(l)), s, small_ints, small_ints),
        st.builds(lambda a, p: _call("substr", a, _int_lit(p)), s, small_ints),
        st.builds(lambda a, k: _call("left", a, _int_lit(k)), s, small_ints),
        st.builds(lambda a, k: _call("right", a, _int_lit(k)), s, small_ints),
        st.builds(lambda f, a: _call(f, a), st.sampled_from(["upper", "lower", "trim", "ltrim", "rtrim"]), s),
        st.builds(lambda a, b: n.Binary("+", a, b), s, s),
        st.builds(lambda a, b: _call("firstnonnull", a, b), s, s),
    ), max_leaves=4)
    return ints, str_exprs


def bools(ints, strs):
    cmp = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
    leaves = st.one_of(st.builds(lambda op, a, b: n.Binary(op, a, b), cmp, ints, ints),
                       st.builds(lambda op, a, b: n.Binary(op, a, b), cmp, strs, strs),
                       strs.map(lambda s: _call("isnull", s)),
                       ints.map(lambda a: _call("isnull", a)))
    return st.recursive(leaves, lambda b: st.one_of(
        st.builds(lambda op, x, y: n.Binary(op, x, y), st.sampled_from(["and", "or"]), b, b),
        b.map(lambda x: n.Unary("not", x))), max_leaves=3)


@st.composite
def blocks(draw):
    stmts, names = [], []
    for k in range(draw(st.integers(0, 3))):
        ints, _ = expressions(names)
        name = f"v{k}"
        stmts.append(n.VarDecl(n.NamedType("integer"), [n.Declarator(_ident(name), draw(ints))]))
        names.append(name)
    ints, strs = expressions(names)
    if draw(st.booleans()):
        then = n.Block([n.Return(draw(ints))])
        otherwise = n.Block([n.Return(draw(ints))]) if draw(st.booleans()) else None
        stmts.append(n.If(draw(bools(ints, strs)), then, otherwise))
    ending = draw(st.sampled_from(["return", "return", "return", "null", "none"]))
    if ending == "return":
        stmts.append(n.Return(draw(ints)))
    elif ending == "null":
        stmts.append(n.Return(n.Literal("null", None)))
    return n.Block(stmts)


rows = st.tuples(st.one_of(st.none(), text), st.one_of(st.none(), text),
                 st.one_of(st.none(), int_values, st.integers(INT_MIN, INT_MAX)),
                 st.one_of(st.none(), int_values))


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(blocks(), min_size=30, max_size=30), st.lists(rows, min_size=1, max_size=25),
       st.integers(1, 7))
def test_compiled_blocks_agree_with_the_interpreter(spark, block_list, row_list, count):
    df = spark.createDataFrame(row_list, SCHEMA)
    kinds = {"s": "string", "u": "string", "i": "integer", "j": "integer"}
    for block in block_list:
        assert why_not_compilable(block, SOURCE, kinds, COUNT_NAME) is None, to_ccl(block)
    columns = [compile_custom(b, SOURCE, TARGET, count, kinds).alias(f"b{k}")
               for k, b in enumerate(block_list)]
    result = df.select("*", *columns).collect()
    types = {c: scalar(kind) for c, kind in kinds.items()}
    for k, block in enumerate(block_list):
        fn = PartitionFunction(block, SOURCE, TARGET, count, column_types=types)
        for spark_row in result:
            row = {c: spark_row[c] for c in ("s", "u", "i", "j")}
            expected, _ = fn.assign(row)
            assert spark_row[f"b{k}"] == expected, (
                f"block {k} differs on row {row} (count {count}):\n{to_ccl(block)}\n"
                f"Spark: {spark_row[f'b{k}']}, interpreter: {expected}")


def assign(df, spec, *args, **kw):
    """assign_instances with the compiler's decision on a custom block, as the plan carries it."""
    why = (why_not_compilable(spec.body, SOURCE, column_kinds(df.schema), COUNT_NAME)
           if spec.body is not None else None)
    return assign_instances(df, spec, *args, why_not=why, **kw)


def _spec(text):
    project, diags = parse_text(f"CREATE OUTPUT STREAM t PARTITION BY src {text} PARTITIONS 3 "
                                "AS SELECT * FROM src;")
    assert not diags
    return project.statements[0].partition.specs[0]


def test_seed_block_null_rows_are_bad_records_and_others_land_in_range(spark):
    spec = _spec("{ integer h := ascii(substr(src.s, 1, 1)); return h % t_partitions; }")
    df = spark.createDataFrame([("Apple", 1, 0), (None, 2, 0), ("Zeta", 3, 0), ("", 4, 0)], "s string, i int, j int")
    out, how = assign(df, spec, SOURCE, TARGET, 3)
    got = {r.i: (r[INSTANCE], r[BAD_REASON]) for r in out.collect()}
    assert how.path == "compiled"
    assert got[1] == (ord("A") % 3, None) and got[3] == (ord("Z") % 3, None) and got[4] == (0, None)
    assert got[2][0] is None and "no integer" in got[2][1]


def test_negative_results_use_a_modulo_that_is_never_negative(spark):
    spec = _spec("{ return -7; }")
    out, _ = assign(spark.createDataFrame([(1,)], "i int"), spec, SOURCE, TARGET, 3)
    assert out.collect()[0][INSTANCE] == 2


def test_blocks_outside_the_subset_run_the_interpreter(spark):
    spec = _spec("{ integer k := 0; integer h := 0; while (k < length(src.s)) { "
                 "h := h * 31 + ascii(substr(src.s, k + 1, 1)); k := k + 1; } return h; }")
    df = spark.createDataFrame([("abc", 1), ("", 2), (None, 3)], "s string, i int")
    out, how = assign(df, spec, SOURCE, TARGET, 3)
    assert how.path == "interpreter" and "while" in how.why
    fn = PartitionFunction(spec.body, SOURCE, TARGET, 3, column_types={"s": STRING, "i": INTEGER})
    for r in out.collect():
        expected, reason = fn.assign({"s": r.s, "i": r.i})
        assert (r[INSTANCE], r[BAD_REASON]) == (expected, reason)


def test_interpreter_failures_become_bad_records(spark):
    spec = _spec("{ while (true) { } return 1; }")
    out, how = assign(spark.createDataFrame([(1,)], "i int"), spec, SOURCE, TARGET, 3)
    row = out.collect()[0]
    assert how.path == "interpreter" and row[INSTANCE] is None and row[BAD_REASON]


def test_hash_and_roundrobin(spark):
    df = spark.createDataFrame([(f"k{i % 5}", i) for i in range(40)], "s string, i long")
    out, how = assign(df, _spec("HASH(s)"), SOURCE, TARGET, 3)
    by_key = {}
    for r in out.collect():
        assert 0 <= r[INSTANCE] < 3
        by_key.setdefault(r.s, set()).add(r[INSTANCE])
    assert how.path == "hash" and all(len(v) == 1 for v in by_key.values())
    out, how = assign(df, _spec("ROUNDROBIN"), SOURCE, TARGET, 3, sequence="i")
    assert how.path == "roundrobin" and {r.i: r[INSTANCE] for r in out.collect()} == {i: i % 3 for i in range(40)}
    # derived rows: the numbers of every other input line, three rows per number (a filter, then
    # a Flex): by number alone they would all land on one instance; hashed they spread
    derived = spark.createDataFrame([(2 * i, j) for i in range(40) for j in range(3)], "i long, j long")
    out, _ = assign(derived, _spec("ROUNDROBIN"), SOURCE, TARGET, 2, sequence=("i", "j"))
    counts = [r[INSTANCE] for r in out.collect()].count
    assert 40 <= counts(0) <= 80 and counts(0) + counts(1) == 120


def test_bad_records_are_written_counted_and_logged_once_per_batch(spark, tmp_path, caplog):
    from runtime.bad_records import BadRecordCounts, split_bad_records

    spec = _spec("{ if (src.i > 2) return src.i; }")  # no RETURN for i <= 2: bad records
    df = spark.createDataFrame([(i, f"r{i}") for i in range(1, 6)], "i int, s string")
    counts = BadRecordCounts("t")
    for batch_id in (0, 1):
        assigned, _ = assign(df, spec, SOURCE, TARGET, 3)
        with caplog.at_level("WARNING", logger="ccl.runtime"):
            good = split_bad_records(assigned, "t", batch_id, str(tmp_path / "bad"), counts)
        assert sorted(r.i for r in good.collect()) == [3, 4, 5]
    assert counts.total == 4 and list(counts.by_reason) == ["the partition function returned no integer"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "ccl.runtime"]
    assert len(warnings) == 2 and all("2 bad record(s)" in w for w in warnings)
    written = spark.read.json(str(tmp_path / "bad")).collect()
    assert sorted((r.batch, r.row.i, r.row.s) for r in written) == [(0, 1, "r1"), (0, 2, "r2"),
                                                                   (1, 1, "r1"), (1, 2, "r2")]
    assert {r.element for r in written} == {"t"}


def test_leading_substring_rewrite_keeps_the_semantics(spark):
    df = spark.createDataFrame([("abc",), ("",), (None,), ("é",)], "s string")
    blocks = [_spec("{ return ascii(substr(src.s, 1%s)); }" % tail).body
              for tail in ("", ", 0", ", 1", ", 2", ", 5")]
    row_values = [r.s for r in df.collect()]
    columns = [compile_custom(b, SOURCE, TARGET, 1000, {"s": "string"}).alias(f"b{k}")
               for k, b in enumerate(blocks)]
    result = df.select("s", *columns).collect()
    for k, block in enumerate(blocks):
        fn = PartitionFunction(block, SOURCE, TARGET, 1000, column_types={"s": STRING})
        assert [r[f"b{k}"] for r in result] == [fn.assign({"s": v})[0] for v in row_values], to_ccl(block)


def test_a_money_literal_leaves_the_function_to_the_interpreter():
    """Spark has no money literal of ours: a block with one is run by the SPLASH interpreter."""
    project, diags = parse_text("CREATE OUTPUT STREAM t PARTITION BY src { if (src.i > 10.00d2) "
                                "return 1; return 0; } PARTITIONS 2 AS SELECT * FROM src;")
    assert not diags
    body = project.statements[0].partition.specs[0].body
    assert why_not_compilable(body, SOURCE, {"i": "integer"}, COUNT_NAME) == "a money literal"
