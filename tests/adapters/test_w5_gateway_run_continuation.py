"""A client that reconnects continues its run: named by the id the gateway reported, owner only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest

from actionspace.adapters.mcp_gateway import NODE_META, RUN_META, Gateway
from tests.adapters.gateway_sample_tools import count
from tests.adapters.gateway_support import (
    ALICE_TOKEN,
    BOB_TOKEN,
    error_of,
    http_gateway,
    http_session,
    run_of,
    write_config,
)

_ARGS = {"customer_id": "c77", "title": "survives a reconnect"}


def _call(gw: Gateway, who: str, session: str, meta: dict[str, Any] | None) -> types.CallToolResult:
    principal = gw.config.principal_by_id(who)
    assert principal is not None
    return anyio.run(gw.serve_call, principal, session, "create_ticket", _ARGS, meta)


def test_every_result_names_the_run_it_was_served_in(gateway: Gateway) -> None:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None
    listed = anyio.run(gateway.serve_list, alice, "s1", None)
    called = _call(gateway, "alice", "s1", None)
    assert run_of(listed) == run_of(called) == gateway.run_for(alice, "s1", None)
    assert run_of(_call(gateway, "alice", "s2", None)) != run_of(called)


def test_a_new_session_naming_its_run_continues_it_and_a_repeated_write_is_replayed(
    gateway: Gateway, tmp_path: Path
) -> None:
    first = _call(gateway, "alice", "before", None)
    assert not first.is_error
    run_id = run_of(first)
    again = _call(gateway, "alice", "after-reconnect", {RUN_META: run_id})
    assert not again.is_error, again
    assert run_of(again) == run_id
    assert again.structured_content is not None
    assert again.structured_content["diagnostics"].get("replayed")
    assert count("tickets", str(tmp_path / "desk.db")) == 1
    # the session is bound to the run it named: later requests without _meta stay in it
    later = _call(gateway, "alice", "after-reconnect", None)
    assert run_of(later) == run_id


def test_another_principal_naming_the_run_is_refused_and_nothing_runs(
    gateway: Gateway, tmp_path: Path
) -> None:
    run_id = run_of(_call(gateway, "alice", "mine", {NODE_META: "n1"}))
    desk = str(tmp_path / "desk.db")
    bob = gateway.config.principal_by_id("bob")
    assert bob is not None
    stolen = anyio.run(
        gateway.serve_call, bob, "theirs", "lookup_customer", {"customer_id": "c1"}, {RUN_META: run_id}
    )
    refused = error_of(stolen)
    assert refused["category"] == "permission_denied"
    made_up = anyio.run(
        gateway.serve_call,
        bob,
        "theirs",
        "lookup_customer",
        {"customer_id": "c1"},
        {RUN_META: "mcp_" + "0" * 16},
    )
    # an unknown run and another's run are answered alike: no way to learn which runs exist
    assert error_of(made_up)["message"] == refused["message"].replace(run_id, "mcp_" + "0" * 16)
    assert count("tickets", desk) == 1
    # bob's own session was not moved into alice's run
    own = anyio.run(gateway.serve_call, bob, "theirs", "lookup_customer", {"customer_id": "c1"}, None)
    assert not own.is_error and run_of(own) != run_id


def test_listing_in_a_run_of_another_principal_is_refused(gateway: Gateway) -> None:
    from mcp.shared.exceptions import MCPError

    run_id = run_of(_call(gateway, "alice", "mine", None))
    bob = gateway.config.principal_by_id("bob")
    assert bob is not None
    with pytest.raises(MCPError, match="not a run of yours"):
        anyio.run(gateway.serve_list, bob, "theirs", {RUN_META: run_id})


@pytest.mark.parametrize("named", ["mcp_", "mcp_\x00", "mcp_\ud800", "mcp_" + "a" * 5000, "mcp_a b"])
def test_a_malformed_run_id_is_refused_as_a_typed_error(gateway: Gateway, named: str) -> None:
    result = _call(gateway, "alice", "s", {RUN_META: named})
    assert error_of(result)["category"] == "permission_denied"


def test_a_label_run_is_reported_by_its_full_id_and_that_id_continues_it(
    gateway: Gateway, tmp_path: Path
) -> None:
    first = _call(gateway, "alice", "a", {RUN_META: "nightly", NODE_META: "open"})
    run_id = run_of(first)
    assert run_id.startswith("mcp_alice_nightly_")
    assert run_of(_call(gateway, "alice", "b", {RUN_META: "nightly", NODE_META: "open"})) == run_id
    echoed = _call(gateway, "alice", "c", {RUN_META: run_id, NODE_META: "open"})
    assert run_of(echoed) == run_id
    assert count("tickets", str(tmp_path / "desk.db")) == 1


def test_over_http_a_reconnecting_client_continues_its_run_and_another_principal_cannot(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    meta_of = cast(Any, dict)

    async def go(url: str) -> None:
        async with http_session(url, ALICE_TOKEN) as session:
            first = await session.call_tool("create_ticket", _ARGS)
            assert not first.is_error
            run_id = run_of(first)
        async with http_session(url, ALICE_TOKEN) as session:
            again = await session.call_tool("create_ticket", _ARGS, meta=meta_of({RUN_META: run_id}))
            assert not again.is_error and run_of(again) == run_id
            assert again.structured_content is not None
            assert again.structured_content["diagnostics"].get("replayed")
            bound = await session.call_tool("create_ticket", _ARGS)
            assert run_of(bound) == run_id and not bound.is_error
        async with http_session(url, BOB_TOKEN) as session:
            stolen = await session.call_tool(
                "lookup_customer", {"customer_id": "c1"}, meta=meta_of({RUN_META: run_id})
            )
            assert error_of(stolen)["category"] == "permission_denied"

    with http_gateway(config) as url:
        anyio.run(go, url)
    assert count("tickets", str(tmp_path / "desk.db")) == 1
