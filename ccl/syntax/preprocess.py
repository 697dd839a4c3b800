"""The CCL preprocessor: C-style directives on lines of their own, applied before lexing.

ESP's compiler ran CCL through a preprocessor (``#define``, ``#ifdef`` ...). Its reference page could
not be retrieved, so this is the subset of the C preprocessor that CCL projects use, with C's
meaning (docs/language.md, "Preprocessor"):

- ``#define NAME [text]`` / ``#undef NAME``: macros, replaced in the code as whole names (not
  inside strings or comments), again in what they are replaced by; ``#define F(a, b) text``: a
  macro with parameters, replaced where its name is followed by ``(`` and its arguments on the
  same line (each argument expanded first, then put in place of its parameter's name); a
  directive line ending in ``\\`` goes on on the next line;
- ``#ifdef NAME``, ``#ifndef NAME``, ``#if expr``, ``#elif expr``, ``#else``, ``#endif``:
  ``expr`` takes integers, macros (a name not defined is 0), ``defined(NAME)``, ``! - + * / %
  < <= > >= == != && ||`` and parentheses; it is evaluated here, never by Python;
- ``#include "file"`` (or ``<file>``): the file is imported, as ``IMPORT 'file';`` would.

A directive line, and every line a condition leaves out, becomes an empty line, so line numbers of
diagnostics stay those of the file. A text without a ``#`` at the start of a line is returned as
it is.
"""
from __future__ import annotations

import re
from typing import Callable, Optional, Union

__all__ = ["preprocess"]

Report = Callable[[str, int, int, str], None]  # (code, line, column, message)
# a macro: its text, or (its parameters, its text) for a macro with parameters
Macro = Union[str, tuple[list[str], str]]

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z]*)(.*)$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"'(?:[^']|'')*'")  # a whole string literal (in a macro call's arguments)
# the parts of a line that macros do not touch: strings and comments ('/*' may run to a later line)
_CODE = re.compile(r"'(?:[^'\n]|'')*'?|//.*|/\*.*?(?:\*/|$)|[A-Za-z_][A-Za-z0-9_]*|[^'/A-Za-z_]+|/")


def preprocess(text: str, report: Report, defines: Optional[dict[str, str]] = None) -> str:
    """``text`` with its directives applied; problems go to ``report`` (code CCL1006)."""
    if not re.search(r"(?m)^[ \t]*#", text):
        return text
    macros: dict[str, Macro] = dict(defines or {})
    # one entry per open #if: [this branch is live, some branch was taken, #else seen, line]
    stack: list[list] = []
    out: list[str] = []
    in_comment = False
    lines = text.split("\n")
    continued = 0  # lines still to skip: they went on a directive line ending in a backslash
    for number, line in enumerate(lines, 1):
        if continued:
            continued -= 1
            out.append("")
            continue
        live = all(frame[0] for frame in stack)
        m = _DIRECTIVE.match(line) if not in_comment else None
        if m is not None:
            while line.endswith("\\") and number + continued < len(lines):
                line = line[:-1] + " " + lines[number + continued]
                continued += 1
            m = _DIRECTIVE.match(line)
        if m is None:
            if live:
                expanded, in_comment = _expand(line, macros, in_comment, lambda name, message: report(
                    "CCL1006", number, max(line.find(name), 0) + 1, message))
                out.append(expanded)
            else:
                out.append("")
                in_comment = _still_in_comment(line, in_comment)
            continue
        out.append("")
        word, rest = m.group(1).lower(), _strip_comment(m.group(2)).strip()
        column = line.index("#") + 1

        def problem(message: str) -> None:
            report("CCL1006", number, column, message)
        if word in ("if", "ifdef", "ifndef"):
            if not live:
                stack.append([False, True, False, number])
                continue
            if word == "if":
                value = _condition(rest, macros, problem)
            else:
                name = _one_name(rest, word, problem)
                value = name is not None and ((name in macros) == (word == "ifdef"))
            stack.append([value, value, False, number])
        elif word in ("elif", "else"):
            if not stack or stack[-1][2]:
                problem(f"#{word} without #if" if not stack else f"#{word} after #else")
                continue
            frame = stack[-1]
            outer = all(f[0] for f in stack[:-1])
            if word == "else":
                frame[2] = True
                frame[0] = outer and not frame[1]
            else:
                frame[0] = outer and not frame[1] and _condition(rest, macros, problem)
            frame[1] = frame[1] or frame[0]
        elif word == "endif":
            if not stack:
                problem("#endif without #if")
            else:
                stack.pop()
        elif not live:
            continue
        elif word == "define":
            m_name = _NAME.match(rest)
            if m_name is None:
                problem("#define needs a name")
            elif rest[m_name.end():].startswith("("):
                params = re.match(r"\(\s*((?:[A-Za-z_]\w*\s*(?:,\s*[A-Za-z_]\w*\s*)*)?)\)",
                                  rest[m_name.end():])
                if params is None:
                    problem(f"#define {m_name.group()}(: the parameters must be names between "
                            "parentheses, separated by commas")
                else:
                    names = [p.strip() for p in params.group(1).split(",") if p.strip()]
                    if len(set(names)) != len(names):
                        problem(f"#define {m_name.group()}: a parameter is named twice")
                    else:
                        macros[m_name.group()] = (names, rest[m_name.end() + params.end():].strip())
            else:
                macros[m_name.group()] = rest[m_name.end():].strip()
        elif word == "undef":
            name = _one_name(rest, word, problem)
            if name is not None:
                macros.pop(name, None)
        elif word == "include":
            m_file = re.fullmatch(r'"([^"]+)"|<([^>]+)>', rest)
            if m_file is None:
                problem('#include needs a file name: #include "file.ccl"')
            else:
                path = (m_file.group(1) or m_file.group(2)).replace("'", "''")
                out[-1] = f"IMPORT '{path}';"
        else:
            problem(f"unknown preprocessor directive '#{m.group(1)}'")
    for frame in stack:
        report("CCL1006", frame[3], 1, "#if without #endif")
    return "\n".join(out)


def _strip_comment(rest: str) -> str:
    return re.sub(r"//.*$|/\*.*?\*/", "", rest)


def _one_name(rest: str, word: str, problem: Callable[[str], None]) -> Optional[str]:
    if not _NAME.fullmatch(rest):
        problem(f"#{word} needs one name")
        return None
    return rest


def _still_in_comment(line: str, in_comment: bool) -> bool:
    return _expand(line, {}, in_comment, lambda name, message: None)[1]


def _expand(line: str, macros: dict[str, Macro], in_comment: bool,
            problem: Callable[[str, str], None]) -> tuple[str, bool]:
    """The line with macros replaced outside strings and comments, and whether a block comment
    is still open at its end; a macro called with the wrong number of arguments goes to
    ``problem(name, message)``."""
    pos = 0
    head = ""
    if in_comment:
        end = line.find("*/")
        if end < 0:
            return line, True
        head, pos = line[:end + 2], end + 2
    text, open_comment = _replace_in(line, pos, macros, set(), problem)
    return head + text, open_comment


def _replace_in(text: str, pos: int, macros: dict[str, Macro], seen: set[str],
                problem: Callable[[str, str], None]) -> tuple[str, bool]:
    """``text`` from ``pos`` with the macros (but those in ``seen``) replaced, and whether it
    ends inside a block comment."""
    parts: list[str] = []
    while pos < len(text):
        m = _CODE.match(text, pos)
        assert m is not None  # _CODE matches any character
        piece, pos = m.group(), m.end()
        if piece.startswith("/*") and (not piece.endswith("*/") or len(piece) < 4):
            return "".join(parts) + text[m.start():], True
        macro = macros.get(piece) if piece not in seen else None
        if macro is None:
            parts.append(piece)
        elif isinstance(macro, str):
            parts.append(_replace_in(macro, 0, macros, seen | {piece}, problem)[0])
        else:
            found = _arguments(text, pos)
            if found is None:  # a macro with parameters named without arguments stays a name
                parts.append(piece)
                continue
            args, pos = found
            params, body = macro
            if len(args) != len(params) and not (not params and args == [""]):
                problem(piece, f"macro {piece} takes {len(params)} argument(s), given {len(args)}")
                parts.append(text[m.start():pos])
                continue
            values = {p: _replace_in(a.strip(), 0, macros, seen, problem)[0]
                      for p, a in zip(params, args)}
            body = "".join(values.get(t.group(), t.group()) for t in _CODE.finditer(body))
            parts.append(_replace_in(body, 0, macros, seen | {piece}, problem)[0])
    return "".join(parts), False


def _arguments(text: str, pos: int) -> Optional[tuple[list[str], int]]:
    """The arguments of a call whose ``(`` follows ``pos`` (after blanks), split at commas
    outside parentheses and strings, and the position after its ``)``; None when there is no
    ``(`` or it does not close on this line."""
    i = pos
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "(":
        return None
    depth, args, current = 0, [], []
    i += 1
    while i < len(text):
        c = text[i]
        if c == "'":
            close = _STRING.match(text, i)
            if close is None:
                return None
            current.append(close.group())
            i = close.end()
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append("".join(current))
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(current))
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    return None


def _replace(name: str, macros: dict[str, Macro], seen: set[str]) -> str:
    """A name with the macros in it replaced (for #if expressions)."""
    return _replace_in(name, 0, macros, seen, lambda name, message: None)[0]


# --- #if expressions -----------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+)[uUlL]*|([A-Za-z_]\w*)|(&&|\|\||==|!=|<=|>=|[-+*/%<>!()]))")
_BINARY = [("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%")]


def _condition(text: str, macros: dict[str, Macro], problem: Callable[[str], None]) -> bool:
    """Whether an #if / #elif expression is non-zero (False, with a problem, when it is not an
    expression)."""
    tokens: list[tuple[str, object]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            problem(f"#if: cannot read {text[pos:].strip()!r}")
            return False
        number, name, op = m.groups()
        tokens.append(("num", int(number)) if number else ("name", name) if name else ("op", op))
        pos = m.end()
    try:
        value, rest = _expr(tokens, 0, macros)
        if rest:
            raise ValueError("something is left over")
    except (ValueError, IndexError, ZeroDivisionError, RecursionError) as e:
        shown = text.strip() if len(text.strip()) <= 60 else text.strip()[:57] + "..."
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        problem(f"#if {shown}: not an expression of integers and macros ({reason})")
        return False
    return value != 0


def _expr(tokens: list, level: int, macros: dict[str, Macro]) -> tuple[int, list]:
    if level == len(_BINARY):
        return _unary(tokens, macros)
    left, tokens = _expr(tokens, level + 1, macros)
    while tokens and tokens[0][0] == "op" and tokens[0][1] in _BINARY[level]:
        op = tokens[0][1]
        right, tokens = _expr(tokens[1:], level + 1, macros)
        left = _apply(op, left, right)
    return left, tokens


def _apply(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise ZeroDivisionError("division by zero")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates toward zero
        return q if op == "/" else a - q * b
    return {"||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
            "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
            "<=": lambda: int(a <= b), ">": lambda: int(a > b), ">=": lambda: int(a >= b),
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b}[op]()


def _unary(tokens: list, macros: dict[str, Macro]) -> tuple[int, list]:
    kind, value = tokens[0]
    if kind == "op" and value in ("!", "-", "+"):
        operand, rest = _unary(tokens[1:], macros)
        return (int(not operand) if value == "!" else -operand if value == "-" else operand), rest
    if kind == "op" and value == "(":
        inner, rest = _expr(tokens[1:], 0, macros)
        if not rest or rest[0] != ("op", ")"):
            raise ValueError("a '(' is not closed")
        return inner, rest[1:]
    if kind == "num":
        return value, tokens[1:]  # type: ignore[return-value]
    if kind == "name" and value == "defined":
        rest = tokens[1:]
        paren = bool(rest) and rest[0] == ("op", "(")
        if paren:
            rest = rest[1:]
        if not rest or rest[0][0] != "name":
            raise ValueError("defined needs a name")
        found = int(rest[0][1] in macros)
        rest = rest[1:]
        if paren:
            if not rest or rest[0] != ("op", ")"):
                raise ValueError("defined( is not closed")
            rest = rest[1:]
        return found, rest
    if kind == "name":
        body = _replace(str(value), macros, set())
        if body == value:
            return 0, tokens[1:]  # a name that is not a macro counts as 0, as in C
        inner_tokens = [(("num", int(n)) if n else ("name", nm) if nm else ("op", o))
                        for n, nm, o in _TOKEN.findall(body)]
        if not inner_tokens:
            return 0, tokens[1:]
        inner, rest = _expr(inner_tokens, 0, macros)
        if rest:
            raise ValueError(f"macro {value} is not a number")
        return inner, tokens[1:]
    raise ValueError(f"unexpected {value!r}")
