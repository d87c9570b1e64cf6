"""JSON in and out with orjson: fast (a 4096-device layout is ~400 KB) and strict.

Strict on input: orjson refuses what RFC 8259 refuses and Python's ``json`` lets through (``NaN``,
``Infinity``, unpaired surrogates such as ``"\\ud800"``), so such a body is a 400 ``invalid_json``
here instead of a string that later fails to encode (a 500). orjson's ``JSONDecodeError``
subclasses ``json.JSONDecodeError``, which is what FastAPI turns into a validation error.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio
import orjson
from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

CHUNK_BYTES = 64 * 1024
"""What one response body message carries at most: a slow reader's transport holds about this much more than
its kernel buffers (server/middleware.py ChunkedSend splits every larger body)."""


class OrjsonResponse(JSONResponse):
    """A JSON response encoded by orjson (FastAPI's own ``ORJSONResponse`` is deprecated).

    A ``JSONResponse`` subclass so that FastAPI documents the routes' ``response_model`` for it.
    """

    def render(self, content: Any) -> bytes:
        if isinstance(content, bytes):  # already encoded (e.g. a stored link payload)
            return content
        return orjson.dumps(content)


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    """An ``APIRoute`` whose handler parses the body with orjson (FastAPI's documented extension point)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def orjson_handler(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return orjson_handler


class StoredPayload(Protocol):
    """A payload read piece by piece (server.store.Blob)."""

    length: int

    def seek(self, offset: int) -> None: ...

    def read(self, size: int) -> bytes: ...

    def close(self) -> None: ...


class StreamedJsonResponse(Response):
    """A stored JSON payload sent piece by piece, straight from the store: ``prefix``, then the payload from
    byte ``skip`` on, :data:`CHUNK_BYTES` at a time, each read off the event loop. A reader that does not keep
    up holds one piece here (and what its transport buffers), never the whole payload; one that goes away
    stops the reading. The payload is closed when the response ends, however it ends."""

    media_type = "application/json"

    def __init__(self, prefix: bytes, payload: StoredPayload, skip: int = 0) -> None:
        self.prefix, self.payload, self.skip = prefix, payload, skip
        super().__init__(None, status_code=200)
        self.headers["content-length"] = str(len(prefix) + payload.length - skip)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def gone() -> None:  # the reader left (or was cut): stop reading the store for it
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(gone)
                await self._send(send)
                group.cancel_scope.cancel()
        finally:
            self.payload.close()

    async def _send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.prefix, "more_body": True})
        self.payload.seek(self.skip)
        left = self.payload.length - self.skip
        while left > 0:
            piece = await anyio.to_thread.run_sync(self.payload.read, min(CHUNK_BYTES, left))
            if not piece:
                raise RuntimeError("the stored payload ended early")
            left -= len(piece)
            await send({"type": "http.response.body", "body": piece, "more_body": left > 0})
