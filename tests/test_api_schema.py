"""Schemathesis over ``/openapi.json``, in-process: no 5xx, and every response matches its schema.

Bounded (a few dozen generated requests per operation) so it stays a few seconds on two cores; the
examples, coverage (boundary values, missing and wrong-typed fields) and fuzzing phases all run.
"""

from __future__ import annotations

import tempfile
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
    case.call_and_validate(headers=host, checks=CHECKS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The Host header as a parameter: with one, schemathesis names each operation's test by its own node id
    (``test_api_matches_its_schema[GET /api/health][loopback]``); without, its 22 tests shared one, and
    pytest-xdist, which schedules by node id, ran one of them."""
    if "host" in metafunc.fixturenames:
        metafunc.parametrize("host", [HOST], ids=["loopback"])
