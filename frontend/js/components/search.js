// The search a pick's plan came from (`shardscope search --publish`, `shardscope.show(sharding_core.search(...))`:
// a plan's `search`, issue 34): the Pareto front of step time against peak HBM as a plain SVG scatter (no Plotly:
// the dashboard and the notebook widget draw it the same way, at once) — every compiled candidate a point at XLA's
// peak and the plan's expected step, the front joined, the pick and the user's current sharding marked, the usable
// HBM a dashed line; hover a point for its mesh and rules, click it (or its row) for its compiled plan's figures and
// its rules to paste. Under it, the table of every candidate with what it lost on, and the pick against the current
// sharding. Drawn from the snapshot alone; every label goes in as text.

import { defList, el, h, headedTable, cellsOf, svgEl, actionable } from "../lib/dom.js";
import { fmtBytes, fmtSeconds } from "../lib/format.js";

const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
const FITS = "#4c78a8";
const OVER = "#d62728";
const PICK = "#54a24b";
const CURRENT = "#f58518";
/** Rows the table lists before "show all". */
const ROWS_SHOWN = 40;
/** A card narrower than this draws the chart for a phone. */
const NARROW_PX = 560;
/** The observer of each card's width (one per card, replaced when the card is drawn again). @type {WeakMap<HTMLElement, ResizeObserver>} */
const RESIZES = new WeakMap();

/**
 * @typedef {{shape: number[], axis_names: string[], dcn_shape?: number[]}} SearchMesh
 * @typedef {{mesh: SearchMesh, rules: [string, string | string[] | null][], knobs: Record<string, any>,
 *   strategy: string, compiled: boolean, fits: boolean | null, peak_bytes: number | null,
 *   expected_seconds: number | null, lost_on: string, current?: boolean, lower_bound_seconds?: number | null,
 *   upper_bound_seconds?: number | null, bound?: string | null, collective_seconds?: Record<string, number>,
 *   compile_seconds?: number, usable_bytes?: number | null, paste?: {python: string, maxtext: string},
 *   error?: {code: string, message: string}}} Candidate
 * @typedef {{devices: string, enumerated: number, compiled: number, seconds: number, usable_bytes: number | null,
 *   candidates: Candidate[], front: number[], current: number | null, slices?: number, compile_seconds?: number,
 *   pick: {index: number, strategy: string, paste?: {python: string, maxtext: string}} | null,
 *   why_no_pick?: string}} Search
 */

/** A candidate's knobs as text ("" without). @param {Candidate} c */
function knobsText(c) {
  const entries = Object.entries(c.knobs || {});
  const py = (/** @type {any} */ v) => v === true ? "True" : v === false ? "False" : v === null ? "None" : typeof v === "string" ? `'${v}'` : JSON.stringify(v);
  return entries.map(([k, v]) => `${k}=${py(v)}`).join(", ");
}

/** A candidate's rules as text, one per line ("batch → data"). @param {Candidate} c */
export function rulesLines(c) {
  return (c.rules || []).map(([name, axes]) => `${name} → ${axes === null ? "replicated" : Array.isArray(axes) ? axes.join(" × ") : axes}`);
}

/** The mesh as "data 4 × fsdp 16" (with the slices for a DCN axis). @param {SearchMesh} m */
function meshText(m) {
  return m.axis_names.map((a, i) => `${a} ${m.shape[i]}${m.dcn_shape && m.dcn_shape[i] > 1 ? ` (${m.dcn_shape[i]} slices)` : ""}`).join(" × ");
}

/** Whether the candidate has a point: compiled, with a peak and a step time. @param {Candidate} c */
function drawn(c) {
  return c.compiled && c.peak_bytes != null && c.expected_seconds != null;
}

/**
 * The scatter: a point per compiled candidate, the front joined, the pick and the current sharding marked.
 * @param {Search} s
 * @param {boolean} dark
 * @param {(i: number) => void} hover
 * @param {(i: number) => void} choose
 * @param {boolean} narrow drawn for a narrow card
 * @returns {{svg: SVGSVGElement, mark: (i: number) => void}}
 */
function chart(s, dark, hover, choose, narrow) {
  // a phone's card is a third of the wide chart: a narrower drawing with larger type reads there
  const size = narrow ? 14 : 11;
  const W = narrow ? 420 : 760, H = narrow ? 300 : 280, left = narrow ? 66 : 78, right = 14, top = size + 12, bottom = 40;
  const fg = dark ? "#e6e8eb" : "#1b1f24";
  const grid = dark ? "#2c323b" : "#e5e7eb";
  const points = s.candidates.map((c, i) => [c, i]).filter(([c]) => drawn(/** @type {Candidate} */ (c)));
  const peaks = points.map(([c]) => Number(/** @type {Candidate} */ (c).peak_bytes));
  const times = points.map(([c]) => Number(/** @type {Candidate} */ (c).expected_seconds));
  // the peaks' own range: a usable HBM far past them (a small model on a large chip) is said, not drawn
  const usableDrawn = s.usable_bytes != null && s.usable_bytes <= Math.max(1, ...peaks) * 1.5;
  const xmax = Math.max(1, ...peaks, usableDrawn ? Number(s.usable_bytes) : 0) * 1.06;
  const ymax = Math.max(1e-9, ...times) * 1.1;
  const x = (/** @type {number} */ b) => left + (b / xmax) * (W - left - right);
  const y = (/** @type {number} */ t) => top + (1 - t / ymax) * (H - top - bottom);
  const svg = /** @type {SVGSVGElement} */ (svgEl("svg", { xmlns: "http://www.w3.org/2000/svg", viewBox: `0 0 ${W} ${H}`, role: "img", class: "search-front-chart" }));
  svg.setAttribute("aria-label", `Expected step time against peak HBM per device for ${points.length} compiled candidates; the front joined`);
  const text = (/** @type {Record<string, any>} */ attrs, /** @type {string} */ t) => {
    svgEl("text", { "font-size": size, "font-family": FONT, fill: fg, ...attrs }, svg).textContent = t;
  };
  for (const f of [1, 0.5, 0]) {
    svgEl("line", { x1: left, x2: W - right, y1: y(ymax * f), y2: y(ymax * f), stroke: grid }, svg);
    text({ x: left - 6, y: y(ymax * f) + size / 3, "text-anchor": "end" }, f ? fmtSeconds(ymax * f) : "0");
    svgEl("line", { x1: x(xmax * f), x2: x(xmax * f), y1: top, y2: H - bottom, stroke: grid }, svg);
    text({ x: x(xmax * f), y: H - bottom + size + 3, "text-anchor": f === 1 ? "end" : f ? "middle" : "start" }, f ? fmtBytes(Math.round(xmax * f)) : "0");
  }
  text({ x: (left + W - right) / 2, y: H - 6, "text-anchor": "middle" }, "peak HBM per device (XLA's)");
  text({ x: 4, y: size, "text-anchor": "start" }, "expected step ↑");
  if (s.usable_bytes && usableDrawn) {
    svgEl("line", { x1: x(s.usable_bytes), x2: x(s.usable_bytes), y1: top, y2: H - bottom, stroke: OVER, "stroke-dasharray": "4 3", class: "search-usable" }, svg);
    text({ x: x(s.usable_bytes) - 4, y: top + size, "text-anchor": "end", fill: OVER }, `usable HBM ${fmtBytes(s.usable_bytes)}`);
  } else if (s.usable_bytes) {
    text({ x: W - right, y: top + size, "text-anchor": "end", fill: OVER, class: "search-usable-note" }, `usable HBM ${fmtBytes(s.usable_bytes)} →`);
  }
  const front = s.front.filter((i) => s.candidates[i] && drawn(s.candidates[i]))
    .sort((a, b) => Number(s.candidates[a].peak_bytes) - Number(s.candidates[b].peak_bytes));
  if (front.length > 1) {
    const line = front.map((i) => `${x(Number(s.candidates[i].peak_bytes)).toFixed(1)},${y(Number(s.candidates[i].expected_seconds)).toFixed(1)}`).join(" ");
    svgEl("polyline", { points: line, fill: "none", stroke: PICK, "stroke-width": 1.5, "stroke-opacity": 0.7, class: "search-front-line" }, svg);
  }
  /** @type {Map<number, SVGElement>} */
  const dots = new Map();
  const onFront = new Set(s.front);
  for (const [cc, ii] of points) {
    const c = /** @type {Candidate} */ (cc), i = /** @type {number} */ (ii);
    const cx = x(Number(c.peak_bytes)), cy = y(Number(c.expected_seconds));
    const colour = i === s.pick?.index ? PICK : c.current ? CURRENT : c.fits ? FITS : OVER;
    const r = i === s.pick?.index || c.current ? 7 : 5;
    const dot = c.current && i !== s.pick?.index
      ? svgEl("rect", { x: cx - r, y: cy - r, width: 2 * r, height: 2 * r, transform: `rotate(45 ${cx} ${cy})`, fill: colour }, svg)
      : svgEl("circle", { cx, cy, r, fill: onFront.has(i) || !c.fits ? colour : "none", stroke: colour, "stroke-width": 2 }, svg);
    dot.setAttribute("class", `search-point${c.fits ? " fits" : " over"}${onFront.has(i) ? " front" : ""}`);
    dot.dataset.index = String(i);
    dot.dataset.bytes = String(c.peak_bytes);
    dot.dataset.seconds = String(c.expected_seconds);
    dot.setAttribute("tabindex", "0");
    svgEl("title", {}, dot).textContent = `#${i} ${c.strategy}: ${fmtSeconds(Number(c.expected_seconds))}, ${fmtBytes(Number(c.peak_bytes))}`;
    dot.addEventListener("mouseenter", () => hover(i));
    dot.addEventListener("focus", () => hover(i));
    dot.addEventListener("click", () => choose(i));
    dot.addEventListener("keydown", (e) => {
      if (/** @type {KeyboardEvent} */ (e).key === "Enter") choose(i);
    });
    dots.set(i, dot);
  }
  const ring = svgEl("circle", { r: 11, fill: "none", stroke: fg, "stroke-width": 1.5, visibility: "hidden", class: "search-selected" }, svg);
  return {
    svg,
    mark(i) {
      const c = s.candidates[i];
      const on = c && drawn(c);
      ring.setAttribute("visibility", on ? "visible" : "hidden");
      if (on) {
        ring.setAttribute("cx", String(x(Number(c.peak_bytes))));
        ring.setAttribute("cy", String(y(Number(c.expected_seconds))));
      }
    },
  };
}

/** What a hovered point says: its strategy, figures, knobs and rules. @param {Candidate} c @param {number} i */
function pointText(c, i) {
  const figures = drawn(c) ? `${fmtSeconds(Number(c.expected_seconds))} a step, peak ${fmtBytes(Number(c.peak_bytes))}` : c.lost_on;
  const knobs = knobsText(c);
  return `#${i} ${meshText(c.mesh)}${knobs ? ` (${knobs})` : ""}: ${figures} — rules: ${rulesLines(c).join(", ") || "none"}`;
}

/**
 * The selected candidate: its compiled plan's figures, what it lost on, its rules to paste.
 * @param {Search} s
 * @param {number} i
 * @returns {HTMLElement[]}
 */
function detail(s, i) {
  const c = s.candidates[i];
  const band = c.expected_seconds != null
    ? `${fmtSeconds(Number(c.lower_bound_seconds ?? c.expected_seconds))} at 100 % MFU · ${fmtSeconds(c.expected_seconds)} expected · ${fmtSeconds(Number(c.upper_bound_seconds ?? c.expected_seconds))} upper bound`
    : null;
  const colls = Object.entries(c.collective_seconds || {}).map(([k, v]) => `${k} ${fmtSeconds(v)}`).join(" · ");
  const out = [
    h("h3", {}, `#${i} ${c.strategy}${i === s.pick?.index ? " — the pick" : ""}${c.current ? " — your current sharding" : ""}`),
    defList([
      ["mesh", meshText(c.mesh)],
      ["knobs", knobsText(c) || null],
      ["step time", band],
      ["bound", c.bound ? `${c.bound}-bound` : null],
      ["collectives per step", colls || null],
      ["peak HBM per device", c.peak_bytes != null ? `${fmtBytes(c.peak_bytes)} (XLA's)${c.usable_bytes ? ` of ${fmtBytes(c.usable_bytes)} usable` : ""}` : null],
      ["compiled in", c.compile_seconds != null ? fmtSeconds(c.compile_seconds) : c.compiled ? null : "not compiled"],
      ["lost on", c.lost_on],
    ]),
    h("p", {}, "Rules:"),
    h("pre", { part: "search-rules" }, rulesLines(c).join("\n") || "none"),
  ];
  if (i === s.pick?.index) out.push(el("p", "muted", "Its full plan follows: the verdict, memory and collectives below."));
  if (c.paste) {
    out.push(h("p", {}, "To paste (Python):"), h("pre", { part: "search-paste" }, c.paste.python),
      h("p", {}, "MaxText's config keys:"), h("pre", { part: "search-maxtext" }, c.paste.maxtext));
  }
  return out;
}

/**
 * The pick against the user's current sharding (both compiled: the same estimator).
 * @param {Search} s
 * @returns {HTMLElement | null}
 */
function comparison(s) {
  if (s.current == null || !s.pick) return null;
  const mine = s.candidates[s.current];
  const pick = s.candidates[s.pick.index];
  if (!mine || !pick) return null;
  if (s.current === s.pick.index) return h("p", { part: "search-compare" }, `Your current sharding (${mine.strategy}) is the pick: no candidate compiled here is faster and fits.`);
  const said = [];
  if (pick.expected_seconds != null && mine.expected_seconds != null) {
    said.push(`${fmtSeconds(pick.expected_seconds)} a step against ${fmtSeconds(mine.expected_seconds)} (${(mine.expected_seconds / pick.expected_seconds).toFixed(2)}× faster)`);
  }
  if (pick.peak_bytes != null && mine.peak_bytes != null) said.push(`peak ${fmtBytes(pick.peak_bytes)} against ${fmtBytes(mine.peak_bytes)}`);
  return h("p", { part: "search-compare", "data-current": String(s.current) },
    h("strong", {}, "The pick against your current sharding"), `: ${pick.strategy} — ${said.join("; ") || "not comparable"}. Yours (${mine.strategy}): ${mine.lost_on}.`);
}

/**
 * Draws a plan's search into `box` (hidden when the plan came from no search).
 * @param {HTMLElement} box
 * @param {any} snap
 * @param {{dark: boolean}} opts
 */
export function searchSection(box, snap, opts) {
  /** @type {Search | undefined} */
  const s = snap.search;
  box.hidden = !s || !Array.isArray(s.candidates);
  if (!s || box.hidden) return;
  const n = s.candidates.length;
  const compiled = s.candidates.filter((c) => c.compiled).length;
  const shown = s.candidates.filter(drawn).length;
  const pick = s.pick ? s.candidates[s.pick.index] : null;
  const readout = h("p", { class: "muted", part: "search-readout" }, "Hover a point for its mesh and rules; click it, or a row, for its compiled plan and its rules to paste.");
  const card = h("div", { class: "search-detail", part: "search-detail" });
  const { table, body } = headedTable("search-table", ["#", "mesh", "knobs", "step", "peak HBM", "fits", "lost on"]);
  table.dataset.part = "search-table";
  /** @type {HTMLTableRowElement[]} */
  const rows = [];
  let marked = -1;
  /** @param {number} i */
  const choose = (i) => {
    if (!s.candidates[i]) return;
    marked = i;
    front.mark(i);
    card.replaceChildren(...detail(s, i));
    card.dataset.index = String(i);
    rows.forEach((r) => r.setAttribute("aria-selected", String(Number(r.dataset.index) === i)));
  };
  const isNarrow = () => box.clientWidth > 0 && box.clientWidth < NARROW_PX;
  const draw = (/** @type {boolean} */ narrow) => {
    const made = chart(s, opts.dark, (i) => { readout.textContent = pointText(s.candidates[i], i); }, choose, narrow);
    made.svg.dataset.part = "search-front";
    return made;
  };
  let narrow = isNarrow();
  let front = draw(narrow);
  // drawn again when the card crosses a phone's width (a notebook's output narrowed after it was drawn)
  RESIZES.get(box)?.disconnect();
  const resized = new ResizeObserver(() => {
    if (isNarrow() === narrow || !box.contains(front.svg)) return;
    narrow = isNarrow();
    const next = draw(narrow);
    front.svg.replaceWith(next.svg);
    front = next;
    front.mark(marked);
  });
  resized.observe(box);
  RESIZES.set(box, resized);
  const onFront = new Set(s.front);
  const addRows = (/** @type {number} */ upto) => {
    for (let i = rows.length; i < Math.min(n, upto); i++) {
      const c = s.candidates[i];
      const row = body.insertRow();
      row.dataset.index = String(i);
      if (i === s.pick?.index) row.classList.add("pick");
      if (c.current) row.classList.add("current");
      const cell = cellsOf(row);
      cell(`${i}${onFront.has(i) ? " *" : ""}`, "num");
      cell(c.strategy);
      cell(knobsText(c) || "—");
      cell(c.expected_seconds != null ? fmtSeconds(c.expected_seconds) : "—", "num");
      cell(c.peak_bytes != null ? fmtBytes(c.peak_bytes) : "—", "num");
      cell(c.fits == null ? "—" : c.fits ? "yes" : "no", c.fits === false ? "warn" : "");
      cell(c.lost_on);
      row.setAttribute("aria-selected", String(i === marked));
      actionable(row, () => choose(i));
      rows.push(row);
    }
  };
  addRows(ROWS_SHOWN);
  const more = n > ROWS_SHOWN ? h("button", { type: "button", part: "search-more" }, `Show all ${n} candidates`) : null;
  more?.addEventListener("click", () => { addRows(n); more.remove(); });
  const wall = fmtSeconds(s.seconds);
  const summary = pick
    ? `Pick: ${pick.strategy}${knobsText(pick) ? ` (${knobsText(pick)})` : ""} — ${fmtSeconds(Number(pick.expected_seconds))} a step, peak ${fmtBytes(Number(pick.peak_bytes))} per device: the plan below.`
    : s.why_no_pick || "Nothing compiled fits.";
  box.replaceChildren(
    h("h2", {}, "Search: which mesh and rules"),
    h("p", { part: "search-summary", "data-candidates": String(n), "data-compiled": String(compiled) },
      `${n} candidates on ${s.devices}${(s.slices ?? 1) > 1 ? ` × ${s.slices} slices` : ""}, ${compiled} compiled, searched in ${wall}. `, h("strong", {}, summary)),
    ...[comparison(s)].filter((x) => x !== null),
    h("div", { class: "search-pair" },
      h("div", {}, front.svg,
        h("p", { class: "muted search-key" },
          `● filled: on the front (step time against peak HBM) · ○ compiled, not on it · green: the pick · orange ◆: your current sharding · red: over the usable HBM. ${shown} of ${n} drawn${shown < n ? "; the rest were not compiled or have no step time (the table says why)" : ""}.`),
        readout),
      card),
    table,
    ...(more ? [more] : []),
  );
  choose(s.pick ? s.pick.index : s.current ?? s.candidates.findIndex(drawn));
  box.dataset.plotted = String(Number(box.dataset.plotted || 0) + 1);
}
