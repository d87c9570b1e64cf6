"""``shardscope serve --token``: every write needs the token, every read stays open, and a browser gets the
token once through ``?token=`` as an HttpOnly, SameSite cookie.

Regression (issue 12): the token guarded snapshots only; share links (86 GiB/hour in a test) and kernel
runs were accepted without it.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.app import WRITE_PATHS, kernel_worker_pool
from server.pool import Job
from server.settings import Settings
from sharding_core import capture
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec
from tests.conftest import ClientFactory
from tests.helpers import assert_error, layout_request, post

TOKEN = "Zr4i0pC1VqkqzY3sX2m0JtQeZk8B5nT1"
KERNEL = {"kernel": "elementwise", "devices": "cpu:8", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}}
RESHARD = {"devices": "cpu:8", "mesh": KERNEL["mesh"], "shape": [8, 8], "from": "P('x')", "to": "P('y')"}


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    # The kernel pool is never started: the one run below is answered from its cache.
    pool = kernel_worker_pool(Settings())
    plan = plan_run("elementwise", "cpu:8", MeshSpec((2, 4), ("x", "y")), None)
    pool.finish(Job("seeded", plan), result=b'{"seeded":true}', cache=True)
    return make_client(token=TOKEN, kernel_pool=pool)


def writes() -> list[tuple[str, Any, int]]:
    import jax.numpy as jnp

    return [
        ("/api/links", {"view": "layout", "state": {"spec": "P('x')"}}, 201),
        ("/api/snapshots", capture({"x": jnp.ones(8)}), 201),
        ("/api/kernels/run", KERNEL, 200),
        ("/api/kernels/jobs", KERNEL, 202),
        # reshards and comparisons start kernel runs; with the token they get as far as their checks
        ("/api/reshard", {**RESHARD, "to": "P('z')"}, 422),
        ("/api/compare", {"a": {}, "b": {}}, 422),
    ]


def test_every_write_path_is_guarded() -> None:
    assert set(WRITE_PATHS) == {path for path, _, _ in writes()}


def test_anonymous_writes_get_401_and_writes_with_the_token_succeed(client: TestClient) -> None:
    for path, body, ok in writes():
        anonymous = post(client, path, body)
        assert_error(anonymous, 401, "unauthorized")
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert "?token=" in anonymous.json()["error"]["hint"]  # what a browser user does
        assert_error(post(client, path, body, {"authorization": f"Bearer {TOKEN}x"}), 403, "bad_token")
        assert post(client, path, body, {"authorization": f"Bearer {TOKEN}"}).status_code == ok, path


def test_reads_stay_open(client: TestClient) -> None:
    link = post(client, "/api/links", {"view": "layout", "state": {}}, {"authorization": f"Bearer {TOKEN}"}).json()
    assert client.get(f"/api/links/{link['id']}").status_code == 200
    assert client.get(link["url"], follow_redirects=False).status_code == 303
    assert post(client, "/api/layout", layout_request()).status_code == 200  # computing is reading
    assert client.get("/api/kernels").status_code == 200


def test_a_read_link_is_not_a_write_token(client: TestClient) -> None:
    link = post(client, "/api/links", {"view": "layout", "state": {}}, {"authorization": f"Bearer {TOKEN}"}).json()
    for secret in (link["id"], link["url"]):
        refused = post(client, "/api/links", {"view": "x", "state": {}}, {"authorization": f"Bearer {secret}"})
        assert_error(refused, 403, "bad_token")


def test_a_browser_gets_the_token_once_as_a_cookie(make_client: ClientFactory) -> None:
    browser = make_client(token=TOKEN)  # a fresh cookie jar
    assert_error(post(browser, "/api/links", {"view": "x", "state": {}}), 401, "unauthorized")
    opened = browser.get(f"/kernels.html?kernel=psum_sum&token={TOKEN}", follow_redirects=False)
    assert opened.status_code == 303
    assert opened.headers["location"] == "/kernels.html?kernel=psum_sum"  # the token leaves the address bar
    cookie = opened.headers["set-cookie"]
    assert cookie.startswith(f"shardscope_token={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    browser.cookies.set("shardscope_token", TOKEN)
    assert post(browser, "/api/links", {"view": "x", "state": {}}).status_code == 201  # the page's Copy link
    unknown = {"kernel": "nope", "devices": "cpu:8", "mesh": {"shape": [8], "axis_names": ["x"]}}
    assert post(browser, "/api/kernels/jobs", unknown).status_code == 422  # past the token: the kernel is checked
    browser.cookies.set("shardscope_token", TOKEN + "x")
    assert_error(post(browser, "/api/links", {"view": "x", "state": {}}), 403, "bad_token")


def test_a_wrong_token_in_the_address_sets_nothing(make_client: ClientFactory) -> None:
    browser = make_client(token=TOKEN)
    refused = browser.get("/?token=guess", follow_redirects=False)
    assert_error(refused, 403, "bad_token")
    assert "set-cookie" not in refused.headers
    # a parameter that merely contains the word is not a token
    assert browser.get("/?devices=cpu:8&notoken=1", follow_redirects=False).status_code == 200


def test_without_a_token_nothing_is_guarded(make_client: ClientFactory) -> None:
    open_server = make_client()
    assert post(open_server, "/api/links", {"view": "x", "state": {}}).status_code == 201
    assert open_server.get("/?token=anything", follow_redirects=False).status_code == 200
