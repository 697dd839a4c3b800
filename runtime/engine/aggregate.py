"""Incremental GROUP BY aggregation with retraction (docs/runtime-joins-aggregates.md).

An :class:`Aggregator` turns changes of input rows (``{alias: row}``, after the join and WHERE)
into changes of the element's output rows, one per group. Two modes:

- ``retracting=True`` (the input can update or delete): every group stores, per input key, the
  argument values its row contributed (and when it entered the group), so that a row that leaves
  takes its contribution away: counts and sums are adjusted, min/max/first/last/valueinserted are
  recomputed from the stored values when the leaving row held the current result;
- ``retracting=False`` (insert-only input): running values only, no rows stored.

All state is plain data in the ``state`` dict (picklable); the object holds compiled expressions.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping, Optional, Sequence

from runtime.engine.changes import Change
from runtime.engine.expr import Compiled, Expressions, SplashError, coerce_row
from runtime.engine.join import null_filled, referenced_columns

__all__ = ["Aggregator"]

Rows = Mapping[str, Optional[Mapping[str, object]]]

# one stored contribution of an input row to its group: [since, touched, [args of each aggregate]]
SINCE, TOUCHED, ARGS = 0, 1, 2


# --- numbers -----------------------------------------------------------------------------------

def _mixed(a: object, b: object) -> tuple[object, object]:
    """Operands made combinable: a Decimal meeting a float becomes a float."""
    if isinstance(a, Decimal) and isinstance(b, float):
        return float(a), b
    if isinstance(a, float) and isinstance(b, Decimal):
        return a, float(b)
    return a, b


def _add(a: object, b: object) -> object:
    a, b = _mixed(a, b)
    return a + b  # type: ignore[operator]


def _sub(a: object, b: object) -> object:
    a, b = _mixed(a, b)
    return a - b  # type: ignore[operator]


def _mul(a: object, b: object) -> object:
    a, b = _mixed(a, b)
    return a * b  # type: ignore[operator]


def _div(total: object, count: object) -> object:
    """``total / count`` as Spark's avg: Decimal stays Decimal, everything else is a double."""
    if isinstance(total, Decimal) or isinstance(count, Decimal):
        return Decimal(total) / Decimal(count)  # type: ignore[arg-type]
    return float(total) / float(count)  # type: ignore[arg-type]


# --- one aggregate function --------------------------------------------------------------------

class _Aggregate:
    """One aggregate call: how to compute its arguments and keep its running value ``acc``."""

    def __init__(self, index: int, spec: Mapping[str, object], exprs: Expressions) -> None:
        self.index = index
        self.name = str(spec["name"])
        self.fn = str(spec["fn"]).lower()
        args = [a for a in spec.get("args") or [] if not _is_star(a)]
        self.star = not args
        self.args: list[Compiled] = [exprs.compile(a) for a in args]
        self.distinct = bool(spec.get("distinct")) and self.fn in ("count", "sum", "avg")
        if self.fn not in _INIT:
            raise ValueError(f"unknown aggregate function {self.fn!r}")

    def values(self, rows: Rows) -> list:
        """The argument values for one input row."""
        return [f(rows) for f in self.args]

    def init(self) -> object:
        """The running value of an empty group."""
        return {} if self.distinct else _INIT[self.fn]()

    def add(self, acc: object, args: list, since: int, touched: int) -> object:
        """``acc`` with one row's contribution added."""
        if self.distinct:
            if args[0] is not None:
                acc[args[0]] = acc.get(args[0], 0) + 1  # type: ignore[index,union-attr]
            return acc
        return _ADD[self.fn](self, acc, args, since, touched)

    def remove(self, acc: object, args: list, since: int, touched: int,
               rows: Mapping[tuple, list]) -> object:
        """``acc`` without one row's contribution; ``rows`` are the group's remaining rows."""
        if self.distinct:
            value = args[0]
            if value is not None and value in acc:  # type: ignore[operator]
                acc[value] -= 1  # type: ignore[index]
                if acc[value] == 0:  # type: ignore[index]
                    del acc[value]  # type: ignore[union-attr]
            return acc
        return _REMOVE[self.fn](self, acc, args, since, touched, rows)

    def result(self, acc: object) -> object:
        """The aggregate's value."""
        if self.distinct:
            keys = list(acc)  # type: ignore[call-overload]
            if self.fn == "count":
                return len(keys)
            total = _sum_of(keys)
            return total if self.fn == "sum" or total is None else _div(total, len(keys))
        return _RESULT[self.fn](acc)

    # --- per function ---

    def _count_add(self, acc: int, args: list, since: int, touched: int) -> int:
        return acc + (1 if self.star or args[0] is not None else 0)

    def _count_remove(self, acc: int, args: list, since: int, touched: int, rows: Mapping) -> int:
        return acc - (1 if self.star or args[0] is not None else 0)

    def _sum_add(self, acc: list, args: list, since: int, touched: int) -> list:
        if args[0] is None:
            return acc
        return [args[0] if acc[1] == 0 else _add(acc[0], args[0]), acc[1] + 1]

    def _sum_remove(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        if args[0] is None:
            return acc
        return [0, 0] if acc[1] == 1 else [_sub(acc[0], args[0]), acc[1] - 1]

    def _vwap_add(self, acc: list, args: list, since: int, touched: int) -> list:
        price, volume = args[0], args[1]
        if price is None or volume is None:
            return acc
        if acc[2] == 0:
            return [_mul(price, volume), volume, 1]
        return [_add(acc[0], _mul(price, volume)), _add(acc[1], volume), acc[2] + 1]

    def _vwap_remove(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        price, volume = args[0], args[1]
        if price is None or volume is None:
            return acc
        if acc[2] == 1:
            return [0, 0, 0]
        return [_sub(acc[0], _mul(price, volume)), _sub(acc[1], volume), acc[2] - 1]

    def _extreme_add(self, acc: object, args: list, since: int, touched: int) -> object:
        value = args[0]
        if value is None:
            return acc
        if acc is None:
            return value
        if value != value or acc != acc:  # NaN is larger than every number (SPLASH and Spark)
            better = acc == acc if self.fn == "max" else value == value
        else:
            better = value < acc if self.fn == "min" else value > acc  # type: ignore[operator]
        return value if better else acc

    def _extreme_remove(self, acc: object, args: list, since: int, touched: int,
                        rows: Mapping) -> object:
        value = args[0]
        if value is None or (value != acc and (value == value or acc == acc)):  # NaN equals NaN
            return acc
        values = [r[ARGS][self.index][0] for r in rows.values()]
        values = [v for v in values if v is not None]
        if not values:
            return None
        return (min if self.fn == "min" else max)(values, key=_nan_largest)

    def _order(self, since: int, touched: int) -> tuple:
        """Where a row stands for first/last/valueinserted (larger wins, except for first)."""
        return (touched,) if self.fn == "valueinserted" else (since,)

    def _pick_add(self, acc: Optional[list], args: list, since: int, touched: int) -> list:
        order = list(self._order(since, touched))
        if acc is None:
            return [order, args[0]]
        wins = order < acc[0] if self.fn == "first" else order >= acc[0]
        return [order, args[0]] if wins else acc

    def _pick_remove(self, acc: Optional[list], args: list, since: int, touched: int,
                     rows: Mapping) -> Optional[list]:
        if acc is None or list(self._order(since, touched)) != acc[0]:
            return acc
        result = None
        for row in rows.values():
            result = self._pick_add(result, row[ARGS][self.index], row[SINCE], row[TOUCHED])
        return result


def _nan_largest(value: object) -> tuple:
    """A sort key that puts NaN after every number."""
    return (True, 0) if value != value else (False, value)


def _is_star(expr: object) -> bool:
    return isinstance(expr, dict) and expr.get("node") == "Star"


def _sum_of(values: Sequence[object]) -> object:
    total: object = None
    for v in values:
        total = v if total is None else _add(total, v)
    return total


_INIT = {"count": lambda: 0, "sum": lambda: [0, 0], "avg": lambda: [0, 0],
         "vwap": lambda: [0, 0, 0], "min": lambda: None, "max": lambda: None,
         "first": lambda: None, "last": lambda: None, "valueinserted": lambda: None}
_ADD = {"count": _Aggregate._count_add, "sum": _Aggregate._sum_add, "avg": _Aggregate._sum_add,
        "vwap": _Aggregate._vwap_add, "min": _Aggregate._extreme_add,
        "max": _Aggregate._extreme_add, "first": _Aggregate._pick_add,
        "last": _Aggregate._pick_add, "valueinserted": _Aggregate._pick_add}
_REMOVE = {"count": _Aggregate._count_remove, "sum": _Aggregate._sum_remove,
           "avg": _Aggregate._sum_remove, "vwap": _Aggregate._vwap_remove,
           "min": _Aggregate._extreme_remove, "max": _Aggregate._extreme_remove,
           "first": _Aggregate._pick_remove, "last": _Aggregate._pick_remove,
           "valueinserted": _Aggregate._pick_remove}
_RESULT = {"count": lambda acc: acc,
           "sum": lambda acc: acc[0] if acc[1] else None,
           "avg": lambda acc: _div(acc[0], acc[1]) if acc[1] else None,
           "vwap": lambda acc: _div(acc[0], acc[1]) if acc[2] and acc[1] != 0 else None,
           "min": lambda acc: acc, "max": lambda acc: acc,
           "first": lambda acc: None if acc is None else acc[1],
           "last": lambda acc: None if acc is None else acc[1],
           "valueinserted": lambda acc: None if acc is None else acc[1]}


# --- the aggregator ----------------------------------------------------------------------------

class Aggregator:
    """Groups input rows and keeps one output row per group (see the module docstring)."""

    def __init__(self, select: dict, exprs: Expressions, columns: list[list[str]],
                 key: list[str], retracting: bool = True) -> None:
        """``select`` is a plan Select with aggregates; ``columns``/``key`` are the element's
        output columns and key columns; ``retracting`` says whether inputs may update/delete."""
        self.columns = columns
        self.key = list(key)
        self.retracting = retracting
        self.aggregates = [_Aggregate(i, spec, exprs)
                           for i, spec in enumerate(select.get("aggregates") or [])]
        self.group_by = [exprs.compile(e) for e in select.get("group_by") or []]
        self.group_filter = _maybe(exprs, select.get("group_filter"))
        self.having = _maybe(exprs, select.get("having"))
        self.items = [(it["name"], exprs.compile(it["expr"])) for it in select.get("items") or []]
        every = [select.get("group_filter"), select.get("having"), select.get("group_by"),
                 [it["expr"] for it in select.get("items") or []],
                 [s.get("args") for s in select.get("aggregates") or []]]
        self.null_columns = referenced_columns(every)

    def initial_state(self) -> dict:
        """``groups``: group key -> group; ``inputs``: input key -> group key (retracting mode);
        ``out``: output key -> group key."""
        return {"groups": {}, "inputs": {}, "out": {}}

    def apply(self, state: dict, change: Change) -> list[Change]:
        """The output row changes caused by one input row change."""
        if not self.retracting and change.op != "i":
            raise SplashError("an update or delete reached an aggregation over insert-only input")
        ikey = tuple(change.key)
        entry = self._contribution(change.new) if change.op in ("i", "u") else None
        touched: list[tuple] = []
        if self.retracting and ikey in state["inputs"]:
            gkey = state["inputs"].pop(ikey)
            moving_within = entry is not None and entry[0] == gkey
            since = self._remove(state, gkey, ikey, change.old if not moving_within else None)
            touched.append(gkey)
        else:
            since, moving_within = None, False
        if entry is not None:
            gkey, args = entry
            self._add(state, gkey, ikey, args, since if moving_within else change.seq,
                      change.seq, change.new)
            if gkey not in touched:
                touched.append(gkey)
        out: list[Change] = []
        for gkey in touched:
            out.extend(self._emit(state, gkey, change.seq))
        return out

    def drop_group(self, state: dict, key: tuple) -> None:
        """Forget the group whose output row (keyed ``key``) the element's KEEP evicted."""
        gkey = state["out"].pop(tuple(key), None)
        if gkey is None:
            return
        group = state["groups"].pop(gkey, None)
        for ikey in (group or {}).get("rows", {}):
            state["inputs"].pop(ikey, None)

    # --- contributions ----------------------------------------------------------------------

    def _contribution(self, rows: Optional[Rows]) -> Optional[tuple[tuple, list]]:
        """``(group key, arguments of each aggregate)`` of an input row, or None when the GROUP
        FILTER refuses it. Evaluates everything before any state changes."""
        if rows is None:
            return None
        filled = null_filled(rows, self.null_columns)
        if self.group_filter is not None and self.group_filter(filled) is not True:
            return None
        gkey = tuple(f(filled) for f in self.group_by)
        return gkey, [agg.values(filled) for agg in self.aggregates]

    def _new_group(self) -> dict:
        return {"n": 0, "acc": [agg.init() for agg in self.aggregates], "rows": {},
                "row": None, "emitted": None}

    def _add(self, state: dict, gkey: tuple, ikey: tuple, args: list, since: int,
             touched: int, rows: Rows) -> None:
        group = state["groups"].get(gkey)
        if group is None:
            group = state["groups"][gkey] = self._new_group()
        group["n"] += 1
        group["acc"] = [agg.add(acc, a, since, touched)
                        for agg, acc, a in zip(self.aggregates, group["acc"], args)]
        group["row"] = _plain(rows)
        if self.retracting:
            group["rows"][ikey] = [since, touched, args]
            state["inputs"][ikey] = gkey

    def _remove(self, state: dict, gkey: tuple, ikey: tuple, old: Optional[Rows]) -> Optional[int]:
        """Take an input row's stored contribution out of its group; give when it entered."""
        group = state["groups"].get(gkey)
        if group is None or ikey not in group["rows"]:
            return None
        since, touched, args = group["rows"].pop(ikey)
        group["n"] -= 1
        group["acc"] = [agg.remove(acc, a, since, touched, group["rows"])
                        for agg, acc, a in zip(self.aggregates, group["acc"], args)]
        if old is not None:
            group["row"] = _plain(old)
        return since

    # --- output -----------------------------------------------------------------------------

    def _output(self, group: dict) -> Optional[dict]:
        """The group's output row, or None when HAVING refuses it."""
        variables = {agg.name: agg.result(acc) for agg, acc in zip(self.aggregates, group["acc"])}
        rows = null_filled(group["row"] or {}, self.null_columns)
        if self.having is not None and self.having(rows, variables) is not True:
            return None
        values = {name: f(rows, variables) for name, f in self.items}
        return coerce_row(values, self.columns)

    def _emit(self, state: dict, gkey: tuple, seq: int) -> list[Change]:
        """The change of one group's output row (HAVING and emptiness transitions)."""
        group = state["groups"].get(gkey)
        if group is None:
            return []
        new = self._output(group) if group["n"] > 0 else None
        old = group["emitted"]
        group["emitted"] = new
        if group["n"] == 0:
            del state["groups"][gkey]
        old_key = None if old is None else self._key_of(old)
        new_key = None if new is None else self._key_of(new)
        if old_key is not None and state["out"].get(old_key) == gkey:
            del state["out"][old_key]
        if new_key is not None:
            state["out"][new_key] = gkey
        return _transition(old_key, old, new_key, new, seq)

    def _key_of(self, row: Mapping[str, object]) -> tuple:
        return tuple(row.get(k) for k in self.key)


def _transition(old_key: Optional[tuple], old: Optional[dict], new_key: Optional[tuple],
                new: Optional[dict], seq: int) -> list[Change]:
    if old is None and new is None:
        return []
    if old is None:
        return [Change("i", new_key, None, new, seq)]  # type: ignore[arg-type]
    if new is None:
        return [Change("d", old_key, old, None, seq)]  # type: ignore[arg-type]
    if old_key != new_key:
        return [Change("d", old_key, old, None, seq),  # type: ignore[arg-type]
                Change("i", new_key, None, new, seq)]  # type: ignore[arg-type]
    return [] if old == new else [Change("u", new_key, old, new, seq)]  # type: ignore[arg-type]


def _maybe(exprs: Expressions, expr: object) -> Optional[Compiled]:
    return None if expr is None else exprs.compile(expr)


def _plain(rows: Rows) -> dict:
    """Rows as plain dicts (picklable state)."""
    return {alias: None if row is None else dict(row) for alias, row in rows.items()}
