"""A test-only worker for the MCP job machinery: writes its pid, reports a stage, sleeps, answers."""

from __future__ import annotations

import os
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

PID_FILE = os.path.join(tempfile.gettempdir(), f"shardscope-mcp-sleeper-{os.getuid()}.pid")


def main(conn: Connection, request: dict[str, Any]) -> None:
    with open(PID_FILE, "w") as f:
        f.write(str(os.getpid()))
    conn.send(("stage", "sleeping"))
    time.sleep(float(request["seconds"]))
    import orjson

    conn.send(("done", orjson.dumps({"slept": request["seconds"]})))
