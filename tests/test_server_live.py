"""Against a real ``shardscope serve`` on a free loopback port: the CLI, uvicorn, sockets and all."""

from __future__ import annotations

import http.client
import urllib.parse

import orjson
import pytest

from server.settings import MAX_BODY_BYTES
from tests.plugins.live import Server

pytestmark = pytest.mark.live  # a real server on a socket


def test_health_page_and_headers(server: Server) -> None:
    status, headers, body = server.request("GET", "/api/health")
    assert status == 200 and orjson.loads(body)["status"] == "ok"
    status, headers, body = server.request("GET", "/")
    assert status == 200 and b"Shardscope" in body
    assert headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in headers["content-security-policy"]


def test_layout_and_link_round_trip(server: Server) -> None:
    status, layout = server.post_json(
        "/api/layout",
        {
            "devices": "tpu:v5e:4x4",
            "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]},
            "spec": "P('x')",
            "shape": [8, 8],
        },
    )
    assert status == 200 and len(layout["shards"]) == 16
    status, link = server.post_json("/api/links", {"view": "layout", "state": {"spec": layout["spec"]}})
    assert status == 201
    status, _, body = server.request("GET", f"/api/links/{link['id']}")
    assert status == 200 and orjson.loads(body)["state"] == {"spec": layout["spec"]}
    status, headers, _ = server.request("GET", link["url"])
    assert status == 303 and headers["location"] == "/?" + urllib.parse.urlencode({"spec": layout["spec"]})
    assert server.request("GET", headers["location"])[0] == 200


def test_dns_rebinding_host_is_refused(server: Server) -> None:
    status, _, body = server.request("GET", "/api/health", headers={"Host": f"attacker.example:{server.port}"})
    assert status == 400 and orjson.loads(body)["error"]["code"] == "bad_host"


def test_declared_oversize_body_is_refused_without_reading(server: Server) -> None:
    # Declare 100 MiB, send none of it: the answer must come anyway, from the headers alone.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest("POST", "/api/layout")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(100 * MAX_BODY_BYTES))
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 413
        assert orjson.loads(response.read())["error"]["code"] == "too_large"
    finally:
        conn.close()


def test_chunked_oversize_body_is_cut(server: Server) -> None:
    chunk = b" " * (256 * 1024)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest("POST", "/api/layout")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        sent = 0
        # Send a bit past the limit (not the whole 8 MiB we could): the server answers mid-stream.
        try:
            while sent <= MAX_BODY_BYTES:
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close once it has answered
        response = conn.getresponse()
        assert response.status == 413
        assert orjson.loads(response.read())["error"]["code"] == "too_large"
    finally:
        conn.close()


def test_server_log_has_no_tracebacks(server: Server) -> None:
    assert "Traceback" not in server.log.read_text()
