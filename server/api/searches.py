"""Searches the replicas compile (:mod:`server.services.searches`): ``POST /api/searches`` stores a search's code and
candidates; ``GET /api/searches/{id}`` is its client's poll: each candidate's state and, once compiled, its figures
(which replica compiled it among them). The client (``shardscope search --server``) ranks and plans the pick."""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson
from fastapi import APIRouter, Request
from pydantic import Field
from starlette.responses import Response

from server.api.deps import DESCRIPTIONS, ID_ERRORS, STORE_ERRORS, SettingsDep, StoreDep, responses
from server.api.schema import Reply
from server.api.schema import Request as RequestModel
from server.errors import ApiError, not_found
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.store import ID_BYTES, SEARCH_ABANDONED_S
from sharding_core.errors import ShardingError
from sharding_core.searching.compiling import Job
from sharding_core.searching.run import MAX_BUDGET_SECONDS

SEARCHES_PATH = "/api/searches"
MAX_CODE_CHARS = 256 * 1024
MAX_SEARCH_JOBS = 1024
MAX_JOB_BYTES = 16 * 1024
CODE_NOT_ALLOWED = "code_not_allowed"
CREATE_ERRORS = {
    **responses(
        400, 401, 403, 413, 415, 422, 500, 503,
        s403=DESCRIPTIONS[403] + "; or this server compiles no searches (code_not_allowed: setting max_search_workers "
        "is 0)",
        s422="A malformed search (validation_error; bad_candidate naming the job; bad_devices, too_large)",
        s503=DESCRIPTIONS[503] + "; or it holds max_searches searches already (busy, with Retry-After)",
    ),
    507: STORE_ERRORS[507],
}  # fmt: skip

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["searches"])


class SearchRequest(RequestModel):
    code: str = Field(min_length=1, max_length=MAX_CODE_CHARS, description="The model's Python file, whole")
    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", description="FN(mesh, rules, **knobs) in it")
    file: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}\.py$", description="The file's name (its lines in the figures)"
    )
    devices: str = Field(min_length=1, max_length=64, description="The device set every candidate compiles for")
    budget_seconds: float = Field(gt=0, le=MAX_BUDGET_SECONDS, description="From now: no compile starts after it")
    jobs: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_SEARCH_JOBS,
        description="The candidates to compile, in the order to compile them: sharding_core.searching.compiling.Job "
        "as JSON (index, devices, slices, sizes, dcn, rules, knobs, headroom)",
    )


class SearchCreated(Reply):
    id: str
    url: str
    candidates: int
    abandoned_after_seconds: float


class SearchCandidateState(Reply):
    index: int
    state: str = Field(description="queued, compiling, done")
    replica: str | None = Field(description="The replica compiling or that compiled it (its random id)")
    result: dict[str, Any] | None = Field(description="What its compile gave (sharding_core.searching figures)")


class SearchState(Reply):
    id: str
    devices: str
    done: bool
    counts: dict[str, int]
    replicas: dict[str, int] = Field(description="Candidates each replica compiled")
    seconds: float
    candidates: list[SearchCandidateState]


def _jobs(body: SearchRequest, settings: Any) -> list[tuple[int, bytes]]:
    settings.device_set(body.devices)  # the set parses within this server's limits (422 naming what is wrong)
    out: list[tuple[int, bytes]] = []
    seen: set[int] = set()
    for n, given in enumerate(body.jobs):
        try:
            job = Job.from_json(given)
        except (KeyError, TypeError, ValueError) as e:
            raise ShardingError(
                "bad_candidate",
                f"jobs[{n}] is not a candidate: {str(e)[:200]}",
                hint="send what sharding_core.searching.compiling.Job.json() gives",
            ) from None
        if job.devices != body.devices or job.index in seen:
            raise ShardingError("bad_candidate", f"jobs[{n}]: every candidate compiles for the search's devices, "
                                "under its own index")  # fmt: skip
        seen.add(job.index)
        text = orjson.dumps(job.json())
        if len(text) > MAX_JOB_BYTES:
            raise ShardingError("too_large", f"jobs[{n}] is {len(text)} bytes; at most {MAX_JOB_BYTES}")
        out.append((job.index, text))
    return out


@router.post(
    SEARCHES_PATH,
    status_code=202,
    response_model=SearchCreated,
    responses=CREATE_ERRORS,
)
def create_search(body: SearchRequest, request: Request, store: StoreDep, settings: SettingsDep) -> Response:
    """Stores a search for the replicas to compile (``max_search_workers`` above 0: it runs the code sent)."""
    if settings.max_search_workers <= 0:
        raise ApiError(
            403,
            CODE_NOT_ALLOWED,
            "this server compiles no searches: a search runs the model's code on the server",
            hint="run the search on your machine (shardscope search without --server), or ask the operator of a "
            "trusted team's server to start it with --setting max_search_workers 1",
        )
    jobs = _jobs(body, settings)
    search_id = secrets.token_urlsafe(ID_BYTES)
    now = time.time()
    stored = store.search_create(
        search_id, code=body.code.encode(), function=body.function, file=body.file, devices=body.devices, jobs=jobs,
        now=now, deadline=now + body.budget_seconds, max_searches=settings.max_searches,
    )  # fmt: skip
    if not stored:
        raise ApiError(
            503,
            "busy",
            f"this server holds {settings.max_searches} searches already (setting max_searches)",
            hint=f"try again when one ends (an abandoned one goes {SEARCH_ABANDONED_S:.0f} s after its last poll)",
            headers={"Retry-After": "30"},
        )
    request.app.state.searches.wake()
    return OrjsonResponse(
        {"id": search_id, "url": f"{SEARCHES_PATH}/{search_id}", "candidates": len(jobs),
         "abandoned_after_seconds": SEARCH_ABANDONED_S},
        status_code=202,
    )  # fmt: skip


@router.get(
    SEARCHES_PATH + "/{search_id}",
    response_model=SearchState,
    responses={**ID_ERRORS, **responses(503)},
)
def get_search(search_id: str, store: StoreDep) -> Response:
    """Each candidate's state and figures (reading it keeps the search alive: its client's poll)."""
    now = time.time()
    row = store.search(search_id, now)
    if row is None:
        raise not_found("search")
    counts = {"queued": 0, "compiling": 0, "done": 0}
    replicas: dict[str, int] = {}
    candidates = []
    for index, state, owner, _, result in row.jobs:
        counts[state] = counts.get(state, 0) + 1
        parsed = orjson.loads(result) if result is not None else None
        if state == "done" and owner is not None and isinstance(parsed, dict) and parsed.get("compiled"):
            replicas[owner] = replicas.get(owner, 0) + 1
        candidates.append({"index": index, "state": state, "replica": owner, "result": parsed})
    return OrjsonResponse(
        {"id": row.id, "devices": row.devices, "done": counts["done"] == len(row.jobs), "counts": counts,
         "replicas": replicas, "seconds": round(now - row.created, 3), "candidates": candidates}
    )  # fmt: skip
