"""A ``$template`` is the model's text: a short one naming a large result many times must not
become a string of hundreds of megabytes (2,000 references to a 16 KB result made 33 MB before;
the plan's own size does not bound it)."""

from __future__ import annotations

from typing import Any

from actionspace import Runtime

MAX_TEMPLATE_CHARS = 1_000_000  # actionspace.plan.refs.MAX_TEMPLATE_CHARS


def _runtime(said: list[int]) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="read")
    def page() -> str:
        """A large text."""
        return "x" * 10_000

    @rt.tool(effect="none")
    def say(text: str) -> int:
        """Say a text; answers its length."""
        said.append(len(text))
        return len(text)

    return rt


def _plan(refs: int) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "a", "tool": "page", "arguments": {}},
            {"id": "b", "tool": "say", "arguments": {"text": {"$template": "{a.data}" * refs}}},
        ]
    }


def test_a_template_expanding_past_its_bound_fails_its_node_before_the_tool() -> None:
    said: list[int] = []
    result = _runtime(said).run_plan(_plan(MAX_TEMPLATE_CHARS // 10_000 + 1))
    b = result.nodes["b"]
    assert b.error is not None and b.error.category == "invalid_arguments"
    assert "expands past" in b.error.message and len(b.error.message) < 300
    assert result.nodes["a"].status == "ok" and said == []


def test_a_template_within_its_bound_is_filled_whole() -> None:
    said: list[int] = []
    result = _runtime(said).run_plan(_plan(MAX_TEMPLATE_CHARS // 10_000))
    assert result.nodes["b"].status == "ok" and said == [MAX_TEMPLATE_CHARS]
