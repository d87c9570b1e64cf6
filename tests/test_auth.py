"""``shardscope serve --token``: every write needs the token, every read stays open, and a browser gets a
session once through ``?token=`` as an HttpOnly, SameSite cookie (never the token itself).

Regression (issue 12): the token guarded snapshots only; share links (86 GiB/hour in a test) and kernel
runs were accepted without it.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.app import WRITE_PATHS, kernel_worker_pool
from server.auth import Sessions
from server.middleware import SESSION_COOKIE, TOKEN_COOKIE
from server.pool import Job
from server.settings import Settings
from sharding_core import capture
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec
from tests.conftest import ClientFactory
from tests.helpers import BASE, assert_error, layout_request, post

TOKEN = "Zr4i0pC1VqkqzY3sX2m0JtQeZk8B5nT1"
KERNEL = {"kernel": "elementwise", "devices": "cpu:8", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}}
RESHARD = {"devices": "cpu:8", "mesh": KERNEL["mesh"], "shape": [8, 8], "from": "P('x')", "to": "P('y')"}
SEARCH = {
    "code": "def fn(mesh, rules): ...",
    "function": "fn",
    "file": "model.py",
    "devices": "tpu:v5p:2x2x2",
    "budget_seconds": 60.0,
    "jobs": [{"index": 0, "devices": "tpu:v5p:2x2x2", "slices": 1, "sizes": [["fsdp", 8]], "dcn": [1],
              "rules": [["batch", "fsdp"]], "knobs": {}, "headroom": 0.1}],
}  # fmt: skip


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
        # a search runs code on the server: with the token it gets as far as the setting that refuses it
        ("/api/searches", SEARCH, 403),
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


def session_of(response: Any) -> str:
    """The session id the hand-off's Set-Cookie gives, checking the cookie's attributes."""
    cookie = response.headers["set-cookie"]
    name, _, rest = cookie.partition("=")
    value = rest.split(";")[0]
    assert name == SESSION_COOKIE and len(value) >= 43  # 256 random bits
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert f"Max-Age={Settings().max_session_seconds}" in cookie
    return value


def test_a_browser_gets_a_session_never_the_token(make_client: ClientFactory) -> None:
    """Issue 20: the cookie was the raw token, and cookies are not scoped by port, so Chromium sent it to
    every other service on the same host name (TensorBoard, Jupyter) for 30 days. Now it is a session id."""
    browser = make_client(token=TOKEN)  # a fresh cookie jar
    assert_error(post(browser, "/api/links", {"view": "x", "state": {}}), 401, "unauthorized")
    opened = browser.get(f"/kernels.html?kernel=psum_sum&token={TOKEN}", follow_redirects=False)
    assert opened.status_code == 303
    assert opened.headers["location"] == "/kernels.html?kernel=psum_sum"  # the token leaves the address bar
    session = session_of(opened)
    assert TOKEN not in opened.headers["set-cookie"] and session != TOKEN
    browser.cookies.set(SESSION_COOKIE, session)
    assert post(browser, "/api/links", {"view": "x", "state": {}}).status_code == 201  # the page's Copy link
    unknown = {"kernel": "nope", "devices": "cpu:8", "mesh": {"shape": [8], "axis_names": ["x"]}}
    assert post(browser, "/api/kernels/jobs", unknown).status_code == 422  # past the token: the kernel is checked
    # what another port's service sees (the cookie) is not a bearer token
    other = make_client(token=TOKEN)
    assert_error(post(other, "/api/links", {"view": "x", "state": {}}, {"authorization": f"Bearer {session}"}), 403,
                 "bad_token")  # fmt: skip
    browser.cookies.set(SESSION_COOKIE, session[:-1] + ("A" if session[-1] != "A" else "B"))
    assert_error(post(browser, "/api/links", {"view": "x", "state": {}}), 401, "unauthorized")


def test_a_session_ends_on_request_and_after_its_lifetime(make_client: ClientFactory) -> None:
    settings = Settings().with_values([("max_session_seconds", 60)])
    browser = make_client(token=TOKEN, settings=settings)
    sessions: Sessions = browser.app.state.sessions  # type: ignore[attr-defined]
    session = session_of_lifetime(browser.get(f"/?token={TOKEN}", follow_redirects=False), 60)
    browser.cookies.set(SESSION_COOKIE, session)
    assert post(browser, "/api/links", {"view": "x", "state": {}}).status_code == 201
    ended = browser.delete("/api/session")
    assert ended.json() == {"ended": True} and "Max-Age=0" in ended.headers["set-cookie"]
    browser.cookies.set(SESSION_COOKIE, session)  # a copy of the cookie kept elsewhere is dead too
    error = assert_error(post(browser, "/api/links", {"view": "x", "state": {}}), 401, "unauthorized")
    assert "session has ended" in error["message"] and "?token=" in error["hint"]
    assert browser.delete("/api/session").json() == {"ended": False}
    # at its lifetime and one second past it
    later = session_of_lifetime(browser.get(f"/?token={TOKEN}", follow_redirects=False), 60)
    browser.cookies.set(SESSION_COOKIE, later)
    now = sessions.clock()
    sessions.clock = lambda: now + 59.5
    assert post(browser, "/api/links", {"view": "x", "state": {}}).status_code == 201
    sessions.clock = lambda: now + 60.5
    assert_error(post(browser, "/api/links", {"view": "x", "state": {}}), 401, "unauthorized")


def session_of_lifetime(response: Any, seconds: int) -> str:
    cookie = response.headers["set-cookie"]
    assert f"Max-Age={seconds}" in cookie
    return str(cookie.split(";")[0].partition("=")[2])


def test_sessions_are_bounded_oldest_first() -> None:
    sessions = Sessions(max_sessions=16, lifetime_s=60)
    opened = [sessions.open() for _ in range(17)]
    assert len(sessions) == 16 and not sessions.valid(opened[0]) and all(map(sessions.valid, opened[1:]))


def test_an_old_token_cookie_authorizes_nothing_and_is_cleared(make_client: ClientFactory) -> None:
    browser = make_client(token=TOKEN)
    browser.cookies.set(TOKEN_COOKIE, TOKEN)  # what servers before issue 20 set
    refused = post(browser, "/api/links", {"view": "x", "state": {}})
    assert_error(refused, 401, "unauthorized")
    assert (
        refused.headers["set-cookie"].startswith(f"{TOKEN_COOKIE}=;") and "Max-Age=0" in refused.headers["set-cookie"]
    )
    assert "Max-Age=0" in browser.get("/").headers["set-cookie"]


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("//evil.example/", "/evil.example/"),  # issue 20: 303 Location: //evil.example/ (another host)
        ("///evil.example/x", "/evil.example/x"),
        ("/%2F%2Fevil.example/", "/evil.example/"),
        ("/\\evil.example/", "/evil.example/"),
        ("/kernels.html/\\x", "/kernels.html/%5Cx"),
        ("/snapshots.html", "/snapshots.html"),
    ],
)
def test_the_hand_off_redirects_only_to_this_servers_own_paths(
    make_client: ClientFactory, path: str, location: str
) -> None:
    browser = make_client(token=TOKEN)
    opened = browser.get(f"{BASE}{path}?token={TOKEN}&devices=cpu:8", follow_redirects=False)  # the path as sent
    assert opened.status_code == 303
    target = opened.headers["location"]
    assert target == f"{location}?devices=cpu%3A8"
    assert target.startswith("/") and not target.startswith("//") and "\\" not in target
    assert urllib.parse.urljoin("http://127.0.0.1:8000/a/b", target).startswith("http://127.0.0.1:8000/")


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


# ---- issue 29: the cookie over HTTPS, a session bound to its client, forwarded addresses -------------------------

PROXY = ("10.9.0.2", 40000)  # a reverse proxy in front of the server (--trusted-proxy 10.9.0.0/24)


def app_client(tmp_path: Any, peer: tuple[str, int], *, https: bool = False, **options: Any) -> TestClient:
    """A client of a fresh app whose socket peer is ``peer`` (over HTTPS when ``https``)."""
    from server.app import create_app

    scheme = "https" if https else "http"
    app = create_app(str(tmp_path / "s.db"), token=TOKEN, **options)
    return TestClient(app, base_url=f"{scheme}://127.0.0.1:8000", client=peer)


def opened_cookie(browser: TestClient, headers: dict[str, str] | None = None) -> str:
    opened = browser.get(f"/?token={TOKEN}", headers=headers or {}, follow_redirects=False)
    assert opened.status_code == 303, opened.text
    return str(opened.headers["set-cookie"])


def test_the_session_cookie_is_secure_whenever_the_request_came_over_https(tmp_path: Any) -> None:
    """Issue 29: the cookie never got Secure, even behind a proxy that said X-Forwarded-Proto: https."""
    with app_client(tmp_path, ("10.0.0.7", 5000), https=True) as direct:
        assert "; Secure" in opened_cookie(direct)  # TLS to this server itself
    with app_client(tmp_path, ("10.0.0.7", 5000)) as plain:
        assert "Secure" not in opened_cookie(plain)  # plain HTTP: a Secure cookie would never come back
        # from a peer that is not a trusted proxy, X-Forwarded-Proto says nothing
        assert "Secure" not in opened_cookie(plain, {"x-forwarded-proto": "https"})
    with app_client(tmp_path, PROXY, trusted_proxies=["10.9.0.0/24"]) as proxied:
        cookie = opened_cookie(proxied, {"x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.10"})
        assert "; Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "Secure" not in opened_cookie(proxied, {"x-forwarded-proto": "http", "x-forwarded-for": "192.0.2.10"})


def test_a_session_writes_only_from_the_address_that_opened_it(tmp_path: Any) -> None:
    """Issue 29: another service on the same host saw the cookie (cookies ignore ports) and replayed it to write
    for 12 h. Now a session writes from the client address it was opened from only (docs/security.md says
    what remains: a replay from that same address)."""
    link = {"view": "layout", "state": {}}
    with app_client(tmp_path, ("192.0.2.10", 5000)) as browser:
        cookie = opened_cookie(browser).split(";")[0].partition("=")[2]
        browser.cookies.set(SESSION_COOKIE, cookie)
        assert post(browser, "/api/links", link).status_code == 201
        app = browser.app
    with TestClient(app, base_url=BASE, client=("192.0.2.10", 6000)) as same_machine:  # another port, same host
        same_machine.cookies.set(SESSION_COOKIE, cookie)
        assert post(same_machine, "/api/links", link).status_code == 201
    with TestClient(app, base_url=BASE, client=("198.51.100.3", 5000)) as replay:  # the other service's machine
        replay.cookies.set(SESSION_COOKIE, cookie)
        error = assert_error(post(replay, "/api/links", link), 401, "unauthorized")
        assert "another address" in error["message"]
        # and an untrusted peer cannot claim the browser's address
        claimed = post(replay, "/api/links", link, {"x-forwarded-for": "192.0.2.10"})
        assert_error(claimed, 401, "unauthorized")
    with TestClient(app, base_url=BASE, client=("192.0.2.10", 5000)) as browser_again:  # the session lives on
        browser_again.cookies.set(SESSION_COOKIE, cookie)
        assert post(browser_again, "/api/links", link).status_code == 201


def test_forwarded_addresses_count_only_from_a_trusted_proxy(tmp_path: Any) -> None:
    """Issue 29: any client escaped its per-client write quota by adding X-Forwarded-For. Now the header counts
    only from a --trusted-proxy peer, and then its rightmost address that is not itself a trusted proxy."""
    per_hour = 64 * 1024
    settings = Settings().with_values([("max_client_store_bytes_per_hour", per_hour)])
    state = {"s": "x" * 20000}  # three of these fit an hour's quota, a fourth does not
    bearer = {"authorization": f"Bearer {TOKEN}"}
    with app_client(tmp_path, ("203.0.113.5", 5000), settings=settings, trusted_proxies=["10.9.0.0/24"]) as c:
        answers = [
            post(c, "/api/links", {"view": "v", "state": state}, {**bearer, "x-forwarded-for": f"198.51.100.{i}"})
            for i in range(4)
        ]
        assert [a.status_code for a in answers] == [201, 201, 201, 429]  # one client, whatever it claims
        assert_error(answers[-1], 429, "quota_exceeded")
        app = c.app
    with TestClient(app, base_url=BASE, client=PROXY) as proxy:
        for i in range(3):  # through the proxy: each client its own quota, however many came before
            for _ in range(3):
                forwarded = {**bearer, "x-forwarded-for": f"198.51.100.{i}, 10.9.0.1"}  # client, then a proxy hop
                assert post(proxy, "/api/links", {"view": "v", "state": state}, forwarded).status_code == 201
        spoofed = {**bearer, "x-forwarded-for": "198.51.100.77, 198.51.100.0"}  # a client's own header, forwarded
        assert_error(post(proxy, "/api/links", {"view": "v", "state": state}, spoofed), 429, "quota_exceeded")


def test_a_bad_trusted_proxy_is_refused_at_start(tmp_path: Any) -> None:
    from server.app import create_app
    from sharding_core.errors import ShardingError

    with pytest.raises(ShardingError) as refused:
        create_app(str(tmp_path / "s.db"), trusted_proxies=["proxy.example"])
    assert refused.value.code == "bad_trusted_proxy" and "10.0.0.0/8" in refused.value.message
