"""What a run leaves in its output directory, made from the run directory's changelogs and counters.

- ``NAME.csv`` for every OUTPUT element: a window's final contents (per instance: a partitioned
  window holds its instances' rows side by side), every row a stream emitted, every change of a
  delta stream with its ``ESP_OPS`` letter;
- the files of output adapters (toolkit_file_csv_output, dsv_out): the element's changelog;
- ``_bad_records.jsonl``: every bad record (element, reason, row), batch by batch;
- ``_run.json``: per element rows in, rows out, bad records by reason and rows per instance, with
  the Spark version and the wall time; per query its micro-batches' count, total and slowest
  seconds (``batches``, from ``RUN/batches/QUERY/batch-N.json``).

They hold the project query's batches that ran to their end (:func:`last_complete`): a batch a
stop cut short has written the files of some elements and not of others, and runs again, whole,
from the checkpoint.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import re
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from ccl.plan.model import Adapter, Element, Plan

from .appended import appends, copy_appended
from .bucket_pool import map_if_running
from .changelog_order import order_of, sorted_tables
from .csv_output import write_csv_tables
from .inputs.formats import CsvFormat, adapter_properties
from .frames import changelog_schema
from .run_dir import BATCHES, PROJECT_QUERY, RunDirs
from .native_agg import final_contents
from .processor import BATCH, INST, OP, SEQ
from .run_setup import RunError, RunLayout
from .types import columns_of

log = logging.getLogger("ccl.runtime")

OUTPUT_ADAPTERS = ("toolkit_file_csv_output", "dsv_out", "toolkit_file_csv_output_adapter")


def last_complete(dirs: RunDirs, layout: RunLayout) -> dict[str, int]:
    """Per element of the project's query, the last batch of that query which ran to its end
    (``RUN/batches/QUERY/batch-N.json``, written once the batch has written all its files:
    runtime.run.timed_batches). A stop waits for the batch running (its guard), so only a batch
    that outlasted the bound is left out. The element queries' batches are all counted: a
    derived query may already have read a batch cut short of its source's, whose counters are
    written before its changelog (runtime.batch_writers.element_writer)."""
    done = [_batch_of(path) for path in dirs.batch_files(BATCHES, "json", PROJECT_QUERY)]
    if not done:
        return {}
    return {name: max(done) for name in layout.project}


def _batch_of(path: str) -> int:
    """The batch number in the name of a run directory's ``batch-N...`` file."""
    m = _BATCH_FILE.match(os.path.basename(path))
    return int(m.group(1)) if m else -1


def _batch_paths(folder: str, pattern: str, upto: Optional[int]) -> list[tuple[int, str]]:
    """(batch, path) of the files ``pattern`` in ``folder``, in batch order; those of batches after
    ``upto`` left out (None: none)."""
    found = [(_batch_of(path), path) for path in glob.glob(os.path.join(folder, pattern))]
    return sorted((b, path) for b, path in found if b >= 0 and (upto is None or b <= upto))


def element_stats(dirs: RunDirs, element: Element, upto: Optional[int] = None) -> dict:
    """The counters of an element over its batches (up to batch ``upto``; None: all)."""
    total = {"rows_in": 0, "rows_out": 0, "rows_out_by_opcode": {}, "bad_records": {},
             "instances": {}, "batches": 0}
    for _, path in _batch_paths(dirs.of("stats", element.name), "batch-*.json", upto):
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
    total["partition_instances"] = element.physical.instances if element.physical else 1
    return total


CHUNK_BYTES = 64 << 20  # changelog files read, sorted and written at a time (see changelog_chunks)
_BATCH_FILE = re.compile(r"batch-(\d+)")


def changelog_chunks(dirs: RunDirs, element: Element, upto: Optional[int] = None) -> Iterator[pa.Table]:
    """An element's changelog (up to batch ``upto``; None: all) as Arrow tables of whole
    micro-batches, in batch order, each of about :data:`CHUNK_BYTES` of files: sorted one at a
    time (:func:`sorted_tables`), they give the whole changelog in order without holding it all
    in memory. The files are read here, on the driver, as every path of the run directory is (a
    Spark job per chunk cost 0.2-0.4 s)."""
    import pyarrow.dataset as ds

    schema = _arrow_schema(element)
    files = _batch_paths(dirs.of("changelog", element.name), "batch-*.parquet", upto)
    chunk: list[str] = []
    size = 0
    for i, (batch, path) in enumerate(files):
        chunk.append(path)
        size += os.path.getsize(path)
        last_of_batch = i + 1 == len(files) or files[i + 1][0] != batch
        if last_of_batch and (size >= CHUNK_BYTES or i + 1 == len(files)):
            yield ds.dataset(chunk, schema=schema, format="parquet").to_table()
            chunk, size = [], 0


def _arrow_schema(element: Element) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(changelog_schema(columns_of(element)), timezone="UTC")


CONFLICT = "key held by another instance too: the later change wins"


@dataclass
class Contents:
    """What ``NAME.csv`` holds for an element, and for a partitioned window the rows of keys that
    another instance held too and changed later (each a :data:`CONFLICT` bad record)."""

    tables: list[pa.Table]
    replaced: list[pa.Table] = field(default_factory=list)


def final_rows(dirs: RunDirs, element: Element, upto: Optional[int] = None) -> Contents:
    """What ``NAME.csv`` holds for an element (see the module docstring), as Arrow tables to sort
    one at a time: a window's final contents (a native aggregation's from its latest snapshot,
    the others' the last change of each key in the changelog), else the changelog's chunks.

    A window holds each key once: where two instances hold a key (possible only after a CCL3001,
    CCL3002 or CCL3011 warning), the row whose last change came later in sequence order wins.
    ``upto``: the last batch counted (None: all)."""
    if element.kind != "window":
        return Contents(list(changelog_chunks(dirs, element, upto)))
    physical = element.physical
    contents = (final_contents([c.name for c in element.columns], dirs.of("native", element.name))
                if physical is not None and physical.native == "aggregation" else None)
    held = contents if contents is not None else last_changes(dirs, element, upto)
    if not element.key or physical is None or physical.instances == 1:
        return Contents([held])
    order, last = _last_of_keys(held, list(element.key))
    others = np.ones(held.num_rows, bool)
    others[last] = False
    return Contents([held.take(order[last])], [held.take(order[others])])


def last_changes(dirs: RunDirs, element: Element, upto: Optional[int] = None) -> pa.Table:
    """A window's rows now in each instance, from its changelog (up to batch ``upto``; None: all):
    the last change of each key per instance, unless it is a delete, in :data:`ORDER`. The
    changelog is read chunk by chunk, keeping the last change of each key."""
    key = [INST, *element.key] if element.key else [INST, SEQ]
    latest: Optional[pa.Table] = None
    for chunk in changelog_chunks(dirs, element, upto):
        table = chunk if latest is None else pa.concat_tables([latest, chunk])
        order, last = _last_of_keys(table, key)
        latest = table.take(order[last])
    if latest is None:
        return _arrow_schema(element).empty_table()
    return latest.filter(pc.not_equal(latest.column(OP), "d"))


def _last_of_keys(table: pa.Table, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``order``, the positions of ``table``'s rows in :data:`ORDER` (:func:`order_of`), and
    ``last``, the ranks in that order of the last row of each ``key``, ascending: so
    ``table.take(order[last])`` is the last row of each key, in :data:`ORDER`. Float keys are
    compared as Spark groups them (-0.0 is 0.0, every NaN one value). Only the key columns and
    each row's rank are grouped; no column but the order's is sorted."""
    order = order_of(table)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    keyed = pa.table({"__r": rank})
    for i, name in enumerate(key):
        values = table.column(name)
        if pa.types.is_floating(values.type):
            values = pc.if_else(pc.is_nan(values), float("nan"), pc.add(values, 0.0))
        keyed = keyed.append_column(f"__k{i}", values)
    last = keyed.group_by([f"__k{i}" for i in range(len(key))], use_threads=False).aggregate(
        [("__r", "max")])
    return order, np.sort(last.column("__r_max").to_numpy())


def records(tables: Iterable[pa.Table]) -> Iterator[dict]:
    """The rows of ``tables`` as dicts, in the order of :func:`sorted_tables`."""
    for table in sorted_tables(tables):
        yield from table.to_pylist()


def write_outputs(spark: SparkSession, plan: Plan, dirs: RunDirs, layout: RunLayout, out_dir: str,
                  base_dir: str, wall_seconds: float, extra: Optional[dict] = None) -> dict:
    """Write the output directory (and output adapters' files) from the batches that ran to their
    end; return the ``_run.json`` data."""
    os.makedirs(out_dir, exist_ok=True)
    upto = last_complete(dirs, layout)
    report = {"project": plan.project, "spark_version": spark.version,
              "wall_seconds": round(wall_seconds, 3), "elements": {}, **(extra or {})}
    conflicts: list[str] = []
    outputs = [e for e in plan.elements if e.role == "output"]
    args = [[dirs] * len(outputs), outputs, [out_dir] * len(outputs),
            [upto.get(e.name) for e in outputs]]
    written = map_if_running(write_output, *args) if len(outputs) > 1 else None
    if written is None:
        written = list(map(write_output, *args))
    replaced_of = {e.name: tables for e, tables in zip(outputs, written)}
    for e in plan.elements:
        stats = report["elements"][e.name] = element_stats(dirs, e, upto.get(e.name))
        if e.role == "output":
            replaced = conflict_lines(e, replaced_of[e.name])
            if replaced:
                stats["bad_records"][CONFLICT] = len(replaced)
                log.warning("%s: %d row(s) of keys another instance held too; the later change "
                            "won (%s)", e.name, len(replaced), "_bad_records.jsonl")
            conflicts += replaced
    report["batches"] = batch_summary(dirs)
    for adapter, path, fmt in output_adapters(plan, base_dir):
        _write_adapter(plan, dirs, adapter, path, fmt, upto.get(adapter.element))
    _merge_bad_records(dirs, plan, os.path.join(out_dir, "_bad_records.jsonl"), conflicts, upto)
    with open(os.path.join(out_dir, "_run.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    return report


def write_output(dirs: RunDirs, element: Element, out_dir: str,
                 upto: Optional[int] = None) -> list[pa.Table]:
    """Write ``NAME.csv`` of output element ``element`` from its batches up to ``upto`` (None:
    all); the rows of keys another instance held too (:attr:`Contents.replaced`). A stream's
    file is copied from its lines appended as its batches were written (runtime/appended.py)
    when they are those of its changelog, else made from the changelog. The output
    elements' files are independent: with the bucket pool running (a large batch started it),
    :func:`write_outputs` writes them side by side in its processes."""
    path = os.path.join(out_dir, element.name + ".csv")
    if appends(element):
        files = _batch_paths(dirs.of("changelog", element.name), "batch-*.parquet", upto)
        if copy_appended(dirs, element, path, files, upto):
            return []
    contents = final_rows(dirs, element, upto)
    write_csv_tables(path, columns_of(element),
                     sorted_tables(contents.tables), opcodes=element.kind == "delta stream")
    return contents.replaced


def batch_summary(dirs: RunDirs) -> dict[str, dict]:
    """Per query (its run directory folder name: ``ccl_project``, ``ccl_ELEMENT``) the number of
    micro-batches it ran, their total and their largest seconds (runtime.run.timed_batches)."""
    summary: dict[str, dict] = {}
    for path in dirs.batch_files(BATCHES, "json"):
        try:
            with open(path, encoding="utf-8") as f:
                seconds = float(json.load(f)["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        s = summary.setdefault(os.path.basename(os.path.dirname(path)),
                               {"batches": 0, "seconds": 0.0, "max_seconds": 0.0})
        s["batches"] += 1
        s["seconds"] = round(s["seconds"] + seconds, 4)
        s["max_seconds"] = max(s["max_seconds"], seconds)
    return summary


def output_adapters(plan: Plan, base_dir: str) -> list[tuple[Adapter, str, CsvFormat]]:
    """(adapter, file path, format) of each file output adapter; RunError, before anything runs,
    for properties the writer cannot use or two adapters writing one file (the last would win)."""
    found: list[tuple[Adapter, str, CsvFormat]] = []
    by_path: dict[str, str] = {}
    names = {e.name for e in plan.elements}
    for a in plan.adapters:
        if a.direction != "output" or a.type.lower() not in OUTPUT_ADAPTERS or a.element not in names:
            continue
        props = adapter_properties(a.properties)
        try:
            fmt = CsvFormat.from_options(props)
        except ValueError as exc:
            raise RunError(f"output adapter '{a.name}': {exc}") from None
        path = os.path.normpath(os.path.join(base_dir, str(props.get("dir", ".")),
                                             str(props.get("file") or a.element + ".csv")))
        if path in by_path:
            raise RunError(f"output adapters '{by_path[path]}' and '{a.name}' both write {path}: "
                           f"give one of them another dir or file")
        by_path[path] = a.name
        found.append((a, path, fmt))
    return found


def _write_adapter(plan: Plan, dirs: RunDirs, adapter: Adapter, path: str,
                   fmt: CsvFormat, upto: Optional[int]) -> None:
    element = plan.element(adapter.element)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tables = sorted_tables(changelog_chunks(dirs, element, upto))
    write_csv_tables(path, columns_of(element), tables,
                     delimiter=fmt.delimiter, opcodes=True, header=fmt.has_header is not False,
                     stream_name=element.name if fmt.stream_opcode else None)


def conflict_lines(element: Element, tables: Iterable[pa.Table]) -> list[str]:
    """The bad records (JSON lines, as ``json.dumps(record, default=str, sort_keys=True)`` writes
    them) of window rows that a change of another instance replaced, in :data:`ORDER`. Built a
    column at a time: a ROUNDROBIN window over many keys has a record for most of its rows."""
    names = sorted(c.name for c in element.columns)
    template = ('{"batch": %s, "element": ' + json.dumps(element.name) + ', "instance": %s, '
                '"reason": ' + json.dumps(CONFLICT) + ', "row": {'
                + ", ".join(json.dumps(name) + ": %s" for name in names) + "}}\n")
    lines: list[str] = []
    for table in sorted_tables(tables):
        texts = [_json_texts(table.column(name)) for name in (BATCH, INST, *names)]
        lines += [template % parts for parts in zip(*texts)]
    return lines


_FLOAT_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # json.dumps's words


def _json_texts(column: pa.ChunkedArray) -> list[str]:
    """Each value of ``column`` as ``json.dumps(value, default=str)`` writes it."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        encode: Callable[[Any], str] = encode_basestring_ascii
    elif pa.types.is_integer(kind):
        encode = int.__repr__
    elif pa.types.is_boolean(kind):
        encode = _bool_text
    elif pa.types.is_floating(kind):
        encode = _float_text
    else:
        encode = _any_text
    return ["null" if v is None else encode(v) for v in column.to_pylist()]


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _float_text(value: float) -> str:
    text = float.__repr__(value)
    return _FLOAT_TEXT.get(text, text)


def _any_text(value: Any) -> str:
    return json.dumps(value, default=str)


def _merge_bad_records(dirs: RunDirs, plan: Plan, target: str, extra: list[str],
                       upto: dict[str, int]) -> None:
    with open(target + ".tmp", "w", encoding="utf-8") as out:
        for e in plan.elements:
            for _, path in _batch_paths(dirs.of("bad", e.name), "batch-*.jsonl", upto.get(e.name)):
                with open(path, encoding="utf-8") as f:
                    out.write(f.read())
        out.writelines(extra)
    os.replace(target + ".tmp", target)
