"""A project with its whole configuration: the .ccl, its .ccr, the runtime settings and the parameters.

``load_project_config("x.ccl")`` parses the project, reads ``x.ccr`` beside it (or the file given as
``ccr_path``), resolves the settings (``--set`` > .ccr > ``--config`` > config/default.yaml) and the
parameters (``--param`` > .ccr > CCL default), applies adapter property sets, and gathers every
diagnostic. ``ccl check``, ``ccl config`` (and later ``ccl compile``/``ccl run``) start here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

from .ccr import CcrFile, ccr_beside, read_ccr
from .ccr_settings import settings_from_ccr
from .settings import DEFAULTS_FILE, Settings, parse_set_option, resolve_settings
from ..diagnostics import Diagnostic, SourceCache, sort_key
from .parameters import ResolvedParameter, parse_param_options, resolve_parameters
from ..syntax.project import LoadedProject, load_project
from .property_sets import AdapterConfig, adapter_properties


@dataclass
class ProjectConfig:
    """Everything configured for one project, with the configuration diagnostics."""

    project: LoadedProject
    ccr_path: Optional[str]
    ccr: Optional[CcrFile]
    settings: Settings
    parameters: dict[str, ResolvedParameter]
    adapters: list[AdapterConfig]
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def sources(self) -> SourceCache:
        """Source texts of the .ccl files, the .ccr (passwords masked) and the YAML files."""
        return self.project.sources

    @property
    def all_diagnostics(self) -> list[Diagnostic]:
        """The project's parse diagnostics and the configuration diagnostics, in file order."""
        return sorted(self.project.diagnostics + self.diagnostics, key=sort_key)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.all_diagnostics)


def project_name(ccl_path: str) -> str:
    """The project's name: its main file's name without the extension."""
    return os.path.splitext(os.path.basename(ccl_path))[0]


def load_project_config(ccl_path: str, *, ccr_path: Optional[str] = None,
                        config_file: Optional[str] = None, overrides: Sequence[str] = (),
                        params: Sequence[str] = (), project: Optional[LoadedProject] = None,
                        defaults_file: str = DEFAULTS_FILE) -> ProjectConfig:
    """Load ``ccl_path`` (unless ``project`` is given) and resolve its configuration.

    ``overrides`` are ``--set key=value`` texts, ``params`` ``--param NAME=VALUE`` texts. Command-line
    mistakes and unreadable files raise :class:`~ccl.syntax.project.UsageError`.
    """
    for item in overrides:
        parse_set_option(item)  # a bad --set is a usage error before any work is done
    cli_params = parse_param_options(params)
    if project is None:
        project = load_project(ccl_path)
    diags: list[Diagnostic] = []
    ccr_path = ccr_path if ccr_path is not None else ccr_beside(ccl_path)
    ccr: Optional[CcrFile] = None
    ccr_values = []
    if ccr_path is not None:
        ccr, found = read_ccr(ccr_path, project.sources)
        diags.extend(found)
        if ccr is not None:
            ccr_values, found = settings_from_ccr(ccr)
            diags.extend(found)
    settings, found = resolve_settings(config_file=config_file, overrides=overrides,
                                       ccr_settings=ccr_values, sources=project.sources,
                                       project_name=project_name(ccl_path),
                                       defaults_file=defaults_file)
    diags.extend(found)
    parameters, found = resolve_parameters(project, ccr, cli_params)
    diags.extend(found)
    adapters, found = adapter_properties(project, ccr, parameters)
    diags.extend(found)
    return ProjectConfig(project, ccr_path, ccr, settings, parameters, adapters,
                         sorted(diags, key=sort_key))
