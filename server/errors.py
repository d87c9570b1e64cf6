"""One error shape for every 4xx and 5xx: ``{"error": {"code", "message", "hint"?, ...details}}``.

Status codes, chosen once and used everywhere:

* 400 ``invalid_json`` (the body is not JSON: syntax, NaN, lone surrogates), ``bad_host`` (the
  ``Host`` header is not one this server answers to), ``bad_request`` (anything else malformed);
* 403 ``cross_site_request`` (a POST from another origin);
* 404 ``not_found``; 405 ``method_not_allowed``;
* 413 ``too_large`` (the request body or a share link payload is over its limit);
* 415 ``unsupported_media_type`` (a POST body that is not ``application/json``);
* 422 ``validation_error`` (the JSON does not match the request model: the message names the
  field path) and every :class:`~sharding_core.errors.ShardingError` code (``parse_error``,
  ``unknown_axis``, ``indivisible``, ``too_large``, ``bad_devices``, ...): well-formed JSON whose
  content the domain cannot lay out. 422, not 400, because the request itself was understood;
* 500 ``internal_error``: a bug, never caused by input; the body carries no traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from server.jsonio import OrjsonResponse
from sharding_core.errors import NOT_FOUND, ShardingError

SHARDING_ERROR_STATUS = 422
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


class ApiError(Exception):
    """An HTTP-level refusal raised by a route: status, code, message, optional hint and details."""

    def __init__(self, status: int, code: str, message: str, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.details = details


def error_body(code: str, message: str, hint: str | None = None, **details: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if hint:
        error["hint"] = hint
    error.update(details)
    return {"error": error}


def error_response(
    status: int,
    code: str,
    message: str,
    hint: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    details: Mapping[str, Any] | None = None,
) -> Response:
    return OrjsonResponse(error_body(code, message, hint, **(details or {})), status_code=status, headers=headers)


def not_found() -> ApiError:
    """The one 404 for unknown and malformed ids alike; the id is not echoed (it may be a secret)."""
    return ApiError(404, NOT_FOUND, "no such link", hint="check that the whole link was copied")


def _path(loc: Sequence[Any]) -> str:
    # ("body", "mesh", "shape", 3) -> "body.mesh.shape[3]"
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def _sharding_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ShardingError)
    return OrjsonResponse({"error": exc.to_dict()}, status_code=SHARDING_ERROR_STATUS)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.hint, details=exc.details)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    for e in errors:
        if e.get("type") == "json_invalid":
            # FastAPI reports the parser's complaint in ctx.error and the character offset in loc.
            ctx: Mapping[str, Any] = e.get("ctx") or {}
            loc: Sequence[Any] = e.get("loc") or ()
            position = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
            return error_response(
                400,
                INVALID_JSON,
                f"the request body is not valid JSON: {ctx.get('error', 'decode error')}",
                hint="send UTF-8 JSON without NaN/Infinity or unpaired surrogates",
                details={"position": position} if position is not None else None,
            )
    # The input itself is never echoed: it can be large, and it is the client's own data anyway.
    reported = [
        {"loc": [p for p in e.get("loc", ())], "message": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in errors[:MAX_REPORTED_ERRORS]
    ]
    message = "; ".join(f"{_path(r['loc'])}: {r['message']}" for r in reported) or "the request is invalid"
    return error_response(422, VALIDATION_ERROR, message, details={"errors": reported})


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = STATUS_CODES.get(exc.status_code, f"http_{exc.status_code}")
    detail = exc.detail if isinstance(exc.detail, str) else ""
    # Starlette's default details are just the reason phrase ("Not Found"); say something useful.
    message = STATUS_MESSAGES.get(exc.status_code, detail) if detail in ("", _phrase(exc.status_code)) else detail
    return error_response(exc.status_code, code, message or code.replace("_", " "), headers=exc.headers)


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


EXCEPTION_HANDLERS: dict[int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]] = {
    ShardingError: _sharding_error,
    ApiError: _api_error,
    RequestValidationError: _validation_error,
    StarletteHTTPException: _http_error,
}
