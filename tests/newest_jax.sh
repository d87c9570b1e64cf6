#!/usr/bin/env bash
# `make newest-jax`: the built wheel beside the newest JAX, jaxlib and libtpu the registry serves, on
# Python 3.13 in a Debian 13 (trixie) root, checked against the locked JAX's answers.
#
# JAX 0.11 and later need Python >= 3.12, which this project's Debian 12 does not have, so the checks
# run in a root made by Debian's debootstrap (`--variant=minbase`, python3 from trixie) and entered
# with chroot. What it keeps, so that a second run — and a fresh clone's — is quick:
#   ~/.cache/shardscope/newest-jax/debs/    debootstrap's --cache-dir (the .debs it downloaded)
#   ~/.cache/shardscope/newest-jax/roots/   the bootstrapped root as a tarball, one per recipe
#   ~/.cache/shardscope/newest-jax/uv/      uv's cache for the root's installs (bind-mounted in)
#   build/newest-jax-root/                  the root itself, with its environment in /opt/venv
# Every mount it makes (proc, sys, dev, dev/shm, the uv cache) is undone on any exit: success,
# failure, Ctrl-C or kill; processes still running in the root are stopped first.
#
# Usage: tests/newest_jax.sh WHEEL LOCKED_JSON — LOCKED_JSON holds the answers the locked JAX gave
# (`.venv/bin/python tests/newest_jax_checks.py locked OUT`), compared inside the root.
# Environment: SHARDSCOPE_CACHE (default ~/.cache/shardscope), NEWEST_JAX_ROOT (default
# build/newest-jax-root); for tests/test_newest_jax.py, which checks that neither leaves a mount behind:
# NEWEST_JAX_FAIL_AFTER_MOUNT=1 fails on purpose once everything is mounted, NEWEST_JAX_HOLD_AFTER_MOUNT=N
# waits N seconds there (to be interrupted). Each cache is bounded by bytes (the *_MAX_* below).
set -euo pipefail

WHEEL=${1:?usage: tests/newest_jax.sh WHEEL LOCKED_JSON}
LOCKED=${2:?usage: tests/newest_jax.sh WHEEL LOCKED_JSON}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
ROOT=$(realpath -m "${NEWEST_JAX_ROOT:-$REPO/build/newest-jax-root}")
CACHE=$(realpath -m "${SHARDSCOPE_CACHE:-$HOME/.cache/shardscope}")/newest-jax
UV=${UV:-$REPO/.tools/bin/uv}
SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,ca-certificates
RECIPE="$SUITE minbase $PACKAGES v1"  # the root's recipe: a change makes a new tarball
ROOT_MAX_AGE_DAYS=30                  # then a fresh root (Debian's security updates)
UV_CACHE_MAX_MB=4096                  # uv's cache for the root (~1.3 GB per JAX release), then emptied
DEBS_MAX_MB=512                       # debootstrap's .debs (~40 MB a root), then emptied
STAMP=.shardscope-root

say() { printf 'newest-jax %s: %s\n' "$(date +%T)" "$*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mount): run \`sudo make newest-jax\`"
command -v debootstrap >/dev/null || die "debootstrap is missing: \`make debootstrap\` installs Debian's"
[ -f "$WHEEL" ] || die "no wheel at $WHEEL (\`make wheel\` builds it)"
[ -f "$LOCKED" ] || die "no locked answers at $LOCKED"
[ -x "$UV" ] || die "no uv at $UV (\`make .tools/bin/uv\`)"

mkdir -p "$CACHE/debs" "$CACHE/roots" "$CACHE/uv" "$(dirname "$ROOT")"

# One run per root at a time (a second waits), and one bootstrap per cache; every run holds the caches shared.
exec 7>"$CACHE/.in-use"
flock -s 7
exec 8>"$ROOT.lock"
flock -w 1800 8 || die "another run has held $ROOT.lock for 30 minutes"

# ---- mounts, undone whatever happens ----------------------------------------------------------------

mounts_under() {  # mount points at or below $1, deepest first
  awk -v root="$1" '$5 == root || index($5, root "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

stop_processes_in_root() {
  local pid link
  for pid in /proc/[0-9]*; do
    link=$(readlink "$pid/root" 2>/dev/null) || continue
    if [ "$link" = "$ROOT" ]; then kill -KILL "${pid#/proc/}" 2>/dev/null || true; fi
  done
}

unmount_root() {  # 0 when nothing is left mounted under the root
  local m
  stop_processes_in_root
  for m in $(mounts_under "$ROOT"); do
    umount "$m" 2>/dev/null || umount --lazy "$m" || say "could not unmount $m"
  done
  [ -z "$(mounts_under "$ROOT")" ]
}

BACKGROUND=()  # pids of this script's background jobs: in a script they ignore SIGINT, so they are ended here

cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM HUP
  for pid in "${BACKGROUND[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if ! unmount_root; then say "still mounted: $(mounts_under "$ROOT" | tr '\n' ' ')"; [ "$rc" -ne 0 ] || rc=1; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mount_root() {
  mkdir -p "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/var/cache/uv"
  mount -t proc proc "$ROOT/proc"
  mount -t sysfs -o ro sysfs "$ROOT/sys" 2>/dev/null || mount --bind -o ro /sys "$ROOT/sys"
  mount --bind /dev "$ROOT/dev"   # libtpu counts CPUs and reads devices: /proc alone makes it abort
  mount --make-private "$ROOT/dev"  # so the tmpfs below never propagates to the host's /dev/shm
  mount -t tmpfs -o size=1g,mode=1777 tmpfs "$ROOT/dev/shm"
  mount --bind "$CACHE/uv" "$ROOT/var/cache/uv"
}

# ---- the root ---------------------------------------------------------------------------------------

recipe_key() { printf '%s' "$RECIPE" | sha256sum | cut -c1-12; }

bound_cache() {  # DIR MAX_MB: emptied when it holds more (every cache here is bounded by bytes), unless
  # another run (another clone's) is using the caches now: then the next run empties it
  if [ "$(du -sm "$1" | cut -f1)" -gt "$2" ] && flock -n -x 7; then
    say "$1 holds more than $2 MB: emptied"
    find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
    flock -s 7
  fi
}

bootstrap_root() {
  local key tarball tmp started
  key=$(recipe_key)
  tarball="$CACHE/roots/$SUITE-$key.tar.zst"
  bound_cache "$CACHE/debs" "$DEBS_MAX_MB"
  bound_cache "$CACHE/uv" "$UV_CACHE_MAX_MB"
  # a tarball older than ROOT_MAX_AGE_DAYS is made again
  find "$CACHE/roots" -name "$SUITE-$key.tar.zst" -mtime +"$ROOT_MAX_AGE_DAYS" -delete
  exec 9>"$CACHE/roots/.lock"
  flock -w 1800 9 || die "another bootstrap has held $CACHE/roots/.lock for 30 minutes"
  if [ ! -f "$tarball" ]; then
    started=$SECONDS
    tmp=$(mktemp -d "$CACHE/roots/.build.XXXXXX")
    say "debootstrap --variant=minbase $SUITE (python3) into a new root; .debs cached in $CACHE/debs"
    if ! debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs" \
      "$SUITE" "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1; then
      tail -n 30 "$tmp/debootstrap.log" >&2
      rm -rf "$tmp"
      die "debootstrap failed (log above)"
    fi
    rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
    tar -C "$tmp/root" --numeric-owner -cf - . | zstd -q -T0 -3 -o "$tmp/root.tar.zst"
    mv "$tmp/root.tar.zst" "$tarball"
    rm -rf "$tmp"
    find "$CACHE/roots" -name '*.tar.zst' ! -name "$(basename "$tarball")" -delete  # other recipes' roots
    say "bootstrapped in $((SECONDS - started)) s; kept as $tarball ($(du -h "$tarball" | cut -f1))"
  fi
  flock -u 9
  exec 9>&-
  if [ "$(cat "$ROOT/$STAMP" 2>/dev/null)" != "$key" ]; then
    rm -rf "$ROOT"
    mkdir -p "$ROOT"
    zstd -q -dc "$tarball" | tar -C "$ROOT" --numeric-owner -xf -
    echo "$key" >"$ROOT/$STAMP"
    say "root unpacked from $tarball"
  fi
}

# The certificates this machine trusts (SSL_CERT_FILE: a proxy's own CA, say) are trusted in the root too.
HOST_CA=${SSL_CERT_FILE:-}
ROOT_CA=/etc/ssl/certs/shardscope-host-ca.crt

in_root() {  # run a command inside the root, with a clean environment
  chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    UV_CACHE_DIR=/var/cache/uv UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1 \
    ${HOST_CA:+SSL_CERT_FILE=$ROOT_CA} TPU_SKIP_MDS_QUERY=1 "$@"
}

started=$SECONDS
# a run killed with SIGKILL (no trap runs) leaves its mounts: undo them before touching the root
unmount_root || die "could not unmount what an earlier run left under $ROOT"
bootstrap_root
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
if [ -n "$HOST_CA" ]; then mkdir -p "$ROOT/etc/ssl/certs" && cp "$HOST_CA" "$ROOT$ROOT_CA"; fi
install -m 0755 "$UV" "$ROOT/usr/local/bin/uv"
mount_root
say "mounted: $(mounts_under "$ROOT" | tr '\n' ' ')"
[ -z "${NEWEST_JAX_FAIL_AFTER_MOUNT:-}" ] || die "failing on purpose after mounting (NEWEST_JAX_FAIL_AFTER_MOUNT)"
if [ -n "${NEWEST_JAX_HOLD_AFTER_MOUNT:-}" ]; then  # the interrupt test: wait here to be signalled
  say "holding after mounting (NEWEST_JAX_HOLD_AFTER_MOUNT)"
  sleep "$NEWEST_JAX_HOLD_AFTER_MOUNT" 7>&- 8>&- 9>&- &
  BACKGROUND+=($!)
  wait $!
fi
say "root ready in $((SECONDS - started)) s: $(in_root python3 --version)"

# ---- the newest JAX, resolved from the registry now, beside the wheel ------------------------------------

installed=$SECONDS
in_root uv venv --quiet --allow-existing --python /usr/bin/python3 /opt/venv
# What the registry serves now for this Python: the newest jax, its jaxlib and the libtpu jax[tpu] pins.
pins=$(printf 'jax[tpu]\n' | in_root uv pip compile - --quiet --no-header --no-annotate --upgrade \
  --python /opt/venv/bin/python) || die "could not resolve jax[tpu] from the registry"
pin() { printf '%s\n' "$pins" | sed -n "s/^$1==\([^ ;]*\).*/\1/p"; }
JAX=$(pin jax) JAXLIB=$(pin jaxlib) LIBTPU=$(pin libtpu)
[ -n "$JAX" ] && [ -n "$JAXLIB" ] && [ -n "$LIBTPU" ] || die "no jax, jaxlib and libtpu pins in: $pins"
say "newest on the registry for Python 3.13: jax $JAX, jaxlib $JAXLIB, libtpu $LIBTPU"
rm -rf "$ROOT/tmp/newest-jax"
mkdir -p "$ROOT/tmp/newest-jax/work"
cp "$WHEEL" "$ROOT/tmp/newest-jax/"
cp "$HERE/wheel_surface.py" "$HERE/newest_jax_checks.py" "$LOCKED" "$ROOT/tmp/newest-jax/"
wheel_in_root=/tmp/newest-jax/$(basename "$WHEEL")
in_root uv pip install --quiet --python /opt/venv/bin/python --reinstall-package shardscope \
  "$wheel_in_root[notebook,tpu]" "jax==$JAX" "jaxlib==$JAXLIB" "libtpu==$LIBTPU"
say "installed in $((SECONDS - installed)) s"

# ---- the checks, from an empty directory with -I (only the installed wheel is importable) ------------------

checks=$SECONDS
OUT=$ROOT/tmp/newest-jax
run_check() {  # NAME SCRIPT ARGS...: its output kept in $OUT/NAME.out and .err, shown when it fails
  local name=$1
  shift
  in_root env -C /tmp/newest-jax/work /opt/venv/bin/python -I "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" \
    || { cat "$OUT/$name.out"; tail -n 40 "$OUT/$name.err"; die "$name failed (above)"; } >&2
}
# both at once (two processes, each with its own server): the machine's two cores
run_check surface /tmp/newest-jax/wheel_surface.py &
surface_pid=$!
BACKGROUND+=("$surface_pid")
run_check checks /tmp/newest-jax/newest_jax_checks.py check "/tmp/newest-jax/$(basename "$LOCKED")"
wait "$surface_pid" || die "the wheel surface failed"
surface=$(tail -n 1 "$OUT/surface.out")
grep -h '^ok ' "$OUT/surface.out" "$OUT/checks.out" >&2
say "checks in $((SECONDS - checks)) s; all in $((SECONDS - started)) s"
# the summary, one JSON line: the versions, every check's name, the plan's memory, the times
printf '{"surface": %s, "checks": %s, "seconds": {"root": %d, "install": %d, "checks": %d, "total": %d}}\n' \
  "$surface" "$(tail -n 1 "$OUT/checks.out")" "$((installed - started))" \
  "$((checks - installed))" "$((SECONDS - checks))" "$((SECONDS - started))"
