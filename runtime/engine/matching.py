"""``MATCHING [interval : pattern] ON cond``: ESP's pattern matching over a select's sources.

The pattern is a sequence (``,``, "followed by") of source aliases, each possibly negated
(``!B``: no matching B at that point). A *partial match* binds the aliases matched so far, from the
arrival time of its first event:

- an insert (or the new row of an update) on a source is an event of that source's alias;
- it starts a partial when the first term is its alias and the ON conjuncts that read only that
  alias hold;
- it extends a partial whose next positive term is its alias when every ON conjunct that reads the
  aliases then bound, and this one, holds; the extended partial replaces the old one (an event
  completes a partial once). A row is never bound twice in one partial (a self-join's row arrives
  on each of its aliases' ports);
- it ends a partial when it is a negated term's alias before the next positive term and the ON
  conjuncts reading it and the bound aliases hold;
- a partial all of whose positive terms are bound completes: at once when nothing negated follows,
  else when the interval has passed without a negated event (at the next event or timer);
- a partial older than the interval is dropped.

A completed match is an insert whose row binds every alias (negated ones are null) for WHERE and
the select list. Time is the processing time, as for KEEP. Patterns with ``&&`` or ``||`` are not
run: their rows are bad records (``ccl check`` warns, CCL2010).
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from runtime.engine.changes import Change
from runtime.engine.expr import Expressions, SplashError
from runtime.engine.stages import truth

__all__ = ["Matcher"]


def _terms(pattern: Mapping) -> Optional[list[tuple[bool, str]]]:
    """(negated, alias) per term of a ``,`` sequence; None for another shape."""
    node = pattern.get("node")
    if node == "PatternRef":
        return [(False, pattern["name"]["name"])]
    if node == "PatternNot" and pattern["operand"].get("node") == "PatternRef":
        return [(True, pattern["operand"]["name"]["name"])]
    if node == "PatternOp" and pattern["op"] == ",":
        left, right = _terms(pattern["left"]), _terms(pattern["right"])
        return left + right if left is not None and right is not None else None
    return None


def _conjuncts(expr: Optional[Mapping]) -> list[Mapping]:
    if expr is None:
        return []
    if expr.get("node") == "Binary" and expr.get("op") == "and":
        return _conjuncts(expr["left"]) + _conjuncts(expr["right"])
    return [expr]


def _aliases(expr: object, known: set[str]) -> set[str]:
    found: set[str] = set()
    stack = [expr]
    while stack:
        x = stack.pop()
        if isinstance(x, Mapping):
            if x.get("node") == "Var" and x["name"]["name"] in known:
                found.add(x["name"]["name"])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return found


class Matcher:
    """The MATCHING clause of one select (no state; see the module docstring)."""

    def __init__(self, matching: Mapping, exprs: Expressions, aliases: Sequence[str],
                 elements: Sequence[str], columns: Mapping[str, Sequence[str]]) -> None:
        self.millis = int(matching.get("millis") or 0)
        self.aliases = list(aliases)
        self.elements = list(elements)
        self.nulls = {a: dict.fromkeys(columns[a]) for a in aliases}  # an unbound (negated) alias
        self.terms = _terms(matching["pattern"])
        known = set(aliases)
        self.conds: list[tuple[frozenset[str], Callable]] = [
            (frozenset(_aliases(c, known)), exprs.compile(c)) for c in _conjuncts(matching.get("on"))]

    def initial_state(self) -> dict:
        # partial: [start ms, next term index, {alias: row}, [(element, seq) of bound rows]]
        return {"partial": []}

    def _holds(self, bound: Mapping[str, Mapping], alias: str) -> bool:
        names = set(bound)
        rows = {a: bound.get(a) or self.nulls[a] for a in self.aliases}
        return all(truth(test(rows)) for needs, test in self.conds
                   if alias in needs and needs <= names)

    def _row(self, bound: Mapping[str, Mapping], seq: int) -> Change:
        return Change("i", None, None, {a: bound.get(a) or self.nulls[a] for a in self.aliases}, seq)

    def _waiting(self, pos: int) -> tuple[list[str], Optional[int]]:
        """The negated aliases from term ``pos`` on, and the index of the next positive term."""
        guards: list[str] = []
        while pos < len(self.terms) and self.terms[pos][0]:  # type: ignore[index]
            guards.append(self.terms[pos][1])  # type: ignore[index]
            pos += 1
        return guards, (pos if pos < len(self.terms) else None)  # type: ignore[arg-type]

    def apply(self, state: dict, index: int, change: Change, now_ms: int) -> list[Change]:
        """The matches an event of source ``index`` completes (and those the clock completed)."""
        if self.terms is None:
            raise SplashError("MATCHING patterns with && or || are not run")
        out = self.expire(state, now_ms, change.seq)
        row = change.new
        if change.op == "d" or row is None:
            return out
        alias, ident = self.aliases[index], (self.elements[index], change.seq)
        kept: list[list] = []
        for partial in state["partial"]:
            start, pos, bound, ids = partial
            guards, nxt = self._waiting(pos)
            if alias in guards and ident not in ids and self._holds({**bound, alias: row}, alias):
                continue  # a negated event: this partial cannot complete
            if (nxt is not None and self.terms[nxt][1] == alias and ident not in ids  # type: ignore[index]
                    and self._holds({**bound, alias: row}, alias)):
                extended = [start, nxt + 1, {**bound, alias: row}, ids + [ident]]
                if self._complete(extended, change.seq, out, now_ms, timed_out=False):
                    continue
                kept.append(extended)
                continue
            kept.append(partial)
        first = self.terms[0]
        if not first[0] and first[1] == alias and self._holds({alias: row}, alias):
            partial = [now_ms, 1, {alias: row}, [ident]]
            if not self._complete(partial, change.seq, out, now_ms, timed_out=False):
                kept.append(partial)
        state["partial"] = kept
        return out

    def _complete(self, partial: list, seq: int, out: list[Change], now_ms: int,
                  timed_out: bool) -> bool:
        """Whether ``partial`` is done (emitting its match when it completed)."""
        guards, nxt = self._waiting(partial[1])
        if nxt is not None:
            return timed_out  # positive terms left: dropped when timed out
        if guards and not timed_out:
            return False      # waits for the interval to pass without a negated event
        out.append(self._row(partial[2], seq))
        return True

    def expire(self, state: dict, now_ms: int, seq: int) -> list[Change]:
        """Partials older than the interval: completed (only negations left) or dropped."""
        out: list[Change] = []
        kept = []
        for partial in state["partial"]:
            if now_ms - partial[0] > self.millis and self._complete(partial, seq, out, now_ms,
                                                                    timed_out=True):
                continue
            kept.append(partial)
        state["partial"] = kept
        return out

    def next_deadline(self, state: dict) -> Optional[int]:
        """When the oldest partial times out (ms), or None."""
        starts = [p[0] for p in state["partial"]]
        return min(starts) + self.millis + 1 if starts else None
