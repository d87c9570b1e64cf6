"""Examples of capturing and publishing a program's shardings (README, Capture your own program)."""
