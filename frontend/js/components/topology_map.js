// The physical interconnect with devices coloured by the caller: 2-D slices (and GPU and CPU sets)
// as an SVG grid of chips, hosts and ICI / wraparound links; 3-D slices as a rotatable lattice drawn
// on a canvas (an orthographic projection: 6,144 chips draw in milliseconds, and choosing another
// axis only redraws). Device groups (a mesh axis's, a collective's) are drawn as rings over it: blue
// hops are one link, red ones longer. Hovering a device (or focusing the picture and using the arrow
// keys in 2-D) shows the caller's description of it at once.

import { el, svgEl } from "../lib/dom.js";
import { hideCard, hoverCard, showCard } from "../lib/hovercard.js";

const MAX_RING_GROUPS = 256; // rings drawn at once in 2-D (the hop table lists them all)
const MAX_RING_GROUPS_3D = 96; // in 3-D, where more would hide the lattice
const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
export const RING_NEAR = "#1a66d2";
export const RING_FAR = "#d62728";
export const WRAP = "#e8871e";

/**
 * @typedef {{id: number, coords: number[] | null, core_on_chip: number, process_index: number,
 *   slice_index?: number | null}} TopoDevice
 * @typedef {{platform: string, devices_key: string, device_kind: string, topology: number[] | null,
 *   devices: TopoDevice[], hosts: {process_index: number, device_ids: number[]}[],
 *   links: {a: number, b: number, kind: string, wraparound: boolean, axis: number}[]}} Topology
 *   GET /api/topology
 * @typedef {{groups: number[][], hops: number[][]}} Rings device groups in visiting order and the
 *   links between consecutive members (the last closes the ring when there are as many hops as members)
 * @typedef {{colour: (id: number) => string, rings: Rings | null, dark: boolean,
 *   describe?: (id: number) => string[]}} MapOptions describe: the hover card's lines for a device
 * @typedef {{mode: "2d" | "3d", marks: number, drawn: Promise<void>, update: (o: Partial<MapOptions>) => Promise<void>,
 *   deviceCenter: (id: number) => {x: number, y: number} | null}} MapView
 *   update: new colours, rings or descriptions on the same topology (3-D: a redraw, no rebuild);
 *   deviceCenter: where a device is drawn (viewport px)
 */

/** Whether `topo` is drawn in 3-D (a TPU slice more than one chip deep). @param {Topology} topo */
export function isThreeD(topo) {
  return topo.platform === "tpu" && Boolean(topo.topology) && /** @type {number[]} */ (topo.topology).length === 3 && /** @type {number[]} */ (topo.topology)[2] > 1;
}

/**
 * Draws `topo` into `container` (replacing what is there).
 * @param {HTMLElement} container
 * @param {Topology} topo
 * @param {MapOptions} opts
 * @returns {MapView} drawn settles once the picture is on screen
 */
export function topologyMap(container, topo, opts) {
  if (isThreeD(topo)) return lattice3d(container, topo, opts);
  /** @type {MapOptions} */
  let current = { ...opts };
  const draw = () => {
    container.replaceChildren(planarSvg(topo, current));
    return new Promise((resolve) => requestAnimationFrame(() => resolve(undefined)));
  };
  const drawn = draw();
  return {
    mode: "2d",
    marks: topo.devices.length,
    drawn,
    update(o) {
      current = { ...current, ...o };
      return draw();
    },
    deviceCenter(id) {
      const r = container.querySelector(`.device[data-device="${id}"] rect`);
      if (!r) return null;
      const b = r.getBoundingClientRect();
      return { x: b.left + b.width / 2, y: b.top + b.height / 2 };
    },
  };
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
    // GPU: one row per host; CPU: rows of up to 32 devices (a CPU set has no physical layout)
    let r = 0;
    for (const host of topo.hosts) {
      const per = topo.platform === "cpu" ? Math.min(host.device_ids.length, host.device_ids.length > 64 ? 32 : 16) : host.device_ids.length;
      const rows = Math.ceil(host.device_ids.length / per);
      host.device_ids.forEach((id, i) => {
        const c = i % per;
        const y = r + Math.floor(i / per);
        pos.set(id, { x: c, y, w: 1, h: 1, chipX: c, chipY: y });
      });
      hostBoxes.push({ x: 0, y: r, w: Math.min(per, host.device_ids.length), h: rows, label: `host ${host.process_index}` });
      r += rows;
    }
  }
  return { pos, hostBoxes };
}

/**
 * @param {Topology} topo
 * @param {MapOptions} opts
 */
function planarSvg(topo, { colour, rings, dark, describe }) {
  const { pos, hostBoxes } = planar(topo);
  const cols = Math.max(...[...pos.values()].map((p) => p.x + p.w));
  const rows = Math.max(...[...pos.values()].map((p) => p.y + p.h));
  // small slices drawn large: a v3 2x2 tray fills its panel, not 110 px of it
  const cell = Math.max(10, Math.min(150, 860 / cols, 600 / rows));
  const pad = Math.max(28, Math.min(60, cell * 0.5));
  const W = cols * cell + 2 * pad;
  const H = rows * cell + 2 * pad;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: Math.round(W), role: "img", class: "topo-2d" });
  svg.setAttribute("aria-label", `${topo.devices_key}: ${topo.devices.length} devices`);
  const fg = dark ? "#e6e6e6" : "#1b1f24";
  /** the centre of a device's square @param {{x: number, y: number, w: number, h: number}} p */
  const cx = (p) => pad + (p.x + p.w / 2) * cell;
  /** @param {{x: number, y: number, w: number, h: number}} p */
  const cy = (p) => pad + (p.y + p.h / 2) * cell;
  /** the centre of its chip @param {{chipX: number}} p */
  const chipCx = (p) => pad + (p.chipX + 0.5) * cell;
  /** @param {{chipY: number}} p */
  const chipCy = (p) => pad + (p.chipY + 0.5) * cell;
  // ICI links between chips (one per chip pair; on-chip links are implied by the shared square)
  const links = svgEl("g", { class: "links" }, svg);
  for (const l of topo.links) {
    if (l.kind !== "ici") continue;
    const a = /** @type {{chipX: number, chipY: number}} */ (pos.get(l.a));
    const b = /** @type {{chipX: number, chipY: number}} */ (pos.get(l.b));
    if (!l.wraparound) {
      svgEl("line", { x1: chipCx(a), y1: chipCy(a), x2: chipCx(b), y2: chipCy(b), stroke: fg, "stroke-opacity": 0.35, "stroke-width": 1.5 }, links);
    } else {
      // wraparound: dashed arcs outside the grid, from each end chip
      const bend = pad * 0.8;
      const [x1, y1, x2, y2] = [chipCx(a), chipCy(a), chipCx(b), chipCy(b)];
      const d = l.axis === 0
        ? `M ${x1} ${y1} C ${x1 + bend} ${y1 - bend}, ${x2 - bend} ${y2 - bend}, ${x2} ${y2}`
        : `M ${x1} ${y1} C ${x1 - bend} ${y1 + bend}, ${x2 - bend} ${y2 - bend}, ${x2} ${y2}`;
      svgEl("path", { d, fill: "none", stroke: WRAP, "stroke-width": 1.5, "stroke-dasharray": "4 3", "stroke-opacity": 0.55, class: "wrap" }, links);
    }
  }
  // hosts outlined, labelled in their corner
  const hosts = svgEl("g", { class: "hosts" }, svg);
  for (const b of hostBoxes) {
    svgEl("rect", {
      x: pad + b.x * cell + 1, y: pad + b.y * cell + 1, width: b.w * cell - 2, height: b.h * cell - 2,
      fill: "none", stroke: fg, "stroke-opacity": 0.6, "stroke-width": 1.5, rx: 4,
    }, hosts);
    if (hostBoxes.length > 1 && hostBoxes.length <= 64 && b.w * cell >= 60) {
      svgEl("text", { x: pad + b.x * cell + 5, y: pad + b.y * cell - 4, "font-size": 10, "font-family": FONT, fill: fg, "fill-opacity": 0.7 }, hosts).textContent = b.label;
    }
  }
  // devices, then the rings, then the device ids on top of both (at the top of each square, clear
  // of the ring lines that pass through its centre)
  const devs = svgEl("g", { class: "devices" }, svg);
  // rings and ids pass the pointer through to the device under them (its hover card)
  const ringLayer = svgEl("g", { class: "rings", "pointer-events": "none" }, svg);
  const labels = svgEl("g", { class: "labels", "pointer-events": "none" }, svg);
  const inset = Math.min(4, cell * 0.08);
  for (const d of topo.devices) {
    const p = /** @type {{x: number, y: number, w: number, h: number}} */ (pos.get(d.id));
    const g = svgEl("g", { class: "device", "data-device": d.id }, devs);
    svgEl("rect", {
      x: pad + p.x * cell + inset, y: pad + p.y * cell + inset, width: Math.max(1, p.w * cell - 2 * inset),
      height: Math.max(1, p.h * cell - 2 * inset), fill: colour(d.id), rx: 2,
    }, g);
    if (cell * p.w >= 22) {
      const size = Math.min(13, cell * p.w * 0.3);
      svgEl("text", {
        x: pad + (p.x + p.w / 2) * cell, y: pad + p.y * cell + inset + size * 0.5 + Math.min(6, cell * 0.08), "font-size": size,
        "text-anchor": "middle", "dominant-baseline": "hanging", fill: dark ? "#f4f4f4" : "#111",
        "font-family": FONT, "paint-order": "stroke", stroke: dark ? "#15181d" : "#ffffff",
        "stroke-width": 3, "stroke-opacity": 0.8, class: "device-id",
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
        const len = Math.hypot(x2 - x1, y2 - y1) || 1;
        // segments that skip over devices of their row bow out, alternately above and below, so
        // pairs {0,4} {1,5} ... on one row read as pairs, not one chain; the closing hop bows too
        const skips = len > cell * 1.5 && Math.abs(y2 - y1) < 1;
        const side = gi % 2 ? -1 : 1;
        const reach = closing ? 0.7 : 0.42 + 0.08 * (Math.floor(gi / 2) % 3); // inside the squares, under the ids
        const bow = closing || skips ? side * Math.min(cell * reach, len * 0.3) : 0;
        const mx = (x1 + x2) / 2 + ((y2 - y1) / len) * bow;
        const my = (y1 + y2) / 2 - ((x2 - x1) / len) * bow;
        svgEl("path", {
          d: `M ${x1} ${y1} Q ${mx} ${my} ${x2} ${y2}`, fill: "none", class: bad ? "ring-hop far" : "ring-hop",
          stroke: bad ? RING_FAR : RING_NEAR, "stroke-width": 3, "stroke-opacity": 0.85,
          "stroke-dasharray": closing ? "6 4" : "none", "data-group": gi,
        }, ringLayer);
      }
    });
  }
  if (describe) {
    hoverCard(svg, (target) => {
      const g = target instanceof Element ? target.closest(".device") : null;
      return g ? describe(Number(g.getAttribute("data-device"))) : null;
    });
  }
  return svg;
}

/**
 * A 3-D slice as a rotatable lattice on a canvas: an orthographic projection of the chips (cores of
 * a chip side by side), ICI links, wraparound stubs, host boxes, the rings, and the axes ticked at
 * every chip coordinate. Drag to rotate, shift-drag to pan, scroll to zoom; arrow keys rotate.
 * @param {HTMLElement} container
 * @param {Topology} topo
 * @param {MapOptions} opts
 * @returns {MapView}
 */
/**
 * A 3-D slice's world: each device's position (chips at integer coordinates, centred on the origin, the cores
 * of a chip side by side, slices in a row along x), and the segments of its ICI links, wraparound stubs (out
 * of both faces) and host boxes.
 * @param {Topology} topo
 */
function latticeWorld(topo) {
  const [X, Y, Z] = /** @type {number[]} */ (topo.topology);
  const n = topo.devices.length;
  const cores = Math.max(...topo.devices.map((d) => d.core_on_chip)) + 1;
  const slices = Math.max(1, ...topo.devices.map((d) => (d.slice_index || 0) + 1));
  const spanX = slices * (X + 2) - 2;
  const ox = (spanX - 1) / 2;
  const oy = (Y - 1) / 2;
  const oz = (Z - 1) / 2;
  const wx = new Float32Array(n);
  const wy = new Float32Array(n);
  const wz = new Float32Array(n);
  /** @type {Map<number, number>} */
  const index = new Map();
  topo.devices.forEach((d, i) => {
    const c = /** @type {number[]} */ (d.coords);
    const spread = cores > 1 ? (d.core_on_chip - (cores - 1) / 2) * 0.3 : 0;
    wx[i] = c[0] + (d.slice_index || 0) * (X + 2) + spread - ox;
    wy[i] = c[1] - oy;
    wz[i] = c[2] - oz;
    index.set(d.id, i);
  });
  /** a chip's centre (cores together) @param {number} id */
  const chip = (id) => {
    const d = topo.devices[/** @type {number} */ (index.get(id))];
    const c = /** @type {number[]} */ (d.coords);
    return [c[0] + (d.slice_index || 0) * (X + 2) - ox, c[1] - oy, c[2] - oz];
  };
  /** @type {number[]} */
  const plain = [];
  /** @type {number[]} */
  const wraps = [];
  for (const l of topo.links) {
    if (l.kind !== "ici") continue;
    const a = chip(l.a);
    const b = chip(l.b);
    if (!l.wraparound) plain.push(...a, ...b);
    else {
      const out = [0, 0, 0];
      out[l.axis] = 0.45;
      wraps.push(...a, a[0] + out[0], a[1] + out[1], a[2] + out[2], ...b, b[0] - out[0], b[1] - out[1], b[2] - out[2]);
    }
  }
  /** @type {number[]} */
  const boxes = [];
  if (topo.hosts.length <= 2048) {
    for (const host of topo.hosts) {
      const ps = host.device_ids.map(chip);
      const lo = [0, 1, 2].map((k) => Math.min(...ps.map((p) => p[k])) - 0.35);
      const hi = [0, 1, 2].map((k) => Math.max(...ps.map((p) => p[k])) + 0.35);
      /** @param {number} i @param {number} j @param {number} k */
      const c = (i, j, k) => [i ? hi[0] : lo[0], j ? hi[1] : lo[1], k ? hi[2] : lo[2]];
      for (const [a, b] of [[[0, 0, 0], [1, 0, 0]], [[0, 1, 0], [1, 1, 0]], [[0, 0, 1], [1, 0, 1]], [[0, 1, 1], [1, 1, 1]],
        [[0, 0, 0], [0, 1, 0]], [[1, 0, 0], [1, 1, 0]], [[0, 0, 1], [0, 1, 1]], [[1, 0, 1], [1, 1, 1]],
        [[0, 0, 0], [0, 0, 1]], [[1, 0, 0], [1, 0, 1]], [[0, 1, 0], [0, 1, 1]], [[1, 1, 0], [1, 1, 1]]]) {
        boxes.push(...c(a[0], a[1], a[2]), ...c(b[0], b[1], b[2]));
      }
    }
  }
  return { X, Y, Z, n, cores, slices, spanX, ox, oy, oz, wx, wy, wz, index, chip, plain, wraps, boxes };
}

/** @typedef {(x: number, y: number, z: number) => [number, number, number]} Projection world -> canvas px and depth */

/**
 * Segments (six numbers each: two world points) stroked on `ctx` through `project`.
 * @param {CanvasRenderingContext2D} ctx @param {Projection} project @param {number[]} segs
 * @param {string} stroke @param {number} width @param {number} alpha @param {number[]} [dash]
 */
function strokeSegments(ctx, project, segs, stroke, width, alpha, dash) {
  if (!segs.length) return;
  ctx.beginPath();
  for (let i = 0; i < segs.length; i += 6) {
    const a = project(segs[i], segs[i + 1], segs[i + 2]);
    const b = project(segs[i + 3], segs[i + 4], segs[i + 5]);
    ctx.moveTo(a[0], a[1]);
    ctx.lineTo(b[0], b[1]);
  }
  ctx.strokeStyle = stroke;
  ctx.lineWidth = width;
  ctx.globalAlpha = alpha;
  ctx.setLineDash(dash || []);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.globalAlpha = 1;
}

/**
 * The rings' hops as segments: one-link hops (`near`) and longer ones (`far`), the first MAX_RING_GROUPS_3D
 * groups.
 * @param {NonNullable<MapOptions["rings"]>} rings @param {(id: number) => number[]} chip
 */
function ringSegments(rings, chip) {
  /** @type {number[]} */
  const near = [];
  /** @type {number[]} */
  const far = [];
  rings.groups.slice(0, MAX_RING_GROUPS_3D).forEach((group, gi) => {
    rings.hops[gi].forEach((hop, i) => {
      const a = chip(group[i]);
      const b = chip(group[(i + 1) % group.length]);
      // a one-link hop through a wraparound link would be drawn straight across the lattice,
      // over the ring itself: the orange wraparound stubs already show it
      if (hop <= 1 && Math.hypot(b[0] - a[0], b[1] - a[1], b[2] - a[2]) > 1.5) return;
      (hop > 1 ? far : near).push(...a, ...b);
    });
  });
  return { near, far };
}

/**
 * Axes along the lattice's edges, ticked at every chip coordinate that has room; after rotation a tick can land
 * on the lattice, so each label sits on a chip of the background, over the rings. Returns the ticks drawn per
 * axis and each label's box [x, y, w, h] in CSS px (the canvas's data-ticks and data-labels, for tests).
 * @param {CanvasRenderingContext2D} ctx @param {Projection} project @param {ReturnType<typeof latticeWorld>} w
 * @param {{fg: string, bg: string, midX: number, midY: number}} look
 */
function drawAxes(ctx, project, w, look) {
  const { ox, oy, oz } = w;
  const { fg, bg, midX, midY } = look;
  ctx.font = `10px ${FONT}`;
  ctx.fillStyle = fg;
  ctx.strokeStyle = fg;
  ctx.lineWidth = 1;
  const base = [-ox - 0.8, -oy - 0.8, -oz - 0.8];
  /** @type {string[]} */
  const drawnTicks = [];
  /** @type {number[][]} */
  const labelBoxes = [];
  /** A label centred at (x, y) on its background chip. @param {string} text @param {number} x @param {number} y @param {number} size */
  const label = (text, x, y, size) => {
    const tw = ctx.measureText(text).width + 4;
    const th = size + 4;
    ctx.fillStyle = bg;
    ctx.fillRect(x - tw / 2, y - th / 2, tw, th);
    ctx.fillStyle = fg;
    ctx.fillText(text, x, y);
    labelBoxes.push([x - tw / 2, y - th / 2, tw, th].map((v) => Math.round(v * 10) / 10));
  };
  /** @param {number} axis @param {number} count @param {string} name */
  const axisTicks = (axis, count, name) => {
    const at = (/** @type {number} */ v) => {
      const q = [...base];
      q[axis] = v;
      return project(q[0], q[1], q[2]);
    };
    const start = axis === 0 ? -ox : axis === 1 ? -oy : -oz;
    const a = at(start);
    const b = at(start + count - 1);
    ctx.globalAlpha = 0.6;
    ctx.beginPath();
    ctx.moveTo(a[0], a[1]);
    ctx.lineTo(b[0], b[1]);
    ctx.stroke();
    ctx.globalAlpha = 1;
    const gap = Math.hypot(b[0] - a[0], b[1] - a[1]) / Math.max(1, count - 1);
    const step = 2 ** Math.max(0, Math.ceil(Math.log2(18 / Math.max(1, gap))));
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    const values = [];
    for (let v = 0; v < count; v += step) {
      const p = at(start + v);
      label(String(v), p[0], p[1], 10);
      values.push(v);
    }
    drawnTicks.push(`${name}:${values.join(",")}`);
    // the axis's name beside its middle, away from the picture's centre
    const mid = at(start + (count - 1) / 2);
    const away = Math.hypot(mid[0] - midX, mid[1] - midY) || 1;
    ctx.font = `bold 12px ${FONT}`;
    label(name, mid[0] + ((mid[0] - midX) / away) * 22, mid[1] + ((mid[1] - midY) / away) * 22, 12);
    ctx.font = `10px ${FONT}`;
  };
  axisTicks(0, w.slices > 1 ? w.spanX : w.X, "x");
  axisTicks(1, w.Y, "y");
  axisTicks(2, w.Z, "z");
  return { drawnTicks, labelBoxes };
}

/**
 * @typedef {{yaw: number, pitch: number, zoom: number, panX: number, panY: number,
 *   fitted: {scale: number, cx: number, cy: number} | null}} Camera the 3-D view: rotation, zoom, pan, and the
 *   first view's fit (kept while rotating; null: fit again)
 */

/**
 * Drag to rotate (shift- or right-drag to pan), scroll to zoom, arrow keys and + − 0 on `canvas`: each changes
 * `cam` and asks for a `redraw`; `hover(x, y, e)` is a pointer moving over the canvas with no button down.
 * @param {HTMLCanvasElement} canvas @param {Camera} cam @param {() => void} redraw
 * @param {(e: PointerEvent) => void} hover
 */
function latticeInput(canvas, cam, redraw, hover) {
  /** @type {{x: number, y: number, yaw: number, pitch: number, panX: number, panY: number, pan: boolean} | null} */
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    if (e.button !== 0 && e.button !== 2) return;
    drag = { x: e.clientX, y: e.clientY, yaw: cam.yaw, pitch: cam.pitch, panX: cam.panX, panY: cam.panY, pan: e.shiftKey || e.button === 2 };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) {
      hover(e);
      return;
    }
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (drag.pan) {
      cam.panX = drag.panX + dx;
      cam.panY = drag.panY + dy;
    } else {
      cam.yaw = drag.yaw + dx * 0.008;
      cam.pitch = Math.max(-1.5, Math.min(1.5, drag.pitch + dy * 0.008));
    }
    hideCard();
    redraw();
  });
  const end = () => (drag = null);
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);
  canvas.addEventListener("mouseleave", hideCard);
  canvas.addEventListener("contextmenu", (e) => e.preventDefault());
  canvas.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      cam.zoom = Math.max(0.3, Math.min(40, cam.zoom * (e.deltaY < 0 ? 1.2 : 1 / 1.2)));
      redraw();
    },
    { passive: false },
  );
  canvas.addEventListener("keydown", (e) => {
    /** @type {Record<string, () => void>} */
    const keys = {
      ArrowLeft: () => (cam.yaw -= 0.15),
      ArrowRight: () => (cam.yaw += 0.15),
      ArrowUp: () => (cam.pitch = Math.max(-1.5, cam.pitch - 0.15)),
      ArrowDown: () => (cam.pitch = Math.min(1.5, cam.pitch + 0.15)),
      "+": () => (cam.zoom = Math.min(40, cam.zoom * 1.2)),
      "=": () => (cam.zoom = Math.min(40, cam.zoom * 1.2)),
      "-": () => (cam.zoom = Math.max(0.3, cam.zoom / 1.2)),
      "0": () => Object.assign(cam, { yaw: -0.6, pitch: 0.45, zoom: 1, panX: 0, panY: 0, fitted: null }),
    };
    const fn = keys[e.key];
    if (!fn) return;
    e.preventDefault();
    fn();
    redraw();
  });
}

/**
 * A 3-D slice as a rotatable lattice on a canvas: an orthographic projection of the chips (cores of
 * a chip side by side), ICI links, wraparound stubs, host boxes, the rings, and the axes ticked at
 * every chip coordinate. Drag to rotate, shift-drag to pan, scroll to zoom; arrow keys rotate.
 * @param {HTMLElement} container
 * @param {Topology} topo
 * @param {MapOptions} opts
 * @returns {MapView}
 */
function lattice3d(container, topo, opts) {
  /** @type {MapOptions} */
  let current = { ...opts };
  const w = latticeWorld(topo);
  const { X, Y, Z, n, cores, spanX, ox, oy, oz, wx, wy, wz, index } = w;

  const wrap = el("div", "topo-3d");
  const canvas = el("canvas", "topo-canvas");
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", `${topo.devices_key}: ${n} devices on a ${X}x${Y}x${Z} torus. Drag or use the arrow keys to rotate, scroll or plus and minus to zoom.`);
  wrap.appendChild(canvas);
  container.replaceChildren(wrap);

  /** @type {Camera} */
  const cam = { yaw: -0.6, pitch: 0.45, zoom: 1, panX: 0, panY: 0, fitted: null };
  let W = 0;
  let H = 0;
  // projected device positions and depths, for hit-testing
  const sx = new Float32Array(n);
  const sy = new Float32Array(n);
  const depth = new Float32Array(n);
  let radius = 4;

  const size = () => {
    W = Math.max(200, container.clientWidth || 860);
    H = Math.max(320, Math.min(640, Math.round(W * 0.68)));
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.width = `${W}px`;
    canvas.style.height = `${H}px`;
  };

  function draw() {
    const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    const dpr = canvas.width / W;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const { colour, rings, dark } = current;
    const fg = dark ? "#d0d4da" : "#4b525b";
    const cyw = Math.cos(cam.yaw);
    const syw = Math.sin(cam.yaw);
    const cp = Math.cos(cam.pitch);
    const sp = Math.sin(cam.pitch);
    /** unscaled screen coordinates of a world point @param {number} x @param {number} y @param {number} z */
    const flat = (x, y, z) => {
      const y1 = x * syw + y * cyw;
      return [x * cyw - y * syw, -(y1 * sp + z * cp), y1 * cp - z * sp];
    };
    if (!cam.fitted) {
      // fit the lattice with its axes (ticked 0.8 outside it) in the canvas, in the first view
      let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
      for (const cx of [-ox - 1.6, spanX - 1 - ox + 0.6]) for (const cy of [-oy - 1.6, Y - 1 - oy + 0.6]) for (const cz of [-oz - 1.6, Z - 1 - oz + 0.6]) {
        const [px, py] = flat(cx, cy, cz);
        [x0, y0, x1, y1] = [Math.min(x0, px), Math.min(y0, py), Math.max(x1, px), Math.max(y1, py)];
      }
      const scale = Math.min((W * 0.92) / (x1 - x0), (H * 0.92) / (y1 - y0));
      cam.fitted = { scale, cx: (x0 + x1) / 2, cy: (y0 + y1) / 2 };
    }
    const s = cam.fitted.scale * cam.zoom;
    const midX = W / 2 + cam.panX - cam.fitted.cx * s;
    const midY = H / 2 + cam.panY - cam.fitted.cy * s;
    /** @type {Projection} */
    const project = (x, y, z) => {
      const [fx, fy, d] = flat(x, y, z);
      return [midX + s * fx, midY + s * fy, d];
    };
    strokeSegments(ctx, project, w.boxes, fg, 1, 0.18);
    strokeSegments(ctx, project, w.plain, fg, 1, n > 1024 ? 0.12 : 0.3);
    strokeSegments(ctx, project, w.wraps, WRAP, 2, 0.8, [4, 3]);
    // devices, far ones first
    radius = Math.max(1.5, Math.min(9, s * (cores > 1 ? 0.13 : 0.2)));
    for (let i = 0; i < n; i++) {
      const p = project(wx[i], wy[i], wz[i]);
      sx[i] = p[0];
      sy[i] = p[1];
      depth[i] = p[2];
    }
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => depth[b] - depth[a]);
    const edge = dark ? "#0b0d10" : "#ffffff";
    for (const i of order) {
      ctx.beginPath();
      ctx.rect(sx[i] - radius, sy[i] - radius, 2 * radius, 2 * radius);
      ctx.fillStyle = colour(topo.devices[i].id);
      ctx.fill();
      if (radius >= 3) {
        ctx.lineWidth = 0.75;
        ctx.strokeStyle = edge;
        ctx.stroke();
      }
    }
    // the rings over everything: one-link hops blue, longer ones red
    if (rings) {
      const { near, far } = ringSegments(rings, w.chip);
      strokeSegments(ctx, project, near, RING_NEAR, 3, 0.9);
      strokeSegments(ctx, project, far, RING_FAR, 3, 0.9);
    }
    const { drawnTicks, labelBoxes } = drawAxes(ctx, project, w, { fg, bg: dark ? "#171a20" : "#ffffff", midX, midY });
    canvas.dataset.yaw = cam.yaw.toFixed(3);
    canvas.dataset.ticks = drawnTicks.join(";");
    canvas.dataset.labels = JSON.stringify(labelBoxes);
  }

  /** The device nearest the point (canvas px), within its square and a little; -1: none. @param {number} x @param {number} y */
  const nearest = (x, y) => {
    // the front-most device whose square (and a pixel or two) is under the pointer
    let best = -1;
    const reach = radius + 2;
    for (let i = 0; i < n; i++) {
      if (Math.abs(sx[i] - x) <= reach && Math.abs(sy[i] - y) <= reach && (best < 0 || depth[i] < depth[best])) best = i;
    }
    return best;
  };

  let frame = 0;
  const redraw = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      draw();
    });
  };
  latticeInput(canvas, cam, redraw, (e) => {
    const rect = canvas.getBoundingClientRect();
    const i = nearest(e.clientX - rect.left, e.clientY - rect.top);
    if (i >= 0 && current.describe) showCard(current.describe(topo.devices[i].id), e.clientX, e.clientY, canvas);
    else hideCard();
    canvas.dataset.hover = i >= 0 ? String(topo.devices[i].id) : "";
  });
  const resized = new ResizeObserver(() => {
    if (!canvas.isConnected) {
      resized.disconnect(); // the container holds another picture now: let this one go
      return;
    }
    const width = Math.max(200, container.clientWidth || 860);
    if (width === W) return;
    size();
    cam.fitted = null;
    draw();
  });
  // the picture's own box: its width follows the container's, and once it is replaced (detached) the
  // observer is called with nothing to draw and lets go of this picture
  resized.observe(wrap);

  size();
  const t0 = performance.now();
  draw();
  performance.measure("topology-3d-draw", { start: t0, end: performance.now() });
  const paint = () => new Promise((resolve) => requestAnimationFrame(() => resolve(undefined)));
  return {
    mode: "3d",
    marks: n,
    drawn: paint(),
    update(o) {
      current = { ...current, ...o };
      draw();
      return paint();
    },
    deviceCenter(id) {
      const i = index.get(id);
      if (i === undefined) return null;
      const b = canvas.getBoundingClientRect();
      return { x: b.left + sx[i], y: b.top + sy[i] };
    },
  };
}
