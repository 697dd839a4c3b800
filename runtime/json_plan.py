"""Where the driver turns its typed plan (``ccl.plan.model.Plan``) back into the plan's JSON form,
for the engine, which still reads the plan by string key.

Everything on the driver reads the typed plan, by attribute. The engine (runtime/engine/,
runtime/state/, and runtime/processor.py, runtime/arrow_state.py, runtime/bucket_pool.py that
drive it) takes the whole plan's JSON text on the executors (:func:`engine_plan_text`), and a few
of its driver-side helpers an element's JSON form (:func:`element_json`). These functions are the
boundary (grep them).
"""
from __future__ import annotations

import json

from ccl.plan.codec import element_to_json, plan_to_json
from ccl.plan.model import Element, Plan


def engine_plan_text(plan: Plan) -> str:
    """What the per-instance engine takes (``runtime.processor.ElementProcessor``, ``BucketRun``,
    ``runtime.arrow_state.bucket_runner``): the whole plan's JSON text, from which it builds the
    element it runs (and the schemas of the others). Shipped to the executors with each
    per-instance element's query or batch (5-8 KB for the projects in projects/); the one place
    it is made, so that it can become the element's own part of the plan."""
    return json.dumps(plan_to_json(plan))


def element_json(element: Element) -> dict:
    """``element``'s JSON form, for the engine's driver-side helpers that take a plan element
    (``runtime.processor.output_schema``, ``runtime.arrow_state.prepare_rows`` and
    ``bucket_rows``, ``runtime.bucket_pool.run_buckets``)."""
    return element_to_json(element)
