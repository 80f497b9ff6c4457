"""Call-like text in reasoning the prompt opened is never reported by ``feed``.

Chat templates of reasoning models (DeepSeek-R1-0528, Qwen3 thinking) end the prompt with
``<think>``: the model's output is its reasoning up to ``</think>``, then the answer. Whole, such an
output reads right (the text before an orphan ``</think>`` is reasoning, and a call drafted there
is no call). Streamed as raw text, a call drafted in that reasoning was reported by ``feed`` as
complete at its ``</tool_call>``, before the ``</think>`` that makes it reasoning arrived, and
``finish`` then held no such call: the one promise ``feed`` makes (a reported call stays) broken,
and a console showed a call the model never made. ``StreamParser(in_reasoning=True)`` says the
prompt opened the block: no call is reported before a reasoning closer arrives. ``in_reasoning=False``
says it did not: calls are reported as soon as complete. The outputs are written for these tests.
"""

from __future__ import annotations

import pytest

from actionspace.parse import StreamParser, parse

DRAFT = 'I could call <tool_call>{"name": "delete_repo", "arguments": {"name": "prod"}}</tool_call> but no.'
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'


def _feed(stream: StreamParser, text: str, step: int) -> list[str]:
    return [call.name for at in range(0, len(text), step) for call in stream.feed(text[at : at + step])]


@pytest.mark.parametrize("closer", ["</think>", "</thinking>", "[/THINK]"])
@pytest.mark.parametrize("step", [1, 5, 64])
def test_a_call_drafted_in_prompt_opened_reasoning_is_never_reported(closer: str, step: int) -> None:
    text = DRAFT + "\n" + closer + "\n\n" + CALL
    stream = StreamParser(in_reasoning=True)
    shown = _feed(stream, text, step)
    result = stream.finish()
    assert result == parse(text)
    assert [c.name for c in result.calls] == ["get_weather"]
    assert "delete_repo" not in shown
    assert shown == ["get_weather"]
    assert result.reasoning is not None and "delete_repo" in result.reasoning


def test_with_the_flag_false_calls_are_reported_as_soon_as_complete() -> None:
    stream = StreamParser(in_reasoning=False)
    assert _feed(stream, CALL + CALL, 7) == ["get_weather", "get_weather"]


def test_with_the_flag_an_output_that_never_closes_the_block_is_all_reasoning() -> None:
    stream = StreamParser(in_reasoning=True)
    assert _feed(stream, CALL, 3) == []
    assert stream.progress().provisional == ()
    result = stream.finish()
    assert result == parse("<think>" + CALL) == parse(stream.output())
    assert result.calls == () and result.reasoning == CALL
    assert result.error is not None and result.error.details["reason"] == "unterminated_reasoning"


def test_with_the_flag_a_block_the_model_opens_and_closes_itself_reports_as_usual() -> None:
    text = "<think>" + DRAFT + "</think>" + CALL + CALL
    stream = StreamParser(in_reasoning=True)
    assert _feed(stream, text, 4) == ["get_weather", "get_weather"]
    assert stream.finish() == parse(text)
