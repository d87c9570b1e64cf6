// The physical interconnect with devices coloured by the caller: 2-D slices (and GPU and CPU sets)
// as an SVG grid of chips, hosts and ICI / wraparound links; 3-D slices as a rotatable Plotly
// lattice. Device groups (a mesh axis's, a collective's) are drawn as rings over it: blue hops are
// one link, red ones longer.

import { el, svgEl } from "../lib/dom.js";
import { loadPlotly } from "../lib/plotly.js";

const MAX_RING_GROUPS = 256; // rings drawn at once (the hop table lists them all)

/**
 * @typedef {{id: number, coords: number[] | null, core_on_chip: number, process_index: number,
 *   slice_index?: number | null}} TopoDevice
 * @typedef {{platform: string, devices_key: string, device_kind: string, topology: number[] | null,
 *   devices: TopoDevice[], hosts: {process_index: number, device_ids: number[]}[],
 *   links: {a: number, b: number, kind: string, wraparound: boolean, axis: number}[]}} Topology
 *   GET /api/topology
 * @typedef {{groups: number[][], hops: number[][]}} Rings device groups in visiting order and the
 *   links between consecutive members (the last closes the ring when there are as many hops as members)
 */

/** Whether `topo` is drawn in 3-D (a TPU slice more than one chip deep). @param {Topology} topo */
export function isThreeD(topo) {
  return topo.platform === "tpu" && Boolean(topo.topology) && /** @type {number[]} */ (topo.topology).length === 3 && /** @type {number[]} */ (topo.topology)[2] > 1;
}

/**
 * Draws `topo` into `container` (replacing what is there).
 * @param {HTMLElement} container
 * @param {Topology} topo
 * @param {{colour: (id: number) => string, rings: Rings | null, dark: boolean}} opts
 * @returns {{mode: "2d" | "3d", marks: number, drawn: Promise<void>}} drawn: settles once the picture
 *   is on screen (3-D: Plotly loaded and plotted)
 */
export function topologyMap(container, topo, opts) {
  if (isThreeD(topo)) {
    const div = el("div", "plot3d");
    container.replaceChildren(div);
    const t0 = performance.now();
    const drawn = loadPlotly().then((Plotly) => {
      performance.measure("plotly-load", { start: t0, end: performance.now() });
      const t1 = performance.now();
      const { traces, layout } = lattice(topo, opts);
      return Plotly.newPlot(div, traces, layout, { displayModeBar: false, responsive: true }).then(() =>
        performance.measure("plotly-draw", { start: t1, end: performance.now() }),
      );
    });
    return { mode: "3d", marks: topo.devices.length, drawn };
  }
  container.replaceChildren(planarSvg(topo, opts));
  return { mode: "2d", marks: topo.devices.length, drawn: new Promise((resolve) => requestAnimationFrame(() => resolve())) };
}

/** Positions (x, y) in grid cells for every device, and the block each host covers. @param {Topology} topo */
function planar(topo) {
  /** @type {Map<number, {x: number, y: number, w: number, h: number, chipX: number, chipY: number}>} */
  const pos = new Map();
  /** @type {{x: number, y: number, w: number, h: number, label: string}[]} */
  const hostBoxes = [];
  if (topo.platform === "tpu" && topo.topology) {
    const [X] = topo.topology;
    const cores = Math.max(...topo.devices.map((d) => d.core_on_chip)) + 1;
    for (const d of topo.devices) {
      const coords = /** @type {number[]} */ (d.coords);
      const ox = (d.slice_index || 0) * (X + 1);
      pos.set(d.id, { x: ox + coords[0] + d.core_on_chip / cores, y: coords[1], w: 1 / cores, h: 1, chipX: ox + coords[0], chipY: coords[1] });
    }
    for (const host of topo.hosts) {
      const ps = host.device_ids.map((id) => /** @type {{chipX: number, chipY: number}} */ (pos.get(id)));
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

/**
 * @param {Topology} topo
 * @param {{colour: (id: number) => string, rings: Rings | null, dark: boolean}} opts
 */
function planarSvg(topo, { colour, rings, dark }) {
  const { pos, hostBoxes } = planar(topo);
  const cols = Math.max(...[...pos.values()].map((p) => p.x + p.w));
  const rows = Math.max(...[...pos.values()].map((p) => p.y + p.h));
  const cell = Math.max(10, Math.min(64, 860 / cols, 620 / rows));
  const pad = 28;
  const W = cols * cell + 2 * pad;
  const H = rows * cell + 2 * pad;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: Math.round(W), role: "img" });
  svg.setAttribute("aria-label", `${topo.devices_key}: ${topo.devices.length} devices`);
  const fg = dark ? "#e6e6e6" : "#1b1f24";
  /** @param {{chipX: number}} p */
  const cx = (p) => pad + (p.chipX + 0.5) * cell;
  /** @param {{chipY: number}} p */
  const cy = (p) => pad + (p.chipY + 0.5) * cell;
  // ICI links between chips (one per chip pair; on-chip links are implied by the shared square)
  const links = svgEl("g", { class: "links" }, svg);
  for (const l of topo.links) {
    if (l.kind !== "ici") continue;
    const a = /** @type {{chipX: number, chipY: number}} */ (pos.get(l.a));
    const b = /** @type {{chipX: number, chipY: number}} */ (pos.get(l.b));
    if (!l.wraparound) {
      svgEl("line", { x1: cx(a), y1: cy(a), x2: cx(b), y2: cy(b), stroke: fg, "stroke-opacity": 0.35, "stroke-width": 1.5 }, links);
    } else {
      // wraparound: dashed arcs outside the grid, from each end chip
      const bend = pad * 0.8;
      const [x1, y1, x2, y2] = [cx(a), cy(a), cx(b), cy(b)];
      const d = l.axis === 0
        ? `M ${x1} ${y1} C ${x1 + bend} ${y1 - bend}, ${x2 - bend} ${y2 - bend}, ${x2} ${y2}`
        : `M ${x1} ${y1} C ${x1 - bend} ${y1 + bend}, ${x2 - bend} ${y2 - bend}, ${x2} ${y2}`;
      svgEl("path", { d, fill: "none", stroke: "#e8871e", "stroke-width": 1.5, "stroke-dasharray": "4 3", "stroke-opacity": 0.55, class: "wrap" }, links);
    }
  }
  // hosts outlined
  const hosts = svgEl("g", { class: "hosts" }, svg);
  for (const b of hostBoxes) {
    const r = svgEl("rect", {
      x: pad + b.x * cell + 1, y: pad + b.y * cell + 1, width: b.w * cell - 2, height: b.h * cell - 2,
      fill: "none", stroke: fg, "stroke-opacity": 0.6, "stroke-width": 1.5, rx: 4,
    }, hosts);
    svgEl("title", {}, r).textContent = b.label;
  }
  // devices, then the rings, then the device ids on top of both
  const devs = svgEl("g", { class: "devices" }, svg);
  const ringLayer = svgEl("g", { class: "rings" }, svg);
  const labels = svgEl("g", { class: "labels" }, svg);
  const inset = Math.min(4, cell * 0.12);
  for (const d of topo.devices) {
    const p = /** @type {{x: number, y: number, w: number, h: number}} */ (pos.get(d.id));
    const g = svgEl("g", { class: "device", "data-device": d.id }, devs);
    svgEl("rect", {
      x: pad + p.x * cell + inset, y: pad + p.y * cell + inset, width: Math.max(1, p.w * cell - 2 * inset),
      height: Math.max(1, p.h * cell - 2 * inset), fill: colour(d.id), rx: 2,
    }, g);
    svgEl("title", {}, g).textContent = `device ${d.id}${d.coords ? ` · coords (${d.coords.join(",")}) core ${d.core_on_chip}` : ""} · host ${d.process_index}`;
    if (cell * p.w >= 22) {
      svgEl("text", {
        x: pad + (p.x + p.w / 2) * cell, y: pad + (p.y + 0.5) * cell, "font-size": Math.min(12, cell * p.w * 0.36),
        "text-anchor": "middle", "dominant-baseline": "central", fill: dark ? "#f4f4f4" : "#111",
        "font-family": "ui-monospace, monospace", "paint-order": "stroke", stroke: dark ? "#15181d" : "#ffffff",
        "stroke-width": 3, "stroke-opacity": 0.8,
      }, labels).textContent = String(d.id);
    }
  }
  if (rings) {
    rings.groups.slice(0, MAX_RING_GROUPS).forEach((group, gi) => {
      const hops = rings.hops[gi];
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
        svgEl("path", {
          d: `M ${x1} ${y1} Q ${mx} ${my} ${x2} ${y2}`, fill: "none", class: bad ? "ring-hop far" : "ring-hop",
          stroke: bad ? "#d62728" : "#1a66d2", "stroke-width": 3, "stroke-opacity": 0.8,
          "stroke-dasharray": closing ? "6 4" : "none",
        }, ringLayer);
      }
    });
  }
  return svg;
}

/**
 * The Plotly traces and layout of a 3-D slice.
 * @param {Topology} topo
 * @param {{colour: (id: number) => string, rings: Rings | null, dark: boolean}} opts
 */
function lattice(topo, { colour, rings, dark }) {
  const [X] = /** @type {number[]} */ (topo.topology);
  const cores = Math.max(...topo.devices.map((d) => d.core_on_chip)) + 1;
  const byId = new Map(topo.devices.map((d) => [d.id, d]));
  /** @param {TopoDevice} d @param {number} spread */
  const at = (d, spread) => {
    const c = /** @type {number[]} */ (d.coords);
    return [c[0] + (d.slice_index || 0) * (X + 2) + (spread && cores > 1 ? (d.core_on_chip - (cores - 1) / 2) * 0.3 : 0), c[1], c[2]];
  };
  /** @param {number} id */
  const chipPos = (id) => at(/** @type {TopoDevice} */ (byId.get(id)), 0);
  const fg = dark ? "#d0d4da" : "#59616b";
  /** @param {number[][][]} segments */
  const lines = (segments) => {
    /** @type {(number | null)[][]} */
    const xyz = [[], [], []];
    for (const [a, b] of segments) for (let k = 0; k < 3; k++) xyz[k].push(a[k], b[k], null);
    return { x: xyz[0], y: xyz[1], z: xyz[2] };
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
  if (topo.devices.length <= 1024) {
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
    /** @param {number} i @param {number} j @param {number} k */
    const c = (i, j, k) => [i ? hi[0] : lo[0], j ? hi[1] : lo[1], k ? hi[2] : lo[2]];
    for (const [a, b] of [[[0, 0, 0], [1, 0, 0]], [[0, 1, 0], [1, 1, 0]], [[0, 0, 1], [1, 0, 1]], [[0, 1, 1], [1, 1, 1]],
      [[0, 0, 0], [0, 1, 0]], [[1, 0, 0], [1, 1, 0]], [[0, 0, 1], [0, 1, 1]], [[1, 0, 1], [1, 1, 1]],
      [[0, 0, 0], [0, 0, 1]], [[1, 0, 0], [1, 0, 1]], [[0, 1, 0], [0, 1, 1]], [[1, 1, 0], [1, 1, 1]]]) {
      boxes.push([c(a[0], a[1], a[2]), c(b[0], b[1], b[2])]);
    }
  }
  if (boxes.length) {
    traces.push({ type: "scatter3d", mode: "lines", name: "hosts", hoverinfo: "skip", line: { color: fg, width: 1 }, opacity: 0.25, ...lines(boxes) });
  }
  const pts = topo.devices.map((d) => at(d, 1));
  traces.push({
    type: "scatter3d", mode: "markers", name: "devices",
    x: pts.map((p) => p[0]), y: pts.map((p) => p[1]), z: pts.map((p) => p[2]),
    marker: { size: topo.devices.length > 2000 ? 3 : 6, color: topo.devices.map((d) => colour(d.id)), line: { width: 0 } },
    text: topo.devices.map((d) => `device ${d.id} · coords (${/** @type {number[]} */ (d.coords).join(",")}) core ${d.core_on_chip} · host ${d.process_index}${d.slice_index !== undefined && d.slice_index !== null ? ` · slice ${d.slice_index}` : ""}`),
    hoverinfo: "text",
  });
  if (rings) {
    /** @type {number[][][]} */
    const near = [];
    /** @type {number[][][]} */
    const far = [];
    rings.groups.slice(0, MAX_RING_GROUPS).forEach((group, gi) => {
      rings.hops[gi].forEach((hop, i) => {
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
  return { traces, layout };
}
