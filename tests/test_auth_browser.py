"""A teammate's browser on a server started with ``--token`` (issue 20), in Chromium against a real
``shardscope serve``: cookies are not scoped by port, so another service on the same host name sees this
server's cookie — which is a session id, never the token, and no bearer token; the ``?token=`` hand-off
redirects only to this server's own paths."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import orjson
import pytest
from playwright.sync_api import Browser

from tests.plugins.live import Server, start, stop

pytestmark = pytest.mark.browser  # a real server or notebook and a browser

TOKEN = "Hs7vQ2mK9xLp4RtN8wZc1YbF6dJg3EaU0oTi5Wk"


class Recorder(http.server.BaseHTTPRequestHandler):
    """Another service on the same host, another port (TensorBoard, Jupyter): records the cookies it gets."""

    seen: dict[str, str] = {}  # noqa: RUF012 - path -> the cookies it came with (one recorder per module)

    def do_GET(self) -> None:
        Recorder.seen[self.path] = self.headers.get("cookie") or ""
        body = b"<!doctype html><title>another service</title>"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def other_service() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)  # port 0: the system picks a free one
    port = server.server_port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield port
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("guarded")
    srv = start(tmp / "store.db", tmp / "server.log", args=("--token", TOKEN))
    yield srv
    stop(srv)


def test_the_cookie_another_port_sees_is_not_the_token(browser: Browser, guarded: Server, other_service: int) -> None:
    """Issue 20: the cookie was the raw token, and Chromium sent it to every other service on the same host
    name for 30 days."""
    context = browser.new_context()
    page = context.new_page()
    origin = f"http://127.0.0.1:{guarded.port}"
    page.goto(f"{origin}/?token={TOKEN}")
    assert page.url == f"{origin}/"  # the token left the address bar
    Recorder.seen.clear()
    page.goto(f"http://127.0.0.1:{other_service}/")  # another port, the same host name
    seen = Recorder.seen["/"]  # (the browser may ask for a favicon too)
    assert "shardscope_session=" in seen and TOKEN not in seen
    session = seen.split("shardscope_session=")[1].split(";")[0]
    assert len(session) >= 43 and session != TOKEN
    # what the other service saw cannot be used as a bearer token on the dashboard
    status, _, body = guarded.request(
        "POST",
        "/api/links",
        orjson.dumps({"view": "layout", "state": {}}),
        {"Content-Type": "application/json", "Authorization": f"Bearer {session}"},
    )
    assert status == 403 and orjson.loads(body)["error"]["code"] == "bad_token"
    # the page itself writes with its session (Copy link), and ends it on request
    page.goto(f"{origin}/")
    post = """async () => (await fetch('/api/links', {method: 'POST', headers: {'content-type': 'application/json'},
                                                  body: JSON.stringify({view: 'layout', state: {}})})).status"""
    assert page.evaluate(post) == 201
    assert page.evaluate("async () => (await (await fetch('/api/session', {method: 'DELETE'})).json()).ended")
    assert page.evaluate(post) == 401
    context.close()


@pytest.mark.parametrize("path", ["//evil.example/", "/%2F%2Fevil.example/", "/\\evil.example/"])
def test_the_hand_off_stays_on_this_server(browser: Browser, guarded: Server, path: str) -> None:
    """Issue 20: ``//evil.example/?token=T`` answered 303 ``Location: //evil.example/``, another host."""
    context = browser.new_context()
    page = context.new_page()
    origin = f"http://127.0.0.1:{guarded.port}"
    response = page.goto(f"{origin}{path}?token={TOKEN}")
    assert page.url.startswith(f"{origin}/"), page.url  # still this server (its "no such page" answer)
    assert response is not None and "evil.example" not in (response.request.url.split("/", 3)[2])
    context.close()


def test_a_hand_off_to_a_share_link_keeps_its_state(browser: Browser, guarded: Server) -> None:
    context = browser.new_context()
    page = context.new_page()
    origin = f"http://127.0.0.1:{guarded.port}"
    page.goto(f"{origin}/topology.html?devices=tpu:v5e:4x4&token={TOKEN}")
    assert page.url == f"{origin}/topology.html?devices=tpu%3Av5e%3A4x4"  # where it pointed, less the token
    context.close()
