"""The physical interconnect: ``GET /api/topology`` (devices, links, hosts, fabrics) and the mesh or any
device groups laid on it (``POST /api/topology/mesh``, ``POST /api/topology/groups``)."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query
from pydantic import Field
from starlette.responses import Response

from server.api.deps import POST_ERRORS, QUERY_ERRORS, SettingsDep, responses
from server.api.schema import (
    ChipsPerHost,
    DeviceId,
    DevicesText,
    ErrorDetail,
    MeshRequest,
    Reply,
    Request,
    Slices,
)
from server.errors import ApiError
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.settings import MAX_DEVICES_CHARS, Settings
from sharding_core.cache import bounded_cache
from sharding_core.devices import MAX_DEVICES, MAX_SLICES
from sharding_core.errors import BAD_DEVICES, TOO_LARGE, ShardingError
from sharding_core.mesh import build_mesh
from sharding_core.topology import compare_orderings, groups_on_topology, mesh_on_topology, topology

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


class TopologyDevice(Reply):
    id: int
    process_index: int
    coords: list[int] | None
    core_on_chip: int
    slice_index: int | None = None


class TopologyLink(Reply):
    a: int
    b: int
    wraparound: bool
    kind: str = Field(description="ici, on_chip or nvlink")
    axis: int | None = Field(None, description="The torus axis of an ici link")


class TopologyHost(Reply):
    process_index: int
    device_ids: list[int]


class TopologyFabric(Reply):
    kind: str = Field(description="dcn (between slices) or network (between GPU hosts)")
    joins: str = Field(description="slices or hosts")
    members: list[list[int]] = Field(description="The device ids of each slice or host it joins")


class TopologyResponse(Reply):
    devices_key: str
    platform: str
    device_kind: str
    topology: list[int] | None
    chips_per_host: list[int] | None
    wraparound: list[bool]
    devices: list[TopologyDevice]
    links: list[TopologyLink]
    hosts: list[TopologyHost]
    slices: int
    fabrics: list[TopologyFabric]


class TopologyMeshRequest(Request):
    devices: DevicesText
    mesh: MeshRequest
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None


class MeshAxisOnTopology(Reply):
    name: str
    size: int
    groups: list[list[int]] = Field(
        description="Device ids of each group a collective over this axis involves, in ring order"
    )
    hops: list[list[int]] = Field(
        description="Links between consecutive members of each group; the last entry closes the ring"
    )
    max_hop: int
    mean_hop: float
    is_ring: bool = Field(description="Every group is a ring of nearest neighbours (every hop at most 1)")
    groups_not_rings: int
    crosses_hosts: bool
    groups_crossing_hosts: int
    crosses_slices: bool
    interconnect: str = Field(description="ici, dcn, nvlink, network or host")


class OrderingAxis(Reply):
    name: str
    max_hop: int
    mean_hop: float
    is_ring: bool
    groups_not_rings: int
    crosses_hosts: bool


class Ordering(Reply):
    order: str = Field(description="make_mesh, iota or split (allow_split_physical_axes)")
    device_ids: list[Any] | None = None
    axes: list[OrderingAxis] | None = None
    error: ErrorDetail | None = None


class TopologyGroupsRequest(Request):
    """Device groups as one flat list cut into groups of ``group_size``: a flat list bounds the body by
    max_devices ids (a list of lists could not be bounded in all without exceeding max_body_bytes)."""

    devices: DevicesText
    ids: list[DeviceId] = Field(
        min_length=1,
        max_length=MAX_DEVICES,
        description="The groups' device ids one group after another, each group in the order a collective "
        "visits it (e.g. a collective's replica groups, or a collective-permute's source, target pairs)",
    )
    group_size: int = Field(ge=1, le=MAX_DEVICES, description="Devices per group (ids holds len(ids) / group_size)")
    name: str = Field("groups", max_length=128, description="A label for the groups, e.g. all-reduce over x")
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None


class MeshOnTopologyMesh(Reply):
    shape: list[int]
    axis_names: list[str]
    device_ids: list[Any]


class TopologyMeshResponse(Reply):
    mesh: MeshOnTopologyMesh
    axes: list[MeshAxisOnTopology]
    orderings: list[Ordering]


@bounded_cache("topologies", len)
def _encode_topology(devices: str, slices: int, chips_per_host: tuple[int, ...] | None, settings: Settings) -> bytes:
    return orjson.dumps(topology(settings.device_set(devices, slices, chips_per_host)))


@router.get("/api/topology", response_model=TopologyResponse, responses=QUERY_ERRORS)
def topology_route(
    settings: SettingsDep,
    devices: Annotated[
        str, Query(min_length=1, max_length=MAX_DEVICES_CHARS, description="cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO, local")
    ],
    slices: Annotated[int, Query(ge=1, le=MAX_SLICES, description="Slices of a tpu: set")] = 1,
    chips_per_host: Annotated[
        str | None,
        Query(pattern=r"^[0-9]{1,5}x[0-9]{1,5}(x[0-9]{1,5})?$", description="Host block of a tpu: set, e.g. 2x4x1"),
    ] = None,
) -> Response:
    """The physical interconnect: devices with coordinates and hosts, ICI / NVLink links, wraparound."""
    cph = tuple(int(c) for c in chips_per_host.split("x")) if chips_per_host else None
    return OrjsonResponse(_encode_topology(devices, slices, cph, settings))


@router.post(
    "/api/topology/groups",
    response_model=MeshAxisOnTopology,
    responses=responses(400, 403, 413, 415, 422, 500),
)
def topology_groups(body: TopologyGroupsRequest, settings: SettingsDep) -> Response:
    """Any device groups laid on the interconnect (e.g. the replica groups of a collective the kernel
    lab found in compiled HLO): hops between consecutive members, ring verdicts, hosts and slices
    crossed."""
    total = len(body.ids)
    if total > settings.max_devices:
        raise ApiError(
            422,
            TOO_LARGE,
            f"the groups list {total} device ids; at most {settings.max_devices} are allowed (setting max_devices)",
            limit=settings.max_devices,
        )
    if total % body.group_size:
        raise ShardingError(
            BAD_DEVICES,
            f"{total} ids do not make groups of {body.group_size}: ids lists the groups one after another",
            hint="give group_size as the length of each group, and every group in full",
        )
    devset = settings.device_set(body.devices, body.slices, body.chips_per_host)
    groups = [body.ids[i : i + body.group_size] for i in range(0, total, body.group_size)]
    return OrjsonResponse(groups_on_topology(devset, groups, body.name))


@router.post("/api/topology/mesh", response_model=TopologyMeshResponse, responses=POST_ERRORS)
def topology_mesh(body: TopologyMeshRequest, settings: SettingsDep) -> Response:
    """The mesh laid on the interconnect: per mesh axis, the device groups a collective over it
    involves in ring order, the hops between consecutive members, whether each group is a ring and
    whether it crosses hosts or slices; and the make_mesh / iota / split orderings side by side."""
    devset = settings.device_set(body.devices, body.slices, body.chips_per_host)
    spec = body.mesh.to_spec()
    result = mesh_on_topology(devset, build_mesh(devset, spec))
    result["orderings"] = compare_orderings(devset, spec.shape, spec.axis_names)
    return OrjsonResponse(result)
