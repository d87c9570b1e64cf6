"""``POST /api/cost/nccl-fit``: a GPU profile refitted from the user's own nccl-tests ``all_reduce_perf`` output.

The shipped expected times use one efficiency and one latency per fabric fitted to published measurements
(:mod:`sharding_core.cost.efficiency`); a team with its own cluster pastes its ``all_reduce_perf`` output and
gets the NVLink (one host) or network (several) profile its run shows, with each row's measured, bound,
shipped-expected and refitted times. Nothing is stored and nothing runs: the text is parsed strictly (a line
that looks like a data row and is not one is refused, with where) and fitted in well under a second.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from server.api.deps import POST_ERRORS
from server.api.schema import Reply, Request
from server.jsonio import OrjsonResponse, OrjsonRoute
from sharding_core.cost.efficiency import MAX_NCCL_TEXT_CHARS, fit_nccl_tests
from sharding_core.hardware import GPU_FIGURES

NCCL_FIT_PATH = "/api/cost/nccl-fit"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["cost"])


class NcclFitRequest(Request):
    text: str = Field(max_length=MAX_NCCL_TEXT_CHARS, description="all_reduce_perf's output as printed")
    gpu: Annotated[str, Field(pattern="^(" + "|".join(GPU_FIGURES) + ")$")] | None = Field(
        None, description="The GPU kind of the hardware table, when the output's device names are not one"
    )


class NcclProfile(Reply):
    efficiency: float = Field(description="Measured bandwidth / spec-sheet bandwidth")
    step_latency: float = Field(description="Seconds per latency step")
    rows: int
    borrowed: str | None


class NcclRow(Reply):
    bytes: int = Field(description="all_reduce_perf's size: bytes per rank")
    measured_seconds: float = Field(description="The out-of-place time")
    bound_seconds: float
    expected_seconds: float = Field(description="With the shipped profile")
    refit_seconds: float = Field(description="With the refitted profile")


class NcclErrors(Reply):
    median_abs: float
    worst_abs: float
    rows: int


class NcclFitErrors(Reply):
    bound: NcclErrors
    shipped: NcclErrors
    refit: NcclErrors


class NcclFitResponse(Reply):
    gpu: str
    hardware: str
    devices: str = Field(description="The device set the run is estimated on, gpu:KIND:HxG")
    ranks: int
    hosts: int
    fabric: str = Field(description="nvlink (one host) or network (several): the profile refitted")
    profile: NcclProfile
    shipped_profile: NcclProfile
    rows: list[NcclRow]
    errors: NcclFitErrors


@router.post(
    NCCL_FIT_PATH,
    response_model=NcclFitResponse,
    responses={**POST_ERRORS, 422: {**POST_ERRORS[422], "description": "bad_nccl_output, validation_error"}},
)
async def nccl_fit(body: NcclFitRequest) -> Response:
    """Refits the NVLink or network profile from ``all_reduce_perf`` output (the shipped one stays as it is)."""
    return OrjsonResponse(await run_in_threadpool(fit_nccl_tests, body.text, body.gpu))
