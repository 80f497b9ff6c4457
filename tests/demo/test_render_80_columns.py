"""The demo's timelines at 80 columns: every step's fields whole, stacked, nothing cut to an ellipsis."""

from __future__ import annotations

from rich.console import Console

from actionspace.demo.render import render_steps
from actionspace.demo.steps import PlanStep

STEPS = [
    PlanStep(
        index=1,
        plan="first",
        node="search-b",
        tool="search_documents",
        intent="search Pacific Loom",
        status="ok",
        category=None,
        detail="top hit pl-news-2025: news summary by Market Wire, FY2025 USD 47,000 M (3 hits)",
        next_move="feed its top hit to the comparison",
    ),
    PlanStep(
        index=2,
        plan="first",
        node="compare",
        tool="compare_revenue",
        intent="compare the two top hits",
        status="error",
        category="invalid_arguments",
        detail="the comparison cannot be accepted: pl-news-2025 is a news summary by Market Wire",
        next_move="read the official report the news summarised",
    ),
]


def _text(width: int) -> str:
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    console.print(render_steps("request", STEPS))
    return console.export_text()


def test_a_timeline_at_80_columns_keeps_every_field_whole() -> None:
    text = _text(80)
    assert "…" not in text
    flat = " ".join(text.split())
    for step in STEPS:
        for value in (step.tool, step.intent, step.next_move, step.category or "ok"):
            assert value in flat
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_wide_terminal_still_gets_the_columns() -> None:
    assert "what the observation says" in _text(160)
