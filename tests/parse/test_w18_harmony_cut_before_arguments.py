"""A gpt-oss (harmony) call cut off right after its ``<|message|>`` token is no call.

vLLM's harmony tests (``tests/tool_parsers/test_openai_tool_parser.py``) render calls as
``…to=functions.NAME <|constrain|>json<|message|>BODY<|call|>``, including a call whose body is
empty (``no_args``), which reads as a call without arguments because ``<|call|>`` closes it.
Servers often drop that last ``<|call|>``, so a body running to the end of the text is read when
it is whole JSON. An output that stops right after ``<|message|>`` has neither: the cut came
before any argument was written, and it read as ``NAME({})``, a call the model never finished,
with no error. It is a ``truncated`` ``parse_error`` now, whole or streamed; an empty body that
``<|call|>`` or ``<|end|>`` closes, or that the next message follows, is still a call without
arguments. The shapes are written for these tests.
"""

from __future__ import annotations

import pytest

from actionspace.parse import StreamParser, parse

HEADER = (
    "<|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>"
)
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather in Tokyo.<|end|>"
FIRST = (
    "<|start|>assistant<|channel|>commentary to=functions.get_user_location <|constrain|>json"
    "<|message|>{}<|call|>"
)
HEADERS = {
    "constrained": HEADER,
    "recipient_first": (
        "<|start|>assistant to=functions.get_current_weather<|channel|>commentary json<|message|>"
    ),
    "no_start_token": "<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>",
    "no_content_type": "<|start|>assistant<|channel|>commentary to=functions.get_current_weather<|message|>",
}


@pytest.mark.parametrize("trailer", ["", " ", "\n", "<|endoftext|>"], ids=["bare", "space", "newline", "eos"])
@pytest.mark.parametrize("header", sorted(HEADERS))
def test_an_output_that_stops_right_after_message_is_truncated_not_a_call(header: str, trailer: str) -> None:
    text = ANALYSIS + HEADERS[header] + trailer
    result = parse(text)
    assert result.calls == ()
    assert result.error is not None
    assert result.error.category == "parse_error"
    assert result.error.details["reason"] == "truncated"
    assert "re_emit_call" in result.error.recovery
    assert result.reasoning == "The user wants the weather in Tokyo."


def test_the_calls_before_the_cut_are_kept_and_the_cut_call_is_the_fault() -> None:
    result = parse(ANALYSIS + FIRST + HEADER)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_user_location", {})]
    assert result.error is not None and result.error.details["reason"] == "truncated"
    assert result.error.details["index"] == 1


def test_a_stream_cut_after_message_finishes_as_the_same_fault() -> None:
    text = ANALYSIS + FIRST + HEADER
    stream = StreamParser()
    shown = [call for piece in (text[:50], text[50:120], text[120:]) for call in stream.feed(piece)]
    result = stream.finish()
    assert "get_current_weather" not in [c.name for c in shown]
    assert result == parse(text)
    assert result.error is not None and result.error.details["reason"] == "truncated"


@pytest.mark.parametrize(
    ("tail", "arguments"),
    [
        ("<|call|>", {}),
        ("<|end|>", {}),
        ("<|call|><|endoftext|>", {}),
        ("{}", {}),
        ('{"city": "Tokyo"}', {"city": "Tokyo"}),
        ('{"city": "Tokyo"}<|call|>', {"city": "Tokyo"}),
    ],
)
def test_a_closed_or_whole_body_is_still_a_call(tail: str, arguments: dict[str, str]) -> None:
    result = parse(ANALYSIS + HEADER + tail)
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.calls] == [("get_current_weather", arguments)]


def test_an_empty_body_followed_by_the_next_message_is_a_call_without_arguments() -> None:
    result = parse(HEADER + "<|start|>assistant<|channel|>final<|message|>Checking.<|return|>")
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.calls] == [("get_current_weather", {})]
    assert result.content == "Checking."


def test_a_final_message_keeps_its_text_when_its_end_token_is_kept() -> None:
    text = ANALYSIS + "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>"
    result = parse(text)
    assert result.error is None and result.calls == ()
    assert result.content == "It is sunny."
