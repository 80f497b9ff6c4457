"""A server listing more tools than the bound: only its first ``MAX_TOOLS`` are taken, no further
page is asked for, and adding the server ends (each tool costs a schema compile and a catalog
entry: a hostile server's 100 pages of tens of thousands would keep registration busy for an hour)."""

from __future__ import annotations

import sys
from pathlib import Path

from actionspace import Runtime
from actionspace.adapters.mcp_client import StdioServer

MAX_TOOLS = 1000
"""The bound docs/mcp.md names."""
PROGRAM = str(Path(__file__).with_name("test_w12_mcp_blocks_program.py"))


def _server(notes: Path, tools: int, page: int = 2000) -> StdioServer:
    return StdioServer(
        sys.executable,
        args=(PROGRAM, "stdio"),
        name="w12",
        env={"W12_NOTES": str(notes), "W12_TOOLS": str(tools), "W12_PAGE": str(page)},
        allowlisted=True,
        connect_timeout_s=120.0,
    )


def test_a_server_listing_too_many_tools_has_only_its_first_ones_taken_and_no_page_more(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    with Runtime("memory://", recover_on_start=False) as rt:
        toolset = rt.add_mcp_server(_server(notes, 20_000))
        assert sorted(toolset.specs()) == sorted(f"t{i}" for i in range(MAX_TOOLS))
        assert len([s for s in rt.catalog.offerable() if s.owner == "mcp:w12"]) == MAX_TOOLS
        toolset.refresh()
        assert len(toolset.specs()) == MAX_TOOLS
    assert notes.read_text() == "page 0\npage 0\n"  # the first page held enough, twice


def test_a_server_within_the_bound_has_every_page_read(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    with Runtime("memory://", recover_on_start=False) as rt:
        toolset = rt.add_mcp_server(_server(notes, MAX_TOOLS, page=400))
        assert len(toolset.specs()) == MAX_TOOLS
    assert notes.read_text() == "page 0\npage 400\npage 800\n"
