"""A message none of whose calls succeeded is an error observation that carries its error.

Every ``status="error"`` observation has an ``error`` with a category (the envelope's rule, and
what the model branches on); the group of a multi-call message whose calls all failed had none
(found by tests/test_fuzz_wild_shapes.py, about one run in twenty).
"""

from __future__ import annotations

from actionspace import Runtime


def test_a_message_whose_calls_all_failed_is_an_error_with_the_first_category() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    def get(key: str) -> str:
        """Read a value."""
        return key

    raw = [
        {"type": "function", "id": "a", "function": {"name": "nope", "arguments": "{}"}},
        {"type": "function", "id": "b", "function": {"name": "get", "arguments": "{}"}},
    ]
    obs = rt.call(raw)
    assert obs.status == "error" and [i.status for i in obs.items] == ["error", "error"]
    assert obs.error is not None and obs.error.category == "unknown_tool"
    assert obs.error.details["failed"] == {"a": "unknown_tool", "b": "invalid_arguments"}


def test_a_partly_failed_message_stays_partial_without_an_error_of_its_own() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    def get(key: str) -> str:
        """Read a value."""
        return key

    raw = [
        {"type": "function", "id": "a", "function": {"name": "get", "arguments": '{"key": "k"}'}},
        {"type": "function", "id": "b", "function": {"name": "get", "arguments": "{}"}},
    ]
    obs = rt.call(raw)
    assert obs.status == "partial" and obs.error is None
