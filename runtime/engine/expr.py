"""Plan expressions evaluated in Python, by the SPLASH interpreter (no eval/exec).

A plan carries each expression as a SPLASH tree in JSON form (docs/plan.md). Rows are mappings of
column to value, passed per source alias; aggregate results and other names the runtime binds are
passed as variables.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from ccl import nodes as n
from ccl.splash import Declarations, Interpreter, SplashError, as_type
from ccl.splash.convert import cast

Rows = Mapping[str, Mapping[str, object]]
Compiled = Callable[..., object]

__all__ = ["Expressions", "SplashError", "coerce_row"]


class Expressions:
    """Compiles plan expressions once and evaluates them on rows.

    ``variables`` are names every expression may read (``<target>_partitions``, globals);
    ``source_types`` gives each alias's column types (CCL type text), so that values are typed as
    declared (a whole number in a ``float`` column is a float).
    """

    def __init__(self, variables: Optional[Mapping[str, object]] = None,
                 source_types: Optional[Mapping[str, Sequence[Sequence[str]]]] = None,
                 declarations: Optional[Declarations] = None) -> None:
        types = {alias: {name: t for name, t in cols} for alias, cols in (source_types or {}).items()}
        if declarations is not None:
            # Plan globals and the element's local DECLARE (runtime/engine/cache.py): variables
            # read from the instance's store once bound (see bind), functions callable.
            self._interp = Interpreter(declarations, constants=set(variables or {}),
                                       global_types={}, source_types=types)
        else:
            self._interp = Interpreter(dict(variables or {}), constants=set(variables or {}),
                                       source_types=types)

    def bind(self, store: Optional[dict]) -> None:
        """Read and write DECLAREd variables in ``store`` (one instance's) from now on."""
        self._interp.bind(store)

    def compile(self, expr: object) -> Compiled:
        """A function ``f(rows, variables={})`` giving the value of ``expr`` (its JSON form).

        It raises :class:`SplashError` when the expression fails (the caller makes the row a bad
        record)."""
        node = n.from_json(expr)
        interp = self._interp

        def run(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            return interp.evaluate(node, rows, variables)
        return run


def coerce_row(values: Mapping[str, object], columns: Sequence[Sequence[str]]) -> dict[str, object]:
    """``values`` cast to the declared column types, in column order (missing columns are null)."""
    return {name: cast(values.get(name), as_type(t)) for name, t in columns}
