"""Every limit the server enforces, as a named, documented setting (datasette's ``Setting`` rows).

:class:`Settings` holds the values in effect: each field's default is the limit's one constant, and
``shardscope serve --setting NAME VALUE`` (or ``create_app(settings=...)``) changes it, validated
against the table (:meth:`Settings.with_values`). The limits that ``sharding_core`` owns (device
strings, mesh axes, rank, spec text, snapshot shapes) are read from it so the HTTP layer and the
domain can never disagree; those that the domain enforces for the CLI and ``capture`` alike are
*fixed* (the request models carry them as ``Field`` bounds) and ``--setting`` says so. The README
documents each row; a test fails when one is missing there.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from typing import Any

from server.store import MAX_LINK_DAYS, MAX_SNAPSHOT_DAYS, MAX_STORE_BYTES, RECORD_OVERHEAD
from sharding_core.cache import MAX_CACHE_BYTES
from sharding_core.cost.efficiency import MAX_NCCL_TEXT_CHARS
from sharding_core.devices import MAX_DEVICES, MAX_SLICES
from sharding_core.errors import ShardingError
from sharding_core.kernels.memory import physical_ram
from sharding_core.kernels.plan import MAX_KERNEL_DEVICES, MAX_KERNEL_ELEMENTS
from sharding_core.kernels.runner import MAX_TEXT_CHARS as MAX_KERNEL_TEXT_CHARS
from sharding_core.layout import MAX_ARRAY_ELEMENTS, MAX_RANK
from sharding_core.mesh import MAX_AXIS_NAME_CHARS, MAX_MESH_AXES
from sharding_core.snapshot.format import (
    MAX_LEAF_PATH_CHARS,
    MAX_RULES,
    MAX_RUN_PROCESSES,
    MAX_SNAPSHOT_LEAVES,
    MAX_SNAPSHOT_NAME_CHARS,
)
from sharding_core.spec import MAX_SPEC_CHARS

BAD_SETTING = "bad_setting"

MAX_BODY_BYTES = 1024 * 1024
MAX_LINK_BYTES = 64 * 1024
MAX_DEVICES_CHARS = 64  # sharding_core.devices.parse_devices refuses longer strings
MAX_VIEW_CHARS = 64
# The kernel lab (server/pool.py): worker processes, their queue, time limit and result cache.
MAX_KERNEL_WORKERS = 2
MAX_KERNEL_QUEUE = 8
MAX_KERNEL_SECONDS = 60
MAX_KERNEL_CACHE_ENTRIES = 128
MAX_KERNEL_JOBS = 1024
MAX_KERNEL_RESULT_BYTES = 256 * 1024 * 1024
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
SNAPSHOT_CACHE_BYTES = 256 * 1024 * 1024
"""What the server's caches of parsed snapshots, and of merged runs, each hold at most (the largest
snapshot fits)."""

MAX_CONNECTIONS = 1024
MAX_HEADER_BYTES = 16 * 1024
MAX_KEEP_ALIVE_SECONDS = 5
# The connection layer (server/http.py): open sockets and how long a request may take to arrive.
MAX_OPEN_CONNECTIONS = 4096
MAX_HEADER_SECONDS = 10
MAX_BODY_SECONDS = 60

_DOMAIN = "enforced by sharding_core for the CLI, capture() and the server alike (the request schema carries it)"


def _setting(default: int, help: str, *, minimum: int = 1, maximum: int | None = None, fixed: str | None = None) -> Any:
    return dataclasses.field(
        default=default, metadata={"help": help, "minimum": minimum, "maximum": maximum, "fixed": fixed}
    )


@dataclasses.dataclass(frozen=True)
class Settings:
    """The limits in effect. Every field is one row of the settings table (name, default, help)."""

    max_body_bytes: int = _setting(
        MAX_BODY_BYTES,
        "Largest request body in bytes; a longer one (by Content-Length or as streamed) gets 413 too_large "
        "before the rest is read",
        minimum=1024,
    )
    max_link_bytes: int = _setting(
        MAX_LINK_BYTES,
        "Largest share link payload (its view and state as compact JSON) in bytes; larger gets 413 too_large",
        minimum=256,
    )
    max_devices: int = _setting(
        MAX_DEVICES,
        "Devices in one device set (cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO, slices included); more gets 422 too_large. "
        f"Can be lowered, not raised past {MAX_DEVICES}",
        maximum=MAX_DEVICES,
    )
    max_slices: int = _setting(MAX_SLICES, "Slices of a multi-slice tpu: device set", fixed=_DOMAIN)
    max_devices_chars: int = _setting(MAX_DEVICES_CHARS, "Characters in a devices string", fixed=_DOMAIN)
    max_mesh_axes: int = _setting(
        MAX_MESH_AXES, "Axes of a mesh (mesh.shape and mesh.axis_names entries)", fixed=_DOMAIN
    )
    max_axis_name_chars: int = _setting(MAX_AXIS_NAME_CHARS, "Characters in one mesh axis name", fixed=_DOMAIN)
    max_rank: int = _setting(MAX_RANK, "Rank (number of dimensions) of an array in a layout request", fixed=_DOMAIN)
    max_spec_chars: int = _setting(MAX_SPEC_CHARS, "Characters in a PartitionSpec text", fixed=_DOMAIN)
    max_array_elements: int = _setting(
        MAX_ARRAY_ELEMENTS,
        "Elements of an array in a layout request (2^36; nothing is allocated, byte counts stay exact); "
        "more gets 422 too_large",
        fixed=_DOMAIN,
    )
    max_view_chars: int = _setting(
        MAX_VIEW_CHARS, "Characters in a share link's view name", fixed="the request schema's bound"
    )
    # ---- snapshots (capture / publish from user programs)
    max_snapshot_bytes: int = _setting(
        MAX_SNAPSHOT_BYTES,
        "Largest POST /api/snapshots body in bytes (that path only; every other path keeps max_body_bytes): "
        "a 10,000-leaf snapshot on 8 devices is about 12 MB; larger gets 413 too_large before the rest is read",
        minimum=1024,
    )
    max_snapshot_leaves: int = _setting(
        MAX_SNAPSHOT_LEAVES, "Leaves in one snapshot; more gets 422 validation_error", fixed=_DOMAIN
    )
    max_leaf_path_chars: int = _setting(
        MAX_LEAF_PATH_CHARS, "Characters in one leaf's path in a snapshot", fixed=_DOMAIN
    )
    max_snapshot_name_chars: int = _setting(MAX_SNAPSHOT_NAME_CHARS, "Characters in a snapshot's name", fixed=_DOMAIN)
    max_run_processes: int = _setting(
        MAX_RUN_PROCESSES, "Processes of one multi-process run (process_count)", fixed=_DOMAIN
    )
    max_rules: int = _setting(MAX_RULES, "Logical → mesh axis rules in a snapshot or a what-if request", fixed=_DOMAIN)
    # ---- the store (server/store.py): share links, snapshots, runs
    max_store_bytes: int = _setting(
        MAX_STORE_BYTES,
        "Bytes the store may hold: share links, snapshots and run indexes, each record counted as its payload "
        f"plus {RECORD_OVERHEAD} bytes, as a running total kept in the database. A write that would pass it gets "
        "507 insufficient_storage naming this setting; nothing stored is dropped to make room (records go only "
        "when max_link_days or max_snapshot_days expires them). The file is larger by SQLite's page slack and "
        "its WAL (cut back to 64 MiB after each checkpoint)",
        minimum=64 * 1024,
    )
    max_link_days: int = _setting(
        MAX_LINK_DAYS,
        "Days a share link is kept: older links are deleted at start-up and then hourly, freeing their bytes; "
        "0 keeps them forever",
        minimum=0,
    )
    max_snapshot_days: int = _setting(
        MAX_SNAPSHOT_DAYS,
        "Days a published snapshot, and each process's part of a run, is kept: older ones are deleted at "
        "start-up and then hourly, freeing their bytes (a link to one then opens 'no such snapshot', whose hint "
        "says how long snapshots are kept); 0 keeps them forever",
        minimum=0,
    )
    # ---- the kernel lab (server/pool.py, sharding_core/kernels)
    max_kernel_workers: int = _setting(
        MAX_KERNEL_WORKERS, "Worker processes that run kernels (each runs one at a time)", maximum=64
    )
    max_kernel_queue: int = _setting(
        MAX_KERNEL_QUEUE,
        "Kernel runs that may wait for a worker; with every worker busy and this many waiting, a run gets "
        "429 busy with Retry-After",
        minimum=0,
    )
    max_kernel_seconds: int = _setting(
        MAX_KERNEL_SECONDS,
        "Seconds a kernel run (compile and execute) may take; past it the worker is killed and replaced and "
        "the run gets 422 timeout",
    )
    max_kernel_cache_entries: int = _setting(
        MAX_KERNEL_CACHE_ENTRIES, "Kernel results kept (least recently used go first)", minimum=0
    )
    max_kernel_jobs: int = _setting(
        MAX_KERNEL_JOBS, "Kernel jobs remembered for GET /api/kernels/jobs/{id} (oldest finished go)"
    )
    max_kernel_result_bytes: int = _setting(
        MAX_KERNEL_RESULT_BYTES,
        "Bytes of kernel results held in memory: the result cache and the finished jobs each keep at most this "
        "much (least recently used, or oldest finished, go first; the job that just finished is always kept)",
        minimum=65536,
    )
    max_kernel_devices: int = _setting(
        MAX_KERNEL_DEVICES,
        "Devices in a kernel run's mesh (XLA's CPU client compiles for at most 2048); more gets 422 too_large",
        maximum=MAX_KERNEL_DEVICES,
    )
    max_kernel_elements: int = _setting(
        MAX_KERNEL_ELEMENTS,
        "Elements across a kernel run's inputs, and in any array it creates (2^24), checked before anything is "
        "allocated; more gets 422 too_large",
    )
    max_worker_memory: int = _setting(
        0,
        "Bytes of memory one kernel worker may use (0: a quarter of the machine's RAM). A run whose estimate "
        "(inputs on the host and on every device, the arrays the kernel creates, XLA's program, the reference) "
        "is larger gets 422 too_large before it runs; a worker that grows past it anyway is stopped (a memory "
        "cgroup where the server may make one, and a resident-memory watchdog) and the run gets 422 too_large",
        minimum=0,
    )
    max_kernel_text_chars: int = _setting(
        MAX_KERNEL_TEXT_CHARS,
        "Characters of StableHLO and of compiled HLO text in a kernel result; longer text is cut and flagged",
        minimum=1024,
    )
    max_nccl_text_chars: int = _setting(
        MAX_NCCL_TEXT_CHARS,
        "Characters of nccl-tests all_reduce_perf output in POST /api/cost/nccl-fit (a full 8 B - 16 GiB sweep is "
        "about 10 kB); more gets 422 validation_error",
        fixed=_DOMAIN,
    )
    max_cache_bytes: int = _setting(
        MAX_CACHE_BYTES,
        "Bytes the caches of layouts, device sets, meshes and topologies may hold in all (least recently used "
        "go first): what distinct large requests can add to the server's memory",
        minimum=1024 * 1024,
    )
    # ---- the HTTP server itself (passed to uvicorn by `shardscope serve`)
    max_connections: int = _setting(
        MAX_CONNECTIONS,
        "Requests in progress at once (each counts from its complete head until its response is done; idle "
        "connections and unfinished heads do not): one more gets 503 overloaded with Retry-After",
    )
    max_header_bytes: int = _setting(
        MAX_HEADER_BYTES,
        "Bytes of an unfinished request head uvicorn buffers (h11_max_incomplete_event_size); more gets 431 "
        "too_large and the connection is closed",
        minimum=1024,
    )
    max_keep_alive_seconds: int = _setting(
        MAX_KEEP_ALIVE_SECONDS, "Seconds an idle keep-alive connection stays open (timeout_keep_alive)"
    )
    max_open_connections: int = _setting(
        MAX_OPEN_CONNECTIONS,
        "Open connections, idle ones included; one more closes the connection idle longest (waiting for a "
        "request head or on keep-alive), never one with a request in progress. Capped to the open-file limit "
        "(RLIMIT_NOFILE, raised to its hard limit at start) less 256",
        minimum=16,
    )
    max_header_seconds: int = _setting(
        MAX_HEADER_SECONDS,
        "Seconds a client has to send a whole request head, from the connection opening (or the first byte of "
        "its next request on a kept-alive connection), however slowly it trickles; past it the connection is "
        "closed, with 408 request_timeout if part of a head had arrived",
        maximum=300,
    )
    max_body_seconds: int = _setting(
        MAX_BODY_SECONDS,
        "Seconds a client has to send a request body once its head is in; past it the request gets 408 "
        "request_timeout (unless answered already) and the connection is closed",
        maximum=3600,
    )

    def worker_memory(self) -> int:
        """``max_worker_memory`` in bytes, with 0 resolved to a quarter of the machine's RAM."""
        return self.max_worker_memory or physical_ram() // 4

    def with_values(self, pairs: Iterable[tuple[str, str | int]]) -> Settings:
        """These settings with ``(name, value)`` pairs applied, each checked against the table.

        Raises ``bad_setting`` naming the setting and what is allowed: an unknown name (with the
        closest ones), a fixed setting (and why), a value that is not an integer or out of range.
        """
        changes: dict[str, int] = {}
        for name, raw in pairs:
            row = SETTINGS_BY_NAME.get(name)
            if row is None:
                close = difflib.get_close_matches(name, SETTINGS_BY_NAME, n=3)
                raise ShardingError(
                    BAD_SETTING,
                    f"there is no setting {name[:64]!r}",
                    hint=f"did you mean {', '.join(close)}?" if close else "`shardscope settings` lists them",
                    setting=name[:64],
                )
            if row.fixed:
                raise ShardingError(
                    BAD_SETTING,
                    f"{name} cannot be set: it is {row.fixed}",
                    hint="`shardscope settings` marks which settings can be changed",
                    setting=name,
                )
            value = raw if isinstance(raw, int) and not isinstance(raw, bool) else _integer(name, str(raw))
            if value < row.minimum or (row.maximum is not None and value > row.maximum):
                upper = f" to {row.maximum}" if row.maximum is not None else " or more"
                raise ShardingError(
                    BAD_SETTING,
                    f"{name} must be {row.minimum}{upper}, got {value}",
                    setting=name,
                    minimum=row.minimum,
                    maximum=row.maximum,
                )
            changes[name] = value
        return dataclasses.replace(self, **changes)


def _integer(name: str, text: str) -> int:
    cleaned = text.strip().replace("_", "")
    if not cleaned.isdigit():
        raise ShardingError(BAD_SETTING, f"{name} takes a whole number, got {text[:32]!r}", setting=name)
    return int(cleaned)


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: int
    help: str
    minimum: int = 1
    maximum: int | None = None
    fixed: str | None = None  # why it cannot be set (None: `--setting` changes it)


SETTINGS: list[Setting] = [
    Setting(f.name, int(getattr(Settings, f.name)), f.metadata["help"], f.metadata["minimum"], f.metadata["maximum"],
            f.metadata["fixed"])
    for f in dataclasses.fields(Settings)
]  # fmt: skip
"""The settings table: ``name``, ``default``, ``help`` and bounds of each limit."""

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
DEFAULTS: dict[str, int] = {s.name: s.default for s in SETTINGS}
