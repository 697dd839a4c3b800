"""`ccl explain`: how each partitioned element is split into instances, in words."""
from __future__ import annotations

from .analysis.analyzer import PartitionedElement
from .partition_functions import why_not_compilable
from .printer import to_ccl


def explain_partitioning(elements: list[PartitionedElement]) -> str:
    """One paragraph per partitioned element: count, functions and paths, broadcast inputs."""
    if not elements:
        return "no partitioned elements\n"
    lines: list[str] = []
    for el in elements:
        count = f"{el.count} instances" if el.count is not None else f"PARTITIONS {el.count_text} (no value)"
        lines.append(f"{el.name} ({el.kind}): {count}")
        for spec, source in el.specs:
            if spec.method == "hash":
                cols = ", ".join(c.name for c in spec.columns)
                lines.append(f"  input {source}: HASH({cols}) -> Spark expression "
                             f"pmod(hash({cols}), {el.count_text})")
            elif spec.method == "roundrobin":
                lines.append(f"  input {source}: ROUNDROBIN -> Spark expression "
                             f"pmod(sequence number, {el.count_text})")
            else:
                why = why_not_compilable(spec.body, source)
                path = ("compiled to one Spark expression" if why is None
                        else f"SPLASH interpreter in an Arrow UDF (not compilable: {why})")
                lines.append(f"  input {source}: custom function -> {path}")
                lines.extend("      " + ln for ln in to_ccl(spec.body).splitlines())
        for name in el.broadcast:
            lines.append(f"  input {name}: broadcast to every instance")
    return "\n".join(lines) + "\n"
