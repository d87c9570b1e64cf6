"""docker-compose.yml stays runnable: its commands are ones the real CLI and example accept.

No Docker engine runs here, so the file is checked against the code it starts: the dashboard's
command through ``shardscope``'s own argument parser, the job's through ``examples/multihost.py``'s,
and the wiring (store volume, ports, coordinator, dashboard URL, token) between them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from examples.multihost import parser as job_parser
from server.auth import token_problem
from server.settings import Settings
from shardscope.cli import _parser as cli_parser

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def service(name: str) -> dict[str, Any]:
    found: dict[str, Any] = COMPOSE["services"][name]
    return found


def test_dashboard_command_is_a_real_serve_with_its_store_on_a_volume() -> None:
    dash = service("dashboard")
    argv = dash["command"]
    assert argv[0] == "/venv/bin/shardscope"
    args = cli_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.host == "0.0.0.0"
    mounts = dict(v.split(":", 1) for v in dash["volumes"])
    store_dir = str(Path(args.db).parent)
    assert mounts["store"] == store_dir and "store" in COMPOSE["volumes"]
    assert any(p.endswith(f":{args.port}") for p in dash["ports"])
    assert "SHARDSCOPE_TOKEN" in dash["environment"]  # serve --token defaults to it
    assert f"http://127.0.0.1:{args.port}/api/health" in " ".join(dash["healthcheck"]["test"])
    # a non-loopback bind keeps the Host check on: the names the jobs, the healthcheck and the browser use
    assert {"dashboard", "127.0.0.1", "localhost"} <= set(args.allowed_host)


def test_there_is_no_placeholder_token_to_start_with() -> None:
    # compose's ${VAR:?message} refuses to start when SHARDSCOPE_TOKEN is unset; serve refuses placeholders
    value = COMPOSE["x-python"]["environment"]["SHARDSCOPE_TOKEN"]
    assert re.fullmatch(r"\$\{SHARDSCOPE_TOKEN:\?[^}]+\}", value), value
    assert token_problem("change-me-to-a-long-random-string") is not None
    assert token_problem("s3cret") is not None and token_problem("tökén-tökén-tökén-tökén") is not None
    assert token_problem("Zr4i0pC1VqkqzY3sX2m0JtQeZk8B5nT1") is None


def test_the_job_processes_match_the_example_and_reach_the_dashboard() -> None:
    jobs = {name: s for name, s in COMPOSE["services"].items() if name.startswith("job-")}
    parsed = {}
    for name, svc in jobs.items():
        argv = svc["command"]
        assert (ROOT / argv[1]).is_file() and argv[1] == "examples/multihost.py"
        parsed[name] = job_parser().parse_args(argv[2:])
        assert svc["depends_on"]["dashboard"]["condition"] == "service_healthy"
        assert "SHARDSCOPE_TOKEN" in svc["environment"]  # publish sends $SHARDSCOPE_TOKEN
    assert sorted(a.process_id for a in parsed.values()) == list(range(len(jobs)))
    assert {a.num_processes for a in parsed.values()} == {len(jobs)}
    coordinators = {a.coordinator for a in parsed.values()}
    assert len(coordinators) == 1
    host = coordinators.pop().split(":")[0]
    assert parsed[host].process_id == 0  # process 0's service runs the coordination service
    dash_port = cli_parser().parse_args(service("dashboard")["command"][1:]).port
    for a in parsed.values():
        url = urlsplit(a.url)
        assert url.hostname == "dashboard" and url.port == dash_port


def test_install_uses_the_lock_and_the_makefiles_uv() -> None:
    command = " ".join(service("install")["command"])
    uv_version = re.search(r"^UV_VERSION := (\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert uv_version and f"uv=={uv_version.group(1)}" in command
    assert "uv sync --frozen" in command and "--extra flax" in command
    for name in ("dashboard", "job-0", "job-1"):
        assert service(name)["depends_on"].get("install") or service(name)["depends_on"].get("dashboard")
        assert "venv:/venv" in service(name)["volumes"]


def test_the_dashboard_has_a_memory_limit_its_settings_fit() -> None:
    """Issue 20: memory budgets were per worker, not per server. The container's limit is the RAM the server
    reads from its cgroup (server.memcap.available_ram): its settings must fit it, or it refuses to start."""
    dash = service("dashboard")
    limit = dash["mem_limit"]
    match = re.fullmatch(r"(\d+)([mg])", str(limit))
    assert match is not None, limit
    ram = int(match.group(1)) * 1024 ** (2 if match.group(2) == "m" else 3)
    assert dash["memswap_limit"] == limit  # no swap beyond it: the limit is the memory
    args = cli_parser().parse_args(dash["command"][1:])
    settings = Settings().with_values((name, value) for name, value in args.setting)
    assert settings.memory_problem(ram=ram) is None
    assert settings.kernel_memory(ram) == ram // 2  # what the kernel workers get together


# ---- profile "replicas": PostgreSQL, two replicas, Caddy (issue 24) -------------------------------------------

REPLICAS = ("replica-1", "replica-2")


def caddyfile() -> str:
    text: str = COMPOSE["configs"]["caddyfile"]["content"]
    return text


def test_the_replicas_profile_is_postgresql_two_replicas_and_a_proxy() -> None:
    profiled = {name for name, svc in COMPOSE["services"].items() if "replicas" in svc.get("profiles", [])}
    assert profiled == {"postgres", *REPLICAS, "proxy"}
    assert "profiles" not in service("dashboard")  # plain `docker compose up` is still the one server
    pg = service("postgres")
    assert pg["image"].startswith("postgres:") and "pgdata" in COMPOSE["volumes"]
    assert any(v.startswith("pgdata:") for v in pg["volumes"])
    password = pg["environment"]["POSTGRES_PASSWORD"]
    assert re.fullmatch(r"\$\{POSTGRES_PASSWORD:\?[^}]+\}", password), password  # no default password
    for name in REPLICAS:
        replica = service(name)
        args = cli_parser().parse_args(replica["command"][1:])
        db = urlsplit(args.db)
        assert db.scheme == "postgresql" and db.hostname == "postgres" and db.password is None  # not in argv
        assert db.username == pg["environment"]["POSTGRES_USER"] and db.path == "/" + pg["environment"]["POSTGRES_DB"]
        assert replica["environment"]["PGPASSWORD"] == password  # libpq reads it from the environment
        assert "SHARDSCOPE_TOKEN" in replica["environment"]  # token required, as for the dashboard
        assert args.host == "0.0.0.0" and "ports" not in replica  # reached only through the proxy
        required = [h for h in args.allowed_host if h.startswith("${")]
        assert len(required) == 1 and re.fullmatch(r"\$\{SHARDSCOPE_HOSTNAME:\?[^}]+\}", required[0])
        assert {"localhost", "127.0.0.1"} <= set(args.allowed_host)  # the health checks' Host
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert replica["depends_on"]["install"]["condition"] == "service_completed_successfully"
        assert f"http://127.0.0.1:{args.port}/api/health" in " ".join(replica["healthcheck"]["test"])
        settings = Settings().with_values((n, v) for n, v in args.setting)
        assert settings.max_db_connections * len(REPLICAS) < 100  # PostgreSQL's default max_connections
        assert settings.memory_problem(ram=8 * 1024**3) is None and replica["mem_limit"] == "8g"
    assert "--extra postgres" in " ".join(service("install")["command"])
    proxy = service("proxy")
    assert proxy["image"].startswith("caddy:") and proxy["configs"][0]["target"] == "/etc/caddy/Caddyfile"
    assert all(p.startswith("127.0.0.1:") for p in proxy["ports"])
    assert set(proxy["depends_on"]) == set(REPLICAS)
    # The Caddyfile sends to both replicas on the port they serve on, and bounds bodies as the replicas do.
    port = cli_parser().parse_args(service(REPLICAS[0])["command"][1:]).port
    upstreams = re.search(r"reverse_proxy ([^{]+)\{", caddyfile())
    assert upstreams and upstreams.group(1).split() == [f"{name}:{port}" for name in REPLICAS]
    limit = re.search(r"max_size (\d+)MiB", caddyfile())
    assert limit and int(limit.group(1)) * 1024**2 == Settings().max_snapshot_bytes


def test_the_caddyfile_is_one_caddy_accepts(tmp_path: Path) -> None:
    """Validated by the real binary (Debian's caddy, which `make test` installs)."""
    import shutil
    import subprocess

    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.skip("caddy is not installed: `make test` installs Debian's caddy package")
    config = tmp_path / "Caddyfile"
    config.write_text(caddyfile())
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path),
    }
    done = subprocess.run(
        [caddy, "validate", "--config", str(config), "--adapter", "caddyfile"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0 and "Valid configuration" in done.stdout + done.stderr, done.stderr
    broken = tmp_path / "Broken"
    broken.write_text(caddyfile().replace("lb_policy least_conn", "lb_policy no_such_policy"))
    done = subprocess.run(
        [caddy, "validate", "--config", str(broken), "--adapter", "caddyfile"], capture_output=True, text=True, env=env
    )
    assert done.returncode != 0  # the check can fail
