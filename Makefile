# Two entry points (README): `make serve` installs and serves the dashboard on
# http://127.0.0.1:8000; `make test` installs everything (dev tools, the tpu extra, Chromium)
# and runs the whole suite. Everything installs into .venv/ from the committed uv.lock.

UV_VERSION := 0.13.9
PYTHON ?= python3
UV := .tools/bin/uv
export UV_PROJECT_ENVIRONMENT := .venv
export UV_PYTHON_DOWNLOADS := never
PORT ?= 8000

# The oldest JAX the package declares (pyproject's "jax>=X"): `make test` also runs the library surface
# from the built wheel in a second environment beside it (tests/test_wheel.py calls `make oldest-jax`).
OLDEST_JAX := $(shell sed -n 's/^ *"jax>=\([0-9.]*\)".*/\1/p' pyproject.toml)
OLDEST_ENV := build/oldest-jax
WHEEL_DIR ?= build/dist
GPU_ENV := build/gpu

.PHONY: serve install install-dev chromium services debootstrap lint typecheck docs docs-gen test bench wheel oldest-jax \
  newest-jax gpu-env

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

install: $(UV)
	$(UV) sync --frozen --no-dev --python 3.11

serve: install
	.venv/bin/shardscope serve --host 127.0.0.1 --port $(PORT)

# Every extra but gpu: XLA's CUDA plugin logs "Could not find cuda drivers" from every JAX process that
# starts where it is installed, GPU or not; it gets its own environment (`make gpu-env`).
install-dev: $(UV)
	$(UV) sync --frozen --all-extras --no-extra gpu --group dev --python 3.11

# The checkout with the gpu extra (the CUDA compiler plugin, no NVIDIA libraries) and flax (optax, for the
# examples) from the same lock:
# tests/test_planning.py compiles for GPU sets there, with no GPU (`make test` runs it).
gpu-env: $(UV)
	UV_PROJECT_ENVIRONMENT=$(GPU_ENV) $(UV) sync --quiet --frozen --extra gpu --extra flax --no-dev --python 3.11

# Debian's Chromium drives the browser tests (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$(if [ "$$(id -u)" -ne 0 ]; then echo sudo; fi); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Debian's PostgreSQL and Caddy: the store's tests run against a real PostgreSQL (tests/plugins/postgres.py
# starts its own cluster: initdb + pg_ctl on a free port), and the replica tests put docker-compose.yml's
# Caddyfile, run by the real caddy, in front of two replicas.
services:
	@{ command -v caddy >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || { \
	  SUDO=$$(if [ "$$(id -u)" -ne 0 ]; then echo sudo; fi); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql caddy >/dev/null; }

# Debian's debootstrap: `make newest-jax` builds its Debian 13 root with it.
debootstrap:
	@command -v debootstrap >/dev/null 2>&1 || { \
	  SUDO=$$(if [ "$$(id -u)" -ne 0 ]; then echo sudo; fi); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }

lint: install-dev
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: install-dev
	.venv/bin/mypy

# The docs site (Sphinx + MyST, docs/conf.py), offline and strict: a link to a missing page, heading or file, a
# page no table of contents lists, or any other warning fails the build; -E reads every page each time, so an
# earlier build cannot hide a warning. A few seconds.
docs: install-dev
	.venv/bin/sphinx-build -E -W --keep-going -n -q -b html docs build/docs

# The reference pages (docs/reference/) from the code that owns each; tests/test_docs.py fails when they drift.
docs-gen: install-dev
	.venv/bin/python docs/gen_reference.py
	.venv/bin/python -m server.vocabulary

# The wheel users install: sharding_core, server, shardscope and the front end inside it.
wheel: $(UV)
	rm -rf $(WHEEL_DIR)
	$(UV) build --quiet --wheel --out-dir $(WHEEL_DIR)

# A fresh environment from the registries (uv's cache makes a rebuild take seconds): the built wheel
# with its notebook extra beside the oldest declared JAX. --no-config: the project's lock settings
# (the pinned JAX) are for .venv/, not for this environment.
oldest-jax: wheel
	$(UV) venv --quiet --no-config --allow-existing --python 3.11 $(OLDEST_ENV)
	$(UV) pip install --quiet --no-config --python $(OLDEST_ENV)/bin/python --reinstall-package shardscope \
	  "$$(ls $(WHEEL_DIR)/shardscope-*.whl)[notebook]" "jax==$(OLDEST_JAX)" "jaxlib==$(OLDEST_JAX)"

# The newest JAX, jaxlib and libtpu the registry serves (resolved when it runs), on Python 3.13 in a Debian 13
# root (build/newest-jax-root, made by debootstrap; JAX 0.11+ needs Python 3.12+, which Debian 12 lacks), beside
# the wheel built now: tests/newest_jax.sh (needs root: chroot and mount) runs the wheel's surface and
# tests/newest_jax_checks.py there, against the answers the locked JAX gives in .venv. Downloads, the
# bootstrapped root and uv's cache for it are kept in ~/.cache/shardscope/newest-jax, outside the clone.
# tests/test_newest_jax.py runs it beside the rest of the suite (docs/compat.md: what it checks, how long).
NEWEST_DIST := build/newest-jax-dist
export SHARDSCOPE_CACHE ?= $(HOME)/.cache/shardscope
NEWEST_CACHE = $(SHARDSCOPE_CACHE)/newest-jax
newest-jax: install-dev debootstrap
	@$(MAKE) -s wheel WHEEL_DIR=$(NEWEST_DIST)
	@# the locked JAX's answers, kept per content of what computes them
	@key=$$(cat $$(git ls-files --cached --others --exclude-standard sharding_core server | sort) \
	  tests/newest_jax_checks.py uv.lock | sha256sum | cut -c1-16); \
	locked=$(NEWEST_CACHE)/locked/$$key.json; \
	if [ ! -f "$$locked" ]; then mkdir -p $(NEWEST_CACHE)/locked && \
	  .venv/bin/python tests/newest_jax_checks.py locked "$$locked.tmp" && mv "$$locked.tmp" "$$locked"; fi; \
	cp "$$locked" build/newest-jax-locked.json; \
	ls -t $(NEWEST_CACHE)/locked/*.json | tail -n +17 | xargs -r rm -f  # the newest 16 kept
	@SUDO=$$(if [ "$$(id -u)" -ne 0 ]; then echo sudo; fi); \
	  $$SUDO env SHARDSCOPE_CACHE="$(SHARDSCOPE_CACHE)" $${SSL_CERT_FILE:+SSL_CERT_FILE="$$SSL_CERT_FILE"} \
	  tests/newest_jax.sh "$$(ls $(NEWEST_DIST)/shardscope-*.whl)" build/newest-jax-locked.json

# PYTEST_ARGS narrows the run (make test PYTEST_ARGS=tests/test_newest_jax.py); the default is everything.
# The suite on TEST_WORKERS processes (pytest-xdist; each module's tests on one worker, so its servers, browsers and
# compiles are made once). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
test: install-dev chromium services debootstrap lint typecheck docs
	.venv/bin/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

bench: install-dev
	.venv/bin/python bench/bench_layout.py
