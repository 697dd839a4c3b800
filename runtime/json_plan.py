"""The plan's JSON form on the driver, for the modules that still read the plan by string key.

``runtime.run.run_plan`` takes the typed plan (``ccl.plan.model.Plan``); run.py, run_setup.py,
outputs.py, the project query's listing, job.element_query's decisions, verify.py and web/ read
it as data, and so do adapters/ and run_dir.py. The
modules behind them that are not converted yet (batch_writers.py, frames.py's input readers,
native_stages.py, native_agg.py, topology.py, bad_records.py, the project query's batches,
rebucket.py, and through them the engine, which gets the plan's JSON text on the
executors) take its JSON form, built here once per run by
:func:`json_side`: the one place the driver turns its typed plan back into JSON, so that the
boundary is visible (grep ``JsonPlan``); :func:`engine_plan_text` is what the engine takes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ccl.plan.codec import plan_to_json
from ccl.plan.model import Plan


@dataclass(frozen=True)
class JsonPlan:
    """A plan's JSON form (``ccl.plan.codec.plan_to_json``) and its elements by name."""

    plan: dict
    elements: dict[str, dict]


def json_side(plan: Plan) -> JsonPlan:
    """The :class:`JsonPlan` of ``plan``."""
    data = plan_to_json(plan)
    return JsonPlan(data, {e["name"]: e for e in data["elements"]})


def engine_plan_text(data: dict) -> str:
    """What the per-instance engine takes (``runtime.processor.ElementProcessor``, ``BucketRun``,
    ``runtime.arrow_state.bucket_runner``): the whole plan's JSON text, from which it builds the
    element it runs (and the schemas of the others). Shipped to the executors with each
    per-instance element's query or batch (5-8 KB for the projects in projects/); the one place
    it is made, so that it can become the element's own part of the plan."""
    return json.dumps(data)
