"""A server whose tool list churns forever keeps the catalog bounded, and stale calls still mismatch."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import mcp_types as types
import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import McpToolset, StdioServer

FLIPS = 10_000


def _tool(name: str, *, field: str = "text", description: str = "Echo.") -> types.Tool:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return types.Tool(name=name, description=description, input_schema=schema)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


class FakeUpstream:
    """Hands listings to a toolset exactly as its connection does after a change notification."""

    def __init__(self, rt: Runtime, first: list[types.Tool], *, prefix: str = "") -> None:
        server = StdioServer(sys.executable, name="churn", allowlisted=True, prefix=prefix)
        self.toolset = McpToolset(server)
        self.toolset._claim(rt)
        self.toolset._sync(first)
        self.announced: list[tuple[list[str], list[str]]] = []
        self.toolset.on_change(lambda a, r: self.announced.append(([s.key for s in a], [s.key for s in r])))

    def lists(self, tools: list[types.Tool]) -> None:
        self.toolset._on_listing(tools)


def test_a_server_flipping_its_tool_list_reuses_versions_instead_of_growing_the_catalog(rt: Runtime) -> None:
    a = [_tool("echo"), _tool("ping", field="host")]
    b = [_tool("echo", field="message")]
    upstream = FakeUpstream(rt, a)
    for n in range(FLIPS):
        upstream.lists(b if n % 2 == 0 else a)
    assert sorted(s.key for s in rt.catalog if s.name in ("echo", "ping")) == ["echo@1", "echo@2", "ping@1"]
    # the last listing was a: its definitions are the current ones, b's is retired
    assert rt.catalog.current("echo") is not None
    assert rt.catalog.current("echo").key == "echo@1"  # type: ignore[union-attr]
    assert rt.catalog.get("echo", "2").lifecycle == "retired"
    assert rt.catalog.current("ping") is not None
    assert upstream.toolset.specs()["echo"].key == "echo@1"
    # every flip is still a change the listeners hear of
    assert len(upstream.announced) == FLIPS
    assert upstream.announced[-1] == (["echo@1", "ping@1"], ["echo@2"])


def test_a_schema_field_that_changes_forever_keeps_a_bounded_history_with_fresh_version_numbers(
    rt: Runtime,
) -> None:
    upstream = FakeUpstream(rt, [_tool("echo", description="Echo 0.")])
    for n in range(1, FLIPS + 1):
        upstream.lists([_tool("echo", description=f"Echo {n}.")])
    versions = rt.catalog.versions("echo")
    assert len(versions) <= 20
    assert [s.lifecycle for s in versions].count("retired") == len(versions) - 1
    current = rt.catalog.current("echo")
    assert current is not None and current.description.endswith(f": Echo {FLIPS}.")
    # a version number is never given to two definitions
    assert current.version == str(FLIPS + 1)
    assert len(rt.catalog) <= 25


def test_a_server_renaming_its_tools_forever_keeps_the_catalog_bounded(rt: Runtime) -> None:
    upstream = FakeUpstream(rt, [_tool("tool_0")])
    for n in range(1, FLIPS + 1):
        upstream.lists([_tool(f"tool_{n}")])
    assert len(rt.catalog) <= 300
    assert len(upstream.toolset.claimed) <= 300
    assert rt.catalog.current(f"tool_{FLIPS}") is not None
    assert rt.catalog.current("tool_0") is None


def test_a_run_offered_a_dropped_version_gets_version_mismatch_naming_the_current_one(rt: Runtime) -> None:
    upstream = FakeUpstream(rt, [_tool("echo", description="Echo 0.")])
    rt.new_run("pinned")
    offered = rt.offer(run_id="pinned", disclosure=False)
    assert {"name": "echo", "version": "1"}.items() <= next(d for d in offered if d["name"] == "echo").items()
    for n in range(1, 200):
        upstream.lists([_tool("echo", description=f"Echo {n}.")])
    assert rt.catalog.find("echo@1") is None  # dropped from the bounded history
    obs = rt.call({"name": "echo", "arguments": {"text": "hi"}}, run_id="pinned")
    assert obs.error is not None
    assert obs.error.category == "version_mismatch"
    assert obs.error.details["offered"] == "echo@1"
    assert obs.error.details["current"]["version"] == "200"


def test_a_tool_that_comes_back_unchanged_answers_calls_pinned_to_its_version_again(rt: Runtime) -> None:
    upstream = FakeUpstream(rt, [_tool("echo")])
    rt.new_run("r")
    rt.offer(run_id="r", disclosure=False)
    upstream.lists([])  # removed: retired
    gone = rt.call({"name": "echo", "arguments": {"text": "hi"}}, run_id="r")
    assert gone.error is not None and gone.error.category in ("version_mismatch", "unknown_tool")
    upstream.lists([_tool("echo")])  # back, identical: the same version, active again
    assert [s.key for s in rt.catalog.versions("echo")] == ["echo@1"]
    assert rt.catalog.get("echo", "1").lifecycle == "active"
    back = rt.call({"name": "echo", "arguments": {"text": "hi"}}, run_id="r")
    # resolved and sent to the (disconnected) server: not a version problem any more
    assert back.error is not None and back.error.category == "transient"
