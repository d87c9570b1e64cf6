"""``POST /api/layout``: where every shard of an array lives, ``NamedSharding(mesh, spec).devices_indices_map``.

With ``rules`` the spec names Flax logical axes (``('embed', 'hidden')``) and is laid out as
``flax.linen.logical_to_mesh_axes(names, rules)`` maps them to mesh axes
(:func:`sharding_core.snapshot.rules.logical_to_mesh_axes`, tested against Flax's own).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from jax.sharding import PartitionSpec
from pydantic import Field
from starlette.responses import Response

from server.api import schema
from server.api.deps import POST_ERRORS, SettingsDep, device_set
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
from sharding_core.compat import spec_entries
from sharding_core.errors import ShardingError
from sharding_core.layout import MAX_RANK, Layout
from sharding_core.snapshot.format import MAX_RULES
from sharding_core.snapshot.rules import BAD_RULES, check_rules, logical_to_mesh_axes
from sharding_core.spec import parse_spec

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


def logical_spec(text: str, rules: list[Any]) -> PartitionSpec:
    """The mesh PartitionSpec of a spec naming logical axes, under Flax's rules."""
    names: list[str | None] = []
    for entry in spec_entries(parse_spec(text)):
        if isinstance(entry, tuple):
            raise ShardingError(
                BAD_RULES,
                f"with logical rules each dimension names one logical axis or None, got the tuple {entry!r}",
                hint="write the logical names as Flax does: ('batch', 'embed'), one per dimension",
            )
        names.append(entry if isinstance(entry, str) else None)
    return PartitionSpec(*logical_to_mesh_axes(names, check_rules(rules)))


@router.post("/api/layout", response_model=schema.Layout, responses=POST_ERRORS)
def layout(body: LayoutRequest, settings: SettingsDep) -> Response:
    """Where every shard of an array lives: ``NamedSharding(mesh, spec).devices_indices_map(shape)``."""
    devset = device_set(settings, body.devices, body.slices, body.chips_per_host)
    spec: Any = body.spec if body.rules is None else logical_spec(body.spec, body.rules)
    result = Layout.from_named(devset, body.mesh.to_spec(), spec, body.shape, body.dtype)
    # sharding_core serialised this (cached, immutable) layout once, straight from its numpy
    # columns; decoding it into dicts only to encode it again would cost ~10x more at 4096 devices.
    return OrjsonResponse(result.json_text.encode())
