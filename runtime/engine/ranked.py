"""GROUP ORDER BY and rank() in GROUP FILTER: aggregation over the ranked rows of each group.

ESP orders a group's rows by GROUP ORDER BY, then GROUP FILTER picks the rows the aggregates see,
and ``rank()`` there is a row's place in that order. A row's rank changes when rows before it
come or go, so a group cannot keep running values: :class:`RankedAggregator` stores every row of
every group and, on each change, sorts the group, evaluates GROUP FILTER row by row with its rank,
and folds the aggregates over the rows that pass, in group order (first() and last() are the
first and last rows of that order). A change to one group costs O(rows of the group), as in ESP,
where this clause is used over windows that KEEP a few rows per group.

Ranks count from 1, as ESP's Programmers Guide says ("every row in the group is ranked from 1 to
N"; ``rank() < 11`` keeps 10 rows). Choices where ESP's reference is silent: rows that tie
on GROUP ORDER BY (and all rows, without GROUP ORDER BY) rank in order of arrival; nulls sort
before every value (after them with DESC), NaN after every number.
"""
from __future__ import annotations

from dataclasses import fields, replace
from functools import cmp_to_key
from typing import Any, Mapping, Optional, Sequence

from ccl.plan.model import Select
from ccl.syntax import nodes as n

from runtime.engine.aggregate import ARGS, SINCE, TOUCHED, Aggregator, Rows, nan_largest, plain_rows
from runtime.engine.changes import Change
from runtime.engine.expr import Expressions, SplashError
from runtime.engine.join import null_filled, referenced_columns

__all__ = ["RankedAggregator", "is_ranked"]

RANK = "__rank"  # the variable GROUP FILTER reads where it calls rank()
# a stored row of a group: [since, touched, args, GROUP ORDER BY values, input rows]
ORDER, INPUT = 3, 4
_NONE: Mapping[tuple, list] = {}


def is_ranked(select: Select) -> bool:
    """Whether a select's aggregation needs group order: GROUP ORDER BY, or rank() in GROUP
    FILTER."""
    return bool(select.group_order_by) or _calls_rank(select.group_filter)


def _is_rank(expr: Any) -> bool:
    return (isinstance(expr, n.Call) and str(expr.func.name).lower() == "rank"
            and not expr.library)


def _calls_rank(expr: Any) -> bool:
    return isinstance(expr, n.Node) and any(_is_rank(x) for x in expr.walk())


def _rank_as_variable(expr: Any) -> Any:
    """``expr`` (a plan tree, not changed) with each ``rank()`` call made a read of the variable
    RANK."""
    if _is_rank(expr):
        return n.Var(n.Ident(RANK))
    if isinstance(expr, n.Node):
        return replace(expr, **{f.name: _rank_as_variable(getattr(expr, f.name))
                                for f in fields(expr) if f.name != "span"})
    if isinstance(expr, (list, tuple)):
        return type(expr)(_rank_as_variable(v) for v in expr)
    return expr


def _rank_limit(expr: Any) -> Optional[int]:
    """How many rows can pass when GROUP FILTER is exactly ``rank() < n`` (n - 1), ``rank() <= n``
    (n) or the same turned round (``n > rank()``), with an integer literal; else None."""
    if not isinstance(expr, n.Binary):
        return None
    op, left, right = expr.op, expr.left, expr.right
    if _calls_rank(right) and not _calls_rank(left):
        op, left, right = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op), right, left
    if (op not in ("<", "<=") or not _is_rank(left) or not isinstance(right, n.Literal)
            or right.kind != "integer"):
        return None
    return max(int(right.value) + (op == "<=") - 1, 0)  # ranks count from 1  # type: ignore[call-overload]


def _compare(a: object, b: object) -> int:
    if a is None or b is None:
        return (a is not None) - (b is not None)  # null first
    ka, kb = nan_largest(a), nan_largest(b)
    return (ka > kb) - (ka < kb)  # type: ignore[operator]


class RankedAggregator(Aggregator):
    """An :class:`Aggregator` whose groups keep their rows and are refolded in group order on
    every change (see the module docstring). A group's ``rows`` maps input key to ``[since,
    touched, args, order values, input rows]``; ``n`` counts the rows GROUP FILTER lets through
    (the group has an output row when it is not 0); the group is forgotten when it has no rows."""

    def __init__(self, select: Select, exprs: Expressions, columns: Sequence[Sequence[str]],
                 key: list[str], insert_only: bool = False) -> None:
        """``insert_only``: the input only ever inserts (a stream without FROM KEEP)."""
        filter_expr = select.group_filter
        super().__init__(replace(select, group_filter=None), exprs, columns, key, retracting=True)
        self.group_filter = (exprs.compile(_rank_as_variable(filter_expr))
                             if filter_expr is not None else None)
        orders = select.group_order_by
        self.order_by = [exprs.compile(o.expr) for o in orders]
        self.descending = [bool(o.descending) for o in orders]
        self.null_columns = referenced_columns([filter_expr, [o.expr for o in orders],
                                                select.having, select.group_by,
                                                [it.expr for it in select.items],
                                                [s.args for s in select.aggregates]])
        self._sort_key = cmp_to_key(self._compare_rows)
        # With inserts only, ranks never fall: under GROUP FILTER rank() < n a row ranked n or
        # more is out for good, and the group keeps its first n rows only.
        self.insert_only = insert_only
        self.keep_ranks = _rank_limit(filter_expr) if insert_only else None

    def apply(self, state: dict, change: Change) -> list[Change]:
        """The output row changes caused by one input row change. Everything that can fail (the
        new row's expressions, GROUP FILTER over the groups it changes) is evaluated before the
        state changes, so that a row refused as a bad record leaves no trace."""
        if not state.get("ranked"):
            if state["groups"]:  # kept by a version that ignored GROUP ORDER BY: no rows to rank
                raise SplashError("the group state comes from a checkpoint of a version without "
                                  "GROUP ORDER BY / rank(): start this element from a new checkpoint")
            state["ranked"] = True
        ikey = tuple(change.key)
        entry = self._contribution(change.new) if change.op in ("i", "u") else None
        old_gkey = state["inputs"].get(ikey)
        groups = state["groups"]
        new_rows: dict[tuple, dict] = {}
        stored = None
        if old_gkey is not None:
            new_rows[old_gkey] = dict(groups[old_gkey]["rows"])
            stored = new_rows[old_gkey].pop(ikey)
        if entry is not None:
            gkey, (args, order) = entry
            rows = new_rows.get(gkey)
            if rows is None:
                rows = new_rows[gkey] = dict(groups[gkey]["rows"]) if gkey in groups else {}
            since = stored[SINCE] if stored is not None and old_gkey == gkey else change.seq
            rows[ikey] = [since, change.seq, args, order, plain_rows(change.new)]  # type: ignore[arg-type]
        folds = {g: self._fold(rows) for g, rows in new_rows.items()}
        for g, rows in new_rows.items():
            group = groups.get(g)
            if group is None:
                group = groups[g] = self.new_group()
            group["n"], group["acc"], ranked = folds[g]
            if self.keep_ranks is not None:
                for out in ranked[self.keep_ranks:]:
                    del rows[out]
            group["rows"] = rows
            if entry is not None and g == entry[0]:
                group["row"] = plain_rows(change.new)  # type: ignore[arg-type]
            elif change.old is not None:
                group["row"] = plain_rows(change.old)
        state["inputs"].pop(ikey, None)
        if entry is not None and not self.insert_only:  # a stream's row never changes again
            state["inputs"][ikey] = entry[0]
        return [c for g in new_rows for c in self._emit(state, g, change.seq)]

    def initial_state(self) -> dict:
        """As :meth:`Aggregator.initial_state`, marked as holding every group's rows."""
        return {**super().initial_state(), "ranked": True}

    def _contribution(self, rows: Optional[Rows]) -> Optional[tuple[tuple, tuple]]:
        """``(group key, (arguments of each aggregate, GROUP ORDER BY values))`` of an input
        row; GROUP FILTER waits for the row's rank."""
        if rows is None:
            return None
        filled = null_filled(rows, self.null_columns)
        gkey = tuple(f(filled) for f in self.group_by)
        return gkey, ([agg.values(filled) for agg in self.aggregates],
                      [f(filled) for f in self.order_by])

    def _fold(self, rows: Mapping[tuple, list]) -> tuple[int, list, list[tuple]]:
        """(rows GROUP FILTER lets through, the aggregates' running values over them, the input
        keys in rank order)."""
        ranked = sorted(rows, key=lambda ikey: self._sort_key(rows[ikey]))
        accs = [agg.init() for agg in self.aggregates]
        n = 0
        for rank, row in enumerate(rows[ikey] for ikey in ranked):
            if self.group_filter is not None:
                filled = null_filled(row[INPUT], self.null_columns)
                if self.group_filter(filled, {RANK: rank + 1}) is not True:
                    continue
            # the place in group order stands for arrival: first()/last() follow the order
            accs = [agg.add(acc, row[ARGS][i], n, row[TOUCHED], _NONE)
                    for i, (agg, acc) in enumerate(zip(self.aggregates, accs))]
            n += 1
        return n, accs, ranked

    def _compare_rows(self, a: list, b: list) -> int:
        for x, y, desc in zip(a[ORDER], b[ORDER], self.descending):
            c = _compare(x, y)
            if c:
                return -c if desc else c
        return (a[SINCE] > b[SINCE]) - (a[SINCE] < b[SINCE])

    def _forgotten(self, group: dict) -> bool:
        return not group["rows"]
