"""Columnar kernels: per-instance elements other than stream aggregations (those are
runtime/engine/columnar.py) run a bucket's micro-batch at a time, on the engine's own state and
with the engine's very outputs, chosen by the plan's ``kernel`` (``ccl.plan.physical.columnar_kernel``).
An instance a kernel cannot take is handed back to the engine for that batch."""
