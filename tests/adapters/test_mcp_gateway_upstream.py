"""A real upstream MCP server (``mcp-server-time`` from PyPI) governed and re-served by the gateway."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import IncomingMessage

from actionspace import Runtime
from actionspace.adapters._gateway_config import UpstreamConfig, load_config
from actionspace.adapters.mcp_gateway import Gateway
from tests.adapters.gateway_sample_tools import DB_ENV
from tests.adapters.gateway_support import BOB_TOKEN, error_of, stdio_session, write_config

pytest.importorskip("mcp_server_time")


def test_an_allowlisted_upstream_servers_tools_are_served_validated_and_proxied(tmp_path: Path) -> None:
    config = write_config(tmp_path, upstream_time=True)

    async def go() -> None:
        async with stdio_session(config, token=BOB_TOKEN) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"time_get_current_time", "time_convert_time", "lookup_customer"} <= names
            ok = await session.call_tool("time_get_current_time", {"timezone": "Europe/Paris"})
            assert ok.is_error is False
            assert ok.structured_content is not None
            assert "Europe/Paris" in str(ok.structured_content["data"])
            assert ok.structured_content["provenance"]["trust"] == "trusted"
            bad = await session.call_tool("time_get_current_time", {})
            error = error_of(bad)
            assert error["category"] == "invalid_arguments"
            assert any("timezone" in f["message"] or f["path"] == "/timezone" for f in error["field_errors"])
            upstream_error = await session.call_tool("time_get_current_time", {"timezone": "Mars/Olympus"})
            assert upstream_error.is_error is True

    anyio.run(go)


def test_an_untrusted_upstreams_tools_need_approval_even_when_they_claim_to_be_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    untrusted = UpstreamConfig(name="time", command=(sys.executable, "-m", "mcp_server_time"))
    config = replace(load_config(write_config(tmp_path)), upstreams=(untrusted,))
    gateway = Gateway(config, runtime=Runtime("memory://", recover_on_start=False))
    try:
        gateway.open_upstreams()
        alice = config.principal_by_id("alice")
        assert alice is not None

        async def go() -> None:
            async with Client(gateway.server(lambda ctx: alice), cache=None) as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                tool = listed["time_get_current_time"]
                assert tool.meta is not None and tool.meta["actionspace/requires_approval"] is True
                held = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                assert error_of(held)["category"] == "needs_approval"

        anyio.run(go)
    finally:
        gateway.close()
        gateway.runtime.close()


def test_a_changed_upstream_tool_list_is_announced_to_gateway_clients_with_new_versions(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, upstream_lab=True)
    changed = anyio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def go() -> None:
        async with stdio_session(config, message_handler=on_message) as session:
            before = {t.name: t for t in (await session.list_tools()).tools}
            assert before["lab_echo"].meta is not None
            assert before["lab_echo"].meta["actionspace/version"] == "1"
            evolved = await session.call_tool("lab_evolve", {})
            assert evolved.is_error is False
            with anyio.fail_after(60):
                await changed.wait()
            stale = await session.call_tool("lab_echo", {"text": "hi"})
            assert error_of(stale)["category"] == "version_mismatch"
            after = {t.name: t for t in (await session.list_tools()).tools}
            assert after["lab_echo"].meta is not None
            assert after["lab_echo"].meta["actionspace/version"] == "2"
            assert "suffix" in after["lab_echo"].input_schema["properties"]
            fresh = await session.call_tool("lab_echo", {"text": "hi", "suffix": "!"})
            assert fresh.structured_content is not None
            assert fresh.structured_content["data"] == {"result": "hi!"}

    anyio.run(go)
