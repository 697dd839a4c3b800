"""A real PostgreSQL server for the database adapter tests: ``initdb`` into a temporary directory,
``pg_ctl start`` on 127.0.0.1 on a free port, password authentication, stopped at the end.

PostgreSQL refuses to run as root: when the tests run as root the server runs as the ``postgres``
user (``runuser``), its directory owned by it. The connection entry is written to a libpq service
file (``PGSERVICEFILE``), as a deployment would name it in an adapter's ``service`` property.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Iterator, Optional

PASSWORD = "s3cret-pw"
USER = "ccl"
DATABASE = "ccl"


def pg_bin() -> Optional[str]:
    """The newest installed PostgreSQL's binary directory (None when none is installed)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    """A running server and how to reach it."""

    root: str
    port: int
    service_file: str
    bindir: str
    as_user: list[str]

    @property
    def conninfo(self) -> dict:
        return {"host": "127.0.0.1", "port": self.port, "dbname": DATABASE, "user": USER,
                "password": PASSWORD}

    def connect(self):
        import psycopg
        return psycopg.connect(autocommit=True, **self.conninfo)

    def query(self, text: str, params: tuple = ()) -> list[tuple]:
        with self.connect() as conn:
            cur = conn.execute(text, params)
            return cur.fetchall() if cur.description else []

    def _ctl(self, *args: str) -> None:
        subprocess.run([*self.as_user, os.path.join(self.bindir, "pg_ctl"), "-D",
                        os.path.join(self.root, "data"), "-w", "-t", "120", *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        """Stop the server now (fast shutdown); :meth:`start` brings it back on the same port."""
        self._ctl("stop", "-m", "fast")

    def start(self) -> None:
        self._ctl("start", "-l", os.path.join(self.root, "log"), "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off")


def start_server() -> Iterator[PgServer]:
    """Start a server (a generator for a pytest fixture: yields it, then stops it and removes its
    directory)."""
    bindir = pg_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (.ci/run installs it)")
    root = tempfile.mkdtemp(prefix="ccl-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    pwfile = os.path.join(root, "pw")
    with open(pwfile, "w") as f:
        f.write(PASSWORD + "\n")
    if as_user:
        shutil.chown(pwfile, "postgres", "postgres")
    subprocess.run([*as_user, os.path.join(bindir, "initdb"), "-D", os.path.join(root, "data"),
                    "-U", USER, "--pwfile", pwfile, "--auth=scram-sha-256", "-E", "UTF8",
                    "--no-sync"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.unlink(pwfile)
    server = PgServer(root, _free_port(), os.path.join(root, "pg_service.conf"), bindir, as_user)
    server.start()
    subprocess.run([*as_user, os.path.join(bindir, "createdb"), "-h", "127.0.0.1", "-p",
                    str(server.port), "-U", USER, DATABASE], check=True,
                   env={**os.environ, "PGPASSWORD": PASSWORD}, stdout=subprocess.DEVNULL)
    with open(server.service_file, "w") as f:
        f.write(f"[ccl_test]\nhost=127.0.0.1\nport={server.port}\ndbname={DATABASE}\n"
                f"user={USER}\npassword={PASSWORD}\n")
    try:
        yield server
    finally:
        try:
            server.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(root, ignore_errors=True)
