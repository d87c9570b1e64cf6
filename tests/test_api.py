"""The JSON API through the in-process client: every route, every error code, layouts against JAX."""

from __future__ import annotations

import re
import time
import typing
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax._src.sharding_impls import device_replica_id_map
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from server.api import schema
from server.api.layout import LayoutRequest
from server.api.links import LinkRequest
from server.api.schema import DType
from server.settings import MAX_BODY_BYTES, MAX_LINK_BYTES, SETTINGS, Settings
from sharding_core.devices import MAX_DEVICES, parse_devices, platforms_catalog
from sharding_core.errors import ShardingError
from sharding_core.layout import DTYPES, MAX_RANK
from sharding_core.mesh import MAX_AXIS_NAME_CHARS, MAX_MESH_AXES
from sharding_core.spec import MAX_SPEC_CHARS
from tests.conftest import ClientFactory
from tests.helpers import assert_error, fuzz_examples, layout_request, post

# ---- layouts against JAX ---------------------------------------------------------------------------


def jax_shards(sharding: NamedSharding, shape: tuple[int, ...]) -> dict[int, tuple[list[list[int]], int]]:
    """What JAX says: device id -> (index bounds, replica id)."""
    replicas = device_replica_id_map(sharding, shape)
    return {
        d.id: (
            [[s.start or 0, dim if s.stop is None else s.stop] for s, dim in zip(idx, shape, strict=True)],
            replicas[d],
        )
        for d, idx in sharding.devices_indices_map(shape).items()
    }


def check_against_jax(got: dict[str, Any], mesh: Mesh, spec: Any, shape: tuple[int, ...]) -> None:
    sharding = NamedSharding(mesh, spec)
    want = jax_shards(sharding, shape)
    shards = {s["device_id"]: (s["index"], s["replica_id"]) for s in got["shards"]}
    assert len(got["shards"]) == mesh.devices.size
    assert shards == want
    assert got["spec"] == repr(spec)
    assert got["shard_shape"] == list(sharding.shard_shape(shape))
    assert got["mesh"]["device_ids"] == np.vectorize(lambda d: d.id, otypes=[int])(mesh.devices).tolist()
    assert got["mesh"]["shape"] == list(mesh.devices.shape)
    assert got["mesh"]["axis_names"] == list(mesh.axis_names)


MAKE_MESH_CASES = [
    ("cpu:8", (2, 4), ("x", "y"), P("x", None), (4, 8)),
    ("cpu:8", (2, 4), ("x", "y"), P(("x", "y")), (16,)),
    ("cpu:8", (2, 2, 2), ("a", "b", "c"), P("c", None, "a"), (4, 6, 8)),
    ("tpu:v5e:4x4", (4, 4), ("data", "model"), P("model", "data"), (8, 16)),
    ("tpu:v4:2x2x2", (2, 4), ("x", "y"), P(None, "y"), (3, 8)),
    ("tpu:v3:4x4", (4, 8), ("x", "y"), P("y"), (16, 2)),
    ("gpu:h100:2x8", (2, 8), ("dp", "tp"), P("dp", "tp"), (2, 16)),
]


@pytest.mark.parametrize(("devices", "mesh_shape", "names", "spec", "shape"), MAKE_MESH_CASES)
def test_layout_matches_jax(
    client: TestClient,
    devices: str,
    mesh_shape: tuple[int, ...],
    names: tuple[str, ...],
    spec: Any,
    shape: tuple[int, ...],
) -> None:
    response = post(
        client,
        "/api/layout",
        layout_request(
            devices=devices,
            mesh={"shape": list(mesh_shape), "axis_names": list(names)},
            spec=repr(spec),
            shape=list(shape),
        ),
    )
    assert response.status_code == 200, response.text
    mesh = jax.make_mesh(mesh_shape, names, devices=parse_devices(devices).devices)
    check_against_jax(response.json(), mesh, spec, shape)


def test_layout_iota_order_and_explicit_device_ids_match_jax(client: TestClient) -> None:
    devset = parse_devices("tpu:v5e:4x4")
    spec = P("x", "y")
    iota = post(
        client,
        "/api/layout",
        layout_request(
            devices="tpu:v5e:4x4", mesh={"shape": [4, 4], "axis_names": ["x", "y"], "order": "iota"}, spec=repr(spec)
        ),
    )
    assert iota.status_code == 200, iota.text
    check_against_jax(iota.json(), Mesh(np.array(devset.devices).reshape(4, 4), ("x", "y")), spec, (4, 8))

    ids = [d.id for d in reversed(devset.devices)]
    explicit = post(
        client,
        "/api/layout",
        layout_request(
            devices="tpu:v5e:4x4",
            mesh={"shape": [4, 4], "axis_names": ["x", "y"], "order": "devices", "device_ids": ids},
            spec=repr(spec),
        ),
    )
    assert explicit.status_code == 200, explicit.text
    by_id = devset.by_id
    mesh = Mesh(np.array([by_id[i] for i in ids]).reshape(4, 4), ("x", "y"))
    check_against_jax(explicit.json(), mesh, spec, (4, 8))


def test_layout_multislice_hybrid_matches_jax(client: TestClient) -> None:
    devset = parse_devices("tpu:v5e:2x2", slices=2)
    response = post(
        client,
        "/api/layout",
        layout_request(
            devices="tpu:v5e:2x2",
            slices=2,
            mesh={"shape": [2, 4], "axis_names": ["dcn", "ici"], "order": "hybrid", "dcn_shape": [2, 1]},
            spec="P('dcn', 'ici')",
            shape=[4, 8],
        ),
    )
    assert response.status_code == 200, response.text
    devices = mesh_utils.create_hybrid_device_mesh((1, 4), (2, 1), devset.devices)
    check_against_jax(response.json(), Mesh(devices, ("dcn", "ici")), P("dcn", "ici"), (4, 8))
    assert response.json()["devices"]["slice_index"] == [d.slice_index for d in devices.flat]


def test_layout_axis_types_and_allow_split(client: TestClient) -> None:
    response = post(
        client,
        "/api/layout",
        layout_request(mesh={"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "Explicit"]}),
    )
    assert response.status_code == 200, response.text
    assert response.json()["mesh"]["axis_types"] == ["Auto", "Explicit"]
    split = post(
        client,
        "/api/layout",
        layout_request(
            devices="tpu:v5e:4x4",
            mesh={"shape": [8, 2], "axis_names": ["x", "y"], "allow_split_physical_axes": True},
            shape=[8, 8],
        ),
    )
    assert split.status_code == 200, split.text
    devset = parse_devices("tpu:v5e:4x4")
    devs = mesh_utils.create_device_mesh((8, 2), devset.devices, allow_split_physical_axes=True)
    assert split.json()["mesh"]["device_ids"] == [[d.id for d in row] for row in devs]


def test_layout_response_is_jsons_of_the_domain(client: TestClient) -> None:
    # Every documented field is present (the schemathesis test checks types; this pins names).
    body = post(client, "/api/layout", layout_request()).json()
    assert set(body) == set(schema.Layout.__annotations__) - {"slice_index"}
    assert body["tiles"] and body["dims"] and body["devices"]["id"]


def test_dtype_vocabulary_is_the_domains() -> None:
    assert typing.get_args(DType) == tuple(DTYPES)
    schema = LayoutRequest.model_json_schema()
    assert schema["properties"]["dtype"]["enum"] == list(DTYPES)


# ---- the other routes --------------------------------------------------------------------------------


def test_health(client: TestClient) -> None:
    response = client.get("/api/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "jax_version": jax.__version__,
        "store": "ok",
        "store_kind": "sqlite",
        "store_problem": None,
    }


def test_platforms(client: TestClient) -> None:
    response = client.get("/api/platforms")
    assert response.status_code == 200
    assert response.json() == platforms_catalog()


def test_topology_groups_are_cut_from_one_flat_list(client: TestClient) -> None:
    body = {"devices": "cpu:8", "ids": [0, 4, 1, 5, 2, 6, 3, 7], "group_size": 2, "name": "pairs"}
    got = post(client, "/api/topology/groups", body).json()
    assert got["name"] == "pairs" and got["groups"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert len(got["hops"]) == 4


def test_topology(client: TestClient) -> None:
    response = client.get("/api/topology", params={"devices": "tpu:v4:4x4x4"})
    assert response.status_code == 200, response.text
    body = response.json()
    devset = parse_devices("tpu:v4:4x4x4")
    assert [d["id"] for d in body["devices"]] == [d.id for d in devset.devices]
    assert [d["coords"] for d in body["devices"]] == [list(d.coords) for d in devset.devices]
    assert body["links"] and all({"a", "b", "wraparound"} <= set(link) for link in body["links"])
    assert any(link["wraparound"] for link in body["links"])  # a full 4x4x4 cube is a torus

    multi = client.get("/api/topology", params={"devices": "tpu:v5e:2x2", "slices": 2, "chips_per_host": "2x2"})
    assert multi.status_code == 200, multi.text
    assert {d["slice_index"] for d in multi.json()["devices"]} == {0, 1}


def test_links_round_trip_and_page(client: TestClient) -> None:
    state = {"spec": "P('x')", "nested": {"list": [1, 2.5, None, True, "é"]}}
    created = post(client, "/api/links", {"view": "layout", "state": state})
    assert created.status_code == 201, created.text
    link = created.json()
    assert link["url"] == f"/s/{link['id']}"
    assert len(link["id"]) >= 22  # 16 random bytes, base64url
    got = client.get(f"/api/links/{link['id']}")
    assert got.status_code == 200
    assert got.json() == {"view": "layout", "state": state}
    # /s/<id> reads the link once and sends the browser to the view's page with the state in its URL.
    page = client.get(link["url"], follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == "/?" + urllib.parse.urlencode(
        {"spec": "P('x')", "nested": '{"list":[1,2.5,null,true,"é"]}'}
    )
    followed = client.get(link["url"])
    assert followed.status_code == 200 and followed.headers["content-type"].startswith("text/html")
    assert 'type="module"' in followed.text
    second = post(client, "/api/links", {"view": "layout", "state": state})
    assert second.json()["id"] != link["id"]


@pytest.mark.parametrize(
    ("view", "state", "location"),
    [
        ("layout", {"devices": "tpu:v5e:4x4", "spec": "P('x', None)", "slices": 2},
         "/?devices=tpu%3Av5e%3A4x4&spec=P%28%27x%27%2C+None%29&slices=2"),
        ("topology", {"devices": "cpu:8", "groups": "0,4;1,5"}, "/topology.html?devices=cpu%3A8&groups=0%2C4%3B1%2C5"),
        ("snapshots", {"snapshot": "A" * 22}, "/snapshots.html?snapshot=" + "A" * 22),
        ("kernels", {"query": "kernel=psum&devices=cpu%3A8"}, "/kernels.html?kernel=psum&devices=cpu%3A8"),
        ("kernels", {"query": ""}, "/kernels.html"),
        ("someday", {"a": "b"}, "/?a=b"),
    ],
)  # fmt: skip
def test_share_links_open_their_views_page_at_their_state(
    client: TestClient, view: str, state: dict[str, Any], location: str
) -> None:
    link = post(client, "/api/links", {"view": view, "state": state}).json()
    page = client.get(link["url"], follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == location


EXPIRED = "so an older one has expired"


@pytest.mark.parametrize("link_id", ["A" * 22, "short", "A" * 21 + "%21"])
def test_unknown_share_links_get_a_page_that_says_so(client: TestClient, link_id: str) -> None:
    page = client.get(f"/s/{link_id}", headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "This share link does not exist" in page.text and link_id not in page.text
    assert "<script" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert_error(client.get(f"/s/{link_id}"), 404, "not_found")  # a script gets the JSON error


def test_an_expired_link_says_links_expire(make_client: ClientFactory) -> None:
    c = make_client(settings=Settings().with_values([("max_link_days", "3"), ("max_snapshot_days", "0")]))
    link = post(c, "/api/links", {"view": "layout", "state": {"spec": "P('x')"}}).json()
    link_id = link["url"].removeprefix("/s/")
    store = c.app.state.store  # type: ignore[attr-defined]
    now = store.clock
    store.clock = lambda: now() + 3.5 * 86400
    assert store.expire() == 1
    html = {"accept": "text/html"}
    page = c.get(link["url"], headers=html)
    assert page.status_code == 404 and "keeps share links 3 days after they are made" in page.text
    hint = assert_error(c.get(f"/api/links/{link_id}"), 404, "not_found")["hint"]
    assert hint == "check that the whole link was copied; links are kept 3 days after they are made, " + EXPIRED
    # a server that keeps links until deleted says nothing of expiry
    forever = make_client(settings=Settings().with_values([("max_link_days", "0")]))
    assert (
        assert_error(forever.get(f"/api/links/{link_id}"), 404, "not_found")["hint"]
        == "check that the whole link was copied"
    )
    assert "keeps share links" not in forever.get(f"/s/{link_id}", headers=html).text


def test_static_frontend(client: TestClient) -> None:
    index = client.get("/")
    assert index.status_code == 200 and "Shardscope" in index.text
    script = client.get("/js/views/layout.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert client.get("/css/app.css").status_code == 200


@pytest.mark.parametrize("path", ["/", "/snapshots.html", "/js/views/layout.js", "/js/lib/dom.js", "/css/app.css"])
def test_static_files_are_kept_and_revalidated(client: TestClient, path: str) -> None:
    # Issue 37: the browser keeps pages and modules but asks before using them again (a 304 when unchanged),
    # so a second page costs no bytes and an upgraded server never runs beside its old modules.
    first = client.get(path)
    assert first.status_code == 200 and first.headers["cache-control"] == "no-cache"
    again = client.get(path, headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b"" and again.headers["cache-control"] == "no-cache"


def test_static_files_come_from_memory_and_follow_changes(make_client: ClientFactory, tmp_path: Path) -> None:
    # Issue 37: each file is read once and answered from memory (no thread hops per module), until the file changes.
    (tmp_path / "js").mkdir()
    module = tmp_path / "js" / "m.js"
    module.write_text("export const a = 1;\n")
    big = tmp_path / "big.js"
    big.write_bytes(b"//" + b"x" * (2 << 20))  # past the per-file bound: streamed from disk, never kept
    c = make_client(frontend_dir=tmp_path)
    first = c.get("/js/m.js")
    assert first.status_code == 200 and first.text == "export const a = 1;\n"
    assert "javascript" in first.headers["content-type"] and first.headers["content-length"] == "20"
    module.write_text("export const a = 22;\n")  # a new size and time: read again, a new ETag
    second = c.get("/js/m.js")
    assert second.text == "export const a = 22;\n" and second.headers["etag"] != first.headers["etag"]
    assert c.get("/js/m.js", headers={"if-none-match": first.headers["etag"]}).status_code == 200
    assert c.get("/js/m.js", headers={"if-none-match": second.headers["etag"]}).status_code == 304
    head = c.head("/js/m.js")
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == "21"
    streamed = c.get("/big.js")
    assert streamed.status_code == 200 and len(streamed.content) == 2 + (2 << 20)
    module.write_bytes(b"//" + b"y" * (2 << 20))  # grown past the bound: streamed, its old version let go
    assert c.get("/js/m.js").content == b"//" + b"y" * (2 << 20)
    files = next(r.app.files for r in c.app.routes if getattr(r, "name", "") == "frontend")  # type: ignore[attr-defined]
    assert files._cached_bytes == sum(len(body) for _, body in files._cache.values())
    assert str(module) not in files._cache
    module.unlink()
    assert c.get("/js/m.js").status_code == 404  # gone from disk: gone from the server
    assert c.get("/js/../../etc/passwd").status_code == 404 and c.get("/js/%2e%2e/%2e%2e/etc/passwd").status_code == 404


def test_static_files_in_memory_stay_within_their_byte_bound(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import server.app

    for name, size in (("a.js", 600), ("b.js", 500)):
        (tmp_path / name).write_bytes(b"/" * size)
    monkeypatch.setattr(server.app, "MAX_CACHED_BYTES", 1000)  # a.js fits, then b.js would pass the total
    c = make_client(frontend_dir=tmp_path)
    files = next(r.app.files for r in c.app.routes if getattr(r, "name", "") == "frontend")  # type: ignore[attr-defined]
    assert c.get("/a.js").content == b"/" * 600 and c.get("/b.js").content == b"/" * 500  # b.js streamed
    assert set(files._cache) == {str(tmp_path / "a.js")} and files._cached_bytes == 600 <= server.app.MAX_CACHED_BYTES


ID = "A" * 11 + "b_-" + "9" * 8


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (f"/snapshots.html?snapshot={ID}", [f"/api/snapshots/{ID}"]),
        (f"/snapshots.html?run={ID}&process=1&fix=2", [f"/api/snapshots/runs/{ID}"]),
        (f"/snapshots.html?snapshot={ID}&run={ID}", [f"/api/snapshots/runs/{ID}"]),  # a run wins, as in early.js
        ("/snapshots.html?snapshot=short", []),  # not an id: the page says so
        ("/snapshots.html?snapshot=" + "A" * 22 + "%0d%0aSet-Cookie:%20x=1", []),  # never a header of its own
        ("/snapshots.html", []),
        (
            "/compare.html?"
            + urllib.parse.urlencode({"a": f"/snapshots.html?snapshot={ID}", "b": f"/snapshots.html?run={ID}"}),
            [f"/api/snapshots/{ID}", f"/api/snapshots/runs/{ID}"],
        ),
        (
            "/compare.html?"
            + urllib.parse.urlencode(
                {
                    "a": f"http://127.0.0.1:8000/snapshots.html?snapshot={ID}",
                    "b": f"https://elsewhere.example/snapshots.html?snapshot={ID}",
                }
            ),
            [f"/api/snapshots/{ID}"],  # this server's page only
        ),
        (
            "/compare.html?"
            + urllib.parse.urlencode({"a": "/kernels.html?kernel=matmul", "b": f"/snapshots.html?snapshot={ID}"}),
            [f"/api/snapshots/{ID}"],
        ),
        ("/?snapshot=" + ID, []),  # the layout explorer opens no snapshot
    ],
)
def test_a_shared_page_preloads_the_snapshot_it_opens(client: TestClient, page: str, expected: list[str]) -> None:
    # Issue 37: the browser asks for a link's snapshot with the page's first bytes, not after its modules have run.
    answer = client.get(page)
    assert answer.status_code == 200
    link = answer.headers.get("link")
    if not expected:
        assert link is None
        return
    assert link == ", ".join(f"<{url}>; rel=preload; as=fetch; crossorigin=anonymous" for url in expected)
    assert client.get(page, headers={"if-none-match": answer.headers["etag"]}).status_code == 304


def test_openapi_documents_every_route(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert {
        "/api/health",
        "/api/platforms",
        "/api/layout",
        "/api/topology",
        "/api/links",
        "/api/links/{link_id}",
    } <= set(schema["paths"])
    layout = schema["paths"]["/api/layout"]["post"]
    assert layout["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Layout")
    assert layout["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    assert "HTTPValidationError" not in schema["components"]["schemas"]


def test_docs_page_has_no_inline_script(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert "<script>" not in page.text and 'integrity="sha384-' in page.text
    assert "cdn.jsdelivr.net" in page.headers["content-security-policy"]
    init = client.get("/docs/init.js")
    assert init.status_code == 200 and "SwaggerUIBundle" in init.text
    # The relaxed policy is for /docs alone.
    assert "cdn.jsdelivr.net" not in init.headers["content-security-policy"]


# ---- domain errors: 422 with the domain's code ------------------------------------------------------------


def test_parse_error_reports_the_column(client: TestClient) -> None:
    error = assert_error(post(client, "/api/layout", layout_request(spec="P('x', None")), 422, "parse_error")
    assert error["column"] == len("P('x', None") + 1
    assert "hint" in error


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"spec": "P('z')"}, "unknown_axis"),
        ({"spec": "P('x', 'x')"}, "duplicate_axis"),
        ({"mesh": {"shape": [2, 4], "axis_names": ["x", "x"]}}, "duplicate_axis"),
        ({"spec": "P('x', None, None)"}, "rank_mismatch"),
        ({"spec": "P(None, 'y')", "shape": [4, 10]}, "indivisible"),
        ({"devices": "cpu:16385"}, "too_large"),
        ({"devices": "tpu:v9:2x2"}, "bad_devices"),
        ({"devices": "tpu:v5e:3x3"}, "bad_devices"),
        ({"mesh": {"shape": [4, 4], "axis_names": ["x", "y"]}}, "bad_mesh"),
        ({"shape": [2**36, 2]}, "too_large"),
    ],
)
def test_domain_errors(client: TestClient, overrides: dict[str, Any], code: str) -> None:
    error = assert_error(post(client, "/api/layout", layout_request(**overrides)), 422, code)
    if code == "indivisible":
        assert error["suggestions"] and error["dim"] == 1


def test_topology_domain_errors(client: TestClient) -> None:
    assert_error(client.get("/api/topology", params={"devices": "nope"}), 422, "bad_devices")
    assert_error(client.get("/api/topology", params={"devices": "cpu:8", "slices": 2}), 422, "bad_devices")


# ---- request validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (layout_request(shape=["4", 8]), "body.shape[0]"),
        (layout_request(shape=[True, 8]), "body.shape[0]"),
        (layout_request(shape=[0, 8]), "body.shape[0]"),
        (layout_request(dtype="float33"), "body.dtype"),
        (layout_request(extra=1), "body.extra"),
        ({k: v for k, v in layout_request().items() if k != "spec"}, "body.spec"),
        (layout_request(mesh={"shape": [2, 4], "axis_names": ["x", "y"], "order": "random"}), "body.mesh.order"),
        ([1, 2, 3], "body"),
    ],
)
def test_validation_errors_name_the_field(client: TestClient, body: Any, path: str) -> None:
    error = assert_error(post(client, "/api/layout", body), 422, "validation_error")
    assert error["message"].startswith(path + ":"), error["message"]
    assert error["errors"][0]["loc"][0] == "body"


def test_topology_query_validation(client: TestClient) -> None:
    error = assert_error(client.get("/api/topology"), 422, "validation_error")
    assert "query.devices" in error["message"]
    assert_error(client.get("/api/topology", params={"devices": "cpu:8", "slices": "0"}), 422, "validation_error")
    assert_error(
        client.get("/api/topology", params={"devices": "cpu:8", "chips_per_host": "2"}), 422, "validation_error"
    )


@pytest.mark.parametrize(
    "content",
    [b"{", b'{"devices": NaN}', b'{"devices": "\\ud800"}', b"\xff\xfe", b'{"a": 1} trailing'],
    ids=["truncated", "nan", "lone-surrogate", "not-utf8", "trailing"],
)
def test_invalid_json_is_400(client: TestClient, content: bytes) -> None:
    response = client.post("/api/layout", content=content, headers={"content-type": "application/json"})
    assert_error(response, 400, "invalid_json")


def test_link_validation(client: TestClient) -> None:
    assert_error(post(client, "/api/links", {"view": "layout", "state": [1]}), 422, "validation_error")
    assert_error(post(client, "/api/links", {"view": "", "state": {}}), 422, "validation_error")
    assert_error(post(client, "/api/links", {"view": "<script>", "state": {}}), 422, "validation_error")


# ---- limits: at the limit and one past it ----------------------------------------------------------------


def test_body_limit_exact(client: TestClient) -> None:
    body = orjson.dumps(layout_request())
    at_limit = body + b" " * (MAX_BODY_BYTES - len(body))  # JSON allows trailing whitespace
    assert len(at_limit) == MAX_BODY_BYTES
    ok = client.post("/api/layout", content=at_limit, headers={"content-type": "application/json"})
    assert ok.status_code == 200, ok.text
    over = client.post("/api/layout", content=at_limit + b" ", headers={"content-type": "application/json"})
    assert_error(over, 413, "too_large")


def test_body_limit_streamed(client: TestClient) -> None:
    body = orjson.dumps(layout_request())
    chunk = 64 * 1024

    def stream(total: int) -> Iterator[bytes]:
        data = body + b" " * (total - len(body))
        for i in range(0, len(data), chunk):
            yield data[i : i + chunk]

    headers = {"content-type": "application/json"}
    assert client.post("/api/layout", content=stream(MAX_BODY_BYTES), headers=headers).status_code == 200
    assert_error(client.post("/api/layout", content=stream(MAX_BODY_BYTES + 1), headers=headers), 413, "too_large")


def test_link_payload_limit_exact(client: TestClient) -> None:
    overhead = len(orjson.dumps({"view": "layout", "state": {"s": ""}}))
    at_limit = {"view": "layout", "state": {"s": "a" * (MAX_LINK_BYTES - overhead)}}
    assert len(orjson.dumps(at_limit)) == MAX_LINK_BYTES
    created = post(client, "/api/links", at_limit)
    assert created.status_code == 201, created.text
    assert client.get(f"/api/links/{created.json()['id']}").json() == at_limit
    over = {"view": "layout", "state": {"s": "a" * (MAX_LINK_BYTES - overhead + 1)}}
    error = assert_error(post(client, "/api/links", over), 413, "too_large")
    assert error["limit"] == MAX_LINK_BYTES


def test_device_limit(client: TestClient) -> None:
    ok = client.get("/api/topology", params={"devices": f"cpu:{MAX_DEVICES}"})
    assert ok.status_code == 200 and len(ok.json()["devices"]) == MAX_DEVICES
    assert_error(client.get("/api/topology", params={"devices": f"cpu:{MAX_DEVICES + 1}"}), 422, "too_large")


def test_a_billion_devices_is_refused_fast(client: TestClient) -> None:
    for devices, code in [
        ("gpu:h100:100000x10000", "too_large"),
        ("cpu:1000000000", "too_large"),
        ("cpu:" + "9" * 100_000, "validation_error"),
    ]:
        start = time.process_time()  # this process's CPU time: a busy machine does not move it
        assert_error(post(client, "/api/layout", layout_request(devices=devices)), 422, code)
        assert time.process_time() - start < 0.5


def test_mesh_axes_limit(client: TestClient) -> None:
    names = [f"a{i}" for i in range(MAX_MESH_AXES + 1)]
    ok = post(
        client,
        "/api/layout",
        layout_request(mesh={"shape": [1] * MAX_MESH_AXES, "axis_names": names[:-1]}, devices="cpu:1", spec="P()"),
    )
    assert ok.status_code == 200, ok.text
    over = post(
        client,
        "/api/layout",
        layout_request(mesh={"shape": [1] * (MAX_MESH_AXES + 1), "axis_names": names}, devices="cpu:1", spec="P()"),
    )
    error = assert_error(over, 422, "validation_error")
    assert "body.mesh.shape" in error["message"]


def test_axis_name_limit(client: TestClient) -> None:
    name = "n" * MAX_AXIS_NAME_CHARS
    ok = post(
        client, "/api/layout", layout_request(mesh={"shape": [8], "axis_names": [name]}, spec=f"P('{name}')", shape=[8])
    )
    assert ok.status_code == 200, ok.text
    over = post(client, "/api/layout", layout_request(mesh={"shape": [8], "axis_names": [name + "n"]}, spec="P()"))
    assert_error(over, 422, "validation_error")


def test_rank_limit(client: TestClient) -> None:
    ok = post(client, "/api/layout", layout_request(shape=[1] * MAX_RANK, spec="P()"))
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["shard_shape"]) == MAX_RANK
    assert_error(
        post(client, "/api/layout", layout_request(shape=[1] * (MAX_RANK + 1), spec="P()")), 422, "validation_error"
    )


def test_spec_length_limit(client: TestClient) -> None:
    spec = "P('x', None" + " " * (MAX_SPEC_CHARS - len("P('x', None)")) + ")"
    assert len(spec) == MAX_SPEC_CHARS
    ok = post(client, "/api/layout", layout_request(spec=spec))
    assert ok.status_code == 200, ok.text
    assert ok.json()["spec"] == repr(P("x", None))
    error = assert_error(post(client, "/api/layout", layout_request(spec=spec + " ")), 422, "validation_error")
    assert "body.spec" in error["message"]


# ---- links: ids -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("link_id", ["A" * 22, "short", "has space", "A" * 21 + "!", "x" * 200, "é" * 22])
def test_unknown_and_malformed_ids_get_the_same_404(client: TestClient, link_id: str) -> None:
    for url in (f"/api/links/{link_id}", f"/s/{link_id}"):
        response = client.get(url)
        error = assert_error(response, 404, "not_found")
        hint = "check that the whole link was copied; links are kept 365 days after they are made, " + EXPIRED
        assert error == {"code": "not_found", "message": "no such link", "hint": hint}
        assert link_id not in response.text


def test_no_listing(client: TestClient) -> None:
    assert_error(client.get("/api/links"), 405, "method_not_allowed")
    assert_error(client.get("/api/links/"), 404, "not_found")


# ---- the error shape, route by route -----------------------------------------------------------------------

BAD_REQUESTS: list[tuple[str, str, dict[str, Any], int, str]] = [
    # (method, path, request kwargs, status, code) — at least one per route, plus the middleware refusals.
    ("GET", "/api/health", {"headers": {"host": "evil.example"}}, 400, "bad_host"),
    ("POST", "/api/health", {}, 405, "method_not_allowed"),
    ("GET", "/api/platforms", {"headers": {"host": "rebind.example:8000"}}, 400, "bad_host"),
    ("POST", "/api/layout", {"json": layout_request(spec="P(")}, 422, "parse_error"),
    (
        "POST",
        "/api/topology/mesh",
        {"json": {"devices": "tpu:v5e:4x4", "mesh": {"shape": [8, 8], "axis_names": ["x", "y"]}}},
        422,
        "bad_mesh",
    ),
    ("POST", "/api/topology/mesh", {"json": {"devices": "tpu:v5e:4x4"}}, 422, "validation_error"),
    (
        "POST",
        "/api/topology/groups",
        {"json": {"devices": "cpu:8", "ids": [0, 99], "group_size": 2}},
        422,
        "bad_devices",
    ),
    (
        "POST",
        "/api/topology/groups",
        {"json": {"devices": "cpu:8", "ids": [0, 1, 2], "group_size": 2}},
        422,
        "bad_devices",
    ),
    ("POST", "/api/layout", {"json": layout_request(shape="4x8")}, 422, "validation_error"),
    (
        "POST",
        "/api/layout",
        {"content": b"{}", "headers": {"content-type": "text/plain"}},
        415,
        "unsupported_media_type",
    ),
    (
        "POST",
        "/api/layout",
        {"json": layout_request(), "headers": {"origin": "https://evil.example"}},
        403,
        "cross_site_request",
    ),
    (
        "POST",
        "/api/layout",
        {"json": layout_request(), "headers": {"sec-fetch-site": "cross-site"}},
        403,
        "cross_site_request",
    ),
    (
        "POST",
        "/api/layout",
        {"content": b"[" + b" " * MAX_BODY_BYTES + b"]", "headers": {"content-type": "application/json"}},
        413,
        "too_large",
    ),
    ("POST", "/api/layout", {"content": b"{", "headers": {"content-type": "application/json"}}, 400, "invalid_json"),
    ("GET", "/api/topology", {"params": {"devices": "tpu:v4:3x3x3"}}, 422, "bad_devices"),
    ("GET", "/api/topology", {}, 422, "validation_error"),
    ("POST", "/api/links", {"json": {"view": "layout"}}, 422, "validation_error"),
    ("POST", "/api/links", {"json": {"view": "x", "state": {"s": "a" * MAX_LINK_BYTES}}}, 413, "too_large"),
    ("GET", "/api/links/{link_id}", {}, 404, "not_found"),
    # snapshots (tests/test_snapshots_api.py covers them in depth)
    ("POST", "/api/snapshots", {"json": {"version": 1}}, 422, "validation_error"),
    ("GET", "/api/snapshots/{snapshot_id}", {}, 404, "not_found"),
    ("GET", "/api/snapshots/runs/{run_id}", {}, 404, "not_found"),
    ("POST", "/api/snapshots/diff", {"json": {"a": {"snapshot": "A" * 22}, "b": {}}}, 422, "validation_error"),
    ("POST", "/api/snapshots/whatif", {"json": {"ref": {"snapshot": "A" * 22}, "rules": [1]}}, 422, "validation_error"),
    # kernel lab (tests/test_kernels_*.py cover it in depth)
    ("GET", "/api/kernels", {"headers": {"host": "evil.example"}}, 400, "bad_host"),
    (
        "POST",
        "/api/kernels/run",
        {"json": {"kernel": "nope", "devices": "cpu:8", "mesh": {"shape": [8], "axis_names": ["x"]}}},
        422,
        "unknown_kernel",
    ),
    ("POST", "/api/kernels/jobs", {"json": {"kernel": "sum_axis0"}}, 422, "validation_error"),
    ("GET", "/api/kernels/jobs/{job_id}", {}, 404, "not_found"),
    # cost estimates (tests/test_cost_api.py covers them in depth)
    (
        "POST",
        "/api/reshard",
        {
            "json": {
                "devices": "cpu:8",
                "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]},
                "shape": [16, 16],
                "from": "P('x', None)",
                "to": "P('z')",
            }
        },
        422,
        "unknown_axis",
    ),
    (  # compile-only runs compile for a tpu: (or gpu:) set's hardware; a cpu: set has none to compile for
        "POST",
        "/api/reshard",
        {
            "json": {
                "devices": "cpu:8",
                "mesh": {"shape": [8], "axis_names": ["x"]},
                "shape": [8],
                "from": "P('x')",
                "to": "P()",
                "compile_only": True,
            }
        },
        422,
        "unsupported",
    ),
    (
        "POST",
        "/api/kernels/run",
        {
            "json": {
                "kernel": "sum_axis0",
                "devices": "cpu:8",
                "mesh": {"shape": [8], "axis_names": ["x"]},
                "compile_only": "yes",
            }
        },
        422,
        "validation_error",
    ),
    ("POST", "/api/compare", {"json": {"a": {}, "b": {}}}, 422, "bad_compare"),
    (
        "POST",
        "/api/cost/nccl-fit",
        {"json": {"text": "#\n     8   2   float   sum   -1   oops"}},
        422,
        "bad_nccl_output",
    ),
    ("POST", "/api/cost/nccl-fit", {"json": {"text": "x" * 65_537}}, 422, "validation_error"),
    ("GET", "/api/hardware", {"headers": {"host": "evil.example"}}, 400, "bad_host"),
    ("POST", "/api/session", {}, 405, "method_not_allowed"),
    ("DELETE", "/api/session", {"headers": {"origin": "https://evil.example"}}, 403, "cross_site_request"),
    ("DELETE", "/api/links/{link_id}", {}, 405, "method_not_allowed"),
    ("POST", "/api/searches", {"json": {"code": "x"}}, 422, "validation_error"),
    ("GET", "/api/searches/{search_id}", {}, 404, "not_found"),
    ("GET", "/s/{link_id}", {}, 404, "not_found"),
    ("GET", "/no/such/page", {}, 404, "not_found"),
    ("GET", "/api/nothing", {}, 404, "not_found"),
    ("POST", "/", {"json": {}}, 405, "method_not_allowed"),
    ("GET", "/docs", {"headers": {"host": "127.0.0.1.evil.example"}}, 400, "bad_host"),
    ("GET", "/openapi.json", {"headers": {"host": "localhost.:8000"}}, 400, "bad_host"),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "code"), BAD_REQUESTS)
def test_error_shape(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any], status: int, code: str
) -> None:
    response = client.request(method, path.replace("{link_id}", "A" * 22).replace("{search_id}", "A" * 22), **kwargs)
    error = assert_error(response, status, code)
    assert set(error) >= {"code", "message"}
    assert response.headers["content-type"] == "application/json"
    assert "Traceback" not in response.text
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in response.headers["content-security-policy"]


def test_error_shape_covers_every_route(client: TestClient) -> None:
    documented = set(client.get("/openapi.json").json()["paths"]) | {"/s/{link_id}", "/docs", "/openapi.json"}
    covered = {path for _, path, *_ in BAD_REQUESTS}
    assert documented <= covered, f"add bad requests for {documented - covered}"


def test_unexpected_exception_is_a_bare_500(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr("server.api.layout.Layout.from_named", boom)
    response = post(client, "/api/layout", layout_request())
    assert_error(response, 500, "internal_error")
    assert "secret internals" not in response.text and "Traceback" not in response.text
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "secret internals" in caplog.text  # logged server-side, with the traceback


def test_frontend_dir_is_configurable(make_client: ClientFactory, tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>custom</title>")
    assert "custom" in make_client(frontend_dir=tmp_path).get("/").text


# ---- never a 5xx: structurally valid requests with every option mixed -------------------------------------

DEVICE_STRINGS = ["cpu:1", "cpu:8", "gpu:h100:2x4", "tpu:v4:2x2x2", "tpu:v5e:4x4", "tpu:v5e:2x2", "tpu:v3:2x2", "local"]


def factorizations(n: int, k: int) -> list[list[int]]:
    if k == 1:
        return [[n]]
    return [[d, *rest] for d in range(1, n + 1) if n % d == 0 for rest in factorizations(n // d, k - 1)]


@st.composite
def layout_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly sensible requests (so many succeed), with every optional field and mistake mixed in."""
    devices = draw(st.sampled_from(DEVICE_STRINGS))
    slices = draw(st.sampled_from([1, 1, 1, 2])) if devices.startswith("tpu") else 1
    devset = parse_devices(devices, slices=slices)
    rank = draw(st.integers(1, 3))
    mesh: dict[str, Any] = {
        "shape": draw(st.sampled_from(factorizations(len(devset), rank))),
        "axis_names": draw(
            st.one_of(
                st.permutations(["x", "y", "z"]).map(lambda p: p[:rank]),
                st.lists(st.sampled_from(["x", "y"]), min_size=rank, max_size=rank),  # maybe duplicates
            )
        ),
    }
    order = draw(st.sampled_from(["make_mesh", "make_mesh", "iota", "devices", "hybrid"]))
    if order != "make_mesh" or draw(st.booleans()):
        mesh["order"] = order
    if order == "devices":
        ids = draw(st.permutations([d.id for d in devset.devices]))
        mesh["device_ids"] = draw(st.sampled_from([ids, ids[:-1], [*ids[:-1], ids[0]], [*ids[:-1], 99]]))
    if order == "hybrid":
        mesh["dcn_shape"] = draw(st.lists(st.sampled_from([1, 2]), min_size=rank, max_size=rank))
    if draw(st.integers(0, 3)) == 0:
        # Manual included: an unused Manual axis once made JAX's devices_indices_map assert (a 500).
        mesh["axis_types"] = draw(
            st.lists(st.sampled_from(["auto", "Explicit", "manual"]), min_size=rank, max_size=rank)
        )
    if draw(st.integers(0, 3)) == 0:
        mesh["allow_split_physical_axes"] = draw(st.booleans())
    names = mesh["axis_names"]
    entry = st.one_of(
        st.none(), st.sampled_from([*names, "w"]), st.tuples(st.sampled_from(names), st.sampled_from(names))
    )
    entries = draw(st.lists(entry, max_size=3))
    spec = repr(P(*entries))
    body: dict[str, Any] = {
        "devices": devices,
        "mesh": mesh,
        "spec": draw(st.sampled_from([spec, spec, spec, spec[:-1], "P(UNCONSTRAINED)", "P(unreduced={'x'})"])),
        "shape": draw(st.lists(st.sampled_from([1, 2, 4, 8, 16, 32, 3]), min_size=len(entries), max_size=4)),
        "dtype": draw(st.sampled_from(list(DTYPES))),
    }
    if slices != 1 or draw(st.integers(0, 5)) == 0:
        body["slices"] = slices
    if draw(st.integers(0, 5)) == 0:
        body["chips_per_host"] = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=2, max_size=3))
    return body


@given(body=layout_requests())
@settings(max_examples=fuzz_examples(150), deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_input_causes_a_server_error(client: TestClient, body: dict[str, Any]) -> None:
    response = post(client, "/api/layout", body)
    assert response.status_code in (200, 422), (body, response.text)
    if response.status_code == 422:
        assert_error(response, 422, response.json()["error"]["code"])


# ---- settings --------------------------------------------------------------------------------------------


def test_settings_table() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for s in SETTINGS:
        assert re.fullmatch(r"max_[a-z_]+", s.name) and len(s.help) > 10, s
        assert isinstance(s.maximum, int) and s.minimum <= s.default <= s.maximum < 2**64, s  # every row bounded
        assert s.fixed is None or s.maximum == s.default, s
    assert Settings().worker_memory() > 0  # max_worker_memory 0: max_kernel_memory shared by the workers


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("max_kernel_worker", "3", "did you mean max_kernel_workers"),
        ("max_rank", "4", "cannot be set"),
        ("max_devices", "16385", "1 to 16384"),
        ("max_link_bytes", "255", "256 to 16777216"),
        ("max_link_bytes", "16777217", "256 to 16777216"),
        ("max_link_bytes", "lots", "whole number"),
        # issue 20: each of these crashed the server with a traceback or silently disabled a limit
        ("max_worker_memory", "\u00b2", "whole number (ASCII digits"),  # str.isdigit accepts a superscript
        ("max_kernel_workers", "\u0663", "whole number (ASCII digits"),  # and Arabic-Indic digits
        ("max_kernel_workers", "\uff13", "whole number (ASCII digits"),  # and full-width ones
        ("max_kernel_workers", "9" * 5000, "whole number (ASCII digits 0-9, at most 20)"),  # int() refuses > 4300
        ("max_kernel_workers", "9" * 21, "at most 20 digits"),
        ("max_kernel_seconds", "1" + "0" * 19, "1 to 3600"),  # 10^400 overflowed every run
        ("max_compile_seconds", "3601", "1 to 3600"),  # one past its maximum (tests/test_kernels_compile_only.py)
        ("max_compile_seconds", "0", "1 to 3600"),
        ("max_worker_memory", "1" + "0" * 19, "0 to 281474976710656"),  # 10^30 left the cgroup unlimited
        ("max_kernel_workers", "-1", "whole number"),
        ("max_kernel_workers", "1e3", "whole number"),
        ("max_kernel_workers", "0x10", "whole number"),
        ("max_kernel_workers", "", "whole number"),
    ],
)
def test_settings_are_checked_against_the_table(name: str, value: str, says: str) -> None:
    with pytest.raises(ShardingError) as err:
        Settings().with_values([(name, value)])
    assert err.value.code == "bad_setting" and says in f"{err.value.message} {err.value.hint}"
    assert len(err.value.message) < 200 and err.value.message.isascii()  # one short line, whatever was typed


def test_settings_take_underscores_between_ascii_digits() -> None:
    assert Settings().with_values([("max_link_bytes", " 1_048_576 ")]).max_link_bytes == 2**20
    for bad in ("_1", "1_", "1__0"):
        with pytest.raises(ShardingError):
            Settings().with_values([("max_link_bytes", bad)])


def test_the_kernel_workers_memory_must_fit_the_ram() -> None:
    gib = 1024**3
    assert Settings().memory_problem(ram=24 * gib) is None  # the defaults fit any machine
    assert Settings().with_values([("max_kernel_workers", 64)]).memory_problem(ram=gib) is None
    fits = Settings().with_values([("max_kernel_workers", 4), ("max_worker_memory", 6 * gib)])
    assert fits.memory_problem(ram=24 * gib) is None
    assert fits.kernel_memory(24 * gib) == 12 * gib  # 0: half the RAM for the workers together
    # the issue's 64 workers, each with the default 5.9 GiB of a 24 GiB machine
    over = Settings().with_values([("max_kernel_workers", 64), ("max_worker_memory", 6 * gib)])
    problem = over.memory_problem(ram=24 * gib)
    assert problem is not None and problem.details["setting"] == "max_worker_memory"
    assert "64 × 6.0 GiB = 384.0 GiB, more than the 24.0 GiB of RAM" in problem.message
    one_past = Settings().with_values([("max_kernel_workers", 4), ("max_worker_memory", 6 * gib + 1)])
    assert one_past.memory_problem(ram=24 * gib) is not None  # 4 × budget one byte past the RAM
    # a team server's search workers count beside the kernel workers' half of the RAM
    searching = Settings().with_values([("max_search_workers", 1)])
    assert searching.memory_problem(ram=24 * gib) is None  # 12 GiB + 8 GiB
    problem = searching.with_values([("max_search_workers", 2)]).memory_problem(ram=24 * gib)
    assert problem is not None and problem.details["setting"] == "max_search_memory"
    assert "(2 × 8.0 GiB) are 28.0 GiB, more than the 24.0 GiB of RAM" in problem.message
    total = Settings().with_values([("max_kernel_memory", 24 * gib + 1)])
    assert (
        total.memory_problem(ram=24 * gib) is not None
        and total.with_values([("max_kernel_memory", 24 * gib)]).memory_problem(ram=24 * gib) is None
    )


def test_settings_reach_the_routes(make_client: ClientFactory) -> None:
    # at the limit and one past it, for a setting the routes read from the app
    c = make_client(settings=Settings().with_values([("max_link_bytes", "1024"), ("max_devices", "64")]))
    fits = {"view": "x", "state": {"s": "a" * (1024 - len('{"view":"x","state":{"s":""}}'))}}
    assert post(c, "/api/links", fits).status_code == 201
    assert_error(post(c, "/api/links", {"view": "x", "state": {"s": fits["state"]["s"] + "a"}}), 413, "too_large")
    assert post(c, "/api/layout", layout_request(devices="cpu:64", mesh={"shape": [64], "axis_names": ["x"]},
                                                 spec="P()")).status_code == 200  # fmt: skip
    error = assert_error(post(c, "/api/layout", layout_request(devices="cpu:65")), 422, "too_large")
    assert "max_devices" in error["message"] and error["limit"] == 64


def test_request_models_enforce_the_settings() -> None:
    # The first line of defence (pydantic, before any JAX work) holds exactly the documented limits.
    limits = {s.name: s.default for s in SETTINGS}
    layout = LayoutRequest.model_json_schema()
    props, mesh = layout["properties"], layout["$defs"]["MeshRequest"]["properties"]
    assert props["spec"]["maxLength"] == limits["max_spec_chars"]
    assert props["shape"]["maxItems"] == limits["max_rank"]
    assert props["devices"]["maxLength"] == limits["max_devices_chars"]
    assert props["slices"]["maximum"] == limits["max_slices"]
    assert mesh["shape"]["maxItems"] == mesh["axis_names"]["maxItems"] == limits["max_mesh_axes"]
    assert mesh["axis_names"]["items"]["maxLength"] == limits["max_axis_name_chars"]
    assert mesh["device_ids"]["anyOf"][0]["maxItems"] == limits["max_devices"]
    assert LinkRequest.model_json_schema()["properties"]["view"]["maxLength"] == limits["max_view_chars"]
