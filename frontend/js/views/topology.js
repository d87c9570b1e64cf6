// The topology view (topology.html): the physical interconnect with the mesh laid on it. Devices take
// the colour of the layout tile they hold (the layout model's colours, as in every view); choosing a
// mesh axis, or groups handed over by another view (a collective's), draws the rings and the hop
// table says how far apart consecutive members are.

import { getJSON, isAbort, newestWins, platformsCatalog, postJSON } from "../lib/api.js";
import { defList, el, headedTable } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { compactIds, fmtIndex, parseGroups } from "../lib/format.js";
import { bootPage, bump, byId, isDark, onThemeChange } from "../lib/page.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { layoutControls } from "../components/pickers.js";
import { RING_FAR, RING_NEAR, WRAP, topologyMap } from "../components/topology_map.js";
import { Layout, noTileColour } from "../model/layout.js";
import { ORDERS, fromQuery, layoutHref, layoutRequest, meshRequest, toQuery } from "../model/state.js";

const TABLE_ROWS = 64;
const status = byId("status");

/** @type {import("../model/state.js").State} */
let state = fromQuery(pageQuery());
/** @type {{topo: any, meshInfo: any, layout: Layout | null} | null} */
let data = null;
/** @type {ReturnType<typeof layoutControls> | null} */
let controls = null;
/** The picture on screen and what it was built for (a new topology or theme rebuilds it). */
/** @type {{view: import("../components/topology_map.js").MapView, topo: any, dark: boolean} | null} */
let map = null;
/** When the axis choice changed (for the "axis-switch" measure: choice to picture on screen). */
let axisSwitchAt = 0;

/**
 * Shows what is wrong (null clears); what is on screen is from the last good state, so it dims,
 * summary and tables too, and says so.
 * @param {unknown} err
 */
function fail(err) {
  explain(err);
  markStale(Boolean(err));
}

const SETTLE_MS = 600;
let typedAt = 0;
let explainTimer = 0;
let explained = "";

/**
 * The error box (role=alert): cleared at once, filled only once typing has paused and only with
 * something new, so a screen reader hears one message per pause.
 * @param {unknown} err
 */
function explain(err) {
  clearTimeout(explainTimer);
  const box = byId("spec-error");
  if (!err) {
    explained = "";
    showError(box, null);
    return;
  }
  explainTimer = window.setTimeout(() => {
    const key = err instanceof Error ? err.message : String(err);
    if (key === explained) return;
    explained = key;
    showError(box, err);
  }, Math.max(0, typedAt + SETTLE_MS - performance.now()));
}

/** @param {boolean} stale */
function markStale(stale) {
  const on = stale && Boolean(data);
  byId("topo-results").classList.toggle("stale", on);
  const note = byId("stale-note");
  note.hidden = !on;
  if (on && data) note.textContent = `Still showing the last state that loaded: ${data.topo.devices_key}${data.layout ? `, ${data.layout.spec}` : ""}.`;
}

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
      axisSwitchAt = performance.now();
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
  const drawn = data && data.topo && map && map.view.mode === "3d" && axis.groups.length > 96 ? " — the first 96 drawn" : axis.groups.length > 256 ? " — the first 256 drawn" : "";
  byId("hop-summary").replaceChildren(defList([
    ["axis", `${axis.name} (${axis.size} devices per group, ${axis.groups.length} groups${drawn})`],
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

/**
 * The hover card's lines for a device: where it is, the block of the array it holds (and who else
 * holds it), its place in the mesh and in the selected axis's group.
 * @param {any} topo @param {Layout | null} layout @param {any} axis
 * @returns {(id: number) => string[]}
 */
function describer(topo, layout, axis) {
  const devices = new Map(topo.devices.map((/** @type {any} */ d) => [d.id, d]));
  /** @type {Map<number, [number, number]>} */
  const member = new Map();
  if (axis) axis.groups.forEach((/** @type {number[]} */ g, /** @type {number} */ gi) => g.forEach((id, i) => member.set(id, [gi, i])));
  /** @type {Map<number, string>} */
  const meshAt = new Map();
  if (layout) {
    const { shape, axis_names: names } = layout.mesh;
    layout.meshIds.forEach((id, i) => {
      const at = [];
      for (let a = shape.length - 1, rem = i; a >= 0; a--) {
        at.unshift(`${names[a]}=${rem % shape[a]}`);
        rem = Math.floor(rem / shape[a]);
      }
      meshAt.set(id, at.join(", "));
    });
  }
  const platform = String(topo.platform).toUpperCase();
  return (id) => {
    const d = devices.get(id);
    const where = d && d.coords ? ` · coords (${d.coords.join(",")}) core ${d.core_on_chip}` : "";
    const slice = d && d.slice_index !== undefined && d.slice_index !== null ? ` · slice ${d.slice_index}` : "";
    const lines = [`${platform} ${id}${where} · host ${d ? d.process_index : "?"}${slice}`];
    if (layout) {
      const k = layout.tileOfDevice.get(id);
      if (k === undefined) lines.push(`holds no block of ${layout.spec} (not in the mesh)`);
      else {
        const t = layout.tiles[k];
        lines.push(`holds ${fmtIndex(t.index)} of ${layout.spec} on ${JSON.stringify(layout.shape)}`);
        lines.push(t.ids.length > 1 ? `replica ${t.replicas.get(id)} of ${t.ids.length}: ${platform} ${compactIds(t.ids)}` : "the only device holding it");
      }
      if (meshAt.has(id)) lines.push(`mesh position (${meshAt.get(id)})`);
    }
    const m = member.get(id);
    if (axis && m) lines.push(`${axis.name}: group ${m[0]}, member ${m[1] + 1} of ${axis.groups[m[0]].length}`);
    return lines;
  };
}

/** The legend: what each colour and line means, with the tiles' colours when they are few. @param {any} topo @param {Layout | null} layout @param {boolean} three */
function renderLegend(topo, layout, three) {
  const box = byId("topo-legend");
  const dark = isDark();
  /** @param {string} cls @param {string} colour @param {string} text */
  const item = (cls, colour, text) => {
    const li = el("li", "legend-item");
    const sw = el("span", `swatch ${cls}`);
    sw.style.setProperty("--swatch", colour);
    li.append(sw, text);
    return li;
  };
  const list = el("ul", "legend");
  if (layout) {
    const tiles = layout.tiles;
    for (const t of tiles.slice(0, 12)) {
      const ids = compactIds(t.ids);
      const who = ids.length > 44 ? `${ids.slice(0, 36)}… (${t.ids.length} devices)` : ids;
      list.appendChild(item("fill", layout.colourOf(t.ids[0], dark), `${fmtIndex(t.index)}: ${layout.platform} ${who}`));
    }
    if (tiles.length > 12) list.appendChild(el("li", "legend-item muted", `… ${tiles.length - 12} more blocks: each colour is one block of ${layout.spec}, shared by its replicas`));
  }
  list.appendChild(item("fill", noTileColour(dark), layout ? "holds no block (not in the mesh)" : "no layout: every device grey"));
  list.appendChild(item("line", RING_NEAR, "ring hop over one link"));
  list.appendChild(item("line", RING_FAR, "ring hop over more than one link"));
  if (!three) list.appendChild(item("line dashed", RING_NEAR, "the hop closing a ring"));
  if (topo.links.some((/** @type {any} */ l) => l.kind === "ici")) list.appendChild(item("line", dark ? "#8b929a" : "#9aa1a9", "ICI link"));
  if (topo.links.some((/** @type {any} */ l) => l.wraparound)) list.appendChild(item("line dashed", WRAP, three ? "wraparound link (stubs out of both faces)" : "wraparound link"));
  list.appendChild(item("box", dark ? "#d0d4da" : "#4b525b", "a host"));
  const help = el("p", "muted", three
    ? "Drag to rotate (shift-drag to pan), scroll to zoom; or focus the picture and use the arrow keys and + −. Hover a device for the block it holds."
    : "Hover a device for the block it holds, its mesh position and its group.");
  box.replaceChildren(list, help);
}

function draw() {
  if (!data) return;
  const { topo, meshInfo, layout } = data;
  const axis = meshInfo.axes.find((/** @type {any} */ a) => a.name === state.axis) || null;
  const dark = isDark();
  const host = byId("topo-view");
  const opts = {
    colour: layout ? (/** @type {number} */ id) => layout.colourOf(id, dark) : () => noTileColour(dark),
    rings: axis,
    dark,
    describe: describer(topo, layout, axis),
  };
  const t0 = performance.now();
  let drawn;
  if (map && map.topo === topo && map.dark === dark) {
    // the same topology: new colours and rings, no rebuild (a 3-D lattice only redraws)
    drawn = map.view.update(opts);
  } else {
    const view = topologyMap(host, topo, opts);
    map = { view, topo, dark };
    drawn = view.drawn;
  }
  host.dataset.deviceMarks = String(map.view.marks);
  host.dataset.mode = map.view.mode;
  host.dataset.axis = axis ? axis.name : "";
  renderLegend(topo, layout, map.view.mode === "3d");
  renderHops(axis);
  drawn.then(() => {
    performance.measure("topology-draw", { start: t0, end: performance.now() });
    if (axisSwitchAt) performance.measure("axis-switch", { start: axisSwitchAt, end: performance.now() });
    axisSwitchAt = 0;
    bump("rendered");
  }, fail);
}

/** Loads the topology, the mesh on it and the layout (a newer load aborts this one). @param {AbortSignal} signal */
async function refresh(signal) {
  status.textContent = "loading…";
  const req = meshRequest(state);
  const q = new URLSearchParams({ devices: state.devices });
  if (state.slices > 1) q.set("slices", String(state.slices));
  const tFetch = performance.now();
  // everything at once: the topology, the mesh on it, handed-over groups and the layout's colours
  const groups = parseGroups(state.groups);
  const name = (state.glabel || "collective groups").slice(0, 120);
  // handed-over groups go as one flat list cut into groups of one size (the API bounds the ids)
  const groupsBody = groups && { devices: req.devices, slices: req.slices, ids: groups.flat(), group_size: groups[0].length, name };
  /** @type {Promise<Layout | unknown>} the layout, or why there is none (the topology still draws, in grey) */
  const laidOut = (async () => {
    try {
      return Layout.fromApi(await postJSON("/api/layout", layoutRequest(state), signal));
    } catch (e) {
      if (isAbort(e)) throw e;
      return e;
    }
  })();
  const [topo, meshInfo, extra, layoutOrError] = await Promise.all([
    getJSON(`/api/topology?${q}`, signal),
    postJSON("/api/topology/mesh", req, signal),
    groupsBody ? postJSON("/api/topology/groups", groupsBody, signal) : Promise.resolve(null),
    laidOut,
  ]);
  // groups handed over by another view (a kernel's collective) become one more "axis"
  if (extra) {
    extra.name = `⟨${extra.name}⟩`;
    meshInfo.axes.push(extra);
    if (!state.axis) state.axis = extra.name;
  }
  const layout = layoutOrError instanceof Layout ? layoutOrError : null;
  explain(layout ? null : layoutOrError);
  signal.throwIfAborted();
  performance.measure("topology-fetch", { start: tFetch, end: performance.now() });
  data = { topo, meshInfo, layout };
  if (state.axis && !meshInfo.axes.some((/** @type {any} */ a) => a.name === state.axis)) state.axis = "";
  renderSummary(topo, meshInfo, layout);
  renderAxisButtons(meshInfo);
  renderOrderings(meshInfo);
  markStale(false);
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
  typedAt = performance.now();
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
  onThemeChange(() => {
    map = null;
    draw();
  });
  // the picture loads from the address while the pickers wait for the catalog
  schedule(0);
  const catalog = await platformsCatalog(fail);
  // no Axis types field: the state's types (a kernel's, handed over) are kept as they came
  const fields = { shape: /** @type {HTMLInputElement} */ (byId("array-shape")), spec: /** @type {HTMLInputElement} */ (byId("spec")) };
  controls = layoutControls(byId("pickers"), catalog, { fields, onChange, onInput, orders: ORDERS.filter((o) => o[0] !== "single") });
  stateToControls();
}

main();
