"""The run report (`ccl report`, report.html of `ccl run`, `ccl status NAME --web`): what it
collects from a run directory, how it draws it, and the page of a real run in headless Chromium."""
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request

import pytest

from ccl.ops.report import (ReportSource, SAMPLES, collect, instance_bars, render, state_token,
                            warnings_of)
from ccl.ops.report_web import make_server, respond
from ccl.plan.codec import plan_to_json
from ccl.plan.planner import plan_project
from cli_runner import run

SOURCE = """create input stream priceW
schema (isin string, price money(2));

create output window maxPriceW
schema (isin string, maxPrice money(2))
primary key deduced keep 5 minutes
PARTITION
    by priceW HASH(isin)
PARTITIONS 5
as
SELECT upper(left(priceW.isin,1)) isin, max(priceW.price) maxPrice FROM priceW group by upper(left(priceW.isin,1));
"""
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _plan(tmp_path):
    src = tmp_path / "p.ccl"
    src.write_text(SOURCE)
    plan, diags = plan_project(str(src))
    assert plan is not None, [str(d) for d in diags]
    return src, plan_to_json(plan), diags


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


def _run_dir(tmp_path, plan):
    """A run directory as the runtime leaves it: two batches of the project's query."""
    root = tmp_path / "ck"
    _write(str(root / "plan.json"), plan)
    _write(str(root / "run.json"), {"project_query": ["priceW", "maxPriceW"]})
    for b, (rows, hot) in enumerate([(100, 70), (300, 250)]):
        _write(str(root / "stats" / "priceW" / f"batch-{b:08d}.json"),
               {"rows_in": rows + 5, "rows_out": {"i": rows}, "bad": {"column price: <bad>": 5},
                "instances": {"0": rows}})
        _write(str(root / "stats" / "maxPriceW" / f"batch-{b:08d}.json"),
               {"rows_in": rows, "rows_out": {"i": 3, "u": rows - 3}, "bad": {},
                "instances": {"0": hot, "2": rows - hot}})  # instances 1, 3 and 4 got nothing
        _write(str(root / "batches" / "ccl_project" / f"batch-{b:08d}.json"),
               {"start": 1000.0 + 10 * b, "seconds": 2.0 + b})
        _write(str(root / "bad" / "priceW" / f"batch-{b:08d}.jsonl"),
               "".join(json.dumps({"element": "priceW", "reason": "column price: <bad>",
                                   "row": {"line": f"<script>x{b}{k}</script>"}}) + "\n"
                       for k in range(5)))
    return str(root)


def test_collect_sums_the_counters_and_finds_the_skew(tmp_path):
    src, plan, diags = _plan(tmp_path)
    warnings = warnings_of(diags)
    assert [w.code for w in warnings] == ["CCL3002"]
    report = collect(_run_dir(tmp_path, plan), warnings=warnings)
    by = {e.name: e for e in report.elements}
    assert (by["priceW"].rows_in, by["priceW"].rows_out, by["priceW"].bad) == (
        410, {"i": 400}, {"column price: <bad>": 10})
    agg = by["maxPriceW"]
    assert agg.received == [320, 0, 80, 0, 0] and agg.batches == 2
    assert agg.skew == pytest.approx(320 / 80) and agg.skewed
    assert by["priceW"].skew is None  # one instance: no skew
    assert agg.warnings == ["CCL3002"] and report.warnings[0].element == "maxPriceW"
    # per batch: the rows the project's query read (its input's rows in) and how long it took
    assert [(t.query, t.batch, t.seconds, t.rows) for t in report.timings] == [
        ("ccl:project", 0, 2.0, 105), ("ccl:project", 1, 3.0, 305)]
    [bad] = report.bad
    assert (bad.element, bad.count, len(bad.samples)) == ("priceW", 10, SAMPLES)
    assert not report.finished


def test_an_even_spread_is_not_flagged(tmp_path):
    _, plan, _ = _plan(tmp_path)
    root = _run_dir(tmp_path, plan)
    for b in range(2):
        _write(os.path.join(root, "stats", "maxPriceW", f"batch-{b:08d}.json"),
               {"rows_in": 50, "rows_out": {}, "bad": {}, "instances": {str(i): 10 for i in range(5)}})
    agg = {e.name: e for e in collect(root).elements}["maxPriceW"]
    assert agg.skew == pytest.approx(1.0) and not agg.skewed
    assert "hot" not in instance_bars(agg)


def test_the_page_escapes_what_the_data_holds_and_links_the_warning(tmp_path):
    src, plan, diags = _plan(tmp_path)
    page = render(collect(_run_dir(tmp_path, plan), warnings=warnings_of(diags)))
    assert "<script>x" not in page and "&lt;script&gt;x" in page
    assert "column price: &lt;bad&gt;" in page
    assert '<a class="badge" href="#CCL3002">' in page and 'id="CCL3002"' in page
    assert '<a href="#CCL3002">' in page  # the flagged element's box in the graph
    assert "405 rows · HASH(isin)" not in page and "400 rows · HASH(isin)" in page
    assert "<script>" not in page  # a static page has no script
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_the_output_directory_adds_the_end_of_run_bad_records(tmp_path):
    _, plan, _ = _plan(tmp_path)
    root = _run_dir(tmp_path, plan)
    out = tmp_path / "out"
    _write(str(out / "_run.json"), {"wall_seconds": 12.5, "elements": {
        "maxPriceW": {"bad_records": {"key held by another instance too": 2}}}})
    _write(str(out / "_bad_records.jsonl"), json.dumps(
        {"element": "maxPriceW", "reason": "key held by another instance too", "row": {"isin": "A"}}) + "\n")
    report = ReportSource(root, out_dir=str(out)).report()
    assert report.finished and report.wall_seconds == 12.5
    assert [(g.element, g.count, g.samples) for g in report.bad] == [
        ("priceW", 10, []), ("maxPriceW", 2, ['{"isin": "A"}'])]
    # batches after the _run.json (a resumed run): the run directory again
    _write(os.path.join(root, "stats", "priceW", "batch-00000009.json"),
           {"rows_in": 1, "rows_out": {"i": 1}, "bad": {}, "instances": {"0": 1}})
    os.utime(os.path.join(root, "stats", "priceW", "batch-00000009.json"),
             (os.path.getmtime(out / "_run.json") + 5,) * 2)
    assert not ReportSource(root, out_dir=str(out)).report().finished


def test_ccl_report_command(tmp_path):
    src, plan, _ = _plan(tmp_path)
    root = _run_dir(tmp_path, plan)
    target = tmp_path / "r.html"
    code, out, err = run("report", root, "-o", str(target), "--source", str(src))
    assert code == 0 and out == f"wrote {target}\n", err
    assert 'id="CCL3002"' in target.read_text()
    code, _, err = run("report", str(tmp_path), "-o", str(target))  # no plan.json there
    assert code == 2 and "not a run directory" in err and "Traceback" not in err
    broken = tmp_path / "broken"
    for text in ("{not json", '{"elements": [{"kind": "stream"}]}'):
        _write(str(broken / "plan.json"), text)
        code, _, err = run("report", str(broken), "-o", str(target))
        assert code == 2 and "plan.json" in err and "Traceback" not in err, err
    code, _, err = run("report", "nosuch", "--workspace", str(tmp_path / "ws"))
    assert code == 2 and "no project 'nosuch'" in err
    code, _, err = run("report", root, "--source", str(tmp_path / "missing.ccl"))
    assert code == 2 and "no such file" in err


def _deployed(tmp_path, plan, src):
    ws = tmp_path / "ws"
    shutil.copytree(_run_dir(tmp_path, plan), ws / "demo" / "checkpoint")
    _write(str(ws / "demo" / "project.json"), {"name": "demo", "project_file": str(src), "started": 1.0})
    _write(str(ws / "demo" / "exit.json"), {"code": 0, "started": 1.0, "ended": 2.0})
    return ws


def test_live_page_reloads_when_a_batch_commits(tmp_path):
    from ccl.ops.report import deployed_source
    from ccl.ops.workspace import deployed
    src, plan, _ = _plan(tmp_path)
    ws = _deployed(tmp_path, plan, src)
    source = deployed_source(deployed(str(ws), "demo"))
    status, ctype, body = respond(source, "/")
    assert status == 200 and ctype.startswith("text/html")
    page = body.decode()
    assert page.split('class="meta">')[1].startswith("stopped")  # the deployed project's state
    assert "fetch(" in page and '"/state"' in page and 'id="CCL3002"' in page
    before = respond(source, "/state")[2].decode()
    assert before == state_token(source.run_dir) and before in page
    _write(str(ws / "demo" / "checkpoint" / "batches" / "ccl_project" / "batch-00000002.json"),
           {"start": 1030.0, "seconds": 1.0})
    assert respond(source, "/state")[2].decode() != before
    assert respond(source, "/nope")[0] == 404
    server = make_server(source, 0)  # the stdlib server around respond, on 127.0.0.1
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert r.status == 200 and b"maxPriceW" in r.read()
    finally:
        server.shutdown()
        server.server_close()


def test_status_web_refusals(tmp_path):
    code, _, err = run("status", "--web", "--workspace", str(tmp_path))
    assert code == 2 and "name the deployed project" in err
    code, _, err = run("status", "nosuch", "--web", "--workspace", str(tmp_path))
    assert code == 2 and "no project 'nosuch'" in err


def _chromium(args, tmp_path):
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is installed by .ci/run")
def test_report_of_a_real_run_in_headless_chromium(tmp_path):
    """`ccl run` writes report.html; Chromium renders it: the graph, the bars of the skewed
    element and its warning, the bad-record table. The screenshot stays in tmp_path."""
    src = tmp_path / "p.ccl"
    src.write_text(SOURCE)
    lines = ["isin,price"]
    for i in range(300):  # four rows in five are A...: one instance gets most of them
        lines.append(f"{'AAA' if i % 5 else 'BCDEFGHJK'[i % 9]},{i % 97 + 0.5}")
    lines.insert(40, "XXX,notaprice")
    (tmp_path / "prices.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    # a process of its own: `ccl run` stops its Spark session at the end, and in this process
    # that would be the test run's shared one
    proc = subprocess.run([sys.executable, "-m", "ccl.cli", "run", str(src), "--input",
                           f"priceW={tmp_path / 'prices.csv'}", "--until-idle", "--output-dir",
                           str(out), "--set", "spark.master=local[2]",
                           "--set", "spark.shuffle_partitions=2"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = out / "report.html"
    assert page.exists() and (out / "_run.json").exists()
    batches = json.loads((out / "_run.json").read_text())["batches"]
    assert batches["ccl_project"]["batches"] >= 1 and batches["ccl_project"]["seconds"] > 0
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path).stdout
    assert "<svg" in dom and ">priceW</text>" in dom and ">maxPriceW</text>" in dom
    assert "rows · HASH(isin)" in dom
    section = dom[dom.index('id="instances-maxPriceW"'):]
    assert 'class="instance hot"' in section.split("</svg>")[0]
    assert "skewed: one instance holds" in section
    assert '<a class="badge" href="#CCL3002">' in dom and 'id="CCL3002"' in dom
    bad = dom[dom.index('<table class="bad">'):]
    assert "column price: 'notaprice' is not a money(2)" in bad and "XXX,notaprice" in bad
    assert "Latency per batch" in dom and 'class="chart"' in dom
    shot = tmp_path / "report.png"
    _chromium(["--window-size=1300,1900", f"--screenshot={shot}", page.as_uri()], tmp_path)
    assert shot.exists() and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
