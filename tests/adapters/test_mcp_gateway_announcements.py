"""Tool list changes are announced off the upstream connection's thread, coalesced, never lost."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import pytest

from actionspace import Runtime
from actionspace.adapters import mcp_gateway
from actionspace.adapters.mcp_gateway import Gateway

_CONFIG = """
[gateway]
name = "announce"
store = "memory://"

[[principals]]
id = "alice"
token = "alice-token-0123456789"
scopes = ["read:*"]
"""


class NeverReads:
    """A client session whose transport is never read: every send waits forever."""

    def __init__(self) -> None:
        self.attempts = 0

    async def send_tool_list_changed(self) -> None:
        self.attempts += 1
        await anyio.sleep_forever()


class Listens:
    """A client session that hears every announcement; ``gate`` (when set) holds each send."""

    def __init__(self) -> None:
        self.heard = 0
        self.gate: anyio.Event | None = None
        self.sending = anyio.Event()

    async def send_tool_list_changed(self) -> None:
        self.sending.set()
        if self.gate is not None:
            await self.gate.wait()
        self.heard += 1


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[None]:
    """The gateway's HTTP app between its lifespan's startup and shutdown (no socket needed)."""
    app: Any = gateway.http_app()
    to_app, app_reads = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_says, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)

    async def send(message: dict[str, Any]) -> None:
        await app_says.send(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    async with anyio.create_task_group() as group:
        group.start_soon(app, scope, app_reads.receive, send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            yield
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            with anyio.fail_after(30):
                assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


def _gateway() -> Gateway:
    return Gateway.from_toml(_CONFIG, runtime=Runtime("memory://", recover_on_start=False))


async def _on_upstream_thread(fn: Callable[[], None], deadline_s: float) -> None:
    """Run ``fn`` on another thread, as an upstream connection would; fail if it takes longer."""
    with anyio.fail_after(deadline_s):
        await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def _until(check: Callable[[], bool], deadline_s: float = 10.0) -> None:
    with anyio.fail_after(deadline_s):
        while not check():
            await anyio.sleep(0.01)


def test_an_upstream_change_returns_at_once_while_a_client_never_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_gateway, "_ANNOUNCE_TIMEOUT_S", 30.0)
    gateway = _gateway()
    stuck = [NeverReads() for _ in range(3)]
    healthy = Listens()

    async def go() -> None:
        async with serving(gateway):
            for n, session in enumerate(stuck):
                gateway._listeners[f"stuck{n}"] = session  # type: ignore[assignment]
            gateway._listeners["healthy"] = healthy  # type: ignore[assignment]
            await _on_upstream_thread(lambda: gateway._upstream_changed([], []), deadline_s=2.0)
            # the stuck sessions hold neither the upstream thread nor the healthy client
            await _until(lambda: healthy.heard == 1, deadline_s=5.0)
            assert all(s.attempts == 1 for s in stuck)

    try:
        anyio.run(go)
    finally:
        gateway.close()
        gateway.runtime.close()


def test_changes_faster_than_announcements_are_coalesced_and_none_is_lost() -> None:
    gateway = _gateway()
    client = Listens()

    async def go() -> None:
        async with serving(gateway):
            gateway._listeners["client"] = client  # type: ignore[assignment]
            client.gate = anyio.Event()
            await _on_upstream_thread(lambda: gateway._upstream_changed([], []), deadline_s=2.0)
            with anyio.fail_after(5):
                await client.sending.wait()  # the first round is under way, held by the client

            def storm() -> None:
                for _ in range(10_000):
                    gateway._upstream_changed([], [])

            await _on_upstream_thread(storm, deadline_s=10.0)
            client.gate.set()
            # one round for the first change, one more for every change it had not covered
            await _until(lambda: client.heard == 2)
            await anyio.sleep(0.2)
            assert client.heard == 2
            # a change after the rounds ended is announced again
            await _on_upstream_thread(lambda: gateway._upstream_changed([], []), deadline_s=2.0)
            await _until(lambda: client.heard == 3)

    try:
        anyio.run(go)
    finally:
        gateway.close()
        gateway.runtime.close()


def test_a_session_that_timed_out_is_forgotten_and_the_others_still_hear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_gateway, "_ANNOUNCE_TIMEOUT_S", 0.2)
    gateway = _gateway()
    stuck, healthy = NeverReads(), Listens()

    async def go() -> None:
        gateway._listeners["stuck"] = stuck  # type: ignore[assignment]
        gateway._listeners["healthy"] = healthy  # type: ignore[assignment]
        assert await gateway.announce_tools_changed() == 1
        assert healthy.heard == 1
        assert set(gateway._listeners) == {"healthy"}

    try:
        anyio.run(go)
    finally:
        gateway.close()
        gateway.runtime.close()


def test_a_change_after_the_gateway_stopped_serving_is_dropped_quietly() -> None:
    gateway = _gateway()
    client = Listens()

    async def go() -> None:
        async with serving(gateway):
            gateway._listeners["client"] = client  # type: ignore[assignment]

    try:
        anyio.run(go)
        done = threading.Event()

        def change() -> None:
            gateway._upstream_changed([], [])
            done.set()

        threading.Thread(target=change, daemon=True).start()
        assert done.wait(5.0)
        assert client.heard == 0
    finally:
        gateway.close()
        gateway.runtime.close()
