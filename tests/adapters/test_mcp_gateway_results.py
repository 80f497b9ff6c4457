"""How observations become MCP results: the shapes a client program and a model read."""

from __future__ import annotations

import mcp_types as types

from actionspace.adapters._gateway_results import to_call_result
from actionspace.errors import ActionError, FieldError
from actionspace.types import Observation


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def test_an_error_observation_is_an_error_result_carrying_category_recovery_and_fields() -> None:
    error = ActionError.of(
        "invalid_arguments",
        "arguments do not match",
        field_errors=[FieldError(path="/when", message="not a date")],
    )
    result = to_call_result(Observation.failure(error, call_id="r:n1", tool="book"))
    assert result.is_error is True
    assert result.structured_content is not None
    sent = result.structured_content["error"]
    assert (sent["category"], sent["recovery"]) == ("invalid_arguments", ["change_arguments"])
    assert sent["field_errors"] == [{"path": "/when", "message": "not a date"}]
    assert "Field /when: not a date" in _text(result)


def test_a_partial_batch_is_not_an_error_result_but_says_which_items_failed() -> None:
    failed = Observation.failure(ActionError.of("conflict", "taken"), call_id="r:n1#2", tool="book")
    fine = Observation(call_id="r:n1#1", tool="book", data={"ok": True})
    obs = Observation(call_id="r:n1", tool="book", status="partial", data=[1], items=(fine, failed))
    result = to_call_result(obs)
    assert result.is_error is False
    assert "1 of 2 items failed: r:n1#2" in _text(result)


def test_a_terse_error_gets_the_recovery_its_category_allows() -> None:
    terse = ActionError(category="unknown_commit", message="lost in a crash")
    result = to_call_result(Observation.failure(terse, call_id="r:n1", tool="pay"))
    assert result.structured_content is not None
    assert result.structured_content["error"]["recovery"] == ["query_status", "reconcile_by_hand"]


def test_a_replayed_or_cut_result_says_so_in_the_text() -> None:
    obs = Observation(call_id="r:n1", tool="log", data="tail", complete=False, diagnostics={"replayed": True})
    text = _text(to_call_result(obs))
    assert text.startswith("tail")
    assert "[replayed:" in text and "[incomplete:" in text
