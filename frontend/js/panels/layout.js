// panels/: one module per view, each a panel — mount(root, host, state) -> {update, dispose} — that
// builds its own DOM, keeps its state in its closure and asks its host for everything else
// (hosts/host.js). This one: the layout explorer — the PartitionSpec box first (specs, pasted
// NamedSharding / SingleDeviceSharding / Mesh reprs, logical names with Flax rules), the tutorials' own
// examples beside it, the device and mesh pickers (every mesh constructor the API has), the grid and
// the mesh table highlighting each other, the summary, downloads, "Reshard to…" and the share link.

import { ApiError, newestWins } from "../lib/api.js";
import { afterPaint, defList, download, h, labelled, setOptions } from "../lib/dom.js";
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
import { DEFAULTS, ORDERS, deviceCount, deviceSetsFor, fromQuery, layoutRequest, meshFor, toQuery } from "../model/state.js";
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

/** @typedef {import("../model/state.js").State} State */

/** Keeps `l` as the newest of `fetched`, dropping the oldest past FETCHED_SHARDS shards. @param {Map<string, Layout>} fetched @param {string} key @param {Layout} l */
function keep(fetched, key, l) {
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

/** The layout request for `state`, or the error to show beside the field that cannot make one. @param {State} state */
function requestOf(state) {
  try {
    return { req: layoutRequest(state), err: null };
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e);
    const rules = /rule|column/.test(text) && state.rules.trim() && !/shape/.test(text);
    return { req: null, err: rules ? new ApiError(422, { code: "bad_rules", message: text }) : /shape/.test(text) ? new ApiError(422, { code: "bad_shape", message: text }) : e };
  }
}

/**
 * When the device set changes size under a mesh that fitted it (a 4x4 mesh as the slice becomes 64 chips),
 * the mesh follows: the new set's default mesh (`meshFor`), the axis names kept. Returns what to say (null:
 * the mesh stays).
 * @param {State} state changed in place
 * @param {{devices: string, slices: number, mesh: string}} before
 * @param {any} catalog
 */
function followDevices(state, before, catalog) {
  if (!catalog || (state.devices === before.devices && state.slices === before.slices)) return null;
  const size = (/** @type {string} */ m) => m.split("x").reduce((a, b) => a * (Number(b) || 0), 1);
  const was = deviceCount(before.devices, before.slices, catalog);
  const now = deviceCount(state.devices, state.slices, catalog);
  if (!now || now === was || size(state.mesh) !== was) return null;
  const axes = state.axes.split(",").map((a) => a.trim()).filter(Boolean);
  const next = meshFor(state.devices, state.slices, Math.max(1, axes.length), catalog);
  if (!next) return null;
  Object.assign(state, { mesh: next, ...(state.order === "devices" ? { order: "make_mesh", ids: "" } : {}) });
  return `Mesh ${next}: it follows the ${now} devices of ${state.devices} (the ${before.mesh} mesh fitted ${was}); axes ${axes.join(", ")} kept.`;
}

/**
 * What a pasted repr sets, in `state`. JAX's repr names no devices (only older ones list ids): the device set
 * is kept when it has as many devices as the mesh, else it becomes `cpu:N` (what JAX numbers 0..N-1 for N
 * devices) — said, with the other sets of N devices to switch to, never silently another platform's ids.
 * @param {import("../model/paste.js").Pasted} p
 * @param {State} state changed in place
 * @param {any} catalog
 * @param {Set<string>} fixed the fields the host cannot change
 * @returns {{said: string, others: string[], mesh: string | null}} what to say, the other device sets, the pasted mesh
 */
function pastedState(p, state, catalog, fixed) {
  /** @type {string[]} */
  const said = [];
  /** @type {string[]} */
  let others = [];
  let mesh = null;
  if (p.kind === "single") {
    Object.assign(state, { order: "single", ids: String(p.device), spec: "P()" });
    said.push(`one device, id ${p.device} (SingleDeviceSharding)`);
  }
  if (p.mesh) {
    const mm = p.mesh;
    const n = mm.shape.reduce((a, b) => a * b, 1);
    Object.assign(state, { mesh: mm.shape.join("x"), axes: mm.axis_names.join(","), split: "", dcn: "" });
    mesh = state.mesh;
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
  return { said: `From the pasted ${what}: ${said.join("; ")}.`, others, mesh };
}

/**
 * The card "The array to lay out": the PartitionSpec box first, the array's shape and dtype, the tutorials'
 * examples, the Flax rules, and the note under the spec box saying what was done to what was pasted.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {boolean} withPickers
 */
function mountSpecBar(parent, host, withPickers) {
  const fixed = host.fixed;
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
  parent.append(h("section", { class: "spec-bar", "aria-label": "The array to lay out" },
    h("div", { class: "spec-row" },
      h("div", { class: "spec-field" },
        h("div", { class: "spec-label" }, h("span", { class: "spec-title" }, "PartitionSpec"),
          h("span", { class: "key-hint", part: "spec-hint" }, host.kind === "page" ? h("span", { class: "key" }, "press ", h("kbd", {}, "/"), " to edit; ") : null,
            "paste ", h("code", {}, "x.sharding"), " as JAX prints it")),
        specBox),
      h("label", { class: "shape-field" }, "Array shape ", shapeBox),
      h("label", { class: "dtype-field" }, "dtype ", dtypeBox)),
    h("div", { class: "spec-extras" }, examples, rulesDetails), note));
  /** The array's own fields (the pickers hold the device set and the mesh). */
  const fields = /** @type {[keyof State, HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement][]} */ (
    [["spec", specBox], ["shape", shapeBox], ["dtype", dtypeBox], ["rules", rulesBox]]);
  return {
    specBox, shapeBox, dtypeBox, rulesBox, rulesDetails, note, examples,
    /** The field each error field names. */
    boxes: { spec: specBox, shape: shapeBox, dtype: dtypeBox, rules: rulesBox },
    /** @param {State} state */
    write(state) {
      for (const [key, box] of fields) box.value = String(state[key]);
      if (state.rules) rulesDetails.open = true;
    },
    /** @param {State} state */
    read(state) {
      for (const [key, box] of fields) /** @type {any} */ (state)[key] = box.value;
    },
    /** A line under the spec box saying what was done to what was pasted (empty: none). @param {...(string | Node)} parts */
    say(...parts) {
      note.replaceChildren(...parts);
      note.hidden = !parts.length;
    },
  };
}

/**
 * The card "Layout": the grid and the mesh table highlighting each other, the summary, zoom and downloads,
 * the grid's dimensions for rank > 2, and the slot "Reshard to…" is drawn in. The last valid picture stays,
 * dimmed (`markStale`), while an error is shown over it.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {{state: () => State, onDims: () => void, onError: (e: unknown) => void}} opts
 */
function mountPicture(parent, host, opts) {
  const dimsBox = h("select", { part: "grid-dims" });
  const dimsField = h("label", { class: "inline-field", part: "grid-dims-field", hidden: true }, "Grid dimensions ", dimsBox);
  const button = (/** @type {string} */ text, /** @type {string} */ part, /** @type {string | null} */ label, /** @type {() => void} */ act) => {
    const b = h("button", { type: "button", part, "aria-label": label }, text);
    b.addEventListener("click", act);
    return b;
  };
  /** @type {Layout | null} */
  let layout = null;
  /** @type {import("../components/grid.js").GridView | null} */
  let grid = null;
  /** @type {import("../components/mesh_table.js").MeshTableView | null} */
  let mesh = null;
  let meshKey = "";
  /** @type {Set<number> | null} */
  let selected = null;
  const toolbar = h("div", { class: "toolbar" },
    dimsField,
    button("+", "zoom-in", "Zoom in", () => grid?.zoomBy(0.8)),
    button("−", "zoom-out", "Zoom out", () => grid?.zoomBy(1.25)),
    button("Reset view", "zoom-reset", null, () => grid?.resetView()),
    h("span", { class: "spacer" }),
    button("Download SVG", "download-svg", null, () => grid && download(new Blob([grid.svgText()], { type: "image/svg+xml" }), `${fileName(layout)}.svg`)),
    button("Download PNG", "download-png", null, () => grid?.pngBlob(2).then((blob) => download(blob, `${fileName(layout)}.png`), (e) => opts.onError(e))));
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
  parent.append(h("section", { class: "view", "aria-label": "Layout" }, toolbar, results));

  /** The choice of two grid dimensions, shown for rank > 2. @param {number} rank */
  function fillGridDims(rank) {
    dimsField.hidden = rank <= 2;
    if (rank <= 2) return;
    const pairs = [];
    for (let i = 0; i < rank; i++) for (let j = i + 1; j < rank; j++) pairs.push(`${i},${j}`);
    setOptions(dimsBox, pairs, pairs.map((p) => `dims ${p.replace(",", " × ")}`));
    dimsBox.value = gridDims(rank, zeroBased(opts.state().dims)).join(",");
  }

  /** Highlights devices in the grid and the mesh table (null clears). @param {Set<number> | null} ids */
  function select(ids) {
    selected = ids;
    grid?.highlight(ids);
    mesh?.highlight(ids);
    selection.textContent = ids ? `selected devices: ${layout ? layout.platform + " " : ""}${compactIds([...ids])}` : "";
  }

  /** The mesh table's picture, in `into`. @param {HTMLElement} into @param {Layout} l @param {(id: number) => string} colour @param {(id: number, at: number[]) => string} title */
  function drawMesh(into, l, colour, title) {
    const m = l.mesh;
    mesh = meshTable(into, m, {
      caption: [`Mesh(${m.axis_names.map((n, i) => `'${n}': ${m.shape[i]}`).join(", ")}) — axis types ${m.axis_types.join(", ")}`],
      colour,
      title,
      onDeviceClick: (id) => select(new Set([id])),
    });
    mesh.highlight(selected);
  }

  clear.addEventListener("click", () => select(null));
  dimsBox.addEventListener("change", () => {
    opts.state().dims = dimsBox.value;
    opts.onDims();
  });
  return {
    toolbar, results, specError, pointer, reshardHolder,
    get layout() {
      return layout;
    },
    get selected() {
      return selected;
    },
    select,
    /** @param {Layout} l */
    render(l) {
      const state = opts.state();
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
      const spec = l.spec + (state.rules.trim() ? `  (logical ${state.spec.trim()} under the rules)` : "");
      summary.replaceChildren(defList(layoutFacts(l, { spec, single: state.order === "single" })));
    },
    /** The mesh table: rebuilt for a new mesh (or theme: `fresh`), recoloured when only the layout changed. @param {Layout} l @param {boolean} dark @param {boolean} [fresh] */
    renderMesh(l, dark, fresh = false) {
      const m = l.mesh;
      const key = `${l.devicesKey}|${m.shape}|${m.axis_names.join("\u0000")}|${m.axis_types}|${l.meshIds.join(",")}|${dark}`;
      const colour = (/** @type {number} */ id) => l.colourOf(id, dark);
      const title = (/** @type {number} */ id, /** @type {number[]} */ at) => `device ${id}: ${l.whereIs(id)}; mesh index (${at.join(", ")})`;
      if (mesh && key === meshKey && !fresh) {
        mesh.recolour(colour, title);
        mesh.highlight(selected);
        return;
      }
      meshKey = key;
      mesh = null;
      const fold = host.foldMeshAbove;
      if (!fold || l.shards.length <= fold) {
        drawMesh(meshBox, l, colour, title);
        return;
      }
      // a mesh of thousands of devices is a table of thousands of cells: built when opened (the grid
      // and its hover cards say the same per tile)
      const holder = h("div");
      const details = h("details", { class: "mesh-details", part: "mesh-details" }, h("summary", {}, `Mesh table: ${meshAxes(m)} (${l.shards.length} devices)`), holder);
      details.addEventListener("toggle", () => details.open && !holder.firstChild && drawMesh(holder, l, colour, title));
      meshBox.replaceChildren(details);
    },
    /** Dims the picture, the summary and the mesh table, which are the last valid layout's. @param {boolean} on */
    markStale(on) {
      const stale = on && Boolean(layout);
      if (results.classList.contains("stale") === stale) return;
      results.classList.toggle("stale", stale);
      staleNote.hidden = !stale;
      if (stale && layout) staleNote.textContent = `Still showing the last valid layout: ${layout.spec} on ${JSON.stringify(layout.shape)}.`;
    },
  };
}

/**
 * One-click ways out under an explanation in `box`: the hybrid mesh JAX's message asks for, split physical
 * axes, a device set the mesh fits, Explicit axes for unreduced specs, logical rules for names no mesh has.
 * @param {HTMLElement} box
 * @param {ReturnType<typeof errorFields> & Record<string, any>} e
 * @param {{state: State, fixed: Set<string>, catalog: any, apply: (change: Partial<State>) => void, spec: ReturnType<typeof mountSpecBar>}} at
 */
function waysOut(box, e, at) {
  const { state, fixed, catalog, apply, spec } = at;
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
  if (e.code === "unknown_axis" && !state.rules.trim() && !spec.rulesDetails.hidden) {
    box.appendChild(h("p", {}, `Is ${JSON.stringify(e.axis ?? "")} a logical axis name (Flax's nn.with_logical_partitioning)? Give the logical → mesh rules and the spec is laid out as Flax would.`));
    fixButton(box, "Add logical → mesh rules", () => {
      spec.rulesDetails.open = true;
      spec.rulesBox.focus();
    });
  }
}

/**
 * The card "Devices and mesh": the device and mesh pickers (every mesh constructor the API has), built once the
 * platforms' catalog is in, and errors about them beside them. Hidden where the host has no device sets.
 * @param {HTMLElement} parent
 * @param {boolean} withPickers
 * @param {{onChange: () => void, onInput: () => void}} on
 */
function mountPickers(parent, withPickers, on) {
  const pickers = h("div", { part: "pickers" });
  const error = errorBox("pickers-error");
  const aside = h("aside", { class: "controls", "aria-label": "Devices and mesh", part: "controls" }, error, pickers);
  aside.hidden = !withPickers;
  parent.append(aside);
  /** @type {ReturnType<typeof layoutControls> | null} */
  let controls = null;
  /** The control an error is about, kept for pickers built after it arrived (the grid's request goes first). */
  /** @type {string | null} */
  let marked = null;
  return {
    aside, error,
    /** The pickers for the platforms' catalog. @param {any} cat */
    start(cat) {
      controls = layoutControls(pickers, cat, {
        fields: {},
        types: [["", "JAX's default"], ["auto", "all Auto"], ["explicit", "all Explicit"]],
        orders: ORDERS,
        onChange: on.onChange,
        onInput: on.onInput,
      });
      if (marked) controls.mark(marked);
    },
    /** No control is marked (the layout came back). */
    unmark() {
      marked = null;
      aside.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
    },
    /** @param {State} state */
    write: (state) => controls?.write(state),
    /** @param {State} state */
    read: (state) => controls?.read(state),
    /** @param {string} field */
    mark: (field) => {
      marked = field;
      controls?.mark(field);
    },
  };
}

/**
 * The card "Reshard to…" in `holder` (where the host can reshard): another spec's layout and the collectives
 * that move the array there, run again for each new layout once asked for.
 * @param {HTMLElement} holder
 * @param {import("../hosts/host.js").Host} host
 * @param {{state: () => State, save: () => void, drawn: () => boolean}} at
 */
function mountReshard(holder, host, at) {
  /** @type {ReturnType<typeof reshardBox> | null} */
  let reshard = null;
  let pending = Boolean(at.state().reshard);
  return {
    start() {
      const post = host.data.reshard;
      if (!post) return;
      reshard = reshardBox(holder, {
        target: at.state().reshard,
        request: () => layoutRequest(at.state()),
        reshard: post,
        onTarget: (target) => {
          at.state().reshard = target;
          at.save();
        },
        address: (target) => host.href?.("layout", toQuery({ ...at.state(), reshard: target })) || "",
        onDone: () => host.bump("reshards"),
      });
      if (pending && at.drawn()) {
        // the picture came first (it loads while the pickers wait for the catalog): now its reshard
        pending = false;
        reshard.run();
      }
    },
    /** A new layout is drawn: the reshard asked for runs, an earlier one is marked stale. */
    drawn() {
      if (pending && reshard) {
        pending = false;
        reshard.run();
      } else reshard?.stale();
    },
    /** A new state from the host. @param {string} target */
    set(target) {
      reshard?.set(target);
      pending = Boolean(target);
    },
  };
}

/**
 * What is wrong, beside the control that fixes it: errors about the devices and the mesh beside their pickers
 * (the floating box over the picture points there), the rest over the last good picture, which stays, dimmed
 * with the summary and the mesh table, at once. The explanation shows (and the alert speaks) only once typing
 * has paused. `explain(null)` clears.
 * @param {import("../hosts/host.js").Host} host
 * @param {{spec: ReturnType<typeof mountSpecBar>, picture: ReturnType<typeof mountPicture>, pickers: ReturnType<typeof mountPickers>}} cards
 * @param {{state: () => State, catalog: () => any, pastedMesh: () => string, typedAt: () => number, apply: (change: Partial<State>) => void, withPickers: boolean}} at
 */
function explainer(host, cards, at) {
  const { spec, picture, pickers } = cards;
  const ways = () => ({ state: at.state(), fixed: host.fixed, catalog: at.catalog(), apply: at.apply, spec });
  const spoken = settledError(picture.specError, at.typedAt, (err) => {
    picture.markStale(true);
    waysOut(picture.specError, errorFields(err), ways());
    host.bump("errorShown");
  });
  /** The error shown (null: none), said again once the pickers exist (the grid's request goes before them). */
  /** @type {unknown} */
  let last = null;
  /** @param {unknown} err */
  function explain(err) {
    last = err ?? null;
    const pointer = picture.pointer;
    for (const box of Object.values(spec.boxes)) box.removeAttribute("aria-invalid");
    pickers.unmark();
    if (!err) {
      picture.markStale(false);
      spoken.show(null);
      showError(pickers.error, null);
      pointer.hidden = true;
      return;
    }
    const e = errorFields(err);
    const field = fieldOf(e);
    /** @type {Record<string, HTMLElement>} */ (spec.boxes)[/** @type {string} */ (field)]?.setAttribute("aria-invalid", "true");
    if (at.withPickers && (field === "mesh" || field === "devices" || field === "types")) {
      pickers.mark(field);
      spoken.show(null);
      picture.markStale(true);
      // a mesh pasted from JAX's print is what the user has: a hint proposing other shapes would undo it
      const undoes = e.code === "bad_mesh" && at.pastedMesh() === at.state().mesh;
      showError(pickers.error, undoes ? new ApiError(422, { ...e, hint: undefined }) : err);
      waysOut(pickers.error, e, ways());
      const where = field === "devices" ? "Devices" : "Mesh";
      pointer.replaceChildren(`${e.code}: the fix is beside the ${where} controls. `);
      fixButton(pointer, "Show me", () => {
        pickers.aside.scrollIntoView({ block: "start" });
        /** @type {HTMLElement | null} */ (pickers.aside.querySelector("[aria-invalid]"))?.focus();
      }).classList.add("link");
      pointer.hidden = false;
      host.bump("errorShown");
      return;
    }
    showError(pickers.error, null);
    pointer.hidden = true;
    spoken.show(err, at.state().spec);
  }
  return {
    explain,
    /** The error shown, explained again: the pickers and the catalog's ways out came after it. */
    again: () => {
      if (last) explain(last);
    },
    dispose: spoken.dispose,
  };
}

/**
 * Keys for the whole page: / jumps to the spec box, Escape clears the selection.
 * @param {KeyboardEvent} e @param {ReturnType<typeof mountSpecBar>} spec @param {ReturnType<typeof mountPicture>} picture @param {Set<string>} fixed
 */
function onPageKey(e, spec, picture, fixed) {
  const t = /** @type {HTMLElement} */ (e.target);
  const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || t.isContentEditable;
  if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey && !fixed.has("spec")) {
    e.preventDefault();
    spec.specBox.focus();
    spec.specBox.select();
  } else if (e.key === "Escape") {
    hideCard();
    if (picture.selected) picture.select(null);
  }
}

/**
 * The layout requests: the state's array laid out (a newer request aborts an older one; layouts already
 * fetched are drawn again without a round trip), the grid drawn first and the mesh table after it is on screen.
 * @param {import("../hosts/host.js").Host} host
 * @param {() => State} state
 * @param {{picture: ReturnType<typeof mountPicture>, reshard: ReturnType<typeof mountReshard>, status: HTMLElement,
 *   explain: (e: unknown) => void, disposed: () => boolean}} parts
 */
function layoutLoader(host, state, parts) {
  const { picture, reshard, status, explain } = parts;
  /** @type {Map<string, Layout>} newest last */
  const fetched = new Map();
  /** When the keystroke that asked for the layout being drawn was (0: none): the keystroke-to-paint measure. */
  let keystrokeAt = 0;

  /** Lays out the state's array. @param {AbortSignal} signal */
  async function refresh(signal) {
    const { req, err } = requestOf(state());
    if (!req) {
      explain(err);
      host.bump("errors");
      return;
    }
    const key = JSON.stringify(req);
    const t0 = performance.now();
    let l = fetched.get(key);
    if (!l) {
      status.textContent = "computing…";
      const json = await /** @type {NonNullable<typeof host.data.layout>} */ (host.data.layout)(req, signal);
      signal.throwIfAborted();
      l = Layout.fromApi(json);
    }
    keep(fetched, key, l);
    const t1 = performance.now();
    picture.render(l);
    explain(null);
    performance.measure("fetch-layout", { start: t0, end: t1 });
    performance.measure("build-dom", { start: t1, end: performance.now() });
    if (status.textContent === "computing…") status.textContent = "";
    reshard.drawn();
    const drawn = l;
    requestAnimationFrame(() => {
      performance.mark("grid-painted");
      if (keystrokeAt) {
        performance.measure("keystroke-to-paint", { start: keystrokeAt, end: performance.now() });
        keystrokeAt = 0;
      }
      // the mesh table (up to 16384 cells) after the grid is on screen
      setTimeout(() => {
        if (picture.layout !== drawn || parts.disposed()) return;
        picture.renderMesh(drawn, host.dark());
        host.bump("rendered");
      }, 0);
    });
  }

  const { schedule, now, stop } = newestWins(refresh, (e) => {
    if (status.textContent === "computing…") status.textContent = "";
    explain(e);
    host.bump("errors");
  });
  return {
    schedule,
    now,
    stop,
    /** A keystroke in the spec box at `t` (performance.now()): measured to the paint of its layout. @param {number} t */
    keystroke(t) {
      keystrokeAt = t;
    },
  };
}

/**
 * The panel, built from its cards (the array to lay out, the device and mesh pickers, the layout with its
 * reshard); the state, the layout requests and the wiring here.
 * @param {HTMLElement} root
 * @param {import("../hosts/host.js").Host} host
 * @param {State} initial
 */
export function mount(root, host, initial) {
  /** @type {State} */
  let state = { ...DEFAULTS, ...initial };
  const data = host.data;
  const fixed = host.fixed;
  /** @type {any} */
  let catalog = null;
  let typedAt = 0;
  /** The mesh a paste set (its shape): a bad_mesh about it must not propose other shapes. */
  let pastedMesh = "";
  const life = lifetime();

  root.classList.add("app", "layout-app");
  const withPickers = Boolean(data.platforms);
  root.classList.toggle("no-controls", !withPickers);
  root.replaceChildren();
  const spec = mountSpecBar(root, host, withPickers);
  const pickers = mountPickers(root, withPickers, { onChange: onControlChange, onInput: onControlInput });
  const picture = mountPicture(root, host, {
    state: () => state,
    onDims: () => {
      save(false);
      if (!picture.layout) return;
      picture.render(picture.layout);
      explain(null);
    },
    onError: (e) => explain(e),
  });
  const reshard = mountReshard(picture.reshardHolder, host, { state: () => state, save: () => save(false), drawn: () => Boolean(picture.layout) });
  const status = shareAndStatus(picture.toolbar, host, () => ({ ...state }), (e) => explain(e));
  const errors = explainer(host, { spec, picture, pickers }, {
    state: () => state, catalog: () => catalog, pastedMesh: () => pastedMesh, typedAt: () => typedAt, apply, withPickers,
  });
  const explain = errors.explain;
  const { schedule, now: loadNow, stop, keystroke } = layoutLoader(host, () => state, { picture, reshard, status, explain, disposed: () => life.disposed });

  function stateToControls() {
    pickers.write(state);
    spec.write(state);
  }

  function controlsToState() {
    pickers.read(state);
    spec.read(state);
  }

  /** The device set and mesh as last committed (a typed device count commits when the field is left). */
  let settled = { devices: state.devices, slices: state.slices, mesh: state.mesh };
  /** @param {boolean} replace */
  function save(replace) {
    if (!replace) settled = { devices: state.devices, slices: state.slices, mesh: state.mesh };
    host.save({ ...state }, replace);
  }

  /** @param {Partial<State>} change */
  function apply(change) {
    Object.assign(state, change);
    commit();
  }

  /** The state changed as a whole (a fix, an example): controls, URL and a new layout. */
  function commit() {
    stateToControls();
    save(false);
    schedule(0);
  }

  /** A control committed a change: a new history entry, and a new layout at once. */
  function onControlChange() {
    controlsToState();
    const followed = followDevices(state, settled, catalog);
    if (followed) spec.say(followed);
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
    const specBox = spec.specBox;
    typedAt = performance.now();
    keystroke(typedAt);
    const text = specBox.value;
    const pasted = parsePasted(text);
    if (pasted) {
      const { said, others, mesh } = pastedState(pasted, state, catalog, fixed);
      if (mesh !== null) pastedMesh = mesh;
      spec.say(said);
      if (others.length) spec.note.append(" The repr names no platform; the same mesh on: ");
      for (const set of others) {
        fixButton(spec.note, `Use ${set}`, () => {
          apply({ devices: set, slices: 1 });
          spec.say(`Devices ${set}: the same ${set.startsWith("cpu") ? "ids 0–N" : "mesh"} on ${set}.`);
        }).classList.add("switch");
      }
      commit();
      return;
    }
    const straight = straightQuotes(text);
    if (straight !== text) {
      const at = specBox.selectionStart;
      specBox.value = straight;
      if (at !== null) specBox.setSelectionRange(at, at);
      spec.say("Curly quotes replaced with straight ones.");
    } else if (spec.note.textContent.startsWith("Curly")) spec.say();
    state.spec = specBox.value;
    save(true);
    schedule(0);
  }

  spec.specBox.addEventListener("input", onSpecInput);
  spec.shapeBox.addEventListener("input", onControlInput);
  spec.shapeBox.addEventListener("change", onControlChange);
  spec.dtypeBox.addEventListener("change", onControlChange);
  spec.rulesBox.addEventListener("input", () => {
    typedAt = performance.now();
    state.rules = spec.rulesBox.value;
    save(true);
    schedule(150);
  });
  // the page's keys for a page; a notebook's widget keeps to itself (Escape only, inside it)
  const keysOn = host.kind === "page" ? document : root;
  const onKey = (/** @type {Event} */ e) => onPageKey(/** @type {KeyboardEvent} */ (e), spec, picture, fixed);
  keysOn.addEventListener("keydown", onKey);
  data.examples?.().then((ex) => {
    if (!withPickers || life.disposed) return;
    spec.examples.replaceChildren(...ex.layout.map((e) => exampleButton(e, () => {
      state = { ...DEFAULTS, ...e.state };
      settled = { devices: state.devices, slices: state.slices, mesh: state.mesh };
      pastedMesh = "";
      spec.say();
      commit();
      // on a narrow screen the picture is below: bring it into view
      if (picture.results.getBoundingClientRect().top > window.innerHeight * 0.6) picture.results.scrollIntoView({ block: "start" });
    })));
  }, () => {}); // the examples are a convenience: the page works without them
  life.add(host.onTheme(() => {
    const l = picture.layout;
    if (!l) return;
    picture.render(l);
    explain(null);
    picture.renderMesh(l, host.dark(), true);
  }), stop, errors.dispose, () => keysOn.removeEventListener("keydown", onKey));

  /** The pickers for the platforms' catalog, then the reshard box. @param {any} cat */
  function startControls(cat) {
    if (life.disposed) return;
    catalog = cat;
    pickers.start(cat);
    stateToControls();
    errors.again();
    reshard.start();
    // the main action first: the spec box has the focus where a keyboard is the likely input
    if (host.kind === "page" && window.matchMedia("(pointer: fine)").matches && !document.activeElement?.closest("input, select, textarea")) {
      spec.specBox.focus({ preventScroll: true });
    }
  }

  // the picture loads from the state while the pickers wait for the catalog, and are built a frame
  // later (its request on its way first — sent now, not after a timer — however soon the catalog is here)
  stateToControls();
  loadNow();
  if (data.platforms) {
    data.platforms().then(
      (cat) => afterPaint().then(() => startControls(cat)),
      (e) => {
        explain(e);
        startControls({ tpu: [], gpu: [] });
      },
    );
  } else if (!life.disposed) reshard.start();

  return {
    update(next) {
      state = { ...DEFAULTS, ...next };
      settled = { devices: state.devices, slices: state.slices, mesh: state.mesh };
      stateToControls();
      reshard.set(state.reshard);
      schedule(0);
    },
    dispose: life.dispose,
  };
}
