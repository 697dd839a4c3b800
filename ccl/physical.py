"""How the runtime executes each planned element: the native Spark path or the per-instance path.

Shared by ``ccl explain`` and the runtime so that what is explained is what runs.
"""
from __future__ import annotations

from typing import Mapping

NATIVE = "native"
PER_INSTANCE = "per-instance"


def path_of(element: Mapping) -> tuple[str, str]:
    """(path, why) for one plan element (docs/plan.md).

    An input stream with no AUTOGENERATE and no WHERE keeps no state (a row is an insert, a delete
    is dropped, a row that does not parse is a bad record): it runs as native Spark expressions.
    Everything else (input windows and delta streams, which check keys and opcodes; derived
    elements; Flex operators) runs on the per-instance path.
    """
    if (element.get("role") == "input" and element.get("kind") == "stream"
            and element.get("query") is None and not element.get("flex")
            and not element.get("autogenerate") and not element.get("input_where")):
        return NATIVE, "input stream without state: Spark expressions"
    if element.get("query") is None and not element.get("flex"):
        return PER_INSTANCE, "input element: key and opcode rules need per-instance state"
    return PER_INSTANCE, "per-instance state in transformWithState"
