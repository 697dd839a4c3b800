"""What an element writes per batch under the run directory (runtime/run_setup.py): its changelog
(one Parquet file per micro-batch, named by the batch id and written with a rename, so a batch
replayed after a crash rewrites the same file with the same rows), its counters (rows in and out,
bad records by reason, rows per instance) and its bad records; and the batches of the elements
fused into it (the plan's ``fused_consumers``), run on the rows it just produced. Also the
functions that run a batch of an element run by runtime/arrow_state.py."""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.plan.model import Element, Physical, Plan

from .appended import append_batch, appends
from .arrow_state import bucket_group, bucket_rows, prepare_rows, prune
from .bad_records import error_writer, why_info, write_bad, write_bad_infos
from .built_once import once
from .frames import changelog_frame, changelog_schema
from .json_plan import engine_plan_text
from .native_agg import native_writer
from .native_stages import native_frame
from .parquet_files import write_atomically
from .processor import BATCH, INFO, INST, KIND, OP, SEQ, SUB
from .run_dir import RunDirs
from .run_setup import RunLayout, atomic_json
from .topology import first_ports, processor_input
from .types import column, columns_of


def single_parquets(parts: list[tuple[DataFrame, str, bool]]) -> list[dict]:
    """Write each ``(frame, target, always)`` of ``parts`` as one Parquet file at ``target``
    (complete or absent, never partial), all in one Spark job: one task per frame writes its
    Arrow batches with pyarrow under a hidden name and renames it. A frame with no rows gets a
    file (empty, written here) only when ``always``. Returns per part its rows counted by
    ``__op`` (``{None: rows}`` for a frame without that column). (Spark's own writer, with its
    commit protocol and temporary directories, took about twice as long for a file of 50,000
    rows, and a job per file costs 0.1-0.2 s.)"""
    structs = tuple(T.StructType(df.schema.fields) for df, _, _ in parts)
    frames = [df.coalesce(1).select(*cols) for (df, _, _), cols in zip(parts, _struct_columns(structs))]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    targets = [target for _, target, _ in parts]
    counts: list[dict] = [{} for _ in parts]
    for r in union.mapInArrow(_parquet_writer(targets, structs),
                              "part int, op string, n long").collect():
        counts[r["part"]][r["op"]] = r["n"]
    for (_, target, always), schema, found in zip(parts, structs, counts):
        if always and not found:  # as Spark's writer would leave for a frame without rows
            from pyspark.sql.pandas.types import to_arrow_schema
            write_atomically(target, to_arrow_schema(schema, timezone="UTC").empty_table())
    return [{op: n for op, n in c.items() if n} for c in counts]


def _single_parquet(df: DataFrame, target: str) -> None:
    """Write ``df`` as one Parquet file at ``target`` (see :func:`single_parquets`)."""
    single_parquets([(df, target, True)])


@once
def _struct_columns(structs: tuple[T.StructType, ...]) -> list[list[Column]]:
    """Per frame of :func:`single_parquets`, its columns: its rows as struct ``p<i>`` beside null
    structs for the other frames."""
    return [[F.struct(*[column(c) for c in mine.names]).alias(f"p{k}") if k == i
             else F.lit(None).cast(t).alias(f"p{k}") for k, t in enumerate(structs)]
            for i, mine in enumerate(structs)]


def _parquet_writer(targets: list[str], schemas: list[T.StructType]) -> Callable:
    """The ``mapInArrow`` function of :func:`single_parquets` (it runs on an executor, once per
    frame: the rows of a frame are in one partition)."""
    def write(batches):
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql.pandas.types import to_arrow_schema

        from .parquet_files import AtomicParquet

        arrows = [to_arrow_schema(s, timezone="UTC") for s in schemas]
        files: dict[int, AtomicParquet] = {}
        counts: list[dict] = [{} for _ in targets]
        try:
            for batch in batches:
                for i in range(len(targets)):
                    col = batch.column(i)
                    rows = pc.filter(col, pc.is_valid(col))
                    if len(rows) == 0:
                        continue
                    part = pa.RecordBatch.from_struct_array(rows).cast(arrows[i])
                    if i not in files:
                        files[i] = AtomicParquet(targets[i], arrows[i])
                    files[i].write(part)
                    ops = (pc.value_counts(part.column("__op")).to_pylist()
                           if "__op" in arrows[i].names else [{"values": None, "counts": len(part)}])
                    for vc in ops:
                        counts[i][vc["values"]] = counts[i].get(vc["values"], 0) + vc["counts"]
        finally:
            for out in files.values():
                out.close()
        for out in files.values():
            out.commit()
        found = [(i, op, n) for i, c in enumerate(counts) for op, n in c.items()]
        yield pa.record_batch([pa.array([f[0] for f in found], pa.int32()),
                               pa.array([f[1] for f in found], pa.string()),
                               pa.array([f[2] for f in found], pa.int64())],
                              names=["part", "op", "n"])
    return write


def _observed(observed: Observation, df: DataFrame, metrics: list[Column]) -> dict:
    """The metrics ``observed`` collected over ``df``, or ``metrics`` counted by another pass when
    Spark collected none: a batch without rows (a file of a header only) is optimised into an
    empty relation that drops the observation, and ``Observation.get`` fails on it."""
    try:
        return observed.get
    except Py4JJavaError:  # an assertion in toPyRow: no metrics were collected
        return df.select(*metrics).first().asDict()


def batch_writer(element: Element, dirs: RunDirs, plan: Plan,
                 layout: RunLayout) -> Callable[[DataFrame, int], None]:
    """The foreachBatch function of an element's query (its input is the processor's output, or
    for a native aggregation the source's changelog with ``__inst``). After its own files, a batch
    runs the writers of the element's fused consumers (``layout.fused``) on its output rows. An
    unrecorded element (``layout.unrecorded``) writes its counters and bad records but no
    changelog."""
    name = element.name
    cols = [c.name for c in element.columns]
    native = _physical(element).native
    consumers = [(plan.element(c), batch_writer(plan.element(c), dirs, plan, layout))
                 for c in layout.fused.get(name, [])]
    arrow_rows = {c.name: arrow_transform(plan, c, dirs, layout.buckets) for c, _ in consumers
                  if c.name in layout.arrow_state}

    def consumer_frame(consumer: Element, rows: DataFrame, batch_id: int) -> DataFrame:
        """What the writer of a fused consumer gets from this batch's output ``rows``."""
        if consumer.name in arrow_rows:
            proc_in = processor_input(plan, consumer, [rows], layout.buckets,
                                      layout.by_group.get(consumer.name, ()), narrow=True)
            return arrow_rows[consumer.name](proc_in, batch_id)
        return native_frame(consumer, element, rows)
    errors = error_writer(element, plan, dirs)
    if native == "aggregation":
        return aggregation_writer(element, dirs, plan)

    if len(consumers) == 1 and hands_over_unread(element, consumers[0][0], layout):
        consumer, consumer_write = consumers[0]
        # the input's rows by kind (an input stream emits inserts only, and has one instance)
        kinds = ("row", "bad", "skip")
        code = F.when(F.col(KIND) == kinds[0], 0).when(F.col(KIND) == kinds[1], 1).otherwise(2)
        tallies = [F.sum(F.when(code == k, 1).otherwise(0)).alias(kind) for k, kind in enumerate(kinds)]

        def write_through(df: DataFrame, batch_id: int) -> None:
            if consumer.name in arrow_rows:
                observed = Observation()
                rows = changelog_frame(df.observe(observed, *tallies).where(F.col(KIND) == "row"), cols)
                consumer_write(consumer_frame(consumer, rows, batch_id), batch_id)
                by_kind = {kind: int(n) for kind, n in _observed(observed, df, tallies).items() if n}
            else:
                rows = changelog_frame(df, cols, keep=(KIND,))
                counted = consumer_write(native_frame(consumer, element, rows),
                                         batch_id, tally=code)
                by_kind = {kinds[k]: n for k, n in counted.items()}
            bad = (write_bad(df.where(F.col(KIND) == "bad"), name,
                             dirs.batch_file("bad", name, batch_id, "jsonl"), errors, batch_id)
                   if by_kind.get("bad") else {})
            received = sum(n for k, n in by_kind.items() if k != "bad")  # (bad rows reach no instance)
            atomic_json(dirs.batch_file("stats", name, batch_id, "json"),
                        {"rows_in": sum(by_kind.values()),
                         "rows_out": {"i": by_kind["row"]} if by_kind.get("row") else {},
                         "bad": bad, "instances": {"0": received} if received else {}})
        return write_through

    write_element = element_writer(element, dirs, plan, layout)

    def write(df: DataFrame, batch_id: int) -> None:
        df, produced = write_element(df, batch_id)
        try:
            if consumers and produced:
                rows = changelog_frame(df.where(F.col(KIND) == "row"), cols)
                for consumer, consumer_write in consumers:
                    consumer_write(consumer_frame(consumer, rows, batch_id), batch_id)
        finally:
            df.unpersist()
        if name in layout.arrow_state:
            prune(dirs.of("state", name), batch_id)
    return write


def hands_over_unread(element: Element, reader: Element, layout: RunLayout) -> bool:
    """Whether ``element``, with ``reader`` its one reader, hands its batch to it unread: an input
    stream read natively whose changelog nothing reads, and a reader that is a native aggregation
    or runs in applyInArrow. The reader's pass counts the input's rows too (the aggregation's own
    grouping, or Spark's observed metrics), so the batch is read once, not cached and read again
    (a second read only for bad records, when there are some)."""
    return (_physical(element).native == "input" and element.name in layout.unrecorded
            and (_physical(reader).native == "aggregation" or reader.name in layout.arrow_state))


def _physical(element: Element) -> Physical:
    """The plan's physical decisions of ``element`` (every element the runtime runs has them)."""
    assert element.physical is not None, f"{element.name} has no physical decisions"
    return element.physical


def aggregation_writer(element: Element, dirs: RunDirs, plan: Plan) -> Callable[..., Optional[dict[int, int]]]:
    """The batch function of a native aggregation (:func:`runtime.native_agg.native_writer`), writing
    into the run directory ``dirs``."""
    name = element.name
    errors = error_writer(element, plan, dirs)
    spec = _physical(element).aggregation
    assert spec is not None, f"{name} is not a native aggregation"
    return native_writer(
        element, spec, dirs.of("native", name),
        write_stats=lambda batch_id, stats: atomic_json(
            dirs.batch_file("stats", name, batch_id, "json"), stats),
        write_bad=lambda rows, batch_id: write_bad(
            rows.select(why_info(rows).alias(INFO)), name,
            dirs.batch_file("bad", name, batch_id, "jsonl"), errors, batch_id),
        changelog_path=lambda batch_id: dirs.batch_file("changelog", name, batch_id, "parquet"))


def element_writer(element: Element, dirs: RunDirs, plan: Plan, layout: RunLayout
                   ) -> Callable[[DataFrame, int], tuple[DataFrame, bool]]:
    """What writes one batch of ``element``'s processor output rows (runtime/processor.py): its
    changelog (unless the element is unrecorded), its bad records (also into the error streams
    on it) and its counters. Returns the batch's rows persisted (the caller unpersists them) and
    whether it produced any changelog row."""
    name = element.name
    cols = [c.name for c in element.columns]
    native = _physical(element).native
    errors = error_writer(element, plan, dirs)
    appended = appends(element)

    def write(df: DataFrame, batch_id: int) -> tuple[DataFrame, bool]:
        df = df.persist()
        # (as Arrow: a row per instance and kind, 130,000 of them with 65,535 instances, which
        # collect() turned into Row objects in about a second)
        counts = df.groupBy(KIND, INST, OP).agg(F.count(F.lit(1)).alias("n"), F.sum(SEQ).alias("s"),
                                                F.sum(SUB).alias("u")).toArrow().to_pylist()
        rows_out, rows_in, instances = _counters(counts, native)
        bad = (write_bad(df.where(F.col(KIND) == "bad"), name,
                         dirs.batch_file("bad", name, batch_id, "jsonl"), errors, batch_id)
               if any(r[KIND] == "bad" for r in counts) else {})
        # the counters before the changelog: a derived query reads the changelog as soon as it
        # is there, even when a stop cuts this batch short (it runs again on resume)
        atomic_json(dirs.batch_file("stats", name, batch_id, "json"),
                    {"rows_in": rows_in, "rows_out": rows_out, "bad": bad, "instances": instances})
        if rows_out and name not in layout.unrecorded:
            data = df.where(F.col(KIND) == "row").select(F.lit(batch_id).alias(BATCH), INST, SEQ, SUB, OP,
                                                         *[column(c) for c in cols])
            _single_parquet(data, dirs.batch_file("changelog", name, batch_id, "parquet"))
            if appended:
                append_batch(dirs, element, batch_id)
        return df, bool(rows_out)
    return write


def table_writer(element: Element, dirs: RunDirs, plan: Plan, layout: RunLayout,
                 later: Optional[Callable[[Callable[[], None]], None]] = None
                 ) -> Callable[[Any, int], Optional[Any]]:
    """:func:`element_writer` for a batch's processor output rows collected on the driver (an
    Arrow table of :func:`runtime.processor.output_schema`): the same files, written here with
    pyarrow instead of by Spark jobs. Returns the changelog rows (an Arrow table of
    :func:`runtime.frames.changelog_schema`), None when there are none. ``later``, when given,
    is handed the function that writes the files (changelog, bad records, counters) instead of
    its being called at once: the caller runs it, and waits for it before anything reads the
    files (runtime/project_query.py writes them while the next stage runs)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_schema

    name = element.name
    cols = [c.name for c in element.columns]
    native = _physical(element).native
    errors = error_writer(element, plan, dirs)
    schema = to_arrow_schema(changelog_schema(columns_of(element)), timezone="UTC")
    appended = appends(element)

    def write(table: Any, batch_id: int) -> Optional[Any]:
        kept = table.filter(pc.equal(table.column(KIND), "row"))
        rows = None
        if kept.num_rows:
            batch = pa.array([batch_id] * kept.num_rows, pa.int64())
            rows = pa.Table.from_arrays([batch] + [kept.column(c) for c in (INST, SEQ, SUB, OP, *cols)],
                                        schema=schema)
        if later is None:
            write_files(table, rows, batch_id)
        else:
            later(lambda: write_files(table, rows, batch_id))
        return rows

    def write_files(table: Any, rows: Optional[Any], batch_id: int) -> None:
        counts = (table.group_by([KIND, INST, OP], use_threads=False)
                  .aggregate([([], "count_all"), (SEQ, "sum"), (SUB, "sum")])
                  .rename_columns([KIND, INST, OP, "n", "s", "u"]).to_pylist())
        rows_out, rows_in, instances = _counters(counts, native)
        if rows is not None and name not in layout.unrecorded:
            write_atomically(dirs.batch_file("changelog", name, batch_id, "parquet"), rows)
            if appended:
                append_batch(dirs, element, batch_id, rows)
        infos = (table.filter(pc.equal(table.column(KIND), "bad")).column(INFO).to_pylist()
                 if any(r[KIND] == "bad" for r in counts) else [])
        bad = write_bad_infos(infos, name, dirs.batch_file("bad", name, batch_id, "jsonl"), errors,
                              batch_id)
        atomic_json(dirs.batch_file("stats", name, batch_id, "json"),
                    {"rows_in": rows_in, "rows_out": rows_out, "bad": bad, "instances": instances})
    return write


def _counters(counts: list[dict], native: Optional[str]) -> tuple[dict[str, int], int, dict[str, int]]:
    """An element's counters of a batch from its output rows counted by kind, instance and
    opcode (``n`` rows, ``s`` and ``u`` the sums of their sequence and sub-numbers: a ``stat``
    row carries the rows an instance received in ``__seq`` and those that came to it bad in
    ``__sub``): rows out by opcode, rows in, rows received per instance. Rows in also counts
    those that reached no instance (bad on arrival: no partition instance, or not parsed)."""
    rows_out: dict[str, int] = {}
    for r in counts:
        if r[KIND] == "row":
            rows_out[r[OP]] = rows_out.get(r[OP], 0) + int(r["n"])
    instances: dict[str, int] = {}
    if native in ("input", "stream"):  # one output row per input row, no stat rows
        for r in counts:
            if r[KIND] != "bad":
                instances[str(r[INST])] = instances.get(str(r[INST]), 0) + int(r["n"])
        return rows_out, sum(int(r["n"]) for r in counts), instances
    stats = [r for r in counts if r[KIND] == "stat"]
    return (rows_out, sum(int(r["s"]) + int(r["u"]) for r in stats),
            {str(r[INST]): int(r["s"]) for r in stats if r["s"]})


def arrow_transform(plan: Plan, element: Element, dirs: RunDirs, buckets: int,
                    now: Optional[Callable[[], int]] = None,
                    timed: bool = False) -> Callable[[DataFrame, int], DataFrame]:
    """For an element run by runtime/arrow_state.py: the function from one batch of its processor
    input (with ``__bucket``, of ``buckets``) to the batch's processor output rows, at ``now()``
    (epoch ms; default the time the batch runs); ``timed``: see
    :func:`runtime.arrow_state.bucket_runner`."""
    plan_text = engine_plan_text(plan)
    first = first_ports(plan, element)
    state_dir = dirs.of("state", element.name)
    prepare_rows(state_dir, element, buckets)
    group = bucket_group(buckets)

    def rows(proc_in: DataFrame, batch_id: int) -> DataFrame:
        at = now() if now is not None else int(time.time() * 1000)
        return bucket_rows(proc_in, group, plan_text, element, first, state_dir, batch_id, at, timed)
    return rows

