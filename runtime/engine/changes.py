"""What flows into, through and out of an element's engine.

- :class:`Event`: one input row as the runtime delivers it (from a source element's changelog);
- :class:`Change`: a change of a keyed collection of rows inside the engine, with the row before
  and after, so that every stage (filter, join, aggregation) can retract what it emitted;
- :class:`Emit` and :class:`Bad`: what the engine gives back: a changelog row of the element, or a
  bad record with its reason.

Opcode letters are ESP's: ``i`` insert, ``u`` update, ``d`` delete, ``p`` upsert, ``s`` safedelete.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import copysign
from typing import Any, Mapping, Optional, Union

Row = Mapping[str, object]          # column -> value
# The records are plain slotted classes, never changed once made: a frozen dataclass costs three
# times as much to make, and the engine makes several per input row.
OPS = ("i", "u", "d", "p", "s")


@dataclass(slots=True)
class Event:
    """An input row: ``port`` numbers the (select, source) pairs of the element's query in order
    (an input element has the single port 0); ``seq`` orders rows from their source."""

    port: int
    op: str
    seq: int
    values: Row


@dataclass(slots=True)
class Change:
    """A change of one row, identified by ``key``, of a collection inside the engine.

    ``op`` is ``i``, ``u`` or ``d``; ``old`` is the row before (``u``, ``d``), ``new`` after
    (``i``, ``u``). Before projection a row maps each source alias to that source's row (or to
    ``None`` for the missing side of an outer join); after projection it maps column to value.
    """

    op: str
    key: tuple
    old: Optional[Mapping[str, object]]
    new: Optional[Mapping[str, object]]
    seq: int


@dataclass(slots=True)
class Emit:
    """A changelog row of the element (``op`` is ``i``, ``u`` or ``d``; streams emit only ``i``)."""

    op: str
    seq: int
    values: Row


@dataclass(slots=True)
class Bad:
    """A bad record: the input row (or the row being produced) and why it was refused."""

    reason: str
    seq: int
    port: int
    values: Row


Output = Union[Emit, Bad]


def same_row(old: Any, new: Any) -> bool:
    """Whether output row ``new`` (a dict, or a tuple of values) shows what ``old`` showed, so
    that it is no change: equal, and no float zero of the other sign (-0.0 where 0.0 was prints
    differently, and every path must decide alike: the columnar kernels fold a batch at once)."""
    if old != new:
        return False
    values = zip(old.values(), new.values()) if isinstance(old, dict) else zip(old, new)
    return all(not (type(a) is float and a == 0.0 and copysign(1.0, a) != copysign(1.0, b))
               for a, b in values)
