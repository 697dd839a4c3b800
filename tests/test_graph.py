"""`ccl graph` (DOT, Mermaid, SVG with its own layout) and the physical plan of `ccl explain`."""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

import pytest

from ccl.cli.explain import aging_text, explain_physical, keep_text, state_kind
from ccl.cli.graph import (
    build_graph,
    layers,
    layout,
    mermaid_text,
    render,
    to_dot,
    to_mermaid,
    to_svg,
)
from ccl.plan.codec import plan_to_json
from ccl.plan.model import Plan
from ccl.plan.planner import plan_project
from tests.cli_runner import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "tests", "projects", "seeds")
VALID = os.path.join(ROOT, "tests", "projects", "valid")
SVG = "{http://www.w3.org/2000/svg}"

# Names no CCL identifier can have; the renderers must still escape them (plans are data).
WEIRD = ['a"b', "back\\slash\\N\\l", "new\nline", "<&>'", "{{x}} -->|y| n0[z]", "# x; %% y"]


def typed_of(name: str, folder: str = SEEDS) -> Plan:
    plan, diags = plan_project(os.path.join(folder, name))
    assert plan is not None, [str(d) for d in diags]
    return plan


def plan_of(name: str, folder: str = SEEDS) -> dict:
    return plan_to_json(typed_of(name, folder))


def weird_plan() -> dict:
    """Three inputs (one broadcast) into a partitioned join, with hostile names and a title."""
    a, b, c, d = WEIRD[:4]
    src = lambda alias, el: {"alias": alias, "element": el, "keep": None}
    return {"format": "ccl-plan", "version": 1, "project": WEIRD[4], "elements": [
        {"name": a, "kind": "stream", "role": "input", "query": None, "partition": None,
         "module_partition": None, "stateful": False},
        {"name": b, "kind": "window", "role": "input", "query": None, "partition": None,
         "module_partition": None, "stateful": True},
        {"name": c, "kind": "window", "role": "output", "stateful": True, "module_partition": None,
         "query": {"selects": [{"sources": [src("x", a), src("y", b)]}]},
         "partition": {"count": 3, "specs": [{"input": a, "method": "hash", "columns": [WEIRD[5]]}],
                       "broadcast": [b]}},
        {"name": d, "kind": "error stream", "role": "output", "query": None, "partition": None,
         "module_partition": None, "stateful": False, "error_sources": [c]},
    ]}


def test_graph_model_of_a_broadcast_join():
    g = build_graph(plan_of("hash_vwap_broadcast.ccl"))
    assert [(n.name, n.kind, n.partitions) for n in g.nodes] == [
        ("priceW", "window", 1), ("volumeW", "window", 1), ("vwapW", "window", 2)]
    assert [(g.nodes[e.source].name, g.nodes[e.target].name, e.style, e.label) for e in g.edges] == [
        ("priceW", "vwapW", "partitioned", "HASH(isin)"), ("volumeW", "vwapW", "broadcast", "broadcast")]
    assert layers(g) == [0, 0, 1]


def test_graph_of_modules_flex_and_splitters_has_an_edge_per_read():
    for name in ("crypto_orderbook_modules.ccl", "equity_top3_trades_flex.ccl",
                 "order_routing_splitter.ccl", "banking_atm_error_streams.ccl"):
        plan = plan_of(name, VALID)
        g = build_graph(plan)
        assert len(g.nodes) == len(plan["elements"])  # every source is a plan element
        derived = {e["name"] for e in plan["elements"] if e.get("query") or e.get("flex")
                   or e.get("error_sources")}
        assert {g.nodes[e.target].name for e in g.edges} == derived
        depth = layers(g)
        assert all(depth[e.source] < depth[e.target] for e in g.edges)
    g = build_graph(plan_of("crypto_orderbook_modules.ccl", VALID))
    assert ("BinanceBook", "BinanceTop", "module HASH(Pair)") in {
        (g.nodes[e.source].name, g.nodes[e.target].name, e.label) for e in g.edges}


_DOT_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)


def _dot_unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), s)


def test_dot_quotes_and_escapes_every_name():
    text = to_dot(build_graph(weird_plan()))
    lines = text.splitlines()
    assert lines[0].startswith("digraph ") and lines[-1] == "}"
    assert len(lines) == 4 + 4 + 3 + 1  # header, nodes, edges, closing brace
    for line in lines[1:-1]:  # every statement ends its line: no raw line break inside a string
        assert line.endswith(";")
        # outside quoted strings only DOT syntax remains
        assert re.fullmatch(r"[\w\s\[\]=,;\->#.]*", _DOT_STRING.sub("", line)), line
    node_ids = [_dot_unescape(_DOT_STRING.match(ln.strip()).group(1)) for ln in lines[4:8]]
    assert node_ids == WEIRD[:4]
    edges = [[_dot_unescape(s) for s in _DOT_STRING.findall(ln)] for ln in lines[8:11]]
    assert edges[0][:2] == [WEIRD[0], WEIRD[2]] and edges[0][2] == f"HASH({WEIRD[5]})"
    assert "style=dashed" in lines[9] and edges[1][:3] == [WEIRD[1], WEIRD[2], "broadcast"]
    assert "style=dotted" in lines[10]
    assert '"back\\\\slash\\\\N\\\\l' in text  # label escapes stay text


def test_mermaid_uses_generated_ids_and_entity_coded_labels():
    text = to_mermaid(build_graph(weird_plan()))
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    for line in lines[1:]:
        assert re.fullmatch(r'\s+(n\d+(\[\[|\[|\(\[)"[^"]*"(\]\]|\]|\]\))'
                            r'|n\d+ (-->|-\.->)(\|"[^"|]*"\|)? n\d+|classDef .*|class [n\d,]+ \w+)',
                            line), line
        for label in re.findall(r'"([^"]*)"', line):  # only plain characters and #NNN; codes
            assert re.fullmatch(r"([A-Za-z0-9 _.,()-]|#\d+;)*", label.replace("<br/>", "")), label
    decode = lambda s: re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), s)
    node_labels = [decode(re.search(r'"([^"]*)"', ln).group(1)).split("<br/>")[0]
                   for ln in lines[1:5]]
    assert node_labels == WEIRD[:4]
    assert mermaid_text("a#b;<c>") == "a#35;b#59;#60;c#62;"
    assert " n1 -.->|\"broadcast\"| n2" in text
    assert re.search(r'n0 -->\|"HASH\(#35;', text)


def test_svg_is_well_formed_xml_with_every_name_and_dashed_broadcast():
    text = to_svg(build_graph(weird_plan()))
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    texts = [t.text for t in root.iter(SVG + "text")]
    assert root.find(SVG + "title").text == WEIRD[4]
    for name in WEIRD[:4]:
        assert name in texts
    assert f"HASH({WEIRD[5]})" in texts
    edges = root.findall(f"{SVG}g[@class='edge broadcast']")
    assert len(edges) == 1 and edges[0].find(SVG + "path").get("stroke-dasharray")
    plain = root.findall(f"{SVG}g[@class='edge partitioned']")
    assert len(plain) == 1 and plain[0].find(SVG + "path").get("stroke-dasharray") is None


def test_layout_puts_layers_left_to_right_without_overlaps():
    g = build_graph(plan_of("ride_hailing_keep_policies.ccl", VALID))
    boxes, width, height = layout(g)
    depth = layers(g)
    for e in g.edges:
        assert boxes[e.source].x + boxes[e.source].w < boxes[e.target].x
    items = list(boxes.values())
    for i, a in enumerate(items):
        assert 0 <= a.x and a.x + a.w <= width and 0 <= a.y and a.y + a.h <= height
        for b in items[i + 1:]:
            assert a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
    assert max(depth) == 3


def test_graph_command_writes_each_format(tmp_path):
    src = os.path.join(SEEDS, "hash_vwap_broadcast.ccl")
    code, out, _ = run("graph", src)
    assert code == 0 and out.startswith('digraph "hash_vwap_broadcast"')
    assert '"volumeW" -> "vwapW" [style=dashed, label="broadcast"];' in out
    assert '"priceW" -> "vwapW" [label="HASH(isin)"];' in out
    assert '"vwapW" [label="vwapW\\noutput window\\n2 partitions"' in out
    for ext in ("svg", "dot", "mmd"):
        target = tmp_path / f"g.{ext}"
        code, out, err = run("graph", src, "-o", str(target))
        assert code == 0, err
        assert target.read_text() == render(plan_of("hash_vwap_broadcast.ccl"), ext)
    ET.parse(tmp_path / "g.svg")
    assert (tmp_path / "g.mmd").read_text().startswith("flowchart LR")
    code, out, _ = run("graph", src, "--format", "mmd")
    assert code == 0 and out.startswith("flowchart LR")
    assert run("graph", src, "-o", str(tmp_path / "g.png"))[0] == 2


def test_graph_refuses_a_project_with_errors(tmp_path):
    bad = tmp_path / "bad.ccl"
    bad.write_text("CREATE OUTPUT STREAM o AS SELECT * FROM nowhere;\n")
    code, out, err = run("graph", str(bad))
    assert code == 1 and out == "" and "CCL2001" in err and "Traceback" not in err


# --- ccl explain: the physical plan -----------------------------------------------------------------

def test_explain_prints_the_physical_plan_after_the_partitioning():
    code, out, _ = run("explain", os.path.join(SEEDS, "hash_vwap_broadcast.ccl"))
    assert code == 0
    head, physical = out.split("\nphysical plan ", 1)
    assert head.startswith("vwapW (window): 2 instances")
    assert physical.splitlines()[0] == "(3 element(s), in the order they run):"
    assert """\
  3. vwapW: output window, line 8 of hash_vwap_broadcast.ccl
    reads: priceW, volumeW
    partitioning: 2 partitions
      input priceW: HASH(isin)
      input volumeW: broadcast to every instance
    instances: 2
    state: join of 2 sources (left); aggregation: 1 GROUP BY expression(s), 1 aggregate(s); \
window keyed by (isin) with KEEP 1 MINUTE
    path: per-instance (per-instance state with timers (time-based KEEP, AGES or EVERY): the engine \
over each bucket's rows in applyInArrow, woken by the project's query when one is due)
    broadcast inputs: volumeW
""" in physical
    assert "  1. priceW: input window, line 1 of hash_vwap_broadcast.ccl\n    partitioning: none\n" \
           "    instances: 1\n    state: window keyed by (isin) with KEEP 5 MINUTES\n" \
           "    path: per-instance (input element" in physical


def test_explain_physical_paths_state_kinds_and_modules():
    text = explain_physical(typed_of("crypto_orderbook_modules.ccl", VALID))
    assert "module instance partitioning: 4 partitions" in text
    assert "path: per-instance (per-instance state: the engine over each bucket's rows in applyInArrow)" in text
    seeds = explain_physical(typed_of("hash_maxprice.ccl"))
    assert "1. priceW: input stream" in seeds
    assert "path: native (input stream without state: Spark expressions)" in seeds
    flex = plan_of("flex_keycache_example2.ccl")
    assert state_kind(flex["elements"][1]).startswith("flex: 1 handler(s)")
    assert state_kind(flex["elements"][0]) == "none"
    assert keep_text({"kind": "rows", "count": 3, "per": ["a", "b"], "slack": 2}) == \
        "KEEP 3 ROWS SLACK 2 PER (a, b)"  # CCL's order: it parses back
    assert aging_text({"millis": 60_000, "column": "Age", "times": 3, "start": "T"}) == \
        " AGES EVERY 1 MINUTE SET Age 3 TIMES FROM T"
    assert keep_text({"kind": "every_time", "millis": 1500}) == "KEEP EVERY 1500 MILLISECONDS"
    assert keep_text(None) == "KEEP ALL"


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(VALID) if f.endswith(".ccl")))
def test_every_valid_project_explains_and_draws(name):
    typed, _ = plan_project(os.path.join(VALID, name))
    if typed is None:
        pytest.skip("does not plan")
    plan = plan_to_json(typed)
    assert explain_physical(typed).count("    path: ") == len(plan["elements"])
    ET.fromstring(render(plan, "svg"))
    assert render(plan, "dot").endswith("}\n")
