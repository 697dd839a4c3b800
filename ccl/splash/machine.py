"""The run-time state of SPLASH code compiled to closures, and the operations on containers.

Every compiled expression is ``ev(m, f) -> value`` and every statement ``run(m, f) -> signal``:
``m`` is the :class:`Machine` of the current call (step budget, call depth, globals, clock),
``f`` the :class:`Frame` of the running block or function (its scopes, the input rows it sees, the
value it returns). A statement's signal is None (go on), BREAK, CONTINUE or RETURN; ``exit``
raises :class:`ExitSignal`. Each statement and operator counts one step: the closures do what
:meth:`Machine.tick` does inline (``m.steps += 1``, then :meth:`Machine.exhausted` past the limit),
which saves a call per step.
"""
from __future__ import annotations

import datetime as dt
from typing import Callable, Optional

from ..syntax import nodes as n
from .types import ANY, Type
from .convert import SAME_KIND, coerce
from .values import (BudgetExhausted, Dictionary, Long, Record, RecordKey, SplashError, a_kind,
                     dictionary_key, is_integral)
from .windows import WindowView

BREAK, CONTINUE, RETURN = "break", "continue", "return"
OPCODES = {"insert": 1, "update": 3, "delete": 5, "upsert": 7, "safedelete": 13}

Expr = Callable[["Machine", "Frame"], object]
Stmt = Callable[["Machine", "Frame"], Optional[str]]


class ExitSignal(Exception):
    """``exit;`` ends the whole call."""


class Cell:
    """A variable: its value, declared type, and whether it is a (read-only) parameter."""

    __slots__ = ("value", "type", "const")

    def __init__(self, value: object, type_: Type = ANY, const: bool = False) -> None:
        self.value = value
        self.type = type_
        self.const = const


class Frame:
    """The scopes of one running block or function call, the input rows it sees, its result."""

    __slots__ = ("scopes", "sources", "ret")

    def __init__(self, scopes: list[dict[str, Cell]], sources: Optional[dict[str, Record]] = None) -> None:
        self.scopes = scopes
        self.sources = sources
        self.ret: object = None


SEQUENCE = "#nextval"  # the global holding nextval()'s count (not a name a program can use)


class Machine:
    """The state of one call: steps used, call depth, global variables, clock and output."""

    __slots__ = ("steps", "limit", "depth", "max_depth", "globals", "clock", "printer", "_now", "emit",
                 "emit_copies", "row_id")

    def __init__(self, limit: int, max_depth: int, globals_: dict[str, Cell],
                 clock: Callable[[], dt.datetime], printer: Optional[Callable[[str], None]],
                 row_id: Optional[int] = None) -> None:
        self.steps = 0
        self.limit = limit
        self.depth = 0
        self.max_depth = max_depth
        self.globals = globals_
        self.clock = clock
        self.printer = printer
        self._now: Optional[dt.datetime] = None
        self.row_id = row_id  # the sequence number of the input row being processed, if any
        # Where ``output rec;`` sends records (a Flex handler's run); None elsewhere.
        self.emit: Optional[Callable[[Record], None]] = None
        # Whether ``emit`` copies what it keeps of a record (then it gets the record itself).
        self.emit_copies = False

    def tick(self) -> None:
        """Count one step; raise :class:`BudgetExhausted` past the limit. (Compiled statements and
        operators do the same inline, calling :meth:`exhausted` past the limit.)"""
        self.steps += 1
        if self.steps > self.limit:
            self.exhausted()

    def exhausted(self) -> None:
        """Raise :class:`BudgetExhausted`: the steps are used up."""
        raise BudgetExhausted(f"step budget of {self.limit} exhausted (endless loop?)")

    def now(self) -> dt.datetime:
        """The time of the call (read once, then the same for every ``now()`` of the call)."""
        if self._now is None:
            self._now = self.clock()
        return self._now

    def current_row_id(self) -> Optional[int]:
        """``getrowid()``: the sequence number of the input row being processed (None outside)."""
        return self.row_id

    def next_in_sequence(self) -> int:
        """``nextval()``: 1, 2, ... counted in the global variables, so a bound store (an engine's
        instance state) keeps the count from call to call."""
        cell = self.globals.get(SEQUENCE)
        if cell is None:
            cell = self.globals[SEQUENCE] = Cell(Long(0))
        cell.value = Long(int(cell.value) + 1)  # type: ignore[call-overload]
        return cell.value  # type: ignore[return-value]

    def print(self, text: str) -> None:
        """Pass ``print(...)`` output to the printer, if any."""
        if self.printer is not None:
            self.printer(text)


def fail(message: str) -> Callable[..., object]:
    """A compiled expression or statement that raises ``SplashError(message)`` when it runs."""
    def run(m: Machine, f: Frame) -> object:
        raise SplashError(message)
    return run


class Function:
    """A compiled SPLASH function."""

    def __init__(self, node: n.FuncDef, params: list[tuple[str, Type]], result: Type, body: Stmt) -> None:
        self.name = node.name.name
        self.params = params
        self.result = result
        self.body = body

    def call(self, m: Machine, args: list[object]) -> object:
        """Run the function with ``args`` (converted to the parameter types)."""
        if len(args) != len(self.params):
            raise SplashError(f"{self.name}() takes {len(self.params)} argument(s), not {len(args)}")
        if m.depth >= m.max_depth:
            raise SplashError(f"calls nested deeper than {m.max_depth} (endless recursion?)")
        scope = {p: Cell(coerce(a, t, f"parameter '{p}' of {self.name}()"), t)
                 for (p, t), a in zip(self.params, args)}
        frame = Frame([scope])
        m.depth += 1
        try:
            signal = self.body(m, frame)
        finally:
            m.depth -= 1
        if signal != RETURN:
            return None
        return coerce(frame.ret, self.result, f"the result of {self.name}()")


def find_cell(m: Machine, f: Frame, name: str) -> Optional[Cell]:
    """The variable ``name``: innermost scope first, then the globals."""
    for scope in reversed(f.scopes):
        cell = scope.get(name)
        if cell is not None:
            return cell
    return m.globals.get(name)


def get_element(container: object, index: object) -> object:
    """``container[index]``: a vector element (0-based, null when out of range) or a dictionary
    value (null when the key is absent); null when either side is null."""
    if container is None or index is None:
        return None
    if type(container) is Dictionary:  # the common case first; the same as the branch below
        t = container.key
        if SAME_KIND.get(type(index)) != t.name:  # coerce's fast path, inline
            index = coerce(index, t, "a dictionary key")
        # dictionary_key's, without its call: a record by its key fields
        return container.get(RecordKey(index) if isinstance(index, Record) else index)
    if isinstance(container, list):
        if not is_integral(index):
            raise SplashError(f"a vector index must be an integer, not {a_kind(index)}")
        return container[index] if 0 <= index < len(container) else None  # type: ignore[operator,index]
    if isinstance(container, dict) and not isinstance(container, Record):
        key = coerce(index, getattr(container, "key", ANY), "a dictionary key")
        return container.get(dictionary_key(key))
    if isinstance(container, WindowView):
        return container.by_key(index)
    raise SplashError(f"{a_kind(container)} cannot be indexed")


def set_element(container: object, index: object, value: object) -> None:
    """``container[index] := value`` on a vector (index must exist) or a dictionary."""
    if container is None:
        raise SplashError("cannot assign into a null vector or dictionary (create it with new)")
    if type(container) is Dictionary and index is not None:  # the common case of the branch below
        key, t = index, container.key
        if SAME_KIND.get(type(key)) != t.name:  # coerce's fast path, inline
            key = coerce(key, t, "a dictionary key")
        t = container.value
        if value is not None and SAME_KIND.get(type(value)) != t.name:
            value = coerce(value, t, "a dictionary value")
        container[RecordKey(key) if isinstance(key, Record) else key] = value  # dictionary_key's
        return
    if isinstance(container, list):
        if not is_integral(index) or not 0 <= index < len(container):  # type: ignore[operator]
            raise SplashError(f"vector index {index} out of range (size {len(container)})")
        container[index] = coerce(value, getattr(container, "elem", ANY), "a vector element")  # type: ignore[index]
        return
    if isinstance(container, dict) and not isinstance(container, Record):  # a Dictionary
        if index is None:
            raise SplashError("a dictionary key cannot be null")
        key = coerce(index, getattr(container, "key", ANY), "a dictionary key")
        container[dictionary_key(key)] = coerce(value, getattr(container, "value", ANY), "a dictionary value")
        return
    raise SplashError(f"{a_kind(container)} cannot be indexed")
