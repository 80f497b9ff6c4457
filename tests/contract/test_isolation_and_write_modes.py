"""Declared isolation, write modes and dedupe windows: validated, used by the plan check, shown
to the model."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ToolDefinitionError


def _rt() -> Runtime:
    rt = Runtime()

    @rt.tool(effect="write", writes=["log:{name}"], write_mode="append")
    def append_line(name: str, line: str) -> None:
        """Append a line to a log."""

    @rt.tool(effect="write", writes=["log:{name}"], write_mode="overwrite")
    def replace_log(name: str, text: str) -> None:
        """Replace a log."""

    @rt.tool(effect="read", reads=["log:{name}"], isolation="at_version")
    def read_version(name: str, version: int) -> str:
        """Read a log as it was at a version."""
        return ""

    @rt.tool(effect="read", reads=["log:{name}"], isolation="latest")
    def read_latest(name: str) -> str:
        """Read the current log."""
        return ""

    return rt


def _edges(rt: Runtime, nodes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    result = rt.run_plan({"nodes": nodes}, run_id=rt.new_run())
    assert result.status == "ok", result.error
    return [(a["from"], a["to"]) for a in result.added_edges]


def test_two_appends_to_one_log_commute_but_overwrites_are_ordered() -> None:
    rt = _rt()
    appends = [
        {"id": "a", "tool": "append_line", "arguments": {"name": "x", "line": "1"}},
        {"id": "b", "tool": "append_line", "arguments": {"name": "x", "line": "2"}},
    ]
    assert _edges(rt, appends) == []
    overwrites = [
        {"id": "a", "tool": "replace_log", "arguments": {"name": "x", "text": "1"}},
        {"id": "b", "tool": "append_line", "arguments": {"name": "x", "line": "2"}},
    ]
    assert _edges(rt, overwrites) == [("a", "b")]


def test_a_read_pinned_to_a_version_commutes_with_a_write_and_a_latest_read_does_not() -> None:
    rt = _rt()
    write = {"id": "w", "tool": "replace_log", "arguments": {"name": "x", "text": "new"}}
    pinned = {"id": "r", "tool": "read_version", "arguments": {"name": "x", "version": 3}}
    latest = {"id": "r", "tool": "read_latest", "arguments": {"name": "x"}}
    assert _edges(rt, [write, pinned]) == []
    assert _edges(rt, [write, latest]) == [("w", "r")]


def test_the_contract_is_rendered_in_the_description_the_model_reads() -> None:
    rt = Runtime()

    @rt.tool(effect="write", write_mode="conditional", idempotency="native", dedupe_window_s=86400)
    def put(key: str, value: str, idempotency_key: str) -> None:
        """Store a value."""

    s = rt.session(provider="openai_chat")
    (described,) = [t for t in s.tools() if t["function"]["name"] == "put"]
    text = described["function"]["description"]
    assert text.startswith("Store a value.")
    assert "only if the resource is still at the expected version" in text
    assert "86400s" in text
    definition = rt.describe("put")
    assert (definition["write_mode"], definition["dedupe_window_s"]) == ("conditional", 86400)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"effect": "read", "write_mode": "append"}, "write_mode is for write"),
        ({"effect": "write", "write_mode": "sideways"}, "write_mode must be one of"),
        ({"effect": "read", "isolation": "eventual"}, "isolation must be one of"),
        ({"effect": "write", "dedupe_window_s": 60}, "dedupe_window_s needs idempotency"),
        ({"effect": "write", "idempotency": "native", "dedupe_window_s": 0}, "dedupe_window_s must be > 0"),
    ],
)
def test_a_bad_contract_is_a_definition_error(options: dict[str, Any], message: str) -> None:
    rt = Runtime()

    def f(idempotency_key: str = "") -> None:
        return None

    with pytest.raises(ToolDefinitionError, match=message):
        rt.tool(**options)(f)
