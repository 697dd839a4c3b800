"""The static types of CCL and SPLASH values, and the rules for combining them.

A :class:`Type` is a name plus arguments: ``money(2)``, ``decimal(10,2)``, a record's fields, a
dictionary's key and value types. ``ANY`` stands for a type the analysis does not know (an unknown
function result, an error already reported): it is compatible with everything, so one mistake is
reported once and doubt never becomes an error.

Numbers widen integer -> long -> money -> decimal -> float; temporals widen date -> timestamp ->
bigdatetime; NULL fits every type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

NUMERIC_RANK = {"integer": 1, "long": 2, "money": 3, "decimal": 4, "float": 5}
TEMPORAL_RANK = {"date": 1, "timestamp": 2, "bigdatetime": 3}
SCALARS = set(NUMERIC_RANK) | set(TEMPORAL_RANK) | {"string", "boolean", "interval", "binary"}
ALIASES = {"msdate": "timestamp", "seconddate": "date", "double": "float"}  # ESP/SDS spellings


@dataclass(frozen=True)
class Type:
    """A type: ``name`` (integer, ..., record, dictionary, vector, eventcache, null, any) and args.

    For a record ``fields`` holds (name, type) pairs in order; dictionary args are (key, value),
    vector and eventcache args are (element,).
    """

    name: str
    args: tuple = ()
    fields: tuple = ()

    def __str__(self) -> str:
        if self.name == "record":
            return "record"
        if self.args:
            return f"{self.name}({', '.join(str(a) for a in self.args)})"
        return self.name

    def field(self, name: str) -> Optional["Type"]:
        """The type of a record field, or None when the record has no such field."""
        for fname, ftype in self.fields:
            if fname == name:
                return ftype
        return None

    @property
    def is_numeric(self) -> bool:
        return self.name in NUMERIC_RANK

    @property
    def is_temporal(self) -> bool:
        return self.name in TEMPORAL_RANK

    @property
    def is_vague(self) -> bool:
        """ANY or NULL: nothing can be said against it."""
        return self.name in ("any", "null")


ANY = Type("any")
NULL = Type("null")
INTEGER, LONG, FLOAT = Type("integer"), Type("long"), Type("float")
STRING, BOOLEAN, INTERVAL = Type("string"), Type("boolean"), Type("interval")


def scalar(name: str, args: tuple = ()) -> Type:
    """A built-in scalar type by (any) name; unknown names give ANY."""
    name = ALIASES.get(name.lower(), name.lower())
    return Type(name, tuple(args)) if name in SCALARS else ANY


def record(fields: list[tuple[str, Type]]) -> Type:
    return Type("record", fields=tuple(fields))


def widens(src: Type, dst: Type) -> bool:
    """Whether a value of type ``src`` may be stored where ``dst`` is expected."""
    if src.is_vague or dst.is_vague:
        return True
    if src.name == dst.name:
        return True
    if src.is_numeric and dst.is_numeric:
        return NUMERIC_RANK[src.name] <= NUMERIC_RANK[dst.name]
    if src.is_temporal and dst.is_temporal:
        return TEMPORAL_RANK[src.name] <= TEMPORAL_RANK[dst.name]
    if src.name in ("integer", "long") and dst.name == "interval":
        return True  # an interval is a count of microseconds
    return False


def comparable(a: Type, b: Type) -> bool:
    """Whether two values can be compared with = < > etc."""
    if a.is_vague or b.is_vague or a.name == b.name:
        return True
    if a.is_numeric and b.is_numeric:
        return True
    if a.is_temporal and b.is_temporal:
        return True
    return {a.name, b.name} <= {"integer", "long", "interval"}


def widest(types: list[Type]) -> Type:
    """The common type of several values (for CASE branches, max(a, b), ...); ANY when none fits."""
    known = [t for t in types if not t.is_vague]
    if not known:
        return types[0] if types else ANY
    best = known[0]
    for t in known[1:]:
        if widens(best, t):
            best = t
        elif not widens(t, best):
            return ANY
    return best


def truthy(t: Type, splash: bool) -> bool:
    """Whether a value can be an operand of AND/OR/NOT: a boolean; in SPLASH also a number (non-zero
    is true there, as in C)."""
    return t.is_vague or t.name == "boolean" or (splash and t.is_numeric)
