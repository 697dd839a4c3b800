"""The adapters' secret properties reach them without passing through the plan: ``ccl run`` writes
them to ``RUN/adapters/secrets.json`` (mode 0600), the adapters read it (runtime/adapters/secrets.py).
End to end against a real PostgreSQL server with password authentication (tests/pg_server.py)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

import pg_server
from ccl.plan.model import Adapter, Column, Element
from runtime.adapters.config import mqtt_spec
from runtime.adapters.postgres import db_spec
from runtime.adapters.secrets import read_secrets, secrets_path, write_secrets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ELEMENT = Element("W", "window", "output", None, None,
                  (Column("id", "integer"), Column("sym", "string")), ("id",))


def test_the_secrets_file_is_private_and_removed_when_there_are_none(tmp_path):
    run = str(tmp_path)
    write_secrets(run, {"Out": {"Password": "pw1"}, "Other": {}})
    path = secrets_path(run)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_secrets(run) == {"Out": {"password": "pw1"}}
    os.chmod(path, 0o644)  # a rewrite does not keep a wider mode
    write_secrets(run, {"Out": {"password": "pw2"}})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_secrets(run) == {"Out": {"password": "pw2"}}
    write_secrets(run, {})
    assert not os.path.exists(path) and read_secrets(run) == {}


def test_specs_take_the_password_from_the_secrets_and_never_show_it():
    db = Adapter("Out", "output", "db_out", "W",
                 properties={"host": "h", "dbName": "d", "user": "u", "table": "t"})
    spec = db_spec(db, ELEMENT, {"password": "db-pw-123"})
    assert spec.password == "db-pw-123"
    assert "db-pw-123" not in repr(spec) and "db-pw-123" not in spec.address()
    assert db_spec(db, ELEMENT).password is None
    mq = Adapter("In", "input", "mqtt_input", "W",
                 properties={"mqttServerUri": "tcp://localhost:1883", "mqttTopic": "t",
                             "mqttUsername": "u"})
    mspec = mqtt_spec(mq, None, {"mqttpassword": "mq-pw-456"})
    assert mspec.password == "mq-pw-456" and "mq-pw-456" not in repr(mspec)
    assert mqtt_spec(mq).password is None


PROJECT = """
create input stream Trades schema (id integer, sym string);
create output window Last primary key (id) keep all rows as select * from Trades;
attach output adapter LastDb type db_out to Last
  properties propertyset = 'positionsDb', table = 'last_trades';
"""


def _ccr(port: int, password: str) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration xmlns="http://www.sybase.com/esp/project_config/2010/08/">
  <Runtime>
    <AdaptersPropertySet>
      <PropertySet name="positionsDb">
        <Property name="host">127.0.0.1</Property>
        <Property name="port">{port}</Property>
        <Property name="dbName">{pg_server.DATABASE}</Property>
        <Property name="user">{pg_server.USER}</Property>
        <Property name="password">{password}</Property>
      </PropertySet>
    </AdaptersPropertySet>
  </Runtime>
</Configuration>
"""


@pytest.mark.skipif(pg_server.pg_bin() is None,
                    reason="PostgreSQL is not installed (.ci/run installs it)")
def test_a_ccr_password_reaches_db_out_and_appears_only_in_the_private_file(tmp_path):
    for pg in pg_server.start_server():
        project = tmp_path / "p"
        project.mkdir()
        (project / "p.ccl").write_text(PROJECT)
        (project / "p.ccr").write_text(_ccr(pg.port, pg_server.PASSWORD))
        (tmp_path / "trades.csv").write_text("id,sym\n1,SAP\n2,SIE\n3,BAS\n")
        run_dir, out_dir = tmp_path / "ckpt", tmp_path / "out"
        env = {k: v for k, v in os.environ.items()
               if k not in ("PGSERVICEFILE", "PGPASSWORD", "PGPASSFILE")}
        env.update(PYTHONPATH=ROOT, PGPASSFILE=str(tmp_path / "no-pgpass"))
        cmd = [sys.executable, "-m", "ccl.cli", "run", str(project / "p.ccl"), "--until-idle",
               "--input", f"Trades={tmp_path / 'trades.csv'}", "--checkpoint", str(run_dir),
               "--output-dir", str(out_dir), "--log-level", "INFO",
               "--set", "spark.master=local[1]", "--set", "spark.shuffle_partitions=1"]
        proc = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        output = proc.stdout.decode() + proc.stderr.decode()
        assert proc.returncode == 0, output[-3000:]
        assert sorted(pg.query("select id, sym from last_trades")) == [
            (1, "SAP"), (2, "SIE"), (3, "BAS")]
        # the password: in the .ccr the user wrote and the private file, nowhere else
        assert pg_server.PASSWORD not in output
        private = secrets_path(str(run_dir))
        assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
        assert json.load(open(private)) == {"LastDb": {"password": pg_server.PASSWORD}}
        holders = []
        for base in (run_dir, out_dir, project):
            for d, _, files in os.walk(base):
                for f in files:
                    path = os.path.join(d, f)
                    with open(path, "rb") as fh:
                        if pg_server.PASSWORD.encode() in fh.read():
                            holders.append(path)
        assert sorted(holders) == sorted([private, str(project / "p.ccr")])


def test_deploy_writes_the_secrets_of_ccl_and_ccr_properties(tmp_path):
    from ccl.config.project_config import load_project_config
    from ccl.ops.deploy import write_adapter_secrets

    (tmp_path / "p.ccl").write_text(PROJECT + """
create output stream Copy as select * from Trades;
attach output adapter CopyMqtt type mqtt_output to Copy
  properties mqttServerUri = 'tcp://localhost:1883', mqttTopic = 't', mqttPassword = 'mq-pw';
""")
    (tmp_path / "p.ccr").write_text(_ccr(5432, "db-pw"))
    config = load_project_config(str(tmp_path / "p.ccl"))
    run = str(tmp_path / "ckpt")
    write_adapter_secrets(run, config.adapters)
    assert read_secrets(run) == {"LastDb": {"password": "db-pw"},
                                 "CopyMqtt": {"mqttpassword": "mq-pw"}}
    assert stat.S_IMODE(os.stat(secrets_path(run)).st_mode) == 0o600


def test_ccl_check_no_longer_calls_a_database_password_unused(tmp_path):
    (tmp_path / "p.ccl").write_text(PROJECT)
    (tmp_path / "p.ccr").write_text(_ccr(5432, "db-pw"))
    proc = subprocess.run([sys.executable, "-m", "ccl.cli", "check", str(tmp_path / "p.ccl")],
                          env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "password" not in (proc.stdout + proc.stderr).lower()
    assert "db-pw" not in proc.stdout + proc.stderr
