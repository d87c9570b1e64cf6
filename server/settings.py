"""Every limit the server enforces, as a named, documented setting (datasette's ``Setting`` rows).

The limits that ``sharding_core`` owns (devices, mesh axes, rank, spec text) are read from it, so the
HTTP layer and the domain can never disagree: the request models carry the same numbers as
``Field`` bounds (a cheap first line, before any JAX work) and the domain checks them again.
The README documents each row; a test fails when one is missing there.
"""

from __future__ import annotations

import dataclasses

from sharding_core.devices import MAX_DEVICES, MAX_SLICES
from sharding_core.kernels.plan import MAX_KERNEL_DEVICES, MAX_KERNEL_ELEMENTS
from sharding_core.kernels.runner import MAX_TEXT_CHARS as MAX_KERNEL_TEXT_CHARS
from sharding_core.layout import MAX_ARRAY_ELEMENTS, MAX_RANK
from sharding_core.mesh import MAX_AXIS_NAME_CHARS, MAX_MESH_AXES
from sharding_core.snapshot import (
    MAX_LEAF_PATH_CHARS,
    MAX_RULES,
    MAX_RUN_PROCESSES,
    MAX_SNAPSHOT_LEAVES,
    MAX_SNAPSHOT_NAME_CHARS,
)
from sharding_core.spec import MAX_SPEC_CHARS


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: int
    help: str


MAX_BODY_BYTES = 1024 * 1024
MAX_LINK_BYTES = 64 * 1024
MAX_DEVICES_CHARS = 64  # sharding_core.devices.parse_devices refuses longer strings
MAX_VIEW_CHARS = 64
# The kernel lab (server/kernels.py): worker processes, their queue, time limit and result cache.
MAX_KERNEL_WORKERS = 2
MAX_KERNEL_QUEUE = 8
MAX_KERNEL_SECONDS = 60
MAX_KERNEL_CACHE_ENTRIES = 128
MAX_KERNEL_JOBS = 1024
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024

MAX_CONNECTIONS = 1024
MAX_HEADER_BYTES = 16 * 1024
MAX_KEEP_ALIVE_SECONDS = 5

SETTINGS: list[Setting] = [
    Setting(
        "max_body_bytes",
        MAX_BODY_BYTES,
        "Largest request body in bytes; a longer one (by Content-Length or as streamed) gets 413 too_large "
        "before the rest is read",
    ),
    Setting(
        "max_link_bytes",
        MAX_LINK_BYTES,
        "Largest share link payload (its view and state as compact JSON) in bytes; larger gets 413 too_large",
    ),
    Setting(
        "max_devices",
        MAX_DEVICES,
        "Devices in one device set (cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO, slices included); more gets 422 too_large",
    ),
    Setting("max_slices", MAX_SLICES, "Slices of a multi-slice tpu: device set"),
    Setting("max_devices_chars", MAX_DEVICES_CHARS, "Characters in a devices string"),
    Setting("max_mesh_axes", MAX_MESH_AXES, "Axes of a mesh (mesh.shape and mesh.axis_names entries)"),
    Setting("max_axis_name_chars", MAX_AXIS_NAME_CHARS, "Characters in one mesh axis name"),
    Setting("max_rank", MAX_RANK, "Rank (number of dimensions) of an array in a layout request"),
    Setting("max_spec_chars", MAX_SPEC_CHARS, "Characters in a PartitionSpec text"),
    Setting(
        "max_array_elements",
        MAX_ARRAY_ELEMENTS,
        "Elements of an array in a layout request (2^36; nothing is allocated, byte counts stay exact); "
        "more gets 422 too_large",
    ),
    Setting("max_view_chars", MAX_VIEW_CHARS, "Characters in a share link's view name"),
    # ---- snapshots (capture / publish from user programs)
    Setting(
        "max_snapshot_bytes",
        MAX_SNAPSHOT_BYTES,
        "Largest POST /api/snapshots body in bytes (that path only; every other path keeps max_body_bytes): "
        "a 10,000-leaf snapshot on 8 devices is about 12 MB; larger gets 413 too_large before the rest is read",
    ),
    Setting("max_snapshot_leaves", MAX_SNAPSHOT_LEAVES, "Leaves in one snapshot; more gets 422 validation_error"),
    Setting("max_leaf_path_chars", MAX_LEAF_PATH_CHARS, "Characters in one leaf's path in a snapshot"),
    Setting("max_snapshot_name_chars", MAX_SNAPSHOT_NAME_CHARS, "Characters in a snapshot's name"),
    Setting("max_run_processes", MAX_RUN_PROCESSES, "Processes of one multi-process run (process_count)"),
    Setting("max_rules", MAX_RULES, "Logical → mesh axis rules in a snapshot or a what-if request"),
    # ---- the kernel lab (server/kernels.py)
    Setting("max_kernel_workers", MAX_KERNEL_WORKERS, "Worker processes that run kernels (each runs one at a time)"),
    Setting(
        "max_kernel_queue",
        MAX_KERNEL_QUEUE,
        "Kernel runs that may wait for a worker; with every worker busy and this many waiting, a run gets "
        "429 busy with Retry-After",
    ),
    Setting(
        "max_kernel_seconds",
        MAX_KERNEL_SECONDS,
        "Seconds a kernel run (compile and execute) may take; past it the worker is killed and replaced and "
        "the run gets 422 timeout",
    ),
    Setting("max_kernel_cache_entries", MAX_KERNEL_CACHE_ENTRIES, "Kernel results kept (least recently used go first)"),
    Setting(
        "max_kernel_jobs", MAX_KERNEL_JOBS, "Kernel jobs remembered for GET /api/kernels/jobs/{id} (oldest finished go)"
    ),
    Setting(
        "max_kernel_devices",
        MAX_KERNEL_DEVICES,
        "Devices in a kernel run's mesh (XLA's CPU client compiles for at most 2048); more gets 422 too_large",
    ),
    Setting(
        "max_kernel_elements",
        MAX_KERNEL_ELEMENTS,
        "Elements across a kernel run's inputs, and in any array it creates (2^24), checked before anything is "
        "allocated; more gets 422 too_large",
    ),
    Setting(
        "max_kernel_text_chars",
        MAX_KERNEL_TEXT_CHARS,
        "Characters of StableHLO and of compiled HLO text in a kernel result; longer text is cut and flagged",
    ),
    # ---- the HTTP server itself (passed to uvicorn by `shardscope serve`)
    Setting(
        "max_connections",
        MAX_CONNECTIONS,
        "Open connections uvicorn serves (limit_concurrency): a request arriving while this many are open, "
        "its own included, gets 503. Slow clients cost a coroutine each, not a thread, so a normal request "
        "is still served among them",
    ),
    Setting(
        "max_header_bytes",
        MAX_HEADER_BYTES,
        "Bytes of an unfinished request head uvicorn buffers (h11_max_incomplete_event_size); more closes "
        "the connection",
    ),
    Setting(
        "max_keep_alive_seconds",
        MAX_KEEP_ALIVE_SECONDS,
        "Seconds an idle keep-alive connection stays open (timeout_keep_alive)",
    ),
]
"""The settings table: ``name``, ``default`` and ``help`` of each limit."""

DEFAULTS: dict[str, int] = {s.name: s.default for s in SETTINGS}

__all__ = [
    "DEFAULTS",
    "MAX_AXIS_NAME_CHARS",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_DEVICES",
    "MAX_DEVICES_CHARS",
    "MAX_HEADER_BYTES",
    "MAX_KEEP_ALIVE_SECONDS",
    "MAX_KERNEL_CACHE_ENTRIES",
    "MAX_KERNEL_DEVICES",
    "MAX_KERNEL_ELEMENTS",
    "MAX_KERNEL_JOBS",
    "MAX_KERNEL_QUEUE",
    "MAX_KERNEL_SECONDS",
    "MAX_KERNEL_TEXT_CHARS",
    "MAX_KERNEL_WORKERS",
    "MAX_LEAF_PATH_CHARS",
    "MAX_LINK_BYTES",
    "MAX_MESH_AXES",
    "MAX_RANK",
    "MAX_RULES",
    "MAX_RUN_PROCESSES",
    "MAX_SLICES",
    "MAX_SNAPSHOT_BYTES",
    "MAX_SNAPSHOT_LEAVES",
    "MAX_SNAPSHOT_NAME_CHARS",
    "MAX_SPEC_CHARS",
    "MAX_VIEW_CHARS",
    "SETTINGS",
    "Setting",
]
