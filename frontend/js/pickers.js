// The device-set pickers (TPU generation/slice/slices, GPU kind/hosts, CPU count, local), shared by
// every page that has the "Devices" fieldset. Built from /api/platforms.

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** @param {HTMLSelectElement|HTMLElement} select @param {string[]} values @param {string[]} [labels] */
export function setOptions(select, values, labels) {
  select.replaceChildren();
  values.forEach((v, i) => {
    const o = document.createElement("option");
    o.value = v;
    o.textContent = labels ? labels[i] : v;
    select.appendChild(o);
  });
}

/** Fills the generation and GPU kind lists from the catalog. @param {any} catalog */
export function buildPickers(catalog) {
  setOptions($("tpu-gen"), catalog.tpu.map((g) => g.name), catalog.tpu.map((g) => `${g.name} (${g.device_kind})`));
  setOptions($("gpu-kind"), catalog.gpu.map((g) => g.name), catalog.gpu.map((g) => `${g.name} (${g.device_kind})`));
}

/** @param {any} catalog */
export function fillTopologies(catalog) {
  const gen = catalog.tpu.find((g) => g.name === /** @type {HTMLSelectElement} */ ($("tpu-gen")).value);
  if (gen) setOptions($("tpu-topo"), gen.topologies);
}

/** Shows the pickers for the kind of device set in `state.devices`. @param {any} state @param {any} catalog */
export function devicesToPickers(state, catalog) {
  const [kind, ...rest] = state.devices.split(":");
  const k = ["cpu", "gpu", "tpu", "local"].includes(kind) ? kind : "tpu";
  /** @type {HTMLSelectElement} */ ($("dev-kind")).value = k;
  for (const sec of ["cpu", "gpu", "tpu"]) $(`dev-${sec}`).hidden = sec !== k;
  if (k === "cpu") /** @type {HTMLInputElement} */ ($("cpu-count")).value = rest[0] || "8";
  if (k === "gpu") {
    /** @type {HTMLSelectElement} */ ($("gpu-kind")).value = rest[0] || "h100";
    const [h, g] = (rest[1] || "1x8").split("x");
    /** @type {HTMLInputElement} */ ($("gpu-hosts")).value = h;
    /** @type {HTMLInputElement} */ ($("gpu-per-host")).value = g;
  }
  if (k === "tpu" && catalog) {
    /** @type {HTMLSelectElement} */ ($("tpu-gen")).value = rest[0] || "v5e";
    fillTopologies(catalog);
    const topo = /** @type {HTMLSelectElement} */ ($("tpu-topo"));
    if (rest[1] && ![...topo.options].some((o) => o.value === rest[1])) {
      const o = document.createElement("option");
      o.value = o.textContent = rest[1];
      topo.appendChild(o);
    }
    topo.value = rest[1] || topo.options[0]?.value;
    /** @type {HTMLInputElement} */ ($("tpu-slices")).value = String(state.slices);
  }
  $("devices-string").textContent = state.devices + (state.slices > 1 ? ` × ${state.slices} slices` : "");
}

/** Reads the pickers into `state.devices` and `state.slices`. @param {any} state */
export function pickersToDevices(state) {
  const k = /** @type {HTMLSelectElement} */ ($("dev-kind")).value;
  const v = (id) => /** @type {HTMLInputElement} */ ($(id)).value.trim();
  state.slices = 1;
  if (k === "cpu") state.devices = `cpu:${v("cpu-count")}`;
  else if (k === "gpu") state.devices = `gpu:${v("gpu-kind")}:${v("gpu-hosts")}x${v("gpu-per-host")}`;
  else if (k === "tpu") {
    state.devices = `tpu:${v("tpu-gen")}:${v("tpu-topo")}`;
    state.slices = Math.max(1, parseInt(v("tpu-slices"), 10) || 1);
  } else state.devices = "local";
}
