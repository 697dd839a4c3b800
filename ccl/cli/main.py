"""The `ccl` command line: thin wrappers that call library functions and print.

Exit codes: 0 ok (warnings allowed), 1 the project has errors, 2 usage or I/O error.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Optional, Sequence, TextIO

from .. import __version__
from ..analysis import Analysis, analyze
from ..config.settings import SOURCE_DEFAULTS
from ..config.report import render_config, render_config_json
from ..config.secret import Secret
from ..diagnostics import CATALOGUE, Diagnostic, SourceCache, render, render_json, sort_key
from .explain import explain_partitioning, explain_physical
from ..syntax.nodes import gc_paused, to_json
from ..syntax.printer import to_ccl
from ..syntax.project import UsageError, load_project
from ..config.project_config import ProjectConfig, load_project_config

if TYPE_CHECKING:
    from ..plan.model import Plan
    from ..config.settings import Settings

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2

_CHECK_EXAMPLES = """\
examples:
  ccl check project.ccl                 check a project (and the files it IMPORTs)
  ccl check a.ccl b.ccl                 check several projects
  ccl check project.ccl --format json   diagnostics as JSON, for editors and CI
  ccl check project.ccl --ccr prod.ccr  check with another .ccr than project.ccr
  ccl check project.ccl --param numParts=8 --set spark.master=local[2]
  ccl check --explain CCL1101           what a diagnostic code means

project.ccr beside project.ccl is read when it exists (parameters, options, clusters).
"""

_CONFIG_EXAMPLES = """\
examples:
  ccl config project.ccl                       settings and parameters, and where each came from
  ccl config project.ccl --ccr prod.ccr        with another .ccr than project.ccr
  ccl config project.ccl --config site.yaml --set runtime.log_level=INFO
  ccl config project.ccl --param numParts=8    a parameter from the command line
  ccl config project.ccl --format json         the same as JSON (secrets masked)

precedence: command line (--set, --param) > .ccr > --config file > config/default.yaml
> the CCL default of a parameter. See docs/configuration.md.
"""

_EXPLAIN_EXAMPLES = """\
examples:
  ccl explain project.ccl               partition functions and the path that runs each
  ccl explain project.ccl --param n=8   with a parameter value

After the partition functions: the physical plan of every element (kind and role, partitioning,
instance count, state, native or per-instance path and why, broadcast inputs).
"""

_COMPILE_EXAMPLES = """\
examples:
  ccl compile project.ccl                    write project.ccx and project_job.py beside project.ccl
  ccl compile -i project.ccl -o build        ... into build/
  ccl compile project.ccl -o build --bundle  ... and build/ccl_runtime.zip for spark-submit --py-files
  ccl compile project.ccl --ccr prod.ccr --param PARTITIONS=8

then: spark-submit --py-files build/ccl_runtime.zip build/project_job.py --until-idle --output-dir out
  or: python build/project_job.py --until-idle   (where ccl-spark is installed). See docs/deploy.md.
"""

_GRAPH_EXAMPLES = """\
examples:
  ccl graph project.ccl                 the project as a Graphviz DOT graph on stdout
  ccl graph project.ccl -o project.svg  as an SVG picture (laid out here; Graphviz not needed)
  ccl graph project.ccl -o project.mmd  as a Mermaid flowchart
  ccl graph project.ccl --format mmd    Mermaid on stdout

Nodes: elements with kind and partition count. Edges: from the elements read; labelled with the
partition method of the input; dashed: broadcast to every instance; dotted: error streams.
"""

_RUN_EXAMPLES = """\
examples:
  ccl run project.ccl --until-idle                    process the bound input files, write out/, exit
  ccl run project.ccl --input trades=data/trades.csv  bind a file (or a directory) to an input element
  ccl run project.ccl --checkpoint ckpt               resumable: run again with the same directory
  ccl run project.ccl --param PARTITIONS=4 --output-dir results
  ccl run project.ccl --checkpoint ckpt --param PARTITIONS=6 --rescale
                                                      go on from ckpt with another instance count

Without --until-idle the job runs until Ctrl-C (new files in input directories are picked up).
The output directory gets NAME.csv per OUTPUT element, _run.json, _bad_records.jsonl and
report.html (the run report, docs/report.md).
"""

_VERIFY_EXAMPLES = """\
examples:
  ccl verify project.ccl --input trades=sample/trades.csv   the project with and without PARTITION BY
  ccl verify project.ccl                                    on the files its input adapters read
  ccl verify project.ccl --ccr prod.ccr --param PARTITIONS=8 --spark

Per output element: equivalent, or differs with the first differing keys (windows) or rows
(streams) side by side and the partition-safety warning (CCL3xxx) that predicted it. Exit code 0
when every output element is equivalent, 1 otherwise. See docs/analysis.md.
"""

_RESCALE_EXAMPLES = """\
examples:
  ccl rescale ckpt --param PARTITIONS=6     move ckpt's state to 6 instances, then:
  ccl run project.ccl --checkpoint ckpt --param PARTITIONS=6
"""

_PARSE_EXAMPLES = """\
examples:
  ccl parse project.ccl                 print the project back as canonical CCL
  ccl parse project.ccl --json          dump the syntax tree as JSON
"""

_DEPLOY_EXAMPLES = """\
examples:
  ccl cluster start                                      a local master and worker (prints the URL)
  ccl deploy project.ccl --master spark://127.0.0.1:7077 start it on the cluster, detached
  ccl deploy project.ccl --name prod --input trades=feeds/trades/
  ccl status                                             every deployed project
  ccl publish project trades more_trades.csv             feed rows into an input element
  ccl subscribe project LargeTrades                      print an element's changes as they come
  ccl stop project                                       stop it; 'ccl deploy' again resumes it

The workspace (default ~/.ccl/workspace, setting runtime.workspace, $CCL_WORKSPACE, --workspace)
holds NAME/checkpoint (state), NAME/out (outputs, written at stop), NAME/driver.log and
NAME/inputs/ELEMENT/ (input directories). See docs/deploy.md.
"""

_CLUSTER_EXAMPLES = """\
examples:
  ccl cluster start                       master on spark://127.0.0.1:7077 (UI :8080), one worker
  ccl cluster start --port 0 --webui-port 0 --cores 2 --memory 2g   any free ports
  ccl cluster start --workers 2 --cores 1  two workers of one core each
  ccl cluster status
  ccl cluster stop                        stops the workers (and their executors) and the master
"""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line plus a hint, exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `ccl` command."""
    parser = _Parser(
        prog="ccl",
        description="Check, compile and run SAP ESP CCL projects on Apache Spark.",
        epilog="Run 'ccl COMMAND --help' for the options and examples of a command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ccl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser(
        "check", help="check CCL projects and report diagnostics",
        description="Parse CCL projects (with the files they IMPORT) and report every problem as "
                    "file:line:col: severity CODE: message.",
        epilog=_CHECK_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("files", nargs="*", metavar="FILE.ccl", help="project files to check")
    check.add_argument("--format", choices=("text", "json"), default="text",
                       help="how to print diagnostics (default: text)")
    check.add_argument("--explain", metavar="CODE", help="explain a diagnostic code and exit")
    _add_config_options(check)
    check.set_defaults(func=cmd_check)

    config = sub.add_parser(
        "config", help="print a project's effective configuration and parameter values",
        description="Print the runtime settings and parameter values of a project, each with where "
                    "it came from (command line, .ccr, --config file, config/default.yaml, CCL "
                    "default). Passwords are masked.",
        epilog=_CONFIG_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    config.add_argument("file", metavar="FILE.ccl")
    config.add_argument("--format", choices=("text", "json"), default="text",
                        help="text report or JSON (default: text)")
    _add_config_options(config)
    config.set_defaults(func=cmd_config)

    explain = sub.add_parser(
        "explain", help="show how each partitioned element is split into instances",
        description="For every partitioned element: its instance count, the partition function of "
                    "each input and the path that runs it (a Spark expression, Spark's hash, or the "
                    "SPLASH interpreter in an Arrow UDF, with the reason), and the broadcast inputs. "
                    "Then the physical plan of every element, from the compiled plan.",
        epilog=_EXPLAIN_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    explain.add_argument("file", metavar="FILE.ccl")
    _add_config_options(explain)
    explain.set_defaults(func=cmd_explain)

    comp = sub.add_parser(
        "compile", help="compile a project to a .ccx plan and a generated PySpark job",
        description="Check and plan a project, then write NAME.ccx (the plan as versioned JSON) and "
                    "NAME_job.py (a PySpark driver that loads the .ccx and runs it), and with "
                    "--bundle ccl_runtime.zip (the ccl and runtime packages for spark-submit "
                    "--py-files).",
        epilog=_COMPILE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    comp.add_argument("file", nargs="?", metavar="FILE.ccl")
    comp.add_argument("-i", dest="input_file", metavar="FILE.ccl",
                      help="the project to compile (as esp_compiler -i)")
    comp.add_argument("-o", dest="out_dir", metavar="OUTDIR",
                      help="where to write (default: the directory of FILE.ccl)")
    comp.add_argument("--bundle", action="store_true",
                      help="also write ccl_runtime.zip for spark-submit --py-files")
    _add_config_options(comp)
    comp.set_defaults(func=cmd_compile)

    graph = sub.add_parser(
        "graph", help="draw a project's elements and data flow (DOT, Mermaid or SVG)",
        description="Elements as nodes (name, kind, partition count), edges from the elements "
                    "each one reads; broadcast inputs dashed, partitioned inputs labelled with "
                    "their method.",
        epilog=_GRAPH_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    graph.add_argument("file", metavar="FILE.ccl")
    graph.add_argument("-o", dest="output", metavar="OUT.svg|OUT.dot|OUT.mmd",
                       help="write to a file, in the format of its extension (default: stdout)")
    graph.add_argument("--format", choices=("dot", "mmd", "svg"),
                       help="output format (default: from -o's extension, else dot)")
    _add_config_options(graph)
    graph.set_defaults(func=cmd_graph)

    run = sub.add_parser(
        "run", help="run a project on Spark (embedded local Spark by default)",
        description="Compile a project and run it as Spark Structured Streaming queries.",
        epilog=_RUN_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("file", metavar="FILE.ccl")
    _add_config_options(run)
    run.add_argument("--input", action="append", default=[], metavar="ELEMENT=PATH",
                     help="read an input element from a CSV file or directory (repeatable)")
    run.add_argument("--output-dir", metavar="DIR", help="where outputs go (default: out/PROJECT)")
    run.add_argument("--checkpoint", metavar="DIR", nargs="?", const="",
                     help="keep state and progress in DIR to resume a stopped or killed run "
                          "(without DIR: runtime.checkpoint_root/PROJECT); without this option "
                          "a run starts from nothing and leaves no state behind")
    run.add_argument("--rescale", action="store_true",
                     help="with --checkpoint: where PARTITIONS changed, move the checkpoint's "
                          "state to the new instance counts first (as ccl rescale)")
    run.add_argument("--until-idle", action="store_true",
                     help="process everything available, then stop (exit 0)")
    run.add_argument("--master", help="Spark master (default: spark.master setting, local[*])")
    run.add_argument("--log-level", metavar="LEVEL",
                     help="Spark's log level, as --set runtime.log_level=LEVEL (default WARN: "
                          "only ccl's lines; INFO or DEBUG: Spark's too)")
    run.set_defaults(func=cmd_run)

    verify = sub.add_parser(
        "verify", help="compare a project's outputs with and without its PARTITION BY clauses",
        description="Run the project as written and again with every PARTITION BY removed, on "
                    "the given sample inputs, and compare every output element's final contents "
                    "(windows by key, streams as a multiset of rows). Runs on the per-instance "
                    "engine without Spark where it can, else on Spark (the output says which).",
        epilog=_VERIFY_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    verify.add_argument("file", metavar="FILE.ccl")
    _add_config_options(verify)
    verify.add_argument("--input", action="append", default=[], metavar="ELEMENT=PATH",
                        help="read an input element from a CSV file or directory (repeatable)")
    verify.add_argument("--spark", action="store_true",
                        help="run both on Spark (as 'ccl run --until-idle') even where the engine could")
    verify.add_argument("--show", type=int, default=3, metavar="N",
                        help="differing keys or rows to show per element (default: 3)")
    verify.set_defaults(func=cmd_verify)

    rescale = sub.add_parser(
        "rescale", help="move a checkpoint's state to new PARTITIONS values",
        description="Move the per-instance state of a `ccl run --checkpoint` directory to the "
                    "instance counts the project has with new parameter values (its .ccl and "
                    ".ccr, as recorded in the checkpoint, plus --param), where that cannot change "
                    "results: HASH partitioning on columns that key the state. Anything else is "
                    "refused, naming the element and the reason; nothing is changed then.",
        epilog=_RESCALE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rescale.add_argument("checkpoint", metavar="CHECKPOINT")
    rescale.add_argument("--file", metavar="FILE.ccl",
                         help="the project (default: the file named in the checkpoint's plan, "
                              "in the current directory or beside the checkpoint directory)")
    _add_config_options(rescale)
    rescale.set_defaults(func=cmd_rescale)

    report = sub.add_parser(
        "report", help="a run's report as one self-contained HTML page",
        description="The report of a run directory (a --checkpoint DIR of 'ccl run') or of a "
                    "deployed project NAME: the project graph with rows per edge, rows in and out "
                    "per element, bad records with samples, latency and throughput per "
                    "micro-batch, rows per partition instance with their skew. 'ccl run' writes "
                    "it as report.html beside _run.json.")
    report.add_argument("target", metavar="RUN_DIR|NAME")
    report.add_argument("-o", dest="output", default="report.html", metavar="FILE.html",
                        help="where to write it (default: report.html)")
    report.add_argument("--source", metavar="FILE.ccl",
                        help="the project file, for its partition-safety warnings (a deployed "
                             "project's own by default)")
    report.add_argument("--output-dir", metavar="DIR",
                        help="the run's output directory (_run.json), once it has ended")
    _add_workspace_option(report)
    report.set_defaults(func=cmd_report)

    _add_deploy_parsers(sub)

    parse = sub.add_parser(
        "parse", help="parse a CCL file and print its syntax tree or canonical form",
        description="Parse one CCL file and print it back as canonical CCL, or its syntax tree "
                    "as JSON.",
        epilog=_PARSE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("file", metavar="FILE.ccl")
    parse.add_argument("--json", action="store_true", help="dump the syntax tree as JSON")
    parse.set_defaults(func=cmd_parse)
    return parser


def _add_workspace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", metavar="DIR",
                        help="the workspace (default: the runtime.workspace setting, "
                             "~/.ccl/workspace; $CCL_WORKSPACE replaces that default)")


def _add_deploy_parsers(sub) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    deploy = sub.add_parser(
        "deploy", help="start a project on a Spark cluster, detached (workspace: state, logs)",
        description="Compile a project into the workspace and start it with spark-submit on a "
                    "Spark standalone cluster (client deploy mode), detached. A stopped project "
                    "of the same NAME resumes from its checkpoint.",
        epilog=_DEPLOY_EXAMPLES, formatter_class=fmt)
    deploy.add_argument("file", metavar="FILE.ccl")
    _add_config_options(deploy)
    deploy.add_argument("--master", metavar="spark://HOST:PORT",
                        help="the cluster (default: the spark.master setting, e.g. a .ccr Cluster "
                             "Manager, else the workspace's 'ccl cluster')")
    deploy.add_argument("--name", help="the deployed project's name (default: FILE's name)")
    deploy.add_argument("--input", action="append", default=[], metavar="ELEMENT=PATH",
                        help="read an input element from a directory (or seed its workspace "
                             "input directory with a file); repeatable")
    _add_workspace_option(deploy)
    deploy.set_defaults(func=cmd_deploy)

    status = sub.add_parser(
        "status", help="state of deployed projects (running/stopped/failed, batches, rows/s)",
        description="The state of one deployed project, or a line for each: running, starting, "
                    "stopping, stopped or failed; uptime, last batch, rows/s, bad records.",
        formatter_class=fmt)
    status.add_argument("name", nargs="?", metavar="NAME")
    status.add_argument("--format", choices=("text", "json"), default="text")
    status.add_argument("--web", action="store_true",
                        help="serve NAME's run report on http://127.0.0.1:PORT/, reloaded as "
                             "micro-batches commit (until Ctrl-C)")
    status.add_argument("--port", type=int, default=0,
                        help="the port of --web (default: any free port)")
    _add_workspace_option(status)
    status.set_defaults(func=cmd_status)

    lst = sub.add_parser("list", help="the deployed projects of the workspace, one line each",
                         description="The deployed projects, one line each (as 'ccl status').")
    _add_workspace_option(lst)
    lst.set_defaults(func=cmd_list)

    stop = sub.add_parser(
        "stop", help="stop a deployed project gracefully (its checkpoint stays)",
        description="SIGTERM to the driver, which stops its queries and writes the outputs "
                    "(NAME/out); SIGKILL after --timeout seconds. 'ccl deploy' resumes it.")
    stop.add_argument("name", metavar="NAME")
    stop.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                      help="how long to wait before SIGKILL (default: 60)")
    _add_workspace_option(stop)
    stop.set_defaults(func=cmd_stop)

    logs = sub.add_parser("logs", help="a deployed project's driver log",
                          description="The end of WORKSPACE/NAME/driver.log (spark-submit and "
                                      "the driver); -f follows it until Ctrl-C.")
    logs.add_argument("name", metavar="NAME")
    logs.add_argument("-n", type=int, default=50, metavar="N", help="lines to print (default: 50)")
    logs.add_argument("-f", "--follow", action="store_true", help="print new lines as they come")
    _add_workspace_option(logs)
    logs.set_defaults(func=cmd_logs)

    cluster = sub.add_parser(
        "cluster", help="a local Spark standalone master and workers (start, stop, status)",
        description="A Spark standalone master and workers (--workers, default 1) on 127.0.0.1, from the installed "
                    "pyspark, detached; pids and logs in WORKSPACE/_cluster.",
        epilog=_CLUSTER_EXAMPLES, formatter_class=fmt)
    cluster.add_argument("action", choices=("start", "stop", "status"))
    cluster.add_argument("--port", type=int, default=7077, help="master port (0: any free port)")
    cluster.add_argument("--webui-port", type=int, default=8080,
                         help="master web UI port (0: any free port)")
    cluster.add_argument("--workers", type=int, default=1,
                         help="how many workers to start on 127.0.0.1 (default: 1)")
    cluster.add_argument("--cores", type=int, default=2, help="each worker's cores (default: 2)")
    cluster.add_argument("--memory", default="1g", help="each worker's memory (default: 1g)")
    _add_workspace_option(cluster)
    cluster.set_defaults(func=cmd_cluster)

    publish = sub.add_parser(
        "publish", help="feed a CSV file into a deployed project's input element",
        description="Copy FILE.csv into the directory the input element reads (written under a "
                    "hidden name, then renamed: the job never sees a partial file). The file has "
                    "the element's input format (header, delimiter, opcodes).")
    publish.add_argument("name", metavar="NAME")
    publish.add_argument("element", metavar="ELEMENT")
    publish.add_argument("csv", metavar="FILE.csv")
    _add_workspace_option(publish)
    publish.set_defaults(func=cmd_publish)

    subscribe = sub.add_parser(
        "subscribe", help="print an element's changes as they come (CSV with ESP_OPS)",
        description="Print the changes of a deployed project's element as CSV (ESP_OPS first), "
                    "batch by batch as the job writes them, until Ctrl-C.")
    subscribe.add_argument("name", metavar="NAME")
    subscribe.add_argument("element", metavar="ELEMENT")
    subscribe.add_argument("--from-start", action="store_true",
                           help="first print every change so far (default: only new ones)")
    subscribe.add_argument("--once", action="store_true",
                           help="print what is there and exit (implies --from-start)")
    subscribe.add_argument("--poll", type=float, default=0.05, metavar="SECONDS",
                           help="how often to look for new batches (default: 0.05)")
    _add_workspace_option(subscribe)
    subscribe.set_defaults(func=cmd_subscribe)


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ccr", metavar="FILE.ccr",
                        help="project configuration to use (default: FILE.ccr beside FILE.ccl)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set a PARAMETER (overrides the .ccr and the CCL default); repeatable")
    parser.add_argument("--config", metavar="FILE.yaml",
                        help="YAML file of settings overriding config/default.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="set a runtime setting (overrides everything else); repeatable")


def _plural(kind: str) -> str:
    if kind.endswith("ary"):
        return kind[:-1] + "ies"
    return kind + ("es" if kind.endswith("x") else "s")


def _summary(path: str, config: ProjectConfig, analysis: Analysis, warnings: int) -> str:
    """The one-screen summary of a project that checked without errors."""
    kinds = ", ".join(f"{count} {_plural(kind) if count > 1 else kind}"
                      for kind, count in analysis.kinds.items())
    files = len(config.project.files)
    lines = [f"{path}: ok ({kinds or 'no elements'}; {len(analysis.partitioned)} partitioned"
             f"{f', {files} files' if files > 1 else ''})"
             + (f", {warnings} warning(s)" if warnings else "")]
    for p in analysis.partitioned:
        count = f"{p.count} instances" if p.count is not None else f"PARTITIONS {p.count_text}"
        broadcast = f"; broadcast: {', '.join(p.broadcast)}" if p.broadcast else ""
        lines.append(f"  partitioned {p.name} ({p.kind}): {'; '.join(p.methods)}, {count}{broadcast}")
    for param in config.parameters.values():
        value = param.value
        shown = (repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool)
                 else value.isoformat() if hasattr(value, "isoformat") else str(value))
        lines.append(f"  parameter {param.name} = {shown} ({param.source})")
    return "\n".join(lines)


def _check(path: str, args: argparse.Namespace) -> tuple[ProjectConfig, Optional[Analysis], list[Diagnostic]]:
    """Load a project with its configuration and, when it parses, analyse it; all diagnostics sorted."""
    with gc_paused():  # between the parse and the analysis too: the new tree is not rescanned
        config = load_project_config(path, ccr_path=args.ccr, config_file=args.config,
                                     overrides=args.set, params=args.param)
        if config.project.has_errors:  # analysing a partly parsed project would only add noise
            return config, None, config.all_diagnostics
        analysis = analyze(config.project, config.parameters)
    return config, analysis, sorted(config.all_diagnostics + analysis.diagnostics, key=sort_key)


def cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl check`: parse each project and report its diagnostics."""
    if args.explain:
        code = CATALOGUE.get(args.explain.upper())
        if code is None:
            raise UsageError(f"unknown diagnostic code {args.explain!r} (see docs/diagnostics.md)")
        out.write(f"{code.code} ({code.severity}): {code.title}\n\n{code.explanation}\n")
        return EXIT_OK
    if not args.files:
        raise UsageError("check needs at least one FILE.ccl (or --explain CODE)")
    if len(args.files) > 1 and (args.ccr or args.param):
        raise UsageError("--ccr and --param apply to one project: check one FILE.ccl at a time")
    # The collector stays paused until the trees are freed: re-enabled earlier, its first
    # collection would scan every object allocated while it was paused (the whole tree, a
    # seventh of a large project's check) only to find them all alive.
    with gc_paused():
        return _check_files(args, out, err)


def _check_files(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Check each of ``args.files``; the trees are freed when this returns."""
    status = EXIT_OK
    json_diags = []
    for path in args.files:
        config, analysis, diags = _check(path, args)
        errors = sum(d.is_error for d in diags)
        if errors:
            status = EXIT_ERRORS
        if args.format == "json":
            json_diags.extend(diags)
            continue
        _write_diagnostics(diags, config.sources, err)
        warnings = len(diags) - errors
        if errors:
            err.write(f"{path}: {errors} error(s), {warnings} warning(s)\n")
        else:
            out.write(_summary(path, config, analysis, warnings) + "\n")
    if args.format == "json":
        out.write(render_json(json_diags) + "\n")
    return status


def _write_diagnostics(diags: list[Diagnostic], sources: SourceCache, err: TextIO) -> None:
    for diag in diags:
        err.write(render(diag, sources) + "\n")


def cmd_config(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl config`: the effective settings and parameters of one project, with their sources."""
    config = load_project_config(args.file, ccr_path=args.ccr, config_file=args.config,
                                 overrides=args.set, params=args.param)
    status = EXIT_ERRORS if config.has_errors else EXIT_OK
    if args.format == "json":
        out.write(render_config_json(config) + "\n")
        return status
    _write_diagnostics(config.all_diagnostics, config.sources, err)
    if status == EXIT_OK:
        out.write(render_config(config))
    else:
        errors = sum(d.is_error for d in config.all_diagnostics)
        err.write(f"{args.file}: {errors} error(s); no configuration printed\n")
    return status


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl explain`: the partitioning of every partitioned element and how it will run."""
    config, analysis, diags = _check(args.file, args)
    errors = [d for d in diags if d.is_error]
    if errors or analysis is None:
        _write_diagnostics(errors, config.sources, err)
        err.write(f"{args.file}: {len(errors)} error(s); nothing to explain\n")
        return EXIT_ERRORS
    plan = _plan(args.file, config, analysis, err)
    if plan is None:
        return EXIT_ERRORS
    out.write(explain_partitioning(analysis.partitioned, analysis.elements, plan))
    out.write("\n" + explain_physical(plan))
    return EXIT_OK


def _plan(path: str, config: ProjectConfig, analysis: Analysis, err: TextIO) -> Optional["Plan"]:
    """The plan of a project that checked without errors; None (reported) when it cannot be planned."""
    from ..plan.planner import PlanError, build_plan

    try:
        return build_plan(config.project, analysis, config.parameters,
                          adapters_properties=config.adapters)
    except PlanError as exc:
        err.write(f"{exc}\n{path}: cannot be planned\n")
        return None


def _checked_plan(path: str, args: argparse.Namespace, err: TextIO, what: str
                  ) -> tuple[Optional["Plan"], ProjectConfig]:
    """Check (diagnostics to ``err``, as `ccl check` prints them) and plan one project."""
    config, analysis, diags = _check(path, args)
    _write_diagnostics(diags, config.sources, err)
    errors = sum(d.is_error for d in diags)
    if errors or analysis is None:
        err.write(f"{path}: {errors} error(s); {what}\n")
        return None, config
    return _plan(path, config, analysis, err), config


def cmd_compile(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl compile`: NAME.ccx and NAME_job.py (and ccl_runtime.zip with --bundle)."""
    from ..ops.compile import write_compiled
    from ..plan.model import PLAN_FORMAT, PLAN_VERSION
    from ..config.project_config import project_name

    if args.file and args.input_file:
        raise UsageError("give the project once: FILE.ccl or -i FILE.ccl")
    path = args.file or args.input_file
    if not path:
        raise UsageError("compile needs a FILE.ccl (or -i FILE.ccl)")
    plan, _ = _checked_plan(path, args, err, "nothing written")
    if plan is None:
        return EXIT_ERRORS
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(path))
    try:
        done = write_compiled(plan, project_name(path), out_dir, bundle=args.bundle)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write the compiled project to {out_dir}: {exc}") from None
    out.write(f"wrote {done.plan_file} (plan {PLAN_FORMAT} version {PLAN_VERSION}, "
              f"{len(plan.elements)} element(s))\n")
    out.write(f"wrote {done.job_file}\n")
    if done.bundle_file:
        out.write(f"wrote {done.bundle_file}\n")
    return EXIT_OK


def cmd_graph(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl graph`: the project's elements and edges as DOT, Mermaid or SVG."""
    from .graph import format_of, render

    try:
        fmt = format_of(args.output, args.format)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    plan, _ = _checked_plan(args.file, args, err, "no graph")
    if plan is None:
        return EXIT_ERRORS
    from ..plan.codec import plan_to_json

    text = render(plan_to_json(plan), fmt)
    if not args.output:
        out.write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc}") from None
    out.write(f"wrote {args.output}\n")
    return EXIT_OK


def _bindings(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path:
            raise UsageError(f"--input {item}: expected ELEMENT=PATH")
        if not os.path.exists(path):
            raise UsageError(f"--input {item}: {path} does not exist")
        out[name.strip()] = path
    return out


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl run`: check, plan and run a project on Spark."""
    from ..plan.codec import plan_to_json
    from ..plan.physical import READ_INPUT_ADAPTERS, SOCKET_INPUT_ADAPTERS, unread_adapters
    from ..plan.planner import PlanError, build_plan
    from ..config.project_config import project_name

    inputs = _bindings(args.input)
    if args.log_level:
        args.set = [*args.set, f"runtime.log_level={args.log_level}"]
    config, analysis, diags = _check(args.file, args)
    _write_diagnostics(diags, config.sources, err)
    errors = sum(d.is_error for d in diags)
    if errors or analysis is None:
        err.write(f"{args.file}: {errors} error(s); not run\n")
        return EXIT_ERRORS
    try:
        plan = build_plan(config.project, analysis, config.parameters, adapters_properties=config.adapters)
    except PlanError as exc:
        err.write(f"{exc}\n")
        return EXIT_ERRORS
    from runtime.run_setup import RunError, RunOptions, inputs_without_files
    from runtime.quiet import filtered_stderr, mute_stderr
    from runtime.run import run_plan, status_writer, stopped_by_signals
    from runtime.session import (get_session, gone_message, is_quiet, jvm_gone, spark_gone,
                                 stop_session)

    unknown = sorted(set(inputs) - {e.name for e in plan.elements if e.is_input})
    if unknown:
        raise UsageError(f"--input {unknown[0]}=...: the project has no input element of that name")
    for a in unread_adapters(plan, inputs):
        err.write(f"ccl run: note: input adapter '{a.name}' of '{a.element}' has type "
                  f"{a.type}, which this runtime does not read (it reads "
                  f"{', '.join(READ_INPUT_ADAPTERS)}); '{a.element}' gets rows only "
                  f"with --input {a.element}=FILE\n")
    if args.until_idle:
        for a in plan_to_json(plan).get("adapters", []):
            if a["direction"] == "input" and str(a["type"]).lower() in SOCKET_INPUT_ADAPTERS:
                err.write(f"ccl run: note: {a['type']} input adapter '{a['name']}' does not run "
                          f"in an --until-idle run; '{a['element']}' reads what its inbox holds\n")

    settings = config.settings
    _require_rocksdb(settings)
    project = project_name(args.file)
    out_dir = args.output_dir or os.path.join(str(settings["runtime.output_dir"]), project)
    run_dir = args.checkpoint
    if run_dir == "":
        run_dir = os.path.join(str(settings["runtime.checkpoint_root"]), project)
    _make_directory(out_dir, "--output-dir" if args.output_dir else "runtime.output_dir")
    if run_dir:
        _make_directory(run_dir, "--checkpoint")
    if args.rescale:
        if not run_dir:
            raise UsageError("--rescale moves the state of a checkpoint: give --checkpoint DIR")
        code = _rescale(run_dir, plan, out, err)
        if code is not None:
            return code
    scratch = tempfile.mkdtemp(prefix="ccl-run-") if run_dir is None else None
    from ..ops.deploy import write_adapter_secrets
    write_adapter_secrets(run_dir or str(scratch), config.adapters)  # the plan leaves them out
    options = RunOptions(inputs=inputs, base_dir=os.path.dirname(os.path.abspath(args.file)),
                         run_dir=run_dir or scratch, until_idle=args.until_idle,
                         trigger_interval=str(settings["runtime.trigger_interval"]),
                         poll_interval=str(settings["runtime.poll_interval"]),
                         max_files_per_batch=int(settings["runtime.max_files_per_batch"]) or None,
                         buckets=int(settings["runtime.buckets"]) or None)
    for note in inputs_without_files(plan, options):
        err.write(f"ccl run: note: {note}\n")
    web = None
    if settings["web.enabled"] and args.until_idle:
        err.write("ccl run: note: web.enabled: the web service runs only with a run that goes on "
                  "until stopped (without --until-idle)\n")
    elif settings["web.enabled"]:
        web = _start_web(plan, options, settings, err)
        if web is None:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            return EXIT_ERRORS
    # A run stops on SIGINT/SIGTERM, also one that comes while Spark starts (it was lost then,
    # and the run went on).
    stop = threading.Event()
    log_level = str(settings["runtime.log_level"])
    try:
        with stopped_by_signals(stop), filtered_stderr(quiet=is_quiet(log_level), muted=jvm_gone):
            spark = get_session(args.master or str(settings["spark.master"]),
                                str(settings["spark.app_name"]).replace("{project}", project),
                                int(settings["spark.shuffle_partitions"]), log_level=log_level)
            try:
                result = run_plan(spark, plan, options, out_dir, status=status_writer(err), stop=stop)
            finally:
                stop_session(spark)
            _write_run_report(result.run_dir, plan_to_json(plan), out_dir, diags, err)
    except Exception as exc:
        if spark_gone(exc):  # killed under us: what it left is in the checkpoint
            newline = "\n" if getattr(err, "isatty", lambda: False)() else ""  # after the status line
            err.write(f"{newline}ccl run: {gone_message(run_dir is not None)}\n")
            mute_stderr()
            return EXIT_ERRORS
        if not isinstance(exc, RunError):
            raise
        err.write(f"ccl run: {exc}\n")
        return EXIT_ERRORS
    except KeyboardInterrupt:  # SparkContext's own SIGINT handler, before the run's took over
        err.write("ccl run: interrupted while Spark was starting; nothing was run or written\n")
        return 130
    finally:
        if web is not None:
            web.stop()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    bad_file = settings.setting("runtime.bad_record_path")
    if bad_file.source != SOURCE_DEFAULTS:  # ESP's bad-record-file: one file of the run's bad records
        _copy_file(os.path.join(out_dir, "_bad_records.jsonl"), str(bad_file.value))
    out.write(result.summary())
    return EXIT_OK


def _write_run_report(run_dir: str, plan: dict, out_dir: str, diags: list, err: TextIO) -> None:
    """``report.html`` beside ``_run.json``; a report that cannot be written is a note, not a
    failed run (the outputs are there)."""
    from ..ops.report import REPORT_FILE, warnings_of, write_report

    try:
        write_report(os.path.join(out_dir, REPORT_FILE), run_dir, plan, out_dir,
                     warnings_of(diags))
    except Exception as exc:  # the run's outputs are written; the report is extra
        err.write(f"ccl run: note: the run report was not written: {exc}\n")


def _require_rocksdb(settings: "Settings") -> None:
    """Refuse a state store other than RocksDB: an element with timers that runs outside the
    project's query (a file limit per batch, a reader of a reference) runs in transformWithState,
    which needs it."""
    if settings["spark.state_store"] != "rocksdb":
        raise UsageError("spark.state_store: elements with timers outside the project's query run "
                         "in transformWithState, which needs the rocksdb state store")


def _make_directory(path: str, option: str) -> None:
    """Make the directory ``path`` of ``option`` before Spark starts: a path that cannot be one
    (a file, no permission) made the run fail at its end, its outputs lost."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a file, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot make the directory: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the directory is not writable")


def _copy_file(src: str, dst: str) -> None:
    try:
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        shutil.copyfile(src, dst)
    except OSError as exc:
        raise UsageError(f"runtime.bad_record_path: cannot write {dst}: {exc.strerror}") from None


# --------------------------------------------------------------------------------------------------
# Deploying and managing projects (docs/deploy.md)
# --------------------------------------------------------------------------------------------------

def _workspace(args: argparse.Namespace) -> str:
    from ..ops.workspace import default_workspace_setting, resolve_workspace

    if args.workspace:
        return resolve_workspace(args.workspace)
    return resolve_workspace(None, default_workspace_setting(), True)


def _start_web(plan: "Plan", options, settings, err: TextIO):
    """The web service of a `ccl run` that goes on until stopped, serving in this process (a
    thread) until the run ends; every element's changes are recorded for it. None (after saying
    why) when it cannot listen."""
    from runtime.web.server import Server, WebService

    options.record_inputs = True  # the service follows and reads any element's changelog
    token = settings["web.token"]
    service = WebService(plan, options.run_dir, options.inputs, options.base_dir,
                         token.reveal() if isinstance(token, Secret) else str(token or ""))
    server = Server(service, str(settings["web.host"]), int(settings["web.port"]))
    try:
        url = server.start()
    except OSError as exc:
        err.write(f"ccl run: the web service cannot listen on {server.host}:{server.port}: "
                  f"{exc.strerror or exc}\n")
        return None
    err.write(f"ccl run: web service on {url}\n")
    return server


def _deploy_master(args: argparse.Namespace, config: ProjectConfig, workspace: str) -> str:
    """--master > a spark.master set anywhere but config/default.yaml (.ccr Cluster Manager,
    --config, --set) > the workspace's running `ccl cluster`; only spark:// URLs."""
    from ..ops import cluster
    from ..config.settings import parse_master

    setting = config.settings.setting("spark.master")
    if args.master:
        try:
            master = parse_master(args.master)
        except ValueError as exc:
            raise UsageError(f"--master: {exc}") from None
    elif setting.source != SOURCE_DEFAULTS:
        master = str(setting.value)
    else:
        local = cluster.running(workspace)
        if local is None:
            raise UsageError("ccl deploy runs a project on a Spark cluster: give --master "
                             "spark://HOST:PORT (or a Cluster Manager in the .ccr, or --set "
                             "spark.master=...); 'ccl cluster start' starts a local one, and "
                             "'ccl run' runs on an embedded Spark")
        master = str(local["master_url"])
    if not master.startswith("spark://"):
        where = "--master" if args.master else f"spark.master ({setting.origin})"
        raise UsageError(f"{where} is {master}: ccl deploy starts projects on a Spark standalone "
                         f"cluster (spark://HOST:PORT); run on an embedded Spark with 'ccl run', "
                         f"or use 'ccl compile --bundle' and spark-submit for other cluster managers")
    return master


def cmd_deploy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl deploy`: compile into the workspace and start the job on a cluster, detached."""
    import time

    from ..ops import deploy
    from ..ops.compile import write_compiled
    from ..plan.codec import plan_to_json
    from ..config.project_config import project_name
    from ..ops.workspace import (check_name, project_dir, read_json, resolve_workspace,
                                 supervisor_alive, tail_lines)
    from runtime.run_dir import saved_plan

    name = check_name(args.name if args.name is not None else project_name(args.file))
    inputs = _bindings(args.input)
    typed, config = _checked_plan(args.file, args, err, "not deployed")
    if typed is None:
        return EXIT_ERRORS
    plan = plan_to_json(typed)
    unknown = sorted(set(inputs) - set(deploy.input_elements(typed)))
    if unknown:
        raise UsageError(f"--input {unknown[0]}=...: the project has no input element of that name")
    settings = config.settings
    _require_rocksdb(settings)
    ws_setting = settings.setting("runtime.workspace")
    workspace = resolve_workspace(args.workspace, str(ws_setting.value),
                                  ws_setting.source == SOURCE_DEFAULTS)
    master = _deploy_master(args, config, workspace)
    pd = project_dir(workspace, name)
    meta = pd.meta()
    if meta and supervisor_alive(meta):
        raise UsageError(f"{name} is running (pid {meta.get('pid')}): 'ccl stop {name}' first, or "
                         f"deploy under another --name")
    deploy.check_resumable(pd, plan)
    deploy.check_java()
    deploy.spark_bin("spark-submit")
    resuming = saved_plan(pd.checkpoint) is not None
    base_dir = os.path.dirname(os.path.abspath(args.file))
    try:
        os.makedirs(pd.root, exist_ok=True)
        compiled = write_compiled(typed, project_name(args.file), pd.job_dir, bundle=True)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot write the compiled project to {pd.job_dir}: {exc}") from None
    bindings = deploy.bind_inputs(typed, pd, base_dir, inputs)
    deploy.seed_inputs(bindings)
    deploy.write_adapter_secrets(pd.checkpoint, config.adapters)
    spec = deploy.SubmitSpec(
        master=master, app_name=str(settings["spark.app_name"]), job_file=compiled.job_file,
        bundle=str(compiled.bundle_file), base_dir=base_dir,
        shuffle_partitions=int(settings["spark.shuffle_partitions"]),
        trigger_interval=str(settings["runtime.trigger_interval"]),
        poll_interval=str(settings["runtime.poll_interval"]),
        buckets=int(settings["runtime.buckets"]),
        log_level=str(settings["runtime.log_level"]),
        inputs={e: b.directory for e, b in bindings.items() if b.passed})
    cmd = deploy.submit_command(pd, spec)
    token = settings["web.token"]
    web = deploy.write_web_config(
        pd, bool(settings["web.enabled"]), str(settings["web.host"]), int(settings["web.port"]),
        token.reveal() if isinstance(token, Secret) else str(token or ""),
        os.path.abspath(str(compiled.plan_file)), base_dir, spec.inputs)
    info = {"name": name, "project": plan.get("project"), "project_file": os.path.abspath(args.file),
            "master": master, "workspace": workspace, "web": web,
            "plan_file": os.path.basename(compiled.plan_file),
            "inputs": deploy.binding_json(bindings),
            "outputs": [e["name"] for e in plan["elements"] if e.get("role") == "output"]}
    meta = deploy.start(pd, {**(meta or {}), **info}, cmd)
    time.sleep(1.0)  # spark-submit failing at once (bad options, no Java) shows here
    if not supervisor_alive(meta) and not os.path.exists(pd.exit_file):
        time.sleep(1.0)
    ended = read_json(pd.exit_file)
    if ended is not None and ended.get("started") == meta["started"] and ended.get("code") != 0:
        err.write("\n".join(tail_lines(pd.log_file, 20)) + "\n")
        err.write(f"ccl deploy: {name} failed to start (exit code {ended.get('code')}); "
                  f"log: {pd.log_file}\n")
        return EXIT_ERRORS
    out.write(f"{'resumed' if resuming else 'deployed'} {name} on {master} (pid {meta['pid']})\n")
    for element, b in bindings.items():
        out.write(f"  input {element}: {b.directory}" + (f" ({b.pattern})" if b.pattern else "")
                  + "\n")
    if web is not None:
        out.write(f"  web service on {web['host']}:{web['port'] or '(a free port)'}: its address "
                  f"in 'ccl status {name}'\n")
    out.write(f"  state {pd.checkpoint}\n  outputs {pd.out_dir} (written when it stops)\n"
              f"  log {pd.log_file}\n"
              f"'ccl status {name}', 'ccl logs {name}', 'ccl stop {name}'\n")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl verify`: the project's outputs with and without PARTITION BY, element by element."""
    from .verify import partition_warnings, report, without_partitions

    if args.show < 1:
        raise UsageError("--show: expected a number >= 1")
    inputs = _bindings(args.input)
    config, analysis, diags = _check(args.file, args)
    errors = [d for d in diags if d.is_error]
    if errors or analysis is None:
        _write_diagnostics(errors, config.sources, err)
        err.write(f"{args.file}: {len(errors)} error(s); not verified\n")
        return EXIT_ERRORS
    partitioned = _plan(args.file, config, analysis, err)
    if partitioned is None:
        return EXIT_ERRORS
    stripped, removed = without_partitions(config.project)
    plain_analysis = analyze(stripped, config.parameters)
    plain_errors = [d for d in plain_analysis.diagnostics if d.is_error]
    if plain_errors:
        _write_diagnostics(plain_errors, config.sources, err)
        err.write(f"{args.file}: without its PARTITION BY clauses the project has "
                  f"{len(plain_errors)} error(s); not verified\n")
        return EXIT_ERRORS
    from ..plan.codec import plan_to_json
    from ..plan.planner import PlanError, build_plan

    try:
        plain = build_plan(stripped, plain_analysis, config.parameters,
                           adapters_properties=config.adapters)
    except PlanError as exc:
        err.write(f"{exc}\n{args.file}: cannot be planned without its PARTITION BY clauses\n")
        return EXIT_ERRORS
    plan = plan_to_json(partitioned)
    unknown = sorted(set(inputs) - {e["name"] for e in plan["elements"]
                                    if e.get("role") == "input" and e.get("query") is None})
    if unknown:
        raise UsageError(f"--input {unknown[0]}=...: the project has no input element of that name")
    for e in plan["elements"]:
        if (e.get("role") == "input" and e.get("query") is None and e["name"] not in inputs
                and not e["physical"].get("input_adapter")):
            err.write(f"ccl verify: note: input element {e['name']} has no file (no --input "
                      f"{e['name']}=PATH, no input adapter): it gives no rows\n")
    from runtime.run_setup import RunError
    from runtime.verify import verify

    sessions: list = []

    def spark_session():
        from runtime.session import get_session

        settings = config.settings
        sessions.append(get_session(str(settings["spark.master"]), "ccl verify",
                                    int(settings["spark.shuffle_partitions"]),
                                    log_level=str(settings["runtime.log_level"])))
        return sessions[-1]

    base_dir = os.path.dirname(os.path.abspath(args.file))
    try:
        result = verify(partitioned, plain, inputs, base_dir, spark_session=spark_session,
                        limit=args.show, force_spark=args.spark)
    except (RunError, OSError, ValueError) as exc:
        err.write(f"ccl verify: {exc}\n")
        return EXIT_ERRORS
    finally:
        if sessions:
            from runtime.session import stop_session
            stop_session(sessions[0])
    out.write(f"{args.file}: {removed} PARTITION BY clause(s) removed for the comparison\n")
    warnings = partition_warnings(plan, diags)
    out.write("\n".join(report(result, plan, warnings)) + "\n")
    return EXIT_OK if result.equivalent else EXIT_ERRORS


def cmd_status(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl status [NAME]`: one project in detail, or a line per project."""
    from ..ops.workspace import (SUMMARY_HEADER, deployed, describe, list_projects, project_dir,
                            project_state, summary_line)

    workspace = _workspace(args)
    if args.web:
        return _serve_report(args, workspace, err)
    if args.name:
        states = [project_state(deployed(workspace, args.name))]
    else:
        states = [project_state(project_dir(workspace, n)) for n in list_projects(workspace)]
    if args.format == "json":
        out.write(json.dumps(states if not args.name else states[0], indent=2) + "\n")
    elif args.name:
        out.write("\n".join(describe(states[0])) + "\n")
    elif not states:
        out.write(f"no deployed projects in {workspace}\n")
    else:
        out.write(SUMMARY_HEADER + "\n" + "".join(summary_line(s) + "\n" for s in states))
    return EXIT_OK


def _serve_report(args: argparse.Namespace, workspace: str, err: TextIO) -> int:
    """`ccl status NAME --web`: the live run report."""
    from ..ops.report import deployed_source
    from ..ops.report_web import serve
    from ..ops.workspace import deployed

    if not args.name:
        raise UsageError("--web: name the deployed project (ccl status NAME --web)")
    if not 0 <= args.port <= 65535:
        raise UsageError("--port: expected a port number (0: any free port)")
    source = deployed_source(deployed(workspace, args.name))
    try:
        serve(source, args.port, started=lambda url: err.write(
            f"the run report of {args.name} on {url} (Ctrl-C to stop)\n") and err.flush())
    except OSError as exc:
        raise UsageError(f"--port {args.port}: {exc.strerror or exc}") from None
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl report RUN_DIR|NAME -o FILE.html`: a run's report."""
    from ..ops.report import ReportError, ReportSource, deployed_source, render, source_warnings
    from ..ops.workspace import deployed

    if os.path.isdir(args.target):
        source = ReportSource(args.target, out_dir=args.output_dir)
    else:
        source = deployed_source(deployed(_workspace(args), args.target))
        source.out_dir = args.output_dir or source.out_dir
    if args.source:
        if not os.path.isfile(args.source):
            raise UsageError(f"--source {args.source}: no such file")
        source.warnings = source_warnings(args.source)
    try:
        page = render(source.report())
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    out.write(f"wrote {args.output}\n")
    return EXIT_OK


def cmd_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl list`: the deployed projects."""
    args.name, args.format, args.web = None, "text", False
    return cmd_status(args, out, err)


def cmd_stop(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl stop NAME`: graceful stop (SIGTERM), SIGKILL after the timeout."""
    from ..ops.deploy import stop
    from ..ops.workspace import deployed

    if args.timeout < 0:
        raise UsageError("--timeout: expected a number of seconds >= 0")
    pd = deployed(_workspace(args), args.name)
    out.write(f"stopping {args.name}...\n")
    out.flush()
    what = stop(pd, timeout=args.timeout)
    if what == "not running":
        out.write(f"{args.name} is not running\n")
    elif what == "killed":
        out.write(f"{args.name} did not stop within {args.timeout:g} s and was killed; its "
                  f"checkpoint is usable ('ccl deploy' resumes it), its outputs were not written\n")
    else:
        out.write(f"stopped {args.name}; outputs in {pd.out_dir}; 'ccl deploy' resumes it from "
                  f"{pd.checkpoint}\n")
    return EXIT_OK


def cmd_logs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl logs NAME [-n N] [-f]`."""
    from ..ops.workspace import deployed, follow, tail_lines

    if args.n < 0:
        raise UsageError("-n: expected a number of lines >= 0")
    pd = deployed(_workspace(args), args.name)
    for line in tail_lines(pd.log_file, args.n):
        out.write(line + "\n")
    if not args.follow:
        return EXIT_OK
    out.flush()
    try:
        size = os.path.getsize(pd.log_file)
    except OSError:
        size = 0
    try:
        for text in follow(pd.log_file, size):
            out.write(text.replace("\r\n", "\n").replace("\r", "\n"))
            out.flush()
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return EXIT_OK


def cmd_cluster(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl cluster start|stop|status`."""
    from ..ops import cluster

    workspace = _workspace(args)
    if args.action == "start":
        for opt, value in (("--port", args.port), ("--webui-port", args.webui_port)):
            if not 0 <= value <= 65535:
                raise UsageError(f"{opt}: expected a port number (0: any free port)")
        if args.cores < 1:
            raise UsageError("--cores: expected at least 1")
        if args.workers < 1:
            raise UsageError("--workers: expected at least 1")
        if not re.fullmatch(r"[1-9][0-9]*[mMgG]", args.memory):
            raise UsageError(f"--memory {args.memory}: expected a size such as 512m or 2g")
        meta = cluster.start_cluster(workspace, port=args.port, webui_port=args.webui_port,
                                     cores=args.cores, memory=args.memory, worker_count=args.workers,
                                     progress=lambda text: err.write(text + "\n") and err.flush())
        out.write(f"{meta['master_url']}\n")
        each = "one worker" if args.workers == 1 else f"{args.workers} workers, each"
        err.write(f"master {meta['master_url']} (web UI {meta['web_url']}), {each} "
                  f"({args.cores} core{'s' if args.cores != 1 else ''}, {args.memory}); logs in "
                  f"{cluster.cluster_dir(workspace)}\n")
        return EXIT_OK
    if args.action == "stop":
        what = cluster.stop_cluster(workspace)
        out.write("stopped the cluster\n" if what == "stopped" else "no cluster is running\n")
        return EXIT_OK
    st = cluster.cluster_status(workspace)
    if st["state"] != "running":
        out.write(f"no cluster is running (workspace {workspace})\n")
        return EXIT_OK
    started, alive = st["worker_pids"], set(st["workers_running"])
    pids = ", ".join(str(p) if p in alive else f"{p} (not running)" for p in started) or "-"
    out.write(f"running: {st['master_url']} (web UI {st['web_url']})\n"
              f"  master pid {st['master_pid']}, worker pid{'s' if len(started) > 1 else ''} {pids}\n"
              f"  workers {st.get('workers')}, cores {st.get('cores')}, applications "
              f"{', '.join(map(str, st.get('applications') or [])) or 'none'}\n"
              f"  logs in {st['logs']}\n")
    return EXIT_OK


def _deployed_plan(pd) -> dict:
    from ..ops.workspace import job_plan

    plan = job_plan(pd)
    if not plan or not isinstance(plan.get("elements"), list):
        raise UsageError(f"{pd.name}: its compiled plan is missing in {pd.job_dir}")
    return plan


def cmd_publish(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl publish NAME ELEMENT FILE.csv`: copy a file into an input element's directory."""
    from ..ops.workspace import deployed, publish_file

    pd = deployed(_workspace(args), args.name)
    meta = pd.meta() or {}
    bindings = meta.get("inputs") or {}
    binding = bindings.get(args.element)
    if not isinstance(binding, dict) or not binding.get("directory"):
        known = ", ".join(sorted(bindings)) or "none"
        raise UsageError(f"{args.name} has no input element {args.element!r} (inputs: {known})")
    final = publish_file(args.csv, str(binding["directory"]), binding.get("pattern"))
    out.write(f"published {args.csv} as {final}\n")
    return EXIT_OK


def cmd_subscribe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl subscribe NAME ELEMENT`: the element's changes as CSV lines, as they come."""
    import csv
    import time

    from ..ops.workspace import changelog_files, changelog_rows, deployed

    if args.poll <= 0:
        raise UsageError("--poll: expected a number of seconds > 0")
    pd = deployed(_workspace(args), args.name)
    plan = _deployed_plan(pd)
    element = next((e for e in plan["elements"] if e.get("name") == args.element), None)
    if element is None:
        names = ", ".join(e.get("name", "?") for e in plan["elements"])
        raise UsageError(f"{args.name} has no element {args.element!r} (elements: {names})")
    columns = element.get("columns") or []
    seen = set() if (args.from_start or args.once) else set(changelog_files(pd, args.element))
    writer = csv.writer(out, lineterminator="\n")
    try:
        writer.writerow(["ESP_OPS"] + [c[0] for c in columns])
        out.flush()
        while True:
            for path in changelog_files(pd, args.element):
                if path in seen:
                    continue
                seen.add(path)
                try:
                    rows = changelog_rows(path, columns)
                except (OSError, ValueError):  # pyarrow's errors are ValueErrors
                    seen.discard(path)
                    continue
                writer.writerows(rows)
                out.flush()
            if args.once:
                return EXIT_OK
            time.sleep(args.poll)
    except (KeyboardInterrupt, BrokenPipeError):
        return EXIT_OK


def cmd_rescale(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl rescale`: move a checkpoint's state to the instance counts of new parameter values."""
    from ..plan.planner import PlanError, build_plan
    from runtime.run_dir import saved_plan

    old = saved_plan(args.checkpoint) if os.path.isdir(args.checkpoint) else None
    if old is None:
        raise UsageError(f"{args.checkpoint} is not the directory of a `ccl run --checkpoint` "
                         f"(it has no plan.json)")
    path = args.file or _project_of(args.checkpoint, str(old.get("file") or ""))
    if not path or not os.path.isfile(path):
        raise UsageError(f"the project the checkpoint was made with ({path or 'unknown'}) is not "
                         f"there: give it with --file FILE.ccl")
    config, analysis, diags = _check(path, args)
    _write_diagnostics(diags, config.sources, err)
    errors = sum(d.is_error for d in diags)
    if errors or analysis is None:
        err.write(f"{path}: {errors} error(s); nothing moved\n")
        return EXIT_ERRORS
    try:
        plan = build_plan(config.project, analysis, config.parameters,
                          adapters_properties=config.adapters)
    except PlanError as exc:
        err.write(f"{exc}\n")
        return EXIT_ERRORS
    code = _rescale(args.checkpoint, plan, out, err)
    return EXIT_OK if code is None else code


def _project_of(checkpoint: str, name: str) -> str:
    """The project file a checkpoint was made with: its plan records the main file's name; it
    is looked for in the current directory, then beside the checkpoint directory."""
    if not name:
        return ""
    parent = os.path.dirname(os.path.abspath(checkpoint))
    for path in (name, os.path.join(parent, name)):
        if os.path.isfile(path):
            return path
    return name


def _rescale(run_dir: str, new: "Plan", out: TextIO, err: TextIO) -> Optional[int]:
    """Move the state of the checkpoint ``run_dir`` to the instance counts of the plan ``new``
    (ccl/plan/rescale.py decides, runtime/rescale.py moves); the exit code when it is refused,
    else None."""
    from ..plan.rescale import rescale_moves
    from runtime.rescale import checkpoint_plan, rescale_run
    from runtime.run_setup import RunError
    from runtime.state.store import StateError

    try:
        old = checkpoint_plan(run_dir)
    except RunError as exc:
        err.write(f"ccl rescale: {exc}\n")
        return EXIT_ERRORS
    if old is None:
        out.write(f"{run_dir}: no checkpoint yet; nothing to move\n")
        return None
    moves, refused = rescale_moves(old, new)
    if refused:
        err.write(f"ccl rescale: the state of {run_dir} cannot move to the new instance counts "
                  f"without changing results; nothing was moved:\n")
        for line in refused:
            err.write(f"  {line}\n")
        return EXIT_ERRORS
    if not moves:
        out.write(f"{run_dir}: no instance count changed; nothing to move\n")
        return None
    try:
        rescale_run(run_dir, old, new, moves)
    except (RunError, StateError) as exc:
        err.write(f"ccl rescale: {exc}\n")
        return EXIT_ERRORS
    for name, move in moves.items():
        out.write(f"{name}: {move.before} -> {move.after} instances\n")
    return None


def cmd_parse(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ccl parse`: print the canonical CCL or the JSON syntax tree of one file."""
    project = load_project(args.file)
    if project.has_errors:
        _write_diagnostics(project.diagnostics, project.sources, err)
        return EXIT_ERRORS
    tree = project.files[project.main]
    if args.json:
        out.write(json.dumps(to_json(tree), indent=2) + "\n")
    else:
        out.write(to_ccl(tree))
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None, out: Optional[TextIO] = None,
         err: Optional[TextIO] = None) -> int:
    """Entry point of the `ccl` console script; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(out)
        return EXIT_USAGE
    try:
        return args.func(args, out, err)
    except UsageError as exc:
        err.write(f"ccl: error: {exc}\n")
        return EXIT_USAGE
    except RecursionError:  # beyond ccl.RECURSION_LIMIT: tens of thousands of nested terms
        err.write("ccl: error: an expression or statement is nested too deeply to compile "
                  "(split it into smaller ones)\n")
        return EXIT_ERRORS


if __name__ == "__main__":
    sys.exit(main())
