"""Semantic analysis of a parsed CCL project: names, types, keys, partitioning rules (errors) and
partition-safety warnings. Entry point: :func:`analyze`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..diagnostics import Diagnostic, sort_key
from ..syntax.nodes import gc_paused
from ..config.parameters import ResolvedParameter
from ..syntax.project import LoadedProject
from .analyzer import Analyzer, PartitionedElement
from .safety import check_partition_safety
from .shared_globals import check_shared_globals
from .symbols import Element


@dataclass
class Analysis:
    """The result: elements with their columns and keys, the partitioned elements, diagnostics."""

    elements: dict[str, Element]
    partitioned: list[PartitionedElement]
    kinds: dict[str, int]
    diagnostics: list[Diagnostic]


def analyze(project: LoadedProject, parameters: Mapping[str, ResolvedParameter]) -> Analysis:
    """Analyse ``project`` (imports expanded, in declaration order) with resolved parameter values."""
    diagnostics: list[Diagnostic] = []
    analyzer = Analyzer(parameters, diagnostics)
    with gc_paused():
        analyzer.run(project.statements)
        check_partition_safety(analyzer.partition_facts, analyzer.typer.resolved, analyzer.report)
        check_shared_globals(project.statements, analyzer.typer.resolved, analyzer.report,
                             analyzer.uses_globals)
        analyzer.release()
    unique = {(d.code, d.span, d.message): d for d in diagnostics}
    return Analysis(analyzer.elements, analyzer.partitioned, analyzer.kind_counts,
                    sorted(unique.values(), key=sort_key))
