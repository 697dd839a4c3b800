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
- an event meets only the partials whose keys equal its own under ON's equalities that link its
  alias to aliases bound at their step (columns of one key class, ahead of any conjunct that may
  raise): the others would fail one of them, as the scan finds. When every such link holds one
  column shared by all aliases, partials are also stored by its value (the state's buckets);
- when the first of the alias's conjuncts that is not such an equality compares a numeric column of
  it with an expression of aliases bound at the step (``b.x > f(a)``, either side), the partials of
  a key are also sorted by that expression's value, and an event meets only those it can pass.

A completed match is an insert whose row binds every alias (negated ones, and the unmatched side
of ``||``, are null) for WHERE and the select list. Time is the processing time, as for KEEP. A
negation inside ``&&``/``||`` is not run: those rows are bad records (``ccl check`` warns, CCL2010).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Callable, Mapping, Optional, Sequence

from ccl.plan.model import Matching
from ccl.splash.values import Long
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


# Column types whose values the index may file by: per type, its class (columns of one class compare
# as Python values do once a float's NaN, which SPLASH's ``=`` equates with NaN, is one key); an
# equality between two columns of one class never raises. Not money or times (mixed representations),
# not int against float (a long beyond 2**53 equals a float in SPLASH, not in Python).
_KEY_CLASS = {"string": "string", "integer": "int", "long": "int", "boolean": "boolean", "float": "float"}
_NAN = ("NaN",)  # a float column's key for NaN (every NaN object is its own dict key)
_ANY = ("any",)  # a partial's key when a value could not be read: a candidate for every event


def _sure(tree: n.Node) -> set[str]:
    """The aliases every satisfied ``tree`` binds (``||``: those both sides bind)."""
    if isinstance(tree, n.PatternRef):
        return {tree.name.name}
    left, right = _sure(tree.left), _sure(tree.right)  # type: ignore[attr-defined]
    return left | right if tree.op == "&&" else left & right  # type: ignore[attr-defined]


def _key_class(ref: Optional[tuple[str, str]], types: Mapping[str, Mapping]) -> Optional[str]:
    if ref is None:
        return None
    return _KEY_CLASS.get(getattr(types.get(ref[0], {}).get(ref[1]), "name", None))


def _safe_equality(cond: n.Node, types: Mapping[str, Mapping]) -> Optional[tuple[tuple, tuple]]:
    """The two columns of ``cond`` when it is ``P.a = Q.b`` over two columns of one key class (it
    never raises, and equal keys are what it holds for), else None."""
    if not (isinstance(cond, n.Binary) and cond.op == "="):
        return None
    left, right = field_ref(cond.left), field_ref(cond.right)
    cls = _key_class(left, types)
    if cls is None or cls != _key_class(right, types):
        return None
    return left, right  # type: ignore[return-value]


# Column types an event's side of a range conjunct may have (its values int, Long or float).
_RANGE_TYPES = ("integer", "long", "float")
# ``v op x`` as ``x op' v`` (SPLASH's comparison of numbers is antisymmetric, NaN included)
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _range(cond: n.Node, x: str, bound: set[str], exprs: Expressions,
           types: Mapping[str, Mapping]) -> Optional[tuple[str, Callable, Callable]]:
    """``(op, read x's column, read the other side)`` when ``cond`` compares a column of alias
    ``x`` (integer, long or float) by ``< <= > >=`` with an expression over aliases of ``bound``
    (not ``x``), both compiled direct (the comparison is :func:`comparison`, the other side a
    function of the bound rows alone): ``op`` as seen from ``x``'s side (``x.c op value``)."""
    if not (isinstance(cond, n.Binary) and cond.op in _FLIPPED and cond.temporal is None):
        return None
    left, right = field_ref(cond.left), field_ref(cond.right)
    if left is not None and left[0] == x:
        mine, other, op = cond.left, cond.right, cond.op
    elif right is not None and right[0] == x:
        mine, other, op = cond.right, cond.left, _FLIPPED[cond.op]
    else:
        return None
    ref = field_ref(mine)
    if getattr(types.get(x, {}).get(ref[1]), "name", None) not in _RANGE_TYPES:  # type: ignore[index]
        return None
    names = {v.name.name for v in other.walk() if isinstance(v, n.Var)}
    if (not names or not names <= bound or x in names or names & exprs._shadowing
            or exprs._direct(cond) is None):
        return None
    return op, exprs.compile(mine), exprs.compile(other)


def _first(item: tuple) -> object:
    return item[0]


def _as_float(item: tuple) -> float:
    return float(item[0])


class _Ranged:
    """The serials of one probe key's partials by their value of the bound side of a range
    conjunct: integers and floats each sorted by (value, serial), NaNs, and ``other`` (the value
    could not be read or is not an int, long or float: a candidate for every event)."""

    __slots__ = ("ints", "floats", "nans", "other")

    def __init__(self) -> None:
        self.ints: list[tuple[int, int]] = []
        self.floats: list[tuple[float, int]] = []
        self.nans: set[int] = set()
        self.other: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.ints or self.floats or self.nans or self.other)

    def add(self, serial: int, value: object) -> tuple:
        """File ``serial`` by ``value``; the slot to :meth:`discard` it from."""
        t = type(value)
        if t is float:
            if value != value:
                self.nans.add(serial)
                return ("n", None)
            insort(self.floats, (value, serial))
            return ("f", value)
        if t is int or t is Long:
            insort(self.ints, (value, serial))
            return ("i", value)
        self.other.add(serial)
        return ("o", None)

    def discard(self, serial: int, slot: tuple) -> None:
        kind, value = slot
        if kind == "n":
            self.nans.discard(serial)
        elif kind == "o":
            self.other.discard(serial)
        else:
            filed = self.ints if kind == "i" else self.floats
            del filed[bisect_left(filed, (value, serial))]

    def hits(self, op: str, x: object) -> list[int]:
        """The serials whose value ``v`` may give ``x op v`` (unordered): SPLASH compares numbers
        as floats when either is a float (NaN equal to NaN and above every other number, -0.0
        equal to 0.0), integers and longs exactly; a null never passes."""
        found = list(self.other)
        tx = type(x)
        if tx is float:
            xf = x
        elif tx is int or tx is Long:
            xf = float(x)  # type: ignore[arg-type]
        elif x is None:
            return found
        else:  # not a number: every partial, the test decides
            return found + [s for _v, s in self.ints] + [s for _v, s in self.floats] + list(self.nans)
        if xf != xf:  # NaN: above every number, equal to NaN
            if op in (">", ">="):
                found += [s for _v, s in self.ints] + [s for _v, s in self.floats]
            if op in (">=", "<="):
                found += self.nans
            return found
        for filed, at, key in ((self.floats, xf, _first),
                               (self.ints, x, _first) if tx is not float else (self.ints, xf, _as_float)):
            if not filed:
                continue
            if op == ">":
                part = filed[:bisect_left(filed, at, key=key)]
            elif op == ">=":
                part = filed[:bisect_right(filed, at, key=key)]
            elif op == "<":
                part = filed[bisect_right(filed, at, key=key):]
            else:
                part = filed[bisect_left(filed, at, key=key):]
            found += [s for _v, s in part]
        if op in ("<", "<="):
            found += self.nans
        return found


def _norm(value: object, cls: Optional[str]) -> object:
    """``value``'s key (None for null): NaN is one key."""
    if type(value) is float and value != value:
        return _NAN
    return value


class _Partials(dict):
    """A state's open partials in memory: bucket value -> {serial: partial}, serials in creation
    order, with the index of :class:`Matcher`'s probes (``probes``: (bucket, step, alias) -> key ->
    {serial: partial}). It pickles (and copies) as the stored layout, bucket value -> [partials],
    so states stay as they were; a loaded state is filed again on its first event."""

    def __init__(self) -> None:
        super().__init__()
        self.serial = 0
        self.probes: dict[tuple, dict] = {}
        self.home: dict[int, tuple] = {}  # serial -> the (probe, key) pairs it is filed under

    def __reduce__(self):  # type: ignore[override]
        return dict, ([(k, list(v.values())) for k, v in self.items()],)


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
        types = getattr(exprs, "_types", {})
        # per step index, :meth:`_waiting`'s answer (it depends on the index alone)
        self._waits = [self._waiting(k) for k in range(len(self.steps or []) + 1)]
        self._index_probes(on, types, exprs)
        # per alias, the ON conjuncts an event of it tests (those reading it), and the same without
        # the equalities of bucket columns that partials of a non-null bucket value satisfy
        # (:func:`_implied`)
        self._conds_of = {a: [(needs, test) for needs, test in self.conds if a in needs]
                          for a in self.aliases}
        self._bucket_conds_of = {
            a: [(needs, test) for (needs, test), c in zip(self.conds, on)
                if a in needs and not _implied(c, self.bucket_by, types)]
            for a in self.aliases}

    def _index_probes(self, on: Sequence[n.Node], types: Mapping[str, Mapping],
                      exprs: Expressions) -> None:
        """The equalities an event may look partials up by (their *probes*), and the bucket.

        A partial at step index ``p`` is met by the events of its negated aliases before the next
        positive step and of that step's aliases (``_acts``). For alias ``X`` at ``p``, the probe
        is the ON conjuncts ``X.c = Y.d`` (columns of one key class) with ``Y`` bound in every
        partial at ``p``, among the conjuncts of ``X`` before any that may raise or is not such an
        equality: a partial whose key differs fails one of them before anything can raise, as the
        scan would find, so it need not be tested. ``bucket_by`` (the stored layout's key) is kept
        only when every probe holds its column's equality; else every partial is in bucket None."""
        steps = self.steps or []
        surely: list[set[str]] = [set()]
        for negated, tree in steps:
            surely.append(surely[-1] | (set() if negated else _sure(tree)))
        self._acts: dict[str, list[int]] = {a: [] for a in self.aliases}
        probes: dict[tuple[int, str], list[tuple]] = {}
        # per (step index, alias): the first of the alias's conjuncts that is not a safe equality
        # when it is a range conjunct over aliases bound at that step (:func:`_range`), else None
        self._ranges: dict[tuple[int, str], Optional[tuple[str, Callable, Callable]]] = {}
        # the step indexes a partial can wait at: past a positive step, or inside one of several
        # aliases (one bound)
        at = sorted({t + 1 for t, (neg, _tree) in enumerate(steps) if not neg} | {
            t for t, (neg, _tree) in enumerate(steps) if not neg and len(self.refs[t]) > 1})
        for p in at:
            if p >= len(steps):
                continue
            guards, nxt = self._waits[p]
            for x in dict.fromkeys(guards + (self.refs[nxt] if nxt is not None else [])):
                self._acts[x].append(p)
                probe = []
                self._ranges[(p, x)] = None
                for (needs, _test), c in zip(self.conds, on):
                    if x not in needs:
                        continue
                    eq = _safe_equality(c, types)
                    if eq is None:
                        self._ranges[(p, x)] = _range(c, x, surely[p], exprs, types)
                        break
                    mine, other = (eq[0], eq[1]) if eq[0][0] == x else (eq[1], eq[0])
                    if mine[0] == x and other[0] != x and other[0] in surely[p]:
                        side = (c.left, c.right) if eq[0] is mine else (c.right, c.left)  # type: ignore[attr-defined]
                        probe.append((mine, other, exprs.compile(side[0]), exprs.compile(side[1])))
                probes[(p, x)] = probe
        shared = _shared_columns(on, self.aliases)
        classes = {_KEY_CLASS.get(getattr(types.get(a, {}).get(c), "name", None))
                   for a, c in shared.items()}
        if shared and (len(classes) != 1 or None in classes or not all(
                any(mine[1] == shared[x] and other[1] == shared[other[0]]
                    for mine, other, _r, _s in probe) for (_p, x), probe in probes.items())):
            shared = {}
        self.bucket_by = shared
        # per (step index, alias): [(the alias's column reader, the bound alias, its reader)],
        # without the bucket's own equalities; an alias with an empty probe at any of its steps
        # scans its bucket (``_scans``)
        self._probes = {key: [(read_x, other[0], read_y) for mine, other, read_x, read_y in probe
                              if not (shared and mine[1] == shared[mine[0]]
                                      and other[1] == shared[other[0]])]
                        for key, probe in probes.items()}
        self._scans = {x: any(not self._probes[(p, x)] and self._ranges[(p, x)] is None for p in ps)
                       for x, ps in self._acts.items()}
        # per step index: the aliases whose probes file a partial there
        self._filed_by = [[x for x in self.aliases if p in self._acts[x] and not self._scans[x]]
                          for p in range(len(steps) + 1)]

    def initial_state(self) -> dict:
        # bucket value -> partials: [start ms, step index, {alias: row}, [(element, seq) bound]];
        # "oldest": the earliest start of any partial (None: none), so expiry costs nothing until due
        return {"partial": _Partials(), "oldest": None}

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

    def _bucket(self, alias: str, row: Mapping) -> object:
        column = self.bucket_by.get(alias)
        return _norm(row.get(column), None) if column is not None else None

    # -- the partials in memory ----------------------------------------------------------------

    def _created(self, partial: list) -> tuple:
        """A partial's place in creation order: its start, its first event, and for a row that
        started partials on two ports, the ports' order."""
        first = next(iter(partial[2]), None)
        return (partial[0], partial[3][0][1] if partial[3] else 0,
                self.aliases.index(first) if first in self.aliases else 0)

    def _partials(self, state: dict) -> _Partials:
        """``state``'s partials as :class:`_Partials`, filed again when the state was loaded. A
        bucket keeps its order; buckets this matcher does not keep (a NaN key, or all of them when
        it keeps none) are merged in creation order."""
        parts = state["partial"]
        if type(parts) is _Partials:
            return parts
        fresh = _Partials()
        targets: dict[object, list[list]] = {}
        for key, partials in parts.items():
            if key is not None and not self.bucket_by:
                key = None
            elif type(key) is float and key != key:
                key = _NAN
            targets.setdefault(key, []).append(partials)
        filing = any(self._filed_by)
        for key, lists in targets.items():
            partials = lists[0] if len(lists) == 1 else sorted(
                (p for ps in lists for p in ps), key=self._created)
            filed = fresh[key] = dict(zip(range(fresh.serial, fresh.serial + len(partials)), partials))
            fresh.serial += len(partials)
            if filing:
                for serial, p in filed.items():
                    self._file(fresh, key, serial, p)
        state["partial"] = fresh
        return fresh

    def _add(self, parts: _Partials, bucket: object, partial: list) -> None:
        """File a new ``partial`` at the end of ``bucket`` and under its probes' keys."""
        serial = parts.serial
        parts.serial += 1
        parts.setdefault(bucket, {})[serial] = partial
        self._file(parts, bucket, serial, partial)

    def _file(self, parts: _Partials, bucket: object, serial: int, partial: list) -> None:
        homes = []
        for x in self._filed_by[partial[1]]:
            key: object = ()
            try:
                for _read_x, y, read_y in self._probes[(partial[1], x)]:
                    v = _norm(read_y({y: partial[2][y]}), None)
                    if v is None:  # a null never equals: no event of x meets this partial
                        key = None
                        break
                    key += (v,)  # type: ignore[operator]
            except SplashError:
                key = _ANY
            if key is None:
                continue
            where = (bucket, partial[1], x)
            ranged = self._ranges[(partial[1], x)]
            if ranged is None:
                parts.probes.setdefault(where, {}).setdefault(key, {})[serial] = partial
                homes.append((where, key, None))
                continue
            value: object = _ANY
            if key is not _ANY:
                try:
                    value = ranged[2](partial[2])
                except SplashError:
                    pass  # filed as "other": the test raises as the scan's does
                if value is None:  # a null never compares: no event of x meets this partial
                    continue
            node = parts.probes.setdefault(where, {}).get(key)
            if node is None:
                node = parts.probes[where][key] = _Ranged()
            homes.append((where, key, node.add(serial, value)))
        if homes:
            parts.home[serial] = homes  # type: ignore[assignment]

    def _unfile(self, parts: _Partials, serial: int) -> None:
        for where, key, slot in parts.home.pop(serial, ()):
            filed = parts.probes[where]
            if slot is None:
                del filed[key][serial]
            else:
                filed[key].discard(serial, slot)
            if not filed[key]:
                del filed[key]
                if not filed:
                    del parts.probes[where]

    def _remove(self, parts: _Partials, bucket: object, serial: int) -> None:
        self._unfile(parts, serial)
        partials = parts[bucket]
        del partials[serial]
        if not partials:
            del parts[bucket]

    def _candidates(self, parts: _Partials, bucket: object, alias: str,
                    row: Mapping) -> list[tuple[int, list]]:
        """The partials of ``bucket`` an event of ``alias`` may act on, in creation order: those
        its probes find (and those no key could be read for), or all of the bucket's."""
        partials = parts.get(bucket)
        if not partials:
            return []
        if self._scans[alias]:
            return partials.items()  # type: ignore[return-value]  # (changed after the loop)
        found: list[tuple[int, list]] = []
        for p in self._acts[alias]:
            filed = parts.probes.get((bucket, p, alias))
            if not filed:
                continue
            ranged = self._ranges[(p, alias)]
            key: object = ()
            try:
                for read_x, _y, _read_y in self._probes[(p, alias)]:
                    v = _norm(read_x({alias: row}), None)
                    if v is None:
                        key = None
                        break
                    key += (v,)  # type: ignore[operator]
                x = ranged[1]({alias: row}) if ranged is not None else None
            except SplashError:
                return partials.items()  # type: ignore[return-value]  # the scan's, raising as it does
            if ranged is not None:
                for k in ((key, _ANY) if key is not None else (_ANY,)):
                    hit = filed.get(k)
                    if hit:
                        found.extend((s, partials[s]) for s in hit.hits(ranged[0], x))
                continue
            for k in ((key, _ANY) if key is not None else (_ANY,)):
                hit = filed.get(k)
                if hit:
                    found.extend(hit.items())
        if len(found) > 1:  # a probe's partials are in the order they reached their step
            found.sort(key=lambda item: item[0])
        return found

    # -- events and the clock ------------------------------------------------------------------

    def apply(self, state: dict, index: int, change: Change, now_ms: int) -> list[Change]:
        """The matches an event of source ``index`` completes (and those the clock completed)."""
        if self.steps is None:
            raise SplashError("MATCHING patterns with a negation inside && or || are not run")
        out = self.expire(state, now_ms, change.seq)
        row = change.new
        if change.op == "d" or row is None:
            return out
        parts = self._partials(state)
        alias, ident = self.aliases[index], (self.elements[index], change.seq)
        bucket = self._bucket(alias, row)
        conds = self._conds_of[alias] if bucket is None else self._bucket_conds_of[alias]
        waits, refs = self._waits, self.refs
        # (serial, the partial replacing it or None): applied once every test has run, so that a
        # failing condition (a bad record) leaves the partials as they were
        changed: list[tuple[int, Optional[list]]] = []
        for serial, partial in self._candidates(parts, bucket, alias, row):
            guards, nxt = waits[partial[1]]
            bound, ids = partial[2], partial[3]
            negates = alias in guards
            extends = nxt is not None and alias in refs[nxt] and alias not in bound
            if (negates or extends) and ident not in ids:
                if self._holds({**bound, alias: row}, alias, conds):
                    if negates:
                        changed.append((serial, None))  # a negated event: it cannot complete
                        continue
                    extended = self._bind(partial, nxt, alias, row, ident)
                    done = self._complete(extended, change.seq, out, timed_out=False)
                    changed.append((serial, None if done else extended))
        started = None
        negated, _tree = self.steps[0]
        if not negated and alias in self.refs[0] and self._holds({alias: row}, alias):
            started = self._bind([now_ms, 0, {}, []], 0, alias, row, ident)
            if self._complete(started, change.seq, out, timed_out=False):
                started = None
        for serial, replaced in changed:
            if replaced is None:
                self._remove(parts, bucket, serial)
            else:  # in the old one's place
                self._unfile(parts, serial)
                parts[bucket][serial] = replaced
                self._file(parts, bucket, serial, replaced)
        if started is not None:
            self._add(parts, bucket, started)
            if state["oldest"] is None:
                state["oldest"] = now_ms
        return out

    def _complete(self, partial: list, seq: int, out: list[Change], timed_out: bool) -> bool:
        """Whether ``partial`` is done (emitting its match when it completed)."""
        guards, nxt = self._waits[partial[1]]
        if nxt is not None:
            return timed_out  # positive steps left: dropped when timed out
        if guards and not timed_out:
            return False      # waits for the interval to pass without a negated event
        out.append(self._row(partial[2], seq))
        return True

    def expire(self, state: dict, now_ms: int, seq: int) -> list[Change]:
        """Partials older than the interval, in creation order: completed (only negations left) or
        dropped."""
        out: list[Change] = []
        if state["oldest"] is None or now_ms - state["oldest"] <= self.millis:
            return out
        parts = self._partials(state)
        old = [(serial, bucket, p) for bucket, partials in parts.items()
               for serial, p in partials.items() if now_ms - p[0] > self.millis]
        if len(parts) > 1:
            old.sort(key=lambda item: self._created(item[2]))
        for serial, bucket, p in old:
            if self._complete(p, seq, out, timed_out=True):
                self._remove(parts, bucket, serial)
        starts = [p[0] for partials in parts.values() for p in partials.values()]
        state["oldest"] = min(starts) if starts else None
        return out

    def next_deadline(self, state: dict) -> Optional[int]:
        """When the oldest partial times out (ms), or None."""
        return state["oldest"] + self.millis + 1 if state["oldest"] is not None else None
