"""Clients through a database outage (issue 29): what tests/test_store_outage.py and bench/outage.py both drive.

:class:`Load` runs ``clients`` threads against one or more ``shardscope serve`` ports, each on its own loopback
address and keep-alive connection, writing share links and reading back the ones acknowledged, and one probe
thread each for ``GET /api/health`` and ``POST /api/layout`` (routes that need no database). Every answer is kept
(:class:`Answer`: when it was asked, how long it took, status, ``Retry-After``, error code), every acknowledged
write with what it stored, so a caller can stop and start the database meanwhile and then check that nothing
acknowledged was lost and how long answers took, phase by phase.
"""

from __future__ import annotations

import dataclasses
import http.client
import random
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

LAYOUT = orjson.dumps(
    {"devices": "cpu:8", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}, "spec": "P('x', None)",
     "shape": [4, 8], "dtype": "float32"}
)  # fmt: skip
JSON = {"Content-Type": "application/json"}
TIMEOUT_S = 60.0
"""A request unanswered for this long counts as hung (status 0)."""


@dataclasses.dataclass(frozen=True)
class Answer:
    kind: str  # "write", "read", "health", "layout"
    began: float  # time.monotonic() when it was sent
    seconds: float
    status: int  # 0: no answer (a socket error or the timeout)
    retry_after: str | None
    code: str | None  # the error's code, for 4xx and 5xx
    message: str = ""  # the start of the error's message


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


class Load:
    """``clients`` writers and readers of share links, plus a health and a layout probe, against ``ports``."""

    def __init__(self, ports: Sequence[int], clients: int, *, probe_every_s: float = 0.05, seed: int = 0) -> None:
        self.ports, self.clients, self.probe_every_s, self.seed = list(ports), clients, probe_every_s, seed
        self.answers: list[Answer] = []
        self.acknowledged: list[tuple[str, int]] = []  # (link id, the n it stored)
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._threads: list[threading.Thread] = []
        self._n = 0

    def __enter__(self) -> Load:
        for i in range(self.clients):
            self._threads.append(threading.Thread(target=self._client, args=(i,), daemon=True))
        self._threads.append(threading.Thread(target=self._probe, args=("health",), daemon=True))
        self._threads.append(threading.Thread(target=self._probe, args=("layout",), daemon=True))
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(TIMEOUT_S + 5)

    def _connect(self, port: int, address: str) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S, source_address=(address, 0))

    def _ask(
        self, conn: http.client.HTTPConnection, kind: str, method: str, path: str, body: bytes | None = None
    ) -> tuple[Answer, bytes]:
        began = time.monotonic()
        try:
            conn.request(method, path, body=body, headers=JSON if body is not None else {})
            response = conn.getresponse()
            data = response.read()
            status, retry = response.status, response.getheader("retry-after")
        except (OSError, http.client.HTTPException):
            conn.close()
            status, retry, data = 0, None, b""
        code, message = None, ""
        if status >= 400:
            try:
                error = orjson.loads(data)["error"]
                code, message = str(error["code"]), str(error["message"])[:90]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                code = "?"
        answer = Answer(kind, began, time.monotonic() - began, status, retry, code, message)
        with self._lock:
            self.answers.append(answer)
        return answer, data

    def _client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        port = self.ports[index % len(self.ports)]
        conn = self._connect(port, f"127.0.6.{1 + index % 250}")  # an address each: per-client limits stay apart
        try:
            self._requests(conn, rng)
        finally:
            conn.close()

    def _requests(self, conn: http.client.HTTPConnection, rng: random.Random) -> None:
        while not self._halt.is_set():
            with self._lock:
                known = self.acknowledged[-200:]
            if known and rng.random() < 0.4:
                link, n = rng.choice(known)
                self._ask(conn, "read", "GET", f"/api/links/{link}")
                continue
            with self._lock:
                self._n += 1
                n = self._n
            answer, data = self._ask(conn, "write", "POST", "/api/links",
                                     orjson.dumps({"view": "layout", "state": {"n": n}}))  # fmt: skip
            if answer.status == 201:
                with self._lock:
                    self.acknowledged.append((str(orjson.loads(data)["id"]), n))
            elif answer.status == 503:
                time.sleep(0.05)  # a client told to come back (Retry-After) does not spin

    def _probe(self, kind: str) -> None:
        port = self.ports[0]
        conn = self._connect(port, "127.0.7.1" if kind == "health" else "127.0.7.2")
        try:
            while not self._halt.wait(self.probe_every_s):
                if kind == "health":
                    self._ask(conn, kind, "GET", "/api/health")
                else:
                    self._ask(conn, kind, "POST", "/api/layout", LAYOUT)
        finally:
            conn.close()

    def between(self, start: float, end: float, kinds: Iterable[str] | None = None) -> list[Answer]:
        """The answers to requests sent between ``start`` and ``end`` (monotonic), of ``kinds`` (default: all)."""
        wanted = set(kinds) if kinds is not None else None
        with self._lock:
            return [a for a in self.answers if start <= a.began < end and (wanted is None or a.kind in wanted)]


def lost(ports: Sequence[int], acknowledged: Sequence[tuple[str, int]]) -> list[tuple[str, int, Any]]:
    """The acknowledged writes that do not read back as written (through each port in turn): what was lost."""
    missing = []
    conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=TIMEOUT_S) for p in ports]
    try:
        for i, (link, n) in enumerate(acknowledged):
            conn = conns[i % len(conns)]
            conn.request("GET", f"/api/links/{link}")
            response = conn.getresponse()
            body = response.read()
            if response.status != 200 or orjson.loads(body) != {"view": "layout", "state": {"n": n}}:
                missing.append((link, n, (response.status, body[:200])))
    finally:
        for conn in conns:
            conn.close()
    return missing
