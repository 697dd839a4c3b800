"""Runtime settings: the defaults of config/default.yaml, overridden by a --config file, the .ccr and
--set on the command line, validated, with where each value came from.

Precedence, highest first: command line (``--set key=value``) > ``.ccr`` > ``--config FILE.yaml`` >
``config/default.yaml``. (Parameters follow the same order with the CCL default last: see
``ccl/config/parameters.py``.) Keys are dotted names (``spark.master``); YAML files may nest them
(``spark: {master: ...}``) or write them dotted. Unknown keys are errors with a did-you-mean.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import yaml

from ..diagnostics import Diagnostic, SourceCache
from .secret import Secret
from ..syntax.nodes import Span
from ..syntax.project import UsageError, read_source

SOURCE_COMMAND_LINE = "command line"
SOURCE_CCR = ".ccr"
SOURCE_CONFIG_FILE = "--config file"
SOURCE_DEFAULTS = "config/default.yaml"
SOURCE_CCL_DEFAULT = "CCL default"
PRECEDENCE = (SOURCE_COMMAND_LINE, SOURCE_CCR, SOURCE_CONFIG_FILE, SOURCE_DEFAULTS, SOURCE_CCL_DEFAULT)

# The packaged copy of config/default.yaml (a symbolic link in the source tree, a file in a wheel).
DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default_config.yaml")


# --------------------------------------------------------------------------------------------------
# Value parsers: text in, typed value out, ValueError with a readable reason otherwise.
# --------------------------------------------------------------------------------------------------

_HOST_PORT = r"(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):(?:6553[0-5]|655[0-2]\d|65[0-4]\d{2}|6[0-4]\d{3}|[1-5]\d{4}|[1-9]\d{0,3})"
_MASTER = re.compile(
    r"local|local\[(?:\*|[1-9]\d*)(?:,\s*[1-9]\d*)?\]|local-cluster\[[1-9]\d*,\s*[1-9]\d*,\s*[1-9]\d*\]"
    rf"|spark://{_HOST_PORT}(?:,{_HOST_PORT})*|yarn|k8s://(?:https?://)?[A-Za-z0-9_.-]+(?::\d{{1,5}})?/?")


def is_spark_master(text: str) -> bool:
    """Whether ``text`` is a Spark master URL that this project can deploy to."""
    return bool(_MASTER.fullmatch(text.strip()))


def parse_master(text: str) -> str:
    """A Spark master URL: local, local[N], local[*], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://."""
    text = text.strip()
    if not is_spark_master(text):
        raise ValueError(f"'{text}' is not a Spark master URL (local[*], local[N], "
                         f"spark://HOST:PORT, yarn or k8s://HOST:PORT)")
    return text


def parse_name(text: str) -> str:
    """A non-empty name on one line."""
    text = text.strip()
    if not text or any(ord(ch) < 32 for ch in text):
        raise ValueError("expected a non-empty name on one line")
    return text


def parse_path(text: str) -> str:
    """A non-empty file or directory path (relative paths are relative to the working directory)."""
    text = text.strip()
    if not text or "\0" in text or "\n" in text:
        raise ValueError("expected a non-empty path")
    return text


def parse_positive_int(text: str, low: int = 1) -> int:
    """An integer from 1 (or ``low``) to 2,147,483,647."""
    text = text.strip()
    if not re.fullmatch(r"\+?\d+", text):
        raise ValueError(f"'{text}' is not an integer")
    value = int(text)
    if not low <= value <= 2**31 - 1:
        raise ValueError(f"{value} is out of range ({low} to 2147483647)")
    return value


def parse_count(text: str) -> int:
    """An integer from 0 to 2,147,483,647."""
    return parse_positive_int(text, 0)


def parse_buckets(text: str) -> int:
    """``auto`` (0) or an integer from 1 to 2,147,483,647."""
    return 0 if text.strip().lower() == "auto" else parse_positive_int(text)


def parse_bool(text: str) -> bool:
    """true/false (also yes/no, on/off, 1/0; any case)."""
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"'{text.strip()}' is not true or false")


def parse_host(text: str) -> str:
    """A host name or IP address to bind (no spaces)."""
    text = text.strip()
    if not re.fullmatch(r"[A-Za-z0-9_.:-]+|\[[0-9A-Fa-f:.]+\]", text):
        raise ValueError(f"'{text}' is not a host name or IP address")
    return text.strip("[]")


def parse_port(text: str) -> int:
    """A TCP port from 0 (any free port) to 65535."""
    value = parse_positive_int(text, 0)
    if value > 65535:
        raise ValueError(f"{value} is not a port (0 to 65535)")
    return value


def parse_token(text: str) -> Secret:
    """A secret (masked wherever settings are shown); empty: none."""
    text = text.strip()
    if any(ord(ch) < 33 for ch in text):
        raise ValueError("expected a token without spaces or control characters")
    return Secret(text)


STATE_STORE_PROVIDERS = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}


def _choice(options: Sequence[str], upper: bool = False) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().upper() if upper else text.strip().lower()
        if value not in options:
            raise ValueError(f"'{text.strip()}' is not one of {', '.join(options)}")
        return value
    parse.__doc__ = f"One of {', '.join(options)}."
    return parse


LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")

_TIME_UNITS = r"(?:microsecond|millisecond|second|minute|hour|day|week)s?"
_DURATION = re.compile(rf"\d+\s+{_TIME_UNITS}(?:\s+\d+\s+{_TIME_UNITS})*", re.IGNORECASE)


def parse_duration(text: str) -> str:
    """A Spark processing-time interval: '1 second', '500 milliseconds', '1 minute 30 seconds'."""
    value = " ".join(text.split()).lower()
    if not _DURATION.fullmatch(value):
        raise ValueError(f"'{text.strip()}' is not an interval such as '1 second' or "
                         f"'500 milliseconds'")
    return value


@dataclass(frozen=True)
class SettingSpec:
    """One configuration key: its parser (text to value) and a one-line description."""

    key: str
    parse: Callable[[str], object]
    description: str


SETTINGS: dict[str, SettingSpec] = {s.key: s for s in [
    SettingSpec("spark.master", parse_master, "Spark master URL (where the job runs)"),
    SettingSpec("spark.app_name", parse_name, "Spark application name ({project} = file name)"),
    SettingSpec("spark.shuffle_partitions", parse_positive_int, "spark.sql.shuffle.partitions"),
    SettingSpec("spark.state_store", _choice(tuple(STATE_STORE_PROVIDERS)),
                "state store provider: rocksdb or hdfs"),
    SettingSpec("runtime.checkpoint_root", parse_path, "directory of the query checkpoints"),
    SettingSpec("runtime.trigger_interval", parse_duration, "micro-batch trigger interval"),
    SettingSpec("runtime.poll_interval", parse_duration,
                "how often the project's query looks for new input files"),
    SettingSpec("runtime.max_files_per_batch", parse_count,
                "input files read per micro-batch (0: all available)"),
    SettingSpec("runtime.buckets", parse_buckets,
                "state buckets of each per-instance element (auto: 8, or one per core beyond)"),
    SettingSpec("runtime.output_dir", parse_path, "directory of file outputs"),
    SettingSpec("runtime.bad_record_path", parse_path, "where bad records are written"),
    SettingSpec("runtime.log_level", _choice(LOG_LEVELS, upper=True), "log level"),
    SettingSpec("runtime.workspace", parse_path,
                "directory of deployed projects (ccl deploy; ~ is the home directory)"),
    SettingSpec("web.enabled", parse_bool,
                "start the project's web service (HTTP and WebSocket) with ccl deploy / ccl run"),
    SettingSpec("web.host", parse_host, "address the web service binds (127.0.0.1: this machine only)"),
    SettingSpec("web.port", parse_port, "port of the web service (0: a free port)"),
    SettingSpec("web.token", parse_token,
                "token the web service requires (Authorization: Bearer ...; empty: none)"),
]}
SECTIONS = sorted({key.split(".")[0] for key in SETTINGS})


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or an empty string."""
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


# --------------------------------------------------------------------------------------------------
# Settings with provenance
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """A value of one key and where it came from (``span`` is None for the command line)."""

    key: str
    value: object
    source: str
    span: Optional[Span] = None

    @property
    def origin(self) -> str:
        """Where the value came from, for people: ``.ccr (prod.ccr:52)``, ``command line``."""
        if self.span is None:
            return self.source
        return f"{self.source} ({self.span.file}:{self.span.line})"


@dataclass
class Settings:
    """The effective runtime settings: one Setting per key of SETTINGS."""

    values: dict[str, Setting]

    def __getitem__(self, key: str) -> object:
        return self.values[key].value

    def setting(self, key: str) -> Setting:
        """The value of ``key`` with its provenance."""
        return self.values[key]

    def as_dict(self) -> dict[str, object]:
        """Key to value."""
        return {key: s.value for key, s in self.values.items()}


def parse_set_option(item: str) -> Setting:
    """One ``--set key=value``; raises UsageError (exit 2) on a bad key or value."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"--set {item}: expected KEY=VALUE, for example --set spark.master=local[2]")
    spec = SETTINGS.get(key)
    if spec is None:
        hint = (" (set parameters with --param NAME=VALUE)" if key.startswith("parameters")
                else did_you_mean(key, SETTINGS))
        raise UsageError(f"--set {item}: unknown setting '{key}'{hint}")
    try:
        value = spec.parse(text)
    except ValueError as exc:
        raise UsageError(f"--set {item}: invalid value for {key}: {exc}") from None
    return Setting(key, value, SOURCE_COMMAND_LINE)


def read_config_file(path: str, source: str, sources: SourceCache) -> tuple[dict[str, Setting], list[Diagnostic]]:
    """The settings written in a YAML file (any subset of the keys), validated.

    Raises UsageError when the file cannot be read; everything wrong inside it is a diagnostic with
    the file, line and column.
    """
    text = read_source(path)
    sources.add(path, text)
    diags: list[Diagnostic] = []
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = "; ".join(m for m in (exc.context, exc.problem) if m)
        span = Span(path, mark.line + 1, mark.column + 1) if mark else Span(path, 1, 1)
        return {}, [Diagnostic("CCL1320", f"not valid YAML: {message}", span)]
    except yaml.YAMLError as exc:
        return {}, [Diagnostic("CCL1320", f"not valid YAML: {exc}", Span(path, 1, 1))]
    if root is None:
        return {}, []

    def at(node: yaml.Node) -> Span:
        return Span(path, node.start_mark.line + 1, node.start_mark.column + 1)

    out: dict[str, Setting] = {}
    if not isinstance(root, yaml.MappingNode):
        return {}, [Diagnostic("CCL1322", "a configuration file is a mapping of settings "
                               "(spark: ..., runtime: ...)", at(root))]

    def leaf(key: str, key_node: yaml.Node, value_node: yaml.Node) -> None:
        spec = SETTINGS[key]
        if key in out:
            diags.append(Diagnostic("CCL1306", f"setting '{key}' is given twice (first at line "
                                    f"{out[key].span.line})", at(key_node)))
            return
        if not isinstance(value_node, yaml.ScalarNode):
            kind = "a list" if isinstance(value_node, yaml.SequenceNode) else "a mapping"
            diags.append(Diagnostic("CCL1322", f"invalid value for {key}: expected a single value, "
                                    f"not {kind}", at(value_node)))
            return
        try:
            value = spec.parse(value_node.value)
        except ValueError as exc:
            diags.append(Diagnostic("CCL1322", f"invalid value for {key}: {exc}", at(value_node)))
            return
        out[key] = Setting(key, value, source, at(value_node))

    def unknown(key: str, node: yaml.Node, candidates: Iterable[str]) -> None:
        hint = (" (parameters are set in the .ccr or with --param NAME=VALUE)"
                if key.split(".")[0] == "parameters" else did_you_mean(key, candidates))
        diags.append(Diagnostic("CCL1321", f"unknown setting '{key}'{hint}", at(node)))

    for key_node, value_node in root.value:
        top = str(key_node.value)
        if top in SETTINGS:
            leaf(top, key_node, value_node)
        elif top in SECTIONS:
            if not isinstance(value_node, yaml.MappingNode):
                diags.append(Diagnostic("CCL1322", f"'{top}' is a section: give its settings "
                                        f"under it ({top}: {{key: value}})", at(value_node)))
                continue
            for sub_key, sub_value in value_node.value:
                key = f"{top}.{sub_key.value}"
                if key in SETTINGS:
                    leaf(key, sub_key, sub_value)
                else:
                    unknown(key, sub_key, SETTINGS)
        else:
            unknown(top, key_node, list(SETTINGS) + SECTIONS)
    return out, diags


def resolve_settings(*, config_file: Optional[str] = None, overrides: Sequence[str] = (),
                     ccr_settings: Sequence[Setting] = (), sources: Optional[SourceCache] = None,
                     project_name: str = "project",
                     defaults_file: str = DEFAULTS_FILE) -> tuple[Settings, list[Diagnostic]]:
    """The effective settings: command line > .ccr > --config file > config/default.yaml.

    ``overrides`` are ``key=value`` texts from ``--set`` (bad ones raise UsageError); ``ccr_settings``
    come from :func:`ccl.config.ccr_settings.settings_from_ccr`. ``{project}`` in the application name is
    replaced by ``project_name``.
    """
    sources = sources if sources is not None else SourceCache()
    diags: list[Diagnostic] = []
    command_line = [parse_set_option(item) for item in overrides]
    defaults, found = read_config_file(defaults_file, SOURCE_DEFAULTS, sources)
    diags.extend(found)
    values: dict[str, Setting] = dict(defaults)
    missing = [key for key in SETTINGS if key not in defaults]
    if missing and not found:
        diags.append(Diagnostic("CCL1322", f"the defaults file does not set {', '.join(missing)}",
                                Span(defaults_file, 1, 1)))
    if config_file is not None:
        given, found = read_config_file(config_file, SOURCE_CONFIG_FILE, sources)
        diags.extend(found)
        values.update(given)
    for setting in ccr_settings:
        values[setting.key] = setting
    for setting in command_line:
        values[setting.key] = setting
    name = values.get("spark.app_name")
    if name is not None and isinstance(name.value, str) and "{project}" in name.value:
        values["spark.app_name"] = Setting(name.key, name.value.replace("{project}", project_name),
                                           name.source, name.span)
    ordered = {key: values[key] for key in SETTINGS if key in values}
    return Settings(ordered), diags
