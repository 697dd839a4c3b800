"""What a run leaves in its output directory, made from the run directory's changelogs and counters.

- ``NAME.csv`` for every OUTPUT element: a window's final contents (per instance: a partitioned
  window holds its instances' rows side by side), every row a stream emitted, every change of a
  delta stream with its ``ESP_OPS`` letter;
- the files of output adapters (toolkit_file_csv_output, dsv_out): the element's changelog;
- ``_bad_records.jsonl``: every bad record (element, reason, row), batch by batch;
- ``_run.json``: per element rows in, rows out, bad records by reason and rows per instance, with
  the Spark version and the wall time.
"""
from __future__ import annotations

import glob
import json
import os
import re
from typing import Any, Iterable, Iterator, Optional

import pyarrow as pa

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ccl.physical import instance_count, native_aggregation

from .csv_output import write_csv_tables
from .csv_source import CsvFormat, adapter_properties
from .job import BATCH, RunDirs, RunError, changelog_schema
from .native_agg import final_contents
from .processor import INST, OP, SEQ, SUB

OUTPUT_ADAPTERS = ("toolkit_file_csv_output", "dsv_out", "toolkit_file_csv_output_adapter")


def element_stats(dirs: RunDirs, element: dict) -> dict:
    """The counters of an element over all its batches."""
    total = {"rows_in": 0, "rows_out": 0, "rows_out_by_opcode": {}, "bad_records": {},
             "instances": {}, "batches": 0}
    for path in sorted(glob.glob(os.path.join(dirs.of("stats", element["name"]), "batch-*.json"))):
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        total["batches"] += 1
        total["rows_in"] += s["rows_in"]
        for op, k in s["rows_out"].items():
            total["rows_out_by_opcode"][op] = total["rows_out_by_opcode"].get(op, 0) + k
            total["rows_out"] += k
        for reason, k in s["bad"].items():
            total["bad_records"][reason] = total["bad_records"].get(reason, 0) + k
        for inst, k in s["instances"].items():
            total["instances"][inst] = total["instances"].get(inst, 0) + k
    total["instances"] = dict(sorted(total["instances"].items(), key=lambda kv: int(kv[0])))
    total["partition_instances"] = instance_count(element)
    return total


CHUNK_BYTES = 64 << 20  # changelog files read, sorted and written at a time (see changelog_chunks)
_BATCH_FILE = re.compile(r"batch-(\d+)")


def changelog(spark: SparkSession, dirs: RunDirs, element: dict) -> DataFrame:
    """An element's whole changelog as a batch frame, in no order."""
    path = dirs.of("changelog", element["name"])
    os.makedirs(path, exist_ok=True)
    return spark.read.schema(changelog_schema(element)).parquet(path)


def changelog_chunks(spark: SparkSession, dirs: RunDirs, element: dict) -> Iterator[DataFrame]:
    """An element's changelog as frames of whole micro-batches, in batch order, each of about
    :data:`CHUNK_BYTES` of files: sorted one at a time (:func:`_records`), they give the whole
    changelog in order without holding it all on the driver."""
    files: list[tuple[int, str]] = []
    for path in glob.glob(os.path.join(dirs.of("changelog", element["name"]), "batch-*.parquet")):
        m = _BATCH_FILE.match(os.path.basename(path))
        if m:
            files.append((int(m.group(1)), path))
    files.sort()
    chunk: list[str] = []
    size = 0
    for i, (batch, path) in enumerate(files):
        chunk.append(path)
        size += os.path.getsize(path)
        last_of_batch = i + 1 == len(files) or files[i + 1][0] != batch
        if last_of_batch and (size >= CHUNK_BYTES or i + 1 == len(files)):
            yield spark.read.schema(changelog_schema(element)).parquet(*chunk)
            chunk, size = [], 0


ORDER = (BATCH, SEQ, INST, SUB)  # the order in which an element produced its changelog rows


def final_rows(spark: SparkSession, dirs: RunDirs, element: dict,
               plan: dict) -> Iterator[Any]:
    """What ``NAME.csv`` holds for an element (see the module docstring), as frames (or a native
    aggregation's Arrow table) to sort one at a time: a window's final contents (a native
    aggregation's from its latest snapshot, the others' the last change of each key in the
    changelog), else the changelog's chunks."""
    if element["kind"] != "window":
        yield from changelog_chunks(spark, dirs, element)
        return
    contents = (final_contents(element, dirs.of("native", element["name"]))
                if native_aggregation(element, plan) is not None else None)
    if contents is not None:
        yield contents
        return
    yield last_changes(spark, dirs, element)


def last_changes(spark: SparkSession, dirs: RunDirs, element: dict) -> DataFrame:
    """A window's rows now from its changelog: the last change of each key (per instance), unless
    it is a delete."""
    df = changelog(spark, dirs, element)
    key = [INST] + [F.col(f"`{k}`") for k in element["key"]] if element["key"] else [INST, SEQ]
    latest = Window.partitionBy(*key).orderBy(F.col(BATCH).desc(), F.col(SEQ).desc(), F.col(SUB).desc())
    last = df.withColumn("__n", F.row_number().over(latest)).where("__n = 1").drop("__n")
    return last.where(F.col(OP) != "d")


def sorted_tables(frames: Iterable[Any]) -> Iterator[Any]:
    """Each of ``frames`` (a DataFrame, collected as one Arrow table, or an Arrow table) sorted on
    the driver in :data:`ORDER` (about twice as fast as Spark's sort and Row objects)."""
    for df in frames:
        table = df if isinstance(df, pa.Table) else df.toArrow()
        yield table.sort_by([(c, "ascending") for c in ORDER])


def records(frames: Iterable[Any]) -> Iterator[dict]:
    """The rows of ``frames`` as dicts, in the order of :func:`sorted_tables`."""
    for table in sorted_tables(frames):
        yield from table.to_pylist()


def write_outputs(spark: SparkSession, plan: dict, dirs: RunDirs, out_dir: str, base_dir: str,
                  wall_seconds: float, extra: Optional[dict] = None) -> dict:
    """Write the output directory (and output adapters' files); return the ``_run.json`` data."""
    os.makedirs(out_dir, exist_ok=True)
    report = {"project": plan.get("project"), "spark_version": spark.version,
              "wall_seconds": round(wall_seconds, 3), "elements": {}, **(extra or {})}
    for e in plan["elements"]:
        report["elements"][e["name"]] = element_stats(dirs, e)
        if e["role"] == "output":
            write_csv_tables(os.path.join(out_dir, e["name"] + ".csv"), e["columns"],
                             sorted_tables(final_rows(spark, dirs, e, plan)),
                             opcodes=e["kind"] == "delta stream")
    for adapter, path, fmt in output_adapters(plan, base_dir):
        _write_adapter(spark, plan, dirs, adapter, path, fmt)
    _merge_bad_records(dirs, plan, os.path.join(out_dir, "_bad_records.jsonl"))
    with open(os.path.join(out_dir, "_run.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    return report


def output_adapters(plan: dict, base_dir: str) -> list[tuple[dict, str, CsvFormat]]:
    """(adapter, file path, format) of each file output adapter; RunError, before anything runs,
    for properties the writer cannot use or two adapters writing one file (the last would win)."""
    found: list[tuple[dict, str, CsvFormat]] = []
    by_path: dict[str, str] = {}
    names = {e["name"] for e in plan["elements"]}
    for a in plan.get("adapters", []):
        if a["direction"] != "output" or a["type"].lower() not in OUTPUT_ADAPTERS or a["element"] not in names:
            continue
        props = adapter_properties(a["properties"])
        try:
            fmt = CsvFormat.from_options(props)
        except ValueError as exc:
            raise RunError(f"output adapter '{a['name']}': {exc}") from None
        path = os.path.normpath(os.path.join(base_dir, str(props.get("dir", ".")),
                                             str(props.get("file") or a["element"] + ".csv")))
        if path in by_path:
            raise RunError(f"output adapters '{by_path[path]}' and '{a['name']}' both write {path}: "
                           f"give one of them another dir or file")
        by_path[path] = a["name"]
        found.append((a, path, fmt))
    return found


def _write_adapter(spark: SparkSession, plan: dict, dirs: RunDirs, adapter: dict, path: str,
                   fmt: CsvFormat) -> None:
    element = next(e for e in plan["elements"] if e["name"] == adapter["element"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tables = sorted_tables(changelog_chunks(spark, dirs, element))
    write_csv_tables(path, element["columns"], tables,
                     delimiter=fmt.delimiter, opcodes=True, header=fmt.has_header is not False,
                     stream_name=element["name"] if fmt.stream_opcode else None)


def _merge_bad_records(dirs: RunDirs, plan: dict, target: str) -> None:
    with open(target + ".tmp", "w", encoding="utf-8") as out:
        for e in plan["elements"]:
            for path in sorted(glob.glob(os.path.join(dirs.of("bad", e["name"]), "batch-*.jsonl"))):
                with open(path, encoding="utf-8") as f:
                    out.write(f.read())
    os.replace(target + ".tmp", target)
