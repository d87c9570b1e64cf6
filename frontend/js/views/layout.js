// views/: one module per page, wiring lib, model and components to the page's own elements and URL.
// This module: the layout explorer (index.html) — pickers and the PartitionSpec box, the grid and the
// mesh table highlighting each other, the summary, downloads and the share link.

import { getJSON, newestWins, postJSON } from "../lib/api.js";
import { download, defList, el, setOptions } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { fmtBytes, meshAxes } from "../lib/format.js";
import { bootPage, bump, byId, isDark, onThemeChange } from "../lib/page.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { gridDims, layoutGrid } from "../components/grid.js";
import { meshTable } from "../components/mesh_table.js";
import { layoutControls } from "../components/pickers.js";
import { reshardBox } from "../components/reshard.js";
import { Layout } from "../model/layout.js";
import { DEFAULTS, fromQuery, layoutRequest, toQuery } from "../model/state.js";

const EXAMPLES = [
  { label: "2x4 mesh, P('x', 'y')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P('x', 'y')", shape: "8,16" } },
  { label: "2x4 mesh, P('x')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P('x')", shape: "8,16" } },
  { label: "2x4 mesh, P(None, 'y')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P(None, 'y')", shape: "8,16" } },
  { label: "(data, model): weights P(None, 'model')", s: { devices: "cpu:8", mesh: "4x2", axes: "data,model", spec: "P(None, 'model')", shape: "16,32" } },
  { label: "(data, model): weights P('model', None)", s: { devices: "cpu:8", mesh: "4x2", axes: "data,model", spec: "P('model', None)", shape: "32,16" } },
  { label: "v3 8 cores: ring order 0 1 2 3 6 7 4 5", s: { devices: "tpu:v3:2x2", mesh: "8", axes: "x", spec: "P('x')", shape: "16" } },
  { label: "v5e 16x16: 256 chips, P('x', 'y')", s: { devices: "tpu:v5e:16x16", mesh: "16x16", axes: "x,y", spec: "P('x', 'y')", shape: "1024,1024" } },
  { label: "rank 3: P('x', None, 'y')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P('x', None, 'y')", shape: "4,6,16" } },
];

const specBox = /** @type {HTMLInputElement} */ (byId("spec"));
const dimsBox = /** @type {HTMLSelectElement} */ (byId("grid-dims"));
const status = byId("status");

/** @type {import("../model/state.js").State} */
let state = fromQuery(pageQuery());
/** @type {Layout | null} */
let layout = null;
/** @type {import("../components/grid.js").GridView | null} */
let grid = null;
/** @type {import("../components/mesh_table.js").MeshTableView | null} */
let mesh = null;
let keystrokeAt = 0;
/** @type {ReturnType<typeof layoutControls> | null} */
let controls = null;
/** "Reshard to…" (components/reshard.js); runs once the first layout is drawn when the URL names a target */
/** @type {ReturnType<typeof reshardBox> | null} */
let reshard = null;
let reshardPending = Boolean(state.reshard);

// ---------------------------------------------------------------- controls <-> state

function stateToControls() {
  controls?.write(state);
  specBox.value = state.spec;
}

function controlsToState() {
  controls?.read(state);
  state.spec = specBox.value;
}

/** "0,2" -> [0, 2]; null unless two non-negative integers. @param {string} text */
function zeroBased(text) {
  const dims = text.split(",").map((d) => (/^\d{1,2}$/.test(d.trim()) ? Number(d) : NaN));
  return dims.length === 2 && dims.every(Number.isInteger) ? dims : null;
}

/** The choice of two grid dimensions, shown for rank > 2. @param {number} rank */
function fillGridDims(rank) {
  byId("grid-dims-field").hidden = rank <= 2;
  if (rank <= 2) return;
  const pairs = [];
  for (let i = 0; i < rank; i++) for (let j = i + 1; j < rank; j++) pairs.push(`${i},${j}`);
  setOptions(dimsBox, pairs, pairs.map((p) => `dims ${p.replace(",", " × ")}`));
  dimsBox.value = gridDims(rank, zeroBased(state.dims)).join(",");
}

/** @param {boolean} replace */
const pushUrl = (replace) => writeUrl("/", toQuery(state), replace);

// ---------------------------------------------------------------- rendering

/** @param {unknown} err */
function fail(err) {
  showError(byId("spec-error"), err, { source: state.spec });
  byId("grid").classList.toggle("stale", Boolean(err));
}

/** @param {Layout} l */
function renderSummary(l) {
  const j = l.json;
  const rows = /** @type {[string, string][]} */ ([
    ["spec", l.spec],
    ["mesh", `${meshAxes(l.mesh)} over ${l.devicesKey}`],
    ["array", `${JSON.stringify(l.shape)} ${l.dtype}`],
    ["shard shape", JSON.stringify(l.shardShape)],
    ["replication", `${j.replication_factor}×` + (j.replicated_axes.length ? ` (replicated over ${j.replicated_axes.join(", ")})` : " (no replication)") + (j.unreduced_axes.length ? `; unreduced over ${j.unreduced_axes.join(", ")}` : "")],
    ["per device", fmtBytes(j.bytes_per_device)],
    ["total", `${fmtBytes(j.total_bytes)} across ${l.shards.length} devices vs ${fmtBytes(j.logical_bytes)} logical`],
  ]);
  l.dims.forEach((d, i) => rows.push([i === 0 ? "split" : "", d.text]));
  byId("summary").replaceChildren(defList(rows));
}

/** @param {Layout} l */
function render(l) {
  layout = l;
  fillGridDims(l.rank);
  const dark = isDark();
  grid = layoutGrid(byId("grid"), l, {
    dims: l.rank > 2 ? zeroBased(dimsBox.value) : null,
    dark,
    onTileClick: (ids) => select(ids && new Set(ids)),
  });
  performance.mark("grid-built");
  const m = l.mesh;
  mesh = meshTable(byId("mesh"), m, {
    caption: [`Mesh(${m.axis_names.map((n, i) => `'${n}': ${m.shape[i]}`).join(", ")}) — axis types ${m.axis_types.join(", ")}`],
    colour: (id) => l.colourOf(id, dark),
    title: (id, at) => `device ${id}: ${l.whereIs(id)}; mesh index (${at.join(", ")})`,
    onDeviceClick: (id) => select(new Set([id])),
  });
  renderSummary(l);
  fail(null);
}

/** Highlights devices in the grid and the mesh table (null clears). @param {Set<number> | null} ids */
function select(ids) {
  grid?.highlight(ids);
  mesh?.highlight(ids);
  byId("selection").textContent = ids ? `selected devices: ${[...ids].sort((a, b) => a - b).join(", ")}` : "";
}

/** Lays out the state's array (a newer request aborts this one). @param {AbortSignal} signal */
async function refresh(signal) {
  let req;
  try {
    req = layoutRequest(state);
  } catch (e) {
    fail(e);
    return;
  }
  status.textContent = "computing…";
  const t0 = performance.now();
  const json = await postJSON("/api/layout", req, signal);
  signal.throwIfAborted();
  const t1 = performance.now();
  render(Layout.fromApi(json));
  const t2 = performance.now();
  performance.measure("fetch-layout", { start: t0, end: t1 });
  performance.measure("build-dom", { start: t1, end: t2 });
  status.textContent = "";
  if (reshardPending) {
    reshardPending = false;
    reshard?.run();
  } else reshard?.stale();
  requestAnimationFrame(() => {
    performance.mark("grid-painted");
    if (keystrokeAt) {
      performance.measure("keystroke-to-paint", { start: keystrokeAt, end: performance.now() });
      keystrokeAt = 0;
    }
    bump("rendered");
  });
}

const schedule = newestWins(refresh, (e) => {
  status.textContent = "";
  fail(e);
  bump("errors");
});

// ---------------------------------------------------------------- downloads

function downloadSvg() {
  if (grid) download(new Blob([grid.svgText()], { type: "image/svg+xml" }), "shardscope-layout.svg");
}

function downloadPng() {
  if (!grid) return;
  const { width: w, height: h } = grid;
  const img = new Image();
  const url = URL.createObjectURL(new Blob([grid.svgText()], { type: "image/svg+xml" }));
  img.onload = () => {
    const canvas = el("canvas");
    canvas.width = w * 2;
    canvas.height = h * 2;
    const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    ctx.scale(2, 2);
    ctx.drawImage(img, 0, 0, w, h);
    URL.revokeObjectURL(url);
    canvas.toBlob((blob) => blob && download(blob, "shardscope-layout.png"), "image/png");
  };
  img.src = url;
}

// ---------------------------------------------------------------- wiring

/** A control committed a change: a new history entry, and a new layout at once. */
function onControlChange() {
  controlsToState();
  stateToControls();
  pushUrl(false);
  schedule(0);
}

/** A field is being typed in: the same history entry, a new layout once typing pauses. */
function onControlInput() {
  controlsToState();
  pushUrl(true);
  schedule(250);
}

function wire() {
  specBox.addEventListener("input", () => {
    keystrokeAt = performance.now();
    state.spec = specBox.value;
    pushUrl(true);
    schedule(40);
  });
  dimsBox.addEventListener("change", () => {
    state.dims = dimsBox.value;
    pushUrl(false);
    if (layout) render(layout);
  });
  shareControl(byId("share"), {
    view: "layout",
    state: () => ({ ...state }),
    onStatus: (text) => (status.textContent = text),
    onError: fail,
  });
  byId("download-svg").addEventListener("click", downloadSvg);
  byId("download-png").addEventListener("click", downloadPng);
  byId("zoom-in").addEventListener("click", () => grid?.zoomBy(0.8));
  byId("zoom-out").addEventListener("click", () => grid?.zoomBy(1.25));
  byId("zoom-reset").addEventListener("click", () => grid?.resetView());
  byId("clear-selection").addEventListener("click", () => select(null));
  const list = byId("examples");
  for (const ex of EXAMPLES) {
    const b = el("button", "", ex.label);
    b.type = "button";
    b.addEventListener("click", () => {
      state = { ...DEFAULTS, ...ex.s };
      stateToControls();
      pushUrl(false);
      schedule(0);
    });
    const li = el("li");
    li.appendChild(b);
    list.appendChild(li);
  }
  onBackForward((q) => {
    state = fromQuery(q);
    stateToControls();
    reshard?.set(state.reshard);
    reshardPending = Boolean(state.reshard);
    schedule(0);
  });
  onThemeChange(() => layout && render(layout));
}

async function main() {
  bootPage("layout");
  wire();
  let catalog = { tpu: [], gpu: [] };
  try {
    catalog = await getJSON("/api/platforms");
  } catch (e) {
    fail(e);
  }
  controls = layoutControls(byId("pickers"), catalog, {
    fields: { shape: /** @type {HTMLInputElement} */ (byId("array-shape")), dtype: /** @type {HTMLSelectElement} */ (byId("array-dtype")) },
    types: [["", "JAX's default"], ["auto", "all Auto"], ["explicit", "all Explicit"]],
    onChange: onControlChange,
    onInput: onControlInput,
  });
  stateToControls();
  reshard = reshardBox(byId("reshard"), {
    target: state.reshard,
    request: () => layoutRequest(state),
    onTarget: (target) => {
      state.reshard = target;
      pushUrl(false);
    },
    address: (target) => `/?${toQuery({ ...state, reshard: target })}`,
    onDone: () => bump("reshards"),
  });
  schedule(0);
}

main();
