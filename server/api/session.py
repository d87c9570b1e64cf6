"""``DELETE /api/session``: ends this browser's session (the cookie ``?token=`` gave it, :mod:`server.auth`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from server.api.deps import SessionsDep, responses
from server.api.schema import Reply
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.middleware import SESSION_COOKIE, cookie, expired_cookie

SESSION_PATH = "/api/session"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


class SessionEnded(Reply):
    ended: bool


@router.delete(SESSION_PATH, response_model=SessionEnded, responses=responses(400, 403, 500))
async def end_session(request: Request, sessions: SessionsDep) -> Response:
    """Ends the session this browser's cookie names (``ended``: whether there was one) and clears the cookie:
    its next write needs ``?token=`` again. A script's bearer token is not a session and is not affected."""
    value = cookie(request.scope, SESSION_COOKIE)
    ended = sessions.end(value) if value else False
    response = OrjsonResponse({"ended": ended}, headers={"cache-control": "no-store"})
    response.raw_headers.append((b"set-cookie", expired_cookie(SESSION_COOKIE)))
    return response
