"""The gateway's governance, through the official MCP client connected in-process (fast paths).

The same behaviours are checked across real transports in ``test_mcp_gateway_stdio`` and
``test_mcp_gateway_http``; here every run is short, so the edge cases live here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import anyio
import mcp_types as types
import pytest
from mcp import Client

from actionspace import Runtime, ToolCall
from actionspace.adapters.mcp_gateway import NODE_META, RUN_META, Gateway
from actionspace.catalog.spec import ToolSpec
from tests.adapters.gateway_sample_tools import count
from tests.adapters.gateway_support import error_of, text_of


@asynccontextmanager
async def client(gateway: Gateway, principal: str = "alice") -> AsyncIterator[Client]:
    who = gateway.config.principal_by_id(principal)
    assert who is not None
    async with Client(gateway.server(lambda ctx: who), cache=None) as c:
        yield c


def _meta(values: dict[str, str]) -> types.RequestParamsMeta:
    return cast(types.RequestParamsMeta, values)


def _desk(gateway: Gateway, table: str, tmp_path: Path) -> int:
    return count(table, str(tmp_path / "desk.db"))


def test_each_principal_is_listed_only_the_tools_it_holds_scopes_for(gateway: Gateway) -> None:
    async def names(principal: str) -> set[str]:
        async with client(gateway, principal) as c:
            return {t.name for t in (await c.list_tools()).tools}

    assert anyio.run(names, "alice") == {"lookup_customer", "create_ticket", "send_refund"}
    assert anyio.run(names, "bob") == {"lookup_customer"}


def test_listed_tools_carry_annotations_from_the_declared_effect(gateway: Gateway) -> None:
    async def listed() -> dict[str, types.Tool]:
        async with client(gateway) as c:
            return {t.name: t for t in (await c.list_tools()).tools}

    tools = anyio.run(listed)
    read, refund = tools["lookup_customer"], tools["send_refund"]
    assert read.annotations is not None and read.annotations.read_only_hint is True
    assert refund.annotations is not None and refund.annotations.open_world_hint is True
    assert refund.meta is not None and refund.meta["actionspace/requires_approval"] is True
    assert read.meta is not None and read.meta["actionspace/requires_approval"] is False


def test_a_tool_the_principal_was_not_offered_is_unknown_and_never_runs(
    gateway: Gateway, tmp_path: Path
) -> None:
    async def go() -> types.CallToolResult:
        async with client(gateway, "bob") as c:
            await c.list_tools()
            return await c.call_tool("create_ticket", {"customer_id": "c1", "title": "broken"})

    result = anyio.run(go)
    assert error_of(result)["category"] == "unknown_tool"
    assert _desk(gateway, "tickets", tmp_path) == 0


def test_calling_without_listing_first_still_applies_the_principals_scopes(gateway: Gateway) -> None:
    async def go() -> types.CallToolResult:
        async with client(gateway, "bob") as c:
            return await c.call_tool("purge_desk", {})

    assert error_of(anyio.run(go))["category"] == "unknown_tool"


def test_invalid_arguments_are_an_error_result_with_every_field_error(gateway: Gateway) -> None:
    async def go() -> types.CallToolResult:
        async with client(gateway) as c:
            return await c.call_tool("create_ticket", {"customer_id": "42", "title": "x"})

    result = anyio.run(go)
    error = error_of(result)
    assert error["category"] == "invalid_arguments"
    assert error["recovery"] == ["change_arguments"]
    assert {f["path"] for f in error["field_errors"]} == {"/customer_id", "/title"}
    assert "invalid_arguments" in text_of(result) and "/title" in text_of(result)


def test_a_valid_read_returns_its_data_as_text_and_the_envelope_as_structured_content(
    gateway: Gateway,
) -> None:
    async def go() -> types.CallToolResult:
        async with client(gateway) as c:
            return await c.call_tool("lookup_customer", {"customer_id": "c7"})

    result = anyio.run(go)
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["data"]["name"] == "Customer 7"
    assert result.structured_content["status"] == "ok"
    assert '"Customer 7"' in text_of(result)


def test_the_same_write_repeated_in_a_session_is_replayed_not_sent_again(
    gateway: Gateway, tmp_path: Path
) -> None:
    async def go() -> list[types.CallToolResult]:
        async with client(gateway) as c:
            args = {"customer_id": "c1", "title": "printer on fire"}
            return [await c.call_tool("create_ticket", args) for _ in range(3)]

    first, *again = anyio.run(go)
    assert _desk(gateway, "tickets", tmp_path) == 1
    assert first.structured_content is not None
    for result in again:
        assert result.structured_content is not None
        assert result.structured_content["data"] == first.structured_content["data"]
        assert result.structured_content["diagnostics"]["replayed"] is True


def test_distinct_node_ids_in_meta_make_identical_writes_two_actions(
    gateway: Gateway, tmp_path: Path
) -> None:
    async def go() -> None:
        async with client(gateway) as c:
            args = {"customer_id": "c1", "title": "two of these"}
            for node in ("first", "second", "second"):
                result = await c.call_tool("create_ticket", args, meta=_meta({NODE_META: node}))
                assert result.is_error is False

    anyio.run(go)
    assert _desk(gateway, "tickets", tmp_path) == 2


def test_a_held_external_call_runs_exactly_once_after_approval(gateway: Gateway, tmp_path: Path) -> None:
    args = {"customer_id": "c3", "cents": 1250}

    async def go() -> None:
        async with client(gateway) as c:
            held = await c.call_tool("send_refund", args)
            error = error_of(held)
            assert error["category"] == "needs_approval"
            request_id = error["details"]["request_id"]
            assert request_id in text_of(held)
            assert error_of(await c.call_tool("send_refund", args))["category"] == "needs_approval"
            assert _desk(gateway, "refunds", tmp_path) == 0
            gateway.runtime.approvals.approve(request_id, by="test-supervisor")
            done = await c.call_tool("send_refund", args)
            assert done.is_error is False
            again = await c.call_tool("send_refund", args)
            assert again.structured_content is not None
            assert again.structured_content["diagnostics"]["replayed"] is True

    anyio.run(go)
    assert _desk(gateway, "refunds", tmp_path) == 1


def test_an_approval_does_not_cover_changed_arguments(gateway: Gateway, tmp_path: Path) -> None:
    async def go() -> None:
        async with client(gateway) as c:
            held = await c.call_tool("send_refund", {"customer_id": "c3", "cents": 100})
            gateway.runtime.approvals.approve(error_of(held)["details"]["request_id"], by="test")
            bigger = await c.call_tool("send_refund", {"customer_id": "c3", "cents": 100000})
            assert error_of(bigger)["category"] == "needs_approval"

    anyio.run(go)
    assert _desk(gateway, "refunds", tmp_path) == 0


def test_a_run_named_in_meta_survives_a_reconnect_so_the_retry_is_replayed(
    gateway: Gateway, tmp_path: Path
) -> None:
    meta = _meta({RUN_META: "ticket-job-9", NODE_META: "open"})
    args = {"customer_id": "c9", "title": "lost response"}

    async def once() -> types.CallToolResult:
        async with client(gateway) as c:
            return await c.call_tool("create_ticket", args, meta=meta)

    first, second = anyio.run(once), anyio.run(once)
    assert _desk(gateway, "tickets", tmp_path) == 1
    assert second.structured_content is not None and first.structured_content is not None
    assert second.structured_content["data"] == first.structured_content["data"]


def test_two_sessions_are_two_runs_and_do_not_replay_each_others_writes(
    tmp_path: Path, gateway: Gateway
) -> None:
    args = {"customer_id": "c5", "title": "per session"}

    async def once() -> None:
        async with client(gateway) as c:
            await c.call_tool("create_ticket", args)

    # In-process sessions share one "session" key, so give each its own run the way HTTP does.
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None
    first = gateway.run_for(alice, "session-a", None)
    second = gateway.run_for(alice, "session-b", None)
    assert first != second
    assert gateway.run_for(alice, "session-a", None) == first

    async def direct(run_id: str) -> None:
        await gateway.call_tool(alice, run_id, "create_ticket", args, None)

    anyio.run(direct, first)
    anyio.run(direct, second)
    anyio.run(direct, first)
    assert _desk(gateway, "tickets", tmp_path) == 2


def test_a_tool_that_crashes_reaches_the_client_as_a_typed_error_result(gateway: Gateway) -> None:
    def explode(customer_id: str) -> str:
        raise RuntimeError("disk on fire")

    gateway.runtime.register(
        ToolSpec(
            name="explode",
            effect="read",
            input_schema={"type": "object", "properties": {"customer_id": {"type": "string"}}},
            fn=explode,
        )
    )

    async def go() -> types.CallToolResult:
        async with client(gateway) as c:
            return await c.call_tool("explode", {"customer_id": "c1"})

    error = error_of(anyio.run(go))
    assert error["category"] == "unclassified"
    assert error["vendor_code"] == "RuntimeError"


def test_every_gateway_call_is_in_the_trace_of_its_run(gateway: Gateway) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None
    run_id = gateway.run_for(alice, "traced", None)
    anyio.run(gateway.call_tool, alice, run_id, "lookup_customer", {"customer_id": "c2"}, None)
    kinds = [e.kind for e in gateway.runtime.trace.events(run_id)]
    assert kinds[0] == "run_started"
    assert "candidates_offered" in kinds
    assert {"validated", "authorized", "observation"} <= set(kinds)
    assert gateway.runtime.call(ToolCall(name="lookup_customer", arguments={"customer_id": "c2"})).ok


def test_a_store_that_does_not_answer_before_a_call_is_transient_not_internal(
    gateway: Gateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's offer, made before a call the client did not list for, reads and saves the run
    in the store: a database locked past its busy timeout then is a reason to ask again (the
    ledger keeps a repeated write to one send), not a failure to report to the gateway's makers."""
    import sqlite3

    real = gateway.runtime.offer

    def locked(*args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("database is locked")

    async def calls() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with client(gateway) as c:
            monkeypatch.setattr(gateway.runtime, "offer", locked)
            refused = await c.call_tool("create_ticket", {"customer_id": "c1", "title": "broken"})
            monkeypatch.setattr(gateway.runtime, "offer", real)
            again = await c.call_tool("create_ticket", {"customer_id": "c1", "title": "broken"})
            return refused, again

    refused, again = anyio.run(calls)
    error = error_of(refused)
    assert error["category"] == "transient", error
    assert "did not answer" in error["message"]
    assert not again.is_error, text_of(again)
    assert _desk(gateway, "tickets", tmp_path) == 1


def test_runs_two_principals_name_alike_stay_apart_and_never_replay_each_others_writes() -> None:
    """``ops`` naming run ``admin_x`` and ``ops_admin`` naming run ``x`` are two runs: one
    principal never reads another's recorded results, nor blocks its actions."""
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="write")
    def note(text: str) -> int:
        """Store a note."""
        sent.append(text)
        return len(sent)

    gw = Gateway.from_toml(
        """
        [[principals]]
        id = "ops"
        token = "ops-token-0000000000"
        scopes = ["write:*"]

        [[principals]]
        id = "ops_admin"
        token = "admin-token-00000000"
        scopes = ["write:*"]
        """,
        runtime=rt,
    )
    ops, admin = gw.config.principal_by_id("ops"), gw.config.principal_by_id("ops_admin")
    assert ops is not None and admin is not None
    admins_meta = {RUN_META: "x", NODE_META: "n1"}
    ops_meta = {RUN_META: "admin_x", NODE_META: "n1"}
    admins_run, ops_run = gw.run_for(admin, "s1", admins_meta), gw.run_for(ops, "s2", ops_meta)
    assert admins_run != ops_run
    assert gw.run_for(admin, "s3", admins_meta) == admins_run  # still stable across sessions
    first = anyio.run(gw.call_tool, admin, admins_run, "note", {"text": "admin's"}, admins_meta)
    same = anyio.run(gw.call_tool, ops, ops_run, "note", {"text": "admin's"}, ops_meta)
    assert not first.is_error and not same.is_error
    assert same.structured_content is not None
    assert not same.structured_content.get("diagnostics", {}).get("replayed")
    assert sent == ["admin's", "admin's"]
    rt.close()


@pytest.mark.parametrize(
    ("first", "second"), [("job/1", "job_1"), ("ticket 7", "ticket_7"), ("n" * 100 + "1", "n" * 100 + "2")]
)
def test_two_node_ids_that_read_alike_are_two_actions(
    gateway: Gateway, tmp_path: Path, first: str, second: str
) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None
    run_id = gateway.run_for(alice, "nodes", None)
    args = {"customer_id": "c8", "title": "two identical tickets"}
    for node in (first, second):
        meta = {NODE_META: node}
        done = anyio.run(gateway.call_tool, alice, run_id, "create_ticket", args, meta)
        assert not done.is_error, text_of(done)
    assert _desk(gateway, "tickets", tmp_path) == 2
