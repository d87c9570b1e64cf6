"""The interactive API docs at ``/docs`` (Swagger UI over ``/openapi.json``), without inline script.

FastAPI's built-in page loads Swagger UI from a CDN *and* starts it with an inline ``<script>``,
which the dashboard's CSP (``script-src 'self'``) rightly blocks. No package on the registry ships a
current Swagger UI (5.x, the first with OpenAPI 3.1 support) without extra baggage, so the choice is:

* the page and its start-up script are ours, served from this origin (``/docs/init.js``): still no
  inline script anywhere;
* the two Swagger UI files come from jsDelivr, **pinned to one version with Subresource Integrity
  hashes** (sha384 of the files in the npm package ``swagger-ui-dist@5.35.0``), so a changed or
  compromised CDN file is refused by the browser instead of running on our origin;
* ``/docs`` alone gets a relaxed but explicit CSP: the default policy plus
  ``https://cdn.jsdelivr.net`` for scripts and styles and ``data:`` images (Swagger UI's icons).
  Every other path keeps the strict policy. Offline, ``/docs`` shows an empty page; ``/openapi.json``
  still works.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import HTMLResponse, Response

SWAGGER_VERSION = "5.35.0"
_CDN = "https://cdn.jsdelivr.net"
_BASE = f"{_CDN}/npm/swagger-ui-dist@{SWAGGER_VERSION}"
SWAGGER_JS = f"{_BASE}/swagger-ui-bundle.js"
SWAGGER_JS_SRI = "sha384-gjRm0bEPMeTmMh5jT2cHccIwCUZSTd8YC+j0d0sXw0MdGEfScduGpSyF3ZSSLkX9"
SWAGGER_CSS = f"{_BASE}/swagger-ui.css"
SWAGGER_CSS_SRI = "sha384-WlYgdmXYOOBWL5apwjDEZwN+U3HmXSSu5R6V5aGxEcf7z+KuRNwBhoxKVN1i3D5I"

DOCS_CSP = (
    f"default-src 'self'; script-src 'self' {_CDN}; style-src 'self' {_CDN}; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Shardscope API</title>
<link rel="stylesheet" href="{SWAGGER_CSS}" integrity="{SWAGGER_CSS_SRI}" crossorigin="anonymous">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{SWAGGER_JS}" integrity="{SWAGGER_JS_SRI}" crossorigin="anonymous"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""

# validatorUrl null: Swagger UI would otherwise send our schema to validator.swagger.io.
_INIT_JS = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  validatorUrl: null,
  deepLinking: true,
});
"""

router = APIRouter(include_in_schema=False)


@router.get("/docs")
def docs_page() -> Response:
    return HTMLResponse(_PAGE)


@router.get("/docs/init.js")
def docs_init() -> Response:
    return Response(_INIT_JS, media_type="text/javascript")
