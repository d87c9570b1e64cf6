"""The ``shardscope preview`` command end to end, as users run it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
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


def test_serve_binds_loopback_by_default_and_warns_otherwise(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, fd_limit: object
) -> None:
    calls: list[dict[str, object]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append(kw))  # nothing is bound
    assert main(["serve", "--db", str(tmp_path / "a.db")]) == 0
    assert calls[-1]["host"] == "127.0.0.1" and calls[-1]["port"] == 8000
    assert "warning" not in capsys.readouterr().err
    assert main(["serve", "--host", "0.0.0.0", "--port", "9", "--db", str(tmp_path / "b.db")]) == 0
    assert calls[-1]["host"] == "0.0.0.0"
    assert "warning: binding 0.0.0.0" in capsys.readouterr().err


def test_serve_runs_uvicorn_with_the_connection_layer(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    fd_limit: list[tuple[int, int]],
) -> None:
    from server.http import GuardedH11Protocol

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append(kw))
    args = ["serve", "--db", str(tmp_path / "a.db"), "--setting", "max_header_seconds", "3",
            "--setting", "max_body_seconds", "30", "--setting", "max_open_connections", "5000"]  # fmt: skip
    assert main(args) == 0
    kw = calls[-1]
    protocol = kw["http"]
    assert issubclass(protocol, GuardedH11Protocol)
    assert (protocol.guard.header_seconds, protocol.guard.body_seconds, protocol.guard.max_open) == (3, 30, 5000)
    # no "server: uvicorn"; requests in progress are counted in the app, not by uvicorn's connection count
    assert kw["server_header"] is False and kw.get("limit_concurrency") is None
    assert "open-file limit (RLIMIT_NOFILE) raised from 1024 to 1048576" in capsys.readouterr().err
    # an open-file limit with less room than max_open_connections lowers it, and says so
    fd_limit[0] = (1024, 1024)
    assert main(args) == 0
    assert calls[-1]["http"].guard.max_open == 1024 - 256
    err = capsys.readouterr().err
    assert "open-file limit (RLIMIT_NOFILE) 1024 (its hard limit)" in err
    assert "max_open_connections lowered from 5000 to 768" in err


@pytest.mark.parametrize(
    ("name", "at", "past"),
    [("max_header_seconds", "300", "301"), ("max_header_seconds", "1", "0"), ("max_body_seconds", "3600", "3601"),
     ("max_body_seconds", "1", "0"), ("max_open_connections", "16", "15")],
)  # fmt: skip
def test_connection_settings_at_and_past_their_bounds(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    fd_limit: object,
    name: str,
    at: str,
    past: str,
) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append(kw))
    assert main(["serve", "--db", str(tmp_path / "a.db"), "--setting", name, at]) == 0
    assert main(["serve", "--db", str(tmp_path / "b.db"), "--setting", name, past]) == 2
    assert f"bad_setting]: {name} must be" in capsys.readouterr().err
    assert len(calls) == 1


def test_raise_open_file_limit_reaches_the_hard_limit() -> None:
    import resource

    from server.http import raise_open_file_limit

    limits = raise_open_file_limit()
    assert limits is not None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert limits[1] == soft and (hard == resource.RLIM_INFINITY or soft == hard)
