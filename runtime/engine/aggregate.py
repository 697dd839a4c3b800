"""Incremental GROUP BY aggregation with retraction (docs/runtime-joins-aggregates.md).

An :class:`Aggregator` turns changes of input rows (``{alias: row}``, after the join and WHERE)
into changes of the element's output rows, one per group. Two modes:

- ``retracting=True`` (the input can update or delete): every group stores, per input key, the
  argument values its row contributed (and when it entered the group), so that a row that leaves
  takes its contribution away: counts, sums and the exact sums behind variance, covariance,
  correlation and regression are adjusted, median/meandeviation drop the value from their sorted
  list, min/max/first/last/valueinserted/lastnonnull are recomputed from the stored values when
  the leaving row held the current result, and the order-dependent averages (weighted_avg,
  exp_weighted_avg) are refolded from the stored rows;
- ``retracting=False`` (insert-only input): running values only, no rows stored.

Aggregates: count, sum, avg, min, max, first, last, lastnonnull, valueinserted, vwap, median,
meandeviation, stddev/stddev_samp/stddev_pop, variance/var_samp/var_pop, covar_pop, covar_samp,
corr, regr_* (avgx, avgy, count, intercept, r2, slope, sxx, sxy, syy), weighted_avg,
exp_weighted_avg and nth(i, x) (from 0, in arrival or group order, as an event cache's nth). Any
other aggregate the checker accepts (recent, xmlagg, ...) does not stop
the engine: every row that reaches it is refused with a :class:`SplashError` (a bad record).

Statistics follow ESP where its reference says something (stddev_samp: sample standard deviation,
null for fewer than 2 rows; meandeviation: mean absolute deviation from the mean; corr: pairs with
a null are dropped, null for no pairs; weighted_avg: linear weights by age, newest heaviest) and
SQL (SQL:2003 / PostgreSQL) otherwise. They convert their arguments to float and ignore nulls.

All state is plain data in the ``state`` dict (picklable); the object holds compiled expressions.
"""
from __future__ import annotations

import datetime as dt
import math
from bisect import bisect_left, insort
from decimal import Decimal
from fractions import Fraction
from functools import partial
from typing import Callable, Mapping, Optional, Sequence

from ccl.plan.model import Aggregate as PlanAggregate, Select
from ccl.syntax.nodes import Star
from runtime.engine.changes import Change, same_row
from runtime.engine.expr import Compiled, Expressions, SplashError, coerce_row
from runtime.engine.join import null_filled, referenced_columns

__all__ = ["Aggregator", "SUPPORTED"]

Rows = Mapping[str, Optional[Mapping[str, object]]]

# one stored contribution of an input row to its group: [since, touched, [args of each aggregate]]
SINCE, TOUCHED, ARGS = 0, 1, 2

_NO_ROWS: Mapping[tuple, list] = {}   # the rows handed to an aggregate that must not look at any
_EPOCH = dt.datetime(1970, 1, 1)


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


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _float(value: object, fn: str) -> Optional[float]:
    """A statistic's argument as a float (ESP converts them so); null stays null."""
    if value is None:
        return None
    if not _is_number(value):
        raise SplashError(f"{fn}() needs a numeric argument, got {type(value).__name__} "
                          f"{value!r}")
    return float(value)  # type: ignore[arg-type]


def _midpoint(a: object, b: object) -> object:
    """The median of an even number of values: the mean of the two middle ones, in their type.

    Guess (ESP only says the result has the column's type and that the function "behaves
    differently for different datatypes"): integers (and intervals) truncate towards zero, dates
    take the instant halfway, and types without a mean (string, boolean) take the lower one."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        total = a + b
        half = abs(total) // 2
        return type(a)(half if total >= 0 else -half)
    if _is_number(a) and _is_number(b):
        return _div(_add(a, b), 2)
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        return a + (b - a) / 2
    return a


# --- moments (variance, covariance, correlation, regression) ----------------------------------
# acc = [n rows with finite values, rows with a NaN/infinite value, sums of each argument,
#        sums of each argument's squares, sum of the products of argument 1 and 2], every float
# scaled by 2**1074 to an exact integer: sums, retraction and the results' numerators are exact
# (no cancellation, no drift in a long-lived sliding window, a constant column has a variance of
# exactly 0), and each result is one correctly rounded division. A non-finite value cannot be
# summed that way, so such rows are only counted: while one is in the group every statistic is
# NaN (what the textbook formulas give).
N, BAD, SUMS, SQUARES, PRODUCTS = range(5)
_SCALE = 1074                      # 2**-1074 is the smallest float: x * 2**1074 is an integer


def _scaled(x: float) -> int:
    """``x * 2**1074`` exactly."""
    num, den = x.as_integer_ratio()
    return num << (_SCALE + 1 - den.bit_length())


def _moments_init(dims: int) -> list:
    return [0, 0, [0] * dims, [0] * dims, 0]


def _moments_update(acc: list, xs: Sequence[float], sign: int) -> list:
    """``acc`` with one row's values added (``sign`` 1) or taken away (``sign`` -1)."""
    if not all(map(math.isfinite, xs)):
        acc[BAD] += sign
        return acc
    acc[N] += sign
    scaled = [_scaled(x) for x in xs]
    for i, x in enumerate(scaled):
        acc[SUMS][i] += sign * x
        acc[SQUARES][i] += sign * x * x
    if len(scaled) == 2:
        acc[PRODUCTS] += sign * scaled[0] * scaled[1]
    return acc


def _quotient(num: int, den: int) -> float:
    """``num / den`` as the nearest float (infinite beyond the float range)."""
    try:
        return num / den
    except OverflowError:
        return math.inf if (num < 0) == (den < 0) else -math.inf


Moments = Callable[[int, list, list, int], Optional[float]]


def _statistic(need: int, compute: Moments) -> Callable[[list], Optional[float]]:
    """A moments result: null below ``need`` rows, NaN with a non-finite value, else computed
    from ``(n, deviations, sums, co-deviation)``, where ``deviations[i]`` is
    ``n * sum(x_i**2) - sum(x_i)**2`` and the co-deviation ``n * sum(x_1*x_2) - sum(x_1)*sum(x_2)``
    (both ``n**2 * 2**2148`` times the population (co)variance)."""
    def result(acc: list) -> Optional[float]:
        n = acc[N]
        if n + acc[BAD] < need:
            return None
        if acc[BAD]:
            return math.nan
        sums = acc[SUMS]
        devs = [n * q - s * s for s, q in zip(sums, acc[SQUARES])]
        co = n * acc[PRODUCTS] - sums[0] * sums[1] if len(sums) == 2 else 0
        return compute(n, devs, sums, co)
    return result


def _corr(n: int, devs: list, sums: list, co: int) -> Optional[float]:
    den = devs[0] * devs[1]
    if den == 0:
        return None
    r = math.sqrt(_quotient(co * co, den))
    return r if co >= 0 else -r


def _slope(n: int, devs: list, sums: list, co: int) -> Optional[float]:
    return None if devs[1] == 0 else _quotient(co, devs[1])


def _intercept(n: int, devs: list, sums: list, co: int) -> Optional[float]:
    # avg(y) - slope * avg(x), as one fraction
    if devs[1] == 0:
        return None
    return _quotient(sums[0] * devs[1] - co * sums[1], (devs[1] * n) << _SCALE)


def _r2(n: int, devs: list, sums: list, co: int) -> Optional[float]:
    # SQL:2003: null when x is constant, 1 when only y is
    if devs[1] == 0:
        return None
    return 1.0 if devs[0] == 0 else _quotient(co * co, devs[0] * devs[1])


def _pop(value: int, n: int) -> float:
    """A population (co)variance from its scaled numerator."""
    return _quotient(value, (n * n) << 2 * _SCALE)


def _samp(value: int, n: int) -> float:
    """A sample (co)variance (n - 1 denominator) from its scaled numerator."""
    return _quotient(value, (n * (n - 1)) << 2 * _SCALE)


# argument 1 is y (ESP's corr(dependent, independent); SQL's regr_*(y, x)), argument 2 is x
_MOMENT_RESULTS: dict[str, Callable[[list], object]] = {
    "var_pop": _statistic(1, lambda n, d, s, c: _pop(d[0], n)),
    "var_samp": _statistic(2, lambda n, d, s, c: _samp(d[0], n)),
    "stddev_pop": _statistic(1, lambda n, d, s, c: math.sqrt(_pop(d[0], n))),
    "stddev_samp": _statistic(2, lambda n, d, s, c: math.sqrt(_samp(d[0], n))),
    "covar_pop": _statistic(1, lambda n, d, s, c: _pop(c, n)),
    "covar_samp": _statistic(2, lambda n, d, s, c: _samp(c, n)),
    "corr": _statistic(1, _corr),
    "regr_count": lambda acc: acc[N] + acc[BAD],
    "regr_avgy": _statistic(1, lambda n, d, s, c: _quotient(s[0], n << _SCALE)),
    "regr_avgx": _statistic(1, lambda n, d, s, c: _quotient(s[1], n << _SCALE)),
    "regr_syy": _statistic(1, lambda n, d, s, c: _quotient(d[0], n << 2 * _SCALE)),
    "regr_sxx": _statistic(1, lambda n, d, s, c: _quotient(d[1], n << 2 * _SCALE)),
    "regr_sxy": _statistic(1, lambda n, d, s, c: _quotient(c, n << 2 * _SCALE)),
    "regr_slope": _statistic(1, _slope),
    "regr_intercept": _statistic(1, _intercept),
    "regr_r2": _statistic(1, _r2),
}
# ESP's stddev/variance: sample statistics as in SQL (ESP documents stddev_samp only; ASE and IQ
# make stddev/variance aliases of the sample forms)
_MOMENT_RESULTS["stddev"] = _MOMENT_RESULTS["stddev_samp"]
_MOMENT_RESULTS["variance"] = _MOMENT_RESULTS["var_samp"]
_UNIVARIATE = ("var_pop", "var_samp", "stddev_pop", "stddev_samp", "stddev", "variance")


# --- order-dependent averages (folded over the group's rows in the order they entered it) -----

def _wma_step(state: list, args: list) -> list:
    """weighted_avg: ``[n, sum of position * value, values are dates]``; the row entering last
    has position n (ESP: the newest event weighs most, the oldest least)."""
    value, is_date = args[0], isinstance(args[0], dt.datetime)
    if is_date:  # exact: microseconds since the epoch (timestamps are naive UTC)
        delta = value - _EPOCH
        value = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    n = state[0] + 1
    weighted = _mul(value, n)
    return [n, weighted if state[0] == 0 else _add(state[1], weighted), state[2] or is_date]


def _wma_result(state: list) -> object:
    n, weighted, is_date = state
    if n == 0:
        return None
    weights = n * (n + 1) // 2
    if is_date:
        return _EPOCH + dt.timedelta(microseconds=round(Fraction(weighted, weights)))
    return _div(weighted, weights)


def _ema_step(state: list, args: list) -> list:
    """exp_weighted_avg(value, period): S = value for the first row, then
    S = a * value + (1 - a) * S with a = 2 / (period + 1) (ESP's description of the smoothing
    factor; guess: it starts from the first value and uses each row's own period)."""
    value, period = args
    if state[0] is None:
        return [value]
    alpha = 2.0 / (period + 1.0)
    return [alpha * value + (1.0 - alpha) * state[0]]


_STEP = {"weighted_avg": _wma_step, "exp_weighted_avg": _ema_step}


# --- argument checks (before any state changes: a failure makes the row a bad record) --------

def _check_floats(fn: str, args: list) -> list:
    return [_float(v, fn) for v in args]


def _check_period(fn: str, args: list) -> list:
    value, period = _check_floats(fn, args)
    if period is not None and not period > 0:
        raise SplashError(f"{fn}() needs a positive period, got {period!r}")
    return [value, period]


def _check_weighted(fn: str, args: list) -> list:
    value = args[0]
    if value is not None and not (_is_number(value) or isinstance(value, dt.datetime)):
        raise SplashError(f"{fn}() needs a numeric, interval or timestamp argument, got "
                          f"{type(value).__name__} {value!r}")
    return args


# --- one aggregate function --------------------------------------------------------------------

class _Aggregate:
    """One aggregate call: how to compute its arguments and keep its running value ``acc``."""

    def __init__(self, index: int, spec: PlanAggregate, exprs: Expressions) -> None:
        self.index = index
        self.name = str(spec.name)
        self.fn = str(spec.fn).lower()
        args = [a for a in spec.args if not isinstance(a, Star)]
        self.star = not args
        self.args: list[Compiled] = [exprs.compile(a) for a in args]
        self.distinct = bool(spec.distinct) and self.fn in _DISTINCT
        self.check = _CHECKS.get(self.fn)
        if self.fn not in _INIT:  # accepted by the checker, not implemented: refuse its rows
            self.values = self._refuse  # type: ignore[method-assign]
        elif self.check is not None:
            self.values = self._checked  # type: ignore[method-assign]

    def values(self, rows: Rows) -> list:
        """The argument values for one input row (raises :class:`SplashError` to refuse it)."""
        return [f(rows) for f in self.args]

    def _checked(self, rows: Rows) -> list:
        return self.check(self.fn, [f(rows) for f in self.args])  # type: ignore[misc]

    def _refuse(self, rows: Rows) -> list:
        raise SplashError(f"aggregate function {self.fn}() is not supported by the engine")

    def init(self) -> object:
        """The running value of an empty group."""
        return {} if self.distinct else _INIT[self.fn]()

    def add(self, acc: object, args: list, since: int, touched: int,
            rows: Mapping[tuple, list]) -> object:
        """``acc`` with one row's contribution added; ``rows`` are the group's other rows."""
        if self.distinct:
            if args[0] is not None:
                acc[args[0]] = acc.get(args[0], 0) + 1  # type: ignore[index,union-attr]
            return acc
        return _ADD[self.fn](self, acc, args, since, touched, rows)

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
            if self.fn == "count":
                return len(acc)  # type: ignore[arg-type]
            folded = _INIT[self.fn]()
            for value in acc:  # type: ignore[union-attr]
                folded = _ADD[self.fn](self, folded, [value], 0, 0, _NO_ROWS)
            return _RESULT[self.fn](folded)
        return _RESULT[self.fn](acc)

    # --- per function ---

    def _count_add(self, acc: int, args: list, since: int, touched: int, rows: Mapping) -> int:
        return acc + (1 if self.star or args[0] is not None else 0)

    def _count_remove(self, acc: int, args: list, since: int, touched: int, rows: Mapping) -> int:
        return acc - (1 if self.star or args[0] is not None else 0)

    def _sum_add(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        if args[0] is None:
            return acc
        return [args[0] if acc[1] == 0 else _add(acc[0], args[0]), acc[1] + 1]

    def _sum_remove(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        if args[0] is None:
            return acc
        return [0, 0] if acc[1] == 1 else [_sub(acc[0], args[0]), acc[1] - 1]

    def _vwap_add(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
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

    def _extreme_add(self, acc: object, args: list, since: int, touched: int,
                     rows: Mapping) -> object:
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
        return (min if self.fn == "min" else max)(values, key=nan_largest)

    def _order(self, since: int, touched: int) -> tuple:
        """Where a row stands for first/last/valueinserted (larger wins, except for first)."""
        return (touched,) if self.fn == "valueinserted" else (since,)

    def _pick_add(self, acc: Optional[list], args: list, since: int, touched: int,
                  rows: Mapping) -> Optional[list]:
        if args[0] is None and self.fn == "lastnonnull":
            return acc
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
            result = self._pick_add(result, row[ARGS][self.index], row[SINCE], row[TOUCHED],
                                    _NO_ROWS)
        return result

    def _nth_add(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        """nth(i, x): the group's ``(since, i, x)`` in order of arrival (group order when ranked)."""
        insort(acc, (since, args[0], args[1]), key=_since)
        return acc

    def _nth_remove(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        at = [i for i in range(bisect_left(acc, since, key=_since), len(acc)) if acc[i][0] == since]
        exact = [i for i in at if acc[i][1:] == (args[0], args[1])]
        if exact or at:
            del acc[(exact or at)[0]]
        return acc

    def _sorted_add(self, acc: list, args: list, since: int, touched: int, rows: Mapping) -> list:
        """median, meandeviation: the group's non-null values, sorted (NaN last)."""
        if args[0] is not None:
            insort(acc, args[0], key=nan_largest)
        return acc

    def _sorted_remove(self, acc: list, args: list, since: int, touched: int,
                       rows: Mapping) -> list:
        if args[0] is not None:
            i = bisect_left(acc, nan_largest(args[0]), key=nan_largest)
            if i < len(acc):
                del acc[i]
        return acc

    def _moments_add(self, acc: list, args: list, since: int, touched: int,
                     rows: Mapping) -> list:
        if any(a is None for a in args):  # a pair with a null is left out (SQL, ESP's corr)
            return acc
        return _moments_update(acc, args, 1)

    def _moments_remove(self, acc: list, args: list, since: int, touched: int,
                        rows: Mapping) -> list:
        if any(a is None for a in args):
            return acc
        return _moments_update(acc, args, -1)

    def _ordered_add(self, acc: list, args: list, since: int, touched: int,
                     rows: Mapping) -> list:
        """weighted_avg, exp_weighted_avg: ``[since of the newest row folded in, state]``; a
        row that entered before the newest (an update in place) refolds the group."""
        if any(a is None for a in args):
            return acc
        newest = acc[0]
        if newest is None or since >= newest or not rows:
            return [since if newest is None else max(since, newest), _STEP[self.fn](acc[1], args)]
        return self._ordered_fold(rows, (since, args))

    def _ordered_remove(self, acc: list, args: list, since: int, touched: int,
                        rows: Mapping) -> list:
        if any(a is None for a in args):
            return acc
        return self._ordered_fold(rows, None)

    def _ordered_fold(self, rows: Mapping[tuple, list], extra: Optional[tuple]) -> list:
        """The accumulator of ``rows`` (and ``extra``: ``(since, args)``) in entering order."""
        items = [(row[SINCE], row[ARGS][self.index]) for row in rows.values()]
        if extra is not None:
            items.append(extra)
        items.sort(key=lambda item: item[0])
        acc = _INIT[self.fn]()
        for since, args in items:
            acc = self._ordered_add(acc, args, since, 0, _NO_ROWS)
        return acc


def nan_largest(value: object) -> tuple:
    """A sort key that puts NaN after every number."""
    return (True, 0) if value != value else (False, value)


def _median(values: list) -> object:
    n = len(values)
    if n == 0:
        return None
    return values[n // 2] if n % 2 else _midpoint(values[n // 2 - 1], values[n // 2])


def _meandeviation(values: list) -> Optional[float]:
    """ESP meandeviation(): the mean of the absolute deviations from the mean (divides by n)."""
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    return math.fsum(abs(v - mean) for v in values) / len(values)


def _pick_result(acc: Optional[list]) -> object:
    return None if acc is None else acc[1]


def _since(entry: tuple) -> int:
    return entry[0]


def _nth_result(acc: list) -> object:
    """The value at place ``i`` (from 0, as in an event cache's nth) of the group; null past its
    end."""
    if not acc:
        return None
    index = acc[-1][1]
    return acc[index][2] if 0 <= index < len(acc) else None


def _check_index(fn: str, args: list) -> list:
    if not (isinstance(args[0], int) and not isinstance(args[0], bool)):
        raise SplashError(f"{fn}() needs an integer index, got {args[0]!r}")
    return args


_A = _Aggregate
_INIT: dict[str, Callable[[], object]] = {
    "count": lambda: 0, "sum": lambda: [0, 0], "avg": lambda: [0, 0], "vwap": lambda: [0, 0, 0],
    "min": lambda: None, "max": lambda: None, "first": lambda: None, "last": lambda: None,
    "lastnonnull": lambda: None, "valueinserted": lambda: None,
    "median": list, "meandeviation": list, "nth": list,
    "weighted_avg": lambda: [None, [0, 0, False]], "exp_weighted_avg": lambda: [None, [None]]}
_ADD = {"count": _A._count_add, "sum": _A._sum_add, "avg": _A._sum_add, "vwap": _A._vwap_add,
        "min": _A._extreme_add, "max": _A._extreme_add, "first": _A._pick_add,
        "last": _A._pick_add, "lastnonnull": _A._pick_add, "valueinserted": _A._pick_add,
        "median": _A._sorted_add, "meandeviation": _A._sorted_add, "nth": _A._nth_add,
        "weighted_avg": _A._ordered_add, "exp_weighted_avg": _A._ordered_add}
_REMOVE = {"count": _A._count_remove, "sum": _A._sum_remove, "avg": _A._sum_remove,
           "vwap": _A._vwap_remove, "min": _A._extreme_remove, "max": _A._extreme_remove,
           "first": _A._pick_remove, "last": _A._pick_remove, "lastnonnull": _A._pick_remove,
           "valueinserted": _A._pick_remove, "median": _A._sorted_remove,
           "meandeviation": _A._sorted_remove, "nth": _A._nth_remove, "weighted_avg": _A._ordered_remove,
           "exp_weighted_avg": _A._ordered_remove}
_RESULT: dict[str, Callable[[object], object]] = {
    "count": lambda acc: acc,
    "sum": lambda acc: acc[0] if acc[1] else None,
    "avg": lambda acc: _div(acc[0], acc[1]) if acc[1] else None,
    "vwap": lambda acc: _div(acc[0], acc[1]) if acc[2] and acc[1] != 0 else None,
    "min": lambda acc: acc, "max": lambda acc: acc,
    "first": _pick_result, "last": _pick_result, "lastnonnull": _pick_result,
    "valueinserted": _pick_result, "median": _median, "meandeviation": _meandeviation, "nth": _nth_result,
    "weighted_avg": lambda acc: _wma_result(acc[1]), "exp_weighted_avg": lambda acc: acc[1][0]}
for _fn, _result in _MOMENT_RESULTS.items():
    _INIT[_fn] = partial(_moments_init, 1 if _fn in _UNIVARIATE else 2)
    _ADD[_fn], _REMOVE[_fn], _RESULT[_fn] = _A._moments_add, _A._moments_remove, _result

_CHECKS: dict[str, Callable[[str, list], list]] = {
    **{fn: _check_floats for fn in _MOMENT_RESULTS}, "meandeviation": _check_floats,
    "exp_weighted_avg": _check_period, "weighted_avg": _check_weighted, "nth": _check_index}
# DISTINCT is honoured where the order of the values does not matter (min/max need nothing)
_DISTINCT = frozenset(("count", "sum", "avg", "median", "meandeviation") + _UNIVARIATE)
SUPPORTED: frozenset[str] = frozenset(_INIT)
"""The aggregate functions the engine computes; the others make their rows bad records."""


# --- the aggregator ----------------------------------------------------------------------------

class Aggregator:
    """Groups input rows and keeps one output row per group (see the module docstring)."""

    def __init__(self, select: Select, exprs: Expressions, columns: Sequence[Sequence[str]],
                 key: list[str], retracting: bool = True) -> None:
        """``select`` is a plan Select with aggregates; ``columns``/``key`` are the element's
        output columns and key columns; ``retracting`` says whether inputs may update/delete."""
        self.columns = columns
        self.key = list(key)
        self.retracting = retracting
        self.aggregates = [_Aggregate(i, spec, exprs) for i, spec in enumerate(select.aggregates)]
        self.group_by = [exprs.compile(e) for e in select.group_by]
        self.group_filter = _maybe(exprs, select.group_filter)
        self.having = _maybe(exprs, select.having)
        self.items = [(it.name, exprs.compile(it.expr)) for it in select.items]
        every = [select.group_filter, select.having, select.group_by,
                 [it.expr for it in select.items], [s.args for s in select.aggregates]]
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

    def new_group(self) -> dict:
        """An empty group (no rows yet)."""
        return {"n": 0, "acc": [agg.init() for agg in self.aggregates], "rows": {},
                "row": None, "emitted": None}

    def _add(self, state: dict, gkey: tuple, ikey: tuple, args: list, since: int,
             touched: int, rows: Rows) -> None:
        group = state["groups"].get(gkey)
        if group is None:
            group = state["groups"][gkey] = self.new_group()
        group["n"] += 1
        group["acc"] = [agg.add(acc, a, since, touched, group["rows"])
                        for agg, acc, a in zip(self.aggregates, group["acc"], args)]
        group["row"] = plain_rows(rows)
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
            group["row"] = plain_rows(old)
        return since

    # --- output -----------------------------------------------------------------------------

    def output_row(self, group: dict) -> Optional[dict]:
        """The group's output row, or None when HAVING refuses it (raises :class:`SplashError`
        when an item or HAVING fails)."""
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
        return self.settle(state, gkey, self.output_row(group) if group["n"] > 0 else None, seq)

    def settle(self, state: dict, gkey: tuple, new: Optional[dict], seq: int) -> list[Change]:
        """Make ``new`` (:meth:`output_row` of group ``gkey``, or None) the row the group shows,
        and give the change from the row it showed before; an empty group is dropped."""
        group = state["groups"][gkey]
        old = group["emitted"]
        group["emitted"] = new
        if self._forgotten(group):
            del state["groups"][gkey]
        old_key = None if old is None else self._key_of(old)
        new_key = None if new is None else self._key_of(new)
        if old_key is not None and state["out"].get(old_key) == gkey:
            del state["out"][old_key]
        if new_key is not None:
            state["out"][new_key] = gkey
        return _transition(old_key, old, new_key, new, seq)

    def _key_of(self, row: Mapping[str, object]) -> tuple:
        return tuple([row.get(k) for k in self.key])  # a list first: cheaper than a generator

    def _forgotten(self, group: dict) -> bool:
        """Whether the group holds nothing any more (it is dropped)."""
        return group["n"] == 0


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
    return [] if same_row(old, new) else [Change("u", new_key, old, new, seq)]  # type: ignore[arg-type]


def _maybe(exprs: Expressions, expr: object) -> Optional[Compiled]:
    return None if expr is None else exprs.compile(expr)


def plain_rows(rows: Rows) -> dict:
    """Rows as plain dicts (picklable state); rows that are plain dicts already are kept as they
    are (rows are never changed once made)."""
    if type(rows) is dict and all(type(row) is dict or row is None for row in rows.values()):
        return rows
    return {alias: None if row is None else dict(row) for alias, row in rows.items()}
