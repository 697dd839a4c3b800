"""Columnar kernels: per-instance elements other than stream aggregations (those are
runtime/engine/columnar.py) run a bucket's micro-batch at a time, on the engine's own state and
with the engine's very outputs, chosen by the plan's ``kernel`` (``ccl.plan.physical.columnar_kernel``).
An instance a kernel cannot take is handed back to the engine for that batch.

Each kernel class is built from ``(engine, plan)`` and has ``run(states, rows, now)`` as
:meth:`runtime.engine.columnar.ColumnarAggregation.run` has it."""
from __future__ import annotations

import importlib
from typing import Any

# kernel name (the plan's ``physical.kernel``) -> "module:class" under runtime/engine/kernels/
KERNELS: dict[str, str] = {
    "keep": "keep:KeepKernel",
}


def kernel_class(name: str) -> Any:
    """The class of the kernel ``name`` (imported on first use)."""
    module, cls = KERNELS[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)
