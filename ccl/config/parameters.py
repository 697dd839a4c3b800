"""Resolving the project's PARAMETERs: the one place where a parameter gets its value.

A parameter is declared in a global DECLARE block (``PARAMETER integer numParts := 4;``) and takes its
value, highest first, from the command line (``--param numParts=8``), the .ccr
(``<Parameter name="numParts">8</Parameter>``) or its CCL default. Values are read as the declared
type (``ccl/config/value_text.py``). A PARTITIONS clause that names a parameter needs an integer from 1 to
65535; when it is out of range the error points at the value (the .ccr line or the CCL default) and
names each PARTITIONS clause in a note.

Parameters of modules (declared inside CREATE MODULE) are bound by LOAD MODULE, not here.
The semantic analysis calls :func:`resolve_parameters` and uses the typed values it returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable, Mapping, Optional, Sequence

from ..syntax import nodes as n
from .ccr import CcrFile
from .settings import SOURCE_CCL_DEFAULT, SOURCE_CCR, SOURCE_COMMAND_LINE, did_you_mean
from ..diagnostics import Diagnostic, article, sort_key
from ..syntax.project import LoadedProject, UsageError
from .value_text import INTEGER_TYPES, canonical_type, parse_value, type_text

PARTITIONS_MIN, PARTITIONS_MAX = 1, 65535


@dataclass(frozen=True)
class ResolvedParameter:
    """A parameter with its typed value and where the value came from.

    ``type`` is the type as CCL writes it (``integer``, ``money(2)``; a typedef is resolved to its
    built-in type). ``source`` is ``'command line'``, ``'.ccr'`` or ``'CCL default'``. ``span`` is the
    parameter's name in its declaration; ``origin`` is where the value is written (the .ccr element or
    the CCL default expression), None for the command line.
    """

    name: str
    type: str
    value: object
    source: str
    span: n.Span
    origin: Optional[n.Span] = None


@dataclass(frozen=True)
class _Declared:
    decl: n.ParamDecl
    base: str  # canonical built-in type name
    args: tuple[int, ...]

    @property
    def name(self) -> str:
        return self.decl.name.name

    @property
    def type(self) -> str:
        return type_text(self.base, self.args)


def parse_param_options(items: Sequence[str]) -> dict[str, str]:
    """``--param NAME=VALUE`` texts as a dict; raises UsageError on a malformed or repeated one."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--param {item}: expected NAME=VALUE, for example --param numParts=8")
        if name in out:
            raise UsageError(f"--param {name} is given twice")
        out[name] = value
    return out


def global_parameter_declarations(project: LoadedProject) -> list[n.ParamDecl]:
    """The PARAMETER declarations of the project's global DECLARE blocks (imports included)."""
    return [item for stmt in project.statements if isinstance(stmt, n.GlobalDeclare)
            for item in stmt.block.items if isinstance(item, n.ParamDecl)]


def _typedefs(project: LoadedProject) -> dict[str, n.Node]:
    return {item.name.name: item.type for stmt in project.statements
            if isinstance(stmt, n.GlobalDeclare) for item in stmt.block.items
            if isinstance(item, n.TypeDef)}


def _declared(decl: n.ParamDecl, typedefs: Mapping[str, n.Node]) -> Optional[_Declared]:
    spec: n.Node = decl.type
    seen: set[str] = set()
    while isinstance(spec, n.NamedType) and canonical_type(spec.name) is None \
            and spec.name in typedefs and spec.name not in seen:
        seen.add(spec.name)
        spec = typedefs[spec.name]
    if isinstance(spec, n.NamedType):
        base = canonical_type(spec.name)
        if base is not None:
            return _Declared(decl, base, tuple(spec.args))
    return None


def resolve_parameters(project: LoadedProject, ccr: Optional[CcrFile] = None,
                       cli_params: Optional[Mapping[str, str]] = None
                       ) -> tuple[dict[str, ResolvedParameter], list[Diagnostic]]:
    """Every global parameter's value: command line > .ccr > CCL default.

    Returns the resolved parameters by name (declaration order; a parameter whose value is wrong is
    left out) and the diagnostics: unknown .ccr parameters (CCL1310, warning), values of the wrong
    type (CCL1311), parameters without any value (CCL1312), PARTITIONS counts out of range (CCL1313)
    or of a non-integer parameter (CCL1314), unusable types (CCL1315) and non-constant defaults
    (CCL1316). Problems with ``cli_params`` (an unknown name, a value of the wrong type) raise
    UsageError: they are mistakes in the command, reported in one line.
    """
    cli_params = dict(cli_params or {})
    diags: list[Diagnostic] = []
    typedefs = _typedefs(project)
    declared: dict[str, _Declared] = {}
    names: list[str] = []
    for decl in global_parameter_declarations(project):
        names.append(decl.name.name)
        if decl.name.name in declared:
            continue  # a second declaration of a name is the semantic analysis' to report
        info = _declared(decl, typedefs)
        if info is None:
            diags.append(Diagnostic("CCL1315", f"parameter '{decl.name.name}' has type "
                                    f"{_type_label(decl.type)}, which no configuration value can "
                                    f"give; use a built-in scalar type", decl.name.span))
            continue
        declared[decl.name.name] = info

    for name, text in cli_params.items():
        if name not in names:
            raise UsageError(f"--param {name}={text}: the project declares no parameter '{name}'"
                             f"{did_you_mean(name, names)}")
    if ccr is not None:
        for param in ccr.parameters:
            if param.name not in names:
                diags.append(Diagnostic("CCL1310", f"the project declares no parameter "
                                        f"'{param.name}'; the value is ignored"
                                        f"{did_you_mean(param.name, names)}", param.span))

    resolved: dict[str, ResolvedParameter] = {}
    for name, info in declared.items():
        result = _resolve_one(info, cli_params.get(name), ccr, diags)
        if result is not None:
            resolved[name] = result
    diags.extend(_check_partitions(project, declared, resolved))
    return resolved, sorted(diags, key=sort_key)


def _resolve_one(info: _Declared, cli_text: Optional[str], ccr: Optional[CcrFile],
                 diags: list[Diagnostic]) -> Optional[ResolvedParameter]:
    decl = info.decl
    if cli_text is not None:
        try:
            value = parse_value(cli_text, info.base, info.args)
        except ValueError as exc:
            raise UsageError(f"--param {info.name}={cli_text}: {exc} (the parameter is declared "
                             f"{info.type} at {decl.name.span})") from None
        return ResolvedParameter(info.name, info.type, value, SOURCE_COMMAND_LINE, decl.name.span)
    given = ccr.parameter(info.name) if ccr is not None else None
    if given is not None:
        try:
            value = parse_value(given.value, info.base, info.args)
        except ValueError as exc:
            diags.append(Diagnostic("CCL1311", f"wrong value for parameter '{info.name}' "
                                    f"({info.type}): {exc}", given.span,
                                    notes=[f"declared at {decl.name.span}"]))
            return None
        return ResolvedParameter(info.name, info.type, value, SOURCE_CCR, decl.name.span, given.span)
    if decl.default is None:
        diags.append(Diagnostic("CCL1312", f"parameter '{info.name}' has no default and no value; "
                                f"set it in the .ccr (<Parameter name=\"{info.name}\">...</Parameter>) "
                                f"or with --param {info.name}=VALUE", decl.name.span))
        return None
    default_span = decl.default.span or decl.name.span
    constant = constant_of(decl.default)
    if constant is None:
        diags.append(Diagnostic("CCL1316", f"the default of parameter '{info.name}' must be a "
                                f"constant (a literal, or an expression of literals)", default_span))
        return None
    try:
        value = _convert_default(constant, info)
    except ValueError as exc:
        diags.append(Diagnostic("CCL1311", f"wrong default for parameter '{info.name}' "
                                f"({info.type}): {exc}", default_span))
        return None
    return ResolvedParameter(info.name, info.type, value, SOURCE_CCL_DEFAULT, decl.name.span,
                             default_span)


def constant_of(expr: n.Node) -> Optional[tuple[str, object]]:
    """(literal kind, value) of a literal, possibly with a sign, or of a constant expression
    (ESP: "an expression that evaluates to a constant", evaluated once: operators and built-ins
    over literals, such as ``2 * 5``); None for anything else."""
    if isinstance(expr, n.Literal):
        return expr.kind, expr.value
    if isinstance(expr, n.Unary) and expr.op in ("-", "+") and isinstance(expr.operand, n.Literal) \
            and expr.operand.kind in ("integer", "long", "float", "money"):
        value = expr.operand.value
        return expr.operand.kind, (-value if expr.op == "-" else value)  # type: ignore[operator]
    return _evaluated(expr)


def keep_count(count: object, values: Mapping[str, object]) -> tuple[Optional[int], Optional[str]]:
    """``(rows, None)`` for the count of ``KEEP count ROWS``: an int, the name (Ident) of an integer
    parameter, or an expression of literals and parameters (ESP: "an integer value or an
    expression"), with the parameters' ``values``; ``(None, why)`` when it is none of these or not
    a positive integer; ``(None, None)`` when a parameter it reads has no value yet (a module's,
    bound when the module is loaded)."""
    if isinstance(count, int):
        return (count, None) if count >= 1 else (None, f"it is {count}, not a positive integer")
    expr = n.Var(count) if isinstance(count, n.Ident) else count
    names = {x.name.name for x in expr.walk() if isinstance(x, n.Var)}  # type: ignore[union-attr]
    if any(isinstance(x, (n.FieldAccess, n.Sequence, n.Assign)) for x in expr.walk()):  # type: ignore[union-attr]
        return None, "it reads something other than literals and parameters"
    if not names <= set(values):
        return None, None
    from ..splash import Interpreter, SplashError
    from ..splash.values import is_integral

    try:
        value = Interpreter(dict(values), constants=set(values)).evaluate(expr)  # type: ignore[arg-type]
    except SplashError as exc:
        return None, str(exc)
    if not is_integral(value) or isinstance(value, bool) or value < 1:  # type: ignore[operator]
        return None, f"it is {value!r}, not a positive integer"
    return int(value), None  # type: ignore[arg-type]


def bound_module_parameter(decl: n.ParamDecl, expr: n.Node, outer: Mapping[str, object]
                           ) -> tuple[object, Optional[str]]:
    """The value ``LOAD MODULE ... PARAMETERS name = expr`` gives the module parameter ``decl``:
    ``expr`` is a constant or an expression of the loading scope's parameters (``outer``: their
    values). ``(value, None)``; ``(None, why)`` when the value does not fit the parameter's type;
    ``(UNKNOWN, None)`` when it cannot be known yet (it reads a parameter without a value here,
    as a module loading another module does, or the parameter's type is not a built-in scalar)."""
    info = _declared(decl, {})
    constant = _evaluated(expr, outer)
    if info is None or constant is None:
        return UNKNOWN, None
    try:
        return _convert_default(constant, info), None
    except ValueError as exc:
        return None, f"parameter '{info.name}' is {info.type}: {exc}"


UNKNOWN = object()  # a value that cannot be known when the project is checked


def _evaluated(expr: n.Node, values: Optional[Mapping[str, object]] = None
               ) -> Optional[tuple[str, object]]:
    """A constant expression's value as (literal kind, value), reading the parameters ``values``;
    None when it reads another name or fails."""
    from ..splash import Interpreter, SplashError
    from ..splash.values import Dec, Long

    values = values or {}
    if any(isinstance(x, (n.FieldAccess, n.Sequence)) or (isinstance(x, n.Var) and x.name.name not in values)
           for x in expr.walk()):
        return None
    try:
        value = Interpreter(dict(values), constants=set(values)).evaluate(expr)
    except SplashError:
        return None
    if isinstance(value, bool):
        return "boolean", value
    if isinstance(value, Long):
        return "long", int(value)
    if isinstance(value, int):
        return "integer", value
    if isinstance(value, float):
        return "float", value
    if isinstance(value, Dec):
        return "money", value
    if isinstance(value, str):
        return "string", value
    if value is None:
        return "null", None
    return None


_ACCEPTS = {  # declared type: literal kinds its default may be written as
    "integer": ("integer", "long"), "long": ("integer", "long"),
    "float": ("integer", "long", "float", "money"), "money": ("integer", "long", "float", "money"),
    "decimal": ("integer", "long", "float", "money"), "boolean": ("boolean",), "string": ("string",),
    "date": ("string",), "timestamp": ("string",), "msdate": ("string",),
    "bigdatetime": ("string",), "interval": ("integer", "long", "string"), "binary": ("string",),
}


def _convert_default(constant: tuple[str, object], info: _Declared) -> object:
    kind, value = constant
    if kind == "null":
        return None
    if kind not in _ACCEPTS[info.base]:
        raise ValueError(f"{article(kind)} {kind} literal cannot be {article(info.base)} {info.type}")
    if kind == "boolean":
        return value
    if kind == "string":
        return parse_value(str(value), info.base, info.args)
    if kind == "float":
        text = format(Decimal(repr(value)), "f")
    elif kind == "money":  # 10.00d2: a Decimal
        text = format(value, "f")
    else:
        text = str(value)
    return parse_value(text, info.base, info.args)


def _type_label(spec: n.Node) -> str:
    if isinstance(spec, n.NamedType):
        return type_text(spec.name, spec.args)
    return {"TypeOf": "typeof(...)", "DictType": "dictionary(...)", "VectorType": "vector(...)",
            "RecordType": "a record type", "EventCacheType": "eventCache(...)"}.get(
                type(spec).__name__, type(spec).__name__)


def _partition_uses(project: LoadedProject) -> Iterable[tuple[n.Node, n.Ident]]:
    """(statement, count name) for each top-level PARTITIONS clause that names its count."""
    for stmt in project.statements:
        partition = getattr(stmt, "partition", None)
        if isinstance(partition, n.Partition) and isinstance(partition.count, n.Ident):
            yield stmt, partition.count


def _element_name(stmt: n.Node) -> str:
    name = getattr(stmt, "instance", None) or getattr(stmt, "name", None)
    return name.name if isinstance(name, n.Ident) else type(stmt).__name__


def _check_partitions(project: LoadedProject, declared: Mapping[str, _Declared],
                      resolved: Mapping[str, ResolvedParameter]) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    uses: dict[str, list[tuple[n.Node, n.Ident]]] = {}
    for stmt, ident in _partition_uses(project):
        info = declared.get(ident.name)
        if info is None:
            continue  # not a parameter (or an unusable one): the semantic analysis reports names
        if info.base not in INTEGER_TYPES:
            diags.append(Diagnostic("CCL1314", f"PARTITIONS needs an integer; parameter "
                                    f"'{ident.name}' is {info.type}", ident.span,
                                    notes=[f"declared at {info.decl.name.span}"]))
            continue
        uses.setdefault(ident.name, []).append((stmt, ident))
    for name, clauses in uses.items():
        param = resolved.get(name)
        if param is None:
            continue  # its value was already reported as wrong or missing
        value = param.value
        if isinstance(value, int) and PARTITIONS_MIN <= value <= PARTITIONS_MAX:
            continue
        shown = "NULL" if value is None else str(value)
        notes = [f"used by PARTITIONS {name} of {_element_name(stmt)} at {ident.span}"
                 for stmt, ident in clauses]
        if param.origin is None:  # from the command line: point at the clause
            first = clauses[0][1]
            diags.append(Diagnostic("CCL1313", f"partition count {shown} of parameter '{name}' "
                                    f"(--param {name}={shown}) is out of range "
                                    f"{PARTITIONS_MIN}..{PARTITIONS_MAX}", first.span,
                                    notes=notes[1:]))
        else:
            where = "the .ccr" if param.source == SOURCE_CCR else "its CCL default"
            diags.append(Diagnostic("CCL1313", f"partition count {shown} of parameter '{name}' "
                                    f"(from {where}) is out of range "
                                    f"{PARTITIONS_MIN}..{PARTITIONS_MAX}", param.origin,
                                    notes=notes))
    return diags
