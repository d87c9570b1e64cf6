// The notebook widget's front end (anywidget): the dashboard's own components — the layout grid, the
// mesh table, the leaf tree, the collectives table and the memory verdict — mounted in an output
// cell, fed by the kernel through synced traits (sharding_core/notebook/widget.py). Bundled with
// every module it imports into one ES module by sharding_core/notebook/bundle.py: no server, no
// network, nothing fetched.
//
// Traits: payload (bytes: the view's JSON — {kind: "layout", layout, editable, spec_text} or
// {kind: "snapshot", snapshot}), spec (the PartitionSpec box, laid out in the kernel), error (the
// kernel's answer when it cannot: {code, message, hint}), dashboard, publish_requests, link, link_error.

import { ApiError } from "../js/lib/api.js";
import { codeInput, defList, el, setOptions } from "../js/lib/dom.js";
import { showError } from "../js/lib/errors.js";
import { compactIds, fmtBytes, meshAxes } from "../js/lib/format.js";
import { collectiveOnMesh, collectivesTable } from "../js/components/collectives.js";
import { gridDims, layoutGrid } from "../js/components/grid.js";
import { leafTree } from "../js/components/leaf_tree.js";
import { memoryVerdict } from "../js/components/memory.js";
import { meshTable } from "../js/components/mesh_table.js";
import { kindOnDevices, kindText, layoutFacts, logicalAxesText, snapshotFacts } from "../js/model/facts.js";
import { Layout } from "../js/model/layout.js";
import { rulesText } from "../js/model/rules.js";
import { memoryBars } from "./memory_bars.js";
import { isDarkAt, watchTheme } from "./theme.js";

/** @typedef {{get: (k: string) => any, set: (k: string, v: any) => void, save_changes: () => void,
 *   on: (e: string, f: () => void) => void, off: (e: string, f: () => void) => void}} Model anywidget's model */

/** The payload trait (bytes arrive as a DataView) as data. @param {any} value */
function decode(value) {
  if (value instanceof DataView || value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
    return JSON.parse(new TextDecoder().decode(/** @type {ArrayBuffer} */ (value)));
  }
  return typeof value === "string" ? JSON.parse(value) : value;
}

/** Marks one more drawing on the root (tests wait on data-rendered) and how long it took to paint. */
function painted(/** @type {HTMLElement} */ root, /** @type {number} */ t0) {
  requestAnimationFrame(() => {
    root.dataset.drawMs = String(Math.round(performance.now() - t0));
    root.dataset.rendered = String(Number(root.dataset.rendered || 0) + 1);
  });
}

/** Meshes with more devices show their mesh table folded (built on opening). */
const MESH_TABLE_OPEN_MAX = 1024;

/** A heading inside the widget. @param {string} text */
const heading = (text) => el("h4", "ss-heading", text);

/** A toolbar button. @param {string} text @param {string} label @param {() => void} onClick */
function button(text, label, onClick) {
  const b = el("button", "", text);
  b.type = "button";
  b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}

// ---------------------------------------------------------------- one array's layout

/** The widget's layout model from the payload: a layout without a mesh gets a 1-D mesh of its devices. @param {any} data */
function layoutOf(data) {
  const json = data.layout;
  const ids = json.devices.id;
  const mesh = json.mesh || { shape: [ids.length], axis_names: ["devices"], axis_types: ["Auto"], device_ids: ids };
  return Layout.fromApi({ ...json, mesh, devices_key: json.devices_key || `${ids.length} ${json.device_kind || json.platform} devices` });
}

/** The summary the layout explorer shows. @param {Layout} l */
function layoutSummary(l) {
  return defList(layoutFacts(l));
}

/**
 * The layout view: spec box (when the kernel can relay out), grid, summary and mesh table.
 * @param {HTMLElement} root @param {Model} model @param {() => boolean} dark @param {HTMLElement} head
 * @returns {{paint: () => void, dispose: () => void}}
 */
function layoutView(root, model, dark, head) {
  let data = decode(model.get("payload"));
  const controls = el("div", "toolbar ss-controls");
  const errorBox = el("div", "error ss-spec-error");
  errorBox.setAttribute("role", "alert");
  errorBox.hidden = true;
  const gridBox = el("div", "grid-wrap ss-grid");
  const summary = el("div", "summary ss-summary");
  const meshBox = el("div", "mesh-wrap ss-mesh");
  const selection = el("p", "muted ss-selection");
  const side = el("div", "ss-side");
  side.append(summary, meshBox, selection);
  const main = el("div", "ss-layout");
  main.append(gridBox, side);
  root.append(head, controls, errorBox, main);

  /** @type {HTMLInputElement | null} */
  let specBox = null;
  let timer = 0;
  if (data.editable) {
    specBox = codeInput(data.spec_text || data.layout.spec || "");
    specBox.className = "ss-spec";
    specBox.setAttribute("aria-label", "PartitionSpec");
    const label = el("label", "ss-spec-label");
    label.append("PartitionSpec ", specBox);
    controls.append(label);
    const box = specBox;
    box.addEventListener("input", () => {
      clearTimeout(timer);
      timer = window.setTimeout(() => {
        root.dataset.pending = box.value;
        model.set("spec", box.value);
        model.save_changes();
      }, 40);
    });
  }
  const dimsBox = el("select", "ss-dims");
  dimsBox.setAttribute("aria-label", "Grid dimensions");
  dimsBox.hidden = true;
  controls.append(
    dimsBox,
    el("span", "spacer"),
    button("−", "Zoom out", () => grid?.zoomBy(1.25)),
    button("+", "Zoom in", () => grid?.zoomBy(0.8)),
    button("reset", "Reset zoom", () => grid?.resetView()),
  );

  /** @type {import("../js/components/grid.js").GridView | null} */
  let grid = null;
  /** @type {import("../js/components/mesh_table.js").MeshTableView | null} */
  let mesh = null;

  /** @param {Set<number> | null} ids */
  const select = (ids) => {
    grid?.highlight(ids);
    mesh?.highlight(ids);
    selection.textContent = ids ? `selected devices: ${compactIds([...ids])}` : "";
  };

  const paint = () => {
    const t0 = performance.now();
    const l = layoutOf(data);
    const d = dark();
    if (l.rank > 2) {
      const pairs = [];
      for (let i = 0; i < l.rank; i++) for (let j = i + 1; j < l.rank; j++) pairs.push(`${i},${j}`);
      const was = dimsBox.value || gridDims(l.rank, data.dims).join(",");
      setOptions(dimsBox, pairs, pairs.map((p) => `dims ${p.replace(",", " × ")}`));
      dimsBox.value = pairs.includes(was) ? was : pairs[pairs.length - 1];
    }
    dimsBox.hidden = l.rank <= 2;
    grid = layoutGrid(gridBox, l, {
      dims: l.rank > 2 ? dimsBox.value.split(",").map(Number) : null,
      dark: d,
      onTileClick: (ids) => select(ids && new Set(ids)),
    });
    summary.replaceChildren(layoutSummary(l));
    const m = l.mesh;
    const drawMesh = () => {
      mesh = meshTable(meshHolder, m, {
        caption: [`Mesh(${m.axis_names.map((n, i) => `'${n}': ${m.shape[i]}`).join(", ")}) — axis types ${m.axis_types.join(", ")}`],
        colour: (id) => l.colourOf(id, d),
        title: (id, at) => `device ${id}: ${l.whereIs(id)}; mesh index (${at.join(", ")})`,
        onDeviceClick: (id) => select(new Set([id])),
      });
    };
    // A mesh of thousands of devices is a table of thousands of cells: built when opened, so the grid
    // paints first (the grid and its hover cards say the same per tile).
    const meshHolder = el("div");
    mesh = null;
    if (l.shards.length > MESH_TABLE_OPEN_MAX) {
      const details = el("details", "ss-mesh-details");
      details.append(el("summary", "", `Mesh table: ${meshAxes(m)} (${l.shards.length} devices)`), meshHolder);
      details.addEventListener("toggle", () => details.open && !meshHolder.firstChild && drawMesh());
      meshBox.replaceChildren(details);
    } else {
      meshBox.replaceChildren(meshHolder);
      drawMesh();
    }
    selection.textContent = "";
    painted(root, t0);
  };

  const onPayload = () => {
    data = decode(model.get("payload"));
    showError(errorBox, null);
    for (const box of [gridBox, summary, meshBox]) box.classList.remove("stale");
    paint();
  };
  const onError = () => {
    const err = model.get("error");
    const bad = err && err.code;
    showError(errorBox, bad ? new ApiError(422, err) : null, { source: specBox ? specBox.value : "" });
    // everything the last valid layout drew is dimmed together: the grid, its summary and its mesh table
    for (const box of [gridBox, summary, meshBox]) box.classList.toggle("stale", Boolean(bad));
    if (bad) root.dataset.errors = String(Number(root.dataset.errors || 0) + 1);
  };
  dimsBox.addEventListener("change", paint);
  model.on("change:payload", onPayload);
  model.on("change:error", onError);
  paint();
  onError();
  return {
    paint,
    dispose() {
      clearTimeout(timer);
      model.off("change:payload", onPayload);
      model.off("change:error", onError);
    },
  };
}

// ---------------------------------------------------------------- a pytree: the snapshot view

/**
 * The snapshot view: its summary, an inspect_jit capture's collectives (groups on the mesh),
 * memory per device, the leaf tree with its filter, and the clicked leaf's grid.
 * @param {HTMLElement} root @param {Model} model @param {() => boolean} dark @param {HTMLElement} head
 * @returns {{paint: () => void, dispose: () => void}}
 */
function snapshotView(root, model, dark, head) {
  const snap = decode(model.get("payload")).snapshot;
  const platform = String(snap.platform).toUpperCase();
  const layoutOfLeaf = (/** @type {any} */ leaf) => (leaf.layout !== null && leaf.layout !== undefined ? snap.layouts[leaf.layout] : null);
  const summary = el("div", "summary ss-summary");
  summary.append(defList(snapshotFacts(snap, rulesText)));
  root.append(head, summary);

  // collectives (inspect_jit)
  const coll = snap.collectives || [];
  const collTable = el("div", "table-wrap ss-collectives");
  const collMesh = el("div", "collective-mesh");
  let chosen = 0;
  if (coll.length) {
    const section = el("section", "ss-section");
    section.append(heading(`Collectives (compiled HLO): ${coll.length}`), collTable, collMesh);
    root.append(section);
  }
  const meshIds = snap.meshes.length
    ? snap.meshes[0]
    : { shape: [snap.devices.id.length], axis_names: ["devices"], device_ids: snap.devices.id };

  // memory per device
  const memFlag = el("p", "memory-flag");
  const memBars = el("div", "ss-memory");
  const memSection = el("section", "ss-section");
  memSection.append(heading("Memory per device"), memFlag, memBars);
  root.append(memSection);
  const hostOf = new Map(snap.devices.id.map((/** @type {number} */ id, /** @type {number} */ k) => [id, snap.devices.process_index[k]]));

  // leaves
  const filter = el("input", "ss-filter");
  filter.type = "search";
  filter.spellcheck = false;
  filter.placeholder = "path, spec or axis";
  filter.setAttribute("aria-label", "Filter leaves");
  const count = el("p", "muted ss-count");
  const tableBox = el("div", "leaf-table");
  tableBox.tabIndex = 0;
  const leafTitle = el("h4", "ss-heading ss-leaf-title", "Leaf");
  const leafSummary = el("div", "summary ss-leaf-summary");
  const leafGrid = el("div", "grid-wrap ss-grid");
  const leaves = el("div", "ss-leaves");
  const leafBox = el("div", "ss-leaf");
  const filterRow = el("div", "toolbar");
  filterRow.append(filter, count);
  leaves.append(heading("Leaves"), filterRow, tableBox);
  leafBox.append(leafTitle, leafSummary, leafGrid);
  const pair = el("section", "ss-section ss-layout");
  pair.append(leaves, leafBox);
  root.append(pair);

  const tree = leafTree(tableBox, snap.leaves, {
    now: (i) => {
      const leaf = snap.leaves[i];
      return { spec: leaf.spec, layout: layoutOfLeaf(leaf), error: null, changed: false };
    },
    kind: kindText,
    onOpen: (i) => openLeaf(i),
  });
  // Open first the leaf split into the most blocks (the first such): more telling than a replicated scalar.
  let current = -1;
  snap.leaves.forEach((/** @type {any} */ leaf, /** @type {number} */ i) => {
    const lay = layoutOfLeaf(leaf);
    if (lay && (current < 0 || lay.tiles.length > layoutOfLeaf(snap.leaves[current]).tiles.length)) current = i;
  });

  /** @param {number} i */
  const openLeaf = (i) => {
    current = i;
    tree.select(snap.leaves[i].path);
    drawLeaf();
  };

  const drawLeaf = () => {
    if (current < 0) {
      leafSummary.replaceChildren(el("p", "muted", "No leaf has a layout."));
      leafGrid.hidden = true;
      return;
    }
    const leaf = snap.leaves[current];
    const lay = layoutOfLeaf(leaf);
    leafTitle.textContent = leaf.path;
    /** @type {[string, string | null | undefined][]} */
    const rows = [
      ["type", leaf.box ? `${leaf.box} of ${leaf.type}` : leaf.type],
      ["kind", kindOnDevices(leaf)],
      ["array", leaf.shape ? `(${leaf.shape.join(", ")}) ${leaf.dtype}` : null],
      ["spec", leaf.spec || leaf.sharding],
      ["logical axes", logicalAxesText(leaf.logical_axes)],
      ["shard shape", lay ? `(${lay.shard_shape.join(", ")})` : null],
      ["per device", lay ? fmtBytes(lay.bytes_per_device) : null],
      ["replication", lay ? `${lay.replication_factor}×${lay.replicated_axes.length ? ` (over ${lay.replicated_axes.join(", ")})` : ""}` : null],
      ["note", leaf.note],
    ];
    if (lay) lay.dims.forEach((/** @type {any} */ d, /** @type {number} */ k) => rows.push([k === 0 ? "split" : " ", d.text]));
    leafSummary.replaceChildren(defList(rows));
    leafGrid.hidden = !lay;
    if (lay) {
      const held = new Set();
      if (leaf.addressable_devices) {
        const mine = new Set(leaf.addressable_devices);
        for (const s of lay.shards) if (!mine.has(s.device_id)) held.add(s.device_id);
      }
      layoutGrid(leafGrid, Layout.fromSnapshot(snap, lay, leaf.mesh), { dark: dark(), interactive: false, faded: held });
      leafGrid.dataset.path = leaf.path;
    }
  };

  /** @param {string} q lower-case words @param {number} i */
  const matches = (q, i) => {
    if (!q) return true;
    const leaf = snap.leaves[i];
    const lay = layoutOfLeaf(leaf);
    const axes = lay ? lay.dims.flatMap((/** @type {any} */ d) => d.axes) : [];
    const text = [leaf.path, leaf.spec || "", leaf.dtype || "", (leaf.logical_axes || []).join(" "), axes.join(" "), leaf.box || "", leaf.type].join(" ").toLowerCase();
    return q.split(/\s+/).filter(Boolean).every((w) => text.includes(w));
  };
  const applyFilter = () => {
    const n = tree.filter((i) => matches(filter.value.trim().toLowerCase(), i));
    const total = snap.leaves.length;
    count.textContent = n === total ? `${total} leaves` : `${n} of ${total} leaves match`;
    root.dataset.filtered = String(Number(root.dataset.filtered || 0) + 1);
  };
  let timer = 0;
  filter.addEventListener("input", () => {
    clearTimeout(timer);
    timer = window.setTimeout(applyFilter, 80);
  });

  const drawCollective = () => collectiveOnMesh(collMesh, meshIds, coll[chosen], chosen + 1, { dark: dark() });
  const paint = () => {
    const t0 = performance.now();
    memoryVerdict(memFlag, snap.memory, null, platform);
    memoryBars(memBars, snap.memory, { platform, hostOf, dark: dark() });
    if (coll.length) {
      collectivesTable(collTable, coll, {
        selected: chosen,
        onSelect: (i) => {
          chosen = i;
          drawCollective();
        },
      });
      drawCollective();
    }
    drawLeaf();
    painted(root, t0);
  };
  applyFilter();
  if (current >= 0) tree.select(snap.leaves[current].path);
  paint();
  return { paint, dispose: () => clearTimeout(timer) };
}

// ---------------------------------------------------------------- the widget

/** The header: the view's name and, with a dashboard, Publish → Open in dashboard / Copy link. @param {Model} model */
function header(/** @type {any} */ data, model) {
  const head = el("div", "toolbar ss-head");
  head.append(el("span", "ss-title", data.name), el("span", "spacer"));
  const linkError = el("div", "error ss-link-error");
  linkError.setAttribute("role", "alert");
  linkError.hidden = true;
  const status = el("span", "muted ss-status");
  status.setAttribute("role", "status");
  const dashboard = model.get("dashboard");
  if (!dashboard) return { head, dispose: () => {} };
  const publish = button("Publish to dashboard", `Publish to the dashboard at ${dashboard}`, () => {
    status.textContent = "publishing…";
    model.set("publish_requests", Number(model.get("publish_requests") || 0) + 1);
    model.save_changes();
  });
  const open = el("a", "ss-open", "Open in dashboard");
  open.target = "_blank";
  open.rel = "noopener noreferrer";
  open.hidden = true;
  const copy = button("Copy link", "Copy the dashboard link", async () => {
    try {
      await navigator.clipboard.writeText(open.href);
      status.textContent = "link copied";
    } catch {
      status.textContent = open.href;
    }
  });
  copy.hidden = true;
  const onLink = () => {
    const link = model.get("link");
    status.textContent = "";
    open.hidden = copy.hidden = !link;
    if (link) open.href = link;
  };
  const onLinkError = () => {
    const err = model.get("link_error");
    if (err && err.code) status.textContent = "";
    showError(linkError, err && err.code ? new ApiError(0, err) : null);
  };
  head.append(publish, open, copy, status, linkError);
  model.on("change:link", onLink);
  model.on("change:link_error", onLinkError);
  onLink();
  return {
    head,
    dispose() {
      model.off("change:link", onLink);
      model.off("change:link_error", onLinkError);
    },
  };
}

/** @param {{model: Model, el: HTMLElement}} ctx */
function render({ model, el: host }) {
  const t0 = performance.now();
  const root = el("div", "shardscope-nb");
  root.dataset.cardHome = ""; // in a shadow root (marimo), the hover card lives here, under the widget's styles
  host.replaceChildren(root);
  const data = decode(model.get("payload"));
  root.dataset.kind = data.kind;
  let darkNow = isDarkAt(host);
  root.classList.toggle("ss-dark", darkNow);
  const { head, dispose: stopHead } = header(data, model);
  const view = data.kind === "snapshot" ? snapshotView(root, model, () => darkNow, head) : layoutView(root, model, () => darkNow, head);
  const retheme = () => {
    const d = isDarkAt(host);
    if (d === darkNow) return;
    darkNow = d;
    root.classList.toggle("ss-dark", d);
    view.paint();
  };
  const stopTheme = watchTheme(retheme);
  requestAnimationFrame(() => {
    root.dataset.firstPaintMs = String(Math.round(performance.now() - t0)); // payload decoded, drawn, painted
    retheme(); // once the output cell is in the page, its background can be read
  });
  return () => {
    stopTheme();
    stopHead();
    view.dispose();
  };
}

export default { render };
