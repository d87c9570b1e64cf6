"""Each dashboard page's modules as one script, bundled by the server at first use (issue 37).

A page runs forty-odd ES modules. Asked for one by one, even all at once (``modulepreload``), a fresh browser on
a 2-core machine had them about 200 ms after the page, and the first paint waited on them: the layout
explorer's grid was on screen after 0.51 s (median of 15, fresh contexts), its bundle's after 0.33 s, the same
runs taken in turn. So each page's HTML names one script, ``/js/views/<view>.bundle.js``: its view module and
every module it imports, bundled by the notebook widget's own bundler (:mod:`shardscope.notebook.bundle`,
exact for the static named imports the modules use; the widget has run on it since the start), and built
again when any of those modules changes (their sizes and modification times are compared on each request,
so an edited module is served at once). The modules themselves are still served, unbundled, for a developer
who wants them (``/js/views/<view>.js``). A browser that takes gzip gets the bundle compressed (once, when built),
with its own ETag.

Only the views the pages run (:data:`shardscope.pages.PAGES`) are bundled: any other name is not found.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from shardscope.notebook.bundle import bundle_with_files
from shardscope.pages import PAGES

BUNDLE_PATH = re.compile(r"/js/views/(?P<view>[a-z_]{1,32})\.bundle\.js")
"""The address of a page's bundle."""
MAX_KEPT_BYTES = 8 << 20
"""The most the bundles kept take, plain and gzipped together (the five pages': 1.03 MiB plain, 0.32 MiB gzipped).
A bundle that would pass it is built for its request and not kept."""


@dataclass(frozen=True)
class Bundle:
    text: bytes
    gzipped: bytes
    """The same, gzip-compressed once when built (the pages: 140–275 KiB of modules, 44–84 KiB compressed)."""
    etag: str
    stamp: tuple[tuple[str, int, int], ...]
    """Each module read: its path, modification time (ns) and size."""


def _stamp(root: Path, files: list[str]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for name in files:
        st = os.stat(root / name)
        out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


class PageBundles:
    """The pages' bundles over one frontend directory, each built once and again when one of its modules
    changes (:meth:`get` stats them: call it off the event loop)."""

    def __init__(self, frontend: Path) -> None:
        self.frontend = frontend
        self.views = {Path(view).stem: view for view in PAGES.values()}
        self._built: dict[str, Bundle] = {}
        self._lock = threading.Lock()

    def get(self, view: str) -> Bundle | None:
        """The bundle of ``view`` (``layout``, ``snapshots``, ...), current; None for a view no page runs."""
        entry = self.views.get(view)
        if entry is None:
            return None
        with self._lock:  # one build at a time; a request during a build waits for it rather than building again
            built = self._built.get(view)
            try:
                if built is not None and _stamp(self.frontend, [name for name, _, _ in built.stamp]) == built.stamp:
                    return built
            except FileNotFoundError:
                pass  # a module was removed: build again (its importer changed too)
            text, files = bundle_with_files(self.frontend, entry)
            stamp = _stamp(self.frontend, files)
            data = text.encode("utf-8")
            compressed = gzip.compress(data, compresslevel=6, mtime=0)
            built = Bundle(data, compressed, f'"{hashlib.sha256(data).hexdigest()[:32]}"', stamp)
            self._built.pop(view, None)
            if self.kept_bytes() + len(data) + len(compressed) <= MAX_KEPT_BYTES:
                self._built[view] = built
            return built

    def kept_bytes(self) -> int:
        """The bytes the kept bundles take (bounded by :data:`MAX_KEPT_BYTES`)."""
        return sum(len(b.text) + len(b.gzipped) for b in self._built.values())
