"""Gateway sessions: each in-process (stdio) connection has its own run; a run continued after a
restart keeps the versions it was offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from actionspace import Runtime
from actionspace.adapters.mcp_gateway import RUN_META, Gateway
from actionspace.catalog.spec import ToolSpec
from tests.adapters.gateway_sample_tools import DB_ENV, count
from tests.adapters.gateway_support import error_of, run_of, store_url, write_config


def test_two_in_process_clients_of_one_gateway_are_served_in_two_runs(gateway: Gateway) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None

    async def one_client() -> tuple[str, str]:
        async with Client(gateway.server(lambda ctx: alice), cache=None) as c:
            first = await c.call_tool("lookup_customer", {"customer_id": "c1"})
            again = await c.call_tool("lookup_customer", {"customer_id": "c2"})
            return run_of(first), run_of(again)

    async def both() -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []

        async def take() -> None:
            found.append(await one_client())

        async with anyio.create_task_group() as group:
            group.start_soon(take)
            group.start_soon(take)
        found.append(await one_client())
        return found

    runs = anyio.run(both)
    assert all(a == b for a, b in runs)  # one connection stays in one run
    assert len({a for a, _ in runs}) == 3


def test_an_in_process_client_continues_its_own_run_by_naming_it(gateway: Gateway) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None

    async def go() -> tuple[str, str]:
        async with Client(gateway.server(lambda ctx: alice), cache=None) as c:
            first = run_of(await c.call_tool("lookup_customer", {"customer_id": "c1"}))
        async with Client(gateway.server(lambda ctx: alice), cache=None) as c:
            meta: Any = {RUN_META: first}
            again = await c.call_tool("lookup_customer", {"customer_id": "c1"}, meta=meta)
            return first, run_of(again)

    first, again = anyio.run(go)
    assert first == again


def _echo(schema: dict[str, Any], description: str = "echo") -> ToolSpec:
    def echo(**arguments: Any) -> dict[str, Any]:
        return dict(arguments)

    return ToolSpec(
        name="echo", version="1", description=description, input_schema=schema, effect="read", fn=echo
    )


_BEFORE = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
_AFTER = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


def _restarted(tmp_path: Path, schema: dict[str, Any]) -> Gateway:
    gw = Gateway.from_file(
        tmp_path / "gateway.toml", runtime=Runtime(store_url(tmp_path), recover_on_start=False)
    )
    gw.runtime.register(_echo(schema))
    return gw


def test_a_run_continued_after_a_restart_gets_version_mismatch_for_a_tool_changed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    write_config(tmp_path)
    before = _restarted(tmp_path, _BEFORE)
    alice = before.config.principal_by_id("alice")
    assert alice is not None
    try:
        run_id = run_of(anyio.run(before.serve_list, alice, "s1", None))
        ok = anyio.run(before.serve_call, alice, "s1", "echo", {"text": "hi"}, None)
        assert not ok.is_error, ok
    finally:
        before.runtime.close()
    after = _restarted(tmp_path, _AFTER)  # the upstream now lists another definition, as version 1
    try:
        stale = anyio.run(after.serve_call, alice, "s2", "echo", {"amount": 5}, {RUN_META: run_id})
        assert run_of(stale) == run_id
        error = error_of(stale)
        assert error["category"] == "version_mismatch", error
        assert error["details"]["current"]["input_schema"]["required"] == ["amount"]
        # as within one gateway lifetime: the mismatch re-pins, the next call uses the new version
        fresh = anyio.run(after.serve_call, alice, "s2", "echo", {"amount": 5}, None)
        assert not fresh.is_error, fresh
    finally:
        after.runtime.close()


def test_a_run_continued_after_a_restart_calls_an_unchanged_tool_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    write_config(tmp_path)
    before = _restarted(tmp_path, _BEFORE)
    alice = before.config.principal_by_id("alice")
    assert alice is not None
    try:
        run_id = run_of(anyio.run(before.serve_list, alice, "s1", None))
    finally:
        before.runtime.close()
    after = _restarted(tmp_path, _BEFORE)
    try:
        again = anyio.run(after.serve_call, alice, "s2", "echo", {"text": "hi"}, {RUN_META: run_id})
        assert not again.is_error, again
        assert run_of(again) == run_id
    finally:
        after.runtime.close()


def test_identical_writes_of_two_in_process_clients_are_two_actions(gateway: Gateway, tmp_path: Path) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None
    args = {"customer_id": "c9", "title": "printer on fire"}

    async def one_client() -> None:
        async with Client(gateway.server(lambda ctx: alice), cache=None) as c:
            result = await c.call_tool("create_ticket", args)
            assert not result.is_error, result
            assert result.structured_content is not None
            assert not result.structured_content["diagnostics"].get("replayed")

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(one_client)

    anyio.run(many)
    assert count("tickets", str(tmp_path / "desk.db")) == 8


def test_a_closed_in_process_connection_is_no_longer_announced_to(gateway: Gateway) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None

    async def go() -> tuple[int, int]:
        async with Client(gateway.server(lambda ctx: alice), cache=None) as live:
            await live.list_tools()
            async with Client(gateway.server(lambda ctx: alice), cache=None) as gone:
                await gone.list_tools()
            told = await gateway.announce_tools_changed()
            return told, len(gateway._listeners)

    told, remembered = anyio.run(go)
    assert (told, remembered) == (1, 1)
    assert gateway._listeners == {}
