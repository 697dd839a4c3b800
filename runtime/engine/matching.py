"""``MATCHING [interval : pattern] ON cond``: ESP's pattern matching over a select's sources.

The pattern is a sequence (``,``, "followed by") of steps: a negated alias (``!B``: no matching B
at that point), or aliases combined with ``&&`` (both, in any order) and ``||`` (either). A
*partial match* binds the aliases matched so far, from the arrival time of its first event:

- an insert (or the new row of an update) on a source is an event of that source's alias;
- it starts a partial when its alias is in the first step and the ON conjuncts that read only that
  alias hold;
- it binds its alias in a partial whose next positive step holds the alias (unbound so far) when
  every ON conjunct that reads the aliases then bound, and this one, holds; the partial moves past
  the step once the step's ``&&``/``||`` tree is satisfied. The extended partial replaces the old
  one (an event extends a partial once). A row is never bound twice in one partial (a
  self-join's row arrives on each of its aliases' ports);
- it ends a partial when it is a negated step's alias before the next positive step and the ON
  conjuncts reading it and the bound aliases hold;
- a partial past its last positive step completes: at once when nothing negated follows, else
  when the interval has passed without a negated event (at the next event or timer);
- a partial older than the interval is dropped;
- when ON's equalities make one column of every alias equal, partials are filed by its value, and
  an event meets only those of its own value.

A completed match is an insert whose row binds every alias (negated ones, and the unmatched side
of ``||``, are null) for WHERE and the select list. Time is the processing time, as for KEEP. A
negation inside ``&&``/``||`` is not run: those rows are bad records (``ccl check`` warns, CCL2010).
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

from ccl.plan.model import Matching
from ccl.syntax import nodes as n
from runtime.engine.changes import Change
from runtime.engine.expr import Expressions, SplashError
from runtime.engine.join import null_filled
from runtime.engine.parts import field_ref
from runtime.engine.stages import truth

__all__ = ["Matcher"]


def _steps(pattern: n.Node) -> Optional[list[tuple[bool, n.Node]]]:
    """(negated, tree) per step of the ``,`` sequence: a negated step is ``!alias``; a positive
    one a tree of aliases under ``&&`` and ``||``. None for a negation inside ``&&``/``||``."""
    if isinstance(pattern, n.PatternOp) and pattern.op == ",":
        left, right = _steps(pattern.left), _steps(pattern.right)
        return left + right if left is not None and right is not None else None
    if isinstance(pattern, n.PatternNot):
        return [(True, pattern.operand)] if isinstance(pattern.operand, n.PatternRef) else None
    return [(False, pattern)] if _positive(pattern) else None


def _positive(tree: n.Node) -> bool:
    if isinstance(tree, n.PatternRef):
        return True
    return (isinstance(tree, n.PatternOp) and tree.op in ("&&", "||")
            and _positive(tree.left) and _positive(tree.right))


def _refs(tree: n.Node) -> list[str]:
    if isinstance(tree, n.PatternRef):
        return [tree.name.name]
    return _refs(tree.left) + _refs(tree.right)  # type: ignore[attr-defined]


def _satisfied(tree: n.Node, bound: Mapping) -> bool:
    if isinstance(tree, n.PatternRef):
        return tree.name.name in bound
    left, right = _satisfied(tree.left, bound), _satisfied(tree.right, bound)  # type: ignore[attr-defined]
    return left and right if tree.op == "&&" else left or right  # type: ignore[attr-defined]


def _aliases(expr: n.Node, known: set[str]) -> set[str]:
    return {x.name.name for x in expr.walk() if isinstance(x, n.Var) and x.name.name in known}


def _shared_columns(conds: Sequence[n.Node], aliases: Sequence[str]) -> dict[str, str]:
    """alias -> column when ON's equalities (under AND) make one column of every alias equal
    (``T1.id = T2.id``): partials then never meet events of another value of it. Else {}."""
    parent: dict[tuple, tuple] = {}

    def find(x: tuple) -> tuple:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for c in conds:
        if not isinstance(c, n.Binary):
            continue
        sides = [ref for ref in (field_ref(c.left), field_ref(c.right)) if ref is not None]
        if c.op == "=" and len(sides) == 2:
            parent[find(sides[0])] = find(sides[1])
    classes: dict[tuple, dict[str, str]] = {}
    for member in list(parent):
        classes.setdefault(find(member), {}).setdefault(member[0], member[1])
    return next((cols for cols in classes.values() if set(aliases) <= set(cols)), {})


# Column types whose non-null values are equal in Python (a bucket's dictionary key) exactly when
# SPLASH's ``=`` holds for them (not floats: NaN; not money or times: mixed representations).
_EXACT_TYPES = ("string", "integer", "long", "boolean")


def _implied(cond: n.Node, bucket_by: Mapping[str, str], types: Mapping[str, Mapping]) -> bool:
    """Whether ``cond`` is ``A.c = B.d`` for two aliases whose bucket columns these are, of one type
    of :data:`_EXACT_TYPES`: every partial of a non-null bucket value (its rows and the event
    meeting it all hold that value there) satisfies it."""
    if not (isinstance(cond, n.Binary) and cond.op == "="):
        return False
    left, right = field_ref(cond.left), field_ref(cond.right)
    if left is None or right is None or left[0] == right[0]:
        return False
    if bucket_by.get(left[0]) != left[1] or bucket_by.get(right[0]) != right[1]:
        return False
    lt, rt = types.get(left[0], {}).get(left[1]), types.get(right[0], {}).get(right[1])
    name = getattr(lt, "name", None)
    return name in _EXACT_TYPES and getattr(rt, "name", None) == name


class Matcher:
    """The MATCHING clause of one select (no state; see the module docstring)."""

    def __init__(self, matching: Matching, exprs: Expressions, aliases: Sequence[str],
                 elements: Sequence[str], columns: Mapping[str, Sequence[str]]) -> None:
        self.millis = int(matching.millis or 0)
        self.aliases = list(aliases)
        self.elements = list(elements)
        self.columns = columns  # for the null row of an unbound (negated, other ||) alias
        self.steps = _steps(matching.pattern)
        # per step: the negated alias, or the aliases a positive step binds
        self.refs = [_refs(tree) for _, tree in self.steps or []]
        known = set(aliases)
        on = n.conjuncts(matching.on)
        self.conds: list[tuple[frozenset[str], Callable]] = [
            (frozenset(_aliases(c, known)), exprs.compile(c)) for c in on]
        # partials are kept by the value of a column all aliases share through ON, when there is one
        self.bucket_by = _shared_columns(on, self.aliases)
        # per alias, the ON conjuncts an event of it tests (those reading it), and the same without
        # the equalities of bucket columns that partials of a non-null bucket value satisfy
        # (:func:`_implied`)
        types = getattr(exprs, "_types", {})
        self._conds_of = {a: [(needs, test) for needs, test in self.conds if a in needs]
                          for a in self.aliases}
        self._bucket_conds_of = {
            a: [(needs, test) for (needs, test), c in zip(self.conds, on)
                if a in needs and not _implied(c, self.bucket_by, types)]
            for a in self.aliases}
        # per step index, :meth:`_waiting`'s answer (it depends on the index alone)
        self._waits = [self._waiting(k) for k in range(len(self.steps or []) + 1)]

    def initial_state(self) -> dict:
        # bucket value -> partials: [start ms, step index, {alias: row}, [(element, seq) bound]];
        # "oldest": the earliest start of any partial (None: none), so expiry costs nothing until due
        return {"partial": {}, "oldest": None}

    def _rows(self, bound: Mapping[str, Mapping]) -> dict[str, Mapping]:
        return null_filled({a: bound.get(a) for a in self.aliases}, self.columns)

    def _holds(self, bound: Mapping[str, Mapping], alias: str,
               conds: Optional[list[tuple[frozenset[str], Callable]]] = None) -> bool:
        """Whether every ON conjunct reading ``alias`` and only aliases ``bound`` holds, in ON's
        order (``conds``: those of ``alias``, by default all). A conjunct reads only bound rows, so
        the unbound aliases' null rows are not made."""
        names = bound.keys()
        for needs, test in (self._conds_of[alias] if conds is None else conds):
            if needs <= names and not truth(test(bound)):
                return False
        return True

    def _row(self, bound: Mapping[str, Mapping], seq: int) -> Change:
        return Change("i", None, None, self._rows(bound), seq)

    def _waiting(self, pos: int) -> tuple[list[str], Optional[int]]:
        """The negated aliases from step ``pos`` on, and the index of the next positive step."""
        steps = self.steps or []
        guards: list[str] = []
        while pos < len(steps) and steps[pos][0]:
            guards.append(self.refs[pos][0])
            pos += 1
        return guards, (pos if pos < len(steps) else None)

    def _bind(self, partial: list, step: int, alias: str, row: Mapping, ident: tuple) -> list:
        """``partial`` with ``alias`` bound in positive ``step``; past that step when its tree
        is then satisfied."""
        bound = {**partial[2], alias: row}
        done = _satisfied(self.steps[step][1], bound)  # type: ignore[index]
        return [partial[0], step + 1 if done else step, bound, partial[3] + [ident]]

    def apply(self, state: dict, index: int, change: Change, now_ms: int) -> list[Change]:
        """The matches an event of source ``index`` completes (and those the clock completed)."""
        if self.steps is None:
            raise SplashError("MATCHING patterns with a negation inside && or || are not run")
        out = self.expire(state, now_ms, change.seq)
        row = change.new
        if change.op == "d" or row is None:
            return out
        alias, ident = self.aliases[index], (self.elements[index], change.seq)
        column = self.bucket_by.get(alias)
        bucket = row.get(column) if column is not None else None
        kept: list[list] = []
        conds = self._conds_of[alias] if bucket is None else self._bucket_conds_of[alias]
        waits, refs = self._waits, self.refs
        for partial in state["partial"].get(bucket, []):
            guards, nxt = waits[partial[1]]
            bound, ids = partial[2], partial[3]
            negates = alias in guards
            extends = nxt is not None and alias in refs[nxt] and alias not in bound
            if (negates or extends) and ident not in ids:
                if self._holds({**bound, alias: row}, alias, conds):
                    if negates:
                        continue  # a negated event: this partial cannot complete
                    extended = self._bind(partial, nxt, alias, row, ident)
                    if not self._complete(extended, change.seq, out, timed_out=False):
                        kept.append(extended)
                    continue
            kept.append(partial)
        negated, _tree = self.steps[0]
        if not negated and alias in self.refs[0] and self._holds({alias: row}, alias):
            partial = self._bind([now_ms, 0, {}, []], 0, alias, row, ident)
            if not self._complete(partial, change.seq, out, timed_out=False):
                kept.append(partial)
                if state["oldest"] is None:
                    state["oldest"] = now_ms
        if kept:
            state["partial"][bucket] = kept
        else:
            state["partial"].pop(bucket, None)
        return out

    def _complete(self, partial: list, seq: int, out: list[Change], timed_out: bool) -> bool:
        """Whether ``partial`` is done (emitting its match when it completed)."""
        guards, nxt = self._waiting(partial[1])
        if nxt is not None:
            return timed_out  # positive steps left: dropped when timed out
        if guards and not timed_out:
            return False      # waits for the interval to pass without a negated event
        out.append(self._row(partial[2], seq))
        return True

    def expire(self, state: dict, now_ms: int, seq: int) -> list[Change]:
        """Partials older than the interval: completed (only negations left) or dropped."""
        out: list[Change] = []
        if state["oldest"] is None or now_ms - state["oldest"] <= self.millis:
            return out
        for bucket, partials in list(state["partial"].items()):
            kept = [p for p in partials
                    if not (now_ms - p[0] > self.millis and self._complete(p, seq, out, timed_out=True))]
            if kept:
                state["partial"][bucket] = kept
            else:
                del state["partial"][bucket]
        starts = [p[0] for bucket in state["partial"].values() for p in bucket]
        state["oldest"] = min(starts) if starts else None
        return out

    def next_deadline(self, state: dict) -> Optional[int]:
        """When the oldest partial times out (ms), or None."""
        return state["oldest"] + self.millis + 1 if state["oldest"] is not None else None
