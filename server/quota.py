"""Per-client write quotas: how many bytes one client address may add to the store per hour.

Technique: **a token bucket per client** (as rate limiters such as nginx's ``limit_req`` or a cloud API's
quotas work). Each address has a bucket of ``per_hour`` bytes that refills continuously at
``per_hour / 3600`` bytes a second; a write takes its size out first, and a write the bucket cannot
cover is refused with 429 ``quota_exceeded`` and a ``Retry-After`` saying when it could be. The
issue this answers: anyone with the token filled a 1 GiB store in 14 s, and every write was 507 for
the 90 days its snapshots were kept. Buckets are kept for at most ``max_clients`` addresses (a full
bucket is forgotten first: forgetting it changes nothing), so the table is bounded too.
"""

from __future__ import annotations

import collections
import contextlib
import ipaddress
import math
import threading
import time
from collections.abc import Callable, Iterator

from server.errors import ApiError
from server.settings import MAX_CLIENT_STORE_BYTES_PER_HOUR

QUOTA_EXCEEDED = "quota_exceeded"
MAX_CLIENTS = 65536
HOUR = 3600.0


def client_key(host: str | None) -> str:
    """Who a client is for its quotas: its IPv4 address, or its IPv6 /64 (one host's allocation: an IPv6
    client can pick any of 2^64 addresses in it); other names as they are."""
    if not host:
        return ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else address)


class WriteQuota:
    """Bytes per hour per client address. Thread-safe; ``clock`` is monotonic seconds (tests move it)."""

    def __init__(
        self,
        per_hour: int = MAX_CLIENT_STORE_BYTES_PER_HOUR,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_hour = per_hour
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()  # (left, at)
        self._lock = threading.Lock()

    def left(self, client: str) -> float:
        """Bytes ``client`` may still write now."""
        with self._lock:
            return self._level(client, self.clock())

    def _level(self, client: str, now: float) -> float:
        left, at = self._buckets.get(client, (float(self.per_hour), now))
        return min(float(self.per_hour), left + (now - at) * self.per_hour / HOUR)

    def charge(self, client: str, size: int) -> None:
        """Takes ``size`` bytes out of ``client``'s bucket, or refuses with 429 ``quota_exceeded``."""
        with self._lock:
            now = self.clock()
            left = self._level(client, now)
            if size > left:
                wait = math.ceil((size - left) * HOUR / self.per_hour) if size <= self.per_hour else math.ceil(HOUR)
                raise ApiError(
                    429,
                    QUOTA_EXCEEDED,
                    f"this address has written its share to the store for now: this write needs {size} bytes, "
                    f"{int(left)} are left of {self.per_hour} per hour (setting max_client_store_bytes_per_hour); "
                    "nothing was stored",
                    hint=f"try again in {wait} s, or ask the server's operator to raise the quota",
                    headers={"Retry-After": str(wait)},
                    retry_after=wait,
                    limit=self.per_hour,
                )
            self._buckets[client] = (left - size, now)
            self._buckets.move_to_end(client)
            self._forget(now)

    def refund(self, client: str, size: int) -> None:
        """Gives ``size`` bytes back (the write they were taken for stored nothing)."""
        with self._lock:
            now = self.clock()
            self._buckets[client] = (min(float(self.per_hour), self._level(client, now) + size), now)

    @contextlib.contextmanager
    def spending(self, client: str, size: int) -> Iterator[None]:
        """Charges ``size`` for the write in the block, and refunds it if the block raises (nothing stored)."""
        self.charge(client, size)
        try:
            yield
        except BaseException:
            self.refund(client, size)
            raise

    def _forget(self, now: float) -> None:
        """Past ``max_clients`` buckets, the least recently charged go (full ones first: nothing is lost)."""
        if len(self._buckets) <= self.max_clients:
            return
        for client in [c for c in self._buckets if self._level(c, now) >= self.per_hour]:
            del self._buckets[client]
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
