// The snapshot view: what a user's program published with sharding_core.publish. A tree table of
// its leaves (filter by path, spec or mesh axis), a leaf's layout grid (the layout explorer's
// component), per-device memory as a Plotly bar chart with imbalance flagged, the processes of a
// multi-process run, the what-if of other Flax logical → mesh rules, and the diff of two snapshots
// or two processes. The whole state is in the URL; Copy link stores it as a share link.

import { ApiError, getJSON, postJSON } from "./api.js";
import { compactIds, fmtBytes } from "./format.js";
import { renderGrid } from "./grid.js";
import { renderNav } from "./nav.js";
import { shareLink } from "./share.js";
import { parseRules, rulesText } from "./snap_rules.js";

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const dark = () => window.matchMedia("(prefers-color-scheme: dark)").matches;
const ROW_H = 26; // px, the fixed height of a table row (CSS .leaf-table tr): the table is windowed
const OVERSCAN = 10;

const KEYS = ["snapshot", "run", "process", "q", "axis", "kind", "leaf", "rules", "diff"];
/** @type {Record<string, string>} */
let state = Object.fromEntries(KEYS.map((k) => [k, ""]));

/** @type {any} */
let snap = null;
/** what-if result: per leaf index its new spec/layout/error, and the new memory @type {any} */
let whatif = null;
/** @type {{type: "group"|"leaf", depth: number, label: string, key: string, index: number}[]} */
let rows = [];
/** @type {number[]} */
let shown = [];
/** @type {Set<string>} */
const collapsed = new Set();
let grid = null;
let plots = 0;
let filterTimer = 0;

/** @param {string} tag @param {string} [text] @param {string} [cls] */
function h(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function showError(box, err) {
  const el = $(box);
  el.replaceChildren();
  if (!err) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  const e = err instanceof ApiError ? err.error : { code: "error", message: String(err.message || err) };
  const p = h("p");
  p.append(h("code", e.code), " ", e.message);
  el.appendChild(p);
  if (e.hint) el.appendChild(h("p", `Hint: ${e.hint}`, "hint"));
}

function dl(rows_) {
  const d = h("dl");
  for (const [k, v] of rows_) {
    if (v === null || v === undefined || v === "") continue;
    d.append(h("dt", k), h("dd", String(v)));
  }
  return d;
}

// ---------------------------------------------------------------- URL state

function fromQuery(search) {
  const q = new URLSearchParams(search);
  const s = Object.fromEntries(KEYS.map((k) => [k, (q.get(k) || "").slice(0, 2000)]));
  return s;
}

function toQuery() {
  const q = new URLSearchParams();
  for (const k of KEYS) if (state[k]) q.set(k, state[k]);
  return q.toString();
}

function pushUrl(replace) {
  const url = `/snapshots.html?${toQuery()}`;
  if (location.pathname + location.search === url) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

/** The reference of what is on screen, as the API takes it. */
function currentRef() {
  if (state.run) return state.process !== "" ? { run: state.run, process: Number(state.process) } : { run: state.run };
  return { snapshot: state.snapshot };
}

// ---------------------------------------------------------------- leaves: what a leaf looks like now

/** The leaf's spec and layout, the what-if's when one applies. @param {number} i */
function view(i) {
  const leaf = snap.leaves[i];
  const w = whatif ? whatif.byIndex.get(i) : undefined;
  if (w) {
    return {
      spec: w.spec,
      layout: w.layout !== null ? whatif.layouts[w.layout] : snap.layouts[leaf.layout] || null,
      error: w.error,
      changed: w.changed,
      captured: leaf.spec,
    };
  }
  return { spec: leaf.spec, layout: leaf.layout !== null ? snap.layouts[leaf.layout] : null, error: null, changed: false, captured: leaf.spec };
}

const KIND_LABEL = {
  single_device: "single-device",
  sharded: "sharded, fully addressable",
  global: "global (across processes)",
};

/** @param {any} leaf */
function kindText(leaf) {
  if (leaf.array_kind) return KIND_LABEL[leaf.array_kind] || leaf.array_kind;
  return { shape_dtype_struct: "planned", sharding: "sharding", partition_spec: "spec", host: "host", array: "array" }[leaf.kind] || leaf.kind;
}

/** Mesh axes a layout splits dimensions over. @param {any} layout */
function axesOf(layout) {
  return layout ? layout.dims.flatMap((d) => d.axes) : [];
}

/** Lower-case text the filter box searches. @param {number} i */
function haystack(i) {
  const leaf = snap.leaves[i];
  const v = view(i);
  return [leaf.path, v.spec || "", leaf.dtype || "", (leaf.logical_axes || []).join(" "), axesOf(v.layout).join(" "), leaf.box || "", leaf.type]
    .join(" ")
    .toLowerCase();
}

/** @param {number} i */
function matches(i, q, axis, kind) {
  const leaf = snap.leaves[i];
  if (kind === "logical" && !leaf.logical_axes) return false;
  if (kind === "changed" && !view(i).changed) return false;
  if (kind === "sharding" && !["sharding", "partition_spec"].includes(leaf.kind)) return false;
  if (["array", "shape_dtype_struct"].includes(kind) && leaf.kind !== kind) return false;
  if (axis) {
    const layout = view(i).layout;
    if (axis === "(replicated)") {
      if (!layout || layout.replication_factor <= 1) return false;
    } else if (axis === "(not split)") {
      if (!layout || axesOf(layout).length) return false;
    } else if (!axesOf(layout).includes(axis)) return false;
  }
  if (q) {
    const text = haystack(i);
    return q.split(/\s+/).filter(Boolean).every((w) => text.includes(w));
  }
  return true;
}

// ---------------------------------------------------------------- the tree table (windowed)

function buildRows() {
  rows = [];
  let stack = [];
  snap.leaves.forEach((leaf, i) => {
    const parts = leaf.path.split("/");
    const groups = parts.slice(0, -1);
    let common = 0;
    while (common < stack.length && common < groups.length && stack[common] === groups[common]) common++;
    for (let d = common; d < groups.length; d++) {
      rows.push({ type: "group", depth: d, label: groups[d], key: groups.slice(0, d + 1).join("/"), index: -1 });
    }
    stack = groups;
    rows.push({ type: "leaf", depth: groups.length, label: parts[parts.length - 1], key: leaf.path, index: i });
  });
}

function applyFilter() {
  const q = state.q.trim().toLowerCase();
  const want = new Set();
  const groupsWanted = new Set();
  let count = 0;
  for (const r of rows) {
    if (r.type !== "leaf" || !matches(r.index, q, state.axis, state.kind)) continue;
    want.add(r.index);
    count++;
    const parts = r.key.split("/");
    for (let d = 1; d < parts.length; d++) groupsWanted.add(parts.slice(0, d).join("/"));
  }
  shown = [];
  rows.forEach((r, k) => {
    if (r.type === "leaf" ? !want.has(r.index) : !groupsWanted.has(r.key)) return;
    const parts = r.key.split("/");
    for (let d = 1; d < parts.length; d++) if (collapsed.has(parts.slice(0, d).join("/"))) return;
    shown.push(k);
  });
  const total = snap.leaves.length;
  $("leaf-count").textContent = count === total ? `${total} leaves` : `${count} of ${total} leaves match`;
  $("leaf-table").scrollTop = 0;
  drawRows();
}

function spacer(height) {
  const tr = h("tr", undefined, "spacer");
  const td = h("td");
  td.colSpan = 7;
  tr.appendChild(td);
  tr.style.height = `${height}px`;
  return tr;
}

function drawRows() {
  const box = $("leaf-table");
  const first = Math.max(0, Math.floor(box.scrollTop / ROW_H) - OVERSCAN);
  const count = Math.ceil((box.clientHeight || 400) / ROW_H) + 2 * OVERSCAN;
  const last = Math.min(shown.length, first + count);
  const body = $("leaf-rows");
  const out = [spacer(first * ROW_H)];
  for (let k = first; k < last; k++) out.push(rowEl(rows[shown[k]]));
  out.push(spacer((shown.length - last) * ROW_H));
  body.replaceChildren(...out);
  // For bench/bench_snapshots.py: when the table first had rows (ms since this page's navigation).
  if (!document.body.dataset.rowsAt && last > first) document.body.dataset.rowsAt = String(Math.round(performance.now()));
}

function rowEl(r) {
  const tr = h("tr");
  const name = h("td", undefined, "path");
  name.style.paddingLeft = `${0.4 + r.depth * 1.1}rem`;
  if (r.type === "group") {
    tr.className = "group";
    const b = h("button", `${collapsed.has(r.key) ? "▸" : "▾"} ${r.label}`, "link tree-toggle");
    b.type = "button";
    b.setAttribute("aria-expanded", String(!collapsed.has(r.key)));
    b.dataset.group = r.key;
    name.appendChild(b);
    name.colSpan = 7;
    tr.appendChild(name);
    return tr;
  }
  const leaf = snap.leaves[r.index];
  const v = view(r.index);
  tr.className = "leaf";
  tr.dataset.index = String(r.index);
  if (leaf.path === state.leaf) tr.classList.add("selected");
  const b = h("button", r.label, "link leaf-open");
  b.type = "button";
  b.dataset.index = String(r.index);
  b.title = leaf.path;
  name.appendChild(b);
  const spec = h("td", v.spec || "—", "mono");
  if (v.changed) spec.classList.add("changed");
  if (v.error) {
    spec.classList.add("bad");
    spec.title = v.error.message;
  }
  if (leaf.logical_axes) spec.title = spec.title || `logical axes (${leaf.logical_axes.map((n) => (n === null ? "None" : n)).join(", ")})`;
  const lay = v.layout;
  tr.append(
    name,
    h("td", leaf.shape ? `(${leaf.shape.join(", ")})` : "—", "mono"),
    h("td", leaf.dtype || "—", "mono"),
    spec,
    h("td", lay ? `(${lay.shard_shape.join(", ")})` : "—", "mono"),
    h("td", lay ? fmtBytes(lay.bytes_per_device) : "—", "num"),
    h("td", kindText(leaf), leaf.array_kind === "global" ? "global" : ""),
  );
  return tr;
}

// ---------------------------------------------------------------- one leaf: summary and grid

function deviceIndex() {
  const m = new Map();
  snap.devices.id.forEach((id, k) => m.set(id, k));
  return m;
}

/** The layout in the form renderGrid takes (what /api/layout answers). */
function gridLayout(leaf, layout) {
  const idx = deviceIndex();
  const order = layout.shards.map((s) => s.device_id);
  const col = (name) => order.map((id) => snap.devices[name][idx.get(id)]);
  const mesh = leaf.mesh !== null ? snap.meshes[leaf.mesh] : { shape: [order.length], axis_names: ["devices"], axis_types: ["Auto"], device_ids: order };
  return {
    ...layout,
    spec: layout.spec || "(no PartitionSpec)",
    devices_key: snap.name,
    platform: snap.platform,
    device_kind: snap.device_kind,
    mesh,
    devices: { id: order, process_index: col("process_index"), core_on_chip: col("core_on_chip"), coords: snap.devices.coords ? col("coords") : null },
  };
}

/** Devices whose shard of the leaf nobody here holds: non-addressable, or owned by a missing process. */
function notHeld(leaf, layout) {
  if (leaf.missing_devices) return new Set(leaf.missing_devices);
  if (leaf.addressable_devices) {
    const mine = new Set(leaf.addressable_devices);
    return new Set(layout.shards.map((s) => s.device_id).filter((d) => !mine.has(d)));
  }
  return new Set();
}

function selectLeaf(i, push) {
  const leaf = snap.leaves[i];
  state.leaf = leaf ? leaf.path : "";
  if (push) pushUrl(false);
  for (const tr of $("leaf-rows").querySelectorAll("tr.leaf")) tr.classList.toggle("selected", tr.dataset.index === String(i));
  renderLeaf();
}

function meshText(mesh) {
  return mesh ? `${mesh.axis_names.map((n, k) => `${n}(${mesh.shape[k]})`).join(" × ")} — devices ${JSON.stringify(mesh.device_ids)}` : null;
}

function renderLeaf() {
  const i = snap ? snap.leaves.findIndex((l) => l.path === state.leaf) : -1;
  const gridBox = $("leaf-grid");
  if (i < 0) {
    $("leaf-title").textContent = "Leaf";
    $("leaf-hint").hidden = false;
    $("leaf-summary").replaceChildren();
    gridBox.hidden = true;
    $("leaf-legend").hidden = true;
    grid = null;
    return;
  }
  const leaf = snap.leaves[i];
  const v = view(i);
  const lay = v.layout;
  $("leaf-title").textContent = leaf.path;
  $("leaf-hint").hidden = true;
  const mesh = leaf.mesh !== null ? snap.meshes[leaf.mesh] : null;
  const held = lay ? notHeld(leaf, lay) : new Set();
  const rowsDl = [
    ["type", leaf.box ? `${leaf.box} of ${leaf.type}` : leaf.type],
    ["kind", kindText(leaf) + (leaf.num_devices ? ` on ${leaf.num_devices} device${leaf.num_devices > 1 ? "s" : ""}` : "")],
    ["array", leaf.shape ? `(${leaf.shape.join(", ")}) ${leaf.dtype}` : null],
    ["spec", v.spec || (leaf.sharding ? leaf.sharding : null)],
    ["captured spec", v.changed || v.error ? v.captured : null],
    ["what-if error", v.error ? `${v.error.code}: ${v.error.message}` : null],
    ["declared", leaf.declared_spec && leaf.declared_spec !== v.spec ? leaf.declared_spec : null],
    ["logical axes", leaf.logical_axes ? `(${leaf.logical_axes.map((n) => (n === null ? "None" : `'${n}'`)).join(", ")})` : null],
    ["rules", leaf.rules ? rulesText(leaf.rules) : null],
    ["mesh", meshText(mesh)],
    ["memory kind", leaf.memory_kind],
    ["shard shape", lay ? `(${lay.shard_shape.join(", ")})` : null],
    ["per device", lay ? fmtBytes(lay.bytes_per_device) : null],
    ["total", lay ? `${fmtBytes(lay.total_bytes)} across ${lay.shards.length} devices vs ${fmtBytes(lay.logical_bytes)} logical` : null],
    ["replication", lay ? `${lay.replication_factor}×${lay.replicated_axes.length ? ` (over ${lay.replicated_axes.join(", ")})` : ""}` : null],
    ["processes", leaf.processes ? `reported by ${leaf.processes.join(", ")}` : null],
    ["not held", held.size ? `${snap.platform.toUpperCase()} ${compactIds([...held])}` : null],
    ["conflict", leaf.conflict],
    ["note", leaf.note],
  ];
  if (lay) lay.dims.forEach((d, k) => rowsDl.push([k === 0 ? "split" : " ", d.text]));
  $("leaf-summary").replaceChildren(dl(rowsDl));
  if (!lay) {
    gridBox.hidden = true;
    $("leaf-legend").hidden = true;
    grid = null;
    return;
  }
  grid = renderGrid(gridLayout(leaf, lay), { dims: null, dark: dark() });
  grid.relabel({ x: 0, y: 0, w: Number(grid.svg.dataset.width), h: Number(grid.svg.dataset.height) }, 1);
  gridBox.replaceChildren(grid.svg);
  gridBox.hidden = false;
  gridBox.dataset.path = leaf.path;
  for (const [k, t] of grid.tiles.entries()) {
    if (!t.ids.every((id) => held.has(id))) continue;
    for (const g of grid.svg.querySelectorAll(`.tile[data-tile="${k}"]`)) g.classList.add("not-held");
  }
  const legend = $("leaf-legend");
  legend.hidden = held.size === 0;
  legend.textContent = leaf.missing_devices
    ? "Faded tiles: shards on devices whose process did not report."
    : "Faded tiles: shards on other processes' devices (not addressable from the process that captured).";
}

function showTooltip(e) {
  const tip = $("tooltip");
  const k = grid ? grid.tileAt(e.target) : null;
  if (k === null) {
    tip.hidden = true;
    return;
  }
  tip.replaceChildren(...grid.describe(k).map((line) => h("div", line)));
  tip.hidden = false;
  const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = `${Math.max(0, x)}px`;
  tip.style.top = `${Math.max(0, y)}px`;
}

// ---------------------------------------------------------------- memory per device (Plotly)

/** @type {Promise<any> | null} */
let plotlyLoading = null;

/** Plotly, loaded on first use (after the table is drawn; the page preloads the file). */
function plotlyReady() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyLoading) {
    plotlyLoading = new Promise((resolve, reject) => {
      // After the next paint, so the table shows before Plotly's long first run.
      requestAnimationFrame(() =>
        setTimeout(() => {
          const script = document.createElement("script");
          script.src = "/vendor/plotly.min.js";
          script.addEventListener("load", () => resolve(window.Plotly));
          script.addEventListener("error", () => reject(new Error("could not load /vendor/plotly.min.js")));
          document.head.appendChild(script);
        }, 0),
      );
    });
  }
  return plotlyLoading;
}

function flagText(mem, label) {
  const platform = snap.platform.toUpperCase();
  if (!mem.devices_with_data) return `${label}: no leaf has a layout.`;
  const heavy = mem.heaviest.length ? `${platform} ${compactIds(mem.heaviest)}` : "—";
  const spread = `max ${fmtBytes(mem.max_bytes)}, min ${fmtBytes(mem.min_bytes)}, mean ${fmtBytes(Math.round(mem.mean_bytes))}`;
  return mem.imbalanced
    ? `${label}: imbalanced — ${heavy} hold${mem.heaviest.length > 1 ? "" : "s"} ${mem.ratio.toFixed(2)}× the mean (${spread}).`
    : `${label}: balanced — the busiest device holds ${mem.ratio.toFixed(2)}× the mean (${spread}).`;
}

async function plotMemory() {
  const mem = snap.memory;
  const next = whatif ? whatif.memory : null;
  const flag = $("memory-flag");
  flag.replaceChildren(h("span", flagText(mem, "Captured")));
  if (next) flag.append(h("br"), h("span", flagText(next, "What-if")));
  flag.classList.toggle("warn", Boolean((next || mem).imbalanced));
  const Plotly = await plotlyReady();
  const platform = snap.platform.toUpperCase();
  const owner = new Map(snap.devices.id.map((id, k) => [id, snap.devices.process_index[k]]));
  const x = mem.device_ids.map((id) => `${platform} ${id}`);
  const fg = dark() ? "#e6e8eb" : "#1b1f24";
  const colour = (m, base) => m.bytes.map((b, k) => (m.imbalanced && b === m.max_bytes ? "#d62728" : base[owner.get(m.device_ids[k]) % base.length]));
  const trace = (m, name, base, opacity) => ({
    type: "bar",
    name,
    x,
    y: m.bytes,
    customdata: m.bytes.map((b, k) => `${fmtBytes(b)} · host ${owner.get(m.device_ids[k])}`),
    hovertemplate: "%{x}: %{customdata}<extra>" + name + "</extra>",
    marker: { color: colour(m, base) },
    opacity,
  });
  const traces = [trace(mem, "captured", ["#4c78a8", "#72b7b2", "#54a24b", "#b279a2"], next ? 0.45 : 1)];
  if (next) traces.push(trace(next, "what-if", ["#f58518", "#e45756", "#eeca3b", "#ff9da6"], 1));
  const shown_ = next || mem;
  const layout = {
    barmode: "group",
    height: 280,
    margin: { l: 70, r: 10, t: 10, b: 60 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: fg, size: 11 },
    yaxis: { title: { text: "bytes" }, gridcolor: dark() ? "#2c323b" : "#e5e7eb", rangemode: "tozero" },
    xaxis: { type: "category", tickangle: x.length > 16 ? -60 : 0 },
    showlegend: Boolean(next),
    legend: { orientation: "h", y: 1.12 },
    shapes: shown_.devices_with_data
      ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: shown_.mean_bytes, y1: shown_.mean_bytes, line: { dash: "dot", width: 1, color: fg } }]
      : [],
  };
  const div = $("memory-chart");
  await Plotly.react(div, traces, layout, { displayModeBar: false, responsive: true });
  plots += 1;
  div.dataset.plotted = String(plots);
  if (plots === 1) document.body.dataset.plottedAt = String(Math.round(performance.now()));
}

// ---------------------------------------------------------------- header, processes, collectives

function renderHead() {
  const runInfo = snap.processes;
  $("snap-title").textContent = snap.name + (runInfo ? ` — run of ${runInfo.count} process${runInfo.count > 1 ? "es" : ""}` : "");
  const counts = {};
  for (const l of snap.leaves) counts[kindText(l)] = (counts[kindText(l)] || 0) + 1;
  const logical = snap.leaves.filter((l) => l.logical_axes).length;
  $("snap-summary").replaceChildren(
    dl([
      ["leaves", `${snap.leaves.length} (${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")})${snap.skipped ? `; ${snap.skipped} non-array leaves skipped` : ""}`],
      ["devices", `${snap.devices.id.length} ${snap.device_kind} (${snap.platform})`],
      ["meshes", snap.meshes.map((m) => m.axis_names.map((n, k) => `${n}(${m.shape[k]})`).join(" × ")).join("; ") || "none"],
      ["process", snap.process_index !== null && snap.process_index !== undefined ? `${snap.process_index} of ${snap.process_count}` : null],
      ["logical rules", snap.rules ? rulesText(snap.rules) : logical ? "none captured" : null],
      ["captured", `${new Date(snap.created * 1000).toLocaleString()} with JAX ${snap.jax_version}`],
      ["jit", snap.jit ? `${snap.jit.function}: per device ${Object.entries(snap.jit.memory_per_device || {}).map(([k, b]) => `${k.replace("_size_in_bytes", "")} ${fmtBytes(b)}`).join(", ")}` : null],
    ]),
  );
  const box = $("processes");
  box.replaceChildren();
  box.hidden = !runInfo && !state.run;
  if (runInfo) {
    box.appendChild(h("h3", `Processes: ${runInfo.reported.length} of ${runInfo.count} reported`));
    if (runInfo.missing.length) box.appendChild(h("p", `Missing: process ${runInfo.missing.join(", ")} — their shards are shown faded.`, "warn"));
    const table = h("table", undefined, "procs");
    const head = table.createTHead().insertRow();
    for (const t of ["process", "status", "devices"]) head.appendChild(h("th", t));
    const body = table.createTBody();
    runInfo.devices.forEach((ids, p) => {
      const tr = body.insertRow();
      const ok = runInfo.reported.includes(p);
      tr.append(h("td", String(p)), h("td", ok ? "reported" : "missing", ok ? "" : "bad"), h("td", `${snap.platform.toUpperCase()} ${compactIds(ids)}`));
    });
    box.appendChild(table);
    const sel = /** @type {HTMLSelectElement} */ ($("diff-process"));
    sel.replaceChildren(h("option", "—"));
    for (const p of runInfo.reported) {
      const o = h("option", `process ${p}`);
      o.value = String(p);
      sel.appendChild(o);
    }
    $("diff-process-field").hidden = false;
  } else if (state.run) {
    box.appendChild(h("p", `Process ${state.process} of run ${state.run.slice(0, 6)}…`));
  }
  const coll = snap.collectives;
  $("collectives-section").hidden = !coll || !coll.length;
  if (coll && coll.length) {
    const table = h("table", undefined, "procs");
    const head = table.createTHead().insertRow();
    for (const t of ["op", "result", "bytes", "device groups"]) head.appendChild(h("th", t));
    const body = table.createTBody();
    for (const c of coll) {
      const tr = body.insertRow();
      const groups = c.groups ? c.groups.map((g) => `{${compactIds(g)}}`).join(" ") : c.pairs ? c.pairs.map(([a, b]) => `${a}→${b}`).join(" ") : c.raw || "—";
      tr.append(h("td", c.op, "mono"), h("td", c.shape, "mono"), h("td", c.bytes !== null ? fmtBytes(c.bytes) : "—", "num"), h("td", groups, "mono"));
    }
    $("collectives").replaceChildren(table);
  }
  const axes = new Set();
  for (const m of snap.meshes) for (const a of m.axis_names) axes.add(a);
  const sel = /** @type {HTMLSelectElement} */ ($("axis-filter"));
  sel.replaceChildren(h("option", "any"));
  sel.options[0].value = "";
  for (const a of [...axes, "(replicated)", "(not split)"]) {
    const o = h("option", a);
    o.value = a;
    sel.appendChild(o);
  }
  sel.value = state.axis;
}

// ---------------------------------------------------------------- what-if

function defaultRules() {
  if (snap.rules) return rulesText(snap.rules);
  const withRules = snap.leaves.find((l) => l.rules);
  return withRules ? rulesText(withRules.rules) : "";
}

async function applyRules(text, push) {
  showError("whatif-error", null);
  if (!text.trim()) {
    whatif = null;
    state.rules = "";
    if (push) pushUrl(false);
    $("whatif-status").textContent = "";
    return refreshAll();
  }
  let rules;
  try {
    rules = parseRules(text);
  } catch (e) {
    showError("whatif-error", e);
    return;
  }
  $("whatif-status").textContent = "computing…";
  try {
    const res = await postJSON("/api/snapshots/whatif", { ref: currentRef(), rules });
    whatif = { ...res, byIndex: new Map(res.leaves.map((r) => [r.index, r])) };
    state.rules = text;
    if (push) pushUrl(false);
    $("whatif-status").textContent = `${res.leaves.length} logically named leaves: ${res.changed} change, ${res.errors} cannot be laid out`;
    document.body.dataset.whatif = String(Number(document.body.dataset.whatif || 0) + 1);
  } catch (e) {
    $("whatif-status").textContent = "";
    showError("whatif-error", e);
    return;
  }
  return refreshAll();
}

function refreshAll() {
  applyFilter();
  renderLeaf();
  return plotMemory();
}

// ---------------------------------------------------------------- diff

async function otherRef(text) {
  const t = text.trim();
  const proc = /^process\s*(\d+)$/i.exec(t);
  if (proc && state.run) return { run: state.run, process: Number(proc[1]) };
  const link = /\/s\/([A-Za-z0-9_-]{22,64})/.exec(t);
  if (link) {
    const saved = await getJSON(`/api/links/${link[1]}`);
    const s = saved.state || {};
    if (s.run) return s.process !== undefined && s.process !== "" ? { run: s.run, process: Number(s.process) } : { run: s.run };
    if (s.snapshot) return { snapshot: s.snapshot };
    throw new Error("that link is not a snapshot view");
  }
  const q = /[?&](snapshot|run)=([A-Za-z0-9_-]+)/.exec(t);
  if (q) return q[1] === "run" ? { run: q[2] } : { snapshot: q[2] };
  if (/^[A-Za-z0-9_-]{22,64}$/.test(t)) return { snapshot: t };
  throw new Error('paste a share link (…/s/<id>), a snapshot id, or "process N" in a run');
}

async function runDiff(text, push) {
  showError("diff-error", null);
  const out = $("diff-result");
  if (!text.trim()) {
    out.replaceChildren();
    state.diff = "";
    if (push) pushUrl(false);
    return;
  }
  $("diff-status").textContent = "comparing…";
  try {
    const res = await postJSON("/api/snapshots/diff", { a: currentRef(), b: await otherRef(text) });
    state.diff = text.trim();
    if (push) pushUrl(false);
    const s = res.summary;
    $("diff-status").textContent = "";
    const table = h("table", undefined, "procs diff");
    const head = table.createTHead().insertRow();
    for (const t of ["path", "status", "here", "there", "bytes to move"]) head.appendChild(h("th", t));
    const body = table.createTBody();
    for (const r of res.leaves.slice(0, 2000)) {
      const tr = body.insertRow();
      const b = h("button", r.path, "link");
      b.type = "button";
      b.addEventListener("click", () => {
        const i = snap.leaves.findIndex((l) => l.path === r.path);
        if (i >= 0) selectLeaf(i, true);
      });
      const cell = h("td");
      cell.appendChild(b);
      tr.append(cell, h("td", r.status, r.status), h("td", r.a_spec || "—", "mono"), h("td", r.b_spec || "—", "mono"), h("td", fmtBytes(r.bytes_to_move), "num"));
    }
    out.replaceChildren(
      h("p", `${s.changed} changed, ${s.added} added, ${s.removed} removed, ${s.same} the same; ${fmtBytes(s.bytes_to_move)} would move (bytes each device must receive).`, "diff-summary"),
      table,
    );
    document.body.dataset.diffs = String(Number(document.body.dataset.diffs || 0) + 1);
  } catch (e) {
    $("diff-status").textContent = "";
    showError("diff-error", e);
  }
}

// ---------------------------------------------------------------- sharing

async function copyLink() {
  try {
    const saved = Object.fromEntries(Object.entries(state).filter(([, v]) => v !== ""));
    $("status").textContent = await shareLink("snapshots", saved);
  } catch (e) {
    showError("snap-error", e);
  }
}

// ---------------------------------------------------------------- loading and wiring

async function load() {
  snap = null;
  whatif = null;
  if (state.run) {
    const merged = await getJSON(`/api/snapshots/runs/${encodeURIComponent(state.run)}`);
    if (state.process !== "") {
      const part = merged.processes.snapshots.find((p) => String(p.process_index) === state.process);
      if (!part) throw new ApiError(404, { code: "not_found", message: `process ${state.process} did not report to this run` });
      snap = await getJSON(`/api/snapshots/${part.id}`);
    } else snap = merged;
  } else if (state.snapshot) {
    snap = await getJSON(`/api/snapshots/${encodeURIComponent(state.snapshot)}`);
  }
}

async function start() {
  $("empty").hidden = Boolean(snap);
  if (!snap) return;
  renderHead();
  buildRows();
  /** @type {HTMLInputElement} */ ($("filter")).value = state.q;
  /** @type {HTMLSelectElement} */ ($("kind-filter")).value = state.kind;
  /** @type {HTMLTextAreaElement} */ ($("rules")).value = state.rules || defaultRules();
  const pending = [];
  if (state.rules) pending.push(applyRules(state.rules, false));
  else pending.push(refreshAll());
  await Promise.all(pending);
  if (state.diff) {
    /** @type {HTMLInputElement} */ ($("diff-with")).value = state.diff;
    await runDiff(state.diff, false);
  }
}

function wire() {
  const filter = /** @type {HTMLInputElement} */ ($("filter"));
  filter.addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = window.setTimeout(() => {
      state.q = filter.value;
      pushUrl(true);
      applyFilter();
      document.body.dataset.filtered = String(Number(document.body.dataset.filtered || 0) + 1);
    }, 80);
  });
  for (const [id, key] of [["axis-filter", "axis"], ["kind-filter", "kind"]]) {
    $(id).addEventListener("change", () => {
      state[key] = /** @type {HTMLSelectElement} */ ($(id)).value;
      pushUrl(false);
      applyFilter();
      document.body.dataset.filtered = String(Number(document.body.dataset.filtered || 0) + 1);
    });
  }
  const table = $("leaf-table");
  let pending = 0;
  table.addEventListener("scroll", () => {
    if (pending) return;
    pending = requestAnimationFrame(() => {
      pending = 0;
      drawRows();
    });
  });
  $("leaf-rows").addEventListener("click", (e) => {
    const target = /** @type {HTMLElement} */ (e.target);
    const toggle = target.closest(".tree-toggle");
    if (toggle) {
      const key = /** @type {HTMLElement} */ (toggle).dataset.group || "";
      if (collapsed.has(key)) collapsed.delete(key);
      else collapsed.add(key);
      const top = table.scrollTop;
      applyFilter();
      table.scrollTop = top;
      drawRows();
      return;
    }
    const row = target.closest("tr.leaf");
    if (row) selectLeaf(Number(/** @type {HTMLElement} */ (row).dataset.index), true);
  });
  $("apply-rules").addEventListener("click", () => applyRules(/** @type {HTMLTextAreaElement} */ ($("rules")).value, true));
  $("reset-rules").addEventListener("click", () => {
    /** @type {HTMLTextAreaElement} */ ($("rules")).value = defaultRules();
    applyRules("", true);
  });
  $("diff-run").addEventListener("click", () => {
    const sel = /** @type {HTMLSelectElement} */ ($("diff-process")).value;
    const text = /** @type {HTMLInputElement} */ ($("diff-with")).value || (sel ? `process ${sel}` : "");
    runDiff(text, true);
  });
  $("diff-clear").addEventListener("click", () => {
    /** @type {HTMLInputElement} */ ($("diff-with")).value = "";
    runDiff("", true);
  });
  $("copy-link").addEventListener("click", copyLink);
  const gridBox = $("leaf-grid");
  gridBox.addEventListener("mousemove", showTooltip);
  gridBox.addEventListener("mouseleave", () => ($("tooltip").hidden = true));
  window.addEventListener("popstate", () => boot(location.search));
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => snap && refreshAll());
}

async function boot(search) {
  showError("snap-error", null);
  const params = new URLSearchParams(search);
  const link = params.get("link");
  try {
    if (link && /^[A-Za-z0-9_-]{1,64}$/.test(link)) {
      const saved = await getJSON(`/api/links/${link}`);
      state = fromQuery(new URLSearchParams(Object.entries(saved.state || {}).map(([k, v]) => [k, String(v)])).toString());
      pushUrl(true); // the long form: copying the address bar shares the same view
    } else {
      state = fromQuery(search);
    }
    await load();
    await start();
  } catch (e) {
    showError("snap-error", e);
    $("empty").hidden = false;
  }
  document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
}

async function main() {
  renderNav("snapshots");
  wire();
  getJSON("/api/health")
    .then((health) => ($("jax-version").textContent = `JAX ${health.jax_version}`))
    .catch(() => {});
  await boot(location.search);
}

main();
