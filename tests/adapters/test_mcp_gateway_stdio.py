"""``actionspace gateway --config FILE`` spawned over stdio, driven by the official MCP client."""

from __future__ import annotations

from pathlib import Path

import anyio

from actionspace import Runtime
from tests.adapters.gateway_sample_tools import count
from tests.adapters.gateway_support import (
    BOB_TOKEN,
    error_of,
    stdio_session,
    store_url,
    text_of,
    write_config,
)


def test_stdio_gateway_lists_each_principal_only_the_tools_it_may_call(tmp_path: Path) -> None:
    config = write_config(tmp_path)

    async def names(token: str | None) -> set[str]:
        async with stdio_session(config, token=token) as session:
            return {t.name for t in (await session.list_tools()).tools}

    assert anyio.run(names, None) == {"lookup_customer", "create_ticket", "send_refund"}  # stdio_principal
    assert anyio.run(names, BOB_TOKEN) == {"lookup_customer"}


def test_stdio_gateway_answers_valid_calls_and_rejects_invalid_ones_with_field_errors(tmp_path: Path) -> None:
    config = write_config(tmp_path)

    async def go() -> None:
        async with stdio_session(config) as session:
            ok = await session.call_tool("lookup_customer", {"customer_id": "c11"})
            assert ok.is_error is False
            assert ok.structured_content is not None
            assert ok.structured_content["data"]["name"] == "Customer 11"
            bad = await session.call_tool("create_ticket", {"customer_id": "c11"})
            error = error_of(bad)
            assert error["category"] == "invalid_arguments"
            assert error["recovery"] == ["change_arguments"]
            assert [f["path"] for f in error["field_errors"]] == ["/title"]
            assert "invalid_arguments" in text_of(bad)

    anyio.run(go)
    assert count("tickets", str(tmp_path / "desk.db")) == 0


def test_stdio_gateway_runs_an_approved_refund_once_and_replays_repeats_from_the_ledger(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    desk = str(tmp_path / "desk.db")
    args = {"customer_id": "c4", "cents": 990}

    async def go() -> None:
        async with stdio_session(config) as session:
            held = await session.call_tool("send_refund", args)
            error = error_of(held)
            assert error["category"] == "needs_approval"
            request_id = error["details"]["request_id"]
            assert count("refunds", desk) == 0
            # A person approves from another process sharing the gateway's store.
            with Runtime(store_url(tmp_path), recover_on_start=False) as supervisor:
                pending = [r.id for r in supervisor.approvals.list()]
                assert pending == [request_id]
                supervisor.approvals.approve(request_id, by="supervisor", reason="customer called")
            done = await session.call_tool("send_refund", args)
            assert done.is_error is False, text_of(done)
            assert count("refunds", desk) == 1
            for _ in range(2):
                again = await session.call_tool("send_refund", args)
                assert again.structured_content is not None
                assert again.structured_content["diagnostics"]["replayed"] is True
            ticket = {"customer_id": "c4", "title": "refund issued"}
            first = await session.call_tool("create_ticket", ticket)
            second = await session.call_tool("create_ticket", ticket)
            assert first.structured_content is not None and second.structured_content is not None
            assert second.structured_content["data"] == first.structured_content["data"]

    anyio.run(go)
    assert count("refunds", desk) == 1
    assert count("tickets", desk) == 1
