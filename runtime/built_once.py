"""Column expressions built once and reused by every micro-batch of a query.

A PySpark Column is built by py4j round trips to the JVM (about 0.2 ms each here: the ~550 of an
input stream's output columns took 0.1 s), so a batch function that builds its expressions afresh
pays for them in every micro-batch. Columns that refer to columns by name are not bound to a
DataFrame and serve any frame with those names, so the functions that build them are decorated
with :func:`once`.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from collections import OrderedDict
from typing import Any, Callable, TypeVar

R = TypeVar("R")

LIMIT = 512  # results kept per function (a process runs few plans; tests run many)


def _key(arg: Any) -> Any:
    # plan dicts and lists by content: the same plan planned again (a run restarted in the same
    # process) finds its expressions too
    if isinstance(arg, (dict, list)):
        return json.dumps(arg, sort_keys=True, default=str)
    # typed plan parts (ccl.plan.model) by content too: an Element is unhashable (its
    # ``properties``), and its repr (which leaves out the trees' source spans) is its content
    if dataclasses.is_dataclass(arg) and not isinstance(arg, type):
        return repr(arg)
    return arg


def once(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` (of plan dicts and lists, typed plan parts and hashable values) computed once per arguments and Spark
    context, the result reused afterwards."""
    cache: OrderedDict = OrderedDict()

    @functools.wraps(fn)
    def cached(*args: Any) -> R:
        from pyspark import SparkContext
        context = SparkContext._active_spark_context
        key = (id(context), *map(_key, args))
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit[1]
        value = fn(*args)
        cache[key] = (context, value)
        if len(cache) > LIMIT:
            cache.popitem(last=False)
        return value
    return cached
