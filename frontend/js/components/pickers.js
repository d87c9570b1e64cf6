// The Devices and Mesh fieldsets: device-set pickers (TPU generation / topology / slices, GPU kind /
// hosts, CPU count, local) built from the /api/platforms catalog, and the mesh's shape, axis names,
// device order and axis types. Each builds its own markup into the container it is handed.

import { codeInput, el, labelled, setOptions } from "../lib/dom.js";

/**
 * @typedef {{devices: string, slices: number}} DeviceValue  devices: "cpu:8", "gpu:h100:2x8", "tpu:v5e:4x4", "local"
 * @typedef {{mesh: string, axes: string, order: string, types: string}} MeshValue  mesh "2x4", axes "x,y"
 * @typedef {{onChange?: () => void, onInput?: () => void}} Listeners onChange: a choice was made
 *   (a select, or a typed field committed); onInput: a field is being typed in
 */

const KIND_LABELS = /** @type {Record<string, string>} */ ({
  tpu: "TPU slice",
  gpu: "GPU hosts",
  cpu: "CPU",
  local: "local (this server's jax.devices())",
});

/**
 * @param {HTMLElement} control
 * @param {Listeners} on
 */
function listen(control, on) {
  if (control instanceof HTMLInputElement) control.addEventListener("input", () => on.onInput?.());
  control.addEventListener("change", () => on.onChange?.());
}

/**
 * A <select> of `[value, label]` options.
 * @param {[string, string][]} options
 */
function select(options) {
  const s = el("select");
  setOptions(s, options.map((o) => o[0]), options.map((o) => o[1]));
  return s;
}

/**
 * Appends the Devices fieldset to `container`.
 * @param {HTMLElement} container
 * @param {any} catalog /api/platforms ({tpu: [{name, device_kind, topologies}], gpu: [{name, device_kind}]})
 * @param {Listeners & {kinds?: string[], note?: string}} opts kinds: the kinds offered, in order;
 *   note: said after the devices string
 * @returns {{value: () => DeviceValue, set: (v: DeviceValue) => void, first: HTMLElement}} first: the
 *   control an error about the devices is marked on
 */
export function devicePicker(container, catalog, opts = {}) {
  const kinds = opts.kinds || ["tpu", "gpu", "cpu", "local"];
  const kind = select(kinds.map((k) => [k, KIND_LABELS[k]]));
  const tpuGen = el("select");
  setOptions(tpuGen, catalog.tpu.map((/** @type {any} */ g) => g.name), catalog.tpu.map((/** @type {any} */ g) => `${g.name} (${g.device_kind})`));
  const tpuTopo = el("select");
  const tpuSlices = codeInput("1", "number");
  Object.assign(tpuSlices, { min: "1", max: "64" });
  const gpuKind = el("select");
  setOptions(gpuKind, catalog.gpu.map((/** @type {any} */ g) => g.name), catalog.gpu.map((/** @type {any} */ g) => `${g.name} (${g.device_kind})`));
  const gpuHosts = codeInput("1", "number");
  gpuHosts.min = "1";
  const gpuPerHost = codeInput("8", "number");
  gpuPerHost.min = "1";
  const cpuCount = codeInput("8", "number");
  Object.assign(cpuCount, { min: "1", max: "16384" });
  /** @param {HTMLElement[]} labels */
  const row = (...labels) => {
    const r = el("div", "row");
    r.append(...labels);
    return r;
  };
  /** @type {Record<string, HTMLElement>} */
  const sections = {
    tpu: row(labelled("Generation", tpuGen), labelled("Topology", tpuTopo), labelled("Slices", tpuSlices)),
    gpu: row(labelled("GPU", gpuKind), labelled("Hosts", gpuHosts), labelled("GPUs per host", gpuPerHost)),
    cpu: row(labelled("Devices", cpuCount)),
  };
  const shown = el("code");
  const note = el("p", "muted");
  note.append("devices: ", shown, opts.note ? ` ${opts.note}` : "");
  const fieldset = el("fieldset");
  fieldset.append(el("legend", "", "Devices"), labelled("Kind", kind), sections.tpu, sections.gpu, sections.cpu, note);
  container.appendChild(fieldset);

  const fillTopologies = () => {
    const gen = catalog.tpu.find((/** @type {any} */ g) => g.name === tpuGen.value);
    if (gen) setOptions(tpuTopo, gen.topologies);
  };

  /** @returns {DeviceValue} */
  const value = () => {
    const k = kind.value;
    if (k === "cpu") return { devices: `cpu:${cpuCount.value.trim()}`, slices: 1 };
    if (k === "gpu") return { devices: `gpu:${gpuKind.value}:${gpuHosts.value.trim()}x${gpuPerHost.value.trim()}`, slices: 1 };
    if (k === "tpu") return { devices: `tpu:${tpuGen.value}:${tpuTopo.value}`, slices: Math.max(1, parseInt(tpuSlices.value, 10) || 1) };
    return { devices: "local", slices: 1 };
  };
  /** @param {DeviceValue} v */
  const showString = (v) => {
    shown.textContent = v.devices + (v.slices > 1 ? ` × ${v.slices} slices` : "");
  };
  /** @param {DeviceValue} v */
  const set = (v) => {
    const [k0, ...rest] = v.devices.split(":");
    const k = kinds.includes(k0) ? k0 : kinds[0];
    kind.value = k;
    for (const [name, sec] of Object.entries(sections)) sec.hidden = name !== k;
    if (k === "cpu") cpuCount.value = rest[0] || "8";
    if (k === "gpu") {
      gpuKind.value = rest[0] || "h100";
      const [h, g] = (rest[1] || "1x8").split("x");
      gpuHosts.value = h;
      gpuPerHost.value = g;
    }
    if (k === "tpu") {
      tpuGen.value = rest[0] || "v5e";
      fillTopologies();
      if (rest[1] && ![...tpuTopo.options].some((o) => o.value === rest[1])) {
        const o = el("option", "", rest[1]);
        o.value = rest[1];
        tpuTopo.appendChild(o);
      }
      tpuTopo.value = rest[1] || tpuTopo.options[0]?.value;
      tpuSlices.value = String(v.slices);
    }
    showString(v);
  };

  tpuGen.addEventListener("change", fillTopologies);
  // a new kind or generation shows its own fields (and their first choices)
  for (const c of [kind, tpuGen, tpuTopo, gpuKind]) c.addEventListener("change", () => set(value()));
  for (const c of [tpuSlices, gpuHosts, gpuPerHost, cpuCount]) c.addEventListener("input", () => showString(value()));
  for (const c of [kind, tpuGen, tpuTopo, tpuSlices, gpuKind, gpuHosts, gpuPerHost, cpuCount]) listen(c, opts);
  return { value, set, first: kind };
}

/**
 * Appends the Mesh fieldset to `container`.
 * @param {HTMLElement} container
 * @param {Listeners & {types?: [string, string][], orders?: readonly (readonly [string, string, string])[]}} opts
 *   types: the axis-type choices ([value, label]; none: no Axis types field); orders: the device
 *   orders offered ([value, label, what it does]; default jax.make_mesh and iota). Orders "devices",
 *   "hybrid" and "single" bring their own fields (device ids, DCN shape, the device), and
 *   make_mesh and hybrid the allow_split_physical_axes switch.
 * @returns {{value: () => MeshValue & {split: string, dcn: string, ids: string}, set: (v: MeshValue & {split?: string, dcn?: string, ids?: string}) => void,
 *   shape: HTMLInputElement, types: HTMLSelectElement | null}} shape, types: the controls errors are marked on
 */
export function meshPicker(container, opts = {}) {
  const orders = opts.orders || [["make_mesh", "jax.make_mesh", ""], ["iota", "iota (reshape of the device list)", ""]];
  const shape = codeInput("2x4");
  const axes = codeInput("x,y");
  const order = select(orders.map((o) => [o[0], o[1]]));
  const types = opts.types ? select(opts.types) : null;
  const split = el("input");
  split.type = "checkbox";
  const splitLabel = el("label", "check");
  splitLabel.append(split, " allow_split_physical_axes");
  const dcn = codeInput("");
  dcn.placeholder = "e.g. 2x1";
  const ids = codeInput("");
  const idsLabel = labelled("Device ids in mesh order", ids);
  const dcnLabel = labelled("DCN shape (per axis)", dcn);
  const what = el("p", "muted order-doc");
  const shapeLabel = labelled("Shape", shape);
  const first = el("div", "row");
  first.append(shapeLabel, labelled("Axis names", axes));
  const second = el("div", "row");
  second.append(labelled("Device order", order));
  if (types) second.appendChild(labelled("Axis types", types));
  const extra = el("div", "row order-fields");
  extra.append(dcnLabel, idsLabel, splitLabel);
  const fieldset = el("fieldset");
  fieldset.append(el("legend", "", "Mesh"), first, second, extra, what);
  container.appendChild(fieldset);
  /** Shows the fields the chosen order takes. */
  const showFields = () => {
    const o = order.value;
    dcnLabel.hidden = o !== "hybrid";
    idsLabel.hidden = o !== "devices" && o !== "single";
    idsLabel.firstChild && (idsLabel.firstChild.textContent = o === "single" ? "Device id " : "Device ids in mesh order ");
    ids.placeholder = o === "single" ? "0" : "e.g. 0,1,2,3,6,7,4,5 or 0-7";
    splitLabel.hidden = !orders.some((x) => x[0] === "hybrid") || (o !== "make_mesh" && o !== "hybrid");
    shape.disabled = o === "single";
    shapeLabel.title = o === "single" ? "one device: every mesh axis has size 1" : "";
    const doc = orders.find((x) => x[0] === o);
    what.textContent = doc ? doc[2] : "";
    what.hidden = !what.textContent;
  };
  order.addEventListener("change", showFields);
  for (const c of [shape, axes, order, split, dcn, ids, ...(types ? [types] : [])]) listen(c, opts);
  showFields();
  return {
    shape,
    types,
    value: () => ({
      mesh: shape.value.trim(),
      axes: axes.value.trim(),
      order: order.value,
      types: types ? types.value : "",
      split: split.checked && !splitLabel.hidden ? "1" : "",
      dcn: order.value === "hybrid" ? dcn.value.trim() : "",
      ids: order.value === "devices" || order.value === "single" ? ids.value.trim() : "",
    }),
    set(v) {
      shape.value = v.mesh;
      axes.value = v.axes;
      if (![...order.options].some((o) => o.value === v.order)) {
        const o = el("option", "", v.order);
        o.value = v.order;
        order.appendChild(o);
      }
      order.value = v.order;
      if (types) types.value = v.types;
      split.checked = v.split === "1";
      dcn.value = v.dcn || "";
      ids.value = v.ids || "";
      showFields();
    },
  };
}

/**
 * The controls of a layout state (model/state.js: device set, mesh, array): the Devices and Mesh
 * fieldsets appended to `container`, bound with the caller's own array fields.
 * @param {HTMLElement} container
 * @param {any} catalog /api/platforms
 * @param {Listeners & {fields: Record<string, HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>, types?: [string, string][],
 *   orders?: readonly (readonly [string, string, string])[]}} opts
 *   fields: state key -> the control showing it (e.g. {shape: …, dtype: …}); their typing and
 *   changes reach the listeners too. types: the axis-type choices (none: the state's are kept as
 *   they are, not shown)
 * @returns {{write: (s: import("../model/state.js").State) => void, read: (s: import("../model/state.js").State) => void,
 *   mark: (field: string) => void}} write: shows a state; read: copies what the controls show into one;
 *   mark: marks the control of "devices", "mesh" or "types" invalid (an error is about it)
 */
export function layoutControls(container, catalog, opts) {
  const devices = devicePicker(container, catalog, opts);
  const mesh = meshPicker(container, opts);
  for (const c of Object.values(opts.fields)) listen(c, opts);
  return {
    write(s) {
      devices.set(s);
      mesh.set(s);
      for (const [k, c] of Object.entries(opts.fields)) c.value = String(/** @type {any} */ (s)[k]);
    },
    read(s) {
      const { types, ...rest } = mesh.value();
      Object.assign(s, devices.value(), rest, opts.types ? { types } : {});
      for (const [k, c] of Object.entries(opts.fields)) /** @type {any} */ (s)[k] = c.value;
    },
    mark(field) {
      const control = field === "devices" ? devices.first : field === "types" ? mesh.types || mesh.shape : mesh.shape;
      control.setAttribute("aria-invalid", "true");
    },
  };
}
