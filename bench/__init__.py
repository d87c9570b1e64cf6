"""Benchmarks: each script prints a markdown table of figures and ratios (docs/benchmarks.md).

Run them from the repository root, e.g. `.venv/bin/python bench/load.py`.
"""
