// The kernel lab panel: pick a catalog kernel (or one of the tutorials' own cells), a device set, a mesh
// and the inputs' specs, run it in the server's worker processes, and see every output's layout and
// values, the waste the program's findings name, the collectives XLA inserted (each one handed to the
// topology view with the run's complete state), every value's sharding, memory, cost, correctness, Shardy's
// sharding origins and the HLO. An error stands beside the
// control that fixes it: an input's field, an output spec, the mesh, or the Run button.

import { ApiError } from "../lib/api.js";
import { codeInput, defList, el, h, labelled, setOptions } from "../lib/dom.js";
import { errorFields, showError } from "../lib/errors.js";
import { fmtMs, meshAxes } from "../lib/format.js";
import { collectivesSection, collectivesTable } from "../components/collectives.js";
import { draw as drawWhy } from "../components/why.js";
import { estimateTotal, rooflinePanel } from "../components/estimates.js";
import { findingsSection, valuesSection } from "../components/findings.js";
import { memoryTimeline } from "../components/memory_timeline.js";
import { memoryText, mountCompilerLog, mountOrigins, workText } from "../components/program.js";
import { layoutGrid } from "../components/grid.js";
import { devicePicker, meshPicker } from "../components/pickers.js";
import { onTopology } from "../model/collective.js";
import { arrayFacts } from "../model/facts.js";
import { compileSeconds } from "../model/program.js";
import { FieldError, defaultsFor, fromQuery as kernelState, runRequest, toQuery, withFix } from "../model/kernel_run.js";
import { Layout } from "../model/layout.js";
import { DEFAULTS, topologyQuery } from "../model/state.js";
import { errorBox, exampleButton, fieldOf, lifetime, shareAndStatus } from "./common.js";

export const VIEW = "kernels";
export { toQuery };

const CUT = "\n… (cut: setting max_kernel_text_chars)";
/** How many of an output's values are shown (the API sends at most this many). */
const VALUES_SHOWN = 64;

/**
 * The panel's state from the address: the query itself (the catalog, which fills what it leaves
 * out, arrives later).
 * @param {URLSearchParams} q
 */
export function fromQuery(q) {
  return { query: q.toString() };
}

/**
 * Source as it runs: the catalog sends a kernel's `def` line and then its body without the body's
 * indentation; indented again it reads as the Python it is.
 * @param {string} src
 */
function sourceText(src) {
  const lines = src.split("\n");
  if (lines.length < 2 || !/^\s*(async\s+)?def\s.*:\s*(#.*)?$/.test(lines[0])) return src;
  const body = lines.slice(1);
  const indents = body.filter((l) => l.trim()).map((l) => (/^ */.exec(l) || [""])[0].length);
  if (!indents.length || Math.min(...indents) > 0) return src;
  return [lines[0], ...body.map((l) => (l.trim() ? `    ${l}` : l))].join("\n");
}

/** @param {number | null | undefined} e */
function fmtErr(e) {
  return e === null || e === undefined ? "not comparable" : e === 0 ? "0 (exact)" : e.toExponential(2);
}

/**
 * The error against the reference, with its scale: "3.91e-3 (4.9e-4 of max |x| 7.98)" — a bf16
 * result's absolute error means nothing without the size of the values it is an error of.
 * @param {any} a an output
 */
function errorText(a) {
  const e = a.max_abs_error;
  const scale = a.max_abs_reference;
  if (e === null || e === undefined || e === 0 || !scale) return fmtErr(e);
  return `${fmtErr(e)} (${(e / scale).toExponential(1)} of max |reference| ${scale.toPrecision(3)})`;
}

/** Significant digits NumPy prints a value of each float dtype with (its precision, about). */
const DIGITS = /** @type {Record<string, number>} */ ({ float64: 16, float32: 8, bfloat16: 3, float16: 4 });

const COMPILE_ONLY = "the kernel was compiled for the device set's hardware on abstract inputs, at their real size: "
  + "nothing was allocated and nothing ran, so there are no values and no error against the reference; the "
  + "collectives, memory and cost are the compiled program's";

/** An output's values as NumPy prints a short array: "496" or "[48. 52. 56. …]". @param {any} a */
function valuesText(a) {
  const v = a.values;
  if (!v) return null;
  const digits = DIGITS[a.dtype];
  /** @param {number | boolean | null} x */
  const num = (x) => {
    if (typeof x !== "number" || !digits) return String(x);
    if (Number.isInteger(x)) return `${x}.`;
    return String(Number(x.toPrecision(digits)));
  };
  const flat = v.flat.slice(0, VALUES_SHOWN).map(num).join(" ");
  const more = v.size > v.flat.length ? ` … (${v.flat.length} of ${v.size})` : "";
  return a.shape.length === 0 ? num(v.flat[0]) : `[${flat}${more}]`;
}
/**
 * Where a refusal points: the API names the input (`input`: its index, `input_name`) and the field at
 * fault (`field`: shape, spec or dtype) in the error itself, its message already naming the input, so
 * nothing is asked again. A refusal of the inputs together (too many elements) marks the largest one.
 * @param {any} req the run request
 * @param {unknown} err
 * @returns {{err: unknown, input?: number, field?: string, source?: string, note?: string}}
 */
function blame(req, err) {
  if (!(err instanceof ApiError) || !req.inputs) return { err };
  const given = /** @type {any} */ (err.error).input;
  if (typeof given === "number" && given >= 0 && given < req.inputs.length) {
    return { err, input: given, field: /** @type {any} */ (err.error).field, source: req.inputs[given].spec, note: err.error.message };
  }
  if (err.error.code === "too_large" && /elements/.test(err.error.message)) {
    const sizes = req.inputs.map((/** @type {any} */ i) => i.shape.reduce((/** @type {number} */ a, /** @type {number} */ b) => a * b, 1));
    return { err, input: sizes.indexOf(Math.max(...sizes)), field: "shape" };
  }
  return { err };
}

/** A labelled text field named `part`. @param {string} label @param {string} value @param {string} part @param {string} aria */
function field(label, value, part, aria) {
  const input = codeInput(value);
  input.dataset.part = part;
  input.setAttribute("aria-label", aria);
  return labelled(label, input);
}

/** @param {HTMLSelectElement} select @param {any[]} kernels */
function fillKernelSelect(select, kernels) {
  select.replaceChildren();
  /** @param {string} label @param {any[]} list */
  const group = (label, list) => {
    const og = el("optgroup");
    og.label = label;
    for (const k of list) {
      const o = el("option", "", k.title + (k.available ? "" : " — not installed"));
      o.value = k.name;
      o.disabled = !k.available;
      og.appendChild(o);
    }
    if (og.children.length) select.appendChild(og);
  };
  group("jit (the compiler shards)", kernels.filter((x) => x.mode === "jit" && !x.requires));
  group("shard_map (per-device code)", kernels.filter((x) => x.mode === "shard_map" && !x.requires));
  group("Flax (optional extra)", kernels.filter((x) => x.requires));
}

/**
 * The card "Kernel": the kernel picker, its doc, tutorial, reference and source, and the Examples.
 * @param {HTMLElement} parent
 */
function mountKernelCard(parent) {
  const select = h("select", { "aria-label": "Kernel", part: "kernel" });
  const doc = h("p", { class: "kernel-doc", part: "kernel-doc" });
  const explicit = h("p", { class: "muted", hidden: true });
  const tutorial = h("a", { target: "_blank", rel: "noopener noreferrer", part: "kernel-tutorial" }, "tutorial");
  const reference = h("span", { part: "kernel-reference" });
  const source = h("pre", { class: "code", part: "kernel-source" });
  const examples = h("nav", { class: "examples", part: "examples", "aria-label": "Examples" });
  parent.append(h("fieldset", {}, h("legend", {}, "Kernel"),
    labelled("Kernel", select), examples, doc, explicit,
    h("p", { class: "muted" }, tutorial, " · compared with ", reference),
    h("details", {}, h("summary", {}, "Source (exactly what runs)"), source)));
  return {
    select,
    examples,
    /** @param {any} k */
    show(k) {
      select.value = k.name;
      doc.textContent = k.doc;
      explicit.hidden = !k.explicit;
      explicit.textContent = k.explicit ? `With Explicit axes: ${k.explicit}.` : "";
      tutorial.hidden = !k.tutorial;
      if (k.tutorial) tutorial.href = k.tutorial;
      reference.textContent = k.reference;
      source.textContent = sourceText(k.source);
    },
  };
}

/**
 * The cards "Inputs", "Parameters" and "Output specs": one row of fields per input, parameter and output.
 * @param {HTMLElement} parent
 */
function mountArrayFields(parent) {
  const inputsBox = h("div", { class: "kernel-inputs", part: "inputs" });
  const dataSelect = h("select", { part: "data" });
  setOptions(dataSelect, ["", "arange"], ["random, seeded (normal; integers −4…4)", "0, 1, 2, … (jnp.arange, as the tutorials)"]);
  const paramsBox = h("div", { class: "kernel-inputs", part: "params" });
  const paramsSet = h("fieldset", { hidden: true }, h("legend", {}, "Parameters"), paramsBox);
  const outsBox = h("div", { class: "kernel-inputs", part: "outs" });
  const outsSet = h("fieldset", { hidden: true }, h("legend", {}, "Output specs (optional)"), outsBox);
  parent.append(h("fieldset", {}, h("legend", {}, "Inputs"), inputsBox, labelled("Input values", dataSelect)), paramsSet, outsSet);
  const value = (/** @type {string} */ part) => /** @type {HTMLInputElement} */ (parent.querySelector(`[data-part="${part}"]`)).value;
  return {
    /** @param {any} k @param {import("../model/kernel_run.js").KernelState} s @param {string[]} dtypes */
    show(k, s, dtypes) {
      dataSelect.value = s.data;
      inputsBox.replaceChildren();
      if (!k.inputs.length) inputsBox.appendChild(el("p", "muted", "This kernel takes no inputs (it creates its arrays)."));
      k.inputs.forEach((/** @type {any} */ meta, /** @type {number} */ i) => {
        const v = s.inputs[i];
        const sel = h("select", { part: `in-${i}-dtype`, "aria-label": `${meta.name} dtype` });
        setOptions(sel, dtypes.includes(v.dtype) ? dtypes : [...dtypes, v.dtype]);
        sel.value = v.dtype;
        inputsBox.appendChild(h("div", { class: "kernel-input" }, h("span", { class: "input-name" }, meta.name),
          h("div", { class: "row" }, field("Shape", v.shape, `in-${i}-shape`, `${meta.name} shape`),
            field("PartitionSpec", v.spec, `in-${i}-spec`, `${meta.name} PartitionSpec`), labelled("dtype", sel))));
      });
      paramsSet.hidden = !k.params.length;
      paramsBox.replaceChildren(...k.params.map((/** @type {any} */ p) => field(`${p.name} — ${p.doc}`, s.params[p.name] ?? p.default, `param-${p.name}`, p.name)));
      outsSet.hidden = !k.outputs;
      outsBox.replaceChildren(...(k.outputs || []).map((/** @type {string} */ name, /** @type {number} */ i) => {
        const l = field(`${name}`, s.outs[i] || "", `out-${i}`, `${name} out spec`);
        /** @type {HTMLInputElement} */ (l.querySelector("input")).placeholder = "JAX decides";
        return l;
      }));
    },
    /** The fields into `s` (kernel `k`'s inputs, parameters and outputs). @param {any} k @param {import("../model/kernel_run.js").KernelState} s */
    read(k, s) {
      s.data = dataSelect.value;
      if (!k) return;
      s.inputs = k.inputs.map((/** @type {any} */ _, /** @type {number} */ i) => ({ shape: value(`in-${i}-shape`).trim(), spec: value(`in-${i}-spec`), dtype: value(`in-${i}-dtype`) }));
      s.params = Object.fromEntries(k.params.map((/** @type {any} */ p) => [p.name, value(`param-${p.name}`).trim()]));
      s.outs = (k.outputs || []).map((/** @type {string} */ _, /** @type {number} */ i) => value(`out-${i}`).trim());
    },
  };
}

/**
 * The run form: the kernel, the device set and mesh (mounted when the catalogs are in), the arrays' fields,
 * Run and Catalog defaults, and what stopped a run beside the field at fault.
 * @param {HTMLElement} parent
 */
function mountRunForm(parent) {
  const pickers = h("div", { part: "pickers" });
  const runButton = h("button", { type: "submit", class: "primary", part: "run" }, "Run");
  const resetButton = h("button", { type: "button", part: "reset" }, "Catalog defaults");
  const runError = errorBox("run-error"); // beside Run: what stopped the run, and what to change
  const form = h("form", { class: "run-form", part: "run-form", novalidate: true });
  const kernel = mountKernelCard(form);
  form.append(pickers);
  const arrays = mountArrayFields(form);
  form.append(h("div", { class: "row actions" }, runButton, resetButton), runError);
  parent.append(h("aside", { class: "controls", "aria-label": "Kernel controls" }, form));
  /** @type {ReturnType<typeof devicePicker> | null} */
  let devices = null;
  /** @type {ReturnType<typeof meshPicker> | null} */
  let mesh = null;
  return {
    form, kernel, resetButton,
    /** The device and mesh pickers, once the platforms are known. @param {any} platforms */
    pickers(platforms) {
      devices = devicePicker(pickers, platforms, {
        kinds: ["cpu", "tpu", "gpu", "local"],
        note: "— runs on as many CPU devices as the mesh has, ids mapped back",
      });
      mesh = meshPicker(pickers, {
        types: [["auto", "Auto (the compiler decides)"], ["explicit", "Explicit (jax.make_mesh's default)"]],
      });
    },
    /** @param {import("../model/kernel_run.js").KernelState} s @param {any} k @param {string[]} dtypes */
    show(s, k, dtypes) {
      kernel.show(k);
      devices?.set(s);
      mesh?.set(s);
      arrays.show(k, s, dtypes);
    },
    /** @param {import("../model/kernel_run.js").KernelState} s @param {(name: string) => any} kernelOf */
    read(s, kernelOf) {
      s.kernel = kernel.select.value;
      if (devices) Object.assign(s, devices.value());
      if (mesh) {
        const { mesh: shape, axes, order, types } = mesh.value();
        Object.assign(s, { mesh: shape, axes, order, types });
      }
      arrays.read(kernelOf(s.kernel), s);
    },
    /**
     * Shows what went wrong (null clears): beside the field at fault (an input's shape, spec or dtype,
     * an output spec, the mesh), the field marked invalid; the explanation itself under Run.
     * @param {unknown} err
     * @param {{input?: number, output?: number, field?: string, source?: string, note?: string}} [where] note:
     *   what the line beside the field says (default: the error's message)
     */
    fail(err, where = {}) {
      for (const box of form.querySelectorAll("[aria-invalid]")) box.removeAttribute("aria-invalid");
      for (const note of form.querySelectorAll(".field-error")) note.remove();
      showError(runError, err, { hintLabel: "What to change: ", source: where.source });
      if (!err) return;
      const e = errorFields(err);
      const at = where.field || fieldOf(e);
      /** @type {HTMLElement | null} */
      let control = null;
      if (where.input !== undefined) control = form.querySelector(`[data-part="in-${where.input}-${at === "shape" || at === "dtype" ? at : "spec"}"]`);
      else if (where.output !== undefined) control = form.querySelector(`[data-part="out-${where.output}"]`);
      else if (at === "mesh") control = mesh?.shape || null;
      else if (at === "types") control = mesh?.types || null;
      else if (at === "devices") control = devices?.first || null;
      if (!control) return;
      control.setAttribute("aria-invalid", "true");
      // a short line under the field itself, so the place to change is where the eye lands
      const row = control.closest(".row") || control.closest("label") || control;
      row.after(h("p", { class: "field-error", role: "note" }, `${e.code}: ${where.note ?? e.message}`));
    },
  };
}

/** One card per array (name, spec, typeof, facts, values, its grid) in `container`. @param {HTMLElement} container @param {any[]} arrays @param {boolean} output @param {boolean} dark */
function renderArrays(container, arrays, output, dark) {
  container.replaceChildren();
  for (const a of arrays) {
    const facts = arrayFacts(a);
    if (output) facts.push("max_abs_error" in a ? `max |error| ${errorText(a)}` : "compiled, not run: no values");
    const grid = h("div", { class: "grid-wrap kernel-grid" });
    const values = output ? valuesText(a) : null;
    container.appendChild(h("section", { class: "array-card" },
      h("h3", { class: "array-head" }, h("span", { class: "array-name" }, a.name), " ", h("code", {}, a.spec), " ", h("code", { class: "typeof" }, a.typeof)),
      h("p", { class: "muted array-facts" }, facts.join(" · ")),
      values === null ? null : h("p", { class: "array-values", part: "values" }, h("span", { class: "muted" }, "values "), h("code", {}, values)),
      grid));
    layoutGrid(grid, Layout.fromApi(a), { dark, maxHeight: 420 });
  }
}

/** The card at the top of the results: the run's summary and its roofline. @param {HTMLElement} parent */
function mountSummary(parent) {
  const summary = h("div", { class: "summary", part: "summary" });
  const roofline = h("div", { part: "roofline" });
  parent.append(summary, roofline);
  return {
    /** @param {any} r */
    render(r) {
      const m = r.mesh;
      const t = r.timing;
      summary.replaceChildren(
        defList([
          ["kernel", `${r.title} (${r.kernel})`],
          ["mesh", `${meshAxes(m)} ${m.axis_types.join("/")} over ${r.devices_key}`],
          ["device ids", r.program.device_assignment.length <= 64 ? JSON.stringify(m.device_ids) : "(see the mesh under Collectives)"],
          ["ran on", r.executed_on],
          ...(r.compile_only ? [["compiled, not run", COMPILE_ONLY]] : []),
          ["compile", `${fmtMs(t.lower_ms + t.compile_ms)} (lower ${fmtMs(t.lower_ms)}, XLA ${fmtMs(t.compile_ms)})`],
          ["run", r.compile_only ? "not run" : fmtMs(t.run_ms)],
          ["max |error|", r.compile_only ? "none: nothing ran"
            : `${r.outputs.length === 1 ? errorText(r.outputs[0]) : fmtErr(r.max_abs_error)} vs ${r.reference}`],
          ...(r.figures_from ? [["figures from", r.figures_from.description]] : []),
          ["memory / device", memoryText(r.program)],
          ["cost / device", workText(r.program)],
          ["collectives", r.collectives.length ? r.collectives.map((/** @type {any} */ c) => c.op).join(", ") : "none"],
        ]),
      );
      rooflinePanel(roofline, r.roofline, "Roofline");
    },
  };
}

/**
 * The card "Collectives": the run's collectives section, the chosen one's why in its slot.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {{topology: (r: any, c: any) => string | null, load: (fix: any) => void}} opts
 */
function mountCollectives(parent, host, opts) {
  const count = h("span", { class: "muted", part: "collective-count" });
  const box = h("div", { class: "collectives-section" });
  parent.append(h("h2", {}, "Collectives ", count),
    h("p", { class: "muted" }, "From the compiled HLO: one row per collective XLA inserted. Groups are device ids; click a row to see its groups on the mesh."),
    box);
  /** The collective chosen (undefined: none yet, the section shows the costliest). @type {number | undefined} */
  let selected;
  return {
    /** @param {any} r */
    render(r) {
      count.textContent = r.collectives.length ? `(${r.collectives.length})` : "(none: every device works on its own blocks)";
      collectivesSection(box, r.collectives, {
        mesh: r.mesh,
        dark: host.dark(),
        selected,
        total: true,
        topology: (c) => opts.topology(r, c),
        onSelect: (c, i, slot) => {
          selected = i;
          drawWhy(slot, c, { load: opts.load });
        },
      });
    },
  };
}

/** The card "Inputs as placed": folded when there are many (a model's parameters and optimizer state). @param {HTMLElement} parent @param {import("../hosts/host.js").Host} host */
function mountPlaced(parent, host) {
  const count = h("span", { class: "muted", part: "input-count" });
  const placed = h("div", { class: "kernel-arrays", part: "inputs-placed" });
  const box = h("details", { class: "inputs-box", part: "inputs-box", open: true }, h("summary", {}, "Inputs as placed ", count), placed);
  parent.append(box);
  return {
    /** @param {any} r */
    render(r) {
      renderArrays(placed, r.inputs, false, host.dark());
      count.textContent = `(${r.inputs.length})`;
      box.open = r.inputs.length <= 3; // a few stay in view
    },
  };
}

/** The cards of the program's text: the lowered StableHLO and the compiled HLO. @param {HTMLElement} parent */
function mountProgramText(parent) {
  const stablehlo = h("pre", { class: "code", part: "stablehlo" });
  const hlo = h("pre", { class: "code", part: "hlo" });
  parent.append(
    h("details", { part: "stablehlo-box" }, h("summary", {}, "Lowered StableHLO (with sdy shardings)"), stablehlo),
    h("details", { part: "hlo-box" }, h("summary", {}, "Compiled HLO (partitioned, per device)"), hlo));
  return {
    /** @param {any} r */
    render(r) {
      stablehlo.textContent = r.stablehlo + (r.stablehlo_truncated ? CUT : "");
      hlo.textContent = r.hlo + (r.hlo_truncated ? CUT : "");
    },
  };
}

/** The card "TPU (compile-only)": shown for tpu: sets when the server has libtpu. @param {HTMLElement} parent */
function mountTpu(parent) {
  const topology = h("span", { class: "muted", part: "tpu-topology" });
  const summary = h("div", { class: "summary", part: "tpu-summary" });
  const collectives = h("div", { class: "table-wrap", part: "tpu-collectives" });
  const total = h("div", { part: "tpu-total" });
  const roofline = h("div", { part: "tpu-roofline" });
  const hlo = h("pre", { class: "code", part: "tpu-hlo" });
  const box = h("section", { part: "tpu-box", hidden: true },
    h("h2", {}, "TPU (compile-only) ", topology),
    h("p", { class: "muted" }, "With the optional tpu extra, a tpu: device set's kernel is also compiled, never run, for libtpu's real topology, with the same device ids at the same mesh positions."),
    summary, collectives, total, roofline,
    h("details", {}, h("summary", {}, "Compiled TPU HLO (partitioned, per device)"), hlo));
  parent.append(box);
  return {
    /** @param {any} r */
    render(r) {
      const tpu = r.tpu;
      box.hidden = !tpu || (tpu.skipped !== null && tpu.skipped !== undefined);
      if (box.hidden) return;
      topology.textContent = tpu.topology ? `(${tpu.topology}${tpu.device_kind ? `, ${tpu.device_kind}` : ""})` : "";
      for (const b of [collectives, total, roofline]) b.replaceChildren();
      if (tpu.error) {
        summary.replaceChildren(el("p", "error", `${tpu.error.message}${tpu.error.hint ? ` — ${tpu.error.hint}` : ""}`));
        hlo.textContent = "";
        return;
      }
      summary.replaceChildren(
        defList([
          ["compile", fmtMs(1e3 * compileSeconds(tpu.program))],
          ["memory / device", memoryText(tpu.program)],
          ["cost / device", workText(tpu.program, { flopsOnly: true })],
          ["collectives", tpu.collectives.length ? tpu.collectives.map((/** @type {any} */ c) => c.op).join(", ") : "none"],
        ]),
      );
      // the TPU program's collectives (ICI) and, for multi-slice sets, its cross-slice steps (DCN)
      const steps = [...tpu.collectives, ...(tpu.dcn || []).map((/** @type {any} */ d) => ({ ...d, shape: "cross-slice step (DCN)" }))];
      if (steps.length) {
        collectivesTable(collectives, steps);
        estimateTotal(total, steps);
      }
      rooflinePanel(roofline, tpu.roofline, "TPU roofline");
      hlo.textContent = tpu.hlo + (tpu.hlo_truncated ? CUT : "");
    },
  };
}

/**
 * The results, card by card, in reading order; `render(r)` draws a run's result in every card.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {{topology: (r: any, c: any) => string | null, load: (fix: any) => void}} opts
 */
function mountResults(parent, host, opts) {
  const results = h("div", { class: "kernel-results", part: "results", hidden: true });
  parent.append(results);
  const outputs = h("div", { class: "kernel-arrays", part: "outputs" });
  const cards = [mountSummary(results)];
  // what the run wastes first (as on a plan's page), every value's sharding after the collectives
  const findings = h("section", { class: "view kernel-findings", part: "findings-section", "aria-label": "Findings", hidden: true });
  const values = h("section", { class: "view kernel-values", part: "values-section", "aria-label": "Values", hidden: true });
  results.append(findings, h("h2", {}, "Outputs"), outputs);
  cards.push(
    { render: (/** @type {any} */ r) => findingsSection(findings, r) },
    { render: (/** @type {any} */ r) => renderArrays(outputs, r.outputs, true, host.dark()) },
    mountCollectives(results, host, opts),
  );
  results.append(values);
  cards.push({ render: (/** @type {any} */ r) => valuesSection(values, r) }, mountPlaced(results, host));
  // memory over program order, as on a plan's page (issue 33: "for any plan, kernel run or capture")
  const timeline = h("section", { class: "view kernel-timeline", part: "memory-timeline", "aria-label": "Memory over program order", hidden: true });
  results.append(timeline);
  cards.push({ render: (/** @type {any} */ r) => memoryTimeline(timeline, r.memory_timeline, { dark: host.dark() }) });
  const origins = mountOrigins(results);
  const log = mountCompilerLog(results);
  cards.push(
    { render: (/** @type {any} */ r) => origins.render(r.program, r.outputs, r.origins_note) },
    { render: (/** @type {any} */ r) => log.render(r.program) },
    mountProgramText(results),
    mountTpu(results),
  );
  return {
    results,
    /** @param {any} r */
    render(r) {
      results.hidden = false;
      results.classList.remove("stale");
      for (const card of cards) card.render(r);
    },
  };
}

/**
 * The topology view for a run's collective `c`, handed the run's complete state: its device set
 * and slices, the mesh (shape, axis names, order, axis types), an output's layout to colour by (a spec
 * valid on that mesh, from JAX itself), and the collective's groups (model/collective.js onTopology).
 * @param {import("../hosts/host.js").Host} host
 * @param {import("../model/kernel_run.js").KernelState} ran the state the run was made with
 * @param {any} r the run's result
 * @param {any} c one of its collectives
 */
function topologyLink(host, ran, r, c) {
  // colour by the first output split over some mesh axis (the first output when none is)
  const out = r.outputs.find((/** @type {any} */ o) => o.dims.some((/** @type {any} */ d) => d.axes.length)) || r.outputs[0];
  const s = {
    ...DEFAULTS,
    devices: ran.devices,
    slices: ran.slices,
    mesh: r.mesh.shape.join("x"),
    axes: r.mesh.axis_names.join(","),
    order: ran.order,
    types: ran.types,
    ...(out ? { spec: out.spec, shape: out.shape.join(","), dtype: out.dtype } : { spec: "P()", shape: "" }),
  };
  return host.href?.("topology", topologyQuery(onTopology(s, c))) || null;
}

/**
 * The panel: the run form beside the results, built from the cards above; the state, the runs and the
 * wiring here.
 * @param {HTMLElement} root
 * @param {import("../hosts/host.js").Host} host
 * @param {{query: string}} initial
 */
export function mount(root, host, initial) {
  const data = host.data;
  /** @type {any[]} */
  let kernels = [];
  /** @type {string[]} */
  let dtypes = ["float32"];
  /** @type {import("../model/kernel_run.js").KernelState | null} */
  let state = null;
  /** @type {any} */
  let lastResult = null;
  /** The state of the run on screen (its devices, order and axis types, for the topology link). */
  /** @type {import("../model/kernel_run.js").KernelState | null} */
  let ranWith = null;
  let runToken = 0;
  const life = lifetime();

  root.classList.add("app");
  root.replaceChildren();
  const controls = mountRunForm(root);
  const runState = h("span", { class: "run-state", role: "status", "aria-live": "polite", part: "run-state" }, "pick a kernel and run it");
  const compareLink = h("a", { href: host.href?.("compare", "") || "", part: "compare-link" }, "Compare with…");
  compareLink.hidden = !host.href;
  const toolbar = h("div", { class: "toolbar" }, runState, h("span", { class: "spacer" }), compareLink);
  const resultsNote = h("p", { class: "stale-note", part: "results-note", hidden: true });
  const view = h("section", { class: "view", "aria-label": "Kernel results" }, toolbar, resultsNote);
  root.append(view);
  const cards = mountResults(view, host, {
    topology: (r, c) => topologyLink(host, /** @type {any} */ (ranWith), r, c),
    load: (fix) => ranWith && fix.run && tryRun(withFix(ranWith, fix.run)),
  });
  const results = cards.results;
  const fail = controls.fail;
  shareAndStatus(toolbar, host, () => {
    controlsToState();
    return state;
  }, (e) => fail(e), runState);

  const kernelOf = (/** @type {string} */ name) => kernels.find((k) => k.name === name);

  function stateToControls() {
    const k = state && kernelOf(state.kernel);
    if (state && k) controls.show(state, k, dtypes);
  }

  function controlsToState() {
    if (state) controls.read(state, kernelOf);
  }

  /** @param {boolean} replace */
  const save = (replace) => state && host.save(state, replace);

  /** @param {string} text @param {string} name */
  function setRunState(text, name) {
    runState.textContent = text;
    runState.dataset.state = name;
  }

  async function run() {
    controlsToState();
    if (!state) return;
    let req;
    try {
      req = runRequest(state, kernels);
    } catch (e) {
      fail(e, e instanceof FieldError ? e.where : {});
      return;
    }
    save(false);
    const token = ++runToken;
    fail(null);
    results.classList.add("stale");
    setRunState("queued…", "queued");
    const t0 = performance.now();
    const started = { ...state };
    const runKernel = /** @type {NonNullable<typeof data.runKernel>} */ (data.runKernel);
    try {
      const result = await runKernel(req, (text, name) => token === runToken && setRunState(text, name), () => token === runToken && !life.disposed);
      if (token !== runToken || !result) return;
      ranWith = started;
      render(result);
      const ms = performance.now() - t0;
      setRunState(`done in ${ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(1)} s`}${result.cached ? " (cached)" : ""}`, "done");
      requestAnimationFrame(() => host.bump("runs"));
    } catch (e) {
      if (token !== runToken) return;
      const { err, ...where } = blame(req, e);
      fail(err, where);
      staleResults();
      setRunState(e instanceof ApiError && e.status === 429 ? "busy: try again shortly" : "failed", "error");
      host.bump("errors");
    }
  }

  /** After a failed run: another kernel's results go; the same kernel's stay, dimmed and captioned. */
  function staleResults() {
    if (!lastResult || !state || lastResult.kernel !== state.kernel) {
      results.hidden = true;
      resultsNote.hidden = true;
      return;
    }
    results.classList.add("stale");
    resultsNote.hidden = false;
    resultsNote.textContent = `These are the results of the previous run of ${lastResult.kernel}, not of what failed beside Run.`;
  }

  /** A fix's run (components/why.js): the lab's controls set to it, run, and kept in the address. @param {import("../model/kernel_run.js").KernelState} s */
  function tryRun(s) {
    state = s;
    stateToControls();
    run();
    view.scrollIntoView({ block: "start" });
  }

  /** @param {any} r */
  function render(r) {
    lastResult = r;
    resultsNote.hidden = true;
    if (ranWith && host.href) {
      compareLink.href = host.href("compare", new URLSearchParams({ a: /** @type {string} */ (host.href("kernels", toQuery(ranWith))) }).toString());
    }
    cards.render(r);
  }

  /** @param {string} name */
  function pickKernel(name) {
    const k = kernelOf(name);
    if (!k) return;
    state = defaultsFor(k);
    stateToControls();
    save(false);
  }

  /** Opens the state a query describes, and runs it. @param {string} query @returns {boolean} whether it names a kernel */
  function open(query) {
    const s = kernelState(new URLSearchParams(query), kernels);
    if (!s) return false;
    state = s;
    stateToControls();
    run(); // an address shows its results (a cached run answers at once)
    return true;
  }

  controls.form.addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  controls.kernel.select.addEventListener("change", () => pickKernel(controls.kernel.select.value));
  controls.resetButton.addEventListener("click", () => state && pickKernel(state.kernel));
  data.examples?.().then((ex) => {
    controls.kernel.examples.replaceChildren(...ex.kernels.map((e) => exampleButton(e, () => {
      if (!open(e.query)) return;
      save(false);
      if (results.getBoundingClientRect().top > window.innerHeight) view.scrollIntoView({ block: "start" });
    })));
  }, () => {}); // the examples are a convenience: the lab works without them
  life.add(host.onTheme(() => lastResult && render(lastResult)), () => runToken++);

  /** @param {{kernels: any[], dtypes: string[]}} cat @param {any} platforms */
  function start(cat, platforms) {
    kernels = cat.kernels;
    dtypes = cat.dtypes;
    fillKernelSelect(controls.kernel.select, kernels);
    controls.pickers(platforms);
    if (open(initial.query)) save(true);
    else {
      pickKernel(kernels[0].name);
      if (state) host.save(state, true);
    }
    host.bump("ready");
  }

  const catalog = data.kernels;
  const platforms = data.platforms;
  if (catalog && platforms) {
    Promise.all([catalog(), platforms()]).then(([cat, plat]) => !life.disposed && start(cat, plat), (e) => fail(e));
  }

  return {
    update(next) {
      if (kernels.length) open(next.query);
    },
    dispose: life.dispose,
  };
}
