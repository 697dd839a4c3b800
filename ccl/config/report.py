"""The effective configuration of a project as text (``ccl config``) or JSON, secrets masked."""
from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Optional

from .settings import SOURCE_DEFAULTS, Setting
from ..syntax.nodes import Span
from .project_config import ProjectConfig
from .secret import MASK, Secret


def display_value(value: object) -> str:
    """A value as CCL would write it: strings quoted, NULL, true/false; secrets as ****."""
    if isinstance(value, Secret):
        return MASK
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return "'" + value.isoformat() + "'"
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return str(value)


def json_value(value: object) -> object:
    """A value for JSON: secrets as ****, decimals and datetimes as text, bytes as hex."""
    if isinstance(value, Secret):
        return MASK
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def _where(source: str, span: Optional[Span]) -> str:
    if span is None:
        return source
    if source == SOURCE_DEFAULTS:
        return f"{source}:{span.line}"
    return f"{source} ({span.file}:{span.line})"


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
            for row in rows]


def _setting_text(setting: Setting) -> str:
    return str(setting.value)


def render_config(config: ProjectConfig) -> str:
    """The text report: settings, parameters, clusters and adapters, each value with its source."""
    lines = [f"project: {config.project.main}",
             f".ccr: {config.ccr_path or '(none)'}",
             "",
             "settings (command line > .ccr > --config file > config/default.yaml):"]
    lines += _table([(key, _setting_text(s), _where(s.source, s.span))
                     for key, s in config.settings.values.items()])
    lines += ["", "parameters (command line > .ccr > CCL default):"]
    if config.parameters:
        lines += _table([(p.name, p.type, display_value(p.value), _where(p.source, p.origin))
                         for p in config.parameters.values()])
    else:
        lines.append("  (none)")
    if config.ccr is not None and config.ccr.clusters:
        lines += ["", "clusters (.ccr):"]
        for cluster in config.ccr.clusters:
            managers = ", ".join(m.value for m in cluster.managers) or "no managers"
            user = cluster.username if cluster.username is not None else "-"
            password = MASK if cluster.password is not None else "-"
            lines.append(f"  {cluster.name or '(unnamed)'} ({cluster.type or 'local'}): user {user}, "
                         f"password {password}, managers {managers}")
    if config.adapters:
        lines += ["", "adapters:"]
        for adapter in config.adapters:
            via = f", property set {adapter.property_set}" if adapter.property_set else ""
            lines.append(f"  {adapter.name} ({adapter.direction} adapter {adapter.type} on "
                         f"{adapter.target}{via})")
            rows = [(f"{p.name} =", display_value(p.value),
                     _where(p.source + (f" {p.note}" if p.note else ""), p.span))
                    for p in adapter.properties.values()]
            if rows:
                lines += _table(rows, indent="    ")
    return "\n".join(lines) + "\n"


def _span_json(span: Optional[Span]) -> Optional[dict]:
    return None if span is None else {"file": span.file, "line": span.line, "column": span.col}


def config_json(config: ProjectConfig) -> dict:
    """The report as a JSON-ready dict (with the diagnostics)."""
    return {
        "project": config.project.main,
        "ccr": config.ccr_path,
        "settings": {key: {"value": json_value(s.value), "source": s.source,
                           "location": _span_json(s.span)}
                     for key, s in config.settings.values.items()},
        "parameters": {p.name: {"type": p.type, "value": json_value(p.value), "source": p.source,
                                "location": _span_json(p.origin),
                                "declared": _span_json(p.span)}
                       for p in config.parameters.values()},
        "clusters": [{"name": c.name, "type": c.type, "username": c.username,
                      "password": MASK if c.password is not None else None,
                      "managers": [m.value for m in c.managers]}
                     for c in (config.ccr.clusters if config.ccr else [])],
        "adapters": [{"name": a.name, "type": a.type, "direction": a.direction,
                      "target": a.target, "property_set": a.property_set,
                      "properties": {p.name: {"value": json_value(p.value), "source": p.source,
                                              "location": _span_json(p.span)}
                                     for p in a.properties.values()}}
                     for a in config.adapters],
        "diagnostics": [d.to_json() for d in config.all_diagnostics],
    }


def render_config_json(config: ProjectConfig) -> str:
    """:func:`config_json` as indented JSON text."""
    return json.dumps(config_json(config), indent=2)
