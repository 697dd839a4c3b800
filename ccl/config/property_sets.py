"""ATTACH ADAPTER properties with the .ccr's adapter property sets applied.

An adapter names a property set with ``PROPERTIES propertyset = 'name', ...``; the set's properties
(``Runtime/AdaptersPropertySet/PropertySet name="name"`` in the .ccr) are added to the adapter's and
override CCL properties of the same name (the .ccr is the deployment-specific layer). A property
whose value is a parameter name takes the parameter's resolved value. Properties whose names say
they are secret (password, token, ...) hold a :class:`~ccl.config.secret.Secret`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from ..syntax import nodes as n
from .ccr import CcrFile
from ..diagnostics import Diagnostic
from .adapter_types import property_warnings
from .parameters import ResolvedParameter
from ..syntax.printer import expr as expr_text
from ..syntax.project import LoadedProject
from .secret import Secret, is_secret_name

PROPERTY_SET = "propertyset"


@dataclass(frozen=True)
class AdapterProperty:
    """One effective property: value, where it came from (``CCL`` or ``.ccr``) and its span."""

    name: str
    value: object
    source: str
    span: Optional[n.Span]
    note: str = ""  # 'property set X' or 'parameter p'


@dataclass
class AdapterConfig:
    """An ATTACH ADAPTER with its effective properties (in CCL order, then the set's new ones)."""

    name: str
    type: str
    direction: str
    target: str
    property_set: Optional[str]
    properties: dict[str, AdapterProperty] = field(default_factory=dict)
    span: Optional[n.Span] = None


def _ccl_value(value: n.Node, parameters: Mapping[str, ResolvedParameter]) -> tuple[object, str]:
    if isinstance(value, n.Literal):
        return value.value, ""
    if isinstance(value, n.Unary) and value.op == "-" and isinstance(value.operand, n.Literal):
        return -value.operand.value, ""  # type: ignore[operator]
    if isinstance(value, n.Var) and value.name.name in parameters:
        return parameters[value.name.name].value, f"parameter {value.name.name}"
    return expr_text(value), ""


def _masked(name: str, value: object) -> object:
    return Secret(value) if isinstance(value, str) and is_secret_name(name) else value


def adapter_properties(project: LoadedProject, ccr: Optional[CcrFile],
                       parameters: Mapping[str, ResolvedParameter]
                       ) -> tuple[list[AdapterConfig], list[Diagnostic]]:
    """The effective properties of every top-level ATTACH ADAPTER, and the diagnostics: a property
    set the .ccr does not define (CCL1330) or one named while no .ccr is loaded (CCL1331)."""
    out: list[AdapterConfig] = []
    diags: list[Diagnostic] = []
    for stmt in project.statements:
        if not isinstance(stmt, n.AttachAdapter):
            continue
        adapter = AdapterConfig(stmt.name.name, stmt.type.name, stmt.direction, stmt.target.name,
                                None, span=stmt.span)
        set_span: Optional[n.Span] = None
        for prop in stmt.properties:
            if prop.name.name.lower() == PROPERTY_SET:
                value, _ = _ccl_value(prop.value, parameters)
                adapter.property_set = str(value)
                set_span = prop.value.span or prop.span
                continue
            value, note = _ccl_value(prop.value, parameters)
            adapter.properties[prop.name.name] = AdapterProperty(
                prop.name.name, _masked(prop.name.name, value), "CCL", prop.span, note)
        if adapter.property_set is not None:
            if ccr is None:
                diags.append(Diagnostic("CCL1331", f"adapter '{adapter.name}' uses property set "
                                        f"'{adapter.property_set}', but no .ccr is loaded; its "
                                        f"properties are unknown", set_span or stmt.span))
            else:
                found = ccr.property_set(adapter.property_set)
                if found is None:
                    known = ", ".join(f"'{s.name}'" for s in ccr.property_sets) or "none"
                    diags.append(Diagnostic("CCL1330", f"adapter '{adapter.name}' uses property "
                                            f"set '{adapter.property_set}', which {ccr.path} does "
                                            f"not define (defined: {known})", set_span or stmt.span))
                else:
                    for prop in found.properties:
                        adapter.properties[prop.name] = AdapterProperty(
                            prop.name, _masked(prop.name, prop.value), ".ccr", prop.span,
                            f"property set {found.name}")
        diags += property_warnings(adapter.type, adapter.direction, adapter.name,
                                   [(p.name, p.span) for p in adapter.properties.values()], stmt.span)
        out.append(adapter)
    return out, diags
