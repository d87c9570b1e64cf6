"""Every limit the server enforces, as a named, documented setting (datasette's ``Setting`` rows).

The limits that ``sharding_core`` owns (devices, mesh axes, rank, spec text) are read from it, so the
HTTP layer and the domain can never disagree: the request models carry the same numbers as
``Field`` bounds (a cheap first line, before any JAX work) and the domain checks them again.
The README documents each row; a test fails when one is missing there.
"""

from __future__ import annotations

import dataclasses

from sharding_core.devices import MAX_DEVICES, MAX_SLICES
from sharding_core.layout import MAX_ARRAY_ELEMENTS, MAX_RANK
from sharding_core.mesh import MAX_AXIS_NAME_CHARS, MAX_MESH_AXES
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
]
"""The settings table: ``name``, ``default`` and ``help`` of each limit."""

DEFAULTS: dict[str, int] = {s.name: s.default for s in SETTINGS}

__all__ = [
    "DEFAULTS",
    "MAX_AXIS_NAME_CHARS",
    "MAX_BODY_BYTES",
    "MAX_DEVICES",
    "MAX_DEVICES_CHARS",
    "MAX_LINK_BYTES",
    "MAX_MESH_AXES",
    "MAX_RANK",
    "MAX_SLICES",
    "MAX_SPEC_CHARS",
    "MAX_VIEW_CHARS",
    "SETTINGS",
    "Setting",
]
