// views/: one module per page, wiring lib, model and components to the page's own elements and URL.
// This module: the layout explorer (index.html) — the PartitionSpec box first (specs, pasted
// NamedSharding / SingleDeviceSharding reprs, logical names with Flax rules), the device and mesh
// pickers (every mesh constructor the API has), the grid and the mesh table highlighting each other,
// the summary, downloads and the share link.

import { ApiError, newestWins, platformsCatalog, postJSON } from "../lib/api.js";
import { download, defList, el, setOptions } from "../lib/dom.js";
import { errorFields, showError } from "../lib/errors.js";
import { compactIds } from "../lib/format.js";
import { hideCard } from "../lib/hovercard.js";
import { bootPage, bump, byId, isDark, onThemeChange } from "../lib/page.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { gridDims, layoutGrid } from "../components/grid.js";
import { meshTable } from "../components/mesh_table.js";
import { layoutControls } from "../components/pickers.js";
import { reshardBox } from "../components/reshard.js";
import { layoutFacts } from "../model/facts.js";
import { Layout } from "../model/layout.js";
import { parsePasted, straightQuotes } from "../model/paste.js";
import { DEFAULTS, ORDERS, fromQuery, layoutRequest, toQuery } from "../model/state.js";

const EXAMPLES = [
  { label: "2x4 mesh, P('x', 'y')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P('x', 'y')", shape: "8,16" } },
  { label: "2x4 mesh, P('x')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P('x')", shape: "8,16" } },
  { label: "2x4 mesh, P(None, 'y')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P(None, 'y')", shape: "8,16" } },
  { label: "one device: jax.device_put(x, device)", s: { devices: "cpu:8", mesh: "1x1", axes: "x,y", order: "single", ids: "0", spec: "P()", shape: "8,16" } },
  { label: "(data, model): weights P(None, 'model')", s: { devices: "cpu:8", mesh: "4x2", axes: "data,model", spec: "P(None, 'model')", shape: "16,32" } },
  { label: "(data, model): weights P('model', None)", s: { devices: "cpu:8", mesh: "4x2", axes: "data,model", spec: "P('model', None)", shape: "32,16" } },
  { label: "batch over both axes: P(('data', 'model'),)", s: { devices: "cpu:8", mesh: "2x4", axes: "data,model", spec: "P(('data', 'model'),)", shape: "8,1024" } },
  { label: "Flax logical names: ('embed', 'hidden')", s: { devices: "cpu:8", mesh: "2x4", axes: "data,model", spec: "('embed', 'hidden')", shape: "16,32", rules: "('batch', 'data'), ('hidden', 'model'), ('embed', None)" } },
  { label: "v3 8 cores: ring order 0 1 2 3 6 7 4 5", s: { devices: "tpu:v3:2x2", mesh: "8", axes: "x", spec: "P('x')", shape: "16" } },
  { label: "explicit device order 0 2 1 3", s: { devices: "cpu:4", mesh: "4", axes: "x", order: "devices", ids: "0,2,1,3", spec: "P('x')", shape: "8" } },
  { label: "2 v5e slices: hybrid ICI × DCN", s: { devices: "tpu:v5e:2x2", slices: 2, mesh: "2x4", axes: "data,model", order: "hybrid", dcn: "2x1", spec: "P('data', 'model')", shape: "8,16" } },
  { label: "v5e 16x16: 256 chips, P(('x', 'y'), None)", s: { devices: "tpu:v5e:16x16", mesh: "16x16", axes: "x,y", spec: "P(('x', 'y'), None)", shape: "1024,1024" } },
  { label: "rank 3: P('x', None, 'y')", s: { devices: "cpu:8", mesh: "2x4", axes: "x,y", spec: "P('x', None, 'y')", shape: "4,6,16" } },
];

/** Typing this long ago (ms) counts as having paused: only then does an error show and speak. */
const SETTLE_MS = 600;

const specBox = /** @type {HTMLInputElement} */ (byId("spec"));
const rulesBox = /** @type {HTMLTextAreaElement} */ (byId("rules"));
const dimsBox = /** @type {HTMLSelectElement} */ (byId("grid-dims"));
const errorBox = byId("spec-error");
const status = byId("status");

/** @type {import("../model/state.js").State} */
let state = fromQuery(pageQuery());
/** @type {Layout | null} */
let layout = null;
/** @type {import("../components/grid.js").GridView | null} */
let grid = null;
/** @type {import("../components/mesh_table.js").MeshTableView | null} */
let mesh = null;
let meshKey = "";
/** @type {Set<number> | null} */
let selected = null;
let keystrokeAt = 0;
let typedAt = 0;
let errorTimer = 0;
let shownError = "";
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
  rulesBox.value = state.rules;
  if (state.rules) /** @type {HTMLDetailsElement} */ (byId("rules-box")).open = true;
}

function controlsToState() {
  controls?.read(state);
  state.spec = specBox.value;
  state.rules = rulesBox.value;
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

/** A line under the spec box saying what was done to what was pasted (empty: none). @param {string} text */
function note(text) {
  const p = byId("spec-note");
  p.textContent = text;
  p.hidden = !text;
}

// ---------------------------------------------------------------- errors

/**
 * Shows (or, with null, clears) what is wrong. The last good picture stays, dimmed with the summary
 * and the mesh table, at once; the explanation shows (and the alert speaks) only once typing has
 * paused and only when it says something new, so a screen reader hears one message per pause, not
 * one per keystroke.
 * @param {unknown} err
 */
function fail(err) {
  clearTimeout(errorTimer);
  if (!err) {
    markStale(false);
    shownError = "";
    showError(errorBox, null);
    return;
  }
  const wait = Math.max(0, typedAt + SETTLE_MS - performance.now());
  errorTimer = window.setTimeout(() => {
    markStale(true);
    const e = errorFields(err);
    const key = `${e.code}|${e.message}|${state.spec}`;
    if (key === shownError) return;
    shownError = key;
    showError(errorBox, err, { source: state.spec });
    explainMore(e);
    bump("errorShown");
  }, wait);
}

/** Dims the picture, the summary and the mesh table, which are the last valid layout's. @param {boolean} on */
function markStale(on) {
  const stale = on && Boolean(layout);
  const results = byId("results");
  if (results.classList.contains("stale") === stale) return;
  results.classList.toggle("stale", stale);
  const staleNote = byId("stale-note");
  staleNote.hidden = !stale;
  if (stale && layout) staleNote.textContent = `Still showing the last valid layout: ${layout.spec} on ${JSON.stringify(layout.shape)}.`;
}

/**
 * One-click ways out under the explanation: the hybrid mesh JAX's message asks for, split physical
 * axes, logical rules for names no mesh has.
 * @param {ReturnType<typeof errorFields> & Record<string, any>} e
 */
function explainMore(e) {
  /** @param {string} label @param {() => void} act */
  const action = (label, act) => {
    const b = el("button", "fix", label);
    b.type = "button";
    b.addEventListener("click", act);
    errorBox.appendChild(b);
  };
  const fix = e.suggest;
  if (e.code === "mesh_unplaceable" && fix && fix.order === "hybrid") {
    action(`Use a hybrid ICI × DCN mesh with DCN shape ${fix.dcn_shape.join("x")}`, () => {
      Object.assign(state, { order: "hybrid", dcn: fix.dcn_shape.join("x") });
      commit();
    });
  }
  if (e.code === "mesh_unplaceable" && fix && fix.allow_split_physical_axes) {
    action("Allow split physical axes", () => {
      Object.assign(state, { split: "1", order: state.order === "hybrid" ? "hybrid" : "make_mesh" });
      commit();
    });
  }
  if (e.code === "mesh_unplaceable") {
    action("Use iota (a plain reshape)", () => {
      state.order = "iota";
      commit();
    });
  }
  if (e.code === "unknown_axis" && !state.rules.trim()) {
    errorBox.appendChild(el("p", "", `Is ${JSON.stringify(e.axis ?? "")} a logical axis name (Flax's nn.with_logical_partitioning)? Give the logical → mesh rules and the spec is laid out as Flax would.`));
    action("Add logical → mesh rules", () => {
      const box = /** @type {HTMLDetailsElement} */ (byId("rules-box"));
      box.open = true;
      rulesBox.focus();
    });
  }
}

// ---------------------------------------------------------------- rendering

/** @param {Layout} l */
function renderSummary(l) {
  const spec = l.spec + (state.rules.trim() ? `  (logical ${state.spec.trim()} under the rules)` : "");
  byId("summary").replaceChildren(defList(layoutFacts(l, { spec, single: state.order === "single" })));
}

/** The mesh table: rebuilt for a new mesh, recoloured when only the layout changed. @param {Layout} l @param {boolean} dark */
function renderMesh(l, dark) {
  const m = l.mesh;
  const key = `${l.devicesKey}|${m.shape}|${m.axis_names.join("\u0000")}|${m.axis_types}|${l.meshIds.join(",")}|${dark}`;
  const colour = (/** @type {number} */ id) => l.colourOf(id, dark);
  const title = (/** @type {number} */ id, /** @type {number[]} */ at) => `device ${id}: ${l.whereIs(id)}; mesh index (${at.join(", ")})`;
  if (mesh && key === meshKey) {
    mesh.recolour(colour, title);
  } else {
    meshKey = key;
    mesh = meshTable(byId("mesh"), m, {
      caption: [`Mesh(${m.axis_names.map((n, i) => `'${n}': ${m.shape[i]}`).join(", ")}) — axis types ${m.axis_types.join(", ")}`],
      colour,
      title,
      onDeviceClick: (id) => select(new Set([id])),
    });
  }
  mesh.highlight(selected);
}

/** @param {Layout} l */
function render(l) {
  layout = l;
  const dark = isDark();
  selected = null;
  // the grid first: it measures its container, which is cheapest before anything else changed
  const rank3 = l.rank > 2;
  if (rank3) fillGridDims(l.rank);
  grid = layoutGrid(byId("grid"), l, {
    dims: rank3 ? zeroBased(dimsBox.value) : null,
    dark,
    onTileClick: (ids) => select(ids && new Set(ids)),
    // the whole picture in view under the spec box, however many rows
    maxHeight: Math.max(280, window.innerHeight - 330),
  });
  performance.mark("grid-built");
  if (!rank3) fillGridDims(l.rank);
  if (byId("selection").textContent) byId("selection").textContent = "";
  renderSummary(l);
  fail(null);
}

/** Highlights devices in the grid and the mesh table (null clears). @param {Set<number> | null} ids */
function select(ids) {
  selected = ids;
  grid?.highlight(ids);
  mesh?.highlight(ids);
  byId("selection").textContent = ids ? `selected devices: ${layout ? layout.platform + " " : ""}${compactIds([...ids])}` : "";
}

/**
 * Layouts already fetched, newest last, bounded by their shards in all: typing back and forth
 * between specs shows each one again without a round trip.
 * @type {Map<string, Layout>}
 */
const fetched = new Map();
const FETCHED_SHARDS = 4 * 6144;

/** @param {string} key @param {Layout} l */
function keep(key, l) {
  fetched.delete(key);
  fetched.set(key, l);
  let total = 0;
  for (const v of fetched.values()) total += v.shards.length;
  for (const [k, v] of fetched) {
    if (total <= FETCHED_SHARDS || fetched.size <= 1) break;
    fetched.delete(k);
    total -= v.shards.length;
  }
}

/** Lays out the state's array (a newer request aborts this one). @param {AbortSignal} signal */
async function refresh(signal) {
  let req;
  try {
    req = layoutRequest(state);
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e);
    fail(/rule|column/.test(text) && state.rules.trim() && !/shape/.test(text) ? new ApiError(422, { code: "bad_rules", message: text }) : e);
    bump("errors");
    return;
  }
  const key = JSON.stringify(req);
  const t0 = performance.now();
  let l = fetched.get(key);
  if (!l) {
    status.textContent = "computing…";
    const json = await postJSON("/api/layout", req, signal);
    signal.throwIfAborted();
    l = Layout.fromApi(json);
  }
  keep(key, l);
  const t1 = performance.now();
  render(l);
  const t2 = performance.now();
  performance.measure("fetch-layout", { start: t0, end: t1 });
  performance.measure("build-dom", { start: t1, end: t2 });
  if (status.textContent) status.textContent = "";
  if (reshardPending && reshard) {
    reshardPending = false;
    reshard.run();
  } else reshard?.stale();
  requestAnimationFrame(() => {
    performance.mark("grid-painted");
    if (keystrokeAt) {
      performance.measure("keystroke-to-paint", { start: keystrokeAt, end: performance.now() });
      keystrokeAt = 0;
    }
    // the mesh table (up to 16384 cells) after the grid is on screen
    setTimeout(() => {
      if (layout !== l) return;
      renderMesh(l, isDark());
      bump("rendered");
    }, 0);
  });
}

const schedule = newestWins(refresh, (e) => {
  status.textContent = "";
  fail(e);
  bump("errors");
});

// ---------------------------------------------------------------- downloads

/** What the files are called: the spec and the mesh, in characters any file system takes. */
function fileName() {
  const l = layout;
  const base = l ? `${l.spec}-${l.mesh.shape.join("x")}-${l.shape.join("x")}` : "layout";
  return `shardscope-${base.replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/_+/g, "_").slice(0, 80)}`;
}

function downloadSvg() {
  if (grid) download(new Blob([grid.svgText()], { type: "image/svg+xml" }), `${fileName()}.svg`);
}

function downloadPng() {
  grid?.pngBlob(2).then((blob) => download(blob, `${fileName()}.png`), fail);
}

// ---------------------------------------------------------------- wiring

/** The state changed as a whole (a fix, an example): controls, URL and a new layout. */
function commit() {
  stateToControls();
  pushUrl(false);
  schedule(0);
}

/** A control committed a change: a new history entry, and a new layout at once. */
function onControlChange() {
  controlsToState();
  stateToControls();
  pushUrl(false);
  schedule(0);
}

/** A field is being typed in: the same history entry, a new layout once typing pauses. */
function onControlInput() {
  typedAt = performance.now();
  controlsToState();
  pushUrl(true);
  schedule(150);
}

/**
 * What the spec box holds after typing or pasting: JAX's print of a sharding sets the mesh (and
 * the spec, or a single device); typographic quotes become straight ones.
 */
function onSpecInput() {
  keystrokeAt = typedAt = performance.now();
  const text = specBox.value;
  const pasted = parsePasted(text);
  if (pasted) {
    applyPasted(pasted);
    return;
  }
  const straight = straightQuotes(text);
  if (straight !== text) {
    const at = specBox.selectionStart;
    specBox.value = straight;
    if (at !== null) specBox.setSelectionRange(at, at);
    note("Curly quotes replaced with straight ones.");
  } else if (byId("spec-note").textContent.startsWith("Curly")) note("");
  state.spec = specBox.value;
  pushUrl(true);
  schedule(0);
}

/** @param {import("../model/paste.js").Pasted} p */
function applyPasted(p) {
  const said = [];
  if (p.kind === "single") {
    Object.assign(state, { order: "single", ids: String(p.device), spec: "P()" });
    said.push(`one device, id ${p.device} (SingleDeviceSharding)`);
  }
  if (p.mesh) {
    const mm = p.mesh;
    const n = mm.shape.reduce((a, b) => a * b, 1);
    Object.assign(state, { mesh: mm.shape.join("x"), axes: mm.axis_names.join(","), split: "", dcn: "" });
    if (mm.device_ids) Object.assign(state, { order: "devices", ids: mm.device_ids.join(",") });
    else if (!["make_mesh", "iota"].includes(state.order)) Object.assign(state, { order: "make_mesh", ids: "" });
    const types = mm.axis_types ? [...new Set(mm.axis_types)] : [];
    if (types.length === 1) state.types = types[0];
    said.push(`mesh ${mm.axis_names.map((a, i) => `${a}(${mm.shape[i]})`).join(" × ")}${types.length === 1 ? `, ${types[0]} axes` : ""}`);
    const cpu = /^cpu:(\d+)$/.exec(state.devices);
    if (cpu && Number(cpu[1]) < n) state.devices = `cpu:${n}`;
    said.push(`devices ${state.devices} (the repr names none${mm.device_ids ? "; its device ids set the order" : ""})`);
  }
  if (p.spec) {
    state.spec = p.spec;
    said.push(`spec ${p.spec}`);
  }
  if (p.memoryKind && p.memoryKind !== "None") said.push(`memory kind ${p.memoryKind} (not drawn)`);
  const what = { named: "NamedSharding", single: "SingleDeviceSharding", mesh: "Mesh" }[p.kind];
  note(`From the pasted ${what}: ${said.join("; ")}.`);
  stateToControls();
  pushUrl(false);
  schedule(0);
}

/** Keys for the whole page: / jumps to the spec box, Escape clears the selection. @param {KeyboardEvent} e */
function onPageKey(e) {
  const t = /** @type {HTMLElement} */ (e.target);
  const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || t.isContentEditable;
  if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
    e.preventDefault();
    specBox.focus();
    specBox.select();
  } else if (e.key === "Escape") {
    hideCard();
    if (selected) select(null);
  }
}

function wire() {
  specBox.addEventListener("input", onSpecInput);
  rulesBox.addEventListener("input", () => {
    typedAt = performance.now();
    state.rules = rulesBox.value;
    pushUrl(true);
    schedule(150);
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
  document.addEventListener("keydown", onPageKey);
  const list = byId("examples");
  for (const ex of EXAMPLES) {
    const b = el("button", "", ex.label);
    b.type = "button";
    b.addEventListener("click", () => {
      state = { ...DEFAULTS, ...ex.s };
      note("");
      commit();
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
  onThemeChange(() => {
    meshKey = "";
    if (layout) {
      render(layout);
      renderMesh(layout, isDark());
    }
  });
}

async function main() {
  bootPage("layout");
  wire();
  // the picture loads from the address while the pickers wait for the catalog
  specBox.value = state.spec;
  rulesBox.value = state.rules;
  schedule(0);
  const catalog = await platformsCatalog(fail);
  controls = layoutControls(byId("pickers"), catalog, {
    fields: { shape: /** @type {HTMLInputElement} */ (byId("array-shape")), dtype: /** @type {HTMLSelectElement} */ (byId("array-dtype")) },
    types: [["", "JAX's default"], ["auto", "all Auto"], ["explicit", "all Explicit"]],
    orders: ORDERS,
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
  if (reshardPending && layout) {
    // the picture came first (it loads while the pickers wait for the catalog): now its reshard
    reshardPending = false;
    reshard.run();
  }
  // the main action first: the spec box has the focus where a keyboard is the likely input
  if (window.matchMedia("(pointer: fine)").matches && !document.activeElement?.closest("input, select, textarea")) {
    specBox.focus({ preventScroll: true });
  }
}

main();
