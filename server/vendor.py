"""Plotly.js, served from the installed ``plotly`` package (no CDN: the dashboard works offline),
and the stylesheet it would otherwise inject.

Under the dashboard's CSP (``style-src 'self'``) Plotly's run-time ``<style>`` injection is refused.
plotly.js skips it when the page already has an element ``#plotly.js-style-global.no-inline-styles``,
so pages link ``/vendor/plotly.css`` with that id and class; this module builds that stylesheet once
from the rules table inside the installed ``plotly.min.js`` (read as text with a small string-literal
scanner, never evaluated), so it always matches the served version. Pages also carry an element
with the id Plotly's bundled MapLibre CSS checks for (:data:`MAPLIBRE_STYLE_ID`): we draw no maps.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from starlette.responses import FileResponse, Response

from server.errors import not_found

MAPLIBRE_STYLE_ID = "9f215cf04c5486422605d13261cb87401f4e7763b6296af81e98efbc0130da53"
"""plotly.js injects MapLibre's CSS unless an element with this id exists (checked in tests)."""

router = APIRouter()


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


@router.get("/vendor/plotly.min.js", include_in_schema=False)
def plotly_js() -> Response:
    path = plotly_js_path()
    if not path.is_file():
        raise not_found()
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


@router.get("/vendor/plotly.css", include_in_schema=False)
def plotly_css() -> Response:
    return Response(_plotly_css(), media_type="text/css", headers={"Cache-Control": "public, max-age=86400"})
