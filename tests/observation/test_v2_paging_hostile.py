"""Aggregation over a paged source that loops or never ends: bounded, never counted twice."""

from __future__ import annotations

from actionspace import Runtime
from actionspace.execution.result import ToolResult
from actionspace.observation.aggregate import Count, aggregate
from actionspace.observation.pagination import page


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    def looping(cursor: str | None = None) -> ToolResult:
        """Two pages that point back at each other forever."""
        nxt = "b" if cursor in (None, "a") else "a"
        return page([{"page": cursor}] * 5, cursor=nxt, after=cursor)

    @rt.tool(effect="read")
    def endless(cursor: str | None = None) -> ToolResult:
        """Always another page."""
        n = int(cursor or "0")
        return page([{"n": n}], cursor=str(n + 1), after=cursor)

    return rt


def test_a_cursor_that_comes_back_ends_the_walk_without_counting_a_page_twice() -> None:
    rt = _runtime()
    out = aggregate(rt, {"name": "looping", "arguments": {}}, reducer=Count(), max_pages=50, max_items=10_000)
    assert out.complete is False
    assert out.diagnostics["stopped_by"] == "cursor_repeated"
    assert out.data["pages"] == 3  # first page, "b", "a"; "b" again is not read
    assert out.data["count"] == 15


def test_an_endless_source_stops_at_max_pages() -> None:
    rt = _runtime()
    out = aggregate(rt, {"name": "endless", "arguments": {}}, reducer=Count(), max_pages=7, max_items=10_000)
    assert out.complete is False and out.diagnostics["stopped_by"] == "max_pages"
    assert out.data["pages"] == 7 and out.data["count"] == 7 and out.cursor == "7"
