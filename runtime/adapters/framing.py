"""Cutting a byte stream (a socket's) into complete records, so that an inbox file never ends in
the middle of one: CSV records end at a line feed outside quotes; JSON values at a line feed where
no object or array is open (a line feed cannot stand inside a JSON string). Text that never
closes is cut at :data:`MAX_PENDING` bytes (it becomes bad records, not a growing buffer)."""
from __future__ import annotations

import re

MAX_PENDING = 16 << 20

_CSV_TOKENS = re.compile(rb'["\n]')
_STRING = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'  # a JSON string (no line feed in it)
_JSON_TOKENS = re.compile(_STRING + rb'|[\[\]{}\n]')
_NOT_A_VALUE_LINE = re.compile(rb'^(?![ \t]*[{\[][^\n]*[}\]][ \t\r]*$)[^\n]+$', re.M)


class Framer:
    """Feed bytes in, get complete records out: ``feed`` returns (bytes of whole records, how
    many), keeping the rest; ``end`` returns what is left when the stream ends."""

    def __init__(self) -> None:
        self._pending = b""

    def _cut(self, data: bytes) -> int:
        """The length of the longest prefix of ``data`` made of whole records."""
        raise NotImplementedError

    def feed(self, data: bytes) -> tuple[bytes, int]:
        data = self._pending + data
        cut = self._cut(data)
        if cut == 0 and len(data) > MAX_PENDING:
            last = data.rfind(b"\n")
            cut = last + 1 if last >= 0 else len(data)
        self._pending = data[cut:]
        done = data[:cut]
        return done, done.count(b"\n")

    def end(self) -> tuple[bytes, int]:
        rest, self._pending = self._pending, b""
        if rest.strip() == b"":
            return b"", 0
        if not rest.endswith(b"\n"):
            rest += b"\n"
        return rest, rest.count(b"\n")


class CsvFramer(Framer):
    """CSV records: a quoted field may hold line feeds."""

    def __init__(self) -> None:
        super().__init__()

    def _cut(self, data: bytes) -> int:
        if b'"' not in data:
            return data.rfind(b"\n") + 1
        quoted = False
        cut = 0
        for m in _CSV_TOKENS.finditer(data):
            if m.group() == b'"':
                quoted = not quoted
            elif not quoted:
                cut = m.end()
        return cut


class JsonFramer(Framer):
    """JSON values, one a line or spread over lines (pretty-printed)."""

    def _cut(self, data: bytes) -> int:
        last = data.rfind(b"\n")
        if last < 0:
            return 0
        # the common case, a value a line: every line up to the last line feed starts with an
        # opening bracket and ends with a closing one. In valid JSON a line inside a value spread
        # over lines follows one ending in ',', ':' or an opening bracket, so each such line is
        # a whole value (invalid JSON becomes bad records either way).
        if _NOT_A_VALUE_LINE.search(data, 0, last + 1) is None:
            return last + 1
        depth = 0
        cut = 0
        for m in _JSON_TOKENS.finditer(data, 0, last + 1):
            t = m.group()
            if t == b"\n":
                if depth <= 0:
                    depth = 0
                    cut = m.end()
            elif t in (b"{", b"["):
                depth += 1
            elif t in (b"}", b"]"):
                depth -= 1
        return cut
