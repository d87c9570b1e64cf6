// A plan's summary (sharding_core/planning: what `plan(...)`, `inspect_jit(...)` and `shardscope plan` put in a
// snapshot): the verdict line first (fits / over by X; compute-, memory- or communication-bound; the step
// time), or — when XLA refused the program for memory — the refusal's figures, its largest allocations
// with their source lines and what to change; then HBM per device against the chip's capacity by kind
// of leaf (params, each optimizer state, the batch, outputs, temporaries) with XLA's memory_analysis
// figures exactly; the step-time band; the roofline (compute, memory, communication: bound and expected);
// the target, the partitioner, the work with loops counted and the largest temporaries.
// Drawn from the snapshot alone, on any host (the snapshot panel, the compare panel, the widget).

import { defList, el, h, headedTable, cellsOf } from "../lib/dom.js";
import { fmtBytes, fmtCount, fmtSeconds, thousands } from "../lib/format.js";
import { groupColour, noTileColour } from "../model/layout.js";
import { OVER, hbmOf, opTail, stepBand } from "../model/plan.js";
import { rooflinePanel } from "./estimates.js";

/** @typedef {import("../model/plan.js").Hbm} Hbm */

/** Below this share of the bar's scale, the used part is drawn again on its own scale. */
const ZOOM_BELOW = 0.2;
/** How many of the largest temporaries (or refused allocations) are listed. */
const LARGEST_SHOWN = 10;

/** A part's colour. @param {number} slot @param {boolean} dark */
function colourOf(slot, dark) {
  return slot < 0 ? noTileColour(dark) : groupColour(slot, dark);
}

/** "12.3%" of `of` ("0.004%", "< 0.001%"), or "" when there is no `of`. @param {number} n @param {number | null} of */
function share(n, of) {
  if (!of) return "";
  const p = (100 * n) / of;
  if (p === 0 || p >= 0.1) return `${p.toFixed(1)}%`;
  return p >= 0.001 ? `${Number(p.toPrecision(1))}%` : "< 0.001%";
}

/** @param {number} n */
function exactBytes(n) {
  return `${thousands(n)} bytes`;
}

/**
 * One bar: the parts side by side on a scale of `scale` bytes, the limit (capacity or what XLA had) and
 * the peak as marks on it.
 * @param {Hbm} hbm
 * @param {number} scale
 * @param {boolean} dark
 * @param {string} part
 * @param {string} caption
 */
function bar(hbm, scale, dark, part, caption) {
  const track = h("div", { class: "hbm-track", part, role: "img", "aria-label": caption, "data-scale": scale });
  let at = 0;
  for (const p of hbm.parts) {
    const seg = h("div", { class: `hbm-seg hbm-${p.kind}`, "data-kind": p.kind, "data-label": p.label, "data-bytes": p.bytes, title: `${p.label}: ${fmtBytes(p.bytes)} (${exactBytes(p.bytes)}) — ${p.title}` });
    seg.style.left = `${(100 * at) / scale}%`;
    seg.style.width = `${(100 * p.bytes) / scale}%`;
    seg.style.background = colourOf(p.colour, dark);
    track.appendChild(seg);
    at += p.bytes;
  }
  if (hbm.limit !== null && hbm.total > hbm.limit) {
    // past what the chip has: the part that does not fit, marked
    const over = h("div", { class: "hbm-over", title: `over by ${fmtBytes(hbm.total - hbm.limit)}` });
    over.style.left = `${(100 * hbm.limit) / scale}%`;
    over.style.width = `${(100 * (hbm.total - hbm.limit)) / scale}%`;
    over.style.borderColor = colourOf(OVER, dark);
    track.appendChild(over);
  }
  /** @param {number} bytes @param {string} cls @param {string} text */
  const mark = (bytes, cls, text) => {
    if (bytes > scale) return;
    const m = h("div", { class: `hbm-mark ${cls}`, title: `${text} (${exactBytes(bytes)})` }, h("span", {}, text));
    m.style.left = `${(100 * bytes) / scale}%`;
    if (bytes / scale > 0.6) m.classList.add("left");
    track.appendChild(m);
  };
  if (hbm.limit !== null) mark(hbm.limit, "hbm-limit", `${hbm.limitLabel} ${fmtBytes(hbm.limit)}`);
  if (hbm.peak !== null) mark(hbm.peak, "hbm-peak", `peak ${fmtBytes(hbm.peak)}`);
  return h("figure", { class: "hbm-bar" }, track, h("figcaption", { class: "muted" }, caption));
}

/**
 * HBM per device: the bar against the chip's capacity (and the used part on its own scale when it is a
 * sliver of it), the parts by kind with their bytes, and XLA's memory_analysis figures exactly.
 * @param {HTMLElement} container
 * @param {Hbm} hbm
 * @param {{dark: boolean}} opts
 */
export function hbmBar(container, hbm, opts) {
  const used = Math.max(hbm.total, hbm.peak ?? 0);
  const scale = Math.max(used, hbm.limit ?? 0, 1);
  const where = hbm.limit !== null ? `against ${hbm.limitLabel === "capacity" ? "the chip's capacity" : "what XLA had available"}, ${fmtBytes(hbm.limit)}` : "no capacity figure for this hardware";
  const bars = [bar(hbm, scale, opts.dark, "hbm-bar", `${hbm.limit !== null ? "HBM" : "Memory"} per device by kind, ${where}`)];
  if (hbm.limit !== null && used > 0 && used / scale < ZOOM_BELOW) {
    const what = used === hbm.total ? "the parts' sum" : "XLA's peak";
    bars.push(bar({ ...hbm, limit: null }, used, opts.dark, "hbm-zoom", `the same, ${what} ${fmtBytes(used)} drawn across (${share(used, hbm.limit)} of ${hbm.limitLabel})`));
  }
  // the parts, one row each: a swatch, what it is, bytes, share of capacity
  const { table: parts, body } = headedTable("hbm-parts", ["", "kind", "per device", hbm.capacity ? "of capacity" : ""]);
  parts.tHead?.rows[0].cells[3].classList.add("of-capacity");
  const host = hbm.host ?? [];
  for (const p of [...hbm.parts, ...hbm.apart, ...host]) {
    const apart = hbm.apart.includes(p) || host.includes(p);
    if (apart && (p === hbm.apart[0] || p === host[0])) {
      const note = body.insertRow().insertCell();
      note.colSpan = 4;
      note.className = "muted";
      note.textContent = p === host[0] ? "in host memory (pinned_host), not in HBM: offloaded by the program" : "the arguments (beside XLA's figure: it refused the program for its temporaries alone)";
    }
    const row = body.insertRow();
    row.dataset.kind = p.kind;
    if (apart) row.classList.add("apart");
    const sw = h("span", { class: "swatch" });
    sw.style.background = colourOf(p.colour, opts.dark);
    row.insertCell().appendChild(sw);
    const cell = cellsOf(row);
    cell(p.label).title = p.title;
    const b = cell(fmtBytes(p.bytes), "num");
    b.dataset.bytes = String(p.bytes);
    b.title = exactBytes(p.bytes);
    cell(host.includes(p) ? "" : share(p.bytes, hbm.capacity), "num of-capacity"); // host memory: no share of HBM
  }
  // XLA's own figures, exactly (what the fit is decided on)
  const xla = el("dl", "hbm-figures");
  for (const f of hbm.figures) {
    const dd = h("dd", { "data-field": f.field, "data-bytes": f.bytes, title: `${exactBytes(f.bytes)} — ${f.title}` }, fmtBytes(f.bytes));
    if (f.field === "peak_memory_in_bytes" && hbm.capacity) dd.append(h("span", { class: "muted" }, ` (${share(f.bytes, hbm.capacity)} of capacity)`));
    xla.append(el("dt", "", f.label), dd);
  }
  const figures = hbm.figures.some((f) => f.field !== "capacity")
    ? h("div", { class: "hbm-xla" }, h("h4", {}, "XLA's memory_analysis, per device"), xla)
    : hbm.figures.length ? h("div", { class: "hbm-xla" }, h("h4", {}, `${hbm.hardware || "The chip"}, per device`), xla) : null;
  const key = memoryKey(hbm);
  container.replaceChildren(...bars, h("div", { class: "hbm-detail" }, h("div", { class: "table-wrap" }, parts), figures), ...(key ? [key] : []));
}

/**
 * What each memory number is (the bar's sum, XLA's temporaries, XLA's peak), so three figures read as one.
 * @param {Hbm} hbm
 */
function memoryKey(hbm) {
  if (hbm.refused || hbm.peak === null) return null;
  const temps = hbm.parts.find((p) => p.kind === "temporaries");
  return h("p", { class: "muted hbm-key", part: "hbm-key" },
    h("strong", {}, "Key: "),
    `the bar adds its parts, ${fmtBytes(hbm.total)} (the arguments, the outputs not donated and XLA's temporaries${temps ? `, ${fmtBytes(temps.bytes)}: the size of its temporary allocation` : ""}); `,
    `XLA's peak, ${fmtBytes(hbm.peak)}, is the most live at once in its heap simulation, what must fit: buffers reuse memory, so it can be below the sum, and on TPU below the temporaries' figure.`);
}

/**
 * The largest allocations (XLA's list in a refusal, else its buffer assignment's temporaries): bytes,
 * shape, the JAX op and the source line that make each.
 * @param {any[]} rows
 * @param {string} part
 */
function largestTable(rows, part) {
  // TPU sets keep temporaries in on-chip memory too (VMEM; v4's CMEM): each value's memory space, when any is
  const spaces = rows.some((t) => t.memory_space && t.memory_space !== "default");
  const { table, body } = headedTable("hops largest", ["bytes", ...(spaces ? ["memory"] : []), "shape", "op", "source line"]);
  for (const t of rows.slice(0, LARGEST_SHOWN)) {
    const cell = cellsOf(body.insertRow());
    cell(t.bytes === null || t.bytes === undefined ? "—" : fmtBytes(t.bytes), "num").title = t.bytes ? exactBytes(t.bytes) : "";
    if (spaces) cell(spaceName(t.memory_space), "space");
    cell(t.shape || "—", "mono");
    cell(opTail(t.op) || t.instruction || "—", "mono").title = [t.op, t.instruction].filter(Boolean).join("\n");
    cell(t.source || "—", "source");
  }
  return h("div", { class: "table-wrap", part }, table);
}

/** "HBM" for the default memory space, libtpu's own name for the others ("vmem" -> "VMEM"). @param {string | undefined} space */
function spaceName(space) {
  return !space || space === "default" ? "HBM" : space.toUpperCase();
}

/**
 * The temporaries' summary: XLA's figure (HBM) and, on TPU, the on-chip allocations beside it.
 * @param {any} t the plan's `temporaries`
 */
function temporariesText(t) {
  const xla = t.temp_size_in_bytes ?? t.temp_allocation_bytes ?? 0;
  // the named on-chip memories that hold activations (VMEM, v4's CMEM), not libtpu's small unnamed ones
  const chip = (t.memory_spaces || []).filter((/** @type {any} */ s) => s.bytes >= 65536 && !/^color/.test(s.memory_space))
    .map((/** @type {any} */ s) => `${fmtBytes(s.bytes)} in ${spaceName(s.memory_space)}`);
  return `Largest temporaries (XLA's temporaries: ${fmtBytes(xla)} in HBM${chip.length ? `; on-chip: ${chip.join(", ")}` : ""})`;
}

/** The refusal as the lead: the figures, XLA's message, the largest allocations and what to change. @param {any} r */
function refusalBlock(r) {
  const facts = defList([
    ["over by", r.over_bytes ? fmtBytes(r.over_bytes) : null],
    [r.what ? `${r.what} needed` : "needed", r.required_bytes ? fmtBytes(r.required_bytes) : null],
    ["available", r.available_bytes ? `${fmtBytes(r.available_bytes)} per device` : null],
  ]);
  // the exact counts on hover
  const exact = [r.over_bytes, r.required_bytes, r.available_bytes].filter((b) => b);
  facts.querySelectorAll("dd").forEach((dd, i) => (dd.title = exact[i] ? exactBytes(exact[i]) : ""));
  const advice = (r.advice || []).map((/** @type {string} */ a) => el("li", "", a));
  return h("div", { class: "plan-refusal", part: "plan-refusal" },
    h("div", { class: "summary" }, facts),
    advice.length ? h("div", {}, h("h3", {}, "What to change"), h("ul", { class: "plan-advice", part: "plan-advice" }, advice)) : null,
    r.largest?.length ? h("div", {}, h("h3", {}, "Largest allocations"), largestTable(r.largest, "plan-largest")) : null,
    h("details", {}, h("summary", {}, "XLA's message"), h("pre", { class: "code" }, r.message || "")));
}

/** "tpu:v5p:2x2x4 — 16 TPU v5 on 4 hosts, 1 slice (libtpu compile-only topology v5p:2x2x4)". @param {any} snap */
function targetText(snap) {
  const t = snap.target;
  if (!t) return `${snap.devices.id.length} ${snap.device_kind} (${snap.platform}): this process's devices`;
  const hosts = t.hosts ? ` on ${t.hosts} host${t.hosts === 1 ? "" : "s"}` : "";
  const slices = t.slices ? `, ${t.slices} slice${t.slices === 1 ? "" : "s"}` : "";
  return `${t.devices} — ${t.num_devices} ${t.device_kind}${hosts}${slices}${t.source ? ` (${t.source})` : ""}`;
}

/** "1.55 G flops per device and step with loops counted (XLA's cost_analysis, each loop body once: 881 M)". @param {any} work */
function workText(work) {
  if (!work || work.flops === null || work.flops === undefined) return null;
  const loops = (work.loops || []).map((/** @type {any} */ l) => `× ${l.trip_count ?? "?"}`).join(", ");
  const xla = work.flops_xla !== null && work.flops_xla !== undefined ? `; XLA's cost_analysis, each loop body once: ${fmtCount(work.flops_xla)}` : "";
  const bytes = work.bytes_accessed !== null && work.bytes_accessed !== undefined ? `, ${fmtBytes(work.bytes_accessed)} accessed` : "";
  return `${fmtCount(work.flops)} flops${bytes} per device and step, loops counted${loops ? ` (${loops})` : ""}${xla}`;
}

/** The step-time band in one line. @param {any} plan */
function bandText(plan) {
  const b = stepBand(plan);
  if (!b) return null;
  const expected = b.expected !== null ? `expected ${fmtSeconds(b.expected)} · ` : "";
  const upper = b.upper !== null ? ` · ${fmtSeconds(b.upper)} with nothing overlapped` : "";
  return `${expected}${fmtSeconds(b.lower)} at 100 % MFU (${b.bound}-bound)${upper}`;
}

/**
 * A plan's summary into `container` (replacing what is there); nothing when the snapshot has no plan.
 * @param {HTMLElement} container
 * @param {any} snap
 * @param {{dark: boolean, compact?: boolean}} opts compact: verdict, HBM and step time only (the compare panel)
 */
export function planSummary(container, snap, opts) {
  container.replaceChildren();
  const plan = snap.plan;
  const hbm = hbmOf(snap);
  if (!plan || !hbm) return;
  // XLA's refusal, or a compiled program past the chip's HBM (XLA's GPU compiler refuses nothing): read alike
  const refusal = plan.refusal || plan.over_capacity;
  const state = plan.fits === true ? "fits" : plan.fits === false ? "over" : "unknown";
  const verdict = h("p", { class: `plan-verdict ${state}`, part: "plan-verdict", "data-fits": state }, plan.verdict || "");
  const hbmBox = h("div", { class: "plan-hbm", part: "plan-hbm" });
  hbmBar(hbmBox, hbm, opts);
  const band = bandText(plan);
  const step = band ? h("p", { class: "plan-step", part: "plan-step", title: plan.step_time?.note || "" }, h("strong", {}, "Step time: "), band) : null;
  if (opts.compact) {
    container.append(...[verdict, hbmBox, step].filter((x) => x !== null));
    return;
  }
  // without hardware figures (a CPU capture) there is no roofline to draw: the facts below say why
  const roofed = Boolean(plan.roofline?.hardware) && !plan.over_capacity; // no times for what cannot run
  const roofline = h("div", { class: "plan-roofline", part: "plan-roofline" });
  if (roofed) rooflinePanel(roofline, plan.roofline, "Roofline", plan.step_time?.upper_bound_seconds ?? null);
  const comm = plan.communication;
  const facts = h("div", { class: "summary plan-facts", part: "plan-facts" }, defList([
    ["target", targetText(snap)],
    ["hardware figures", roofed ? null : plan.roofline?.why],
    ["partitioner", plan.partitioner === "gspmd" ? "GSPMD (a fallback from Shardy)" : plan.partitioner === "shardy" ? "Shardy" : plan.partitioner],
    ["work", workText(plan.work)],
    ["collectives", comm ? `${comm.collectives} in the program, ${comm.per_step} runs per step, ${fmtBytes(comm.bytes_per_step)} of results per device and step` : null],
    ["compile", plan.compile_seconds !== undefined ? `lowered in ${fmtSeconds(plan.lower_seconds)}, compiled in ${fmtSeconds(plan.compile_seconds)}` : null],
  ]));
  const temps = !refusal && plan.temporaries?.largest?.length
    ? h("details", { class: "plan-temporaries", part: "plan-temporaries" },
        h("summary", { title: plan.temporaries.note || "" }, temporariesText(plan.temporaries)),
        largestTable(plan.temporaries.largest, "plan-temporaries-table"))
    : null;
  const title = plan.refusal ? "Plan: XLA refused the program for memory" : plan.over_capacity ? "Plan: the program does not fit"
    : plan.temporaries ? "Plan" : "Compiled program (inspect_jit)";
  container.append(...[
    h("h2", { class: "plan-title" }, title),
    verdict,
    refusal ? refusalBlock(refusal) : null,
    h("div", { class: `plan-grid${roofed ? "" : " single"}` },
      h("div", {}, h("h3", {}, hbm.capacity ? "HBM per device" : "Memory per device"), hbmBox, step),
      roofed ? roofline : null),
    facts,
    temps,
  ].filter((x) => x !== null));
}
