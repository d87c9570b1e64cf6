"""Shardscope's HTTP layer: FastAPI routes over sharding_core, the link store, limits and security."""
