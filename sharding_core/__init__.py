"""Shardscope's domain: device sets, meshes, PartitionSpecs and layouts, computed by JAX."""
