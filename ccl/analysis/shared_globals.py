"""CCL3012: a global variable that one element writes and another element reads or writes.

ESP keeps one copy of a global DECLARE variable for the whole project, so a Flex that sets a
threshold changes what a filter in another element compares with. Here every element runs in its
own Spark query with its own copy of the globals (docs/runtime-flex.md), and the other element
never sees the write. A write is an assignment to the variable (or into one of its fields or
entries) or a call of a built-in that changes a container in place, in the element's code or in
a global function it calls (directly or not).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..syntax import nodes as n
from .safety import root_var
from .symbols import Variable

Report = Callable[[str, Optional[n.Span], str], None]

# built-ins that change their first argument (a vector, dictionary or event cache) in place
_CHANGES_FIRST_ARG = {"push_back", "resize", "insert", "remove", "clear"}


class _Effects:
    """The globals a piece of code reads and writes, and the global functions it calls (each
    name -> its first place)."""

    def __init__(self) -> None:
        self.reads: dict[str, n.Span] = {}
        self.writes: dict[str, n.Span] = {}
        self.calls: dict[str, n.Span] = {}


def _effects(code: n.Node, resolved: dict[int, Variable], functions: set[str]) -> _Effects:
    out = _Effects()

    def glob(e: Optional[n.Node]) -> Optional[n.Var]:
        root = root_var(e) if e is not None else None
        var = resolved.get(id(root)) if root is not None else None
        return root if var is not None and var.where == "global" else None

    for node in code.walk():
        if isinstance(node, n.Var):  # a read (most nodes are variables: tested first)
            var = resolved.get(id(node))
            if var is not None and var.where == "global" and node.span is not None:
                out.reads.setdefault(node.name.name, node.span)
            continue
        written = None
        if isinstance(node, n.Assign):
            written = glob(node.target)
        elif isinstance(node, n.Call) and node.library is None:
            name = node.func.name
            if name in functions and node.span is not None:
                out.calls.setdefault(name, node.span)
            elif name.lower() in _CHANGES_FIRST_ARG and node.args:
                written = glob(node.args[0])
        if written is not None and written.span is not None:
            out.writes.setdefault(written.name.name, written.span)
    return out


def _element_name(stmt: n.Node) -> Optional[str]:
    if isinstance(stmt, (n.CreateElement, n.CreateFlex, n.CreateSplitter)):
        return stmt.name.name
    return None


def check_shared_globals(statements: list[n.Node], resolved: dict[int, Variable], report: Report,
                         uses_globals: Optional[set[int]] = None) -> None:
    """Warn (CCL3012) where an element writes a global that another element uses.

    ``uses_globals``, when given, holds the id() of every statement in which the analysis resolved
    a name to a global variable: an element outside it reads and writes no global itself, and
    when no global function reads or writes one either, it is not walked (its effects are empty).
    """
    defs = {item.name.name: item for st in statements if isinstance(st, n.GlobalDeclare)
            for item in st.block.items if isinstance(item, n.FuncDef)}
    names = set(defs)
    direct = {name: _effects(f.body, resolved, names) for name, f in defs.items()}
    # what each global function reads and writes, through the functions it calls too
    reach: dict[str, set[str]] = {name: {name} for name in defs}
    changed = True
    while changed:
        changed = False
        for name in defs:
            more = set().union(*(reach[c] for f in list(reach[name]) for c in direct[f].calls))
            if not more <= reach[name]:
                reach[name] |= more
                changed = True
    if any(eff.reads or eff.writes for eff in direct.values()):
        uses_globals = None  # a call to a global function can read or write a global
    uses: dict[str, _Effects] = {}
    for stmt in statements:
        element = _element_name(stmt)
        if element is None:
            continue
        if uses_globals is not None and id(stmt) not in uses_globals:
            uses[element] = _Effects()
            continue
        eff = _effects(stmt, resolved, names)
        for call, at in list(eff.calls.items()):  # what a called function does happens at the call
            for called in reach[call]:
                for var in direct[called].reads:
                    eff.reads.setdefault(var, at)
                for var in direct[called].writes:
                    eff.writes.setdefault(var, at)
        uses[element] = eff
    users: dict[str, list[str]] = {}  # global -> the elements that read or write it
    for element, eff in uses.items():
        for var in eff.reads.keys() | eff.writes.keys():
            users.setdefault(var, []).append(element)
    for writer, eff in uses.items():
        for var, span in eff.writes.items():
            others = sorted(el for el in users[var] if el != writer)
            if others:
                report("CCL3012", span, f"global '{var}' is written by '{writer}' and used by "
                       f"{', '.join(repr(o) for o in others)}: ESP shares one copy, here each element "
                       f"has its own, so {'they do' if len(others) > 1 else 'it does'} not see "
                       "this write")
