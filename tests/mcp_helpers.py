"""The MCP tests' clients (the official SDK's own: in memory, over stdio, over streamable HTTP) and transcripts.

A transcript is every call a scripted task made, with its arguments, whether it was a tool error, its text and
its structured answer, written to ``artifacts/mcp/<task>.json`` (git-ignored) for a person to read.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "mcp"
CLI = Path(sys.executable).parent / "shardscope"


def stdio_params(*args: str) -> StdioServerParameters:
    """``shardscope mcp`` as the subprocess an agent host would start (the checkout as its directory)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "SHARDSCOPE_URL")}
    env.update(JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1")
    return StdioServerParameters(command=str(CLI), args=["mcp", *args], env=env, cwd=str(ROOT))


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0, read=600.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


class Transcript:
    """The calls one task made, checked by the test and written out for people."""

    def __init__(self, client: Client, task: str) -> None:
        self.client, self.task = client, task
        self.calls: list[dict[str, Any]] = []

    async def call(self, tool: str, arguments: dict[str, Any], *, ok: bool = True) -> Any:
        t0 = time.perf_counter()
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        result = await self.client.call_tool(tool, arguments, progress_callback=on_progress)
        text = "\n".join(getattr(c, "text", "") for c in result.content[:1])
        self.calls.append({"tool": tool, "arguments": arguments, "is_error": result.is_error, "text": text,
                           "structured": result.structured_content, "seconds": time.perf_counter() - t0,
                           "progress": progress[-3:]})  # fmt: skip
        self.write()
        assert result.is_error is not ok, f"{tool} {arguments}: {text}"
        return result.structured_content if ok else text

    def write(self) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{self.task}.json").write_bytes(orjson.dumps(self.calls, option=orjson.OPT_INDENT_2))
