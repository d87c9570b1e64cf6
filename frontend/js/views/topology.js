// The topology view (topology.html): the physical interconnect with the mesh laid on it. Devices take
// the colour of the layout tile they hold (the layout model's colours, as in every view); choosing a
// mesh axis, or groups handed over by another view (a collective's), draws the rings and the hop
// table says how far apart consecutive members are.

import { getJSON, isAbort, newestWins, postJSON } from "../lib/api.js";
import { defList, el, headedTable } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { compactIds, parseGroups } from "../lib/format.js";
import { bootPage, bump, byId, isDark, onThemeChange } from "../lib/page.js";
import { loadPlotly } from "../lib/plotly.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { layoutControls } from "../components/pickers.js";
import { topologyMap } from "../components/topology_map.js";
import { Layout, noTileColour } from "../model/layout.js";
import { fromQuery, layoutHref, layoutRequest, meshRequest, toQuery } from "../model/state.js";

const TABLE_ROWS = 64;
const status = byId("status");

/** @type {import("../model/state.js").State} */
let state = fromQuery(pageQuery());
/** @type {{topo: any, meshInfo: any, layout: Layout | null} | null} */
let data = null;
/** @type {ReturnType<typeof layoutControls> | null} */
let controls = null;

/** @param {unknown} err */
const fail = (err) => showError(byId("spec-error"), err);

// ---------------------------------------------------------------- tables

/** @param {any} topo @param {any} meshInfo @param {Layout | null} layout */
function renderSummary(topo, meshInfo, layout) {
  /** @type {[string, string][]} */
  const rows = [
    ["devices", `${topo.devices.length} × ${topo.device_kind} (${topo.devices_key})`],
    ["hosts", `${topo.hosts.length}${topo.chips_per_host ? `, ${topo.chips_per_host.join("x")} chips each` : ""}`],
  ];
  if (topo.topology) {
    const wrap = topo.wraparound.map((/** @type {boolean} */ w, /** @type {number} */ i) => (w ? "xyz"[i] : null)).filter(Boolean);
    rows.push(["torus", `${topo.topology.join("x")} chips; wraparound on ${wrap.length ? wrap.join(", ") : "no axis"}`]);
    rows.push(["links", `${topo.links.filter((/** @type {any} */ l) => l.kind === "ici").length} ICI (${topo.links.filter((/** @type {any} */ l) => l.wraparound).length} wraparound)`]);
  }
  if (topo.slices > 1) rows.push(["slices", `${topo.slices}, joined by DCN`]);
  if (topo.platform === "gpu") rows.push(["links", "NVLink (NVSwitch) within a host; the network between hosts"]);
  rows.push(["mesh", meshInfo.axes.filter((/** @type {any} */ a) => !a.name.startsWith("⟨")).map((/** @type {any} */ a) => `${a.name}(${a.size})`).join(" × ")]);
  rows.push(["colours", layout ? `tiles of ${layout.spec} on a ${JSON.stringify(layout.shape)} array` : "no layout (grey)"]);
  byId("topo-summary").replaceChildren(defList(rows));
}

/** @param {any} meshInfo */
function renderAxisButtons(meshInfo) {
  const box = byId("axis-buttons");
  box.replaceChildren();
  for (const name of ["", ...meshInfo.axes.map((/** @type {any} */ a) => a.name)]) {
    const input = el("input");
    input.type = "radio";
    input.name = "axis";
    input.value = name;
    input.checked = name === state.axis;
    input.addEventListener("change", () => {
      state.axis = name;
      pushUrl(false);
      draw();
    });
    const label = el("label", "radio");
    label.append(input, name ? ` ${name}` : " none");
    box.appendChild(label);
  }
}

/** @param {any} axis one of /api/topology/mesh's axes, or the handed-over groups */
function renderHops(axis) {
  const table = byId("hop-table");
  if (!axis) {
    byId("hop-summary").replaceChildren(el("p", "muted", "Choose a mesh axis to see its rings."));
    table.replaceChildren();
    return;
  }
  const verdict = axis.is_ring ? "every group is a ring of nearest neighbours" : `${axis.groups_not_rings} of ${axis.groups.length} groups have a hop longer than one link`;
  byId("hop-summary").replaceChildren(defList([
    ["axis", `${axis.name} (${axis.size} devices per group, ${axis.groups.length} groups)`],
    ["hops", `max ${axis.max_hop}, mean ${axis.mean_hop.toFixed(2)}; ${verdict}`],
    ["crosses", `${axis.crosses_hosts ? `hosts (${axis.groups_crossing_hosts} groups)` : "no hosts"}${axis.crosses_slices ? ", slices (DCN)" : ""}; interconnect ${axis.interconnect}`],
  ]));
  const t = headedTable("hops", ["group", "devices in ring order", "hops (last closes the ring)", "max"]);
  axis.groups.slice(0, TABLE_ROWS).forEach((/** @type {number[]} */ group, /** @type {number} */ gi) => {
    const tr = t.body.insertRow();
    tr.insertCell().textContent = String(gi);
    tr.insertCell().textContent = group.length > 16 ? compactIds(group) + ` (${group.length})` : group.join(" ");
    const hops = /** @type {number[]} */ (axis.hops[gi]);
    const cell = tr.insertCell();
    hops.forEach((hp, i) => cell.append(el("span", hp > 1 ? "hop far" : "hop", String(hp)), i < hops.length - 1 ? " " : ""));
    const max = hops.length ? Math.max(...hops) : 0;
    const mc = tr.insertCell();
    mc.textContent = String(max);
    if (max > 1) mc.className = "far";
  });
  table.replaceChildren(t.table);
  if (axis.groups.length > TABLE_ROWS) table.appendChild(el("p", "muted", `… and ${axis.groups.length - TABLE_ROWS} more groups`));
}

/** @param {any} meshInfo */
function renderOrderings(meshInfo) {
  // the mesh's own axes only: handed-over groups (⟨…⟩) have no ordering to compare
  const meshAxes = meshInfo.axes.filter((/** @type {any} */ a) => !a.name.startsWith("⟨"));
  const t = headedTable("hops", ["order", ...meshAxes.map((/** @type {any} */ a) => `axis ${a.name}: max / mean hop`), "first devices"]);
  for (const o of meshInfo.orderings) {
    const tr = t.body.insertRow();
    tr.insertCell().textContent = o.order;
    if (o.error) {
      const td = tr.insertCell();
      td.colSpan = meshAxes.length + 1;
      td.textContent = `${o.error.code}: ${o.error.hint || o.error.message}`;
      td.className = "muted";
      continue;
    }
    for (const a of o.axes) {
      const td = tr.insertCell();
      td.textContent = `${a.max_hop} / ${a.mean_hop.toFixed(2)}${a.is_ring ? " ring" : ""}`;
      if (!a.is_ring) td.className = "far";
    }
    tr.insertCell().textContent = o.device_ids.flat(Infinity).slice(0, 16).join(" ");
  }
  byId("orderings").replaceChildren(t.table);
}

// ---------------------------------------------------------------- state and loading

/** @param {boolean} replace */
function pushUrl(replace) {
  writeUrl("/topology.html", toQuery(state), replace);
  /** @type {HTMLAnchorElement} */ (byId("open-layout")).href = layoutHref(state);
}

function draw() {
  if (!data) return;
  const { topo, meshInfo, layout } = data;
  const axis = meshInfo.axes.find((/** @type {any} */ a) => a.name === state.axis) || null;
  const dark = isDark();
  const host = byId("topo-view");
  const view = topologyMap(host, topo, {
    colour: layout ? (id) => layout.colourOf(id, dark) : () => noTileColour(dark),
    rings: axis,
    dark,
  });
  host.dataset.deviceMarks = String(view.marks);
  host.dataset.mode = view.mode;
  host.dataset.axis = axis ? axis.name : "";
  const many = topo.devices.length > 1024 ? ` (With ${topo.devices.length} devices the regular ICI lattice${topo.hosts.length > 256 ? " and the host boxes are" : " is"} not drawn; hover a device for its host.)` : "";
  byId("topo-legend").textContent = view.mode === "3d"
    ? `Drag to rotate, scroll to zoom. Boxes are hosts; orange stubs are wraparound links; blue lines join consecutive members of the selected axis's groups, red ones are more than one link apart.${many}`
    : "Boxes are hosts; grey lines are ICI links, dashed orange arcs wraparound links; blue lines join consecutive members of the selected axis's groups (dashed: the closing hop), red ones are more than one link apart.";
  renderHops(axis);
  view.drawn.then(() => bump("rendered"), fail);
}

/** Loads the topology, the mesh on it and the layout (a newer load aborts this one). @param {AbortSignal} signal */
async function refresh(signal) {
  status.textContent = "loading…";
  const req = meshRequest(state);
  const q = new URLSearchParams({ devices: state.devices });
  if (state.slices > 1) q.set("slices", String(state.slices));
  // A 3-D slice will need Plotly: start loading it while the data is fetched.
  const deep = /^tpu:(v4|v5p|7x):\d+x\d+x(\d+)$/.exec(state.devices);
  if (deep && Number(deep[2]) > 1) loadPlotly().catch(() => {});
  const tFetch = performance.now();
  const [topo, meshInfo] = await Promise.all([
    getJSON(`/api/topology?${q}`, signal),
    postJSON("/api/topology/mesh", req, signal),
  ]);
  // Groups handed over by another view (a kernel's collective) become one more "axis".
  const groups = parseGroups(state.groups);
  if (groups) {
    const name = (state.glabel || "collective groups").slice(0, 120);
    // One flat list cut into groups of one size: the API bounds the ids, not lists of lists.
    const body = { devices: req.devices, slices: req.slices, ids: groups.flat(), group_size: groups[0].length, name };
    const extra = await postJSON("/api/topology/groups", body, signal);
    extra.name = `⟨${extra.name}⟩`;
    meshInfo.axes.push(extra);
    if (!state.axis) state.axis = extra.name;
  }
  /** @type {Layout | null} */
  let layout = null;
  try {
    layout = Layout.fromApi(await postJSON("/api/layout", layoutRequest(state), signal));
    fail(null);
  } catch (e) {
    if (isAbort(e)) throw e;
    fail(e); // the topology still draws, in grey
  }
  signal.throwIfAborted();
  performance.measure("topology-fetch", { start: tFetch, end: performance.now() });
  data = { topo, meshInfo, layout };
  if (state.axis && !meshInfo.axes.some((/** @type {any} */ a) => a.name === state.axis)) state.axis = "";
  renderSummary(topo, meshInfo, layout);
  renderAxisButtons(meshInfo);
  renderOrderings(meshInfo);
  draw();
  status.textContent = "";
}

const schedule = newestWins(refresh, (e) => {
  status.textContent = "";
  fail(e);
  bump("errors");
});

function stateToControls() {
  controls?.write(state);
  /** @type {HTMLAnchorElement} */ (byId("open-layout")).href = layoutHref(state);
}

function onChange() {
  const before = toQuery(state);
  controls?.read(state);
  stateToControls();
  pushUrl(false);
  // a typed field losing focus commits what typing already loaded: no second load (it would also
  // rebuild the axis choices under the pointer that took the focus)
  if (toQuery(state) !== before) schedule(0);
}

function onInput() {
  controls?.read(state);
  pushUrl(true);
  schedule(300);
}

async function main() {
  bootPage("topology");
  shareControl(byId("share"), {
    view: "topology",
    state: () => ({ ...state }),
    onStatus: (text) => (status.textContent = text),
    onError: fail,
  });
  onBackForward((q) => {
    state = fromQuery(q);
    stateToControls();
    schedule(0);
  });
  onThemeChange(draw);
  let catalog = { tpu: [], gpu: [] };
  try {
    catalog = await getJSON("/api/platforms");
  } catch (e) {
    fail(e);
  }
  // no Axis types field: the state's types (a kernel's, handed over) are kept as they came
  const fields = { shape: /** @type {HTMLInputElement} */ (byId("array-shape")), spec: /** @type {HTMLInputElement} */ (byId("spec")) };
  controls = layoutControls(byId("pickers"), catalog, { fields, onChange, onInput });
  stateToControls();
  schedule(0);
}

main();
