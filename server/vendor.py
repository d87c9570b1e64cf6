"""Plotly.js, served from the installed ``plotly`` package (no CDN: the dashboard works offline),
and the stylesheet it would otherwise inject.

A page loads Plotly only when it first draws a chart (``frontend/js/lib/plotly.js``): it asks
``/vendor/plotly.json`` (revalidated on every use, tiny) for the script's and stylesheet's addresses,
which carry a digest of the installed ``plotly.min.js`` (``/vendor/plotly-<digest>.min.js``) and are
served ``immutable`` for a year: a second page, or the same page tomorrow, runs Plotly from the
browser's cache without asking; an upgraded plotly has another digest, so another address. The script
goes out gzip-compressed to browsers that take it (4.8 MB → 1.4 MB; compressed once, in a thread started
by the first request, and kept: one value of fixed size).

Under the dashboard's CSP (``style-src 'self'``) Plotly's run-time ``<style>`` injection is refused.
plotly.js skips it when the page already has an element ``#plotly.js-style-global.no-inline-styles``,
so pages link ``/vendor/plotly.css`` with that id and class; this module builds that stylesheet once
from the rules table inside the installed ``plotly.min.js`` (read as text with a small string-literal
scanner, never evaluated), so it always matches the served version. Pages also carry an element
with the id Plotly's bundled MapLibre CSS checks for (:data:`MAPLIBRE_STYLE_ID`): we draw no maps.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import threading
from importlib import resources
from pathlib import Path

from fastapi import APIRouter, Request
from starlette.responses import FileResponse, JSONResponse, Response

from server.errors import ApiError, not_found
from sharding_core.errors import NOT_FOUND

MAPLIBRE_STYLE_ID = "9f215cf04c5486422605d13261cb87401f4e7763b6296af81e98efbc0130da53"
"""plotly.js injects MapLibre's CSS unless an element with this id exists (checked in tests)."""

router = APIRouter()

IMMUTABLE = "public, max-age=31536000, immutable"
"""Cache-Control of an address that names its content (a digest in the path): never asked again."""
REVALIDATE = "no-cache"
"""Cache-Control of an address whose content may change (an upgrade): kept, but asked again (ETag → 304)."""
DIGEST_CHARS = 16


def plotly_js_path() -> Path:
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


def _string_at(text: str, i: int) -> tuple[str, int]:
    """The JavaScript string literal starting at ``text[i]`` and the index after it."""
    quote = text[i]
    if quote not in "'\"":
        raise ValueError(f"expected a string literal at {i}")
    out = []
    j = i + 1
    while text[j] != quote:
        if text[j] == "\\":
            j += 1
        out.append(text[j])
        j += 1
    return "".join(out), j + 1


def _key_at(text: str, i: int) -> tuple[str, int]:
    """An object key: a string literal or a bare identifier (the minifier unquotes ``Y``)."""
    if text[i] in "'\"":
        return _string_at(text, i)
    j = i
    while text[j].isalnum() or text[j] in "_$":
        j += 1
    if j == i:
        raise ValueError(f"expected an object key at {i}")
    return text[i:j], j


def extract_plotly_css(js: str) -> str:
    """The global rules plotly.js would add with ``addStyleRule``, as a stylesheet.

    plotly.js keeps them as ``{"X,X div": "direction:ltr;...", ...}`` and rewrites X to
    ``.js-plotly-plot .plotly`` and Y to ``.plotly-notifier`` before adding each rule.
    """
    start = js.find('"X,X div":')
    if start < 0:
        raise ValueError("plotly.js rules table not found")
    rules = []
    i = start
    while True:
        key, i = _key_at(js, i)
        if js[i] != ":":
            raise ValueError(f"expected ':' at {i}")
        value, i = _string_at(js, i + 1)
        selector = key.replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
        if selector.startswith(","):
            selector = " " + selector
        rules.append(f"{selector}{{{value}}}")
        if js[i] == "}":
            break
        if js[i] != ",":
            raise ValueError(f"expected ',' at {i}")
        i += 1
    return "\n".join(rules) + "\n"


@functools.cache
def _plotly_css() -> bytes:
    return extract_plotly_css(plotly_js_path().read_text(encoding="utf-8")).encode()


@functools.cache
def plotly_digest() -> str:
    """The first characters of the SHA-256 of the installed ``plotly.min.js`` (its addresses carry it)."""
    return hashlib.sha256(plotly_js_path().read_bytes()).hexdigest()[:DIGEST_CHARS]


class _Gzipped:
    """``plotly.min.js`` gzip-compressed (about 0.5 s of a core): the first ask starts it in a thread and gets
    None (that page is sent the file as it is); later asks get the bytes. One value, held for good."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.body: bytes | None = None

    def get(self) -> bytes | None:
        with self.lock:
            if not self.started:
                self.started = True
                threading.Thread(target=self._compress, name="shardscope-gzip-plotly", daemon=True).start()
            return self.body

    def _compress(self) -> None:
        body = gzip.compress(plotly_js_path().read_bytes(), compresslevel=6, mtime=0)
        with self.lock:
            self.body = body


_gzipped = _Gzipped()


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header's value takes gzip (for Plotly here, and the pages' bundles)."""
    return any(part.split(";")[0].strip() == "gzip" for part in accept_encoding.lower().split(","))


def not_modified(request: Request, etag: str) -> bool:
    return etag in {t.strip() for t in request.headers.get("if-none-match", "").split(",")}


def plotly_manifest() -> dict[str, str]:
    """What a page needs to load Plotly: the script's and stylesheet's addresses, and the id of the element
    that keeps Plotly's bundled MapLibre from injecting its CSS."""
    digest = plotly_digest()
    return {
        "js": f"/vendor/plotly-{digest}.min.js",
        "css": f"/vendor/plotly-{digest}.css",
        "maplibre_guard": MAPLIBRE_STYLE_ID,
    }


def other_version() -> ApiError:
    """An address with another digest: a page from before the server's plotly changed."""
    return ApiError(
        404, NOT_FOUND, "no such version of Plotly on this server", hint="reload the page: /vendor/plotly.json names it"
    )


def _script(request: Request, cache_control: str) -> Response:
    path = plotly_js_path()
    if not path.is_file():
        raise not_found("file")
    etag = f'"{plotly_digest()}"'
    headers = {"Cache-Control": cache_control, "ETag": etag, "Vary": "Accept-Encoding"}
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    body = _gzipped.get() if accepts_gzip(request.headers.get("accept-encoding", "")) else None
    if body is not None:
        return Response(body, media_type="text/javascript", headers={**headers, "Content-Encoding": "gzip"})
    return FileResponse(path, media_type="text/javascript", headers=headers)


def _stylesheet(request: Request, cache_control: str) -> Response:
    etag = f'"{plotly_digest()}-css"'
    headers = {"Cache-Control": cache_control, "ETag": etag}
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(_plotly_css(), media_type="text/css", headers=headers)


@router.get("/vendor/plotly.json", include_in_schema=False)
def plotly_json(request: Request) -> Response:
    manifest = plotly_manifest()
    etag = f'"{plotly_digest()}-json"'
    headers = {"Cache-Control": REVALIDATE, "ETag": etag}
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return JSONResponse(manifest, headers=headers)


@router.get("/vendor/plotly-{digest}.min.js", include_in_schema=False)
def plotly_js_versioned(digest: str, request: Request) -> Response:
    if digest != plotly_digest():
        raise other_version()
    return _script(request, IMMUTABLE)


@router.get("/vendor/plotly-{digest}.css", include_in_schema=False)
def plotly_css_versioned(digest: str, request: Request) -> Response:
    if digest != plotly_digest():
        raise other_version()
    return _stylesheet(request, IMMUTABLE)


@router.get("/vendor/plotly.min.js", include_in_schema=False)
def plotly_js(request: Request) -> Response:
    return _script(request, REVALIDATE)


@router.get("/vendor/plotly.css", include_in_schema=False)
def plotly_css(request: Request) -> Response:
    return _stylesheet(request, REVALIDATE)
