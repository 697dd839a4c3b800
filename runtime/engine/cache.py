"""DECLARE state at run time: SPLASH variables and event caches of one element (docs/runtime-flex.md).

:class:`Declared` evaluates the plan's global DECLARE items and an element's local DECLARE items
once per engine, and makes each partition instance's starting variables: a plain dict
``name -> SPLASH value`` (scalars, dictionaries, vectors, records, :class:`EventCache` objects) that
lives in the instance's state, is bound to the engine's interpreters while the instance runs
(``Interpreter.bind``) and pickles with the state. Each instance has its own copy of every global
variable (ESP's instances race on one; the compiler warns, CCL3003).

Event caches are built from their declarations (:func:`build_cache`) and fed the rows of their
source by :meth:`Declared.feed`, before the code that reads them runs for that row.
"""
from __future__ import annotations

import copy
from typing import Iterable, Mapping, Optional, Sequence

from ccl.plan.model import Element
from ccl.syntax import nodes as n
from ccl.splash.types import INTEGER
from ccl.splash import Declarations, as_type
from ccl.splash.caches import EventCache
from ccl.splash.interpreter import declare_state
from runtime.engine.trees import tree

__all__ = ["Declared", "EventCache", "build_cache", "cache_op"]


def build_cache(name: str, spec: n.EventCacheType, source: Element) -> EventCache:
    """An empty event cache for the declaration ``spec`` over the plan element ``source``."""
    row_key = list(source.key) if source.kind != "stream" else []
    keys = [k.name for k in spec.keys] if spec.keys is not None else row_key
    columns = [(c.name, as_type(c.type)) for c in source.columns]
    known = {c for c, _ in columns}
    for k in keys:
        if k not in known:
            raise ValueError(f"event cache '{name}': {spec.source.name} has no column '{k}'")
    count = millis = None
    coalesce = manual = False
    order: list[tuple[str, bool]] = []
    for o in spec.options:
        if o.kind == "events":
            count = int(o.count or 0)
        elif o.kind == "interval" and o.interval is not None:
            millis = o.interval.microseconds // 1000
        elif o.kind == "coalesce":
            coalesce = True
        elif o.kind == "manual":
            manual = True
        elif o.kind == "order" and o.column is not None:
            order.append((o.column.name, o.descending))
    return EventCache(name, spec.source.name, keys, row_key, columns, count=count, millis=millis,
                      coalesce=coalesce, manual=manual, order=order)


def cache_op(kind: str, op: str) -> Optional[str]:
    """The opcode an event of a source of ``kind`` is cached with (i, u, d), or None (not cached):
    upsert counts as update and safedelete as delete; a stream carries inserts only."""
    if kind == "stream":
        return None if op in ("d", "s") else "i"
    return {"i": "i", "u": "u", "p": "u", "d": "d", "s": "d"}.get(op)


class Declared:
    """Global and local DECLARE items of one element, evaluated once.

    ``sources`` maps each name the element's code may use for an input (its written name and its
    plan name) to that input's plan element: event caches find their source there, and ``typeof``
    its columns. ``constants`` are extra read-only names (``<target>_partitions``).
    """

    def __init__(self, plan_globals: Sequence[object], local: Sequence[object],
                 sources: Mapping[str, Element], constants: Mapping[str, int] = {}) -> None:
        types = {name: {c.name: c.type for c in el.columns} for name, el in sources.items()}
        base = Declarations()
        for name, value in constants.items():
            base.values[name], base.types[name] = value, INTEGER
            base.constants.add(name)
        glob, global_caches = declare_state(as_nodes(plan_globals), base, source_types=types)
        self.decl, caches = declare_state(as_nodes(local), glob, source_types=types)
        self.sources = dict(sources)
        self.caches: dict[str, tuple[n.EventCacheType, Element]] = {}
        for name, spec in global_caches + caches:
            source = self.sources.get(spec.source.name)
            if source is None and (name, spec) in global_caches:
                continue    # a global cache over another element's input: null here
            if source is None:
                raise ValueError(f"event cache '{name}' reads '{spec.source.name}', which is not an "
                                 "input of this element")
            self.caches[name] = (spec, source)
            self.decl.values[name] = None
        self.source_types = types

    @property
    def used(self) -> bool:
        """Something is declared: variables to keep, functions or typedefs to know."""
        return bool(self.caches or self.decl.functions or self.decl.typedefs
                    or any(name not in self.decl.constants for name in self.decl.values))

    def initial(self) -> dict[str, object]:
        """A fresh instance's variables: declared values copied, empty event caches."""
        values = {name: copy.deepcopy(v) for name, v in self.decl.values.items()
                  if name not in self.decl.constants}
        for name, (spec, source) in self.caches.items():
            values[name] = build_cache(name, spec, source)
        return values

    def caches_of(self, names: Iterable[str]) -> list[str]:
        """The cache variables whose source is one of ``names``."""
        wanted = set(names)
        return [c for c, (spec, _) in self.caches.items() if spec.source.name in wanted]

    def feed(self, values: dict, caches: Iterable[str], kind: str, op: str,
             row: Mapping[str, object], now_ms: int) -> None:
        """One event of a source into its caches (``caches``, variable names): the row goes into
        its bucket, which becomes the current one."""
        cached = cache_op(kind, op)
        for name in caches:
            cache = values.get(name)
            if not isinstance(cache, EventCache):
                continue    # the code replaced the variable
            if cached is None:
                continue
            cache.add(cached, row, now_ms)

    def sweep(self, values: dict, now_ms: int) -> None:
        """Drop expired records of time-based caches."""
        for name in self.caches:
            cache = values.get(name)
            if isinstance(cache, EventCache):
                cache.sweep(now_ms)


def as_nodes(items: Sequence[object]) -> list[n.Node]:
    """Plan items (JSON) as syntax nodes; nodes stay as they are."""
    return [tree(i) for i in items]
