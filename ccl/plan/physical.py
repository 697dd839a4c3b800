"""The rules of how the runtime executes each planned element: the native Spark path or the
per-instance path, over the plan's JSON form. Only the compiler applies them
(ccl/plan/decisions.py); the plan stores the results, which ``ccl explain`` prints and the runtime
reads.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional

from .lowering import Nothing, Unsupported, plain_column
from .lowering.aggregation import NATIVE_AGGREGATES, aggregate_call, lower_aggregate
from .lowering.columnar import lower_columnar
from .lowering.columnar import pure as _pure
from .lowering.condition import lower_condition
from .model import NATIVE, PER_INSTANCE, READ_AS

# Aggregates whose value is a function of the window's current rows only, not of the order or
# number of changes that made them.
CONTENT_AGGREGATES = NATIVE_AGGREGATES + ("vwap",)


def instance_count(element: Mapping) -> int:
    """How many partition instances an element runs as (a module PARTITION multiplies)."""
    count = 1
    for key in ("module_partition", "partition"):
        part = element.get(key)
        if part and isinstance(part.get("count"), int) and part["count"] > 0:
            count *= part["count"]
    return count


def uses_time(element: Mapping) -> bool:
    """Whether the element has a time-based KEEP (its own, on a FROM source or on a Flex input), an
    AGES policy or a Flex EVERY handler."""
    keeps = [element.get("keep")]
    for sel in (element.get("query") or {}).get("selects", []):
        keeps += [s.get("keep") for s in sel["sources"]]
    flex = element.get("flex") or {}
    keeps += flex.get("input_keeps") or []
    every = any(h["event"] == "every" for h in flex.get("handlers", []))
    return (every or element.get("aging") is not None
            or any(k and k["kind"] in ("time", "every_time") for k in keeps))


def path_of(element: Mapping, plan: Optional[Mapping] = None) -> tuple[str, str]:
    """(path, why) for one plan element (docs/plan.md); ``plan`` lets the rule look at sources.

    Native (Spark expressions and operators, no per-instance engine):
    - an input stream with no AUTOGENERATE and no WHERE (a row is an insert, a delete is dropped, a
      row that does not parse is a bad record);
    - a stream aggregation that never retracts (:func:`native_aggregation`);
    - a stateless stream that filters and renames columns of one stream (:func:`native_filter`).
    Everything else (input windows and delta streams, which check keys and opcodes; other derived
    elements; Flex operators) runs on the per-instance path.
    """
    if (element.get("role") == "input" and element.get("kind") == "stream"
            and element.get("query") is None and not element.get("flex")
            and not element.get("autogenerate") and not element.get("input_where")):
        return NATIVE, "input stream without state: Spark expressions"
    if element.get("query") is None and not element.get("flex"):
        timers = ("; timers for its time-based KEEP or AGES, woken by the project's query"
                  if uses_time(element) else "")
        return PER_INSTANCE, f"input element: key and opcode rules need per-instance state{timers}"
    columnar = columnar_aggregation(element, plan) if plan is not None else None
    if plan is not None and aggregation_spec(element, plan) is not None:
        observed = changes_observed(element["name"], plan)
        if observed is None:
            return NATIVE, ("aggregation of a stream: Spark group-by per batch on (instance, group), "
                            "merged into per-group totals")
        if columnar == "rows":
            return PER_INSTANCE, (f"aggregation of a stream, but {observed}: one change per input "
                                  "row, each bucket's rows a column at a time")
        return PER_INSTANCE, (f"aggregation of a stream, but {observed}: one change per input row "
                              "needs the per-instance engine")
    if columnar is not None and _source_kind(element, plan) != "stream":
        # (the window kernel: runtime/engine/kernels/window_agg.py)
        return PER_INSTANCE, (f"aggregation of a {_source_kind(element, plan)}: each bucket's "
                              "changes applied as the engine does, without its per-row machinery, "
                              + ("one change per group per batch" if columnar == "batch"
                                 else "one change per input row"))
    if columnar == "batch":
        return PER_INSTANCE, ("aggregation of a stream whose changes nothing reads one by one: "
                              "each bucket's batch folded a column at a time, one change per group "
                              "per batch")
    if columnar == "rows":
        return PER_INSTANCE, ("aggregation of a stream whose changes are read one by one: one "
                              "change per input row, each bucket's rows a column at a time")
    if plan is not None and native_filter(element, plan) is not None:
        return NATIVE, "stateless stream (filter and projection): Spark expressions"
    if uses_time(element):
        return PER_INSTANCE, ("per-instance state with timers (time-based KEEP, AGES or EVERY): the "
                              "engine over each bucket's rows in applyInArrow, woken by the project's "
                              "query when one is due")
    return PER_INSTANCE, "per-instance state: the engine over each bucket's rows in applyInArrow"


def _source_kind(element: Mapping, plan: Mapping) -> str:
    """The kind, as read, of the one source of an aggregation :func:`columnar_aggregation` takes."""
    name = element["query"]["selects"][0]["sources"][0]["element"]
    kind = next(e for e in plan["elements"] if e["name"] == name).get("kind")
    return READ_AS.get(kind, kind)


# Input adapter types whose files the runtime reads (ESP's delimited-file, XML list and JSON file
# input adapters), and those whose records runtime/adapters receives (from a socket, an MQTT broker
# or a database) into the element's inbox directory. An element with another kind of adapter
# (Kafka, ...) has rows only from ``--input``.
FILE_INPUT_ADAPTERS = ("toolkit_file_csv_input", "dsv_in", "toolkit_file_xmllist_input",
                       "toolkit_file_json_input")
SOCKET_INPUT_ADAPTERS = ("toolkit_socket_csv_input", "toolkit_socket_json_input", "dsv_sockout_in",
                         "dsv_sockin_in", "mqtt_input")
# ESP's Database Input adapter: runtime/adapters/postgres.py polls a table or query into the inbox
DB_INPUT_ADAPTERS = ("db_in",)
INBOX_INPUT_ADAPTERS = SOCKET_INPUT_ADAPTERS + DB_INPUT_ADAPTERS
READ_INPUT_ADAPTERS = FILE_INPUT_ADAPTERS + INBOX_INPUT_ADAPTERS


def input_adapter(plan: Mapping, element: str) -> Optional[Mapping]:
    """The first input adapter ATTACHed to ``element`` whose rows the runtime reads, if any."""
    return next((a for a in plan.get("adapters", [])
                 if a.get("direction") == "input" and a.get("element") == element
                 and str(a.get("type", "")).lower() in READ_INPUT_ADAPTERS), None)


def unread_adapters(plan: Mapping, bound: Iterable[str]) -> list[Mapping]:
    """The input adapters of elements not in ``bound`` (``--input``) whose type the runtime does
    not read: those elements get no rows."""
    bound = set(bound)
    return [a for a in plan.get("adapters", [])
            if a.get("direction") == "input" and a.get("element") not in bound
            and str(a.get("type", "")).lower() not in READ_INPUT_ADAPTERS
            and input_adapter(plan, a.get("element")) is None]


def _select_from_one_stream(element: Mapping, plan: Mapping,
                            kind: str) -> Optional[tuple[Mapping, str, Mapping]]:
    """(select, alias, source element) when ``element`` is a ``kind`` defined by one select from
    one stream, without join, HAVING, GROUP FILTER, MATCHING, FROM KEEP, DECLARE or Flex; else
    None."""
    query = element.get("query")
    if (element.get("kind") != kind or not query or len(query["selects"]) != 1
            or element.get("flex") or element.get("declare")):
        return None
    sel = query["selects"][0]
    if (len(sel["sources"]) != 1 or sel.get("joins") or sel.get("having")
            or sel.get("group_filter") or sel.get("matching") or sel["sources"][0].get("keep")):
        return None
    alias, source = sel["sources"][0]["alias"], sel["sources"][0]["element"]
    src = next((e for e in plan["elements"] if e["name"] == source), None)
    if src is None or READ_AS.get(src.get("kind"), src.get("kind")) != "stream":
        return None
    return sel, alias, src


def native_aggregation(element: Mapping, plan: Mapping) -> Optional[dict]:
    """The parts of a GROUP BY window that Spark can run natively, or None.

    Spark's group-by gives one change per touched group per micro-batch, where ESP (and the
    per-instance path) give one per input row; so the element's changes must not be observed
    one by one (:func:`changes_observed`). It must be a window with KEEP ALL (or no KEEP) over
    one *stream* (inserts only: nothing is ever retracted), no WHERE/HAVING/GROUP FILTER/FROM
    KEEP/DECLARE, grouped by plain columns, with count/sum/min/max/avg of plain columns (not
    DISTINCT: the aggregates ccl/plan/lowering/aggregation.py lowers), and select items that are
    group columns or aggregates. Any partitioning: the runtime gives each row its instance as the
    per-instance path does and groups by (instance, group columns), so every instance has its own
    groups (with HASH on group columns, a group lives in one instance and the result is the
    unpartitioned one).
    Returns ``{"source", "alias", "groups": [(item, column)], "aggregates": [(item, fn, column or
    None)]}``.
    """
    spec = aggregation_spec(element, plan)
    return spec if spec is not None and changes_observed(element["name"], plan) is None else None


def aggregation_spec(element: Mapping, plan: Mapping) -> Optional[dict]:
    """:func:`native_aggregation` without the rule on observed changes."""
    found = _select_from_one_stream(element, plan, "window")
    if found is None or (element.get("keep") or {"kind": "all"})["kind"] != "all":
        return None
    sel, alias, src = found
    if sel.get("where") or not sel.get("group_by") or not sel.get("aggregates"):
        return None
    group_cols = [plain_column(g, alias) for g in sel["group_by"]]
    if None in group_cols:
        return None
    aggs: dict[str, tuple[str, Optional[str]]] = {}
    for i, a in enumerate(sel["aggregates"]):
        try:  # the walk runtime/native_agg.py builds the Spark aggregates with
            aggs[a["name"]] = aggregate_call(a, alias)
            lower_aggregate(i, *aggs[a["name"]], backend=Nothing())
        except Unsupported:
            return None
    groups, aggregates = [], []
    for item in sel["items"]:
        expr = item["expr"]
        col = plain_column(expr, alias)
        if col is not None and col in group_cols:
            groups.append((item["name"], col))
        elif expr.get("node") == "Var" and expr["name"]["name"] in aggs:
            fn, arg = aggs[expr["name"]["name"]]
            aggregates.append((item["name"], fn, arg))
        else:
            return None
    if sorted(element.get("key") or []) != sorted(name for name, _ in groups) \
            or sorted({c for _, c in groups}) != sorted(set(group_cols)):
        return None
    return {"source": src["name"], "alias": alias, "groups": groups, "aggregates": aggregates}


def columnar_aggregation(element: Mapping, plan: Mapping) -> Optional[str]:
    """How the per-instance path may run ``element`` a bucket of rows at a time, a column at a
    time (runtime/engine/columnar.py), or None: the walk the kernel is built with
    (ccl/plan/lowering/columnar.py, :func:`lower_columnar`), which takes

    - ``"batch"`` when nothing observes its changes one by one (:func:`changes_observed`): one
      change per group per micro-batch, all its readers see;
    - ``"rows"`` when something does and its select items are its aggregates and plain columns of
      its source (of a type the engine reads as Arrow gives it), with no HAVING: one change per
      input row, as the engine gives them.

    It must be a window with KEEP ALL (or no KEEP, no AGES, no DECLARE) aggregating one stream,
    window or delta stream (``ccl.plan.lowering.columnar.COLUMNAR_SOURCES``; no join, FROM KEEP, MATCHING or GROUP ORDER
    BY; a window's or delta stream's updates and deletes retract: runtime/engine/kernels/
    window_agg.py), keyed by its GROUP BY expressions (each key
    column is one, and each is a key column), whose expressions read only the source's columns,
    the aggregates and ``<target>_partitions``, and call only built-in functions whose value
    depends on their arguments alone (not ``ccl.plan.lowering.columnar.IMPURE_FUNCTIONS``). Any
    GROUP BY expressions, WHERE, GROUP FILTER, aggregate of the engine and partitioning.
    """
    from ..splash.functions_data import FUNCTIONS

    if element.get("kind") != "window" or not element.get("query"):
        return None  # (not an aggregation: no need to look at its readers)
    observed = changes_observed(element["name"], plan) is not None
    try:
        return lower_columnar(element, plan, observed, FUNCTIONS, Nothing()).mode
    except Unsupported:
        return None


_UNKNOWN = object()


def columnar_kernel(element: Mapping, plan: Mapping, columnar: object = _UNKNOWN) -> Optional[str]:
    """The columnar kernel (one of ``ccl.plan.model.KERNELS``, runtime/engine/kernels/) that runs
    the per-instance ``element`` a bucket of rows at a time, on the engine's own state and with
    the engine's very outputs, or None (the engine runs it row by row): an aggregation
    :func:`columnar_aggregation` takes gets ``aggregation`` (of a stream,
    runtime/engine/columnar.py) or ``window_aggregation`` (of a window or delta stream,
    runtime/engine/kernels/window_agg.py); another element the first kernel that takes it.
    ``columnar``: the element's :func:`columnar_aggregation`, when the caller has it already."""
    mode = columnar_aggregation(element, plan) if columnar is _UNKNOWN else columnar
    if mode is not None:
        return "aggregation" if _source_kind(element, plan) == "stream" else "window_aggregation"
    for name, takes in _KERNELS:
        if takes(element, plan):
            return name
    return None


def join_kernel(element: Mapping, plan: Mapping) -> bool:
    """Whether the join kernel (runtime/engine/kernels/join.py) runs ``element``: a stream (no
    KEEP, AGES, DECLARE or Flex) defined by one select of one stream (its first source, no FROM
    KEEP) joined with one or more windows (no FROM KEEP), each by an INNER or LEFT join whose ON
    is one or more equalities of a column of an earlier source with a column of that window, and
    nothing else; no GROUP BY, aggregate or MATCHING; the select items and WHERE read only the
    sources' columns and ``<target>_partitions`` and call only built-in functions whose value
    depends on their arguments alone (not ``ccl.plan.lowering.columnar.IMPURE_FUNCTIONS``)."""
    from ..splash.functions_data import FUNCTIONS

    query = element.get("query")
    if (element.get("kind") != "stream" or not query or len(query["selects"]) != 1
            or element.get("flex") or element.get("declare") or element.get("aging")
            or element.get("keep")):
        return False
    sel = query["selects"][0]
    sources, joins = sel["sources"], sel.get("joins") or []
    if (len(sources) < 2 or len(joins) != len(sources) - 1 or sel.get("matching")
            or sel.get("group_by") or sel.get("aggregates") or sel.get("having")
            or sel.get("group_filter") or sel.get("group_order_by")
            or any(s.get("keep") for s in sources)):
        return False
    kinds = {e["name"]: e.get("kind") for e in plan["elements"]}
    if kinds.get(sources[0]["element"]) != "stream" \
            or any(kinds.get(s["element"]) != "window" for s in sources[1:]):
        return False
    aliases = [s["alias"] for s in sources]
    if len(set(aliases)) != len(aliases):
        return False
    for j, join in enumerate(joins):
        parts = _conjuncts(join.get("on"))
        if join.get("kind", "inner") not in ("inner", "left") or join.get("temporal") \
                or not parts or not all(_equates(p, aliases[: j + 1], aliases[j + 1]) for p in parts):
            return False
    partition = element.get("partition") or {}
    names = {partition.get("partitions_var") or f"{element['name'].split('.')[-1]}_partitions"}
    exprs = [sel.get("where")] + [it["expr"] for it in sel["items"]]
    return all(_pure(e, tuple(aliases), names, FUNCTIONS) for e in exprs if e is not None)


def _conjuncts(expr: object) -> list:
    """The operands of a tree of ANDs (``[]`` for no expression)."""
    if expr is None:
        return []
    if isinstance(expr, Mapping) and expr.get("node") == "Binary" and expr.get("op") == "and":
        return _conjuncts(expr["left"]) + _conjuncts(expr["right"])
    return [expr]


def _equates(part: object, left: list[str], right: str) -> bool:
    """Whether ``part`` is ``a.x = b.y`` with one side a column of ``right`` and the other a column
    of one of the ``left`` aliases (the engine's hash join takes it; runtime/engine/join.py)."""
    if not (isinstance(part, Mapping) and part.get("node") == "Binary" and part.get("op") == "="):
        return False
    found = []
    for side in (part["left"], part["right"]):
        alias = next((a for a in left + [right] if plain_column(side, a) is not None), None)
        found.append(alias)
    return None not in found and sorted([found[0] == right, found[1] == right]) == [False, True]


# Row-count KEEP policies (runtime/engine/store.py COUNT_KINDS): KEEP n ROWS [SLACK s], KEEP LAST,
# KEEP EVERY n ROWS, each with or without PER.
_COUNT_KEEPS = ("rows", "last", "every_rows")


def keep_kernel(element: Mapping, plan: Mapping) -> bool:
    """Whether runtime/engine/kernels/keep.py runs ``element``: a window with a row-count KEEP
    (:data:`_COUNT_KEEPS`, with or without PER) defined by one select from one stream, without
    aggregation (GROUP BY, aggregates, HAVING, GROUP FILTER, GROUP ORDER BY), join, MATCHING, FROM
    KEEP, AGES, DECLARE or Flex, whose key and PER columns are columns of the window, and whose
    WHERE and select items read only the source's columns and ``<target>_partitions`` and call
    only built-in functions whose value depends on their arguments alone."""
    from ..splash.functions_data import FUNCTIONS

    query = element.get("query")
    keep = element.get("keep") or {"kind": "all"}
    if (element.get("kind") != "window" or not query or len(query["selects"]) != 1
            or element.get("flex") or element.get("declare") or element.get("aging")
            or keep["kind"] not in _COUNT_KEEPS or not element.get("key")):
        return False
    sel = query["selects"][0]
    if (len(sel["sources"]) != 1 or sel.get("joins") or sel.get("matching")
            or sel.get("group_order_by") or sel.get("group_by") or sel.get("aggregates")
            or sel.get("having") or sel.get("group_filter") or sel["sources"][0].get("keep")):
        return False
    src = next((e for e in plan["elements"] if e["name"] == sel["sources"][0]["element"]), None)
    if src is None or READ_AS.get(src.get("kind"), src.get("kind")) != "stream":
        return False
    columns = {name for name, _ in element["columns"]}
    if any(c not in columns for c in list(element["key"]) + list(keep.get("per") or [])):
        return False
    alias = sel["sources"][0]["alias"]
    partition = element.get("partition") or {}
    names = {partition.get("partitions_var") or f"{element['name'].split('.')[-1]}_partitions"}
    exprs = [sel.get("where")] + [it["expr"] for it in sel["items"]]
    return all(_pure(e, alias, names, FUNCTIONS) for e in exprs if e is not None)


# (name, rule) of each columnar kernel, in the order they are tried.
_KERNELS: list[tuple[str, Callable[[Mapping, Mapping], bool]]] = [("join", join_kernel),
                                                                   ("keep", keep_kernel)]


# Column types whose values Spark's hash() tells apart as Python's equality does (not float: 0.0
# equals -0.0 in Python and hashes otherwise in Spark).
_SPREAD_TYPES = ("string", "integer", "long", "boolean")


def group_columns(element: Mapping, plan: Mapping) -> Optional[list[str]]:
    """For an aggregation :func:`columnar_aggregation` runs, grouped by plain source columns of
    string, integer, long or boolean type (each its own key column, of the same type): those
    columns, by which the runtime may spread an instance's groups over several buckets (no group
    reads another's rows, so each bucket runs its share of an instance); else None. Over a window
    or delta stream, each must also be a key column of the source: every change of a source row
    (an update, a delete) then carries the group values of the row it replaces, and reaches the
    bucket holding that row and its group."""
    if columnar_aggregation(element, plan) is None:
        return None
    sel = element["query"]["selects"][0]
    alias = sel["sources"][0]["alias"]
    src = next(e for e in plan["elements"] if e["name"] == sel["sources"][0]["element"])
    types = {c: str(t).strip().lower() for c, t in src["columns"]}
    keyed = READ_AS.get(src.get("kind"), src.get("kind")) != "stream"
    out_types = {c: str(t).strip().lower() for c, t in element["columns"]}
    columns = []
    for expr in sel["group_by"] or []:
        col = plain_column(expr, alias)
        item = next((it["name"] for it in sel["items"] if it["expr"] == expr), None)
        if (col is None or types.get(col) not in _SPREAD_TYPES or out_types.get(item) != types[col]
                or (keyed and col not in (src.get("key") or []))):
            return None
        columns.append(col)
    return columns or None


def changes_observed(name: str, plan: Mapping, _seen: frozenset = frozenset()) -> Optional[str]:
    """Why the individual changes of element ``name`` show in a run's results, or None when only
    its contents do: an output adapter writes its changelog; a stream, delta stream or Flex
    reading it sees every change; so does a window reading it whose rows depend on more than the
    source's current contents (a KEEP other than ALL, a KEEP on the source, an aggregate such as
    first/last, DECLARE, MATCHING), or whose own changes are observed."""
    if any(a.get("direction") == "output" and a.get("element") == name for a in plan.get("adapters", [])):
        return "an output adapter writes its changes"
    for reader in plan["elements"]:
        flex = reader.get("flex")
        query = reader.get("query") or {}
        reads = [s for sel in query.get("selects", []) for s in sel["sources"] if s["element"] == name]
        if flex and name in flex.get("inputs", []):
            return f"Flex '{reader['name']}' reads its changes"
        if not reads or reader["name"] in _seen:
            continue
        if reader.get("kind") != "window":
            return f"{reader.get('kind', 'element')} '{reader['name']}' reads its changes"
        if ((reader.get("keep") or {"kind": "all"})["kind"] != "all" or reader.get("declare")
                or any(s.get("keep") for s in reads)
                or any(sel.get("matching") for sel in query["selects"])
                or any(a["fn"] not in CONTENT_AGGREGATES
                       for sel in query["selects"] for a in sel.get("aggregates") or [])):
            return f"window '{reader['name']}' depends on the order of its changes"
        why = changes_observed(reader["name"], plan, _seen | {name})
        if why is not None:
            return f"window '{reader['name']}' reads it, and {why}"
    return None


def condition_kind(expr: object, alias: str, types: Mapping[str, str]) -> Optional[str]:
    """The type of ``expr`` (plan JSON) when it is in the subset whose Spark meaning is SPLASH's
    meaning (ccl/plan/lowering/condition.py, the walk the runtime builds the Spark Column with:
    plain columns of ``alias`` and literals of integer/long/float/string/boolean, compared and
    combined with AND/OR/NOT); else None."""
    try:
        return lower_condition(expr, alias, types, Nothing())[0]
    except Unsupported:
        return None


def native_filter(element: Mapping, plan: Mapping) -> Optional[dict]:
    """A derived stream that only filters one stream and selects some of its columns, so that
    Spark expressions give exactly the engine's rows, or None.

    It must select from one stream (no FROM KEEP, join, GROUP BY, aggregate, DECLARE, MATCHING)
    items that are plain columns of the same type as the output column, and its WHERE, if any,
    must be in the subset of :func:`condition_kind`. Partitioning is allowed: it changes only the
    instance a row is counted under, which the runtime assigns as the per-instance path does.
    Returns ``{"source", "alias", "items": [(output column, source column)], "where": expr}``.
    """
    found = _select_from_one_stream(element, plan, "stream")
    if found is None or element.get("keep"):
        return None
    sel, alias, src = found
    if sel.get("group_by") or sel.get("aggregates"):
        return None
    types = {name: t for name, t in src["columns"]}
    out_types = {name: t for name, t in element["columns"]}
    items = []
    for item in sel["items"]:
        col = plain_column(item["expr"], alias)
        if col is None or types.get(col) != out_types.get(item["name"]):
            return None
        items.append((item["name"], col))
    if [name for name, _ in items] != [name for name, _ in element["columns"]]:
        return None
    where = sel.get("where")
    if where is not None and condition_kind(where, alias, types) != "boolean":
        return None
    return {"source": src["name"], "alias": alias, "items": items, "where": where}
