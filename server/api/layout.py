"""``POST /api/layout``: where every shard of an array lives, ``NamedSharding(mesh, spec).devices_indices_map``."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field
from starlette.responses import Response

from server.api import schema
from server.api.deps import POST_ERRORS, SettingsDep, device_set
from server.api.schema import (
    ArrayDim,
    ChipsPerHost,
    DevicesText,
    DType,
    MeshRequest,
    Request,
    Slices,
    SpecText,
)
from server.jsonio import OrjsonResponse, OrjsonRoute
from sharding_core.layout import MAX_RANK, Layout

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


class LayoutRequest(Request):
    devices: DevicesText
    mesh: MeshRequest
    spec: SpecText
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The array's shape")
    dtype: DType = "float32"
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None


@router.post("/api/layout", response_model=schema.Layout, responses=POST_ERRORS)
def layout(body: LayoutRequest, settings: SettingsDep) -> Response:
    """Where every shard of an array lives: ``NamedSharding(mesh, spec).devices_indices_map(shape)``."""
    devset = device_set(settings, body.devices, body.slices, body.chips_per_host)
    result = Layout.from_named(devset, body.mesh.to_spec(), body.spec, body.shape, body.dtype)
    # sharding_core serialised this (cached, immutable) layout once, straight from its numpy
    # columns; decoding it into dicts only to encode it again would cost ~10x more at 4096 devices.
    return OrjsonResponse(result.json_text.encode())
