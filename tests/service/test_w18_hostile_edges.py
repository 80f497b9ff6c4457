"""A hostile client at every edge of the API: each refusal is a typed 4xx and writes nothing.

Every error answer names a category (``invalid_arguments`` for a request that cannot be read or
names nothing, ``permission_denied`` for a missing token or scope, ...), whatever part of the
stack refused it. A request carrying two ``Authorization`` headers is refused before any token is
compared: a proxy may check one and the service act on the other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.errors import CATEGORIES
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, bearer, build_runtime, served
from tests.service.apptools import World as _World


def _error(answer: Any) -> dict[str, Any]:
    body = answer.json()
    assert set(body) == {"error"}, answer.text
    error: dict[str, Any] = body["error"]
    return error


def _typed(answer: Any, status: int, category: str) -> None:
    assert answer.status_code == status, answer.text
    error = _error(answer)
    assert error.get("category") == category and error["message"], answer.text


def test_two_authorization_headers_are_refused_before_either_token_is_compared() -> None:
    with served() as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        for first, second in (
            ("admin-token", "reader-token"),
            ("nobody", "admin-token"),
            ("admin-token",) * 2,
        ):
            headers = [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]
            _typed(client.get("/api/runs", headers=headers), 400, "invalid_arguments")
            started = client.post(
                "/api/runs",
                headers=[*headers, ("content-type", "application/json")],
                content=json.dumps({"run_id": "two_heads", "calls": []}),
            )
            _typed(started, 400, "invalid_arguments")
        assert rt.trace.events("two_heads") == []  # nothing of the refused start was written
        # a refused request spends no guess: more of them than the address may guess leave it able to ask
        for n in range(120):
            headers = [("Authorization", f"Bearer guess-{n}"), ("Authorization", "Bearer admin-token")]
            assert client.get("/api/runs", headers=headers).status_code == 400
        assert client.get("/api/runs", headers=bearer("admin-token")).status_code == 200


@contextmanager
def _small_app() -> Iterator[TestClient]:
    rt, _signalling = build_runtime(_World())
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), max_body_bytes=8192)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
    finally:
        app.state.runner.close()
        rt.close()


_JSON = {"content-type": "application/json"}
_CASES: list[tuple[str, str, dict[str, str], bytes | None, int, str]] = [
    # what the route's parser cannot read: past Python's 4300-digit integer limit, not UTF-8
    ("POST", "/api/runs", _JSON, b'{"calls": [' + b"9" * 5000 + b"]}", 400, "invalid_arguments"),
    ("POST", "/api/runs", _JSON, b'{"calls": ["\xff\xfe"]}', 400, "invalid_arguments"),
    ("POST", "/api/approvals/x/deny", _JSON, b'{"reason": "\xc0\xaf"}', 400, "invalid_arguments"),
    ("POST", "/api/runs", _JSON, b"x" * 10_000, 413, "invalid_arguments"),
    ("GET", "/api/runs/no-such-run", {}, None, 404, "invalid_arguments"),
    ("GET", "/api/approvals/no-such-request", {}, None, 404, "invalid_arguments"),
    ("POST", "/api/ledger/no-such-key/resolve", _JSON, b'{"outcome": "committed"}', 404, "invalid_arguments"),
    ("GET", "/api/no-such-route", {}, None, 404, "invalid_arguments"),
    ("DELETE", "/api/runs", {}, None, 405, "invalid_arguments"),
    ("PUT", "/api/approvals/x/approve", _JSON, b"{}", 405, "invalid_arguments"),
]


@pytest.mark.parametrize(("method", "path", "headers", "body", "status", "category"), _CASES)
def test_every_refusal_names_its_category(
    method: str, path: str, headers: dict[str, str], body: bytes | None, status: int, category: str
) -> None:
    with _small_app() as client:
        answer = client.request(method, path, headers={**bearer("admin-token"), **headers}, content=body)
        _typed(answer, status, category)


def test_a_missing_token_and_a_missing_scope_are_permission_denied() -> None:
    with _small_app() as client:
        _typed(client.get("/api/runs"), 401, "permission_denied")
        _typed(client.get("/api/runs", headers=bearer("not-a-token")), 401, "permission_denied")
        _typed(client.get("/api/ledger", headers=bearer("agent-token")), 403, "permission_denied")
        posted = client.post(
            "/api/runs", headers={**bearer("reader-token"), **_JSON}, content=b'{"calls": []}'
        )
        _typed(posted, 403, "permission_denied")


def test_a_content_length_that_is_no_number_is_a_typed_400() -> None:
    """Sent below the HTTP client (which would write its own length), as a proxy might pass it on."""
    with _small_app() as client:
        app = client.app
        sent: list[MutableMapping[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/api/runs",
            "raw_path": b"/api/runs",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-length", b"two"), (b"authorization", b"Bearer admin-token")],
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }
        portal = client.portal
        assert portal is not None

        async def call() -> None:
            await app(scope, receive, send)

        portal.call(call)
        start = next(m for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        assert start["status"] == 400
        assert json.loads(body)["error"]["category"] == "invalid_arguments"


# ---------------------------------------------------------------- hostile bodies, generated

_ATOMS = st.sampled_from(
    [
        b"null",
        b"true",
        b"0",
        b"-1",
        b"1e308",
        b"1e999",
        b"NaN",
        b"-Infinity",
        b"9" * 4400,
        b"123456789012345678901234567890",
        b'"\\ud800"',
        b'"\\udfff"',
        b'"\\u0000"',
        b'"x"',
        b'"\xff"',
        b'"\xed\xa0\x80"',
        b'"\xe2\x80\xae"',
        b'"committed"',
        b'"not_committed"',
        b'"' + b"y" * 3000 + b'"',
        b"[" * 300 + b"]" * 300,
        b"{",
        b"",
    ]
)
_NAMES = st.sampled_from(
    ['"calls"', '"plan"', '"run_id"', '"reason"', '"outcome"', '"note"', '"\\ud800"', '"x"', '""']
).map(str.encode)


def _member(name: bytes, value: bytes) -> bytes:
    return name + b": " + value


_VALUES = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: b"[" + b", ".join(xs) + b"]"),
        st.lists(st.tuples(_NAMES, inner), max_size=3).map(
            lambda ms: b"{" + b", ".join(_member(n, v) for n, v in ms) + b"}"
        ),
    ),
    max_leaves=8,
)
_CONTENT_TYPES = st.sampled_from(
    ["application/json", "text/plain", "", "application/json; charset=utf-16", "APPLICATION/JSON"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_hostile_body_on_any_route_is_accepted_whole_or_refused_typed_and_writes_nothing(
    data: st.DataObject,
) -> None:
    with served() as (_client, rt, _world, signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        admin = bearer("admin-token")
        held = client.post(
            "/api/runs",
            headers=admin,
            json={"calls": [{"name": "send_payment", "arguments": {"to": "a", "amount": 1}}]},
        )
        assert held.status_code == 202
        request = signalling.wait_for_request()
        lost = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r_lost", node_id="n")
        assert lost.error is not None
        (entry,) = rt.ledger.list(state="unknown_commit")
        for _ in range(3):
            route = data.draw(
                st.sampled_from(
                    [
                        "/api/runs",
                        f"/api/approvals/{request.id}/approve",
                        f"/api/approvals/{request.id}/deny",
                        f"/api/ledger/{entry.key}/resolve",
                    ]
                )
            )
            body = data.draw(_VALUES)
            content_type = data.draw(_CONTENT_TYPES)
            runs_before = {s.run_id for s in rt.trace.runs(limit=1000)}
            answer = client.post(route, headers={**admin, "content-type": content_type}, content=body)
            assert answer.status_code < 500, answer.text
            if answer.status_code >= 400:
                error = _error(answer)
                assert error.get("category") in CATEGORIES, answer.text
                # refused: nothing of it was written anywhere
                assert {s.run_id for s in rt.trace.runs(limit=1000)} == runs_before
                if route.startswith("/api/approvals"):
                    assert rt.approvals.get(request.id).status == "pending"  # type: ignore[union-attr]
                if route.startswith("/api/ledger"):
                    assert rt.ledger.get(entry.key).state == "unknown_commit"  # type: ignore[union-attr]
            elif route.startswith("/api/approvals") or route.startswith("/api/ledger"):
                return  # decided: the next posts would only be conflicts


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
@pytest.mark.parametrize("value", ["NaN", "-Infinity", "1e999"])
def test_a_body_in_utf16_or_utf32_cannot_carry_what_utf8_may_not_past_the_edge(
    encoding: str, value: str
) -> None:
    """The route's parser reads UTF-16 and UTF-32 JSON too: the edge must not read such a body as
    bytes and find no ``NaN`` in it, so a body in any encoding but UTF-8 is refused."""
    with served() as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        body = f'{{"calls": [{value}]}}'.encode(encoding)  # one member: nothing named twice to look for
        answer = client.post("/api/runs", headers={**bearer("admin-token"), **_JSON}, content=body)
        _typed(answer, 400, "invalid_arguments")
        assert rt.trace.runs(limit=10) == []  # no run was started
        plain = client.post("/api/runs", headers={**bearer("admin-token"), **_JSON}, content=b'{"calls": []}')
        assert plain.status_code == 202


_SEGMENT_PARTS = st.sampled_from(
    [
        "..",
        ".",
        "%2F",
        "%2f..%2f",
        "%00",
        "%ff",
        "%ED%A0%80",
        "%C0%AE",
        "%E2%80%AE",
        "а",
        "Ａ",
        "%20",
        "@",
        "x" * 2000,
    ]
)
_SEGMENTS = st.one_of(
    st.lists(_SEGMENT_PARTS, min_size=1, max_size=4).map("".join),
    st.text(min_size=1, max_size=30).map(lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")),
)
_QUERIES = st.lists(
    st.tuples(
        st.sampled_from(
            ["limit", "before", "before_id", "principal", "status", "run", "state", "since", "max_runs"]
        ),
        st.sampled_from(
            ["0", "-1", "NaN", "1e3", "9" * 40, "", "%00", "%ff", "all", "2026-01-01T00:00:00Z", "x" * 5000]
        ),
    ),
    max_size=4,
).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_hostile_path_or_query_on_any_route_is_answered_typed_never_500(data: st.DataObject) -> None:
    with _small_app() as client:
        for _ in range(4):
            segment = data.draw(_SEGMENTS)
            query = data.draw(_QUERIES)
            method, route = data.draw(
                st.sampled_from(
                    [
                        ("GET", "/api/runs/{}"),
                        ("GET", "/api/runs/{}/events"),
                        ("GET", "/api/approvals/{}"),
                        ("POST", "/api/approvals/{}/approve"),
                        ("POST", "/api/approvals/{}/deny"),
                        ("POST", "/api/ledger/{}/resolve"),
                        ("GET", "/api/catalog/{}"),
                        ("GET", "/api/runs?{}"),
                        ("GET", "/api/approvals?{}"),
                        ("GET", "/api/ledger?{}"),
                        ("GET", "/api/metrics?{}"),
                    ]
                )
            )
            url = route.format(query if "?" in route else segment)
            answer = client.request(method, url, headers={**bearer("admin-token"), **_JSON}, content=b"{}")
            assert answer.status_code < 500, (url, answer.text)
            if answer.status_code >= 400:
                assert _error(answer).get("category") in CATEGORIES, (url, answer.text)


@pytest.mark.parametrize(
    "url",
    [
        "/api/runs?limit=1&limit=500",
        "/api/approvals?status=pending&status=all",
        "/api/runs?principal=agent&principal=admin",
        "/api/ledger?state=committed&state=unknown_commit",
        "/api/metrics?since=0&since=1",
    ],
)
def test_a_query_parameter_given_twice_is_refused_not_read_as_the_last(url: str) -> None:
    """A proxy's filter may read the first value and the service the last: neither is sure to be meant."""
    with _small_app() as client:
        _typed(client.get(url, headers=bearer("admin-token")), 422, "invalid_arguments")
        once = url.split("&")[0]
        assert client.get(once, headers=bearer("admin-token")).status_code == 200
