"""The query of its own that an element outside the project's query (runtime/project_query.py:
readers of an error stream ON an element outside it, every element with a file limit per batch,
an input bound to one file Spark's file source does not list, and the elements that read those)
runs.

Such an element runs as its own Structured Streaming query that reads the changelogs of the elements
it selects from (input elements read their files, runtime/frames.py) and writes its own changelog,
counters and bad records per micro-batch (runtime/batch_writers.py). Downstream queries read those
files as a file stream.

A native aggregation, a native stream or a per-instance element without timers (run by
runtime/arrow_state.py) with one source has no query of its own: it runs inside the
batches of its source's query, on the rows the source just produced, and writes its own changelog,
counters and bad records under the source's batch id (the plan's ``fused_consumers``, decided by
the compiler, ccl/plan/decisions.py; the run directory keeps the plan it started with, so it goes on
as it started).
"""
from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession

from ccl.plan.model import Element, Plan

from .arrow_state import GROUP, bucket_group
from .frames import input_frame, upstream_frame
from .json_plan import engine_plan_text
from .native_stages import native_frame, native_input
from .processor import ElementProcessor, output_schema
from .run_dir import RunDirs
from .run_setup import RunLayout, RunOptions
from .topology import first_ports, processor_input


def element_query(spark: SparkSession, plan: Plan, element: Element,
                  options: RunOptions, dirs: RunDirs, layout: RunLayout) -> Optional[DataFrame]:
    """The streaming frame of processor output rows (runtime/processor.py) of ``element``,
    or for an element run by runtime/arrow_state.py its processor input (each batch
    goes through :func:`runtime.batch_writers.arrow_transform`); None for an input element with
    no input. The processor (the engine) takes the plan's JSON text (runtime/json_plan.py)."""
    ports = element.ports()
    if element.is_input:
        frame = input_frame(spark, plan, element, options, dirs)
        if frame is None:
            return None
        frames = [frame]
    elif ports:
        frames = [upstream_frame(spark, dirs, plan.element(src), options.max_files_per_batch)
                  for _, src in ports]
    else:
        return None
    physical = element.physical
    native = physical.native if physical is not None else None
    if native in ("aggregation", "stream"):
        return native_frame(element, plan.element(ports[0][1]), frames[0])
    if native == "input":
        return native_input(element, frames[0])
    if element.name in layout.arrow_state:
        return processor_input(plan, element, frames, layout.buckets,
                               layout.by_group.get(element.name, ()), narrow=True)
    proc_in = processor_input(plan, element, frames, layout.buckets)
    # Time-based KEEPs need processing-time timers. The time mode is part of the checkpoint, so it
    # is the same in both kinds of run; an until-idle run registers no timers (it expires rows only
    # as batches arrive) and is stopped when idle (run.py: availableNow never ends in this mode).
    timed = physical is not None and physical.uses_time
    processor = ElementProcessor(engine_plan_text(plan), element.name,
                                 timed and not options.until_idle, first_ports(plan, element))
    # the processor ignores the key: the spread key balances buckets
    proc_in = proc_in.withColumn(GROUP, bucket_group(layout.buckets))
    return (proc_in.groupBy(GROUP)
            .transformWithState(processor, output_schema(element), "Append",
                                "ProcessingTime" if timed else "None"))
