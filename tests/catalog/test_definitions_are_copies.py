"""The definitions a host is given (offers, renderings, descriptions) are its own to change: editing
one, however deep, never changes the registered tool, what other runs are offered, or its hash."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Runtime
from actionspace.discovery import PROVIDERS, render_tools


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="read", examples=({"room": "blue", "hours": 1, "tags": ["x"]},))
    def book(room: str, hours: int, tags: list[str]) -> dict[str, int]:
        """Book a room."""
        return {"hours": hours}

    return rt


def _vandalize(value: Any) -> None:
    """Change every nested object and array of ``value`` in place."""
    if isinstance(value, dict):
        for child in list(value.values()):
            _vandalize(child)
        value["vandalized"] = True
    elif isinstance(value, list):
        for child in value:
            _vandalize(child)
        value.append("vandalized")


def test_editing_an_offered_definition_changes_nothing_registered() -> None:
    rt = _runtime()
    spec = rt.catalog.get("book")
    before = (repr(spec.input_schema), spec.schema_hash)
    first = rt.offer(run_id=rt.new_run())
    _vandalize(first)
    assert (repr(spec.input_schema), spec.schema_hash) == before
    (again,) = rt.offer(run_id=rt.new_run())
    assert "vandalized" not in repr(again)
    assert rt.call({"name": "book", "arguments": {"room": "a", "hours": 1, "tags": []}}).status == "ok"


def test_editing_a_described_definition_changes_nothing_registered() -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(run_id=run)
    _vandalize(rt.describe("book", run_id=run))
    _vandalize(rt.describe("book"))
    assert "vandalized" not in repr(rt.describe("book", run_id=run))
    assert "vandalized" not in repr(rt.catalog.get("book").input_schema)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_editing_a_rendered_tool_changes_nothing_registered(provider: Any) -> None:
    rt = _runtime()
    spec = rt.catalog.get("book")
    _vandalize(render_tools([spec], provider))
    _vandalize(render_tools(rt.offer(run_id=rt.new_run()), provider))
    assert "vandalized" not in repr(render_tools([spec], provider))
    assert "vandalized" not in repr(rt.offer(run_id=rt.new_run()))
