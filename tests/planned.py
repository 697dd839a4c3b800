"""Plans of CCL text for tests that read a plan's JSON form (what the runtime's engine reads)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional

from ccl.diagnostics import Diagnostic
from ccl.plan.codec import plan_from_json, plan_to_json
from ccl.plan.model import Element, Plan
from ccl.plan.planner import plan_project


def plan_json(path: str, ccr: Optional[str] = None, params: Mapping[str, str] = {}, *,
              native_operators: bool = True) -> tuple[Optional[dict], list[Diagnostic]]:
    """:func:`plan_project`, the plan in its JSON form (None when there are errors)."""
    plan, diags = plan_project(path, ccr, params, native_operators=native_operators)
    return (plan_to_json(plan) if plan is not None else None), diags


def typed_element(plan: dict, index: int) -> tuple[Element, Plan]:
    """Element ``index`` of a plan's JSON form and the plan, decoded: what the compiler's rules
    (ccl/plan/physical.py) read."""
    typed = plan_from_json(plan)
    return typed.elements[index], typed


def plan_text_of(directory: Path, text: str) -> str:
    """The plan JSON text (what BucketRun takes) of the project ``text``, written as ``p.ccl`` in
    ``directory``; its diagnostics when it has errors."""
    path = directory / "p.ccl"
    path.write_text(text)
    plan, diags = plan_json(str(path))
    assert plan is not None, [str(d) for d in diags]
    return json.dumps(plan)
