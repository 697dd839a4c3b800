"""``ccl graph``: a planned project as a picture, in DOT, Mermaid or SVG.

Elements are nodes labelled with their name, kind and partition count; edges go from the elements an
element reads (query sources, Flex inputs, the sources of an error stream; module instances read
outer elements through their queries) to it. An edge into a partitioned element is labelled with
the partition method of that input; broadcast inputs are dashed, error-stream edges dotted.

SVG is drawn by a small layered layout written here (no Graphviz needed): the layer of an element is
its dependency depth (inputs 0, a derived element one more than its deepest source), layers are
columns from left to right, and the order inside a column is improved by a few barycentre sweeps.

Every name is escaped for its format: DOT quoted IDs and labels, Mermaid generated IDs (``n0``,
``n1``, ...) with entity-coded labels, SVG with XML escaping.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Optional

from ..ops.compile import element_inputs

FORMATS = {"dot": "dot", "gv": "dot", "mmd": "mermaid", "mermaid": "mermaid", "svg": "svg"}


@dataclass
class Node:
    index: int
    name: str
    kind: str
    role: str
    partitions: int
    external: bool = False  # read by an element but not in the plan

    @property
    def lines(self) -> list[str]:
        if self.external:
            return [self.name, "not in the plan"]
        what = f"{self.role} {self.kind}".strip()
        return [self.name, what, f"{self.partitions} partition{'' if self.partitions == 1 else 's'}"]


@dataclass
class Edge:
    source: int
    target: int
    style: str  # "plain", "partitioned", "broadcast" or "error"
    label: str = ""


@dataclass
class Graph:
    title: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


def _method(spec: Mapping) -> str:
    method = str(spec.get("method", "")).lower()
    if method == "hash":
        return f"HASH({', '.join(str(c) for c in spec.get('columns', []))})"
    if method == "roundrobin":
        return "ROUNDROBIN"
    return "custom function"


def _edge_kind(element: Mapping, source: str) -> tuple[str, str]:
    if source in (element.get("error_sources") or []):
        return "error", "errors"
    for key, prefix in (("partition", ""), ("module_partition", "module ")):
        part = element.get(key)
        if not part:
            continue
        if source in part.get("broadcast", []):
            return "broadcast", prefix + "broadcast"
        for spec in part.get("specs", []):
            if spec.get("input") == source:
                return "partitioned", prefix + _method(spec)
    return "plain", ""


def _instances(element: Mapping) -> int:
    """How many partition instances an element of a plan's JSON form runs as (a module PARTITION
    multiplies; ``ccl.plan.physical.instance_count`` of the typed element)."""
    count = 1
    for key in ("module_partition", "partition"):
        part = element.get(key)
        if part and isinstance(part.get("count"), int) and part["count"] > 0:
            count *= part["count"]
    return count


def build_graph(plan: Mapping) -> Graph:
    """Nodes and edges of a plan (docs/plan.md)."""
    graph = Graph(str(plan.get("project", "")))
    index: dict[str, int] = {}
    for e in plan.get("elements", []):
        index[e["name"]] = len(graph.nodes)
        graph.nodes.append(Node(len(graph.nodes), str(e["name"]), str(e.get("kind", "")),
                                str(e.get("role", "")), _instances(e)))
    for e in plan.get("elements", []):
        for source in element_inputs(e):
            if source not in index:
                index[source] = len(graph.nodes)
                graph.nodes.append(Node(len(graph.nodes), str(source), "", "", 1, external=True))
            style, label = _edge_kind(e, source)
            graph.edges.append(Edge(index[source], index[e["name"]], style, label))
    return graph


# --- DOT ---------------------------------------------------------------------------------------

def dot_string(text: str) -> str:
    """A DOT quoted string (an ID or a label) that shows ``text`` as it is: backslashes doubled
    (so ``\\N``, ``\\l`` in a name stay text), quotes escaped, line breaks as ``\\n``."""
    s = text.replace("\\", "\\\\").replace('"', '\\"')
    s = s.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return '"' + s + '"'


_FILL = {"input": "#e8f1fb", "output": "#e9f6e9", "local": "#f4f4f4"}


def to_dot(graph: Graph) -> str:
    out = [f"digraph {dot_string(graph.title or 'project')} {{",
           f"  graph [rankdir=LR, labelloc=t, label={dot_string(graph.title)}];",
           '  node [shape=box, style="rounded,filled", fontname="Helvetica", fillcolor="#f4f4f4"];',
           '  edge [fontname="Helvetica", fontsize=10];']
    for node in graph.nodes:
        label = dot_string("\n".join(node.lines))
        attrs = [f"label={label}"]
        if node.external:
            attrs.append("style=dashed")
        elif node.role in _FILL:
            attrs.append(f'fillcolor="{_FILL[node.role]}"')
        if node.kind == "window":
            attrs.append("peripheries=2")
        out.append(f"  {dot_string(node.name)} [{', '.join(attrs)}];")
    for edge in graph.edges:
        attrs = []
        if edge.style == "broadcast":
            attrs.append("style=dashed")
        elif edge.style == "error":
            attrs.append("style=dotted")
        if edge.label:
            attrs.append(f"label={dot_string(edge.label)}")
        tail = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"  {dot_string(graph.nodes[edge.source].name)} -> "
                   f"{dot_string(graph.nodes[edge.target].name)}{tail};")
    out.append("}")
    return "\n".join(out) + "\n"


# --- Mermaid -------------------------------------------------------------------------------------

_MERMAID_PLAIN = re.compile(r"[A-Za-z0-9 _.,()-]")


def mermaid_text(text: str) -> str:
    """Label text for Mermaid: letters, digits and ``_.,()-`` and spaces as they are, every other
    character as an entity code ``#NNN;`` (Mermaid's escape), so no quote, bracket, pipe, ``#``,
    ``<`` or line break reaches the diagram source."""
    return "".join(c if _MERMAID_PLAIN.match(c) else f"#{ord(c)};" for c in text)


def to_mermaid(graph: Graph) -> str:
    out = ["flowchart LR"]
    for node in graph.nodes:
        label = "<br/>".join(mermaid_text(line) for line in node.lines)
        open_, close = ("([", "])") if node.external else (("[[", "]]") if node.kind == "window"
                                                            else ("[", "]"))
        out.append(f'  n{node.index}{open_}"{label}"{close}')
    for edge in graph.edges:
        arrow = {"broadcast": "-.->", "error": "-.->"}.get(edge.style, "-->")
        label = f'|"{mermaid_text(edge.label)}"|' if edge.label else ""
        out.append(f"  n{edge.source} {arrow}{label} n{edge.target}")
    for role, color in _FILL.items():
        members = [f"n{n.index}" for n in graph.nodes if n.role == role and not n.external]
        if members:
            out.append(f"  classDef role_{role} fill:{color},stroke:#555")
            out.append(f"  class {','.join(members)} role_{role}")
    return "\n".join(out) + "\n"


# --- layout and SVG ------------------------------------------------------------------------------

CHAR_W, LINE_H, PAD, COL_GAP, ROW_GAP, MARGIN = 7.2, 16, 10, 90, 24, 20


@dataclass
class Box:
    x: float
    y: float
    w: float
    h: float


def layers(graph: Graph) -> list[int]:
    """Dependency depth of every node: 0 for nodes nothing feeds, else 1 + the deepest source."""
    preds: dict[int, list[int]] = {n.index: [] for n in graph.nodes}
    for e in graph.edges:
        if e.source != e.target:
            preds[e.target].append(e.source)
    depth: dict[int, int] = {}

    def visit(i: int, stack: frozenset) -> int:
        if i in depth:
            return depth[i]
        if i in stack:  # a cycle cannot come from a plan; guard anyway
            return 0
        d = 1 + max((visit(p, stack | {i}) for p in preds[i]), default=-1)
        depth[i] = d
        return d

    return [visit(n.index, frozenset()) for n in graph.nodes]


def _barycentre(neighbours: list[int], order: dict[int, int], own: int) -> float:
    if not neighbours:
        return order[own]
    return sum(order[x] for x in neighbours) / len(neighbours)


def layout(graph: Graph) -> tuple[dict[int, Box], float, float]:
    """Boxes of the nodes and the drawing's width and height."""
    depth = layers(graph)
    columns: dict[int, list[int]] = {}
    for node in graph.nodes:
        columns.setdefault(depth[node.index], []).append(node.index)
    preds: dict[int, list[int]] = {n.index: [] for n in graph.nodes}
    succs: dict[int, list[int]] = {n.index: [] for n in graph.nodes}
    for e in graph.edges:
        preds[e.target].append(e.source)
        succs[e.source].append(e.target)
    order = {i: pos for col in columns.values() for pos, i in enumerate(col)}
    for sweep in range(4):  # barycentre ordering: forwards on even sweeps, backwards on odd ones
        keys = sorted(columns) if sweep % 2 == 0 else sorted(columns, reverse=True)
        near = preds if sweep % 2 == 0 else succs
        for c in keys:
            columns[c].sort(key=lambda i: (_barycentre(near[i], order, i), order[i]))
            for pos, i in enumerate(columns[c]):
                order[i] = pos
    size = {n.index: (max(len(line) for line in n.lines) * CHAR_W + 2 * PAD,
                      len(n.lines) * LINE_H + 2 * PAD) for n in graph.nodes}
    heights = {c: sum(size[i][1] for i in col) + ROW_GAP * (len(col) - 1)
               for c, col in columns.items()}
    # wide enough for the longest edge label (font size 10: about 6 px a character)
    gap = max([COL_GAP] + [len(e.label) * 6.0 + 30 for e in graph.edges])
    total_h = max(heights.values(), default=0)
    boxes: dict[int, Box] = {}
    x = MARGIN
    for c in sorted(columns):
        col_w = max(size[i][0] for i in columns[c])
        y = MARGIN + LINE_H + (total_h - heights[c]) / 2  # a title line above, columns centred
        for i in columns[c]:
            w, h = size[i]
            boxes[i] = Box(x + (col_w - w) / 2, y, w, h)
            y += h + ROW_GAP
        x += col_w + gap
    width = max(x - gap + MARGIN, 2 * MARGIN + len(graph.title) * CHAR_W)
    return boxes, width, total_h + 2 * MARGIN + LINE_H


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """``text`` for XML character data or a quoted attribute: ``& < > " '`` as entities,
    characters XML cannot hold as U+FFFD."""
    s = _XML_BAD.sub("\ufffd", text)
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


_STROKE = {"plain": "", "partitioned": "", "broadcast": ' stroke-dasharray="6 4"',
           "error": ' stroke-dasharray="2 3"'}


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def to_svg(graph: Graph, links: Optional[Mapping[str, str]] = None) -> str:
    """The SVG drawing of ``graph``; ``links``: per element name a URL its box links to (the run
    report links elements flagged by a warning to its explanation, and draws them in red)."""
    links = links or {}
    boxes, width, height = layout(graph)
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(width)}" height="{_f(height)}" '
            f'viewBox="0 0 {_f(width)} {_f(height)}" font-family="monospace" font-size="12">'),
           f"<title>{xml_text(graph.title)}</title>",
           ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/>'
            "</marker></defs>"),
           f'<text x="{MARGIN}" y="{MARGIN + 4}" font-weight="bold">{xml_text(graph.title)}</text>']
    for edge in graph.edges:
        a, b = boxes[edge.source], boxes[edge.target]
        x1, y1, x2, y2 = a.x + a.w, a.y + a.h / 2, b.x, b.y + b.h / 2
        if edge.source == edge.target or x2 <= x1:  # same column: loop around to the left side
            x2, y2 = b.x, b.y + b.h / 2
            x1, y1 = a.x, a.y + a.h / 2
            d = f"M{_f(x1)},{_f(y1)} C{_f(x1 - 40)},{_f(y1)} {_f(x2 - 40)},{_f(y2)} {_f(x2)},{_f(y2)}"
            mx, my = x1 - 30, (y1 + y2) / 2
        else:
            dx = (x2 - x1) / 2
            d = f"M{_f(x1)},{_f(y1)} C{_f(x1 + dx)},{_f(y1)} {_f(x2 - dx)},{_f(y2)} {_f(x2)},{_f(y2)}"
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        out.append(f'<g class="edge {edge.style}"><path d="{d}" fill="none" stroke="#444"'
                   f'{_STROKE[edge.style]} marker-end="url(#arrow)"/>')
        if edge.label:
            out.append(f'<text x="{_f(mx)}" y="{_f(my - 4)}" text-anchor="middle" font-size="10" '
                       f'fill="#333" stroke="#fff" stroke-width="3" paint-order="stroke">'
                       f'{xml_text(edge.label)}</text>')
        out.append("</g>")
    for node in graph.nodes:
        box = boxes[node.index]
        fill = "#ffffff" if node.external else _FILL.get(node.role, "#f4f4f4")
        dash = ' stroke-dasharray="4 3"' if node.external else ""
        rx = 8 if node.kind == "window" else 2
        link = links.get(node.name) if not node.external else None
        stroke = ' stroke="#c62828" stroke-width="2"' if link else ' stroke="#555"'
        if link:
            out.append(f'<a href="{xml_text(link)}">')
        out.append(f'<g class="node{" flagged" if link else ""}"><rect x="{_f(box.x)}" y="{_f(box.y)}" '
                   f'width="{_f(box.w)}" height="{_f(box.h)}" rx="{rx}" fill="{fill}"{stroke}{dash}/>')
        for k, line in enumerate(node.lines):
            weight = ' font-weight="bold"' if k == 0 else ""
            out.append(f'<text x="{_f(box.x + box.w / 2)}" y="{_f(box.y + PAD + LINE_H * (k + 1) - 4)}" '
                       f'text-anchor="middle"{weight}>{xml_text(line)}</text>')
        out.append("</g></a>" if link else "</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render(plan: Mapping, fmt: str) -> str:
    """The graph of ``plan`` as ``dot``, ``mermaid`` or ``svg`` text."""
    graph = build_graph(plan)
    kind = FORMATS.get(fmt, fmt)
    if kind == "dot":
        return to_dot(graph)
    if kind == "mermaid":
        return to_mermaid(graph)
    if kind == "svg":
        return to_svg(graph)
    raise ValueError(f"unknown graph format {fmt!r} (dot, mmd or svg)")


def format_of(path: Optional[str], given: Optional[str]) -> str:
    """The format asked for: ``--format``, else the output file's extension, else DOT."""
    if given:
        return FORMATS[given]
    if path:
        ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
        if ext not in FORMATS:
            raise ValueError(f"{path}: cannot tell the format from the extension "
                             f"(use .dot, .mmd or .svg, or --format)")
        return FORMATS[ext]
    return "dot"
