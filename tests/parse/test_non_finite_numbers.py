"""A non-finite number the model wrote (``NaN``, ``Infinity``, ``-Infinity``, or a literal that
overflows to infinity such as ``1e999``) is a ``parse_error`` in every JSON-bodied format, never a
call whose argument is ``nan`` or ``inf``; a text-valued argument spelling one stays text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.parse import StreamParser, parse

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]


def outputs(number: str) -> dict[str, Any]:
    """The same call with ``number`` as its argument's value, in each JSON-bodied format."""
    args = '{"x": ' + number + "}"
    return {
        "openai_chat": {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}],
        },
        "openai_chat_entry_text": json.dumps(
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
        ),
        "openai_chat_nested_list": {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[" + number + "]"}}
            ],
        },
        "openai_responses": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": args}],
        "anthropic_text": '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", '
        '"input": ' + args + "}]}",
        "hermes": '<tool_call>{"name": "f", "arguments": ' + args + "}</tool_call>",
        "bare_json": '{"name": "f", "arguments": ' + args + "}",
        "mistral": '[TOOL_CALLS][{"name": "f", "arguments": ' + args + "}]",
        "llama3": '<|python_tag|>{"name": "f", "parameters": ' + args + "}",
        "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
        + args
        + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    }


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@pytest.mark.parametrize("number", NON_FINITE)
@pytest.mark.parametrize("shape", list(outputs("1")))
def test_a_non_finite_number_in_json_arguments_is_a_parse_error(shape: str, number: str) -> None:
    assert parse(outputs("1.5")[shape]).calls, shape  # the shape itself reads as a call
    result = parse(outputs(number)[shape])
    assert result.calls == ()
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == "invalid_number"


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_streamed_call_with_a_non_finite_number_is_never_reported(number: str) -> None:
    text = '<tool_call>{"name": "f", "arguments": {"x": ' + number + "}}</tool_call>"
    stream = StreamParser()
    shown = [call for i in range(0, len(text), 7) for call in stream.feed(text[i : i + 7])]
    result = stream.finish()
    assert shown == [] and result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "invalid_number"


TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": {"type": "number"}}}}}
]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999"])
@pytest.mark.parametrize("tools", [None, TOOLS])
def test_a_text_valued_argument_spelling_a_non_finite_number_stays_text(number: str, tools: Any) -> None:
    qwen = f"<tool_call>\n<function=f>\n<parameter=x>\n{number}\n</parameter>\n</function>\n</tool_call>"
    glm = f"<tool_call>f\n<arg_key>x</arg_key>\n<arg_value>{number}</arg_value>\n</tool_call>"
    dsml = (
        "<｜DSML｜function_calls>\n"
        '<｜DSML｜invoke name="f">\n'
        f'<｜DSML｜parameter name="x" string="false">{number}</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
    )
    for text in (qwen, glm, dsml):
        result = parse(text, tools)
        assert result.error is None, (text, result.error)
        assert [c.arguments for c in result.calls] == [{"x": number}]


def test_a_session_answers_a_non_finite_argument_with_a_parse_error_and_runs_nothing() -> None:
    rt = Runtime("memory://")
    ran: list[Any] = []

    @rt.tool(effect="write")
    def put(value: float) -> str:
        """Store a number."""
        ran.append(value)
        return "stored"

    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("store a number")
    for number in NON_FINITE:
        message = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "put", "arguments": f'{{"value": {number}}}'},
                }
            ],
        }
        turn = s.handle(message)
        assert [o.call_id for o in turn.observations] == ["c1"]
        error = turn.observations[0].error
        assert error is not None and error.category == "parse_error", (number, error)
    assert ran == [] and all(_finite(v) for v in ran)
