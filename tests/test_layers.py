"""The modules of ccl/ and runtime/ import each other one way: no import cycle between modules,
no private name (``_x``) imported from another module, and the runtime imports of ccl/ only the
plan's types and codec (``ccl.plan.model``, ``ccl.plan.codec``), the syntax trees the plan's
expressions are made of (``ccl.syntax.nodes``), the SPLASH interpreter (``ccl.splash``) and the
lowerings (``ccl.plan.lowering``: the walks that decide a fast path, which the runtime runs with
its Spark backends so that the compiler's decision and the runtime's building cannot drift apart).

The import graph is read from the source (every ``import`` and ``from ... import``, also those
inside functions and under ``TYPE_CHECKING``), so a late import does not hide a cycle.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ccl", "runtime")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(modules: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """The modules each module imports, and the private names imported from other modules."""
    graph: dict[str, set[str]] = defaultdict(set)
    private = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    imported = submodule if submodule in modules else target
                    if imported not in modules or imported == name:
                        continue
                    graph[name].add(imported)
                    if imported != submodule and alias.name.startswith("_") \
                            and not alias.name.startswith("__"):
                        private.append(f"{name} imports {alias.name} from {imported}")
    return graph, private


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules():
    graph, _ = _imports(_modules())
    assert _cycles(graph) == []


def test_the_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_private_name_imported_from_another_module():
    _, private = _imports(_modules())
    assert private == []


# What the runtime may import of the compiler: the plan's types and codec, the syntax trees the
# plan's expressions are made of, the SPLASH interpreter, and the lowerings (the walks that decide
# a fast path, which the runtime runs with its Spark backends so that the two cannot disagree).
RUNTIME_MAY_IMPORT = ("ccl.plan.model", "ccl.plan.codec", "ccl.syntax.nodes")
RUNTIME_MAY_IMPORT_PACKAGES = ("ccl.splash", "ccl.plan.lowering")


def _runtime_imports_of_ccl(graph: dict[str, set[str]]) -> list[str]:
    """``runtime.x imports ccl.y`` for every import from runtime/ into ccl/ the layering forbids."""
    return sorted(f"{name} imports {target}" for name, targets in graph.items()
                  if name == "runtime" or name.startswith("runtime.")
                  for target in targets
                  if (target == "ccl" or target.startswith("ccl."))
                  and target not in RUNTIME_MAY_IMPORT
                  and not any(target == p or target.startswith(p + ".")
                              for p in RUNTIME_MAY_IMPORT_PACKAGES))


def test_the_runtime_imports_of_ccl_only_the_plan_and_splash():
    graph, _ = _imports(_modules())
    assert _runtime_imports_of_ccl(graph) == []


def test_the_layer_check_names_the_offenders():
    graph = {"runtime.job": {"ccl.plan.physical", "ccl.plan.model", "runtime.run"},
             "runtime.engine.expr": {"ccl.splash.convert", "ccl.syntax.nodes", "ccl.diagnostics"}}
    assert _runtime_imports_of_ccl(graph) == ["runtime.engine.expr imports ccl.diagnostics",
                                              "runtime.job imports ccl.plan.physical"]


def test_the_runtime_builds_the_plans_syntax_trees_in_one_place():
    """``ccl.syntax.nodes.from_json`` (a SPLASH tree from the plan's JSON) is called in runtime/
    only by ``runtime.engine.trees``, which builds each tree once and shares it."""
    callers = sorted(name for name, path in _modules().items() if name.startswith("runtime.")
                     for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(node, ast.Attribute) and node.attr == "from_json")
    assert callers == ["runtime.engine.trees"]


def test_a_tree_of_the_plan_is_built_once_and_shared():
    from ccl.syntax import nodes as n
    from runtime.engine.trees import tree

    expr = {"node": "Binary", "op": "+", "left": {"node": "Var", "name": {"node": "Ident", "name": "x"}},
            "right": {"node": "Literal", "kind": "integer", "value": 1}, "temporal": None}
    built = tree(expr)
    assert built == n.from_json(expr) and isinstance(built, n.Binary)
    assert tree(dict(reversed(list(expr.items())))) is built  # the same JSON, whatever its key order
    assert tree(built) is built
    assert tree({**expr, "op": "-"}) is not built


def _reached(graph: dict[str, set[str]], start: list[str]) -> set[str]:
    """The modules ``start`` imports, directly or through others (``start`` included)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_the_splash_interpreter_reaches_nothing_of_the_parser_analysis_or_planner():
    """What the runtime ships to executors of the compiler: the SPLASH interpreter, through every
    import it makes, reaches of ccl/ only itself and the syntax trees; the runtime as a whole
    only what it may import (and what that reaches)."""
    modules = _modules()
    graph, _ = _imports(modules)
    splash = [m for m in modules if m == "ccl.splash" or m.startswith("ccl.splash.")]
    assert {m for m in _reached(graph, splash) if not m.startswith("ccl.splash")} == {"ccl.syntax.nodes"}
    runtime = [m for m in modules if m == "runtime" or m.startswith("runtime.")]
    reached = {m for m in _reached(graph, runtime) if m.startswith("ccl.")}
    assert reached and all(m in RUNTIME_MAY_IMPORT or m.startswith(RUNTIME_MAY_IMPORT_PACKAGES)
                           for m in reached), sorted(reached)
