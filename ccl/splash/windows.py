"""The rows of a window as SPLASH code in a Flex sees them: ``W_stream`` and window iterators.

ESP declares, in a Flex's code, ``W_stream`` and ``W_iterator`` for each input window ``W`` (and
for the Flex's own output window). This module gives their values and functions (docs/runtime-flex.md):

- ``W_stream[rec]``: the row whose key equals ``rec``'s key fields, or null;
- ``W_stream{rec}``: a row whose fields equal ``rec``'s non-null fields, or null;
- ``for (r in W_stream [where col = value, ...]) ...``: every row (whose columns equal the values);
- ``getIterator(W_stream)``, ``getNext(it)`` (null at the end), ``resetIterator(it)``,
  ``deleteIterator(it)``: an iterator over the rows as they were when it was made.

A :class:`WindowView` reads the engine's live rows (``key -> {column: value}``) and hands out
read-only copies as records; rows come in the window's order (first insertion of each key). Views
and iterators belong to one handler run: kept in a variable across events, an iterator is closed.
"""
from __future__ import annotations

from typing import Iterator, Mapping, Optional, Sequence

from .types import ANY, Type
from .calls import Builtin
from .convert import from_python
from .values import Record, SplashError, a_kind

_new_record = Record.__new__

__all__ = ["WindowIterator", "WindowView", "window_records", "window_rows"]


class WindowView:
    """``W_stream``: the rows of window ``name`` (``rows``: key tuple -> row dict, or None for a
    stream, which holds no rows) with its key columns and column types."""

    splash_value = True  # passes through from_python unchanged

    def __init__(self, name: str, rows: Optional[Mapping[tuple, Mapping[str, object]]],
                 key: Sequence[str], types: Mapping[str, Type], splash_form: bool = False) -> None:
        self.name = name
        self.rows = rows if rows is not None else {}
        self.key = tuple(key)
        self.types = dict(types)
        # the caller vouches that every row holds exactly the columns of ``types``, in that order,
        # with values in SPLASH form for their types (an engine's rows): copied as they are
        self.splash_form = splash_form
        # column -> value -> the rows holding it (in window order), made on first use: only for a
        # view whose rows do not change while it is used (see :meth:`lasting`)
        self.groups: Optional[dict[str, dict]] = None
        # where columns (a tuple) -> (the first unknown column or None, the positions of the key
        # columns in them when they hold the whole key, else None): see window_records
        self.plans: dict[tuple, tuple] = {}

    def lasting(self) -> "WindowView":
        """This view, marked as one that the caller keeps for several handler runs over rows that
        do not change meanwhile (it makes a new view when they do): a ``where`` over a column
        that is not the whole key then finds its rows through an index of that column, made on
        first use, instead of by reading every row."""
        self.groups = {}
        return self

    def candidates(self, column: str, value: object) -> list:
        """The rows (dicts) whose ``column`` may equal ``value``, in window order: those the index
        of a lasting view holds under ``value`` (equal values hash alike; the caller still
        compares), else every row."""
        groups = self.groups
        if groups is None:
            return list(self.rows.values())
        index = groups.get(column)
        try:
            if index is None:
                index = {}
                for row in self.rows.values():
                    a = row.get(column)
                    if a is not None:
                        found = index.get(a)
                        if found is None:
                            index[a] = [row]
                        else:
                            found.append(row)
                groups[column] = index
            return index.get(value, [])
        except TypeError:  # an unhashable value: every row, compared one by one
            return list(self.rows.values())

    def __repr__(self) -> str:
        return f"{self.name}_stream"

    def __reduce__(self):  # a view of one handler run: a stored copy holds no rows
        return (WindowView, (self.name, None, self.key, self.types))

    def record(self, row: Mapping[str, object]) -> Record:
        """A read-only record of one row."""
        if self.splash_form and type(row) is dict:
            rec = _new_record(Record)
            dict.update(rec, row)
            rec.types, rec.key_fields = self.types, self.key  # (records share types dicts)
            rec.readonly, rec.source = True, self.name  # type: ignore[attr-defined]
            return rec
        rec = Record(((c, from_python(row.get(c), self.types.get(c, ANY))) for c in self.types),
                     types=dict(self.types), key_fields=self.key)
        rec.readonly, rec.source = True, self.name  # type: ignore[attr-defined]
        return rec

    def by_key(self, probe: object) -> Optional[Record]:
        """``W_stream[probe]``: the row with ``probe``'s key, or null."""
        if not isinstance(probe, dict) and not isinstance(probe, Mapping):  # (dict's test is cheap)
            raise SplashError(f"{self!r}[...] needs a record with the key of {self.name}, not "
                              f"{a_kind(probe)}")
        missing = [k for k in self.key if k not in probe]
        if missing:
            raise SplashError(f"{self!r}[...]: the record has no key field '{missing[0]}'")
        row = self.rows.get(tuple(probe[k] for k in self.key))
        return None if row is None else self.record(row)

    def find(self, probe: object) -> Optional[Record]:
        """``W_stream{probe}``: the first row whose columns equal ``probe``'s non-null fields."""
        if not isinstance(probe, Mapping):
            raise SplashError(f"{self!r}{{...}} needs a record, not {a_kind(probe)}")
        wanted = {c: v for c, v in probe.items() if v is not None}
        for row in window_rows(self, wanted):
            return row
        return None


def window_rows(view: WindowView, equal: Mapping[str, object]) -> Iterator[Record]:
    """The rows of ``view`` whose columns equal ``equal`` (a null value matches nothing), read
    from a snapshot so that the code may change what it reads meanwhile."""
    unknown = [c for c in equal if c not in view.types]
    if unknown:
        raise SplashError(f"{view.name} has no column '{unknown[0]}'")
    if any(v is None for v in equal.values()):
        return
    tests = list(equal.items())
    if view.key and set(view.key) <= set(equal):  # the key: one lookup
        row = view.rows.get(tuple(equal[k] for k in view.key))
        candidates = [row] if row is not None else []
    elif tests:  # rows that may hold the first column's value (every row but in a lasting view)
        candidates = view.candidates(*tests[0])
    else:
        candidates = list(view.rows.values())
    if len(tests) == 1:  # one column (the common where): _same inline
        (c, v), = tests
        v_bool = type(v) is bool
        for row in candidates:
            a = row.get(c)
            if a is not None and a == v and (type(a) is bool) == v_bool:
                yield view.record(row)
        return
    for row in candidates:
        if all(_same(row.get(c), v) for c, v in tests):
            yield view.record(row)


def window_records(view: WindowView, columns: tuple, values: list) -> list:
    """``list(window_rows(view, dict(zip(columns, values))))`` for a view whose rows are in SPLASH
    form (``splash_form``: making their records cannot fail, so reading them all at once changes
    nothing the code can see) and ``columns`` without repeats: the same records and errors, with
    what depends on the columns only (unknown ones, whether they hold the key) found once per
    view and columns."""
    plan = view.plans.get(columns)
    if plan is None:
        unknown = next((c for c in columns if c not in view.types), None)
        key = view.key
        where = {c: i for i, c in enumerate(columns)}
        positions = tuple(where[k] for k in key) if key and set(key) <= set(columns) else None
        plan = view.plans[columns] = (unknown, positions)
    unknown, positions = plan
    if unknown is not None:
        raise SplashError(f"{view.name} has no column '{unknown}'")
    for v in values:
        if v is None:
            return []
    if positions is not None:  # the key: one lookup
        row = view.rows.get(tuple([values[i] for i in positions]))
        candidates = [row] if row is not None else []
    elif columns:
        candidates = view.candidates(columns[0], values[0])
    else:
        candidates = list(view.rows.values())
    record = view.record
    if len(columns) == 1:  # one column (the common where): _same inline
        c, v = columns[0], values[0]
        v_bool = type(v) is bool
        out = []
        for row in candidates:
            a = row.get(c)
            if a is not None and a == v and (type(a) is bool) == v_bool:
                out.append(record(row))
        return out
    tests = list(zip(columns, values))
    return [record(row) for row in candidates if all(_same(row.get(c), v) for c, v in tests)]


def _same(a: object, b: object) -> bool:
    return a is not None and a == b and (type(a) is bool) == (type(b) is bool)


class WindowIterator:
    """``getIterator(W_stream)``: the rows of a window as they were when it was made."""

    splash_value = True

    def __init__(self, view: Optional[WindowView]) -> None:
        self.view = view
        self.rows = list(view.rows.values()) if view is not None else []
        self.position = 0

    def __repr__(self) -> str:
        return f"iterator({self.view!r})" if self.view is not None else "iterator(closed)"

    def __reduce__(self):  # kept past its handler run, an iterator is closed
        return (WindowIterator, (None,))

    def next(self) -> Optional[Record]:
        """The next row, or null at the end."""
        if self.view is None:
            raise SplashError("getNext(): the iterator was deleted, or made in an earlier event")
        if self.position >= len(self.rows):
            return None
        self.position += 1
        return self.view.record(self.rows[self.position - 1])

    def reset(self) -> None:
        """Start again from the first row (of the same snapshot)."""
        self.position = 0

    def close(self) -> None:
        self.view, self.rows = None, []


def _view(fn: str, v: object) -> WindowView:
    if not isinstance(v, WindowView):
        raise SplashError(f"{fn}() needs a window (W_stream), not {a_kind(v)}")
    return v


def _iterator(fn: str, v: object) -> WindowIterator:
    if not isinstance(v, WindowIterator):
        raise SplashError(f"{fn}() needs a window iterator (from getIterator), not {a_kind(v)}")
    return v


def _get_iterator(ctx: object, view: object) -> WindowIterator:
    return WindowIterator(_view("getIterator", view))


def _get_next(ctx: object, it: object) -> Optional[Record]:
    return _iterator("getNext", it).next()


def _reset_iterator(ctx: object, it: object) -> None:
    _iterator("resetIterator", it).reset()


def _delete_iterator(ctx: object, it: object) -> None:
    _iterator("deleteIterator", it).close()


def entries() -> list[Builtin]:
    """The built-ins of window iterators."""
    return [Builtin("getiterator", 1, 1, _get_iterator), Builtin("getnext", 1, 1, _get_next),
            Builtin("resetiterator", 1, 1, _reset_iterator),
            Builtin("deleteiterator", 1, 1, _delete_iterator)]
