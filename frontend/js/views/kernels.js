// The kernel lab (kernels.html): pick a catalog kernel, a device set, a mesh and the inputs' specs,
// run it in the server's worker processes, and see every output's layout, the collectives XLA
// inserted (each one handed to the topology view with the run's complete state), memory, cost,
// correctness, Shardy's sharding origins and the HLO. State lives in the URL.

import { ApiError, getJSON, postJSON } from "../lib/api.js";
import { codeInput, defList, el, labelled, setOptions } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { fmtBytes, fmtCount, fmtMs, groupsQuery, meshAxes, parseDims } from "../lib/format.js";
import { bootPage, bump, byId, isDark, onThemeChange } from "../lib/page.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { collectiveOnMesh, collectivesTable } from "../components/collectives.js";
import { estimateTotal, rooflinePanel } from "../components/estimates.js";
import { layoutGrid } from "../components/grid.js";
import { devicePicker, meshPicker } from "../components/pickers.js";
import { topologyGroups } from "../model/collective.js";
import { Layout } from "../model/layout.js";
import { DEFAULTS, topologyHref } from "../model/state.js";

const POLL_MS = [60, 100, 150, 250, 400];
const CUT = "\n… (cut: setting max_kernel_text_chars)";

/** @typedef {{shape: string, spec: string, dtype: string}} InputState */
/** @typedef {{kernel: string, devices: string, slices: number, mesh: string, axes: string, order: string,
 *   types: string, inputs: InputState[], params: Record<string, string>, outs: string[]}} KState */

/** @type {any[]} */
let kernels = [];
/** @type {string[]} */
let dtypes = ["float32"];
/** @type {KState} */
let state = blank();
/** @type {any} */
let lastResult = null;
/** The state of the run on screen (its devices, order and axis types, for the topology link). @type {KState} */
let ranWith = blank();
let runToken = 0;
let selectedCollective = 0;
/** @type {ReturnType<typeof devicePicker> | null} */
let devices = null;
/** @type {ReturnType<typeof meshPicker> | null} */
let meshFields = null;

/** @returns {KState} */
function blank() {
  return { kernel: "", devices: "cpu:8", slices: 1, mesh: "2x4", axes: "x,y", order: "make_mesh", types: "auto", inputs: [], params: {}, outs: [] };
}

/** @param {string} name */
const kernelOf = (name) => kernels.find((k) => k.name === name);

/**
 * Shows what went wrong (null clears), the input it concerns marked invalid.
 * @param {unknown} err
 * @param {{input?: number, source?: string}} [where] input: the index of the input at fault; source:
 *   the text a parse error's column points into
 */
function fail(err, where = {}) {
  showError(byId("run-error"), err, { hintLabel: "What to change: ", source: where.source });
  for (const box of document.querySelectorAll("#inputs input[aria-invalid]")) box.removeAttribute("aria-invalid");
  if (err && where.input !== undefined) byId(`in-${where.input}-spec`)?.setAttribute("aria-invalid", "true");
}

// Errors a single input's spec or shape can cause: which input, the API does not say.
const INPUT_CODES = new Set(["parse_error", "unknown_axis", "duplicate_axis", "rank_mismatch", "indivisible", "invalid_spec", "bad_shape"]);

/**
 * The error named after the input that causes it: each input is laid out on its own on the run's
 * mesh (POST /api/layout, what the server checks) until one fails with the same code.
 * @param {any} req the run request
 * @param {unknown} err
 * @returns {Promise<{err: unknown, input?: number, source?: string}>}
 */
async function blame(req, err) {
  if (!(err instanceof ApiError) || !INPUT_CODES.has(err.error.code) || !req.inputs) return { err };
  const k = kernelOf(req.kernel);
  for (let n = 0; n < req.inputs.length; n++) {
    const inp = req.inputs[n];
    try {
      await postJSON("/api/layout", { devices: req.devices, ...(req.slices ? { slices: req.slices } : {}), mesh: req.mesh, spec: inp.spec, shape: inp.shape, dtype: inp.dtype });
    } catch (e) {
      if (e instanceof ApiError && e.error.code === err.error.code) {
        const name = k ? k.inputs[n].name : `#${n}`;
        const named = new ApiError(err.status, { ...e.error, message: `input ${name} (${inp.spec} on shape [${inp.shape.join(", ")}]): ${e.error.message}` });
        return { err: named, input: n, source: inp.spec };
      }
    }
  }
  return { err };
}

/**
 * Source as it runs: the catalog sends a kernel's `def` line and then its body without the body's
 * indentation; indented again it reads as the Python it is.
 * @param {string} src
 */
function sourceText(src) {
  const lines = src.split("\n");
  if (lines.length < 2 || !/^\s*(async\s+)?def\s.*:\s*(#.*)?$/.test(lines[0])) return src;
  const body = lines.slice(1);
  const indents = body.filter((l) => l.trim()).map((l) => (/^ */.exec(l) || [""])[0].length);
  if (!indents.length || Math.min(...indents) > 0) return src;
  return [lines[0], ...body.map((l) => (l.trim() ? `    ${l}` : l))].join("\n");
}

// ---------------------------------------------------------------- state <-> URL

/** @param {KState} s @returns {string} */
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
 * address such as `?kernel=matmul_xxt&types=explicit` is complete). Null without a known kernel.
 * @param {URLSearchParams} q
 * @returns {KState | null}
 */
function fromQuery(q) {
  const k = kernelOf(q.get("kernel") || "");
  if (!k) return null;
  const s = defaultsFor(k);
  const str = (/** @type {string} */ key) => (q.get(key) ?? "").slice(0, 600);
  for (const key of /** @type {const} */ (["devices", "mesh", "axes", "order", "types"])) if (q.has(key)) s[key] = str(key);
  if (q.has("slices")) s.slices = Math.max(1, Math.min(64, parseInt(str("slices"), 10) || 1));
  q.getAll("in").slice(0, 16).forEach((v, i) => {
    const [shape = "", spec = "P()", dtype = "float32"] = v.slice(0, 600).split("|");
    if (i < s.inputs.length) s.inputs[i] = { shape, spec, dtype };
  });
  for (const [key, v] of q.entries()) if (key.startsWith("p.") && key.slice(2) in s.params) s.params[key.slice(2)] = v.slice(0, 600);
  q.getAll("out").slice(0, s.outs.length).forEach((v, i) => (s.outs[i] = v.slice(0, 600)));
  return s;
}

/** @param {boolean} replace */
const pushUrl = (replace) => writeUrl("/kernels.html", toQuery(state), replace);

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
    inputs: k.inputs.map((/** @type {any} */ i) => ({ shape: i.shape.join(","), spec: i.spec, dtype: i.dtype })),
    params: Object.fromEntries(k.params.map((/** @type {any} */ p) => [p.name, p.default])),
    outs: (k.outputs || []).map(() => ""),
  };
}

function fillKernelSelect() {
  const sel = byId("kernel");
  sel.replaceChildren();
  /** @param {string} label @param {any[]} list */
  const group = (label, list) => {
    const og = el("optgroup");
    og.label = label;
    for (const k of list) {
      const o = el("option", "", k.title + (k.available ? "" : " — not installed"));
      o.value = k.name;
      o.disabled = !k.available;
      og.appendChild(o);
    }
    if (og.children.length) sel.appendChild(og);
  };
  group("jit (the compiler shards)", kernels.filter((x) => x.mode === "jit" && !x.requires));
  group("shard_map (per-device code)", kernels.filter((x) => x.mode === "shard_map" && !x.requires));
  group("Flax (optional extra)", kernels.filter((x) => x.requires));
}

/** @param {any} k */
function showKernelInfo(k) {
  byId("kernel-doc").textContent = k.doc;
  byId("kernel-explicit").hidden = !k.explicit;
  byId("kernel-explicit").textContent = k.explicit ? `With Explicit axes: ${k.explicit}.` : "";
  const link = /** @type {HTMLAnchorElement} */ (byId("kernel-tutorial"));
  link.hidden = !k.tutorial;
  if (k.tutorial) link.href = k.tutorial;
  byId("kernel-reference").textContent = k.reference;
  byId("kernel-source").textContent = sourceText(k.source);
}

/** A labelled text field with its own id (read back by controlsToState). */
function field(/** @type {string} */ label, /** @type {string} */ value, /** @type {string} */ id, /** @type {string} */ aria) {
  const input = codeInput(value);
  input.id = id;
  input.setAttribute("aria-label", aria);
  return labelled(label, input);
}

/** @param {any} k */
function buildArrayControls(k) {
  const box = byId("inputs");
  box.replaceChildren();
  if (!k.inputs.length) box.appendChild(el("p", "muted", "This kernel takes no inputs (it creates its arrays)."));
  k.inputs.forEach((/** @type {any} */ meta, /** @type {number} */ i) => {
    const s = state.inputs[i] || { shape: meta.shape.join(","), spec: meta.spec, dtype: meta.dtype };
    const sel = el("select");
    sel.id = `in-${i}-dtype`;
    sel.setAttribute("aria-label", `${meta.name} dtype`);
    setOptions(sel, dtypes);
    sel.value = s.dtype;
    const r = el("div", "row");
    r.append(field("Shape", s.shape, `in-${i}-shape`, `${meta.name} shape`), field("PartitionSpec", s.spec, `in-${i}-spec`, `${meta.name} PartitionSpec`), labelled("dtype", sel));
    const row = el("div", "kernel-input");
    row.append(el("span", "input-name", meta.name), r);
    box.appendChild(row);
  });
  byId("params-box").hidden = !k.params.length;
  byId("params").replaceChildren(...k.params.map((/** @type {any} */ p) => field(`${p.name} — ${p.doc}`, state.params[p.name] ?? p.default, `param-${p.name}`, p.name)));
  byId("outs-box").hidden = !k.outputs;
  byId("outs").replaceChildren(...(k.outputs || []).map((/** @type {string} */ name, /** @type {number} */ i) => {
    const l = field(`${name}`, state.outs[i] || "", `out-${i}`, `${name} out spec`);
    /** @type {HTMLInputElement} */ (l.querySelector("input")).placeholder = "JAX decides";
    return l;
  }));
}

function stateToControls() {
  const k = kernelOf(state.kernel);
  if (!k) return;
  /** @type {HTMLSelectElement} */ (byId("kernel")).value = k.name;
  showKernelInfo(k);
  devices?.set(state);
  meshFields?.set(state);
  buildArrayControls(k);
}

function controlsToState() {
  const v = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (byId(id)).value;
  state.kernel = v("kernel");
  if (devices) Object.assign(state, devices.value());
  if (meshFields) Object.assign(state, meshFields.value());
  const k = kernelOf(state.kernel);
  if (!k) return;
  state.inputs = k.inputs.map((/** @type {any} */ _, /** @type {number} */ i) => ({ shape: v(`in-${i}-shape`).trim(), spec: v(`in-${i}-spec`), dtype: v(`in-${i}-dtype`) }));
  state.params = Object.fromEntries(k.params.map((/** @type {any} */ p) => [p.name, v(`param-${p.name}`).trim()]));
  state.outs = (k.outputs || []).map((/** @type {string} */ _, /** @type {number} */ i) => v(`out-${i}`).trim());
}

/** "2x4" / "8,8" -> [2, 4] / [8, 8] ("" -> []); throws with a message otherwise. */
function dims(/** @type {string} */ text, /** @type {string} */ what) {
  if (text.trim() === "") return [];
  const nums = parseDims(text);
  if (!nums) throw new Error(`${what} must look like 2x4 or 8,8, got "${text}"`);
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

/** @param {string} text @param {string} stateName */
function setRunState(text, stateName) {
  byId("run-state").textContent = text;
  document.body.dataset.kernelState = stateName;
}

async function run() {
  controlsToState();
  let req;
  try {
    req = request();
  } catch (e) {
    fail(e);
    return;
  }
  pushUrl(false);
  const token = ++runToken;
  fail(null);
  byId("results").classList.add("stale");
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
    requestAnimationFrame(() => bump("runs"));
  } catch (e) {
    if (token !== runToken) return;
    const { err, input, source } = await blame(req, e);
    if (token !== runToken) return;
    fail(err, { input, source });
    staleResults();
    setRunState(e instanceof ApiError && e.status === 429 ? "busy: try again shortly" : "failed", "error");
    bump("errors");
  }
}

/** After a failed run: another kernel's results go; the same kernel's stay, dimmed and captioned. */
function staleResults() {
  const results = byId("results");
  const note = byId("results-note");
  if (!lastResult || lastResult.kernel !== state.kernel) {
    results.hidden = true;
    note.hidden = true;
    return;
  }
  results.classList.add("stale");
  note.hidden = false;
  note.textContent = `These are the results of the previous run of ${lastResult.kernel}, not of what failed above.`;
}

// ---------------------------------------------------------------- rendering

/** @param {number | null | undefined} e */
function fmtErr(e) {
  return e === null || e === undefined ? "not comparable" : e === 0 ? "0 (exact)" : e.toExponential(2);
}

/** "arguments 1 KiB, outputs …" per device. @param {any} mem */
function memoryText(mem) {
  const peak = mem.peak_bytes !== null && mem.peak_bytes !== undefined ? `, peak ${fmtBytes(mem.peak_bytes)}` : "";
  return `arguments ${fmtBytes(mem.argument_bytes ?? 0)}, outputs ${fmtBytes(mem.output_bytes ?? 0)}, temporaries ${fmtBytes(mem.temp_bytes ?? 0)}${peak}`;
}

const COMPILE_ONLY = "the kernel was compiled for the device set's hardware on abstract inputs, at their real size: "
  + "nothing was allocated and nothing ran, so there are no values and no error against the reference; the "
  + "collectives, memory and cost are the compiled program's";

/** @param {any} r */
function renderSummary(r) {
  const m = r.mesh;
  const t = r.timing;
  const cost = r.cost;
  byId("summary").replaceChildren(
    defList([
      ["kernel", `${r.title} (${r.kernel})`],
      ["mesh", `${meshAxes(m)} ${m.axis_types.join("/")} over ${r.devices_key}`],
      ["device ids", r.device_assignment.length <= 64 ? JSON.stringify(m.device_ids) : "(see the mesh under Collectives)"],
      ["ran on", r.executed_on],
      ...(r.compile_only ? [["compiled, not run", COMPILE_ONLY]] : []),
      ["compile", `${fmtMs(t.lower_ms + t.compile_ms)} (lower ${fmtMs(t.lower_ms)}, XLA ${fmtMs(t.compile_ms)})`],
      ["run", r.compile_only ? "not run" : fmtMs(t.run_ms)],
      ["max |error|", r.compile_only ? "none: nothing ran" : `${fmtErr(r.max_abs_error)} vs ${r.reference}`],
      ...(r.figures_from ? [["figures from", r.figures_from.description]] : []),
      ["memory / device", memoryText(r.memory)],
      ["cost / device", [
        cost.flops !== null && cost.flops !== undefined ? `${fmtCount(cost.flops)} flops` : "no flops reported",
        cost.bytes_accessed !== null && cost.bytes_accessed !== undefined ? `${fmtCount(cost.bytes_accessed)}B accessed` : "",
        cost.transcendentals ? `${fmtCount(cost.transcendentals)} transcendentals` : "",
      ].filter(Boolean).join(", ")],
      ["collectives", r.collectives.length ? r.collectives.map((/** @type {any} */ c) => c.op).join(", ") : "none"],
    ]),
  );
}

/** One card per array (name, spec, typeof, facts, its grid) in `container`. @param {HTMLElement} container @param {any[]} arrays @param {boolean} output */
function renderArrays(container, arrays, output) {
  container.replaceChildren();
  const dark = isDark();
  for (const a of arrays) {
    const card = el("section", "array-card");
    const head = el("h3", "array-head");
    head.append(el("span", "array-name", a.name), " ", el("code", "", a.spec), " ", el("code", "typeof", a.typeof));
    const facts = [`shard ${JSON.stringify(a.shard_shape)}`, `${fmtBytes(a.bytes_per_device)} per device`,
      a.replication_factor > 1 ? `replicated ×${a.replication_factor} over ${a.replicated_axes.join(", ")}` : "no replication"];
    if (output) facts.push("max_abs_error" in a ? `max |error| ${fmtErr(a.max_abs_error)}` : "compiled, not run: no values");
    const host = el("div", "grid-wrap kernel-grid");
    card.append(head, el("p", "muted array-facts", facts.join(" · ")), host);
    container.appendChild(card);
    layoutGrid(host, Layout.fromApi(a), { dark, maxHeight: 420 });
  }
}

/**
 * The topology view for this run's collective `c`, handed the run's complete state: its device set
 * and slices, the mesh (shape, axis names, order, axis types), an output's layout to colour by (a spec
 * valid on that mesh, from JAX itself), and the collective's groups (a collective-permute's
 * source → target pairs as groups of two) to draw and measure — or, for groups that cannot be
 * handed over, its mesh axis when it runs along exactly one whole axis.
 * @param {any} r the run's result
 * @param {any} c one of its collectives
 */
function topologyLink(r, c) {
  // colour by the first output split over some mesh axis (the first output when none is)
  const out = r.outputs.find((/** @type {any} */ o) => o.dims.some((/** @type {any} */ d) => d.axes.length)) || r.outputs[0];
  const s = {
    ...DEFAULTS,
    devices: ranWith.devices,
    slices: ranWith.slices,
    mesh: r.mesh.shape.join("x"),
    axes: r.mesh.axis_names.join(","),
    order: ranWith.order,
    types: ranWith.types,
    ...(out ? { spec: out.spec, shape: out.shape.join(","), dtype: out.dtype } : { spec: "P()", shape: "" }),
  };
  const handed = topologyGroups(c);
  if (handed) Object.assign(s, { groups: groupsQuery(handed.groups), glabel: handed.label });
  else if (c.exact_axes && c.axes.length === 1 && r.mesh.axis_names.includes(c.axes[0])) s.axis = c.axes[0];
  return topologyHref(s);
}

/** @param {any} r @param {number} i */
function selectCollective(r, i) {
  selectedCollective = i;
  const c = r.collectives[i];
  const link = el("a", "", "see it on the topology");
  link.href = topologyLink(r, c);
  collectiveOnMesh(byId("collective-mesh"), r.mesh, c, i + 1, { dark: isDark(), link });
}

/** @param {any} r */
function renderCollectives(r) {
  byId("collective-count").textContent = r.collectives.length ? `(${r.collectives.length})` : "(none: every device works on its own blocks)";
  if (!r.collectives.length) {
    byId("collectives").replaceChildren();
    byId("collective-total").replaceChildren();
    byId("collective-mesh").replaceChildren();
    return;
  }
  estimateTotal(byId("collective-total"), r.collectives);
  const i = Math.min(selectedCollective, r.collectives.length - 1);
  collectivesTable(byId("collectives"), r.collectives, { selected: i, onSelect: (k) => selectCollective(r, k) });
  selectCollective(r, i);
}

/** @param {any} entry */
function originsText(entry) {
  if (!entry) return "no sharding from propagation (replicated or decided by the partitioner)";
  return entry.origins.map((/** @type {any} */ o) => `${o.axis} ← ${o.meaning}`).join("; ") || "—";
}

/** @param {any} r */
function renderOrigins(r) {
  byId("origins-note").textContent = r.origins_note;
  const box = byId("origins");
  box.replaceChildren();
  if (!r.origins) return;
  const outs = el("ul", "origin-outputs");
  r.outputs.forEach((/** @type {any} */ o, /** @type {number} */ i) => {
    const entry = r.origins.outputs[i];
    const li = el("li");
    li.append(el("strong", "", o.name), ` ${entry && entry.sharding ? entry.sharding : o.spec}: ${originsText(entry)}`);
    outs.appendChild(li);
  });
  box.appendChild(outs);
  const table = el("table", "hops origins");
  const head = table.createTHead().insertRow();
  for (const h of ["value", "op", "sharding", "each axis came from"]) head.appendChild(el("th", "", h));
  const body = table.createTBody();
  for (const e of r.origins.entries) {
    const row = body.insertRow();
    for (const text of [e.value + (e.name ? ` [${e.name}]` : ""), e.op, e.sharding || "", originsText(e)]) row.insertCell().textContent = text;
  }
  box.appendChild(table);
  if (r.origins.truncated) box.appendChild(el("p", "muted", "(only the first entries are shown)"));
}

/** The TPU (compile-only) section: shown for tpu: sets when the server has libtpu. @param {any} r */
function renderTpu(r) {
  const tpu = r.tpu;
  const box = byId("tpu-box");
  box.hidden = !tpu || (tpu.skipped !== null && tpu.skipped !== undefined);
  if (box.hidden) return;
  byId("tpu-topology").textContent = tpu.topology ? `(${tpu.topology}${tpu.device_kind ? `, ${tpu.device_kind}` : ""})` : "";
  const wrap = byId("tpu-collectives");
  wrap.replaceChildren();
  byId("tpu-total").replaceChildren();
  byId("tpu-roofline").replaceChildren();
  if (tpu.error) {
    byId("tpu-summary").replaceChildren(el("p", "error", `${tpu.error.message}${tpu.error.hint ? ` — ${tpu.error.hint}` : ""}`));
    byId("tpu-hlo").textContent = "";
    return;
  }
  byId("tpu-summary").replaceChildren(
    defList([
      ["compile", fmtMs(tpu.compile_ms ?? 0)],
      ["memory / device", memoryText(tpu.memory || {})],
      ["cost / device", tpu.cost && tpu.cost.flops !== null && tpu.cost.flops !== undefined ? `${fmtCount(tpu.cost.flops)} flops` : "no flops reported"],
      ["collectives", tpu.collectives.length ? tpu.collectives.map((/** @type {any} */ c) => c.op).join(", ") : "none"],
    ]),
  );
  // the TPU program's collectives (ICI) and, for multi-slice sets, its cross-slice steps (DCN)
  const steps = [...tpu.collectives, ...(tpu.dcn || []).map((/** @type {any} */ d) => ({ ...d, shape: "cross-slice step (DCN)" }))];
  if (steps.length) {
    collectivesTable(wrap, steps);
    estimateTotal(byId("tpu-total"), steps);
  }
  rooflinePanel(byId("tpu-roofline"), tpu.roofline, "TPU roofline");
  byId("tpu-hlo").textContent = tpu.hlo + (tpu.hlo_truncated ? CUT : "");
}

/** @param {any} r */
function render(r) {
  lastResult = r;
  const results = byId("results");
  results.hidden = false;
  results.classList.remove("stale");
  byId("results-note").hidden = true;
  renderSummary(r);
  rooflinePanel(byId("roofline"), r.roofline, "Roofline");
  /** @type {HTMLAnchorElement} */ (byId("compare-link")).href = `/compare.html?a=${encodeURIComponent(`/kernels.html?${toQuery(ranWith)}`)}`;
  renderArrays(byId("outputs"), r.outputs, true);
  renderCollectives(r);
  renderArrays(byId("inputs-placed"), r.inputs, false);
  byId("input-count").textContent = `(${r.inputs.length})`;
  // Many inputs (a model's parameters and optimizer state) fold away; a few stay in view.
  /** @type {HTMLDetailsElement} */ (byId("inputs-box")).open = r.inputs.length <= 3;
  renderOrigins(r);
  byId("log-box").hidden = !r.compiler_log.length;
  byId("compiler-log").replaceChildren(...r.compiler_log.map((/** @type {string} */ l) => el("li", "", l)));
  byId("stablehlo").textContent = r.stablehlo + (r.stablehlo_truncated ? CUT : "");
  byId("hlo").textContent = r.hlo + (r.hlo_truncated ? CUT : "");
  renderTpu(r);
}

// ---------------------------------------------------------------- wiring

/** @param {string} name */
function pickKernel(name) {
  const k = kernelOf(name);
  if (!k) return;
  state = defaultsFor(k);
  stateToControls();
  pushUrl(false);
}

function wire() {
  byId("run-form").addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  byId("kernel").addEventListener("change", () => pickKernel(/** @type {HTMLSelectElement} */ (byId("kernel")).value));
  byId("reset").addEventListener("click", () => pickKernel(state.kernel));
  shareControl(byId("share"), {
    view: "kernels",
    state: () => {
      controlsToState();
      return { query: toQuery(state) };
    },
    onStatus: (text) => setRunState(text, document.body.dataset.kernelState || "idle"),
    onError: fail,
  });
  onBackForward((q) => {
    const back = fromQuery(q);
    if (!back) return;
    state = back;
    stateToControls();
    run();
  });
  onThemeChange(() => lastResult && render(lastResult));
}

async function main() {
  bootPage("kernels");
  wire();
  let platforms;
  try {
    const [cat, plat] = await Promise.all([getJSON("/api/kernels"), getJSON("/api/platforms")]);
    kernels = cat.kernels;
    dtypes = cat.dtypes;
    platforms = plat;
  } catch (e) {
    fail(e);
    return;
  }
  fillKernelSelect();
  const pickers = byId("pickers");
  devices = devicePicker(pickers, platforms, {
    kinds: ["cpu", "tpu", "gpu", "local"],
    note: "— runs on as many CPU devices as the mesh has, ids mapped back",
  });
  meshFields = meshPicker(pickers, {
    types: [["auto", "Auto (the compiler decides)"], ["explicit", "Explicit (jax.make_mesh's default)"]],
  });
  const fromUrl = fromQuery(pageQuery());
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
