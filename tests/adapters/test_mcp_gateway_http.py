"""``actionspace gateway --transport http`` in a subprocess, driven by the official MCP client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from actionspace import Runtime
from tests.adapters.gateway_sample_tools import count
from tests.adapters.gateway_support import (
    ALICE_TOKEN,
    BOB_TOKEN,
    error_of,
    http_gateway,
    http_session,
    store_url,
    write_config,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("gateway-http")
    with http_gateway(write_config(folder)) as url:
        yield url, folder


def test_http_gateway_turns_away_requests_without_a_known_bearer_token(served: tuple[str, Path]) -> None:
    url, _ = served
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

    async def post(headers: dict[str, str]) -> int:
        async with httpx2.AsyncClient(timeout=30) as http:
            return (await http.post(url, json=ping, headers=headers)).status_code

    assert anyio.run(post, {}) == 401
    assert anyio.run(post, {"Authorization": "Bearer not-a-configured-token-at-all"}) == 401


def test_http_gateway_lists_tools_by_the_principal_the_token_names(served: tuple[str, Path]) -> None:
    url, _ = served

    async def names(token: str) -> set[str]:
        async with http_session(url, token) as session:
            return {t.name for t in (await session.list_tools()).tools}

    assert anyio.run(names, ALICE_TOKEN) == {"lookup_customer", "create_ticket", "send_refund"}
    assert anyio.run(names, BOB_TOKEN) == {"lookup_customer"}


def test_http_gateway_answers_a_valid_call_and_rejects_an_invalid_one(served: tuple[str, Path]) -> None:
    url, _ = served

    async def go() -> None:
        async with http_session(url, BOB_TOKEN) as session:
            ok = await session.call_tool("lookup_customer", {"customer_id": "c21"})
            assert ok.is_error is False
            assert ok.structured_content is not None
            assert ok.structured_content["data"]["customer_id"] == "c21"
            bad = await session.call_tool("lookup_customer", {"customer_id": 21})
            error = error_of(bad)
            assert error["category"] == "invalid_arguments"
            assert [f["path"] for f in error["field_errors"]] == ["/customer_id"]
            denied = await session.call_tool("create_ticket", {"customer_id": "c21", "title": "nope"})
            assert error_of(denied)["category"] == "unknown_tool"

    anyio.run(go)


def test_http_gateway_holds_a_refund_until_approved_then_runs_it_once(served: tuple[str, Path]) -> None:
    url, folder = served
    desk = str(folder / "desk.db")
    args = {"customer_id": "c31", "cents": 4200}

    async def go() -> None:
        async with http_session(url, ALICE_TOKEN) as session:
            request_id = error_of(await session.call_tool("send_refund", args))["details"]["request_id"]
            before = count("refunds", desk)
            with Runtime(store_url(folder), recover_on_start=False) as supervisor:
                supervisor.approvals.approve(request_id, by="supervisor")
            done = await session.call_tool("send_refund", args)
            assert done.is_error is False
            again = await session.call_tool("send_refund", args)
            assert again.structured_content is not None
            assert again.structured_content["diagnostics"]["replayed"] is True
            assert count("refunds", desk) == before + 1

    anyio.run(go)


def test_http_gateway_replays_a_repeated_write_within_a_session_but_not_across_sessions(
    served: tuple[str, Path],
) -> None:
    url, folder = served
    desk = str(folder / "desk.db")
    ticket = {"customer_id": "c41", "title": "same words twice"}

    async def session_writes_twice() -> None:
        async with http_session(url, ALICE_TOKEN) as session:
            first = await session.call_tool("create_ticket", ticket)
            second = await session.call_tool("create_ticket", ticket)
            assert first.structured_content is not None and second.structured_content is not None
            assert second.structured_content["data"] == first.structured_content["data"]

    before = count("tickets", desk)
    anyio.run(session_writes_twice)
    assert count("tickets", desk) == before + 1
    anyio.run(session_writes_twice)
    assert count("tickets", desk) == before + 2
