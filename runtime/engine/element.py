"""The per-instance engine of one stateful element (plain Python, no Spark): see docs/runtime.md.

An :class:`Engine` is built once per element from the plan and holds no rows: every instance's
data lives in a state dict (plain, picklable) that the caller keeps between batches, so one engine
serves all instances of its element.

Pipeline of a derived element, per select of its query (several for a UNION)::

    source stages (mirror / FROM KEEP) -> join (several sources) -> WHERE
        -> aggregation or projection -> the element's output stage (stream / window / delta stream)
"""
from __future__ import annotations

from typing import Iterator, Mapping, Optional, Sequence

from ccl.plan.model import Aggregate, Element, Plan, Select
from ccl.syntax import nodes as n
from ccl.syntax.nodes import Star

from runtime.engine.aggregate import SUPPORTED, Aggregator
from runtime.engine.cache import Declared
from runtime.engine.changes import OPS, Bad, Change, Emit, Event, Output
from runtime.engine.expr import Expressions, SplashError
from runtime.engine.join import JoinSource, null_filled
from runtime.engine.parts import column_pairs, field_ref, partitions_variable
from runtime.engine.ranked import RankedAggregator, is_ranked
from runtime.engine.stages import (
    InputStage,
    OutputStage,
    Projection,
    RowRefused,
    SourceStage,
    consolidate,
    where,
)

__all__ = ["Engine"]


class _Select:
    """The compiled parts of one select (no state)."""

    def __init__(self, select: Select, elements: Mapping[str, Element], element: Element,
                 variables: Mapping[str, object], declared: Optional[Declared] = None) -> None:
        self.sources: list[SourceStage] = []
        self.aliases: list[str] = []
        infos: list[JoinSource] = []
        types: dict[str, Sequence] = {}
        for src in select.sources:
            stage = SourceStage(elements[src.element], src.keep)
            self.sources.append(stage)
            self.aliases.append(src.alias)
            types[src.alias] = stage.columns
            infos.append(JoinSource(src.alias, stage.effective_kind, [c for c, _ in stage.columns]))
        exprs = Expressions(variables, types, declared.decl if declared is not None else None)
        self.exprs = exprs
        self.columns = column_pairs(element.columns)
        self.joiner = None
        self.matcher = None
        if select.matching:
            from runtime.engine.matching import Matcher
            self.matcher = Matcher(select.matching, exprs, self.aliases,
                                   [src.element for src in select.sources],
                                   {a: [c for c, _ in types[a]] for a in self.aliases})
        elif len(self.sources) > 1:
            from runtime.engine.join import Joiner
            self.joiner = Joiner(select, exprs, infos)
        self.where = exprs.compile(select.where) if select.where else None
        self.aggregator = None
        self.projection: Optional[Projection] = None
        key = list(element.key)
        cache_aggs = _cache_aggregates(select, declared)
        # Rows of a select that mixes aggregates over an event cache with other aggregates are
        # refused (bad records): the engine computes one kind or the other.
        self.refused: Optional[str] = None
        if cache_aggs and len(cache_aggs) != len(select.aggregates):
            self.refused = (f"{element.name}: aggregates over an event cache cannot be mixed "
                            "with other aggregates")
        # With GROUP BY (ESP's own example groups by the cache's key), each change recomputes the
        # output row of its group from the cache bucket: an upsert of that row.
        self.grouped_cache = bool(cache_aggs) and bool(select.group_by)
        if cache_aggs:
            # avg(cache.price) and the like: evaluated over the cache's current bucket for each row
            # (runtime/engine/cache.py), bound as __aggN for the select items.
            aggs = [(a.name, exprs.compile(n.Call(n.Ident(a.fn), list(a.args), False)))
                    for a in cache_aggs]
            self.projection = Projection(select, exprs, self.columns, key,
                                         keyed=element.kind != "stream",
                                         extra=lambda rows: {name: f(rows) for name, f in aggs})
        elif select.aggregates or select.group_by:
            # one stream source without a FROM KEEP gives inserts only: nothing to retract, so
            # groups keep running values and no input rows (state stays one entry per group)
            insert_only = len(self.sources) == 1 and self.sources[0].store is None
            if is_ranked(select):
                self.aggregator = RankedAggregator(select, exprs, self.columns, key, insert_only)
            else:
                self.aggregator = Aggregator(select, exprs, self.columns, key,
                                             retracting=not insert_only)
        else:
            self.projection = Projection(select, exprs, self.columns, key,
                                         keyed=element.kind != "stream")
        if (self.aggregator is not None and self.joiner is None and self.matcher is None
                and not cache_aggs and self.refused is None
                and not _mirror_needed(select, self.aggregator, self.sources, types)):
            self.sources[0].unmirror()

    def initial_state(self) -> dict:
        """This select's part of an instance's state."""
        return {"sources": [s.initial_state() for s in self.sources],
                "join": self.joiner.initial_state() if self.joiner else None,
                "agg": self.aggregator.initial_state() if self.aggregator else None,
                "match": self.matcher.initial_state() if self.matcher else None}

    def apply(self, state: dict, index: int, change: Change, now_ms: int = 0) -> list[Change]:
        """Output-row changes for one change of source ``index``'s rows."""
        if self.refused is not None:
            raise SplashError(self.refused)
        if self.matcher is not None:
            if state.get("match") is None:  # a state from before MATCHING ran
                state["match"] = self.matcher.initial_state()
            rows = self.matcher.apply(state["match"], index, change, now_ms)
        elif self.joiner is not None and not self.joiner.outer:
            rows = self.joiner.apply(state["join"], index, change)  # (every side present)
        elif self.joiner is not None:
            # WHERE and the select list read nulls from the missing side of an outer join
            rows = [Change(c.op, c.key, _filled(c.old, self.joiner.columns),
                           _filled(c.new, self.joiner.columns), c.seq)
                    for c in self.joiner.apply(state["join"], index, change)]
        else:
            alias = self.aliases[index]
            rows = [Change(change.op, change.key,
                           {alias: change.old} if change.old is not None else None,
                           {alias: change.new} if change.new is not None else None, change.seq)]
        return self.finish(state, rows)

    def finish(self, state: dict, rows: list[Change]) -> list[Change]:
        """Output-row changes for row changes over the sources' aliases: WHERE, then the
        aggregation or projection."""
        if self.where is not None:
            rows = [c for r in rows for c in where(r, self.where)]
        if self.grouped_cache:
            rows = [Change("u", r.key, None, r.new if r.new is not None else r.old, r.seq)
                    for r in rows]
        if self.aggregator is None:
            return [self.projection.apply(r) for r in rows]
        # the aggregator's rows are already cast to the element's columns
        return [c for r in rows for c in self.aggregator.apply(state["agg"], r)]


# Column types whose equal values are the same value (no -0.0 and 0.0, NaN, 1.0 and 1.00 of
# decimals, time zones): any row of a group shows its GROUP BY columns of these types alike.
_EXACT = ("string", "integer", "long", "boolean")
# Column types whose comparisons with each other never raise (``operators.compare``), by class.
_CLASS = {"string": "string", "integer": "number", "long": "number", "float": "number",
          "boolean": "boolean"}


def _mirror_needed(select: Select, aggregator: Aggregator, sources: Sequence[SourceStage],
                   types: Mapping[str, Sequence]) -> bool:
    """Whether the one source of an aggregating select must be mirrored by its key.

    The mirror gives the aggregator the old row of an update or delete. The aggregator finds the
    key's contribution (its group and arguments) in its own ``inputs``, whatever the opcode, so
    it reads the old row only to test WHERE on it (which decides nothing then: the key is in
    ``inputs`` exactly when the row it holds passed WHERE and GROUP FILTER) and to make the row
    leaving a group that group's ``row``, which the select items and HAVING read. Without the
    mirror both hold when (1) nothing evaluated on a row before the aggregator's state changes can
    fail (WHERE, GROUP FILTER, the GROUP BY values and the aggregate arguments: a failure leaves
    the mirror changed and ``inputs`` not, and the old row then differs from the contribution),
    and (2) the items and HAVING read, outside aggregate calls, only GROUP BY columns of exact
    types: every row of a group shows them alike, so the group's ``row`` may stay the row that
    last entered it. Neither depends on the source's changes being consistent (an insert of a
    present key, a delete of a missing one, a key moving between instances): such a change is
    resolved against ``inputs`` as the mirror path resolves it. A FROM-level KEEP, a stream
    source and a ranked aggregator keep their mirror."""
    if len(sources) != 1 or type(aggregator) is not Aggregator or not aggregator.retracting:
        return True
    source, src = sources[0], select.sources[0]
    if source.kind == "stream" or src.keep is not None or source.store is None:
        return True
    alias = src.alias
    kinds = {c: str(t).strip().lower() for c, t in types.get(alias, ())}

    def cls(expr: object) -> Optional[str]:
        """The class of ``expr``'s value when evaluating it can never raise, else None."""
        ref = field_ref(expr)
        if ref is not None:
            return _CLASS.get(kinds.get(ref[1], "")) if ref[0] == alias else None
        if isinstance(expr, n.Literal):
            if expr.kind == "null":
                return "null"
            return {"integer": "number", "long": "number", "float": "number",
                    "string": "string", "boolean": "boolean"}.get(expr.kind)
        if (isinstance(expr, n.Call) and expr.func.name.lower() == "isnull" and expr.library is None
                and len(expr.args) == 1 and not expr.distinct):  # (``x IS NULL``)
            return "boolean" if cls(expr.args[0]) is not None else None
        if isinstance(expr, n.Unary) and expr.op == "not":
            return "boolean" if cls(expr.operand) in ("boolean", "number", "null") else None
        if isinstance(expr, n.Binary) and expr.temporal is None:
            left, right = cls(expr.left), cls(expr.right)
            if left is None or right is None:
                return None
            if expr.op in ("and", "or"):
                conditions = ("boolean", "number", "null")
                return "boolean" if left in conditions and right in conditions else None
            if expr.op in ("=", "!=", "<>", "<", "<=", ">", ">="):
                return "boolean" if left == right or "null" in (left, right) else None
        return None

    if select.where is not None and cls(select.where) not in ("boolean", "number", "null"):
        return True
    if select.group_filter is not None and cls(select.group_filter) is None:
        return True
    if any(cls(e) is None for e in select.group_by):
        return True
    for spec, agg in zip(select.aggregates, aggregator.aggregates):
        if agg.check is not None or agg.fn not in SUPPORTED:
            return True
        if any(cls(a) is None for a in spec.args if not isinstance(a, Star)):
            return True
    exact = {ref[1] for ref in map(field_ref, select.group_by)
             if ref is not None and ref[0] == alias and kinds.get(ref[1]) in _EXACT}
    for expr in [select.having, *[it.expr for it in select.items]]:
        bases: set[int] = set()  # the Var of each alias.column met (the walk is preorder)
        for node in (expr.walk() if expr is not None else ()):
            ref = field_ref(node)
            if ref is not None:
                if ref[0] != alias or ref[1] not in exact:
                    return True
                bases.add(id(node.base))  # type: ignore[attr-defined]
            elif isinstance(node, n.Var) and node.name.name == alias and id(node) not in bases:
                return True  # the row as a whole
    return False


def _cache_aggregates(select: Select, declared: Optional[Declared]) -> list[Aggregate]:
    """The select's aggregates whose arguments name an event cache of the element's DECLARE."""
    if declared is None or not declared.caches:
        return []
    out = []
    for agg in select.aggregates:
        names = {node.name.name for a in agg.args for node in a.walk() if isinstance(node, n.Var)}
        if names & set(declared.caches):
            out.append(agg)
    return out


class Engine:
    """Runs one element of a compiled plan for any number of partition instances.

    ``element`` is one of ``plan.elements``; ``plan`` the whole plan (source elements are looked
    up in it by name). ``instance`` is informational: the state carries everything else.
    """

    def __init__(self, element: Element, plan: Plan, instance: int = 0) -> None:
        self.element = element
        self.name: str = element.name
        self.kind: str = element.kind
        self.columns = column_pairs(element.columns)
        self.instance = instance
        self.variables = partitions_variable(element)
        query = element.query
        self.input: Optional[InputStage] = None
        self.selects: list[_Select] = []
        elements = {e.name: e for e in plan.elements}
        sources = {self.name: element} if query is None else {}
        for sel in query.selects if query is not None else ():
            for src in sel.sources:
                sources.setdefault(src.alias, elements[src.element])
                sources.setdefault(src.element, elements[src.element])
        # Plan globals and the local DECLARE: variables kept per instance in state["vars"].
        declared: Optional[Declared] = Declared(plan.globals, element.declare, sources,
                                                constants=self.variables)
        if not declared.used:  # type: ignore[union-attr]
            declared = None
        self.declared = declared
        decl = declared.decl if declared is not None else None
        self._exprs: list[Expressions] = []
        # port -> the cache variables an event on that port feeds (each source feeds its caches once)
        self.cache_ports: dict[int, tuple[str, list[str]]] = {}
        if query is None:
            exprs = Expressions(self.variables, {self.name: self.columns}, decl)
            self._exprs.append(exprs)
            self.input = InputStage(element, exprs)
            self.ports: list[tuple[int, int]] = [(0, 0)]
        else:
            self.selects = [_Select(s, elements, element, self.variables, declared)
                            for s in query.selects]
            self._exprs += [sel.exprs for sel in self.selects]
            self.ports = [(si, i) for si, sel in enumerate(self.selects)
                          for i in range(len(sel.sources))]
            if declared is not None and declared.caches:
                fed: set[str] = set()
                for port, (si, i) in enumerate(self.ports):
                    src = query.selects[si].sources[i]
                    names = [c for c in declared.caches_of([src.alias, src.element])
                             if c not in fed]
                    fed.update(names)
                    if names:
                        self.cache_ports[port] = (elements[src.element].kind, names)
        self.output = OutputStage(element)

    def initial_state(self) -> dict:
        """A fresh instance's state (plain picklable data)."""
        return {"seq": None,
                "vars": self.declared.initial() if self.declared is not None else {},
                "input": self.input.initial_state() if self.input else None,
                "selects": [s.initial_state() for s in self.selects],
                "output": self.output.initial_state() if self.input is None else None}

    def process(self, state: dict, events: Sequence[Event], now_ms: int) -> list[Output]:
        """Apply ``events`` in the given order; rows a time KEEP evicts by ``now_ms`` go first.

        A row whose expression fails or that breaks the key rules becomes a :class:`Bad` and
        processing continues with the next event."""
        out: list[Output] = list(self.expire(state, now_ms))
        self._bind(state)
        for group in self._transactions(events):
            rows: list[Change] = []
            for event in group:
                if state["seq"] is None or event.seq > state["seq"]:
                    state["seq"] = event.seq
                try:
                    rows += self._event(state, event, now_ms)
                except (SplashError, RowRefused) as e:
                    out.append(Bad(str(e), event.seq, event.port, dict(event.values)))
            if self.input is not None:
                out += [emit_of(c) for c in rows]
                continue
            try:
                out += [emit_of(c) for c in self.deliver(state, consolidate(rows), now_ms)]
            except (SplashError, RowRefused) as e:
                last = group[-1]
                out.append(Bad(str(e), last.seq, last.port, dict(last.values)))
        return out

    def _transactions(self, events: Sequence[Event]) -> Iterator[Sequence[Event]]:
        """``events`` cut into ESP transactions: the changes one upstream row caused (one seq, one
        port; e.g. a KEEP eviction upstream and the insert that caused it) are applied together
        and reach the output stage merged, so no downstream state in between is emitted. An input
        element's rows are each their own."""
        start = 0
        for i in range(1, len(events) + 1):
            if (i == len(events) or self.input is not None or events[i].seq != events[start].seq
                    or events[i].port != events[start].port):
                yield events[start:i]
                start = i

    def expire(self, state: dict, now_ms: int) -> list[Emit]:
        """Evict what time-based KEEPs (the element's and FROM-level ones) have due at ``now_ms``;
        the deletes carry the largest seq this state has seen."""
        self._bind(state)
        for exprs in self._exprs:  # no input row at hand: getrowid() is null
            exprs.set_row_id(None)
        if self.declared is not None and self.declared.caches:
            self.declared.sweep(state["vars"], now_ms)
        seq = state["seq"] if state["seq"] is not None else 0
        if self.input is not None:
            return [emit_of(c) for c in self.input.expire(state["input"], now_ms, seq)]
        rows: list[Change] = []
        for si, sel in enumerate(self.selects):
            sstate = state["selects"][si]
            for i, source in enumerate(sel.sources):
                for change in source.expire(sstate["sources"][i], now_ms, seq):
                    try:
                        rows += sel.apply(sstate, i, change, now_ms)
                    except SplashError:
                        continue    # no input row to blame: what it would have produced is lost
            if sel.matcher is not None and sstate.get("match") is not None:
                try:
                    rows += sel.finish(sstate, sel.matcher.expire(sstate["match"], now_ms, seq))
                except SplashError:
                    pass            # as above
        changes = self.deliver(state, consolidate(rows), now_ms)
        evicted = self.output.expire(state["output"], now_ms, seq)
        for change in evicted:
            if change.op == "d":  # (an update is a row that aged)
                self._drop_group(state, change.key)
        return [emit_of(c) for c in changes + evicted]

    def next_deadline(self, state: dict) -> Optional[int]:
        """When :meth:`expire` next has work (ms since epoch), or ``None``."""
        if self.input is not None:
            return self.input.next_deadline(state["input"])
        due = [self.output.next_deadline(state["output"])]
        for si, sel in enumerate(self.selects):
            due += [s.next_deadline(state["selects"][si]["sources"][i])
                    for i, s in enumerate(sel.sources)]
            if sel.matcher is not None and state["selects"][si].get("match") is not None:
                due.append(sel.matcher.next_deadline(state["selects"][si]["match"]))
        times = [t for t in due if t is not None]
        return min(times) if times else None

    def _event(self, state: dict, event: Event, now_ms: int) -> list[Change]:
        """An input element's changes for ``event``; a derived element's rows before the output
        stage (merged with the rest of the transaction by :meth:`process`)."""
        if event.op not in OPS:
            raise RowRefused(f"unknown opcode {event.op!r}")
        for exprs in self._exprs:
            exprs.set_row_id(event.seq)
        if self.input is not None:
            if event.port != 0:
                raise RowRefused(f"no input port {event.port} on {self.name}")
            return self.input.apply(state["input"], event.op, event.seq, event.values, now_ms)
        if not 0 <= event.port < len(self.ports):
            raise RowRefused(f"no input port {event.port} on {self.name}")
        si, index = self.ports[event.port]
        sel, sstate = self.selects[si], state["selects"][si]
        feeds = self.cache_ports.get(event.port)
        if feeds is not None:
            self.declared.feed(state["vars"], feeds[1], feeds[0], event.op, event.values, now_ms)  # type: ignore[union-attr]
        changes = sel.sources[index].apply(sstate["sources"][index], event.op, event.seq,
                                           event.values, now_ms)
        return [c for change in changes for c in sel.apply(sstate, index, change, now_ms)]

    def _bind(self, state: dict) -> None:
        # DECLAREd variables (and nextval()'s count) live in the instance's state: the
        # interpreters read and write there.
        store = state.setdefault("vars", self.declared.initial() if self.declared is not None else {})
        for exprs in self._exprs:
            exprs.bind(store)

    def deliver(self, state: dict, changes: list[Change], now_ms: int) -> list[Change]:
        """The element's own changes for changes of its output rows: the output stage (a KEEP
        that evicts an aggregate row makes its group forgotten)."""
        out: list[Change] = []
        for change in changes:
            emitted, evicted = self.output.apply(state["output"], change, now_ms)
            for key in evicted:
                self._drop_group(state, key)
            out += emitted
        return out

    def _drop_group(self, state: dict, key: tuple) -> None:
        # The window's KEEP evicted an aggregate row: every aggregating select forgets that group.
        for si, sel in enumerate(self.selects):
            if sel.aggregator is not None:
                sel.aggregator.drop_group(state["selects"][si]["agg"], key)


def _filled(rows: Optional[Mapping], columns: Mapping[str, Sequence[str]]) -> Optional[dict]:
    return null_filled(rows, columns) if rows is not None else None


def emit_of(change: Change) -> Emit:
    """The changelog row of a change of the element's own rows."""
    values = change.old if change.op == "d" else change.new
    return Emit(change.op, change.seq, values if type(values) is dict else dict(values or {}))
