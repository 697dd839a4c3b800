"""A small, safe XML reader for project configuration files.

It is the standard library's expat parser with everything dangerous refused: a document with a
DOCTYPE (and so any entity declaration, internal or external, and any external DTD) is rejected as
soon as the declaration starts, before an entity can be defined or expanded, and expat is told never
to load parameter entities or external entities. Unlike ``xml.etree.ElementTree`` it keeps the line
and column of every element, which the diagnostics need.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, NoReturn, Optional
from xml.parsers import expat

_REFUSED = "{} is not allowed in a project configuration (DTDs and entities are refused for safety)"
_NS_SEP = "\x1f"  # expat joins namespace URI and local name with this (never valid in a name)


class XmlError(Exception):
    """The document is not well-formed XML, or uses a feature refused for safety."""

    def __init__(self, message: str, line: int, col: int, refused: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col
        self.refused = refused


@dataclass
class XmlElement:
    """One element: local name, namespace URI ('' when none), attributes, text, children, position.

    ``text`` is all character data directly inside the element (not inside its children).
    ``line`` and ``col`` are 1-based and point at the element's ``<``.
    """

    tag: str
    namespace: str
    attrs: dict[str, str]
    line: int
    col: int
    text: str = ""
    children: list["XmlElement"] = field(default_factory=list)

    def find(self, tag: str) -> Optional["XmlElement"]:
        """The first child with this local name, or None."""
        return next(self.iter(tag), None)

    def iter(self, tag: str) -> Iterator["XmlElement"]:
        """The children with this local name, in document order."""
        return (child for child in self.children if child.tag == tag)


def _split(name: str) -> tuple[str, str]:
    if _NS_SEP in name:
        uri, local = name.split(_NS_SEP, 1)
        return uri, local
    return "", name


def parse_xml(data: bytes) -> XmlElement:
    """Parse a whole document and return its root element; raises :class:`XmlError`.

    DOCTYPE declarations, entity declarations and external entity references are refused
    (``XmlError.refused`` is then True). References to undefined entities are errors of expat itself.
    """
    parser = expat.ParserCreate(namespace_separator=_NS_SEP)
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[XmlElement] = []
    texts: list[list[str]] = []
    root: list[XmlElement] = []

    def position() -> tuple[int, int]:
        return parser.CurrentLineNumber, parser.CurrentColumnNumber + 1

    def refuse(what: str) -> NoReturn:
        line, col = position()
        raise XmlError(_REFUSED.format(what), line, col, refused=True)

    def start(name: str, attrs: dict[str, str]) -> None:
        line, col = position()
        ns, local = _split(name)
        element = XmlElement(local, ns, {_split(k)[1]: v for k, v in attrs.items()}, line, col)
        if stack:
            stack[-1].children.append(element)
        else:
            root.append(element)
        stack.append(element)
        texts.append([])

    def end(name: str) -> None:
        element = stack.pop()
        element.text = "".join(texts.pop())

    def chars(data: str) -> None:
        if texts:
            texts[-1].append(data)

    def doctype(*_args: object) -> None:
        at = data.find(b"<!DOCTYPE")  # point at the declaration, not where expat is inside it
        if at >= 0:
            line = data.count(b"\n", 0, at) + 1
            col = at - (data.rfind(b"\n", 0, at) + 1) + 1
            raise XmlError(_REFUSED.format("a DOCTYPE declaration"), line, col, refused=True)
        refuse("a DOCTYPE declaration")

    def entity(*_args: object) -> None:
        refuse("an entity declaration")

    def external(*_args: object) -> int:
        refuse("an external entity")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.UnparsedEntityDeclHandler = entity
    parser.ExternalEntityRefHandler = external
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise XmlError(expat.ErrorString(exc.code), exc.lineno, exc.offset + 1) from None
    if not root:  # expat reports an empty document itself; kept as a guard
        raise XmlError("no element found", 1, 1)
    return root[0]
