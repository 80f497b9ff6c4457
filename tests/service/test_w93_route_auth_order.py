"""Every route of the API, enumerated from the application, asked by (no token, bad token, good
token) x (a good id, a hostile id, a query parameter given twice): a caller without a good token
is refused 401 before anything about the request is judged, whatever the id or the query; a good
token gets the route's answer, 404 for an id no run, request, entry or tool holds and 422 for a
query parameter given twice. Only ``/api/health`` answers without a token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace.service.auth import Auth
from actionspace.service.quotas import RateLimit
from tests.service.apptools import TOKENS, bearer, served

_PUBLIC = {"/api/health"}
_HOSTILE_IDS = ["%00", "a%00b", "nope", "x" * 300, "%20", "%E2%80%AE"]
_NO_GOOD_TOKEN: list[dict[str, str]] = [
    {},
    bearer("admin-token-forged"),
    bearer("admin-token\x00"),
    {"authorization": "Basic YWRtaW46YWRtaW4="},
    {"authorization": "admin-token"},
]
_BODIES = {
    "/api/runs": {"calls": [{"name": "lookup", "arguments": {"city": "Paris"}}]},
    "/api/ledger/{key}/resolve": {"outcome": "committed"},
}


def _operations() -> list[tuple[str, str]]:
    with served() as (_client, _rt, _world, _signalling, app):
        paths = app.openapi()["paths"]
    return sorted((method.upper(), path) for path, ops in paths.items() for method in ops)


_OPERATIONS = _operations()


@contextmanager
def _world() -> Iterator[tuple[TestClient, FastAPI, dict[str, str]]]:
    """A served app holding one pending approval, one unknown commit and one run; the good id of
    each path parameter."""
    with served() as (client, rt, _world, signalling, app):
        payment = {"calls": [{"name": "send_payment", "arguments": {"to": "a", "amount": 1}}]}
        started = client.post("/api/runs", headers=bearer("admin-token"), json=payment)
        assert started.status_code == 202, started.text
        request = signalling.wait_for_request()
        lost = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r_lost", node_id="n")
        assert lost.error is not None
        (entry,) = rt.ledger.list(state="unknown_commit")
        good = {"run_id": request.run_id, "request_id": request.id, "key": entry.key, "name": "lookup"}
        yield TestClient(app, raise_server_exceptions=False), app, good


def _ask(client: TestClient, method: str, path: str, ident: str, headers: dict[str, str], twice: bool) -> Any:
    url = path
    for name in ("run_id", "request_id", "key", "name"):
        url = url.replace("{" + name + "}", ident)
    if twice:
        url += "?limit=1&limit=1"
    body = _BODIES.get(path, {}) if method == "POST" else None
    return client.request(method, url, headers=headers, json=body)


def test_the_routes_enumerated_are_the_api_and_only_health_is_public() -> None:
    assert ("GET", "/api/health") in _OPERATIONS
    assert len([p for _m, p in _OPERATIONS if "{" in p]) >= 6
    with _world() as (client, _app, _good):
        for method, path in _OPERATIONS:
            if "{" in path or method != "GET":
                continue
            answer = client.get(path)
            assert (answer.status_code == 200) == (path in _PUBLIC), (path, answer.status_code)


@pytest.mark.parametrize(("method", "path"), [op for op in _OPERATIONS if op[1] not in _PUBLIC])
def test_a_caller_without_a_good_token_is_refused_401_before_the_id_or_the_query_is_judged(
    method: str, path: str
) -> None:
    with _world() as (client, _app, good):
        param = next((n for n in good if "{" + n + "}" in path), None)
        ids = [good[param], *_HOSTILE_IDS] if param is not None else [""]
        for headers in _NO_GOOD_TOKEN:
            for ident in ids:
                for twice in (False, True):
                    answer = _ask(client, method, path, ident, headers, twice)
                    where = (method, path, ident[:20], headers, twice)
                    assert answer.status_code == 401, (*where, answer.text[:200])
                    assert answer.json()["error"]["category"] == "permission_denied", where
        # a good token: the route's answer, a hostile id is no such id, a query given twice is 422
        for ident in ids[1:]:
            answer = _ask(client, method, path, ident, bearer("admin-token"), False)
            assert answer.status_code == 404, (method, path, ident[:20], answer.text[:200])
        answer = _ask(client, method, path, ids[0], bearer("admin-token"), True)
        assert answer.status_code == 422, (method, path, answer.text[:200])
        answer = _ask(client, method, path, ids[0], bearer("admin-token"), False)
        assert 200 <= answer.status_code < 300, (method, path, answer.text[:200])


@pytest.mark.parametrize("twice", [False, True])
def test_health_answers_without_a_token_and_judges_its_query_alike_for_everyone(twice: bool) -> None:
    with _world() as (client, _app, _good):
        answers = {
            _ask(client, "GET", "/api/health", "", headers, twice).status_code
            for headers in [*_NO_GOOD_TOKEN, bearer("admin-token")]
        }
    assert answers == {422 if twice else 200}


@pytest.mark.parametrize(("method", "path"), [op for op in _OPERATIONS if op[1] not in _PUBLIC])
def test_each_request_is_counted_once_on_every_route(method: str, path: str) -> None:
    """The token is read by the route-wide check and again by the route's scope check, and a
    NUL id is judged between them: the principal's allowance still pays one request each."""
    allowed = 4
    with _world() as (client, app, good):
        app.state.auth = Auth(TOKENS, rate_limit=RateLimit(requests=allowed, per_s=3600))
        param = next((n for n in good if "{" + n + "}" in path), None)
        ids = ["%00", "nope", "a%00b", "x" * 300] if param is not None else [""] * allowed
        answers = [_ask(client, method, path, i, bearer("admin-token"), False).status_code for i in ids]
        answers.append(_ask(client, method, path, ids[0], bearer("admin-token"), False).status_code)
    assert 429 not in answers[:allowed] and answers[allowed] == 429, (method, path, answers)
