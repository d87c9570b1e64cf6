"""Schemathesis over ``/openapi.json``, in-process: no 5xx, and every response matches its schema.

Bounded (a few dozen generated requests per operation) so it stays a few seconds on two cores; the
examples, coverage (boundary values, missing and wrong-typed fields) and fuzzing phases all run. One
operation's coverage phase is sampled: a snapshot's body nests a whole program in each fix, and the phase
"generates every case the schema defines" for it, 11,040 requests (90 s of the suite's time); CI sends
one in COVERAGE_STRIDE of them, chosen by a hash of the case (the same every run), a nightly run
(SHARDSCOPE_FUZZ_SCALE > 1) all.
"""

from __future__ import annotations

import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from server.app import create_app
from tests.helpers import FUZZ_SCALE, fuzz_examples

# The in-process client says "Host: testserver"; the app is bound to loopback and checks Host.
HOST = {"host": "127.0.0.1:8000"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


SAMPLED = {("POST", "/api/snapshots")}
"""Operations whose coverage phase is sampled in CI."""
COVERAGE_STRIDE = 1 if FUZZ_SCALE > 1 else 10


def sampled_out(case: Any) -> bool:
    """A coverage case of a sampled operation that CI leaves out: kept when a hash of what it sends (its
    scenario and body) falls in one bucket of COVERAGE_STRIDE."""
    if COVERAGE_STRIDE == 1 or (case.operation.method.upper(), case.operation.path) not in SAMPLED:
        return False
    phase = case.meta.phase if case.meta is not None else None
    if phase is None or str(phase.name) != "coverage":
        return False
    sent = f"{getattr(phase.data, 'description', '')}|{case.body!r}|{case.query!r}".encode()
    return zlib.crc32(sent) % COVERAGE_STRIDE != 0


# Built at import: schemathesis collects one test per operation from the loaded schema.
# (Its fixture-based loader, ``schemathesis.pytest.from_fixture``, fails under pytest 9.)
_TMP = tempfile.TemporaryDirectory(prefix="shardscope-schema-")
APP = create_app(str(Path(_TMP.name) / "links.db"), "127.0.0.1")
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, headers=HOST)


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    APP.state.store.close()
    _TMP.cleanup()


@schema.parametrize()
# Deterministic in CI (derandomize: the same examples every run, so a failure is a regression, not luck);
# a nightly run with SHARDSCOPE_FUZZ_SCALE > 1 draws new ones.
@settings(
    max_examples=fuzz_examples(30),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=FUZZ_SCALE == 1,
)
def test_api_matches_its_schema(case: Any, host: dict[str, str]) -> None:
    if sampled_out(case):
        return
    case.call_and_validate(headers=host, checks=CHECKS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The Host header as a parameter: with one, schemathesis names each operation's test by its own node id
    (``test_api_matches_its_schema[GET /api/health][loopback]``); without, its 22 tests shared one, and
    pytest-xdist, which schedules by node id, ran one of them."""
    if "host" in metafunc.fixturenames:
        metafunc.parametrize("host", [HOST], ids=["loopback"])
