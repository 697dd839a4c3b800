"""Which files an input adapter reads, in which order, and the manifest that keeps the order."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FileSpec:
    """Where an input adapter reads: ``dir`` and either one ``file`` or a glob ``pattern``
    (neither: every file of ``dir``)."""

    dir: str
    file: str | None = None
    pattern: str | None = None



def wanted(spec: FileSpec, name: str) -> bool:
    """Whether a file called ``name`` in ``spec.dir`` is one of ``spec``'s input files: the named
    file, or one matching the pattern; hidden ``.x``/``_x`` names and ``*.tmp`` (files being
    written) are never taken."""
    if spec.file:
        return name == spec.file
    return (not name.startswith((".", "_")) and not name.endswith(".tmp")
            and (not spec.pattern or any(fnmatch.fnmatchcase(name, p) for p in _braces(spec.pattern))))


def _braces(pattern: str) -> list[str]:
    """A glob's ``{a,b}`` alternatives spelled out (Java's globs have them, fnmatch does not)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    return [alt for part in m.group(1).split(",")
            for alt in _braces(pattern[:m.start()] + part + pattern[m.end():])]


def list_new_files(spec: FileSpec, known: Iterable[str]) -> list[str]:
    """Names of complete, not yet known files of ``spec`` (see :func:`wanted`), sorted."""
    seen = set(known)
    if spec.file:
        names = [spec.file] if os.path.isfile(os.path.join(spec.dir, spec.file)) else []
    else:
        try:
            names = [e.name for e in os.scandir(spec.dir) if e.is_file()]
        except FileNotFoundError:
            names = []
        names = [nm for nm in names if wanted(spec, nm)]
    return sorted(nm for nm in names if nm not in seen)


class Manifest:
    """An append-only list of discovered file names, one per line, in ``DIR/files.txt``."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "files.txt")
        os.makedirs(directory, exist_ok=True)

    def read(self) -> list[str]:
        """The complete lines (a torn last line from a crash is not a name)."""
        try:
            with open(self.path, encoding="utf-8", newline="") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        return data.split("\n")[:-1]

    def append(self, names: Sequence[str]) -> None:
        """Add ``names`` after the complete lines, durably."""
        if not names:
            return
        with open(self.path, "a+b") as f:
            f.seek(0)
            data = f.read()
            good = data.rfind(b"\n") + 1
            if good != len(data):
                f.truncate(good)
            f.seek(0, os.SEEK_END)
            f.write("".join(nm + "\n" for nm in names).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())

