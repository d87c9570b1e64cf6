"""The newest-JAX checks: what the newest JAX answers, inside the Debian 13 root, against the locked JAX's.

``make newest-jax`` (``tests/newest_jax.sh``) runs this file twice:

``.venv/bin/python tests/newest_jax_checks.py locked OUT.json``
    with the locked JAX (0.10.2, this checkout): the ``/api/layout`` answers to :data:`LAYOUTS` through the
    app in-process, written to ``OUT.json``.
``python -I newest_jax_checks.py check LOCKED.json`` (in the root: the installed wheel, the newest JAX)
    * ``layout API``: a real ``shardscope serve`` on loopback answers the same requests; each answer must
      equal the locked one exactly, but for ``typed`` (JAX's own printer, checked next);
    * ``typed``: each answer's ``typed`` is ``str(jax.typeof(x))`` of that array placed by that JAX (a real
      array on the root's 8 CPU devices, or ``jax.typeof`` of a ``ShapeDtypeStruct`` on an ``AbstractMesh``
      for larger sets), and ``shardscope preview`` prints it;
    * ``plan on a compile-only TPU slice``: ``sharding_core.plan`` of a training step sharded over libtpu's
      compile-only v5e 2x4 devices; its memory must equal that JAX's own ``compiled.memory_analysis()``.
  It prints one ``ok NAME`` line per check and a JSON summary last (versions included); any failure raises.
  ``tests/wheel_surface.py`` (the wheel's surface, the notebook widget's payload included) runs there too.

Standard library, JAX and the wheel only in ``check`` mode (no pytest in the root).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

SERVER_START_SECONDS = 120
CHECKS: list[str] = []

# POST /api/layout bodies: simulated CPU, TPU (make_mesh's order on each generation's topology, a multi-slice
# hybrid mesh) and GPU sets; Explicit, Auto and mixed axes; unreduced and reduced axes; Flax logical rules.
LAYOUTS: list[dict[str, Any]] = [
    {"devices": "cpu:8", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}, "spec": "P('x', 'y')", "shape": [8, 16]},
    {
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["explicit", "explicit"]},
        "spec": "P('x', None, unreduced={'y'})",
        "shape": [8, 16],
    },
    {
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["explicit", "explicit"]},
        "spec": "P('x', None, reduced={'y'})",
        "shape": [8, 16],
    },
    {
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
        "spec": "P(('x', 'y'))",
        "shape": [16, 4],
        "dtype": "bfloat16",
    },
    {
        "devices": "cpu:8",
        "mesh": {"shape": [4, 2], "axis_names": ["a", "b"], "axis_types": ["explicit", "auto"], "order": "iota"},
        "spec": "P('b', 'a')",
        "shape": [6, 12],
        "dtype": "int8",
    },
    {
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]},
        "spec": "('embed', 'hidden')",
        "shape": [16, 32],
        "rules": [["embed", "y"], ["hidden", "x"]],
    },
    {
        "devices": "tpu:v5e:2x4",
        "mesh": {"shape": [2, 4], "axis_names": ["data", "model"]},
        "spec": "P('data', 'model')",
        "shape": [64, 128],
        "dtype": "bfloat16",
    },
    {
        "devices": "tpu:v5p:4x4x4",
        "mesh": {"shape": [16, 4], "axis_names": ["fsdp", "tp"]},
        "spec": "P('fsdp', 'tp')",
        "shape": [4096, 1024],
        "dtype": "bfloat16",
    },
    {
        "devices": "tpu:v4:2x2x4",
        "mesh": {"shape": [4, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
        "spec": "P(None, 'y')",
        "shape": [8, 8],
    },
    {
        "devices": "tpu:v5e:2x4",
        "slices": 2,
        "mesh": {"shape": [4, 4], "axis_names": ["dcn", "ici"], "order": "hybrid", "dcn_shape": [2, 1]},
        "spec": "P('dcn', 'ici')",
        "shape": [32, 32],
    },
    {
        "devices": "gpu:h100:2x8",
        "mesh": {"shape": [2, 8], "axis_names": ["dp", "tp"]},
        "spec": "P('dp', 'tp')",
        "shape": [32, 64],
        "dtype": "float16",
    },
]

BAD_LAYOUT = {**LAYOUTS[0], "spec": "P('x', 'x')"}


def ok(name: str) -> None:
    CHECKS.append(name)
    print(f"ok {name}", flush=True)


# ---- locked: the answers of the locked JAX, in .venv ------------------------------------------------------


def locked(out: Path) -> int:
    import jax
    from fastapi.testclient import TestClient

    from server.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(str(Path(tmp) / "links.db"), "127.0.0.1")
        with TestClient(app, base_url="http://127.0.0.1") as c:
            answers = [answer(c, body) for body in LAYOUTS]
            r = c.post("/api/layout", json=BAD_LAYOUT)
            bad = {"status": r.status_code, "code": r.json()["error"]["code"]}
    out.write_text(json.dumps({"jax": jax.__version__, "layouts": answers, "bad": bad}))
    print(f"locked answers: {len(answers)} layouts with JAX {jax.__version__} -> {out}")
    return 0


def answer(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/api/layout", json=body)
    assert r.status_code == 200, (body, r.status_code, r.text)
    result: dict[str, Any] = r.json()
    return result


# ---- check: the newest JAX in the root, against them -----------------------------------------------------


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return int(r.status), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return int(e.code), json.loads(e.read())


def serve(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A real ``shardscope serve`` from the installed wheel, once it answers: ``wheel_surface.serve`` (beside this
    file in both places it runs; loaded by path, as ``python -I`` puts no script directory on the path)."""
    spec = importlib.util.spec_from_file_location("wheel_surface", Path(__file__).with_name("wheel_surface.py"))
    assert spec is not None and spec.loader is not None
    surface = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(surface)
    started: tuple[subprocess.Popen[bytes], str] = surface.serve(tmp, SERVER_START_SECONDS)
    return started


def check_layout_api(base: str, want: dict[str, Any]) -> list[dict[str, Any]]:
    got = []
    for body, expected in zip(LAYOUTS, want["layouts"], strict=True):
        status, answer = post(base + "/api/layout", body)
        assert status == 200, (body, status, answer)
        assert "typed" in answer and "typed" in expected, sorted(answer)
        same = {k: v for k, v in answer.items() if k != "typed"}
        locked_same = {k: v for k, v in expected.items() if k != "typed"}
        if same != locked_same:
            keys = sorted(k for k in set(same) | set(locked_same) if same.get(k) != locked_same.get(k))
            raise AssertionError(f"/api/layout differs from the locked JAX's for {body} in {keys}")
        got.append(answer)
    # bad input is refused as the locked JAX's server refuses it: the same 4xx and code
    status, answer = post(base + "/api/layout", BAD_LAYOUT)
    assert {"status": status, "code": answer["error"]["code"]} == want["bad"], (status, answer, want["bad"])
    ok("layout API")
    return got


def spec_of(body: dict[str, Any]) -> Any:
    """The PartitionSpec the request means, built by JAX (rules: Flax's logical_to_mesh_axes, spelled out)."""
    from jax.sharding import PartitionSpec as P

    if "rules" in body:
        rules = dict(body["rules"])
        names = eval(body["spec"], {"__builtins__": {}})  # a tuple of our own constant text
        return P(*(rules.get(n) for n in names))
    return eval(body["spec"], {"__builtins__": {}, "P": P})  # our own constant text


def expected_typed(body: dict[str, Any], answer: dict[str, Any]) -> str:
    """``str(jax.typeof(x))`` for the request's array as this JAX places it: a real array on the root's CPU
    devices for an 8-device mesh, else a ShapeDtypeStruct on an AbstractMesh of the mesh's axes."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding

    mesh = answer["mesh"]
    types = tuple(AxisType[t] for t in mesh["axis_types"])
    shape, dtype = tuple(body["shape"]), jnp.dtype(body.get("dtype", "float32"))
    names = tuple(mesh["axis_names"])
    sizes = tuple(mesh["shape"])
    if len(jax.devices()) == len(answer["shards"]) == 8:
        real = jax.make_mesh(sizes, names, axis_types=types, devices=jax.devices())
        sharding = NamedSharding(real, spec_of(body))
        try:
            return str(jax.typeof(jax.device_put(jnp.zeros(shape, dtype), sharding)))
        except (ValueError, NotImplementedError) as e:  # JAX 0.8 and 0.12 put no unreduced array (0.10 does)
            if "unreduced" not in str(e):
                raise
    abstract = jax.sharding.AbstractMesh(sizes, names, axis_types=types)
    return str(jax.typeof(jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(abstract, spec_of(body)))))


def check_typed(answers: list[dict[str, Any]]) -> None:
    for body, answer in zip(LAYOUTS, answers, strict=True):
        want = expected_typed(body, answer)
        assert answer["typed"] == want, f"typed {answer['typed']!r} is not jax.typeof's {want!r} for {body}"
    explicit = [a for a in answers if "Explicit" in a["mesh"]["axis_types"]]
    assert any("@" in a["typed"] for a in explicit), [a["typed"] for a in explicit]
    cli = Path(sys.prefix) / "bin" / "shardscope"
    body = LAYOUTS[1]  # unreduced: the state is part of the type
    args = ["preview", "--devices", "cpu:8", "--mesh", "2x4", "--axes", "x,y", "--shape", "8,16"]
    r = subprocess.run(
        [str(cli), *args, "--spec", body["spec"]],  # jax.make_mesh's default axes: Explicit
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert f"type {answers[1]['typed']} " in r.stdout, r.stdout
    ok("typed")


def training_step() -> tuple[Any, tuple[Any, ...]]:
    """A two-layer MLP's loss and gradients, its arguments abstract on libtpu's compile-only v5e 2x4 devices."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import shardscope

    mesh = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("data", "model"))

    def loss(w1: Any, w2: Any, x: Any) -> Any:
        return jnp.mean((jnp.tanh(x @ w1) @ w2) ** 2)

    def sds(shape: tuple[int, ...], spec: Any) -> Any:
        return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))

    args = (sds((1024, 4096), P(None, "model")), sds((4096, 1024), P("model", None)), sds((256, 1024), P("data")))
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), args


def check_plan() -> dict[str, Any]:
    import sharding_core

    step, args = training_step()
    snap = sharding_core.plan(step, *args)
    assert snap["target"]["compile_only"] and snap["target"]["device_kind"].startswith("TPU v5"), snap["target"]
    ours = snap["jit"]["memory_per_device"]
    analysis = step.lower(*args).compile().memory_analysis()
    theirs = {k: int(getattr(analysis, k)) for k in ours}
    assert ours == theirs, f"the plan's memory {ours} is not memory_analysis()'s {theirs}"
    assert ours["peak_memory_in_bytes"] > 0 and snap["plan"]["verdict"], snap["plan"].get("verdict")
    ops = sorted({c["op"] for c in snap["collectives"] or []})
    assert ops, "no collectives in a data- and model-parallel step"
    check_typed_plan()
    ok("plan on a compile-only TPU slice")
    return {"memory_per_device": ours, "collectives": ops}


def check_typed_plan() -> None:
    """On Explicit axes a plan's leaves are typed as this JAX types them: its input as ``jax.typeof`` of the
    argument, its output as ``jax.typeof`` of what ``jax.eval_shape`` gives."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import sharding_core
    import shardscope

    mesh = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("data", "model"), axis_types=("explicit", "explicit"))
    w = jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16, sharding=NamedSharding(mesh, P("model", "data")))
    f = jax.jit(lambda a: jnp.tanh(a).sum(0))
    typed = {leaf["path"]: leaf["typed"] for leaf in sharding_core.plan(f, w)["leaves"]}
    want = {"inputs/args/0": str(jax.typeof(w)), "outputs": str(jax.typeof(jax.eval_shape(f, w)))}
    assert typed == want and all("@" in t for t in want.values()), (typed, want)


def versions() -> dict[str, str]:
    from importlib.metadata import version

    import jax

    return {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "jaxlib": version("jaxlib"),
        "libtpu": version("libtpu"),
        "shardscope": version("shardscope"),
    }


def check(locked_json: Path) -> int:
    import jax

    assert len(jax.devices()) == 8, jax.devices()
    want = json.loads(locked_json.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        server, base = serve(Path(tmp))
        try:
            answers = check_layout_api(base, want)
        finally:
            server.terminate()
            server.wait(timeout=30)
    check_typed(answers)
    plan = check_plan()
    summary = {**versions(), "locked_jax": want["jax"], "checks": CHECKS, "plan": plan}
    print(json.dumps(summary))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("locked", "check"):
        print("usage: newest_jax_checks.py locked OUT.json | check LOCKED.json", file=sys.stderr)
        return 2
    return locked(Path(argv[2])) if argv[1] == "locked" else check(Path(argv[2]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
