"""What crosses from the driver to the executors and worker processes of the per-instance engine:
the typed plan (``ccl.plan.model.Plan``) as the codec's JSON text, decoded once per process.

Everything reads the typed plan, by attribute: the driver, and the engine (runtime/engine/,
runtime/state/, and runtime/processor.py, runtime/arrow_state.py, runtime/bucket_pool.py that
drive it). Spark ships a per-instance element's query or batch function to the Python workers
pickled; what it carries of the plan is the text :func:`engine_plan_text` makes, and the worker
gets the plan back with :func:`engine_plan`, which decodes a text once per process (a cache by
the text), never per batch. These functions are the boundary (grep them).
"""
from __future__ import annotations

import json
from functools import lru_cache

from ccl.plan.codec import plan_from_json, plan_to_json
from ccl.plan.model import Plan


def engine_plan_text(plan: Plan) -> str:
    """What the per-instance engine is shipped (``runtime.processor.ElementProcessor``,
    ``BucketRun``, ``runtime.arrow_state.bucket_runner``): the whole plan's JSON text (5-8 KB
    for the projects in projects/), from which it builds the element it runs (and the schemas
    of the others); :func:`engine_plan` decodes it."""
    return json.dumps(plan_to_json(plan))


@lru_cache(maxsize=32)
def engine_plan(text: str) -> Plan:
    """The plan of :func:`engine_plan_text`'s ``text``, decoded once per process and text (the
    same :class:`Plan` object, its syntax trees shared, for every engine built from it)."""
    return plan_from_json(json.loads(text))

