"""Every limit the server enforces, as a named, documented setting (datasette's ``Setting`` rows).

:class:`Settings` holds the values in effect: each field's default is the limit's one constant, and
``shardscope serve --setting NAME VALUE`` (or ``create_app(settings=...)``) changes it, validated
against the table (:meth:`Settings.with_values`). The limits that ``sharding_core`` owns (device
strings, mesh axes, rank, spec text, snapshot shapes) are read from it so the HTTP layer and the
domain can never disagree; those that the domain enforces for the CLI and ``capture`` alike are
*fixed* (the request models carry them as ``Field`` bounds) and ``--setting`` says so. The docs'
settings page (docs/reference/settings.md) is generated from this table; a test fails when it is stale.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from server.memcap import available_ram
from server.store import (
    MAX_DB_CONNECTIONS,
    MAX_DB_STATEMENT_MS,
    MAX_DB_WAIT_MS,
    MAX_LINK_DAYS,
    MAX_SNAPSHOT_DAYS,
    MAX_STORE_BYTES,
    MAX_STORE_QUEUE_MS,
    RECORD_OVERHEAD,
)
from sharding_core.cache import MAX_CACHE_BYTES
from sharding_core.cost.efficiency import MAX_NCCL_TEXT_CHARS
from sharding_core.devices import MAX_DEVICES, MAX_SLICES, DeviceSet, parse_devices
from sharding_core.errors import TOO_LARGE, ShardingError
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
from sharding_core.units import fmt_bytes

BAD_SETTING = "bad_setting"

MAX_BODY_BYTES = 1024 * 1024
MAX_LINK_BYTES = 64 * 1024
MAX_DEVICES_CHARS = 64  # sharding_core.devices.parse_devices refuses longer strings
MAX_VIEW_CHARS = 64
# The kernel lab (server/pool.py): worker processes, their queue, time limit and result cache.
MAX_KERNEL_WORKERS = 2
MAX_KERNEL_QUEUE = 8
MAX_KERNEL_SECONDS = 60
MAX_COMPILE_SECONDS = 120
MAX_KERNEL_CACHE_ENTRIES = 128
MAX_KERNEL_JOBS = 1024
MAX_KERNEL_RESULT_BYTES = 256 * 1024 * 1024
MAX_KERNEL_JOB_SILENCE_SECONDS = 15
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
MAX_STORE_REQUESTS = 24
SPARE_THREADS = 16
"""Worker threads kept for routes that need no database beyond ``max_store_requests`` (server/app.py)."""
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
MAX_BODY_WAITS = 128
MAX_BODY_SECONDS_PER_MIB = 1024  # 1 KiB/s
MAX_CLIENT_REQUESTS = 64
MAX_SEND_STALL_SECONDS = 60
MAX_SEND_SECONDS_PER_MIB = 256  # 4 KiB/s
MAX_SEND_BUFFER_BYTES = 256 * 1024 * 1024
# Browser sessions (server/auth.py) and per-client write quotas (server/quota.py).
MAX_SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 4096
MAX_CLIENT_STORE_BYTES_PER_HOUR = 256 * 1024 * 1024
MAX_DIGITS = 20
"""Characters of a setting's value on the command line (2^64 has 20 digits; every maximum is below it)."""

KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4

_DOMAIN = "enforced by sharding_core for the CLI, capture() and the server alike (the request schema carries it)"


def _setting(default: int, help: str, *, maximum: int | None = None, minimum: int = 1, fixed: str | None = None) -> Any:
    """One row. Every row has a maximum: a settable row names its own, a fixed row's is its value."""
    if maximum is None:
        if fixed is None:
            raise ValueError("a setting that can be changed needs a maximum")
        maximum = default
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
        maximum=GIB,
    )
    max_link_bytes: int = _setting(
        MAX_LINK_BYTES,
        "Largest share link payload (its view and state as compact JSON) in bytes; larger gets 413 too_large",
        minimum=256,
        maximum=16 * MIB,
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
        maximum=GIB,
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
        "when max_link_days or max_snapshot_days expires them, or an operator's `shardscope store prune` or "
        "`delete` takes them). The file is larger by SQLite's page slack and "
        "its WAL (cut back to 64 MiB after each checkpoint)",
        minimum=64 * 1024,
        maximum=16 * TIB,
    )
    max_link_days: int = _setting(
        MAX_LINK_DAYS,
        "Days a share link is kept: older links are deleted at start-up and then hourly, freeing their bytes; "
        "0 keeps them forever",
        minimum=0,
        maximum=36500,
    )
    max_snapshot_days: int = _setting(
        MAX_SNAPSHOT_DAYS,
        "Days a published snapshot, and each process's part of a run, is kept: older ones are deleted at "
        "start-up and then hourly, freeing their bytes (a link to one then opens 'no such snapshot', whose hint "
        "says how long snapshots are kept); 0 keeps them forever",
        minimum=0,
        maximum=36500,
    )
    max_db_connections: int = _setting(
        MAX_DB_CONNECTIONS,
        "Connections this server holds to PostgreSQL at most (--db postgresql://...), its own pool: each replica "
        "has its own, so the database sees replicas × this (keep it under the server's max_connections). A "
        "request that waits max_db_wait_ms for one gets 503 store_unavailable. A SQLite store ignores it",
        minimum=2,
        maximum=1000,
    )
    max_db_wait_ms: int = _setting(
        MAX_DB_WAIT_MS,
        "Milliseconds a request waits on the database, for each of: a connection "
        "from the pool, a row lock another replica holds (PostgreSQL's lock_timeout), connecting (connect_timeout, "
        "in whole seconds, at least 2), the database acknowledging what was sent (tcp_user_timeout); SQLite's "
        "busy timeout. Past it the request gets 503 store_unavailable with Retry-After and nothing is stored. A "
        "database that fails as a database gone would (refused, lost, shut down) is marked down: from then on "
        "requests get their 503 at once, /api/health says unavailable, until a look every 0.5 s finds it back",
        minimum=100,
        maximum=60_000,
    )
    max_db_statement_ms: int = _setting(
        MAX_DB_STATEMENT_MS,
        "Milliseconds one PostgreSQL statement may run (statement_timeout): past it the request gets 503 "
        "store_unavailable with Retry-After and nothing is stored. A SQLite store ignores it",
        minimum=1000,
        maximum=3_600_000,
    )
    max_store_requests: int = _setting(
        MAX_STORE_REQUESTS,
        "Requests that use the store (share links, snapshots, runs, diffs, what-ifs, kernel jobs' states) in "
        "progress at once, each until its answer starts; one more waits for a turn, holding no worker thread, up to "
        "max_store_queue_ms, then gets 503 store_unavailable with Retry-After. The worker threads are at least this "
        f"many plus {SPARE_THREADS}, so routes that need no database (health, layout, topology, the pages) always "
        "find one, however slow the database is",
        maximum=4096,
    )
    max_store_queue_ms: int = _setting(
        MAX_STORE_QUEUE_MS,
        "Milliseconds a request that uses the store may wait for its turn — among max_store_requests (holding no "
        "worker thread), and for this server's one writer at a time — before its 503 store_unavailable with "
        "Retry-After. While the store does not answer, turns come round in milliseconds (each gets its 503 at "
        "once), so this bounds bursts on a store that answers slowly: 100 first reads of one large snapshot, 64 "
        "writers on a busy disk",
        minimum=0,
        maximum=600_000,
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
        maximum=1024,
    )
    max_kernel_seconds: int = _setting(
        MAX_KERNEL_SECONDS,
        "Seconds a kernel run (compile and execute) may take; past it the worker is killed and replaced and "
        "the run gets 422 timeout",
        maximum=3600,
    )
    max_compile_seconds: int = _setting(
        MAX_COMPILE_SECONDS,
        "Seconds a compile-only kernel run may take: a run on a tpu: set (or a gpu: set with the gpu extra) that "
        "asks for compile_only, or is past max_kernel_elements or max_worker_memory, is compiled for the hardware "
        "on abstract inputs (nothing is allocated for them and nothing runs), so this compile-time budget bounds "
        "it instead of the element limit; past it the worker is killed and replaced and the run gets 422 timeout",
        maximum=3600,
    )
    max_kernel_cache_entries: int = _setting(
        MAX_KERNEL_CACHE_ENTRIES,
        "Kernel results kept (least recently used go first), in memory and in the store that replicas share",
        minimum=0,
        maximum=65536,
    )
    max_kernel_jobs: int = _setting(
        MAX_KERNEL_JOBS,
        "Kernel jobs remembered for GET /api/kernels/jobs/{id} (oldest finished go), in memory and in the store "
        "that replicas share",
        maximum=65536,
    )
    max_kernel_job_silence_seconds: int = _setting(
        MAX_KERNEL_JOB_SILENCE_SECONDS,
        "Seconds a kernel job may go without a heartbeat from the server running it (it beats every second while "
        "the job is queued or running) before any server sharing the store reports it failed (worker_crashed): "
        "a replica that dies never leaves its jobs 'running'",
        minimum=3,
        maximum=3600,
    )
    max_kernel_result_bytes: int = _setting(
        MAX_KERNEL_RESULT_BYTES,
        "Bytes of kernel results held in memory: the result cache and the finished jobs each keep at most this "
        "much (least recently used, or oldest finished, go first; the job that just finished is always kept); "
        "the store keeps as much again of each, for every replica that shares it",
        minimum=65536,
        maximum=64 * GIB,
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
        maximum=2**31,
    )
    max_why_recompiles: int = _setting(
        6,
        "Candidate fixes a kernel run's worker compiles to find which spec removes a collective (sharding_core.why; "
        "0: explain only); each is one more compile of the kernel, on a TPU set compile-only",
        minimum=0,
        maximum=64,
    )
    max_why_seconds: int = _setting(
        5,
        "Seconds a kernel run's worker may spend compiling candidate fixes; candidates past it are not compiled "
        "and the why says so",
        minimum=0,
        maximum=600,
    )
    max_kernel_memory: int = _setting(
        0,
        "Bytes of memory the kernel workers may use together (0: half of the RAM this server may use: the "
        "machine's, or its memory cgroup's limit, as a container's memory limit sets it). A run starts only when "
        "its estimate fits in 95 % of it beside the runs in progress, each counted at the most of its estimate "
        "and what it has held (a compare's two sides count together: one waits for the other rather than both "
        "run past it); the workers share one parent memory cgroup with this limit where the server may make one, "
        "and a watchdog on the sum of their resident memory, past it, stops an idle worker that kept its last "
        "run's heap, else the run started last, which is queued again to run alone (a second stop gets 422 "
        "too_large). Start-up refuses a value above the RAM",
        minimum=0,
        maximum=256 * TIB,
    )
    max_worker_memory: int = _setting(
        0,
        "Bytes of memory one kernel worker may use (0: max_kernel_memory shared by max_kernel_workers). A run "
        "whose estimate (inputs on the host and on every device, the arrays the kernel creates, XLA's program, the "
        "reference) is larger gets 422 too_large before it runs; a worker that grows past it anyway is stopped "
        "(its own memory cgroup where the server may make one, and a resident-memory watchdog) and the run gets "
        "422 too_large. Start-up refuses max_kernel_workers × this above the RAM, or this above max_kernel_memory",
        minimum=0,
        maximum=256 * TIB,
    )
    # ---- searches' candidates compiled by the replicas (server/services/searches.py)
    max_search_workers: int = _setting(
        0,
        "Worker processes compiling the candidates of searches sent to this server (shardscope search --server): "
        "each runs the search's code, so 0 (the default) refuses POST /api/searches with 403; set it on a trusted "
        "team's server, and every replica that shares the store takes the queued candidates of every search",
        minimum=0,
        maximum=8,
    )
    max_searches: int = _setting(
        16,
        "Searches stored at once, with their candidates' results (one a client stopped polling for 120 s is "
        "abandoned and deleted when the next is stored); past it POST /api/searches gets 503",
        maximum=1024,
    )
    max_search_memory: int = _setting(
        8 * GIB,
        "Bytes of resident memory one search worker may use while it compiles a candidate; past it the compile is "
        "stopped and the candidate answered too_large (a Llama-3-70B step peaks near 2 GiB). Start-up refuses "
        "max_search_workers × this beside max_kernel_memory above the RAM",
        minimum=256 * MIB,
        maximum=256 * TIB,
    )
    max_kernel_text_chars: int = _setting(
        MAX_KERNEL_TEXT_CHARS,
        "Characters of StableHLO and of compiled HLO text in a kernel result; longer text is cut and flagged",
        minimum=1024,
        maximum=64 * MIB,
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
        maximum=TIB,
    )
    # ---- the HTTP server itself (passed to uvicorn by `shardscope serve`)
    max_connections: int = _setting(
        MAX_CONNECTIONS,
        "Requests in progress at once (each counts from its complete head until its response is done; idle "
        "connections and unfinished heads do not): one more gets 503 overloaded with Retry-After",
        maximum=65536,
    )
    max_header_bytes: int = _setting(
        MAX_HEADER_BYTES,
        "Bytes of an unfinished request head uvicorn buffers (h11_max_incomplete_event_size); more gets 431 "
        "too_large and the connection is closed",
        minimum=1024,
        maximum=MIB,
    )
    max_keep_alive_seconds: int = _setting(
        MAX_KEEP_ALIVE_SECONDS,
        "Seconds an idle keep-alive connection stays open (timeout_keep_alive)",
        maximum=3600,
    )
    max_open_connections: int = _setting(
        MAX_OPEN_CONNECTIONS,
        "Open connections, idle ones included; one more closes the connection idle longest (waiting for a "
        "request head or on keep-alive), never one with a request in progress. Capped to the open-file limit "
        "(RLIMIT_NOFILE, raised to its hard limit at start) less 256",
        minimum=16,
        maximum=2**20,
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
    max_body_seconds_per_mib: int = _setting(
        MAX_BODY_SECONDS_PER_MIB,
        "The slowest pace a request body may arrive at, as seconds per MiB (1024: 1 KiB/s): from 2 s after its "
        "head, a body behind that pace gets 408 request_timeout and the connection is closed, so a body trickled "
        "a byte at a time ends in seconds, not max_body_seconds",
        maximum=86400,
    )
    max_body_waits: int = _setting(
        MAX_BODY_WAITS,
        "Requests waiting for their body at once (head in, body still arriving). They hold no request slot "
        "(max_connections counts a request once its body is in); one more sets aside the one waiting longest: "
        "read no more, it is answered 503 overloaded 2 s later",
        minimum=8,
        maximum=65536,
    )
    max_client_requests: int = _setting(
        MAX_CLIENT_REQUESTS,
        "Requests one client address may have in progress at once, and as many waiting for their body; one more "
        "gets 429 busy with Retry-After (at once when in progress; 2 s later, read no more, when waiting for its "
        "body). Behind a reverse proxy every client has the proxy's address: raise it there",
        maximum=65536,
    )
    max_send_stall_seconds: int = _setting(
        MAX_SEND_STALL_SECONDS,
        "Seconds a response that backed up (the kernel would not take more) may wait for its reader to take any of "
        "it, counted as what the reader's TCP acknowledged; past it the connection is cut (a reader that never "
        "reads holds nothing longer than this). Acknowledgements come in steps of the reader's receive window, "
        "about 93 KiB on loopback (23 s at 4 KiB/s): 60 s lets a steady 4 KiB/s reader through",
        maximum=3600,
    )
    max_send_seconds_per_mib: int = _setting(
        MAX_SEND_SECONDS_PER_MIB,
        "The slowest pace a reader may take a response at, as seconds per MiB (256: 4 KiB/s), on average from the "
        "moment the response backed up, with max_send_stall_seconds of grace: a reader that has taken less than "
        "that pace times (the time since, less max_send_stall_seconds) is cut",
        maximum=86400,
    )
    max_send_buffer_bytes: int = _setting(
        MAX_SEND_BUFFER_BYTES,
        "Bytes of responses held for readers that have not taken them yet, in all (responses go out in 64 KiB "
        "pieces, a snapshot straight from the store); past it the slowest reader is cut, never the server",
        minimum=MIB,
        maximum=TIB,
    )
    # ---- who may write (server/auth.py, server/quota.py)
    max_session_seconds: int = _setting(
        MAX_SESSION_SECONDS,
        "Seconds a browser session lasts: opening a page at ?token= gives the browser a random session id (never "
        "the token) in an HttpOnly cookie; past this, after DELETE /api/session, or after a restart, the browser "
        "opens ?token= again",
        minimum=60,
        maximum=30 * 86400,
    )
    max_sessions: int = _setting(
        MAX_SESSIONS, "Browser sessions held at once; one more ends the oldest", minimum=16, maximum=2**20
    )
    max_client_store_bytes_per_hour: int = _setting(
        MAX_CLIENT_STORE_BYTES_PER_HOUR,
        "Bytes one client address may add to the store per hour (share links, snapshots, run parts, counted as "
        "the store counts them), refilled continuously; past it 429 quota_exceeded with Retry-After, nothing "
        "stored",
        minimum=64 * KIB,
        maximum=16 * TIB,
    )

    def kernel_memory(self, ram: int | None = None) -> int:
        """``max_kernel_memory`` in bytes, with 0 resolved to half of ``ram`` (default: what this server may use)."""
        return self.max_kernel_memory or (ram if ram is not None else available_ram()) // 2

    def worker_memory(self, ram: int | None = None) -> int:
        """``max_worker_memory`` in bytes, with 0 resolved to the kernel workers' total shared by the workers."""
        return self.max_worker_memory or self.kernel_memory(ram) // self.max_kernel_workers

    def memory_problem(self, ram: int | None = None) -> ShardingError | None:
        """Why these settings would let the kernel workers use more memory than there is, or None.

        ``ram``: the bytes this server may use (default: the machine's RAM, or its memory cgroup's limit)."""
        ram = ram if ram is not None else available_ram()
        total, each, workers = self.kernel_memory(ram), self.worker_memory(ram), self.max_kernel_workers
        if total > ram:
            message = f"max_kernel_memory is {fmt_bytes(total)}, more than the {fmt_bytes(ram)} of RAM here"
            setting = "max_kernel_memory"
        elif workers * each > ram:
            message = (
                f"max_kernel_workers × max_worker_memory is {workers} × {fmt_bytes(each)} = "
                f"{fmt_bytes(workers * each)}, more than the {fmt_bytes(ram)} of RAM here"
            )
            setting = "max_worker_memory"
        elif each > total:
            message = f"max_worker_memory ({fmt_bytes(each)}) is more than max_kernel_memory ({fmt_bytes(total)})"
            setting = "max_worker_memory"
        elif total + self.max_search_workers * self.max_search_memory > ram:
            searching = self.max_search_workers * self.max_search_memory
            message = (
                f"the kernel workers' {fmt_bytes(total)} and max_search_workers × max_search_memory "
                f"({self.max_search_workers} × {fmt_bytes(self.max_search_memory)}) are "
                f"{fmt_bytes(total + searching)}, more than the {fmt_bytes(ram)} of RAM here"
            )
            return ShardingError(
                BAD_SETTING,
                message,
                hint="lower max_search_memory or max_search_workers, or max_kernel_memory",
                setting="max_search_memory",
                ram=ram,
            )
        else:
            return None
        return ShardingError(
            BAD_SETTING,
            message,
            hint="lower max_worker_memory or max_kernel_workers, or leave max_worker_memory 0 (the total shared)",
            setting=setting,
            ram=ram,
        )

    def device_set(self, devices: str, slices: int = 1, chips_per_host: Sequence[int] | None = None) -> DeviceSet:
        """A request's device set, within this server's ``max_devices`` (which may be lower than the domain's)."""
        devset = parse_devices(devices, slices=slices, chips_per_host=chips_per_host)
        if len(devset) > self.max_devices:
            raise ShardingError(
                TOO_LARGE,
                f"{devset.key} has {len(devset)} devices; this server allows at most {self.max_devices} "
                "(setting max_devices)",
                hint="pick a smaller device set",
                limit=self.max_devices,
            )
        return devset

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
                    f"there is no setting {_shown(name)}",
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
            value = raw if isinstance(raw, int) and not isinstance(raw, bool) else whole_number(name, str(raw))
            if not row.minimum <= value <= row.maximum:
                shown = str(value) if len(str(value)) <= MAX_DIGITS else f"a number of {len(str(value))} digits"
                raise ShardingError(
                    BAD_SETTING,
                    f"{name} must be {row.minimum} to {row.maximum}, got {shown}",
                    setting=name,
                    minimum=row.minimum,
                    maximum=row.maximum,
                )
            changes[name] = value
        return dataclasses.replace(self, **changes)


_INTEGER = re.compile(r"[0-9]+(?:_[0-9]+)*", re.ASCII)


def whole_number(name: str, text: str) -> int:
    """A whole number as the command line gives it: ASCII digits only (``str.isdigit`` also takes "²" and
    Arabic-Indic digits), ``_`` between digits allowed, at most :data:`MAX_DIGITS` digits (checked before
    ``int``, which refuses more than 4300 digits with a traceback)."""
    cleaned = text.strip()
    if len(cleaned) > 2 * MAX_DIGITS or not _INTEGER.fullmatch(cleaned):
        raise ShardingError(
            BAD_SETTING,
            f"{name} takes a whole number (ASCII digits 0-9, at most {MAX_DIGITS}), got {_shown(text)}",
            setting=name,
        )
    digits = cleaned.replace("_", "")
    if len(digits) > MAX_DIGITS:
        raise ShardingError(BAD_SETTING, f"{name} takes at most {MAX_DIGITS} digits, got {len(digits)}", setting=name)
    return int(digits)


def _shown(text: str) -> str:
    """A value quoted for a one-line message: at most 32 characters, anything but printable ASCII escaped."""
    return ascii(text[:32] + ("…" if len(text) > 32 else ""))


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: int
    help: str
    minimum: int
    maximum: int
    fixed: str | None = None  # why it cannot be set (None: `--setting` changes it)


SETTINGS: list[Setting] = [
    Setting(f.name, int(getattr(Settings, f.name)), f.metadata["help"], f.metadata["minimum"], f.metadata["maximum"],
            f.metadata["fixed"])
    for f in dataclasses.fields(Settings)
]  # fmt: skip
"""The settings table: ``name``, ``default``, ``help`` and bounds of each limit."""

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
DEFAULTS: dict[str, int] = {s.name: s.default for s in SETTINGS}
