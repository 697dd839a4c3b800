"""Stream aggregations on Spark's own operators (see ``ccl.physical.native_aggregation``).

Such a window (GROUP BY plain columns over a stream, KEEP ALL, count/sum/min/max/avg) never
retracts. Its input rows carry their partition instance (``__inst``, given by
``runtime.job._with_instance`` exactly as on the per-instance path); each micro-batch is
aggregated with ``groupBy(__inst, group columns)`` and merged into per-group partial totals kept as
one Parquet snapshot per batch (``RUN/native/ELEMENT/state-N.parquet``), so every instance has its
own groups. A replayed batch N reads snapshot N-1 again and rewrites the same files, as the
per-instance path does. Rows that get no instance (``__why`` set) are bad records. A snapshot also
keeps each group's last batch and sequence number, so the window's final contents (``NAME.csv``)
are read from the latest snapshot (:func:`final_contents`) rather than from the whole changelog.

Changelog rows: one per group the batch touched, ``i`` when the group is new and ``u`` otherwise,
carrying the largest sequence number of the group's rows in the batch (the per-instance path
emits one change per input row; the final contents are the same).
"""
from __future__ import annotations

import functools
import glob
import os
import re
from typing import Callable, Optional

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .processor import BATCH, INST, OP, SEQ, SUB, WHY
from .types import column, spark_type

_STATE = re.compile(r"state-(\d+)\.parquet$")
LAST_BATCH = "__last_batch"  # snapshot column: the batch of the group's last change



def _partials(spec: dict) -> list[tuple[str, Column, str]]:
    """(partial column, its aggregate over a batch, how two partials combine) per aggregate."""
    out = []
    for i, (_, fn, col) in enumerate(spec["aggregates"]):
        arg = column(col) if col is not None else None
        if fn in ("max", "min"):
            out.append((f"__m{i}", (F.max if fn == "max" else F.min)(arg), fn))
        if fn in ("sum", "avg"):
            out.append((f"__s{i}", F.sum(arg), "sum"))
        if fn in ("count", "avg"):
            out.append((f"__c{i}", F.count(arg if arg is not None else F.lit(1)), "count"))
    return out


def _combine(how: str, new: Column, old: Column) -> Column:
    if how == "max":
        return F.greatest(new, old)
    if how == "min":
        return F.least(new, old)
    if how == "count":
        return new + F.coalesce(old, F.lit(0))
    return F.when(old.isNull(), new).when(new.isNull(), old).otherwise(new + old)


def _snapshots(directory: str) -> list[tuple[int, str]]:
    """(batch id, path) of the group-total snapshots in ``directory``."""
    found = []
    for path in glob.glob(os.path.join(directory, "state-*.parquet")):
        m = _STATE.search(path)
        if m:
            found.append((int(m.group(1)), path))
    return found


def output_values(element: dict, spec: dict) -> list[Column]:
    """The element's group and aggregate columns from a frame of partials (a batch's merged
    groups or a snapshot)."""
    types = dict((name, t) for name, t in element["columns"])
    values = [column(col).cast(spark_type(types[item])).alias(item) for item, col in spec["groups"]]
    for i, (item, fn, _) in enumerate(spec["aggregates"]):
        if fn in ("max", "min"):
            value = column(f"__m{i}")
        elif fn == "sum":
            value = column(f"__s{i}")
        elif fn == "count":
            value = column(f"__c{i}")
        else:
            value = F.when(column(f"__c{i}") > 0, column(f"__s{i}") / column(f"__c{i}"))
        values.append(value.cast(spark_type(types[item])).alias(item))
    return values


def final_contents(spark: SparkSession, element: dict, spec: dict,
                   state_dir: str) -> Optional[DataFrame]:
    """The window's rows now, from its latest snapshot, as changelog rows (each with the batch and
    sequence number of its group's last change): the last change of every group, without reading
    the changelog. None when there is no snapshot or it predates those columns."""
    snaps = _snapshots(state_dir)
    if not snaps:
        return None
    snap = spark.read.parquet(max(snaps)[1])
    if LAST_BATCH not in snap.columns:
        return None
    return snap.select(F.col(LAST_BATCH).alias(BATCH), F.col(INST), F.col(SEQ),
                       F.lit(0).cast("long").alias(SUB), F.lit("u").alias(OP),
                       *output_values(element, spec))


def native_writer(element: dict, spec: dict, state_dir: str,
                  write_parquets: Callable[[list[tuple[DataFrame, str, bool]]], list[dict]],
                  write_stats: Callable[[int, dict], None],
                  write_bad: Callable[[DataFrame, int], dict],
                  changelog_path: Callable[[int], str]
                  ) -> Callable[..., Optional[dict[tuple, int]]]:
    """The foreachBatch function of a native aggregation. Its input is the source's changelog with
    ``__inst`` and ``__why``; ``write_bad(rows, batch_id)`` writes the rows with a ``__why`` as
    bad records and returns their counts by reason; ``write_parquets`` is
    :func:`runtime.job.single_parquets`.

    ``write(df, batch_id, tally=None)``: rows whose ``__op`` is a delete or null are not
    aggregated. With ``tally`` (a non-negative integer column of ``df``), the same pass over ``df``
    also counts all its rows by its value, returned as ``{value: rows}``: a producer that hands its
    whole batch over (see runtime/job.py batch_writer) gets its own counters without a pass of its
    own. The tally must not split a group: the rows aggregated have one tally value (a producer's
    output rows)."""
    group_cols = [INST] + sorted({c for _, c in spec["groups"]})
    partials = _partials(spec)
    # Every expression is built here, once: building them costs py4j round trips, in every batch.
    live = F.coalesce(~F.col(OP).isin("d", "s"), F.lit(False))
    # Bad (the row got no instance), live (aggregated) and the tally are one grouping integer
    # (tally * 4 + bad * 2 + live): one cheap column instead of several.
    flags = F.when(F.col(WHY).isNotNull(), 2).otherwise(0) + F.when(live, 1).otherwise(0)
    keys = [column(c) for c in group_cols]
    every_aggs = ([agg.alias(name) for name, agg, _ in partials]
                  + [F.max(SEQ).alias(SEQ), F.count(F.lit(1)).alias("__n")])
    counted_sum = F.sum("__n").alias("n")
    bad_rows = live & F.col(WHY).isNotNull()
    aggregated = F.col("__code").bitwiseAND(3) == 1
    cond = functools.reduce(lambda a, b: a & b,
                            [column(c).eqNullSafe(column("__o_" + c)) for c in group_cols])
    combined = {p: _combine(how, column(p), column("__o" + p)) for p, _, how in partials}
    new_group = F.lit(None).cast("boolean")
    rows_out = [F.col(INST), F.col(SEQ), F.lit(0).cast("long").alias(SUB),
                F.when(column("__present"), F.lit("u")).otherwise(F.lit("i")).alias(OP),
                *output_values(element, spec)]
    changelog_cols = [BATCH, INST, SEQ, SUB, OP, *[column(c) for c, _ in element["columns"]]]

    @functools.lru_cache(maxsize=2)
    def layout(order: tuple[str, ...]) -> tuple[list[Column], list[Column], list[Column]]:
        """The columns read from an earlier snapshot, and of the new snapshot's merged and kept
        groups; ``order`` is (LAST_BATCH, SEQ) or, for a snapshot from before them, empty."""
        old = ([column(c).alias("__o_" + c) for c in group_cols + list(order)]
               + [column(p).alias("__o" + p) for p, _, _ in partials] + [F.lit(True).alias("__present")])
        merged = [*keys, *[column(p) for p, _, _ in partials]]
        kept = ([column("__o_" + c).alias(c) for c in group_cols + list(order)]
                + [column("__o" + p).alias(p) for p, _, _ in partials])
        return old, merged, kept

    def write(df: DataFrame, batch_id: int, tally: Optional[Column] = None) -> Optional[dict[int, int]]:
        # One pass over the batch: the groups' partials, with rows that got no instance (bad) and
        # rows not aggregated (not live) grouped apart, and per group the rows it got (the counts
        # per instance and the tally come from these).
        code = flags + tally * 4 if tally is not None else flags
        every = df.groupBy(*keys, code.alias("__code")).agg(*every_aggs).persist()
        merged: Optional[DataFrame] = None
        try:
            received: dict[str, int] = {}
            counted: dict[int, int] = {}
            any_bad = False
            for r in every.groupBy(INST, "__code").agg(counted_sum).collect():
                value, is_bad, is_live = r["__code"] >> 2, bool(r["__code"] & 2), bool(r["__code"] & 1)
                counted[value] = counted.get(value, 0) + int(r["n"])
                if is_live:
                    received[str(r[INST])] = received.get(str(r[INST]), 0) + int(r["n"])
                    any_bad = any_bad or is_bad
            bad = write_bad(df.where(bad_rows), batch_id) if any_bad else {}
            part = every.where(aggregated).drop("__code", "__n")
            earlier = [snap for snap in _snapshots(state_dir) if snap[0] < batch_id]
            old_path = max(earlier)[1] if earlier else None
            # the batch and sequence number of each group's last change (for final_contents);
            # a snapshot from before they were kept goes on without them
            order: tuple[str, ...] = (LAST_BATCH, SEQ)
            if old_path is not None:
                old = df.sparkSession.read.parquet(old_path)
                if LAST_BATCH not in old.columns:
                    order = ()
                old_cols, merged_cols, kept_cols = layout(order)
                old = old.select(*old_cols)
                # a join with the old snapshot: computed once for both files
                merged = part.join(old, cond, "left").withColumns(combined).persist()
                kept = old.join(part, cond, "left_anti")
            else:
                old_cols, merged_cols, kept_cols = layout(order)
                merged = part.withColumn("__present", new_group)
                kept = None
            state = merged.select(*merged_cols, *([F.lit(batch_id).cast("long").alias(LAST_BATCH),
                                                   F.col(SEQ)] if order else []))
            if kept is not None:
                state = state.unionByName(kept.select(*kept_cols))
            rows = merged.select(F.lit(batch_id).alias(BATCH), *rows_out).select(*changelog_cols)
            # both files in one job; the changelog's rows by opcode are counted as it is written
            ops, _ = write_parquets([(rows, changelog_path(batch_id), False),
                                     (state, os.path.join(state_dir, f"state-{batch_id:08d}.parquet"), True)])
            for n, stale in earlier:
                if n < batch_id - 1:  # batch N-1's stays: a replay of this batch reads it
                    os.remove(stale)
            write_stats(batch_id, {"rows_in": sum(received.values()), "rows_out": ops, "bad": bad,
                                   "instances": received})
            return counted if tally is not None else None
        finally:
            if merged is not None:
                merged.unpersist()
            every.unpersist()
    return write
