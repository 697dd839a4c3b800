"""The semantic analysis: statements in declaration order, with every rule of docs/diagnostics.md
CCL20xx-CCL25xx. Partition-safety warnings (CCL30xx) are in :mod:`ccl.analysis.safety`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Optional, Sequence, Union

from ..syntax import nodes as n
from ..diagnostics import Diagnostic, article
from ..config.parameters import UNKNOWN, ResolvedParameter, bound_module_parameter, keep_count
from ..syntax.printer import keep_count_text
from .expressions import Typer, aggregate_calls
from .statements import StatementChecker
from .symbols import ERROR_COLUMNS, Context, Element, Module, Scope, Source, Variable
from ..splash.types import ANY, INTEGER, Type, record, scalar, widens

PARTITIONS_MAX = 65535


@dataclass
class PartitionedElement:
    """A partitioned element as the summary and the planner see it."""

    name: str
    kind: str
    methods: list[str]  # e.g. "HASH(isin) by priceW"
    count: Optional[int]  # None when a parameter has no value
    count_text: str
    broadcast: list[str]
    node: n.Node = field(repr=False, default=None)
    specs: list[tuple[n.PartitionSpec, str]] = field(default_factory=list)  # with the input's name


@dataclass
class PartitionFacts:
    """What the safety pass needs to know about one partitioned element."""

    target: str
    node: n.Node
    partition: n.Partition
    inputs: dict[str, Element]  # by the names BY may use
    specs_by_input: dict[str, n.PartitionSpec]
    stateful: bool  # state of its own (a join alone is judged per input by the safety pass)
    join: bool
    group_by: list[n.Node]
    select: Optional[n.Select]
    keep: Optional[n.Keep]
    declare: Optional[n.DeclareBlock]
    splash: list[n.Node]  # blocks and functions run by the element's instances
    module_body: list[n.Node] = field(default_factory=list)  # a partitioned LOAD MODULE's module
    key: list[str] = field(default_factory=list)  # the element's primary key


class Analyzer:
    """Analyses the statements of one project (or of one module body)."""

    def __init__(self, parameters: Mapping[str, ResolvedParameter], diagnostics: list[Diagnostic],
                 module_params: Optional[dict[str, n.ParamDecl]] = None) -> None:
        self.parameters = parameters
        self.diagnostics = diagnostics
        self.elements: dict[str, Element] = {}
        self.schemas: dict[str, dict[str, Type]] = {}
        self.modules: dict[str, Module] = {}
        self.names: dict[str, str] = {}  # element/schema/module/store name -> what it is
        self.partitions_var: Optional[str] = None  # <target>_partitions while its query is analysed
        self.typedefs: dict[str, Type] = {}
        self.globals = Scope()
        self.functions: dict[str, n.FuncDef] = {}
        self.param_decls: dict[str, n.ParamDecl] = dict(module_params or {})
        self.typer = Typer(self.report, self.type_spec)
        self.uses_globals: set[int] = set()  # id() of the statements that name a global variable
        self.partitioned: list[PartitionedElement] = []
        self.partition_facts: list[PartitionFacts] = []
        self.kind_counts: dict[str, int] = {}
        self.module_stores: set[str] = set()  # in a module body: the stores its STORES clause names
        for decl in self.param_decls.values():
            self.globals.vars[decl.name.name] = Variable(decl.name.name, self.type_spec(decl.type),
                                                         "parameter", decl.name.span)

    def release(self) -> None:
        """Drop the typer when the analysis is over: it holds this analyzer's bound methods, and
        that reference cycle would leave the analyzer, its elements and their syntax trees to the
        cyclic garbage collector instead of freeing them with the last reference."""
        self.typer = None  # type: ignore[assignment]

    # --- reporting and registries --------------------------------------------------------------

    def report(self, code: str, span: Optional[n.Span], message: str) -> None:
        if span is not None:
            self.diagnostics.append(Diagnostic(code, message, span))

    def claim(self, ident: n.Ident, what: str) -> bool:
        """Register a top-level name; CCL2002 when it is taken."""
        if ident.name in self.names:
            what = self.names[ident.name]
            self.report("CCL2002", ident.span, f"'{ident.name}' is already defined (as {article(what)} {what})")
            return False
        self.names[ident.name] = what
        self.kind_counts[what] = self.kind_counts.get(what, 0) + 1
        return True

    def element(self, ident: n.Ident) -> Optional[Element]:
        """The element a FROM/IN/BY/TO name refers to (CCL2001 / CCL2211 when there is none)."""
        found = self.elements.get(ident.name)
        if found is None:
            what = self.names.get(ident.name)
            if what is not None:
                self.report("CCL2211", ident.span, f"'{ident.name}' is a {what}, not a stream or window")
            else:
                self.report("CCL2001", ident.span, f"unknown stream or window '{ident.name}' "
                                                   "(elements must be created before they are used)")
        return found

    def context(self, scope: Optional[Scope] = None, sources: Optional[list[Source]] = None,
                splash: bool = False, functions: Optional[dict[str, n.FuncDef]] = None) -> Context:
        return Context(scope or self.globals, sources or [], functions or self.functions, splash)

    # --- types -----------------------------------------------------------------------------------

    def type_spec(self, spec: n.Node, scope: Optional[Scope] = None) -> Type:
        """The Type a CCL type expression names (CCL2009, CCL2105 on the way); ``typeof(x)`` is
        the type of the variable x when ``scope`` (default: the globals) has one, else the row
        type of the stream or window x."""
        if isinstance(spec, n.NamedType):
            if spec.name in self.typedefs:
                return self.typedefs[spec.name]
            t = scalar(spec.name, tuple(spec.args))
            if t is ANY:
                self.report("CCL2009", spec.span, f"unknown type '{spec.name}'")
                return ANY
            self._check_type_args(spec, t)
            return t
        if isinstance(spec, n.TypeOf):
            var = (scope or self.globals).lookup(spec.source.name)
            if var is not None:
                return var.type
            el = self.element(spec.source)
            return el.row_type if el else ANY
        if isinstance(spec, n.DictType):
            return Type("dictionary", (self.type_spec(spec.key), self.type_spec(spec.value)))
        if isinstance(spec, n.VectorType):
            return Type("vector", (self.type_spec(spec.element),))
        if isinstance(spec, n.RecordType):
            return record([(f.name.name, self.type_spec(f.type)) for f in spec.key_fields + spec.fields])
        if isinstance(spec, n.EventCacheType):
            el = self.element(spec.source)
            for k in spec.keys or []:
                if el is not None and not el.open and k.name not in el.columns:
                    self.report("CCL2003", k.span, f"'{el.name}' has no column '{k.name}'")
            return Type("eventcache", (el.row_type if el else ANY,))
        return ANY

    def _check_type_args(self, spec: n.NamedType, t: Type) -> None:
        args = spec.args
        if t.name == "money" and args and not (len(args) == 1 and 1 <= args[0] <= 15):
            self.report("CCL2105", spec.span, f"money({', '.join(map(str, args))}): the scale must be 1..15")
        elif t.name == "decimal" and args and not (
                len(args) == 2 and 1 <= args[0] <= 34 and 0 <= args[1] <= args[0]):
            self.report("CCL2105", spec.span, f"decimal({', '.join(map(str, args))}): precision 1..34 "
                                              "and scale 0..precision")
        elif t.name not in ("money", "decimal") and args:
            self.report("CCL2105", spec.span, f"{t.name} takes no arguments")

    def columns_of(self, schema: n.Node) -> Optional[dict[str, Type]]:
        """The columns of a SCHEMA clause (named or inline); None for an unknown schema name."""
        if isinstance(schema, n.SchemaName):
            found = self.schemas.get(schema.name.name)
            if found is None:
                self._not_a("schema", schema.name)
                return None
            return dict(found)
        return self.column_defs(schema.columns)

    def _not_a(self, wanted: str, name: n.Ident) -> None:
        """Report ``name``, which should name a ``wanted`` (schema, store) but does not: CCL2001
        when it names nothing, CCL2211 when it names something else."""
        what = self.names.get(name.name)
        if what is None:
            self.report("CCL2001", name.span, f"unknown {wanted} '{name.name}'")
        else:
            self.report("CCL2211", name.span, f"'{name.name}' is {article(what)} {what}, not a {wanted}")

    def column_defs(self, columns: list[n.Column], inherited: Optional[dict[str, Type]] = None) -> dict[str, Type]:
        out = dict(inherited or {})
        for c in columns:
            if c.name.name in out:
                self.report("CCL2006", c.name.span, f"column '{c.name.name}' is defined twice")
                continue
            out[c.name.name] = self.type_spec(c.type)
        return out

    # --- statements ------------------------------------------------------------------------------

    def run(self, statements: list[n.Node]) -> None:
        typer = self.typer
        for stmt in statements:
            handler = getattr(self, "stmt_" + type(stmt).__name__, None)
            if handler is not None:
                before = typer.global_uses
                handler(stmt)
                if typer.global_uses != before:
                    self.uses_globals.add(id(stmt))

    def stmt_CreateSchema(self, s: n.CreateSchema) -> None:
        inherited: dict[str, Type] = {}
        for base in s.inherits:
            cols = self.schemas.get(base.name)
            if cols is None:
                self._not_a("schema", base)
                continue
            for name, t in cols.items():
                if name in inherited:
                    self.report("CCL2006", base.span, f"column '{name}' comes from two base schemas")
                inherited[name] = t
        columns = self.column_defs(s.columns, inherited)
        if self.claim(s.name, "schema"):
            self.schemas[s.name.name] = columns

    def stmt_GlobalDeclare(self, s: n.GlobalDeclare) -> None:
        checker = StatementChecker(self.typer, self.report, self.type_spec)
        ahead = _functions_of(s.block)
        for item in s.block.items:
            if isinstance(item, n.VarDecl):
                checker.declare(self.context(), item, "global")
            elif isinstance(item, n.ParamDecl):
                name = item.name.name
                if name in self.globals.vars:
                    self.report("CCL2002", item.name.span, f"'{name}' is already declared")
                    continue
                self.param_decls[name] = item
                self.globals.vars[name] = Variable(name, self.type_spec(item.type), "parameter",
                                                   item.name.span)
            elif isinstance(item, n.TypeDef):
                if item.name.name in self.typedefs:
                    self.report("CCL2002", item.name.span, f"type '{item.name.name}' is already defined")
                self.typedefs[item.name.name] = self.type_spec(item.type)
            elif isinstance(item, n.FuncDef):
                self.function(item, self.functions, self.globals, ahead=ahead)

    def function(self, f: n.FuncDef, table: dict[str, n.FuncDef], scope: Scope,
                 sources: Optional[list[Source]] = None,
                 ahead: Optional[dict[str, n.FuncDef]] = None) -> None:
        """Check a SPLASH function; its body may call any function of the same DECLARE block
        (``ahead``: no prototypes in SPLASH, so functions may call each other) or earlier ones."""
        if f.name.name in table:
            self.report("CCL2002", f.name.span, f"function '{f.name.name}' is already defined")
        table[f.name.name] = f  # before the body: recursion is allowed
        ctx = self.context(scope.child(), sources, splash=True, functions={**(ahead or {}), **table})
        for p in f.params:
            ctx.scope.vars[p.name.name] = Variable(p.name.name, self.type_spec(p.type), "local", p.name.span)
        checker = StatementChecker(self.typer, self.report, self.type_spec)
        checker.block(f.body, ctx)
        want = self.type_spec(f.return_type)
        for ret, t in checker.returns:
            if ret.value is not None and not widens(t, want):
                self.report("CCL2103", ret.value.span, f"{f.name.name}() returns {want}, not {t}")

    def local_declare(self, block: Optional[n.DeclareBlock], sources: list[Source]
                      ) -> tuple[Scope, dict[str, n.FuncDef]]:
        """The scope and functions of an element's own DECLARE block."""
        scope = self.globals.child()
        if self.partitions_var is not None:  # around the DECLARE scope (a variable of the name is CCL2407)
            scope.vars[self.partitions_var] = Variable(self.partitions_var, INTEGER, "implicit")
            scope = scope.child()
        functions = dict(self.functions)
        if block is None:
            return scope, functions
        checker = StatementChecker(self.typer, self.report, self.type_spec)
        ctx = self.context(scope, sources, splash=True, functions=functions)
        ahead = _functions_of(block)
        names = {src.alias for src in sources} | {src.element.name for src in sources}
        for item in block.items:
            if isinstance(item, n.VarDecl):
                if (isinstance(item.type, n.EventCacheType) and item.type.source.name not in names
                        and item.type.source.name in self.elements):
                    self.report("CCL2011", item.type.source.span,
                                f"event cache over '{item.type.source.name}', which this element does "
                                f"not read: cache one of its inputs ({', '.join(sorted(names))})")
                checker.declare(ctx, item, "local")
            elif isinstance(item, n.FuncDef):
                self.function(item, functions, scope, sources, ahead=ahead)
            elif isinstance(item, n.TypeDef):
                self.typedefs[item.name.name] = self.type_spec(item.type)
        return scope, functions

    # --- CREATE [INPUT] STREAM / WINDOW / DELTA STREAM ------------------------------------------

    def stmt_CreateElement(self, s: n.CreateElement) -> None:
        kind, name = s.kind, s.name.name
        if s.role == "input":
            columns = self._schema_or_missing(s.schema, s.name)
            select = None
            sources: list[Source] = []
            if s.primary_key is not None and s.primary_key.deduced:
                self.report("CCL2203", s.primary_key.span, "an input window has no query to deduce a "
                                                           "key from: name the key columns")
            if s.where is not None:
                own = Element(name, kind, "input", columns)
                self.typer.type_of(s.where.cond, self.context(sources=[Source(name, own)]))
        else:
            # a partitioned element's code may read its instance count (ESP: an implicit global)
            self.partitions_var = f"{name}_partitions" if s.partition is not None else None
            try:
                select, sources, columns = self.derived(s)
            finally:
                self.partitions_var = None
        element = Element(name, kind, s.role, columns, node=s, keep=s.keep)
        self.keys(s, element, select, sources)
        self._element_clauses(s, element, select, sources)
        if s.partition is not None:
            if s.role == "input":
                self.report("CCL2401", s.partition.span, f"an input {kind} cannot be partitioned: "
                                                         "partition the elements that read it")
            elif isinstance(s.query, n.Union_):
                self.report("CCL2401", s.partition.span, "a UNION cannot be partitioned")
            else:
                self.partition(s, name, kind, s.partition, sources, select, element.key)
        if self.claim(s.name, f"{s.role + ' ' if s.role else ''}{kind}"):
            self.elements[name] = element

    def _schema_or_missing(self, schema: Optional[n.Node], name: n.Ident) -> dict[str, Type]:
        if schema is None:
            self.report("CCL2210", name.span, f"'{name.name}' needs a SCHEMA")
            return {}
        return self.columns_of(schema) or {}

    def derived(self, s: n.CreateElement) -> tuple[Optional[n.Select], list[Source], dict[str, Type]]:
        """Analyse the query of a derived element: its first SELECT, its sources and its columns."""
        if s.query is None:
            return None, [], {}
        selects = s.query.selects if isinstance(s.query, n.Union_) else [s.query]
        # with a SCHEMA, the SCHEMA names the columns (in order): the query's may repeat
        results = [self.select(sel, s.declare, unique_names=s.schema is None) for sel in selects]
        select, sources, columns = selects[0], results[0][0], results[0][1]
        if s.schema is not None:
            declared = self.columns_of(s.schema)
            if declared is not None:
                self._match_schema(select, results[0][2], declared)
                columns = declared
        for later, (_, _, produced) in zip(selects[1:], results[1:]):
            # every SELECT of a UNION gives the element's columns, in order
            self._match_schema(later, produced, columns, "the first SELECT of the UNION"
                               if s.schema is None else "the SCHEMA")
        return select, sources, columns

    def _match_schema(self, select: n.Select, produced: list[tuple[str, Type, n.Span]],
                      declared: dict[str, Type], what: str = "the SCHEMA") -> None:
        if len(produced) != len(declared):
            self.report("CCL2104", select.span, f"the query produces {len(produced)} column(s), "
                                                f"{what} has {len(declared)}")
            return
        for (_, ptype, at), (dname, dtype) in zip(produced, declared.items()):
            if not widens(ptype, dtype):
                self.report("CCL2104", at, f"column {dname} is {dtype}; the query gives {ptype}")

    def select(self, sel: n.Select, declare: Optional[n.DeclareBlock] = None, unique_names: bool = True
               ) -> tuple[list[Source], dict[str, Type], list[tuple[str, Type, n.Span]]]:
        """Analyse one SELECT; returns its sources, its output columns (name -> type) and every
        column it produces in order (name, type, where), names repeated or not (a repeated name
        is CCL2006 when ``unique_names``)."""
        sources: list[Source] = []
        joins: list[n.Join] = []
        for item in sel.sources:
            self._from_item(item, sources, joins)
        scope, functions = self.local_declare(declare, sources)
        ctx = self.context(scope, sources, functions=functions)
        on_ctx = replace(ctx, no_aggregates="a join's ON condition")
        for j in joins:
            self.typer.type_of(j.on, on_ctx)
        streams = [src for src in sources if src.element.kind == "stream" and not src.element.open
                   and (src.from_node is None or src.from_node.keep is None)]
        if len(streams) > 1 and sel.matching is None:  # (MATCHING follows events of streams)
            at = streams[1].from_node
            self.report("CCL2215", at.span if at is not None and at.span else sel.span,
                        f"'{streams[0].alias}' and '{streams[1].alias}' are both streams: a join needs "
                        "a window on one side (or a KEEP in FROM)")
        if sel.matching is not None:
            for node in sel.matching.pattern.walk():
                if isinstance(node, n.PatternRef) and ctx.source(node.name.name) is None:
                    self.report("CCL2007", node.name.span, f"'{node.name.name}' is not a source of this query")
                if (isinstance(node, n.PatternNot) and not isinstance(node.operand, n.PatternRef)
                        or isinstance(node, n.PatternOp) and node.op != ","
                        and any(isinstance(x, n.PatternNot) for x in node.walk())):
                    self.report("CCL2010", node.span, "a negation inside '&&' or '||' (or of a group) "
                                "in a MATCHING pattern is an ESP feature this runtime does not run: "
                                "every row of the element becomes a bad record")
                    break
            if sel.matching.on is not None:
                self.typer.type_of(sel.matching.on, ctx)
        if sel.where is not None:
            where_ctx = self.context(scope, sources, functions=functions)
            where_ctx.in_where = True
            self.typer.type_of(sel.where, where_ctx)
        for e in sel.group_by:
            self.typer.type_of(e, replace(ctx, no_aggregates="GROUP BY"))
        for e in [o.expr for o in sel.group_order_by]:
            self.typer.type_of(e, ctx)
        if sel.group_filter is not None:
            filter_ctx = self.context(scope, sources, functions=functions)
            filter_ctx.in_group_filter = True
            self.typer.type_of(sel.group_filter, filter_ctx)
        if sel.having is not None:
            self.typer.type_of(sel.having, ctx)
        columns: dict[str, Type] = {}
        produced = []
        for i, item in enumerate(sel.items):
            for name, t, at, value_at in self._item_columns(item, i, ctx):
                produced.append((name, t, value_at))
                if name in columns:
                    if unique_names:
                        self.report("CCL2006", at, f"the query produces more than one column named "
                                                   f"'{name}' (give it another alias)")
                    continue
                columns[name] = t
        return sources, columns, produced

    def _item_columns(self, item: Union[n.SelectItem, n.Star], index: int, ctx: Context):
        if isinstance(item, n.Star):
            chosen = ctx.sources
            if item.qualifier is not None:
                src = ctx.source(item.qualifier.name)
                if src is None:
                    self.report("CCL2007", item.qualifier.span, f"'{item.qualifier.name}' is not a "
                                                                "source of this query")
                    return []
                chosen = [src]
            seen, out = set(), []
            for src in chosen:
                for name, t in src.element.columns.items():
                    if name not in seen:
                        seen.add(name)
                        out.append((name, t, item.span, item.span))
            return out
        t = self.typer.type_of(item.expr, ctx)
        return [(output_name(item, index), t, item.alias.span if item.alias else item.expr.span,
                 item.expr.span)]

    def _from_item(self, item: n.Node, sources: list[Source], joins: list[n.Join]) -> None:
        if isinstance(item, n.Join):
            self._from_item(item.left, sources, joins)
            self._from_item(item.right, sources, joins)
            joins.append(item)
            return
        el = self.element(item.name)
        if el is None:
            el = Element(item.name.name, "stream", None, {}, open=True)
        alias = item.alias.name if item.alias else item.name.name
        sources.append(Source(alias, el, item))
        if item.keep is not None:
            self.keep_count(item.keep)
            for col in item.keep.per:
                if not el.open and col.name not in el.columns:
                    self.report("CCL2204", col.span, f"PER column '{col.name}' is not in '{el.name}'")

    # --- keys and element clauses -------------------------------------------------------------

    def keys(self, s: Union[n.CreateElement, n.FlexOutput], element: Element,
             select: Optional[n.Select], sources: list[Source]) -> None:
        pk = s.primary_key
        keyed = element.kind in ("window", "delta stream")
        if s.store is not None:
            if element.kind == "stream":
                self.report("CCL2209", s.store.span, "a stream keeps no rows to store: STORE "
                                                     "belongs to windows")
            self.store(s.store.name)
        if element.kind == "stream":  # (a stream with a PRIMARY KEY is a keyed stream, parsed as
            # a delta stream)
            if s.keep is not None:
                self.report("CCL2209", s.keep.span, "a stream keeps no rows: KEEP belongs to windows "
                                                    "(or to a FROM source)")
            return
        if pk is None:
            if keyed:
                self.report("CCL2201", s.name.span, f"{element.kind} '{element.name}' needs a PRIMARY KEY")
            return
        if pk.deduced:
            if select is None:
                if isinstance(s, n.FlexOutput):
                    self.report("CCL2203", pk.span, "a Flex output has no query to deduce a key from: "
                                                    "name the key columns")
                return
            key = deduce_key(select, sources, self.elements)
            if key is None and not any(src.element.open for src in sources):
                # (an unknown source is reported where it is named; its columns are unknown)
                self.report("CCL2202", pk.span, "cannot deduce the primary key: select the source's key "
                                                "columns unchanged, or the GROUP BY columns")
            else:
                element.key = key
            return
        for i, col in enumerate(pk.columns):
            if col.name in {c.name for c in pk.columns[:i]}:
                self.report("CCL2006", col.span, f"key column '{col.name}' is named twice")
            if not element.open and element.columns and col.name not in element.columns:
                self.report("CCL2204", col.span, f"key column '{col.name}' is not a column of "
                                                 f"'{element.name}'")
        element.key = [c.name for c in pk.columns]

    def keep_count(self, keep: n.Keep) -> None:
        """Report a KEEP row count that is not a positive integer constant: a literal, an integer
        parameter or an expression of them (evaluated with the parameters' values; a module's
        parameters are bound when it is loaded, and checked then by the planner)."""
        values = {name: p.value for name, p in self.parameters.items() if name in self.param_decls}
        rows = f"KEEP {keep_count_text(keep.count)} ROWS"
        for count, text in ((keep.count, rows), (keep.slack, f"{rows} SLACK {keep_count_text(keep.slack)}")):
            if count is None:
                continue
            unknown = [x.name for x in _names_read(count) if x.name not in self.param_decls]
            if unknown:
                self.report("CCL2303", keep.span, f"{text}: no PARAMETER '{unknown[0]}' is declared")
                continue
            _, why = keep_count(count, values)
            if why is not None:
                self.report("CCL2303", keep.span, f"{text}: {why}")

    def _element_clauses(self, s: n.CreateElement, element: Element, select: Optional[n.Select],
                         sources: list[Source]) -> None:
        if s.keep is not None:
            self.keep_count(s.keep)
        for col in (s.keep.per if s.keep else []):
            if col.name not in element.columns:
                self.report("CCL2204", col.span, f"PER column '{col.name}' is not a column of '{element.name}'")
        if s.autogenerate is not None:
            for col in s.autogenerate.columns:
                t = element.columns.get(col.name)
                if t is None:
                    self.report("CCL2204", col.span, f"AUTOGENERATE column '{col.name}' is not a column "
                                                     f"of '{element.name}'")
                elif t.name != "long" and not t.is_vague:
                    self.report("CCL2101", col.span, f"AUTOGENERATE column '{col.name}' is {t}: it "
                                                     "must be long")
        if s.aging is not None:
            self.aging(s.aging, element)
        if select is None:
            return
        if s.kind == "stream" and select.group_by:
            self.report("CCL2207", select.group_by[0].span, "a stream cannot GROUP BY: make it a window")

    def aging(self, aging: n.Aging, element: Element) -> None:
        """AGES EVERY ... SET col [n TIMES] [FROM col]: a window's integer column, counted up; a
        date-time column to start from."""
        if element.kind != "window":
            self.report("CCL2209", aging.span, f"a {element.kind} keeps no rows to age: AGES belongs "
                                               "to windows")
            return
        for col, want, ok in ((aging.column, "an integer or long", lambda t: t.name in ("integer", "long")),
                              (aging.start, "a date-time", lambda t: t.is_temporal)):
            if col is None:
                continue
            t = element.columns.get(col.name)
            if t is None:
                self.report("CCL2204", col.span, f"AGES column '{col.name}' is not a column of "
                                                 f"'{element.name}'")
            elif not t.is_vague and not ok(t):
                self.report("CCL2103", col.span, f"AGES column '{col.name}' is {t}; it must be {want}")

    # --- other statements ------------------------------------------------------------------------

    def stmt_CreateReference(self, s: n.CreateReference) -> None:
        columns = self._schema_or_missing(s.schema, s.name)
        element = Element(s.name.name, "reference", s.role, columns, node=s)
        if s.primary_key is not None:
            element.key = [c.name for c in s.primary_key.columns]
            for col in s.primary_key.columns:
                if col.name not in columns and columns:
                    self.report("CCL2204", col.span, f"key column '{col.name}' is not in the schema")
        if s.partition is not None:
            self.report("CCL2401", s.partition.span, "a reference cannot be partitioned")
        if self.claim(s.name, "reference"):
            self.elements[s.name.name] = element

    def stmt_CreateErrorStream(self, s: n.CreateErrorStream) -> None:
        for src in s.sources:
            self.element(src)
        if s.partition is not None:
            self.report("CCL2401", s.partition.span, "an error stream cannot be partitioned")
        if self.claim(s.name, "error stream"):
            self.elements[s.name.name] = Element(s.name.name, "stream", s.role, dict(ERROR_COLUMNS),
                                                 node=s)

    def stmt_CreateSplitter(self, s: n.CreateSplitter) -> None:
        sources, columns, _ = self.select(s.select)
        ctx = replace(self.context(sources=sources), no_aggregates="a splitter's WHEN condition")
        for branch in s.branches:
            self.typer.type_of(branch.cond, ctx)
        if s.partition is not None:
            self.report("CCL2401", s.partition.span, "a splitter cannot be partitioned")
        self.claim(s.name, "splitter")
        # ESP: the targets of a splitter over a window (or delta stream) are delta streams with its
        # key, so updates and deletes go on through them; over a stream they are streams.
        kind, key = "stream", None
        if len(sources) == 1 and sources[0].element.kind in ("window", "delta stream"):
            key = deduce_key(s.select, sources, self.elements)
            kind = "delta stream" if key else "stream"
            if not key:
                self.report("CCL2202", s.select.span, f"a splitter over {sources[0].element.kind} "
                            f"'{sources[0].element.name}' must select its key columns unchanged: its "
                            "targets are delta streams with that key")
        for x in aggregate_calls(s.select.items):
            self.report("CCL2205", x.span, f"{x.func.name}() is an aggregate: a splitter's SELECT "
                                           "gives each row's columns and expressions of them")
        for targets in [b.targets for b in s.branches] + [s.otherwise]:
            names = [t.name for t in targets]
            for i, t in enumerate(targets):  # ESP: "each target stream name can appear only once"
                if t.name in names[:i]:
                    self.report("CCL2002", t.span, f"'{t.name}' is named twice in one list of targets")
        mine: set[str] = set()
        for target in [t for b in s.branches for t in b.targets] + s.otherwise:
            if target.name in mine:
                continue  # one target may take several branches
            mine.add(target.name)
            if self.claim(target, kind):
                self.elements[target.name] = Element(target.name, kind, s.role, dict(columns),
                                                     key=list(key or []), node=s)

    def stmt_CreateStore(self, s: n.CreateStore) -> None:
        self.claim(s.name, "store")

    def stmt_CreateLibrary(self, s: n.CreateLibrary) -> None:
        seen: set[str] = set()
        for fn in s.functions:
            if fn.name.name in seen:
                self.report("CCL2002", fn.name.span, f"library '{s.name.name}' declares "
                                                     f"'{fn.name.name}' twice")
            seen.add(fn.name.name)
            for spec in [fn.return_type, *fn.params]:
                self.type_spec(spec)  # CCL2009 for an unknown type
        if self.claim(s.name, "library"):
            self.typer.libraries[s.name.name] = s

    def stmt_AttachAdapter(self, s: n.AttachAdapter) -> None:
        target = self.element(s.target)
        if s.direction == "input" and target is not None and target.role != "input" \
                and target.kind != "reference":
            self.report("CCL2213", s.target.span, f"input adapter {s.name.name} publishes into "
                        f"'{target.name}', which is not an INPUT element: its rows come from its query")
        if s.partition is not None:
            self.report("CCL2401", s.partition.span, "an adapter cannot be partitioned")
        self.claim(s.name, "adapter")

    # --- Flex ----------------------------------------------------------------------------------

    def stmt_CreateFlex(self, s: n.CreateFlex) -> None:
        inputs = [el for el in (self.element(i) for i in s.inputs) if el is not None]
        for keep in s.input_keeps:
            if keep is not None:
                self.keep_count(keep)
        out = s.output
        columns = self._schema_or_missing(out.schema, out.name)
        element = Element(out.name.name, out.kind, out.role, columns, node=s, keep=out.keep)
        if out.keep is not None:
            self.keep_count(out.keep)
        self.keys(out, element, None, [])
        # The Flex may share its output's name (Studio does so), and its code may use typeof(output).
        if s.name.name != out.name.name:
            self.claim(s.name, "flex")
        if self.claim(out.name, f"{out.role + ' ' if out.role else ''}{out.kind}"):
            self.elements[out.name.name] = element
        sources = [Source(el.name, el) for el in inputs] + [Source(element.name, element)]
        self.partitions_var = f"{out.name.name}_partitions" if s.partition is not None else None
        scope, functions = self.local_declare(s.declare, sources)
        self.partitions_var = None
        for el in inputs:
            scope.vars[el.name + "_old"] = Variable(el.name + "_old", el.row_type, "implicit")
        # ESP's W_stream (the rows of W: lookups, for loops) and W_iterator, for every input and
        # for the output (ccl/splash/windows.py)
        for name, el in [(el.name, el) for el in inputs] + [(element.name, element),
                                                            (s.name.name, element)]:
            scope.vars[name + "_stream"] = Variable(name + "_stream", Type("window", (el.row_type,)),
                                                    "implicit")
            scope.vars[name + "_iterator"] = Variable(name + "_iterator",
                                                      Type("iterator", (el.row_type,)), "implicit")
        input_names = {el.name for el in inputs}
        for h in s.handlers:
            if isinstance(h, n.OnHandler) and h.source is not None and h.source.name not in input_names:
                self.report("CCL2211", h.source.span, f"ON {h.source.name}: not an input of Flex "
                                                      f"'{s.name.name}'")
            checker = StatementChecker(self.typer, self.report, self.type_spec,
                                       element.row_type if not element.open else None)
            checker.block(h.body, self.context(scope, sources, splash=True, functions=functions))
        if s.partition is not None:
            self.partition(s, out.name.name, f"Flex {out.kind}", s.partition,
                           [Source(el.name, el) for el in inputs], None)

    # --- modules -----------------------------------------------------------------------------

    def stmt_CreateModule(self, s: n.CreateModule) -> None:
        params: dict[str, n.ParamDecl] = {}
        for stmt in s.body:
            if isinstance(stmt, (n.CreateModule, n.AttachAdapter)):
                what = "CREATE MODULE" if isinstance(stmt, n.CreateModule) else "ATTACH ADAPTER"
                self.report("CCL2503", stmt.span, f"{what} is not allowed inside a module")
            elif isinstance(stmt, n.GlobalDeclare):
                params.update({i.name.name: i for i in stmt.block.items if isinstance(i, n.ParamDecl)})
        for decl in params.values():
            if decl.default is not None:
                _, why = bound_module_parameter(decl, decl.default, {})
                if why is not None:
                    self.report("CCL2103", decl.default.span, f"default of module '{s.name.name}': {why}")
        inner = Analyzer({}, self.diagnostics)
        inner.module_stores = {x.name for x in s.stores}
        inner.schemas = dict(self.schemas)
        inner.typedefs = dict(self.typedefs)
        inner.modules = dict(self.modules)  # a module may LOAD a module created before it
        inner.typer.libraries = dict(self.typer.libraries)
        inner.run([st for st in s.body if not isinstance(st, (n.CreateModule, n.AttachAdapter))])
        # Partitioned elements inside the module get the same safety checks as top-level ones.
        self.partition_facts.extend(inner.partition_facts)
        self.typer.resolved.update(inner.typer.resolved)
        outputs = {}
        for name in s.outputs + s.inputs:
            if name.name not in inner.elements:
                self.report("CCL2001", name.span, f"module '{s.name.name}' declares '{name.name}' but "
                                                  "does not create it")
        for name in s.outputs:
            if name.name in inner.elements:
                outputs[name.name] = inner.elements[name.name]
        if self.claim(s.name, "module"):
            inputs = {i.name: inner.elements.get(i.name) for i in s.inputs}
            self.modules[s.name.name] = Module(s, inner.param_decls, inputs, outputs, inner.partitioned)
        inner.release()

    def stmt_LoadModule(self, s: n.LoadModule) -> None:
        module = self.modules.get(s.module.name)
        if module is None:
            self.report("CCL2001", s.module.span, f"unknown module '{s.module.name}'")
            return
        if "partition" in s.clauses and s.clauses[-1] != "partition":
            self.report("CCL2408", s.partition.span, "the PARTITION clause of LOAD MODULE must be "
                                                     "the last clause")
        mnode = module.node
        self._bindings(s, s.inputs, [i.name for i in mnode.inputs], "input", "CCL2501")
        self._bindings(s, s.outputs, [o.name for o in mnode.outputs], "output", "CCL2501")
        self._bindings(s, s.parameters, list(module.params), "parameter", "CCL2502",
                       required=[p for p, d in module.params.items() if d.default is None])
        self._module_parameters(s, module)
        # a module's stores: those its STORES clause names and those its body creates
        stores = [x.name for x in mnode.stores] + [st.name.name for st in mnode.body
                                                     if isinstance(st, n.CreateStore)]
        self._bindings(s, s.stores, stores, "store", "CCL2501", required=[])
        for b in s.stores:
            self.store(b.value)
        bound_inputs: list[Source] = []
        for b in s.inputs:
            el = self.element(b.value)
            inner = module.inputs.get(b.name.name)
            if el is not None:
                bound_inputs.append(Source(b.name.name, el))
                if inner is not None:
                    bound_inputs.append(Source(el.name, el))
                    self._bound_columns(b, el, inner)
        self.claim(s.instance, "module instance")
        for b in s.outputs:
            inner_el = module.outputs.get(b.name.name)
            columns = dict(inner_el.columns) if inner_el else {}
            kind = inner_el.kind if inner_el else "stream"
            if self.claim(b.value, kind):
                self.elements[b.value.name] = Element(b.value.name, kind, None, columns,
                                                      key=list(inner_el.key) if inner_el else [], node=s)
        outer = 1
        if s.partition is not None:
            self.partition(s, s.instance.name, "module", s.partition, bound_inputs, None)
            if self.partition_facts and self.partition_facts[-1].node is s:
                self.partition_facts[-1].module_body = list(module.node.body)
            mine = self.partitioned[-1] if self.partitioned else None
            outer = mine.count if mine is not None and mine.name == s.instance.name else None
        # the partitioned elements of the module's body, in this instance: their own instances in
        # every instance of the module (module 3 x window 2 = 6)
        for pe in module.partitioned:
            self.partitioned.append(PartitionedElement(
                f"{s.instance.name}.{pe.name}", pe.kind, pe.methods,
                pe.count * outer if pe.count is not None and outer is not None else None,
                pe.count_text,  # the count its partition function takes (explain)
                pe.broadcast, pe.node, pe.specs))

    def _module_parameters(self, s: n.LoadModule, module: Module) -> None:
        """The values bound to a module's parameters fit their types (CCL2103), and the module's
        KEEP row counts that read them are positive integers in this instance (CCL2303)."""
        outer = {name: p.value for name, p in self.parameters.items() if name in self.param_decls}
        given = {b.name.name: b.value for b in s.parameters}
        values: dict[str, object] = {}
        for name, decl in module.params.items():
            expr = given.get(name, decl.default)
            if expr is None:
                continue
            value, why = bound_module_parameter(decl, expr, outer)
            if why is not None and name in given:  # a wrong default is reported with the module
                self.report("CCL2103", expr.span, f"LOAD MODULE {s.instance.name}: {why}")
            elif why is None and value is not UNKNOWN:
                values[name] = value
        keeps = [x for st in module.node.body for x in st.walk() if isinstance(x, n.Keep)]
        for keep in keeps:
            for count in (keep.count, keep.slack):
                if not _names_read(count):
                    continue  # a constant count was checked with the module
                _, why = keep_count(count, values)
                if why is not None:
                    self.report("CCL2303", s.instance.span, f"module instance '{s.instance.name}': "
                                f"KEEP {keep_count_text(count)} ROWS (line {keep.span.line}): {why}")

    def _bound_columns(self, b: n.Binding, outer: Element, inner: Element) -> None:
        """The element bound to a module input has the input's columns (the module reads them)."""
        if outer.open or inner.open:
            return
        for name, t in inner.columns.items():
            given = outer.columns.get(name)
            if given is None or not widens(given, t):
                have = "has no such column" if given is None else f"has it as {given}"
                self.report("CCL2504", b.value.span, f"module input '{inner.name}' has column "
                            f"'{name}' ({t}); '{outer.name}' {have}")
                return

    def store(self, ident: n.Ident) -> None:
        """A name that must be a store: one created before (CCL2001 when none, CCL2211 when the
        name is something else), or in a module body one its STORES clause names."""
        if ident.name not in self.module_stores and self.names.get(ident.name) != "store":
            self._not_a("store", ident)

    def _bindings(self, s: n.LoadModule, bindings: list[n.Binding], declared: list[str], what: str,
                  code: str, required: Optional[list[str]] = None) -> None:
        seen: set[str] = set()
        for b in bindings:
            name = b.name.name
            if name not in declared:
                self.report(code, b.name.span, f"module '{s.module.name}' has no {what} '{name}'")
            elif name in seen:
                self.report(code, b.name.span, f"{what} '{name}' is bound twice")
            seen.add(name)
        missing = [d for d in (required if required is not None else declared) if d not in seen]
        if missing:
            self.report(code, s.span, f"LOAD MODULE {s.module.name} does not bind {what}(s) "
                                      f"{', '.join(missing)}")

    # --- PARTITION -----------------------------------------------------------------------------

    def partition(self, node: n.Node, target: str, kind: str, p: n.Partition, sources: list[Source],
                  select: Optional[n.Select], key: Optional[Sequence[str]] = ()) -> None:
        """The partitioning rules (CCL23xx, CCL24xx) of one PARTITION clause."""
        inputs: dict[str, Element] = {}
        for src in sources:
            inputs.setdefault(src.alias, src.element)
            inputs.setdefault(src.element.name, src.element)
        distinct_inputs = {id(el) for el in inputs.values()}
        count, count_text = self._partition_count(p)
        specs_by_input: dict[str, n.PartitionSpec] = {}
        unknown_hash = False
        methods = []
        for spec in p.specs:
            if spec.source is None:
                if len(distinct_inputs) > 1:
                    self.report("CCL2402", spec.span, f"'{target}' has several inputs: say which one "
                                                      "this partition function applies to (BY source)")
                    continue
                el = next(iter(inputs.values()), None)
                name = el.name if el else None
            else:
                name = spec.source.name
                el = inputs.get(name)
                if el is None:
                    self.report("CCL2403", spec.source.span, f"'{name}' is not an input of '{target}'")
                    continue
                if el.name in specs_by_input:
                    self.report("CCL2404", spec.source.span, f"input '{name}' is partitioned twice")
                    continue
            if el is None:
                continue
            specs_by_input[el.name] = spec
            if spec.method == "hash":
                for col in spec.columns:
                    if not el.open and col.name not in el.columns:
                        self.report("CCL2405", col.span, f"HASH column '{col.name}' is not a column of "
                                                         f"'{el.name}'")
                        unknown_hash = True
                methods.append(f"HASH({', '.join(c.name for c in spec.columns)}) by {el.name}")
            elif spec.method == "roundrobin":
                methods.append(f"ROUNDROBIN by {el.name}")
            else:
                self._custom_block(target, spec, el, name)
                methods.append(f"custom by {el.name}")
        reserved = f"{target}_partitions"
        var = self.globals.vars.get(reserved)
        spans = [var.span] if var is not None and var.span is not None else []
        local = getattr(node, "declare", None)
        spans += [d.name.span for item in (local.items if local else []) if isinstance(item, n.VarDecl)
                  for d in item.declarators if d.name.name == reserved]
        for span in spans:
            self.report("CCL2407", span, f"'{reserved}' is defined by ESP as the partition count of "
                                         f"'{target}'; rename this variable or parameter")
        broadcast = sorted({el.name for el in inputs.values()} - set(specs_by_input))
        self.partitioned.append(PartitionedElement(
            target, kind, methods, count, count_text, broadcast, node,
            [(spec, name) for name, spec in specs_by_input.items()]))
        if unknown_hash:  # safety warnings about a HASH that names no column would only mislead
            return
        self.partition_facts.append(PartitionFacts(
            target, node, p, inputs, specs_by_input, self._stateful(node, select, sources, local),
            len(sources) > 1 and isinstance(node, n.CreateElement), list(select.group_by) if select else [], select, getattr(node, "keep", None)
            or getattr(getattr(node, "output", None), "keep", None), local,
            _splash_of(node) + [spec.body for spec in p.specs if spec.body is not None],
            key=list(key or ())))

    def _partition_count(self, p: n.Partition) -> tuple[Optional[int], str]:
        if isinstance(p.count, int):
            if not 1 <= p.count <= PARTITIONS_MAX:
                self.report("CCL2302", p.span, f"PARTITIONS {p.count}: the count must be 1..65535")
            return p.count, str(p.count)
        name = p.count.name
        if name not in self.param_decls:
            self.report("CCL2301", p.count.span, f"PARTITIONS {name}: no PARAMETER '{name}' is declared")
            return None, name
        resolved = self.parameters.get(name)
        value = resolved.value if resolved is not None and isinstance(resolved.value, int) else None
        return value, f"{name} = {value}" if value is not None else name

    def _custom_block(self, target: str, spec: n.PartitionSpec, el: Element, by_name: Optional[str]) -> None:
        scope = self.globals.child()
        scope.vars[f"{target}_partitions"] = Variable(f"{target}_partitions", INTEGER, "implicit")
        sources = [Source(el.name, el)] + ([Source(by_name, el)] if by_name and by_name != el.name else [])
        checker = StatementChecker(self.typer, self.report, self.type_spec)
        checker.block(spec.body, self.context(scope, sources, splash=True))
        for ret, t in checker.returns:
            if ret.value is not None and not t.is_vague and t.name not in ("integer", "long"):
                self.report("CCL2406", ret.span, f"the partition function returns {t}, not an integer")

    def _stateful(self, node: n.Node, select: Optional[n.Select], sources: list[Source],
                  declare: Optional[n.DeclareBlock]) -> bool:
        if isinstance(node, n.CreateElement):
            if node.kind == "window" or node.keep is not None:
                return True
            if select is not None and (select_aggregates(select) or any(
                    s.from_node is not None and s.from_node.keep is not None for s in sources)):
                return True
            return _declares_state(declare)
        if isinstance(node, n.CreateFlex):
            return node.output.kind != "stream" or _declares_state(declare)
        if isinstance(node, n.LoadModule):
            module = self.modules.get(node.module.name)
            return module is not None and any(
                isinstance(st, n.CreateElement) and st.kind == "window" for st in module.node.body)
        return False


def _functions_of(block: n.DeclareBlock) -> dict[str, n.FuncDef]:
    """The SPLASH functions a DECLARE block defines, by name."""
    return {i.name.name: i for i in block.items if isinstance(i, n.FuncDef)}


def _declares_state(declare: Optional[n.DeclareBlock]) -> bool:
    """Whether a DECLARE block holds variables (functions alone are no state)."""
    return declare is not None and any(isinstance(i, n.VarDecl) for i in declare.items)


def output_name(item: n.SelectItem, index: int) -> str:
    """The column name a select item produces: its alias, or the column it reads."""
    if item.alias is not None:
        return item.alias.name
    if isinstance(item.expr, n.Var):
        return item.expr.name.name
    if isinstance(item.expr, n.FieldAccess):
        return item.expr.field.name
    return f"column{index + 1}"


def deduce_key(select: n.Select, sources: list[Source], elements: Mapping[str, Element]
               ) -> Optional[list[str]]:
    """PRIMARY KEY DEDUCED as ESP does it, or None when it cannot be deduced."""
    if select.group_by:
        key = []
        for g in select.group_by:
            match = [i for i in select.items if isinstance(i, n.SelectItem) and i.expr == g]
            if not match:
                return None
            key.append(output_name(match[0], select.items.index(match[0])))
        return key
    key: list[str] = []
    for src in _key_sources(select, sources):
        if not src.element.key:
            return None
        for col in src.element.key:
            found = None
            for idx, item in enumerate(select.items):
                if isinstance(item, n.Star) and (item.qualifier is None or item.qualifier.name == src.alias):
                    found = col
                    break
                if isinstance(item, n.SelectItem) and _reads_column(item.expr, src, col, len(sources)):
                    found = output_name(item, idx)
                    break
            if found is None:
                return None
            key.append(found)
    return key or None


def _join_sides(item: n.Node, add: Callable[[Optional[n.Node], str, set[str], set[str]], None]
                ) -> set[str]:
    """The aliases of a FROM item, handing each join's ON condition and kind to ``add`` with the
    aliases of its two sides (a module-level function: a recursive closure is a reference cycle)."""
    if isinstance(item, n.FromSource):
        return {(item.alias or item.name).name}
    assert isinstance(item, n.Join)
    left, right = _join_sides(item.left, add), _join_sides(item.right, add)
    add(item.on, item.kind, left, right)
    return left | right


def _key_sources(select: n.Select, sources: list[Source]) -> list[Source]:
    """The sources whose keys make the key of a join: a source drops out when each of its key
    columns is equated (in ON or WHERE, under AND) with a column of a source that stays, in a way
    that holds for every row of the join: an outer join's ON determines only its null-extended
    side from its preserved side (a many-to-one join is keyed by the "many" side; A LEFT JOIN C
    by A; A FULL JOIN B by both)."""
    if len(sources) < 2:
        return sources
    # (determined, by): column ``determined`` equals column ``by`` in every row where it is set.
    directed: set[tuple[tuple[str, str], tuple[str, str]]] = set()

    def add(on: Optional[n.Node], kind: str, left: set[str], right: set[str]) -> None:
        pairs: set = set()
        _equalities(on, pairs)
        for a, b in pairs:
            for det, by in ((a, b), (b, a)):
                kept_unmatched = ((kind in ("left", "full") and det[0] in left)
                                  or (kind in ("right", "full") and det[0] in right))
                if not kept_unmatched:
                    directed.add((det, by))

    for item in select.sources:
        _join_sides(item, add)
    add(select.where, "inner", set(), set())
    kept = list(sources)
    for src in reversed(sources):
        others = {o.alias for o in kept if o is not src}
        bound = {col for col in src.element.key
                 if any(det == (src.alias, col) and by[0] in others for det, by in directed)}
        if src.element.key and others and bound == set(src.element.key):
            kept.remove(src)
    return kept


def _equalities(e: Optional[n.Node], into: set) -> None:
    """``src.col = src.col`` conditions of ``e`` joined by AND, as ((alias, col), (alias, col))."""
    if isinstance(e, n.Binary) and e.op == "and":
        _equalities(e.left, into)
        _equalities(e.right, into)
    elif isinstance(e, n.Binary) and e.op == "=":
        sides = [(x.base.name.name, x.field.name) for x in (e.left, e.right)
                 if isinstance(x, n.FieldAccess) and isinstance(x.base, n.Var)]
        if len(sides) == 2 and sides[0][0] != sides[1][0]:
            into.add((sides[0], sides[1]))


def _reads_column(e: n.Node, src: Source, col: str, n_sources: int) -> bool:
    if isinstance(e, n.FieldAccess) and isinstance(e.base, n.Var):
        return e.field.name == col and e.base.name.name in (src.alias, src.element.name)
    return isinstance(e, n.Var) and e.name.name == col and n_sources == 1


def select_aggregates(select: n.Select) -> bool:
    """Whether a SELECT aggregates: GROUP BY, or an aggregate call in the select list or HAVING."""
    if select.group_by:
        return True
    parts = list(select.items) + ([select.having] if select.having is not None else [])
    return next(aggregate_calls(parts), None) is not None


def _splash_of(node: n.Node) -> list[n.Node]:
    """The SPLASH code an element's instances run: Flex handlers and local functions."""
    out: list[n.Node] = []
    declare = getattr(node, "declare", None)
    if declare is not None:
        out += [i for i in declare.items if isinstance(i, n.FuncDef)]
    if isinstance(node, n.CreateFlex):
        out += [h.body for h in node.handlers]
    return out


def _names_read(count: object) -> list[n.Ident]:
    """The names a KEEP row count reads."""
    if isinstance(count, n.Ident):
        return [count]
    if isinstance(count, n.Node):
        return [x.name for x in count.walk() if isinstance(x, n.Var)]
    return []

