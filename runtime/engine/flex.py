"""The per-instance engine of a CREATE FLEX (plain Python, no Spark): see docs/runtime-flex.md.

:class:`FlexEngine` has the interface of :class:`runtime.engine.element.Engine`: built once per
element from the plan, it holds compiled handlers only; an instance's SPLASH variables, event
caches, input mirrors, output rows and timers live in the state dict the caller keeps (and
pickles) between batches. :func:`make_engine` picks the engine an element needs.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Callable, Mapping, Optional, Sequence, Union

from ccl.syntax import nodes as n
from ccl.plan.model import READ_AS, Element, Handler, Keep, Plan
from ccl.splash import Interpreter, Long, Record, SplashError, as_type
from ccl.splash.convert import SAME_KIND, cast, to_text
from ccl.splash.interpreter import Session, new_input
from ccl.splash.machine import Cell
from ccl.splash.windows import WindowView
from runtime.engine.cache import Declared
from runtime.engine.changes import OPS, Bad, Change, Emit, Event, Output
from runtime.engine.element import Engine, emit_of
from runtime.engine.expr import ENGINE_LIMITS
from runtime.engine.parts import column_pairs, partitions_variable
from runtime.engine.stages import STRICT_KEEPS, RowRefused, SourceStage, apply_to_window, key_of
from runtime.engine.store import Store

__all__ = ["FlexEngine", "make_engine"]

OPCODE_LETTERS = {1: "i", 3: "u", 5: "d", 7: "p", 13: "s"}
_LETTER_CODES = {"i": 1, "u": 3, "d": 5}
NO_PORT = -1  # the port of a bad record from a timer or transaction handler


def make_engine(element: Element, plan: Plan, instance: int = 0) -> Union["FlexEngine", Engine]:
    """The engine of a stateful element: :class:`FlexEngine` for a Flex, else :class:`Engine`.
    Elements are seen with the kind they have for their readers (ccl.plan.model.READ_AS)."""
    if any(e.kind in READ_AS for e in plan.elements):
        plan = replace(plan, elements=tuple(replace(e, kind=e.read_as) if e.kind in READ_AS else e
                                            for e in plan.elements))
        element = plan.element(element.name)
    if element.flex is not None:
        return FlexEngine(element, plan, instance)
    return Engine(element, plan, instance)


class _Handler:
    def __init__(self, spec: Handler) -> None:
        self.event: str = spec.event
        self.source: Optional[str] = spec.source
        self.millis: Optional[int] = spec.millis
        self.body: n.Block = spec.body  # type: ignore[assignment]


class FlexEngine:
    """Runs one CREATE FLEX for any number of partition instances.

    Port ``i`` carries the changelog of ``element.flex.inputs[i]``. ``budget`` is the SPLASH
    step budget of one handler run.
    """

    def __init__(self, element: Element, plan: Plan, instance: int = 0, *,
                 budget: Optional[int] = None) -> None:
        flex = element.flex
        assert flex is not None, element.name
        self.element = element
        self.name: str = element.name
        self.kind: str = element.kind
        self.columns = column_pairs(element.columns)
        self.key: list[str] = list(element.key)
        self.instance = instance
        elements = {e.name: e for e in plan.elements}
        self.inputs: list[str] = list(flex.inputs)
        self.input_names: list[str] = list(flex.input_names or flex.inputs)
        self.ports: list[str] = list(self.inputs)
        sources: dict[str, Element] = {}
        for plan_name, written in zip(self.inputs, self.input_names):
            sources[written] = elements[plan_name]
            sources.setdefault(plan_name, elements[plan_name])
        sources.setdefault(self.name, element)                    # typeof(<output>)
        sources.setdefault(element.name.split(".")[-1], element)
        self.declared = Declared(plan.globals, flex.declare, sources,
                                 constants=partitions_variable(element))
        options = {**ENGINE_LIMITS, **({"budget": budget} if budget is not None else {})}
        self.interp = Interpreter(self.declared.decl, source_types=self.declared.source_types,
                                  **options)  # type: ignore[arg-type]
        # `IN w KEEP ...`: the Flex sees its input through that KEEP (a stream's rows kept, as a
        # FROM KEEP does); rows it evicts reach the handlers as deletes
        keeps: list[Optional[Keep]] = list(flex.input_keeps)
        keeps += [None] * (len(self.inputs) - len(keeps))
        self.sources = [SourceStage(elements[p], k) for p, k in zip(self.inputs, keeps)]
        self.source_kinds = [elements[p].kind for p in self.inputs]
        self.source_casts = [cast_steps(s.columns) for s in self.sources]
        # per port: its columns' names and SPLASH kinds (for a caller that vouches for its rows'
        # types: process(typed=...)), and the long columns, whose plain ints the cast makes Longs
        self.source_kinds_of = [[(name, as_type(text).name) for name, text in s.columns]
                                for s in self.sources]
        self._longs = [[c for c, k in kinds if k == "long"] for kinds in self.source_kinds_of]
        self.output_cast = cast_steps(self.columns)
        # per port: the key of a window input mirrored without KEEP or AGES (kept by _events
        # itself on inserts and updates), else None
        self.plain_mirror: list[Optional[list[str]]] = [
            s.key if s.kind != "stream" and s.store is not None and s.store.kind == "all"
            and s.store.aging is None else None for s in self.sources]
        self.source_keys = [tuple(elements[p].key) for p in self.inputs]
        # per port and opcode: the class of its input records (Interpreter.input_class), whose
        # records are made without an attribute dict each
        self.input_classes = [{code: self.interp.input_class(w, keys, code) for code in (1, 3, 5)}
                              for w, keys in zip(self.input_names, self.source_keys)]
        self.port_caches = [self.declared.caches_of([w, p])
                            for p, w in zip(self.inputs, self.input_names)]
        handlers = [_Handler(h) for h in flex.handlers]
        self.on_row: list[list[_Handler]] = [[h for h in handlers if h.event == "row"
                                              and h.source in (p, w)]
                                             for p, w in zip(self.inputs, self.input_names)]
        self.on_start = [h for h in handlers if h.event == "start_transaction"]
        self.on_end = [h for h in handlers if h.event == "end_transaction"]
        self.every = [h for h in handlers if h.event == "every" and (h.millis or 0) > 0]
        keep = element.keep
        self.store: Optional[Store] = Store(keep) if self.kind == "window" else None
        self.strict: bool = (keep.kind if keep is not None else None) in STRICT_KEEPS
        # an output window without KEEP or AGES: _emit keeps its rows itself on inserts/updates
        self.plain_output = (self.store is not None and self.store.kind == "all"
                             and self.store.aging is None)
        # W_stream / W_iterator of each input and of the output (ccl/splash/windows.py):
        # (names, port or None for the output, key, column types)
        self.windows: list[tuple[list[str], Optional[int], list[str], dict]] = []
        for port, (plan_name, written) in enumerate(zip(self.inputs, self.input_names)):
            source = elements[plan_name]
            self.windows.append((_names(written, plan_name), port, list(source.key),
                                 _types(column_pairs(source.columns))))
        self.windows.append((_names(element.name, flex.name or element.name), None,
                             self.key, _types(self.columns)))
        code = [x for c in [h.body for h in handlers] + list(flex.declare) for x in c.walk()]
        named = {v.name.name for v in code if isinstance(v, n.Var)}
        looped = {f.iterable.name.name for f in code  # for (r in W)
                  if isinstance(f, n.ForIn) and isinstance(f.iterable, n.Var)}
        self.uses_old = [f"{w}_old" in named for w in self.input_names]
        # per port: the name of <input>_old when the code names it (else nothing can read it)
        self.old_names: list[Optional[str]] = [f"{w}_old" if used else None
                                               for w, used in zip(self.input_names, self.uses_old)]
        # (input port, name) -> the W_stream view of that input's rows, kept while they do not
        # change within one process() or expire() call (dropped at their start and on every
        # change of the port's rows): a where's index made once serves the runs between changes
        self._views: dict[tuple[int, str], WindowView] = {}
        # (session, extra cells, their slots) of _window_extra: the batch's window cells
        self._extra: Optional[tuple] = None
        # whether ON handlers that read window views run through _window_run (False: _run, the
        # path before it, which the generated tests compare it with)
        self.window_runs = True
        self.windows = [w for w in self.windows  # those the code names only: made per handler run
                        if any(f"{x}_stream" in named or f"{x}_iterator" in named or x in looped
                               for x in w[0])]
        # per port: whether it is a stream input without KEEP (not stored: see SourceStage.apply)
        self.plain_stream = [s.kind == "stream" and s.store is None for s in self.sources]
        # per port: whether its handlers run without event caches, <input>_old or window views
        # (_events runs them itself)
        self.simple_ports = [not caches and old is None and not self.windows
                             for caches, old in zip(self.port_caches, self.old_names)]

    def stored_mirrors(self) -> tuple[int, ...]:
        """The input ports whose mirror (rows by key, and a row-count KEEP's PER groups) may live
        in the bucket's state store (runtime/state/rows.py :func:`~runtime.state.rows.mirror_parts`):
        those the code never walks (no ``W_stream``, ``W_iterator`` or ``for (r in W)`` of
        them: the store keeps key order, the engine's dict insertion order), without a time or
        KEEP EVERY interval (whose expiry walks rows in the order of their changes) or AGES."""
        walked = {port for _, port, _, _ in self.windows if port is not None}
        return tuple(p for p, s in enumerate(self.sources)
                     if p not in walked and s.store is not None and s.store.aging is None
                     and s.store.kind in ("all", "rows", "last", "every_rows"))

    # --- the Engine interface ------------------------------------------------------------------

    def initial_state(self) -> dict:
        """A fresh instance's state (picklable): see docs/runtime-flex.md."""
        return {"seq": None,
                "vars": self.declared.initial(),
                "sources": [s.initial_state() for s in self.sources],
                "output": self.store.initial_state() if self.store else None,
                "timers": [None] * len(self.every)}

    def process(self, state: dict, events: Sequence[Event], now_ms: int,
                typed: Sequence[bool] = ()) -> list[Output]:
        """Run the handlers for ``events`` in order (one ESP transaction: ON START TRANSACTION
        before the first, ON END TRANSACTION after the last); what is due by ``now_ms`` (EVERY
        timers, the output window's time KEEP) runs first. ``typed[port]`` True: the caller
        vouches that every non-empty values dict of that port's events is its own (the engine may
        keep and change it) and holds exactly the port's columns (:attr:`source_kinds_of`), in
        order, each value None or of its kind's plain Python type (``str``, ``float``, ``bool``,
        an ``int`` in a 32-bit range for an integer, any 64-bit ``int`` for a long): its rows then
        skip the cast, their long columns' ints made Longs as the cast makes them."""
        out: list[Output] = list(self.expire(state, now_ms))
        self._views.clear()
        if not events:
            return out
        first = events[0]
        # one SPLASH set-up for the batch's handler runs (nothing else replaces variables
        # meanwhile), and room on the Python stack raised once for the batch, not per run
        session = self.interp.session(state["vars"])
        old_limit = sys.getrecursionlimit()
        needed = self.interp.needed_recursion_limit
        if old_limit < needed:
            sys.setrecursionlimit(needed)
        try:
            for h in self.on_start:
                out += self._run(state, h, {}, None, first.seq, NO_PORT, now_ms,
                                 "ON START TRANSACTION", session=session)
            self._events(state, events, now_ms, session, out, typed)
            for h in self.on_end:
                out += self._run(state, h, {}, None, state["seq"], NO_PORT, now_ms,
                                 "ON END TRANSACTION", session=session)
        finally:
            self._extra = None  # (nothing of the batch's session kept past it)
            if old_limit < needed:
                sys.setrecursionlimit(old_limit)
        return out

    def _events(self, state: dict, events: Sequence[Event], now_ms: int, session: Session,
                out: list[Output], typed: Sequence[bool] = ()) -> None:
        """The events of one batch, their outputs appended to ``out``: what :meth:`_event` does
        per event, with what does not change over the batch looked up once and a window input
        kept without KEEP mirrored here (what SourceStage.apply and Store.upsert do for it,
        without their Change records)."""
        last = state["seq"]
        nports = len(self.ports)
        casts, sources, fast = self.source_casts, self.sources, self.plain_mirror
        streams, simple, handlers = self.plain_stream, self.simple_ports, self.on_row
        names, classes = self.input_names, self.input_classes
        source_states = state["sources"]
        # (process() raised the recursion limit for the batch, as run_plain needs)
        run, update = session.run_plain, dict.update
        emitted: list[tuple] = []  # one run's outputs (cleared before each)
        take = self._taker(emitted)
        to_stream = self.kind == "stream"
        # per port: the number of columns of a row taken without the cast (typed), else 0
        sizes = [len(steps) if i < len(typed) and typed[i] else 0 for i, steps in enumerate(casts)]
        longs = self._longs
        for event in events:
            seq, op, port = event.seq, event.op, event.port
            if last is None or seq > last:
                last = state["seq"] = seq
            if op not in OPS or not 0 <= port < nports:
                out += self._event(state, event, now_ms, session)
                continue
            values = event.values
            if sizes[port] and len(values) == sizes[port]:  # typed: what the cast would give
                row_in = values  # type: ignore[assignment]
                for c in longs[port]:
                    v = row_in[c]
                    if v is not None:
                        row_in[c] = Long(v)
            else:
                try:
                    row_in = _cast_row(values, casts[port])
                except SplashError as e:
                    out.append(Bad(e.reason, seq, port, dict(values)))
                    continue
            if streams[port]:  # an unstored stream: every row an insert, d/s dropped
                if op == "d" or op == "s":
                    continue
                op, old = "i", None
            else:
                if self._views:
                    self._changed(port)
                key = fast[port]
                if key is None or op == "d" or op == "s":
                    for change in sources[port].apply(source_states[port], op, seq, row_in, now_ms):
                        self._change(state, port, change.op, change.old, change.new, seq, now_ms,
                                     event.values, session, out)
                    continue
                rows = source_states[port]["rows"]
                # key_of's tuple (one key column: without the list and its comprehension)
                k = (row_in.get(key[0]),) if len(key) == 1 else tuple([row_in.get(c) for c in key])
                old = rows.get(k)
                rows[k] = row_in
                op = "i" if old is None else "u"
            if not simple[port]:
                self._change(state, port, op, old, row_in, seq, now_ms, event.values, session, out)
                continue
            # what _change and _session_run do, for a port without event caches, <input>_old
            # or window views
            name, cls = names[port], classes[port][_LETTER_CODES[op]]
            for h in handlers[port]:
                # what input_record(name, row_in, code, keys, True) gives (row_in: a plain dict
                # of cast values), one per run since setOpcode may change its opcode
                rec = new_input(cls)
                update(rec, row_in)
                emitted.clear()
                try:
                    run(h.body, {name: rec}, take)
                except SplashError as e:
                    out.append(Bad(e.reason, seq, port, dict(event.values)))
                    continue
                for taken in emitted:
                    if to_stream and taken[2] is None:  # what _emit does for a stream output
                        letter = OPCODE_LETTERS.get(taken[0] if taken[0] is not None else 1)
                        if letter is not None:
                            if letter != "d" and letter != "s":
                                out.append(Emit("i", seq, taken[1]))
                            continue
                    self._emit(state, taken, seq, port, now_ms, out)

    def expire(self, state: dict, now_ms: int) -> list[Output]:
        """What is due at ``now_ms``: deletes of output rows a time KEEP evicts, then each EVERY
        handler whose time has come (once, however many periods passed); event caches drop their
        expired records."""
        self._views.clear()  # (another instance's state, or rows changed between calls)
        self.interp.bind(state["vars"])
        self.declared.sweep(state["vars"], now_ms)
        seq = state["seq"] if state["seq"] is not None else 0
        out: list[Output] = []
        if self.store is not None:
            out += [emit_of(c) for c in self.store.expire(state["output"], now_ms, seq)]
        for port, source in enumerate(self.sources):
            evicted = source.expire(state["sources"][port], now_ms, seq)
            if evicted:
                self._changed(port)
                out += self._changes(state, port, evicted, seq, now_ms, {})
        timers = state["timers"]
        for i, h in enumerate(self.every):
            due = timers[i]
            if due is None:
                timers[i] = now_ms + h.millis  # type: ignore[operator]
                continue
            if due > now_ms:
                continue
            missed = (now_ms - due) // h.millis + 1  # type: ignore[operator]
            timers[i] = due + missed * h.millis  # type: ignore[operator]
            out += self._run(state, h, {}, None, seq, NO_PORT, now_ms, f"EVERY {h.millis} ms")
        return out

    def next_deadline(self, state: dict) -> Optional[int]:
        """When :meth:`expire` next has work (ms since epoch), or ``None``. EVERY timers start at
        the instance's first process()/expire() call."""
        due = [t for t in state["timers"] if t is not None]
        due += [t for t in (s.next_deadline(state["sources"][p]) for p, s in enumerate(self.sources))
                if t is not None]
        if self.store is not None:
            t = self.store.next_deadline(state["output"])
            if t is not None:
                due.append(t)
        return min(due) if due else None

    # --- one input row -------------------------------------------------------------------------

    def _event(self, state: dict, event: Event, now_ms: int, session: Optional[Session] = None
               ) -> list[Output]:
        if event.op not in OPS:
            return [Bad(f"unknown opcode {event.op!r}", event.seq, event.port, dict(event.values))]
        if not 0 <= event.port < len(self.ports):
            return [Bad(f"no input port {event.port} on {self.name}", event.seq, event.port,
                        dict(event.values))]
        port = event.port
        source = self.sources[port]
        try:
            row_in = _cast_row(event.values, self.source_casts[port])
        except SplashError as e:
            return [Bad(e.reason, event.seq, port, dict(event.values))]
        self._changed(port)
        changes = source.apply(state["sources"][port], event.op, event.seq, row_in, now_ms)
        return self._changes(state, port, changes, event.seq, now_ms, event.values, session)

    def _changes(self, state: dict, port: int, changes: list[Change], seq: int, now_ms: int,
                 values: Mapping, session: Optional[Session] = None) -> list[Output]:
        """The ON handlers of ``port`` run for each change of its rows (``values``: the input row,
        for a bad record; copied only then)."""
        out: list[Output] = []
        for change in changes:
            self._change(state, port, change.op, change.old, change.new, seq, now_ms, values,
                         session, out)
        return out

    def _change(self, state: dict, port: int, op: str, old: Optional[Mapping],
                new: Optional[Mapping], seq: int, now_ms: int, values: Mapping,
                session: Optional[Session], out: list[Output]) -> None:
        """The ON handlers of ``port`` run for one change (``op``, the row before and after) of its
        rows, their outputs appended to ``out``."""
        name = self.input_names[port]
        row = (new if op != "d" else old) or {}
        caches = self.port_caches[port]
        if caches:
            self.declared.feed(state["vars"], caches, self.source_kinds[port], op, row, now_ms)
        old_name = self.old_names[port]
        if op != "u":
            old = None
        keys, interp = self.source_keys[port], self.interp
        cls = self.input_classes[port][_LETTER_CODES[op]] if type(row) is dict else None
        for h in self.on_row[port]:
            # records made here once, not converted again by the interpreter (one per run:
            # setOpcode may change the input's record); the rows are the source stage's,
            # already cast to the input's columns
            if cls is not None:  # what input_record gives, without an attribute dict
                rec = new_input(cls)
                dict.update(rec, row)
            else:
                rec = interp.input_record(name, row, _LETTER_CODES[op], keys, True)
            if old_name is None:
                if session is not None and not self.windows:  # the common case, without _run
                    self._session_run(state, h, {name: rec}, None, seq, port, now_ms, values,
                                      session, out)
                    continue
                if session is not None and self.window_runs:  # views' cells kept for the batch
                    self._window_run(state, h, {name: rec}, seq, port, now_ms, values, session,
                                     out)
                    continue
                out += self._run(state, h, {name: rec}, None, seq, port, now_ms, None, values,
                                 session)
                continue
            old_rec = (interp.input_record(old_name, old, None, keys, True)
                       if old is not None else None)
            out += self._run(state, h, {name: rec}, (old_name, old_rec), seq, port, now_ms, None,
                             values, session)

    def _session_run(self, state: dict, h: _Handler, sources: dict, extra: Optional[dict],
                     seq: int, port: int, now_ms: int, values: Optional[Mapping],
                     session: Session, out: list[Output]) -> None:
        """:meth:`_run` in a session, its outputs appended to ``out``."""
        emitted: list[tuple] = []
        try:
            session.run(h.body, sources, extra, self._taker(emitted), copies=True)
        except SplashError as e:
            out.append(Bad(e.reason, seq, port, dict(values or {})))
            return
        for taken in emitted:
            self._emit(state, taken, seq, port, now_ms, out)

    def _window_run(self, state: dict, h: _Handler, rows: dict, seq: int, port: int,
                    now_ms: int, values: Optional[Mapping], session: Session,
                    out: list[Output]) -> None:
        """:meth:`_run` of an ON handler (no ``<input>_old``) in a session, for code that reads
        window views, its outputs appended to ``out``: the views' cells are the batch's
        (:meth:`_window_extra`), set for the run, and the session keeps the globals merged with
        them (:meth:`~ccl.splash.interpreter.Session.run_with`) instead of a merge and a general
        write-back per run."""
        emitted: list[tuple] = []
        try:
            session.run_with(h.body, rows, self._window_extra(state, session),
                             self._taker(emitted))
        except SplashError as e:
            out.append(Bad(e.reason, seq, port, dict(values or {})))
            return
        for taken in emitted:
            self._emit(state, taken, seq, port, now_ms, out)

    def _window_extra(self, state: dict, session: Session) -> dict[str, Cell]:
        """What :meth:`_window_cells` gives, as one dict per session whose cells are set for each
        run: ``W_stream`` the view :meth:`_window_cells` would make (an input's lasting view
        while its rows do not change), ``W_iterator`` null (as a new cell of each run is)."""
        found = self._extra
        if found is None or found[0] is not session:
            extra: dict[str, Cell] = {}
            slots = []
            for names, port, key, types in self.windows:
                cells = []
                for name in names:
                    stream = extra[f"{name}_stream"] = Cell(None, const=True)
                    it = extra[f"{name}_iterator"] = Cell(None)
                    cells.append((name, stream, it))
                slots.append((port, key, types, cells))
            found = self._extra = (session, extra, slots)
        views = self._views
        for port, key, types, cells in found[2]:
            if port is None:
                rows = state["output"]["rows"] if self.store is not None else None
            else:
                mirror = state["sources"][port]
                rows = mirror["rows"] if mirror is not None else None
            for name, stream, it in cells:
                view = views.get((port, name)) if port is not None else None
                if view is None or view.rows is not rows:
                    view = WindowView(name, rows, key, types, True)
                    if port is not None and rows is not None:
                        views[(port, name)] = view.lasting()
                stream.value = view
                it.value = None
        return found[1]

    def _run(self, state: dict, h: _Handler, rows: Mapping[str, Mapping], old: Optional[tuple],
             seq: int, port: int, now_ms: int, what: Optional[str],
             values: Optional[Mapping] = None, session: Optional[Session] = None) -> list[Output]:
        """Run one handler; its outputs applied to the output element. A failing handler makes
        a bad record (the input row, or an empty row for timers and transactions) and its outputs
        are dropped; variable changes it made before failing stay. ``session``: the batch's
        (:meth:`ccl.splash.Interpreter.session` of the instance's variables), else a run of its
        own."""
        emitted: list[tuple] = []
        take = self._taker(emitted)
        extra = self._window_cells(state) if self.windows else {}
        sources = rows
        if old is not None:
            if old[1] is not None:
                sources = {**rows, old[0]: old[1]}
            else:
                extra[old[0]] = Cell(None)
        try:
            if session is not None:
                session.run(h.body, sources, extra, take, copies=True)
            else:
                self.interp.bind(state["vars"])
                self.interp.run_block(h.body, sources, extra, output=take)
        except SplashError as e:
            reason = f"{what}: {e.reason}" if what else e.reason
            return [Bad(reason, seq, port, dict(values or {}))]
        out: list[Output] = []
        for taken in emitted:
            self._emit(state, taken, seq, port, now_ms, out)
        return out

    def _taker(self, emitted: list[tuple]) -> Callable[[Record], None]:
        """The ``output`` target of a handler run: each record output cast to the element's
        columns when it is output (so the run need not copy it), as ``(opcode, row, reason)``
        (the record's values and why, when the cast fails) into ``emitted``."""
        steps, append = self.output_cast, emitted.append

        def take(rec: Record) -> None:
            try:
                append((rec.opcode, _cast_row(rec, steps), None))
            except SplashError as e:
                append((rec.opcode, dict(rec), e.reason))
        return take

    def _window_cells(self, state: dict) -> dict[str, Cell]:
        """``W_stream`` (read-only) and ``W_iterator`` of every input and of the output, over
        the instance's rows (a stream has none)."""
        cells: dict[str, Cell] = {}
        views = self._views
        for names, port, key, types in self.windows:
            if port is None:
                rows = state["output"]["rows"] if self.store is not None else None
            else:
                mirror = state["sources"][port]
                rows = mirror["rows"] if mirror is not None else None
            for name in names:
                # the rows are the engine's: cast to the columns, in column order. An input's
                # view lasts while its rows do not change (see _views)
                view = views.get((port, name)) if port is not None else None
                if view is None or view.rows is not rows:
                    view = WindowView(name, rows, key, types, True)
                    if port is not None and rows is not None:
                        views[(port, name)] = view.lasting()
                cells[f"{name}_stream"] = Cell(view, const=True)
                cells[f"{name}_iterator"] = Cell(None)
        return cells

    def _changed(self, port: int) -> None:
        """The rows of input ``port`` change: its lasting views are dropped."""
        views = self._views
        if views:
            for k in [k for k in views if k[0] == port]:
                del views[k]

    # --- the output element ----------------------------------------------------------------------

    def _emit(self, state: dict, taken: tuple, seq: int, port: int, now_ms: int,
              out: list[Output]) -> None:
        """One output record (as :meth:`_taker` took it) applied to the output element, what it
        gives appended to ``out``."""
        code, row, reason = taken
        if reason is not None:
            out.append(Bad(f"output: {reason}", seq, port, row))
            return
        op = OPCODE_LETTERS.get(code if code is not None else 1)
        if op is None:
            out.append(Bad(f"output: unknown opcode {code}", seq, port, row))
            return
        if self.kind == "stream":  # as every plain stream: updates are inserts, deletes dropped
            if op != "d" and op != "s":
                out.append(Emit("i", seq, row))
            return
        try:
            key = key_of(row, self.key)
            if None in key:  # a record without its key column (its missing columns are null)
                missing = [c for c, v in zip(self.key, key) if v is None]
                out.append(Bad(f"output: null in key column(s) {', '.join(missing)} of {self.name}",
                               seq, port, row))
                return
            if self.kind == "delta stream":
                letter = {"i": "i", "u": "u", "p": "u", "d": "d", "s": "d"}[op]
                out.append(Emit(letter, seq, row))
                return
            assert self.store is not None
            if self.plain_output and op != "d" and op != "s":
                # what apply_to_window and Store.upsert do for a window without KEEP or AGES,
                # without their Change records
                rows = state["output"]["rows"]
                old = rows.get(key)
                if self.strict and (op == "i" if old is not None else op == "u"):
                    apply_to_window(self.store, state["output"], True, self.name, op, key, row,
                                    seq, now_ms)  # raises RowRefused, with its message
                rows[key] = row
                out.append(Emit("i" if old is None else "u", seq, row))
                return
            changes = apply_to_window(self.store, state["output"], self.strict, self.name, op, key,
                                      row, seq, now_ms)
            out += [emit_of(c) for c in changes]
        except RowRefused as e:
            out.append(Bad(f"output: {e}", seq, port, row))


def cast_steps(columns: Sequence[Sequence[str]]) -> list[tuple]:
    """Per column (name, CCL type text): its name, type, whether its values are carried as text (a
    column of no known type), the one Python type whose values are kept as they are, and for an
    integer or long column the range of plain ints taken (and the type a long's are made), for
    :func:`_cast_row`."""
    steps = []
    for name, text in columns:
        t = as_type(text)
        lo, hi = _INT_RANGES.get(t.name, (0, 0))  # (0, 0): no int taken on the fast path
        steps.append((name, t, t.name in ("any", "null"), _EXACT.get(t.name), lo, hi,
                      Long if t.name == "long" else None))
    return steps


# Column kind -> the one Python type whose values the cast gives back as they are, whatever the
# value (SAME_KIND's, but integer's, whose values must be in range)
_EXACT = {kind: python for python, kind in SAME_KIND.items() if kind != "integer"}
# Column kind -> the plain ints (lo <= v < hi) the cast gives back as they are (integer), or as
# a Long (long)
_INT_RANGES = {"integer": (-2**31, 2**31), "long": (-2**63, 2**63)}


def _cast_row(values: Mapping[str, object], steps: list[tuple]) -> dict[str, object]:
    """What :func:`runtime.engine.expr.coerce_row` gives for ``values`` (``steps``: the columns'
    :func:`cast_steps`): values cast to the column types, in column order (missing columns null),
    a value that already has its column's kind kept as it is."""
    get = values.get
    row = {}
    for name, ctype, as_text, exact, lo, hi, make in steps:
        v = get(name)
        if v is None or type(v) is exact:
            row[name] = v
            continue
        if type(v) is int and lo <= v < hi:  # a plain int in an integer or long column's range
            row[name] = v if make is None else make(v)
            continue
        k = SAME_KIND.get(type(v))
        # a value of exactly the column's kind (a long column's Long too) is given back by the cast
        if k == ctype.name and (k != "integer" or -2**31 <= v < 2**31):  # type: ignore[operator]
            row[name] = v
        elif as_text:  # a column of no known type is carried as text (runtime.types)
            row[name] = to_text(v)
        else:
            row[name] = cast(v, ctype)
    return row


def _names(*names: str) -> list[str]:
    """The names code calls an element by (a module's elements by their own name), once each."""
    return list(dict.fromkeys(name.split(".")[-1] for name in names))


def _types(columns: Sequence[Sequence[str]]) -> dict:
    return {name: as_type(t) for name, t in columns}
