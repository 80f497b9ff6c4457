"""Generated hostile requests on every route from another tenant's client: typed answers, no leaks.

One tenant (``acme``) holds a run waiting for approval (its payee a secret) and an unknown commit
(its note a secret). A client of another tenant (``beta``), or one without a good token, sends
requests drawn at random: any method, any route (API, console, static files, the spec), ids of the
first tenant's run, request and ledger entry or hostile path segments, repeated or odd query
parameters, authorization headers of every shape, content types, and bodies with wrong types,
huge numbers, NaN, duplicate members, deep nesting, lone surrogates, NUL and invalid UTF-8.

Every answer is below 500 and, when an error, is ``{"error": {"category", "message"}}`` with a
category of the taxonomy fitting its status; no answer shows the first tenant's secrets or ids
(unless the request named them itself); the first tenant's request stays pending, its entry
unresolved and its run's trace unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal
from actionspace.errors import CATEGORIES
from actionspace.service.auth import SCOPES
from tests.pg import STORES, store_url
from tests.service.apptools import TOKENS, TOOL_SCOPES, bearer, served

_EVERY = (*SCOPES, *TOOL_SCOPES)
_TOKENS = {
    **TOKENS,
    "acme-token": Principal(id="ann", scopes=_EVERY, tenant="acme"),
    "beta-token": Principal(id="bo", scopes=_EVERY, tenant="beta"),
    "beta-reader": Principal(id="bea", scopes=("runs:read", "approvals:read"), tenant="beta"),
}
_SECRETS = ("acme-secret-payee", "acme-secret-note")
_EXPECTED_CATEGORY = {400: "invalid_arguments", 401: "permission_denied", 403: "permission_denied"}
_EXPECTED_CATEGORY.update({404: "invalid_arguments", 405: "invalid_arguments", 408: "transient"})
_EXPECTED_CATEGORY.update({413: "invalid_arguments", 422: "invalid_arguments", 429: "rate_limited"})

_ROUTES = [
    "/api/runs",
    "/api/runs/{id}",
    "/api/runs/{id}/events",
    "/api/approvals",
    "/api/approvals/{id}",
    "/api/approvals/{id}/approve",
    "/api/approvals/{id}/deny",
    "/api/ledger",
    "/api/ledger/{id}/resolve",
    "/api/catalog",
    "/api/catalog/{id}",
    "/api/metrics",
    "/api/health",
    "/openapi.json",
    "/",
    "/runs/{id}",
    "/static/{id}",
    "/static/vendor/{id}",
    "/api/{id}",
]
_METHODS = st.sampled_from(["GET", "GET", "POST", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
_HOSTILE_SEGMENTS = [
    "..",
    "%2e%2e",
    "%2F",
    "%00",
    "a%00b",
    "%ff",
    "%ED%A0%80",
    "%C0%AE",
    "%E2%80%AE",
    "а",
    "x" * 3000,
    "%20",
    "core.js",
    "swagger-ui.css",
    "lookup@1",
    "lookup@%00",
]
_AUTH = st.sampled_from(
    [
        [],
        [("Authorization", "Bearer beta-token")],
        [("Authorization", "Bearer beta-token")],
        [("Authorization", "Bearer beta-reader")],
        [("Authorization", "bearer beta-token")],
        [("Authorization", "Bearer  beta-token")],
        [("Authorization", "Bearer beta-token ")],
        [("Authorization", "Basic YWNtZS10b2tlbjo=")],
        [("Authorization", "Bearer")],
        [("Authorization", "Bearer acme-token\x7f")],
        [("Authorization", "Bearer " + "a" * 8000)],
        [("Authorization", "Bearer acme-tokeN")],
        [("Authorization", "Bearer beta-token"), ("Authorization", "Bearer acme-token")],
        [("Authorization", "Bearer \u00e9t\u00e9")],  # sent as its UTF-8 bytes
    ]
)
_CONTENT_TYPES = st.sampled_from(
    [
        [],
        [("content-type", "application/json")],
        [("content-type", "application/json")],
        [("content-type", "APPLICATION/JSON; charset=utf-8")],
        [("content-type", "application/merge-patch+json")],
        [("content-type", "text/plain")],
        [("content-type", "application/x-www-form-urlencoded")],
        [("content-type", "multipart/form-data; boundary=x")],
        [("content-type", "application/json; charset=utf-16")],
        [("content-type", "")],
        [("content-type", "text/plain"), ("content-type", "application/json")],
    ]
)
_ATOMS = st.sampled_from(
    [
        b"null",
        b"true",
        b"0",
        b"-1",
        b"1e308",
        b"1e999",
        b"NaN",
        b"9" * 4400,
        b"123456789012345678901234567890",
        b'"\\ud800"',
        b'"\\u0000"',
        b'"\xff"',
        b'"\xed\xa0\x80"',
        b'"committed"',
        b'"not_committed"',
        b'"lookup"',
        b'"send_payment"',
        b'"' + b"y" * 3000 + b'"',
        b"[" * 300 + b"]" * 300,
        b"{",
        b"",
    ]
)
_NAMES = st.sampled_from(
    [
        '"calls"',
        '"plan"',
        '"run_id"',
        '"reason"',
        '"outcome"',
        '"note"',
        '"nodes"',
        '"name"',
        '"arguments"',
        '"tenant"',
        '"\\ud800"',
        '""',
    ]
).map(str.encode)


def _member(name: bytes, value: bytes) -> bytes:
    return name + b": " + value


def _bodies(own_ids: list[str]) -> st.SearchStrategy[bytes]:
    ids = st.sampled_from(own_ids).map(lambda i: json.dumps(i).encode())
    values = st.recursive(
        _ATOMS | ids,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda xs: b"[" + b", ".join(xs) + b"]"),
            st.lists(st.tuples(_NAMES, inner), max_size=4).map(
                lambda ms: b"{" + b", ".join(_member(n, v) for n, v in ms) + b"}"
            ),
        ),
        max_leaves=10,
    )
    return st.one_of(st.none(), values)


def _error(answer: Any) -> dict[str, Any]:
    body = answer.json()
    assert set(body) == {"error"}, answer.text
    error: dict[str, Any] = body["error"]
    assert set(error) == {"category", "message"} and error["message"], answer.text
    return error


def _acme(client: TestClient, approvals: Any, rt: Any) -> tuple[str, str, str]:
    """The first tenant's run held for approval, and its unknown commit: (run, request, key)."""
    acme = bearer("acme-token")
    held = client.post(
        "/api/runs",
        headers=acme,
        json={
            "run_id": "acme-run",
            "calls": [{"name": "send_payment", "arguments": {"to": "acme-secret-payee", "amount": 5}}],
        },
    )
    assert held.status_code == 202, held.text
    request = approvals.wait_for_request()
    noted = client.post(
        "/api/runs",
        headers=acme,
        json={
            "run_id": "acme-note",
            "calls": [{"name": "post_note", "arguments": {"text": "acme-secret-note"}}],
        },
    )
    assert noted.status_code == 202, noted.text
    assert client.app.state.runner.wait("acme-note", timeout=10) is not None  # type: ignore[attr-defined]
    (entry,) = rt.ledger.list(state="unknown_commit")
    return "acme-run", request.id, entry.key


def _trace_of(rt: Any, run_id: str) -> list[tuple[str, Any]]:
    """The run's events but the lease's (a live driver renews them on its own clock)."""
    return [(e.kind, e.data) for e in rt.trace.events(run_id) if e.kind != "service_run_driver"]


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def test_generated_hostile_requests_from_another_tenant_are_typed_and_leak_nothing(any_store: str) -> None:
    with served(any_store, tokens=_TOKENS) as (_client, rt, world, approvals, app):
        client = TestClient(app, raise_server_exceptions=False)
        run_id, request_id, key = _acme(client, approvals, rt)
        own_ids = [run_id, request_id, key, "acme-note"]
        trace_before = {r: _trace_of(rt, r) for r in (run_id, "acme-note")}
        segments = st.sampled_from([*own_ids, *own_ids, *_HOSTILE_SEGMENTS]) | st.text(max_size=12).map(
            lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")
        )
        queries = st.lists(
            st.tuples(
                st.sampled_from(
                    ["limit", "before", "before_id", "principal", "status", "run", "state", "since"]
                ),
                st.sampled_from(
                    [
                        run_id,
                        "ann",
                        "all",
                        "0",
                        "-1",
                        "NaN",
                        "9" * 30,
                        "%00",
                        "%ff",
                        "2026-01-01T00:00:00Z",
                        "",
                    ]
                ),
            ),
            max_size=3,
        ).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs))
        seen = {"answers": 0, "refused": 0}

        @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(
            method=_METHODS,
            route=st.sampled_from(_ROUTES),
            segment=segments,
            query=queries,
            auth=_AUTH,
            content_type=_CONTENT_TYPES,
            body=_bodies(own_ids),
        )
        def one_request(
            method: str,
            route: str,
            segment: str,
            query: str,
            auth: list[tuple[str, str]],
            content_type: list[tuple[str, str]],
            body: bytes | None,
        ) -> None:
            url = route.replace("{id}", segment) + (f"?{query}" if query else "")
            headers = [(name.encode(), value.encode()) for name, value in (*auth, *content_type)]
            answer = client.request(method, url, headers=headers, content=body)
            seen["answers"] += 1
            assert answer.status_code < 500, (method, url, answer.status_code, answer.text[:300])
            asked = url + (body or b"").decode("utf-8", "replace")
            shown = answer.content.decode("utf-8")  # strict: every answer is UTF-8 whole
            for secret in (*_SECRETS, *own_ids):
                if secret not in asked:
                    assert secret not in shown, (method, url, secret, shown[:300])
            if answer.status_code >= 400:
                seen["refused"] += 1
                if method != "HEAD":
                    category = _error(answer)["category"]
                    assert category in CATEGORIES
                    expected = _EXPECTED_CATEGORY.get(answer.status_code)
                    assert expected is None or category == expected or answer.status_code == 404, answer.text
            # the first tenant's request, entry and runs are as they were
            pending, entry = rt.approvals.get(request_id), rt.ledger.get(key)
            assert pending is not None and pending.status == "pending"
            assert entry is not None and entry.state == "unknown_commit"
            assert {r: _trace_of(rt, r) for r in trace_before} == trace_before
            assert world.payments == [] and world.notes == ["acme-secret-note"]

        one_request()
        assert seen["answers"] >= 250 and seen["refused"] > 0, seen


def test_a_static_file_that_is_not_there_is_refused_with_the_error_envelope() -> None:
    """The console's asset routes are the service's too: their 404 names its category."""
    with served() as (client, _rt, _world, _approvals, _app):
        for path in ("/static/nothing.js", "/static/vendor/nothing.js", "/static/..%2Fapp.py", "/static/%00"):
            answer = client.get(path)
            assert answer.status_code == 404, (path, answer.text)
            assert _error(answer)["category"] == "invalid_arguments", (path, answer.text)
