"""The rules of how the runtime executes each planned element: the native Spark path or the
per-instance path, over the typed plan (:mod:`ccl.plan.model`; the lowerings they call walk
it too, as the runtime's backends do). Only the compiler applies them
(ccl/plan/decisions.py); the plan stores the results, which ``ccl explain`` prints and the runtime
reads.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional

from ..syntax import nodes as n
from .lowering import Nothing, Unsupported, plain_column
from .lowering.aggregation import NATIVE_AGGREGATES, aggregate_call, lower_aggregate
from .lowering.columnar import lower_columnar, partitions_var
from .lowering.columnar import pure as _pure
from .lowering.condition import lower_condition
from .model import (NATIVE, PER_INSTANCE, Adapter, Element, Keep, NativeAggregation, NativeFilter,
                    Plan, Select)

# Aggregates whose value is a function of the window's current rows only, not of the order or
# number of changes that made them.
CONTENT_AGGREGATES = NATIVE_AGGREGATES + ("vwap",)

_UNKNOWN = object()


def instance_count(element: Element) -> int:
    """How many partition instances an element runs as (a module PARTITION multiplies)."""
    count = 1
    for part in (element.module_partition, element.partition):
        if part is not None and part.count > 0:
            count *= part.count
    return count


def uses_time(element: Element) -> bool:
    """Whether the element has a time-based KEEP (its own, on a FROM source or on a Flex input), an
    AGES policy or a Flex EVERY handler."""
    keeps = [element.keep]
    for sel in element.query.selects if element.query is not None else ():
        keeps += [s.keep for s in sel.sources]
    flex = element.flex
    keeps += flex.input_keeps if flex is not None else ()
    every = flex is not None and any(h.event == "every" for h in flex.handlers)
    return (every or element.aging is not None
            or any(k is not None and k.kind in ("time", "every_time") for k in keeps))


def path_of(element: Element, plan: Optional[Plan] = None,
            columnar: object = _UNKNOWN) -> tuple[str, str]:
    """(path, why) for one plan element (docs/plan.md); ``plan`` lets the rule look at sources
    (``columnar``: the element's :func:`columnar_aggregation`, when the caller has it already).

    Native (Spark expressions and operators, no per-instance engine):
    - an input stream with no AUTOGENERATE and no WHERE (a row is an insert, a delete is dropped, a
      row that does not parse is a bad record);
    - a stream aggregation that never retracts (:func:`native_aggregation`);
    - a stateless stream that filters and renames columns of one stream (:func:`native_filter`).
    Everything else (input windows and delta streams, which check keys and opcodes; other derived
    elements; Flex operators) runs on the per-instance path.
    """
    if (element.role == "input" and element.kind == "stream" and element.query is None
            and element.flex is None and element.autogenerate is None
            and element.input_where is None):
        return NATIVE, "input stream without state: Spark expressions"
    if element.query is None and element.flex is None:
        timers = ("; timers for its time-based KEEP or AGES, woken by the project's query"
                  if uses_time(element) else "")
        return PER_INSTANCE, f"input element: key and opcode rules need per-instance state{timers}"
    if plan is None:
        columnar = None
    elif columnar is _UNKNOWN:
        columnar = columnar_aggregation(element, plan)
    if plan is not None and aggregation_spec(element, plan) is not None:
        observed = changes_observed(element.name, plan)
        if observed is None:
            return NATIVE, ("aggregation of a stream: Spark group-by per batch on (instance, group), "
                            "merged into per-group totals")
        if columnar == "rows":
            return PER_INSTANCE, (f"aggregation of a stream, but {observed}: one change per input "
                                  "row, each bucket's rows a column at a time")
        return PER_INSTANCE, (f"aggregation of a stream, but {observed}: one change per input row "
                              "needs the per-instance engine")
    if columnar is not None and _source_kind(element, plan) != "stream":  # type: ignore[arg-type]
        # (the window kernel: runtime/engine/kernels/window_agg.py)
        timed = element.query.selects[0].sources[0].keep is not None  # type: ignore[union-attr]
        what = "a stream under a time KEEP" if timed else f"a {_source_kind(element, plan)}"  # type: ignore[arg-type]
        return PER_INSTANCE, (f"aggregation of {what}: each bucket's "
                              "changes applied as the engine does, without its per-row machinery, "
                              + ("one change per group per batch" if columnar == "batch"
                                 else "one change per input row")
                              + ("; its expiry too, woken by the project's query" if timed else ""))
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


def _find(plan: Plan, name: str) -> Optional[Element]:
    """The element called ``name``, or None."""
    return next((e for e in plan.elements if e.name == name), None)


def _source_kind(element: Element, plan: Plan) -> str:
    """The kind, as read, of the one source of an aggregation :func:`columnar_aggregation` takes
    (``window`` for a stream made one by a FROM-level time KEEP)."""
    source = element.query.selects[0].sources[0]  # type: ignore[union-attr]
    return "window" if source.keep is not None else plan.element(source.element).read_as


def _aggregates_stream(element: Element, plan: Plan) -> bool:
    """Whether an aggregation :func:`columnar_aggregation` takes reads a stream's inserts only (no
    FROM KEEP): the stream aggregation kernel's, not the window aggregation's."""
    return _source_kind(element, plan) == "stream"


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


def input_adapter(plan: Plan, element: str) -> Optional[Adapter]:
    """The first input adapter ATTACHed to ``element`` whose rows the runtime reads, if any."""
    return next((a for a in plan.adapters
                 if a.direction == "input" and a.element == element
                 and str(a.type).lower() in READ_INPUT_ADAPTERS), None)


def unread_adapters(plan: Plan, bound: Iterable[str]) -> list[Adapter]:
    """The input adapters of elements not in ``bound`` (``--input``) whose type the runtime does
    not read: those elements get no rows."""
    bound = set(bound)
    return [a for a in plan.adapters
            if a.direction == "input" and a.element not in bound
            and str(a.type).lower() not in READ_INPUT_ADAPTERS
            and input_adapter(plan, a.element) is None]


def _select_from_one_stream(element: Element, plan: Plan,
                            kind: str) -> Optional[tuple[Select, str, Element]]:
    """(select, alias, source element) when ``element`` is a ``kind`` defined by one select from
    one stream, without join, HAVING, GROUP FILTER, MATCHING, FROM KEEP, DECLARE or Flex; else
    None."""
    query = element.query
    if (element.kind != kind or query is None or len(query.selects) != 1
            or element.flex is not None or element.declare):
        return None
    sel = query.selects[0]
    if (len(sel.sources) != 1 or sel.joins or sel.having is not None
            or sel.group_filter is not None or sel.matching is not None
            or sel.sources[0].keep is not None):
        return None
    src = _find(plan, sel.sources[0].element)
    if src is None or src.read_as != "stream":
        return None
    return sel, sel.sources[0].alias, src


def native_aggregation(element: Element, plan: Plan) -> Optional[NativeAggregation]:
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
    """
    spec = aggregation_spec(element, plan)
    return spec if spec is not None and changes_observed(element.name, plan) is None else None


def aggregation_spec(element: Element, plan: Plan) -> Optional[NativeAggregation]:
    """:func:`native_aggregation` without the rule on observed changes."""
    found = _select_from_one_stream(element, plan, "window")
    if found is None or (element.keep is not None and element.keep.kind != "all"):
        return None
    sel, alias, src = found
    if sel.where is not None or not sel.group_by or not sel.aggregates:
        return None
    group_cols = [plain_column(g, alias) for g in sel.group_by]
    if None in group_cols:
        return None
    aggs: dict[str, tuple[str, Optional[str]]] = {}
    for i, a in enumerate(sel.aggregates):
        try:  # the walk runtime/native_agg.py builds the Spark aggregates with
            aggs[a.name] = aggregate_call(a, alias)
            lower_aggregate(i, *aggs[a.name], backend=Nothing())
        except Unsupported:
            return None
    groups, aggregates = [], []
    for item in sel.items:
        expr = item.expr
        col = plain_column(expr, alias)
        if col is not None and col in group_cols:
            groups.append((item.name, col))
        elif isinstance(expr, n.Var) and expr.name.name in aggs:
            fn, arg = aggs[expr.name.name]
            aggregates.append((item.name, fn, arg))
        else:
            return None
    if sorted(element.key) != sorted(name for name, _ in groups) \
            or sorted({c for _, c in groups}) != sorted(set(group_cols)):  # type: ignore[type-var]
        return None
    return NativeAggregation(src.name, alias, tuple(groups), tuple(aggregates))


def columnar_aggregation(element: Element, plan: Plan) -> Optional[str]:
    """How the per-instance path may run ``element`` a bucket of rows at a time, a column at a
    time (runtime/engine/columnar.py), or None: the walk the kernel is built with
    (ccl/plan/lowering/columnar.py, :func:`lower_columnar`), which takes

    - ``"batch"`` when nothing observes its changes one by one (:func:`changes_observed`): one
      change per group per micro-batch, all its readers see;
    - ``"rows"`` when something does and its select items are its aggregates and plain columns of
      its source (of a type the engine reads as Arrow gives it), with no HAVING: one change per
      input row, as the engine gives them; and always for a time FROM KEEP on a stream (each
      event its own transaction, its own change), whatever its select items.

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

    query = element.query
    if element.kind != "window" or query is None or len(query.selects) != 1:
        return None  # (not an aggregation of one select: no need to look at its readers)
    observed = changes_observed(element.name, plan) is not None
    try:
        return lower_columnar(element, plan, observed, FUNCTIONS, Nothing()).mode
    except Unsupported:
        return None


def columnar_kernel(element: Element, plan: Plan, columnar: object = _UNKNOWN) -> Optional[str]:
    """The columnar kernel (one of ``ccl.plan.model.KERNELS``, runtime/engine/kernels/) that runs
    the per-instance ``element`` a bucket of rows at a time, on the engine's own state and with
    the engine's very outputs, or None (the engine runs it row by row): an aggregation
    :func:`columnar_aggregation` takes gets ``aggregation`` (of a stream,
    runtime/engine/columnar.py) or ``window_aggregation`` (of a window or delta stream,
    runtime/engine/kernels/window_agg.py); another element the first kernel that takes it.
    ``columnar``: the element's :func:`columnar_aggregation`, when the caller has it already."""
    mode = columnar_aggregation(element, plan) if columnar is _UNKNOWN else columnar
    if mode is not None:
        return "aggregation" if _aggregates_stream(element, plan) else "window_aggregation"
    for name, takes in _KERNELS:
        if takes(element, plan):
            return name
    return None


def join_kernel(element: Element, plan: Plan) -> bool:
    """Whether the join kernel (runtime/engine/kernels/join.py) runs ``element``: a stream (no
    KEEP, AGES, DECLARE or Flex) defined by one select of one stream (its first source, no FROM
    KEEP) joined with one or more windows (no FROM KEEP), each by an INNER or LEFT join whose ON
    is one or more equalities of a column of an earlier source with a column of that window, and
    nothing else; no GROUP BY, aggregate or MATCHING; the select items and WHERE read only the
    sources' columns and ``<target>_partitions`` and call only built-in functions whose value
    depends on their arguments alone (not ``ccl.plan.lowering.columnar.IMPURE_FUNCTIONS``)."""
    sel = _one_select(element)
    if element.kind != "stream" or element.keep is not None or sel is None:
        return False
    sources, joins = sel.sources, sel.joins
    if len(sources) < 2 or len(joins) != len(sources) - 1 or not _unaggregated(sel):
        return False
    kinds = {e.name: e.kind for e in plan.elements}
    if kinds.get(sources[0].element) != "stream" \
            or any(kinds.get(s.element) != "window" for s in sources[1:]):
        return False
    aliases = [s.alias for s in sources]
    if len(set(aliases)) != len(aliases):
        return False
    for j, join in enumerate(joins):
        parts = n.conjuncts(join.on)
        if join.kind not in ("inner", "left") \
                or not parts or not all(_equates(p, aliases[: j + 1], aliases[j + 1]) for p in parts):
            return False
    return _pure_items(element, sel, tuple(aliases))


def _one_select(element: Element) -> Optional[Select]:
    """The one select defining ``element``, when it has one and no Flex, DECLARE or AGES; else
    None."""
    query = element.query
    if (query is None or len(query.selects) != 1 or element.flex is not None or element.declare
            or element.aging is not None):
        return None
    return query.selects[0]


def _unaggregated(sel: Select) -> bool:
    """Whether select ``sel`` has no MATCHING, GROUP BY, aggregate, HAVING, GROUP FILTER or GROUP
    ORDER BY, and no FROM KEEP on a source."""
    return not (sel.matching is not None or sel.group_by or sel.aggregates or sel.having is not None
                or sel.group_filter is not None or sel.group_order_by
                or any(s.keep is not None for s in sel.sources))


def _plain_single_source(sel: Select) -> bool:
    """Whether select ``sel`` reads one source as it is: no join, MATCHING, aggregation or FROM
    KEEP."""
    return len(sel.sources) == 1 and not sel.joins and _unaggregated(sel)


def _pure_items(element: Element, sel: Select, aliases: tuple[str, ...]) -> bool:
    """Whether the WHERE and items of ``sel`` read only columns of ``aliases`` and
    ``<target>_partitions`` and call only built-ins whose value is their arguments' alone."""
    from ..splash.functions_data import FUNCTIONS

    names = {partitions_var(element)}
    exprs = [sel.where] + [it.expr for it in sel.items]
    return all(_pure(e, aliases, names, FUNCTIONS) for e in exprs if e is not None)


def select_kernel(element: Element, plan: Plan) -> bool:
    """Whether the join kernel, with no window to join (runtime/engine/kernels/join.py), runs
    ``element``: a stream (no KEEP, AGES, DECLARE or Flex) defined by one select of one stream
    (no FROM KEEP, join, MATCHING, GROUP BY or aggregate) whose WHERE and select items read only
    the source's columns and ``<target>_partitions`` and call only built-in functions whose value
    depends on their arguments alone: a filter or projection the native stream path does not take
    (arithmetic, function calls, CASE, casts)."""
    sel = _one_select(element)
    if element.kind != "stream" or element.keep is not None or sel is None \
            or not _plain_single_source(sel):
        return False
    src = _find(plan, sel.sources[0].element)
    if src is None or src.read_as != "stream":
        return False
    return _pure_items(element, sel, (sel.sources[0].alias,))


def union_kernel(element: Element, plan: Plan) -> bool:
    """Whether runtime/engine/kernels/union.py runs ``element``: a stream (no KEEP, AGES, DECLARE
    or Flex) defined by a UNION of two or more selects, each from one stream (no FROM KEEP, join,
    MATCHING, GROUP BY or aggregate) with WHERE and select items that read only that source's
    columns and ``<target>_partitions`` and call only built-in functions whose value depends on
    their arguments alone: each port's rows through its own select, as the select kernel runs
    one."""
    query = element.query
    if (element.kind != "stream" or element.keep is not None or query is None
            or len(query.selects) < 2 or element.flex is not None or element.declare
            or element.aging is not None):
        return False
    for sel in query.selects:
        if not _plain_single_source(sel):
            return False
        src = _find(plan, sel.sources[0].element)
        if src is None or src.read_as != "stream" \
                or not _pure_items(element, sel, (sel.sources[0].alias,)):
            return False
    return True


def _equates(part: n.Node, left: list[str], right: str) -> bool:
    """Whether ``part`` is ``a.x = b.y`` with one side a column of ``right`` and the other a column
    of one of the ``left`` aliases (the engine's hash join takes it; runtime/engine/join.py)."""
    if not (isinstance(part, n.Binary) and part.op == "="):
        return False
    found = []
    for side in (part.left, part.right):
        alias = next((a for a in left + [right] if plain_column(side, a) is not None), None)
        found.append(alias)
    return None not in found and sorted([found[0] == right, found[1] == right]) == [False, True]


# Row-count KEEP policies (runtime/engine/store.py COUNT_KINDS): KEEP n ROWS [SLACK s], KEEP LAST,
# KEEP EVERY n ROWS, each with or without PER.
_COUNT_KEEPS = ("rows", "last", "every_rows")


def keep_kernel(element: Element, plan: Plan) -> bool:
    """Whether runtime/engine/kernels/keep.py runs ``element``: a window with a row-count KEEP
    (:data:`_COUNT_KEEPS`, with or without PER) or a sliding time KEEP (``KEEP 10 SECONDS``: the
    engine's expiry first, then the rows' upserts) defined by one select from one stream, without
    aggregation (GROUP BY, aggregates, HAVING, GROUP FILTER, GROUP ORDER BY), join, MATCHING, FROM
    KEEP, AGES, DECLARE or Flex, whose key and PER columns are columns of the window, and whose
    WHERE and select items read only the source's columns and ``<target>_partitions`` and call
    only built-in functions whose value depends on their arguments alone."""
    keep = element.keep or Keep("all")
    sel = _one_select(element)
    if (element.kind != "window" or sel is None or keep.kind not in _COUNT_KEEPS + ("time",)
            or not element.key or not _plain_single_source(sel)):
        return False
    src = _find(plan, sel.sources[0].element)
    if src is None or src.read_as != "stream":
        return False
    columns = {c.name for c in element.columns}
    if any(c not in columns for c in element.key + keep.per):
        return False
    return _pure_items(element, sel, (sel.sources[0].alias,))


def window_select_kernel(element: Element, plan: Plan) -> bool:
    """Whether runtime/engine/kernels/window_select.py runs ``element``: a window (KEEP ALL, none
    or a row-count KEEP, no AGES) or delta stream, keyed, or a stream (no KEEP: the window's
    changes seen as a stream), defined by one select from one window or
    delta stream (no FROM KEEP, join, MATCHING, GROUP BY, aggregate, HAVING, GROUP FILTER, DECLARE
    or Flex) whose WHERE and select items read only the source's columns and
    ``<target>_partitions`` and call only built-in functions whose value depends on their
    arguments alone: a projection or filter of a window, which maps each change of the source's
    rows through pure expressions, one to one."""
    keep = element.keep or Keep("all")
    sel = _one_select(element)
    if (element.kind not in ("window", "delta stream", "stream") or sel is None
            or (not element.key and element.kind != "stream")
            or (element.kind == "window" and keep.kind not in ("all",) + _COUNT_KEEPS)
            or (element.kind != "window" and element.keep is not None)
            or not _plain_single_source(sel)):
        return False
    src = _find(plan, sel.sources[0].element)
    if src is None or src.kind not in ("window", "delta stream") or src.read_as != src.kind \
            or not src.key:
        return False
    return _pure_items(element, sel, (sel.sources[0].alias,))


def window_join_kernel(element: Element, plan: Plan) -> bool:
    """Whether runtime/engine/kernels/window_join.py runs ``element``: a keyed window (KEEP ALL,
    none or a row-count KEEP, no AGES) or delta stream defined by one select (no DECLARE or Flex)
    joining two or more windows or delta streams (INNER, LEFT, RIGHT or FULL OUTER, any ON; no FROM
    KEEP, GROUP BY, aggregate or MATCHING) under distinct aliases, whose WHERE and select items
    read only the sources' columns and ``<target>_partitions`` and call only built-in functions
    whose value depends on their arguments alone: each change of a source through the engine's
    Joiner, the joined rows' WHERE and items a column at a time."""
    keep = element.keep or Keep("all")
    sel = _one_select(element)
    if (element.kind not in ("window", "delta stream") or sel is None or not element.key
            or (element.kind == "window" and keep.kind not in ("all",) + _COUNT_KEEPS)
            or (element.kind != "window" and element.keep is not None)):
        return False
    sources, joins = sel.sources, sel.joins
    if len(sources) < 2 or len(joins) != len(sources) - 1 or not _unaggregated(sel):
        return False
    for s in sources:
        src = _find(plan, s.element)
        if src is None or src.kind not in ("window", "delta stream") or src.read_as != src.kind \
                or not src.key:
            return False
    aliases = [s.alias for s in sources]
    if len(set(aliases)) != len(aliases):
        return False
    return _pure_items(element, sel, tuple(aliases))


def window_union_kernel(element: Element, plan: Plan) -> bool:
    """Whether runtime/engine/kernels/window_union.py runs ``element``: a keyed window (KEEP ALL,
    none or a row-count KEEP, no AGES), delta stream or stream (no KEEP) defined by a UNION of two
    or more selects (no DECLARE or Flex), each from one window or delta stream (keyed, read as it
    is) or stream (no FROM KEEP, join, MATCHING, GROUP BY or aggregate) with WHERE and select
    items that read only that source's columns and ``<target>_partitions`` and call only built-in
    functions whose value depends on their arguments alone: each port's changes through its own
    select, as the window_select kernel runs one, into the one output all selects share. (A
    stream from streams only is :func:`union_kernel`'s, tried first.)"""
    keep = element.keep or Keep("all")
    query = element.query
    if (element.kind not in ("window", "delta stream", "stream") or query is None
            or len(query.selects) < 2 or (not element.key and element.kind != "stream")
            or element.flex is not None or element.declare
            or element.aging is not None
            or (element.kind == "window" and keep.kind not in ("all",) + _COUNT_KEEPS)
            or (element.kind != "window" and element.keep is not None)):
        return False
    for sel in query.selects:
        if not _plain_single_source(sel):
            return False
        src = _find(plan, sel.sources[0].element)
        if src is None or not _pure_items(element, sel, (sel.sources[0].alias,)):
            return False
        if src.kind == "stream":
            if src.read_as != "stream":
                return False
        elif src.kind not in ("window", "delta stream") or src.read_as != src.kind or not src.key:
            return False
    if element.kind == "stream" and all(_find(plan, sel.sources[0].element).kind == "stream"  # type: ignore[union-attr]
                                        for sel in query.selects):
        return False   # (the union kernel's)
    return True


# (name, rule) of each columnar kernel, in the order they are tried.
_KERNELS: list[tuple[str, Callable[[Element, Plan], bool]]] = [("join", join_kernel),
                                                               ("keep", keep_kernel),
                                                               ("select", select_kernel),
                                                               ("window_select",
                                                                window_select_kernel),
                                                               ("union", union_kernel),
                                                               ("window_join",
                                                                window_join_kernel),
                                                               ("window_union",
                                                                window_union_kernel)]


# Column types whose values Spark's hash() tells apart as Python's equality does (not float: 0.0
# equals -0.0 in Python and hashes otherwise in Spark).
_SPREAD_TYPES = ("string", "integer", "long", "boolean")


def group_columns(element: Element, plan: Plan, columnar: object = _UNKNOWN) -> Optional[list[str]]:
    """For an aggregation :func:`columnar_aggregation` runs, grouped by plain source columns of
    string, integer, long or boolean type (each its own key column, of the same type): those
    columns, by which the runtime may spread an instance's groups over several buckets (no group
    reads another's rows, so each bucket runs its share of an instance); else None. Over a window
    or delta stream, each must also be a key column of the source: every change of a source row
    (an update, a delete) then carries the group values of the row it replaces, and reaches the
    bucket holding that row and its group. ``columnar``: as for :func:`columnar_kernel`."""
    mode = columnar_aggregation(element, plan) if columnar is _UNKNOWN else columnar
    if mode is None:
        return None
    sel = element.query.selects[0]  # type: ignore[union-attr]
    alias = sel.sources[0].alias
    if sel.sources[0].keep is not None:
        return None  # (a time KEEP expires an instance's rows together: one bucket per instance)
    src = plan.element(sel.sources[0].element)
    types = {c.name: str(c.type).strip().lower() for c in src.columns}
    keyed = src.read_as != "stream"
    out_types = {c.name: str(c.type).strip().lower() for c in element.columns}
    columns = []
    for expr in sel.group_by:
        col = plain_column(expr, alias)
        item = next((it.name for it in sel.items if it.expr == expr), None)
        if (col is None or types.get(col) not in _SPREAD_TYPES or out_types.get(item) != types[col]  # type: ignore[arg-type]
                or (keyed and col not in src.key)):
            return None
        columns.append(col)
    return columns or None


def changes_observed(name: str, plan: Plan, _seen: frozenset = frozenset()) -> Optional[str]:
    """Why the individual changes of element ``name`` show in a run's results, or None when only
    its contents do: an output adapter writes its changelog; a stream, delta stream or Flex
    reading it sees every change; so does a window reading it whose rows depend on more than the
    source's current contents (a KEEP other than ALL, a KEEP on the source, an aggregate such as
    first/last, DECLARE, MATCHING), or whose own changes are observed."""
    if any(a.direction == "output" and a.element == name for a in plan.adapters):
        return "an output adapter writes its changes"
    for reader in plan.elements:
        flex = reader.flex
        selects = reader.query.selects if reader.query is not None else ()
        reads = [s for sel in selects for s in sel.sources if s.element == name]
        if flex is not None and name in flex.inputs:
            return f"Flex '{reader.name}' reads its changes"
        if not reads or reader.name in _seen:
            continue
        if reader.kind != "window":
            return f"{reader.kind} '{reader.name}' reads its changes"
        if ((reader.keep is not None and reader.keep.kind != "all") or reader.declare
                or any(s.keep is not None for s in reads)
                or any(sel.matching is not None for sel in selects)
                or any(a.fn not in CONTENT_AGGREGATES for sel in selects for a in sel.aggregates)):
            return f"window '{reader.name}' depends on the order of its changes"
        why = changes_observed(reader.name, plan, _seen | {name})
        if why is not None:
            return f"window '{reader.name}' reads it, and {why}"
    return None


def condition_kind(expr: n.Node, alias: str, types: Mapping[str, str]) -> Optional[str]:
    """The type of ``expr`` (a tree) when it is in the subset whose Spark meaning is
    SPLASH's meaning (ccl/plan/lowering/condition.py, the walk the runtime builds the Spark Column
    with: plain columns of ``alias`` and literals of integer/long/float/string/boolean, compared
    and combined with AND/OR/NOT); else None."""
    try:
        return lower_condition(expr, alias, types, Nothing())[0]
    except Unsupported:
        return None


def native_filter(element: Element, plan: Plan) -> Optional[NativeFilter]:
    """A derived stream that only filters one stream and selects some of its columns, so that
    Spark expressions give exactly the engine's rows, or None.

    It must select from one stream (no FROM KEEP, join, GROUP BY, aggregate, DECLARE, MATCHING)
    items that are plain columns of the same type as the output column, and its WHERE, if any,
    must be in the subset of :func:`condition_kind`. Partitioning is allowed: it changes only the
    instance a row is counted under, which the runtime assigns as the per-instance path does.
    """
    found = _select_from_one_stream(element, plan, "stream")
    if found is None or element.keep is not None:
        return None
    sel, alias, src = found
    if sel.group_by or sel.aggregates:
        return None
    types = {c.name: c.type for c in src.columns}
    out_types = {c.name: c.type for c in element.columns}
    items = []
    for item in sel.items:
        col = plain_column(item.expr, alias)
        if col is None or types.get(col) != out_types.get(item.name):
            return None
        items.append((item.name, col))
    if [name for name, _ in items] != [c.name for c in element.columns]:
        return None
    if sel.where is not None and condition_kind(sel.where, alias, types) != "boolean":
        return None
    return NativeFilter(src.name, alias, tuple(items), sel.where)
