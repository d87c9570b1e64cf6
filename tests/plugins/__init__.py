"""Pytest plugins for every test module: a real `shardscope serve` on a free port (live), Chromium (browser)."""
