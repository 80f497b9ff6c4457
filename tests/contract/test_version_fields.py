"""Arguments in an earlier version's fields get ``version_mismatch`` naming both versions."""

from __future__ import annotations

from typing import Any

from actionspace import Runtime
from actionspace.catalog.spec import ToolSpec


def _search(**kwargs: Any) -> list[str]:
    return [str(kwargs)]


def _rt() -> Runtime:
    rt = Runtime()
    v1 = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    v2 = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    rt.register(ToolSpec(name="search", version="1", input_schema=v1, fn=_search, effect="read"))
    rt.register(ToolSpec(name="search", version="2", input_schema=v2, fn=_search, effect="read"))
    return rt


def test_old_field_names_are_a_version_mismatch_naming_both_versions_and_the_rename() -> None:
    obs = _rt().call({"name": "search", "arguments": {"q": "invoices", "limit": 3}})
    assert obs.error is not None
    assert obs.error.category == "version_mismatch"
    assert obs.error.details["current"] == "search@2"
    assert obs.error.details["arguments_match"] == "search@1"
    assert obs.error.details["renamed"] == {"q": "query"}
    assert obs.error.current_version == "2"
    assert "q → query" in obs.error.message


def test_new_field_names_run_and_unrelated_mistakes_stay_invalid_arguments() -> None:
    rt = _rt()
    assert rt.call({"name": "search", "arguments": {"query": "invoices"}}).status == "ok"
    wrong = rt.call({"name": "search", "arguments": {"qq": "invoices"}})
    assert wrong.error is not None and wrong.error.category == "invalid_arguments"


def test_a_tool_with_one_version_keeps_invalid_arguments() -> None:
    rt = Runtime()

    @rt.tool(effect="read")
    def find(query: str) -> str:
        return query

    obs = rt.call({"name": "find", "arguments": {"q": "x"}})
    assert obs.error is not None and obs.error.category == "invalid_arguments"
