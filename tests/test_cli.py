"""The ``shardscope preview`` command end to end, as users run it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import jax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.devices import parse_devices
from shardscope.cli import is_loopback, main

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shardscope", *args], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120
    )


def test_preview_issue_example_matches_visualize_sharding() -> None:
    r = _run(
        "preview", "--devices", "tpu:v5e:4x4", "--mesh", "4x4", "--axes", "x,y",
        "--spec", "P('x', None)", "--shape", "16,16",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    mesh = jax.make_mesh((4, 4), ("x", "y"), devices=parse_devices("tpu:v5e:4x4").devices)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.debug.visualize_sharding((16, 16), NamedSharding(mesh, P("x", None)), use_color=False)
    assert r.stdout.startswith(buf.getvalue())
    assert "dim 0: 16 / x(4) → 4" in r.stdout
    assert "replication factor 4 (replicated over y)" in r.stdout


def test_preview_any_rank_in_process(capsys: object) -> None:
    code = main(
        ["preview", "--devices", "cpu:8", "--mesh", "2x4", "--axes", "x,y", "--spec", "P('x', None, 'y', None)",
         "--shape", "4,2,8,3", "--compact"]
    )  # fmt: skip
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert code == 0
    assert out.count("┌") == 2 and "CPU 0" in out and "dim 0 [2:4]" in out


def test_preview_json_is_the_layout(capsys: object) -> None:
    code = main(["preview", "--devices", "cpu:8", "--mesh", "2x4", "--axes", "x,y", "--spec", "P('x')",
                 "--shape", "4,4", "--json"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert code == 0
    assert data["spec"] == "P('x',)" and len(data["shards"]) == 8


def test_bad_spec_explains_and_exits_nonzero() -> None:
    r = _run("preview", "--devices", "cpu:8", "--mesh", "2x4", "--axes", "x,y", "--spec", "P('x', 'z')",
             "--shape", "4,4")  # fmt: skip
    assert r.returncode == 2
    assert "unknown_axis" in r.stderr and "'z'" in r.stderr and r.stdout == ""


def test_parse_error_points_at_the_column(capsys: object) -> None:
    code = main(["preview", "--devices", "cpu:8", "--mesh", "2x4", "--axes", "x,y", "--spec", "P('x' 'y')",
                 "--shape", "4,4"])  # fmt: skip
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert code == 2
    assert "parse_error" in err and "^ column" in err


def test_installed_entry_point() -> None:
    exe = Path(sys.executable).parent / "shardscope"
    r = subprocess.run(
        [str(exe), "preview", "--devices", "gpu:h100:1x8", "--mesh", "8", "--axes", "x", "--spec", "P('x')",
         "--shape", "16"],
        capture_output=True, text=True, env=ENV, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "GPU 0" in r.stdout and "GPU 7" in r.stdout


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")


@pytest.fixture
def fd_limit(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """What ``serve`` finds for the open-file limit (before, after raising it); this process's own is
    left alone."""
    limits = [(1024, 1048576)]
    monkeypatch.setattr("server.http.raise_open_file_limit", lambda: limits[0])
    return limits


class FakeUvicorn:
    """uvicorn's ``Config`` and ``Server`` as ``serve`` uses them, recording instead of serving: a real ``Config``
    configures the process's logging (``logging.config.dictConfig``, which shuts every existing handler down), and
    in a test process that once broke pytest's own capture for every later test on that worker. Real servers are
    started by the live tests."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, check: Any = None) -> None:
        import uvicorn

        self.runs: list[tuple[Any, list[Any] | None]] = []
        fake = self

        class Server:
            def __init__(self, config: Any) -> None:
                self.config, self.started = config, False

            def run(self, sockets: list[Any] | None = None) -> None:
                if check is not None:
                    check(self.config, sockets)
                fake.runs.append((self.config, sockets))
                self.started = True

        monkeypatch.setattr(uvicorn, "Config", lambda app, **kw: types.SimpleNamespace(app=app, **kw))
        monkeypatch.setattr(uvicorn, "Server", Server)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``serve`` would run: the address it asked for (``host``, ``port``), the socket it got and uvicorn's
    ``config`` (its keyword arguments). A socket on a free loopback port stands in for the one asked for (8000 may
    be taken here; 9 needs root), and nothing is served (:class:`FakeUvicorn`)."""
    from shardscope import cli

    calls: list[dict[str, Any]] = []
    real_listen = cli.listen

    def listen(host: str, port: int) -> Any:
        calls.append({"host": host, "port": port})
        return real_listen("127.0.0.1", 0)

    def check(config: Any, sockets: list[Any] | None) -> None:
        calls[-1].update(config=config, sockets=sockets)

    monkeypatch.setattr(cli, "listen", listen)
    FakeUvicorn(monkeypatch, check)
    return calls


def test_serve_binds_loopback_by_default_and_warns_otherwise(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str], tmp_path: Path, fd_limit: object
) -> None:
    assert main(["serve", "--db", str(tmp_path / "a.db")]) == 0
    assert served[-1]["host"] == "127.0.0.1" and served[-1]["port"] == 8000
    assert "warning" not in capsys.readouterr().err
    assert main(["serve", "--host", "0.0.0.0", "--port", "9", "--db", str(tmp_path / "b.db")]) == 0
    assert served[-1]["host"] == "0.0.0.0" and served[-1]["port"] == 9
    assert "warning: binding 0.0.0.0" in capsys.readouterr().err


def test_serve_port_0_listens_on_a_free_port_and_says_which(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, fd_limit: object
) -> None:
    """``--port 0``: the socket uvicorn is handed is already listening on the port the system chose, and the
    server prints it (scripts and tests read that line rather than guessing a free port, which another process
    can take first)."""
    import socket

    seen: list[tuple[Any, list[Any], int]] = []

    def run(config: Any, sockets: list[Any] | None) -> None:
        assert sockets is not None and len(sockets) == 1
        seen.append((config, sockets, sockets[0].getsockname()[1]))
        with socket.create_connection(sockets[0].getsockname(), timeout=10):  # listening before uvicorn runs
            pass

    FakeUvicorn(monkeypatch, run)
    assert main(["serve", "--port", "0", "--db", str(tmp_path / "a.db")]) == 0
    config, sockets, port = seen[-1]
    assert port > 0 and config.port == port and config.host == "127.0.0.1"
    assert f"shardscope: listening on http://127.0.0.1:{port}\n" in capsys.readouterr().err
    assert sockets[0].fileno() == -1  # closed once serve returns


def test_serve_refuses_a_taken_port_and_a_port_that_is_not_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A port something else holds is one line before anything starts (uvicorn's own error came after the app's
    start-up, as a log line and exit status 1); so is a number no port has. Neither creates the store."""
    import socket

    FakeUvicorn(monkeypatch, lambda *a: pytest.fail("uvicorn ran"))
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        assert main(["serve", "--port", str(taken), "--db", str(tmp_path / "a.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error [address_unavailable]: cannot listen on 127.0.0.1:{taken}: Address already in use "
        "(hint: another --port, or --port 0 for a free one)"
    ), err
    for bad in ("65536", "-1"):
        assert main(["serve", "--port", bad, "--db", str(tmp_path / "a.db")]) == 2
        assert capsys.readouterr().err.startswith(f"error [bad_port]: --port {bad} is not a port"), bad
    assert not (tmp_path / "a.db").exists()


def test_serve_runs_uvicorn_with_the_connection_layer(
    served: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    fd_limit: list[tuple[int, int]],
) -> None:
    from server.http import GuardedH11Protocol

    args = ["serve", "--db", str(tmp_path / "a.db"), "--setting", "max_header_seconds", "3",
            "--setting", "max_body_seconds", "30", "--setting", "max_open_connections", "5000"]  # fmt: skip
    assert main(args) == 0
    config = served[-1]["config"]
    protocol = config.http
    assert isinstance(protocol, type) and issubclass(protocol, GuardedH11Protocol)
    assert (protocol.guard.header_seconds, protocol.guard.body_seconds, protocol.guard.max_open) == (3, 30, 5000)
    # no "server: uvicorn"; requests in progress are counted in the app, not by uvicorn's connection count
    assert config.server_header is False and getattr(config, "limit_concurrency", None) is None
    assert "open-file limit (RLIMIT_NOFILE) raised from 1024 to 1048576" in capsys.readouterr().err
    # an open-file limit with less room than max_open_connections lowers it, and says so
    fd_limit[0] = (1024, 1024)
    assert main(args) == 0
    assert served[-1]["config"].http.guard.max_open == 1024 - 256
    err = capsys.readouterr().err
    assert "open-file limit (RLIMIT_NOFILE) 1024 (its hard limit)" in err
    assert "max_open_connections lowered from 5000 to 768" in err


@pytest.mark.parametrize(
    ("name", "at", "past"),
    [("max_header_seconds", "300", "301"), ("max_header_seconds", "1", "0"), ("max_body_seconds", "3600", "3601"),
     ("max_body_seconds", "1", "0"), ("max_open_connections", "16", "15")],
)  # fmt: skip
def test_connection_settings_at_and_past_their_bounds(
    served: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    fd_limit: object,
    name: str,
    at: str,
    past: str,
) -> None:
    assert main(["serve", "--db", str(tmp_path / "a.db"), "--setting", name, at]) == 0
    assert main(["serve", "--db", str(tmp_path / "b.db"), "--setting", name, past]) == 2
    assert f"bad_setting]: {name} must be" in capsys.readouterr().err
    assert len(served) == 1


def test_raise_open_file_limit_reaches_the_hard_limit() -> None:
    import resource

    from server.http import raise_open_file_limit

    limits = raise_open_file_limit()
    assert limits is not None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert limits[1] == soft and (hard == resource.RLIM_INFINITY or soft == hard)
