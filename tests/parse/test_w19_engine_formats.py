"""Seed-OSS, MiniMax-M1 / M2, Jamba, Granite, InternLM2 and Phi-4-mini calls are calls, not content.

Each format is the one the serving engines' tool parsers read (vLLM ``seed_oss``, ``minimax``,
``minimax_m2``, ``jamba``, ``granite``, ``internlm2``, ``phi4_mini_json``), in outputs written for
these tests after the shapes of those parsers' own test cases. Whole, streamed in pieces of any
size, and cut off at every character, they read as the formats this parser already knew: the
calls, the text around them as content, reasoning apart, and a cut call a ``parse_error``.
"""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.parse import StreamParser, parse

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]

SEED_OSS = (
    "<seed:think>\nThe budget is 0, so I answer at once. A draft: <seed:tool_call>\n<function=drop_db>\n"
    "</function>\n</seed:tool_call>\n</seed:think>\nChecking.<seed:tool_call>\n<function=get_weather>\n"
    "<parameter=location>Barcelona, Spain</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
    "<function=get_time>\n</function>\n</seed:tool_call><seed:eos>"
)
MINIMAX_M2 = (
    "<think>Two lookups.</think>\nOn it.<minimax:tool_call>\n"
    '<invoke name="get_weather" description="Weather (e.g. rain)">\n'
    '<parameter name="location" type="string">\nSeattle\n</parameter>\n'
    '<parameter name="days">3</parameter>\n</invoke>\n'
    '<invoke name=\'search_web\'>\n<parameter name="query_tag">["technology", "events"]</parameter>\n'
    "</invoke>\n</minimax:tool_call>"
)
MINIMAX_M1 = (
    "<think>I should use a tool. <tool_calls>\n"
    '{"name": "ignored_tool", "arguments": {"should": "ignore"}}\n</tool_calls></think>\n\n'
    "Let me help you with the weather. <tool_calls>\n"
    '{"name": "get_weather", "arguments": {"location": "Dallas", "days": 3}}\n'
    '{"name": "get_weather", "arguments": {"location": "Orlando"}}\n</tool_calls>'
)
JAMBA = (
    "Sure. <tool_calls> [\n"
    '{"name": "get_weather", "arguments": {"location": "Dallas", "days": 3}},\n'
    '{"name": "get_time", "arguments": {}}] </tool_calls>'
)
GRANITE_30 = '<|tool_call|>[{"name": "get_weather", "arguments": {"location": "Boston", "days": 3}}]'
GRANITE_31 = (
    '<tool_call>[{"name": "get_weather", "arguments": {"location": "Boston", "days": 3}}, '
    '{"name": "get_time", "arguments": {}}]'
)
INTERNLM = (
    "I need the weather first.<|action_start|><|plugin|>\n"
    '{"name": "get_weather", "parameters": {"location": "Shanghai", "days": 3}}<|action_end|>'
)
PHI4 = (
    'functools[{"name": "get_weather", "arguments": {"location": "Paris", "days": 3}}, '
    '{"name": "get_time", "parameters": {}}]'
)

CASES: dict[str, tuple[str, str, list[tuple[str, dict[str, Any]]], str | None]] = {
    "seed_oss": (
        SEED_OSS,
        "seed_oss",
        [("get_weather", {"location": "Barcelona, Spain", "days": 3}), ("get_time", {})],
        "Checking.",
    ),
    "minimax_m2": (
        MINIMAX_M2,
        "minimax_m2",
        [
            ("get_weather", {"location": "Seattle", "days": "3"}),
            ("search_web", {"query_tag": '["technology", "events"]'}),
        ],
        "On it.",
    ),
    "minimax_m1": (
        MINIMAX_M1,
        "minimax",
        [("get_weather", {"location": "Dallas", "days": 3}), ("get_weather", {"location": "Orlando"})],
        "Let me help you with the weather.",
    ),
    "jamba": (
        JAMBA,
        "jamba",
        [("get_weather", {"location": "Dallas", "days": 3}), ("get_time", {})],
        "Sure.",
    ),
    "granite_30": (GRANITE_30, "granite", [("get_weather", {"location": "Boston", "days": 3})], None),
    "granite_31": (
        GRANITE_31,
        "granite",
        [("get_weather", {"location": "Boston", "days": 3}), ("get_time", {})],
        None,
    ),
    "internlm": (
        INTERNLM,
        "internlm",
        [("get_weather", {"location": "Shanghai", "days": 3})],
        "I need the weather first.",
    ),
    "phi4_mini": (
        PHI4,
        "phi4_mini",
        [("get_weather", {"location": "Paris", "days": 3}), ("get_time", {})],
        None,
    ),
}


def _calls(result: Any) -> list[tuple[str, Any]]:
    return [(c.name, c.arguments) for c in result.calls]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_output_reads_as_its_calls(case: str) -> None:
    text, fmt, calls, content = CASES[case]
    result = parse(text)
    assert result.error is None, result.error
    assert result.format == fmt
    assert _calls(result) == calls
    assert result.content == content


def test_seed_oss_and_minimax_m2_values_are_typed_by_the_schema_when_tools_are_known() -> None:
    assert parse(SEED_OSS, tools=TOOLS).calls[0].arguments == {"location": "Barcelona, Spain", "days": 3}
    assert parse(MINIMAX_M2, tools=TOOLS).calls[0].arguments == {"location": "Seattle", "days": 3}


def test_seed_oss_reasoning_is_reasoning_and_its_drafted_call_no_call() -> None:
    result = parse(SEED_OSS)
    assert result.reasoning is not None and "drop_db" in result.reasoning
    assert "drop_db" not in [c.name for c in result.calls]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("step", [1, 4, 23])
def test_streamed_in_any_pieces_the_output_reads_as_whole(case: str, step: int) -> None:
    text = CASES[case][0]
    for stream in (StreamParser(), StreamParser(in_reasoning=False)):
        shown = [c for at in range(0, len(text), step) for c in stream.feed(text[at : at + step])]
        result = stream.finish()
        assert result == parse(text)
        assert shown == list(result.calls[: len(shown)])


@pytest.mark.parametrize("case", ["seed_oss", "minimax_m2", "minimax_m1", "jamba", "internlm"])
def test_a_closing_token_reports_the_calls_before_the_stream_ends(case: str) -> None:
    text = CASES[case][0]
    stream = StreamParser(in_reasoning=False)
    shown = [c for at in range(0, len(text), 5) for c in stream.feed(text[at : at + 5])]
    assert shown == list(parse(text).calls)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cut_at_every_character_the_output_keeps_whole_calls_only(case: str) -> None:
    text, _, calls, _ = CASES[case]
    first_marker = min(
        at
        for marker in (
            "<seed:tool_call>\n<function=get",
            "<minimax:tool_call>",
            "<tool_calls>",
            "<|tool_call|>",
            "<tool_call>",
            "<|action_start|>",
            "functools",
        )
        if (at := text.rfind(marker) if case in ("seed_oss", "minimax_m1") else text.find(marker)) >= 0
    )
    for cut in range(first_marker + 1, len(text) - 1):
        result = parse(text[:cut])
        got = _calls(result)
        assert got == calls[: len(got)], (cut, got)
        if result.error is None:
            assert len(got) < len(calls) or cut >= len(text) - 20, (cut, text[:cut])
        else:
            assert result.error.category == "parse_error"
            assert result.error.details["reason"] in ("truncated", "cut_off", "unterminated_value"), (
                result.error
            )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_calls>\n{"name": "f", "arguments": {"a": 1}}\n{invalid json here}\n</tool_calls>', None),
        ('<tool_calls>[{"name": "f", "arguments": {"a": 1, "a": 2}}]</tool_calls>', "duplicate_key"),
        (
            '<minimax:tool_call><invoke name="f"><parameter name="a">1</parameter>'
            '<parameter name="a">2</parameter></invoke></minimax:tool_call>',
            "duplicate_key",
        ),
        ('<minimax:tool_call><invoke name="f">oops</invoke></minimax:tool_call>', "unexpected_text"),
        (
            "<seed:tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter>"
            "</function></seed:tool_call>",
            "duplicate_key",
        ),
        ('<|action_start|><|plugin|>\n["f"]<|action_end|>', "not_an_object"),
        ('functools{"name": "f"}', None),
        ("<|tool_call|>[1]", None),
    ],
)
def test_a_malformed_call_is_a_parse_error_never_a_guess(text: str, reason: str | None) -> None:
    result = parse(text)
    if text.startswith("functools{"):  # not the format's opening: words, no call
        assert result.calls == () and result.error is None
        return
    assert result.error is not None and result.error.category == "parse_error"
    if reason is not None:
        assert result.error.details["reason"] == reason


def test_a_qwen3_coder_call_cut_inside_its_closing_tag_is_truncated() -> None:
    text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</funct"
    result = parse(text)
    assert result.calls == () and result.error is not None
    assert result.error.details["reason"] == "truncated"


@pytest.mark.parametrize("text", ["The answer is of", "Write it to a buff"])
def test_words_ending_like_the_start_of_functools_stay_words_under_a_cut(text: str) -> None:
    stream = StreamParser()
    stream.feed(text)
    stream.end("length")
    result = stream.finish()
    assert result.error is None and result.content == text


def test_a_cut_at_the_start_of_functools_is_a_call_cut_off() -> None:
    stream = StreamParser()
    stream.feed("functoo")
    stream.end("length")
    result = stream.finish()
    assert result.error is not None and result.error.details["reason"] == "cut_off"
