"""`ccl verify`: run a project as written and without its PARTITION BY clauses on the same sample
inputs, and compare every output element (docs/runtime.md, "Verifying partitioning").

Both runs go through the per-instance engine (runtime/engine/) in this process, without Spark,
when it can run every element: the input files are parsed as a run parses them, each element's
rows are routed to its instances as the Spark runtime routes them (HASH by Spark's hash,
ROUNDROBIN by the row's number, a custom function by the SPLASH interpreter; unpartitioned inputs
broadcast), and every instance runs the element's engine over the whole input as one micro-batch
(an ``--until-idle`` run of small files is one batch too). What the engine path does not run
(partitioned modules, references, error streams, inputs other than CSV) goes to Spark: both
plans run as ``ccl run --until-idle`` does, and their ``NAME.csv`` outputs are compared.

An output element's result is its final contents as ``NAME.csv`` holds them: a window's rows,
compared by key (where instances of a partitioned window hold one key, the later change wins); a stream's rows, compared as a multiset; a delta
stream's changes (opcode and row), as a multiset.
"""
from __future__ import annotations

import csv
import datetime as dt
import os
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Mapping, Optional, Sequence

from ccl.plan.model import Element, Plan

ENGINE, SPARK = "engine", "spark"


class EngineUnsupported(Exception):
    """The per-instance engine path cannot run this plan (the message says which element, why)."""


@dataclass
class ElementResult:
    """An output element's final contents: ``rows`` as column -> value, and the key columns that
    compare a window (empty: a stream, compared as a multiset). ``ordered``: a stream whose order is
    defined (the element is not partitioned itself: one instance emits its rows in sequence
    order), compared in order too."""

    name: str
    kind: str
    columns: list[str]
    key: list[str]
    rows: list[dict]
    ordered: bool = False


@dataclass
class Difference:
    """One key (or, for a stream, one row) whose rows differ: ``partitioned`` vs ``unpartitioned``."""

    key: tuple
    partitioned: list[dict]
    unpartitioned: list[dict]


@dataclass
class Comparison:
    """The verdict on one output element and up to ``limit`` of its differences."""

    name: str
    kind: str
    key: list[str]
    columns: list[str]
    rows: tuple[int, int]          # rows in the partitioned and unpartitioned results
    differences: list[Difference] = field(default_factory=list)
    differing: int = 0             # keys (windows) or rows (streams) that differ
    out_of_order: Optional[int] = None  # an ordered stream's same rows: where the order differs
    # why the result depends on an order of rows the runtime does not fix (the comparison then
    # says nothing): the elements where rows of one sequence number met, and from which sources
    unfixed_order: Optional[str] = None

    @property
    def equivalent(self) -> bool:
        return self.differing == 0 and self.unfixed_order is None


@dataclass
class VerifyResult:
    """What :func:`verify` found: the comparisons, which path ran both plans and why, timings."""

    runner: str
    why: str
    comparisons: list[Comparison]
    seconds: tuple[float, float]   # partitioned run, unpartitioned run

    @property
    def equivalent(self) -> bool:
        return all(c.equivalent for c in self.comparisons)


# --- the engine path ------------------------------------------------------------------------------

def engine_refusal(plan: Plan) -> Optional[str]:
    """Why the engine path cannot run ``plan`` (None: it can)."""
    for e in plan.elements:
        if e.module_partition is not None:
            return f"{e.name} is in a partitioned module instance"
        if e.kind in ("reference", "error stream"):
            return f"{e.name} is a{'n' if e.kind[0] == 'e' else ''} {e.kind}"
        if e.is_input:
            continue
        if e.query is None and e.flex is None:
            return f"{e.name} ({e.kind}) has no query the engine runs"
        for spec in e.partition.specs if e.partition is not None else ():
            if spec.method not in ("hash", "roundrobin", "custom"):
                return f"{e.name}: partition method {spec.method}"
    return None


def arrival_numbers(plan: Plan, inputs: Mapping[str, str], base_dir: str
                    ) -> dict[str, dict[str, int]]:
    """Per input element of ``plan``, the number of each file it reads, as a run's project query
    numbers them (runtime/inputs/listing.py :class:`~runtime.inputs.listing.Arrivals`, on a
    scratch manifest): the files of all inputs in one list in the order they arrived (by
    modification time, in name order within an input, then the input's place in the project and
    the name), so a row's ``file_no * 2**32 + line_no`` orders the rows of all inputs as a run of
    one batch does. Both runs of :func:`verify` take the same numbers."""
    from .inputs.listing import Arrivals, list_new_files
    from .run_setup import RunOptions, element_files

    options = RunOptions(inputs=dict(inputs), base_dir=base_dir)
    batch = []
    for element in plan.elements:
        if element.is_input:
            spec, _ = element_files(element, plan, options)
            if spec is not None:
                batch.append((element.name, spec.dir, list_new_files(spec, ())))
    scratch = tempfile.mkdtemp(prefix="ccl-verify-arrivals-")
    try:
        return Arrivals(scratch).numbers(batch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _input_rows(element: Element, plan: Plan, inputs: Mapping[str, str], base_dir: str,
                numbers: Optional[Mapping[str, int]] = None
                ) -> tuple[list[tuple[int, str, dict]], int]:
    """An input element's rows ``(seq, op, values)`` from its bound files, in file then line
    order (``numbers``: each file's number, :func:`arrival_numbers`; else its place among the
    element's files), and how many records were bad (not parsed)."""
    from .inputs.csv_text import read_file
    from .inputs.formats import CsvFormat
    from .inputs.listing import list_new_files
    from .run_setup import RunOptions, element_files

    spec, props = element_files(element, plan, RunOptions(inputs=dict(inputs), base_dir=base_dir))
    if spec is None:
        return [], 0
    fmt = CsvFormat.from_options(props, element.name)
    if fmt.whole_files:
        raise EngineUnsupported(f"{element.name} reads XML or JSON files")
    rows: list[tuple[int, str, dict]] = []
    bad = 0
    columns = [(c.name, c.type) for c in element.columns]
    names = [c.name for c in element.columns]
    files = list_new_files(spec, ())
    numbered = sorted((numbers[name] if numbers is not None else i, name)
                      for i, name in enumerate(files))
    for file_no, name in numbered:
        for rec in read_file(os.path.join(spec.dir, name), columns, fmt, file_no):
            if rec[2] is not None:
                bad += 1
                continue
            rows.append((rec[0], rec[1], dict(zip(names, rec[4:]))))
    return rows, bad


_SPLASH_KINDS = {"integer": "integer", "long": "long", "float": "float", "string": "string",
                 "boolean": "boolean"}


class _Router:
    """The instance (or instances) of an element each row of one of its sources goes to."""

    def __init__(self, element: Element, source: Element) -> None:
        partition = element.partition
        self.count = partition.count if partition is not None else 1
        self.spec = partition.spec_for(source.name) if partition is not None else None
        self.broadcast = partition is not None and self.spec is None
        self.source_is_input = source.is_input
        self.fn = None
        if self.spec is None:
            return
        types = {c.name: c.type for c in source.columns}
        self.method = self.spec.method
        self.columns = list(self.spec.columns)
        if self.method == "roundrobin" and self.columns:
            self.method = "hash"  # ROUNDROBIN over a keyed source rotates its keys (the planner's)
        self.types = [types[c] for c in self.columns]
        if self.method == "custom":
            from ccl.splash.interpreter import PartitionFunction
            from ccl.splash.types import scalar

            assert partition is not None and self.spec.block is not None
            var = partition.partitions_var or ""
            target = var[:-len("_partitions")] if var.endswith("_partitions") else element.name
            kinds = {c: scalar(_SPLASH_KINDS[t]) for c, t in types.items() if t in _SPLASH_KINDS}
            self.fn = PartitionFunction(self.spec.block, self.spec.alias or source.name,
                                        target, self.count, column_types=kinds)

    def instances(self, seq: int, src: int, sub: int, values: dict) -> tuple[Sequence[int], Optional[str]]:
        """The instances a row goes to, or none and the reason it is a bad record."""
        from .spark_hash import spark_pmod_hash

        if self.spec is None:
            return (range(self.count) if self.broadcast else (0,)), None
        if self.method == "hash":
            return (spark_pmod_hash([values.get(c) for c in self.columns], self.types, self.count),), None
        if self.method == "roundrobin":
            if self.source_is_input:  # consecutive numbers: a rotation
                return (seq % self.count,), None
            return (spark_pmod_hash([seq, sub], ["long", "integer"], self.count),), None
        instance, reason = self.fn.assign(values)  # type: ignore[union-attr]
        return ((instance,), None) if instance is not None else ((), reason)


def _order(plan: Plan) -> list[Element]:
    """The elements with every element after the ones it reads."""
    by_name = {e.name: e for e in plan.elements}
    done: dict[str, Element] = {}

    def visit(e: Element, path: tuple[str, ...]) -> None:
        if e.name in done or e.name in path:
            return
        for _, source in e.ports():
            if source != e.name and source in by_name:
                visit(by_name[source], path + (e.name,))
        done[e.name] = e

    for e in plan.elements:
        visit(e, ())
    return list(done.values())


def run_on_engine(typed: Plan, inputs: Mapping[str, str], base_dir: str,
                  now_ms: Optional[int] = None, *,
                  numbers: Optional[Mapping[str, Mapping[str, int]]] = None,
                  ties: Optional[dict[str, set[str]]] = None,
                  reverse_ties: bool = False) -> dict[str, ElementResult]:
    """Run ``typed`` on the per-instance engine over the bound input files as one micro-batch;
    the final contents of every output element. Raises :class:`EngineUnsupported`.

    ``numbers``: the input files' numbers (:func:`arrival_numbers`; computed when not given).
    Rows that reach an instance with one sequence number from different sources or producing
    instances (one input row's results along two paths, or from several instances of a
    partitioned or broadcast element) are in an order the runtime fixes only by instance and
    sub-row numbers, which differ between a partitioned and an unpartitioned run: ``ties`` gets,
    per element where that happened, the sources involved; ``reverse_ties`` processes such rows
    in the reverse order of their sources and instances (each source's own rows in order)."""
    from .engine.changes import Bad, Emit, Event
    from .engine.flex import make_engine
    from .topology import first_ports

    why = engine_refusal(typed)
    if why is not None:
        raise EngineUnsupported(why)
    if numbers is None:
        numbers = arrival_numbers(typed, inputs, base_dir)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    # element -> its changelog: (instance, seq, sub, op, values)
    emitted: dict[str, list[tuple[int, int, int, str, dict]]] = {}
    results: dict[str, ElementResult] = {}
    for element in _order(typed):
        name = element.name
        engine = make_engine(element, typed, 0)
        received: dict[int, list[tuple]] = defaultdict(list)
        sources = [source for _, source in element.ports()]
        if element.is_input:
            rows, _ = _input_rows(element, typed, inputs, base_dir, numbers.get(name, {}))
            received[0] = [(seq, 0, 0, 0, op, values) for seq, op, values in rows]
        else:
            for port, source in enumerate(sources):
                router = _Router(element, typed.element(source))
                for inst, seq, sub, op, values in emitted.get(source, ()):
                    targets, _reason = router.instances(seq, inst, sub, values)
                    for target in targets:
                        received[target].append((seq, inst, sub, port, op, values))
        first = first_ports(typed, element)
        # (the runtime's order: runtime/processor.py, sequence, producing instance, sub-row, port)
        order = (lambda x: (x[3] not in first, *x[:4])) if first else (lambda x: x[:4])
        if reverse_ties:
            origin = {port: -sources.index(source) for port, source in enumerate(sources)}
            order = (lambda x: (x[3] not in first, x[0], -x[1], origin[x[3]], x[2], x[3]))
        out: list[tuple[int, int, int, str, dict]] = []
        for inst in sorted(received):
            state = engine.initial_state()
            if ties is not None and not element.is_input:
                tied = _tied_sources(received[inst], sources, first)
                if tied:
                    ties.setdefault(name, set()).update(tied)
            events = [Event(port, op, seq, values)
                      for seq, _src, _sub, port, op, values in sorted(received[inst], key=order)]
            for sub, o in enumerate(engine.process(state, events, now)):
                if isinstance(o, Emit):
                    out.append((inst, o.seq, sub, o.op, dict(o.values)))
                elif not isinstance(o, Bad):  # pragma: no cover - the engine emits only these
                    raise EngineUnsupported(f"{name}: unexpected engine output {o!r}")
        emitted[name] = out
        if element.role == "output":
            results[name] = _final(element, out)
    return results


def _tied_sources(received: list[tuple], sources: Sequence[str], first: frozenset[int]
                  ) -> set[str]:
    """The sources of those of one instance's ``received`` rows that share a sequence number (and
    class: :func:`~runtime.topology.first_ports` rows come first) with rows of another source or
    producing instance (``NAME (several instances)`` where rows of one source came from
    several)."""
    by_seq: dict[tuple, set[tuple[str, int]]] = defaultdict(set)
    for seq, src, _sub, port, _op, _values in received:
        by_seq[(port in first, seq)].add((sources[port], src))
    tied: set[str] = set()
    for origins in by_seq.values():
        if len(origins) > 1:
            names = [source for source, _ in origins]
            tied |= {f"{s} (several instances)" if names.count(s) > 1 else s for s in names}
    return tied


def _final(element: Element, changelog: list[tuple[int, int, int, str, dict]]) -> ElementResult:
    """An output element's final contents from its changelog (instances side by side)."""
    columns = [c.name for c in element.columns]
    kind = element.kind
    if kind == "window":
        key = list(element.key or columns)
        held: dict[tuple, tuple] = {}  # (instance, key) -> (seq, instance, sub, row)
        for inst, seq, sub, op, values in changelog:
            k = (inst, *(canonical(values.get(c)) for c in key))
            if op == "d":
                held.pop(k, None)
            else:
                held[k] = (seq, inst, sub, values)
        # as NAME.csv (runtime/outputs.py final_rows): where several instances hold a key, the
        # row whose last change came later in sequence order wins
        final: dict[tuple, tuple] = {}
        for k, last in held.items():
            if k[1:] not in final or last[:3] > final[k[1:]][:3]:
                final[k[1:]] = last
        return ElementResult(element.name, kind, columns, key, [v[3] for v in final.values()])
    # as NAME.csv: in the order the element produced them (sequence, instance, sub-row)
    changelog = sorted(changelog, key=lambda c: (c[1], c[0], c[2]))
    ordered = element.partition is None and element.module_partition is None
    if kind == "delta stream":
        return ElementResult(element.name, kind, ["ESP_OPS"] + columns, [],
                             [{"ESP_OPS": op, **values} for *_, op, values in changelog], ordered)
    return ElementResult(element.name, kind, columns, [], [values for *_, values in changelog],
                         ordered)


# --- the Spark path -------------------------------------------------------------------------------

def run_on_spark(spark, typed: Plan, inputs: Mapping[str, str], base_dir: str) -> dict[str, ElementResult]:
    """Run ``typed`` as ``ccl run --until-idle`` does (a scratch run directory) and read back its
    ``NAME.csv`` outputs (values as the text written there)."""
    from .run import run_plan
    from .run_setup import RunOptions

    scratch = tempfile.mkdtemp(prefix="ccl-verify-")
    try:
        out_dir = os.path.join(scratch, "out")
        os.makedirs(out_dir)
        options = RunOptions(inputs=dict(inputs), base_dir=base_dir,
                             run_dir=os.path.join(scratch, "run"), until_idle=True)
        run_plan(spark, typed, options, out_dir)
        results = {}
        for e in typed.elements:
            if e.role != "output":
                continue
            path = os.path.join(out_dir, e.name + ".csv")
            rows: list[dict] = []
            if os.path.exists(path):
                with open(path, newline="", encoding="utf-8") as f:
                    rows = [dict(r) for r in csv.DictReader(f)]
            columns = [c.name for c in e.columns]
            if e.kind == "delta stream":
                columns = ["ESP_OPS"] + columns
            key = list(e.key or columns) if e.kind == "window" else []
            ordered = e.partition is None and e.module_partition is None
            results[e.name] = ElementResult(e.name, e.kind, columns, key, rows, ordered)
        return results
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --- comparing ------------------------------------------------------------------------------------

def canonical(value: object) -> object:
    """A value as compared: floats to 12 significant digits (a sum in another order differs in its
    last bits), decimals as plain text without trailing zeros, date-times as ISO text."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, Decimal):
        return format(Decimal(value).normalize(), "f")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return value


def _row_key(row: Mapping, columns: Sequence[str]) -> tuple:
    return tuple(canonical(row.get(c)) for c in columns)


def _sort_key(t: tuple) -> tuple:
    return tuple((v is None, str(type(v).__name__), str(v)) for v in t)


def compare(a: ElementResult, b: ElementResult, limit: int = 3) -> Comparison:
    """Compare ``a`` (the partitioned run) with ``b`` (the unpartitioned run): a window by key (the
    rows each key holds, over all instances; up to ``limit`` differing keys), a stream as a
    multiset of rows (one :class:`Difference` with up to ``limit`` rows found only on each side)."""
    columns = a.columns
    comp = Comparison(a.name, a.kind, a.key, columns, (len(a.rows), len(b.rows)))
    if not a.key:
        ca = Counter(_row_key(r, columns) for r in a.rows)
        cb = Counter(_row_key(r, columns) for r in b.rows)
        only_a, only_b = ca - cb, cb - ca
        comp.differing = sum(only_a.values()) + sum(only_b.values())
        if not comp.differing and a.ordered and b.ordered:
            seq_a = [_row_key(r, columns) for r in a.rows]
            seq_b = [_row_key(r, columns) for r in b.rows]
            at = next((i for i, (x, y) in enumerate(zip(seq_a, seq_b)) if x != y), None)
            if at is not None:  # the same rows in another order
                comp.out_of_order = at
                comp.differing = sum(x != y for x, y in zip(seq_a, seq_b))
                comp.differences.append(Difference(
                    (at,), [dict(zip(columns, r)) for r in seq_a[at:at + limit]],
                    [dict(zip(columns, r)) for r in seq_b[at:at + limit]]))
            return comp
        if comp.differing:
            comp.differences.append(Difference(
                (), [dict(zip(columns, r)) for r in sorted(only_a.elements(), key=_sort_key)[:limit]],
                [dict(zip(columns, r)) for r in sorted(only_b.elements(), key=_sort_key)[:limit]]))
        return comp
    ga: dict[tuple, Counter] = defaultdict(Counter)
    gb: dict[tuple, Counter] = defaultdict(Counter)
    for rows, g in ((a.rows, ga), (b.rows, gb)):
        for r in rows:
            g[_row_key(r, a.key)][_row_key(r, columns)] += 1
    differing = sorted((k for k in set(ga) | set(gb) if ga.get(k) != gb.get(k)), key=_sort_key)
    comp.differing = len(differing)
    for k in differing[:limit]:
        ra, rb = ga.get(k, Counter()), gb.get(k, Counter())
        comp.differences.append(Difference(
            k, [dict(zip(columns, row)) for row in sorted(ra.elements(), key=_sort_key)],
            [dict(zip(columns, row)) for row in sorted(rb.elements(), key=_sort_key)]))
    return comp


def verify(partitioned: Plan, unpartitioned: Plan, inputs: Mapping[str, str], base_dir: str, *,
           spark_session: Optional[Callable[[], object]] = None, limit: int = 3,
           force_spark: bool = False) -> VerifyResult:
    """Run both plans on the sample ``inputs`` and compare every output element.

    The engine path runs both unless it cannot run one of them (or ``force_spark``); then
    ``spark_session()`` gives the Spark session both run on (None: the engine path's refusal is
    raised as :class:`EngineUnsupported`)."""
    why = "" if not force_spark else "asked for Spark"
    results = []
    times = []
    ties: list[dict[str, set[str]]] = []
    unfixed: dict[str, str] = {}
    if not force_spark:
        try:
            numbers = arrival_numbers(partitioned, inputs, base_dir)
            for typed in (partitioned, unpartitioned):
                began = time.perf_counter()
                ties.append({})
                results.append(run_on_engine(typed, inputs, base_dir, numbers=numbers,
                                             ties=ties[-1]))
                times.append(time.perf_counter() - began)
            unfixed = _unfixed_order(partitioned, unpartitioned, inputs, base_dir, numbers,
                                     results, ties)
            runner = ENGINE
            why = "per-instance engine, no Spark"
        except EngineUnsupported as exc:
            if spark_session is None:
                raise
            why = f"on Spark: the engine path does not run it ({exc})"
            results, times = [], []
        except Exception as exc:  # a gap of the engine path: Spark runs what it cannot
            if spark_session is None:
                raise
            why = f"on Spark: the engine path failed ({type(exc).__name__}: {exc})"
            results, times = [], []
    if not results:
        if spark_session is None:
            raise EngineUnsupported(why)
        spark = spark_session()
        for typed in (partitioned, unpartitioned):
            began = time.perf_counter()
            results.append(run_on_spark(spark, typed, inputs, base_dir))
            times.append(time.perf_counter() - began)
        runner = SPARK
    first, second = results
    comparisons = [compare(first[name], second[name], limit) for name in first if name in second]
    if runner == ENGINE:
        for comp in comparisons:
            comp.unfixed_order = unfixed.get(comp.name)
    return VerifyResult(runner, why, comparisons, (times[0], times[1]))


def _upstream(plan: Plan, name: str) -> list[str]:
    """``name`` and every element it reads, directly or not (``name`` first)."""
    out: list[str] = []
    todo = [name]
    while todo:
        current = todo.pop()
        if current in out:
            continue
        out.append(current)
        element = next((e for e in plan.elements if e.name == current), None)
        if element is not None:
            todo.extend(source for _, source in element.ports())
    return out


def _unfixed_order(partitioned: Plan, unpartitioned: Plan, inputs: Mapping[str, str],
                   base_dir: str, numbers: Mapping[str, Mapping[str, int]],
                   results: list[dict[str, ElementResult]], ties: list[dict[str, set[str]]]
                   ) -> dict[str, str]:
    """Per output element whose result depends on the order of rows the runtime does not fix
    (``ties``: where rows of one sequence number met in either run, :func:`run_on_engine`), why:
    both plans run again with those rows in the reverse order, and an output element whose
    result changes in either run is named, with the elements upstream of it where the rows met
    and their sources. Nothing is run again when no rows met so."""
    if not any(ties):
        return {}
    changed: set[str] = set()
    for typed, before in zip((partitioned, unpartitioned), results):
        after = run_on_engine(typed, inputs, base_dir, numbers=numbers, reverse_ties=True)
        changed |= {name for name, result in before.items()
                    if name in after and not compare(result, after[name], 1).equivalent}
    notes = {}
    for name in sorted(changed):
        met = []
        for element in _upstream(partitioned, name):
            tied = sorted(set().union(*(t.get(element, set()) for t in ties)))
            if tied:
                met.append(f"{element} (from {', '.join(tied)})")
        notes[name] = (f"its result depends on the order in which rows of one input row reach "
                       f"{'; '.join(met) or name}, which the runtime fixes only by instance and "
                       f"sub-row numbers (partitioned instances emit them concurrently): the "
                       f"two runs are not comparable there")
    return notes
