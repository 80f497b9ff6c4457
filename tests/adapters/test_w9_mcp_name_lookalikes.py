"""Tool names that differ only in case or punctuation (``-``, ``.``, ``/``, ``_``) read as one name to
a model, and a framework that maps names to its provider's alphabet may make them one: a server's tool
whose name looks so like the runtime's own tool, another server's tool, or another tool of its own
listing is skipped (all of a look-alike group of one listing, as for a name listed twice), never
offered beside the tool it looks like."""

from __future__ import annotations

import re
from collections.abc import Iterator

import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters.mcp_client import McpToolset, StdioServer

_OK = {"type": "object", "properties": {"a": {"type": "string"}}}


def _tool(name: str) -> types.Tool:
    return types.Tool.model_validate({"name": name, "description": "d", "input_schema": _OK})


def _shape(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "_", name.lower())


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


_made: list[McpToolset] = []


@pytest.fixture(autouse=True)
def _close_toolsets() -> Iterator[None]:
    """Close each toolset a test made: its connection's loop holds descriptors until then."""
    yield
    while _made:
        _made.pop().close()


def _toolset(rt: Runtime, label: str = "unused") -> McpToolset:
    toolset = McpToolset(StdioServer(label, allowlisted=True, name=label))
    toolset._claim(rt)
    _made.append(toolset)
    return toolset


def _offered(rt: Runtime) -> list[str]:
    return sorted(s.name for s in rt.catalog.offerable())


@pytest.mark.parametrize(
    "name",
    ["READ_ARTIFACT", "Read_artifact", "read-artifact", "read.artifact", "read/artifact", "Describe-Tool"],
)
def test_a_tool_named_like_a_runtime_tool_but_for_case_or_punctuation_is_skipped(
    rt: Runtime, name: str
) -> None:
    toolset = _toolset(rt)
    added, _ = toolset._sync([_tool("fine"), _tool(name)])
    assert [s.name for s in added] == ["fine"]
    assert _offered(rt) == ["fine"]
    assert "runtime tool" in toolset.skipped[name]


@pytest.mark.parametrize(("one", "other"), [("echo", "ECHO"), ("a.b", "a_b"), ("get-item", "get_item")])
def test_two_tools_of_one_listing_whose_names_look_alike_are_neither_offered(
    rt: Runtime, one: str, other: str
) -> None:
    toolset = _toolset(rt)
    listing = [_tool(one), _tool("other"), _tool(other)]
    toolset._sync(listing)
    assert _offered(rt) == ["other"]
    assert {one, other} <= set(toolset.skipped)
    assert toolset._sync(listing) == ([], [])  # the same listing, refreshed: nothing changes


def test_a_look_alike_added_later_retires_the_tool_it_looks_like(rt: Runtime) -> None:
    toolset = _toolset(rt)
    toolset._sync([_tool("echo"), _tool("other")])
    assert _offered(rt) == ["echo", "other"]
    _, retired = toolset._sync([_tool("echo"), _tool("Echo"), _tool("other")])
    assert [s.name for s in retired] == ["echo"]
    assert _offered(rt) == ["other"]
    toolset._sync([_tool("echo"), _tool("other")])  # gone again: the tool is back
    assert _offered(rt) == ["echo", "other"]


def test_a_tool_named_like_another_servers_tool_is_skipped(rt: Runtime) -> None:
    first, second = _toolset(rt, "first"), _toolset(rt, "second")
    first._sync([_tool("search")])
    second._sync([_tool("Search"), _tool("fetch")])
    assert _offered(rt) == ["fetch", "search"]
    search = rt.catalog.current("search")
    assert search is not None and search.owner == "mcp:first"
    assert "Search" in second.skipped


_names = st.text(alphabet="aAbB.-_/", min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(names=st.lists(_names, max_size=6))
def test_no_two_offered_tools_ever_look_alike(names: list[str]) -> None:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        toolset = _toolset(runtime)
        toolset._sync([_tool(n) for n in names])
        offered = _offered(runtime)
        shapes = [_shape(n) for n in offered]
        assert len(set(shapes)) == len(shapes), offered
        assert set(offered) | set(toolset.skipped) >= set(names)
    finally:
        runtime.close()
        while _made:  # each example's own (the autouse fixture runs once for all of them)
            _made.pop().close()
