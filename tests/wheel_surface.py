"""The library surface, run from an installed wheel against the JAX installed beside it.

``tests/test_wheel.py`` installs the built wheel (``'shardscope[notebook]'``) into a fresh virtual
environment beside the oldest JAX the package declares and runs this file there as
``python -I wheel_surface.py`` (isolated: neither the checkout nor the current directory is on the
path, so every import is the installed wheel's). Each check compares what shardscope reports with
JAX's own answer: layouts with ``NamedSharding.devices_indices_map``, collective groups with the
mesh's device array along the reduced axes (what ``psum`` over those axes means), typed shardings with
``jax.typeof``, the served ``jax_version`` with ``jax.__version__``. ``make newest-jax`` runs it beside the
newest JAX too (in a Debian 13 root, Python 3.13). It prints one ``ok NAME`` line per check and a JSON
summary last; any failure raises (non-zero exit, the assertion's message on stderr).

Standard library, JAX and the wheel only: no pytest in that environment.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

SERVER_START_SECONDS = 90
CHECKS: list[str] = []


def ok(name: str) -> None:
    CHECKS.append(name)
    print(f"ok {name}", flush=True)


def bounds(index: tuple[slice, ...], shape: tuple[int, ...]) -> list[list[int]]:
    """JAX's index (a tuple of slices) as [[start, stop], ...], the layout JSON's spelling."""
    return [[*s.indices(n)[:2]] for s, n in zip(index, shape, strict=True)]


def expected_shards(sharding: Any, shape: tuple[int, ...]) -> dict[int, list[list[int]]]:
    return {d.id: bounds(i, shape) for d, i in sharding.devices_indices_map(shape).items()}


def got_shards(layout_json: dict[str, Any]) -> dict[int, list[list[int]]]:
    return {s["device_id"]: [list(b) for b in s["index"]] for s in layout_json["shards"]}


def axis_groups(mesh: Any, axes: tuple[str, ...]) -> list[list[int]]:
    """Device ids that a collective over ``axes`` joins: the mesh's devices that agree on every other
    axis, listed along ``axes`` in order — the meaning of ``psum(x, axes)``."""
    ids = np.vectorize(lambda d: d.id, otypes=[int])(mesh.devices)
    names = list(mesh.axis_names)
    grouped = [names.index(a) for a in axes]
    rest = [i for i in range(ids.ndim) if i not in grouped]
    size = int(np.prod([ids.shape[i] for i in grouped]))
    return sorted(ids.transpose(rest + grouped).reshape(-1, size).tolist())


def check_installed() -> None:
    import server
    import sharding_core
    import shardscope
    from shardscope import assets

    site = Path(sys.prefix).resolve()
    for module in (sharding_core, server, shardscope):
        where = Path(module.__file__ or "").resolve()
        assert site in where.parents, f"{module.__name__} imported from {where}, not the installed wheel in {site}"
    assert assets.frontend_dir() == assets.PACKAGED_FRONTEND, "the front end is not the wheel's own copy"
    for name in ("index.html", "widget/notebook.js", "css/app.css"):
        assert (assets.frontend_dir() / name).is_file(), f"the wheel lacks frontend/{name}"
    assert shardscope.__version__ not in ("", "0+unknown"), "no version in the installed package's metadata"
    ok("installed")


def meshes() -> list[Any]:
    devices = jax.devices()
    assert len(devices) == 8, f"expected 8 CPU devices, got {len(devices)}"
    plain = jax.make_mesh((2, 4), ("x", "y"))
    # device ids out of mesh order: partition ids and device ids differ, as on a real slice
    shuffled = jax.sharding.Mesh(np.array([devices[i] for i in (3, 1, 0, 2, 7, 5, 4, 6)]).reshape(2, 4), ("x", "y"))
    return [plain, shuffled]


SPECS = (P("x", "y"), P("y"), P(("x", "y")), P(None, "x"), P(), P("y", "x"))


def check_layouts() -> None:
    from sharding_core.layout import Layout

    shape = (8, 16)
    for mesh in meshes():
        for spec in SPECS:
            sharding = NamedSharding(mesh, spec)
            layout = Layout.from_sharding(sharding, shape, "float32").to_json()
            assert got_shards(layout) == expected_shards(sharding, shape), f"Layout.from_sharding differs for {spec}"
            assert layout["shard_shape"] == list(sharding.shard_shape(shape))
    ok("Layout.from_sharding")


def check_capture() -> None:
    import sharding_core

    mesh = meshes()[1]
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh, P("x", "y")))
    w = jax.device_put(jnp.zeros((16, 4)), NamedSharding(mesh, P("y", None)))
    snap = sharding_core.capture({"x": x, "w": w}, "surface")
    leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
    for path, value in (("x", x), ("w", w)):
        leaf = leaves[path]
        assert leaf["spec"] == ("P('x', 'y')" if path == "x" else "P('y', None)"), leaf["spec"]
        layout = snap["layouts"][leaf["layout"]]
        assert got_shards(layout) == expected_shards(value.sharding, value.shape), f"capture's {path} differs"
    ok("capture")


def check_inspect_jit() -> None:
    import sharding_core
    from sharding_core.compat import shard_map

    for mesh in meshes():
        x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", "y")))
        # jit: summing dimension 0 (split along x) all-reduces along x
        snap = sharding_core.inspect_jit(jax.jit(lambda a: a.sum(0)), x)
        reduces = [c for c in snap["collectives"] if c["op"] == "all-reduce"]
        assert reduces, f"no all-reduce in {[c['op'] for c in snap['collectives']]}"
        assert sorted(reduces[0]["groups"]) == axis_groups(mesh, ("x",)), reduces[0]["groups"]
        # shard_map: psum over y, and over (y, x) in that order
        for axes, out in ((("y",), P("x", None)), (("y", "x"), P())):
            f = shard_map(lambda a, axes=axes: jax.lax.psum(a, axes), mesh=mesh, in_specs=P("x", "y"), out_specs=out)
            got = sharding_core.inspect_jit(jax.jit(f), x)["collectives"]
            assert [c["op"] for c in got] == ["all-reduce"], got
            assert sorted(got[0]["groups"]) == axis_groups(mesh, axes), (axes, got[0]["groups"])
    ok("inspect_jit")


def check_typed() -> None:
    """Where axes are Explicit the sharding is in the type: each leaf's and layout's ``typed`` is
    ``str(jax.typeof(x))`` of the value as this JAX types it (a weak type, unreduced and reduced axes included),
    ``inspect_jit``'s output leaf is the type the jitted function's real output has, and on Auto axes the
    type carries no sharding."""
    from jax.sharding import AxisType

    import sharding_core
    from sharding_core.layout import Layout

    devices = np.array(jax.devices()[:8]).reshape(2, 4)
    explicit = jax.sharding.Mesh(devices, ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    mixed = jax.sharding.Mesh(devices, ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
    auto = jax.sharding.Mesh(devices, ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def put(mesh: Any, spec: Any, dtype: Any = jnp.float32) -> Any:
        return jax.device_put(jnp.zeros((8, 16), dtype), NamedSharding(mesh, spec))

    values: dict[str, Any] = {
        "explicit": put(explicit, P("x", "y")),
        "tuple": put(explicit, P(("x", "y"), None), jnp.bfloat16),
        "mixed": put(mixed, P("x", "y")),
        "auto": put(auto, P("x", "y")),
        "reduced": put(explicit, P("x", None, reduced={"y"})),
        "weak": jnp.asarray(1.0),
        # JAX 0.8 and 0.12 place no unreduced array (device_indices_map): planned, as a ShapeDtypeStruct
        "unreduced": jax.ShapeDtypeStruct(
            (8, 16), jnp.float32, sharding=NamedSharding(explicit, P("x", None, unreduced={"y"}))
        ),
    }
    snap = sharding_core.capture(values)
    for leaf in snap["leaves"]:
        value = values[leaf["path"]]
        assert leaf["typed"] == str(jax.typeof(value)), (leaf["path"], leaf["typed"], str(jax.typeof(value)))
        if isinstance(value, jax.Array) and leaf["path"] != "weak":
            layout = Layout.from_sharding(value.sharding, value.shape, value.dtype).to_json()
            assert layout["typed"] == str(jax.typeof(value)), (leaf["path"], layout["typed"])
    typed = {leaf["path"]: leaf["typed"] for leaf in snap["leaves"]}
    assert "@" in typed["explicit"] and "@" not in typed["auto"], typed
    assert typed["unreduced"].endswith("{U:y}") and typed["reduced"].endswith("{R:y}"), typed
    x = values["explicit"]
    for f in (lambda a: a * 2, lambda a: a.sum(0)):
        leaves = {leaf["path"]: leaf for leaf in sharding_core.inspect_jit(jax.jit(f), x)["leaves"]}
        assert leaves["inputs/args/0"]["typed"] == str(jax.typeof(x))
        assert leaves["outputs"]["typed"] == str(jax.typeof(jax.jit(f)(x))), leaves["outputs"]["typed"]
    ok("typed")


def check_show_text() -> None:
    import shardscope

    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(meshes()[0], P("x", "y")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert shardscope.show(x) is None  # outside a notebook: the text layout, no widget
    text = out.getvalue()
    assert all(f"CPU {d.id}" in text for d in jax.devices()), text
    assert not [m for m in ("anywidget", "ipywidgets", "IPython") if m in sys.modules], "show loaded the widget"
    ok("show outside a notebook")


def check_preview() -> None:
    cli = Path(sys.prefix) / "bin" / "shardscope"
    args = [str(cli), "preview", "--devices", "cpu:8", "--mesh", "2x4", "--axes", "x,y", "--shape", "8,16"]
    r = subprocess.run([*args, "--spec", "P('x', 'y')", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    sharding = NamedSharding(jax.make_mesh((2, 4), ("x", "y")), P("x", "y"))
    assert got_shards(json.loads(r.stdout)) == expected_shards(sharding, (8, 16)), "preview --json differs"
    r = subprocess.run([*args, "--spec", "P('x', 'x')"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "duplicate_axis" in r.stderr, (r.returncode, r.stderr)
    ok("shardscope preview")


def serve(tmp: Path, start_seconds: float = SERVER_START_SECONDS) -> tuple[subprocess.Popen[bytes], str]:
    """A real ``shardscope serve`` from the installed wheel, once it answers, and its address: ``--port 0`` and
    the address read from the line the server prints once it holds its socket (a port picked here and passed on
    could be taken by another process first: a CI run failed so). Its output goes to ``tmp/serve.log``."""
    cli = Path(sys.prefix) / "bin" / "shardscope"
    log_path = tmp / "serve.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(cli), "serve", "--port", "0", "--db", str(tmp / "links.db")], stdout=log, stderr=log
        )
    deadline = time.monotonic() + start_seconds
    base = None
    while True:
        if base is None:
            found = re.search(r"^shardscope: listening on (http://\S+:\d+)$", log_path.read_text(), re.MULTILINE)
            base = found[1] if found else None
        if base is not None:
            try:
                with urllib.request.urlopen(base + "/api/health", timeout=10):
                    return server, base
            except OSError:
                pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.terminate()
            raise AssertionError("shardscope serve did not start:\n" + log_path.read_text())
        time.sleep(0.25)


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return int(r.status), str(r.headers.get("content-type", "")), bytes(r.read())


def check_serve_and_publish(tmp: Path) -> None:
    import sharding_core

    server, base = serve(tmp)
    try:
        status, _, body = get(base + "/api/health")
        assert status == 200 and json.loads(body)["jax_version"] == jax.__version__, body
        status, kind, page = get(base + "/")
        assert status == 200 and kind.startswith("text/html") and b"<script" in page, (status, kind)
        status, kind, module = get(base + "/js/lib/dom.js")
        assert status == 200 and "javascript" in kind and module, (status, kind)
        ok("shardscope serve")

        x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(meshes()[1], P("y", "x")))
        link = sharding_core.publish({"x": x}, "surface", url=base)
        assert link.startswith(base + "/s/"), link
        _, _, body = get(base + "/api/links/" + link.rsplit("/", 1)[1])
        stored_id = json.loads(body)["state"]["snapshot"]
        _, _, body = get(base + "/api/snapshots/" + stored_id)
        stored = json.loads(body)
        leaf = stored["leaves"][0]
        assert leaf["spec"] == "P('y', 'x')", leaf
        layout = stored["layouts"][leaf["layout"]]
        assert got_shards(layout) == expected_shards(x.sharding, x.shape), "the published layout differs"
        status, kind, _ = get(link)
        assert status == 200 and kind.startswith("text/html")
        ok("publish")
    finally:
        server.terminate()
        server.wait(timeout=30)


def check_widget() -> None:
    from sharding_core.layout import Layout
    from shardscope.notebook import view_of
    from shardscope.notebook.widget import ShardscopeWidget

    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(meshes()[1], P("x", "y")))
    widget = ShardscopeWidget(view_of(x))
    esm = str(widget._esm)
    assert "export default" in esm and "bundled by shardscope/notebook/bundle.py" in esm, (
        "the widget's module is not the bundled front end"
    )
    payload = json.loads(widget.payload)
    assert payload["kind"] == "layout"
    assert got_shards(payload["layout"]) == expected_shards(x.sharding, x.shape), "the widget payload differs"
    assert payload["layout"] == Layout.from_sharding(x.sharding, x.shape, "float32").to_json()
    # the spec bar, laid out in the kernel: a request on the request trait, the layout on the answer trait
    widget.request = {"id": 1, "method": "layout", "params": {"spec": "P('y')", "shape": [8, 16], "dtype": "float32"}}
    answer = json.loads(widget.answer)
    relaid = NamedSharding(x.sharding.mesh, P("y"))
    assert answer["id"] == 1 and got_shards(answer["result"]) == expected_shards(relaid, x.shape)
    ok("widget payload")


def main() -> int:
    check_installed()
    check_layouts()
    check_capture()
    check_inspect_jit()
    check_typed()
    check_show_text()
    check_preview()
    with tempfile.TemporaryDirectory() as tmp:
        check_serve_and_publish(Path(tmp))
    check_widget()
    print(json.dumps({"jax": jax.__version__, "python": sys.version.split()[0], "checks": CHECKS}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
