"""A plan proposed again (after a timeout, or changed) under the same node ids: nothing stale reused."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Runtime


@pytest.fixture
def world() -> dict[str, Any]:
    return {"kv": {"a": "A", "b": "B"}, "sent": []}


@pytest.fixture
def rt(world: dict[str, Any]) -> Runtime:
    runtime = Runtime("memory://", recover_on_start=False)

    @runtime.tool(effect="read", reads=["kv:{key}"])
    def get(key: str) -> str:
        """Read a value."""
        value: str = world["kv"][key]
        return value

    @runtime.tool(effect="write", writes=["kv:{key}"])
    def put(key: str, value: str) -> str:
        """Write a value."""
        world["sent"].append((key, value))
        world["kv"][key] = value
        return "written"

    @runtime.tool(effect="none")
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    return runtime


def _plan(key: str, value: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "r", "tool": "get", "arguments": {"key": key}},
            {"id": "s", "tool": "shout", "arguments": {"text": {"$ref": "r.data"}}},
            {"id": "w", "tool": "put", "arguments": {"key": "c", "value": value}},
        ]
    }


def test_a_retry_reuses_no_node_whose_arguments_changed(rt: Runtime, world: dict[str, Any]) -> None:
    first = rt.run_plan(_plan("a", "1"), run_id="re1")
    assert first.status == "ok" and first.nodes["s"].data == "A"
    second = rt.run_plan(_plan("b", "2"), run_id="re1", retry_of=first)
    assert second.nodes["r"].data == "B"  # read again: it asks for another key
    assert second.nodes["s"].data == "B"  # its input was read again, so it ran again
    w = second.nodes["w"].error  # the same node with other arguments: the ledger's conflict
    assert w is not None and w.category == "conflict"
    assert world["sent"] == [("c", "1")]
    assert second.stats["reused"] == 0


def test_a_retry_of_another_runs_result_reuses_nothing(rt: Runtime, world: dict[str, Any]) -> None:
    first = rt.run_plan(_plan("a", "1"), run_id="re2")
    world["kv"]["a"] = "A2"
    other = rt.run_plan(_plan("a", "1"), run_id="re3", retry_of=first)
    assert other.stats["reused"] == 0
    assert other.nodes["r"].data == "A2" and other.nodes["r"].call_id == "re3:r"
    assert world["sent"] == [("c", "1"), ("c", "1")]  # a new run is a new action


def test_a_retry_of_the_same_plan_still_reuses_its_ok_nodes(rt: Runtime, world: dict[str, Any]) -> None:
    first = rt.run_plan(_plan("a", "1"), run_id="re4")
    world["kv"]["a"] = "changed"
    again = rt.run_plan(_plan("a", "1"), run_id="re4", retry_of=first)
    assert again.stats["reused"] == 3
    assert again.nodes["s"].data == "A"
    assert world["sent"] == [("c", "1")]
