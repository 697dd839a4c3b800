"""The run report: one self-contained HTML page about a run directory (``ccl report``, written as
``report.html`` beside ``_run.json`` at the end of ``ccl run`` and of a deployed job, served live by
``ccl status NAME --web``).

What it shows, all read from files of the run directory (docs/report.md):

- the project graph (the ``ccl graph`` SVG), each edge labelled with the rows its source emitted
  and how the target partitions them;
- per element rows in, rows out by opcode and bad records (``stats/E/batch-N.json``);
- bad records by reason with a few sample rows (``_bad_records.jsonl``, or ``bad/E/*.jsonl`` while
  the run goes on);
- latency and throughput per micro-batch (``batches/QUERY/batch-N.json``) as SVG charts;
- per partition instance the rows it received, the skew (largest instance over the mean) and a
  warning where one instance holds more than twice its share;
- the partition-safety warnings (CCL3xxx) of the source, each element they flag linked to the
  warning's explanation.

Charts and bars are SVG drawn here; the page needs no network and no script to be read (the live
page adds a small script that reloads it when a batch commits). Imports nothing of Spark.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence

from runtime.file_names import file_name
from runtime.run_dir import BATCHES, PROJECT_QUERY, RunDirs, saved_plan

from ..cli.graph import build_graph, to_svg, xml_text
from ..diagnostics import CATALOGUE
from .workspace import read_json

REPORT_FILE = "report.html"
SAMPLES = 3  # sample rows shown per element and reason of bad records
SKEWED = 2.0  # an instance holding more than this many times its share is flagged
OPCODES = {"i": "insert", "u": "update", "d": "delete", "p": "upsert", "s": "safe delete"}
COLOURS = ("#2f6db5", "#d9822b", "#3c9a5f", "#a0449b", "#8a6d3b", "#c23b3b")


class ReportError(Exception):
    """A run directory the report cannot be made of: the message says why."""


@dataclass
class SafetyWarning:
    """A partition-safety warning of the project's source, and the element it flags."""

    code: str
    message: str
    line: Optional[int] = None
    element: Optional[str] = None
    file: Optional[str] = None

    @property
    def title(self) -> str:
        entry = CATALOGUE.get(self.code)
        return entry.title if entry else ""

    @property
    def explanation(self) -> str:
        entry = CATALOGUE.get(self.code)
        return entry.explanation if entry else ""


@dataclass
class ElementReport:
    """What one element did over the run."""

    name: str
    kind: str
    role: str
    instances: int
    rows_in: int = 0
    rows_out: dict[str, int] = field(default_factory=dict)
    bad: dict[str, int] = field(default_factory=dict)
    received: list[int] = field(default_factory=list)  # rows per partition instance
    batches: int = 0
    warnings: list[str] = field(default_factory=list)  # codes

    @property
    def rows_out_total(self) -> int:
        return sum(self.rows_out.values())

    @property
    def bad_total(self) -> int:
        return sum(self.bad.values())

    @property
    def skew(self) -> Optional[float]:
        """The largest instance's rows over the mean per instance (1.0: even); None when the
        element has one instance or received nothing."""
        total = sum(self.received)
        if self.instances < 2 or total == 0:
            return None
        return max(self.received) / (total / self.instances)

    @property
    def skewed(self) -> bool:
        return self.skew is not None and self.skew > SKEWED


@dataclass
class BatchTiming:
    """One micro-batch of one query: when it began, how long it took, the input rows it read."""

    query: str
    batch: int
    start: float
    seconds: float
    rows: int


@dataclass
class BadGroup:
    element: str
    reason: str
    count: int
    samples: list[str] = field(default_factory=list)


@dataclass
class RunReport:
    """Everything the page shows."""

    project: str
    run_dir: str
    elements: list[ElementReport]
    timings: list[BatchTiming]
    bad: list[BadGroup]
    warnings: list[SafetyWarning]
    graph_svg: str
    wall_seconds: Optional[float] = None
    finished: bool = False
    state: Optional[str] = None  # a deployed project's (running, stopped, failed, ...)

    @property
    def state_text(self) -> str:
        """What the header says of the run: finished (its outputs written), else the deployed
        project's state, else in progress."""
        if self.finished:
            return "finished"
        return self.state or "in progress (no _run.json yet)"


# --- collecting --------------------------------------------------------------------------------

def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _add(total: dict[str, int], counts: object) -> None:
    if isinstance(counts, dict):
        for k, n in counts.items():
            total[str(k)] = total.get(str(k), 0) + _int(n)


def _is_input(element: Mapping) -> bool:
    return element.get("role") == "input" and element.get("query") is None


def element_reports(dirs: RunDirs, plan: Mapping) -> tuple[list[ElementReport], dict[str, dict[int, int]]]:
    """Per element its counters summed over the stats files, and per element the rows in of each
    batch (for the throughput chart)."""
    reports, per_batch = [], {}
    for e in plan.get("elements", []):
        name = str(e.get("name"))
        count = max(1, _int((e.get("physical") or {}).get("instances")) or 1)
        r = ElementReport(name, str(e.get("kind", "")), str(e.get("role", "")), count)
        instances: dict[str, int] = {}
        batches: dict[int, int] = {}
        for path in dirs.batch_files("stats", "json", name):
            s = read_json(path)
            if s is None:
                continue
            r.batches += 1
            r.rows_in += _int(s.get("rows_in"))
            _add(r.rows_out, s.get("rows_out"))
            _add(r.bad, s.get("bad"))
            _add(instances, s.get("instances"))
            batch = _batch_number(path)
            if batch is not None:
                batches[batch] = batches.get(batch, 0) + _int(s.get("rows_in"))
        r.received = [instances.get(str(i), 0) for i in range(count)]
        reports.append(r)
        per_batch[name] = batches
    return reports, per_batch


def _batch_number(path: str) -> Optional[int]:
    stem = os.path.basename(path).split(".")[0]
    try:
        return int(stem.removeprefix("batch-"))
    except ValueError:
        return None


def batch_timings(dirs: RunDirs, plan: Mapping, rows_by_batch: Mapping[str, Mapping[int, int]]
                  ) -> list[BatchTiming]:
    """The micro-batches of every query (``batches/QUERY/batch-N.json``, runtime.run.timed_batches)
    with the input rows each read: for the project's query the rows in of the input elements it
    runs (``run.json``), for an element's own query that element's rows in."""
    run = read_json(os.path.join(dirs.root, "run.json")) or {}
    project = [str(n) for n in run.get("project_query") or []]
    elements = {str(e.get("name")): e for e in plan.get("elements", [])}
    timings = []
    root = os.path.join(dirs.root, BATCHES)
    queries = sorted(os.listdir(root)) if os.path.isdir(root) else []
    names = {file_name(q): q for q in [PROJECT_QUERY, *(f"ccl:{n}" for n in elements)]}
    for folder in queries:
        query = names.get(folder)
        if query is None:
            continue
        members = project if query == PROJECT_QUERY else [query.removeprefix("ccl:")]
        counted = [m for m in members if m in elements and _is_input(elements[m])] or members
        for path in dirs.batch_files(BATCHES, "json", query):
            t, batch = read_json(path), _batch_number(path)
            if t is None or batch is None:
                continue
            rows = sum(rows_by_batch.get(m, {}).get(batch, 0) for m in counted)
            timings.append(BatchTiming(query, batch, float(t.get("start") or 0.0),
                                       float(t.get("seconds") or 0.0), rows))
    timings.sort(key=lambda t: (t.start, t.query, t.batch))
    return timings


def bad_groups(dirs: RunDirs, elements: Sequence[ElementReport], out_dir: Optional[str]) -> list[BadGroup]:
    """Bad records by element and reason, with up to :data:`SAMPLES` rows each: from the output
    directory's ``_bad_records.jsonl`` when the run has ended, else from the run directory's batch
    files. The file is read only until every group has its samples."""
    groups = {(e.name, reason): BadGroup(e.name, reason, n)
              for e in elements for reason, n in e.bad.items() if n}
    merged = os.path.join(out_dir, "_bad_records.jsonl") if out_dir else None
    paths = [merged] if merged and os.path.exists(merged) else dirs.batch_files("bad", "jsonl")
    wanted = sum(min(SAMPLES, g.count) for g in groups.values())
    for record in _records(paths):
        if wanted <= 0:
            break
        g = groups.get((str(record.get("element")), str(record.get("reason"))))
        if g is None or len(g.samples) >= SAMPLES:
            continue
        g.samples.append(json.dumps(record.get("row"), default=str, ensure_ascii=False))
        wanted -= 1
    return sorted(groups.values(), key=lambda g: (-g.count, g.element, g.reason))


def _records(paths: Iterable[str]) -> Iterator[dict]:
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        yield record
        except OSError:
            continue


def flagged(plan: Mapping, warnings: Iterable[SafetyWarning]) -> list[SafetyWarning]:
    """``warnings`` (CCL3xxx only) with the element each belongs to: the element of the plan
    whose statement starts last at or before the warning's line, in the same file."""
    starts = sorted((_int(e.get("line")), str(e.get("name")), _path(e.get("file")))
                    for e in plan.get("elements", []) if e.get("line") is not None)
    out = []
    for w in warnings:
        if not w.code.startswith("CCL3"):
            continue
        element = w.element
        if element is None and w.line is not None:
            before = [name for line, name, file in starts
                      if line <= w.line and (w.file is None or file is None or file == _path(w.file))]
            element = before[-1] if before else None
        out.append(SafetyWarning(w.code, w.message, w.line, element, w.file))
    return out


def _path(file: object) -> Optional[str]:
    return os.path.abspath(file) if isinstance(file, str) and file else None


def warnings_of(diagnostics: Iterable[object]) -> list[SafetyWarning]:
    """The CCL3xxx warnings among ``diagnostics`` (:class:`ccl.diagnostics.Diagnostic`)."""
    found = []
    for d in diagnostics:
        code = str(getattr(d, "code", ""))
        span = getattr(d, "span", None)
        if code.startswith("CCL3"):
            found.append(SafetyWarning(code, str(getattr(d, "message", "")), getattr(span, "line", None),
                                  file=getattr(span, "file", None)))
    return found


def collect(run_dir: str, plan: Optional[Mapping] = None, out_dir: Optional[str] = None,
            warnings: Iterable[SafetyWarning] = ()) -> RunReport:
    """The report of the run directory ``run_dir`` (its own ``plan.json`` unless ``plan`` is
    given); ``out_dir``: the run's output directory, once it has ended (``_run.json``)."""
    if plan is None:
        try:
            plan = saved_plan(run_dir)
        except (OSError, ValueError) as exc:
            raise ReportError(f"{run_dir}: its plan.json cannot be read ({exc})") from None
    if not plan or not isinstance(plan.get("elements"), list):
        raise ReportError(f"{run_dir}: not a run directory (no plan.json)")
    try:
        return _collect(run_dir, plan, out_dir, warnings)
    except (KeyError, TypeError, AttributeError) as exc:  # a plan.json edited or of another ccl
        raise ReportError(f"{run_dir}: its plan.json is not a plan this ccl reads "
                          f"({type(exc).__name__}: {exc})") from None


def _collect(run_dir: str, plan: Mapping, out_dir: Optional[str],
             warnings: Iterable[SafetyWarning]) -> RunReport:
    dirs = RunDirs(run_dir)
    elements, rows_by_batch = element_reports(dirs, plan)
    run = read_json(os.path.join(out_dir, "_run.json")) if out_dir else None
    if run and isinstance(run.get("elements"), dict):
        for e in elements:  # the end of the run adds bad records (keys two instances held)
            bad = (run["elements"].get(e.name) or {}).get("bad_records")
            if isinstance(bad, dict):
                e.bad = {str(k): _int(v) for k, v in bad.items()}
    found = flagged(plan, warnings)
    for w in found:
        for e in elements:
            if e.name == w.element and w.code not in e.warnings:
                e.warnings.append(w.code)
    return RunReport(str(plan.get("project") or ""), run_dir, elements,
                     batch_timings(dirs, plan, rows_by_batch), bad_groups(dirs, elements, out_dir),
                     found, graph_svg(plan, elements, found),
                     wall_seconds=(run or {}).get("wall_seconds"), finished=run is not None)


# --- drawing -----------------------------------------------------------------------------------

def graph_svg(plan: Mapping, elements: Sequence[ElementReport], warnings: Sequence[SafetyWarning]) -> str:
    """The ``ccl graph`` SVG with each edge labelled with the rows its source emitted (bad records
    for an error stream's edge) and its partitioning; flagged elements link to their warning."""
    graph = build_graph(plan)
    by_name = {e.name: e for e in elements}
    for edge in graph.edges:
        source = by_name.get(graph.nodes[edge.source].name)
        if source is None:
            continue
        rows = source.bad_total if edge.style == "error" else source.rows_out_total
        what = "bad" if edge.style == "error" else "rows"
        edge.label = f"{rows:,} {what}" + (f" · {edge.label}" if edge.label else "")
    links = {w.element: f"#{w.code}" for w in warnings if w.element}
    return to_svg(graph, links)


def _nice(top: float) -> float:
    """A round axis maximum at or above ``top``."""
    if top <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(top))
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= top:
            return m * step
    return 10 * step


def _num(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], x_label: str,
               y_label: str, width: int = 520, height: int = 220) -> str:
    """An SVG line chart of ``series`` (label, points), one colour each, with axes from 0."""
    left, right, top, bottom = 56, 12, 14, 40
    pw, ph = width - left - right, height - top - bottom
    xs = [x for _, pts in series for x, _ in pts] or [0.0]
    ys = [y for _, pts in series for _, y in pts] or [0.0]
    x_max, y_max = _nice(max(xs)), _nice(max(ys))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafbfc" stroke="#ccd"/>']
    for k in range(5):
        y = top + ph - ph * k / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">'
                   f'{_num(y_max * k / 4)}</text>')
        x = left + pw * k / 4
        out.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle" fill="#555">'
                   f'{_num(x_max * k / 4)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle" fill="#333">'
               f'{xml_text(x_label)}</text>')
    out.append(f'<text x="14" y="{top + ph / 2}" text-anchor="middle" fill="#333" '
               f'transform="rotate(-90 14 {top + ph / 2})">{xml_text(y_label)}</text>')
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        coords = [(left + pw * x / x_max, top + ph - ph * y / y_max) for x, y in pts]
        if len(coords) > 1:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords) + '"/>')
        for x, y in coords if len(coords) <= 200 else ():
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>')
        if len(series) > 1:
            out.append(f'<rect x="{left + 8}" y="{top + 6 + 14 * i}" width="10" height="10" '
                       f'fill="{colour}"/><text x="{left + 22}" y="{top + 15 + 14 * i}" '
                       f'fill="#333">{xml_text(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def timing_charts(timings: Sequence[BatchTiming]) -> tuple[str, str]:
    """The latency (seconds per batch) and throughput (input rows per second) charts, x the
    time since the first batch began, a line per query."""
    if not timings:
        return "", ""
    first = min(t.start for t in timings)
    queries: dict[str, list[BatchTiming]] = {}
    for t in timings:
        queries.setdefault(t.query, []).append(t)
    latency = [(q.removeprefix("ccl:"), [(t.start - first + t.seconds, t.seconds) for t in ts])
               for q, ts in queries.items()]
    throughput = [(q.removeprefix("ccl:"), [(t.start - first + t.seconds, t.rows / max(t.seconds, 1e-6))
                                            for t in ts]) for q, ts in queries.items()]
    return (line_chart(latency, "seconds since the first batch began", "batch seconds"),
            line_chart(throughput, "seconds since the first batch began", "rows read / s"))


def instance_bars(e: ElementReport, width: int = 520, bar_h: int = 16) -> str:
    """The rows each partition instance of ``e`` received, as horizontal SVG bars, with the mean
    (dashed) and twice the mean (red); an instance over twice the mean is red."""
    left, right, gap = 36, 70, 4
    total = sum(e.received)
    mean = total / max(len(e.received), 1)
    top = _nice(max(max(e.received, default=0), 2 * mean))
    pw = width - left - right
    height = len(e.received) * (bar_h + gap) + 22
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bars" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">']
    for i, rows in enumerate(e.received):
        y = i * (bar_h + gap)
        w = pw * rows / top
        hot = rows > SKEWED * mean
        out.append(f'<g class="instance{" hot" if hot else ""}"><text x="{left - 6}" y="{y + bar_h - 4}" '
                   f'text-anchor="end" fill="#555">#{i}</text>'
                   f'<rect x="{left}" y="{y}" width="{max(w, 0.5):.1f}" height="{bar_h}" rx="2" '
                   f'fill="{"#d64545" if hot else "#4a86c8"}"><title>instance {i}: {rows:,} rows</title></rect>'
                   f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 4}" fill="#333">{rows:,}</text></g>')
    bottom = len(e.received) * (bar_h + gap)
    for value, style, label in ((mean, 'stroke="#333" stroke-dasharray="4 3"', "mean"),
                                (SKEWED * mean, 'stroke="#d64545" stroke-dasharray="2 2"', "2× mean")):
        x = left + pw * value / top
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{bottom}" {style}/>'
                   f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" fill="#555">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


# --- the page ----------------------------------------------------------------------------------

def _environment():
    import jinja2

    try:
        loader: jinja2.BaseLoader = jinja2.PackageLoader("ccl.ops", "templates")
    except ValueError:  # a zipped bundle: the templates beside this file
        loader = jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates"))
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)


def render(report: RunReport, live: Optional[str] = None) -> str:
    """The HTML page of ``report``; ``live``: the URL the live page polls, to reload itself when
    a batch commits (None: a static page, no script)."""
    from markupsafe import Markup

    latency, throughput = timing_charts(report.timings)
    seconds = [t.seconds for t in report.timings]
    rows = sum(t.rows for t in report.timings)
    busy = sum(seconds)
    summary = {
        "batches": len(report.timings),
        "mean_latency": sum(seconds) / len(seconds) if seconds else None,
        "max_latency": max(seconds, default=None),
        "rows_per_second": rows / busy if busy else None,
    }
    partitioned = [(e, Markup(instance_bars(e))) for e in report.elements if e.instances > 1]
    opcodes = sorted({op for e in report.elements for op in e.rows_out},
                     key=lambda op: (list(OPCODES).index(op) if op in OPCODES else 99, op))
    return _environment().get_template("report.html.j2").render(
        r=report, graph=Markup(report.graph_svg), latency=Markup(latency),
        throughput=Markup(throughput), summary=summary, partitioned=partitioned,
        opcodes=[(op, OPCODES.get(op, op)) for op in opcodes], skewed=SKEWED, live=live,
        state_token=state_token(report.run_dir), generated=time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                           time.gmtime()))


def state_token(run_dir: str) -> str:
    """What changes when a micro-batch commits: the number and newest time of the batch and
    stats files (the live page reloads when it differs)."""
    count, newest = 0, 0.0
    for what in (BATCHES, "stats"):
        root = os.path.join(run_dir, what)
        for folder in os.listdir(root) if os.path.isdir(root) else ():
            try:
                with os.scandir(os.path.join(root, folder)) as it:
                    for entry in it:
                        if entry.name.startswith("batch-") and not entry.name.endswith(".tmp"):
                            count += 1
                            newest = max(newest, entry.stat().st_mtime)
            except OSError:
                continue
    return f"{count}-{newest:.3f}"


def write_report(path: str, run_dir: str, plan: Optional[Mapping] = None,
                 out_dir: Optional[str] = None, warnings: Iterable[SafetyWarning] = ()) -> str:
    """Write the report of ``run_dir`` to ``path`` (whole or not at all); returns ``path``."""
    html = render(collect(run_dir, plan, out_dir, warnings))
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(html)
    os.replace(path + ".tmp", path)
    return path


def source_warnings(path: str) -> list[SafetyWarning]:
    """The CCL3xxx warnings of the project file ``path`` (checked as ``ccl check`` does, without
    its options); none when it cannot be read."""
    from ..analysis import analyze
    from ..config.project_config import load_project_config

    try:
        config = load_project_config(path)
        if config.project.has_errors:
            return []
        analysis = analyze(config.project, config.parameters)
    except Exception:  # the report goes on without warnings: the source is only for them
        return []
    return warnings_of(config.all_diagnostics + analysis.diagnostics)


@dataclass
class ReportSource:
    """Where a report's data is: the run directory, the plan, the output directory (once the run
    ended) and the source's warnings."""

    run_dir: str
    plan: Optional[Mapping] = None
    out_dir: Optional[str] = None
    warnings: list[SafetyWarning] = field(default_factory=list)
    state: Optional[Callable[[], str]] = None  # a deployed project's state, asked per report

    def report(self) -> RunReport:
        """The report as the files are now."""
        report = collect(self.run_dir, self.plan, self._ended_out_dir(), self.warnings)
        if self.state is not None:
            report.state = self.state()
        return report

    def _ended_out_dir(self) -> Optional[str]:
        """The output directory when its ``_run.json`` is of the run's last batches (a resumed
        run's older one is not)."""
        if not self.out_dir:
            return None
        try:
            ended = os.path.getmtime(os.path.join(self.out_dir, "_run.json"))
        except OSError:
            return None
        newest = max((os.path.getmtime(p) for p in RunDirs(self.run_dir).batch_files("stats", "json")),
                     default=0.0)
        return self.out_dir if ended >= newest else None


def deployed_source(pd: object) -> ReportSource:
    """The report source of a deployed project (:class:`ccl.ops.workspace.ProjectDir`): its
    checkpoint, its compiled plan, its outputs, the warnings of its project file."""
    from .workspace import job_plan, project_state

    meta = pd.meta() or {}  # type: ignore[attr-defined]
    source = meta.get("project_file")
    warnings = source_warnings(source) if isinstance(source, str) and os.path.exists(source) else []
    return ReportSource(pd.checkpoint, job_plan(pd), pd.out_dir, warnings,  # type: ignore[attr-defined]
                        state=lambda: str(project_state(pd).get("state")))
