"""An element's ports and where their rows go: the sources it reads (in port order), the ports
whose rows of a batch come first, the instance of the element each row goes to (its own and its
module's partitioning) and the processor's input (runtime/processor.py) built from its ports'
frames, with a bucket per row."""
from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ccl.syntax import nodes as n
from ccl.plan.model import READ_AS

from .built_once import once
from .engine.trees import tree
from .partition_fn import instance_columns
from .processor import INST, OP, PORT, RAW, SEQ, SRC, SUB, WHY, port_column
from .types import column, struct


def is_input(element: dict) -> bool:
    """Whether the element is a CREATE INPUT stream or window (read from files)."""
    return element.get("role") == "input" and element.get("query") is None


def ports_of(element: dict) -> list[tuple[str, str]]:
    """(alias, source element name) per port, in port order (docs/plan.md): an input element reads
    itself, a Flex its inputs, a derived element its queries' sources; references and error
    streams have none (references do not run; error streams are written by the batches of the
    elements they are ON, see :func:`runtime.bad_records.error_writer`)."""
    if is_input(element):
        return [(element["name"], element["name"])]
    flex = element.get("flex")
    if flex:
        return list(zip(flex["input_names"], flex["inputs"]))
    if element.get("query") is None:
        return []
    return [(s["alias"], s["element"]) for sel in element["query"]["selects"] for s in sel["sources"]]


def first_ports(plan: dict, element: dict) -> frozenset[int]:
    """The ports of ``element`` whose rows of a batch come before the others: those reading a
    reference, and in a join of a stream with windows, those reading the windows. The rows of two
    inputs in one batch come from different files, so their line numbers say nothing of which
    came first; the data the stream's events look up is taken to be there already (as ESP users
    load it before the events), rather than a stream row at line 2 missing a window row at line 3."""
    kinds = {e["name"]: e["kind"] for e in plan["elements"]}
    first = {port for port, (_, source) in enumerate(ports_of(element)) if kinds.get(source) == "reference"}
    if element.get("query") is not None and not element.get("flex"):
        port = 0
        for sel in element["query"]["selects"]:
            sources = sel["sources"]
            stream = [kinds.get(src["element"]) == "stream" and not src.get("keep") for src in sources]
            if any(stream) and not all(stream):
                first |= {port + i for i, is_stream in enumerate(stream) if not is_stream}
            port += len(sources)
    return frozenset(first)


def _spec_for(partition: Optional[dict], source: str) -> Optional[dict]:
    """The BY spec of ``partition`` that names ``source`` (None: the source is broadcast)."""
    if not partition:
        return None
    return next((s for s in partition["specs"] if s["input"] == source), None)


def _target(partition: dict, fallback: str) -> str:
    """The name whose ``<name>_partitions`` a custom block reads."""
    var = partition.get("partitions_var") or ""
    return var[:-len("_partitions")] if var.endswith("_partitions") else fallback


def _assignment(partition: dict, source: dict, target: str, schema: T.StructType,
                tmp: str) -> tuple[dict[str, Column], Column, Optional[Column]]:
    """``(first, instance, reason)`` of ``partition`` for rows of the element ``source`` (see
    :func:`runtime.partition_fn.instance_columns`); a broadcast source's rows are copied to every
    instance (``first`` explodes them, as ``tmp``)."""
    count = int(partition["count"])
    source_name = source["name"]
    spec = _spec_for(partition, source_name)
    if spec is None:
        return {tmp: F.explode(F.sequence(F.lit(0), F.lit(count - 1)))}, F.col(tmp), None
    by_name = spec.get("as") or source_name  # the name the custom block reads the row under
    # ROUNDROBIN over a keyed source rotates its keys: the planner names them as the columns
    method = "hash" if spec["method"] == "roundrobin" and spec.get("columns") else spec["method"]
    node = n.PartitionSpec(n.Ident(by_name), method,
                           [n.Ident(c) for c in spec.get("columns", [])],
                           tree(spec["block"]) if spec.get("block") else None)
    # an input's rows are numbered by line, consecutively; a derived element's carry the numbers
    # of the rows that caused them (with gaps, or several rows with one number)
    sequence = SEQ if is_input(source) else (SEQ, SUB)
    first, instance, reason, _ = instance_columns(node, by_name, _target(partition, target), count,
                                                  schema, sequence, tmp=tmp, why_not=spec.get("why"))
    return first, F.coalesce(instance, F.lit(0)), reason


@once
def _instance_steps(element: dict, source: dict, schema: T.StructType) -> tuple[list[dict], list[str]]:
    """The ``withColumns`` steps that give rows of ``source`` (a frame of ``schema``) their
    ``__inst`` and mark those that get none in ``__why``, and the helper columns to drop after."""
    own, mod = element.get("partition"), element.get("module_partition")
    steps: list[dict] = []
    reasons: list[Column] = []
    instance: Column = F.lit(0)
    for partition, tmp in ((own, "__a_own"), (mod, "__a_mod")):
        if not partition:
            continue
        theirs = source.get("module_partition") or {}
        if partition is mod and theirs.get("partitions_var") == mod["partitions_var"]:
            # an element of the same module instance: the module instance its producer was in
            per = int((source.get("partition") or {}).get("count") or 1)
            part: Column = F.floor(F.col(SRC) / F.lit(per)).cast("int")
        else:
            first, part, reason = _assignment(partition, source, element["name"], schema, tmp)
            if first:
                steps.append(first)
            if reason is not None:
                reasons.append(reason)
        # module instance m of M, own instance p of P: m * P + p
        instance = part if partition is own else part * F.lit(int(own["count"]) if own else 1) + instance
    final = {INST: instance}
    if reasons:
        final[WHY] = F.coalesce(F.col(WHY), *reasons)
    return steps + [final], [tmp for step in steps for tmp in step]


def with_instance(df: DataFrame, element: dict, source: dict) -> DataFrame:
    """``df`` (rows of ``source``) with ``__inst``, the instance of ``element`` each row goes to.

    Own partitioning gives ``p`` in ``0..P-1``; an element of a partitioned module instance also
    gets the module instance ``m`` in ``0..M-1`` (from the module's BY for an outer input, from the
    producing instance for an element of the same module instance) and ``__inst = m * P + p``."""
    steps, helpers = _instance_steps(element, source, df.schema)
    for step in steps:
        df = df.withColumns(step)
    return df.drop(*helpers) if helpers else df


def processor_input(plan: dict, element: dict, frames: Sequence[Optional[DataFrame]], buckets: int,
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
    by_name = {e["name"]: e for e in plan["elements"]}
    ports = ports_of(element)
    columns = [by_name[src]["columns"] for _, src in ports]
    left_out = sorted(constant_meta(plan, element, frames)) if narrow else []
    out = None
    for i, ((_, src), df) in enumerate(zip(ports, frames)):
        if df is None:
            continue
        df = with_instance(df, element, by_name[src])
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


def constant_meta(plan: dict, element: dict, frames: Sequence[Optional[DataFrame]]) -> set[str]:
    """The meta columns of ``element``'s processor input that hold their ``META_DEFAULTS`` value
    on every row, given its ports' ``frames``: the port of a one-port element; a derived element's
    line (only input elements read lines) and reason (none unless a partition function can fail
    here); the opcode when every source is a stream (streams emit inserts only); the producing
    instance when every source has one instance; the sub-number when every source is an input
    stream read natively (one row per line)."""
    if is_input(element):
        return set()
    by_name = {e["name"]: e for e in plan["elements"]}
    sources = [by_name[src] for _, src in ports_of(element)]
    fails = any(WHY in step for src, df in zip(sources, frames) if df is not None
                for step in _instance_steps(element, src, df.schema)[0])
    rules = {PORT: len(sources) == 1, RAW: True, WHY: not fails,
             OP: all(READ_AS.get(s["kind"], s["kind"]) == "stream" for s in sources),
             SRC: all(s["physical"]["instances"] == 1 for s in sources),
             SUB: all(s["physical"]["native"] == "input" for s in sources)}
    return {name for name, holds in rules.items() if holds}
