// The notebook widget's host (hosts/host.js's contract): the panels the dashboard mounts, answered in
// the kernel over anywidget's synced traits (shardscope/notebook/widget.py) — no server, no network.
//
// Traits: payload (bytes, kernel → page: the view shown, {kind: "layout", layout, editable, spec_text,
// name} or {kind: "snapshot", snapshot, name}); request (page → kernel: {id, method, params}, method
// "layout" — the array laid out again with another spec, shape or dtype, as /api/layout answers — or
// "whatif" — the snapshot under other Flax rules, as /api/snapshots/whatif answers); answer (bytes,
// kernel → page: {id, result} or {id, error: {code, message, hint?}}); dashboard, publish_requests,
// link, link_error (Publish).

import { ApiError } from "../js/lib/api.js";
import { countOn, markOn } from "../js/hosts/host.js";
import { VIEWS } from "../js/lib/vocabulary.js";
import { memoryBars } from "./memory_bars.js";
import { isDarkAt, watchTheme } from "./theme.js";

/** @typedef {{get: (k: string) => any, set: (k: string, v: any) => void, save_changes: () => void,
 *   on: (e: string, f: () => void) => void, off: (e: string, f: () => void) => void}} Model anywidget's model */

/** A bytes trait (a DataView when it arrives) as data. @param {any} value */
export function decode(value) {
  if (value instanceof DataView || value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
    return JSON.parse(new TextDecoder().decode(/** @type {ArrayBuffer} */ (value)));
  }
  return typeof value === "string" ? JSON.parse(value) : value;
}

/** Fields a widget's layout cannot change: its array lives on its own devices and mesh. */
const MESH_FIELDS = ["devices", "slices", "mesh", "axes", "order", "types", "ids", "dcn", "split", "rules", "reshard"];

/**
 * The layout panel's state for a layout the kernel sent (what the panel's controls show).
 * @param {any} data the payload
 */
function layoutState(data) {
  const l = data.layout;
  const mesh = l.mesh;
  return {
    devices: l.devices_key || "local",
    mesh: mesh ? mesh.shape.join("x") : String(l.devices.id.length),
    axes: mesh ? mesh.axis_names.join(",") : "devices",
    spec: data.spec_text || l.spec || "P()",
    shape: l.shape.join(","),
    dtype: l.dtype,
    dims: data.dims ? data.dims.join(",") : "",
  };
}

/**
 * A dashboard view's address at `query` on the dashboard at `base` ("http://127.0.0.1:8000").
 * @param {string} base
 * @param {string} view
 * @param {string} query
 */
function dashboardHref(base, view, query) {
  const page = VIEWS.find((v) => v.name === view)?.href || "/";
  return `${base.replace(/\/+$/, "")}${page}${query ? `?${query}` : ""}`;
}

/**
 * The widget's host for the panel of `data` (the payload), drawing into `root` inside the output cell `cell`.
 * @param {Model} model
 * @param {HTMLElement} root the widget's root (.shardscope-nb): counters and the theme class live on it
 * @param {HTMLElement} cell where anywidget put the widget (its theme is read there)
 * @param {any} data the payload
 * @returns {{host: import("../js/hosts/host.js").Host, state: any, dispose: () => void}}
 */
export function widgetHost(model, root, cell, data) {
  const t0 = performance.now();
  let dark = isDarkAt(cell);
  root.classList.toggle("ss-dark", dark);
  /** @type {Set<() => void>} */
  const themed = new Set();
  const stopTheme = watchTheme(() => {
    const d = isDarkAt(cell);
    if (d === dark) return;
    dark = d;
    root.classList.toggle("ss-dark", d);
    for (const fn of themed) fn();
  });
  // once the output cell is in the page, its background can be read
  requestAnimationFrame(() => {
    const d = isDarkAt(cell);
    if (d !== dark) {
      dark = d;
      root.classList.toggle("ss-dark", d);
      for (const fn of themed) fn();
    }
  });

  // ---- requests to the kernel, answered on the answer trait
  let nextId = Number(model.get("request")?.id || 0);
  /** @type {Map<number, {resolve: (v: any) => void, reject: (e: unknown) => void}>} */
  const waiting = new Map();
  const onAnswer = () => {
    const a = decode(model.get("answer"));
    const w = a && waiting.get(a.id);
    if (!w) return;
    waiting.delete(a.id);
    if (a.error) w.reject(new ApiError(422, a.error));
    else w.resolve(a.result);
  };
  model.on("change:answer", onAnswer);
  /** @param {string} method @param {any} params @param {AbortSignal} [signal] */
  const ask = (method, params, signal) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      waiting.set(id, { resolve, reject });
      signal?.addEventListener("abort", () => {
        waiting.delete(id);
        reject(new DOMException("a newer request replaced this one", "AbortError"));
      });
      model.set("request", { id, method, params });
      model.save_changes();
    });

  // the layout on show answers its own state without a round trip
  const shown = data.kind === "layout" ? data.layout : null;
  const first = data.kind === "layout" ? layoutState(data) : null;
  let askedAt = t0;
  /** @type {import("../js/hosts/host.js").Data["layout"]} */
  const layout = (req, signal) => {
    askedAt = performance.now();
    const same = first && req.spec === first.spec && req.shape.join(",") === first.shape && req.dtype === first.dtype;
    if (same) return Promise.resolve(shown);
    if (!data.editable) return Promise.reject(new ApiError(422, { code: "not_editable", message: "this array's sharding is not a NamedSharding on a concrete mesh: only its own layout can be shown" }));
    return ask("layout", { spec: req.spec, shape: req.shape, dtype: req.dtype }, signal);
  };

  // ---- Publish: the kernel sends the view to its dashboard and answers with the link
  const dashboard = model.get("dashboard");
  /** @type {((link: string) => void) | null} */
  let published = null;
  /** @type {((e: unknown) => void) | null} */
  let refused = null;
  const onLink = () => published?.(model.get("link"));
  const onLinkError = () => {
    const err = model.get("link_error");
    if (err && err.code) refused?.(new ApiError(0, err));
  };
  model.on("change:link", onLink);
  model.on("change:link_error", onLinkError);
  const share = dashboard
    ? () =>
        new Promise((resolve, reject) => {
          published = (link) => link && resolve(link);
          refused = reject;
          model.set("publish_requests", Number(model.get("publish_requests") || 0) + 1);
          model.save_changes();
        })
    : null;

  let painted = false;
  /** @type {import("../js/hosts/host.js").Host} */
  const host = {
    kind: "widget",
    data: {
      platforms: null,
      layout,
      reshard: null,
      topology: null,
      topologyMesh: null,
      topologyGroups: null,
      kernels: null,
      runKernel: null,
      snapshot: () => Promise.resolve(data.snapshot),
      whatif: data.kind === "snapshot" ? (_ref, rules) => ask("whatif", { rules }) : null,
      diff: null,
      link: null,
      compare: null,
      examples: null,
    },
    dark: () => dark,
    onTheme(fn) {
      themed.add(fn);
      return () => themed.delete(fn);
    },
    bump(name) {
      countOn(root, name);
      if (name !== "rendered") return;
      // how long the drawing took, from the payload (or the request) to the painted frame
      requestAnimationFrame(() => {
        const now = performance.now();
        root.dataset.drawMs = String(Math.round(now - askedAt));
        if (!painted) root.dataset.firstPaintMs = String(Math.round(now - t0));
        painted = true;
      });
    },
    mark: (name) => markOn(root, name),
    save: () => {},
    share,
    shareLabel: "Publish to dashboard",
    // another view's address: on the dashboard the widget publishes to, when it has one (opened in a new tab)
    href: /^https?:\/\/[^\s]+$/i.test(dashboard || "") ? (view, query) => dashboardHref(dashboard, view, query) : null,
    go: null,
    memoryChart: async (container, d) => memoryBars(container, d.mem, d),
    recent: null,
    fitHeight: () => undefined,
    fixed: new Set(data.kind === "layout" && !data.editable ? [...MESH_FIELDS, "spec", "shape", "dtype"] : MESH_FIELDS),
    foldMeshAbove: 1024,
  };
  return {
    host,
    state: data.kind === "layout" ? first : { snapshot: "shown" },
    dispose() {
      stopTheme();
      themed.clear();
      model.off("change:answer", onAnswer);
      model.off("change:link", onLink);
      model.off("change:link_error", onLinkError);
      for (const w of waiting.values()) w.reject(new DOMException("the widget went away", "AbortError"));
      waiting.clear();
    },
  };
}
