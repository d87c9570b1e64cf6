"""A real ``shardscope serve`` on a free loopback port, for the live and browser tests."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "shardscope"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    def __init__(self, port: int, log: Path, proc: subprocess.Popen[bytes]) -> None:
        self.port, self.log, self.proc = port, log, proc

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 180,  # a kernel run queued behind nineteen others takes minutes at load 15
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def post_json(self, path: str, body: Any, timeout: float = 30) -> tuple[int, Any]:
        status, _, data = self.request(
            "POST", path, orjson.dumps(body), {"Content-Type": "application/json"}, timeout=timeout
        )
        return status, orjson.loads(data)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("live")
    srv = start(tmp / "links.db", tmp / "server.log")
    try:
        yield srv
    finally:
        end(srv.proc)


READY_S = 180.0
"""How long a server may take to answer its first health request: importing JAX and starting took over 60 s on the
shared 2-core machine at load average 20 (a limit on the machine, not on the server: no figure is asserted)."""


def wait_ready(srv: Server, timeout: float = READY_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if srv.proc.poll() is not None:
            break
        try:
            if srv.request("GET", "/api/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"shardscope serve did not become ready (exit code {srv.proc.poll()}); log:\n{srv.log.read_text()}")


LISTENING = re.compile(rb"^shardscope: listening on http://\S+:(\d+)$", re.MULTILINE)
"""The line ``shardscope serve`` prints once it holds its socket (with ``--port 0``, the port the system chose)."""


def start(
    db: Path, log: Path, settings: dict[str, int] | None = None, args: tuple[str, ...] = (), ready_s: float = READY_S
) -> Server:
    """A real ``shardscope serve`` on a free port (``settings``: ``--setting NAME VALUE`` pairs; ``args``: more
    of its options), ready when this returns (within ``ready_s``). ``--port 0``, and the port read from the line
    the server prints: a port picked here and passed to it could be taken by another test's process first."""
    extra = [arg for name, value in (settings or {}).items() for arg in ("--setting", name, str(value))]
    offset = log.stat().st_size if log.exists() else 0  # a log appended to by an earlier server on it
    with log.open("ab") as out:
        # JAX_PLATFORMS=cpu: the server simulates devices; without it JAX would probe for accelerators.
        proc = subprocess.Popen(
            [str(CLI), "serve", "--port", "0", "--db", str(db), *extra, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            cwd=ROOT,
        )
    deadline = time.monotonic() + ready_s
    while (port := listening_port(log, offset)) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            end(proc)
            pytest.fail(f"shardscope serve did not listen (exit code {proc.poll()}); log:\n{log.read_text()}")
        time.sleep(0.1)
    srv = Server(port, log, proc)
    wait_ready(srv, max(1.0, deadline - time.monotonic()))
    return srv


def listening_port(log: Path, offset: int = 0) -> int | None:
    """The port in the first ``shardscope: listening on ...`` line of ``log`` after ``offset``, if there is one."""
    with log.open("rb") as f:
        f.seek(offset)
        found = LISTENING.search(f.read())
    return int(found[1]) if found else None


@contextlib.contextmanager
def two_replicas(db: str, directory: Path, settings: dict[str, int]) -> Iterator[tuple[Server, Server]]:
    """Two real servers on one store (``db``: a PostgreSQL URL), stopped when the block ends (the first too when
    the second does not start)."""
    a = start(db, directory / "a.log", settings)  # type: ignore[arg-type]
    try:
        b = start(db, directory / "b.log", settings)  # type: ignore[arg-type]
        try:
            yield a, b
        finally:
            stop(b)
    finally:
        stop(a)


def stop(srv: Server) -> None:
    if srv.proc.poll() is None:
        end(srv.proc)


def end(proc: subprocess.Popen[bytes]) -> None:
    """Stops a process this plugin started: SIGTERM, then SIGKILL if it is still there 10 s later."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def caddy(upstreams: list[int], directory: Path) -> Iterator[int]:
    """Debian's caddy running docker-compose.yml's Caddyfile in front of the servers on ``upstreams`` (loopback
    ports in place of the replicas' names), on a free loopback port, which this yields."""
    import re
    import shutil

    import yaml

    binary = shutil.which("caddy")
    if binary is None:
        raise FileNotFoundError("caddy is not installed: `make test` installs Debian's caddy package")
    text: str = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["configs"]["caddyfile"]["content"]
    port = free_port()
    text = text.replace(":8080 {", f"http://127.0.0.1:{port} {{", 1)  # plain HTTP, like :8080
    servers = " ".join(f"127.0.0.1:{p}" for p in upstreams)
    text = re.sub(r"reverse_proxy [^{]+\{", f"reverse_proxy {servers} {{", text)
    config = directory / "Caddyfile"
    config.write_text(text)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(directory), "XDG_DATA_HOME": str(directory),
           "XDG_CONFIG_HOME": str(directory)}  # fmt: skip
    with (directory / "caddy.log").open("ab") as log:
        proc = subprocess.Popen(
            [binary, "run", "--config", str(config), "--adapter", "caddyfile"], stdout=log, stderr=log, env=env
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log_text = (directory / "caddy.log").read_text()[-2000:]
                    raise RuntimeError(f"caddy did not start: {log_text}") from None
                time.sleep(0.1)
        yield port
    finally:
        end(proc)
