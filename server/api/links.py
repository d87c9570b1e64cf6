"""Share links: ``POST /api/links`` stores a view's state under an unguessable id, ``GET /api/links/{id}``
reads it back, and ``GET /s/{id}`` opens the dashboard there.

``/s/{id}`` reads the link once and answers ``303 See Other`` to the view's own page with the state in
its query string (the page reads nothing else: its URL *is* its state, so the address bar shares the
same view). An unknown or malformed id gets a page that says so in words for a browser, and the usual
JSON error for anything else.
"""

from __future__ import annotations

import html
import urllib.parse
from typing import Any

import orjson
from fastapi import APIRouter, Request
from pydantic import Field
from starlette.responses import HTMLResponse, RedirectResponse, Response

from server.api.deps import ID_ERRORS, STORE_ERRORS, WRITE_ERRORS, QuotaDep, SettingsDep, StoreDep, client_of
from server.api.schema import Reply
from server.api.schema import Request as RequestModel
from server.errors import not_found
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.services.links import LINKS, store_link
from server.settings import MAX_VIEW_CHARS
from server.vocabulary import VIEW_PAGES

LINKS_PATH = "/api/links"
MAX_STATE_KEYS = 4096  # the byte limit (max_link_bytes) is the real bound; this stops absurd objects early

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


class LinkRequest(RequestModel):
    view: str = Field(
        min_length=1,
        max_length=MAX_VIEW_CHARS,
        pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$",
        description="Which view of the dashboard the link opens: " + ", ".join(VIEW_PAGES),
        examples=["layout"],
    )
    state: dict[str, Any] = Field(
        max_length=MAX_STATE_KEYS,
        description="The view's state (a JSON object): its page's query parameters, or {query: '<query string>'}",
    )


class LinkCreated(Reply):
    id: str = Field(description="At least 128 random bits, URL-safe")
    url: str = Field(description="/s/<id>: the dashboard opened at this state")


class LinkResponse(Reply):
    view: str
    state: dict[str, Any]


@router.post(LINKS_PATH, status_code=201, response_model=LinkCreated, responses={**WRITE_ERRORS, **STORE_ERRORS})
def create_link(
    body: LinkRequest, request: Request, store: StoreDep, settings: SettingsDep, quota: QuotaDep
) -> Response:
    """Stores a view and its state under a new unguessable id. Links are immutable; there is no listing."""
    link_id = store_link(store, quota, client_of(request), body.view, body.state, settings.max_link_bytes)
    return OrjsonResponse({"id": link_id, "url": f"/s/{link_id}"}, status_code=201)


@router.get("/api/links/{link_id}", response_model=LinkResponse, responses=ID_ERRORS)
def get_link(link_id: str, store: StoreDep) -> Response:
    """The stored view and state. Unknown and malformed ids get the same 404, which does not repeat the id."""
    payload = store.get(LINKS, link_id)
    if payload is None:
        raise not_found("link", store.kept_days(LINKS))
    return OrjsonResponse(payload)


def link_location(view: str, state: dict[str, Any]) -> str:
    """The page and query string that reopen a link's view at its state."""
    page = VIEW_PAGES.get(view, "/")
    query = state.get("query") if set(state) == {"query"} else None
    if isinstance(query, str):  # a view that stores its whole query string (the kernel lab)
        pairs = urllib.parse.parse_qsl(query.lstrip("?"), keep_blank_values=True)
    else:
        pairs = [(str(k), _text(v)) for k, v in state.items() if v is not None]
    encoded = urllib.parse.urlencode(pairs)
    return page + ("?" + encoded if encoded else "")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


_NOT_FOUND_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="color-scheme" content="light dark">
  <title>Shardscope — link not found</title>
  <link rel="icon" href="/favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="/css/app.css">
</head>
<body>
  <header class="top"><h1>Shardscope</h1></header>
  <main class="notice">
    <h2>{title}</h2>
    <p>{text}</p>
    <p><a href="/">Open the layout explorer</a></p>
  </main>
</body>
</html>
"""


def not_found_page(kept_days: float | None) -> HTMLResponse:
    """What a browser gets for an unknown or malformed link: words, not JSON (the id is not echoed)."""
    text = (
        "This share link does not exist on this Shardscope server. Check that the whole link was copied "
        "(share links end in a 22-character id), and that it points at the server it was made on."
    )
    if kept_days is not None:
        text += (
            f" This server keeps share links {kept_days:g} day{'' if kept_days == 1 else 's'} after they are made "
            "(setting max_link_days), so an older link has expired."
        )
    body = _NOT_FOUND_PAGE.format(title=html.escape("No such share link"), text=html.escape(text))
    return HTMLResponse(body, status_code=404)


def wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/html" in accept


@router.get(
    "/s/{link_id}",
    status_code=303,
    responses={
        303: {"description": "Redirects to the view's page with the link's state in the query string"},
        404: {"description": "Unknown or malformed id: a page that says so (text/html) or not_found (JSON)"},
    },
    include_in_schema=False,
)
def shared_page(link_id: str, request: Request, store: StoreDep) -> Response:
    payload = store.get(LINKS, link_id)
    if payload is None:
        if wants_html(request):
            return not_found_page(store.kept_days(LINKS))
        raise not_found("link", store.kept_days(LINKS))
    link = orjson.loads(payload)
    return RedirectResponse(link_location(str(link.get("view", "")), dict(link.get("state") or {})), status_code=303)
