"""Shardscope: a web dashboard for seeing and debugging how JAX arrays are sharded."""

__version__ = "0.1.0"
