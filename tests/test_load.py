"""Issue 20 against a real ``shardscope serve`` over real sockets: slow bodies, readers that never read, one
merge for concurrent readers of a run, one memory budget for the kernel workers, and the start-up and
browser-session checks. Each is sized as the issue says and bounded in time; they print the figures the
reliability docs record (docs/operating.md).

Every loop talks to loopback addresses only (127.0.0.0/8: a client address per attacker where a test needs
several, as a team's machines would be).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from server.memcap import BACKSTOP_SLACK, available_ram
from server.settings import MAX_SEND_STALL_SECONDS
from sharding_core import new_run_id
from tests.helpers import allow_open_files, big_snapshot, cpu_stall_seconds, rss_kib, serve_refuses, stored_snapshot
from tests.plugins.live import Server, start, stop

pytestmark = pytest.mark.live  # a real server on a socket

GIB = 1024**3
MIB = 1024**2
TOKEN = "Lq3xV9zT0bRk6NwYp2HsJd8FmC4gEa7U1tZo5Xi"


def status_of(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


def health_ms(srv: Server) -> tuple[int, float]:
    """``GET /api/health`` on a fresh connection from 127.0.0.1: status and milliseconds."""
    began = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request("GET", "/api/health")
        response = conn.getresponse()
        response.read()
        return response.status, (time.monotonic() - began) * 1e3
    except (OSError, http.client.HTTPException):
        return 0, (time.monotonic() - began) * 1e3
    finally:
        conn.close()


def tcp_state(s: socket.socket) -> int:
    """The socket's TCP state (TCP_INFO's first byte): 1 established, 7 closed (reset), 8 close-wait (the
    peer closed) — read without reading any data."""
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return int(struct.unpack("B", info[:1])[0])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


# ---- 1,100 slow bodies on an open POST for 60 s -------------------------------------------------------------

SLOW_BODIES = 1100
HOLD_S = 60
OVERSUBSCRIBED = 0.5
"""The share of the siege during which some task on the machine waited for a CPU (``/proc/pressure/cpu``) above
which the health probes' latency bound (1 s) and cadence are reported, not asserted. Measured here: the siege alone
4 % (max 63 ms), beside two CPU-bound processes 25 % (max 119 ms: asserted); a CI run beside two compile workers of a
bench and the suite's own libtpu compile (dozens of runnable threads on two cores) saw 4 s. Every probe's status
(200) and the shedding are asserted whatever the load."""
WITHHELD = (
    b"POST /api/layout HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
)


def test_1100_withheld_bodies_for_60_s_leave_health_answering(tmp: Path) -> None:
    """Issue 20: 1,030 connections that sent a complete ``POST /api/layout`` head (Content-Length 100000) and
    withheld the body made ``/api/health`` answer 503 for 148 of 149 probes over 75 s, renewed after each
    408. Now 1,100 of them, every one renewed the moment the server lets it go — half from the prober's own
    address, half spread over 50 other addresses — leave ``/api/health`` answering 200 within a second,
    every half second, for 60 s, on a server started as the README and the compose file say."""
    allow_open_files(SLOW_BODIES + 1024)
    srv = start(tmp / "store.db", tmp / "server.log", args=("--token", TOKEN))
    sel = selectors.DefaultSelector()
    held: dict[socket.socket, str] = {}
    ended: dict[str, int] = {}
    sources = ["127.0.0.1"] * (SLOW_BODIES // 2) + [f"127.0.1.{1 + i % 50}" for i in range(SLOW_BODIES // 2)]

    def attack(source: str) -> None:
        s = socket.socket()
        s.setblocking(False)
        s.bind((source, 0))
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", srv.port))
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ, source)
        held[s] = source

    def settle(timeout: float) -> None:
        """Sends each new connection's head, and replaces each one the server answered or closed."""
        for key, events in sel.select(timeout):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            if events & selectors.EVENT_WRITE and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                with contextlib.suppress(OSError):
                    s.send(WITHHELD)
                sel.modify(s, selectors.EVENT_READ, key.data)
                if not events & selectors.EVENT_READ:
                    continue
            if events & selectors.EVENT_READ:
                try:
                    answer = s.recv(4096)
                except OSError:
                    answer = b""
                code = answer[9:12].decode("latin-1") if answer.startswith(b"HTTP/1.1 ") else "closed"
                ended[code] = ended.get(code, 0) + 1
                sel.unregister(s)
                s.close()
                source = held.pop(s)
                attack(source)  # renewed at once, as a hostile client would

    probes: list[tuple[int, float]] = []
    rss: list[int] = []
    stop_probing = threading.Event()

    def probe() -> None:  # every 0.5 s on its own thread, whatever the attackers' loop is doing
        next_at = time.monotonic()
        while not stop_probing.is_set():
            probes.append(health_ms(srv))
            rss.append(rss_kib(srv.proc.pid))
            next_at += 0.5
            stop_probing.wait(max(0.0, next_at - time.monotonic()))

    prober = threading.Thread(target=probe, daemon=True)
    try:
        rss_before = rss_kib(srv.proc.pid)
        for source in sources:
            attack(source)
        setup = time.monotonic()
        while time.monotonic() - setup < 3:  # every attacker connected and its head sent: the siege is on
            settle(0.05)
        began, stalled = time.monotonic(), cpu_stall_seconds()
        prober.start()
        while time.monotonic() - began < HOLD_S:
            settle(0.05)
        stop_probing.set()
        prober.join()
        busy = None if stalled is None else ((cpu_stall_seconds() or 0.0) - stalled) / (time.monotonic() - began)
        assert len(held) == SLOW_BODIES
    finally:
        stop_probing.set()
        for s in held:
            s.close()
        sel.close()
        log = srv.log.read_bytes()
        stop(srv)
    latencies = [ms for _, ms in probes]
    print(
        f"\n{SLOW_BODIES} withheld bodies (renewed at once) for {HOLD_S} s: {len(probes)} health probes, "
        f"statuses {sorted({s for s, _ in probes})}, p50 {percentile(latencies, 0.5):.1f} ms, p99 "
        f"{percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms; the attackers' connections ended "
        f"{dict(sorted(ended.items()))}; server RSS {rss_before // 1024} MiB before, {max(rss) // 1024} MiB at most; "
        f"some task waited for a CPU {'?' if busy is None else f'{busy:.0%}'} of the time"
    )
    assert all(status == 200 for status, _ in probes), probes
    if busy is None or busy < OVERSUBSCRIBED:
        assert len(probes) >= 2 * HOLD_S - 2
        assert max(latencies) < 1000  # the bound, throughout
    else:  # the figure above is still printed; the machine, not the server, set it
        print(f"the machine was oversubscribed (some task waited for a CPU {busy:.0%} of the time, over "
              f"{OVERSUBSCRIBED:.0%}): the 1 s bound and the probes' cadence were not asserted")  # fmt: skip
    # the longest waiting were shed, and one address was held to its share
    assert ended.get("503", 0) > SLOW_BODIES and ended.get("429", 0) > 0
    assert b"Traceback" not in log


def test_withheld_bodies_are_cut_at_the_minimum_pace(tmp: Path) -> None:
    """Below the bound on bodies waiting, each withheld body is let go at the pace's deadline (408, 2 s after
    its head plus a sweep), not after max_body_seconds (60 s): what the issue renewed after each 408."""
    srv = start(tmp / "store.db", tmp / "server.log")
    waiting: list[tuple[socket.socket, float]] = []
    try:
        for i in range(100):
            s = socket.socket()
            s.bind((f"127.0.3.{1 + i % 4}", 0))
            s.connect(("127.0.0.1", srv.port))
            s.sendall(WITHHELD + b"[1,")
            waiting.append((s, time.monotonic()))
        answers = []
        for s, sent in waiting:
            s.settimeout(10)
            answer = s.recv(4096)
            answers.append((answer[9:12], time.monotonic() - sent))
        assert srv.request("GET", "/api/health")[0] == 200
    finally:
        for s, _ in waiting:
            s.close()
        stop(srv)
    after = [seconds for _, seconds in answers]
    print(f"\n100 withheld bodies: each answered 408 {min(after):.2f}-{max(after):.2f} s after its head")
    assert {code for code, _ in answers} == {b"408"}
    assert min(after) >= 2.0 and max(after) < 3.5


# ---- 100 readers that never read a 50 MiB snapshot, and one that reads it at 4 KiB/s ------------------------

READERS = 100
STEADY_BYTES_PER_S = 4096  # the pace the docs promise is enough (max_send_seconds_per_mib 256)


class SteadyReader(threading.Thread):
    """Reads a response at ``rate`` bytes a second, evenly (a tenth of a second's worth at a time), with the
    kernel's default receive buffer: how a slow but steady client reads. ``got``: bytes read; ``reset``: the
    server cut it."""

    def __init__(self, port: int, path: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        self.rate, self.got, self.reset = rate, 0, False
        self.began = time.monotonic()
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.1):
            due = int((time.monotonic() - self.began) * self.rate) - self.got
            while due > 0:
                try:
                    piece = self.sock.recv(due)
                except OSError:
                    self.reset = True
                    return
                if not piece:
                    self.reset = True  # the server closed it
                    return
                self.got += len(piece)
                due -= len(piece)


def test_100_readers_that_never_read_are_cut_and_a_steady_4_kib_s_reader_is_not(tmp: Path) -> None:
    """Issue 20: ``GET /api/snapshots/{id}`` of a 50 MiB snapshot from sockets that never read: server RSS
    +979 MiB with 20 sockets, +2,926 MiB with 60, still held after 150 s. Issue 29: readers that did read, at
    8-128 KiB/s, were reset after 11-20 s (a full kernel send buffer counted as no progress). Now 100 sockets
    that never read grow the server by less than 100 MiB and every one is cut — by the rule, never before
    ``max_send_stall_seconds`` (checked on each socket's TCP state, without reading) — while a reader taking
    4 KiB/s beside them, as the docs promise is enough, is not cut, past the stall time and the pace's grace."""
    db = tmp / "store.db"
    payload = big_snapshot(50)
    assert 50 * MIB <= len(payload) < 52 * MIB
    snapshot_id = stored_snapshot(db, payload)
    del payload
    srv = start(db, tmp / "server.log")
    allow_open_files(READERS + 512)
    readers: list[socket.socket] = []
    steady = SteadyReader(srv.port, f"/api/snapshots/{snapshot_id}", STEADY_BYTES_PER_S)
    steady.start()
    try:
        rss_before = rss_kib(srv.proc.pid) * 1024
        sent_at: list[float] = []
        for i in range(READERS):
            s = socket.socket()
            s.bind((f"127.0.2.{1 + i % 10}", 0))  # ten readers an address (one address may have 64 requests)
            # a reader's receive window as small as the kernel allows: what the server sends piles up on its side
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", srv.port))
            s.sendall(f"GET /api/snapshots/{snapshot_id} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            sent_at.append(time.monotonic())
            readers.append(s)
        cut_after: dict[int, float] = {}
        peak = 0
        # However slowly a loaded machine starts the 100 responses, all are cut well inside this; the steady
        # reader then reads on past the stall time and 20 s of the pace rule.
        deadline = time.monotonic() + MAX_SEND_STALL_SECONDS + 60
        while (len(cut_after) < READERS or time.monotonic() - steady.began < MAX_SEND_STALL_SECONDS + 20) and (
            time.monotonic() < deadline and not steady.reset
        ):
            peak = max(peak, rss_kib(srv.proc.pid) * 1024)
            for i, s in enumerate(readers):
                if i not in cut_after and tcp_state(s) != 1:  # no longer established: the server let go
                    cut_after[i] = time.monotonic() - sent_at[i]
            time.sleep(0.05)
        steady_seconds = time.monotonic() - steady.began
        steady.halt.set()
        steady.join(5)
        assert srv.request("GET", "/api/health")[0] == 200
        served = srv.request("GET", f"/api/snapshots/{snapshot_id}")  # a reader that reads gets all of it
    finally:
        steady.halt.set()
        steady.sock.close()
        for s in readers:
            s.close()
        log = srv.log.read_bytes()
        stop(srv)
    growth = peak - rss_before
    print(
        f"\n{READERS} readers that never read a {len(served[2]) / MIB:.1f} MiB snapshot: server RSS "
        f"{rss_before / MIB:.0f} MiB before, +{growth / MIB:.1f} MiB at most; cut {min(cut_after.values()):.1f}-"
        f"{max(cut_after.values()):.1f} s after their request (max_send_stall_seconds {MAX_SEND_STALL_SECONDS}); "
        f"a reader at {STEADY_BYTES_PER_S} B/s read {steady.got / 1024:.0f} KiB in {steady_seconds:.0f} s, "
        f"{'cut' if steady.reset else 'not cut'}"
    )
    assert not steady.reset, f"the steady 4 KiB/s reader was cut after {steady_seconds:.0f} s"
    assert steady_seconds >= MAX_SEND_STALL_SECONDS + 20 and steady.got >= 0.9 * STEADY_BYTES_PER_S * steady_seconds
    assert len(cut_after) == READERS, f"{READERS - len(cut_after)} readers were never cut"
    assert min(cut_after.values()) >= MAX_SEND_STALL_SECONDS  # the rule: nothing moved for the stall time first
    assert growth < 100 * MIB
    assert served[0] == 200 and len(served[2]) == int(served[1]["content-length"])
    assert b"Traceback" not in log


# ---- four concurrent GETs of one unmerged run --------------------------------------------------------------

PARTS = 12
PART_MIB = 16


def stored_run(db: Path, parts: int, mib: float) -> str:
    """A run of ``parts`` processes, each part ``mib`` MiB, stored as publishing stores them; its read id."""
    from server.store import SqliteStore
    from sharding_core.snapshot.merge import part_keys

    secret = new_run_id()
    snap = orjson.loads(big_snapshot(mib, "run"))
    with SqliteStore(db, max_bytes=None) as store:
        read_id = store.run_read_id(secret)
        n = len(snap["devices"]["id"])
        for p in range(parts):
            snap["process_index"], snap["process_count"] = p, parts
            snap["devices"]["process_index"] = [i * parts // n for i in range(n)]
            snap["run"] = {"id": read_id, "process_index": p, "process_count": parts}
            store.put_run_part(read_id, p, orjson.dumps(snap), keys=part_keys(snap))
    return read_id


def timed_gets(srv: Server, path: str, readers: int) -> tuple[float, int, list[bytes]]:
    """``readers`` concurrent GETs of ``path``: wall seconds, the server's peak RSS growth, the bodies."""
    Path(f"/proc/{srv.proc.pid}/clear_refs").write_text("5")  # VmHWM back to the current RSS
    before = status_of(srv.proc.pid, "VmRSS")
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(readers) as pool:
        answers = list(pool.map(lambda _: srv.request("GET", path), range(readers)))
    seconds = time.monotonic() - began
    assert [status for status, _, _ in answers] == [200] * readers
    return seconds, status_of(srv.proc.pid, "VmHWM") - before, [body for _, _, body in answers]


def test_four_concurrent_gets_of_an_unmerged_run_cost_one_merge(tmp: Path) -> None:
    """Issue 20: 4 GETs of 12 x 41.7 MiB parts took +2,279 MiB and 30.5 s each (one GET: +658 MiB, 7.4 s).
    Now four concurrent GETs of an unmerged run take the memory and time of one (runs of the same size, one
    read alone, one by four at once, on the same server after a third warmed it up)."""
    db = tmp / "store.db"
    warm, alone, together = (stored_run(db, PARTS, PART_MIB) for _ in range(3))
    srv = start(db, tmp / "server.log")
    try:
        timed_gets(srv, f"/api/snapshots/runs/{warm}", 1)  # the first merge also warms the server up
        one_s, one_mem, (one,) = timed_gets(srv, f"/api/snapshots/runs/{alone}", 1)
        four_s, four_mem, bodies = timed_gets(srv, f"/api/snapshots/runs/{together}", 4)
    finally:
        stop(srv)
    print(
        f"\na run of {PARTS} x {PART_MIB} MiB parts: one GET {one_s:.2f} s, +{one_mem / MIB:.0f} MiB; four "
        f"concurrent GETs {four_s:.2f} s, +{four_mem / MIB:.0f} MiB (merged JSON {len(one) / MIB:.1f} MiB)"
    )
    assert len(set(bodies)) == 1 and abs(len(bodies[0]) - len(one)) < 1024  # the same run but for times and ids
    assert four_s < 1.5 * one_s + 0.5  # four merges took four times as long
    assert four_mem < 1.5 * one_mem + 32 * MIB  # and four times the memory


# ---- one memory budget for the kernel workers --------------------------------------------------------------


def heavy_reshard(rows: int) -> dict[str, Any]:
    """A reshard whose worker is estimated to need about a GiB (an 8-device array of ``rows`` x 16384 float32, up
    to 64 MiB, placed, moved and compared with its reference)."""
    mesh = {"shape": [2, 4], "axis_names": ["x", "y"]}
    return {"devices": "cpu:8", "mesh": mesh, "shape": [rows, 16384], "from": "P('x', 'y')", "to": "P('y', 'x')"}


def worker_sizes(server_pid: int) -> list[int]:
    """The resident memory of each of the server's worker processes (its children, and theirs)."""
    children: dict[int, list[int]] = {}
    sizes: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            pid = int(fields["Pid"])
            children.setdefault(int(fields["PPid"]), []).append(pid)
            sizes[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    out, todo = [], list(children.get(server_pid, []))
    while todo:
        pid = todo.pop()
        out.append(sizes.get(pid, 0))
        todo += children.get(pid, [])
    return out


def workers_rss(server_pid: int) -> int:
    """The resident memory of the server's worker processes together."""
    return sum(worker_sizes(server_pid))


def workers_settled(server_pid: int, workers: int, each_at_least: int, timeout_s: float = 180) -> int:
    """Waits until ``workers`` processes each hold ``each_at_least`` bytes (JAX imported in each) and their sum has
    stopped growing for two seconds, and returns the sum. A fixed total was once waited for in vain: four workers
    hold about 650 MiB together at rest, the test asked for 800 MiB, and the wait ran to its 180 s deadline."""
    deadline, last, steady_since = time.monotonic() + timeout_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        sizes = worker_sizes(server_pid)
        now = sum(sizes)
        if now > last + 4 * MIB:  # still importing (a page here or there is not growth)
            last, steady_since = now, time.monotonic()
        elif sum(size >= each_at_least for size in sizes) >= workers and time.monotonic() - steady_since >= 2.0:
            return now
        time.sleep(0.2)
    raise AssertionError(f"the workers held {last / MIB:.0f} MiB together after {timeout_s:.0f} s, not yet settled")


@contextlib.contextmanager
def sampled(pid: int, every_s: float = 0.02) -> Iterator[list[tuple[float, int]]]:
    """Samples the workers' resident memory together while the block runs: (monotonic seconds, bytes)."""
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.monotonic(), workers_rss(pid)))
            time.sleep(every_s)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


TOTAL = 3 * GIB


def longest_over(samples: list[tuple[float, int]], limit: int) -> float:
    """The longest stretch of seconds the samples stayed past ``limit`` (from the first sample past it to the
    first back under)."""
    longest, since = 0.0, None
    for at, rss in samples:
        if rss > limit and since is None:
            since = at
        elif rss <= limit and since is not None:
            longest, since = max(longest, at - since), None
    if since is not None:
        longest = max(longest, samples[-1][0] - since)
    return longest


EACH = 7 * GIB // 4  # a heavy reshard's compiled estimate fits one worker, even a warm one; four fit 7 GiB of RAM


def test_a_compare_of_two_heavy_sides_and_four_workers_stay_under_one_budget(tmp: Path) -> None:
    """Issue 20: one compare of two heavy reshard sides ran both at once, 10.3 GiB across two workers each
    under its 5.9 GiB cap. Now a compare of two heavy sides and two more heavy runs, with four workers,
    keep the workers' resident memory together (sampled every 20 ms) under one total, max_kernel_memory."""
    if available_ram() < 4 * EACH:
        pytest.skip(f"start-up refuses 4 workers of {EACH / GIB:.2f} GiB with {available_ram() / GIB:.1f} GiB of RAM")
    srv = start(
        tmp / "store.db",
        tmp / "server.log",
        {
            "max_kernel_workers": 4,
            "max_kernel_memory": TOTAL,
            "max_worker_memory": EACH,
            "max_kernel_elements": 2**25,
        },
    )
    try:
        assert srv.request("GET", "/api/kernels")[0] == 200  # the four workers start
        workers_settled(srv.proc.pid, workers=4, each_at_least=100 * MIB)
        compare = {"a": {"reshard": heavy_reshard(1024)}, "b": {"reshard": heavy_reshard(1016)}}
        runs = [heavy_reshard(rows) for rows in (1008, 1000)]
        with sampled(srv.proc.pid) as samples, concurrent.futures.ThreadPoolExecutor(3) as pool:
            # Each answer waits for its runs: on a loaded machine (load 20 on two cores) that is minutes, not the
            # 30 s a request is otherwise given (issue 29: the compare timed out on the client's side).
            compared = pool.submit(srv.post_json, "/api/compare", compare, 600)
            others = [pool.submit(srv.post_json, "/api/reshard", run, 600) for run in runs]
            results = [compared.result(600), *(f.result(600) for f in others)]
        log = srv.log.read_text()
    finally:
        stop(srv)
    statuses = [status for status, _ in results]
    held = max(rss for _, rss in samples)
    over = longest_over(samples, TOTAL)
    print(
        f"\na compare of two heavy reshards and two more, 4 workers, max_kernel_memory {TOTAL / GIB:.1f} GiB: the "
        f"workers held {held / GIB:.3f} GiB at most together ({len(samples)} samples, {over:.2f} s at most past "
        f"the total at a stretch); answers {statuses}"
    )
    assert statuses == [200, 200, 200], results
    # What server/pool.py promises: runs start within the total less a headroom, and the watchdog (a look every
    # 0.1 s) stops a worker once the sum passes it: a fast allocator may pass it between two looks (CI's full run
    # sampled 3.0002 GiB of 3 GiB once), never by more than the cgroup's backstop, and not for long.
    assert held <= TOTAL * BACKSTOP_SLACK
    assert over <= 2.0, f"{over:.2f} s past the total at a stretch"
    assert "Traceback" not in log


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (["max_worker_memory", "\u00b2"], "ASCII digits"),  # str.isdigit took a superscript
        (["max_kernel_workers", "\u0663"], "ASCII digits"),  # and an Arabic-Indic three
        (["max_kernel_workers", "9" * 5000], "ASCII digits"),  # int() refuses over 4300 digits
        (["max_kernel_seconds", "1" + "0" * 19], "1 to 3600"),  # 10^400 made every run 422 OverflowError
        (["max_worker_memory", "1" + "0" * 19], "0 to "),  # 10^30 left the cgroup unlimited
        (["max_kernel_workers", "64", "--setting", "max_worker_memory", str(1024 * GIB)], "RAM here"),
    ],
)
def test_hostile_settings_give_one_line_and_exit_2(tmp: Path, settings: list[str], says: str) -> None:
    line = serve_refuses("--db", str(tmp / "s.db"), "--setting", *settings, code="bad_setting")
    assert says in line and "\u00b2" not in line and "\u0663" not in line  # what was typed is shown escaped


def test_a_weak_token_gives_one_line_and_exit_2(tmp: Path) -> None:
    line = serve_refuses("--db", str(tmp / "s.db"), "--token", "a" * 16, code="bad_token")  # the token
    assert "128" in line
