// "Reshard to…": what moving the array on screen to another PartitionSpec compiles to (POST /api/reshard:
// the collectives, their estimates and total, the TPU compile-only program's for tpu: sets), and a link
// that compares two targets side by side (compare.html).

import { codeInput, el, labelled } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { fmtBytes } from "../lib/format.js";
import { collectivesTable } from "./collectives.js";
import { estimateTotal, fmtSeconds, rooflinePanel } from "./estimates.js";

/**
 * The box: a target spec field, a Reshard button, and the results. `request()` gives the layout's
 * POST /api/layout body (devices, mesh, spec, shape, dtype, slices?); `reshard(body)` answers a POST
 * /api/reshard body (the panel's host); `onTarget` hears the target when a reshard is asked for (the
 * view keeps it in its URL); `address(target)` is the view's own address with that target (for the
 * comparison link).
 * @param {HTMLElement} container
 * @param {{target: string, request: () => Record<string, any>, reshard: (body: Record<string, any>) => Promise<any>,
 *   onTarget: (target: string) => void, address: (target: string) => string, onDone?: () => void}} opts
 * @returns {{run: () => Promise<void>, set: (target: string) => void, stale: () => void}}
 */
export function reshardBox(container, opts) {
  const box = el("details", "reshard-box");
  box.open = Boolean(opts.target);
  const summary = el("summary", "", "Reshard to…");
  const input = codeInput(opts.target || "P()");
  input.setAttribute("aria-label", "Reshard target spec");
  input.placeholder = "P(None, 'y')";
  const button = el("button", "", "Reshard");
  button.type = "button";
  const status = el("span", "muted reshard-status");
  status.setAttribute("role", "status");
  const form = el("div", "row reshard-form");
  form.append(labelled("Target spec", input), button, status);
  const note = el(
    "p",
    "muted",
    "Compiles jax.jit(lambda x: x, out_shardings=NamedSharding(mesh, target)) on the array placed as above, " +
      "and estimates each collective on the device set's hardware (tpu: sets are also compiled for libtpu's topology).",
  );
  const error = el("div", "error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  const results = el("div", "reshard-results");
  box.append(summary, note, form, error, results);
  container.replaceChildren(box);
  let token = 0;

  async function run() {
    const target = input.value.trim();
    if (!target) return;
    opts.onTarget(target);
    const t = ++token;
    showError(error, null);
    results.classList.add("stale");
    status.textContent = "compiling…";
    try {
      const req = opts.request();
      const body = { devices: req.devices, mesh: req.mesh, shape: req.shape, dtype: req.dtype, from: req.spec, to: target };
      if (req.slices) /** @type {any} */ (body).slices = req.slices;
      const r = await opts.reshard(body);
      if (t !== token) return;
      render(r, target);
      status.textContent = r.cached ? "done (cached)" : "done";
    } catch (e) {
      if (t !== token) return;
      status.textContent = "failed";
      showError(error, e, { hintLabel: "What to change: " });
    } finally {
      if (t === token) results.classList.remove("stale");
      opts.onDone?.();
    }
  }

  /** @param {any} r @param {string} target */
  function render(r, target) {
    results.replaceChildren();
    const c = r.communication;
    const line = el("p", "reshard-line");
    line.append(
      el("code", "", r.from),
      " → ",
      el("code", "", r.to),
      `: ${c.count ? `${c.count} collective${c.count === 1 ? "" : "s"}, ${fmtBytes(c.bytes)} of results per device, ${c.seconds === null ? "no estimate (no hardware figures)" : `bound ${fmtSeconds(c.seconds)} · expected ${fmtSeconds(c.expected_seconds ?? c.seconds)}`}` : "no collectives (nothing moves)"}`,
      ` · ${fmtBytes(r.from_bytes_per_device)} → ${fmtBytes(r.to_bytes_per_device)} per device`,
    );
    results.appendChild(line);
    if (r.compile_only) {
      results.appendChild(el("p", "reshard-compile-only",
        "Compiled, not run: the move was compiled for the hardware at its real size; nothing was allocated or moved."));
    }
    if (c.program) results.appendChild(el("p", "muted reshard-program", `program: ${c.program}`));
    if (r.collectives.length) {
      const table = el("div", "table-wrap");
      collectivesTable(table, r.collectives);
      const total = el("div");
      estimateTotal(total, r.collectives);
      results.append(el("h3", "", `Collectives (${r.executed_on})`), table, total);
    }
    if (r.program.compiler_log.length) results.appendChild(el("p", "muted", `XLA: ${r.program.compiler_log[0]}`));
    const tpu = r.tpu;
    if (tpu && tpu.collectives && !r.compile_only) { // compile-only: the collectives above are the TPU program's
      const steps = [...tpu.collectives, ...(tpu.dcn || []).map((/** @type {any} */ d) => ({ ...d, shape: "cross-slice step (DCN)" }))];
      results.appendChild(el("h3", "", `TPU compile-only (${tpu.topology})`));
      if (steps.length) {
        const table = el("div", "table-wrap");
        collectivesTable(table, steps);
        const total = el("div");
        estimateTotal(total, steps);
        results.append(table, total);
      } else results.appendChild(el("p", "muted", "no collectives in the TPU program"));
    } else if (tpu && tpu.error) {
      results.appendChild(el("p", "error", `TPU compile-only: ${tpu.error.message}`));
    }
    // one roofline: the headline program's (the TPU compile's on a tpu: set compiled for libtpu)
    const roof = el("div");
    rooflinePanel(roof, r.roofline, tpu && tpu.collectives ? "TPU roofline" : "Roofline");
    results.appendChild(roof);
    const other = target.includes("None") ? "P()" : "P(None)";
    const link = el("a", "", "Compare with another target");
    link.href = `/compare.html?a=${encodeURIComponent(opts.address(target))}&b=${encodeURIComponent(opts.address(other))}`;
    results.appendChild(el("p")).appendChild(link);
  }

  button.addEventListener("click", () => run());
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      run();
    }
  });
  return {
    run,
    set: (target) => {
      input.value = target || "P()";
      box.open = Boolean(target);
    },
    stale: () => {
      if (results.childElementCount) {
        results.classList.add("stale");
        status.textContent = "the layout changed: reshard again";
      }
    },
  };
}
