"""How many tools one MCP server's listing may bring is the server's ``max_tools`` option (default
1,000, the first ones in the order it lists them; no page past them is asked for). A server that
is known to list more (a gateway in front of many services) is given more; a typo is refused."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from actionspace import Runtime
from actionspace.adapters.mcp_client import HttpServer, McpToolset, StdioServer
from actionspace.errors import ConfigurationError

PROGRAM = str(Path(__file__).with_name("test_w13_notice_program.py"))


def listing(count: int, **options: Any) -> StdioServer:
    """A server of ``count`` tools (``noisy``, ``echo``, ``t0`` …), listed 500 to a page."""
    return StdioServer(
        sys.executable,
        args=(PROGRAM, "quiet", str(count)),
        name="w13-many",
        allowlisted=True,
        mode="legacy",
        connect_timeout_s=120.0,
        **options,
    )


def registered(server: StdioServer) -> list[str]:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        return list(rt.add_mcp_server(server).specs())
    finally:
        rt.close()


def test_the_first_1000_tools_are_taken_by_default_and_a_warning_says_so(caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="actionspace.mcp"):
        names = registered(listing(1_600))
    assert len(names) == 1_000 and names[:3] == ["noisy", "echo", "t0"] and names[-1] == "t997"
    assert any("only its first 1000" in r.getMessage() for r in caplog.records)


def test_a_server_given_max_tools_brings_that_many_in_listing_order() -> None:
    names = registered(listing(1_600, max_tools=1_200))
    assert len(names) == 1_200 and names[-1] == "t1197"


def test_max_tools_below_the_listing_takes_only_the_first_ones() -> None:
    assert registered(listing(40, max_tools=2)) == ["noisy", "echo"]


def test_a_listing_within_max_tools_is_taken_whole_without_a_warning(caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="actionspace.mcp"):
        names = registered(listing(1_600, max_tools=5_000))
    assert len(names) == 1_600
    assert not [r for r in caplog.records if "tools: only its first" in r.getMessage()]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10", None])
def test_max_tools_that_is_not_a_positive_int_is_refused_before_connecting(bad: Any) -> None:
    for server in (listing(2, max_tools=bad), HttpServer("http://127.0.0.1:9/mcp", max_tools=bad)):
        with pytest.raises(ConfigurationError, match="max_tools"):
            McpToolset(server)
