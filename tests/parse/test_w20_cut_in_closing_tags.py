r"""An output that stops inside a token of its format (``…}}</tool_ca``, ``…{}<|tool_call_e``,
``…</｜DSML｜inv``), or inside a JSON or Python token of a call's arguments (``tru``, ``-1.5e``,
``\u00``), was cut there, as a model stopped mid-output: a ``parse_error`` of reason ``truncated``,
as for a cut anywhere else in the call, never ``unexpected_text`` or ``invalid_json`` (which tell
the model it wrote something wrong). Whole and streamed alike: any prefix of a valid output of any
format, streamed in any pieces, reads as the whole output's first calls, with no fault or the
fault of a cut, and never raises.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse
from tests.parse.test_w19_stream_prefixes import OUTPUTS

HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
KIMI = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'
)
DSML = (
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
)

ARGS = (
    '{"on": true, "off": false, "none": null, "n": -1.5e+3, "r": [0.25, 2E-2], '
    '"s": "caf\\u00e9 \\ud83d\\ude00"}'
)
# outputs whose values hold every kind of JSON token a cut may stop inside (a literal, a number's
# sign, fraction or exponent, an escape, a surrogate pair), and a DSML of ASCII bars
LITERALS = {
    "bare_json": f'{{"name": "set_lamp", "arguments": {ARGS}}}',
    "bare_json_list": (
        f'[{{"name": "set_lamp", "arguments": {ARGS}}}, {{"name": "get_time", "arguments": {{}}}}]'
    ),
    "hermes_literals": f'<tool_call>\n{{"name": "set_lamp", "arguments": {ARGS}}}\n</tool_call>',
    "minimax_literals": f'<tool_calls>\n{{"name": "set_lamp", "arguments": {ARGS}}}\n</tool_calls>',
    "llama3_literals": f'<|python_tag|>{{"name": "set_lamp", "parameters": {ARGS}}}',
    "mistral_literals": f"[TOOL_CALLS]set_lamp[ARGS]{ARGS}",
    "kimi_literals": (
        "<|tool_call_section_begin|><|tool_call_begin|>functions.set_lamp:0<|tool_call_argument_begin|>"
        f"{ARGS}<|tool_call_end|><|tool_call_section_end|>"
    ),
    "dsml_ascii": (
        '<|DSML|tool_calls>\n<|DSML|invoke name="set_lamp">\n'
        '<|DSML|parameter name="on" string="false">true</|DSML|parameter>\n'
        "</|DSML|invoke>\n</|DSML|tool_calls>"
    ),
    "pythonic_literals": "[set_lamp(on=True, off=False, none=None, n=-1.5e+3, s='caf\\u00e9'), get_time()]",
    "harmony_literals": (
        f"<|channel|>commentary to=functions.set_lamp <|constrain|>json<|message|>{ARGS}<|call|>"
    ),
}
ALL = {**OUTPUTS, **LITERALS}

# (case, output, the token it is cut inside, how much of the token is left, where the fault is)
CUTS: list[tuple[str, str, str, int, str]] = [
    ("hermes closing tag", HERMES, "</tool_call>", 3, "</tool_call>"),
    ("hermes closing tag, one character", HERMES, "</tool_call>", 11, "</tool_call>"),
    ("kimi call end", KIMI, "<|tool_call_end|>", 4, "<|tool_call_end|>"),
    ("kimi section end", KIMI, "<|tool_calls_section_end|>", 6, "<|tool_calls_section_end|>"),
    ("dsml parameter end", DSML, "</｜DSML｜parameter>", 5, "<｜DSML｜parameter"),  # at the value cut
    ("dsml invoke end", DSML, "</｜DSML｜invoke>", 4, "</｜DSML｜invoke>"),
    ("dsml block end", DSML, "</｜DSML｜function_calls>", 9, "</｜DSML｜function_calls>"),
]

# the reasons of a cut: where the text stops (``truncated``), or a block, section, call, fence or
# reasoning whose closing token never came
CUT_REASONS = {
    "truncated",
    "unterminated_block",
    "unterminated_section",
    "unterminated_call",
    "unterminated_fence",
    "unterminated_reasoning",
}


def _cut(text: str, token: str, left: int) -> str:
    return text[: text.rindex(token) + len(token) - left]


@pytest.mark.parametrize(("case", "text", "token", "left", "at"), CUTS, ids=[c[0] for c in CUTS])
def test_an_output_cut_inside_a_closing_token_is_truncated(
    case: str, text: str, token: str, left: int, at: str
) -> None:
    cut = _cut(text, token, left)
    result = parse(cut)
    assert result.error is not None
    assert result.error.details["reason"] == "truncated", result.error.message
    assert result.error.details["position"] == text.rindex(at)
    assert result.calls == parse(text).calls[: len(result.calls)]


@pytest.mark.parametrize(("case", "text", "token", "left", "at"), CUTS, ids=[c[0] for c in CUTS])
@pytest.mark.parametrize("step", [1, 4, 1000])
def test_a_stream_cut_inside_a_closing_token_is_truncated(
    case: str, text: str, token: str, left: int, at: str, step: int
) -> None:
    cut = _cut(text, token, left)
    stream = StreamParser(in_reasoning=False)
    for i in range(0, len(cut), step):
        stream.feed(cut[i : i + step])
    result = stream.finish()
    assert result == parse(cut)
    assert result.error is not None and result.error.details["reason"] == "truncated"


@pytest.mark.parametrize(
    "wrong",
    [
        HERMES.replace("</tool_call>", "</tool_cell>"),
        KIMI.replace("<|tool_call_end|>", "<|tool_call_fin|>"),
        DSML.replace("</｜DSML｜invoke>", "</｜DSML｜invoice>"),
        KIMI.replace("<|tool_call_end|>", "<|tool_call_e"),  # a token's head with text after it
    ],
)
def test_a_wrong_token_is_still_unexpected_text(wrong: str) -> None:
    error = parse(wrong).error
    assert error is not None and error.details["reason"] == "unexpected_text", wrong


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_cut_of_every_format_is_a_cut(name: str) -> None:
    """Each prefix of a valid output reads as the whole output's first calls, with no fault or the
    fault of a cut: never one that blames the model for text it did not write."""
    text = ALL[name]
    whole = parse(text).calls
    for end in range(len(text) + 1):
        result = parse(text[:end])
        if name != "orphan_reasoning":  # cut before its closer, the reasoning reads as an answer
            assert list(result.calls) == list(whole[: len(result.calls)]), text[:end]
        if result.error is not None:
            assert result.error.details["reason"] in CUT_REASONS, (text[:end], result.error.message)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(ALL)),
    st.floats(0, 1),
    st.lists(st.floats(0, 1), max_size=8),
    st.sampled_from([None, False]),
)
def test_any_prefix_streamed_in_any_pieces_is_the_whole_or_a_typed_cut(
    name: str, end: float, cuts: list[float], in_reasoning: bool | None
) -> None:
    text = ALL[name]
    prefix = text[: round(end * len(text))]
    points = sorted({0, len(prefix), *(round(c * len(prefix)) for c in cuts)})
    stream = StreamParser(in_reasoning=None if name == "orphan_reasoning" else in_reasoning)
    for a, b in itertools.pairwise(points):
        stream.feed(prefix[a:b])  # never raises
    result = stream.finish()
    assert result == parse(prefix)
    if prefix == text:
        assert result.error is None and result.calls == parse(text).calls
    elif result.error is not None:
        assert result.error.category == "parse_error"
        assert result.error.details["reason"] in CUT_REASONS, (prefix, result.error.message)
