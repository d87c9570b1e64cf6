"""``shardscope.show`` without a kernel: the bundled front end, the scoped stylesheet, what each kind of
object shows (the same layout JSON ``/api/layout`` and ``capture`` give), the spec box's round trip
through the widget's traits, and the text outside a notebook.

The kernel and browser tiers are ``tests/test_notebook_kernel.py`` and ``tests/test_notebook_browser.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fastapi.testclient import TestClient
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import shardscope
from sharding_core.capturing import capture, inspect_jit
from sharding_core.devices import parse_devices
from sharding_core.errors import ShardingError
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec
from sharding_core.render import render_text
from shardscope.notebook import View, in_notebook, view_of
from shardscope.notebook.bundle import (
    BUNDLE_ERROR,
    ENTRY,
    bundle,
    frontend_dir,
    parse_module,
    scope_css,
    widget_css,
    widget_esm,
)

ROOT = Path(__file__).resolve().parent.parent


def mesh_2x4() -> jax.sharding.Mesh:
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))


def lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.strip())


def payload(view: View) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(view.payload())
    return data


# ---- the bundled front end --------------------------------------------------------------------------------


def test_the_bundle_is_the_dashboards_own_modules_each_once() -> None:
    js = widget_esm()
    modules = re.findall(r"^// ---- (\S+)", js, re.M)
    assert modules[-1] == ENTRY and len(modules) == len(set(modules))
    for path in ["js/components/grid.js", "js/components/mesh_table.js", "js/components/collectives.js",
                 "js/components/leaf_tree.js", "js/model/layout.js", "js/lib/hovercard.js"]:  # fmt: skip
        assert path in modules
        # the drawing code is the file itself (less its import lines and export keywords): no second copy
        source = (frontend_dir() / path).read_text()
        body = re.sub(r"^import[^;]*;\n", "", source, flags=re.M).replace("export ", "")
        assert lines(body) in lines(js)
    assert js.count("export function layoutGrid") == 0 and js.count("function layoutGrid(") == 1
    assert js.rstrip().endswith("export default { render };")


def test_the_bundle_loads_nothing_from_the_network() -> None:
    # Regression guard: a CDN script, font or fetch in any module the widget bundles fails here.
    text = widget_esm() + widget_css()
    urls = set(re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s\"'`)]*", text))
    allowed = {"http://www.w3.org/2000/svg"}  # the SVG namespace: a name, never fetched
    assert urls <= allowed, f"the widget names external URLs: {sorted(urls - allowed)}"
    assert "@import" not in widget_css() and "url(" not in widget_css()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to load the module")
def test_the_bundle_is_a_module_that_exports_render(tmp_path: Path) -> None:
    path = tmp_path / "widget.mjs"
    path.write_text(widget_esm())
    code = f"import({json.dumps(path.as_uri())}).then(m => console.log(typeof m.default.render))"
    r = subprocess.run(["node", "-e", code], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip() == "function"


def write_modules(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_bundling_rewrites_imports_and_exports(tmp_path: Path) -> None:
    a = "export const A = 1;\nconst hidden = 2;\nexport function f() { return hidden; }\nexport { hidden as H };\n"
    b = 'import {\n  A,\n  f as g,\n} from "./a.js";\nconst hidden = 3;\n'
    b += "export class B { v() { return A + g() + hidden; } }\n"
    entry = (
        'import { B } from "../js/b.js";\nimport * as a from "../js/a.js";\nexport default { v: new B().v() + a.H };\n'
    )
    root = write_modules(tmp_path, {"js/a.js": a, "js/b.js": b, "w/entry.js": entry})
    js = bundle(root, "w/entry.js")
    assert js.index("// ---- js/a.js") < js.index("// ---- js/b.js") < js.index("// ---- w/entry.js")
    assert "const { A, f: g } = __ss_js_a;" in js and "const a = __ss_js_a;" in js
    assert "return Object.freeze({ A, f, H: hidden });" in js
    if shutil.which("node"):
        (tmp_path / "out.mjs").write_text(js)
        code = f"import({json.dumps((tmp_path / 'out.mjs').as_uri())}).then(m => console.log(m.default.v))"
        r = subprocess.run(["node", "-e", code], capture_output=True, text=True, timeout=60, check=True)
        assert r.stdout.strip() == "8"  # 1 + 2 + 3 + 2: each module kept its own `hidden`


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"e.js": 'import { x } from "./c.js";\n', "c.js": 'import { y } from "./e2.js";\nexport const x = 1;\n',
          "e2.js": 'import { x } from "./c.js";\nexport const y = 2;\n'}, "import cycle"),
        ({"e.js": 'import { x } from "./c.js";\n', "c.js": "export let x = 1;\n"}, "export let"),
        ({"e.js": 'import { x } from "./c.js";\n', "c.js": "export default 1;\nexport const x = 1;\n"}, "default"),
        ({"e.js": 'import { x } from "https://cdn.example/x.js";\n'}, "only relative imports"),
        ({"e.js": 'const m = await import("./c.js");\n', "c.js": "export const x = 1;\n"}, "dynamic import"),
        ({"e.js": 'import { nope } from "./c.js";\n', "c.js": "export const x = 1;\n"}, "does not export"),
        ({"e.js": 'import { x } from "../../outside.js";\n'}, "not a file under"),
    ],
)  # fmt: skip
def test_what_cannot_be_bundled_is_refused_in_words(tmp_path: Path, files: dict[str, str], words: str) -> None:
    root = write_modules(tmp_path / "front", files)
    with pytest.raises(ShardingError) as err:
        bundle(root, "e.js")
    assert err.value.code == BUNDLE_ERROR and words in err.value.message


def test_jsdoc_imports_in_comments_are_not_dynamic_imports(tmp_path: Path) -> None:
    module = parse_module("e.js", '/** @type {import("./c.js").T} */\n// import("x")\nexport const x = 1;\n', tmp_path)
    assert module.exports == ("x",)


# ---- the stylesheet ---------------------------------------------------------------------------------------


def test_css_is_scoped_to_the_widget_and_themed_by_class() -> None:
    css = scope_css(
        ":root { --bg: #fff; }\n* { box-sizing: border-box; }\n.a, .b:hover { color: red; }\n"
        "@media (prefers-color-scheme: dark) { :root { --bg: #000; } .a { color: pink; } }\n"
        "@media (max-width: 900px) { .app { display: block; } }\n:global body > #tooltip { top: 0; }\n"
        "/* a { } */ body[data-x] .y { z-index: 1; }"
    )
    assert ".shardscope-nb { --bg: #fff; }" in css
    assert ".shardscope-nb * { box-sizing: border-box; }" in css
    assert ".shardscope-nb .a, .shardscope-nb .b:hover { color: red; }" in css
    assert ".shardscope-nb.ss-dark { --bg: #000; }" in css and ".shardscope-nb.ss-dark .a { color: pink; }" in css
    assert "@media (max-width: 900px) {\n.shardscope-nb .app { display: block; }\n}" in css
    assert "body > #tooltip { top: 0; }" in css and "prefers-color-scheme" not in css
    assert ".shardscope-nb body[data-x] .y" in css


def test_every_rule_of_the_widget_stylesheet_is_scoped() -> None:
    css = re.sub(r"/\*.*?\*/", "", widget_css(), flags=re.S)
    selectors = re.findall(r"(?:^|})\s*([^{}@]+?)\s*\{", css)
    outside = [s for s in selectors for one in s.split(",") if not one.strip().startswith(".shardscope-nb")]
    # only the hover card, which the grid appends to <body>, is styled outside the widget
    assert outside and all("#tooltip.tooltip" in s for s in outside)


# ---- what each object shows -------------------------------------------------------------------------------


def test_an_array_shows_the_layout_jax_gives() -> None:
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh_2x4(), P("x", "y")))
    data = payload(view_of(x))
    assert data["kind"] == "layout" and data["editable"] and data["spec_text"] == "P('x', 'y')"
    assert data["layout"] == Layout.from_sharding(x.sharding, x.shape, x.dtype).to_json()
    expected = {d.id: [[s.start or 0, s.stop or n] for s, n in zip(idx, x.shape, strict=True)]
                for d, idx in x.sharding.devices_indices_map(x.shape).items()}  # fmt: skip
    assert {s["device_id"]: s["index"] for s in data["layout"]["shards"]} == expected


def test_a_hypothetical_layout_is_what_the_api_answers(client: TestClient) -> None:
    view = view_of(None, devices="tpu:v5e:4x4", mesh="4x4", axes="x,y", spec="P('x', None)", shape=(16, 16))
    api = client.post(
        "/api/layout",
        json={"devices": "tpu:v5e:4x4", "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]}, "spec": "P('x', None)",
              "shape": [16, 16], "dtype": "float32"},
    ).json()  # fmt: skip
    assert payload(view)["layout"] == api
    same = view_of(None, devices="tpu:v5e:4x4", mesh={"x": 4, "y": 4}, spec=P("x", None), shape=(16, 16))
    assert payload(same)["layout"] == api
    spec_first = view_of(P("x", None), devices="tpu:v5e:4x4", mesh=MeshSpec((4, 4), ("x", "y")), shape=(16, 16))
    assert payload(spec_first)["layout"] == api


def test_a_hypothetical_layout_on_a_real_mesh_and_a_sharding_with_a_shape() -> None:
    mesh = mesh_2x4()
    view = view_of(None, mesh=mesh, spec="P(None, 'y')", shape=(8, 16))
    sharding = NamedSharding(mesh, P(None, "y"))
    assert payload(view)["layout"] == Layout.from_sharding(sharding, (8, 16), "float32").to_json()
    assert payload(view_of(sharding, shape=(8, 16)))["layout"] == payload(view)["layout"]
    with pytest.raises(ShardingError, match="shape="):
        view_of(sharding)


def test_a_single_device_array_has_a_layout_without_a_mesh() -> None:
    data = payload(view_of(jnp.ones(4)))
    assert data["layout"]["mesh"] is None and data["editable"] is False
    assert [s["index"] for s in data["layout"]["shards"]] == [[[0, 4]]]


def test_a_pytree_shows_its_snapshot_with_memory_per_device() -> None:
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh_2x4(), P("x", "y")))
    data = payload(view_of({"a": x, "b": jnp.ones(3)}, name="tree"))
    snap = data["snapshot"]
    assert data["kind"] == "snapshot" and data["name"] == "tree" and [lf["path"] for lf in snap["leaves"]] == ["a", "b"]
    assert snap["layouts"][snap["leaves"][0]["layout"]] == Layout.from_sharding(x.sharding, x.shape, x.dtype).to_json(
        context=False
    )
    assert snap["memory"]["bytes"][0] == 8 * 16 * 4 // 8 + 3 * 4  # device 0 holds a's block and all of b
    # Regression (issue 21): an unnamed tree's widget was titled "show"; it is named for what it is
    assert payload(view_of({"a": x}))["name"] == "dict"
    assert payload(view_of([x, x]))["name"] == "list"


def test_an_inspect_jit_capture_shows_its_collectives() -> None:
    mesh = mesh_2x4()
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", "y")))
    step = inspect_jit(jax.jit(lambda a: a.sum(axis=1)), x)
    data = payload(view_of(step))
    assert data["kind"] == "snapshot" and data["snapshot"]["collectives"] == step["collectives"]
    assert any(c["op"] == "all-reduce" for c in data["snapshot"]["collectives"])


def test_large_layouts_stay_compact() -> None:
    view = view_of(None, devices="tpu:v4:16x16x16", mesh="16x256", axes="x,y", spec="P('x', 'y')", shape=(4096, 4096))
    size = len(view.payload())
    assert len(view.layout.device_ids) == 4096 and size < 500_000  # the columnar layout JSON, ~110 bytes a device


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"devices": "tpu:v5e:4x4", "mesh": "4x4", "axes": "x,y", "spec": "P('z')", "shape": (16, 16)}, "unknown_axis"),
        ({"devices": "tpu:v5e:4x4", "mesh": "4x4", "spec": "P()", "shape": (16, 16)}, "bad_mesh"),
        ({"devices": "tpu:v5e:4x4", "mesh": "4x4", "axes": "x,y", "spec": "P()"}, "bad_shape"),
        ({"devices": "nope:1", "mesh": "4x4", "axes": "x,y", "spec": "P()", "shape": (4,)}, "bad_devices"),
    ],
)
def test_bad_hypothetical_layouts_are_explained(kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises(ShardingError) as err:
        view_of(None, **kwargs)
    assert err.value.code == code


# ---- the widget's traits (no kernel: ipywidgets' comm is a stand-in) --------------------------------------


@pytest.fixture
def widget_class() -> Any:
    pytest.importorskip("anywidget")
    from shardscope.notebook.widget import ShardscopeWidget

    return ShardscopeWidget


def ask(widget: Any, method: str, **params: Any) -> dict[str, Any]:
    """What the page does: a request on the ``request`` trait; the kernel's answer for it."""
    ident = int(widget.request.get("id", 0)) + 1
    widget.request = {"id": ident, "method": method, "params": params}
    answer: dict[str, Any] = json.loads(widget.answer)
    assert answer["id"] == ident
    return answer


def test_the_spec_bar_is_laid_out_in_the_kernel_with_the_apis_errors(widget_class: Any, client: TestClient) -> None:
    view = view_of(None, devices="tpu:v5e:4x4", mesh="4x4", axes="x,y", spec="P('x', None)", shape=(16, 16))
    w = widget_class(view)
    assert json.loads(w.payload)["spec_text"] == "P('x', None)" and w.dashboard == ""
    bad = ask(
        w, "layout", spec="P('x', 'w')", shape=[16, 16], dtype="float32"
    )  # what the page asks while someone types
    api = client.post(
        "/api/layout",
        json={"devices": "tpu:v5e:4x4", "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]}, "spec": "P('x', 'w')",
              "shape": [16, 16], "dtype": "float32"},
    )  # fmt: skip
    assert api.status_code == 422 and bad["error"] == api.json()["error"] and bad["error"]["code"] == "unknown_axis"
    bad = ask(w, "layout", spec="P('x', 'y", shape=[16, 16], dtype="float32")
    assert bad["error"]["code"] == "parse_error" and "column" in bad["error"]
    good = ask(w, "layout", spec="P(None, 'y')", shape=[16, 16], dtype="float32")
    assert good["result"]["spec"] == "P(None, 'y')"
    assert view.layout.spec == "P(None, 'y')" and view.spec_text == "P(None, 'y')"
    # the shape and dtype change too, with the API's checks (an indivisible shape is the API's error)
    wider = ask(w, "layout", spec="P(None, 'y')", shape=[16, 32], dtype="bfloat16")["result"]
    api = client.post(
        "/api/layout",
        json={"devices": "tpu:v5e:4x4", "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]}, "spec": "P(None, 'y')",
              "shape": [16, 32], "dtype": "bfloat16"},
    )  # fmt: skip
    assert api.status_code == 200 and wider["shards"] == api.json()["shards"] and wider["dtype"] == "bfloat16"
    odd = ask(w, "layout", spec="P(None, 'y')", shape=[16, 30], dtype="float32")
    assert odd["error"]["code"] == "indivisible"
    assert ask(w, "layout", spec="P()", shape=["16"], dtype="float32")["error"]["code"] == "bad_shape"
    assert ask(w, "nope")["error"]["code"] == "bad_request"


def test_an_arrays_spec_bar_previews_other_specs_on_its_mesh(widget_class: Any) -> None:
    mesh = mesh_2x4()
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh, P("x", "y")))
    w = widget_class(view_of(x))
    expected = Layout.from_sharding(NamedSharding(mesh, P("y")), (8, 16), "float32").to_json()
    assert ask(w, "layout", spec="P('y')", shape=[8, 16], dtype="float32")["result"] == expected
    assert ask(w, "layout", spec="P('y', 'y')", shape=[8, 16], dtype="float32")["error"]["code"] == "duplicate_axis"


def test_a_snapshot_widget_answers_the_whatif_in_the_kernel(widget_class: Any, client: TestClient) -> None:
    import flax.linen as nn

    mesh = mesh_2x4()
    rules = (("hidden", "y"), ("embed", None))
    box = nn.LogicallyPartitioned(
        jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P(None, "y"))), ("embed", "hidden")
    )
    snap = capture({"w": box}, "boxed", rules=rules)
    w = widget_class(view_of(snap))
    other = [["hidden", "x"], ["embed", "y"]]
    got = ask(w, "whatif", rules=other)["result"]
    published = client.post("/api/snapshots", json=snap)
    assert published.status_code == 201, published.text
    api = client.post("/api/snapshots/whatif", json={"ref": {"snapshot": published.json()["id"]}, "rules": other})
    assert api.status_code == 200 and got == api.json()
    assert got["leaves"][0]["spec"] == "P('y', 'x')" and got["changed"] == 1
    assert ask(w, "whatif", rules="nonsense")["error"]["code"]


def test_the_publish_button_is_there_only_with_a_dashboard(widget_class: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHARDSCOPE_URL", raising=False)
    x = jnp.ones(4)
    assert widget_class(view_of(x)).dashboard == ""
    monkeypatch.setattr("shardscope.notebook.in_notebook", lambda: True)
    assert shardscope.show(x).dashboard == ""
    assert shardscope.show(x, url="http://127.0.0.1:9").dashboard == "http://127.0.0.1:9"
    monkeypatch.setenv("SHARDSCOPE_URL", "http://127.0.0.1:9")
    w = shardscope.show(x, timeout=5)
    assert w.dashboard == "http://127.0.0.1:9"
    w.publish_requests += 1  # a click; nothing listens there: the error as publish gives it
    assert w.link == "" and w.link_error["code"] == "dashboard_unreachable"


# ---- outside a notebook ------------------------------------------------------------------------------------


def test_outside_a_notebook_show_prints_the_text_layout(capsys: pytest.CaptureFixture[str]) -> None:
    assert not in_notebook()
    args = {"devices": "tpu:v5e:4x4", "mesh": "4x4", "axes": "x,y", "spec": "P('x', None)", "shape": (16, 16)}
    assert shardscope.show(**args) is None
    layout = Layout.from_named(parse_devices("tpu:v5e:4x4"), MeshSpec((4, 4), ("x", "y")), "P('x', None)", (16, 16))
    assert capsys.readouterr().out == render_text(layout, summary=True)  # what `shardscope preview` prints


def test_outside_a_notebook_a_pytree_prints_its_leaves(capsys: pytest.CaptureFixture[str]) -> None:
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh_2x4(), P("x", "y")))
    shardscope.show({"w": x, "host": np.ones(2)}, "tree")
    out = capsys.readouterr().out
    assert "tree: 2 leaves" in out and re.search(r"w\s+\(8, 16\)\s+float32\s+P\('x', 'y'\)\s+\(4, 4\)\s+64 B", out)
    shardscope.show(x)
    assert "CPU 0" in capsys.readouterr().out


def test_show_has_one_name() -> None:
    # Regression guard (issue 21, "one show"): show had three names — shardscope.show, sharding_core.show
    # and sharding_core.publishing.show — and publishing <-> notebook imported each other for the third.
    import sharding_core.publishing

    assert shardscope.show.__module__ == "shardscope.notebook"
    assert not hasattr(sharding_core.publishing, "show")
    with pytest.raises(AttributeError):
        sharding_core.show  # noqa: B018 - the attribute lookup is the test
    assert capture is sharding_core.capture
