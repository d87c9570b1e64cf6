// The snapshot view (snapshots.html): what a user's program published with sharding_core.publish. A
// tree table of its leaves (filter by path, spec or mesh axis), a leaf's layout grid (the layout
// model and grid every view uses), per-device memory, the processes of a multi-process run, the
// collectives of an inspect_jit capture, the what-if of other Flax logical → mesh rules, and the diff
// of two snapshots or two processes. The whole state is in the URL; Copy link stores it.

import { ApiError, getJSON, postJSON } from "../lib/api.js";
import { defList, el, headedTable } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { compactIds, fmtBytes, meshAxes } from "../lib/format.js";
import { bootPage, bump, byId, isDark, onThemeChange } from "../lib/page.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { collectivesTable } from "../components/collectives.js";
import { layoutGrid } from "../components/grid.js";
import { leafTree } from "../components/leaf_tree.js";
import { memoryChart, memoryVerdict } from "../components/memory.js";
import { kindOnDevices, kindText, logicalAxesText, snapshotFacts } from "../model/facts.js";
import { Layout } from "../model/layout.js";
import { parseRules, rulesText } from "../model/rules.js";

const KEYS = ["snapshot", "run", "process", "q", "axis", "kind", "leaf", "rules", "diff"];
/** @typedef {Record<string, string>} SState */

/** @type {SState} */
let state = fromQuery(pageQuery());
/** @type {any} */
let snap = null;
/** what-if result: per leaf index its new spec/layout/error, and the new memory @type {any} */
let whatif = null;
/** @type {ReturnType<typeof leafTree> | null} */
let tree = null;
let filterTimer = 0;

/** @param {URLSearchParams} q @returns {SState} */
function fromQuery(q) {
  return Object.fromEntries(KEYS.map((k) => [k, (q.get(k) || "").slice(0, 2000)]));
}

/** @param {boolean} replace */
function pushUrl(replace) {
  const q = new URLSearchParams();
  for (const k of KEYS) if (state[k]) q.set(k, state[k]);
  writeUrl("/snapshots.html", q.toString(), replace);
}

/** The reference of what is on screen, as the API takes it. */
function currentRef() {
  if (state.run) return state.process !== "" ? { run: state.run, process: Number(state.process) } : { run: state.run };
  return { snapshot: state.snapshot };
}

// ---------------------------------------------------------------- leaves: what a leaf looks like now

/** The leaf's spec and layout entry, the what-if's when one applies. @param {number} i */
function now(i) {
  const leaf = snap.leaves[i];
  const w = whatif ? whatif.byIndex.get(i) : undefined;
  const captured = leaf.layout !== null ? snap.layouts[leaf.layout] : null;
  if (w) {
    return { spec: w.spec, layout: w.layout !== null ? whatif.layouts[w.layout] : captured, error: w.error, changed: w.changed, captured: leaf.spec };
  }
  return { spec: leaf.spec, layout: captured, error: null, changed: false, captured: leaf.spec };
}

/** Mesh axes a layout splits dimensions over. @param {any} layout @returns {string[]} */
function axesOf(layout) {
  return layout ? layout.dims.flatMap((/** @type {any} */ d) => d.axes) : [];
}

/** Whether leaf `i` passes the filters. @param {number} i @param {string} q lower-case words */
function matches(i, q) {
  const leaf = snap.leaves[i];
  const v = now(i);
  const kind = state.kind;
  if (kind === "logical" && !leaf.logical_axes) return false;
  if (kind === "changed" && !v.changed) return false;
  if (kind === "sharding" && !["sharding", "partition_spec"].includes(leaf.kind)) return false;
  if (["array", "shape_dtype_struct"].includes(kind) && leaf.kind !== kind) return false;
  const axis = state.axis;
  if (axis === "(replicated)") {
    if (!v.layout || v.layout.replication_factor <= 1) return false;
  } else if (axis === "(not split)") {
    if (!v.layout || axesOf(v.layout).length) return false;
  } else if (axis && !axesOf(v.layout).includes(axis)) return false;
  if (!q) return true;
  const text = [leaf.path, v.spec || "", leaf.dtype || "", (leaf.logical_axes || []).join(" "), axesOf(v.layout).join(" "), leaf.box || "", leaf.type]
    .join(" ")
    .toLowerCase();
  return q.split(/\s+/).filter(Boolean).every((w) => text.includes(w));
}

function applyFilter() {
  if (!tree) return;
  const q = state.q.trim().toLowerCase();
  const count = tree.filter((i) => matches(i, q));
  const total = snap.leaves.length;
  byId("leaf-count").textContent = count === total ? `${total} leaves` : `${count} of ${total} leaves match`;
}

// ---------------------------------------------------------------- one leaf: summary and grid

/** Devices whose shard of the leaf nobody here holds: non-addressable, or owned by a missing process. */
function notHeld(/** @type {any} */ leaf, /** @type {any} */ layout) {
  if (leaf.missing_devices) return new Set(leaf.missing_devices);
  if (leaf.addressable_devices) {
    const mine = new Set(leaf.addressable_devices);
    return new Set(layout.shards.map((/** @type {any} */ s) => s.device_id).filter((/** @type {number} */ d) => !mine.has(d)));
  }
  return new Set();
}

/** @param {number} i @param {boolean} push */
function selectLeaf(i, push) {
  const leaf = snap.leaves[i];
  state.leaf = leaf ? leaf.path : "";
  if (push) pushUrl(false);
  tree?.select(state.leaf);
  renderLeaf();
  // one column (narrow windows): bring the leaf's grid into view; beside the table it is sticky
  const panel = byId("leaf-title").closest("section");
  if (push && panel && panel.getBoundingClientRect().top > window.innerHeight * 0.8) panel.scrollIntoView({ block: "start" });
}

function renderLeaf() {
  const i = snap ? snap.leaves.findIndex((/** @type {any} */ l) => l.path === state.leaf) : -1;
  const gridBox = byId("leaf-grid");
  const legend = byId("leaf-legend");
  byId("leaf-hint").hidden = i >= 0;
  if (i < 0) {
    byId("leaf-title").textContent = "Leaf";
    byId("leaf-summary").replaceChildren();
    gridBox.hidden = legend.hidden = true;
    return;
  }
  const leaf = snap.leaves[i];
  const v = now(i);
  const lay = v.layout;
  // under a what-if the box's declaration is the what-if's spec: what the capture noted about it is moot
  const underWhatif = Boolean(whatif && whatif.byIndex.has(i));
  byId("leaf-title").textContent = leaf.path;
  const mesh = leaf.mesh !== null ? snap.meshes[leaf.mesh] : null;
  const held = lay ? notHeld(leaf, lay) : new Set();
  /** @type {[string, string | null | undefined][]} */
  const rows = [
    ["type", leaf.box ? `${leaf.box} of ${leaf.type}` : leaf.type],
    ["kind", kindOnDevices(leaf)],
    ["array", leaf.shape ? `(${leaf.shape.join(", ")}) ${leaf.dtype}` : null],
    ["spec", v.spec || (leaf.sharding ? leaf.sharding : null)],
    ["captured spec", v.changed || v.error ? v.captured : null],
    ["what-if error", v.error ? `${v.error.code}: ${v.error.message}` : null],
    ["declared", leaf.declared_spec && leaf.declared_spec !== v.spec && !underWhatif ? leaf.declared_spec : null],
    ["logical axes", logicalAxesText(leaf.logical_axes)],
    ["rules", leaf.rules ? rulesText(leaf.rules) : null],
    ["mesh", mesh ? `${meshAxes(mesh)} — devices ${JSON.stringify(mesh.device_ids)}` : null],
    ["memory kind", leaf.memory_kind],
    ["shard shape", lay ? `(${lay.shard_shape.join(", ")})` : null],
    ["per device", lay ? fmtBytes(lay.bytes_per_device) : null],
    ["total", lay ? `${fmtBytes(lay.total_bytes)} across ${lay.shards.length} devices vs ${fmtBytes(lay.logical_bytes)} logical` : null],
    ["replication", lay ? `${lay.replication_factor}×${lay.replicated_axes.length ? ` (over ${lay.replicated_axes.join(", ")})` : ""}` : null],
    ["processes", leaf.processes ? `reported by ${leaf.processes.join(", ")}` : null],
    ["not held", held.size ? `${snap.platform.toUpperCase()} ${compactIds([...held])}` : null],
    ["conflict", leaf.conflict],
    ["note", underWhatif ? null : leaf.note],
  ];
  if (lay) lay.dims.forEach((/** @type {any} */ d, /** @type {number} */ k) => rows.push([k === 0 ? "split" : " ", d.text]));
  byId("leaf-summary").replaceChildren(defList(rows));
  if (!lay) {
    gridBox.hidden = legend.hidden = true;
    return;
  }
  gridBox.hidden = false;
  layoutGrid(gridBox, Layout.fromSnapshot(snap, lay, leaf.mesh), { dark: isDark(), interactive: false, faded: held, maxHeight: 420 });
  gridBox.dataset.path = leaf.path;
  legend.hidden = held.size === 0;
  legend.textContent = leaf.missing_devices
    ? "Faded tiles: shards on devices whose process did not report."
    : "Faded tiles: shards on other processes' devices (not addressable from the process that captured).";
}

// ---------------------------------------------------------------- memory, header, processes, collectives

async function plotMemory() {
  const platform = snap.platform.toUpperCase();
  const next = whatif ? whatif.memory : null;
  memoryVerdict(byId("memory-flag"), snap.memory, next, platform);
  const hostOf = new Map(snap.devices.id.map((/** @type {number} */ id, /** @type {number} */ k) => [id, snap.devices.process_index[k]]));
  await memoryChart(byId("memory-chart"), { mem: snap.memory, next, platform, hostOf, dark: isDark() });
  if (!document.body.dataset.plottedAt) document.body.dataset.plottedAt = String(Math.round(performance.now()));
}

/** @param {string} label @param {string} value */
function option(label, value) {
  const o = el("option", "", label);
  o.value = value;
  return o;
}

function renderHead() {
  const runInfo = snap.processes;
  byId("snap-title").textContent = snap.name + (runInfo ? ` — run of ${runInfo.count} process${runInfo.count > 1 ? "es" : ""}` : "");
  byId("snap-summary").replaceChildren(defList(snapshotFacts(snap, rulesText)));
  const box = byId("processes");
  box.replaceChildren();
  box.hidden = !runInfo && !state.run;
  if (runInfo) {
    box.appendChild(el("h3", "", `Processes: ${runInfo.reported.length} of ${runInfo.count} reported`));
    if (runInfo.missing.length) box.appendChild(el("p", "warn", `Missing: process ${runInfo.missing.join(", ")} — their shards are shown faded.`));
    const { table, body } = headedTable("procs", ["process", "status", "devices"]);
    runInfo.devices.forEach((/** @type {number[]} */ ids, /** @type {number} */ p) => {
      const ok = runInfo.reported.includes(p);
      body.insertRow().append(el("td", "", String(p)), el("td", ok ? "" : "bad", ok ? "reported" : "missing"), el("td", "", `${snap.platform.toUpperCase()} ${compactIds(ids)}`));
    });
    box.appendChild(table);
    byId("diff-process").replaceChildren(option("—", ""), ...runInfo.reported.map((/** @type {number} */ p) => option(`process ${p}`, String(p))));
    byId("diff-process-field").hidden = false;
  } else if (state.run) {
    box.appendChild(el("p", "", `Process ${state.process} of run ${state.run.slice(0, 6)}…`));
  }
  const coll = snap.collectives;
  byId("collectives-section").hidden = !coll || !coll.length;
  if (coll && coll.length) collectivesTable(byId("collectives"), coll);
  const axes = new Set();
  for (const m of snap.meshes) for (const a of m.axis_names) axes.add(a);
  const sel = /** @type {HTMLSelectElement} */ (byId("axis-filter"));
  sel.replaceChildren(option("any", ""), ...[...axes, "(replicated)", "(not split)"].map((a) => option(a, a)));
  sel.value = state.axis;
}

// ---------------------------------------------------------------- what-if

function defaultRules() {
  if (snap.rules) return rulesText(snap.rules);
  const withRules = snap.leaves.find((/** @type {any} */ l) => l.rules);
  return withRules ? rulesText(withRules.rules) : "";
}

/** @param {string} text @param {boolean} push */
async function applyRules(text, push) {
  const box = byId("whatif-error");
  showError(box, null);
  if (!text.trim()) {
    whatif = null;
    state.rules = "";
    if (push) pushUrl(false);
    byId("whatif-status").textContent = "";
    return refreshAll();
  }
  let rules;
  try {
    rules = parseRules(text);
  } catch (e) {
    showError(box, e);
    return;
  }
  byId("whatif-status").textContent = "computing…";
  try {
    const res = await postJSON("/api/snapshots/whatif", { ref: currentRef(), rules });
    whatif = { ...res, byIndex: new Map(res.leaves.map((/** @type {any} */ r) => [r.index, r])) };
    state.rules = text;
    if (push) pushUrl(false);
    byId("whatif-status").textContent = `${res.leaves.length} logically named leaves: ${res.changed} change, ${res.errors} cannot be laid out`;
    bump("whatif");
  } catch (e) {
    byId("whatif-status").textContent = "";
    showError(box, e);
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

/**
 * What a "compare with" text names: "process N" of this run, a pasted share link (resolved through
 * GET /api/links/<id> to the snapshot it shows), a snapshots page address, or a snapshot id.
 * @param {string} text
 */
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

/** @param {string} text @param {boolean} push */
async function runDiff(text, push) {
  const box = byId("diff-error");
  showError(box, null);
  const out = byId("diff-result");
  if (!text.trim()) {
    out.replaceChildren();
    state.diff = "";
    if (push) pushUrl(false);
    return;
  }
  byId("diff-status").textContent = "comparing…";
  try {
    const res = await postJSON("/api/snapshots/diff", { a: currentRef(), b: await otherRef(text) });
    state.diff = text.trim();
    if (push) pushUrl(false);
    const s = res.summary;
    byId("diff-status").textContent = "";
    const { table, body } = headedTable("procs diff", ["path", "status", "here", "there", "bytes to move"]);
    for (const r of res.leaves.slice(0, 2000)) {
      const b = el("button", "link", r.path);
      b.type = "button";
      b.addEventListener("click", () => {
        const i = snap.leaves.findIndex((/** @type {any} */ l) => l.path === r.path);
        if (i >= 0) selectLeaf(i, true);
      });
      const cell = el("td");
      cell.appendChild(b);
      body.insertRow().append(cell, el("td", r.status, r.status), el("td", "mono", r.a_spec || "—"), el("td", "mono", r.b_spec || "—"), el("td", "num", fmtBytes(r.bytes_to_move)));
    }
    out.replaceChildren(
      el("p", "diff-summary", `${s.changed} changed, ${s.added} added, ${s.removed} removed, ${s.same} the same; ${fmtBytes(s.bytes_to_move)} would move (bytes each device must receive).`),
      table,
    );
    bump("diffs");
  } catch (e) {
    byId("diff-status").textContent = "";
    showError(box, e);
  }
}

// ---------------------------------------------------------------- recently opened (this browser only)

const RECENT_KEY = "shardscope.recentSnapshots";
const RECENT_MAX = 12;

/** @returns {{href: string, name: string, what: string, at: number}[]} */
function recentList() {
  try {
    const list = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]");
    return Array.isArray(list) ? list.filter((r) => r && typeof r.href === "string" && r.href.startsWith("/snapshots.html?")) : [];
  } catch {
    return [];
  }
}

/** Remembers what is on screen, newest first (share links are the only way in: the server lists none). */
function remember() {
  const q = new URLSearchParams();
  for (const k of ["snapshot", "run", "process"]) if (state[k]) q.set(k, state[k]);
  const href = `/snapshots.html?${q}`;
  const what = `${snap.leaves.length} leaves on ${snap.devices.id.length} ${snap.platform} devices`;
  const list = [{ href, name: String(snap.name).slice(0, 200), what, at: Date.now() }, ...recentList().filter((r) => r.href !== href)];
  try {
    localStorage.setItem(RECENT_KEY, JSON.stringify(list.slice(0, RECENT_MAX)));
  } catch {
    // storage full or refused: the list is a convenience
  }
}

/** The empty page: open a link, or one of the snapshots this browser opened before. */
function renderRecent() {
  const box = byId("recent");
  const list = recentList();
  box.replaceChildren();
  if (!list.length) {
    box.appendChild(el("p", "muted", "Snapshots you open are listed here (kept in this browser only; the server lists none: a share link is what opens one)."));
    return;
  }
  box.appendChild(el("h3", "", "Recently opened in this browser"));
  const ul = el("ul");
  for (const r of list) {
    const a = el("a", "", r.name || "(unnamed)");
    a.href = r.href;
    const li = el("li");
    li.append(a, el("span", "muted", `${r.what} · ${new Date(r.at).toLocaleString()}`));
    ul.appendChild(li);
  }
  const forget = el("button", "link", "forget this list");
  forget.type = "button";
  forget.addEventListener("click", () => {
    localStorage.removeItem(RECENT_KEY);
    renderRecent();
  });
  box.append(ul, forget);
}

// ---------------------------------------------------------------- loading and wiring

async function load() {
  snap = null;
  whatif = null;
  if (state.run) {
    const merged = await getJSON(`/api/snapshots/runs/${encodeURIComponent(state.run)}`);
    if (state.process !== "") {
      const part = merged.processes.snapshots.find((/** @type {any} */ p) => String(p.process_index) === state.process);
      if (!part) throw new ApiError(404, { code: "not_found", message: `process ${state.process} did not report to this run` });
      snap = await getJSON(`/api/snapshots/${part.id}`);
    } else snap = merged;
  } else if (state.snapshot) {
    snap = await getJSON(`/api/snapshots/${encodeURIComponent(state.snapshot)}`);
  }
}

async function start() {
  byId("empty").hidden = Boolean(snap);
  document.querySelector("main")?.classList.toggle("no-snapshot", !snap);
  if (!snap) {
    byId("snap-title").textContent = "Snapshots";
    byId("snap-summary").replaceChildren();
    renderRecent();
    return;
  }
  remember();
  renderHead();
  tree = leafTree(byId("leaf-table"), snap.leaves, {
    now,
    kind: kindText,
    onOpen: (i) => selectLeaf(i, true),
    onRows: () => {
      // For bench/bench_snapshots.py: when the table first had rows (ms since this page's navigation).
      if (!document.body.dataset.rowsAt) document.body.dataset.rowsAt = String(Math.round(performance.now()));
    },
  });
  tree.body.id = "leaf-rows";
  tree.select(state.leaf);
  /** @type {HTMLInputElement} */ (byId("filter")).value = state.q;
  /** @type {HTMLSelectElement} */ (byId("kind-filter")).value = state.kind;
  /** @type {HTMLTextAreaElement} */ (byId("rules")).value = state.rules || defaultRules();
  await (state.rules ? applyRules(state.rules, false) : refreshAll());
  if (state.diff) {
    /** @type {HTMLInputElement} */ (byId("diff-with")).value = state.diff;
    await runDiff(state.diff, false);
  }
}

/** (Re)opens the view at the state in `q`: on arrival, and after back or forward. @param {URLSearchParams} q */
async function open(q) {
  showError(byId("snap-error"), null);
  state = fromQuery(q);
  try {
    await load();
    await start();
  } catch (e) {
    showError(byId("snap-error"), e);
    byId("empty").hidden = false;
    document.querySelector("main")?.classList.add("no-snapshot");
    renderRecent();
  }
  bump("loaded");
}

function wire() {
  const filter = /** @type {HTMLInputElement} */ (byId("filter"));
  filter.addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = window.setTimeout(() => {
      state.q = filter.value;
      pushUrl(true);
      applyFilter();
      bump("filtered");
    }, 80);
  });
  for (const [id, key] of [["axis-filter", "axis"], ["kind-filter", "kind"]]) {
    byId(id).addEventListener("change", () => {
      state[key] = /** @type {HTMLSelectElement} */ (byId(id)).value;
      pushUrl(false);
      applyFilter();
      bump("filtered");
    });
  }
  const rules = /** @type {HTMLTextAreaElement} */ (byId("rules"));
  byId("apply-rules").addEventListener("click", () => applyRules(rules.value, true));
  byId("reset-rules").addEventListener("click", () => {
    rules.value = defaultRules();
    applyRules("", true);
  });
  const diffWith = /** @type {HTMLInputElement} */ (byId("diff-with"));
  byId("diff-run").addEventListener("click", () => {
    const sel = /** @type {HTMLSelectElement} */ (byId("diff-process")).value;
    runDiff(diffWith.value || (sel ? `process ${sel}` : ""), true);
  });
  byId("diff-clear").addEventListener("click", () => {
    diffWith.value = "";
    runDiff("", true);
  });
  shareControl(byId("share"), {
    view: "snapshots",
    state: () => Object.fromEntries(Object.entries(state).filter(([, v]) => v !== "")),
    onStatus: (text) => (byId("status").textContent = text),
    onError: (e) => showError(byId("snap-error"), e),
  });
  byId("open-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = /** @type {HTMLInputElement} */ (byId("open-with")).value;
    try {
      const ref = await otherRef(text);
      const q = new URLSearchParams(Object.entries(ref).map(([k, v]) => [k, String(v)]));
      location.assign(`/snapshots.html?${q}`);
    } catch (err) {
      showError(byId("snap-error"), err);
    }
  });
  onBackForward(open);
  onThemeChange(() => snap && refreshAll());
}

bootPage("snapshots");
wire();
open(pageQuery());
