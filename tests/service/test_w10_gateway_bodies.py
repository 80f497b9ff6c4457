"""The HTTP gateway answers a body that is no JSON-RPC message (a batch of messages, a bare value,
an object without ``jsonrpc``) with a short typed 400 — the JSON-RPC error -32600, as its other
400s — never with the SDK's validation report, which echoes the input back and names the SDK's
models and pydantic's pages."""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

import anyio
import httpx2
import pytest

from tests.adapters.gateway_support import ALICE_TOKEN, http_gateway, http_session, write_config

HEADERS = {
    "Authorization": f"Bearer {ALICE_TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
SECRET = "customer-c77-card-4242"
"""A value in the refused body that must not come back."""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("gateway-bodies")
    with http_gateway(write_config(folder)) as endpoint:
        yield endpoint


def _post(url: str, body: str) -> tuple[int, dict[str, Any]]:
    async def go() -> tuple[int, dict[str, Any]]:
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.post(url, content=body.encode(), headers=HEADERS)
            return answer.status_code, answer.json()

    return anyio.run(go)


@pytest.mark.parametrize(
    "body",
    [
        json.dumps([PING, {**PING, "id": 2, "params": {"note": SECRET}}]),
        json.dumps([]),
        json.dumps([{"jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {"card": SECRET}}}]),
    ],
    ids=["two-requests", "empty", "notification"],
)
def test_a_batch_of_messages_is_a_short_typed_400(url: str, body: str) -> None:
    status, answer = _post(url, body)
    assert status == 400, answer
    error = answer["error"]
    assert error["code"] == -32600 and answer["id"] is None
    assert "batch" in error["message"] and len(error["message"]) < 200
    text = json.dumps(answer).lower()
    for leaked in (SECRET.lower(), "pydantic", "validation error", "input_value", "jsonrpcrequest"):
        assert leaked not in text, answer


@pytest.mark.parametrize(
    "body",
    [
        "5",
        json.dumps(SECRET),
        "null",
        json.dumps({"card": SECRET}),
        json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping", "params": {"card": SECRET}}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": 5, "params": {"card": SECRET}}),
    ],
)
def test_json_that_is_no_json_rpc_message_is_a_short_typed_400(url: str, body: str) -> None:
    status, answer = _post(url, body)
    assert status == 400, answer
    assert answer["error"]["code"] == -32600 and len(answer["error"]["message"]) < 200
    text = json.dumps(answer).lower()
    for leaked in (SECRET.lower(), "pydantic", "validation error", "input_value", "jsonrpcrequest"):
        assert leaked not in text, answer


def test_a_session_still_works_next_to_refused_bodies(url: str) -> None:
    assert _post(url, json.dumps([PING]))[0] == 400

    async def go() -> set[str]:
        async with http_session(url, ALICE_TOKEN) as session:
            await session.send_ping()
            return {t.name for t in (await session.list_tools()).tools}

    assert "lookup_customer" in anyio.run(go)


def _through_guard(status: int, chunks: list[bytes]) -> tuple[int, dict[bytes, bytes], bytes]:
    """What a client gets through the gateway's guard from an app answering ``status`` with the
    body ``chunks`` (each its own message)."""
    from actionspace.adapters._gateway_http import HttpGuard
    from actionspace.policy.principal import Principal

    async def app(scope: Any, receive: Any, send: Any) -> None:
        length = str(sum(len(c) for c in chunks)).encode()
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-length", length)]}
        )
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1})

    guard = HttpGuard(app, lambda token: Principal(id="alice") if token == "t" else None, host="127.0.0.1")
    headers = [(b"authorization", b"Bearer t")]
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    sent: list[dict[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": json.dumps(PING).encode(), "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    anyio.run(guard, scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return int(sent[0]["status"]), dict(sent[0]["headers"]), body


def _categorised(body: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(body)
    answer["error"]["data"] = {"category": "invalid_arguments"}
    return answer


def test_only_a_validation_report_is_replaced_and_its_length_follows() -> None:
    report = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "Validation error: x"}}
    )
    status, headers, body = _through_guard(400, [report.encode()])
    assert status == 400 and json.loads(body)["error"]["code"] == -32600
    assert int(headers[b"content-length"]) == len(body)
    other = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: EOF"}}
    )
    # any other 4xx body is passed on, naming its category (see test_w91_gateway_hostile_http.py)
    assert json.loads(_through_guard(400, [other.encode()])[2]) == _categorised(other)
    halves = [report.encode()[:10], report.encode()[10:]]  # a streamed body is not replaced
    assert json.loads(_through_guard(400, halves)[2]) == _categorised(report)
    assert _through_guard(200, [report.encode()])[2] == report.encode()
