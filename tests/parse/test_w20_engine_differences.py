"""Where the parser departs from vLLM's tool parsers for the same model, on purpose.

vLLM skips a MiniMax-M1 line that is not JSON and runs the block's other calls, runs the calls of a
``<tool_calls>`` block never closed, and leaves an InternLM2 ``<|action_start|><|interpreter|>``
action (code for its code interpreter) in the content. Each of these hides what the model asked
for: a call dropped unseen, a cut block read as whole, code the model wanted run shown as its
answer. Here each is a ``parse_error`` (none of the message's calls runs, the model is asked to
emit them again), unless ``tools`` offers a tool named ``interpreter``, which then receives the code
as its argument ``code``.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse

GOOD = '{"name": "get_weather", "arguments": {"city": "Dallas"}}'
INTERPRETER = (
    "Let me compute it.<|action_start|><|interpreter|>\n```python\nprint(2 ** 10)\n```<|action_end|>"
)
CODE = {"type": "object", "properties": {"code": {"type": "string"}}}
CODE_TOOL = [{"type": "function", "function": {"name": "interpreter", "parameters": CODE}}]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"name": "get_time", "arguments": {"zone": CET}}', "invalid_json"),
        ("get_time(zone='CET')", "unexpected_text"),
        ('{"name": "get_time", "arguments": {"zone": "CET"}', "invalid_json"),  # its brace never closed
    ],
)
def test_a_minimax_line_that_is_not_a_json_call_is_a_parse_error_not_skipped(line: str, reason: str) -> None:
    text = f"<tool_calls>\n{GOOD}\n{line}\n{GOOD}\n</tool_calls>"
    result = parse(text)
    assert result.format == "minimax"
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == reason
    assert [c.name for c in result.calls] == ["get_weather"]  # the calls before it; none of them runs


def test_an_unclosed_tool_calls_block_is_truncated_even_when_its_calls_are_whole() -> None:
    for text in (f"<tool_calls>\n{GOOD}\n", f"<tool_calls>[{GOOD}]"):
        result = parse(text)
        assert result.error is not None and result.error.details["reason"] == "truncated"


def test_an_internlm_interpreter_action_is_a_parse_error_not_the_answer() -> None:
    result = parse(INTERPRETER)
    assert result.format == "internlm"
    assert result.error is not None and result.error.details["reason"] == "unsupported_recipient"
    assert result.error.details["position"] == INTERPRETER.index("<|action_start|>")
    assert result.calls == () and "print" not in (result.content or "")


def test_an_offered_interpreter_tool_receives_the_code() -> None:
    result = parse(INTERPRETER, tools=CODE_TOOL)
    assert result.error is None and result.content == "Let me compute it."
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("interpreter", {"code": "```python\nprint(2 ** 10)\n```"})
    ]


def test_an_interpreter_action_after_a_plugin_call_fails_the_message() -> None:
    text = f"<|action_start|><|plugin|>\n{GOOD}<|action_end|>" + INTERPRETER
    result = parse(text)
    assert result.error is not None and result.error.details["reason"] == "unsupported_recipient"


def test_an_interpreter_action_cut_before_its_end_is_truncated() -> None:
    cut = INTERPRETER[: -len("<|action_end|>")]
    result = parse(cut, tools=CODE_TOOL)
    assert result.calls == () and result.error is not None
    assert result.error.details["reason"] == "truncated"


def test_words_that_mention_the_interpreter_token_stay_words() -> None:
    text = "InternLM2 names its code interpreter <|interpreter|> in its template."
    result = parse(text)
    assert result.error is None and result.content == text


@settings(max_examples=60, deadline=None)
@given(st.integers(1, len(INTERPRETER)), st.lists(st.integers(0, len(INTERPRETER)), max_size=5))
def test_a_streamed_interpreter_action_never_shows_a_call(end: int, cuts: list[int]) -> None:
    prefix = INTERPRETER[:end]
    stream = StreamParser(in_reasoning=False)
    points = sorted({0, end, *(c for c in cuts if c < end)})
    shown = [call for a, b in itertools.pairwise(points) for call in stream.feed(prefix[a:b])]
    assert shown == [] and stream.finish() == parse(prefix) and stream.finish().calls == ()
