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



class Arrivals:
    """The files of a project's inputs numbered in the order they arrived, across inputs: an
    append-only :class:`Manifest` of ``ELEMENT/NAME`` lines in ``directory`` (element names hold
    no ``/``, nor do file names), a file's number its line's place.

    A batch's new files are appended in arrival order: by modification time, kept in name order
    within an input (a file's time counts as the latest of its own and those of the input's files
    named before it), then by the input's place in the batch and the name. A replayed batch finds
    its files numbered already, so its rows get the same sequence numbers. Appends are locked
    (``flock``), since queries of single inputs may number files at the same time."""

    def __init__(self, directory: str) -> None:
        self.manifest = Manifest(directory)
        self._numbers: dict[str, int] = {}
        self._read = 0  # bytes of the manifest read into ``_numbers``

    def numbers(self, batch: Sequence[tuple[str, str, Sequence[str]]]) -> dict[str, dict[str, int]]:
        """Per input element of ``batch`` (``(element, directory, file names)``, the inputs in
        their order in the project), the numbers of its files (by name), new ones appended."""
        import fcntl

        with open(self.manifest.path, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._refresh()
            new: list[tuple[int, int, str, str]] = []
            for position, (element, directory, names) in enumerate(batch):
                latest = 0
                for name in sorted(names):
                    if f"{element}/{name}" in self._numbers:
                        continue
                    try:
                        latest = max(latest, os.stat(os.path.join(directory, name)).st_mtime_ns)
                    except OSError:  # gone since it was listed: its rows are read as none
                        pass
                    new.append((latest, position, name, element))
            new.sort()
            self.manifest.append([f"{element}/{name}" for _, _, name, element in new])
            self._refresh()
        return {element: {name: self._numbers[f"{element}/{name}"] for name in names}
                for element, _, names in batch}

    def _refresh(self) -> None:
        """Read the lines appended since the last read (the manifest only grows; a torn last line
        from a crash is cut by the next append, before any line is added)."""
        with open(self.manifest.path, "rb") as f:
            f.seek(self._read)
            data = f.read()
        complete = data.rfind(b"\n") + 1
        for line in data[:complete].decode("utf-8").split("\n")[:-1]:
            self._numbers[line] = len(self._numbers)
        self._read += complete
