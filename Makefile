# Two entry points (README): `make serve` installs and serves the dashboard on
# http://127.0.0.1:8000; `make test` installs everything (dev tools, the tpu extra, Chromium)
# and runs the whole suite. Everything installs into .venv/ from the committed uv.lock.

UV_VERSION := 0.13.9
PYTHON ?= python3
UV := .tools/bin/uv
export UV_PROJECT_ENVIRONMENT := .venv
export UV_PYTHON_DOWNLOADS := never
PORT ?= 8000

.PHONY: serve install install-dev chromium lint typecheck test bench

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

install: $(UV)
	$(UV) sync --frozen --no-dev --python 3.11

serve: install
	.venv/bin/shardscope serve --host 127.0.0.1 --port $(PORT)

install-dev: $(UV)
	$(UV) sync --frozen --all-extras --group dev --python 3.11

# Debian's Chromium drives the browser tests (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$(if [ "$$(id -u)" -ne 0 ]; then echo sudo; fi); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

lint: install-dev
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: install-dev
	.venv/bin/mypy

test: install-dev chromium lint typecheck
	.venv/bin/python -m pytest

bench: install-dev
	.venv/bin/python bench/bench_layout.py
