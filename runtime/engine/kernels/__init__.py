"""Columnar kernels: per-instance elements other than stream aggregations (those are
runtime/engine/columnar.py) run a bucket's micro-batch at a time, on the engine's own state and
with the engine's very outputs, chosen by the plan's ``kernel`` (``ccl.plan.physical.columnar_kernel``,
decided by the compiler; the runtime does not choose again). An instance a kernel cannot take is
handed back to the engine for that batch.

A kernel is made once per element as ``Kernel(engine, plan, first_ports)`` (raising ValueError
when it cannot run the element) and runs a bucket as ``kernel.run(states, rows, ports, now)``:
``rows`` the bucket's :class:`runtime.engine.columnar.BucketRows`, ``ports[k]`` the struct array
of port ``k``'s values (one per row); it gives, as :meth:`ColumnarAggregation.run` does in per-row
mode, the instances it ran (:class:`InstanceRun`), those it left to the engine, and the changes
and bad records of the ones it ran (:class:`RowChanges`).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from ccl.plan.model import Element, Plan
from runtime.engine.columnar import ColumnarAggregation
from runtime.engine.kernels.join import JoinKernel
from runtime.engine.kernels.keep import KeepKernel
from runtime.engine.kernels.union import UnionKernel
from runtime.engine.kernels.window_agg import WindowAggregation
from runtime.engine.kernels.window_join import WindowJoinKernel
from runtime.engine.kernels.window_select import WindowSelectKernel
from runtime.engine.kernels.window_union import WindowUnionKernel

__all__ = ["AGGREGATIONS", "KERNELS", "make_kernel"]

log = logging.getLogger(__name__)


# kernel name (the plan's ``physical.kernel``, one of ``ccl.plan.model.KERNELS``) -> its class:
# the aggregations, made as ``Kernel(engine, plan)`` and run as ``run(states, rows, now)``, ...
AGGREGATIONS: dict[str, type] = {"aggregation": ColumnarAggregation,
                                 "window_aggregation": WindowAggregation}
# ... and the other kernels (see the module docstring; ``select``, one stream without a join, is
# the join kernel with no window; ``window_select`` a projection or filter of a window; ``union``
# a UNION of streams, each select as the select kernel runs it; ``window_join`` a join of windows;
# ``window_union`` a UNION into a window or delta stream, each select as window_select runs it)
KERNELS: dict[str, type] = {"join": JoinKernel, "keep": KeepKernel, "select": JoinKernel,
                            "window_select": WindowSelectKernel, "union": UnionKernel,
                            "window_join": WindowJoinKernel, "window_union": WindowUnionKernel}


def make_kernel(element: Element, engine: Any, plan: Plan,
                first_ports: frozenset[int] = frozenset()) -> Optional[Any]:
    """The kernel the plan names for ``element`` (``physical.kernel``) over ``engine``, or None
    when it names none (the engine runs the element row by row).

    The compiler decided the kernel; this only builds it. ValueError (naming the element) when
    the plan names a kernel this runtime does not have: a plan from another ccl, to compile again.
    A kernel that refuses the element it is named for (the compiler's rule and the kernel's own
    check disagree: a bug, logged as a warning) leaves the element to the engine, whose results
    are the same, rather than failing the run. What the compiler cannot know is checked by the
    kernel as it runs, per batch and instance (an instance whose state or rows it cannot take goes
    back to the engine for that batch)."""
    name = element.physical.kernel if element.physical is not None else None
    if name is None:
        return None
    kernel = AGGREGATIONS.get(name) or KERNELS.get(name)
    if kernel is None:
        raise ValueError(f"{element.name}: the plan names the kernel {name!r}, which this "
                         f"runtime does not have: run `ccl compile` again")
    try:
        return kernel(engine, plan) if name in AGGREGATIONS else kernel(engine, plan, first_ports)
    except ValueError as exc:
        log.warning("the plan's %s kernel cannot run %s (%s): the engine runs it row by row",
                    name, element.name, exc)
        return None
