"""One error type and one error body for every 4xx and 5xx: ``{"error": {"code", "message", "hint"?, ...details}}``.

:class:`ApiError` is the domain's :class:`~sharding_core.errors.ShardingError` with an HTTP status;
:func:`error_body` is the only place the body is built — route handlers, the exception handlers
and the pure-ASGI middleware (:func:`send_error`) all answer through it. Status codes, chosen once:

* 400 ``invalid_json`` (the body is not JSON: syntax, NaN, lone surrogates), ``bad_host`` (the
  ``Host`` header is not one this server answers to), ``bad_request`` (anything else malformed);
* 401 ``unauthorized`` (a write without the server's token), 403 ``bad_token``, ``cross_site_request``,
  ``read_only_run`` (a run's read id sent where its write secret belongs);
* 404 ``not_found``; 405 ``method_not_allowed``; 409 ``run_conflict``, ``run_mismatch``;
* 413 ``too_large`` (the request body or a share link payload is over its limit);
* 415 ``unsupported_media_type`` (a POST body that is not ``application/json``);
* 422 ``validation_error`` (the JSON does not match the request model: the message names the
  field path) and every :class:`~sharding_core.errors.ShardingError` code (``parse_error``,
  ``unknown_axis``, ``indivisible``, ``too_large``, ``bad_devices``, ...): well-formed JSON whose
  content the domain cannot lay out. 422, not 400, because the request itself was understood;
* 429 ``busy`` (with ``Retry-After``);
* 500 ``internal_error``: a bug, never caused by input; the body carries no traceback;
* 503 ``store_unavailable`` (the store cannot be written: read-only, I/O error), 507
  ``insufficient_storage`` (past ``max_store_bytes``, or a full disk): nothing was stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from sharding_core.errors import NOT_FOUND, ShardingError

DOMAIN_ERROR_STATUS = 422
VALIDATION_ERROR = "validation_error"
INVALID_JSON = "invalid_json"
MAX_REPORTED_ERRORS = 10  # a body with a thousand bad fields gets a short answer

# Status -> code for errors raised as plain HTTPExceptions (by Starlette's router, StaticFiles, ...).
STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    403: "forbidden",
    404: NOT_FOUND,
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    422: VALIDATION_ERROR,
    500: "internal_error",
}

STATUS_MESSAGES: dict[int, str] = {
    404: "no such page or resource",
    405: "this method is not allowed here",
}


class ApiError(ShardingError):
    """A refusal with an HTTP status: ``status``, ``code``, ``message``, optional ``hint``, response
    ``headers`` and JSON details. A plain :class:`ShardingError` is answered with status 422."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        hint: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        **details: Any,
    ) -> None:
        super().__init__(code, message, hint, **details)
        self.status = status
        self.headers = dict(headers or {})


def status_of(error: ShardingError) -> int:
    return error.status if isinstance(error, ApiError) else DOMAIN_ERROR_STATUS


def error_body(error: ShardingError) -> bytes:
    """The JSON body of any error: ``{"error": {"code", "message", "hint"?, ...details}}``."""
    return orjson.dumps({"error": error.to_dict()})


def error_response(error: ShardingError) -> Response:
    return Response(
        error_body(error), status_code=status_of(error), media_type="application/json", headers=_headers(error)
    )


def _headers(error: ShardingError) -> dict[str, str] | None:
    return error.headers or None if isinstance(error, ApiError) else None


async def send_error(send: Callable[[Any], Awaitable[None]], error: ShardingError) -> None:
    """Answers an ASGI request with ``error`` (for middleware, which has no response classes)."""
    body = error_body(error)
    extra: Iterable[tuple[bytes, bytes]] = (
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (_headers(error) or {}).items()
    )
    await send(
        {
            "type": "http.response.start",
            "status": status_of(error),
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


def not_found(what: str = "link", kept_days: float | None = None) -> ApiError:
    """The one 404 for unknown and malformed ids alike; the id is not echoed (it may be a secret). With the
    store's retention for that kind (``kept_days``), the hint says an older record has expired: the store
    keeps nothing of what it deleted, so it cannot tell an expired id from a mistyped one."""
    return ApiError(404, NOT_FOUND, f"no such {what}", hint=not_found_hint(what, kept_days))


def not_found_hint(what: str, kept_days: float | None) -> str:
    hint = "check that the whole link was copied"
    if kept_days is not None and kept_days > 0:
        days = f"{kept_days:g} day" + ("" if kept_days == 1 else "s")
        hint += f"; {what}s are kept {days} after they are made, so an older one has expired"
    return hint


def _path(loc: Sequence[Any]) -> str:
    # ("body", "mesh", "shape", 3) -> "body.mesh.shape[3]"
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validation_error(exc: RequestValidationError) -> ApiError:
    """A request the model refuses: 400 ``invalid_json`` for a body that is not JSON, else 422 naming fields."""
    errors = list(exc.errors())
    for e in errors:
        if e.get("type") == "json_invalid":
            # FastAPI reports the parser's complaint in ctx.error and the character offset in loc.
            ctx: Mapping[str, Any] = e.get("ctx") or {}
            loc: Sequence[Any] = e.get("loc") or ()
            position = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
            error = ApiError(
                400,
                INVALID_JSON,
                f"the request body is not valid JSON: {ctx.get('error', 'decode error')}",
                hint="send UTF-8 JSON without NaN/Infinity or unpaired surrogates",
            )
            if position is not None:
                error.details["position"] = position
            return error
    # The input itself is never echoed: it can be large, and it is the client's own data anyway.
    reported = [
        {"loc": [p for p in e.get("loc", ())], "message": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in errors[:MAX_REPORTED_ERRORS]
    ]
    message = "; ".join(f"{_path(r['loc'])}: {r['message']}" for r in reported) or "the request is invalid"
    return ApiError(422, VALIDATION_ERROR, message, errors=reported)


def http_error(status: int, detail: Any = None, headers: Mapping[str, str] | None = None) -> ApiError:
    """An HTTP-level refusal (Starlette's router, StaticFiles, uvicorn) in our shape."""
    code = STATUS_CODES.get(status, f"http_{status}")
    text = detail if isinstance(detail, str) else ""
    # Starlette's default details are just the reason phrase ("Not Found"); say something useful.
    message = STATUS_MESSAGES.get(status, text) if text in ("", _phrase(status)) else text
    return ApiError(status, code, message or code.replace("_", " "), headers=headers)


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


async def _sharding_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ShardingError)
    return error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(validation_error(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(http_error(exc.status_code, exc.detail, exc.headers))


EXCEPTION_HANDLERS: dict[int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]] = {
    ShardingError: _sharding_error,
    RequestValidationError: _validation_error,
    StarletteHTTPException: _http_error,
}
