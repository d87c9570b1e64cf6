"""Who may write to a shared server: the token it was started with, and the browser sessions it hands out.

Technique: **a bearer token for scripts, server-side sessions for browsers** (as Jupyter's token hand-off
and OWASP's session management cheat sheet describe). The token is long-lived and the operator's; a
browser never keeps it. Opening a page at ``?token=T`` makes a session: 256 random bits from
:mod:`secrets`, sent as an ``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` too whenever the request came
over HTTPS, directly or through a trusted proxy, :class:`server.middleware.TrustedProxies`) and kept here only
as its SHA-256, with an end time (``max_session_seconds``) and **the client address it was opened from**.
Cookies are not scoped by port, so any other service on the same host name (TensorBoard, Jupyter) sees the
cookie; what it sees is a session id that is not the token, cannot be used as a bearer token, ends on its own,
ends at once on ``DELETE /api/session`` or a restart, and writes only from the address the browser opened it
from (its IPv4 address or IPv6 /64, as quotas count clients): a replay from that service's own machine is
refused (issue 29: it wrote for 12 h). What is left, docs/security.md says: a replay from the browser's own
address — the same machine, or behind the same NAT or proxy — is not told apart.

Tokens must carry at least 128 bits (:func:`token_problem`), judged by their length and alphabet, with
repetition and placeholders refused.
"""

from __future__ import annotations

import collections
import hashlib
import math
import secrets
import string
import threading
import time
from collections.abc import Callable

from server.settings import MAX_SESSION_SECONDS, MAX_SESSIONS

MIN_TOKEN_BITS = 128
MIN_TOKEN_DISTINCT = 8
SESSION_BYTES = 32
TOKEN_HINT = "e.g. export SHARDSCOPE_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"  # noqa: S105
PLACEHOLDER_TOKENS = ("change-me", "changeme", "placeholder", "your-token", "secret")
_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits, string.punctuation)


def token_bits(token: str) -> float:
    """The bits a token of this length can carry over the character classes it uses (lower case, upper
    case, digits, punctuation): ``len × log2(alphabet)``, an upper bound on its entropy."""
    alphabet = sum(len(chars) for chars in _CLASSES if any(c in chars for c in token))
    return len(token) * math.log2(alphabet) if alphabet > 1 else 0.0


def token_problem(token: str | None) -> str | None:
    """Why ``token`` cannot guard a server, or None: not printable ASCII (an HTTP header carries it), under
    128 bits for its length and alphabet, fewer than 8 distinct characters, a repeated pattern, or a
    placeholder left in from an example. ``secrets.token_urlsafe(32)`` always passes."""
    if token is None:
        return None
    if not token.isascii() or not token.isprintable() or " " in token:
        return "the token must be printable ASCII without spaces (it travels in an HTTP Authorization header)"
    bits = token_bits(token)
    if bits < MIN_TOKEN_BITS:
        return (
            f"the token carries at most {bits:.0f} bits for its {len(token)} characters; use at least "
            f"{MIN_TOKEN_BITS} (e.g. secrets.token_urlsafe(32), 43 random characters)"
        )
    if len(set(token)) < MIN_TOKEN_DISTINCT or _repeats(token):
        return "the token repeats itself; use a random one (e.g. secrets.token_urlsafe(32))"
    if any(p in token.lower() for p in PLACEHOLDER_TOKENS):
        return "the token is a placeholder from an example; set your own random one"
    return None


def _repeats(token: str) -> bool:
    """Whether ``token`` is a shorter piece over and over (``abcabcabc...``)."""
    n = len(token)
    return any(token == (token[:p] * (n // p + 1))[:n] for p in range(1, n // 2 + 1))


class Sessions:
    """Browser sessions: :meth:`open` one (the value goes to the browser, only its SHA-256 stays here),
    :meth:`valid` checks one, :meth:`end` ends one. At most ``max_sessions`` are held (one more ends the
    oldest), each for ``lifetime_s`` seconds. Thread-safe; ``clock`` is monotonic seconds (tests move it)."""

    def __init__(
        self,
        max_sessions: int = MAX_SESSIONS,
        lifetime_s: float = MAX_SESSION_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions
        self.lifetime_s = lifetime_s
        self.clock = clock
        # digest -> (end, the client it is bound to), oldest first
        self._ends: collections.OrderedDict[bytes, tuple[float, str]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def open(self, client: str = "") -> str:
        """A new session bound to ``client`` (:func:`server.quota.client_key` of the address it was opened from)."""
        value = secrets.token_urlsafe(SESSION_BYTES)
        with self._lock:
            self._expire()
            self._ends[_digest(value)] = (self.clock() + self.lifetime_s, client)
            while len(self._ends) > self.max_sessions:
                self._ends.popitem(last=False)
        return value

    def valid(self, value: str, client: str = "") -> bool:
        """Whether ``value`` is a live session opened from ``client`` (another client's replay of it is not; the
        session stays, for the browser that opened it)."""
        with self._lock:
            entry = self._ends.get(_digest(value))
            if entry is None:
                return False
            end, bound = entry
            if end <= self.clock():
                del self._ends[_digest(value)]
                return False
            return bound == client

    def end(self, value: str) -> bool:
        """Ends the session ``value``; True when there was one."""
        with self._lock:
            return self._ends.pop(_digest(value), None) is not None

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._ends)

    def _expire(self) -> None:
        now = self.clock()
        while self._ends:
            digest, (end, _) = next(iter(self._ends.items()))
            if end > now:
                break
            del self._ends[digest]


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()
