"""Built-in date/time and conversion functions beyond the core set of :mod:`ccl.splash.builtins`."""
from __future__ import annotations

from .builtins import Builtin

ENTRIES: tuple[Builtin, ...] = ()
