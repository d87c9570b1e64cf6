"""The snapshot API through the in-process client: store, read, memory, what-if, diff, token, limits.

Expected numbers come from JAX (each array's ``addressable_shards`` and ``devices_indices_map``) and
Flax (``logical_to_mesh_axes``), never typed in.
"""

from __future__ import annotations

import concurrent.futures
import copy
import math
import time
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from pydantic import TypeAdapter

from server.api import snapshots as api
from server.api.schema import MeshInfo
from server.middleware import BodyLimit
from server.services.snapshots import PARSED_PER_JSON_BYTE, SnapshotRepository
from server.settings import MAX_BODY_BYTES, MAX_SNAPSHOT_BYTES, SETTINGS, Settings
from server.store import SCHEMA_VERSION
from sharding_core import capture, inspect_jit, new_run_id
from sharding_core.program.targets import mesh as devices_mesh
from sharding_core.snapshot import format as fmt
from sharding_core.snapshot.format import MAX_LEAF_PATH_CHARS, MAX_RULES, MAX_SNAPSHOT_NAME_CHARS
from tests.conftest import ClientFactory
from tests.helpers import Inner, assert_error, error_code, post, run, schema_2_store, scope, status

TOKEN = "q8Vd2LmX0pRz7TkW4nYb9cJs3HfG6aUe"
RULES = (("batch", "data"), ("hidden", "model"), ("embed", None))


def mesh() -> Mesh:
    return Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


class Model(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w1 = self.param("w1", nn.with_logical_partitioning(nn.initializers.ones, ("embed", "hidden")), (16, 32))
        w2 = self.param("w2", nn.with_logical_partitioning(nn.initializers.ones, ("hidden", "embed")), (32, 16))
        return (x @ w1) @ w2


@pytest.fixture(scope="module")
def model_snapshot() -> dict[str, Any]:
    abstract = jax.eval_shape(Model().init, jax.random.key(0), jnp.ones((4, 16)))
    return capture(abstract, "model", rules=RULES, mesh=mesh())


def publish(client: TestClient, snap: dict[str, Any]) -> dict[str, Any]:
    r = post(client, "/api/snapshots", snap)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


# ---- store and read -----------------------------------------------------------------------------------


def test_round_trip_link_and_memory(client: TestClient) -> None:
    m = mesh()
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(m, P("data", "model")))
    y = jax.device_put(jnp.ones((8, 16)), NamedSharding(m, P("data")))
    snap = capture({"x": x, "y": y}, "pair")
    created = publish(client, snap)
    assert set(created) == {"id", "url", "run"} and created["run"] is None
    got = client.get(f"/api/snapshots/{created['id']}").json()
    assert got["id"] == created["id"] and got["leaves"] == snap["leaves"] and got["layouts"] == snap["layouts"]
    link = client.get("/api/links/" + created["url"].removeprefix("/s/")).json()
    assert link == {"view": "snapshots", "state": {"snapshot": created["id"]}}
    assert client.get(created["url"]).status_code == 200  # /s/<id> opens the dashboard
    # memory per device: JAX's own shard sizes, summed
    want = {d.id: 0 for d in jax.devices()}
    for arr in (x, y):
        for shard in arr.addressable_shards:
            want[shard.device.id] += shard.data.nbytes
    memory = got["memory"]
    assert dict(zip(memory["device_ids"], memory["bytes"], strict=True)) == want
    assert memory["imbalanced"] is False and memory["ratio"] == 1.0


def test_imbalance_is_flagged(client: TestClient) -> None:
    lopsided = jax.device_put(jnp.ones((64, 64)), jax.devices()[5])
    spread = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh(), P("data", "model")))
    memory = client.get(f"/api/snapshots/{publish(client, capture([lopsided, spread]))['id']}").json()["memory"]
    assert memory["imbalanced"] is True and memory["heaviest"] == [5]
    values = dict(zip(memory["device_ids"], memory["bytes"], strict=True))
    assert memory["ratio"] == pytest.approx(max(values.values()) / (sum(values.values()) / len(values)))


# ---- what-if --------------------------------------------------------------------------------------


def test_whatif_follows_flax_and_jax(client: TestClient, model_snapshot: dict[str, Any]) -> None:
    sid = publish(client, model_snapshot)["id"]
    rules = [["embed", "data"], ["hidden", "model"]]
    res = post(client, "/api/snapshots/whatif", {"ref": {"snapshot": sid}, "rules": rules})
    assert res.status_code == 200, res.text
    body = res.json()
    m = mesh()
    by_path = {leaf["path"]: leaf for leaf in model_snapshot["leaves"]}
    assert {r["path"] for r in body["leaves"]} == {"params/w1", "params/w2"}
    for row in body["leaves"]:
        leaf = by_path[row["path"]]
        spec = nn.logical_to_mesh_axes(tuple(leaf["logical_axes"]), tuple((k, v) for k, v in rules))
        assert row["spec"] == repr(spec) and row["error"] is None and row["changed"] is True
        layout = body["layouts"][row["layout"]]
        indices = NamedSharding(m, spec).devices_indices_map(tuple(leaf["shape"]))
        assert [s["index"] for s in layout["shards"]] == [
            [[s.start or 0, d if s.stop is None else s.stop] for s, d in zip(idx, leaf["shape"], strict=True)]
            for idx in indices.values()
        ]
    # both weights now split 8 ways: each device holds 1/8 of 16*32*4 bytes per weight
    assert body["memory"]["bytes"] == [2 * 16 * 32 * 4 // 8] * 8


def test_whatif_errors_are_per_leaf(client: TestClient, model_snapshot: dict[str, Any]) -> None:
    sid = publish(client, model_snapshot)["id"]
    res = post(client, "/api/snapshots/whatif", {"ref": {"snapshot": sid}, "rules": [["hidden", "nope"]]}).json()
    assert res["errors"] == 2 and {r["error"]["code"] for r in res["leaves"]} == {"unknown_axis"}
    # the captured layouts stay in the memory sums
    assert res["memory"] == client.get(f"/api/snapshots/{sid}").json()["memory"]
    bad = post(client, "/api/snapshots/whatif", {"ref": {"snapshot": sid}, "rules": [[None, "data"]]})
    assert_error(bad, 422, "bad_rules")


def test_whatif_rules_limit(client: TestClient, model_snapshot: dict[str, Any]) -> None:
    sid = publish(client, model_snapshot)["id"]
    at = [[f"n{i}", None] for i in range(MAX_RULES)]
    assert post(client, "/api/snapshots/whatif", {"ref": {"snapshot": sid}, "rules": at}).status_code == 200
    over = post(client, "/api/snapshots/whatif", {"ref": {"snapshot": sid}, "rules": [*at, ["x", None]]})
    assert_error(over, 422, "validation_error")


# ---- diff -------------------------------------------------------------------------------------------------


def received_bytes(before: jax.Array, after: jax.Array) -> int:
    """Bytes each device must receive: its new block minus the part of it that it already holds."""
    old = before.sharding.devices_indices_map(before.shape)
    total = 0
    for dev, idx in after.sharding.devices_indices_map(after.shape).items():
        new_box = [range(*s.indices(n)) for s, n in zip(idx, after.shape, strict=True)]
        old_box = [range(*s.indices(n)) for s, n in zip(old[dev], before.shape, strict=True)]
        overlap = math.prod(
            len(range(max(a.start, b.start), min(a.stop, b.stop))) for a, b in zip(new_box, old_box, strict=True)
        )
        total += (math.prod(len(r) for r in new_box) - overlap) * after.dtype.itemsize
    return total


def test_diff_finds_resharded_leaves_and_bytes(client: TestClient) -> None:
    m = mesh()
    a = {"w": jax.device_put(jnp.ones((16, 32)), NamedSharding(m, P("data", "model"))), "same": jnp.ones(4)}
    b = {"w": jax.device_put(jnp.ones((16, 32)), NamedSharding(m, P("model", "data"))), "same": jnp.ones(4)}
    b["new"] = jnp.ones((2, 2))
    sa, sb = publish(client, capture(a))["id"], publish(client, capture(b))["id"]
    res = post(client, "/api/snapshots/diff", {"a": {"snapshot": sa}, "b": {"snapshot": sb}}).json()
    rows = {r["path"]: r for r in res["leaves"]}
    assert set(rows) == {"w", "new"} and rows["new"]["status"] == "added"
    assert rows["w"]["a_spec"] == repr(P("data", "model")) and rows["w"]["b_spec"] == repr(P("model", "data"))
    assert rows["w"]["bytes_to_move"] == received_bytes(a["w"], b["w"]) > 0
    assert res["summary"]["same"] == 1 and res["summary"]["bytes_to_move"] == received_bytes(a["w"], b["w"]) + 16
    same = post(client, "/api/snapshots/diff", {"a": {"snapshot": sa}, "b": {"snapshot": sa}}).json()
    assert same["leaves"] == [] and same["summary"]["bytes_to_move"] == 0


# ---- runs -------------------------------------------------------------------------------------------------


def run_part(snap: dict[str, Any], process: int, count: int, secret: str) -> dict[str, Any]:
    """``snap`` as process ``process`` of a ``count``-process run: devices split evenly between processes."""
    out = copy.deepcopy(snap)
    n = len(out["devices"]["id"])
    out["devices"]["process_index"] = [i * count // n for i in range(n)]
    out["process_index"], out["process_count"] = process, count
    out["run"] = {"id": secret, "process_index": process, "process_count": count}
    return out


def test_a_process_publishes_to_a_run_once(client: TestClient) -> None:
    snap = capture({"x": jnp.ones(8)})
    secret = new_run_id()
    snap["run"] = {"id": secret, "process_index": 0, "process_count": 1}
    created = publish(client, snap)
    read_id = created["run"]
    assert read_id != secret and len(read_id) == 22  # the run is read under its own 128-bit id
    merged = client.get(f"/api/snapshots/runs/{read_id}").json()
    assert merged["processes"]["reported"] == [0] and merged["processes"]["missing"] == []
    assert merged["run"]["id"] == read_id
    assert_error(post(client, "/api/snapshots", snap), 409, "run_conflict")
    assert_error(client.get(f"/api/snapshots/runs/{secret}"), 404, "not_found")  # the secret is not a read id
    assert_error(client.get(f"/api/snapshots/runs/{new_run_id()}"), 404, "not_found")


def test_a_read_link_cannot_be_turned_into_a_write(client: TestClient) -> None:
    # Issue 12: the share link carried the run id, which was also the run's write secret, so anyone
    # who could read a link could publish a fake part into the run (and the real process got 409).
    snap = capture({"x": jnp.ones(8)})
    secret = new_run_id()
    created = publish(client, run_part(snap, 0, 2, secret))
    link = client.get("/api/links/" + created["url"].removeprefix("/s/")).json()
    read_id = link["state"]["run"]
    assert link == {"view": "snapshots", "state": {"run": read_id}} and read_id == created["run"]
    fake = assert_error(post(client, "/api/snapshots", run_part(snap, 1, 2, read_id)), 403, "read_only_run")
    assert "secret" in fake["message"]
    assert client.get(f"/api/snapshots/runs/{read_id}").json()["processes"]["reported"] == [0]
    # the real process 1, with the secret, is not blocked by the attempt
    second = publish(client, run_part(snap, 1, 2, secret))
    assert second["run"] == read_id
    merged = client.get(f"/api/snapshots/runs/{read_id}")
    assert merged.json()["processes"]["reported"] == [0, 1]
    # nothing a reader can get gives the secret back: the merge, each stored part, the links
    readable = [merged.content, client.get(f"/api/links/{second['url'].removeprefix('/s/')}").content]
    readable += [client.get(f"/api/snapshots/{p['id']}").content for p in merged.json()["processes"]["snapshots"]]
    assert all(secret.encode() not in body and read_id.encode() in body for body in readable)


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("process_count", lambda s: s.update(process_count=3, run={**s["run"], "process_count": 3})),
        ("shape", lambda s: s["leaves"][0].update(shape=[4, 16])),
        ("dtype", lambda s: s["leaves"][0].update(dtype="bfloat16")),
        ("spec", lambda s: s["leaves"][0].update(spec="P('data', 'model')")),
        ("devices.process_index", lambda s: s["devices"]["process_index"].reverse()),
    ],
)
def test_parts_that_disagree_are_refused(client: TestClient, field: str, change: Any) -> None:
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh(), P("data")))
    snap = capture({"x": x, "y": jnp.ones(4)})
    secret = new_run_id()
    read_id = publish(client, run_part(snap, 0, 2, secret))["run"]
    bad = run_part(snap, 1, 2, secret)
    change(bad)
    if field in ("shape", "spec"):  # keep the part valid on its own: its layout follows the leaf
        bad["leaves"][0]["layout"] = None
    error = assert_error(post(client, "/api/snapshots", bad), 409, "run_mismatch")
    assert error["field"] == field and field in error["message"] and "process 0" in error["message"]
    if field not in ("process_count", "devices.process_index"):
        assert error["leaf"] == "x" and "leaf 'x'" in error["message"]
    assert client.get(f"/api/snapshots/runs/{read_id}").json()["processes"]["reported"] == [0]
    assert publish(client, run_part(snap, 1, 2, secret))["run"] == read_id  # the consistent part is taken


def test_runs_stored_before_read_ids_stay_readable(tmp_path: Any) -> None:
    # A schema-2 store: the run's id (its secret then) is in its share link. After the migration the
    # link still opens the run, and that id, being public, can no longer add parts.
    import sqlite3

    from server.app import create_app
    from sharding_core.snapshot.memory import enrich
    from tests.helpers import BASE

    old_id = new_run_id()
    snap = run_part(capture({"x": jnp.ones(8)}), 0, 2, old_id)
    db = tmp_path / "old.db"
    link = schema_2_store(db, old_id, orjson.dumps(enrich(snap)))
    with TestClient(create_app(str(db)), base_url=BASE) as c:
        state = c.get(f"/api/links/{link}").json()["state"]
        assert state == {"run": old_id}
        merged = c.get(f"/api/snapshots/runs/{old_id}")
        assert merged.status_code == 200 and merged.json()["processes"]["reported"] == [0]
        assert_error(post(c, "/api/snapshots", run_part(snap, 1, 2, old_id)), 403, "read_only_run")
        res = post(c, "/api/snapshots/diff", {"a": {"run": old_id, "process": 0}, "b": {"run": old_id}})
        assert res.status_code == 200 and res.json()["summary"]["changed"] == 0
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def big_part(process: int, count: int, secret: str, leaves: int) -> dict[str, Any]:
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh(), P("data", "model")))
    snap = capture({"x": x})
    leaf = snap["leaves"][0]
    snap["leaves"] = [{**leaf, "path": f"layers/{i:05d}/kernel"} for i in range(leaves)]
    return run_part(snap, process, count, secret)


def test_a_merge_holds_one_part_at_a_time(make_client: ClientFactory) -> None:
    # Issue 12: opening a run of 12 x 58 MiB parts parsed every part before merging (19 s, +1.8 GiB).
    import tracemalloc

    from sharding_core.snapshot.merge import merge_run

    c = make_client()
    secret, processes = new_run_id(), 12
    for p in range(processes):
        publish(c, big_part(p, processes, secret, leaves=1500))
    store = c.app.state.store  # type: ignore[attr-defined]
    repo: SnapshotRepository = c.app.state.snapshots  # type: ignore[attr-defined]
    read_id = store.run_read_id(secret)
    parts = store.run_parts(read_id)
    assert len(parts) == processes and len(store.get("snapshots", parts[0][1])) > 500_000

    def traced(work: Any) -> tuple[int, int]:
        """(bytes still held after ``work``, with its result kept; the peak while it ran)."""
        tracemalloc.start()
        try:
            result = work()
            held, peak = tracemalloc.get_traced_memory()
            del result
            return held, peak
        finally:
            tracemalloc.stop()

    part, parse_peak = traced(lambda: repo.part(parts[0][1]))  # orjson's parse buffer is most of the peak
    _, all_at_once = traced(lambda: merge_run(read_id, [(p, sid, repo.part(sid)) for p, sid in parts]))
    repo.merged.clear()
    _, streamed = traced(lambda: repo.merged_json(read_id))
    # Streaming holds the merged result (about one part here: the parts' leaves are the same), its
    # JSON and the part being parsed; all at once holds every part.
    assert streamed - parse_peak < 4 * part, (part, parse_peak, streamed)
    assert all_at_once - parse_peak > (processes - 2) * part, (part, parse_peak, all_at_once)
    merged = orjson.loads(repo.merged_json(read_id))
    assert merged["processes"]["reported"] == list(range(processes)) and len(merged["leaves"]) == 1500


def test_concurrent_readers_of_an_unmerged_run_share_one_merge(make_client: ClientFactory) -> None:
    """Issue 20: four concurrent GETs of one unmerged run each merged it (four times the memory and time)."""
    c = make_client()
    secret, processes = new_run_id(), 4
    for p in range(processes):
        publish(c, big_part(p, processes, secret, leaves=50))
    repo: SnapshotRepository = c.app.state.snapshots  # type: ignore[attr-defined]
    read_id = c.app.state.store.run_read_id(secret)  # type: ignore[attr-defined]
    parse = repo.part

    def slow_part(snapshot_id: str) -> dict[str, Any]:
        time.sleep(0.1)  # a merge long enough for the other readers to arrive during it
        return parse(snapshot_id)

    repo.part = slow_part  # type: ignore[method-assign]
    with concurrent.futures.ThreadPoolExecutor(4) as readers:
        answers = list(readers.map(lambda _: c.get(f"/api/snapshots/runs/{read_id}"), range(4)))
    assert [a.status_code for a in answers] == [200] * 4
    assert len({a.content for a in answers}) == 1 and repo.merges == 1
    assert c.get(f"/api/snapshots/runs/{read_id}").content == answers[0].content and repo.merges == 1  # kept
    # a failed merge fails every reader waiting for it, and the next reader merges afresh
    repo.merged.clear()
    repo.part = lambda snapshot_id: (_ for _ in ()).throw(repo.not_found())  # type: ignore[method-assign]
    assert_error(c.get(f"/api/snapshots/runs/{read_id}"), 404, "not_found")
    repo.part = parse  # type: ignore[method-assign]
    assert c.get(f"/api/snapshots/runs/{read_id}").status_code == 200 and repo.merges == 2


# ---- token ------------------------------------------------------------------------------------------------


def test_token_guards_publishing_only(make_client: ClientFactory) -> None:
    snap = capture({"x": jnp.ones(4)})
    c = make_client(token=TOKEN)
    missing = post(c, "/api/snapshots", snap)
    assert_error(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert_error(post(c, "/api/snapshots", snap, {"authorization": f"Bearer {TOKEN}x"}), 403, "bad_token")
    assert_error(post(c, "/api/snapshots", snap, {"authorization": f"Basic {TOKEN}"}), 401, "unauthorized")
    ok = post(c, "/api/snapshots", snap, {"authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 201
    assert c.get(f"/api/snapshots/{ok.json()['id']}").status_code == 200  # reading needs the link only
    # refused before the body is read: an oversized body without a token is still a 401
    big = {"content-length": str(MAX_SNAPSHOT_BYTES + 1), "content-type": "application/json"}
    assert c.post("/api/snapshots", content=b"{}", headers=big).status_code == 401


# ---- bad input and limits ---------------------------------------------------------------------------


def test_bad_snapshots_get_explained(client: TestClient, model_snapshot: dict[str, Any]) -> None:
    broken = copy.deepcopy(model_snapshot)
    broken["leaves"][0]["mesh"] = 7
    error = assert_error(post(client, "/api/snapshots", broken), 422, "bad_snapshot")
    assert "mesh 7" in error["message"] and "params/w1" in error["message"]
    extra = copy.deepcopy(model_snapshot)
    extra["leaves"][0]["surprise"] = 1
    assert_error(post(client, "/api/snapshots", extra), 422, "validation_error")
    wrong_version = {**model_snapshot, "version": 2}
    assert_error(post(client, "/api/snapshots", wrong_version), 422, "validation_error")
    foreign = copy.deepcopy(model_snapshot)
    foreign["layouts"][0]["shards"][0]["device_id"] = 999
    assert (
        "not in the devices table"
        in assert_error(post(client, "/api/snapshots", foreign), 422, "bad_snapshot")["message"]
    )


def test_an_expired_snapshot_says_snapshots_expire(make_client: ClientFactory, model_snapshot: dict[str, Any]) -> None:
    c = make_client(settings=Settings().with_values([("max_snapshot_days", "2"), ("max_link_days", "3")]))
    created = publish(c, model_snapshot)
    assert c.get(f"/api/snapshots/{created['id']}").status_code == 200
    ref = {"snapshot": created["id"]}
    assert post(c, "/api/snapshots/diff", {"a": ref, "b": ref}).status_code == 200  # parsed and cached
    store = c.app.state.store  # type: ignore[attr-defined]
    now = store.clock
    store.clock = lambda: now() + 2.5 * 86400  # past the snapshots' two days, within the links' three
    assert store.expire() == 1
    kept = "check that the whole link was copied; snapshots are kept 2 days after they are made, so an older one has "
    kept += "expired"
    assert assert_error(c.get(f"/api/snapshots/{created['id']}"), 404, "not_found")["hint"] == kept
    # the cached parse is not served once the store has deleted the snapshot
    assert assert_error(post(c, "/api/snapshots/diff", {"a": ref, "b": ref}), 404, "not_found")["hint"] == kept
    # the link that opens it still exists: the view then reads the snapshot and shows this hint
    assert c.get("/api/links/" + created["url"].removeprefix("/s/")).status_code == 200


def test_parsed_snapshots_held_at_the_byte_budget_and_one_past(make_client: ClientFactory) -> None:
    c = make_client()
    m = mesh()
    snaps = [
        capture({f"x{i}": jax.device_put(jnp.ones((8, 16)), NamedSharding(m, P("data")))}, f"s{i}") for i in range(3)
    ]
    store = c.app.state.store  # type: ignore[attr-defined]
    repo: SnapshotRepository = c.app.state.snapshots  # type: ignore[attr-defined]
    # sizes differ by a few bytes (capture times): the two largest fill the budget, the smallest comes third
    ids = sorted((publish(c, s)["id"] for s in snaps), key=lambda i: -len(store.get("snapshots", i)))
    cost = [PARSED_PER_JSON_BYTE * len(store.get("snapshots", i)) for i in ids]
    was = repo.parsed.max_bytes
    repo.parsed.clear()
    repo.parsed.resize(cost[0] + cost[1])
    try:
        diff = {"a": {"snapshot": ids[0]}, "b": {"snapshot": ids[1]}}
        assert post(c, "/api/snapshots/diff", diff).status_code == 200
        assert repo.parsed.bytes == cost[0] + cost[1] and len(repo.parsed) == 2  # at the budget: both kept
        diff = {"a": {"snapshot": ids[1]}, "b": {"snapshot": ids[2]}}
        assert post(c, "/api/snapshots/diff", diff).status_code == 200  # one past: the least recently used goes
        assert repo.parsed.bytes == cost[1] + cost[2] and len(repo.parsed) == 2
        assert repo.parsed.get((store.deletions, ids[0])) is None
    finally:
        repo.parsed.resize(was)


@pytest.mark.parametrize("bad_id", ["A" * 22, "short", "x" * 65, "..%2f..%2fetc"])
def test_unknown_and_malformed_ids_are_404(client: TestClient, bad_id: str) -> None:
    for url in (f"/api/snapshots/{bad_id}", f"/api/snapshots/runs/{bad_id}"):
        assert_error(client.get(url), 404, "not_found")
    res = post(client, "/api/snapshots/diff", {"a": {"snapshot": "A" * 22}, "b": {"snapshot": "B" * 22}})
    assert_error(res, 404, "not_found")


def test_refs_must_name_one_thing(client: TestClient) -> None:
    for ref in ({}, {"snapshot": "A" * 22, "run": "B" * 22}, {"snapshot": "A" * 22, "process": 1}):
        assert_error(post(client, "/api/snapshots/whatif", {"ref": ref, "rules": []}), 422, "validation_error")


def test_name_and_path_limits_at_and_one_past(client: TestClient) -> None:
    snap = capture({"x": jnp.ones(2)})
    assert post(client, "/api/snapshots", {**snap, "name": "n" * MAX_SNAPSHOT_NAME_CHARS}).status_code == 201
    assert_error(
        post(client, "/api/snapshots", {**snap, "name": "n" * (MAX_SNAPSHOT_NAME_CHARS + 1)}), 422, "validation_error"
    )
    leaf = snap["leaves"][0]
    at = {**snap, "leaves": [{**leaf, "path": "p" * MAX_LEAF_PATH_CHARS}]}
    assert post(client, "/api/snapshots", at).status_code == 201
    over = {**snap, "leaves": [{**leaf, "path": "p" * (MAX_LEAF_PATH_CHARS + 1)}]}
    assert_error(post(client, "/api/snapshots", over), 422, "validation_error")


def test_snapshot_bodies_have_their_own_limit(client: TestClient) -> None:
    # Larger than max_body_bytes (which every other path keeps) and still taken.
    snap = capture({f"leaf_{i}": jnp.ones(2) for i in range(4)}, "padded")
    snap["leaves"] = [{**snap["leaves"][0], "path": f"{i:04d}/" + "p" * 900} for i in range(1500)]
    body = orjson.dumps(snap)
    assert MAX_BODY_BYTES < len(body) < MAX_SNAPSHOT_BYTES
    assert post(client, "/api/snapshots", snap).status_code == 201
    assert_error(post(client, "/api/links", {"view": "x", "state": {"s": "a" * MAX_BODY_BYTES}}), 413, "too_large")


def test_body_limit_per_path_at_and_one_past() -> None:
    for path, size, want in [
        ("/api/snapshots", 10, 200),
        ("/api/snapshots", 11, 413),
        ("/api/layout", 4, 200),
        ("/api/layout", 5, 413),
    ]:
        for declared in (True, False):  # by Content-Length, and as streamed (chunks of 1 byte)
            inner = Inner(read_body=True)
            limited = BodyLimit(inner, max_bytes=4, path_limits={"/api/snapshots": (10, "max_snapshot_bytes")})
            hdrs = [("content-length", str(size))] if declared else [("transfer-encoding", "chunked")]
            sent, _ = run(limited, scope("POST", path, headers=hdrs), [b"x"] * size)
            assert status(sent) == want, (path, size, declared)
            if want == 413:
                assert error_code(sent) == "too_large"
                setting = b"max_snapshot_bytes" if path == "/api/snapshots" else b"max_body_bytes"
                assert setting in sent[-1]["body"]


def test_models_hold_the_settings() -> None:
    limits = {s.name: s.default for s in SETTINGS}
    schema = TypeAdapter(api.Snapshot).json_schema()
    props, defs = schema["properties"], schema["$defs"]
    assert props["leaves"]["maxItems"] == limits["max_snapshot_leaves"]
    assert props["name"]["maxLength"] == limits["max_snapshot_name_chars"]
    assert props["process_count"]["maximum"] == limits["max_run_processes"]
    assert defs["SnapshotLeaf"]["properties"]["path"]["maxLength"] == limits["max_leaf_path_chars"]
    assert api.WhatIfRequest.model_json_schema()["properties"]["rules"]["maxItems"] == limits["max_rules"]
    assert limits["max_snapshot_bytes"] == MAX_SNAPSHOT_BYTES


# ---- never a 5xx -------------------------------------------------------------------------------------------


def mutate(snap: dict[str, Any], where: list[Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(snap)
    node: Any = out
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return out


WHERE = [
    ["leaves", 0, "layout"],
    ["leaves", 0, "mesh"],
    ["leaves", 0, "shape"],
    ["layouts", 0, "shards", 0, "index"],
    ["layouts", 0, "shards", 0, "tile"],
    ["layouts", 0, "bytes_per_device"],
    ["layouts", 0, "shard_shape"],
    ["meshes", 0, "device_ids"],
    ["meshes", 0, "shape"],
    ["devices", "process_index"],
    ["devices", "coords"],
    ["process_index"],
    ["rules"],
    ["run"],
]
VALUES = st.one_of(
    st.none(),
    st.integers(-3, 2**40),
    st.lists(st.integers(-2, 40), max_size=4),
    st.lists(st.lists(st.integers(-2, 40), max_size=3), max_size=3),
    st.text(max_size=5),
    st.just({"id": "A" * 22, "process_index": 3, "process_count": 2}),
)


@given(where=st.sampled_from(WHERE), value=VALUES)
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_snapshot_causes_a_server_error(
    client: TestClient, model_snapshot: dict[str, Any], where: list[Any], value: Any
) -> None:
    response = post(client, "/api/snapshots", mutate(model_snapshot, where, value))
    assert response.status_code in (201, 409, 422), response.text
    if response.status_code != 201:
        assert_error(response, response.status_code, response.json()["error"]["code"])


def test_the_request_model_declares_the_formats_fields_and_capture_writes_them() -> None:
    """One snapshot schema: sharding_core.snapshot.format writes its fields once; the server's request model
    declares exactly those (nothing the checker does not know of), and capture / inspect_jit write them."""

    def keys(model: Any) -> set[str]:
        return set(TypeAdapter(model).json_schema()["properties"])

    program = TypeAdapter(api.SnapshotProgram).json_schema()
    assert set(program["required"]) == set(fmt.SNAPSHOT_FIELDS)
    assert set(program["properties"]) - set(program["required"]) == set(fmt.PROGRAM_FIELDS)
    assert keys(api.Snapshot) == {*fmt.SNAPSHOT_FIELDS, *fmt.PROGRAM_FIELDS, *fmt.EXPLAINED_FIELDS, *fmt.SEARCH_FIELDS}
    assert keys(api.SnapshotLeaf) == set(fmt.LEAF_FIELDS)
    assert keys(api.SnapshotDevices) == set(fmt.DEVICE_COLUMNS)
    assert keys(api.SnapshotRun) == set(fmt.RUN_FIELDS)
    assert keys(MeshInfo) >= set(fmt.MESH_FIELDS)
    mesh = jax.make_mesh((2, 4), ("x", "y"))
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x")))
    # whichever sets this process planned on before: naming cpu:8 makes this process's own CPUs a set (CI's full
    # run wrote a target into this capture when an earlier test had), yet they stay no compile-only target
    devices_mesh("cpu:8", (2, 4), ("x", "y"))
    snap = capture({"x": x})
    # capture writes its findings too (a program field: optional, snapshots from before findings lack it)
    assert list(snap) == [*fmt.SNAPSHOT_FIELDS, "findings"] and list(snap["leaves"][0]) == list(fmt.LEAF_FIELDS)
    assert list(snap["meshes"][0]) == list(fmt.MESH_FIELDS) and list(snap["devices"]) == list(fmt.DEVICE_COLUMNS)
    # a program on this process's own devices: no compile-only target (its CPUs are named as the cpu:8 set a plan
    # compiled for once one has, and it says so: compile_only false, this process's CPU devices)
    inspected = inspect_jit(lambda a: a * 2, x)
    assert set(inspected) - {"target"} == {
        *fmt.SNAPSHOT_FIELDS, "plan", "program", "values", "findings", "memory_timeline"
    }  # fmt: skip
    # the contract's memory timeline, its peak XLA's
    assert inspected["memory_timeline"]["peak_bytes"] == inspected["jit"]["memory_per_device"]["peak_memory_in_bytes"]
    assert inspected["target"]["compile_only"] is False and inspected["target"]["devices"] == "cpu:8"


# ---- a search's pick: the search rides on its plan (issue 34) -------------------------------------------------


def small_search() -> dict[str, Any]:
    """A search's summary as ``sharding_core.searching.run.summary`` writes it, two candidates (the shape only: the
    figures are tests/test_search.py's and tests/test_search_browser.py's)."""
    mesh = {"shape": [2, 4], "axis_names": ["data", "tensor"]}
    cand = {"mesh": mesh, "rules": [["batch", "data"], ["mlp", ["tensor"]], ["embed", None]], "knobs": {"remat": True},
            "strategy": "data 2 × tensor 4", "compiled": True, "fits": True, "peak_bytes": 2**20,
            "expected_seconds": 1e-4, "lost_on": "picked", "paste": {"python": "mesh = ...\n", "maxtext": "x: 1\n"},
            "collective_seconds": {"all-reduces over tensor": 5e-5}, "estimate": {"seconds": 1e-4}}  # fmt: skip
    other = {**cand, "strategy": "data 8", "mesh": {"shape": [8], "axis_names": ["data"]}, "compiled": False,
             "fits": None, "peak_bytes": None, "expected_seconds": None, "lost_on": "not compiled"}  # fmt: skip
    return {"devices": "tpu:v5p:2x2x2", "enumerated": 2, "compiled": 1, "seconds": 3.5, "usable_bytes": 2**36,
            "candidates": [cand, other], "front": [0], "current": None, "slices": 1,
            "pick": {"index": 0, "strategy": "data 2 × tensor 4", "plan": None, "paste": cand["paste"]}}  # fmt: skip


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (["candidates", 0, "peak_bytes"], "1 MiB"),  # a figure the chart draws, not a number
        (["candidates", 0, "expected_seconds"], -1.0),
        (["candidates", 0, "rules", 0], ["batch", "data", "extra"]),
        (["candidates", 0, "mesh", "shape"], []),
        (["candidates", 0, "paste", "python"], "x" * 16385),
        (["front"], [fmt.MAX_SEARCH_CANDIDATES]),
        (["pick", "index"], -1),
        (["candidates"], [{}]),
    ],
)
def test_a_search_rides_on_its_picks_plan_typed(
    client: TestClient, model_snapshot: dict[str, Any], where: list[Any], value: Any
) -> None:
    """``shardscope search --publish`` posts the pick's plan with the search it came from: stored and read back as
    sent; a search whose drawn figures are not numbers, or whose sizes are past the limits, is a 422 naming the
    field (never stored, never a 5xx)."""
    good = {**model_snapshot, "search": small_search()}
    created = publish(client, good)
    assert client.get(f"/api/snapshots/{created['id']}").json()["search"] == good["search"]
    bad = mutate(good, ["search", *where], value)
    error = assert_error(post(client, "/api/snapshots", bad), 422, "validation_error")
    assert "search" in str(error)


def test_a_search_past_its_candidate_limit_is_refused(client: TestClient, model_snapshot: dict[str, Any]) -> None:
    search = small_search()
    search["candidates"] = search["candidates"][1:] * (fmt.MAX_SEARCH_CANDIDATES + 1)
    assert_error(post(client, "/api/snapshots", {**model_snapshot, "search": search}), 422, "validation_error")


def test_a_tpu_fix_with_the_bytes_it_placed_is_a_finding_the_server_takes() -> None:
    """A finding's fix checked on a TPU set (scheduled by libtpu, not compiled to the end: issue 32) carries
    ``placed_after`` and ``placed_before`` and no peak; the closed schema declares both, and bounds them."""
    from pydantic import ValidationError

    from server.api.schema import FindingFix

    fix = {"text": "x = jax.lax.with_sharding_constraint(x, P('fsdp', None, None)) after line m.py:12",
           "line": "m.py:12", "leaf": None, "spec": "P('fsdp', None, None)", "bytes_after": 1 << 20,
           "expected_seconds_after": 0.04, "peak_after": None, "placed_after": 1 << 30,
           "placed_before": 8 << 30}  # fmt: skip
    adapter = TypeAdapter(FindingFix)
    assert adapter.validate_python(fix) == fix
    for bad in ({"placed_after": "1"}, {"placed_after": -1}, {"placed_before": 1.5}, {"placed_elsewhere": 1}):
        with pytest.raises(ValidationError):
            adapter.validate_python({**fix, **bad})
