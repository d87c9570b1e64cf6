"""Which hosts are this machine's own: the one loopback check (issue 30), for ``shardscope serve``'s warning
about a bind other machines can reach (:mod:`shardscope.cli`) and for the Host allowlist against DNS rebinding
(:class:`server.middleware.HostCheck`). Standard library only, so the command line stays light."""

from __future__ import annotations

import ipaddress
from typing import Final

LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The loopback names a ``Host`` header carries (an IPv6 address in brackets, as in a URL)."""

__all__ = ["LOOPBACK_HOSTS", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost``, any address in 127.0.0.0/8, or ``::1`` — written
    bare (``--host ::1``) or in brackets as in a URL or a ``Host`` header (``[::1]``); case and a trailing dot
    do not matter. Anything else (another address, a name that could resolve anywhere) is not."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
