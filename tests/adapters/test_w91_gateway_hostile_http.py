"""A hostile client on the gateway's HTTP endpoint, in process: every refusal is a typed 4xx naming
a category of the error taxonomy, none is a 500, none writes, and none ends someone's session.

Refusals answered by the SDK or its router (a wrong Content-Type, an ``Accept`` without event
streams, a path the gateway does not serve) were plain text or JSON-RPC errors without a category;
and a request naming a session on a path the gateway does not serve was answered 404 by the
router, which the guard took for the session having expired: it forgot who owned the session (its
owner could no longer use it) and gave back the principal's share of open sessions.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.adapters._gateway_http import HttpGuard
from actionspace.adapters.mcp_gateway import Gateway
from actionspace.errors import CATEGORIES
from tests.adapters.gateway_sample_tools import DB_ENV
from tests.adapters.gateway_support import ALICE_TOKEN, BOB_TOKEN, write_config

_ACCEPT = "application/json, text/event-stream"
_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
_LIST = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'


def _headers(token: str = ALICE_TOKEN, **extra: str) -> dict[str, str]:
    return {
        "authorization": f"Bearer {token}",
        "accept": _ACCEPT,
        "content-type": "application/json",
        **extra,
    }


@asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    """``app`` between its lifespan's startup and shutdown (no socket needed)."""
    to_app, app_reads = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_says, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)

    async def send(message: dict[str, Any]) -> None:
        await app_says.send(message)

    async with anyio.create_task_group() as group:
        group.start_soon(
            app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, app_reads.receive, send
        )
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            yield
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            with anyio.fail_after(30):
                assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


Client = Callable[[httpx.AsyncClient, Gateway], Awaitable[None]]


def _with_gateway(folder: Path, monkeypatch: pytest.MonkeyPatch, go: Client) -> None:
    monkeypatch.setenv(DB_ENV, str(folder / "desk.db"))
    gateway = Gateway.from_file(write_config(folder), runtime=Runtime("memory://", recover_on_start=False))

    async def run() -> None:
        app = gateway.http_app()
        async with _lifespan(app):
            transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 4000))
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
                await go(client, gateway)

    try:
        anyio.run(run)
    finally:
        gateway.runtime.close()


async def _open(client: httpx.AsyncClient, token: str = ALICE_TOKEN) -> str:
    opened = await client.post("/mcp", headers=_headers(token), json=_INIT)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    notice = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    done = await client.post("/mcp", headers=_headers(token, **{"mcp-session-id": session}), content=notice)
    assert done.status_code == 202
    return session


def _category(answer: httpx.Response) -> str | None:
    """The taxonomy category a refusal names: in a JSON-RPC error's ``data``, or beside its error."""
    assert answer.headers.get("content-type", "").startswith("application/json"), answer.text
    body = json.loads(answer.content)
    error = body.get("error")
    if isinstance(error, dict):
        data = error.get("data")
        return data.get("category") if isinstance(data, dict) else None
    category = body.get("category")
    return category if isinstance(category, str) else None


def _typed(answer: httpx.Response) -> None:
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert _category(answer) in CATEGORIES, answer.text


# ---------------------------------------------------------------- the session on another path


def test_a_request_naming_a_session_on_another_path_leaves_the_session_to_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def go(client: httpx.AsyncClient, _gateway: Gateway) -> None:
        session = await _open(client)
        mine = _headers(**{"mcp-session-id": session})
        for path in ("/mcp/..", "/nope", "/mcp/%00", "/" + "x" * 5000):
            stray = await client.post(path, headers=mine, content=_LIST)
            assert stray.status_code == 404, stray.text
            _typed(stray)
        listed = await client.post("/mcp", headers=mine, content=_LIST)
        assert listed.status_code == 200, listed.text
        assert '"tools"' in listed.text

    _with_gateway(tmp_path, monkeypatch, go)


def test_a_principal_cannot_free_its_share_of_sessions_by_asking_another_path() -> None:
    """Behind a guard holding one session per principal, a 404 off the endpoint is no session's end."""
    opened: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] != "/mcp":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"Not Found"})
            return
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        if session is None:
            session = f"s{len(opened)}".encode()
            opened.append(session.decode())
        start = {"type": "http.response.start", "status": 200, "headers": [(b"mcp-session-id", session)]}
        await send(start)
        await send({"type": "http.response.body", "body": b"{}"})

    guard = HttpGuard(
        inner,
        lambda token: Principal(id="alice") if token == "t" else None,
        host="127.0.0.1",
        max_sessions_per_principal=1,
    )

    async def go() -> list[int]:
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            auth = {"authorization": "Bearer t", "content-type": "application/json"}
            first = await client.get("/mcp", headers=auth)
            stray = await client.get(
                "/elsewhere", headers={**auth, "mcp-session-id": first.headers["mcp-session-id"]}
            )
            second = await client.get("/mcp", headers=auth)
            again = await client.get(
                "/mcp", headers={**auth, "mcp-session-id": first.headers["mcp-session-id"]}
            )
            return [first.status_code, stray.status_code, second.status_code, again.status_code]

    assert anyio.run(go) == [200, 404, 429, 200]
    assert opened == ["s0"]


# ---------------------------------------------------------------- refusals the SDK answered


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"content-type": "text/plain"}, 400),
        ({"content-type": ""}, 400),
        ({"content-type": "application/x-www-form-urlencoded"}, 400),
        ({"accept": "text/html"}, 406),
        ({"accept": ""}, 406),
        ({"authorization": ""}, 401),
        ({"authorization": "Basic YWxpY2U6YWxpY2U="}, 401),
        ({"authorization": f"Bearer {ALICE_TOKEN}x"}, 401),
        ({"origin": "http://attacker.example"}, 403),
        ({"mcp-session-id": "../" + "x" * 3000}, 404),
    ],
)
def test_each_refusal_of_the_endpoint_is_json_naming_its_category(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, str], status: int
) -> None:
    async def go(client: httpx.AsyncClient, gateway: Gateway) -> None:
        answer = await client.post("/mcp", headers={**_headers(), **change}, content=_LIST)
        assert answer.status_code == status, answer.text
        _typed(answer)

    _with_gateway(tmp_path, monkeypatch, go)


# ---------------------------------------------------------------- hostile requests, generated

_BODIES = st.sampled_from(
    [
        b"",
        b"{",
        b"null",
        b"[]",
        b"1e999",
        b"NaN",
        b"[" * 3000 + b"]" * 3000,
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"\\ud800","arguments":{}}}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_ticket","arguments":'
        b'{"title":"a\\u0000","title":"b"}}}',
        b'{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"create_ticket","arguments":{}}}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":' + b"[" * 2000 + b"]" * 2000 + b"}",
        b'{"jsonrpc":"1.0","id":4,"method":"tools/list"}',
        b"\xff\xfe{}",
        '{"jsonrpc":"2.0","id":5,"method":"tools/list"}'.encode("utf-16"),
        _LIST,
    ]
)
_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "content-type": st.sampled_from(
            ["text/plain", "", "application/json; charset=utf-16", "APPLICATION/JSON"]
        ),
        "accept": st.sampled_from(["", "text/html", "application/json", "*/*"]),
        "authorization": st.sampled_from(
            ["", "Bearer", f"Bearer {BOB_TOKEN}", "Bearer \u00e9", "Bearer " + "a" * 9000]
        ),
        "mcp-session-id": st.sampled_from(["..", "%00", "x" * 9000, "\u00ff"]),
        "origin": st.sampled_from(["null", "http://attacker.example", "http://127.0.0.1:8765"]),
    },
)
_PATHS = st.sampled_from(["/mcp", "/mcp", "/mcp/..", "/mcp/%00", "/../mcp", "/", "/mcp/" + "y" * 3000])
_METHODS = st.sampled_from(["POST", "POST", "POST", "DELETE", "PUT", "OPTIONS"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_hostile_request_is_answered_typed_never_500_and_writes_nothing_when_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("gateway")
    with pytest.MonkeyPatch.context() as monkeypatch:

        async def go(client: httpx.AsyncClient, gateway: Gateway) -> None:
            session = await _open(client)
            for _ in range(4):
                changes = data.draw(_CHANGES)
                headers = {**_headers(**{"mcp-session-id": session}), **changes}
                raw = {k.encode(): v.encode("latin-1") for k, v in headers.items()}  # not always ASCII
                method, path, body = data.draw(_METHODS), data.draw(_PATHS), data.draw(_BODIES)
                runs = gateway.runtime.trace.runs(limit=1000)
                before = [(r.run_id, len(gateway.runtime.trace.events(r.run_id))) for r in runs]
                answer = await client.request(method, path, headers=raw, content=body)
                assert answer.status_code < 500, answer.text
                if answer.status_code >= 400:
                    _typed(answer)
                    runs = gateway.runtime.trace.runs(limit=1000)
                    after = [(r.run_id, len(gateway.runtime.trace.events(r.run_id))) for r in runs]
                    assert after == before, (method, path, changes, body[:80])
                elif method == "DELETE":  # ended by its owner: open another
                    session = await _open(client)
            listed = await client.post("/mcp", headers=_headers(**{"mcp-session-id": session}), content=_LIST)
            assert listed.status_code == 200, listed.text  # the session is still its owner's

        _with_gateway(folder, monkeypatch, go)
