"""Partition-safety warnings (CCL3001-CCL3011, CCL3013-CCL3014): where partitioning changes what a
project means.

Each check is one of SAP's partitioning guidelines (shared/seeds/esp-splash-partitioning-guidelines.txt)
made mechanical. The analysis hands over :class:`~ccl.analysis.analyzer.PartitionFacts` for every
partitioned element and the variable each name resolved to.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Optional

from ..syntax import nodes as n
from ..syntax.printer import keep_count_text
from .analyzer import PartitionFacts, output_name, select_aggregates
from .expressions import aggregate_calls
from .statements import can_end_without_value
from .symbols import Variable

Report = Callable[[str, Optional[n.Span], str], None]


def check_partition_safety(facts: list[PartitionFacts], resolved: dict[int, Variable],
                           report: Report) -> None:
    """Report every partition-safety warning of the partitioned elements."""
    for f in facts:
        hash_cols = {name: {c.name for c in spec.columns} for name, spec in f.specs_by_input.items()
                     if spec.method == "hash"}
        for spec in f.partition.specs:
            rr_input = f.inputs.get(spec.source.name) if spec.source is not None else None
            joined_window = f.join and (rr_input is None or rr_input.kind != "stream")
            if spec.method == "roundrobin" and (f.stateful or joined_window) \
                    and not _keeps_rotated_keys(f, spec.source.name if spec.source else None):
                report("CCL3001", spec.span, f"ROUNDROBIN spreads the rows of one key over the instances "
                                             f"of stateful '{f.target}': each keeps a different part")
            if spec.method == "custom":
                _custom(f, spec, report)
        _moving_rows(f, report)
        _joins(f, hash_cols, report)
        _group_by(f, hash_cols, report)
        _custom_group_by(f, report)
        _module_group_by(f, hash_cols, report)
        _retention(f, hash_cols, report)
        _splash(f, hash_cols, resolved, report)
        if isinstance(f.node, n.CreateFlex):
            _window_reads(f, hash_cols, report)


def _custom(f: PartitionFacts, spec: n.PartitionSpec, report: Report) -> None:
    if can_end_without_value(spec.body.stmts):
        report("CCL3008", spec.span, "the partition function can end without returning a value: "
                                     "those rows become bad records")
    reserved = f"{f.target}_partitions"
    if not any(isinstance(x, n.Var) and x.name.name == reserved for x in spec.body.walk()):
        report("CCL3009", spec.span, f"the partition function does not use {reserved}: some "
                                     "instances may get no rows")


def _keeps_rotated_keys(f: PartitionFacts, input_name: Optional[str]) -> bool:
    """Whether ROUNDROBIN leaves ``f`` exact: a filter or projection of one keyed input that keeps
    that input's key in its own. ROUNDROBIN rotates such an input's keys (a key's changes all go to
    one instance), so each of the element's keys lives in one instance."""
    if input_name is None:
        input_name = next(iter(f.inputs), None)
    source = f.inputs.get(input_name) if input_name is not None else None
    select = f.select
    if (source is None or not source.roundrobin_key or select is None or f.join
            or not isinstance(f.node, n.CreateElement) or f.keep is not None
            or select_aggregates(select)
            or any(s.keep is not None for item in select.sources for s in _sources_of(item))
            or (f.declare is not None and any(isinstance(i, n.VarDecl) for i in f.declare.items))):
        return False
    passed: set[str] = set()  # the input's columns that reach the element's key unchanged
    for index, item in enumerate(select.items):
        if isinstance(item, n.Star):
            if item.qualifier is None or f.inputs.get(item.qualifier.name) is source:
                passed |= set(source.roundrobin_key) & set(f.key)
        elif output_name(item, index) in f.key:
            column = _column_of(item.expr, f, input_name)
            if column is not None:
                passed.add(column)
    return set(source.roundrobin_key) <= passed


def _column_of(e: n.Node, f: PartitionFacts, input_name: str) -> Optional[str]:
    """The column of ``input_name`` that ``e`` reads unchanged, if it is a plain column reference."""
    element = f.inputs[input_name]
    if isinstance(e, n.FieldAccess) and isinstance(e.base, n.Var):
        if f.inputs.get(e.base.name.name) is element:
            return e.field.name
        return None
    if isinstance(e, n.Var) and e.name.name in element.columns:
        return e.name.name
    return None


def _moving_rows(f: PartitionFacts, report: Report) -> None:
    """An input with a key sends updates; a partition function of columns that are not its key
    can send an update elsewhere than the row's insert (ROUNDROBIN is CCL3001's)."""
    delta = isinstance(f.node, n.CreateElement) and f.node.kind == "delta stream"  # keeps its input's keys
    if not (f.stateful or f.join or delta):
        return
    for name, spec in f.specs_by_input.items():
        element = f.inputs[name]
        if element.kind not in ("window", "delta stream") or not element.key or element.open:
            continue
        if spec.method == "hash":
            read = {c.name for c in spec.columns}
        elif spec.method == "custom":
            read = {x.field.name for x in spec.body.walk()
                    if isinstance(x, n.FieldAccess) and isinstance(x.base, n.Var)
                    and f.inputs.get(x.base.name.name) is element}
        else:
            continue
        moving = sorted(read - set(element.key))
        if moving:
            report("CCL3011", spec.span, f"an update of {name} that changes {', '.join(moving)} "
                               f"(not its key) goes to another instance of '{f.target}' than the "
                               "row's insert, and the old row stays where it was")


def _sources_of(item: object) -> Iterator[n.FromSource]:
    if isinstance(item, n.Join):
        yield from _sources_of(item.left)
        yield from _sources_of(item.right)
    elif isinstance(item, n.FromSource):
        yield item


def _equated(on: n.Node) -> list[tuple[n.Node, n.Node]]:
    """The ``a = b`` pairs of an ON condition's top-level AND."""
    if isinstance(on, n.Binary) and on.op.lower() == "and":
        return _equated(on.left) + _equated(on.right)
    if isinstance(on, n.Binary) and on.op == "=":
        return [(on.left, on.right)]
    return []


def _joins(f: PartitionFacts, hash_cols: dict[str, set[str]], report: Report) -> None:
    """CCL3013: rows that match can be on different instances (the ON condition does not equate
    the HASH columns of two HASH-partitioned inputs, or equates columns of different types, which
    hash differently). CCL3014: a broadcast input on the preserved side of an outer join: its
    unmatched rows come out of every instance."""
    if f.select is None:
        return
    joins = [j for item in f.select.sources for j in _join_nodes(item)]
    for j in joins:
        preserved = ([j.left] if j.kind in ("left", "full") else []) + \
            ([j.right] if j.kind in ("right", "full") else [])
        for src in (s for side in preserved for s in _sources_of(side)):
            element = f.inputs.get(src.name.name)
            if element is not None and not any(f.inputs.get(k) is element for k in f.specs_by_input):
                report("CCL3014", src.span, f"{src.name.name} is broadcast to every instance of "
                                            f"'{f.target}' and kept by the {j.kind.upper()} JOIN: each "
                                            "instance emits its unmatched rows")
    hashed = [(k, [c.name for c in f.specs_by_input[k].columns]) for k in hash_cols]
    if len(hashed) < 2 or not joins:
        return
    pairs = [(a, b) for j in joins for a, b in _equated(j.on)]
    for i, (x, xcols) in enumerate(hashed):
        for y, ycols in hashed[i + 1:]:
            found = []
            for xc, yc in zip(xcols, ycols):
                match = next(((a, b) for a, b in pairs
                              if (_column_of(a, f, x), _column_of(b, f, y)) == (xc, yc)
                              or (_column_of(b, f, x), _column_of(a, f, y)) == (xc, yc)), None)
                found.append(match)
            spec = f.specs_by_input[y]
            if len(xcols) != len(ycols) or None in found:
                report("CCL3013", spec.span, f"the join's ON does not equate HASH({', '.join(xcols)}) of "
                                             f"{x} with HASH({', '.join(ycols)}) of {y}: rows that match "
                                             f"can be on different instances of '{f.target}' and never meet")
                continue
            tx = [f.inputs[x].columns.get(c) for c in xcols]
            ty = [f.inputs[y].columns.get(c) for c in ycols]
            if tx != ty:
                report("CCL3013", spec.span, f"HASH columns of {x} ({', '.join(map(str, tx))}) and of {y} "
                                             f"({', '.join(map(str, ty))}) have other types: equal values "
                                             f"hash differently and land on different instances of '{f.target}'")


def _join_nodes(item: object) -> Iterator[n.Join]:
    if isinstance(item, n.Join):
        yield item
        yield from _join_nodes(item.left)
        yield from _join_nodes(item.right)


def _group_by(f: PartitionFacts, hash_cols: dict[str, set[str]], report: Report) -> None:
    if not f.group_by:
        caches = {d.name.name for item in (f.declare.items if f.declare is not None else [])
                  if isinstance(item, n.VarDecl) and isinstance(item.type, n.EventCacheType)
                  for d in item.declarators}
        aggregate = next(aggregate_calls(f.select.items if f.select is not None else [], caches), None)
        if aggregate is not None and f.specs_by_input:
            report("CCL3002", aggregate.span, f"an aggregate without GROUP BY sees the rows of one "
                                              f"instance of '{f.target}': each emits its own partial result")
        return
    equal = [pair for item in (f.select.sources if f.select is not None else [])
             for pair in _always_equated(item)]
    for name, cols in hash_cols.items():
        grouped = {_column_of(g, f, name) for g in f.group_by} - {None}
        # a hash column an inner join's ON equates with a grouped column of another input
        grouped |= {_column_of(x, f, name) for a, b in equal for x, y in ((a, b), (b, a))
                    if any(_same_column(y, g, f) for g in f.group_by)} - {None}
        if cols <= grouped:
            continue
        blame = next((g for g in f.group_by if _column_of(g, f, name) not in cols), f.group_by[0])
        report("CCL3002", blame.span, f"rows of one group can reach several instances of "
                                      f"'{f.target}' (partitioned by HASH({', '.join(sorted(cols))}) "
                                      f"of {name}): each emits its own partial result")


def _always_equated(item: object) -> list[tuple[n.Node, n.Node]]:
    """The ``a = b`` pairs of the ONs of the inner joins at the top of a FROM item (reached
    through inner joins only): equal in every row the item gives. Under an outer join one side
    can be null-extended, and its columns then equal nothing."""
    if isinstance(item, n.Join) and item.kind == "inner":
        return _equated(item.on) + _always_equated(item.left) + _always_equated(item.right)
    return []


def _same_column(a: n.Node, b: n.Node, f: PartitionFacts) -> bool:
    """Whether ``a`` and ``b`` read the same column of the same input unchanged."""
    return any(_column_of(a, f, name) is not None and _column_of(a, f, name) == _column_of(b, f, name)
               for name in f.inputs)


def _custom_group_by(f: PartitionFacts, report: Report) -> None:
    """CCL3002 for a grouped element partitioned by a custom function that reads a column of its
    input other than through one of the GROUP BY expressions: two rows of one group can differ
    there, and the function can send them to different instances (``ascii(substr(isin,1,1))``
    under ``GROUP BY upper(left(isin,1))`` splits 'a...' from 'A...'). A function that reads the
    input only through GROUP BY expressions (``substr(MeterId, 1, 2)`` under the same GROUP BY) or
    plain grouped columns keeps every group on one instance."""
    if not f.group_by:
        return
    for name, spec in f.specs_by_input.items():
        if spec.method != "custom" or spec.body is None:
            continue
        element = f.inputs[name]
        names = {name, spec.source.name if spec.source is not None else name}
        ours = lambda v: f.inputs.get(v) is element  # noqa: E731  (the input under any alias)
        grouped = {_canonical(g, ours, element.columns) for g in f.group_by}
        if f.join and grouped == {_canonical(g, lambda v: False, ()) for g in f.group_by}:
            continue  # a joined input the GROUP BY does not read: the join's checks (CCL3013)
        loose = sorted(_ungrouped_reads(spec.body, lambda v: v in names, grouped))
        if loose:
            report("CCL3002", spec.span, f"rows of one group can reach several instances of "
                                         f"'{f.target}': its partition function of {name} reads "
                                         f"{', '.join(loose)} other than as the GROUP BY does; each "
                                         f"instance emits its own partial result")


def _canonical(e: n.Node, is_input: Callable[[str], bool], columns) -> str:
    """``e`` as text with the input's columns named alone (``r.MeterId`` and
    ``MeterReadings.MeterId`` are one expression), for comparing a function's terms with the
    GROUP BY's."""
    def walk(v: object) -> object:
        if isinstance(v, dict):
            if (v.get("node") == "FieldAccess" and v["base"].get("node") == "Var"
                    and is_input(v["base"]["name"]["name"])):
                return {"column": v["field"]["name"]}
            if v.get("node") == "Var" and v["name"]["name"] in columns:
                return {"column": v["name"]["name"]}
            return {k: walk(x) for k, x in v.items() if k not in ("line", "col")}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return repr(walk(n.to_json(e)))


def _ungrouped_reads(body: n.Node, is_input: Callable[[str], bool], grouped: set[str]) -> set[str]:
    """The input's columns ``body`` reads outside any of the ``grouped`` expressions."""
    out: set[str] = set()
    stack: list[object] = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
            continue
        if not isinstance(item, n.Node):
            continue
        if isinstance(item, n.FieldAccess) and isinstance(item.base, n.Var) and is_input(item.base.name.name):
            if _canonical(item, is_input, ()) not in grouped:
                out.add(item.field.name)
            continue
        if _canonical(item, is_input, ()) in grouped:
            continue
        stack.extend(getattr(item, fl.name) for fl in dataclasses.fields(item) if fl.name != "span")
    return out


def _module_group_by(f: PartitionFacts, hash_cols: dict[str, set[str]], report: Report) -> None:
    """CCL3002 for a partitioned LOAD MODULE: an aggregation in the module that reads a HASHed
    input directly, grouped by something else than its HASH columns (or not grouped)."""
    for stmt in f.module_body:
        query = getattr(stmt, "query", None)
        if not isinstance(stmt, n.CreateElement) or not isinstance(query, n.Select):
            continue
        names = {src.alias.name if src.alias else src.name.name: src.name.name
                 for item in query.sources for src in _sources_of(item)}
        grouped = query.group_by
        if not grouped and next(aggregate_calls(query.items), None) is None:
            continue
        for by, cols in hash_cols.items():
            element = f.inputs[by]
            read = [alias for alias, name in names.items() if f.inputs.get(name) is element]
            if not read:
                continue
            columns = set()
            for g in grouped:
                if isinstance(g, n.FieldAccess) and isinstance(g.base, n.Var) and g.base.name.name in read:
                    columns.add(g.field.name)
                elif isinstance(g, n.Var) and len(names) == 1:
                    columns.add(g.name.name)
            if not cols <= columns:
                what = f"grouped by {', '.join(sorted(columns))}" if grouped else "an aggregate without GROUP BY"
                report("CCL3002", f.specs_by_input[by].span,
                       f"'{stmt.name.name}' in the module ({what}) reads {by}, partitioned by "
                       f"HASH({', '.join(sorted(cols))}): rows of one group can reach several instances "
                       f"of '{f.target}', each emitting its own partial result")


def _caches(f: PartitionFacts) -> Iterator[n.EventCacheType]:
    if f.declare is None:
        return
    for item in f.declare.items:
        if isinstance(item, n.VarDecl) and isinstance(item.type, n.EventCacheType):
            yield item.type


def _from_keeps(f: PartitionFacts) -> list[n.FromSource]:
    """The FROM sources of the element's select that have a KEEP."""
    items = f.select.sources if f.select is not None else []
    return [src for item in items for src in _sources_of(item) if src.keep is not None]


def _retention(f: PartitionFacts, hash_cols: dict[str, set[str]], report: Report) -> None:
    partitioned = set(f.specs_by_input)
    row_keeps = [(f.keep, hash_cols.values(), "")] if f.keep is not None else []
    for src in _from_keeps(f):  # a broadcast source's KEEP holds the same rows in every instance
        by = [k for k in partitioned if f.inputs.get(k) is f.inputs.get(src.name.name)]
        if by:
            row_keeps.append((src.keep, [hash_cols.get(by[0], set())], f" of {src.name.name}"))
    for keep, hashed, of in row_keeps:
        if keep.kind in ("rows", "every_rows") and not any(cols and cols <= {c.name for c in keep.per}
                                                           for cols in hashed):
            every = "EVERY " if keep.kind == "every_rows" else ""
            report("CCL3006", keep.span, f"KEEP {every}{keep_count_text(keep.count)} ROWS{of} holds that "
                                         f"many rows in each instance of '{f.target}', not in all")
    for cache in _caches(f):
        source = cache.source.name
        element = f.inputs.get(source)
        if element is None or element.name not in partitioned:
            continue  # a broadcast input's cache sees every row in every instance
        spec = f.specs_by_input[element.name]
        keys = {k.name for k in cache.keys or []}
        cols = hash_cols.get(element.name)
        if spec.method == "hash" and cols and cols <= keys:
            # every bucket lives in one instance and `N events` counts per bucket (ESP's
            # "Managing Bucket Size"): the instances keep the buckets the whole cache would
            continue
        report("CCL3005", cache.span, f"the cache's key ({', '.join(sorted(keys)) or 'none'}) is "
                                      f"not the partition key of {source}: a bucket's rows are "
                                      "spread over the instances")
        by_rows = any(o.kind == "events" for o in cache.options)
        coalesced = any(o.kind == "coalesce" for o in cache.options)
        if by_rows and not coalesced:  # a bucket spread over N instances keeps N times as many
            report("CCL3006", cache.span, "a row-based event cache without coalesce keeps its rows in "
                                          "each instance: N instances keep N times as many")


def root_var(e: n.Node) -> Optional[n.Var]:
    """The variable an access path starts from (``v`` of ``v.f[k]``), or None."""
    while isinstance(e, (n.FieldAccess, n.IndexAccess)):
        e = e.base
    return e if isinstance(e, n.Var) else None


def _splash(f: PartitionFacts, hash_cols: dict[str, set[str]], resolved: dict[int, Variable],
            report: Report) -> None:
    declared = set()
    if f.declare is not None:
        declared = {d.name.span for item in f.declare.items if isinstance(item, n.VarDecl)
                    for d in item.declarators}
    for code in f.splash:
        for node in code.walk():
            if isinstance(node, n.Assign):
                root = root_var(node.target)
                var = resolved.get(id(root)) if root is not None else None
                if var is None:
                    continue
                if var.where == "global":
                    report("CCL3003", node.target.span, f"global '{var.name}' is written by instances "
                                                        f"of '{f.target}': each instance has its own copy")
                elif var.span in declared and _is_counter(node, var.name):
                    report("CCL3004", node.target.span, f"'{var.name}' counts per instance of "
                                                        f"'{f.target}', not over all rows")
            elif isinstance(node, n.Call) and node.func.name.lower() == "keycache" and len(node.args) > 1:
                _key_cache(f, node, hash_cols, report)


def _window_reads(f: PartitionFacts, hash_cols: dict[str, set[str]], report: Report) -> None:
    """CCL3010: Flex code reading the rows of a partitioned input (or of its own output) sees only
    the rows of its instance, unless it reads them by the partition key."""
    flex: n.CreateFlex = f.node  # type: ignore[assignment]
    partitioned = {name: el.name for name, el in f.inputs.items() if el.name in f.specs_by_input}
    pk = flex.output.primary_key
    own_key = {c.name for c in pk.columns} if pk is not None and not pk.deduced else set()
    own = {flex.output.name.name, flex.name.name}
    code = [x for c in f.splash for x in c.walk()]
    keyed: set[int] = set()  # the window names (Var nodes) of reads by the partition key
    looped: set[int] = set()
    for x in code:
        base, pairs = None, None
        if isinstance(x, (n.IndexAccess, n.WindowFind)):
            rec = x.index if isinstance(x, n.IndexAccess) else x.record
            base = x.base
            if isinstance(rec, n.RecordLit):
                pairs = [(fi.name.name, fi.value) for fi in rec.key_fields + rec.fields]
        elif isinstance(x, n.ForIn):
            base, pairs = x.iterable, [(c.name.name, c.value) for c in x.where]
            if isinstance(base, n.Var):
                looped.add(id(base))
        if isinstance(base, n.Var) and pairs:
            window = _window_of(base.name.name, id(base) in looped)
            cols = (hash_cols.get(partitioned[window], set()) if window in partitioned
                    else own_key if window in own else set())
            if cols and all(_partition_value(dict(pairs).get(c), f, hash_cols) for c in cols):
                keyed.add(id(base))
    seen: set[str] = set()
    for x in code:
        if not isinstance(x, n.Var) or id(x) in keyed:
            continue
        window = _window_of(x.name.name, id(x) in looped)
        if window is None or window in seen or (window not in partitioned and window not in own):
            continue
        seen.add(window)
        whose = ("the rows it output itself" if window in own
                 else f"the rows of '{window}' partitioned to it")
        report("CCL3010", x.name.span, f"'{x.name.name}' reads a window: each instance of "
                                       f"'{f.target}' holds only {whose}")


def _window_of(name: str, looped: bool) -> Optional[str]:
    """The window a name reads: ``W`` for ``W_stream`` / ``W_iterator`` (and for ``W`` itself as
    the iterable of a for loop), else None."""
    for end in ("_stream", "_iterator"):
        if name.endswith(end):
            return name[:-len(end)]
    return name if looped else None


def _partition_value(v: Optional[n.Node], f: PartitionFacts, hash_cols: dict[str, set[str]]) -> bool:
    """Whether ``v`` is ``In.c`` with ``c`` a HASH column of the partitioned input ``In``."""
    if not (isinstance(v, n.FieldAccess) and isinstance(v.base, n.Var)):
        return False
    source = f.inputs.get(v.base.name.name)
    return source is not None and v.field.name in hash_cols.get(source.name, set())


def _is_counter(assign: n.Assign, name: str) -> bool:
    value = assign.value
    return (isinstance(assign.target, n.Var) and isinstance(value, n.Binary) and value.op in ("+", "-")
            and any(isinstance(side, n.Var) and side.name.name == name
                    for side in (value.left, value.right)))


def _key_cache(f: PartitionFacts, call: n.Call, hash_cols: dict[str, set[str]], report: Report) -> None:
    rec = call.args[1]
    if not isinstance(rec, n.RecordLit):
        return
    fields = rec.key_fields if rec.bar else rec.fields
    for fi in fields:
        v = fi.value
        ok = (isinstance(v, n.FieldAccess) and isinstance(v.base, n.Var)
              and v.field.name in hash_cols.get(getattr(f.inputs.get(v.base.name.name), "name", ""), set()))
        if not ok:
            report("CCL3007", call.func.span, "keyCache looks up a key other than the partition key: "
                                              "its bucket may live in another instance")
            return
