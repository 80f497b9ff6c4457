"""Every endpoint of the service against a hostile client, in process: bodies of the right shape
holding hostile values (NUL, lone surrogates, huge strings and numbers, deep nesting, unknown
members, members named twice), wrong content types, ids with ``..`` or ``%00`` or of 5000
characters, and missing, forged or underscoped tokens. Each answer is accepted whole or refused
with a typed 4xx naming a category of the error taxonomy, never a 500; a refusal writes nothing
(no run, no decision, no ledger resolution), and a request without a known token is refused
before anything else.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Match

from actionspace.errors import CATEGORIES
from tests.service.apptools import bearer, served

_HOSTILE = st.sampled_from(
    [
        '"\\u0000"',
        '"a\\u0000b"',
        '"\\ud800"',
        '"\\udfff x"',
        '"' + "z" * 70_000 + '"',
        "9" * 4400,
        "1" * 4200,
        "-1e308",
        "1e999",
        "NaN",
        "[" * 250 + "]" * 250,
        '{"a": 1, "a": 2}',
        "null",
        "true",
        "[]",
        "{}",
        '""',
        '".."',
        '"../../etc/passwd"',
        '"%00"',
        '"\\u202e"',
        '"x"',
        "0",
        "-1",
    ]
)


def _object(members: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in members) + "}"


def _bodies(hostile: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    """(route kind, body): the right shape for the route, a hostile value somewhere in it."""
    call = st.builds(
        lambda name, arguments: _object([("name", name), ("arguments", arguments)]),
        st.one_of(st.just('"lookup"'), hostile),
        st.one_of(hostile, st.builds(lambda v: _object([("city", v)]), hostile)),
    )
    node = st.builds(
        lambda ident, tool, args: _object([("id", ident), ("tool", tool), ("args", args)]),
        st.one_of(st.just('"n1"'), hostile),
        st.one_of(st.just('"lookup"'), hostile),
        st.one_of(hostile, st.builds(lambda v: _object([("city", v)]), hostile)),
    )
    runs = st.one_of(
        st.builds(lambda c, r: _object([("calls", "[" + c + "]"), ("run_id", r)]), call, hostile),
        st.builds(lambda n: _object([("plan", _object([("nodes", "[" + n + "]")]))]), node),
        st.builds(lambda c, v: _object([("calls", "[" + c + "]"), ("unknown", v)]), call, hostile),
        st.builds(lambda c, p: _object([("calls", "[" + c + "]"), ("plan", p)]), call, hostile),
        st.builds(lambda v: _object([("calls", v)]), hostile),
    )
    decisions = st.one_of(
        st.builds(lambda v: _object([("reason", v)]), hostile),
        st.builds(lambda v: _object([("reason", '"ok"'), ("unknown", v)]), hostile),
        hostile,
    )
    resolutions = st.one_of(
        st.builds(lambda v: _object([("outcome", v)]), hostile),
        st.builds(lambda v: _object([("outcome", '"committed"'), ("note", v)]), hostile),
        st.builds(lambda v: _object([("outcome", '"not_committed"'), ("unknown", v)]), hostile),
        hostile,
    )
    return st.one_of(
        runs.map(lambda b: ("runs", b)),
        decisions.map(lambda b: ("decide", b)),
        resolutions.map(lambda b: ("resolve", b)),
        st.just(("read", "")),
    )


_IDS = st.sampled_from(["..", "%2e%2e", "%00", "a%00b", "x" * 5000, "%ED%A0%80", "%C0%AE", "%20", "@"])
_TOKENS: st.SearchStrategy[list[tuple[bytes, bytes]]] = st.sampled_from(
    [
        [],
        [(b"authorization", b"Bearer")],
        [(b"authorization", b"Bearer admin-token-forged")],
        [(b"authorization", b"Basic YWRtaW46YWRtaW4=")],
        [(b"authorization", b"Bearer \xe9\xff")],
        [(b"authorization", b"Bearer " + b"a" * 9000)],
        [(b"authorization", b"Bearer admin-token\x00")],
    ]
)
_CONTENT_TYPES = st.sampled_from(
    [
        b"application/json",
        b"text/plain",
        b"",
        b"application/x-www-form-urlencoded",
        b"application/json; x=\xff",
    ]
)
_READS = [
    "/api/runs",
    "/api/runs/{id}",
    "/api/runs/{id}/events",
    "/api/approvals",
    "/api/approvals/{id}",
    "/api/ledger",
    "/api/catalog",
    "/api/catalog/{id}",
    "/api/metrics",
    "/api/health",
]


def _served(app: Any, answer: Any) -> bool:
    """Whether some route serves the path the request was sent to (``..`` is resolved by then)."""
    scope = {"type": "http", "path": answer.request.url.path, "method": answer.request.method}
    return any(route.matches(scope)[0] != Match.NONE for route in app.router.routes)


def _category(answer: Any) -> Any:
    body = answer.json()
    assert set(body) == {"error"}, answer.text
    return body["error"].get("category")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_endpoint_answers_a_hostile_request_whole_or_typed_and_a_refusal_writes_nothing(
    data: st.DataObject,
) -> None:
    with served() as (_client, rt, _world, signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        payment = {"calls": [{"name": "send_payment", "arguments": {"to": "a", "amount": 1}}]}
        assert client.post("/api/runs", headers=bearer("admin-token"), json=payment).status_code == 202
        request = signalling.wait_for_request()
        lost = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r_lost", node_id="n")
        assert lost.error is not None
        (entry,) = rt.ledger.list(state="unknown_commit")
        for _ in range(4):
            kind, body = data.draw(_bodies(_HOSTILE))
            odd = data.draw(st.booleans())
            if kind == "runs":
                method, url = "POST", "/api/runs"
            elif kind == "decide":
                verb = data.draw(st.sampled_from(["approve", "deny"]))
                method, url = "POST", f"/api/approvals/{data.draw(_IDS) if odd else request.id}/{verb}"
            elif kind == "resolve":
                method, url = "POST", f"/api/ledger/{data.draw(_IDS) if odd else entry.key}/resolve"
            else:
                method, url = "GET", data.draw(st.sampled_from(_READS)).format(id=data.draw(_IDS))
            who = data.draw(
                st.one_of(
                    st.sampled_from(["admin-token", "reader-token", "agent-token", "approver-token"]).map(
                        lambda t: [(b"authorization", f"Bearer {t}".encode())]
                    ),
                    _TOKENS,
                )
            )
            known = (
                bool(who)
                and who[0][1].startswith(b"Bearer ")
                and who[0][1][7:].decode("latin-1")
                in {
                    "admin-token",
                    "reader-token",
                    "agent-token",
                    "approver-token",
                }
            )
            headers = [*who, (b"content-type", data.draw(_CONTENT_TYPES))]
            runs = {s.run_id for s in rt.trace.runs(limit=1000)}
            answer = client.request(
                method, url, headers=headers, content=body.encode("utf-8", "surrogatepass")
            )
            assert answer.status_code < 500, (url, body[:120], answer.text)
            if url == "/api/health":
                continue
            if not known:  # no known token: refused before anything else, where some route serves
                assert answer.status_code in (401, 429) or not _served(app, answer), (url, answer.text)
            if answer.status_code >= 400:
                assert _category(answer) in CATEGORIES, answer.text
                assert {s.run_id for s in rt.trace.runs(limit=1000)} == runs  # no run was started
                assert rt.approvals.get(request.id).status == "pending"  # type: ignore[union-attr]
                assert rt.ledger.get(entry.key).state == "unknown_commit"  # type: ignore[union-attr]
            elif method == "POST" and kind != "runs":
                return  # decided or resolved: the next decisions would only be conflicts
