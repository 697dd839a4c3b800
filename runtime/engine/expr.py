"""Plan expressions evaluated in Python, by the SPLASH interpreter (no eval/exec).

A plan carries each expression as a SPLASH tree in JSON form (docs/plan.md). Rows are mappings of
column to value, passed per source alias; aggregate results and other names the runtime binds are
passed as variables.
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping, Optional, Sequence

from ccl import nodes as n
from ccl.splash import Declarations, Interpreter, SplashError, as_type
from ccl.splash.convert import cast, from_python, to_text

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
        self._types = {alias: {c: _type(t) for c, t in cols.items()} for alias, cols in types.items()}
        self._shadowing = set(variables or {}) | set(declarations.values if declarations else ())
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

    def set_row_id(self, seq: Optional[int]) -> None:
        """What ``getrowid()`` gives from now on: the sequence number of the input row at hand."""
        self._interp.row_id = seq

    def compile(self, expr: object) -> Compiled:
        """A function ``f(rows, variables={})`` giving the value of ``expr`` (its JSON form).

        It raises :class:`SplashError` when the expression fails (the caller makes the row a bad
        record)."""
        node = n.from_json(expr)
        interp = self._interp

        def run(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            return interp.evaluate(node, rows, variables)
        if isinstance(node, n.Var):  # a value the runtime binds (an aggregate's result)
            name = node.name.name

            def bound(rows: Rows, variables: Mapping[str, object] = {}) -> object:
                if name not in variables:
                    return run(rows, variables)
                v = variables[name]
                return v if _is_plain(v) else from_python(v)
            return bound
        ref = self._column(node)
        if ref is None:
            return run
        # The common case, a column of a source: the value the interpreter would read, without
        # making a SPLASH record of every row (the interpreter runs when anything is unusual).
        alias, column, ctype = ref
        plain = _PLAIN.get(ctype.name)  # type: ignore[attr-defined]

        def read(rows: Rows, variables: Mapping[str, object] = {}) -> object:
            row = rows.get(alias)
            if alias in variables or type(row) is not dict or column not in row:
                return run(rows, variables)
            v = row[column]
            return v if type(v) is plain and _is_plain(v) else from_python(v, ctype)
        return read

    def _column(self, node: n.Node) -> Optional[tuple[str, str, object]]:
        if not (isinstance(node, n.FieldAccess) and isinstance(node.base, n.Var)):
            return None
        alias, column = node.base.name.name, node.field.name
        ctype = self._types.get(alias, {}).get(column)
        if ctype is None or alias in self._shadowing:
            return None
        return alias, column, ctype


@functools.lru_cache(maxsize=None)
def _type(text: str) -> object:
    return as_type(text)


# Column types whose values of this Python type are already in SPLASH form (from_python and cast
# return them unchanged): a hot path that skips both.
_PLAIN = {"string": str, "float": float, "boolean": bool, "integer": int}


def _is_plain(v: object) -> bool:
    """Whether ``v`` is a str, float, bool or 32-bit int (a SPLASH value as it is)."""
    t = type(v)
    return t is str or t is float or t is bool or (t is int and -2**31 <= v < 2**31)  # type: ignore[operator]


def coerce_row(values: Mapping[str, object], columns: Sequence[Sequence[str]]) -> dict[str, object]:
    """``values`` cast to the declared column types, in column order (missing columns are null)."""
    out = {}
    for name, t in columns:
        v = values.get(name)
        ctype = _type(t)
        if ctype.name in ("any", "null"):  # a column of no known type is carried as text (runtime.types)
            out[name] = None if v is None else to_text(v)
            continue
        out[name] = v if type(v) is _PLAIN.get(ctype.name) and _is_plain(v) else cast(v, ctype)  # type: ignore[attr-defined]
    return out
