// model/: the data every view draws from, built from API answers and never from the DOM. This
// module: THE layout model — one array's layout (spec, mesh, shards, tiles, the devices holding
// them) however it arrived: an /api/layout answer, a kernel output (the same shape), or a snapshot's
// layout entry with the snapshot's mesh and device tables. Every view colours a device the same way
// through it.

/**
 * @typedef {{id: number, process_index: number, core_on_chip: number, coords: number[] | null,
 *   slice_index?: number}} Device
 * @typedef {{index: number[][], ids: number[], replicas: Map<number, number>}} Tile
 *   one distinct block of the array: its index bounds (per dimension [start, stop)), the devices
 *   holding it, and each one's replica id
 * @typedef {{shape: number[], axis_names: string[], axis_types: string[], device_ids: any}} Mesh
 *   device_ids nested in mesh order
 * @typedef {{dim: number, size: number, axes: string[], axis_sizes: number[], blocks: number, text: string}} DimSplit
 */

/**
 * A stable colour per number (golden-angle hues): a device id keeps its colour in every view.
 * @param {number} n
 * @param {boolean} dark
 * @returns {string}
 */
export function paletteColour(n, dark) {
  const hue = Math.round((n * 137.508) % 360);
  const sat = 55 + ((n * 7) % 3) * 10;
  const light = dark ? 34 + ((n * 3) % 3) * 6 : 72 + ((n * 5) % 3) * 6;
  return `hsl(${hue}, ${sat}%, ${light}%)`;
}

// Ten categorical colours (Tableau's), light ones under dark text and deep ones under light text:
// device groups 0 and 3 of a collective must never look alike, as golden-angle hues of 3 and 24 did.
// Ordered so that neighbours differ most: blue, orange, green, purple, red, yellow, teal, pink, brown, grey.
const GROUPS_LIGHT = ["#a0cbe8", "#ffbe7d", "#8cd17d", "#d4a6c8", "#ff9d9a", "#f1ce63", "#86bcb6", "#fabfd2", "#d7b5a6", "#c9c4bf"];
const GROUPS_DARK = ["#2f5f8a", "#a85c12", "#3b7a34", "#7d4f75", "#a8393b", "#8a6f12", "#3f7f7a", "#a3506c", "#6e5242", "#5f5a55"];

/**
 * The colour of device group `i` (a collective's replica groups, a mesh axis's rings): ten
 * categorical colours, then golden-angle hues.
 * @param {number} i
 * @param {boolean} dark
 * @returns {string}
 */
export function groupColour(i, dark) {
  if (i < GROUPS_LIGHT.length) return (dark ? GROUPS_DARK : GROUPS_LIGHT)[i];
  return paletteColour(i, dark);
}

/** The colour of a device that holds no tile of the layout (or when there is no layout). @param {boolean} dark */
export function noTileColour(dark) {
  return dark ? "#3a3f47" : "#c9ced6";
}

/**
 * The mesh a layout without one is drawn on (a single-device array, a snapshot leaf or a capture with
 * no mesh): one axis, "devices", of the given ids in order. The one 1-D fallback every view uses.
 * @param {number[]} ids
 * @returns {Mesh}
 */
export function deviceRow(ids) {
  return { shape: [ids.length], axis_names: ["devices"], axis_types: ["Auto"], device_ids: ids };
}

/** Devices by id from a columnar table {id: [...], process_index: [...], ...}. @param {any} cols */
function devicesFromColumns(cols) {
  /** @type {Map<number, Device>} */
  const byId = new Map();
  cols.id.forEach((/** @type {number} */ id, /** @type {number} */ i) => {
    byId.set(id, {
      id,
      process_index: cols.process_index[i],
      core_on_chip: cols.core_on_chip[i],
      coords: cols.coords ? cols.coords[i] : null,
      slice_index: cols.slice_index ? cols.slice_index[i] : undefined,
    });
  });
  return byId;
}

export class Layout {
  /**
   * Use the static constructors.
   * @param {any} json the fields of an /api/layout answer (spec, shape, dtype, shard_shape, shards,
   *   tiles, dims, replication and byte counts, platform, devices_key)
   * @param {Mesh} mesh
   * @param {Map<number, Device>} devices
   */
  constructor(json, mesh, devices) {
    /** The JSON this was built from (kernel outputs add name, typeof, max_abs_error). */
    this.json = json;
    /** @type {string} the spec as JAX prints it, e.g. "P('x', None)" */
    this.spec = json.spec || "(no PartitionSpec)";
    /** @type {number[]} */
    this.shape = json.shape;
    /** @type {string} */
    this.dtype = json.dtype;
    /** @type {number[]} */
    this.shardShape = json.shard_shape;
    /** @type {DimSplit[]} */
    this.dims = json.dims;
    /** @type {string} "TPU", "GPU", "CPU": how tiles name their devices */
    this.platform = String(json.platform).toUpperCase();
    /** @type {string} the device set ("tpu:v5e:4x4", a snapshot's name) */
    this.devicesKey = json.devices_key;
    this.mesh = mesh;
    this.devices = devices;
    /** @type {{device_id: number, index: number[][], replica_id: number, tile: number}[]} */
    this.shards = json.shards;
    /** @type {Map<number, number>} device id -> its tile */
    this.tileOfDevice = new Map();
    /** @type {Map<number, number>} device id -> its replica id */
    this.replicaOfDevice = new Map();
    const replicaOf = this.replicaOfDevice;
    /** @type {Tile[]} each tile's `replicas` is made when first read (a Map per tile costs at 6144 tiles) */
    this.tiles = json.tiles.map((/** @type {number[]} */ ids) => {
      /** @type {Map<number, number> | null} */
      let replicas = null;
      return {
        index: /** @type {number[][]} */ ([]),
        ids,
        get replicas() {
          if (!replicas) replicas = new Map(ids.map((id) => [id, /** @type {number} */ (replicaOf.get(id))]));
          return replicas;
        },
      };
    });
    for (const s of json.shards) {
      const t = this.tiles[s.tile];
      if (!t.index.length) t.index = s.index;
      replicaOf.set(s.device_id, s.replica_id);
      this.tileOfDevice.set(s.device_id, s.tile);
    }
  }

  /**
   * From an /api/layout answer, a kernel run's output or input (the same fields, plus a name), or a
   * notebook's layout (``Layout.to_json``: no mesh for a program's own single-device array, no
   * devices_key for its own devices).
   * @param {any} json
   * @returns {Layout}
   */
  static fromApi(json) {
    const ids = json.devices.id;
    const key = json.devices_key || `${ids.length} ${json.device_kind || json.platform} devices`;
    return new Layout({ ...json, devices_key: key }, json.mesh || deviceRow(ids), devicesFromColumns(json.devices));
  }

  /**
   * From a snapshot's layout entry, which names neither its mesh nor its devices: they come from the
   * snapshot's `meshes` (the leaf's `mesh` index; none: a 1-D mesh of the shards' devices) and its
   * columnar `devices` table.
   * @param {any} snap the snapshot (or merged run) as GET /api/snapshots/<id> answers
   * @param {any} entry one of `snap.layouts` (or a what-if layout)
   * @param {number | null} meshIndex the leaf's `mesh`
   * @returns {Layout}
   */
  static fromSnapshot(snap, entry, meshIndex) {
    const order = entry.shards.map((/** @type {{device_id: number}} */ s) => s.device_id);
    const mesh = meshIndex !== null && meshIndex !== undefined ? snap.meshes[meshIndex] : deviceRow(order);
    const all = devicesFromColumns(snap.devices);
    /** @type {Map<number, Device>} */
    const devices = new Map();
    for (const id of order) {
      const d = all.get(id);
      if (d) devices.set(id, d);
    }
    return new Layout({ ...entry, platform: snap.platform, devices_key: snap.name }, mesh, devices);
  }

  /** @returns {number} the array's rank */
  get rank() {
    return this.shape.length;
  }

  /** @returns {number[]} the mesh's device ids in mesh order */
  get meshIds() {
    return /** @type {number[]} */ (this.mesh.device_ids.flat(Infinity));
  }

  /** @param {number} id @returns {Device | undefined} */
  device(id) {
    return this.devices.get(id);
  }

  /** The devices holding the same block as device `id` (itself alone if it holds none). @param {number} id */
  holders(id) {
    const k = this.tileOfDevice.get(id);
    return k === undefined ? [id] : this.tiles[k].ids;
  }

  /**
   * A device's colour: that of the tile it holds (every holder of a block has the same colour, the
   * colour of the block's lowest device id), grey when it holds none.
   * @param {number} id
   * @param {boolean} dark
   * @returns {string}
   */
  colourOf(id, dark) {
    const k = this.tileOfDevice.get(id);
    return k === undefined ? noTileColour(dark) : paletteColour(Math.min(...this.tiles[k].ids), dark);
  }

  /** Where a device sits: "coords (1,0,0) core 0, host 0" as far as it is known. @param {number} id */
  whereIs(id) {
    const d = this.devices.get(id);
    const where = d && d.coords ? `coords (${d.coords.join(",")}) core ${d.core_on_chip}, ` : "";
    const slice = d && d.slice_index !== undefined && d.slice_index !== null ? `slice ${d.slice_index}, ` : "";
    return `${where}${slice}host ${d ? d.process_index : "?"}`;
  }
}
