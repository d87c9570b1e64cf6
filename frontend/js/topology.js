// The topology view: the physical interconnect with the mesh laid on it. 2-D slices (and GPU and
// CPU sets) are drawn as SVG grids; 3-D slices as a rotatable Plotly lattice. Devices take the
// colour of the layout tile they hold (the same colours as the layout grid); choosing a mesh axis
// draws the device groups a collective over it involves, and the hop table says how far apart
// consecutive members are on the torus.

import { ApiError, getJSON, postJSON } from "./api.js";
import { compactIds, deviceColour } from "./format.js";
import { renderNav } from "./nav.js";
import { buildPickers, devicesToPickers, fillTopologies, pickersToDevices } from "./pickers.js";
import { shareLink } from "./share.js";
import { DEFAULTS, fromObject, fromQuery, layoutRequest, parseDims, parseGroups, toQuery } from "./state.js";

const SVG = "http://www.w3.org/2000/svg";
/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const dark = () => window.matchMedia("(prefers-color-scheme: dark)").matches;
const MAX_RING_GROUPS = 256; // rings drawn at once; the table lists them all (paged)
const TABLE_ROWS = 64;

let state = { ...DEFAULTS };
let catalog = null;
/** @type {{topo: any, meshInfo: any, layout: any|null} | null} */
let data = null;
let inflight = null;
let debounce = 0;

/** @param {string} tag @param {Record<string, string|number>} attrs @param {Element} [parent] */
function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

/** @param {string} tag @param {string} [text] @param {string} [cls] */
function h(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// ---------------------------------------------------------------- colours

/** device id -> colour of the layout tile it holds (grey when there is no layout or no tile). */
function colourer(layout) {
  const byDevice = new Map();
  if (layout) {
    for (const s of layout.shards) byDevice.set(s.device_id, Math.min(...layout.tiles[s.tile]));
  }
  const grey = dark() ? "#3a3f47" : "#c9ced6";
  return (/** @type {number} */ id) => (byDevice.has(id) ? deviceColour(byDevice.get(id), dark()) : grey);
}

// ---------------------------------------------------------------- 2-D drawing (SVG)

/** Positions (x, y) in grid cells for every device, and the block each host covers. */
function planar(topo) {
  const pos = new Map(); // id -> {x, y, w, h} in cell units
  const hostBoxes = [];
  if (topo.platform === "tpu") {
    const [X, Y] = topo.topology;
    const cores = Math.max(...topo.devices.map((d) => d.core_on_chip)) + 1;
    for (const d of topo.devices) {
      const slice = d.slice_index || 0;
      const ox = slice * (X + 1);
      pos.set(d.id, { x: ox + d.coords[0] + d.core_on_chip / cores, y: d.coords[1], w: 1 / cores, h: 1, chipX: ox + d.coords[0], chipY: d.coords[1] });
    }
    for (const host of topo.hosts) {
      const ps = host.device_ids.map((id) => pos.get(id));
      const x0 = Math.min(...ps.map((p) => p.chipX));
      const y0 = Math.min(...ps.map((p) => p.chipY));
      const x1 = Math.max(...ps.map((p) => p.chipX)) + 1;
      const y1 = Math.max(...ps.map((p) => p.chipY)) + 1;
      hostBoxes.push({ x: x0, y: y0, w: x1 - x0, h: y1 - y0, label: `host ${host.process_index}` });
    }
  } else {
    // GPU: one row per host; CPU: one row
    topo.hosts.forEach((host, r) => {
      host.device_ids.forEach((id, c) => pos.set(id, { x: c, y: r, w: 1, h: 1, chipX: c, chipY: r }));
      hostBoxes.push({ x: 0, y: r, w: host.device_ids.length, h: 1, label: `host ${host.process_index}` });
    });
  }
  return { pos, hostBoxes };
}

function draw2d(topo, meshInfo, colour, axis) {
  const { pos, hostBoxes } = planar(topo);
  const cols = Math.max(...[...pos.values()].map((p) => p.x + p.w));
  const rows = Math.max(...[...pos.values()].map((p) => p.y + p.h));
  const cell = Math.max(10, Math.min(64, 860 / cols, 620 / rows));
  const pad = 28;
  const W = cols * cell + 2 * pad;
  const H = rows * cell + 2 * pad;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: Math.round(W), role: "img" });
  svg.setAttribute("aria-label", `${topo.devices_key}: ${topo.devices.length} devices`);
  const fg = dark() ? "#e6e6e6" : "#1b1f24";
  const cx = (p) => pad + (p.chipX + 0.5) * cell;
  const cy = (p) => pad + (p.chipY + 0.5) * cell;
  // ICI links between chips (one per chip pair; on-chip links are implied by the shared square)
  const links = el("g", { class: "links" }, svg);
  for (const l of topo.links) {
    if (l.kind !== "ici") continue;
    const a = pos.get(l.a);
    const b = pos.get(l.b);
    if (!l.wraparound) {
      el("line", { x1: cx(a), y1: cy(a), x2: cx(b), y2: cy(b), stroke: fg, "stroke-opacity": 0.35, "stroke-width": 1.5 }, links);
    } else {
      // wraparound: dashed arcs outside the grid, from each end chip
      const horizontal = l.axis === 0;
      const bend = pad * 0.8;
      const [x1, y1, x2, y2] = [cx(a), cy(a), cx(b), cy(b)];
      const d = horizontal
        ? `M ${x1} ${y1} C ${x1 + bend} ${y1 - bend}, ${x2 - bend} ${y2 - bend}, ${x2} ${y2}`
        : `M ${x1} ${y1} C ${x1 - bend} ${y1 + bend}, ${x2 - bend} ${y2 - bend}, ${x2} ${y2}`;
      el("path", { d, fill: "none", stroke: "#e8871e", "stroke-width": 1.5, "stroke-dasharray": "4 3", "stroke-opacity": 0.55, class: "wrap" }, links);
    }
  }
  // hosts outlined
  const hosts = el("g", { class: "hosts" }, svg);
  for (const b of hostBoxes) {
    const r = el("rect", {
      x: pad + b.x * cell + 1, y: pad + b.y * cell + 1, width: b.w * cell - 2, height: b.h * cell - 2,
      fill: "none", stroke: fg, "stroke-opacity": 0.6, "stroke-width": 1.5, rx: 4,
    }, hosts);
    const t = el("title", {}, r);
    t.textContent = b.label;
  }
  // devices, then the rings of the selected axis, then the device ids on top of both
  const devs = el("g", { class: "devices" }, svg);
  const rings = el("g", { class: "rings" }, svg);
  const labels = el("g", { class: "labels" }, svg);
  const inset = Math.min(4, cell * 0.12);
  for (const d of topo.devices) {
    const p = pos.get(d.id);
    const g = el("g", { class: "device", "data-device": d.id }, devs);
    el("rect", {
      x: pad + p.x * cell + inset, y: pad + p.y * cell + inset, width: Math.max(1, p.w * cell - 2 * inset),
      height: Math.max(1, p.h * cell - 2 * inset), fill: colour(d.id), rx: 2,
    }, g);
    const tip = el("title", {}, g);
    tip.textContent = `device ${d.id}${d.coords ? ` · coords (${d.coords.join(",")}) core ${d.core_on_chip}` : ""} · host ${d.process_index}`;
    if (cell * p.w >= 22) {
      const t = el("text", {
        x: pad + (p.x + p.w / 2) * cell, y: pad + (p.y + 0.5) * cell, "font-size": Math.min(12, cell * p.w * 0.36),
        "text-anchor": "middle", "dominant-baseline": "central", fill: dark() ? "#f4f4f4" : "#111",
        "font-family": "ui-monospace, monospace", "paint-order": "stroke", stroke: dark() ? "#15181d" : "#ffffff",
        "stroke-width": 3, "stroke-opacity": 0.8,
      }, labels);
      t.textContent = String(d.id);
    }
  }
  if (axis) {
    axis.groups.slice(0, MAX_RING_GROUPS).forEach((group, gi) => {
      const hops = axis.hops[gi];
      for (let i = 0; i < hops.length; i++) {
        const a = pos.get(group[i]);
        const b = pos.get(group[(i + 1) % group.length]);
        if (!a || !b) continue;
        const bad = hops[i] > 1;
        const closing = i === hops.length - 1 && hops.length > 1;
        const [x1, y1, x2, y2] = [cx(a), cy(a), cx(b), cy(b)];
        // the closing hop bows out to the side so it does not hide the ring's other segments
        const len = Math.hypot(x2 - x1, y2 - y1) || 1;
        const bow = closing ? Math.min(cell * 0.9, len * 0.25) : 0;
        const mx = (x1 + x2) / 2 + ((y2 - y1) / len) * bow;
        const my = (y1 + y2) / 2 - ((x2 - x1) / len) * bow;
        el("path", {
          d: `M ${x1} ${y1} Q ${mx} ${my} ${x2} ${y2}`, fill: "none", class: bad ? "ring-hop far" : "ring-hop",
          stroke: bad ? "#d62728" : "#1a66d2", "stroke-width": 3, "stroke-opacity": 0.8,
          "stroke-dasharray": closing ? "6 4" : "none",
        }, rings);
      }
    });
  }
  return { node: svg, marks: topo.devices.length };
}

// ---------------------------------------------------------------- 3-D drawing (Plotly)

function draw3d(topo, meshInfo, colour, axis) {
  const div = h("div", undefined, "plot3d");
  const [X, Y, Z] = topo.topology;
  const cores = Math.max(...topo.devices.map((d) => d.core_on_chip)) + 1;
  const byId = new Map(topo.devices.map((d) => [d.id, d]));
  const place = (d) => {
    const slice = d.slice_index || 0;
    return [d.coords[0] + slice * (X + 2) + (cores > 1 ? (d.core_on_chip - (cores - 1) / 2) * 0.3 : 0), d.coords[1], d.coords[2]];
  };
  const fg = dark() ? "#d0d4da" : "#59616b";
  const lines = (segments) => {
    const x = [], y = [], z = [];
    for (const [a, b] of segments) {
      x.push(a[0], b[0], null);
      y.push(a[1], b[1], null);
      z.push(a[2], b[2], null);
    }
    return { x, y, z };
  };
  const chipPos = (id) => {
    const d = byId.get(id);
    const slice = d.slice_index || 0;
    return [d.coords[0] + slice * (X + 2), d.coords[1], d.coords[2]];
  };
  const plain = [];
  const wraps = [];
  for (const l of topo.links) {
    if (l.kind !== "ici") continue;
    const a = chipPos(l.a);
    const b = chipPos(l.b);
    if (!l.wraparound) plain.push([a, b]);
    else {
      // stubs pointing out of both faces: the link closes the torus through the far side
      const out = [0, 0, 0];
      out[l.axis] = 0.45;
      wraps.push([a, [a[0] + out[0], a[1] + out[1], a[2] + out[2]]]);
      wraps.push([b, [b[0] - out[0], b[1] - out[1], b[2] - out[2]]]);
    }
  }
  const traces = [];
  // Past 1024 chips the regular lattice is implied by the device positions; drawing its ~18,000
  // segments (and 1,536 host boxes) would only slow software WebGL down. Wraparound stays drawn.
  const big = topo.devices.length > 1024;
  if (!big) {
    traces.push({ type: "scatter3d", mode: "lines", name: "ICI", hoverinfo: "skip", line: { color: fg, width: 2 }, opacity: 0.35, ...lines(plain) });
  }
  if (wraps.length) {
    traces.push({ type: "scatter3d", mode: "lines", name: "wraparound", hoverinfo: "skip", line: { color: "#e8871e", width: 4, dash: "dash" }, ...lines(wraps) });
  }
  // hosts as wireframe boxes (limit: the largest slices have 1536 hosts)
  const boxes = [];
  for (const host of topo.hosts.length <= 256 ? topo.hosts : []) {
    const ps = host.device_ids.map(chipPos);
    const lo = [0, 1, 2].map((k) => Math.min(...ps.map((p) => p[k])) - 0.35);
    const hi = [0, 1, 2].map((k) => Math.max(...ps.map((p) => p[k])) + 0.35);
    const c = (i, j, k) => [i ? hi[0] : lo[0], j ? hi[1] : lo[1], k ? hi[2] : lo[2]];
    for (const [a, b] of [[[0, 0, 0], [1, 0, 0]], [[0, 1, 0], [1, 1, 0]], [[0, 0, 1], [1, 0, 1]], [[0, 1, 1], [1, 1, 1]],
      [[0, 0, 0], [0, 1, 0]], [[1, 0, 0], [1, 1, 0]], [[0, 0, 1], [0, 1, 1]], [[1, 0, 1], [1, 1, 1]],
      [[0, 0, 0], [0, 0, 1]], [[1, 0, 0], [1, 0, 1]], [[0, 1, 0], [0, 1, 1]], [[1, 1, 0], [1, 1, 1]]]) {
      boxes.push([c(...a), c(...b)]);
    }
  }
  if (boxes.length) {
    traces.push({ type: "scatter3d", mode: "lines", name: "hosts", hoverinfo: "skip", line: { color: fg, width: 1 }, opacity: 0.25, ...lines(boxes) });
  }
  const pts = topo.devices.map(place);
  traces.push({
    type: "scatter3d", mode: "markers", name: "devices",
    x: pts.map((p) => p[0]), y: pts.map((p) => p[1]), z: pts.map((p) => p[2]),
    marker: { size: topo.devices.length > 2000 ? 3 : 6, color: topo.devices.map((d) => colour(d.id)), line: { width: 0 } },
    text: topo.devices.map((d) => `device ${d.id} · coords (${d.coords.join(",")}) core ${d.core_on_chip} · host ${d.process_index}${d.slice_index !== undefined && d.slice_index !== null ? ` · slice ${d.slice_index}` : ""}`),
    hoverinfo: "text",
  });
  if (axis) {
    const near = [];
    const far = [];
    axis.groups.slice(0, MAX_RING_GROUPS).forEach((group, gi) => {
      axis.hops[gi].forEach((hop, i) => {
        const seg = [chipPos(group[i]), chipPos(group[(i + 1) % group.length])];
        // a one-link hop through a wraparound link would be drawn straight across the lattice,
        // over the ring itself: the orange wraparound stubs already show it
        const span = Math.hypot(seg[1][0] - seg[0][0], seg[1][1] - seg[0][1], seg[1][2] - seg[0][2]);
        if (hop <= 1 && span > 1.5) return;
        (hop > 1 ? far : near).push(seg);
      });
    });
    traces.push({ type: "scatter3d", mode: "lines", name: "ring (1 hop)", hoverinfo: "skip", line: { color: "#1a66d2", width: 6 }, ...lines(near) });
    if (far.length) traces.push({ type: "scatter3d", mode: "lines", name: "ring (> 1 hop)", hoverinfo: "skip", line: { color: "#d62728", width: 6 }, ...lines(far) });
  }
  const layout = {
    height: 620, margin: { l: 0, r: 0, t: 0, b: 0 }, showlegend: true,
    paper_bgcolor: "rgba(0,0,0,0)", font: { color: fg },
    legend: { orientation: "h", y: 1 },
    scene: { aspectmode: "data", xaxis: { title: { text: "x" }, color: fg }, yaxis: { title: { text: "y" }, color: fg }, zaxis: { title: { text: "z" }, color: fg } },
  };
  return {
    node: div,
    marks: topo.devices.length,
    mount: () => window.Plotly.newPlot(div, traces, layout, { displayModeBar: false, responsive: true }),
  };
}

/** @type {Promise<void>|null} */
let plotlyLoading = null;

/** Loads /vendor/plotly.min.js once, on first need (2-D views never pay for its 4.8 MB). */
function loadPlotly() {
  if (window.Plotly) return Promise.resolve();
  if (!plotlyLoading) {
    plotlyLoading = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = "/vendor/plotly.min.js";
      s.onload = () => resolve();
      s.onerror = () => reject(new Error("could not load /vendor/plotly.min.js"));
      document.head.appendChild(s);
    });
  }
  return plotlyLoading;
}

// ---------------------------------------------------------------- tables

function renderSummary(topo, meshInfo, layout) {
  const rows = [
    ["devices", `${topo.devices.length} × ${topo.device_kind} (${topo.devices_key})`],
    ["hosts", `${topo.hosts.length}${topo.chips_per_host ? `, ${topo.chips_per_host.join("x")} chips each` : ""}`],
  ];
  if (topo.topology) {
    const wrap = topo.wraparound.map((w, i) => (w ? "xyz"[i] : null)).filter(Boolean);
    rows.push(["torus", `${topo.topology.join("x")} chips; wraparound on ${wrap.length ? wrap.join(", ") : "no axis"}`]);
    rows.push(["links", `${topo.links.filter((l) => l.kind === "ici").length} ICI (${topo.links.filter((l) => l.wraparound).length} wraparound)`]);
  }
  if (topo.slices > 1) rows.push(["slices", `${topo.slices}, joined by DCN`]);
  if (topo.platform === "gpu") rows.push(["links", "NVLink (NVSwitch) within a host; the network between hosts"]);
  rows.push(["mesh", meshInfo.axes.filter((a) => !a.name.startsWith("⟨")).map((a) => `${a.name}(${a.size})`).join(" × ")]);
  rows.push(["colours", layout ? `tiles of ${layout.spec} on a ${JSON.stringify(layout.shape)} array` : "no layout (grey)"]);
  const dl = document.createElement("dl");
  for (const [k, v] of rows) dl.append(h("dt", k), h("dd", v));
  $("topo-summary").replaceChildren(dl);
}

function renderAxisButtons(meshInfo) {
  const box = $("axis-buttons");
  box.replaceChildren();
  const names = ["", ...meshInfo.axes.map((a) => a.name)];
  for (const name of names) {
    const label = document.createElement("label");
    label.className = "radio";
    const input = document.createElement("input");
    input.type = "radio";
    input.name = "axis";
    input.value = name;
    input.checked = name === state.axis;
    input.addEventListener("change", () => {
      state.axis = name;
      pushUrl(false);
      draw();
    });
    label.append(input, name ? ` ${name}` : " none");
    box.appendChild(label);
  }
}

function renderHops(axis) {
  const sum = $("hop-summary");
  const table = $("hop-table");
  if (!axis) {
    sum.replaceChildren(h("p", "Choose a mesh axis to see its rings.", "muted"));
    table.replaceChildren();
    return;
  }
  const dl = document.createElement("dl");
  const verdict = axis.is_ring ? "every group is a ring of nearest neighbours" : `${axis.groups_not_rings} of ${axis.groups.length} groups have a hop longer than one link`;
  for (const [k, v] of [
    ["axis", `${axis.name} (${axis.size} devices per group, ${axis.groups.length} groups)`],
    ["hops", `max ${axis.max_hop}, mean ${axis.mean_hop.toFixed(2)}; ${verdict}`],
    ["crosses", `${axis.crosses_hosts ? `hosts (${axis.groups_crossing_hosts} groups)` : "no hosts"}${axis.crosses_slices ? ", slices (DCN)" : ""}; interconnect ${axis.interconnect}`],
  ]) dl.append(h("dt", k), h("dd", v));
  sum.replaceChildren(dl);
  const t = h("table", undefined, "hops");
  const head = t.createTHead().insertRow();
  for (const c of ["group", "devices in ring order", "hops (last closes the ring)", "max"]) head.appendChild(h("th", c));
  const body = t.createTBody();
  axis.groups.slice(0, TABLE_ROWS).forEach((group, gi) => {
    const tr = body.insertRow();
    tr.insertCell().textContent = String(gi);
    tr.insertCell().textContent = group.length > 16 ? compactIds(group) + ` (${group.length})` : group.join(" ");
    const hops = axis.hops[gi];
    const cell = tr.insertCell();
    hops.forEach((hp, i) => {
      const span = h("span", String(hp), hp > 1 ? "hop far" : "hop");
      cell.append(span, i < hops.length - 1 ? " " : "");
    });
    const max = hops.length ? Math.max(...hops) : 0;
    const mc = tr.insertCell();
    mc.textContent = String(max);
    if (max > 1) mc.className = "far";
  });
  table.replaceChildren(t);
  if (axis.groups.length > TABLE_ROWS) table.appendChild(h("p", `… and ${axis.groups.length - TABLE_ROWS} more groups`, "muted"));
}

function renderOrderings(meshInfo) {
  const t = h("table", undefined, "hops");
  const head = t.createTHead().insertRow();
  head.appendChild(h("th", "order"));
  // the mesh's own axes only: handed-over groups (⟨…⟩) have no ordering to compare
  const meshAxes = meshInfo.axes.filter((a) => !a.name.startsWith("⟨"));
  for (const a of meshAxes) head.appendChild(h("th", `axis ${a.name}: max / mean hop`));
  head.appendChild(h("th", "first devices"));
  const body = t.createTBody();
  for (const o of meshInfo.orderings) {
    const tr = body.insertRow();
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
  $("orderings").replaceChildren(t);
}

// ---------------------------------------------------------------- state and loading

function pushUrl(replace) {
  const url = `/topology.html?${toQuery(state)}`;
  if (location.pathname + location.search === url) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  /** @type {HTMLAnchorElement} */ ($("open-layout")).href = `/?${toQuery(state)}`;
}

function showError(err) {
  const box = $("spec-error");
  box.replaceChildren();
  if (!err) {
    box.hidden = true;
    return;
  }
  const e = err instanceof ApiError ? err.error : { code: "error", message: String(err.message || err) };
  const p = h("p");
  p.append(h("code", e.code), " ", e.message);
  box.appendChild(p);
  if (e.hint) box.appendChild(h("p", `Hint: ${e.hint}`, "hint"));
  box.hidden = false;
}

function draw() {
  if (!data) return;
  const { topo, meshInfo, layout } = data;
  const axis = meshInfo.axes.find((a) => a.name === state.axis) || null;
  const colour = colourer(layout);
  const three = topo.platform === "tpu" && topo.topology && topo.topology.length === 3 && topo.topology[2] > 1;
  const view = three ? draw3d(topo, meshInfo, colour, axis) : draw2d(topo, meshInfo, colour, axis);
  const host = $("topo-view");
  host.replaceChildren(view.node);
  host.dataset.deviceMarks = String(view.marks);
  host.dataset.mode = three ? "3d" : "2d";
  host.dataset.axis = axis ? axis.name : "";
  const many = topo.devices.length > 1024 ? ` (With ${topo.devices.length} devices the regular ICI lattice${topo.hosts.length > 256 ? " and the host boxes are" : " is"} not drawn; hover a device for its host.)` : "";
  $("topo-legend").textContent = three
    ? `Drag to rotate, scroll to zoom. Boxes are hosts; orange stubs are wraparound links; blue lines join consecutive members of the selected axis's groups, red ones are more than one link apart.${many}`
    : "Boxes are hosts; grey lines are ICI links, dashed orange arcs wraparound links; blue lines join consecutive members of the selected axis's groups (dashed: the closing hop), red ones are more than one link apart.";
  renderHops(axis);
  const done = () => {
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  };
  if (view.mount) {
    const t0 = performance.now();
    loadPlotly()
      .then(() => {
        performance.measure("plotly-load", { start: t0, end: performance.now() });
        const t1 = performance.now();
        return view.mount().then(() => performance.measure("plotly-draw", { start: t1, end: performance.now() }));
      })
      .then(done);
  }
  else requestAnimationFrame(done);
}

async function refresh() {
  if (inflight) inflight.abort();
  const ctrl = new AbortController();
  inflight = ctrl;
  $("status").textContent = "loading…";
  try {
    const mesh = parseDims(state.mesh);
    if (!mesh) throw new Error(`mesh shape must look like 2x4, got "${state.mesh}"`);
    const q = new URLSearchParams({ devices: state.devices });
    if (state.slices > 1) q.set("slices", String(state.slices));
    const meshReq = { shape: mesh, axis_names: state.axes.split(",").map((a) => a.trim()), order: state.order };
    const body = { devices: state.devices, mesh: meshReq };
    if (state.slices > 1) body.slices = state.slices;
    // A 3-D slice will need Plotly: start loading it while the data is fetched.
    const deep = /^tpu:(v4|v5p|7x):\d+x\d+x(\d+)$/.exec(state.devices);
    if (deep && Number(deep[2]) > 1) loadPlotly().catch(() => {});
    const tFetch = performance.now();
    const [topo, meshInfo] = await Promise.all([
      getJSON(`/api/topology?${q}`, ctrl.signal),
      postJSON("/api/topology/mesh", body, ctrl.signal),
    ]);
    // Groups handed over by another view (the kernel lab's collectives) become one more "axis".
    const groups = parseGroups(state.groups);
    if (groups) {
      const extra = await postJSON(
        "/api/topology/groups",
        { devices: state.devices, ids: groups.flat(), group_size: groups[0].length, name: (state.glabel || "collective groups").slice(0, 120), ...(state.slices > 1 ? { slices: state.slices } : {}) },
        ctrl.signal,
      );
      extra.name = `⟨${extra.name}⟩`;
      meshInfo.axes.push(extra);
      if (!state.axis) state.axis = extra.name;
    }
    let layout = null;
    try {
      layout = await postJSON("/api/layout", layoutRequest(state), ctrl.signal);
      showError(null);
    } catch (e) {
      if (e instanceof DOMException && e.name === "AbortError") throw e;
      showError(e); // the topology still draws, in grey
    }
    if (ctrl.signal.aborted) return;
    performance.measure("topology-fetch", { start: tFetch, end: performance.now() });
    data = { topo, meshInfo, layout };
    if (state.axis && !meshInfo.axes.some((a) => a.name === state.axis)) state.axis = "";
    renderSummary(topo, meshInfo, layout);
    renderAxisButtons(meshInfo);
    renderOrderings(meshInfo);
    draw();
    $("status").textContent = "";
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

const FIELDS = { mesh: "mesh-shape", axes: "mesh-axes", order: "mesh-order", shape: "array-shape", spec: "spec" };

function stateToControls() {
  for (const [k, id] of Object.entries(FIELDS)) /** @type {HTMLInputElement} */ ($(id)).value = String(state[k]);
  devicesToPickers(state, catalog);
  /** @type {HTMLAnchorElement} */ ($("open-layout")).href = `/?${toQuery(state)}`;
}

function controlsToState() {
  for (const [k, id] of Object.entries(FIELDS)) state[k] = /** @type {HTMLInputElement} */ ($(id)).value;
  pickersToDevices(state);
}

function wire() {
  const onChange = () => {
    controlsToState();
    devicesToPickers(state, catalog);
    pushUrl(false);
    schedule(0);
  };
  for (const id of ["mesh-shape", "mesh-axes", "array-shape", "spec", "cpu-count", "gpu-hosts", "gpu-per-host", "tpu-slices"]) {
    $(id).addEventListener("input", () => {
      controlsToState();
      pushUrl(true);
      schedule(300);
    });
  }
  for (const id of ["mesh-order", "dev-kind", "gpu-kind", "tpu-topo"]) $(id).addEventListener("change", onChange);
  $("tpu-gen").addEventListener("change", () => {
    fillTopologies(catalog);
    onChange();
  });
  $("copy-link").addEventListener("click", async () => {
    try {
      $("status").textContent = await shareLink("topology", { ...state });
    } catch (e) {
      showError(e);
    }
  });
  window.addEventListener("popstate", () => {
    state = fromQuery(location.search);
    stateToControls();
    schedule(0);
  });
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", draw);
}

async function main() {
  renderNav("topology");
  wire();
  try {
    catalog = await getJSON("/api/platforms");
    buildPickers(catalog);
    const health = await getJSON("/api/health");
    $("jax-version").textContent = `JAX ${health.jax_version}`;
  } catch (e) {
    showError(e);
  }
  const link = new URLSearchParams(location.search).get("link");
  if (link) {
    try {
      const saved = await getJSON(`/api/links/${encodeURIComponent(link)}`);
      state = fromObject(saved.state || {});
      history.replaceState(null, "", `/topology.html?${toQuery(state)}`);
    } catch (e) {
      showError(e);
    }
  } else {
    state = fromQuery(location.search);
  }
  stateToControls();
  refresh();
}

main();
