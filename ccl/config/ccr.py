"""Reading ESP project configuration files (``.ccr``) into plain dataclasses.

A ``.ccr`` is XML with the root ``Configuration`` in the namespace
``http://www.sybase.com/esp/project_config/2010/08/`` (a file without the namespace is read too). This
module only reads: every value keeps the ``Span`` (file, line, column) of the element it came from.
What the values mean on Spark is decided elsewhere: ``ccr_settings`` (runtime settings),
``parameters`` (PARAMETER values) and ``property_sets`` (ATTACH ADAPTER properties).

Passwords are held as :class:`~ccl.config.secret.Secret`; the source text registered for diagnostics has them
masked (``redact_xml``).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from ..diagnostics import Diagnostic, SourceCache
from ..syntax.nodes import Span
from ..syntax.project import read_bytes
from .safe_xml import XmlElement, XmlError, parse_xml
from .secret import Secret, is_secret_name, redact_xml

log = logging.getLogger(__name__)

NAMESPACE = "http://www.sybase.com/esp/project_config/2010/08/"


@dataclass
class CcrParameter:
    """``<Parameter name="n">value</Parameter>`` or ``<Parameter name="n" value="value"/>``."""

    name: str
    value: str
    span: Span


@dataclass
class CcrValue:
    """A single text value of the file (a manager URL, ...) and where it is."""

    value: str
    span: Span


@dataclass
class CcrCluster:
    """``Runtime/Clusters/Cluster``: name, type (local|remote), credentials and manager URLs."""

    name: str
    type: str
    username: Optional[str]
    password: Optional[Secret]
    managers: list[CcrValue]
    span: Span


@dataclass
class CcrBinding:
    """``Runtime/Bindings/Binding``: a stream bound to a stream of another (ESP) project."""

    name: str
    fields: dict[str, str]
    span: Span


@dataclass
class CcrProperty:
    """One adapter property of a property set; secret-looking names hold a Secret."""

    name: str
    value: "str | Secret"
    span: Span


@dataclass
class CcrPropertySet:
    """``Runtime/AdaptersPropertySet/PropertySet``: named properties for ATTACH ADAPTER."""

    name: str
    properties: list[CcrProperty]
    span: Span


@dataclass
class CcrOption:
    """``Deployment/Project/Options/Option``: name and value."""

    name: str
    value: str
    span: Span


@dataclass
class CcrAffinity:
    """``Affinities/Affinity`` of an instance (its attributes as written)."""

    attrs: dict[str, str]
    span: Span


@dataclass
class CcrInstance:
    """``Instances/Instance``: failover switch and affinities."""

    failover: bool
    affinities: list[CcrAffinity]
    span: Span


@dataclass
class CcrDeployment:
    """``Deployment/Project``: the ha attribute, options and instances."""

    ha: bool
    options: list[CcrOption]
    instances: list[CcrInstance]
    span: Span


@dataclass
class CcrFile:
    """A whole .ccr file."""

    path: str
    parameters: list[CcrParameter] = field(default_factory=list)
    clusters: list[CcrCluster] = field(default_factory=list)
    bindings: list[CcrBinding] = field(default_factory=list)
    property_sets: list[CcrPropertySet] = field(default_factory=list)
    deployment: Optional[CcrDeployment] = None

    def parameter(self, name: str) -> Optional[CcrParameter]:
        """The parameter called ``name`` (the first, if the file sets it twice)."""
        return next((p for p in self.parameters if p.name == name), None)

    def property_set(self, name: str) -> Optional[CcrPropertySet]:
        """The adapter property set called ``name``."""
        return next((s for s in self.property_sets if s.name == name), None)


def ccr_beside(ccl_path: str) -> Optional[str]:
    """``FILE.ccr`` next to ``FILE.ccl`` when it exists, else None."""
    candidate = os.path.splitext(ccl_path)[0] + ".ccr"
    return candidate if os.path.isfile(candidate) else None


def read_ccr(path: str, sources: SourceCache) -> tuple[Optional[CcrFile], list[Diagnostic]]:
    """Read the .ccr at ``path``; its (password-masked) text is registered in ``sources``.

    Raises :class:`~ccl.syntax.project.UsageError` when the file cannot be read at all. Problems inside the file are
    diagnostics; the CcrFile is None only when the XML is malformed or refused.
    """
    return parse_ccr(read_bytes(path, ".ccr file"), path, sources)


def parse_ccr(data: bytes, path: str, sources: SourceCache) -> tuple[Optional[CcrFile], list[Diagnostic]]:
    """Parse the bytes of a .ccr called ``path`` (see :func:`read_ccr`)."""
    sources.add(path, redact_xml(data.decode("utf-8-sig", errors="replace")))
    try:
        root = parse_xml(data)
    except XmlError as exc:
        code = "CCL1302" if exc.refused else "CCL1301"
        return None, [Diagnostic(code, exc.message, Span(path, exc.line, exc.col))]
    reader = _Reader(path)
    ccr = reader.read(root)
    if ccr is not None:
        log.debug("read %s: %d parameters, clusters %r, %d bindings, %d property sets, options %s",
                  path, len(ccr.parameters), ccr.clusters, len(ccr.bindings), len(ccr.property_sets),
                  [o.name for o in ccr.deployment.options] if ccr.deployment else [])
    return ccr, reader.diagnostics


_KNOWN_CHILDREN = {
    "Configuration": {"Runtime", "Deployment"},
    "Runtime": {"Clusters", "Bindings", "Parameters", "AdaptersPropertySet"},
    "Deployment": {"Project"},
    "Project": {"Options", "Instances"},
}


class _Reader:
    """Walks the XML tree of a .ccr, building the dataclasses and collecting diagnostics."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.diagnostics: list[Diagnostic] = []

    def span(self, element: XmlElement) -> Span:
        return Span(self.path, element.line, element.col)

    def report(self, code: str, message: str, element: XmlElement) -> None:
        self.diagnostics.append(Diagnostic(code, message, self.span(element)))

    def children(self, element: XmlElement) -> list[XmlElement]:
        """The children in the ESP namespace (or none); unknown ones are warned about."""
        known = _KNOWN_CHILDREN.get(element.tag)
        out = []
        for child in element.children:
            if child.namespace not in ("", NAMESPACE):
                continue  # another vocabulary (an editor's annotations, ...): not ours to read
            if known is not None and child.tag not in known:
                self.report("CCL1304", f"element <{child.tag}> is not part of <{element.tag}> in a "
                            f"project configuration; it is ignored (expected "
                            f"{', '.join(f'<{k}>' for k in sorted(known))})", child)
                continue
            out.append(child)
        return out

    def text(self, element: Optional[XmlElement]) -> Optional[str]:
        return None if element is None else element.text.strip()

    def read(self, root: XmlElement) -> Optional[CcrFile]:
        if root.tag != "Configuration" or root.namespace not in ("", NAMESPACE):
            found = f"<{root.tag}>" + (f" in namespace '{root.namespace}'" if root.namespace else "")
            self.report("CCL1303", f"not an ESP project configuration: the root element is {found}, "
                        f"expected <Configuration xmlns=\"{NAMESPACE}\">", root)
            return None
        ccr = CcrFile(self.path)
        for section in self.children(root):
            if section.tag == "Runtime":
                self.read_runtime(section, ccr)
            elif section.tag == "Deployment":
                for project in self.children(section):
                    if ccr.deployment is not None:
                        self.report("CCL1306", "<Deployment> has a second <Project>; only the first "
                                    "is read", project)
                        continue
                    ccr.deployment = self.read_project(project)
        return ccr

    def read_runtime(self, runtime: XmlElement, ccr: CcrFile) -> None:
        for section in self.children(runtime):
            if section.tag == "Parameters":
                for element in section.iter("Parameter"):
                    self.read_parameter(element, ccr)
            elif section.tag == "Clusters":
                for element in section.iter("Cluster"):
                    ccr.clusters.append(self.read_cluster(element))
            elif section.tag == "Bindings":
                for element in section.iter("Binding"):
                    name = self.required_name(element)
                    if name is not None:
                        fields = {c.tag: c.text.strip() for c in element.children}
                        ccr.bindings.append(CcrBinding(name, fields, self.span(element)))
            elif section.tag == "AdaptersPropertySet":
                for element in section.iter("PropertySet"):
                    self.read_property_set(element, ccr)

    def required_name(self, element: XmlElement) -> Optional[str]:
        name = element.attrs.get("name", "").strip()
        if not name:
            self.report("CCL1305", f"<{element.tag}> needs a name attribute", element)
            return None
        return name

    def value_of(self, element: XmlElement) -> Optional[str]:
        """The value of a Parameter, Property or Option: a value attribute or the element's text."""
        attr = element.attrs.get("value")
        text = element.text.strip()
        if attr is not None and text and attr != text:
            self.report("CCL1305", f"<{element.tag} name=\"{element.attrs.get('name', '')}\"> has "
                        f"both a value attribute and a different text; give one", element)
            return None
        if attr is not None:
            return attr
        return text

    def read_parameter(self, element: XmlElement, ccr: CcrFile) -> None:
        name = self.required_name(element)
        if name is None:
            return
        value = self.value_of(element)
        if value is None:
            return
        first = ccr.parameter(name)
        if first is not None:
            self.report("CCL1306", f"parameter '{name}' is set twice (first at line "
                        f"{first.span.line}); remove one", element)
            return
        ccr.parameters.append(CcrParameter(name, value, self.span(element)))

    def read_cluster(self, element: XmlElement) -> CcrCluster:
        password = self.text(element.find("Password"))
        managers = []
        holder = element.find("Managers")
        for manager in (holder.iter("Manager") if holder is not None else ()):
            url = manager.text.strip()
            if url:
                managers.append(CcrValue(url, self.span(manager)))
        return CcrCluster(
            name=element.attrs.get("name", "").strip(),
            type=element.attrs.get("type", "").strip().lower(),
            username=self.text(element.find("Username")),
            password=Secret(password) if password is not None else None,
            managers=managers, span=self.span(element))

    def read_property_set(self, element: XmlElement, ccr: CcrFile) -> None:
        name = self.required_name(element)
        if name is None:
            return
        if ccr.property_set(name) is not None:
            self.report("CCL1306", f"property set '{name}' is defined twice; remove one", element)
            return
        props: list[CcrProperty] = []
        for prop in element.iter("Property"):
            pname = self.required_name(prop)
            value = self.value_of(prop) if pname is not None else None
            if pname is None or value is None:
                continue
            if any(p.name == pname for p in props):
                self.report("CCL1306", f"property '{pname}' is set twice in property set "
                            f"'{name}'; remove one", prop)
                continue
            props.append(CcrProperty(pname, Secret(value) if is_secret_name(pname) else value,
                                     self.span(prop)))
        ccr.property_sets.append(CcrPropertySet(name, props, self.span(element)))

    def read_project(self, project: XmlElement) -> CcrDeployment:
        deployment = CcrDeployment(ha=self.boolean(project, "ha", False), options=[], instances=[],
                                   span=self.span(project))
        for section in self.children(project):
            if section.tag == "Options":
                for option in section.iter("Option"):
                    name = self.required_name(option)
                    value = self.value_of(option) if name is not None else None
                    if name is None or value is None:
                        continue
                    if any(o.name == name for o in deployment.options):
                        self.report("CCL1306", f"option '{name}' is set twice; remove one", option)
                        continue
                    deployment.options.append(CcrOption(name, value, self.span(option)))
            elif section.tag == "Instances":
                for instance in section.iter("Instance"):
                    failover = instance.find("Failover")
                    affinities = instance.find("Affinities")
                    deployment.instances.append(CcrInstance(
                        failover=self.boolean(failover, "enable", False) if failover is not None
                        else False,
                        affinities=[CcrAffinity(dict(a.attrs), self.span(a))
                                    for a in (affinities.iter("Affinity") if affinities is not None
                                              else ())],
                        span=self.span(instance)))
        return deployment

    def boolean(self, element: XmlElement, attr: str, default: bool) -> bool:
        value = element.attrs.get(attr)
        if value is None:
            return default
        if value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        self.report("CCL1305", f"{attr}=\"{value}\" on <{element.tag}> must be true or false",
                    element)
        return default
