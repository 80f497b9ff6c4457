"""A server that changes a tool without announcing it (no ``notifications/tools/list_changed``): a write
approved against the old definition is not sent under the new one once the listing it was checked
against is older than ``relist_writes_after_s``; the client lists again first, and refuses the call,
unsent. Reads never wait for a listing. The server is the real SDK server of
``test_w16_mcp_changes_under_approval.py``, in memory; the age of a listing is read from a clock the
test moves."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from mcp import Client
from mcp.client.session import MessageHandlerFnT

from actionspace import Runtime
from actionspace.adapters._mcp_connection import Connection
from actionspace.adapters.mcp_client import McpToolset, StdioServer
from actionspace.errors import ConfigurationError
from tests.adapters.test_w16_mcp_changes_under_approval import CHANGES, Changing

_CALL = {"name": "note", "arguments": {"text": "hello"}}


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _toolset(server: Changing, rt: Runtime, clock: Clock, **options: Any) -> McpToolset:
    """``server`` registered in ``rt``, the age of its listings measured on ``clock``."""
    toolset = McpToolset(StdioServer(sys.executable, name="changing", mode="legacy", **options))

    async def open_client(stack: AsyncExitStack, handler: MessageHandlerFnT) -> Client:
        client = Client(server.server, mode="legacy", message_handler=handler, cache=None)
        return await stack.enter_async_context(client)

    toolset.connection = Connection("changing", open_client, toolset._on_listing)
    toolset.connection.clock = clock
    toolset.register(rt)
    return toolset


def _approved(rt: Runtime) -> str:
    run = rt.new_run()
    held = rt.call(_CALL, run_id=run)
    assert held.error is not None and held.error.category == "needs_approval", held.error
    rt.approvals.approve(str(held.error.details["request_id"]), by="alice")
    return run


@pytest.mark.parametrize("how", sorted(CHANGES))
def test_a_write_approved_before_an_unannounced_change_is_refused_unsent_once_its_listing_is_old(
    rt: Runtime, how: str
) -> None:
    server, clock = Changing(), Clock()
    toolset = _toolset(server, rt, clock)  # not allowlisted: the call is external and needs a person
    try:
        run = _approved(rt)
        changed = CHANGES[how](server.tools["note"])  # changed, and not announced
        if changed is None:
            del server.tools["note"]
        else:
            server.tools["note"] = changed
        clock.now += 61.0  # the default: a write is sent under a listing at most 60 s old
        obs = rt.call(_CALL, run_id=run)
        assert server.calls == [], "sent under a definition the approver did not see"
        assert obs.error is not None and obs.error.category == "version_mismatch", obs.error
        assert "nothing was sent" in obs.error.message and server.listings == 2
    finally:
        toolset.close()


def test_a_write_under_a_young_listing_is_sent_without_listing_again(rt: Runtime) -> None:
    server, clock = Changing(), Clock()
    toolset = _toolset(server, rt, clock, relist_writes_after_s=30.0)
    try:
        run = _approved(rt)
        clock.now += 29.5
        obs = rt.call(_CALL, run_id=run)
        assert obs.status == "ok" and server.calls == ["note"] and server.listings == 1, obs.error
        clock.now += 0.5  # at the bound: listed again (unchanged), then sent
        assert rt.call(_CALL, run_id=_approved(rt)).status == "ok"
        assert server.calls == ["note", "note"] and server.listings == 2
        clock.now += 10.0  # that listing is young again
        assert rt.call(_CALL, run_id=_approved(rt)).status == "ok" and server.listings == 2
    finally:
        toolset.close()


@pytest.mark.parametrize("relist", [None, 0.0])
def test_reads_never_wait_for_a_listing_and_writes_follow_the_setting(
    rt: Runtime, relist: float | None
) -> None:
    server, clock = Changing(), Clock()
    toolset = _toolset(server, rt, clock, relist_writes_after_s=relist, allowlisted=True)
    try:  # allowlisted: note (read-only) is a read, other (no annotations) an external write
        clock.now += 10_000.0
        for _ in range(3):
            assert rt.call(_CALL).status == "ok"
        assert server.listings == 1
        write = {"name": "other", "arguments": {"text": "x"}}
        for _ in range(2):
            assert rt.call(write, run_id=_approved_of(rt, write)).status == "ok"
        assert server.listings == (1 if relist is None else 3)  # 0: before every write
    finally:
        toolset.close()


def _approved_of(rt: Runtime, call: dict[str, Any]) -> str:
    run = rt.new_run()
    held = rt.call(call, run_id=run)
    if held.error is not None and held.error.category == "needs_approval":
        rt.approvals.approve(str(held.error.details["request_id"]), by="alice")
    return run


def test_a_listing_before_a_write_that_fails_refuses_it_unsent_as_transient(rt: Runtime) -> None:
    server, clock = Changing(), Clock()
    toolset = _toolset(server, rt, clock)
    try:
        run = _approved(rt)
        server.fail_listing = True
        clock.now += 61.0
        obs = rt.call(_CALL, run_id=run)
        assert server.calls == []
        assert obs.error is not None and obs.error.category == "transient", obs.error  # not unknown_commit
        assert "nothing was sent" in obs.error.message
        server.fail_listing = False
        assert rt.call(_CALL, run_id=_approved(rt)).status == "ok" and server.calls == ["note"]
    finally:
        toolset.close()


@pytest.mark.parametrize("bad", [-1.0, True, "60", float("nan")])
def test_a_bad_relist_bound_is_refused_at_configuration(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="relist_writes_after_s"):
        McpToolset(StdioServer(sys.executable, name="x", relist_writes_after_s=bad))
