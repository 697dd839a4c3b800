"""Plans of CCL text for tests that read a plan's JSON form, and that form (one a test wrote by
hand too) as the typed plan the runtime's engine takes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional

from ccl.diagnostics import Diagnostic
from ccl.plan.codec import element_from_json, plan_from_json, plan_to_json
from ccl.plan.model import PLAN_FORMAT, PLAN_VERSION, Element, Plan, Select
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


def typed(plan: dict) -> Plan:
    """The typed plan of ``plan``, a plan's JSON form (a hand-written one, of any version or
    with no header, is read as this version's)."""
    return plan_from_json({**plan, "format": PLAN_FORMAT, "version": PLAN_VERSION})


def typed_parts(element: dict, plan: dict) -> tuple[Element, Plan]:
    """``element`` (one of ``plan``'s elements, in JSON form) and ``plan`` typed, as
    ``runtime.engine.flex.make_engine`` and the engines take them."""
    built = typed(plan)
    return built.element(element["name"]), built


def typed_select(select: dict) -> Select:
    """``select``, a plan Select's JSON form (the parts a test leaves out empty), typed."""
    query = {"selects": [{"sources": [], "items": [], **select}]}
    element = element_from_json({"name": "t", "kind": "window", "role": "output", "columns": [],
                                 "query": query})
    return element.query.selects[0]  # type: ignore[union-attr]
