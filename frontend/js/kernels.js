// The kernel lab: pick a catalog kernel, a device set, a mesh and the inputs' specs, run it in the
// server's worker processes, and see every output's layout, the collectives XLA inserted, memory,
// cost, correctness, Shardy's sharding origins and the HLO. State lives in the URL.

import { ApiError, getJSON, postJSON } from "./api.js";
import { compactIds, deviceColour, fmtBytes } from "./format.js";
import { enableZoom, renderGrid } from "./grid.js";
import { pageForLink, renderNav } from "./nav.js";
import { buildPickers, devicesToPickers, fillTopologies, pickersToDevices, setOptions } from "./pickers.js";
import { shareLink } from "./share.js";

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const dark = () => window.matchMedia("(prefers-color-scheme: dark)").matches;
const POLL_MS = [60, 100, 150, 250, 400];

/** @typedef {{shape: string, spec: string, dtype: string}} InputState */
/** @typedef {{kernel: string, devices: string, slices: number, mesh: string, axes: string, order: string,
 *   types: string, inputs: InputState[], params: Record<string, string>, outs: string[]}} KState */

/** @type {any[]} */
let kernels = [];
/** @type {any} */
let platforms = null;
/** @type {string[]} */
let dtypes = ["float32"];
/** @type {KState} */
let state = blank();
/** @type {any} */
let lastResult = null;
/** The state of the run on screen (its devices and order, for the topology link). @type {KState} */
let ranWith = blank();
let runToken = 0;
/** @type {Map<SVGSVGElement, any>} */
const grids = new Map();

function blank() {
  return { kernel: "", devices: "cpu:8", slices: 1, mesh: "2x4", axes: "x,y", order: "make_mesh", types: "auto",
    inputs: [], params: {}, outs: [] };
}

/** @param {string} tag @param {string} [cls] @param {string} [text] */
function make(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

const kernelOf = (name) => kernels.find((k) => k.name === name);

// ---------------------------------------------------------------- state <-> URL

/** @param {KState} s */
function toQuery(s) {
  const q = new URLSearchParams();
  q.set("kernel", s.kernel);
  q.set("devices", s.devices);
  if (s.slices > 1) q.set("slices", String(s.slices));
  q.set("mesh", s.mesh);
  q.set("axes", s.axes);
  q.set("order", s.order);
  q.set("types", s.types);
  for (const i of s.inputs) q.append("in", `${i.shape}|${i.spec}|${i.dtype}`);
  for (const [k, v] of Object.entries(s.params)) q.set(`p.${k}`, v);
  if (s.outs.some((o) => o.trim())) for (const o of s.outs) q.append("out", o);
  return q.toString();
}

/**
 * The state a query describes: what it names, the kernel's catalog defaults for the rest (so a short
 * link such as `?kernel=matmul_xxt&types=explicit` is complete).
 * @param {URLSearchParams} q @returns {KState | null}
 */
function fromParams(q) {
  const k = kernelOf(q.get("kernel") || "");
  if (!k) return null;
  const s = defaultsFor(k);
  const str = (key) => (q.get(key) ?? "").slice(0, 600);
  for (const key of ["devices", "mesh", "axes", "order", "types"]) if (q.has(key)) s[key] = str(key);
  if (q.has("slices")) s.slices = Math.max(1, Math.min(64, parseInt(str("slices"), 10) || 1));
  const given = q.getAll("in").slice(0, 16);
  given.forEach((v, i) => {
    const [shape = "", spec = "P()", dtype = "float32"] = v.slice(0, 600).split("|");
    if (i < s.inputs.length) s.inputs[i] = { shape, spec, dtype };
  });
  for (const [key, v] of q.entries()) if (key.startsWith("p.") && key.slice(2) in s.params) s.params[key.slice(2)] = v.slice(0, 600);
  q.getAll("out").slice(0, s.outs.length).forEach((v, i) => (s.outs[i] = v.slice(0, 600)));
  return s;
}

function pushUrl(replace) {
  const url = `/kernels.html?${toQuery(state)}`;
  if (location.pathname + location.search === url) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

// ---------------------------------------------------------------- controls

/** The catalog's defaults for a kernel. @param {any} k @returns {KState} */
function defaultsFor(k) {
  return {
    kernel: k.name,
    devices: k.devices,
    slices: 1,
    mesh: k.mesh.shape.join("x"),
    axes: k.mesh.axis_names.join(","),
    order: "make_mesh",
    types: String(k.mesh.axis_types[0]).toLowerCase(),
    inputs: k.inputs.map((i) => ({ shape: i.shape.join(","), spec: i.spec, dtype: i.dtype })),
    params: Object.fromEntries(k.params.map((p) => [p.name, p.default])),
    outs: (k.outputs || []).map(() => ""),
  };
}

function fillKernelSelect() {
  const sel = /** @type {HTMLSelectElement} */ ($("kernel"));
  sel.replaceChildren();
  const groups = [["jit", "jit (the compiler shards)"], ["shard_map", "shard_map (per-device code)"]];
  for (const [mode, label] of groups) {
    const og = document.createElement("optgroup");
    og.label = label;
    for (const k of kernels.filter((x) => x.mode === mode && !x.requires)) og.appendChild(option(k));
    if (og.children.length) sel.appendChild(og);
  }
  const extra = kernels.filter((x) => x.requires);
  if (extra.length) {
    const og = document.createElement("optgroup");
    og.label = "Flax (optional extra)";
    for (const k of extra) og.appendChild(option(k));
    sel.appendChild(og);
  }
}

function option(k) {
  const o = document.createElement("option");
  o.value = k.name;
  o.textContent = k.title + (k.available ? "" : " — not installed");
  o.disabled = !k.available;
  return o;
}

function showKernelInfo(k) {
  $("kernel-doc").textContent = k.doc;
  $("kernel-explicit").hidden = !k.explicit;
  $("kernel-explicit").textContent = k.explicit ? `With Explicit axes: ${k.explicit}.` : "";
  const link = /** @type {HTMLAnchorElement} */ ($("kernel-tutorial"));
  link.hidden = !k.tutorial;
  if (k.tutorial) link.href = k.tutorial;
  $("kernel-reference").textContent = k.reference;
  $("kernel-source").textContent = k.source;
}

/** One labelled text field. */
function field(label, value, id, aria) {
  const l = make("label");
  l.append(label);
  const input = /** @type {HTMLInputElement} */ (make("input"));
  input.type = "text";
  input.id = id;
  input.value = value;
  input.spellcheck = false;
  input.autocomplete = "off";
  if (aria) input.setAttribute("aria-label", aria);
  l.appendChild(input);
  return l;
}

function buildArrayControls(k) {
  const box = $("inputs");
  box.replaceChildren();
  if (!k.inputs.length) box.appendChild(make("p", "muted", "This kernel takes no inputs (it creates its arrays)."));
  k.inputs.forEach((meta, i) => {
    const s = state.inputs[i] || { shape: meta.shape.join(","), spec: meta.spec, dtype: meta.dtype };
    const row = make("div", "kernel-input");
    row.appendChild(make("span", "input-name", meta.name));
    const r = make("div", "row");
    r.append(
      field("Shape", s.shape, `in-${i}-shape`, `${meta.name} shape`),
      field("PartitionSpec", s.spec, `in-${i}-spec`, `${meta.name} PartitionSpec`),
    );
    const dl = make("label");
    dl.append("dtype");
    const sel = /** @type {HTMLSelectElement} */ (make("select"));
    sel.id = `in-${i}-dtype`;
    sel.setAttribute("aria-label", `${meta.name} dtype`);
    setOptions(sel, dtypes);
    sel.value = s.dtype;
    dl.appendChild(sel);
    r.appendChild(dl);
    row.appendChild(r);
    box.appendChild(row);
  });
  const params = $("params");
  params.replaceChildren();
  $("params-box").hidden = !k.params.length;
  for (const p of k.params) {
    const l = field(`${p.name} — ${p.doc}`, state.params[p.name] ?? p.default, `param-${p.name}`, p.name);
    params.appendChild(l);
  }
  const outs = $("outs");
  outs.replaceChildren();
  $("outs-box").hidden = !k.outputs;
  (k.outputs || []).forEach((name, i) => {
    const l = field(`${name}`, state.outs[i] || "", `out-${i}`, `${name} out spec`);
    /** @type {HTMLInputElement} */ (l.querySelector("input")).placeholder = "JAX decides";
    outs.appendChild(l);
  });
}

function stateToControls() {
  const k = kernelOf(state.kernel);
  if (!k) return;
  /** @type {HTMLSelectElement} */ ($("kernel")).value = k.name;
  showKernelInfo(k);
  for (const [key, id] of [["mesh", "mesh-shape"], ["axes", "mesh-axes"], ["order", "mesh-order"], ["types", "mesh-types"]]) {
    /** @type {HTMLInputElement} */ ($(id)).value = String(state[key]);
  }
  devicesToPickers(state, platforms);
  buildArrayControls(k);
}

function controlsToState() {
  const v = (id) => /** @type {HTMLInputElement} */ ($(id)).value;
  state.kernel = v("kernel");
  state.mesh = v("mesh-shape").trim();
  state.axes = v("mesh-axes").trim();
  state.order = v("mesh-order");
  state.types = v("mesh-types");
  pickersToDevices(state);
  const k = kernelOf(state.kernel);
  if (!k) return;
  state.inputs = k.inputs.map((_, i) => ({ shape: v(`in-${i}-shape`).trim(), spec: v(`in-${i}-spec`), dtype: v(`in-${i}-dtype`) }));
  state.params = Object.fromEntries(k.params.map((p) => [p.name, v(`param-${p.name}`).trim()]));
  state.outs = (k.outputs || []).map((_, i) => v(`out-${i}`).trim());
}

/** "2x4" / "8,8" -> [2, 4] / [8, 8]; throws with a message otherwise. */
function dims(text, what) {
  if (text.trim() === "") return [];
  const parts = text.split(/[x,\s]+/i).filter(Boolean);
  const nums = parts.map((p) => (/^\d{1,12}$/.test(p) ? Number(p) : NaN));
  if (!nums.every((n) => Number.isInteger(n) && n >= 1)) throw new Error(`${what} must look like 2x4 or 8,8, got "${text}"`);
  return nums;
}

function request() {
  const k = kernelOf(state.kernel);
  if (!k) throw new Error("pick a kernel");
  const mesh = dims(state.mesh, "the mesh shape");
  if (!mesh.length) throw new Error("the mesh needs a shape, e.g. 2x4");
  const axes = state.axes.split(",").map((a) => a.trim());
  /** @type {Record<string, any>} */
  const req = {
    kernel: k.name,
    devices: state.devices,
    mesh: { shape: mesh, axis_names: axes, order: state.order, axis_types: axes.map(() => state.types) },
    inputs: state.inputs.map((i, n) => ({ shape: dims(i.shape, `the shape of ${k.inputs[n].name}`), spec: i.spec, dtype: i.dtype })),
  };
  if (k.params.length) req.params = state.params;
  if (k.outputs && state.outs.some((o) => o)) {
    if (!state.outs.every((o) => o)) throw new Error("give every output a spec, or none (JAX decides)");
    req.out_specs = state.outs;
  }
  if (state.slices > 1) req.slices = state.slices;
  return req;
}

// ---------------------------------------------------------------- running

function setRunState(text, stateName) {
  $("run-state").textContent = text;
  document.body.dataset.kernelState = stateName;
}

function showError(err) {
  const box = $("run-error");
  box.replaceChildren();
  if (!err) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  const e = err instanceof ApiError ? err.error : { code: "error", message: String(err.message || err) };
  const head = make("p");
  head.append(make("code", "", e.code), " ");
  const msg = make("span", "error-message", e.message);
  head.appendChild(msg);
  box.appendChild(head);
  if (e.hint) box.appendChild(make("p", "hint", `What to change: ${e.hint}`));
  if (e.axis_types) box.appendChild(make("p", "muted", `mesh axis types: ${e.axis_types.join(", ")}`));
}

async function run() {
  controlsToState();
  let req;
  try {
    req = request();
  } catch (e) {
    showError(e);
    return;
  }
  pushUrl(false);
  const token = ++runToken;
  showError(null);
  $("results").classList.add("stale");
  setRunState("queued…", "queued");
  const t0 = performance.now();
  try {
    const created = await postJSON("/api/kernels/jobs", req);
    let job = null;
    for (let i = 0; ; i++) {
      job = await getJSON(created.url);
      if (token !== runToken) return;
      if (job.state === "done" || job.state === "error") break;
      const ahead = job.queued_ahead ? ` (${job.queued_ahead} ahead)` : "";
      setRunState(`${job.state}${job.state === "queued" ? ahead : "…"} ${(job.elapsed_ms / 1000).toFixed(1)} s`, job.state);
      await new Promise((r) => setTimeout(r, POLL_MS[Math.min(i, POLL_MS.length - 1)]));
    }
    if (job.state === "error") throw new ApiError(422, job.failure);
    ranWith = { ...state };
    render(job.result);
    const ms = performance.now() - t0;
    setRunState(`done in ${ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(1)} s`}${job.result.cached ? " (cached)" : ""}`, "done");
    requestAnimationFrame(() => {
      document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
    });
  } catch (e) {
    if (token !== runToken) return;
    showError(e);
    setRunState(e instanceof ApiError && e.status === 429 ? "busy: try again shortly" : "failed", "error");
    document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
  }
}

// ---------------------------------------------------------------- rendering

function fmtMs(ms) {
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(0)} ms`;
}

function fmtCount(n) {
  if (n === null || n === undefined) return "—";
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

function fmtErr(e) {
  return e === null || e === undefined ? "not comparable" : e === 0 ? "0 (exact)" : e.toExponential(2);
}

function dl(rows) {
  const d = make("dl");
  for (const [k, v] of rows) d.append(make("dt", "", k), make("dd", "", v));
  return d;
}

function renderSummary(r) {
  const m = r.mesh;
  const mem = r.memory;
  const t = r.timing;
  $("summary").replaceChildren(
    dl([
      ["kernel", `${r.title} (${r.kernel})`],
      ["mesh", `${m.axis_names.map((n, i) => `${n}(${m.shape[i]})`).join(" × ")} ${m.axis_types.join("/")} over ${r.devices_key}`],
      ["device ids", r.device_assignment.length <= 64 ? JSON.stringify(m.device_ids) : "(see the mesh under Collectives)"],
      ["ran on", r.executed_on],
      ["compile", `${fmtMs(t.lower_ms + t.compile_ms)} (lower ${fmtMs(t.lower_ms)}, XLA ${fmtMs(t.compile_ms)})`],
      ["run", fmtMs(t.run_ms)],
      ["max |error|", `${fmtErr(r.max_abs_error)} vs ${r.reference}`],
      ["memory / device", `arguments ${fmtBytes(mem.argument_bytes ?? 0)}, outputs ${fmtBytes(mem.output_bytes ?? 0)}, temporaries ${fmtBytes(mem.temp_bytes ?? 0)}${mem.peak_bytes !== null && mem.peak_bytes !== undefined ? `, peak ${fmtBytes(mem.peak_bytes)}` : ""}`],
      ["cost / device", [
        r.cost.flops !== null && r.cost.flops !== undefined ? `${fmtCount(r.cost.flops)} flops` : "no flops reported",
        r.cost.bytes_accessed !== null && r.cost.bytes_accessed !== undefined ? `${fmtCount(r.cost.bytes_accessed)}B accessed` : "",
        r.cost.transcendentals ? `${fmtCount(r.cost.transcendentals)} transcendentals` : "",
      ].filter(Boolean).join(", ")],
      ["collectives", r.collectives.length ? r.collectives.map((c) => c.op).join(", ") : "none"],
    ]),
  );
}

/** One array card: name, spec, typeof, the grid. @param {any} a @param {boolean} output */
function arrayCard(a, output) {
  const card = make("section", "array-card");
  const head = make("h3", "array-head");
  head.append(make("span", "array-name", a.name), " ", make("code", "", a.spec), " ", make("code", "typeof", a.typeof));
  card.appendChild(head);
  const facts = [`shard ${JSON.stringify(a.shard_shape)}`, `${fmtBytes(a.bytes_per_device)} per device`,
    a.replication_factor > 1 ? `replicated ×${a.replication_factor} over ${a.replicated_axes.join(", ")}` : "no replication"];
  if (output) facts.push(`max |error| ${fmtErr(a.max_abs_error)}`);
  card.appendChild(make("p", "muted array-facts", facts.join(" · ")));
  const host = make("div", "grid-wrap kernel-grid");
  card.appendChild(host);
  return { card, host, layout: a };
}

function renderArrays(container, arrays, output) {
  container.replaceChildren();
  const cards = arrays.map((a) => arrayCard(a, output));
  for (const c of cards) container.appendChild(c.card);
  for (const c of cards) {
    const g = renderGrid(c.layout, { dims: null, dark: dark() });
    c.host.appendChild(g.svg);
    grids.set(g.svg, g);
    enableZoom(g.svg, (view, scale) => g.relabel(view, scale));
  }
}

let selectedCollective = 0;

function renderCollectives(r) {
  $("collective-count").textContent = r.collectives.length ? `(${r.collectives.length})` : "(none: every device works on its own blocks)";
  const wrap = $("collectives");
  wrap.replaceChildren();
  if (!r.collectives.length) {
    $("collective-mesh").replaceChildren();
    return;
  }
  const table = make("table", "hops collectives");
  const head = table.createTHead().insertRow();
  for (const h of ["#", "op", "shape / device", "bytes", "mesh axes", "groups (device ids)", "from"]) {
    const th = make("th", "", h);
    th.scope = "col";
    head.appendChild(th);
  }
  const body = table.createTBody();
  r.collectives.forEach((c, i) => {
    const row = body.insertRow();
    row.className = "collective";
    row.tabIndex = 0;
    row.dataset.index = String(i);
    const groups = c.groups.map((g) => `{${g.length > 8 ? compactIds(g) : g.join(",")}}`).join(" ");
    const cells = [String(i + 1), c.op + (c.is_async ? " (async)" : ""), c.shape, fmtBytes(c.bytes), c.axes_text, groups, c.source || ""];
    cells.forEach((text, j) => {
      const td = row.insertCell();
      td.textContent = text;
      if (j === 1) td.className = "op";
      if (j === 6) td.className = "source";
      if (j === 5) {
        td.className = "groups";
        td.title = c.pairs ? `source → target: ${c.pairs.map(([a, b]) => `${a}→${b}`).join(" ")}` : c.replica_groups;
      }
    });
    const pick = () => selectCollective(r, i);
    row.addEventListener("click", pick);
    row.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        pick();
      }
    });
  });
  wrap.appendChild(table);
  selectCollective(r, Math.min(selectedCollective, r.collectives.length - 1));
}

/**
 * The topology view for this run's devices and mesh, with the collective's replica groups drawn on
 * the hardware and their hops measured (or, for groups too many to put in a URL, its mesh axis when
 * it runs along exactly one whole axis).
 */
function topologyHref(r, c) {
  const q = new URLSearchParams({
    devices: ranWith.devices,
    mesh: r.mesh.shape.join("x"),
    axes: r.mesh.axis_names.join(","),
    order: ranWith.order,
  });
  if (ranWith.slices > 1) q.set("slices", String(ranWith.slices));
  const ids = c.groups ? c.groups.reduce((n, g) => n + g.length, 0) : 0;
  if (c.groups && c.groups.length && ids <= 4096 && c.groups.every((g) => g.length === c.groups[0].length)) {
    // the collective's own replica groups, drawn and measured on the hardware
    q.set("groups", c.groups.map((g) => g.join(",")).join(";"));
    q.set("glabel", `${c.op} over ${c.axes_text}`);
  } else if (c.exact_axes && c.axes.length === 1 && r.mesh.axis_names.includes(c.axes[0])) q.set("axis", c.axes[0]);
  return `/topology.html?${q.toString()}`;
}

/** The mesh's device ids, each cell coloured by the group of collective `i` it belongs to. */
function selectCollective(r, i) {
  selectedCollective = i;
  document.querySelectorAll("#collectives tr.collective").forEach((tr) => tr.classList.toggle("selected", Number(/** @type {HTMLElement} */ (tr).dataset.index) === i));
  const c = r.collectives[i];
  const groupOf = new Map();
  c.groups.forEach((g, gi) => g.forEach((id) => groupOf.set(id, gi)));
  const target = new Map((c.pairs || []).map(([a, b]) => [a, b]));
  const shape = r.mesh.shape;
  const flat = /** @type {number[]} */ (r.mesh.device_ids.flat(Infinity));
  const cols = shape[shape.length - 1];
  const wrap = make("div", "mesh");
  const caption = make("p", "mesh-caption", `#${i + 1} ${c.op} over ${c.axes_text}: ${c.groups.length} group${c.groups.length === 1 ? "" : "s"} of ${c.groups[0]?.length ?? 0}` + (c.pairs ? " (cells show where each device sends)" : "") + " — ");
  const topo = /** @type {HTMLAnchorElement} */ (make("a", "", "see it on the topology"));
  topo.href = topologyHref(r, c);
  caption.appendChild(topo);
  wrap.appendChild(caption);
  const table = make("table", "mesh-table");
  if (cols > 24) table.classList.add("dense");
  const body = table.createTBody();
  for (let rI = 0; rI < flat.length / cols; rI++) {
    const row = body.insertRow();
    const th = make("th", "", shape.length > 1 ? String(rI) : r.mesh.axis_names[0]);
    th.scope = "row";
    row.appendChild(th);
    for (let cI = 0; cI < cols; cI++) {
      const id = flat[rI * cols + cI];
      const td = row.insertCell();
      td.textContent = target.has(id) ? `${id}→${target.get(id)}` : String(id);
      const gi = groupOf.get(id);
      if (gi !== undefined) td.style.background = deviceColour(gi * 7 + 3, dark());
      td.title = gi !== undefined ? `device ${id}: group ${gi + 1} {${c.groups[gi].join(",")}}` : `device ${id}: not in this collective`;
    }
  }
  wrap.appendChild(table);
  $("collective-mesh").replaceChildren(wrap);
}

function originsText(entry) {
  if (!entry) return "no sharding from propagation (replicated or decided by the partitioner)";
  return entry.origins.map((o) => `${o.axis} ← ${o.meaning}`).join("; ") || "—";
}

function renderOrigins(r) {
  $("origins-note").textContent = r.origins_note;
  const box = $("origins");
  box.replaceChildren();
  if (!r.origins) return;
  const outs = make("ul", "origin-outputs");
  r.outputs.forEach((o, i) => {
    const entry = r.origins.outputs[i];
    const li = make("li");
    li.append(make("strong", "", o.name), ` ${entry && entry.sharding ? entry.sharding : o.spec}: ${originsText(entry)}`);
    outs.appendChild(li);
  });
  box.appendChild(outs);
  const table = make("table", "hops origins");
  const head = table.createTHead().insertRow();
  for (const h of ["value", "op", "sharding", "each axis came from"]) head.appendChild(make("th", "", h));
  const body = table.createTBody();
  for (const e of r.origins.entries) {
    const row = body.insertRow();
    for (const text of [e.value + (e.name ? ` [${e.name}]` : ""), e.op, e.sharding || "", originsText(e)]) row.insertCell().textContent = text;
  }
  box.appendChild(table);
  if (r.origins.truncated) box.appendChild(make("p", "muted", "(only the first entries are shown)"));
}

/** A plain collectives table (op, shape, bytes, axes, groups): the TPU compile's collectives. */
function collectivesTable(collectives) {
  const table = make("table", "hops collectives");
  const head = table.createTHead().insertRow();
  for (const h of ["#", "op", "shape / device", "bytes", "mesh axes", "groups (device ids)"]) {
    const th = make("th", "", h);
    th.scope = "col";
    head.appendChild(th);
  }
  const body = table.createTBody();
  collectives.forEach((c, i) => {
    const row = body.insertRow();
    const groups = c.groups.map((g) => `{${g.length > 8 ? compactIds(g) : g.join(",")}}`).join(" ");
    for (const text of [String(i + 1), c.op + (c.is_async ? " (async)" : ""), c.shape, fmtBytes(c.bytes), c.axes_text, groups]) {
      row.insertCell().textContent = text;
    }
  });
  return table;
}

/** The TPU (compile-only) section: shown for tpu: sets when the server has libtpu. */
function renderTpu(r) {
  const tpu = r.tpu;
  const box = $("tpu-box");
  box.hidden = !tpu || (tpu.skipped !== null && tpu.skipped !== undefined);
  if (box.hidden) return;
  $("tpu-topology").textContent = tpu.topology ? `(${tpu.topology}${tpu.device_kind ? `, ${tpu.device_kind}` : ""})` : "";
  const wrap = $("tpu-collectives");
  wrap.replaceChildren();
  if (tpu.error) {
    $("tpu-summary").replaceChildren(make("p", "error", `${tpu.error.message}${tpu.error.hint ? ` — ${tpu.error.hint}` : ""}`));
    $("tpu-hlo").textContent = "";
    return;
  }
  const mem = tpu.memory || {};
  $("tpu-summary").replaceChildren(
    dl([
      ["compile", fmtMs(tpu.compile_ms ?? 0)],
      ["memory / device", `arguments ${fmtBytes(mem.argument_bytes ?? 0)}, outputs ${fmtBytes(mem.output_bytes ?? 0)}, temporaries ${fmtBytes(mem.temp_bytes ?? 0)}`],
      ["cost / device", tpu.cost && tpu.cost.flops !== null && tpu.cost.flops !== undefined ? `${fmtCount(tpu.cost.flops)} flops` : "no flops reported"],
      ["collectives", tpu.collectives.length ? tpu.collectives.map((c) => c.op).join(", ") : "none"],
    ]),
  );
  if (tpu.collectives.length) wrap.appendChild(collectivesTable(tpu.collectives));
  $("tpu-hlo").textContent = tpu.hlo + (tpu.hlo_truncated ? "\n… (cut: setting max_kernel_text_chars)" : "");
}

function render(r) {
  lastResult = r;
  grids.clear();
  $("results").hidden = false;
  $("results").classList.remove("stale");
  renderSummary(r);
  renderArrays($("outputs"), r.outputs, true);
  renderCollectives(r);
  renderArrays($("inputs-placed"), r.inputs, false);
  $("input-count").textContent = `(${r.inputs.length})`;
  // Many inputs (a model's parameters and optimizer state) fold away; a few stay in view.
  /** @type {HTMLDetailsElement} */ ($("inputs-box")).open = r.inputs.length <= 3;
  renderOrigins(r);
  $("log-box").hidden = !r.compiler_log.length;
  $("compiler-log").replaceChildren(...r.compiler_log.map((l) => make("li", "", l)));
  $("stablehlo").textContent = r.stablehlo + (r.stablehlo_truncated ? "\n… (cut: setting max_kernel_text_chars)" : "");
  $("hlo").textContent = r.hlo + (r.hlo_truncated ? "\n… (cut: setting max_kernel_text_chars)" : "");
  renderTpu(r);
}

// ---------------------------------------------------------------- tooltip, sharing, wiring

function showTooltip(e) {
  const tip = $("tooltip");
  const svg = e.target instanceof Element ? e.target.closest("svg") : null;
  const g = svg ? grids.get(/** @type {SVGSVGElement} */ (svg)) : null;
  const k = g ? g.tileAt(e.target) : null;
  if (!g || k === null) {
    tip.hidden = true;
    return;
  }
  tip.replaceChildren(...g.describe(k).map((line) => make("div", "", line)));
  tip.hidden = false;
  const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = `${Math.max(0, x)}px`;
  tip.style.top = `${Math.max(0, y)}px`;
}

async function copyLink() {
  controlsToState();
  try {
    const told = await shareLink("kernels", { query: toQuery(state) });
    setRunState(told, document.body.dataset.kernelState || "idle");
  } catch (e) {
    showError(e);
  }
}

function pickKernel(name) {
  const k = kernelOf(name);
  if (!k) return;
  state = defaultsFor(k);
  stateToControls();
  pushUrl(false);
}

function wire() {
  $("run-form").addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  $("kernel").addEventListener("change", () => pickKernel(/** @type {HTMLSelectElement} */ ($("kernel")).value));
  $("reset").addEventListener("click", () => pickKernel(state.kernel));
  $("copy-link").addEventListener("click", copyLink);
  for (const id of ["dev-kind", "gpu-kind", "tpu-topo", "tpu-gen"]) {
    $(id).addEventListener("change", () => {
      if (id === "tpu-gen") fillTopologies(platforms);
      pickersToDevices(state);
      devicesToPickers(state, platforms);
    });
  }
  for (const id of ["cpu-count", "gpu-hosts", "gpu-per-host", "tpu-slices"]) {
    $(id).addEventListener("input", () => {
      pickersToDevices(state);
      $("devices-string").textContent = state.devices;
    });
  }
  for (const id of ["outputs", "inputs-placed"]) {
    $(id).addEventListener("mousemove", showTooltip);
    $(id).addEventListener("mouseleave", () => ($("tooltip").hidden = true));
  }
  window.addEventListener("popstate", () => {
    const back = fromParams(new URLSearchParams(location.search));
    if (!back) return;
    state = back;
    stateToControls();
    run();
  });
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => lastResult && render(lastResult));
}

async function main() {
  renderNav("kernels");
  wire();
  try {
    const [cat, plat, health] = await Promise.all([getJSON("/api/kernels"), getJSON("/api/platforms"), getJSON("/api/health")]);
    kernels = cat.kernels;
    dtypes = cat.dtypes;
    platforms = plat;
    $("jax-version").textContent = `JAX ${health.jax_version}`;
  } catch (e) {
    showError(e);
    return;
  }
  buildPickers(platforms);
  fillKernelSelect();
  const params = new URLSearchParams(location.search);
  const link = params.get("link");
  let fromUrl = null;
  if (link && /^[A-Za-z0-9_-]{1,64}$/.test(link)) {
    try {
      const saved = await getJSON(`/api/links/${link}`);
      if (saved.view !== "kernels") {
        const elsewhere = pageForLink(saved.view, link);
        location.replace(elsewhere || `/s/${link}`);
        return;
      }
      fromUrl = fromParams(new URLSearchParams(String(saved.state.query || "")));
    } catch (e) {
      showError(e);
    }
  } else if (params.get("kernel")) {
    fromUrl = fromParams(params);
  }
  if (fromUrl) {
    state = fromUrl;
    stateToControls();
    pushUrl(true);
    run(); // a shared address shows its results (a cached run answers at once)
  } else {
    pickKernel(kernels[0].name);
    pushUrl(true);
  }
  document.body.dataset.ready = "1";
}

main();
