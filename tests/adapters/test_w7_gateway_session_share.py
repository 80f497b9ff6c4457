"""One principal's HTTP clients cannot take every session the gateway admits: each principal holds
a bounded number open, freed when one is ended or expires."""

from __future__ import annotations

import uuid
from collections.abc import MutableMapping
from typing import Any

import anyio

from actionspace.adapters._gateway_http import HttpGuard
from actionspace.policy.principal import Principal

_TOKENS = {"alice-token": Principal(id="alice"), "bob-token": Principal(id="bob")}


class FakeSdk:
    """Opens a session on a request without ``Mcp-Session-Id``; answers 404 for one it ended."""

    def __init__(self) -> None:
        self.open: set[str] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        extra: list[tuple[bytes, bytes]] = []
        status = 200
        if session is None:
            opened = uuid.uuid4().hex
            self.open.add(opened)
            extra.append((b"mcp-session-id", opened.encode()))
        elif session.decode() not in self.open:
            status = 404
        elif scope["method"] == "DELETE":
            self.open.discard(session.decode())
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b"{}"})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _request(
    guard: HttpGuard, token: str, session: str | None = None, method: str = "POST"
) -> tuple[int, str]:
    headers = [(b"authorization", f"Bearer {token}".encode())]
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    scope: dict[str, Any] = {"type": "http", "method": method, "path": "/mcp", "headers": headers}
    sent: list[dict[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    anyio.run(guard, scope, receive, send)
    start = sent[0]
    opened = dict(start.get("headers", [])).get(b"mcp-session-id", b"").decode()
    return int(start["status"]), opened


def _principal(token: str | None) -> Principal | None:
    return _TOKENS.get(token or "")


def _guard(sdk: FakeSdk, clock: Clock) -> HttpGuard:
    return HttpGuard(
        sdk, _principal, host="127.0.0.1", max_sessions_per_principal=3, idle_timeout_s=60.0, clock=clock
    )


def test_a_principal_at_its_session_bound_is_refused_another_and_others_are_not() -> None:
    sdk, clock = FakeSdk(), Clock()
    guard = _guard(sdk, clock)
    held = [_request(guard, "alice-token") for _ in range(3)]
    assert all(status == 200 and session for status, session in held)
    assert _request(guard, "alice-token")[0] == 429
    assert len(sdk.open) == 3  # the refused request never reached the SDK
    assert _request(guard, "bob-token")[0] == 200
    # ending one frees its place
    assert _request(guard, "alice-token", held[0][1], "DELETE")[0] == 200
    status, fourth = _request(guard, "alice-token")
    assert status == 200 and fourth


def test_an_expired_session_frees_its_place_and_one_in_use_does_not_expire() -> None:
    sdk, clock = FakeSdk(), Clock()
    guard = _guard(sdk, clock)
    sessions = [_request(guard, "alice-token")[1] for _ in range(3)]
    clock.now += 30
    assert _request(guard, "alice-token", sessions[0])[0] == 200  # used: its idle time starts again
    clock.now += 45  # the other two have been idle for 75 s, longer than the 60 s timeout
    assert _request(guard, "alice-token")[0] == 200
    assert _request(guard, "alice-token")[0] == 200
    assert _request(guard, "alice-token")[0] == 429


def test_a_session_the_sdk_no_longer_knows_frees_its_place() -> None:
    sdk, clock = FakeSdk(), Clock()
    guard = _guard(sdk, clock)
    sessions = [_request(guard, "alice-token")[1] for _ in range(3)]
    sdk.open.discard(sessions[1])  # ended by the SDK (idle timeout, crash)
    assert _request(guard, "alice-token", sessions[1])[0] == 404
    assert _request(guard, "alice-token")[0] == 200
