"""``POST /api/layout``: where every shard of an array lives, ``NamedSharding(mesh, spec).devices_indices_map``.

With ``rules`` the spec names Flax logical axes (``('embed', 'hidden')``) and is laid out as
``flax.linen.logical_to_mesh_axes(names, rules)`` maps them to mesh axes
(:func:`sharding_core.snapshot.rules.logical_to_mesh_axes`, tested against Flax's own).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field
from starlette.responses import Response

from server.api import schema
from server.api.deps import POST_ERRORS, SettingsDep
from server.api.schema import (
    ArrayDim,
    ChipsPerHost,
    DevicesText,
    DType,
    LogicalRule,
    MeshRequest,
    Request,
    Slices,
    SpecText,
)
from server.jsonio import OrjsonResponse, OrjsonRoute
from sharding_core.layout import MAX_RANK, Layout
from sharding_core.snapshot.format import MAX_RULES
from sharding_core.snapshot.rules import logical_spec

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


class LayoutRequest(Request):
    devices: DevicesText
    mesh: MeshRequest
    spec: SpecText
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The array's shape")
    dtype: DType = "float32"
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None
    rules: list[LogicalRule] | None = Field(
        None,
        max_length=MAX_RULES,
        description="Flax logical → mesh axis rules, in precedence; the spec then names logical axes, one per "
        "dimension (or None), laid out as flax.linen.logical_to_mesh_axes maps them",
    )


@router.post("/api/layout", response_model=schema.Layout, responses=POST_ERRORS)
def layout(body: LayoutRequest, settings: SettingsDep) -> Response:
    """Where every shard of an array lives: ``NamedSharding(mesh, spec).devices_indices_map(shape)``."""
    devset = settings.device_set(body.devices, body.slices, body.chips_per_host)
    spec: Any = body.spec if body.rules is None else logical_spec(body.spec, body.rules)
    result = Layout.from_named(devset, body.mesh.to_spec(), spec, body.shape, body.dtype)
    # sharding_core serialised this (cached, immutable) layout once, straight from its numpy
    # columns; decoding it into dicts only to encode it again would cost ~10x more at 4096 devices.
    return OrjsonResponse(result.json_text.encode())
