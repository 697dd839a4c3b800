"""Secret values (passwords from a .ccr): masked wherever they are printed, formatted or logged."""
from __future__ import annotations

import re

MASK = "****"


class Secret:
    """A string that never shows itself: ``str``, ``repr`` and ``format`` give ``****``.

    Call :meth:`reveal` at the one place that really needs the value. A Secret is not JSON
    serialisable and cannot be pickled, so it cannot leak into a generated file by accident.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The real value."""
        return self._value

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __format__(self, spec: str) -> str:
        return format(MASK, spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple:
        raise TypeError("a Secret cannot be pickled")


_SECRET_NAME = re.compile(r"passw(or)?d|secret|credential|token|apikey|api_key", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a property called ``name`` holds a secret (password, secret, token, API key, ...)."""
    return bool(_SECRET_NAME.search(name))


_START_TAG = re.compile(r"<(?:[\w.-]+:)?(?P<tag>[\w.-]+)(?P<attrs>[^<>]*?)(?P<empty>/?)>")
_NAME_ATTR = re.compile(r"\bname\s*=\s*([\"'])(?P<name>.*?)\1")
_VALUE_ATTR = re.compile(r"(\bvalue\s*=\s*)([\"'])(.*?)\2", re.DOTALL)


def _masked(text: str) -> str:
    return MASK + "\n" * text.count("\n")


def redact_xml(text: str) -> str:
    """``text`` of a .ccr with every secret replaced by ``****``, line breaks kept so that line
    numbers still match: the content of ``Password`` elements, and the text or ``value`` attribute of
    any element whose ``name`` attribute says it is secret (an adapter property ``password``, ...).

    Used for the source lines printed under diagnostics. The text of a secret element is masked up to
    the next ``<`` (or to the end of the line when the file ends first), CDATA included, so even a
    malformed file does not show its password.
    """
    out: list[str] = []
    pos = 0
    for match in _START_TAG.finditer(text):
        if match.start() < pos:
            continue
        name = _NAME_ATTR.search(match.group("attrs"))
        secret = match.group("tag") == "Password" or bool(name and is_secret_name(name.group("name")))
        if not secret:
            continue
        out.append(text[pos:match.start()])
        tag = match.group(0)
        out.append(_VALUE_ATTR.sub(lambda m: m.group(1) + m.group(2) + _masked(m.group(3)) + m.group(2),
                                   tag))
        pos = match.end()
        if match.group("empty"):
            continue
        if text.startswith("<![CDATA[", pos):
            end = text.find("]]>", pos)
            end = len(text) if end < 0 else end + 3
        else:
            end = text.find("<", pos)
            if end < 0:
                end = text.find("\n", pos)
                end = len(text) if end < 0 else end
        out.append(_masked(text[pos:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)
