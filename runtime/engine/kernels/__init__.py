"""Columnar kernels: per-instance elements other than stream aggregations (those are
runtime/engine/columnar.py) run a bucket's micro-batch at a time, on the engine's own state and
with the engine's very outputs, chosen by the plan's ``kernel`` (``ccl.plan.physical.columnar_kernel``).
An instance a kernel cannot take is handed back to the engine for that batch.

A kernel is made once per element as ``Kernel(engine, plan, first_ports)`` (raising ValueError
when it cannot run the element) and runs a bucket as ``kernel.run(states, rows, ports, now)``:
``rows`` the bucket's :class:`runtime.engine.columnar.BucketRows`, ``ports[k]`` the struct array
of port ``k``'s values (one per row); it gives, as :meth:`ColumnarAggregation.run` does in per-row
mode, the instances it ran (:class:`InstanceRun`), those it left to the engine, and the changes
and bad records of the ones it ran (:class:`RowChanges`).
"""
from __future__ import annotations

from typing import Any, Optional

from runtime.engine.kernels.join import JoinKernel
from runtime.engine.kernels.keep import KeepKernel

__all__ = ["KERNELS", "make_kernel"]


# kernel name (the plan's ``physical.kernel``) -> its class
KERNELS: dict[str, type] = {"join": JoinKernel, "keep": KeepKernel}


def make_kernel(element: dict, engine: Any, plan: dict, first_ports: frozenset[int]) -> Optional[Any]:
    """The kernel the plan names for ``element`` over ``engine``, or None (none named, or one
    this runtime does not have or that cannot run the element: the engine runs it row by row)."""
    name = (element.get("physical") or {}).get("kernel")
    if name not in KERNELS:
        return None
    try:
        return KERNELS[name](engine, plan, first_ports)
    except ValueError:
        return None
