"""A toolset made and closed without ever connecting (a configuration refused before the start, a
test's listing) leaves no descriptor behind: its connection's loop is closed with it."""

from __future__ import annotations

import gc
import os

from actionspace.adapters.mcp_client import McpToolset, StdioServer


def _open_descriptors() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def test_toolsets_closed_without_starting_leave_no_descriptors_open() -> None:
    McpToolset(StdioServer("warm", allowlisted=True)).close()  # imports and lazily made globals
    before = _open_descriptors()
    kept = [McpToolset(StdioServer(f"unused-{i}", allowlisted=True)) for i in range(20)]  # as catalogs do
    for toolset in kept:
        toolset.close()
        toolset.close()  # idempotent
    assert _open_descriptors() - before < 3  # 3 a toolset (the loop's epoll and self-pipe) before
