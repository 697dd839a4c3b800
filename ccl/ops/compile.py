"""``ccl compile``: a planned project to ``NAME.ccx`` (the plan as JSON), ``NAME_job.py`` (a PySpark
driver generated from ``ccl/ops/templates/job.py.j2``) and, with ``--bundle``, ``ccl_runtime.zip``.

No user text reaches the generated code. The template is rendered from a *view* built here, never
from the plan: integers, words of fixed vocabularies (kinds, roles, paths) and names passed through
:func:`safe_text`, which keeps ASCII letters, digits, ``_`` and ``.`` and turns every other
character into ``?``. :func:`_check_view` enforces that alphabet on every string of the view, and the
template writes view values only inside ``#`` comments: without a line break, a quote or a brace
such a value can neither end its comment nor be read as template syntax (Jinja does not re-read what
it outputs). After rendering, :func:`render_job` also checks that the job's syntax tree (where comments
do not appear) is that of the template rendered for an empty project: whatever the project holds,
the executable code is the same fixed text. The project's names and values travel in the ``.ccx``
file only, as JSON data the job loads.
"""
from __future__ import annotations

import ast
import functools
import io
import json
import os
import re
import zipfile
from dataclasses import dataclass
from typing import Mapping, Optional

from .. import __version__
from ..plan.codec import plan_to_json
from ..plan.model import NATIVE, PER_INSTANCE, Plan

JOB_TEMPLATE = "job.py.j2"
BUNDLE_NAME = "ccl_runtime.zip"
BUNDLE_PACKAGES = ("ccl", "runtime")

KINDS = ("stream", "window", "delta stream", "reference", "error stream")
ROLES = ("input", "output", "local")
PATHS = (NATIVE, PER_INSTANCE)

_VIEW_TEXT = re.compile(r"[A-Za-z0-9 _.,()?+-]*\Z")  # every string the template may write
_SAFE_CHAR = re.compile(r"[A-Za-z0-9_.]")


def safe_text(text: object, limit: int = 60) -> str:
    """A fixed-alphabet rendering of a name for a comment: ``[A-Za-z0-9_.]`` kept, anything else
    ``?``; at most ``limit`` characters (longer ones end in ``...``)."""
    s = "".join(c if _SAFE_CHAR.match(c) else "?" for c in str(text))
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _word(value: object, vocabulary: tuple[str, ...], default: str) -> str:
    return value if isinstance(value, str) and value in vocabulary else default


def _int(value: object) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def element_inputs(element: Mapping) -> list[str]:
    """The plan names an element reads, in first-use order: query sources, Flex inputs, the
    sources of an error stream."""
    names: list[str] = []
    for sel in (element.get("query") or {}).get("selects", []):
        names.extend(s["element"] for s in sel.get("sources", []))
    names.extend((element.get("flex") or {}).get("inputs", []))
    names.extend(element.get("error_sources") or [])
    return list(dict.fromkeys(names))


def job_view(plan: Mapping) -> dict:
    """What the job template may show of ``plan`` (JSON form): only numbers, fixed words and
    safe names."""
    elements = []
    for i, e in enumerate(plan.get("elements", []), 1):
        physical = e.get("physical") or {}
        line = _int(e.get("line"))
        elements.append({
            "index": i,
            "name": safe_text(e.get("name", "")),
            "kind": _word(e.get("kind"), KINDS, "element"),
            "role": _word(e.get("role"), ROLES, ""),
            "line": line if line is not None else "?",
            "file": safe_text(os.path.basename(str(e.get("file") or "?"))),
            "instances": _int(physical.get("instances")) or "?",
            "path": _word(physical.get("path"), PATHS, "?"),
            "reads": [safe_text(x) for x in element_inputs(e)],
        })
    return {"version": safe_text(__version__), "project": safe_text(plan.get("project", "")),
            "plan_version": _int(plan.get("version")) or "?",
            "parameters": len(plan.get("parameters") or {}),
            "adapters": len(plan.get("adapters") or []), "elements": elements}


def _check_view(value: object, where: str = "view") -> None:
    """Every string of the view is in the comment alphabet; only ints, strings, lists and dicts."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{where}: {type(value).__name__} in the job view")
    if isinstance(value, int):
        return
    if isinstance(value, str):
        if not _VIEW_TEXT.match(value):
            raise ValueError(f"{where}: text outside the comment alphabet in the job view")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_view(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_view(key, where)
            _check_view(item, f"{where}.{key}")
        return
    raise ValueError(f"{where}: {type(value).__name__} in the job view")


@functools.lru_cache(maxsize=1)
def _environment():
    import jinja2

    try:
        loader: jinja2.BaseLoader = jinja2.PackageLoader("ccl.ops", "templates")
    except ValueError:  # not importable as a package with resources: the directory beside us
        loader = jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates"))
    return jinja2.Environment(loader=loader, autoescape=False, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _render(view: dict) -> str:
    _check_view(view)
    return _environment().get_template(JOB_TEMPLATE).render(**view)


@functools.lru_cache(maxsize=1)
def _reference_tree() -> str:
    empty = {"version": "0", "project": "", "plan_version": 0, "parameters": 0, "adapters": 0,
             "elements": []}
    return ast.dump(ast.parse(_render(empty)))


_HEADER = ("#!/usr/bin/env python3", "# Generated by `ccl compile`")


def render_job(plan: Plan) -> str:
    """The generated driver for ``plan``; raises ValueError if the result were not the fixed code."""
    return render_view(job_view(plan_to_json(plan)))


def render_view(view: dict) -> str:
    """The generated driver showing ``view`` (:func:`job_view`); raises ValueError if the result
    were not the fixed code."""
    code = _render(view)
    lines = code.splitlines()
    if lines[0] != _HEADER[0] or not lines[1].startswith(_HEADER[1]) or "coding" in lines[1]:
        raise ValueError("generated job: unexpected header")
    if ast.dump(ast.parse(code)) != _reference_tree():
        raise ValueError("generated job: its code differs from the template's fixed code")
    return code


def plan_text(plan: Plan) -> str:
    """The ``.ccx`` file: the plan as JSON (format and version inside, docs/plan.md), ASCII."""
    return json.dumps(plan_to_json(plan), indent=1, ensure_ascii=True) + "\n"


@dataclass
class Compiled:
    """What ``ccl compile`` wrote."""

    plan_file: str
    job_file: str
    bundle_file: Optional[str] = None


def _write(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_compiled(plan: Plan, name: str, out_dir: str, bundle: bool = False) -> Compiled:
    """Write ``NAME.ccx`` and ``NAME_job.py`` (and ``ccl_runtime.zip``) into ``out_dir``."""
    if not name or os.sep in name or (os.altsep and os.altsep in name) or name in (".", ".."):
        raise ValueError(f"not a usable project name for file names: {name!r}")
    os.makedirs(out_dir, exist_ok=True)
    job = render_job(plan)
    done = Compiled(os.path.join(out_dir, name + ".ccx"), os.path.join(out_dir, name + "_job.py"))
    _write(done.plan_file, plan_text(plan).encode("ascii"))
    _write(done.job_file, job.encode("utf-8"))
    if bundle:
        done.bundle_file = os.path.join(out_dir, BUNDLE_NAME)
        _write(done.bundle_file, bundle_bytes())
    return done


def _package_dir(name: str) -> str:
    module = __import__(name)
    return os.path.dirname(os.path.abspath(module.__file__))


def bundle_bytes() -> bytes:
    """``ccl_runtime.zip``: the ``ccl`` and ``runtime`` packages (sources and package data, no
    caches, no generated parser tables) for ``spark-submit --py-files``. Deterministic: sorted
    entries, fixed timestamps."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for package in BUNDLE_PACKAGES:
            root = _package_dir(package)
            for path in sorted(_package_files(root)):
                arc = package + "/" + os.path.relpath(path, root).replace(os.sep, "/")
                info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                with open(path, "rb") as f:  # follows links (default_config.yaml)
                    z.writestr(info, f.read())
    return buf.getvalue()


def _package_files(root: str) -> list[str]:
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not x.startswith("."))
        for f in files:
            if f.endswith((".pyc", ".pyo", ".tmp")) or f.startswith(".") or f == "_parsetab.py":
                continue
            out.append(os.path.join(d, f))
    return out
