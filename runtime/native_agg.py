"""Stream aggregations on Spark's own operators (see ``ccl.plan.physical.native_aggregation``).

Each aggregate is lowered to Spark by the walk the planner accepted it with
(ccl/plan/lowering/aggregation.py: its partials, how they merge, its value), with
:class:`SparkAggregation` building the pieces.

Such a window (GROUP BY plain columns over a stream, KEEP ALL, count/sum/min/max/avg) never
retracts. Its input rows carry their partition instance (``__inst``, given by
``runtime.topology.with_instance`` exactly as on the per-instance path); each micro-batch is
aggregated with ``groupBy(__inst, group columns)`` and merged into per-group partial totals kept as
one Parquet snapshot per batch (``RUN/native/ELEMENT/state-N.parquet``), so every instance has its
own groups. A replayed batch N reads snapshot N-1 again and rewrites the same files, as the
per-instance path does. Rows that get no instance (``__why`` set) are bad records. A snapshot also
keeps each group's last batch and sequence number and its row as the window has it, so the
window's final contents (``NAME.csv``) are read from the latest snapshot (:func:`final_contents`,
with pyarrow on the driver) rather than from the whole changelog. A batch is one Spark job: the
batch's groups, joined with the earlier snapshot, go to one task that writes both files.

Changelog rows: one per group the batch touched, ``i`` when the group is new and ``u`` otherwise,
carrying the largest sequence number of the group's rows in the batch (the per-instance path
emits one change per input row; the final contents are the same).
"""
from __future__ import annotations

import functools
import glob
import os
import re
from typing import Any, Callable, Mapping, Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ccl.plan.lowering.aggregation import LoweredAggregate, lower_aggregate
from ccl.plan.model import Element, NativeAggregation

from .processor import BATCH, INST, OP, SEQ, SUB, WHY
from .types import column, spark_type

_STATE = re.compile(r"state-(\d+)\.parquet$")
LAST_BATCH = "__last_batch"  # snapshot column: the batch of the group's last change
OUT = "__o:"  # snapshot columns OUT + name: the group's row as the window has it (names of CCL
# columns cannot hold a colon, so these cannot meet a group column)


class SparkAggregation:
    """Builds a native aggregate's pieces (ccl/plan/lowering/aggregation.py) as Spark Columns."""

    def partial(self, how: str, col: Optional[str]) -> Column:
        arg = column(col) if col is not None else None
        if how == "count":
            return F.count(arg if arg is not None else F.lit(1))
        return {"max": F.max, "min": F.min, "sum": F.sum}[how](arg)

    def merge(self, how: str, new: Column, old: Column) -> Column:
        if how == "max":
            return F.greatest(new, old)
        if how == "min":
            return F.least(new, old)
        if how == "count":
            return new + F.coalesce(old, F.lit(0))
        return F.when(old.isNull(), new).when(new.isNull(), old).otherwise(new + old)

    def read(self, name: str) -> Column:
        return column(name)

    def value(self, fn: str, parts: Mapping[str, Column]) -> Column:
        if fn == "avg":
            return F.when(parts["count"] > 0, parts["sum"] / parts["count"])
        return parts[fn]


_SPARK = SparkAggregation()


def _lowered(spec: NativeAggregation) -> list[LoweredAggregate[Column]]:
    """Each aggregate of ``spec`` (the plan's ``aggregation``) lowered to Spark: the walk the
    planner accepted it with."""
    return [lower_aggregate(i, fn, col, _SPARK) for i, (_, fn, col) in enumerate(spec.aggregates)]


def _partials(spec: NativeAggregation) -> list[tuple[str, Column, str]]:
    """(partial column, its aggregate over a batch, how two partials merge) per aggregate."""
    return [(p.name, p.fold, p.how) for agg in _lowered(spec) for p in agg.partials]


def _snapshots(directory: str) -> list[tuple[int, str]]:
    """(batch id, path) of the group-total snapshots in ``directory``."""
    found = []
    for path in glob.glob(os.path.join(directory, "state-*.parquet")):
        m = _STATE.search(path)
        if m:
            found.append((int(m.group(1)), path))
    return found


def output_values(element: Element, spec: NativeAggregation) -> list[Column]:
    """The element's group and aggregate columns from a frame of partials (a batch's merged
    groups or a snapshot)."""
    types = {c.name: c.type for c in element.columns}
    values = [column(col).cast(spark_type(types[item])).alias(item) for item, col in spec.groups]
    for (item, _, _), agg in zip(spec.aggregates, _lowered(spec)):
        values.append(agg.value.cast(spark_type(types[item])).alias(item))
    return values


def final_contents(names: Sequence[str], state_dir: str) -> Optional[Any]:
    """The window's rows now, from its latest snapshot, as an Arrow table of changelog rows (each
    with the batch and sequence number of its group's last change): the last change of every
    group, without reading the changelog, and without Spark (the snapshot holds the rows as the
    window has them, see :data:`OUT`). None when there is no snapshot or it predates those
    columns. ``names``: the window's columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    snaps = _snapshots(state_dir)
    if not snaps:
        return None
    path = max(snaps)[1]
    wanted = [LAST_BATCH, INST, SEQ] + [OUT + c for c in names]
    if not set(wanted) <= set(pq.read_schema(path).names):
        return None
    snap = pq.read_table(path, columns=wanted)
    rows = snap.num_rows
    return pa.table([snap.column(LAST_BATCH), snap.column(INST), snap.column(SEQ),
                     pa.array([0] * rows, pa.int64()), pa.array(["u"] * rows, pa.string()),
                     *[snap.column(OUT + c) for c in names]],
                    names=[BATCH, INST, SEQ, SUB, OP, *names])


ROLE = "__role"  # a row of the batch's groups (0) or a group of the earlier snapshot it left alone (1)
_CHANGE_OP = "__change_op"


def native_writer(element: Element, spec: NativeAggregation, state_dir: str,
                  write_stats: Callable[[int, dict], None],
                  write_bad: Callable[[DataFrame, int], dict],
                  changelog_path: Callable[[int], str]
                  ) -> Callable[..., Optional[dict[int, int]]]:
    """The foreachBatch function of a native aggregation. Its input is the source's changelog with
    ``__inst`` and ``__why``; ``write_bad(rows, batch_id)`` writes the rows with a ``__why`` as
    bad records and returns their counts by reason.

    ``write(df, batch_id, tally=None)``: rows whose ``__op`` is a delete or null are not
    aggregated. With ``tally`` (a non-negative integer column of ``df``), the same pass over ``df``
    also counts all its rows by its value, returned as ``{value: rows}``: a producer that hands its
    whole batch over (see runtime/batch_writers.py batch_writer) gets its own counters without a pass of its
    own. The tally must not split a group: the rows aggregated have one tally value (a producer's
    output rows).

    A batch is one Spark job: the batch's groups (merged with the earlier snapshot's) go to one
    task (:func:`_batch_files`) that writes the changelog and the new snapshot and counts the rows
    per instance, rather than a job that aggregates and counts and one that writes."""
    group_cols = [INST] + sorted({c for _, c in spec.groups})
    partials = _partials(spec)
    items = [item for item, _ in spec.groups] + [item for item, _, _ in spec.aggregates]
    # Every expression is built here, once: building them costs py4j round trips, in every batch.
    live = F.coalesce(~F.col(OP).isin("d", "s"), F.lit(False))
    # Bad (the row got no instance), live (aggregated) and the tally are one grouping integer
    # (tally * 4 + bad * 2 + live): one cheap column instead of several.
    flags = F.when(F.col(WHY).isNotNull(), 2).otherwise(0) + F.when(live, 1).otherwise(0)
    keys = [column(c) for c in group_cols]
    every_aggs = ([agg.alias(name) for name, agg, _ in partials]
                  + [F.max(SEQ).alias(SEQ), F.count(F.lit(1)).alias("__n")])
    bad_rows = live & F.col(WHY).isNotNull()
    aggregated = F.col("__code").bitwiseAND(3) == 1
    in_batch = F.col("__code").isNotNull()  # after the join: not a group only the snapshot has
    cond = functools.reduce(lambda a, b: a & b,
                            [column(c).eqNullSafe(column("__o_" + c)) for c in group_cols])
    snapshot_rows = [v.alias(OUT + item) for v, item in zip(output_values(element, spec), items)]
    change_op = F.when(F.col("__present"), F.lit("u")).otherwise(F.lit("i")).alias(_CHANGE_OP)
    counters = [ROLE, "__code", "__n"]

    @functools.lru_cache(maxsize=4)
    def layout(earlier: bool, order: tuple[str, ...]) -> tuple[list[Column], list[Column]]:
        """The columns read from an earlier snapshot (if any), and of the rows the batch's task
        gets; ``order`` is (LAST_BATCH, SEQ) or, for a snapshot from before them, empty."""
        if not earlier:
            return [], [F.lit(0).alias(ROLE), *counters[1:], *keys, *[column(p) for p, _, _ in partials],
                        F.col(SEQ), F.lit(None).cast("boolean").alias("__present")]
        old = ([column(c).alias("__o_" + c) for c in group_cols + list(order)]
               + [column(p).alias("__o" + p) for p, _, _ in partials] + [F.lit(True).alias("__present")])
        rows = ([F.when(in_batch, 0).otherwise(1).alias(ROLE), *counters[1:]]
                + [F.when(in_batch, column(c)).otherwise(column("__o_" + c)).alias(c) for c in group_cols]
                + [F.when(in_batch, _SPARK.merge(how, column(p), column("__o" + p))).otherwise(
                    column("__o" + p)).alias(p) for p, _, how in partials]
                + [F.when(in_batch, F.col(SEQ)).otherwise(column("__o_" + SEQ)).alias(SEQ) if order
                   else F.col(SEQ), F.col("__present")])
        if order:  # a group the batch left alone keeps its last batch
            rows.append(F.col("__o_" + LAST_BATCH))
        return old, rows

    def write(df: DataFrame, batch_id: int, tally: Optional[Column] = None) -> Optional[dict[int, int]]:
        # One pass over the batch: the groups' partials, with rows that got no instance (bad) and
        # rows not aggregated (not live) grouped apart, and per group the rows it got (the counts
        # per instance and the tally come from these).
        code = flags + tally * 4 if tally is not None else flags
        every = df.groupBy(*keys, code.alias("__code")).agg(*every_aggs)
        earlier = [snap for snap in _snapshots(state_dir) if snap[0] < batch_id]
        old_path = max(earlier)[1] if earlier else None
        # the batch and sequence number of each group's last change (for final_contents);
        # a snapshot from before they were kept goes on without them
        order: tuple[str, ...] = (LAST_BATCH, SEQ)
        if old_path is None:
            _, cols = layout(False, order)
            rows = every.select(*cols)
        else:
            old = df.sparkSession.read.parquet(old_path)
            if LAST_BATCH not in old.columns:
                order = ()
            old_cols, cols = layout(True, order)
            rows = every.join(old.select(*old_cols), cond & aggregated, "full_outer").select(*cols)
        this_batch = F.lit(batch_id).cast("long")
        last_batch = (F.when(F.col(ROLE) == 0, this_batch).otherwise(F.col("__o_" + LAST_BATCH))
                      if old_path is not None and order else this_batch)
        rows = rows.select(*counters, *keys, *[column(p) for p, _, _ in partials], F.col(SEQ),
                           *([last_batch.alias(LAST_BATCH)] if order else []),
                           this_batch.alias(BATCH), F.lit(0).cast("long").alias(SUB), change_op,
                           *snapshot_rows)
        files = _batch_files(rows.schema, changelog_path(batch_id),
                             os.path.join(state_dir, f"state-{batch_id:08d}.parquet"),
                             [BATCH, INST, SEQ, SUB, _CHANGE_OP] + [OUT + i for i in items],
                             [BATCH, INST, SEQ, SUB, OP] + items,
                             group_cols + [p for p, _, _ in partials] + list(order)
                             + [OUT + i for i in items])
        received: dict[str, int] = {}
        counted: dict[int, int] = {}
        ops: dict[str, int] = {}
        any_bad = False
        unplaced = 0
        for r in rows.coalesce(1).mapInArrow(files, "inst int, code int, op string, n long").collect():
            if r["op"] is not None:
                ops[r["op"]] = int(r["n"])
                continue
            value, is_bad, is_live = r["code"] >> 2, bool(r["code"] & 2), bool(r["code"] & 1)
            counted[value] = counted.get(value, 0) + int(r["n"])
            if is_live and is_bad:  # rows that got no instance: in rows_in, received by none
                unplaced += int(r["n"])
                any_bad = True
            elif is_live:
                received[str(r["inst"])] = received.get(str(r["inst"]), 0) + int(r["n"])
        bad = write_bad(df.where(bad_rows), batch_id) if any_bad else {}
        for n, stale in earlier:
            if n < batch_id - 1:  # batch N-1's stays: a replay of this batch reads it
                os.remove(stale)
        write_stats(batch_id, {"rows_in": sum(received.values()) + unplaced, "rows_out": ops, "bad": bad,
                               "instances": received})
        return counted if tally is not None else None
    return write


def _batch_files(schema: Any, changelog: str, snapshot: str, changelog_from: list[str],
                 changelog_names: list[str], snapshot_cols: list[str]) -> Callable:
    """The ``mapInArrow`` function of a native aggregation's batch (one task gets all its rows,
    of ``schema``): the changelog (the batch's aggregated groups: ``changelog_from`` columns named
    ``changelog_names``; none when there is no such group) and the snapshot (those groups and the
    ones of the earlier snapshot: ``snapshot_cols``), each written whole or not at all; it yields
    the batch's rows per instance and code (``op`` null) and the changelog's rows per opcode."""
    def write(batches: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql.pandas.types import to_arrow_schema

        from .parquet_files import write_atomically

        arrow = to_arrow_schema(schema, timezone="UTC")
        table = pa.Table.from_batches(list(batches), schema=arrow)
        role, code = table.column(ROLE), table.column("__code")
        batch = table.filter(pc.equal(role, 0))
        counts = batch.group_by([INST, "__code"]).aggregate([("__n", "sum")])
        # (a kept group's code is null: Kleene logic makes its "changed" false, not null)
        changed = pc.and_kleene(pc.equal(role, 0), pc.equal(pc.bit_wise_and(code, 3), 1))
        written = pc.fill_null(pc.or_kleene(changed, pc.equal(role, 1)), False)
        changes = table.filter(pc.fill_null(changed, False)).select(changelog_from).rename_columns(
            changelog_names)
        if changes.num_rows:
            write_atomically(changelog, changes)
        write_atomically(snapshot, table.filter(written).select(snapshot_cols))
        ops = pc.value_counts(changes.column(OP)).to_pylist() if changes.num_rows else []
        yield pa.record_batch(
            [pa.array(counts.column(INST).to_pylist() + [None] * len(ops), pa.int32()),
             pa.array(counts.column("__code").to_pylist() + [None] * len(ops), pa.int32()),
             pa.array([None] * counts.num_rows + [o["values"] for o in ops], pa.string()),
             pa.array(counts.column("__n_sum").to_pylist() + [o["counts"] for o in ops], pa.int64())],
            names=["inst", "code", "op", "n"])
    return write
