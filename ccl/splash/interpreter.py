"""The SPLASH interpreter: the reference semantics of SPLASH code, and custom partition functions.

:class:`Interpreter` runs blocks, expressions and functions against global variables and input
rows; :func:`declare_globals` evaluates global DECLARE blocks; :class:`PartitionFunction` is the
entry point of a ``PARTITION BY src { ... }`` block: it maps one input row to an instance number or
to the reason the row is a bad record.

Every call gets a step budget (statements executed plus operators and calls evaluated) and a limit
on nested calls. Whatever goes wrong while running raises :class:`SplashError` (of which
:class:`BudgetExhausted` is one kind) and nothing else.
"""
from __future__ import annotations

import copy
import datetime as dt
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

from ..syntax import nodes as n
from .types import ANY, INTEGER, Type
from .compiler import Compiler
from .machine import RETURN, SEQUENCE, Cell, ExitSignal, Frame, Machine
from .convert import PLAIN_KINDS, coerce, from_python
from .values import INT_MAX, INT_MIN, Interval, Record, SplashError, as_type, is_integral, kind

DEFAULT_BUDGET = 100_000
DEFAULT_MAX_DEPTH = 200
_FRAMES_PER_CALL = 40  # Python frames one SPLASH call may need (nested statements included)
_PLAIN_TYPE = {kind: python for python, kind in PLAIN_KINDS.items()}  # column type -> Python type


class InputRecord(Record):
    """An input row's record made by :meth:`Interpreter.input_record` (read-only, typed)."""


_new_input = InputRecord.__new__
new_input = _new_input  # (for the classes of input_class too)


def _reduce_input(rec: InputRecord) -> tuple:
    """How pickle and copy write a record of an :meth:`Interpreter.input_class` class (made at
    run time, so not importable): as the plain input record it stands for."""
    state = {"types": rec.types, "key_fields": rec.key_fields, "readonly": True, "source": rec.source}
    if rec.opcode is not None:
        state["opcode"] = rec.opcode
    return (_new_input, (InputRecord,), state, None, iter(dict.items(rec)))


@dataclass
class Outcome:
    """How a block ended: ``returned`` is False when it ran to its end or hit ``exit``."""

    returned: bool
    value: object = None


@dataclass
class Declarations:
    """What global DECLARE blocks define: variable and parameter values and types, the parameter
    names (read-only), SPLASH functions and typedefs."""

    values: dict[str, object] = field(default_factory=dict)
    types: dict[str, Type] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)
    functions: dict[str, n.FuncDef] = field(default_factory=dict)
    typedefs: dict[str, Type] = field(default_factory=dict)


_RAN_OUT = Outcome(False)  # what Session.run gives for a block that did not return (never changed)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Interpreter:
    """Compiles SPLASH code once (on first use of each node) and runs it any number of times.

    ``globals`` maps names to values (plain Python values are accepted, see
    :func:`~ccl.splash.convert.from_python`), or is a :class:`Declarations`. ``global_types`` and
    ``source_types`` (source name -> column -> type) give declared types (a :class:`Type`, a type
    node or text like ``'money(2)'``); without one an outside value's type is inferred.
    Changes a call makes to global variables are not kept: every call starts from these values,
    unless the caller binds a store with :meth:`bind`: then global variables live in that plain
    dict (name -> value), calls read them there and write their changes back (also when the call
    fails). An engine binds each partition instance's own dict before running code for it.
    """

    def __init__(self, globals: Union[Mapping[str, object], Declarations] = {},
                 functions: Mapping[str, n.FuncDef] = {}, *,
                 global_types: Optional[Mapping[str, object]] = None,
                 constants: Iterable[str] = (),
                 typedefs: Optional[Mapping[str, Type]] = None,
                 source_types: Optional[Mapping[str, Mapping[str, object]]] = None,
                 budget: int = DEFAULT_BUDGET, max_depth: int = DEFAULT_MAX_DEPTH,
                 clock: Optional[Callable[[], dt.datetime]] = None,
                 printer: Optional[Callable[[str], None]] = None) -> None:
        if isinstance(globals, Declarations):
            decl = globals
            values: Mapping[str, object] = decl.values
            types: dict[str, Type] = {**decl.types, **{k: as_type(v) for k, v in (global_types or {}).items()}}
            functions = {**decl.functions, **functions}
            typedefs = {**decl.typedefs, **(typedefs or {})}
            constants = set(constants) | decl.constants
        else:
            values, types = globals, {k: as_type(v) for k, v in (global_types or {}).items()}
        self.source_types = {src: {c: as_type(t) for c, t in cols.items()}
                             for src, cols in (source_types or {}).items()}
        # source -> (column types, the plain Python type of each column): see input_record
        self._input_types: dict[str, tuple[dict[str, Type], dict[str, Optional[type]]]] = {}
        self._input_classes: dict[tuple, type] = {}  # see input_class
        self.compiler = Compiler(dict(functions), dict(typedefs or {}), self.source_types)
        consts = set(constants)
        self._globals = {name: (from_python(v, types.get(name, ANY)), types.get(name, ANY), name in consts)
                         for name, v in values.items()}
        self._mutable = {name for name, (v, _, _) in self._globals.items() if isinstance(v, (list, dict))}
        self._cell_specs = [(name, v, t, const, name in self._mutable)
                            for name, (v, t, const) in self._globals.items()]
        self.budget = budget
        self.max_depth = max_depth
        self._needed_limit = 1000 + max_depth * _FRAMES_PER_CALL  # see _guard
        # the recursion limit a run needs (a run raises a lower one for its time: a caller running
        # many may raise it once around them)
        self.needed_recursion_limit = self._needed_limit
        self.clock = clock or _utc_now
        self.printer = printer
        self._compiled: dict[int, tuple[n.Node, Callable]] = {}
        self._bound: Optional[dict[str, object]] = None
        self.row_id: Optional[int] = None  # what getrowid() returns: set by an engine per input row

    def bind(self, store: Optional[dict[str, object]]) -> None:
        """Keep global variables in ``store`` (name -> SPLASH value; names not declared are untyped
        variables) from now on; ``None`` goes back to fresh copies of the declared values per call.
        The store holds plain SPLASH values (containers, records, event caches): picklable."""
        self._bound = store

    def initial_values(self) -> dict[str, object]:
        """A fresh copy of the declared global values (for :meth:`bind`)."""
        return {name: copy.deepcopy(v) for name, (v, _, const) in self._globals.items()}
    # --- public entry points ---------------------------------------------------------------------

    def run_block(self, block: n.Block, sources: Mapping[str, Mapping[str, object]] = {},
                  extra_globals: Optional[Mapping[str, Cell]] = None,
                  output: Optional[Callable[[Record], None]] = None) -> Outcome:
        """Run a block with input rows ``sources`` (source name -> column -> value); ``output``
        receives a copy of each record an ``output`` statement emits (its ``opcode`` set by
        setOpcode, else None); without it ``output`` is an error."""
        found = self._compiled.get(id(block))
        body = (found[1] if found is not None and found[0] is block
                else self._compile(block, lambda: self.compiler.unit(block)))
        machine = self._machine(extra_globals)
        machine.emit = output
        # what _guard does, without its closure (this runs once per event of a Flex)
        old_limit = sys.getrecursionlimit()
        needed = self._needed_limit
        if old_limit < needed:
            sys.setrecursionlimit(needed)
        try:
            frame = Frame([], self._rows(sources))
            try:
                signal = body(machine, frame)
            except ExitSignal:
                return Outcome(False)
            return Outcome(True, frame.ret) if signal == RETURN else Outcome(False)
        except SplashError:
            raise
        except RecursionError:
            raise SplashError("code nested too deeply") from None
        except Exception as e:  # a bug of the interpreter must still not escape as such
            raise SplashError(f"internal error: {type(e).__name__}: {e}") from None
        finally:
            if self._bound is not None:
                self._write_back(machine)
            if old_limit < needed:
                sys.setrecursionlimit(old_limit)

    def session(self, store: dict[str, object]) -> "Session":
        """A :class:`Session`: blocks run one after another against the global variables of
        ``store`` (as after :meth:`bind` of it), with the set-up shared by the runs."""
        return Session(self, store)

    def evaluate(self, expr: n.Node, sources: Mapping[str, Mapping[str, object]] = {},
                 variables: Mapping[str, object] = {}) -> object:
        """The value of one expression, with input rows and local variables (name -> value)."""
        ev = self._compile(expr, lambda: self.compiler.expr(expr))
        machine = self._machine(None)

        def go() -> object:
            scope = {name: Cell(from_python(v)) for name, v in variables.items()}
            return ev(machine, Frame([scope], self._rows(sources)))
        return self._guard(go, machine)

    def call(self, name: str, args: Iterable[object] = ()) -> object:
        """Call the SPLASH function ``name`` with ``args``."""
        if name not in self.compiler.function_defs:
            raise SplashError(f"unknown function '{name}'")
        machine = self._machine(None)

        def go() -> object:
            try:
                return self.compiler.function(name).call(machine, [from_python(a) for a in args])
            except ExitSignal:
                return None
        return self._guard(go, machine)

    # --- helpers -----------------------------------------------------------------------------------

    def _compile(self, node: n.Node, make: Callable[[], Callable]) -> Callable:
        found = self._compiled.get(id(node))
        if found is None or found[0] is not node:
            found = (node, make())
            self._compiled[id(node)] = found
        return found[1]

    def _machine(self, extra: Optional[Mapping[str, Cell]]) -> Machine:
        bound = self._bound
        if bound is None:
            cells = {name: Cell(copy.deepcopy(v) if mutable else v, t, const)
                     for name, v, t, const, mutable in self._cell_specs}
        else:
            cells = {}
            for name, v, t, const, mutable in self._cell_specs:
                if not const and name in bound:
                    cells[name] = Cell(bound[name], t)
                else:
                    cells[name] = Cell(copy.deepcopy(v) if mutable else v, t, const)
            for name, v in bound.items():
                if name not in cells:
                    cells[name] = Cell(v)
        if extra:
            cells.update(extra)
        return Machine(self.budget, self.max_depth, cells, self.clock, self.printer, self.row_id)

    def _write_back(self, machine: Machine) -> None:
        """Keep what a call did to the bound global variables."""
        bound = self._bound
        if bound is None:
            return
        for name, cell in machine.globals.items():
            if not cell.const and (name in bound or name in self._globals or name == SEQUENCE):
                bound[name] = cell.value

    def input_record(self, src: str, row: Mapping[str, object], opcode: Optional[int] = None,
                     key_fields: Sequence[str] = (), splash_form: bool = False) -> Record:
        """The read-only record an input row ``row`` of ``src`` is in code (values in SPLASH form,
        typed by ``source_types``), as :meth:`run_block` makes it from a mapping. Passed to
        :meth:`run_block` under ``src``, it is used as it is (nothing converted again); make one
        per call, since ``setOpcode`` may change it. ``splash_form``: the caller vouches that
        ``row`` is a dict whose values are already in SPLASH form for their column types (an
        engine's rows cast to the source's columns), so they are taken as they are."""
        types, plain = self._input_types_of(src)
        rec = _new_input(InputRecord)  # InputRecord(...) without __init__ (values.copy_record)
        if splash_form and type(row) is dict:
            dict.update(rec, row)
            # the attributes set below, as one dict (cheaper than an attribute at a time)
            keys = key_fields if type(key_fields) is tuple else tuple(key_fields)
            rec.__dict__ = ({"types": types, "key_fields": keys, "readonly": True, "source": src}
                            if opcode is None else {"types": types, "key_fields": keys,
                                                    "readonly": True, "source": src, "opcode": opcode})
            return rec
        if not isinstance(row, dict) and not isinstance(row, Mapping):
            raise SplashError(f"the row of '{src}' is not a mapping of columns to values")
        for c, v in row.items():
            p = plain.get(c)
            # from_python's own fast path, without the call: a value of the column's plain type
            if v is None or (type(v) is p and (p is not int or INT_MIN <= v <= INT_MAX)):  # type: ignore[operator]
                rec[c] = v
            else:
                rec[c] = from_python(v, types.get(c, ANY))
        # The types dict is shared by every record of src: records never change their types
        # dict in place (copy_record shares it too), so no copy per row.
        rec.types = types
        rec.key_fields = key_fields if type(key_fields) is tuple else tuple(key_fields)
        rec.readonly, rec.source = True, src
        if opcode is not None:
            rec.opcode = opcode
        return rec

    def _input_types_of(self, src: str) -> tuple[dict[str, Type], dict[str, Optional[type]]]:
        """The column types of input ``src`` and each column's plain Python type (made once)."""
        found = self._input_types.get(src)
        if found is None:
            types = dict(self.source_types.get(src, {}))
            found = self._input_types[src] = (types, {c: _PLAIN_TYPE.get(t.name) for c, t in types.items()})
        return found

    def input_class(self, src: str, key_fields: Sequence[str] = (),
                    opcode: Optional[int] = None) -> type:
        """A subclass of the input records' class holding, as class attributes, what
        :meth:`input_record` sets on each record of ``src`` (types, key fields, read-only, source,
        opcode): ``rec = new_input(cls); dict.update(rec, row)`` is then ``input_record(src, row,
        opcode, key_fields, True)`` without an attribute dict per record (``setOpcode`` still sets
        the record's own opcode). Made once per (source, key fields, opcode)."""
        keys = tuple(key_fields)
        found = self._input_classes.get((src, keys, opcode))
        if found is None:
            attrs = {"types": self._input_types_of(src)[0], "key_fields": keys, "readonly": True,
                     "source": src, "__reduce__": _reduce_input}
            if opcode is not None:
                attrs["opcode"] = opcode
            found = self._input_classes[(src, keys, opcode)] = type("InputRecord", (InputRecord,), attrs)
        return found

    def _rows(self, sources: Mapping[str, Mapping[str, object]]) -> dict[str, Record]:
        rows = {}
        for src, row in sources.items():
            if isinstance(row, InputRecord) and row.source == src:  # type: ignore[attr-defined]
                rows[src] = row  # made by input_record
                continue
            rows[src] = self.input_record(src, row, getattr(row, "opcode", None),
                                          tuple(getattr(row, "key_fields", ())))
        return rows

    def _guard(self, go: Callable[[], object], machine: Optional[Machine] = None):  # type: ignore[no-untyped-def]
        """Run ``go`` with room for ``max_depth`` nested SPLASH calls on the Python stack (the
        recursion limit is raised for the call and put back after it); turn any exception that is
        not a SplashError into one."""
        old_limit = sys.getrecursionlimit()
        needed = self._needed_limit
        if old_limit < needed:
            sys.setrecursionlimit(needed)
        try:
            return go()
        except SplashError:
            raise
        except RecursionError:
            raise SplashError("code nested too deeply") from None
        except Exception as e:  # a bug of the interpreter must still not escape as such
            raise SplashError(f"internal error: {type(e).__name__}: {e}") from None
        finally:
            if machine is not None:
                self._write_back(machine)
            if old_limit < needed:
                sys.setrecursionlimit(old_limit)


class Session:
    """Runs blocks one after another against one store of global variables (an engine's instance,
    for the events of one batch): what :meth:`Interpreter.run_block` does after :meth:`Interpreter.bind`
    of that store, each run's outcome and write-back the same, but with one :class:`Machine` and
    one set of variable cells for all the runs. The cells hold the store's values from one run to
    the next (each run writes its changes back, also when it fails), so between runs nothing but
    the session may replace a value of the store (changing a value in place, as feeding an event
    cache does, is fine). Read-only globals that hold containers get a fresh copy per run, as
    :meth:`Interpreter.run_block` gives them."""

    def __init__(self, interp: Interpreter, store: dict[str, object]) -> None:
        self.interp = interp
        self.store = store
        outer, interp._bound = interp._bound, store
        try:
            self.machine = interp._machine(None)
        finally:
            interp._bound = outer
        self.cells = self.machine.globals  # the globals without a run's extra cells
        self.frame = Frame([])
        self._block: Optional[n.Block] = None  # the last block run, and its compiled body
        self._body: Optional[Callable] = None
        self._writable()
        # (name, value, type): read-only containers, copied afresh for each run
        self.fresh = [(name, v, t) for name, v, t, const, mutable in interp._cell_specs
                      if mutable and const]
        # run_with's globals merged with its extra cells, the extra dict, the merged size and
        # the size of the globals it was merged from
        self._merged: Optional[dict[str, Cell]] = None
        self._merged_extra: Optional[dict[str, Cell]] = None
        self._merged_size = self._merged_count = 0

    def run(self, block: n.Block, rows: Mapping[str, Record],
            extra: Optional[Mapping[str, Cell]] = None,
            output: Optional[Callable[[Record], None]] = None, copies: bool = False) -> Outcome:
        """Run ``block`` as :meth:`Interpreter.run_block` does, ``rows`` being the input rows'
        records made by :meth:`Interpreter.input_record` (used as they are). ``copies``: ``output``
        keeps nothing of a record it is given past its call (it copies what it keeps), so records
        are passed as they are instead of as copies. The outcome of a block that did not return is
        one shared object: not to be changed."""
        cells = self.cells
        if self.fresh:
            self._refresh()
        merged = {**cells, **extra} if extra else cells
        body = self._arm(block, output, copies, merged)
        old_limit = sys.getrecursionlimit()
        needed = self.interp._needed_limit
        if old_limit < needed:
            sys.setrecursionlimit(needed)
        try:
            return self._execute(body, rows if type(rows) is dict else dict(rows))
        finally:
            if merged is cells and len(cells) == self.count:  # _write_back's common case
                self._store_writable()
            else:
                self._write_back(merged, extra)
            if old_limit < needed:
                sys.setrecursionlimit(old_limit)

    def run_plain(self, block: n.Block, rows: dict[str, Record],
                  output: Callable[[Record], None]) -> Outcome:
        """``run(block, rows, None, output, copies=True)`` for a caller that has raised the
        recursion limit to the interpreter's ``needed_recursion_limit`` for its runs (an engine's
        batch) and gives ``rows`` as a dict: the same run, its set-up without what those make
        unneeded (the limit's test, the extra cells' merge, the rows' copy)."""
        cells = self.cells
        if self.fresh:
            self._refresh()
        body = self._arm(block, output, True, cells)
        try:
            return self._execute(body, rows)
        finally:
            if len(cells) == self.count:  # _write_back's common case
                self._store_writable()
            else:
                self._write_back(cells, None)

    def run_with(self, block: n.Block, rows: dict[str, Record], extra: dict[str, Cell],
                 output: Callable[[Record], None]) -> Outcome:
        """``run(block, rows, extra, output, copies=True)`` for the caller of :meth:`run_plain`
        (the recursion limit raised, ``rows`` a dict) that passes the same ``extra`` dict, its
        cells updated in place, run after run (an engine's window views). The globals merged
        with it are kept from one run to the next instead of merged per run; when its names
        shadow a global, a read-only container is copied per run, or a run added a global
        (nextval's count), this is :meth:`run` itself."""
        merged = self._merged
        if (merged is None or self._merged_extra is not extra or len(merged) != self._merged_size
                or self._merged_count != self.count):
            merged = self._merge(extra)
            if merged is None:
                return self.run(block, rows, extra, output, copies=True)
        body = self._arm(block, output, True, merged)
        try:
            return self._execute(body, rows)
        finally:
            if len(merged) == self._merged_size:
                # _write_back's common case: the extra names are no global's (see _merge)
                self._store_writable()
            else:  # a run added a cell (nextval's count): the general write-back, merged anew
                self._merged = None
                self._write_back(merged, extra)

    def _arm(self, block: n.Block, output: Optional[Callable[[Record], None]], copies: bool,
             cells: dict[str, Cell]) -> Callable:
        """The compiled body of ``block``, the session's machine set for a run of it: steps and
        depth at 0, no time read yet, emitting to ``output`` (``copies``: see :meth:`run`), with
        ``cells`` as its globals."""
        m = self.machine
        m.steps = m.depth = 0
        m._now = None
        m.row_id = self.interp.row_id
        m.emit = output
        m.emit_copies = copies
        m.globals = cells
        return self._body if block is self._block else self._compiled(block)

    def _store_writable(self) -> None:
        """:meth:`_write_back`'s common case (no cell added by the run): the writable globals'
        values into the store."""
        store = self.store
        for name, cell in self.writable:
            store[name] = cell.value

    def _execute(self, body: Callable, rows: dict[str, Record]) -> Outcome:
        """``body`` run on the session's machine (set up by the caller) over the input ``rows``,
        in the session's one frame (nothing keeps a run's frame past it; reset here, since a
        failed run may have left scopes on it): its outcome, or a :class:`SplashError` for any
        failure, an interpreter's bug included. The frame keeps nothing of the run after it."""
        frame = self.frame
        if frame.scopes:
            frame.scopes.clear()
        frame.sources = rows
        try:
            signal = body(self.machine, frame)
            return Outcome(True, frame.ret) if signal == RETURN else _RAN_OUT
        except ExitSignal:
            return _RAN_OUT
        except SplashError:
            raise
        except RecursionError:
            raise SplashError("code nested too deeply") from None
        except Exception as e:  # a bug of the interpreter must still not escape as such
            raise SplashError(f"internal error: {type(e).__name__}: {e}") from None
        finally:
            frame.sources = frame.ret = None

    def _merge(self, extra: dict[str, Cell]) -> Optional[dict[str, Cell]]:
        """The globals merged with ``extra`` for :meth:`run_with`, or None when it must go
        through :meth:`run` (see there)."""
        self._merged = None
        store, declared, cells = self.store, self.interp._globals, self.cells
        if self.fresh or len(cells) != self.count or any(
                name in cells or name in store or name in declared or name == SEQUENCE
                for name in extra):
            return None
        merged = self._merged = {**cells, **extra}
        self._merged_extra, self._merged_size, self._merged_count = extra, len(merged), self.count
        return merged

    def _compiled(self, block: n.Block) -> Callable:
        """The compiled body of ``block`` (compiled once per interpreter), remembered as the
        session's last block."""
        interp = self.interp
        found = interp._compiled.get(id(block))
        body = (found[1] if found is not None and found[0] is block
                else interp._compile(block, lambda: interp.compiler.unit(block)))
        self._block, self._body = block, body
        return body

    def _refresh(self) -> None:
        """Copy the read-only containers afresh into the cells, as each run starts with them."""
        cells = self.cells
        for name, v, t in self.fresh:
            if name in cells:
                cells[name] = Cell(copy.deepcopy(v), t, True)

    def _writable(self) -> None:
        """The cells Interpreter._write_back would write back, of the globals as they are now."""
        store, declared = self.store, self.interp._globals
        self.writable = [(name, cell) for name, cell in self.cells.items()
                         if not cell.const and (name in store or name in declared or name == SEQUENCE)]
        self.count = len(self.cells)

    def _write_back(self, run_cells: dict[str, Cell], extra: Optional[Mapping[str, Cell]]) -> None:
        """What Interpreter._write_back does, and cells a run added (nextval's count) kept."""
        store, declared = self.store, self.interp._globals
        if run_cells is self.cells and len(run_cells) == self.count:  # no extra cells, none added
            self._store_writable()
            return
        for name, cell in run_cells.items():
            if not cell.const and (name in store or name in declared or name == SEQUENCE):
                store[name] = cell.value
        if run_cells is not self.cells:
            cells = self.cells
            for name, cell in run_cells.items():
                if name not in cells:
                    if not (extra and name in extra):
                        cells[name] = cell
                elif extra and name in extra and name in store and not cells[name].const:
                    cells[name].value = store[name]  # an extra cell stood for a global
        if len(self.cells) != self.count:
            self._writable()


def declare_globals(items: Iterable[n.Node], parameters: Mapping[str, object] = {},
                    base: Optional[Declarations] = None, **options: object) -> Declarations:
    """Evaluate the items of global DECLARE blocks in order: variables (with their initialisers),
    parameters (the value in ``parameters``, else the default, else null), typedefs and functions.
    ``options`` go to the :class:`Interpreter` that evaluates the initialisers."""
    out = copy.copy(base) if base is not None else Declarations()
    out.values, out.types, out.constants = dict(out.values), dict(out.types), set(out.constants)
    out.functions, out.typedefs = dict(out.functions), dict(out.typedefs)
    items = list(items)
    for item in items:
        if isinstance(item, n.FuncDef):
            out.functions[item.name.name] = item
    for item in items:
        if isinstance(item, n.TypeDef):
            out.typedefs[item.name.name] = Interpreter(out, **options).compiler.type(item.type)  # type: ignore[arg-type]
        elif isinstance(item, n.VarDecl):
            for d in item.declarators:
                interp = Interpreter(out, **options)  # type: ignore[arg-type]
                t = interp.compiler.type(item.type)
                value = interp.evaluate(d.init) if d.init is not None else None
                out.values[d.name.name] = coerce(value, t, f"variable '{d.name.name}'")
                out.types[d.name.name] = t
        elif isinstance(item, n.ParamDecl):
            interp = Interpreter(out, **options)  # type: ignore[arg-type]
            name, t = item.name.name, interp.compiler.type(item.type)
            if name in parameters:
                value = from_python(parameters[name], t)
            else:
                value = interp.evaluate(item.default) if item.default is not None else None
            out.values[name] = coerce(value, t, f"parameter '{name}'")
            out.types[name] = t
            out.constants.add(name)
    return out


class PartitionFunction:
    """A custom partition function: ``PARTITION BY source { block } PARTITIONS count`` of ``target``.

    :meth:`assign` runs the block for one row of ``source`` with ``<target>_partitions`` = count
    and returns ``(instance, None)`` with the returned value brought into 0..count-1 by a modulo that
    is never negative (Spark's ``pmod``), or ``(None, reason)``: ``'returned null'``,
    ``'no return'`` (the block ended, or hit ``exit``, without returning),
    ``'returned <type>, not an integer'``, or the message of the :class:`SplashError` that ended it.
    ``globals`` may be a :class:`Declarations`; other keyword options go to :class:`Interpreter`
    (``column_types`` are the types of the source's columns).
    """

    def __init__(self, block: n.Block, source: str, target: str, count: int,
                 globals: Union[Mapping[str, object], Declarations] = {},
                 functions: Mapping[str, n.FuncDef] = {}, *,
                 column_types: Optional[Mapping[str, object]] = None, **options: object) -> None:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"partition count must be a positive integer, not {count!r}")
        self.block, self.source, self.target, self.count = block, source, target, count
        self.interpreter = Interpreter(globals, functions, source_types={source: column_types or {}},
                                       **options)  # type: ignore[arg-type]
        self.count_name = f"{target}_partitions"

    def run(self, row: Mapping[str, object]) -> Outcome:
        """Run the block for ``row`` (column -> value); raises :class:`SplashError`."""
        extra = {self.count_name: Cell(self.count, INTEGER, const=True)}
        return self.interpreter.run_block(self.block, {self.source: row}, extra)

    def assign(self, row: Mapping[str, object]) -> tuple[Optional[int], Optional[str]]:
        """The instance of ``row`` (column -> value), or None and the reason it has none."""
        try:
            outcome = self.run(row)
        except SplashError as e:
            return None, e.reason
        if not outcome.returned:
            return None, "no return"
        value = outcome.value
        if value is None:
            return None, "returned null"
        if not is_integral(value) or isinstance(value, Interval):
            return None, f"returned {kind(value)}, not an integer"
        return int(value) % self.count, None


def declare_state(items: Iterable[n.Node], base: Optional[Declarations] = None,
                  **options: object) -> tuple[Declarations, list[tuple[str, n.EventCacheType]]]:
    """Evaluate the items of a DECLARE block whose variables persist (an element's local DECLARE,
    or the global ones at run time), as :func:`declare_globals` does, except that a dictionary,
    vector or record variable declared without a value starts empty (a record with every field
    null), as ESP's examples use them without ``new``. Event cache declarations are returned
    apart, as (name, type node) pairs, for the runtime to build (their value here is null)."""
    items = list(items)
    caches = [(d.name.name, item.type) for item in items
              if isinstance(item, n.VarDecl) and isinstance(item.type, n.EventCacheType)
              for d in item.declarators]
    decl = declare_globals(items, {}, base, **options)
    for item in items:
        if not isinstance(item, n.VarDecl) or isinstance(item.type, n.EventCacheType):
            continue
        for d in item.declarators:
            name = d.name.name
            if d.init is None and decl.values.get(name) is None:
                decl.values[name] = empty_value(decl.types.get(name, ANY))
    return decl, caches


def empty_value(t: Type) -> object:
    """An empty dictionary or vector, a record of nulls, or null for other types."""
    from .values import Dictionary, Vector
    if t.name == "dictionary":
        return Dictionary(key=t.args[0], value=t.args[1])
    if t.name == "vector":
        return Vector(elem=t.args[0])
    if t.name == "record":
        return Record(((f, None) for f, _ in t.fields), types=dict(t.fields))
    return None
