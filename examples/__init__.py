"""Examples of capturing and publishing a program's shardings (docs/snapshots.md)."""
