"""The typed plan's JSON codec (ccl/plan/codec.py): a round trip over the plans of every project
in projects/ and of the CCL files the tests use, and the refusal of data that is not a plan of
this version."""
from __future__ import annotations

import glob
import json
import os

import pytest

from ccl.plan.codec import PlanFormatError, plan_from_json, plan_to_json
from ccl.plan.model import PLAN_VERSION, NATIVE, PER_INSTANCE, Plan
from ccl.plan.planner import plan_project
from ccl.syntax import nodes as n

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(os.path.join(ROOT, "projects", "*", "*.ccl"))
               + glob.glob(os.path.join(ROOT, "tests", "projects", "**", "*.ccl"), recursive=True))


def test_there_are_projects_to_round_trip():
    assert len(FILES) > 40


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(f, ROOT) for f in FILES])
def test_plans_round_trip(path):
    for native_operators in (True, False):
        plan, _ = plan_project(path, native_operators=native_operators)
        if plan is None:
            pytest.skip("does not plan")
        data = plan_to_json(plan)
        assert json.loads(json.dumps(data)) == data  # plain JSON
        again = plan_from_json(json.loads(json.dumps(data)))
        assert isinstance(again, Plan) and plan_to_json(again) == data
        # the planner builds the typed plan itself: the very plan its JSON form decodes to, down to
        # the types of its values (tuples, Decimal money literals; repr shows them, == may not)
        assert again == plan and repr(again) == repr(plan)
        assert data["version"] == PLAN_VERSION and again.native_operators is native_operators
        for e in again.elements:  # decided, and decoded once: trees, not JSON
            assert e.physical is not None and e.physical.path in (NATIVE, PER_INSTANCE)
            assert e.input_where is None or isinstance(e.input_where, n.Node)
            for sel in e.query.selects if e.query else ():
                assert all(isinstance(i.expr, n.Node) for i in sel.items)


def _data(**changes):
    plan, _ = plan_project(os.path.join(ROOT, "tests", "projects", "seeds", "hash_maxprice.ccl"))
    return {**plan_to_json(plan), **changes}


@pytest.mark.parametrize("data, message", [
    (_data(version=1), "plan version 1 is not supported .*run `ccl compile` again"),
    (_data(version=3), "^plan version 3 is not supported .this ccl reads version 4.: run `ccl compile` "
                       "again on the project$"),
    (_data(version=99), "plan version 99"),
    ({"format": "x"}, "not a compiled CCL plan"),
    ([], "not a compiled CCL plan"),
    (_data(elements=None), "no element list"),
    (_data(elements=[{"name": "x"}]), "not a valid plan: missing 'kind'"),
    (_data(elements=[{"name": "x", "kind": "stream", "role": "input", "columns": 3}]),
     "not a valid plan: a list is expected"),
    (_data(globals=[{"node": "Nonsense"}]), "not a valid plan: unknown node kind"),
])
def test_bad_data_is_refused_with_one_line(data, message):
    with pytest.raises(PlanFormatError, match=message) as info:
        plan_from_json(data)
    assert "\n" not in str(info.value)


def test_native_operators_is_a_planning_option(tmp_path):
    path = tmp_path / "p.ccl"
    path.write_text("create input stream s schema (k string, v integer);\n"
                    "create output window w primary key deduced keep all\n"
                    "  as select s.k, sum(s.v) v from s group by s.k;\n")
    on, _ = plan_project(str(path))
    off, _ = plan_project(str(path), native_operators=False)
    assert [e.physical.native for e in on.elements] == ["input", "aggregation"]
    assert [e.physical.native for e in off.elements] == ["input", None]
    assert off.elements[1].physical.path == PER_INSTANCE and off.elements[1].physical.arrow


def test_a_run_directory_of_plan_version_3_goes_on_and_one_of_version_2_is_refused(tmp_path):
    """Version 4 adds decisions (``kernel`` of aggregations, ``window_store``) that a run directory
    does not hold: one begun by a version 3 plan is read as it is; version 2 (one query per
    element) is not."""
    from runtime.run_dir import older_layout
    from runtime.run_setup import STATE_LAYOUT, RunError, layout_of

    run = {"buckets": 8, "unrecorded": [], "file_source": [], "project_query": [], "window_store": [],
           "state_store": STATE_LAYOUT, "numbering": "arrival"}
    (tmp_path / "run.json").write_text(json.dumps(run))
    for version in (3, PLAN_VERSION):
        (tmp_path / "plan.json").write_text(json.dumps({"format": "ccl-plan", "version": version,
                                                        "elements": []}))
        assert older_layout(str(tmp_path), {"version": version}) is None
        assert layout_of(str(tmp_path)).buckets == 8
    (tmp_path / "plan.json").write_text(json.dumps({"format": "ccl-plan", "version": 2, "elements": []}))
    with pytest.raises(RunError, match=r"older ccl \(plan version 2\)"):
        layout_of(str(tmp_path))


def _run_dir(tmp_path, saved: dict) -> str:
    """A run directory of this layout begun with the plan JSON ``saved``."""
    from runtime.run_setup import STATE_LAYOUT
    run = {"buckets": 8, "unrecorded": [], "file_source": [], "project_query": [], "window_store": [],
           "state_store": STATE_LAYOUT, "numbering": "arrival"}
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "plan.json").write_text(json.dumps(saved))
    return str(tmp_path)


def test_the_resume_check_compares_typed_plans_also_with_a_version_3_checkpoint(tmp_path):
    """A version 3 ``plan.json`` (no ``kernel``, no ``window_store``) is decoded for the check, with
    those decisions at their defaults; the check then tells what changed, element by element."""
    from runtime.run_dir import saved_plan, saved_run_plan, why_not_continued, why_not_resumable

    data = _data()
    old = json.loads(json.dumps(data))
    old["version"] = 3
    for e in old["elements"]:
        del e["physical"]["kernel"], e["physical"]["window_store"]
    root = _run_dir(tmp_path, old)
    begun = saved_run_plan(saved_plan(root))
    assert [e.name for e in begun.elements] == [e["name"] for e in data["elements"]]
    assert all(e.physical.kernel is None and not e.physical.window_store for e in begun.elements)
    same = plan_from_json(data)
    assert why_not_continued(root, old, same) is None
    assert why_not_resumable(root, old, data) is None
    partitioned = next(e for e in data["elements"] if e["partition"])
    more = json.loads(json.dumps(data))
    for e in more["elements"]:
        if e["name"] == partitioned["name"]:
            e["physical"]["instances"] += 1
    assert f"element '{partitioned['name']}' had" in why_not_continued(root, old, plan_from_json(more))
    other = json.loads(json.dumps(data))
    other["project"] = "other"
    assert "holds a checkpoint of project" in why_not_resumable(root, old, other)


def test_a_plan_json_no_version_reads_is_refused_with_its_reason_not_a_traceback(tmp_path):
    from runtime.run_dir import why_not_continued
    from runtime.run_setup import RunError, layout_of

    broken = _data(elements=[{"name": "x"}])  # no kind: not a plan
    root = _run_dir(tmp_path, broken)
    assert "plan.json is not a plan this ccl reads" in why_not_continued(root, broken,
                                                                         plan_from_json(_data()))
    with pytest.raises(RunError, match=r"cannot be read: its plan.json is not a plan this ccl reads "
                                       r"\(not a valid plan: missing 'kind'\)"):
        layout_of(root)
