"""An aggregation over a paged tool, registered as a tool the model can call."""

from __future__ import annotations

from typing import Any

from actionspace import Principal, Runtime
from actionspace.execution.result import ToolResult
from actionspace.observation.aggregate import Count, Sum
from actionspace.observation.aggregation_tool import aggregation_tool
from actionspace.observation.pagination import decode_cursor, encode_cursor, page

ROWS: list[dict[str, Any]] = [
    {"id": i, "amount": i % 7, "region": "eu" if i % 3 else "us"} for i in range(1, 251)
]


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["invoices:"])
    def list_invoices(region: str, cursor: str | None = None) -> ToolResult:
        """List one region's invoices, 20 per page."""
        rows = [r for r in ROWS if r["region"] == region]
        start = decode_cursor(cursor)["offset"] if cursor else 0
        more = start + 20 < len(rows)
        return page(
            rows[start : start + 20],
            cursor=encode_cursor({"offset": start + 20}) if more else None,
            total=len(rows),
            sort_key="id",
            after=cursor,
        )

    aggregation_tool(
        rt,
        name="invoice_stats",
        over="list_invoices",
        reducer=[Count(), Sum("amount")],
        max_pages=20,
        max_items=500,
    )
    return rt


def test_the_aggregation_tool_answers_with_the_figures_of_every_page() -> None:
    rt = _runtime()
    assert "cursor" not in rt.catalog.get("invoice_stats").input_schema["properties"]
    obs = rt.call({"name": "invoice_stats", "arguments": {"region": "eu"}})
    eu = [r for r in ROWS if r["region"] == "eu"]
    assert obs.ok and obs.complete
    assert obs.data["count"] == len(eu) and obs.data["sum_amount"] == sum(r["amount"] for r in eu)
    assert obs.data["pages"] == -(-len(eu) // 20)
    pages = [e for e in rt.trace.events(obs.data["pages_run"]) if e.kind == "observation"]
    assert len(pages) == obs.data["pages"]


def test_a_bound_makes_the_answer_incomplete_with_a_cursor() -> None:
    rt = _runtime()
    aggregation_tool(
        rt, name="first_pages", over="list_invoices", reducer=Count(), max_pages=2, max_items=500
    )
    obs = rt.call({"name": "first_pages", "arguments": {"region": "eu"}})
    assert obs.ok and obs.complete is False and obs.cursor is not None
    assert obs.data["count"] == 40


def test_the_aggregation_needs_the_scopes_of_the_paged_tool() -> None:
    rt = _runtime()
    outsider = Principal(id="guest", scopes=("read:invoice_stats",))
    obs = rt.call({"name": "invoice_stats", "arguments": {"region": "us"}}, principal=outsider)
    assert obs.error is not None and obs.error.category == "permission_denied"
