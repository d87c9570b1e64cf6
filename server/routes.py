"""The JSON API: each route validates (pydantic), calls ``sharding_core``, and lets errors translate.

Routes that do JAX work (layout, topology) and the SQLite ones are plain ``def``: FastAPI runs them
in its threadpool, so the event loop keeps serving while JAX computes or SQLite fsyncs. Responses
are bytes built once (the domain's own JSON text for layouts, orjson for the rest) and skip
FastAPI's per-field re-validation, which would cost more than the layout itself for 4096 devices;
the ``response_model`` of each route documents them in ``/openapi.json``, and the schemathesis
test checks that every response matches it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

import jax
import orjson
from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import FileResponse, Response

from server.errors import ApiError, not_found
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.models import (
    ErrorResponse,
    HealthResponse,
    LayoutRequest,
    LayoutResponse,
    LinkCreated,
    LinkRequest,
    LinkResponse,
    MeshAxisOnTopology,
    PlatformsResponse,
    TopologyGroupsRequest,
    TopologyMeshRequest,
    TopologyMeshResponse,
    TopologyResponse,
)
from server.settings import MAX_DEVICES, MAX_DEVICES_CHARS, MAX_LINK_BYTES, MAX_SLICES
from server.store import Store
from sharding_core.devices import parse_devices, platforms_catalog
from sharding_core.layout import compute_layout
from sharding_core.mesh import build_mesh
from sharding_core.topology import compare_orderings, groups_on_topology, mesh_on_topology, topology

LINKS = "links"


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        400: "Malformed request: invalid JSON, or a Host header this server does not answer to (bad_host)",
        403: "A cross-site request that would change state (cross_site_request)",
        404: "Unknown or malformed id (not_found)",
        413: "Request body or link payload over its limit (too_large)",
        415: "A body that is not application/json (unsupported_media_type)",
        422: "Input the request model or the domain refuses: validation_error, parse_error (with column), "
        "unknown_axis, duplicate_axis, rank_mismatch, indivisible, too_large, bad_devices, bad_mesh, ...",
        500: "A bug; the body has the same shape and no traceback (internal_error)",
    }
    return {s: {"model": ErrorResponse, "description": descriptions[s]} for s in statuses}


GET_ERRORS = _errors(400, 500)
QUERY_ERRORS = _errors(400, 422, 500)
POST_ERRORS = _errors(400, 403, 413, 415, 422, 500)

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]


@router.get("/api/health", response_model=HealthResponse, responses=GET_ERRORS)
async def health() -> Response:
    # async: nothing here blocks, so it skips the threadpool hop (readiness probes stay cheap).
    return OrjsonResponse({"status": "ok", "jax_version": jax.__version__})


@functools.cache
def _platforms() -> bytes:
    return orjson.dumps(platforms_catalog())


@router.get("/api/platforms", response_model=PlatformsResponse, responses=GET_ERRORS)
async def platforms() -> Response:
    """The pickers' catalog: TPU generations and their slices, GPU kinds, the device limits."""
    return OrjsonResponse(_platforms())


@router.post("/api/layout", response_model=LayoutResponse, responses=POST_ERRORS)
def layout(body: LayoutRequest) -> Response:
    """Where every shard of an array lives: ``NamedSharding(mesh, spec).devices_indices_map(shape)``."""
    devset = parse_devices(body.devices, slices=body.slices, chips_per_host=body.chips_per_host)
    result = compute_layout(devset, body.mesh.to_spec(), body.spec, body.shape, body.dtype)
    # sharding_core serialised this (cached, immutable) layout once, straight from its numpy
    # columns; decoding it into dicts only to encode it again would cost ~10x more at 4096 devices.
    return OrjsonResponse(result.json_text.encode())


@functools.lru_cache(maxsize=32)
def _encode_topology(key: tuple[str, int, tuple[int, ...] | None]) -> bytes:
    devices, slices, chips_per_host = key
    return orjson.dumps(topology(parse_devices(devices, slices=slices, chips_per_host=chips_per_host)))


@router.get("/api/topology", response_model=TopologyResponse, responses=QUERY_ERRORS)
def topology_route(
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
    return OrjsonResponse(_encode_topology((devices, slices, cph)))


@router.post("/api/topology/groups", response_model=MeshAxisOnTopology, responses=POST_ERRORS)
def topology_groups(body: TopologyGroupsRequest) -> Response:
    """Any device groups laid on the interconnect (e.g. the replica groups of a collective the kernel
    lab found in compiled HLO): hops between consecutive members, ring verdicts, hosts and slices
    crossed."""
    total = sum(len(g) for g in body.groups)
    if total > MAX_DEVICES:
        raise ApiError(
            422,
            "too_large",
            f"the groups list {total} device ids; at most {MAX_DEVICES} are allowed",
            limit=MAX_DEVICES,
        )
    devset = parse_devices(body.devices, slices=body.slices, chips_per_host=body.chips_per_host)
    return OrjsonResponse(groups_on_topology(devset, body.groups, body.name))


@router.post("/api/topology/mesh", response_model=TopologyMeshResponse, responses=POST_ERRORS)
def topology_mesh(body: TopologyMeshRequest) -> Response:
    """The mesh laid on the interconnect: per mesh axis, the device groups a collective over it
    involves in ring order, the hops between consecutive members, whether each group is a ring and
    whether it crosses hosts or slices; and the make_mesh / iota / split orderings side by side."""
    devset = parse_devices(body.devices, slices=body.slices, chips_per_host=body.chips_per_host)
    spec = body.mesh.to_spec()
    result = mesh_on_topology(devset, build_mesh(devset, spec))
    result["orderings"] = compare_orderings(devset, spec.shape, spec.axis_names)
    return OrjsonResponse(result)


@router.post("/api/links", status_code=201, response_model=LinkCreated, responses=POST_ERRORS)
def create_link(body: LinkRequest, store: StoreDep) -> Response:
    """Stores a view and its state under a new unguessable id. Links are immutable; there is no listing."""
    payload = orjson.dumps({"view": body.view, "state": body.state})
    if len(payload) > MAX_LINK_BYTES:
        raise ApiError(
            413,
            "too_large",
            f"the link payload is {len(payload)} bytes as JSON; at most {MAX_LINK_BYTES} are allowed "
            "(setting max_link_bytes)",
            hint="keep only what the view needs to reopen in the state",
            limit=MAX_LINK_BYTES,
        )
    link_id = store.put(LINKS, payload)
    return OrjsonResponse({"id": link_id, "url": f"/s/{link_id}"}, status_code=201)


# 422 cannot happen for a plain string path parameter, but FastAPI documents one for any parameter;
# listing it keeps that entry in our error shape.
ID_ERRORS = _errors(400, 404, 422, 500)


@router.get("/api/links/{link_id}", response_model=LinkResponse, responses=ID_ERRORS)
def get_link(link_id: str, store: StoreDep) -> Response:
    """The stored view and state. Unknown and malformed ids get the same 404, which does not repeat the id."""
    payload = store.get(LINKS, link_id)
    if payload is None:
        raise not_found()
    return OrjsonResponse(payload)


def page_router(index_html: Path) -> APIRouter:
    """``/s/{id}``: the dashboard page, which then reads the link from ``/api/links/{id}``."""
    pages = APIRouter(route_class=OrjsonRoute)

    @pages.get(
        "/s/{link_id}",
        response_class=FileResponse,
        responses={200: {"content": {"text/html": {}}, "description": "The dashboard"}, **ID_ERRORS},
    )
    def shared_page(link_id: str, store: StoreDep) -> Response:
        if store.get(LINKS, link_id) is None:
            raise not_found()
        return FileResponse(index_html, media_type="text/html")

    return pages
