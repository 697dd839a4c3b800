"""The SPLASH trees the plan carries (expressions, DECLARE items, Flex handlers, custom partition
functions), built from their JSON form in this one place of the runtime.

Each tree is built once per process and then shared: every engine, instance and query of the
plan that reads the same JSON gets the same tree (trees are only read; the interpreter keeps what
it compiles for a tree beside it, keyed by the tree's identity). The cache is keyed by the tree's
canonical JSON text, so two plans with the same expression share it too.
"""
from __future__ import annotations

import json
from functools import lru_cache

from ccl.syntax import nodes as n

__all__ = ["tree"]


def tree(value: object) -> n.Node:
    """The syntax tree of ``value``, a plan's JSON form of a SPLASH expression, statement or block
    (a tree already built is given back as it is)."""
    if isinstance(value, n.Node):
        return value
    return _built(json.dumps(value, sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=8192)
def _built(text: str) -> n.Node:
    return n.from_json(json.loads(text))  # type: ignore[return-value]
