"""Running a CCL project end to end on the test session's Spark, with generated CSV inputs."""
from __future__ import annotations

import csv
import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from ccl.plan.codec import plan_to_json
from ccl.plan.planner import plan_project
from runtime.run_setup import RunOptions
from runtime.run import run_plan


@dataclass
class RunOutput:
    """The outputs of one run: ``NAME.csv`` contents as lists of dicts, the report, bad records."""

    out_dir: str
    report: dict
    plan: dict

    def rows(self, element: str) -> list[dict]:
        with open(os.path.join(self.out_dir, element + ".csv"), newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    def bad_records(self) -> list[dict]:
        with open(os.path.join(self.out_dir, "_bad_records.jsonl"), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def stats(self, element: str) -> dict:
        return self.report["elements"][element]


def write_rows(path: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A CSV input file with a header row."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow(["" if v is None else v for v in r])
    return path


def run_project(spark, tmp_path, ccl_text: str, inputs: Mapping[str, str], *,
                name: str = "p", params: Optional[Mapping[str, str]] = None,
                checkpoint: Optional[str] = None, max_files_per_batch: Optional[int] = None,
                native_operators: bool = True, collect_bytes: Optional[int] = None,
                parallel_rows: Optional[int] = None, buckets: Optional[int] = 2,
                no_kernel: Sequence[str] = ()) -> RunOutput:
    """Write ``ccl_text`` to ``tmp_path/name.ccl``, plan it and run it until idle
    (``collect_bytes``, ``parallel_rows``, ``buckets``: those of :class:`RunOptions`, else their
    defaults;
    a ``parallel_rows`` runs a small batch's buckets in two driver workers; the elements named in
    ``no_kernel`` run with their plan's kernel taken out, on the engine row by row)."""
    path = os.path.join(str(tmp_path), name + ".ccl")
    if not os.path.exists(path):
        os.makedirs(str(tmp_path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(ccl_text)
    plan, diags = plan_project(path, params=dict(params or {}), native_operators=native_operators)
    assert plan is not None, [str(d) for d in diags]
    if no_kernel:
        plan = dataclasses.replace(plan, elements=tuple(
            dataclasses.replace(e, physical=dataclasses.replace(e.physical, kernel=None))
            if e.physical is not None and e.name in no_kernel else e for e in plan.elements))
    out_dir = os.path.join(str(tmp_path), "out")
    options = RunOptions(inputs=dict(inputs), base_dir=str(tmp_path),
                         run_dir=checkpoint or os.path.join(str(tmp_path), "run"), until_idle=True,
                         buckets=buckets, max_files_per_batch=max_files_per_batch)
    if collect_bytes is not None:
        options.collect_bytes = collect_bytes
    if parallel_rows is not None:
        options.parallel_rows, options.driver_workers = parallel_rows, 2
    result = run_plan(spark, plan, options, out_dir)
    return RunOutput(out_dir, result.report, plan_to_json(plan))
