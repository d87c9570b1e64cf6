// The layout explorer: pickers, the PartitionSpec box, the grid, the mesh panel, sharing.

import { ApiError, getJSON, postJSON } from "./api.js";
import { fmtBytes } from "./format.js";
import { enableZoom, gridDims, renderGrid, deviceTable } from "./grid.js";
import { renderMesh } from "./meshpanel.js";
import { pageForLink, renderNav } from "./nav.js";
import { buildPickers, devicesToPickers, fillTopologies, pickersToDevices, setOptions } from "./pickers.js";
import { shareLink } from "./share.js";
import { DEFAULTS, fromObject, fromQuery, layoutRequest, toQuery } from "./state.js";

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const dark = () => window.matchMedia("(prefers-color-scheme: dark)").matches;

/** @type {import("./state.js").State} */
let state = { ...DEFAULTS };
let catalog = null;
let lastLayout = null;
let grid = null;
let mesh = null;
let zoom = null;
let inflight = null;
let debounce = 0;
let keystrokeAt = 0;

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

// ---------------------------------------------------------------- pickers <-> state

const FIELDS = { mesh: "mesh-shape", axes: "mesh-axes", order: "mesh-order", types: "mesh-types", shape: "array-shape", dtype: "array-dtype", spec: "spec" };

function stateToControls() {
  for (const [k, id] of Object.entries(FIELDS)) /** @type {HTMLInputElement} */ ($(id)).value = String(state[k]);
  devicesToPickers(state, catalog);
}

function controlsToState() {
  for (const [k, id] of Object.entries(FIELDS)) state[k] = /** @type {HTMLInputElement} */ ($(id)).value;
  pickersToDevices(state);
}

/** "0,2" -> [0, 2]; null unless two non-negative integers. @param {string} text */
function zeroBased(text) {
  const dims = text.split(",").map((d) => (/^\d{1,2}$/.test(d.trim()) ? Number(d) : NaN));
  return dims.length === 2 && dims.every(Number.isInteger) ? dims : null;
}

function fillGridDims(rank) {
  const sel = /** @type {HTMLSelectElement} */ ($("grid-dims"));
  const pairs = [];
  for (let i = 0; i < rank; i++) for (let j = i + 1; j < rank; j++) pairs.push(`${i},${j}`);
  const current = gridDims(rank, zeroBased(state.dims)).join(",");
  $("grid-dims-field").hidden = rank <= 2;
  if (rank <= 2) return;
  setOptions(sel, pairs, pairs.map((p) => `dims ${p.replace(",", " × ")}`));
  sel.value = current;
}

// ---------------------------------------------------------------- URL

function pushUrl(replace) {
  const url = `/?${toQuery(state)}`;
  if (location.pathname + location.search === url) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

// ---------------------------------------------------------------- rendering

function showError(err) {
  const box = $("spec-error");
  box.replaceChildren();
  if (!err) {
    box.hidden = true;
    $("grid").classList.remove("stale");
    return;
  }
  box.hidden = false;
  $("grid").classList.add("stale");
  const e = err instanceof ApiError ? err.error : { code: "error", message: String(err.message || err) };
  const head = document.createElement("p");
  const code = document.createElement("code");
  code.textContent = e.code;
  head.append(code, " ", e.message);
  box.appendChild(head);
  if (typeof e.column === "number" && e.code === "parse_error") {
    const pre = document.createElement("pre");
    pre.textContent = `${state.spec}\n${" ".repeat(Math.max(0, e.column - 1))}^ column ${e.column}`;
    box.appendChild(pre);
  }
  if (e.hint) {
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.textContent = `Hint: ${e.hint}`;
    box.appendChild(hint);
  }
}

function renderSummary(layout) {
  const rows = [
    ["spec", layout.spec],
    ["mesh", `${layout.mesh.axis_names.map((n, i) => `${n}(${layout.mesh.shape[i]})`).join(" × ")} over ${layout.devices_key}`],
    ["array", `${JSON.stringify(layout.shape)} ${layout.dtype}`],
    ["shard shape", JSON.stringify(layout.shard_shape)],
    ["replication", `${layout.replication_factor}×` + (layout.replicated_axes.length ? ` (replicated over ${layout.replicated_axes.join(", ")})` : " (no replication)") + (layout.unreduced_axes.length ? `; unreduced over ${layout.unreduced_axes.join(", ")}` : "")],
    ["per device", fmtBytes(layout.bytes_per_device)],
    ["total", `${fmtBytes(layout.total_bytes)} across ${layout.shards.length} devices vs ${fmtBytes(layout.logical_bytes)} logical`],
  ];
  layout.dims.forEach((d, i) => rows.push([i === 0 ? "split" : "", d.text]));
  const dl = document.createElement("dl");
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dl.append(dt, dd);
  }
  $("summary").replaceChildren(dl);
}

function render(layout) {
  lastLayout = layout;
  const rank = layout.shape.length;
  fillGridDims(rank);
  const wanted = rank > 2 ? zeroBased(/** @type {HTMLSelectElement} */ ($("grid-dims")).value) : null;
  grid = renderGrid(layout, { dims: wanted, dark: dark() });
  const host = $("grid");
  host.replaceChildren(grid.svg);
  performance.mark("grid-built");
  const g = grid;
  zoom = enableZoom(grid.svg, (view, scale) => g.relabel(view, scale));
  const tileOf = new Map();
  layout.shards.forEach((s) => tileOf.set(s.device_id, s.tile));
  mesh = renderMesh(layout, deviceTable(layout), tileOf, { dark: dark(), onDeviceClick: (id) => select(new Set([id])) });
  $("mesh").replaceChildren(mesh.element);
  renderSummary(layout);
  showError(null);
}

/** Highlight devices in both panels (null clears). @param {Set<number>|null} ids */
function select(ids) {
  grid?.highlight(ids);
  mesh?.highlight(ids);
  $("selection").textContent = ids ? `selected devices: ${[...ids].sort((a, b) => a - b).join(", ")}` : "";
}

async function refresh() {
  if (inflight) inflight.abort();
  const ctrl = new AbortController();
  inflight = ctrl;
  let req;
  try {
    req = layoutRequest(state);
  } catch (e) {
    showError(e);
    return;
  }
  $("status").textContent = "computing…";
  try {
    const t0 = performance.now();
    const layout = await postJSON("/api/layout", req, ctrl.signal);
    if (ctrl.signal.aborted) return;
    const t1 = performance.now();
    render(layout);
    const t2 = performance.now();
    performance.measure("fetch-layout", { start: t0, end: t1 });
    performance.measure("build-dom", { start: t1, end: t2 });
    $("status").textContent = "";
    requestAnimationFrame(() => {
      performance.mark("grid-painted");
      if (keystrokeAt) {
        performance.measure("keystroke-to-paint", { start: keystrokeAt, end: performance.now() });
        keystrokeAt = 0;
      }
      document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") return;
    $("status").textContent = "";
    showError(e);
    document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
  } finally {
    if (inflight === ctrl) inflight = null;
  }
}

function schedule(delay) {
  clearTimeout(debounce);
  debounce = window.setTimeout(refresh, delay);
}

// ---------------------------------------------------------------- sharing and downloads

async function copyLink() {
  try {
    $("status").textContent = await shareLink("layout", { ...state });
  } catch (e) {
    showError(e);
  }
}

function exportSvg() {
  if (!grid) return null;
  // Labels for the whole picture at its natural size, then back to the labels of the current view.
  grid.relabel({ x: 0, y: 0, w: Number(grid.svg.dataset.width), h: Number(grid.svg.dataset.height) }, 1);
  const clone = /** @type {SVGSVGElement} */ (grid.svg.cloneNode(true));
  zoom?.refresh();
  clone.setAttribute("viewBox", `0 0 ${grid.svg.dataset.width} ${grid.svg.dataset.height}`);
  clone.setAttribute("width", String(grid.svg.dataset.width));
  clone.setAttribute("height", String(grid.svg.dataset.height));
  return new XMLSerializer().serializeToString(clone);
}

function download(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

function downloadSvg() {
  const text = exportSvg();
  if (text) download(new Blob([text], { type: "image/svg+xml" }), "shardscope-layout.svg");
}

function downloadPng() {
  const text = exportSvg();
  if (!text || !grid) return;
  const w = Number(grid.svg.dataset.width);
  const h = Number(grid.svg.dataset.height);
  const img = new Image();
  const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
  img.onload = () => {
    const canvas = document.createElement("canvas");
    canvas.width = w * 2;
    canvas.height = h * 2;
    const ctx = canvas.getContext("2d");
    ctx.scale(2, 2);
    ctx.drawImage(img, 0, 0, w, h);
    URL.revokeObjectURL(url);
    canvas.toBlob((blob) => blob && download(blob, "shardscope-layout.png"), "image/png");
  };
  img.src = url;
}

// ---------------------------------------------------------------- tooltip

function showTooltip(e) {
  const tip = $("tooltip");
  const k = grid ? grid.tileAt(e.target) : null;
  if (k === null) {
    tip.hidden = true;
    return;
  }
  tip.replaceChildren(...grid.describe(k).map((line) => {
    const div = document.createElement("div");
    div.textContent = line;
    return div;
  }));
  tip.hidden = false;
  const pad = 14;
  const x = Math.min(e.clientX + pad, window.innerWidth - tip.offsetWidth - 8);
  const y = Math.min(e.clientY + pad, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = `${Math.max(0, x)}px`;
  tip.style.top = `${Math.max(0, y)}px`;
}

// ---------------------------------------------------------------- wiring

function onControlChange() {
  controlsToState();
  devicesToPickers(state, catalog);
  pushUrl(false);
  schedule(0);
}

function wire() {
  const spec = /** @type {HTMLInputElement} */ ($("spec"));
  spec.addEventListener("input", () => {
    keystrokeAt = performance.now();
    state.spec = spec.value;
    pushUrl(true);
    schedule(40);
  });
  for (const id of ["mesh-shape", "mesh-axes", "array-shape", "cpu-count", "gpu-hosts", "gpu-per-host", "tpu-slices"]) {
    $(id).addEventListener("input", () => {
      controlsToState();
      pushUrl(true);
      schedule(250);
    });
    $(id).addEventListener("change", onControlChange);
  }
  for (const id of ["mesh-order", "mesh-types", "array-dtype", "dev-kind", "gpu-kind", "tpu-topo"]) {
    $(id).addEventListener("change", onControlChange);
  }
  $("tpu-gen").addEventListener("change", () => {
    fillTopologies(catalog);
    onControlChange();
  });
  $("grid-dims").addEventListener("change", () => {
    state.dims = /** @type {HTMLSelectElement} */ ($("grid-dims")).value;
    pushUrl(false);
    if (lastLayout) render(lastLayout);
  });
  $("copy-link").addEventListener("click", copyLink);
  $("download-svg").addEventListener("click", downloadSvg);
  $("download-png").addEventListener("click", downloadPng);
  $("zoom-in").addEventListener("click", () => zoom?.zoom(0.8));
  $("zoom-out").addEventListener("click", () => zoom?.zoom(1.25));
  $("zoom-reset").addEventListener("click", () => zoom?.reset());
  $("clear-selection").addEventListener("click", () => select(null));
  const gridHost = $("grid");
  gridHost.addEventListener("mousemove", showTooltip);
  gridHost.addEventListener("mouseleave", () => ($("tooltip").hidden = true));
  gridHost.addEventListener("click", (e) => {
    if (grid?.svg.dataset.justDragged) {
      delete grid.svg.dataset.justDragged;
      return;
    }
    const k = grid ? grid.tileAt(e.target) : null;
    select(k === null ? null : new Set(grid.tiles[k].ids));
  });
  const list = $("examples");
  for (const ex of EXAMPLES) {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = ex.label;
    b.addEventListener("click", () => {
      state = { ...DEFAULTS, ...ex.s };
      stateToControls();
      pushUrl(false);
      schedule(0);
    });
    li.appendChild(b);
    list.appendChild(li);
  }
  window.addEventListener("popstate", () => {
    state = fromQuery(location.search);
    stateToControls();
    schedule(0);
  });
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => lastLayout && render(lastLayout));
}

async function main() {
  renderNav("layout");
  wire();
  const link = location.pathname.match(/^\/s\/([A-Za-z0-9_-]{1,64})$/);
  // A share link is read first: one for another view goes straight to that view's page.
  const saved = link ? getJSON(`/api/links/${link[1]}`) : null;
  const platforms = getJSON("/api/platforms");
  const health = getJSON("/api/health");
  // Handled below (or moot after a redirect): no "unhandled rejection" on the way out.
  platforms.catch(() => {});
  health.catch(() => {});
  if (saved) {
    try {
      const linked = await saved;
      const elsewhere = pageForLink(linked.view, link[1]);
      if (elsewhere) {
        location.replace(elsewhere);
        return;
      }
      state = fromObject(linked.state || {});
    } catch (e) {
      showError(e);
    }
  } else {
    state = fromQuery(location.search);
  }
  try {
    catalog = await platforms;
    buildPickers(catalog);
    $("jax-version").textContent = `JAX ${(await health).jax_version}`;
  } catch (e) {
    showError(e);
  }
  stateToControls();
  refresh();
}

main();
