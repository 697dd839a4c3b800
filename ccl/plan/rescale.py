"""Whether an element's per-instance state can move to another number of partition instances.

A checkpoint made with ``PARTITIONS n`` keeps each partitioned element's state split by instance.
Moving it to ``m`` instances (``ccl rescale``, ``ccl run --rescale``; runtime/rescale.py carries
the move out) gives the outputs of a run that had ``m`` from the start only where every piece of
state belongs to one key whose rows all go to one instance, and that instance can be computed from
the key alone: HASH partitioning on columns that key the state (for a join, each port's rows, and
for a join that aggregates its groups too; for a Flex, its dictionaries and event caches:
:func:`flex_state`). Everything else is refused here,
naming the reason (:func:`why_not_rescaled`), before any file is touched.

Reads the typed plan (ccl/plan/model.py), without Spark; the moves it gives are typed too
(:class:`~ccl.plan.model.Move`), and ccl/plan/codec.py writes them into the runtime's journal.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ..syntax import nodes as n
from .model import (Element, FlexMove, FlexVariable, HashColumn, HashPort, JoinMove, Move, Plan,
                    Select)

# KEEP kinds whose retention is counted per instance unless PER groups it by the hash columns
_COUNTED = ("rows", "last")
# KEEP kinds whose state is a row count or a time bucket shared by all the rows of an instance
_BUCKETED = ("every_rows", "every_time")


def _plain_column(expr: object, aliases: set[str]) -> Optional[str]:
    """The source column ``expr`` reads unchanged (``alias.col`` or ``col``), else None."""
    if isinstance(expr, n.FieldAccess):
        if isinstance(expr.base, n.Var) and expr.base.name.name in aliases:
            return expr.field.name
        return None
    if isinstance(expr, n.Var):
        return expr.name.name
    if isinstance(expr, n.Ident):
        return expr.name
    return None


def _source_types(plan: Plan, source: str) -> dict[str, str]:
    for e in plan.elements:
        if e.name == source:
            return {c.name: c.type for c in e.columns}
    return {}


def _columns(element: Element) -> set[str]:
    return {c.name for c in element.columns}


def _unkept(element: Element) -> bool:
    """Whether the element keeps all its rows (no KEEP, or KEEP ALL)."""
    return element.keep is None or element.keep.kind == "all"


def why_not_rescaled(element: Element, plan: Plan) -> Optional[str]:
    """Why the per-instance state of ``element`` (an element of ``plan``) cannot be moved to
    another instance count without changing results, in one clause; None when it can (also when
    it keeps nothing per instance)."""
    if element.module_partition is not None:
        return ("it is partitioned with its module (PARTITION BY on LOAD MODULE), whose "
                "elements' state is not moved")
    part = element.partition
    if part is None or not element.stateful:
        return None  # nothing kept per instance: nothing to move
    for spec in part.specs:
        if spec.method == "roundrobin":
            return ("it is partitioned ROUNDROBIN: a row's instance follows its arrival, not a "
                    "key, so no key's state belongs to one instance under another count")
        if spec.method != "hash":
            return ("it is partitioned by a custom SPLASH function: which instance a key's state "
                    "would go to under another count is not known without its rows")
    if element.flex is not None:
        keyed = flex_state(element, plan)
        return keyed if isinstance(keyed, str) else None
    if element.declare:
        return ("its DECLARE variables are kept per instance, not keyed by the partition key, so "
                "they cannot be split between instances")
    selects = element.query.selects if element.query is not None else ()
    if len(selects) != 1:
        return "its state is not that of one SELECT keyed by the hash columns"
    select = selects[0]
    if select.joins or len(select.sources) != 1 or len(part.specs) != 1:
        return _why_not_join(element, plan, select)
    if select.matching is not None:
        return "it matches patterns: a pattern's partial matches are kept per instance"
    source = select.sources[0]
    if source.keep is not None:
        return (f"KEEP on its source {source.alias} holds that source's rows per instance, "
                f"not by key")
    spec = part.specs[0]
    aggregates = bool(select.group_by or select.aggregates)
    if aggregates:
        grouped = {_plain_column(g, {source.alias, source.element}) for g in select.group_by}
        missing = [c for c in spec.columns if c not in grouped]
        if missing:
            return (f"its GROUP BY does not include the hash column {missing[0]}: a group's "
                    f"rows come from several instances")
    moved = _hash_outputs(select, spec)
    if isinstance(moved, str):
        return moved
    outputs = [out for out, _ in moved]
    if aggregates:
        if element.physical is not None and element.physical.native == "aggregation":
            return None
        return _why_not_engine_groups(element, outputs)
    if element.kind != "window":
        return "its per-instance state is not keyed by the hash columns"
    missing = [c for c in outputs if c not in element.key]
    if missing:
        return (f"its PRIMARY KEY does not include the hash column {missing[0]}, so its rows "
                f"are not keyed by it")
    keep = element.keep
    if keep is not None and keep.kind in _BUCKETED:
        return "KEEP EVERY empties all the rows of an instance at once: it is counted per instance"
    if keep is not None and keep.kind in _COUNTED:
        if not all(c in keep.per for c in outputs):
            return (f"KEEP {keep.count or 1} ROWS is counted per instance (no PER on the "
                    f"hash columns), so which rows stay depends on the instance count")
    return None


def _why_not_engine_groups(element: Element, outputs: list[str]) -> Optional[str]:
    """Why the groups of an aggregation the per-instance engine runs (its GROUP BY including the
    hash columns, passed through as ``outputs``) cannot move, or None: each of its groups, input
    keys, output rows and source rows then names its hash column values, so each goes to the
    instance they choose (runtime/rescale.py ``_split_groups``)."""
    if _path(element) != "per-instance":
        return "its groups are kept outside the per-instance engine, whose state is not moved"
    if element.kind != "window":
        return "its per-instance state is not keyed by the hash columns"
    return _why_not_keyed_output(element, outputs)


def _path(element: Element) -> Optional[str]:
    return element.physical.path if element.physical is not None else None


def group_positions(element: Element) -> list[int]:
    """Where each hash column of the element's (one) partition spec sits in the group key of
    its aggregation (GROUP BY order, as runtime/engine/aggregate.py keys its groups); the
    element is one :func:`why_not_rescaled` lets move."""
    assert element.query is not None and element.partition is not None
    select = element.query.selects[0]
    source = select.sources[0]
    grouped = [_plain_column(g, {source.alias, source.element}) for g in select.group_by]
    return [grouped.index(c) for c in element.partition.specs[0].columns]


def _equality(part: object, aliases: set[str]) -> Optional[tuple[tuple[str, str], tuple[str, str]]]:
    """``((alias, col), (alias, col))`` when ``part`` is ``a.x = b.y`` over ``aliases``."""
    if not (isinstance(part, n.Binary) and part.op == "="):
        return None
    sides = []
    for side in (part.left, part.right):
        if not isinstance(side, n.FieldAccess):
            return None
        alias = side.base.name.name if isinstance(side.base, n.Var) else None
        if alias not in aliases:
            return None
        sides.append((alias, side.field.name))
    return sides[0], sides[1]


def join_ports(element: Element, plan: Plan) -> list[Optional[HashPort]] | str:
    """Per source of the element's one select, in FROM order, how its rows are placed: its HASH
    columns and their types (with its alias), or None for a broadcast input (every instance holds
    all its rows); or why the sources cannot be placed so."""
    assert element.query is not None and element.partition is not None
    select = element.query.selects[0]
    specs: dict[str, list] = {}
    for spec in element.partition.specs:
        specs.setdefault(spec.input, []).append(spec)
    broadcast = set(element.partition.broadcast)
    ports: list[Optional[HashPort]] = []
    for src in select.sources:
        by = specs.get(src.element) or []
        if len(by) > 1:
            return (f"its input {src.element} is partitioned twice: a row's instance is not "
                    f"one hash")
        if not by:
            if src.element not in broadcast:
                return f"its source {src.alias} is neither HASH partitioned nor broadcast"
            ports.append(None)
            continue
        types = _source_types(plan, src.element)
        ports.append(HashPort(tuple(by[0].columns),
                              tuple(types.get(c, "string") for c in by[0].columns), src.alias))
    return ports


def _why_not_join(element: Element, plan: Plan, select: Select) -> Optional[str]:
    """Why the per-instance state of a join (the element's one select over several sources) cannot
    move, or None: every source HASH partitioned on columns its ON conditions equate (in order,
    of one type) or broadcast; outer joins preserve hashed rows only; where a level joins
    broadcast rows with hashed ones its ON is equalities alone (the match counts of the broadcast
    rows are recounted from the equality indexes)."""
    if _path(element) != "per-instance":
        return "it joins outside the per-instance engine, whose state is not moved"
    if select.matching is not None:
        return "it joins and matches patterns: a pattern's partial matches are kept per instance"
    for src in select.sources:
        if src.keep is not None:
            return (f"KEEP on its source {src.alias} holds that source's rows per instance, "
                    f"not by key")
    ports = join_ports(element, plan)
    if isinstance(ports, str):
        return f"it joins and {ports}"
    aliases = [src.alias for src in select.sources]
    hashed = [p for p in ports if p is not None]
    if not hashed:
        return "none of its join's sources is HASH partitioned"
    # every hashed source's k-th hash column equated (through the ON equalities) with the others'
    parent = {(p.alias, col): (p.alias, col) for p in hashed for col in p.columns}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    levels = []
    for join in select.joins:
        if join.kind not in ("inner", "left", "right", "full"):
            return f"its join is {join.kind}: which rows it keeps is not known by key"
        only_equal, equalities = True, 0
        for conj in n.conjuncts(join.on):
            pair = _equality(conj, set(aliases))
            if pair is None:
                if not (isinstance(conj, n.Literal) and conj.value is True):
                    only_equal = False
                continue
            equalities += 1
            parent[find(pair[0])] = find(pair[1])
        # (without an equality the engine walks a side's rows instead of an index)
        levels.append((join.kind, only_equal and equalities > 0))
    first = hashed[0]
    for p in hashed[1:]:
        if len(p.columns) != len(first.columns):
            return (f"its sources {first.alias} and {p.alias} are hashed on different "
                    f"numbers of columns: matching rows can be in different instances")
        for k, col in enumerate(p.columns):
            if find((p.alias, col)) != find((first.alias, first.columns[k])):
                return (f"its ON does not equate the hash column {col} of {p.alias} with "
                        f"{first.columns[k]} of {first.alias}: matching rows can be in "
                        f"different instances")
            if p.types[k] != first.types[k]:
                return (f"the hash columns {first.alias}.{first.columns[k]} and "
                        f"{p.alias}.{col} have different types, which hash differently")
    # which aliases every row of each level's left side holds (outer joins null-extend)
    present = {aliases[0]}
    for j, (kind, only_equal) in enumerate(levels):
        left, right = aliases[: j + 1], ports[j + 1]
        left_hashed = any(ports[i] is not None for i in range(j + 1))
        if kind in ("left", "full") and not any(ports[aliases.index(a)] is not None
                                                for a in present):
            return (f"its {kind.upper()} JOIN keeps the unmatched rows of broadcast inputs "
                    f"({', '.join(left)}): each instance emits them")
        if kind in ("right", "full") and right is None:
            return (f"its {kind.upper()} JOIN keeps the unmatched rows of the broadcast input "
                    f"{aliases[j + 1]}: each instance emits them")
        if (left_hashed != (right is not None)) and not only_equal:
            return (f"its join of {aliases[j + 1]} has ON terms besides column equalities between "
                    f"broadcast and hashed rows: a broadcast row's matches in each new instance "
                    f"cannot be recounted")
        present = _after_level(present, kind, aliases[j + 1])
    aggregates = bool(select.group_by or select.aggregates)
    if aggregates:
        positions = _join_group_positions(select, ports, present)
        if isinstance(positions, str):
            return positions
    moved = _join_outputs(element, select, ports, present)
    if isinstance(moved, str):
        return moved
    if aggregates:
        return _why_not_engine_groups(element, [out for out, _ in moved])
    return _why_not_keyed_output(element, [out for out, _ in moved])


def _why_not_keyed_output(element: Element, outputs: list[str]) -> Optional[str]:
    """Why the output of a join, a Flex or an aggregation is not kept by its hash columns, or
    None: a window
    whose PRIMARY KEY lacks one of ``outputs`` (the output columns that hold the hash columns as
    they are) or that has a KEEP (counted per instance), or another kind than a window or a
    stream (a stream keeps no rows)."""
    if element.kind == "window":
        missing = [c for c in outputs if c not in element.key]
        if missing:
            return (f"its PRIMARY KEY does not include the hash column {missing[0]}, so its rows "
                    f"are not keyed by it")
        if not _unkept(element):
            return "its KEEP is counted per instance"
    elif element.kind != "stream":
        return "its per-instance state is not keyed by the hash columns"
    return None


def _after_level(present: set[str], kind: str, right: str) -> set[str]:
    """The aliases every joined row holds after a level of ``kind`` joins ``right`` to rows that
    hold ``present`` (outer joins null-extend the side they do not preserve)."""
    return {"inner": present | {right}, "left": present, "right": {right},
            "full": set()}.get(kind, set())


def always_present(select: Select) -> set[str]:
    """The aliases of the select's sources that every row of its join holds."""
    aliases = [src.alias for src in select.sources]
    present = {aliases[0]}
    for j, join in enumerate(select.joins):
        present = _after_level(present, join.kind, aliases[j + 1])
    return present


def _present_hashed(ports: list[Optional[HashPort]], present: set[str]) -> list[HashPort]:
    """The hashed ports among ``ports`` whose alias every joined row holds (``present``: an
    outer join null-extends the others, whose hash columns may then be null)."""
    return [p for p in ports if p is not None and p.alias in present]


def _join_group_positions(select: Select, ports: list[Optional[HashPort]],
                          present: set[str]) -> list[int] | str:
    """Where each hash column sits in the group key of a join that aggregates (GROUP BY order,
    as runtime/engine/aggregate.py keys its groups): the k-th hash column as a plain column of a
    hashed source every joined row holds (the ON equates them, so any such source gives the
    row's instance); or why a group's rows can come from several instances."""
    hashed = _present_hashed(ports, present)
    grouped = [_plain_column_of(g, hashed) for g in select.group_by]
    first = next(p for p in ports if p is not None)
    positions = []
    for k, col in enumerate(first.columns):
        at = [i for i, found in enumerate(grouped) if found is not None and found[1] == k]
        if not at:
            return (f"its GROUP BY does not include the hash column {col} of a source every "
                    f"joined row holds: a group's rows come from several instances")
        positions.append(at[0])
    return positions


def _plain_column_of(expr: object, hashed: list[HashPort]) -> Optional[tuple[str, int]]:
    """(alias, k) when ``expr`` reads the k-th hash column of one of the ``hashed`` ports as it
    is, else None."""
    for p in hashed:
        col = _plain_column(expr, {p.alias})  # type: ignore[arg-type]
        if col is not None and col in p.columns:
            return p.alias, p.columns.index(col)  # type: ignore[return-value]
    return None


def _join_outputs(element: Element, select: Select, ports: list[Optional[HashPort]],
                  present: set[str]) -> list[tuple[str, str]] | str:
    """(output column, hash column) per hash column, each output column the hash column as it
    is of a hashed source every joined row holds (``present``; any such source: the ON equates
    them), or why one is not. A stream keeps no rows: none is needed."""
    hashed = _present_hashed(ports, present)
    if not hashed:
        if element.kind == "stream":
            return []
        return ("no HASH partitioned source is in every joined row (an outer join "
                "null-extends them), so its rows' keys do not give the instance")
    out = []
    for k, col in enumerate(hashed[0].columns):
        found = None
        for item in select.items:
            for p in hashed:
                if _plain_column(item.expr, {p.alias}) == p.columns[k]:  # type: ignore[arg-type]
                    found = found or item.name
        if found is None:
            if element.kind == "stream":
                return []
            return (f"the hash column {col} is not one of its columns as it is, so its state's "
                    f"keys do not give the instance")
        out.append((found, col))
    return out


def _name_of(node: object) -> Optional[str]:
    """The name of a ``Var`` node, else None."""
    return node.name.name if isinstance(node, n.Var) else None


def _reads_column(node: object, names: set[str], column: str) -> bool:
    """Whether ``node`` is ``Src.column`` for a name of ``names`` (the handler's input row)."""
    return (isinstance(node, n.FieldAccess) and _name_of(node.base) in names
            and node.field.name == column)


def _children(node: n.Node, but: tuple[str, ...] = ()) -> list:
    """The values of the fields of a syntax node (its span and the fields ``but`` left out)."""
    return [getattr(node, f.name) for f in dataclasses.fields(node)
            if f.name != "span" and f.name not in but]


def _uses_only(node: object, name: str, allowed: Any) -> bool:
    """Whether every use of variable ``name`` in the SPLASH tree ``node`` is one ``allowed(n)``
    accepts (``n``: the node that uses it, whose subtree is then not searched)."""
    if isinstance(node, (list, tuple)):
        return all(_uses_only(x, name, allowed) for x in node)
    if not isinstance(node, n.Node):
        return True
    if isinstance(node, (n.IndexAccess, n.FieldAccess, n.Call)) and allowed(node):
        rest = _children(node, ("base", "args"))
        if isinstance(node, n.Call):
            rest += list(node.args[1:])
        return _uses_only(rest, name, allowed)
    if _name_of(node) == name:
        return False
    return all(_uses_only(v, name, allowed) for v in _children(node))


def _is_call(node: object, func: str) -> bool:
    return isinstance(node, n.Call) and node.func.name == func


def _output_values(node: object) -> list:
    """The values of the ``output`` statements of a SPLASH tree (``setOpcode(v, op)``: ``v``)."""
    found = []
    if isinstance(node, (list, tuple)):
        for x in node:
            found += _output_values(x)
    elif isinstance(node, n.Node):
        if isinstance(node, n.OutputStmt):
            value = node.value
            while _is_call(value, "setOpcode") and value.args:
                value = value.args[0]
            found.append(value)
        for v in _children(node):
            found += _output_values(v)
    return found


def flex_state(element: Element, plan: Plan) -> FlexMove | str:
    """How the state of a partitioned Flex is keyed by its hash columns, for the move: ``ports``
    (input element -> its hash columns and their types), ``vars`` (variable -> a ``dictionary``
    keyed by a column of ``type``, for a dictionary whose every use is ``d[In.col]`` (or
    ``remove(d, In.col)``) with ``col`` its row handler's one hash column, or a ``cache`` with
    the ``positions`` and ``types`` of the hash columns in its key, for an event cache whose key
    includes its source's hash columns, used in that source's handlers only and never re-keyed by
    ``keyCache``) and ``outputs`` (the output column that every ``output`` of a window gives each
    hash column as it is); or why the state is not so keyed."""
    flex = element.flex
    assert flex is not None and element.partition is not None
    specs: dict[str, Any] = {}
    for spec in element.partition.specs:
        if spec.input in specs:
            return f"its input {spec.input} is partitioned twice"
        specs[spec.input] = spec
    names = dict(zip(flex.inputs, flex.input_names))
    ports: dict[str, HashPort] = {}
    for source in flex.inputs:
        if source not in specs:
            return (f"its input {source} is broadcast: every instance runs its handler on all "
                    f"of its rows, changing its own variables")
        types = _source_types(plan, source)
        ports[source] = HashPort(tuple(specs[source].columns),
                                 tuple(types.get(c, "string") for c in specs[source].columns))
    handlers = flex.handlers
    for h in handlers:
        if h.event != "row":
            what = {"every": "EVERY", "start_transaction": "ON START TRANSACTION",
                    "end_transaction": "ON END TRANSACTION"}.get(h.event, h.event)
            return f"its {what} handler runs once per instance, not per key"
    declared = flex.declare or element.declare
    functions = [d for d in declared if not isinstance(d, n.VarDecl)]
    keyed: dict[str, FlexVariable] = {}
    for decl in declared:
        if not isinstance(decl, n.VarDecl):
            continue
        for declarator in decl.declarators:
            var = declarator.name.name
            problem = _keyed_variable(var, decl.type, handlers, functions, ports, names)
            if isinstance(problem, str):
                return problem
            keyed[var] = problem
    outputs: list[str] = []
    if element.kind == "window":
        first = next(iter(ports.values()))
        columns = _columns(element)
        for k in range(len(first.columns)):
            found: set[Optional[str]] = set()
            for h in handlers:
                source = h.source or ""
                port = ports[source]
                col = port.columns[k] if k < len(port.columns) else None
                own = {source, names.get(source, source)}
                for value in _output_values(h.body):
                    if _name_of(value) in own:  # the input row itself
                        found.add(col if col in columns else None)
                    elif isinstance(value, n.RecordLit):
                        fields = [f.name.name for f in value.fields
                                  if col is not None and _reads_column(f.value, own, col)]
                        found.add(fields[0] if fields else None)
                    else:
                        found.add(None)
            if None in found or len(found) != 1:
                return (f"not every output of its window passes the hash column "
                        f"{first.columns[k]} through as one of its columns, so its rows are "
                        f"not keyed by it")
            outputs.append(found.pop())  # type: ignore[arg-type]
    problem = _why_not_keyed_output(element, outputs)
    if problem:
        return problem
    return FlexMove(ports, keyed, tuple(outputs))


def _keyed_variable(var: str, vtype: n.Node, handlers: tuple, functions: list,
                    ports: dict[str, HashPort], names: dict) -> FlexVariable | str:
    """How the Flex variable ``var`` of type ``vtype`` is keyed (see :func:`flex_state`), or why
    it is not."""
    if not _uses_only(functions, var, lambda node: False):
        return f"its variable {var} is used in a function, not by the key of one input row"
    if isinstance(vtype, n.EventCacheType):
        source = vtype.source.name
        source = next((s for s, name in names.items() if source in (s, name)), source)
        if source not in ports:
            return f"its event cache {var} is over {source}, which is not one of its inputs"
        keys = [k.name for k in vtype.keys or []]
        port = ports[source]
        if not all(c in keys for c in port.columns):
            return (f"its event cache {var} is keyed by ({', '.join(keys) or 'nothing'}), not by "
                    f"the hash columns of {source}: a bucket's rows are in several instances")

        def read_here(node: n.Node) -> bool:
            """``c.col``, or a call (not ``keyCache``) with the cache first."""
            return isinstance(node, n.FieldAccess) or (
                isinstance(node, n.Call) and not _is_call(node, "keyCache")
                and bool(node.args) and _name_of(node.args[0]) == var)
        for h in handlers:
            uses = not _uses_only(h.body, var, lambda node: False)
            if uses and h.source != source:
                return (f"its event cache {var} is read in the handler of {h.source}, whose "
                        f"current bucket is the last one of the instance")
            if not _uses_only(h.body, var, read_here):
                return (f"its event cache {var} is moved to another bucket (keyCache), which may "
                        f"live in another instance")
        return FlexVariable("cache", positions=tuple(keys.index(c) for c in port.columns),
                            types=port.types)
    if isinstance(vtype, n.DictType):
        for h in handlers:
            port = ports[h.source]
            own = {h.source, names.get(h.source, h.source)}
            col = port.columns[0] if len(port.columns) == 1 else None

            def by_key(node: n.Node) -> bool:
                """``d[In.col]`` or ``remove(d, In.col)``."""
                if col is None:
                    return False
                if isinstance(node, n.IndexAccess):
                    return _name_of(node.base) == var and _reads_column(node.index, own, col)
                return (_is_call(node, "remove") and len(node.args) == 2
                        and _name_of(node.args[0]) == var and _reads_column(node.args[1], own, col))
            if not _uses_only(h.body, var, by_key):
                return (f"its dictionary {var} is used by another key than the hash column of "
                        f"the row (or whole), so its entries are not kept by key")
        types = {p.columns: p.types for p in ports.values()}
        key_types = {t[0] for t in types.values() if len(t) == 1}
        if len(key_types) != 1:
            return f"its dictionary {var} is keyed by hash columns of different types"
        return FlexVariable("dictionary", type=key_types.pop())
    return (f"its variable {var} is kept per instance (a counter or other value not keyed by the "
            f"partition key), so it cannot be split between instances")


def _hash_outputs(select: Select, spec: Any) -> list[tuple[str, str]] | str:
    """(output column, source column) of each hash column the element's one select passes
    through unchanged (``spec``: its partition spec), or why one is not."""
    source = select.sources[0]
    aliases = {source.alias, source.element, spec.alias or spec.input}
    by_source: dict[str, str] = {}
    for item in select.items:
        col = _plain_column(item.expr, aliases)
        if col is not None:
            by_source.setdefault(col, item.name)
    out = []
    for col in spec.columns:
        if col not in by_source:
            return (f"the hash column {col} is not one of its columns as it is, so its state's "
                    f"keys do not give the instance")
        out.append((by_source[col], col))
    return out


def rescale_moves(old: Plan, new: Plan) -> tuple[dict[str, Move], list[str]]:
    """The moves that take the run directory begun with the plan ``old`` to the plan ``new``
    (element name -> its :class:`~ccl.plan.model.Move`), and the refusals (``element 'X':
    reason``) of the elements whose count changes but whose state cannot move. Of ``old`` only
    the instance counts are read."""
    before = {e.name: _instances(e) for e in old.elements}
    moves: dict[str, Move] = {}
    refused: list[str] = []
    for e in new.elements:
        was, count = before.get(e.name), _instances(e)
        if was is None or was == count:
            continue
        problem = why_not_rescaled(e, new)
        if problem:
            refused.append(f"element '{e.name}': {problem}")
            continue
        moves[e.name] = _move(e, new, was, count)
    return moves, refused


def _instances(element: Element) -> int:
    return element.physical.instances if element.physical is not None else 1


def _move(e: Element, plan: Plan, was: int, count: int) -> Move:
    """The move of element ``e`` of ``plan`` (one :func:`why_not_rescaled` lets move) from
    ``was`` to ``count`` instances."""
    if not e.stateful or e.partition is None:
        return Move(was, count, "none")
    if e.flex is not None:
        keyed = flex_state(e, plan)
        assert not isinstance(keyed, str)  # (why_not_rescaled said so)
        first = next(iter(keyed.ports.values()))
        return Move(was, count, "engine",
                    tuple(HashColumn(out, first.columns[k], first.types[k])
                          for k, out in enumerate(keyed.outputs)), flex=keyed)
    assert e.query is not None
    select = e.query.selects[0]
    aggregates = bool(select.group_by or select.aggregates)
    if select.joins or len(select.sources) != 1:
        ports = join_ports(e, plan)
        assert not isinstance(ports, str)  # (why_not_rescaled said so)
        first = next(p for p in ports if p is not None)
        present = always_present(select)
        hashed = _join_outputs(e, select, ports, present)
        assert not isinstance(hashed, str)
        groups = _join_group_positions(select, ports, present) if aggregates else None
        assert not isinstance(groups, str)
        # (the k-th hash column of every hashed port has one type: why_not_rescaled)
        return Move(was, count, "engine",
                    tuple(HashColumn(out, src, first.types[k])
                          for k, (out, src) in enumerate(hashed)),
                    groups=None if groups is None else tuple(groups),
                    join=JoinMove(tuple(ports), tuple(s.alias for s in select.sources)))
    spec = e.partition.specs[0]
    types = _source_types(plan, spec.input)
    hashed = _hash_outputs(select, spec)
    assert not isinstance(hashed, str)  # (why_not_rescaled said so)
    columns = tuple(HashColumn(out, src, types.get(src, "string")) for out, src in hashed)
    if e.physical is not None and e.physical.native == "aggregation":
        return Move(was, count, "native", columns)
    return Move(was, count, "engine", columns,
                groups=tuple(group_positions(e)) if aggregates else None)
