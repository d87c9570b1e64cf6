// The topology panel: the physical interconnect with the mesh laid on it. Devices take the colour of
// the layout tile they hold (the layout model's colours, as in every view); choosing a mesh axis, or
// groups handed over by another view (a collective's), draws the rings and the hop table says how far
// apart consecutive members are.

import { isAbort, newestWins } from "../lib/api.js";
import { defList, el, h, headedTable } from "../lib/dom.js";
import { compactIds, fmtIndex, parseGroups } from "../lib/format.js";
import { layoutControls } from "../components/pickers.js";
import { RING_FAR, RING_NEAR, WRAP, topologyMap } from "../components/topology_map.js";
import { Layout, noTileColour } from "../model/layout.js";
import { DEFAULTS, ORDERS, fromQuery, layoutQuery, layoutRequest, meshRequest, toQuery } from "../model/state.js";
import { errorBox, lifetime, settledError, shareAndStatus } from "./common.js";

export const VIEW = "topology";
export { fromQuery, toQuery };

const TABLE_ROWS = 64;

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

/** @param {any} topo @param {any} meshInfo @param {Layout | null} layout @returns {[string, string][]} */
function summaryRows(topo, meshInfo, layout) {
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
  return rows;
}

/** The hop table of an axis (or of handed-over groups). @param {any} axis @returns {HTMLElement[]} */
function hopTable(axis) {
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
  return axis.groups.length > TABLE_ROWS ? [t.table, el("p", "muted", `… and ${axis.groups.length - TABLE_ROWS} more groups`)] : [t.table];
}

/** The orderings table: the same mesh shape placed by each mesh constructor. @param {any} meshInfo */
function orderingsTable(meshInfo) {
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
  return t.table;
}

/**
 * The legend: what each colour and line means, with the tiles' colours when they are few.
 * @param {HTMLElement} legend @param {any} topo @param {Layout | null} layout @param {boolean} three @param {boolean} dark
 */
function renderLegend(legend, topo, layout, three, dark) {
  /** @param {string} cls @param {string} colour @param {string} text */
  const item = (cls, colour, text) => {
    const sw = el("span", `swatch ${cls}`);
    sw.style.setProperty("--swatch", colour);
    return h("li", { class: "legend-item" }, sw, text);
  };
  const list = el("ul", "legend");
  if (layout) {
    for (const t of layout.tiles.slice(0, 12)) {
      const ids = compactIds(t.ids);
      const who = ids.length > 44 ? `${ids.slice(0, 36)}… (${t.ids.length} devices)` : ids;
      list.appendChild(item("fill", layout.colourOf(t.ids[0], dark), `${fmtIndex(t.index)}: ${layout.platform} ${who}`));
    }
    if (layout.tiles.length > 12) list.appendChild(el("li", "legend-item muted", `… ${layout.tiles.length - 12} more blocks: each colour is one block of ${layout.spec}, shared by its replicas`));
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
  legend.replaceChildren(list, help);
}

/**
 * The hops along the chosen axis: its verdict and its groups' table.
 * @param {{hopSummary: HTMLElement, hops: HTMLElement}} into
 * @param {any} axis one of /api/topology/mesh's axes, or the handed-over groups
 * @param {string | null} mode the picture's mode ("3d" draws fewer groups)
 */
function renderHops(into, axis, mode) {
  const { hopSummary, hops } = into;
  if (!axis) {
    hopSummary.replaceChildren(el("p", "muted", "Choose a mesh axis to see its rings."));
    hops.replaceChildren();
    return;
  }
  const verdict = axis.is_ring ? "every group is a ring of nearest neighbours" : `${axis.groups_not_rings} of ${axis.groups.length} groups have a hop longer than one link`;
  const drawn = mode === "3d" && axis.groups.length > 96 ? " — the first 96 drawn" : axis.groups.length > 256 ? " — the first 256 drawn" : "";
  hopSummary.replaceChildren(defList([
    ["axis", `${axis.name} (${axis.size} devices per group, ${axis.groups.length} groups${drawn})`],
    ["hops", `max ${axis.max_hop}, mean ${axis.mean_hop.toFixed(2)}; ${verdict}`],
    ["crosses", `${axis.crosses_hosts ? `hosts (${axis.groups_crossing_hosts} groups)` : "no hosts"}${axis.crosses_slices ? ", slices (DCN)" : ""}; interconnect ${axis.interconnect}`],
  ]));
  hops.replaceChildren(...hopTable(axis));
}

/**
 * Loads the topology, the mesh on it, the groups another view handed over (one more "axis") and the layout,
 * all at once (the host can: it has each of them). The layout is the error that stopped it, when one did: the topology
 * still draws, in grey.
 * @param {import("../hosts/host.js").Data} data
 * @param {import("../model/state.js").State} state its axis set to the handed-over groups when it names none
 * @param {AbortSignal} signal
 */
async function load(data, state, signal) {
  const topology = /** @type {NonNullable<typeof data.topology>} */ (data.topology);
  const onMesh = /** @type {NonNullable<typeof data.topologyMesh>} */ (data.topologyMesh);
  const groupsOf = /** @type {NonNullable<typeof data.topologyGroups>} */ (data.topologyGroups);
  const lay = /** @type {NonNullable<typeof data.layout>} */ (data.layout);
  const req = meshRequest(state);
  const tFetch = performance.now();
  // everything at once: the topology, the mesh on it, handed-over groups and the layout's colours
  const groups = parseGroups(state.groups);
  const name = (state.glabel || "collective groups").slice(0, 120);
  // handed-over groups go as one flat list cut into groups of one size (the API bounds the ids)
  const groupsBody = groups && { devices: req.devices, slices: req.slices, ids: groups.flat(), group_size: groups[0].length, name };
  /** @type {Promise<Layout | unknown>} the layout, or why there is none (the topology still draws, in grey) */
  const laidOut = (async () => {
    try {
      return Layout.fromApi(await lay(layoutRequest(state), signal));
    } catch (e) {
      if (isAbort(e)) throw e;
      return e;
    }
  })();
  const [topo, meshInfo, extra, layoutOrError] = await Promise.all([
    topology(req.devices, req.slices || 1, signal),
    onMesh(req, signal),
    groupsBody ? groupsOf(groupsBody, signal) : Promise.resolve(null),
    laidOut,
  ]);
  // groups handed over by another view (a kernel's collective) become one more "axis"
  if (extra) {
    extra.name = `⟨${extra.name}⟩`;
    meshInfo.axes.push(extra);
    if (!state.axis) state.axis = extra.name;
  }
  return { topo, meshInfo, layoutOrError, tFetch };
}

/**
 * The choice of the mesh axis whose rings are drawn ("none" first; handed-over groups are one more).
 * @param {HTMLElement} into @param {any} meshInfo @param {string} chosen @param {(name: string) => void} onPick
 */
function renderAxisButtons(into, meshInfo, chosen, onPick) {
  into.replaceChildren();
  for (const name of ["", ...meshInfo.axes.map((/** @type {any} */ a) => a.name)]) {
    const input = h("input", { type: "radio", name: "axis", value: name });
    input.checked = name === chosen;
    input.addEventListener("change", () => onPick(name));
    into.appendChild(h("label", { class: "radio" }, input, name ? ` ${name}` : " none"));
  }
}

/**
 * The card "Topology": the summary, the axis choice, the picture (2-D or 3-D) and its legend, the hops along
 * the chosen axis and the device orders side by side; the toolbar over them. Returns its parts.
 * @param {HTMLElement} parent
 */
function mountPicture(parent) {
  const staleNote = h("p", { class: "stale-note", part: "stale-note", hidden: true });
  const summary = h("div", { class: "summary", part: "topo-summary" });
  const axisButtons = h("div", { class: "row", part: "axis-buttons" });
  const viewBox = h("div", { class: "topo-view", part: "topo-view" });
  const legend = h("div", { class: "topo-legend", part: "topo-legend" });
  const hopSummary = h("div", { class: "summary", part: "hop-summary" });
  const hops = h("div", { class: "table-wrap", part: "hop-table" });
  const orderings = h("div", { class: "table-wrap", part: "orderings" });
  const results = h("div", { class: "results", part: "topo-results" },
    staleNote, summary,
    h("fieldset", { class: "axis-picker", part: "axis-picker" }, h("legend", {}, "Highlight the rings of mesh axis"), axisButtons),
    viewBox, legend,
    h("h2", {}, "Hops along the selected axis"), hopSummary, hops,
    h("h2", {}, "Device orders side by side"),
    h("p", { class: "muted" }, "The same mesh shape placed by ", h("code", {}, "jax.make_mesh"), ", a plain ", h("code", {}, "iota"), " reshape, and ",
      h("code", {}, "create_device_mesh(..., allow_split_physical_axes=True)"), ": the largest hop per axis tells which forms rings."),
    orderings);
  const toolbar = h("div", { class: "toolbar" });
  const view = h("section", { class: "view", "aria-label": "Topology" }, toolbar, results);
  parent.append(view);
  return { staleNote, summary, axisButtons, viewBox, legend, hopSummary, hops, orderings, results, toolbar };
}

/**
 * @param {HTMLElement} root
 * @param {import("../hosts/host.js").Host} host
 * @param {import("../model/state.js").State} initial
 */
export function mount(root, host, initial) {
  /** @type {import("../model/state.js").State} */
  let state = { ...DEFAULTS, ...initial };
  const data = host.data;
  /** @type {{topo: any, meshInfo: any, layout: Layout | null} | null} */
  let shown = null;
  /** @type {ReturnType<typeof layoutControls> | null} */
  let controls = null;
  /** The picture on screen and what it was built for (a new topology or theme rebuilds it). */
  /** @type {{view: import("../components/topology_map.js").MapView, topo: any, dark: boolean} | null} */
  let map = null;
  /** When the axis choice changed (for the "axis-switch" measure: choice to picture on screen). */
  let axisSwitchAt = 0;
  let typedAt = 0;
  const life = lifetime();

  // ---------------------------------------------------------------- DOM
  root.classList.add("app", "topo-app");
  const shapeBox = h("input", { type: "text", part: "array-shape", spellcheck: "false", autocomplete: "off" });
  const specBox = h("input", { type: "text", part: "spec", spellcheck: "false", autocomplete: "off", autocapitalize: "off", "aria-label": "PartitionSpec" });
  const specError = errorBox("spec-error");
  const openLayout = h("a", { part: "open-layout" }, "Open this layout in the layout explorer");
  const pickers = h("div", { part: "pickers" });
  const aside = h("aside", { class: "controls", "aria-label": "Topology controls" },
    pickers,
    h("fieldset", {}, h("legend", {}, "Colour by layout"),
      h("div", { class: "row" }, h("label", {}, "Array shape ", shapeBox)),
      h("span", { class: "field-title" }, "PartitionSpec"), specBox, specError),
    h("p", {}, openLayout));
  root.replaceChildren(aside);
  const { staleNote, summary, axisButtons, viewBox, legend, hopSummary, hops, orderings, results, toolbar } = mountPicture(root);
  const status = shareAndStatus(toolbar, host, () => ({ ...state }), (e) => fail(e));
  toolbar.insertBefore(h("span", { class: "spacer" }), status);

  // ---------------------------------------------------------------- errors

  const spoken = settledError(specError, () => typedAt, () => {});

  /**
   * Shows what is wrong (null clears); what is on screen is from the last good state, so it dims,
   * summary and tables too, and says so.
   * @param {unknown} err
   */
  function fail(err) {
    spoken.show(err);
    markStale(Boolean(err));
  }

  /** @param {boolean} stale */
  function markStale(stale) {
    const on = stale && Boolean(shown);
    results.classList.toggle("stale", on);
    staleNote.hidden = !on;
    if (on && shown) staleNote.textContent = `Still showing the last state that loaded: ${shown.topo.devices_key}${shown.layout ? `, ${shown.layout.spec}` : ""}.`;
  }

  // ---------------------------------------------------------------- drawing

  function draw() {
    if (!shown) return;
    const { topo, meshInfo, layout } = shown;
    const axis = meshInfo.axes.find((/** @type {any} */ a) => a.name === state.axis) || null;
    const dark = host.dark();
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
      const v = topologyMap(viewBox, topo, opts);
      map = { view: v, topo, dark };
      drawn = v.drawn;
    }
    viewBox.dataset.deviceMarks = String(map.view.marks);
    viewBox.dataset.mode = map.view.mode;
    viewBox.dataset.axis = axis ? axis.name : "";
    renderLegend(legend, topo, layout, map.view.mode === "3d", dark);
    renderHops({ hopSummary, hops }, axis, map.view.mode);
    drawn.then(() => {
      performance.measure("topology-draw", { start: t0, end: performance.now() });
      if (axisSwitchAt) performance.measure("axis-switch", { start: axisSwitchAt, end: performance.now() });
      axisSwitchAt = 0;
      host.bump("rendered");
    }, fail);
  }

  // ---------------------------------------------------------------- loading

  /** Loads the topology, the mesh on it and the layout (a newer load aborts this one). @param {AbortSignal} signal */
  async function refresh(signal) {
    if (!data.topology || !data.topologyMesh || !data.topologyGroups || !data.layout) return;
    status.textContent = "loading…";
    const { topo, meshInfo, layoutOrError, tFetch } = await load(data, state, signal);
    const layout = layoutOrError instanceof Layout ? layoutOrError : null;
    spoken.show(layout ? null : layoutOrError);
    signal.throwIfAborted();
    performance.measure("topology-fetch", { start: tFetch, end: performance.now() });
    shown = { topo, meshInfo, layout };
    if (state.axis && !meshInfo.axes.some((/** @type {any} */ a) => a.name === state.axis)) state.axis = "";
    summary.replaceChildren(defList(summaryRows(topo, meshInfo, layout)));
    renderAxisButtons(axisButtons, meshInfo, state.axis, (name) => {
      axisSwitchAt = performance.now();
      state.axis = name;
      save(false);
      draw();
    });
    orderings.replaceChildren(orderingsTable(meshInfo));
    markStale(false);
    draw();
    status.textContent = "";
  }

  const { schedule, stop } = newestWins(refresh, (e) => {
    status.textContent = "";
    fail(e);
    host.bump("errors");
  });

  // ---------------------------------------------------------------- state and controls

  /** @param {boolean} replace */
  function save(replace) {
    host.save({ ...state }, replace);
    openLayout.href = host.href?.("layout", layoutQuery(state)) || "";
  }

  function stateToControls() {
    controls?.write(state);
    shapeBox.value = state.shape;
    specBox.value = state.spec;
    openLayout.href = host.href?.("layout", layoutQuery(state)) || "";
  }

  function readControls() {
    controls?.read(state);
    state.shape = shapeBox.value;
    state.spec = specBox.value;
  }

  function onChange() {
    const before = toQuery(state);
    readControls();
    stateToControls();
    save(false);
    // a typed field losing focus commits what typing already loaded: no second load (it would also
    // rebuild the axis choices under the pointer that took the focus)
    if (toQuery(state) !== before) schedule(0);
  }

  function onInput() {
    typedAt = performance.now();
    readControls();
    save(true);
    schedule(300);
  }

  for (const box of [shapeBox, specBox]) {
    box.addEventListener("input", onInput);
    box.addEventListener("change", onChange);
  }
  life.add(host.onTheme(() => {
    map = null;
    draw();
  }), stop, spoken.dispose);

  // the picture loads from the state while the pickers wait for the catalog
  stateToControls();
  schedule(0);
  data.platforms?.().then(
    (catalog) => startControls(catalog),
    (e) => {
      fail(e);
      startControls({ tpu: [], gpu: [] });
    },
  );

  /** @param {any} catalog */
  function startControls(catalog) {
    if (life.disposed) return;
    // no Axis types field: the state's types (a kernel's, handed over) are kept as they came
    controls = layoutControls(pickers, catalog, { fields: {}, onChange, onInput, orders: ORDERS.filter((o) => o[0] !== "single") });
    stateToControls();
  }

  /** @param {import("../model/state.js").State} next */
  const update = (next) => {
    state = { ...DEFAULTS, ...next };
    stateToControls();
    schedule(0);
  };
  return { update, dispose: life.dispose };
}

