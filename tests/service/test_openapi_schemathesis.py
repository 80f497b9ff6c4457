"""The OpenAPI spec, tested by schemathesis over every operation with a valid token.

Every generated request must get a non-5xx answer whose status, content type and body conform
to what the spec declares. The world is seeded so that the lookups find real runs, a pending
approval and an unknown commit. CI-sized: a few examples per operation.

The app is built when the module is imported: schemathesis parametrizes the test from its spec at
collection (its lazy fixture-based loader does not work with this pytest version).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection

from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, World, bearer, build_runtime

_rt, _ = build_runtime(World())
_rt.call({"name": "lookup", "arguments": {"city": "Oslo"}}, run_id="seed-run", node_id="n1")
_rt.call({"name": "send_payment", "arguments": {"to": "a", "amount": 1}}, run_id="seed-run", node_id="n2")
_rt.call({"name": "post_note", "arguments": {"text": "x"}}, run_id="seed-run", node_id="n3")
_rt.run_plan({"nodes": [{"id": "a", "tool": "lookup", "arguments": {"city": "Rome"}}]}, run_id="seed-plan")
_app = create_app(_rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05, approval_wait_s=1.0))

schema = schemathesis.openapi.from_asgi("/openapi.json", _app)


@pytest.fixture(scope="module", autouse=True)
def _close() -> Iterator[None]:
    yield
    _app.state.runner.close()
    _rt.close()


def test_the_spec_lists_every_route_of_the_contract() -> None:
    paths = set(_app.openapi()["paths"])
    assert {
        "/api/health",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/events",
        "/api/approvals",
        "/api/approvals/{request_id}/approve",
        "/api/approvals/{request_id}/deny",
        "/api/ledger",
        "/api/ledger/{key}/resolve",
        "/api/catalog",
        "/api/catalog/{name}",
        "/api/metrics",
    } <= paths


@schema.parametrize()
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_operation_conforms_to_its_declared_schema(case: schemathesis.Case[Any]) -> None:
    # Unknown query parameters are ignored, as most HTTP APIs do; every other check applies.
    case.call_and_validate(headers=bearer("admin-token"), excluded_checks=[negative_data_rejection])
