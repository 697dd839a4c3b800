"""Loading a CCL project from disk: the main file and the files it IMPORTs, parsed, with diagnostics.

I/O problems with the file the user named (missing, a directory) raise :class:`UsageError` (one
line, exit code 2). Problems with imported files are diagnostics at the IMPORT statement. A file
that is not UTF-8 is read as Windows-1252 with a warning (CCL1005).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Optional

from . import nodes as n
from ..diagnostics import Diagnostic, SourceCache, sort_key
from .parser import parse_text


class UsageError(Exception):
    """A problem with how ccl was called or with the file it was given (exit code 2)."""


@dataclass
class LoadedProject:
    """A parsed project: every file's AST (main file first, then imports in load order)."""

    main: str
    files: dict[str, n.Project] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: SourceCache = field(default_factory=SourceCache)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    @property
    def statements(self) -> list[n.Node]:
        """All statements, each imported file's in place of its IMPORT (first import only)."""
        out: list[n.Node] = []
        self._expand(self.main, set(), out)
        return out

    def _expand(self, name: str, seen: set[str], out: list[n.Node]) -> None:
        """Append the statements of file ``name`` to ``out``, each IMPORT expanded in place."""
        if name in seen or name not in self.files:
            return
        seen.add(name)
        for stmt in self.files[name].statements:
            if isinstance(stmt, n.Import):
                self._expand(_import_target(name, stmt.path), seen, out)
            elif isinstance(stmt, n.CreateModule):
                out.append(replace(stmt, body=self._module_body(name, stmt.body, [name])))
            else:
                out.append(stmt)

    def _module_body(self, name: str, body: list, stack: list[str]) -> list:
        """A module's statements with each IMPORT in it replaced by the file's statements: the
        imported schemas and functions are the module's own (every module that imports a file
        gets its statements)."""
        out: list = []
        for stmt in body:
            target = _import_target(name, stmt.path) if isinstance(stmt, n.Import) else None
            if target is None:
                out.append(stmt)
            elif target in self.files and target not in stack:
                out += self._module_body(target, self.files[target].statements, stack + [target])
        return out


def read_bytes(path: str, kind: str) -> bytes:
    """The bytes of a file the user named; raises UsageError with a one-line reason.

    ``kind`` names what the file should be ("CCL file", ".ccr file") in the message for a directory.
    """
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a {kind}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # a NUL character in the name
        raise UsageError(f"{path!r}: not a file name (it holds a NUL character)") from None


def read_source(path: str) -> str:
    """The text of a source file; raises UsageError with a one-line reason when it cannot be read."""
    data = read_bytes(path, "CCL file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: cannot read: not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                         f"offset {exc.start})") from None


def read_ccl_source(path: str) -> tuple[str, Optional[Diagnostic]]:
    """The text of a CCL file, and a CCL1005 warning when it is not UTF-8: then it is read as
    Windows-1252 (Latin-1 for the five bytes that code page leaves undefined), the encoding
    Windows editors used for ESP projects. Raises UsageError when the file cannot be read."""
    data = read_bytes(path, "CCL file")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        at = exc.start
        before = data[:at].decode("utf-8-sig", "replace")
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
    text = data.removeprefix(b"\xef\xbb\xbf").decode("cp1252", "surrogateescape")
    warning = Diagnostic("CCL1005", f"the file is not UTF-8 (byte 0x{data[at]:02x}): read as "
                                    "Windows-1252", n.Span(path, line, col))
    return text.translate(_CP1252_UNDEFINED), warning


_CP1252_UNDEFINED = {0xDC00 + b: b for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}  # surrogate -> Latin-1


def _import_target(importer: str, path: str) -> str:
    return os.path.normpath(os.path.join(os.path.dirname(importer), path))


def load_project(path: str) -> LoadedProject:
    """Parse ``path`` and, recursively, the files it imports."""
    project = LoadedProject(main=path)
    text, warning = read_ccl_source(path)
    if warning is not None:
        project.diagnostics.append(warning)
    _load(project, path, text, stack=[])
    project.diagnostics.sort(key=sort_key)
    return project


def load_text(text: str, name: str = "<string>") -> LoadedProject:
    """Parse CCL given as text (imports are resolved relative to the current directory)."""
    project = LoadedProject(main=name)
    _load(project, name, text, stack=[])
    project.diagnostics.sort(key=sort_key)
    return project


def _load(project: LoadedProject, name: str, text: str, stack: list[str]) -> None:
    project.sources.add(name, text)
    tree, diags = parse_text(text, name)
    project.files[name] = tree
    project.diagnostics.extend(diags)
    for stmt in tree.statements:
        if isinstance(stmt, n.Import):
            _load_import(project, name, stmt, stack + [name])
        elif isinstance(stmt, n.CreateModule):
            for inner in stmt.body:
                if isinstance(inner, n.Import):
                    _load_import(project, name, inner, stack + [name])


def _load_import(project: LoadedProject, importer: str, stmt: n.Import, stack: list[str]) -> None:
    target = _import_target(importer, stmt.path)
    if target in stack:
        chain = " -> ".join(stack[stack.index(target):] + [target])
        project.diagnostics.append(Diagnostic("CCL1202", f"import cycle: {chain}", stmt.span))
        return
    if target in project.files:
        return
    try:
        text, warning = read_ccl_source(target)
    except UsageError as exc:
        project.diagnostics.append(Diagnostic("CCL1201", f"cannot import '{stmt.path}': {exc}",
                                              stmt.span))
        return
    if warning is not None:
        project.diagnostics.append(warning)
    _load(project, target, text, stack)
