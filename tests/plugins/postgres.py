"""A real PostgreSQL for the store's tests: Debian's ``postgresql`` package (``make test`` installs it when it is
absent), a cluster made with ``initdb`` in a temporary directory and started with ``pg_ctl`` on a free
loopback port, once per test session (about a second), stopped at its end. No mock.

``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user the package creates
(``runuser``). Connections over TCP need a password (scram-sha-256), so a wrong one is a real refusal. Each test
gets a schema of its own (:meth:`Postgres.fresh_url`: ``?options=-csearch_path=...``, which libpq passes to the
server), so tests never see each other's tables and nothing needs dropping between them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.plugins.live import free_port

USER = "shardscope"
DATABASE = "shardscope"


def pg_bin(name: str) -> str | None:
    """A PostgreSQL program: on PATH, or in Debian's versioned directory (the newest)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return candidates[-1] if candidates else None


class Postgres:
    """A running cluster: ``host``, ``port``, the superuser ``user`` and its ``password``; :meth:`stop` and
    :meth:`start` take it down and bring it back (an outage, issue 29)."""

    def __init__(self, directory: Path, port: int, password: str, as_user: list[str]) -> None:
        self.directory, self.port, self.password, self.as_user = directory, port, password, as_user
        self.host, self.user = "127.0.0.1", USER
        self.pg_ctl = pg_bin("pg_ctl") or "pg_ctl"
        self.options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=300"

    def stop(self, mode: str = "fast") -> None:
        """Stops the server (``fast``: its sessions are ended, as an operator's restart or a failover does;
        ``immediate``: as a crash)."""
        data = self.directory / "data"
        subprocess.run([*self.as_user, self.pg_ctl, "-D", str(data), "-m", mode, "-w", "-t", "60", "stop"],
                       check=True, capture_output=True, timeout=90)  # fmt: skip

    def start(self) -> None:
        """Starts it again on the same port and data, waiting until it takes connections."""
        data = self.directory / "data"
        subprocess.run(
            [*self.as_user, self.pg_ctl, "-D", str(data), "-l", str(self.directory / "log"), "-o", self.options,
             "-w", "-t", "60", "start"],
            check=True, capture_output=True, timeout=90,
        )  # fmt: skip

    def url(self, database: str = DATABASE, *, password: str | None = None, schema: str | None = None) -> str:
        secret = self.password if password is None else password
        auth = f"{self.user}:{urllib.parse.quote(secret, safe='')}@" if secret else f"{self.user}@"
        query = f"?options={urllib.parse.quote(f'-csearch_path={schema}', safe='')}" if schema else ""
        return f"postgresql://{auth}{self.host}:{self.port}/{database}{query}"

    def execute(self, sql: str, database: str = DATABASE) -> None:
        """One statement as the superuser, in autocommit (CREATE DATABASE, CREATE SCHEMA, ...)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql.encode())

    def fresh_url(self) -> str:
        """The URL of a new, empty schema of its own."""
        schema = "t_" + secrets.token_hex(6)
        self.execute(f"CREATE SCHEMA {schema}")
        return self.url(schema=schema)

    def log(self) -> str:
        path = self.directory / "log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@contextlib.contextmanager
def cluster() -> Iterator[Postgres]:
    """A new cluster, running until the block ends (the test fixture's, and bench/load.py's)."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        raise FileNotFoundError("PostgreSQL is not installed: `make test` installs Debian's postgresql package")
    as_user: list[str] = []
    directory = Path(tempfile.mkdtemp(prefix="shardscope-pg-"))
    if os.geteuid() == 0:  # initdb refuses root: the cluster is the postgres user's
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    password = secrets.token_urlsafe(18)
    pwfile = directory / "pwfile"
    pwfile.write_text(password + "\n")
    if as_user:
        os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
    data = directory / "data"
    try:
        subprocess.run(
            [*as_user, initdb, "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth-local=trust",
             "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions", "--no-sync"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        port = free_port()
        server = Postgres(directory, port, password, as_user)
        started = subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-l", str(directory / "log"), "-o", server.options, "-w", "-t", "60",
             "start"],
            capture_output=True,
            text=True,
            timeout=90,
        )  # fmt: skip
        if started.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr}\n{server.log()}")
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    server.execute(f"CREATE DATABASE {DATABASE}", database="postgres")
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            yield server
        finally:
            subprocess.run(
                [*as_user, pg_ctl, "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"],
                capture_output=True,
                timeout=90,
            )
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(directory)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    try:
        with cluster() as server:
            yield server
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's store lives (``--db``): a new SQLite file, or a new schema of the session's PostgreSQL.
    A test that takes it runs against both stores."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    url: str = request.getfixturevalue("postgres").fresh_url()
    return url
