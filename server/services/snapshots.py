"""Published snapshots and runs in the store: :class:`SnapshotRepository`, one per app (``app.state.snapshots``).

The server never runs user code: a snapshot is checked (:func:`sharding_core.snapshot.format.check_snapshot`),
enriched with its per-device memory, and stored with its share link in one transaction. A run's parts are
stored under the run's read id (an HMAC of the secret its processes share, :meth:`server.store.Store.run_read_id`)
and merged when read, one part at a time. Parsed snapshots and merged runs are cached by bytes.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import gc
import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool

from server.errors import ApiError, not_found
from server.quota import WriteQuota
from server.services.links import link_payload
from server.settings import SNAPSHOT_CACHE_BYTES, Settings
from server.store import RECORD_OVERHEAD, Blob, Store
from server.store.checks import damaged, snapshot_problem
from sharding_core.cache import BoundedCache
from sharding_core.cost.annotate import facts_only, snapshot_with_estimates
from sharding_core.errors import ShardingError
from sharding_core.snapshot.diff import diff
from sharding_core.snapshot.format import RUN_CONFLICT, check_snapshot
from sharding_core.snapshot.memory import enrich
from sharding_core.snapshot.merge import check_part, merge_run, part_keys
from sharding_core.snapshot.whatif import whatif

SNAPSHOTS = "snapshots"
VIEW = "snapshots"
READ_ONLY_RUN = "read_only_run"
LINK_ESTIMATE = 4 * RECORD_OVERHEAD
"""What a snapshot's quota charge adds to its JSON: its link and rows, about as the store counts them."""
COLLECTIVES = b'"collectives":[{'
PLAN = b'"plan":{'
FIGURED = (COLLECTIVES, PLAN)
"""What a stored snapshot holds that gets today's figures when it is read: collectives, a plan."""
SCAN_BYTES = 1024 * 1024
MAX_REMEMBERED = 65536
"""Snapshots whose having collectives or a plan to figure is remembered (ids, immutable records)."""
MergeKey = tuple[str, tuple[tuple[int, str], ...]]
"""A run's read id and its parts (process index, snapshot id): a run that gains or loses a part is merged afresh."""
PARSED_PER_JSON_BYTE = 4
"""A parsed snapshot holds about three times its JSON as Python objects; it is counted as four."""


class GcPause:
    """Pauses Python's cyclic garbage collector while parts are parsed and merged (reference counting
    still frees everything: parsed JSON has no cycles). Otherwise each part's hundreds of thousands of
    new containers set off collections that walk them again and again: parsing a 4 MiB part took
    0.29 s instead of 0.03 s, and a 12-part merge 3.3 s instead of 1.5 s (bench/bench_runs.py).

    Counted, so concurrent merges re-enable it only when the last one ends. The collector belongs to
    the process, so there is one counter per process (:data:`PROCESS_GC`), whichever app pauses it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pauses = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self.pauses == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self.pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self.pauses -= 1
                if self.pauses == 0 and self._was_enabled:
                    gc.enable()


PROCESS_GC = GcPause()


class SnapshotRepository:
    """Snapshots and runs: publish, read, merge, diff and what-if, over one store.

    ``parsed``: parsed snapshots (immutable: what-if edits re-read the same one), each counted as
    :data:`PARSED_PER_JSON_BYTE` times its JSON, keyed by the store's deletions so expiry is seen at
    once. ``merged``: merged runs as JSON (a fraction of the parsed objects' memory), keyed by the
    parts' ids, so a run that gains (or, expiring, loses) a process is merged afresh. Each holds at most
    ``cache_bytes``.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        quota: WriteQuota | None = None,
        *,
        cache_bytes: int = SNAPSHOT_CACHE_BYTES,
        gc_pause: GcPause = PROCESS_GC,
    ) -> None:
        self.store = store
        self.settings = settings
        self.quota = quota if quota is not None else WriteQuota(settings.max_client_store_bytes_per_hour)
        self.gc = gc_pause
        self.parsed: BoundedCache[tuple[dict[str, Any], int]] = BoundedCache(cache_bytes, lambda hit: hit[1])
        self.merged: BoundedCache[bytes] = BoundedCache(cache_bytes, len)
        self.estimated: BoundedCache[bytes] = BoundedCache(cache_bytes, len)
        self._collectives: collections.OrderedDict[str, bool] = collections.OrderedDict()
        self._merges: dict[MergeKey, concurrent.futures.Future[bytes]] = {}
        self._merges_lock = threading.Lock()
        self._scan_locks: dict[str, tuple[threading.Lock, int]] = {}  # snapshot id -> (its scan's lock, users)
        self.merges = 0  # merges done (what the single-flight tests count)

    def not_found(self) -> ApiError:
        """The 404 for a snapshot or run that is not (or no longer) stored, with this store's retention."""
        return not_found("snapshot", self.store.kept_days(SNAPSHOTS))

    # ---- publishing ------------------------------------------------------------------------------------

    def publish(self, body: Mapping[str, Any], client: str = "") -> dict[str, Any]:
        """Stores a snapshot from ``sharding_core.publish`` and a share link to its view, together:
        ``{"id", "url": "/s/<link>", "run": read id | null}``.

        A snapshot naming a ``run`` is one process's part of a multi-process run: each process posts its
        own, once, with the run's secret (``run.id``); the part is stored under the run's read id, which
        is what the answer, the link and the stored part carry, never the secret.
        """
        check_snapshot(body)
        snap = facts_only(enrich(dict(body)))  # estimates are added when it is read, from today's figures
        run = body["run"]
        max_link = self.settings.max_link_bytes
        if run is None:
            payload = orjson.dumps(snap)
            with self.quota.spending(client, len(payload) + LINK_ESTIMATE):
                snapshot_id, link_id = self.store.put_linked(
                    SNAPSHOTS, payload, lambda sid: link_payload(VIEW, {"snapshot": sid}, max_link)
                )
            return {"id": snapshot_id, "url": f"/s/{link_id}", "run": None}
        read_id = self._read_id(run["id"])
        snap["run"] = {**run, "id": read_id}
        payload = orjson.dumps(snap)
        with self.quota.spending(client, len(payload) + LINK_ESTIMATE):
            part = self.store.put_run_part(
                read_id,
                run["process_index"],
                payload,
                keys=part_keys(snap),
                check=functools.partial(_check_part, snap),
                link=link_payload(VIEW, {"run": read_id}, max_link),
            )
        if part is None:
            raise ApiError(
                409,
                RUN_CONFLICT,
                f"process {run['process_index']} already published to this run; a run's parts are write-once",
                hint="publish a later state under a new run id (leave run_id out and one is drawn)",
            )
        return {"id": part.snapshot_id, "url": f"/s/{part.link_id}", "run": read_id}

    def _read_id(self, secret: str) -> str:
        """The read id of the run whose secret is ``secret``; 403 if ``secret`` is itself a run's read id
        (taken from a share link: reading a run must never be enough to write to it)."""
        if self.store.run_exists(secret):
            raise ApiError(
                403,
                READ_ONLY_RUN,
                "this run id is a run's read id, as share links and /api/snapshots/runs/ carry it, and a read id "
                "cannot add parts: a part needs the run's secret, the run_id its processes share",
                hint="publish under a new run id (leave run_id out, or pass sharding_core.new_run_id() to every "
                "process); runs published before read ids existed keep their old id as read id and take no more "
                "parts",
            )
        return self.store.run_read_id(secret)

    # ---- reading -----------------------------------------------------------------------------------------

    def snapshot_json(self, snapshot_id: str) -> bytes:
        """The stored snapshot with its id in front, as JSON (whole: what tools and tests read)."""
        payload = self.store.get(SNAPSHOTS, snapshot_id)
        if payload is None:
            raise self.not_found()
        return _with_id(snapshot_id) + payload[1:]

    def open_snapshot(self, snapshot_id: str) -> tuple[bytes, Blob] | bytes:
        """The stored snapshot as served. Most go piece by piece from the store: what goes first (its id), and
        its stored JSON to read from its second byte on (the ``{`` the id already opened; the caller closes
        the blob). One with ``inspect_jit`` collectives or a plan gets today's figures (cost/annotate.py), so it
        is decoded, estimated and encoded once, and kept (by bytes, in ``estimated``) for every reader."""
        blob = self.store.open_blob(SNAPSHOTS, snapshot_id)  # its length checked against what was stored
        if blob is None:
            raise self.not_found()
        try:
            figured = self._has_figures(snapshot_id, blob)
        except BaseException:
            blob.close()
            raise
        if not figured:
            blob.seek(0)
            return _with_id(snapshot_id), blob
        blob.close()
        key = ("snapshot", self.store.deletions, snapshot_id)
        hit = self.estimated.get(key)
        if hit is not None:
            return hit
        payload = self.store.get(SNAPSHOTS, snapshot_id)
        if payload is None:
            raise self.not_found()
        return self.estimated.put(key, _with_id(snapshot_id) + _estimated(payload, snapshot_id)[1:])

    def _has_figures(self, snapshot_id: str, blob: Blob) -> bool:
        """Whether a stored snapshot has collectives to estimate or a plan to figure (orjson writes a non-empty
        list as ``"collectives":[{`` and a plan as ``"plan":{``; inside a string the quotes would be escaped),
        found by reading it piece by piece once and remembered by id (records are immutable). The same reading
        checks it is what was stored (its digest; before schema 5, that it is one JSON object from its first
        byte to its last) before a byte of it is sent: 500 ``stored_record_damaged`` if not."""
        known = self._collectives.get(snapshot_id)
        if known is not None:
            return known
        with self._scanning(snapshot_id):  # one reading per snapshot, however many ask for it at once
            known = self._collectives.get(snapshot_id)
            return known if known is not None else self._scan(snapshot_id, blob)

    @contextlib.contextmanager
    def _scanning(self, snapshot_id: str) -> Iterator[None]:
        """Holds the snapshot's scan lock: the first of concurrent readers scans, the others then find its answer
        (issue 29: 100 first reads of one 50 MiB snapshot hashed 5 GB before the first byte went out)."""
        with self._merges_lock:
            lock, users = self._scan_locks.get(snapshot_id, (threading.Lock(), 0))
            self._scan_locks[snapshot_id] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._merges_lock:
                lock, users = self._scan_locks[snapshot_id]
                if users == 1:
                    del self._scan_locks[snapshot_id]
                else:
                    self._scan_locks[snapshot_id] = (lock, users - 1)

    def _scan(self, snapshot_id: str, blob: Blob) -> bool:
        found, tail, first, last = False, b"", b"", b""
        digest = hashlib.sha256() if blob.digest is not None else None
        while True:
            piece = blob.read(SCAN_BYTES)
            if not piece:
                break
            found = found or any(marker in tail + piece for marker in FIGURED)
            tail = piece[-len(COLLECTIVES) :]
            first, last = first or piece[:1], piece[-1:]
            if digest is not None:
                digest.update(piece)
        if digest is not None and digest.digest() != blob.digest:
            raise damaged(SNAPSHOTS, snapshot_id, "its bytes are not those that were stored")
        if (first, last) != (b"{", b"}"):
            raise damaged(SNAPSHOTS, snapshot_id, "it is not one JSON object")
        with self._merges_lock:
            self._collectives[snapshot_id] = found
            while len(self._collectives) > MAX_REMEMBERED:
                self._collectives.popitem(last=False)
        return found

    def merged_json(self, run_id: str) -> bytes:
        """The merged picture of a run (``run_id``: its read id) as JSON. One merge per run (and set of parts)
        is in flight at a time: concurrent readers wait for it and share its result (issue 20: four GETs of
        one unmerged run merged it four times, with four times the memory and time)."""
        merge, key = self._merge_of(run_id)
        if key is not None:
            self._merge(key, merge)
        return merge.result()

    async def merged_json_async(self, run_id: str) -> bytes:
        """:meth:`merged_json` for the event loop: a reader waiting for another's merge holds no thread."""
        merge, key = await run_in_threadpool(self._merge_of, run_id)
        if key is not None:
            await run_in_threadpool(self._merge, key, merge)
        return await asyncio.wrap_future(merge)

    async def served_run(self, run_id: str) -> bytes:
        """A run as served: merged (once, however many read it at once) and, when its parts have collectives,
        with today's estimates (computed once per merge and kept, by bytes, in ``estimated``)."""
        text = await self.merged_json_async(run_id)
        if not any(marker in text for marker in FIGURED):
            return text
        key = ("run", run_id, len(text), hash(text))
        hit = self.estimated.get(key)
        if hit is not None:
            return hit
        return self.estimated.put(key, await run_in_threadpool(_estimated, text, None))

    def _merge_of(self, run_id: str) -> tuple[concurrent.futures.Future[bytes], MergeKey | None]:
        """The merge of the run as it stands: done or in flight (key None), or to do (the caller does it)."""
        parts = self.store.run_parts(run_id)
        if not parts:
            raise self.not_found()
        key = (run_id, tuple(parts))
        with self._merges_lock:
            merge = self._merges.get(key)
            if merge is not None:
                return merge, None
            merge = concurrent.futures.Future()
            hit = self.merged.get(key)
            if hit is not None:
                merge.set_result(hit)
                return merge, None
            self._merges[key] = merge
            return merge, key

    def _merge(self, key: MergeKey, merge: concurrent.futures.Future[bytes]) -> None:
        run_id, parts = key
        try:
            # Parts are parsed one at a time and dropped once folded in: a merge holds the result plus one part.
            with self.gc.paused():
                merged = merge_run(run_id, ((p, sid, self.part(sid)) for p, sid in parts), text=_canonical)
                text = orjson.dumps(merged)
                del merged
            self.merges += 1
            merge.set_result(self.merged.put(key, text))  # kept when it fits the cache; the waiters share it anyway
        except BaseException as e:  # noqa: BLE001 - every waiter gets the merge's own error, whatever it is
            merge.set_exception(e)
        finally:
            with self._merges_lock:
                del self._merges[key]

    def part(self, snapshot_id: str) -> dict[str, Any]:
        """One stored snapshot parsed, uncached (a run's part while it is merged)."""
        payload = self.store.get(SNAPSHOTS, snapshot_id)
        if payload is None:  # expired since the parts were listed
            raise self.not_found()
        return parse_stored(snapshot_id, payload)

    def load(self, ref: Mapping[str, Any]) -> dict[str, Any]:
        """The snapshot a reference names (``{"snapshot": id}``, a run merged ``{"run": read id}``, or one
        process of a run ``{"run": read id, "process": n}``; with ``"fix": k`` its k-th compiled fix) parsed, or
        the 4xx that says why not: what diff, what-if and compare read."""
        check_ref(ref)
        fix = ref.get("fix")
        if fix is not None:
            # An explained snapshot's fix k: the program as that fix compiled it, carried in the snapshot.
            fixes = self.load({k: v for k, v in ref.items() if k != "fix"}).get("fixes") or []
            if not 0 <= fix < len(fixes):
                raise ApiError(
                    404, "not_found", f"the snapshot has {len(fixes)} compiled fixes, not a fix {fix}",
                    hint="fixes come with sharding_core.explain captures",
                )  # fmt: skip
            fixed: dict[str, Any] = fixes[fix]
            return fixed
        snapshot, run, process = ref.get("snapshot"), ref.get("run"), ref.get("process")
        if snapshot is not None:
            return self.parsed_snapshot(snapshot)
        assert run is not None
        if process is None:
            text = self.merged_json(run)
            with self.gc.paused():
                merged: dict[str, Any] = orjson.loads(text)
            return merged
        parts = dict(self.store.run_parts(run))
        if process not in parts:
            raise self.not_found()
        return self.parsed_snapshot(parts[process])

    def parsed_snapshot(self, snapshot_id: str) -> dict[str, Any]:
        key = (self.store.deletions, snapshot_id)
        hit = self.parsed.get(key)
        if hit is not None and self.store.exists(SNAPSHOTS, snapshot_id):
            return hit[0]
        payload = self.store.get(SNAPSHOTS, snapshot_id)
        if payload is None:
            raise self.not_found()
        parsed = parse_stored(snapshot_id, payload)
        return self.parsed.put(key, (parsed, PARSED_PER_JSON_BYTE * len(payload)))[0]

    # ---- computing from stored snapshots -------------------------------------------------------------------

    def diff(self, a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
        """Leaves whose sharding changed from ``a`` to ``b`` and the bytes each device would receive."""
        check_ref(a)
        check_ref(b)
        return diff(self.load(a), self.load(b))

    def whatif(self, ref: Mapping[str, Any], rules: Sequence[Any]) -> dict[str, Any]:
        """Every logically named leaf of ``ref`` re-laid out under other logical → mesh rules."""
        return whatif(self.load(ref), rules)


def check_ref(ref: Mapping[str, Any]) -> None:
    """A reference names exactly one thing: a snapshot, a run, or a process of a run."""
    snapshot, run, process = ref.get("snapshot"), ref.get("run"), ref.get("process")
    if (snapshot is None) == (run is None) or (process is not None and run is None):
        raise ApiError(
            422,
            "validation_error",
            'a snapshot reference is {"snapshot": id}, {"run": run_id} or {"run": run_id, "process": n}',
        )


def _check_part(snap: dict[str, Any], run_keys: Mapping[str, str]) -> None:
    try:
        check_part(snap, run_keys)
    except ShardingError as e:  # the part is fine alone but conflicts with the run: 409
        raise ApiError(409, e.code, e.message, e.hint, **e.details) from None


def parse_stored(snapshot_id: str, payload: bytes) -> dict[str, Any]:
    """A stored snapshot parsed and checked for the fields its readers use; 500 ``stored_record_damaged`` naming
    it when it is not JSON or not a snapshot (a record stored before schema 5, without a digest to check)."""
    try:
        parsed = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise damaged(SNAPSHOTS, snapshot_id, "it is not JSON") from None
    problem = snapshot_problem(parsed)
    if problem is not None:
        raise damaged(SNAPSHOTS, snapshot_id, problem)
    snapshot: dict[str, Any] = parsed
    return snapshot


def _estimated(payload: bytes, snapshot_id: str | None) -> bytes:
    """A stored snapshot (``snapshot_id``; None: a merged run, parsed from parts already checked) with its
    ``inspect_jit`` collectives estimated on its own devices, today (any estimate it was stored with is replaced)."""
    parsed = parse_stored(snapshot_id, payload) if snapshot_id is not None else orjson.loads(payload)
    return orjson.dumps(snapshot_with_estimates(parsed))


def _with_id(snapshot_id: str) -> bytes:
    """The start of a stored snapshot as served: ``{"id": ...,`` (the stored JSON is an object; splicing the id
    in front spares decoding and re-encoding megabytes)."""
    return b'{"id":' + orjson.dumps(snapshot_id) + b","


def _canonical(item: Mapping[str, Any]) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
