"""How the runtime executes each planned element: the native Spark path or the per-instance path.

Shared by ``ccl explain`` and the runtime so that what is explained is what runs.
"""
from __future__ import annotations

from typing import Mapping

NATIVE = "native"
PER_INSTANCE = "per-instance"


def path_of(element: Mapping) -> tuple[str, str]:
    """(path, why) for one plan element (docs/plan.md).

    Stateless derived elements (``"stateful": false``: one source, no aggregation, no KEEP, no
    local DECLARE) run as native Spark expressions: partitioning cannot change their result, so
    their instances need no state of their own. Everything else (input elements, which check keys
    and opcodes, windows, aggregations, joins, Flex operators) runs per instance.
    """
    if element.get("query") is not None and not element.get("stateful", True) \
            and not element.get("flex"):
        return NATIVE, "stateless: filter and projection as Spark expressions"
    if element.get("query") is None and not element.get("flex"):
        return PER_INSTANCE, "input element: key and opcode rules need per-instance state"
    return PER_INSTANCE, "stateful: per-instance state in transformWithState"
