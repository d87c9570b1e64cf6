// panels/: one module per view, each a panel — mount(root, host, state) -> {update, dispose} — that
// builds its own DOM, keeps its state in its closure and asks its host for everything else
// (hosts/host.js). This one: the layout explorer — the PartitionSpec box first (specs, pasted
// NamedSharding / SingleDeviceSharding / Mesh reprs, logical names with Flax rules), the tutorials' own
// examples beside it, the device and mesh pickers (every mesh constructor the API has), the grid and
// the mesh table highlighting each other, the summary, downloads, "Reshard to…" and the share link.

import { ApiError, newestWins } from "../lib/api.js";
import { defList, download, h, labelled, setOptions } from "../lib/dom.js";
import { errorFields, showError } from "../lib/errors.js";
import { compactIds, meshAxes } from "../lib/format.js";
import { hideCard } from "../lib/hovercard.js";
import { layoutGrid } from "../components/grid.js";
import { gridDims } from "../components/grid/geometry.js";
import { meshTable } from "../components/mesh_table.js";
import { layoutControls } from "../components/pickers.js";
import { reshardBox } from "../components/reshard.js";
import { layoutFacts } from "../model/facts.js";
import { Layout } from "../model/layout.js";
import { parsePasted, straightQuotes } from "../model/paste.js";
import { DEFAULTS, ORDERS, deviceCount, deviceSetsFor, fromQuery, layoutRequest, toQuery } from "../model/state.js";
import { errorBox, exampleButton, fieldOf, fixButton, lifetime, settledError, shareAndStatus } from "./common.js";
import { DTYPES } from "../lib/vocabulary.js";

export const VIEW = "layout";
export { fromQuery, toQuery };

/** Layouts kept to show again without a round trip, bounded by their shards in all. */
const FETCHED_SHARDS = 4 * 6144;

/** "0,2" -> [0, 2]; null unless two non-negative integers. @param {string} text */
function zeroBased(text) {
  const dims = text.split(",").map((d) => (/^\d{1,2}$/.test(d.trim()) ? Number(d) : NaN));
  return dims.length === 2 && dims.every(Number.isInteger) ? dims : null;
}

/** What the files are called: the spec and the mesh, in characters any file system takes. @param {Layout | null} l */
function fileName(l) {
  const base = l ? `${l.spec}-${l.mesh.shape.join("x")}-${l.shape.join("x")}` : "layout";
  return `shardscope-${base.replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/_+/g, "_").slice(0, 80)}`;
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
  const fixed = host.fixed;
  /** @type {any} */
  let catalog = null;
  /** @type {Layout | null} */
  let layout = null;
  /** @type {import("../components/grid.js").GridView | null} */
  let grid = null;
  /** @type {import("../components/mesh_table.js").MeshTableView | null} */
  let mesh = null;
  let meshKey = "";
  /** @type {Set<number> | null} */
  let selected = null;
  let keystrokeAt = 0;
  let typedAt = 0;
  /** The mesh a paste set (its shape): a bad_mesh about it must not propose other shapes. */
  let pastedMesh = "";
  /** @type {ReturnType<typeof layoutControls> | null} */
  let controls = null;
  /** @type {ReturnType<typeof reshardBox> | null} */
  let reshard = null;
  let reshardPending = Boolean(state.reshard);
  const life = lifetime();
  /** @type {Map<string, Layout>} newest last */
  const fetched = new Map();

  // ---------------------------------------------------------------- DOM
  root.classList.add("app", "layout-app");
  const withPickers = Boolean(data.platforms);
  root.classList.toggle("no-controls", !withPickers);
  const specBox = h("input", { type: "text", part: "spec", spellcheck: "false", autocomplete: "off", autocapitalize: "off", "aria-label": "PartitionSpec",
    "aria-description": "paste x.sharding as JAX prints it" });
  const shapeBox = h("input", { type: "text", part: "shape", spellcheck: "false", autocomplete: "off" });
  const dtypeBox = h("select", { part: "dtype" });
  setOptions(dtypeBox, DTYPES);
  for (const [name, box] of /** @type {[string, HTMLInputElement | HTMLSelectElement][]} */ ([["spec", specBox], ["shape", shapeBox], ["dtype", dtypeBox]])) {
    if (fixed.has(name)) box.toggleAttribute(box instanceof HTMLSelectElement ? "disabled" : "readonly", true);
  }
  const note = h("p", { class: "spec-note", part: "spec-note", "aria-live": "polite", hidden: true });
  const rulesBox = h("textarea", { rows: 2, part: "rules", spellcheck: "false", placeholder: "('batch', 'data'), ('hidden', 'model'), ('embed', None)" });
  const rulesDetails = h("details", { class: "rules-box", part: "rules-box" },
    h("summary", {}, "Logical axis names (Flax rules)"),
    labelled("Logical → mesh axis rules, in order of precedence", rulesBox),
    h("p", { class: "muted" }, "With rules, the PartitionSpec box names logical axes, e.g. ", h("code", {}, "('embed', 'hidden')"),
      ", laid out as ", h("code", {}, "flax.linen.logical_to_mesh_axes"), " maps them to mesh axes."));
  rulesDetails.hidden = fixed.has("rules");
  const examples = h("nav", { class: "examples", part: "examples", "aria-label": "Examples" });
  examples.hidden = !withPickers;
  const specBar = h("section", { class: "spec-bar", "aria-label": "The array to lay out" },
    h("div", { class: "spec-row" },
      h("div", { class: "spec-field" },
        h("div", { class: "spec-label" }, h("span", { class: "spec-title" }, "PartitionSpec"),
          h("span", { class: "key-hint", part: "spec-hint" }, host.kind === "page" ? h("span", { class: "key" }, "press ", h("kbd", {}, "/"), " to edit; ") : null,
            "paste ", h("code", {}, "x.sharding"), " as JAX prints it")),
        specBox),
      h("label", { class: "shape-field" }, "Array shape ", shapeBox),
      h("label", { class: "dtype-field" }, "dtype ", dtypeBox)),
    h("div", { class: "spec-extras" }, examples, rulesDetails), note);
  const pickers = h("div", { part: "pickers" });
  const pickersError = errorBox("pickers-error");
  const aside = h("aside", { class: "controls", "aria-label": "Devices and mesh", part: "controls" }, pickersError, pickers);
  aside.hidden = !withPickers;
  const dimsBox = h("select", { part: "grid-dims" });
  const dimsField = h("label", { class: "inline-field", part: "grid-dims-field", hidden: true }, "Grid dimensions ", dimsBox);
  const button = (/** @type {string} */ text, /** @type {string} */ part, /** @type {string | null} */ label, /** @type {() => void} */ act) => {
    const b = h("button", { type: "button", part, "aria-label": label }, text);
    b.addEventListener("click", act);
    return b;
  };
  const toolbar = h("div", { class: "toolbar" },
    dimsField,
    button("+", "zoom-in", "Zoom in", () => grid?.zoomBy(0.8)),
    button("−", "zoom-out", "Zoom out", () => grid?.zoomBy(1.25)),
    button("Reset view", "zoom-reset", null, () => grid?.resetView()),
    h("span", { class: "spacer" }),
    button("Download SVG", "download-svg", null, () => grid && download(new Blob([grid.svgText()], { type: "image/svg+xml" }), `${fileName(layout)}.svg`)),
    button("Download PNG", "download-png", null, () => grid?.pngBlob(2).then((blob) => download(blob, `${fileName(layout)}.png`), (e) => explain(e))));
  const staleNote = h("p", { class: "stale-note", part: "stale-note", hidden: true });
  const specError = errorBox("spec-error", "spec-error");
  const pointer = h("p", { class: "error error-pointer", part: "error-pointer", hidden: true });
  const gridBox = h("div", { class: "grid-wrap", part: "grid" });
  const selection = h("span", { part: "selection" });
  const clear = h("button", { type: "button", class: "link", part: "clear-selection" }, "clear");
  const summary = h("div", { class: "summary", part: "summary" });
  const meshBox = h("div", { class: "mesh-wrap", part: "mesh" });
  const reshardHolder = h("div", { part: "reshard" });
  const results = h("div", { class: "results", part: "results" },
    // over the top of the stale picture: saying so moves nothing
    h("div", { class: "float-note" }, specError, staleNote), pointer,
    h("div", { class: "layout-pair", part: "layout-pair" },
      h("div", { class: "layout-main" }, gridBox,
        h("p", { class: "muted grid-help" }, "Scroll or press + and − to zoom, drag to pan; hover a tile, or Tab to the grid and use the arrow keys, for its index ranges and devices; click (or Enter) to highlight, Escape to clear. ",
          clear, " ", selection)),
      h("div", { class: "layout-side" }, summary, h("h2", {}, "Device mesh"), meshBox, reshardHolder)));
  const view = h("section", { class: "view", "aria-label": "Layout" }, toolbar, results);
  root.replaceChildren(specBar, aside, view);
  const status = shareAndStatus(toolbar, host, () => ({ ...state }), (e) => explain(e));

  // ---------------------------------------------------------------- controls <-> state

  /** The array's own fields (the pickers hold the device set and the mesh). */
  const fields = /** @type {[keyof import("../model/state.js").State, HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement][]} */ (
    [["spec", specBox], ["shape", shapeBox], ["dtype", dtypeBox], ["rules", rulesBox]]);

  function stateToControls() {
    controls?.write(state);
    for (const [key, box] of fields) box.value = String(state[key]);
    if (state.rules) rulesDetails.open = true;
  }

  function controlsToState() {
    controls?.read(state);
    for (const [key, box] of fields) /** @type {any} */ (state)[key] = box.value;
  }

  /** The choice of two grid dimensions, shown for rank > 2. @param {number} rank */
  function fillGridDims(rank) {
    dimsField.hidden = rank <= 2;
    if (rank <= 2) return;
    const pairs = [];
    for (let i = 0; i < rank; i++) for (let j = i + 1; j < rank; j++) pairs.push(`${i},${j}`);
    setOptions(dimsBox, pairs, pairs.map((p) => `dims ${p.replace(",", " × ")}`));
    dimsBox.value = gridDims(rank, zeroBased(state.dims)).join(",");
  }

  /** @param {boolean} replace */
  const save = (replace) => host.save({ ...state }, replace);

  /** A line under the spec box saying what was done to what was pasted (empty: none). @param {...(string | Node)} parts */
  function say(...parts) {
    note.replaceChildren(...parts);
    note.hidden = !parts.length;
  }

  // ---------------------------------------------------------------- errors

  const spoken = settledError(specError, () => typedAt, (err) => {
    markStale(true);
    explainMore(errorFields(err));
    host.bump("errorShown");
  });

  /**
   * Shows (or, with null, clears) what is wrong, beside the control that fixes it: errors about the
   * devices and the mesh beside their pickers (the floating box over the picture points there), the
   * rest over the last good picture, which stays, dimmed with the summary and the mesh table, at once.
   * The explanation shows (and the alert speaks) only once typing has paused.
   * @param {unknown} err
   */
  function explain(err) {
    for (const box of [specBox, shapeBox, dtypeBox, rulesBox]) box.removeAttribute("aria-invalid");
    aside.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
    if (!err) {
      markStale(false);
      spoken.show(null);
      showError(pickersError, null);
      pointer.hidden = true;
      return;
    }
    const e = errorFields(err);
    const field = fieldOf(e);
    const box = { spec: specBox, shape: shapeBox, dtype: dtypeBox, rules: rulesBox }[/** @type {string} */ (field)];
    box?.setAttribute("aria-invalid", "true");
    if (withPickers && (field === "mesh" || field === "devices" || field === "types")) {
      controls?.mark(field);
      spoken.show(null);
      markStale(true);
      // a mesh pasted from JAX's print is what the user has: a hint proposing other shapes would undo it
      const undoes = e.code === "bad_mesh" && pastedMesh === state.mesh;
      showError(pickersError, undoes ? new ApiError(422, { ...e, hint: undefined }) : err);
      explainMore(e, pickersError);
      const where = field === "devices" ? "Devices" : "Mesh";
      pointer.replaceChildren(`${e.code}: the fix is beside the ${where} controls. `);
      fixButton(pointer, "Show me", () => {
        aside.scrollIntoView({ block: "start" });
        /** @type {HTMLElement | null} */ (aside.querySelector("[aria-invalid]"))?.focus();
      }).classList.add("link");
      pointer.hidden = false;
      host.bump("errorShown");
      return;
    }
    showError(pickersError, null);
    pointer.hidden = true;
    spoken.show(err, state.spec);
  }

  /** Dims the picture, the summary and the mesh table, which are the last valid layout's. @param {boolean} on */
  function markStale(on) {
    const stale = on && Boolean(layout);
    if (results.classList.contains("stale") === stale) return;
    results.classList.toggle("stale", stale);
    staleNote.hidden = !stale;
    if (stale && layout) staleNote.textContent = `Still showing the last valid layout: ${layout.spec} on ${JSON.stringify(layout.shape)}.`;
  }

  /** @param {Partial<import("../model/state.js").State>} change */
  const apply = (change) => {
    Object.assign(state, change);
    commit();
  };

  /**
   * One-click ways out under the explanation: the hybrid mesh JAX's message asks for, split physical
   * axes, a device set the mesh fits, Explicit axes for unreduced specs, logical rules for names no mesh has.
   * @param {ReturnType<typeof errorFields> & Record<string, any>} e
   * @param {HTMLElement} [box]
   */
  function explainMore(e, box = specError) {
    // a host whose mesh is the array's own (the widget's) cannot take these fixes
    const fix = fixed.has("mesh") ? null : e.suggest;
    if (e.code === "mesh_unplaceable" && fix && fix.order === "hybrid") {
      fixButton(box, `Use a hybrid ICI × DCN mesh with DCN shape ${fix.dcn_shape.join("x")}`, () => apply({ order: "hybrid", dcn: fix.dcn_shape.join("x") }));
    }
    if (e.code === "mesh_unplaceable" && fix && fix.allow_split_physical_axes) {
      fixButton(box, "Allow split physical axes", () => apply({ split: "1", order: state.order === "hybrid" ? "hybrid" : "make_mesh" }));
    }
    if (e.code === "mesh_unplaceable" && !fixed.has("order")) fixButton(box, "Use iota (a plain reshape)", () => apply({ order: "iota" }));
    const meshSize = (/** @type {string} */ m) => m.split("x").reduce((a, b) => a * (Number(b) || 0), 1);
    if (e.code === "bad_mesh" && catalog && !fixed.has("devices") && deviceCount(state.devices, state.slices, catalog) !== meshSize(state.mesh)) {
      const n = meshSize(state.mesh);
      for (const set of deviceSetsFor(n, state.devices, catalog)) fixButton(box, `Use ${set} (${n} devices)`, () => apply({ devices: set, slices: 1 }));
    }
    if (fieldOf(e) === "types" && state.types !== "explicit" && !fixed.has("types")) {
      box.appendChild(h("p", {}, "Unreduced (and reduced) axes must be Explicit: the mesh's Axis types say Auto."));
      fixButton(box, "Make the mesh axes Explicit", () => apply({ types: "explicit" }));
    }
    if (e.code === "unknown_axis" && !state.rules.trim() && !rulesDetails.hidden) {
      box.appendChild(h("p", {}, `Is ${JSON.stringify(e.axis ?? "")} a logical axis name (Flax's nn.with_logical_partitioning)? Give the logical → mesh rules and the spec is laid out as Flax would.`));
      fixButton(box, "Add logical → mesh rules", () => {
        rulesDetails.open = true;
        rulesBox.focus();
      });
    }
  }

  // ---------------------------------------------------------------- rendering

  /** @param {Layout} l */
  function renderSummary(l) {
    const spec = l.spec + (state.rules.trim() ? `  (logical ${state.spec.trim()} under the rules)` : "");
    summary.replaceChildren(defList(layoutFacts(l, { spec, single: state.order === "single" })));
  }

  /** The mesh table: rebuilt for a new mesh, recoloured when only the layout changed. @param {Layout} l @param {boolean} dark */
  function renderMesh(l, dark) {
    const m = l.mesh;
    const key = `${l.devicesKey}|${m.shape}|${m.axis_names.join("\u0000")}|${m.axis_types}|${l.meshIds.join(",")}|${dark}`;
    const colour = (/** @type {number} */ id) => l.colourOf(id, dark);
    const title = (/** @type {number} */ id, /** @type {number[]} */ at) => `device ${id}: ${l.whereIs(id)}; mesh index (${at.join(", ")})`;
    if (mesh && key === meshKey) {
      mesh.recolour(colour, title);
      mesh.highlight(selected);
      return;
    }
    meshKey = key;
    mesh = null;
    const draw = (/** @type {HTMLElement} */ into) => {
      mesh = meshTable(into, m, {
        caption: [`Mesh(${m.axis_names.map((n, i) => `'${n}': ${m.shape[i]}`).join(", ")}) — axis types ${m.axis_types.join(", ")}`],
        colour,
        title,
        onDeviceClick: (id) => select(new Set([id])),
      });
      mesh.highlight(selected);
    };
    const fold = host.foldMeshAbove;
    if (!fold || l.shards.length <= fold) {
      draw(meshBox);
      return;
    }
    // a mesh of thousands of devices is a table of thousands of cells: built when opened (the grid
    // and its hover cards say the same per tile)
    const holder = h("div");
    const details = h("details", { class: "mesh-details", part: "mesh-details" }, h("summary", {}, `Mesh table: ${meshAxes(m)} (${l.shards.length} devices)`), holder);
    details.addEventListener("toggle", () => details.open && !holder.firstChild && draw(holder));
    meshBox.replaceChildren(details);
  }

  /** @param {Layout} l */
  function render(l) {
    layout = l;
    selected = null;
    // the grid first: it measures its container, which is cheapest before anything else changed
    const rank3 = l.rank > 2;
    if (rank3) fillGridDims(l.rank);
    grid = layoutGrid(gridBox, l, {
      dims: rank3 ? zeroBased(dimsBox.value) : null,
      dark: host.dark(),
      onTileClick: (ids) => select(ids && new Set(ids)),
      maxHeight: host.fitHeight(gridBox),
    });
    performance.mark("grid-built");
    if (!rank3) fillGridDims(l.rank);
    selection.textContent = "";
    renderSummary(l);
    explain(null);
  }

  /** Highlights devices in the grid and the mesh table (null clears). @param {Set<number> | null} ids */
  function select(ids) {
    selected = ids;
    grid?.highlight(ids);
    mesh?.highlight(ids);
    selection.textContent = ids ? `selected devices: ${layout ? layout.platform + " " : ""}${compactIds([...ids])}` : "";
  }

  /** @param {string} key @param {Layout} l */
  function keep(key, l) {
    fetched.delete(key);
    fetched.set(key, l);
    let total = 0;
    for (const v of fetched.values()) total += v.shards.length;
    for (const [k, v] of fetched) {
      if (total <= FETCHED_SHARDS || fetched.size <= 1) break;
      fetched.delete(k);
      total -= v.shards.length;
    }
  }

  /** Lays out the state's array (a newer request aborts this one). @param {AbortSignal} signal */
  async function refresh(signal) {
    let req;
    try {
      req = layoutRequest(state);
    } catch (e) {
      const text = e instanceof Error ? e.message : String(e);
      const rules = /rule|column/.test(text) && state.rules.trim() && !/shape/.test(text);
      explain(rules ? new ApiError(422, { code: "bad_rules", message: text }) : /shape/.test(text) ? new ApiError(422, { code: "bad_shape", message: text }) : e);
      host.bump("errors");
      return;
    }
    const key = JSON.stringify(req);
    const t0 = performance.now();
    let l = fetched.get(key);
    if (!l) {
      status.textContent = "computing…";
      const json = await /** @type {NonNullable<typeof data.layout>} */ (data.layout)(req, signal);
      signal.throwIfAborted();
      l = Layout.fromApi(json);
    }
    keep(key, l);
    const t1 = performance.now();
    render(l);
    performance.measure("fetch-layout", { start: t0, end: t1 });
    performance.measure("build-dom", { start: t1, end: performance.now() });
    if (status.textContent === "computing…") status.textContent = "";
    if (reshardPending && reshard) {
      reshardPending = false;
      reshard.run();
    } else reshard?.stale();
    const drawn = l;
    requestAnimationFrame(() => {
      performance.mark("grid-painted");
      if (keystrokeAt) {
        performance.measure("keystroke-to-paint", { start: keystrokeAt, end: performance.now() });
        keystrokeAt = 0;
      }
      // the mesh table (up to 16384 cells) after the grid is on screen
      setTimeout(() => {
        if (layout !== drawn || life.disposed) return;
        renderMesh(drawn, host.dark());
        host.bump("rendered");
      }, 0);
    });
  }

  const { schedule, stop } = newestWins(refresh, (e) => {
    if (status.textContent === "computing…") status.textContent = "";
    explain(e);
    host.bump("errors");
  });

  // ---------------------------------------------------------------- wiring

  /** The state changed as a whole (a fix, an example): controls, URL and a new layout. */
  function commit() {
    stateToControls();
    save(false);
    schedule(0);
  }

  /** A control committed a change: a new history entry, and a new layout at once. */
  function onControlChange() {
    controlsToState();
    stateToControls();
    save(false);
    schedule(0);
  }

  /** A field is being typed in: the same history entry, a new layout once typing pauses. */
  function onControlInput() {
    typedAt = performance.now();
    controlsToState();
    save(true);
    schedule(150);
  }

  /**
   * What the spec box holds after typing or pasting: JAX's print of a sharding sets the mesh (and
   * the spec, or a single device); typographic quotes become straight ones.
   */
  function onSpecInput() {
    keystrokeAt = typedAt = performance.now();
    const text = specBox.value;
    const pasted = parsePasted(text);
    if (pasted) {
      applyPasted(pasted);
      return;
    }
    const straight = straightQuotes(text);
    if (straight !== text) {
      const at = specBox.selectionStart;
      specBox.value = straight;
      if (at !== null) specBox.setSelectionRange(at, at);
      say("Curly quotes replaced with straight ones.");
    } else if (note.textContent.startsWith("Curly")) say();
    state.spec = specBox.value;
    save(true);
    schedule(0);
  }

  /**
   * What a pasted repr sets. JAX's repr names no devices (only older ones list ids): the device set is
   * kept when it has as many devices as the mesh, else it becomes `cpu:N` (what JAX numbers 0..N-1 for N
   * devices) — said, with one-click switches to the other sets of N devices, never silently another
   * platform's ids.
   * @param {import("../model/paste.js").Pasted} p
   */
  function applyPasted(p) {
    /** @type {(string | Node)[]} */
    const said = [];
    /** @type {string[]} */
    let others = [];
    if (p.kind === "single") {
      Object.assign(state, { order: "single", ids: String(p.device), spec: "P()" });
      said.push(`one device, id ${p.device} (SingleDeviceSharding)`);
    }
    if (p.mesh) {
      const mm = p.mesh;
      const n = mm.shape.reduce((a, b) => a * b, 1);
      Object.assign(state, { mesh: mm.shape.join("x"), axes: mm.axis_names.join(","), split: "", dcn: "" });
      pastedMesh = state.mesh;
      if (mm.device_ids) Object.assign(state, { order: "devices", ids: mm.device_ids.join(",") });
      else if (!["make_mesh", "iota"].includes(state.order)) Object.assign(state, { order: "make_mesh", ids: "" });
      const types = mm.axis_types ? [...new Set(mm.axis_types)] : [];
      if (types.length === 1) state.types = types[0];
      said.push(`mesh ${mm.axis_names.map((a, i) => `${a}(${mm.shape[i]})`).join(" × ")}${types.length === 1 ? `, ${types[0]} axes` : ""}`);
      const had = state.devices;
      const count = deviceCount(had, state.slices, catalog);
      const fits = count === n || (had === "local" && !fixed.has("devices"));
      if (!fits && !fixed.has("devices")) Object.assign(state, { devices: `cpu:${n}`, slices: 1 });
      const named = mm.device_ids ? "its device ids set the order" : "the repr names no devices";
      said.push(fits
        ? `devices ${state.devices} kept: ${count ?? "its"} devices, as the mesh needs (${named})`
        : `devices cpu:${n}: ${had} has ${count ?? "other"} devices, the mesh ${n}; ${named}, so they are numbered 0–${n - 1} as JAX numbers ${n} CPU devices`);
      others = catalog ? deviceSetsFor(n, had, catalog).filter((d) => d !== state.devices) : [];
    }
    if (p.spec) {
      state.spec = p.spec;
      said.push(`spec ${p.spec}`);
    }
    if (p.memoryKind && p.memoryKind !== "None") said.push(`memory kind ${p.memoryKind} (not drawn)`);
    const what = { named: "NamedSharding", single: "SingleDeviceSharding", mesh: "Mesh" }[p.kind];
    say(`From the pasted ${what}: ${said.join("; ")}.`);
    for (const set of others) {
      const b = fixButton(note, `Use ${set}`, () => {
        apply({ devices: set, slices: 1 });
        say(`Devices ${set}: the same ${set.startsWith("cpu") ? "ids 0–N" : "mesh"} on ${set}.`);
      });
      b.classList.add("switch");
    }
    stateToControls();
    save(false);
    schedule(0);
  }

  /** Keys for the whole page: / jumps to the spec box, Escape clears the selection. @param {KeyboardEvent} e */
  function onPageKey(e) {
    const t = /** @type {HTMLElement} */ (e.target);
    const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || t.isContentEditable;
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey && !fixed.has("spec")) {
      e.preventDefault();
      specBox.focus();
      specBox.select();
    } else if (e.key === "Escape") {
      hideCard();
      if (selected) select(null);
    }
  }

  specBox.addEventListener("input", onSpecInput);
  shapeBox.addEventListener("input", onControlInput);
  shapeBox.addEventListener("change", onControlChange);
  dtypeBox.addEventListener("change", onControlChange);
  rulesBox.addEventListener("input", () => {
    typedAt = performance.now();
    state.rules = rulesBox.value;
    save(true);
    schedule(150);
  });
  dimsBox.addEventListener("change", () => {
    state.dims = dimsBox.value;
    save(false);
    if (layout) render(layout);
  });
  clear.addEventListener("click", () => select(null));
  // the page's keys for a page; a notebook's widget keeps to itself (Escape only, inside it)
  const keysOn = host.kind === "page" ? document : root;
  keysOn.addEventListener("keydown", /** @type {EventListener} */ (onPageKey));
  data.examples?.().then((ex) => {
    if (!withPickers || life.disposed) return;
    examples.replaceChildren(...ex.layout.map((e) => exampleButton(e, () => {
      state = { ...DEFAULTS, ...e.state };
      pastedMesh = "";
      say();
      commit();
      // on a narrow screen the picture is below: bring it into view
      if (results.getBoundingClientRect().top > window.innerHeight * 0.6) results.scrollIntoView({ block: "start" });
    })));
  }, () => {}); // the examples are a convenience: the page works without them
  life.add(host.onTheme(() => {
    meshKey = "";
    if (layout) {
      render(layout);
      renderMesh(layout, host.dark());
    }
  }), stop, spoken.dispose, () => keysOn.removeEventListener("keydown", /** @type {EventListener} */ (onPageKey)));

  // the picture loads from the state while the pickers wait for the catalog
  stateToControls();
  schedule(0);
  if (data.platforms) {
    data.platforms().then(
      (cat) => startControls(cat),
      (e) => {
        explain(e);
        startControls({ tpu: [], gpu: [] });
      },
    );
  } else startReshard();

  /** @param {any} cat */
  function startControls(cat) {
    if (life.disposed) return;
    catalog = cat;
    controls = layoutControls(pickers, cat, {
      fields: {},
      types: [["", "JAX's default"], ["auto", "all Auto"], ["explicit", "all Explicit"]],
      orders: ORDERS,
      onChange: onControlChange,
      onInput: onControlInput,
    });
    stateToControls();
    startReshard();
    // the main action first: the spec box has the focus where a keyboard is the likely input
    if (host.kind === "page" && window.matchMedia("(pointer: fine)").matches && !document.activeElement?.closest("input, select, textarea")) {
      specBox.focus({ preventScroll: true });
    }
  }

  function startReshard() {
    const post = data.reshard;
    if (!post || life.disposed) return;
    reshard = reshardBox(reshardHolder, {
      target: state.reshard,
      request: () => layoutRequest(state),
      reshard: post,
      onTarget: (target) => {
        state.reshard = target;
        save(false);
      },
      address: (target) => host.href?.("layout", toQuery({ ...state, reshard: target })) || "",
      onDone: () => host.bump("reshards"),
    });
    if (reshardPending && layout) {
      // the picture came first (it loads while the pickers wait for the catalog): now its reshard
      reshardPending = false;
      reshard.run();
    }
  }

  return {
    update(next) {
      state = { ...DEFAULTS, ...next };
      stateToControls();
      reshard?.set(state.reshard);
      reshardPending = Boolean(state.reshard);
      schedule(0);
    },
    dispose: life.dispose,
  };
}
