// A plan as the views read it (sharding_core/planning: a snapshot's `plan`, `jit` and `target`, made by
// `plan(...)`, `inspect_jit(...)` or `shardscope plan`): HBM per device by kind of leaf — the arguments by
// group (params, each optimizer state, the batch), outputs, temporaries — with XLA's memory_analysis
// figures exactly, a refusal's figures, the names of argument groups, and the step-time band. Data,
// never DOM (components/plan.js draws it).

import { memoryOf } from "./program.js";

/**
 * @typedef {{kind: string, label: string, bytes: number, colour: number, title: string}} HbmPart a segment
 *   of the HBM bar: kind "argument" (one group), "padding", "outputs", "temporaries" or "refused";
 *   colour: its index in the group palette (model/layout.js groupColour; -1: noTileColour)
 * @typedef {{field: string, label: string, bytes: number, title: string}} HbmFigure one of XLA's
 *   memory_analysis figures (field: its name), or the capacity
 * @typedef {{parts: HbmPart[], apart: HbmPart[], host?: HbmPart[], figures: HbmFigure[], total: number, peak: number | null,
 *   capacity: number | null, limit: number | null, limitLabel: string, fits: boolean | null,
 *   over: number | null, refused: boolean, hardware: string | null}} Hbm
 *   parts: the bar's segments; apart: listed beside them, not in the bar (a refusal's arguments, when XLA
 *   refused for its temporaries alone); total: the parts' sum; limit: the line drawn (the chip's capacity,
 *   or what XLA said was available)
 */

/** Memory_analysis fields a plan shows, in order, with their names on the page. */
export const MEMORY_FIGURES = /** @type {const} */ ([
  ["argument_size_in_bytes", "arguments", "the arguments' buffers on each device (XLA pads each to the chip's tiles)"],
  ["output_size_in_bytes", "outputs", "the outputs' buffers on each device"],
  ["alias_size_in_bytes", "aliased (donated)", "outputs written into donated arguments' buffers: counted once, as arguments"],
  ["temp_size_in_bytes", "temporaries", "XLA's temporary allocation (activations, gradients, collectives' buffers)"],
  ["peak_memory_in_bytes", "peak", "XLA's heap simulation of the program: what must fit (less than the sum when buffers reuse memory)"],
]);

// Palette slots (model/layout.js groupColour): arguments take the calm ones, red is kept for "over".
const ARGUMENT_COLOURS = [0, 1, 2, 3, 6, 7, 8];
const OUTPUTS = 9;
const TEMPORARIES = 5;
const PADDING = -1; // the colour of what holds nothing (model/layout.js noTileColour)
export const OVER = 4;

/**
 * The name an argument group goes by: "args/0" is the parameter it was passed as ("params"), "args/1/mu"
 * that parameter's field ("opt_state.mu"), "kwargs/w" its keyword ("w").
 * @param {string} group
 * @param {(string | null)[] | undefined} names the program's parameter names (`jit.arguments`)
 * @returns {string}
 */
export function groupName(group, names) {
  const [where, first, ...rest] = group.split("/");
  const index = Number(first);
  const name = where === "args" && Number.isInteger(index) ? names?.[index] ?? `argument ${index}` : first ?? group;
  return [name, ...rest].join(".");
}

/**
 * A leaf path as the panel names it beside the HBM table: `inputs/args/1` -> `w` (the parameter it was passed
 * as), `inputs/args/1/mu` -> `w.mu`, `inputs/kwargs/x` -> `x`; any other path as it is.
 * @param {string} path
 * @param {(string | null)[] | undefined} names the program's parameter names (`jit.arguments`)
 */
export function leafName(path, names) {
  return path.startsWith("inputs/") ? groupName(path.slice("inputs/".length), names) : path;
}

/** The argument index of a group ("args/1/mu" -> 1; keyword arguments after every positional one). @param {string} group */
function argumentIndex(group) {
  const [where, first] = group.split("/");
  const n = Number(first);
  return where === "args" && Number.isInteger(n) ? n : Number.MAX_SAFE_INTEGER;
}

/**
 * HBM per device by kind, from a plan's snapshot: the arguments by group, then (from XLA's memory_analysis)
 * what pads them to XLA's argument figure, the outputs not written into donated buffers, and the
 * temporaries; XLA's figures themselves, the peak and the capacity. For a program XLA refused for memory
 * (no memory_analysis), the figure XLA refused against what it said was available.
 * @param {any} snap
 * @returns {Hbm | null} null when the snapshot has no plan
 */
export function hbmOf(snap) {
  const plan = snap.plan;
  if (!plan) return null;
  const names = snap.jit?.arguments;
  const groups = [...(plan.arguments?.groups || [])]
    .map((g, k) => ({ g, k }))
    .sort((a, b) => argumentIndex(a.g.group) - argumentIndex(b.g.group) || a.k - b.k)
    .map(({ g }) => g);
  /** @type {HbmPart[]} */
  const parts = [];
  /** @type {HbmPart[]} */
  const host = []; // arguments in host memory (pinned_host: an offloaded optimizer state): not in HBM
  groups.forEach((g, i) => {
    const colour = ARGUMENT_COLOURS[i % ARGUMENT_COLOURS.length];
    const label = g.name ?? groupName(g.group, names);
    const title = `${g.group}: ${g.leaves} lea${g.leaves === 1 ? "f" : "ves"}, their shards' logical bytes on each device`;
    const away = g.host_bytes_per_device ?? 0;
    if (g.bytes_per_device - away > 0) parts.push({ kind: "argument", label, bytes: g.bytes_per_device - away, colour, title });
    if (away > 0) host.push({ kind: "host", label: `${label} (host memory)`, bytes: away, colour, title: `${title}, in pinned host memory` });
  });
  const leaves = parts.reduce((s, p) => s + p.bytes, 0);
  const capacity = plan.capacity_bytes ?? null;
  const mem = memoryOf(snap.program); // the program report's: XLA's memory_analysis fields by their names
  const refusal = plan.refusal;
  /** @type {HbmFigure[]} */
  const figures = [];
  /** @type {HbmPart[]} */
  let apart = [];
  let peak = null;
  let limit = capacity;
  let limitLabel = "capacity";
  if (mem) {
    const args = mem.argument_size_in_bytes ?? 0;
    if (args > leaves) {
      parts.push({ kind: "padding", label: "argument padding", bytes: args - leaves, colour: PADDING, title: "XLA's argument figure less the leaves' logical bytes: buffers padded to the chip's tiles" });
    }
    const alias = mem.alias_size_in_bytes ?? 0;
    const outs = Math.max(0, (mem.output_size_in_bytes ?? 0) - alias);
    parts.push({ kind: "outputs", label: alias ? "outputs (not donated)" : "outputs", bytes: outs, colour: OUTPUTS, title: alias ? "XLA's output figure less what is written into donated arguments' buffers" : "XLA's output figure" });
    parts.push({ kind: "temporaries", label: "temporaries", bytes: mem.temp_size_in_bytes ?? 0, colour: TEMPORARIES, title: "XLA's temporary allocation" });
    for (const [field, label, title] of MEMORY_FIGURES) {
      if (mem[field] !== undefined && mem[field] !== null) figures.push({ field, label, bytes: mem[field], title });
    }
    peak = mem.peak_memory_in_bytes ?? null;
  } else if (refusal) {
    // XLA compared one figure with what it had: its temporaries alone (the arguments are listed apart),
    // or the whole program (the arguments, then the rest of XLA's figure)
    const required = refusal.required_bytes || 0;
    if (/temporar/.test(refusal.what || "")) {
      apart = parts.splice(0);
      if (required) parts.push({ kind: "refused", label: "temporaries (XLA's figure)", bytes: required, colour: TEMPORARIES, title: refusal.message || "" });
    } else if (required > leaves) {
      parts.push({ kind: "refused", label: `the rest of the ${refusal.what || "program"} (XLA's figure less the arguments)`, bytes: required - leaves, colour: TEMPORARIES, title: refusal.message || "" });
    }
    if (refusal.available_bytes) {
      limit = refusal.available_bytes;
      limitLabel = "available";
    }
  }
  if (capacity !== null) figures.push({ field: "capacity", label: "capacity", bytes: capacity, title: `HBM per device of ${plan.hardware || "this hardware"} (the hardware table)` });
  const total = parts.reduce((s, p) => s + p.bytes, 0);
  const over = refusal ? refusal.over_bytes ?? null : plan.over_bytes ?? null;
  return { parts, apart, host, figures, total, peak, capacity, limit, limitLabel, fits: plan.fits ?? null, over, refused: Boolean(refusal), hardware: plan.hardware ?? null };
}

/**
 * The step-time band: the roofline's lower bound "at 100 % MFU" (everything overlapped, spec-sheet figures),
 * the expected time (the compiled schedule at fitted efficiencies), and the serial sum (nothing overlapped);
 * null without hardware figures.
 * @param {any} plan
 * @returns {{lower: number, expected: number | null, upper: number | null, bound: string} | null}
 */
export function stepBand(plan) {
  const st = plan?.step_time;
  if (!st || st.lower_bound_seconds === null || st.lower_bound_seconds === undefined || !st.bound) return null;
  return { lower: st.lower_bound_seconds, expected: st.expected_seconds ?? null, upper: st.upper_bound_seconds ?? null, bound: st.bound };
}

/**
 * The last part of a JAX op name, where the op itself is named: "jit(step)/jvp()/while/body/bqngk,bsnk->bngqs/dot_general"
 * -> "bqngk,bsnk->bngqs/dot_general".
 * @param {string | null | undefined} op
 */
export function opTail(op) {
  if (!op) return "";
  const parts = op.split("/");
  return parts.slice(-2).join("/");
}
