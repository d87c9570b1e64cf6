// Examples that are the tutorials' own cells: the mesh, axis names, array and spec exactly as each
// tutorial writes them, on the devices it runs on (8 CPU devices where it sets
// --xla_force_host_platform_device_count=8; Colab's TPU v2-8 for JAX's parallelism introduction, whose
// printed device order is that slice's). Each names its source, so what the grid shows can be checked
// against the tutorial's own printout.

/**
 * @typedef {{label: string, source: string, s: Record<string, string | number>}} LayoutExample
 *   label: what the button says; source: the tutorial and the cell; s: the layout state it opens
 * @typedef {{label: string, source: string, query: string}} KernelExample query: the kernel lab's
 */

/** @type {LayoutExample[]} */
export const LAYOUT_EXAMPLES = [
  {
    label: "intro: arange(32.0).reshape(4, 8), P('x', 'y')",
    source: "JAX, Introduction to parallel programming: create_device_mesh((2, 4)) on Colab's TPU v2-8, NamedSharding(mesh, P('x', 'y'))",
    s: { devices: "tpu:v2:2x2", mesh: "2x4", axes: "x,y", spec: "P('x', 'y')", shape: "4,8" },
  },
  {
    label: "intro: arr on one device",
    source: "JAX, Introduction to parallel programming: arr = jnp.arange(32.0).reshape(4, 8) before it is sharded (SingleDeviceSharding)",
    s: { devices: "tpu:v2:2x2", mesh: "1x1", axes: "x,y", order: "single", ids: "0", spec: "P()", shape: "4,8" },
  },
  {
    label: "migration: arange(8) on Mesh(devices.reshape(4, 2))",
    source: "JAX, jax.Array migration guide: Mesh(np.array(jax.devices()).reshape(4, 2), ('x', 'y')), NamedSharding(mesh, P('x')) on 8 devices",
    s: { devices: "cpu:8", mesh: "4x2", axes: "x,y", order: "iota", spec: "P('x')", shape: "8" },
  },
  {
    label: "GDA: (64, 32) on a 4x8 (hosts, devices) mesh",
    source: "JAX, GlobalDeviceArray docstring: global_mesh.shape == {'x': 4, 'y': 8} (hosts, devices), global_input_shape = (64, 32), P('x', 'y')",
    s: { devices: "gpu:a100:4x8", mesh: "4x8", axes: "x,y", order: "iota", spec: "P('x', 'y')", shape: "64,32" },
  },
  {
    label: "Flax: W1 (1024, 1024), (None, 'model')",
    source: "Flax, Scale up Flax Modules on multiple devices: create_device_mesh((2, 4)), axis_names=('data', 'model'), 8 fake CPU devices",
    s: { devices: "cpu:8", mesh: "2x4", axes: "data,model", spec: "P(None, 'model')", shape: "1024,1024" },
  },
  {
    label: "Flax: x (8, 1024), ('data', None)",
    source: "Flax, Scale up Flax Modules on multiple devices: x = jnp.ones((BATCH, DEPTH)), mesh_sharding(PartitionSpec('data', None))",
    s: { devices: "cpu:8", mesh: "2x4", axes: "data,model", spec: "P('data', None)", shape: "8,1024" },
  },
  {
    label: "Flax logical: ('embed', 'hidden')",
    source: "Flax, Scale up Flax Modules on multiple devices, logical axis annotation: W1 with_logical_partitioning(('embed', 'hidden'))",
    s: { devices: "cpu:8", mesh: "2x4", axes: "data,model", spec: "('embed', 'hidden')", shape: "1024,1024", rules: "('batch', 'data'), ('hidden', 'model'), ('embed', None)" },
  },
  {
    label: "shard_map: arange(8 * 16.) on create_device_mesh((4, 2))",
    source: "JAX, Manual parallelism with shard_map: a = jnp.arange(8 * 16.).reshape(8, 16), in_specs P('x', 'y') on 8 CPU devices",
    s: { devices: "cpu:8", mesh: "4x2", axes: "x,y", spec: "P('x', 'y')", shape: "8,16" },
  },
  {
    label: "2 v5e slices: hybrid ICI × DCN",
    source: "mesh_utils.create_hybrid_device_mesh((1, 4), (2, 1)) over two v5e-4 slices",
    s: { devices: "tpu:v5e:2x2", slices: 2, mesh: "2x4", axes: "data,model", order: "hybrid", dcn: "2x1", spec: "P('data', 'model')", shape: "8,16" },
  },
  {
    label: "v5e 16x16: 256 chips, P(('x', 'y'), None)",
    source: "jax.make_mesh((16, 16), ('x', 'y')) on a v5e-256, batch over both axes",
    s: { devices: "tpu:v5e:16x16", mesh: "16x16", axes: "x,y", spec: "P(('x', 'y'), None)", shape: "1024,1024" },
  },
];

/** @type {KernelExample[]} */
export const KERNEL_EXAMPLES = [
  {
    label: "intro: psum of arange(32) → 496",
    source: "JAX, Introduction to parallel programming: shard_map(f, mesh=Mesh(jax.devices(), 'x'), in_specs=P('x'), out_specs=P()) with f = psum(x.sum(), 'x')",
    query: "kernel=psum_sum&devices=cpu:8&mesh=8&axes=x&types=auto&data=arange&in=32|P('x')|int32",
  },
  {
    label: "intro: f_contract, x.sum(axis=0)",
    source: "JAX, Introduction to parallel programming: arange(32.0).reshape(4, 8) with P('x', 'y') on Colab's TPU v2-8, summed along axis 0",
    query: "kernel=sum_axis0&devices=tpu:v2:2x2&mesh=2x4&axes=x,y&types=auto&data=arange&in=4,8|P('x', 'y')|float32",
  },
  {
    label: "intro: f_elementwise, 2·sin(x) + 1",
    source: "JAX, Introduction to parallel programming: the elementwise function keeps arr_sharded's sharding",
    query: "kernel=elementwise&devices=tpu:v2:2x2&mesh=2x4&axes=x,y&types=auto&data=arange&in=4,8|P('x', 'y')|float32",
  },
];
