"""A real two-process ``jax.distributed`` job on loopback (4 CPU devices each, gloo collectives)
publishing to a real ``shardscope serve``; the server's merged run is checked against what each
process's JAX reported about its own shards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.plugins.live import ROOT, Server, free_port

pytestmark = pytest.mark.live  # a real server on a socket

PROBE = r"""
import json, sys
sys.argv = sys.argv[:1] + sys.argv[2:]
import examples.multihost as mh
orig = mh.main
import sharding_core.publishing as pub
real_publish = pub.publish
def publish(tree, name, url, **kw):
    # Report JAX's own view of this process's shards next to publishing, for the test to compare.
    out = {k: {"fully_addressable": v.is_fully_addressable,
               "shards": sorted([sh.device.id, [[s.start or 0, v.shape[d] if s.stop is None else s.stop]
                                 for d, s in enumerate(sh.index)], sh.replica_id] for sh in v.addressable_shards)}
           for k, v in tree.items()}
    print("JAX " + json.dumps(out), flush=True)
    return real_publish(tree, name, url, **kw)
pub.publish = publish
real_shared = pub._shared_run_id
def shared_run_id():
    rid = real_shared()  # the run's write secret, drawn by process 0 and broadcast
    print("SECRET " + rid, flush=True)
    return rid
pub._shared_run_id = shared_run_id
import sharding_core
sharding_core.publish = publish
sys.exit(orig())
"""


def run_job(server: Server, tmp: Path) -> list[tuple[int, str]]:
    """Runs examples/multihost.py as processes 0 and 1 (bounded in time, killed on failure, logs shown)."""
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("XLA_FLAGS", None)
    procs = []
    logs = []
    for pid in range(2):
        log = (tmp / f"process{pid}.log").open("w+")
        logs.append(log)
        cmd = [sys.executable, "-c", PROBE, "--", "--process-id", str(pid), "--num-processes", "2",
               "--coordinator", f"127.0.0.1:{port}", "--url", f"http://127.0.0.1:{server.port}"]  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT))
    results = []
    try:
        for pid, proc in enumerate(procs):
            proc.wait(timeout=150)
            logs[pid].seek(0)
            results.append((pid, proc.returncode, logs[pid].read()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for log in logs:
            log.close()
    for pid, code, text in results:
        assert code == 0, (
            f"process {pid} exited {code}; its log:\n{text}\nserver log:\n{server.log.read_text()[-3000:]}"
        )
    return [(pid, text) for pid, _, text in results]


def test_two_processes_publish_one_merged_run(server: Server, tmp_path: Path) -> None:
    outputs = run_job(server, tmp_path)
    links = set()
    jax_views: dict[int, dict[str, Any]] = {}
    for pid, text in outputs:
        links.update(
            line.split(": ", 1)[1].strip() for line in text.splitlines() if line.startswith(f"process {pid}: http")
        )
        jax_views[pid] = next(json.loads(line[4:]) for line in text.splitlines() if line.startswith("JAX "))
    assert len(links) == 2  # one link per process, both to the same run
    link_ids = [url.rsplit("/s/", 1)[1] for url in links]
    states = [orjson.loads(server.request("GET", f"/api/links/{i}")[2])["state"] for i in link_ids]
    run_ids = {s["run"] for s in states}
    assert len(run_ids) == 1
    status, _, body = server.request("GET", f"/api/snapshots/runs/{run_ids.pop()}")
    assert status == 200
    merged = orjson.loads(body)
    procs = merged["processes"]
    assert procs["reported"] == [0, 1] and procs["missing"] == [] and procs["count"] == 2
    owner = dict(zip(merged["devices"]["id"], merged["devices"]["process_index"], strict=True))
    assert sorted(owner.values()) == [0] * 4 + [1] * 4
    for p in (0, 1):
        assert procs["devices"][p] == sorted(d for d, o in owner.items() if o == p)
    leaves = {leaf["path"]: leaf for leaf in merged["leaves"]}
    assert set(leaves) == {"activations", "batch", "weights"}
    for path, leaf in leaves.items():
        assert leaf["array_kind"] == "global" and leaf["fully_addressable"] is False
        assert leaf["processes"] == [0, 1] and leaf["missing_devices"] == []
        layout = merged["layouts"][leaf["layout"]]
        ours = {s["device_id"]: [s["device_id"], s["index"], s["replica_id"]] for s in layout["shards"]}
        # every device's block and replica id is what its own process's JAX reported
        for pid, view in jax_views.items():
            assert view[path]["fully_addressable"] is False
            for shard in view[path]["shards"]:
                assert ours[shard[0]] == shard, (path, pid)
                assert owner[shard[0]] == pid
        assert sorted(leaf["held_devices"]) == sorted(ours)
    # each process's own part says which devices it could not address
    part = procs["snapshots"][0]["id"]
    own = orjson.loads(server.request("GET", f"/api/snapshots/{part}")[2])
    batch = next(leaf for leaf in own["leaves"] if leaf["path"] == "batch")
    assert batch["addressable_devices"] == procs["devices"][0]
    # and the two processes can be diffed: the same global shardings, nothing moves
    status, diff = server.post_json(
        "/api/snapshots/diff",
        {"a": {"run": states[0]["run"], "process": 0}, "b": {"run": states[0]["run"], "process": 1}},
    )
    assert status == 200 and diff["summary"]["changed"] == 0 and diff["summary"]["bytes_to_move"] == 0
    # The job's run id is its write secret: links, the merge and the parts carry the read id only,
    # and the read id cannot add a part (issue 12: a read link could publish a fake process).
    secrets = {line.split()[1] for _, text in outputs for line in text.splitlines() if line.startswith("SECRET ")}
    assert len(secrets) == 1
    secret = secrets.pop()
    read_id = states[0]["run"]
    assert read_id != secret and secret.encode() not in body
    assert all(secret.encode() not in server.request("GET", f"/api/snapshots/{p['id']}")[2] for p in procs["snapshots"])
    fake = {**own, "run": {**own["run"], "id": read_id}}
    fake.pop("id")
    fake.pop("memory")
    status, refused = server.post_json("/api/snapshots", fake)
    assert status == 403 and refused["error"]["code"] == "read_only_run", refused
