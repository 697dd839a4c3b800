"""The project's web service (runtime/web): POST rows into an input's inbox, a WebSocket of an
element's changes, GET of its current rows, the token, and its life beside a deployed project.

Most tests serve a run directory whose changelog Parquet files are written here with pyarrow (no
Spark). One runs a real job (``ccl run`` with the service, on a local master): posted rows come
back through the WebSocket and the GET, bad ones counted by the run. The supervisor test starts
the service as ``ccl deploy``'s supervisor does, with a stand-in for spark-submit; the real-deploy
test deploys an example project on a local standalone cluster (CCL_SKIP_CLUSTER_TEST=1 skips it).
"""
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_runner import run
from ccl.ops import deploy as deploy_mod
from ccl.ops import workspace as ws
from runtime.inputs.csv_text import parse_file_text
from runtime.inputs.formats import CsvFormat
from ccl.config.project_config import load_project_config
from ccl.plan.codec import plan_from_json
from runtime.web.rows import PostError, prepare_json
from runtime.web.server import Server, WebService

PROJECT = """\
CREATE INPUT WINDOW Prices SCHEMA (Sym string, Px float, Qty integer, Ts timestamp) PRIMARY KEY (Sym);
CREATE INPUT STREAM Trades SCHEMA (Id long, Sym string, Qty integer);
CREATE OUTPUT STREAM Big AS SELECT * FROM Trades WHERE Trades.Qty > 10;
"""
PRICES = [["Sym", "string"], ["Px", "float"], ["Qty", "integer"], ["Ts", "timestamp"]]
TOKEN = "s3cr3t-t0ken"
ROOT = Path(__file__).resolve().parent.parent


def compiled(tmp_path) -> Path:
    """The test project compiled; the path of its plan (.ccx)."""
    (tmp_path / "p.ccl").write_text(PROJECT)
    code, out, err = run("compile", str(tmp_path / "p.ccl"), "-o", str(tmp_path / "build"))
    assert code == 0, err
    return tmp_path / "build" / "p.ccx"


def changelog(run_dir: Path, element: str, batch: int, changes: list) -> None:
    """A changelog file as the runtime writes it: ``(op, Sym, Px, Qty)`` per change."""
    d = run_dir / "changelog" / element
    d.mkdir(parents=True, exist_ok=True)
    table = pa.table({"__batch": [batch] * len(changes), "__inst": [0] * len(changes),
                      "__seq": list(range(len(changes), 0, -1)), "__sub": [0] * len(changes),
                      "__op": [c[0] for c in changes], "Sym": [c[1] for c in changes],
                      "Px": [c[2] for c in changes], "Qty": [c[3] for c in changes],
                      "Ts": pa.array([None] * len(changes), pa.timestamp("us", tz="UTC"))})
    tmp = d / f".batch-{batch:08d}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, d / f"batch-{batch:08d}.parquet")


@pytest.fixture
def served(tmp_path):
    """A service on a run directory and two input directories, with a token; (url, paths)."""
    plan = plan_from_json(json.loads(compiled(tmp_path).read_text()))
    inputs = {"Prices": tmp_path / "in" / "Prices", "Trades": tmp_path / "in" / "Trades"}
    for d in inputs.values():
        d.mkdir(parents=True)
    run_dir = tmp_path / "ck"
    server = Server(WebService(plan, str(run_dir), {k: str(v) for k, v in inputs.items()},
                               str(tmp_path), TOKEN))
    url = server.start()
    try:
        yield url, run_dir, inputs
    finally:
        server.stop()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _call(method: str, url: str, **kw):
    async with aiohttp.ClientSession() as s:
        async with s.request(method, url, **kw) as r:
            return r.status, await r.json()


def call(method: str, url: str, **kw):
    return asyncio.run(_call(method, url, **kw))


def test_post_json_writes_the_inbox_as_the_reader_reads_it(served):
    url, _, inputs = served
    rows = [{"Sym": "A", "Px": 1.5, "Qty": 3, "Ts": "2024-01-01T10:00:00"},
            {"Sym": "B", "Px": "x", "Qty": 1},
            {"ESP_OPS": "d", "sym": "A"},
            {"Sym": "C", "Px": 2, "Qty": 7.5},
            {"Sym": "D, \"quoted\"", "Qty": 4, "ESP_OPS": "upsert"},
            [1, 2]]
    status, answer = call("POST", f"{url}/elements/Prices/rows", json=rows, headers=AUTH)
    assert status == 200
    assert answer["records"] == 6 and answer["accepted"] == 3
    assert [(b["record"], b["reason"]) for b in answer["bad"]] == [
        (2, 'column Px: "x" is not a float'), (4, "column Qty: 7.5 is a JSON number, not an integer"),
        (6, "a JSON array is not a record (an object)")]
    files = os.listdir(inputs["Prices"])
    assert files == [answer["file"]] and answer["file"].endswith("-web.csv")
    text = (inputs["Prices"] / answer["file"]).read_text()
    parsed = list(parse_file_text(text, PRICES, CsvFormat()))
    good = [(r[1], r[4], r[5], r[6]) for r in parsed if r[2] is None]
    assert good == [("i", "A", 1.5, 3), ("d", "A", None, None), ("p", 'D, "quoted"', None, 4)]
    assert sum(r[2] is not None for r in parsed) == 3  # the reader counts the bad ones too
    # JSON lines, one object a line, are records too
    lines = '{"Sym": "E", "Qty": 1}\n{"Sym": "F", "Qty": 2}\nnot json\n'
    status, answer = call("POST", f"{url}/elements/Prices/rows", data=lines,
                          headers={**AUTH, "Content-Type": "application/x-ndjson"})
    assert status == 200 and answer["accepted"] == 2
    assert answer["bad"][0]["record"] == 3 and answer["bad"][0]["reason"].startswith("not JSON")


def test_post_csv_is_published_as_is_and_bad_lines_reported(served):
    url, _, inputs = served
    body = "ESP_OPS,Id,Sym,Qty\ni,1,A,20\nd,2,B,zz\n"
    status, answer = call("POST", f"{url}/elements/Trades/rows", data=body,
                          headers={**AUTH, "Content-Type": "text/csv"})
    assert status == 200 and answer["records"] == 2 and answer["accepted"] == 1
    assert answer["bad"] == [{"line": 3, "reason": "column Qty: 'zz' is not an integer", "raw": "d,2,B,zz"}]
    assert (inputs["Trades"] / answer["file"]).read_text() == body
    # a second post sorts after the first (the reader reads one listing in name order)
    _, second = call("POST", f"{url}/elements/Trades/rows", data="Id,Sym,Qty\n3,C,1",
                     headers={**AUTH, "Content-Type": "text/csv"})
    assert sorted(os.listdir(inputs["Trades"])) == [answer["file"], second["file"]]


def test_post_refusals_write_nothing(served):
    url, _, inputs = served
    cases = [("Big", "application/json", "[]", 404), ("Nope", "application/json", "[]", 404),
             ("Trades", "application/xml", "<x/>", 415), ("Trades", "application/json", "  ", 400),
             ("Trades", "text/csv", "", 400)]
    for element, kind, body, code in cases:
        status, answer = call("POST", f"{url}/elements/{element}/rows", data=body,
                              headers={**AUTH, "Content-Type": kind})
        assert status == code and answer["error"], (element, kind)
    status, _ = call("POST", f"{url}/elements/Trades/rows", data=b"\xff\xfe",
                     headers={**AUTH, "Content-Type": "text/csv"})
    assert status == 400
    status, answer = call("POST", f"{url}/elements/Trades/rows", data="x" * (5 << 20),
                          headers={**AUTH, "Content-Type": "text/csv"})
    assert status == 413
    assert all(not os.listdir(d) for d in inputs.values())


def test_token_is_required_and_never_echoed(served):
    url, _, inputs = served
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        status, answer = call("GET", f"{url}/", headers=headers)
        assert status == 401 and TOKEN not in json.dumps(answer)
        status, _ = call("POST", f"{url}/elements/Trades/rows", data="Id,Sym,Qty\n1,A,2\n",
                         headers={**headers, "Content-Type": "text/csv"})
        assert status == 401
    assert not os.listdir(inputs["Trades"])
    status, index = call("GET", f"{url}/", headers=AUTH)
    assert status == 200 and index["project"] == "p"
    assert {e["name"]: e["post"] for e in index["elements"]} == {"Prices": True, "Trades": True,
                                                                 "Big": False}
    status, _ = call("GET", f"{url}/?token={TOKEN}")
    assert status == 200

    async def ws_refused():
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                await s.ws_connect(f"{url}/elements/Prices/changes?token=nope")
            return e.value.status
    assert asyncio.run(ws_refused()) == 401


def test_current_rows_by_key_and_the_last_batch_of_a_stream(served):
    url, run_dir, _ = served
    status, answer = call("GET", f"{url}/elements/Prices/rows", headers=AUTH)
    assert status == 200 and answer == {"element": "Prices", "kind": "window", "key": ["Sym"],
                                        "batch": None, "rows": []}
    changelog(run_dir, "Prices", 0, [("i", "A", 1.0, 1), ("i", "B", 2.0, 2)])
    changelog(run_dir, "Prices", 1, [("u", "A", 1.5, 3), ("d", "B", 2.0, 2), ("i", "C", None, 4)])
    changelog(run_dir, "Prices", 10, [("d", "C", None, 4), ("i", "D", 4.0, 5)])  # after batch 1, not 0
    _, answer = call("GET", f"{url}/elements/Prices/rows", headers=AUTH)
    assert answer["batch"] == 10
    assert sorted((r["Sym"], r["Px"], r["Qty"]) for r in answer["rows"]) == [("A", 1.5, 3), ("D", 4.0, 5)]
    status, answer = call("GET", f"{url}/elements/Nope/rows", headers=AUTH)
    assert status == 404


def test_websocket_from_beginning_and_from_now(served):
    url, run_dir, _ = served
    changelog(run_dir, "Prices", 0, [("i", "A", 1.0, 1)])

    async def follow(start: str):
        async with aiohttp.ClientSession(headers=AUTH) as s:
            async with s.ws_connect(f"{url}/elements/Prices/changes?from={start}") as sock:
                hello = await sock.receive_json(timeout=10)
                assert hello["from"] == start  # and the last committed batch:
                assert hello["batch"] == (0 if start == "now" else 1)
                assert hello["columns"] == PRICES
                if start == "now":
                    changelog(run_dir, "Prices", 1, [("i", "B", 2.0, 2), ("d", "A", 1.0, 1)])
                got = [await sock.receive_json(timeout=10)]
                if start == "beginning":
                    got.append(await sock.receive_json(timeout=10))
                return got

    now = asyncio.run(follow("now"))
    assert now == [{"element": "Prices", "batch": 1, "changes": [
        {"op": "d", "row": {"Sym": "A", "Px": 1.0, "Qty": 1, "Ts": None}},  # __seq order
        {"op": "i", "row": {"Sym": "B", "Px": 2.0, "Qty": 2, "Ts": None}}]}]
    beginning = asyncio.run(follow("beginning"))
    assert [m["batch"] for m in beginning] == [0, 1]
    status, answer = call("GET", f"{url}/elements/Prices/changes?from=later", headers=AUTH)
    assert status == 400


def test_ccl_run_serves_posted_rows_back(tmp_path):
    """A real run (``ccl run`` with ``web.enabled``, going on until stopped): rows posted to the
    service reach its inputs, come back on the WebSocket and the GET, and the bad ones are the
    run's bad records; the token is required and never printed."""
    compiled(tmp_path)
    inputs = {"Prices": tmp_path / "in" / "Prices", "Trades": tmp_path / "in" / "Trades"}
    for d in inputs.values():
        d.mkdir(parents=True)
    run_dir = tmp_path / "ck"
    cmd = [sys.executable, "-m", "ccl.cli", "run", str(tmp_path / "p.ccl"), "--checkpoint",
           str(run_dir), "--output-dir", str(tmp_path / "out"), "--master", "local[1]",
           "--set", "web.enabled=true", "--set", f"web.token={TOKEN}",
           "--set", "runtime.trigger_interval=200 milliseconds"]
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    errors = open(tmp_path / "stderr.log", "wb")
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors,
                           env=deploy_mod.python_env(), start_new_session=True)
    deadline = time.time() + 120
    url = None
    while url is None and time.time() < deadline and job.poll() is None:
        for line in (tmp_path / "stderr.log").read_text().splitlines():
            if line.startswith("ccl run: web service on "):
                url = line.split(" on ", 1)[1].strip()
        time.sleep(0.1)
    assert url is not None, (tmp_path / "stderr.log").read_text()

    async def scenario():
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{url}/elements/Big/rows") as r:
                assert r.status == 401
        async with aiohttp.ClientSession(headers=AUTH) as s:
            async with s.ws_connect(f"{url}/elements/Big/changes?from=beginning") as sock:
                await sock.receive_json(timeout=30)
                r = await s.post(f"{url}/elements/Trades/rows",
                                 json=[{"Id": 1, "Sym": "A", "Qty": 20}, {"Id": 2, "Sym": "B", "Qty": 5},
                                       {"Id": "three", "Sym": "C", "Qty": 50},
                                       {"Id": 4, "Sym": "D", "Qty": 11}])
                answer = await r.json()
                assert r.status == 200 and answer["accepted"] == 3, answer
                got = []
                while len(got) < 2:
                    message = await sock.receive_json(timeout=240)
                    got += [(c["op"], c["row"]["Id"], c["row"]["Sym"]) for c in message["changes"]]
                assert got == [("i", 1, "A"), ("i", 4, "D")]
            r = await s.post(f"{url}/elements/Prices/rows",
                             json=[{"Sym": "A", "Px": 1.5, "Qty": 1}, {"Sym": "B", "Px": 2.5, "Qty": 2},
                                   {"ESP_OPS": "d", "Sym": "A"}])
            assert r.status == 200
            deadline = time.time() + 240
            while time.time() < deadline:
                async with s.get(f"{url}/elements/Prices/rows") as r:
                    rows = (await r.json())["rows"]
                if rows:
                    break
                await asyncio.sleep(0.5)
            assert [(row["Sym"], row["Px"]) for row in rows] == [("B", 2.5)]

    try:
        asyncio.run(scenario())
        deadline = time.time() + 60
        bad = 0
        while time.time() < deadline and bad < 1:
            bad = sum(sum(json.loads(p.read_text()).get("bad", {}).values())
                      for p in (run_dir / "stats" / "Trades").glob("batch-*.json"))
            time.sleep(0.2)
        assert bad == 1
        os.killpg(job.pid, signal.SIGINT)
        assert job.wait(timeout=120) == 0
        with pytest.raises(aiohttp.ClientConnectionError):
            asyncio.run(_call("GET", f"{url}/", headers=AUTH))
        assert TOKEN not in (tmp_path / "stderr.log").read_text()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        errors.close()


def test_the_supervisor_runs_the_service_beside_the_job_and_status_shows_it(tmp_path):
    """``ccl deploy``'s supervisor starts the service when web-config.json asks for it, ``ccl
    status`` shows its address (never the token), and it ends with the job."""
    plan = compiled(tmp_path)
    pd = ws.ProjectDir(str(tmp_path / "ws"), "p")
    os.makedirs(pd.job_dir)
    web = deploy_mod.write_web_config(pd, True, "127.0.0.1", 0, TOKEN, str(plan), str(tmp_path),
                                      {"Trades": str(tmp_path / "in")})
    assert web == {"host": "127.0.0.1", "port": 0, "token": True}
    assert os.stat(pd.web_config).st_mode & 0o777 == 0o600
    job = ("import signal, sys, time\n"
           "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
           "time.sleep(120)\n")
    meta = deploy_mod.start(pd, {"name": "p", "project": "p", "web": web},
                            [sys.executable, "-c", job])
    try:
        deadline = time.time() + 60
        state = ws.project_state(pd)
        while time.time() < deadline and not (state["web"] or {}).get("url"):
            time.sleep(0.2)
            state = ws.project_state(pd)
        url = state["web"]["url"]
        assert url.startswith("http://127.0.0.1:")
        status, _ = call("GET", f"{url}/", headers=AUTH)
        assert status == 200
        code, out, _ = run("status", "p", "--workspace", pd.workspace)
        assert code == 0 and f"web          {url}" in out and TOKEN not in out
        code, out, _ = run("status", "p", "--workspace", pd.workspace, "--format", "json")
        assert json.loads(out)["web"]["url"] == url and TOKEN not in out
        assert deploy_mod.stop(pd, timeout=30) == "stopped"
        assert not os.path.exists(pd.web_address)
        with pytest.raises(aiohttp.ClientConnectionError):
            asyncio.run(_call("GET", f"{url}/", headers=AUTH))
        assert TOKEN not in Path(pd.log_file).read_text()
        # a deploy without web.enabled removes the configuration
        assert deploy_mod.write_web_config(pd, False, "127.0.0.1", 0, "", str(plan), ".", {}) is None
        assert not os.path.exists(pd.web_config) and ws.project_state(pd)["web"] is None
    finally:
        if ws.supervisor_alive(meta):
            os.killpg(meta["pid"], signal.SIGKILL)


def test_json_posted_to_csv_inputs_of_other_formats_round_trips():
    """Posted JSON written for readers with a delimiter and stream-name opcodes, or without a
    header (inserts only), reads back as the same rows; a broken array loses only its bad
    element."""
    records = [{"Sym": "A;B", "Px": 1.25, "Qty": 2, "Ts": "2024-03-04 09:00:00"},
               {"ESP_OPS": "u", "Sym": "C", "Qty": None}]
    fmt = CsvFormat.from_options({"delimiter": ";", "expectStreamNameOpcode": "true"}, "Prices")
    prepared = prepare_json(json.dumps(records), "Prices", PRICES, fmt)
    assert prepared.bad == [] and prepared.ext == "csv"
    rows = list(parse_file_text(prepared.data.decode(), PRICES, fmt))
    assert [(r[1], r[2]) + r[4:7] for r in rows] == [("i", None, "A;B", 1.25, 2),
                                                     ("u", None, "C", None, None)]
    assert str(rows[0][7]).startswith("2024-03-04 09:00:00")
    headless = CsvFormat.from_options({"hasHeader": "false"})
    prepared = prepare_json(json.dumps(records), "Prices", PRICES, headless)
    assert [(b["record"], b["reason"]) for b in prepared.bad] == [
        (2, "this input reads files without a header, where every row is an insert")]
    rows = list(parse_file_text(prepared.data.decode(), PRICES, headless))
    assert [r[4] for r in rows if r[2] is None] == ["A;B"] and sum(r[2] is not None for r in rows) == 1
    broken = '[{"Sym": "A", "Qty": 1},\n {"Sym": oops},\n {"Sym": "B", "Qty": 2}]\n{"Sym": "C", "Qty": 3}'
    prepared = prepare_json(broken, "Prices", PRICES, CsvFormat())
    assert [b["record"] for b in prepared.bad] == [2]
    rows = list(parse_file_text(prepared.data.decode(), PRICES, CsvFormat()))
    assert [(r[4], r[6]) for r in rows if r[2] is None] == [("A", 1), ("B", 2), ("C", 3)]


def test_a_json_input_takes_posted_json_as_is(tmp_path):
    project = ("CREATE INPUT STREAM J SCHEMA (Id integer, Name string);\n"
               "ATTACH INPUT ADAPTER JIn TYPE toolkit_file_json_input TO J PROPERTIES dir = 'j';\n")
    (tmp_path / "j.ccl").write_text(project)
    code, _, err = run("compile", str(tmp_path / "j.ccl"), "-o", str(tmp_path / "build"))
    assert code == 0, err
    plan = plan_from_json(json.loads((tmp_path / "build" / "j.ccx").read_text()))
    service = WebService(plan, str(tmp_path / "ck"), {}, str(tmp_path))
    body = b'{"Id": 1, "Name": "a"}\n{"Id": "x"}\n'
    answer = service.post("J", body, "application/json")
    assert answer["accepted"] == 1 and answer["bad"][0]["record"] == 2
    assert (tmp_path / "j" / answer["file"]).read_bytes() == body and answer["file"].endswith(".json")
    with pytest.raises(PostError) as e:
        service.post("J", b"Id,Name\n1,a\n", "text/csv")
    assert e.value.status == 415


def test_ccr_options_set_the_web_settings(tmp_path):
    (tmp_path / "p.ccl").write_text(PROJECT)
    options = ('<Option name="web.enabled" value="true"/><Option name="web.port" value="8123"/>'
               f'<Option name="web.token" value="{TOKEN}"/>')
    (tmp_path / "p.ccr").write_text(f'<Configuration><Deployment><Project><Options>{options}'
                                    f'</Options></Project></Deployment></Configuration>')
    code, out, err = run("config", str(tmp_path / "p.ccl"), "--ccr", str(tmp_path / "p.ccr"))
    assert code == 0, err
    assert TOKEN not in out and TOKEN not in err
    config = load_project_config(str(tmp_path / "p.ccl"), ccr_path=str(tmp_path / "p.ccr"))
    s = config.settings
    assert (s["web.enabled"], s["web.host"], s["web.port"]) == (True, "127.0.0.1", 8123)
    assert s["web.token"].reveal() == TOKEN and s.setting("web.port").source == ".ccr"
    (tmp_path / "bad.ccr").write_text('<Configuration><Deployment><Project><Options><Option '
                                      'name="web.port" value="70000"/></Options></Project>'
                                      '</Deployment></Configuration>')
    code, _, err = run("check", str(tmp_path / "p.ccl"), "--ccr", str(tmp_path / "bad.ccr"))
    assert code == 1 and "web.port" in err


def _ccl(env, *args, timeout=180):
    done = subprocess.run([sys.executable, "-m", "ccl.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))
    return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(os.environ.get("CCL_SKIP_CLUSTER_TEST") == "1" or not shutil.which("java"),
                    reason="needs Java; CCL_SKIP_CLUSTER_TEST=1 skips it")
def test_real_deploy_serves_the_project(tmp_path):
    """`ccl deploy --set web.enabled=true` on a local standalone cluster: `ccl status` gives the
    address, rows posted to Trades come out of LargeTrades on the WebSocket and into the
    LargeTradeVolume window's GET, the bad one is counted, and `ccl stop` ends the service."""
    workspace = str(tmp_path / "ws")
    env = {**os.environ, ws.WORKSPACE_ENV: workspace,
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    trades = ROOT / "projects" / "trades_roundrobin" / "trades_roundrobin.ccl"
    pd = ws.ProjectDir(workspace, "rrweb")
    try:
        code, out, err = _ccl(env, "cluster", "start", "--port", "0", "--webui-port", "0",
                              "--cores", "2", "--memory", "1g")
        assert code == 0, err
        code, out, err = _ccl(env, "deploy", str(trades), "--name", "rrweb", "--set",
                              "web.enabled=true", "--set", f"web.token={TOKEN}")
        assert code == 0, err + out
        assert "web service on 127.0.0.1:(a free port)" in out and TOKEN not in out
        deadline, url = time.time() + 120, None
        while url is None and time.time() < deadline:
            code, out, _ = _ccl(env, "status", "rrweb", "--format", "json")
            url = (json.loads(out).get("web") or {}).get("url")
            time.sleep(0.5)
        assert url, out

        async def scenario():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                async with s.ws_connect(f"{url}/elements/LargeTrades/changes?from=beginning") as sock:
                    await sock.receive_json(timeout=30)
                    seen = []
                    while len(seen) < 99:  # the seeded file's large trades
                        message = await sock.receive_json(timeout=240)
                        seen += [c["row"]["TradeId"] for c in message["changes"]]
                    r = await s.post(f"{url}/elements/Trades/rows", json=[
                        {"TradeId": 900001, "Ts": "2024-03-04T10:00:00", "Symbol": "ZZZ",
                         "Price": 10, "Volume": 50000},
                        {"TradeId": 900002, "Ts": "2024-03-04T10:00:01", "Symbol": "ZZZ",
                         "Price": "ten", "Volume": 50000},
                        {"TradeId": 900003, "Ts": "2024-03-04T10:00:02", "Symbol": "ZZZ",
                         "Price": "11.00", "Volume": 20000}])
                    answer = await r.json()
                    assert r.status == 200 and answer["accepted"] == 2, answer
                    while len(seen) < 101:
                        message = await sock.receive_json(timeout=240)
                        seen += [c["row"]["TradeId"] for c in message["changes"]]
                    assert seen[99:] == [900001, 900003]
                deadline = time.time() + 120  # the window's batch may commit after the stream's
                rows: dict = {}
                while time.time() < deadline and rows.get("ZZZ", {}).get("LargeTrades") != 2:
                    async with s.get(f"{url}/elements/LargeTradeVolume/rows") as r:
                        rows = {row["Symbol"]: row for row in (await r.json())["rows"]}
                    await asyncio.sleep(0.5)
                assert rows["ZZZ"]["LargeTrades"] == 2 and rows["ZZZ"]["Volume"] == 70000
        asyncio.run(scenario())
        deadline = time.time() + 60
        while time.time() < deadline:
            code, out, _ = _ccl(env, "status", "rrweb", "--format", "json")
            if json.loads(out)["bad_records"] == 1:
                break
            time.sleep(0.5)
        assert json.loads(out)["bad_records"] == 1
        code, out, _ = _ccl(env, "status", "rrweb")
        assert f"web          {url}" in out and TOKEN not in out
        code, out, err = _ccl(env, "stop", "rrweb")
        assert code == 0, err + out
        with pytest.raises(aiohttp.ClientConnectionError):
            asyncio.run(_call("GET", f"{url}/", headers=AUTH))
        assert TOKEN not in Path(pd.log_file).read_text()
    finally:
        _ccl(env, "stop", "rrweb", "--timeout", "15")
        _ccl(env, "cluster", "stop")
        from ccl.ops import cluster as cluster_mod

        cluster_meta = ws.read_json(os.path.join(workspace, "_cluster", "cluster.json")) or {}
        groups = [(w["pid"], w.get("pid_start")) for w in cluster_mod.workers(cluster_meta)]
        groups.append(((pd.meta() or {}).get("pid"), (pd.meta() or {}).get("pid_start")))
        groups.append((cluster_meta.get("master_pid"), cluster_meta.get("master_pid_start")))
        for pid, start in groups:
            if ws.pid_alive(pid, start):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass


def test_a_service_that_cannot_listen_says_so_in_status(tmp_path):
    import socket

    plan = compiled(tmp_path)
    pd = ws.ProjectDir(str(tmp_path / "ws"), "p")
    os.makedirs(pd.root)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        deploy_mod.write_web_config(pd, True, "127.0.0.1", port, "", str(plan), str(tmp_path), {})
        done = subprocess.run([sys.executable, "-m", "runtime.web", pd.web_config],
                              env=deploy_mod.python_env(), capture_output=True, text=True, timeout=120)
    finally:
        taken.close()
    assert done.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in done.stderr
    state = ws.web_state(pd)
    assert state["state"] == "failed" and str(port) in state["error"]
    (tmp_path / "broken.json").write_text("{")
    done = subprocess.run([sys.executable, "-m", "runtime.web", str(tmp_path / "broken.json")],
                          env=deploy_mod.python_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "cannot start" in done.stderr and "Traceback" not in done.stderr
