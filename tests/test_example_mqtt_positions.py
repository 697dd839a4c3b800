"""projects/mqtt_positions end to end, as its README runs it: ``ccl run`` (continuous, in a
subprocess) with the project's own .ccr, against a mosquitto and a PostgreSQL (password
authentication) started by the test. Trades are published over MQTT; the window's rows must reach
PostgreSQL (an update and a delete honoured), the web service's GET and its WebSocket; the bad
trade is counted; SIGTERM stops the run cleanly. The database password comes from the .ccr only
and shows up in no output."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from decimal import Decimal

import pytest

from servers import MOSQUITTO, Broker, pg_server, wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "projects", "mqtt_positions")
pytestmark = pytest.mark.skipif(not os.path.exists(MOSQUITTO) or pg_server.pg_bin() is None,
                                reason="mosquitto and PostgreSQL are needed (.ci/run installs them)")


def _configured(directory, broker: Broker, pg) -> str:
    """The project copied to ``directory`` with its .ccr pointing at the test's servers (each
    setting replaced exactly once, so a changed .ccr fails here rather than silently)."""
    target = os.path.join(str(directory), "mqtt_positions")
    shutil.copytree(SOURCE, target)
    ccr = os.path.join(target, "mqtt_positions.ccr")
    text = open(ccr, encoding="utf-8").read()
    for old, new in [("tcp://localhost:1883", broker.uri),
                     ('<Property name="host">localhost<', '<Property name="host">127.0.0.1<'),
                     ('<Property name="port">5432<', f'<Property name="port">{pg.port}<'),
                     ('<Property name="dbName">positions<', f'<Property name="dbName">{pg_server.DATABASE}<'),
                     ('<Property name="user">ccl<', f'<Property name="user">{pg_server.USER}<'),
                     ('<Property name="password">change-me<', f'<Property name="password">{pg_server.PASSWORD}<')]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    assert '<Option name="web.enabled" value="true"/>' in text
    with open(ccr, "w", encoding="utf-8") as f:
        f.write(text)
    return os.path.join(target, "mqtt_positions.ccl")


def _publish(broker: Broker, topic: str, payloads: list[bytes]) -> None:
    import paho.mqtt.client as paho
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"pub-{time.monotonic_ns()}")
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        for info in [client.publish(topic, p, qos=1) for p in payloads]:
            info.wait_for_publish(30)
    finally:
        client.disconnect()
        client.loop_stop()


def _positions(pg) -> dict:
    try:
        rows = pg.query('select book, sym, "netQty", cost, trades from positions')
    except Exception:  # the table is created by the adapter's first connection
        return {}
    return {(b, s): (q, c, n) for b, s, q, c, n in rows}


def test_mqtt_in_window_to_postgres_and_the_web_service(tmp_path):
    import aiohttp

    broker = Broker(tmp_path / "broker").start()
    servers = pg_server.start_server()
    pg = next(servers)
    job = None
    try:
        project = _configured(tmp_path, broker, pg)
        run_dir, out_dir = tmp_path / "ckpt", tmp_path / "out"
        env = {k: v for k, v in os.environ.items()
               if k not in ("PGSERVICEFILE", "PGPASSWORD", "PGPASSFILE")}
        env.update(PYTHONPATH=ROOT, PGPASSFILE=str(tmp_path / "no-pgpass"))
        log_path = tmp_path / "run.log"
        log = open(log_path, "wb")
        job = subprocess.Popen(
            [sys.executable, "-m", "ccl.cli", "run", project, "--checkpoint", str(run_dir),
             "--output-dir", str(out_dir), "--set", "web.port=0", "--set", "spark.master=local[2]",
             "--set", "spark.shuffle_partitions=2",
             "--set", "runtime.trigger_interval=200 milliseconds"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url: list[str] = []

        def web_up() -> bool:
            assert job.poll() is None, log_path.read_text()
            for line in log_path.read_text().splitlines():
                if line.startswith("ccl run: web service on "):
                    url.append(line.split(" on ", 1)[1].strip())
            return bool(url)

        def connected(name: str) -> bool:
            try:
                return json.load(open(run_dir / "adapters" / f"{name}.json"))["state"] == "connected"
            except (OSError, ValueError, KeyError):
                return False

        wait(web_up, 240, 0.2)
        wait(lambda: connected("TradesIn"), 240, 0.2)
        trades = open(os.path.join(SOURCE, "data", "trades.jsonl"), "rb").read().splitlines()
        assert len(trades) == 7

        # the first trade alone: an insert; then the others: EQ1/SAP updated, a bad trade
        _publish(broker, "trades/desk1", trades[:1])
        wait(lambda: _positions(pg) == {("EQ1", "SAP"): (100, Decimal("12150.0000"), 1)}, 240, 0.2)
        _publish(broker, "trades/desk1", trades[1:3])
        _publish(broker, "trades/desk2", trades[3:6])
        expected = {("EQ1", "SAP"): (70, Decimal("8490.0000"), 2),
                    ("EQ1", "SIE"): (50, Decimal("9012.5000"), 1),
                    ("EQ2", "SAP"): (-40, Decimal("-4870.0000"), 1),
                    ("EQ2", "BAS"): (200, Decimal("8820.0000"), 1)}
        wait(lambda: _positions(pg) == expected, 240, 0.2)

        async def web() -> tuple[list, list]:
            async with aiohttp.ClientSession() as s:
                async with s.get(f"{url[0]}/elements/Positions/rows") as r:
                    assert r.status == 200
                    served = (await r.json())["rows"]
                async with s.ws_connect(f"{url[0]}/elements/Positions/changes?from=now") as sock:
                    await sock.receive_json(timeout=60)  # the header
                    # the last trade makes EQ2/SAP flat: the window deletes its row
                    await asyncio.get_running_loop().run_in_executor(
                        None, _publish, broker, "trades/desk2", trades[6:])
                    changes: list = []
                    while not any(c["op"] == "d" for c in changes):
                        message = await sock.receive_json(timeout=240)
                        changes += message["changes"]
                return served, changes

        served, changes = asyncio.run(web())
        assert {(r["book"], r["sym"]): (r["netQty"], Decimal(str(r["cost"])), r["trades"])
                for r in served} == expected
        assert [(c["op"], c["row"]["book"], c["row"]["sym"]) for c in changes] == [
            ("d", "EQ2", "SAP")]
        del expected[("EQ2", "SAP")]
        wait(lambda: _positions(pg) == expected, 240, 0.2)

        def bad_counted() -> int:
            return sum(sum(json.loads(p.read_text()).get("bad", {}).values())
                       for p in (run_dir / "stats" / "Trades").glob("batch-*.json"))
        wait(lambda: bad_counted() == 1, 60, 0.2)

        os.killpg(job.pid, signal.SIGTERM)
        assert job.wait(timeout=180) == 0, log_path.read_text()[-3000:]
        log.close()
        bad = [json.loads(x) for x in (out_dir / "_bad_records.jsonl").read_text().splitlines()]
        assert [b["reason"] for b in bad] == ['column qty: "many" is not an integer']
        assert _positions(pg) == expected  # the last batches delivered, nothing undone
        output = log_path.read_text()
        assert pg_server.PASSWORD not in output
        private = run_dir / "adapters" / "secrets.json"
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
        assert pg_server.PASSWORD not in (run_dir / "plan.json").read_text()
    finally:
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
        broker.stop()
        servers.close()
