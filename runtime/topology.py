"""An element's ports and where their rows go: the sources it reads (in port order), the ports
whose rows of a batch come first, the instance of the element each row goes to (its own and its
module's partitioning) and the processor's input (runtime/processor.py) built from its ports'
frames, with a bucket per row."""
from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.plan.model import Element, Partition, Physical, Plan
from ccl.syntax import nodes as n

from .built_once import once
from .engine.trees import tree
from .partition_fn import instance_columns
from .processor import INST, OP, PORT, RAW, SEQ, SRC, SUB, WHY, port_column
from .types import column, columns_of, struct


def is_input(element: Element) -> bool:
    """Whether the element is a CREATE INPUT stream or window (read from files)."""
    return element.is_input


def ports_of(element: Element) -> list[tuple[str, str]]:
    """(alias, source element name) per port, in port order (docs/plan.md): an input element reads
    itself, a Flex its inputs, a derived element its queries' sources; references and error
    streams have none (references do not run; error streams are written by the batches of the
    elements they are ON, see :func:`runtime.bad_records.error_writer`)."""
    return element.ports()


def first_ports(plan: Plan, element: Element) -> frozenset[int]:
    """The ports of ``element`` whose rows of a batch come before the others: those reading a
    reference, and in a join of a stream with windows, those reading the windows. The rows of two
    inputs in one batch come from different files, so their line numbers say nothing of which
    came first; the data the stream's events look up is taken to be there already (as ESP users
    load it before the events), rather than a stream row at line 2 missing a window row at line 3."""
    kinds = {e.name: e.kind for e in plan.elements}
    first = {port for port, (_, source) in enumerate(ports_of(element)) if kinds.get(source) == "reference"}
    if element.query is not None and element.flex is None:
        port = 0
        for sel in element.query.selects:
            stream = [kinds.get(src.element) == "stream" and src.keep is None for src in sel.sources]
            if any(stream) and not all(stream):
                first |= {port + i for i, is_stream in enumerate(stream) if not is_stream}
            port += len(sel.sources)
    return frozenset(first)


def _target(partition: Partition, fallback: str) -> str:
    """The name whose ``<name>_partitions`` a custom block reads."""
    var = partition.partitions_var or ""
    return var[:-len("_partitions")] if var.endswith("_partitions") else fallback


def _assignment(partition: Partition, source: Element, target: str, schema: T.StructType,
                tmp: str) -> tuple[dict[str, Column], Column, Optional[Column]]:
    """``(first, instance, reason)`` of ``partition`` for rows of the element ``source`` (see
    :func:`runtime.partition_fn.instance_columns`); a broadcast source's rows are copied to every
    instance (``first`` explodes them, as ``tmp``)."""
    count = int(partition.count)
    spec = partition.spec_for(source.name)
    if spec is None:
        return {tmp: F.explode(F.sequence(F.lit(0), F.lit(count - 1)))}, F.col(tmp), None
    by_name = spec.alias or source.name  # the name the custom block reads the row under
    # ROUNDROBIN over a keyed source rotates its keys: the planner names them as the columns
    method = "hash" if spec.method == "roundrobin" and spec.columns else spec.method
    node = n.PartitionSpec(n.Ident(by_name), method, [n.Ident(c) for c in spec.columns],
                           tree(spec.block) if spec.block else None)
    # an input's rows are numbered by line, consecutively; a derived element's carry the numbers
    # of the rows that caused them (with gaps, or several rows with one number)
    sequence = SEQ if is_input(source) else (SEQ, SUB)
    first, instance, reason, _ = instance_columns(node, by_name, _target(partition, target), count,
                                                  schema, sequence, tmp=tmp, why_not=spec.why)
    return first, F.coalesce(instance, F.lit(0)), reason


@once
def _instance_steps(element: Element, source: Element, schema: T.StructType
                    ) -> tuple[list[dict], list[str]]:
    """The ``withColumns`` steps that give rows of ``source`` (a frame of ``schema``) their
    ``__inst`` and mark those that get none in ``__why``, and the helper columns to drop after."""
    own, mod = element.partition, element.module_partition
    steps: list[dict] = []
    reasons: list[Column] = []
    instance: Column = F.lit(0)
    for partition, tmp in ((own, "__a_own"), (mod, "__a_mod")):
        if partition is None:
            continue
        theirs = source.module_partition
        if (partition is mod and theirs is not None
                and theirs.partitions_var == mod.partitions_var):
            # an element of the same module instance: the module instance its producer was in
            per = int(source.partition.count) if source.partition is not None else 1
            part: Column = F.floor(F.col(SRC) / F.lit(per)).cast("int")
        else:
            first, part, reason = _assignment(partition, source, element.name, schema, tmp)
            if first:
                steps.append(first)
            if reason is not None:
                reasons.append(reason)
        # module instance m of M, own instance p of P: m * P + p
        instance = (part if partition is own
                    else part * F.lit(int(own.count) if own is not None else 1) + instance)
    final = {INST: instance}
    if reasons:
        final[WHY] = F.coalesce(F.col(WHY), *reasons)
    return steps + [final], [tmp for step in steps for tmp in step]


def with_instance(df: DataFrame, element: Element, source: Element) -> DataFrame:
    """``df`` (rows of ``source``) with ``__inst``, the instance of ``element`` each row goes to.

    Own partitioning gives ``p`` in ``0..P-1``; an element of a partitioned module instance also
    gets the module instance ``m`` in ``0..M-1`` (from the module's BY for an outer input, from the
    producing instance for an element of the same module instance) and ``__inst = m * P + p``."""
    steps, helpers = _instance_steps(element, source, df.schema)
    for step in steps:
        df = df.withColumns(step)
    return df.drop(*helpers) if helpers else df


def processor_input(plan: Plan, element: Element, frames: Sequence[Optional[DataFrame]], buckets: int,
                    by_group: Sequence[str] = (), narrow: bool = False) -> DataFrame:
    """The union of all ports' rows in the processor's input layout, with ``__bucket``: the
    instance modulo ``buckets``, or with ``by_group`` (columns of the one source, see
    :attr:`runtime.run_setup.RunLayout.by_group`) a hash of the instance and those columns.
    ``narrow`` leaves out the meta columns that hold their ``META_DEFAULTS`` value on every row
    (:func:`constant_meta`; for the applyInArrow path, whose readers put them back: every column
    of every row crosses a shuffle and the Arrow link to Python, 0.6-0.8 s per million rows for
    six of them).

    Each frame has ``__seq``, ``__sub``, ``__src``, ``__op``, ``__why``, ``__raw`` and the source
    element's columns; a port whose frame is None has no rows (not all of them)."""
    ports = ports_of(element)
    sources = [plan.element(src) for _, src in ports]
    columns = [columns_of(src) for src in sources]
    left_out = sorted(constant_meta(plan, element, frames)) if narrow else []
    out = None
    for i, (source, df) in enumerate(zip(sources, frames)):
        if df is None:
            continue
        df = with_instance(df, element, source)
        df = df.select(*_port_columns(columns, i, left_out))
        out = df if out is None else out.unionByName(df)
    assert out is not None
    return out.withColumn("__bucket", _bucket_column(buckets, tuple(by_group)))


@once
def _port_columns(columns: list, port: int, left_out: list) -> list[Column]:
    """The processor input columns of the rows of ``port`` (of ports whose sources have
    ``columns``), without the meta columns ``left_out``."""
    packed = [F.lit(port).alias(PORT), F.col(SEQ), F.col(SUB), F.col(SRC), F.col(OP), F.col(INST),
              F.col(WHY), F.col(RAW)]
    packed = [c for c, name in zip(packed, (PORT, SEQ, SUB, SRC, OP, INST, WHY, RAW))
              if name not in left_out]
    for j, cols in enumerate(columns):
        value = (F.struct(*[column(c) for c, _ in cols]) if j == port
                 else F.lit(None).cast(struct(cols)))
        packed.append(value.alias(port_column(j)))
    return packed


@once
def _bucket_column(buckets: int, by_group: tuple[str, ...]) -> Column:
    """``__bucket``: the instance, or with ``by_group`` a hash of it and those columns of the
    first port, modulo ``buckets``."""
    spread = F.hash(F.col(INST), *[F.col(port_column(0))[c] for c in by_group]) if by_group else F.col(INST)
    return F.pmod(spread, F.lit(buckets))


def constant_meta(plan: Plan, element: Element, frames: Sequence[Optional[DataFrame]]) -> set[str]:
    """The meta columns of ``element``'s processor input that hold their ``META_DEFAULTS`` value
    on every row, given its ports' ``frames``: the port of a one-port element; a derived element's
    line (only input elements read lines) and reason (none unless a partition function can fail
    here); the opcode when every source is a stream (streams emit inserts only); the producing
    instance when every source has one instance; the sub-number when every source is an input
    stream read natively (one row per line)."""
    if is_input(element):
        return set()
    sources = [plan.element(src) for _, src in ports_of(element)]
    fails = any(WHY in step for src, df in zip(sources, frames) if df is not None
                for step in _instance_steps(element, src, df.schema)[0])
    rules = {PORT: len(sources) == 1, RAW: True, WHY: not fails,
             OP: all(s.read_as == "stream" for s in sources),
             SRC: all(_physical(s).instances == 1 for s in sources),
             SUB: all(_physical(s).native == "input" for s in sources)}
    return {name for name, holds in rules.items() if holds}


def _physical(element: Element) -> Physical:
    """The plan's physical decisions of ``element`` (every element the runtime runs has them)."""
    assert element.physical is not None, f"{element.name} has no physical decisions"
    return element.physical
