"""A training script imports sharding_core without the server's dependencies."""

from __future__ import annotations

import subprocess
import sys


def test_sharding_core_does_not_import_the_server_stack() -> None:
    code = (
        "import sys, sharding_core, sharding_core.devices, sharding_core.mesh, sharding_core.spec, "
        "sharding_core.layout, sharding_core.render, sharding_core.topology\n"
        "bad = [m for m in ('fastapi', 'uvicorn', 'pydantic', 'starlette', 'server', 'orjson') if m in sys.modules]\n"
        "print(bad)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip() == "[]"
