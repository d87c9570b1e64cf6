"""Pixel checks on what Chromium actually painted: an element's screenshot, decoded by Chromium itself
in the page (a data: URL the CSP allows), compared with the colours the layout's tiles must have.

The tile colours come from an independent statement of the palette (``palette``): golden-angle hues
per a tile's lowest device id, as ``frontend/js/model/layout.js`` documents them.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from playwright.sync_api import Locator, Page


def palette(n: int, dark: bool) -> tuple[int, int, int]:
    """The colour of a tile whose lowest device id is ``n``, as sRGB bytes (CSS hsl() to rgb)."""
    hue = math.floor((n * 137.508) % 360 + 0.5)
    sat = (55 + ((n * 7) % 3) * 10) / 100
    light = ((34 + ((n * 3) % 3) * 6) if dark else (72 + ((n * 5) % 3) * 6)) / 100
    a = sat * min(light, 1 - light)

    def f(k0: int) -> int:
        k = (k0 + hue / 30) % 12
        return round((light - a * max(-1, min(k - 3, 9 - k, 1))) * 255)

    return f(0), f(8), f(4)


def tile_colours(layout: dict[str, Any], dark: bool) -> list[tuple[int, int, int]]:
    """Every tile's colour for an /api/layout answer."""
    return [palette(min(ids), dark) for ids in layout["tiles"]]


def painted(page: Page, element: Locator, colours: list[tuple[int, int, int]], tolerance: int = 4) -> dict[str, Any]:
    """What share of the element's pixels are within ``tolerance`` of one of ``colours``, and how many
    of the colours appear at all: ``{"fraction": float, "present": int, "colours": int, "pixels": int}``."""
    png = base64.b64encode(element.screenshot()).decode()
    result: dict[str, Any] = page.evaluate(
        """async ([png, colours, tol]) => {
          const img = new Image();
          img.src = `data:image/png;base64,${png}`;
          await img.decode();
          const c = document.createElement("canvas");
          c.width = img.width; c.height = img.height;
          const ctx = c.getContext("2d");
          ctx.drawImage(img, 0, 0);
          const d = ctx.getImageData(0, 0, c.width, c.height).data;
          // colours in a hash of their 4-level buckets, so each pixel checks a handful, not all
          const key = (r, g, b) => ((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3);
          const buckets = new Map();
          colours.forEach(([r, g, b], i) => {
            const clamp = (v) => Math.max(0, Math.min(255, v));
            for (const dr of [-tol, 0, tol]) for (const dg of [-tol, 0, tol]) for (const db of [-tol, 0, tol]) {
              const k = key(clamp(r + dr), clamp(g + dg), clamp(b + db));
              if (!buckets.has(k)) buckets.set(k, new Set());
              buckets.get(k).add(i);
            }
          });
          const seen = new Set();
          let hits = 0;
          for (let p = 0; p < d.length; p += 4) {
            const cand = buckets.get(key(d[p], d[p + 1], d[p + 2]));
            if (!cand) continue;
            let hit = false;
            for (const i of cand) {
              const [r, g, b] = colours[i];
              if (Math.abs(r - d[p]) <= tol && Math.abs(g - d[p + 1]) <= tol && Math.abs(b - d[p + 2]) <= tol) {
                hit = true;
                seen.add(i);
              }
            }
            if (hit) hits++;
          }
          return { fraction: hits / (d.length / 4), present: seen.size, colours: colours.length, pixels: d.length / 4 };
        }""",
        [png, [list(c) for c in colours], tolerance],
    )
    return result
