"""The `ccl` command line: thin wrappers that call library functions and print.

Exit codes: 0 ok (warnings allowed), 1 the project has errors, 2 usage or I/O error.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Optional, Sequence, TextIO

from . import __version__
from .analysis import Analysis, analyze
from .config import SOURCE_DEFAULTS
from .config_report import render_config, render_config_json
from .diagnostics import CATALOGUE, Diagnostic, SourceCache, render, render_json, sort_key
from .explain import explain_partitioning, explain_physical
from .nodes import to_json
from .printer import to_ccl
from .project import UsageError, load_project
from .project_config import ProjectConfig, load_project_config

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

Without --until-idle the job runs until Ctrl-C (new files in input directories are picked up).
The output directory gets NAME.csv per OUTPUT element, _run.json and _bad_records.jsonl.
"""

_PARSE_EXAMPLES = """\
examples:
  ccl parse project.ccl                 print the project back as canonical CCL
  ccl parse project.ccl --json          dump the syntax tree as JSON
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
    run.add_argument("--until-idle", action="store_true",
                     help="process everything available, then stop (exit 0)")
    run.add_argument("--master", help="Spark master (default: spark.master setting, local[*])")
    run.set_defaults(func=cmd_run)

    parse = sub.add_parser(
        "parse", help="parse a CCL file and print its syntax tree or canonical form",
        description="Parse one CCL file and print it back as canonical CCL, or its syntax tree "
                    "as JSON.",
        epilog=_PARSE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("file", metavar="FILE.ccl")
    parse.add_argument("--json", action="store_true", help="dump the syntax tree as JSON")
    parse.set_defaults(func=cmd_parse)
    return parser


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
        lines.append(f"  parameter {param.name} = {param.value!r} ({param.source})")
    return "\n".join(lines)


def _check(path: str, args: argparse.Namespace) -> tuple[ProjectConfig, Optional[Analysis], list[Diagnostic]]:
    """Load a project with its configuration and, when it parses, analyse it; all diagnostics sorted."""
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
    out.write(explain_partitioning(analysis.partitioned))
    out.write("\n" + explain_physical(plan))
    return EXIT_OK


def _plan(path: str, config: ProjectConfig, analysis: Analysis, err: TextIO) -> Optional[dict]:
    """The plan of a project that checked without errors; None (reported) when it cannot be planned."""
    from .planner import PlanError, build_plan

    try:
        return build_plan(config.project, analysis, config.parameters,
                          adapters_properties=config.adapters)
    except PlanError as exc:
        err.write(f"{exc}\n{path}: cannot be planned\n")
        return None


def _checked_plan(path: str, args: argparse.Namespace, err: TextIO, what: str
                  ) -> tuple[Optional[dict], ProjectConfig]:
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
    from .compile import write_compiled
    from .project_config import project_name

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
    out.write(f"wrote {done.plan_file} (plan {plan['format']} version {plan['version']}, "
              f"{len(plan['elements'])} element(s))\n")
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
    text = render(plan, fmt)
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
    from .planner import PlanError, build_plan

    inputs = _bindings(args.input)
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
    unknown = sorted(set(inputs) - {e["name"] for e in plan["elements"]
                                    if e["role"] == "input" and e["query"] is None})
    if unknown:
        raise UsageError(f"--input {unknown[0]}=...: the project has no input element of that name")
    from runtime.job import RunError, RunOptions
    from runtime.run import run_plan
    from runtime.quiet import filtered_stderr
    from runtime.session import get_session

    settings = config.settings
    if settings["spark.state_store"] != "rocksdb":
        raise UsageError("spark.state_store: stateful elements run in transformWithState, which "
                         "needs the rocksdb state store")
    project = os.path.splitext(os.path.basename(args.file))[0]
    out_dir = args.output_dir or os.path.join(str(settings["runtime.output_dir"]), project)
    run_dir = args.checkpoint
    if run_dir == "":
        run_dir = os.path.join(str(settings["runtime.checkpoint_root"]), project)
    scratch = tempfile.mkdtemp(prefix="ccl-run-") if run_dir is None else None
    options = RunOptions(inputs=inputs, base_dir=os.path.dirname(os.path.abspath(args.file)),
                         run_dir=run_dir or scratch, until_idle=args.until_idle,
                         trigger_interval=str(settings["runtime.trigger_interval"]),
                         max_files_per_batch=int(settings["runtime.max_files_per_batch"]) or None)
    try:
        with filtered_stderr():
            spark = get_session(args.master or str(settings["spark.master"]),
                                str(settings["spark.app_name"]).replace("{project}", project),
                                int(settings["spark.shuffle_partitions"]))
            spark.sparkContext.setLogLevel(str(settings["runtime.log_level"]))
            try:
                result = run_plan(spark, plan, options, out_dir,
                                  status=lambda line: err.write("\r" + line + "   ") and err.flush())
            finally:
                spark.stop()
    except RunError as exc:
        err.write(f"ccl run: {exc}\n")
        return EXIT_ERRORS
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    bad_file = config.settings.setting("runtime.bad_record_path")
    if bad_file.source != SOURCE_DEFAULTS:  # ESP's bad-record-file: one file of the run's bad records
        _copy_file(os.path.join(out_dir, "_bad_records.jsonl"), str(bad_file.value))
    for name, stats in result.report["elements"].items():
        bad = sum(stats["bad_records"].values())
        out.write(f"{name}: {stats['rows_in']} in, {stats['rows_out']} out"
                  + (f", {bad} bad" if bad else "") + "\n")
    out.write(f"outputs in {out_dir} ({result.report['wall_seconds']:.1f} s)\n")
    return EXIT_OK


def _copy_file(src: str, dst: str) -> None:
    try:
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        shutil.copyfile(src, dst)
    except OSError as exc:
        raise UsageError(f"runtime.bad_record_path: cannot write {dst}: {exc.strerror}") from None


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


if __name__ == "__main__":
    sys.exit(main())
