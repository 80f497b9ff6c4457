"""Linear time for the formats ``tests/parse/adversarial.py`` leaves out, whole and streamed.

The families there are Gemma 4, DeepSeek V3.1 / DSML, Kimi K2, harmony, Llama 4 pythonic,
Qwen3-Coder, Mistral, GLM and Hermes. These add bare pythonic lists, Llama 3 ``<|python_tag|>``
and ``;``-separated JSON, bare JSON lists, fenced JSON and ``tool_code`` blocks, FunctionGemma,
DeepSeek V3 (``function<｜tool▁sep｜>`` with a fenced body), Mistral ``[CALL_ID]``, Kimi's
singular section marker, harmony's recipient-first headers, reasoning tag runs, and a raw-text
stream read delta by delta (each delta that could close a call re-reads the text, so a stream
of many calls is where a rescan would show). Same bound and method as ``test_linear_time``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from actionspace.parse import StreamParser
from tests.parse.adversarial import build
from tests.parse.test_linear_time import GROWTH, bound, ratio

UNITS: dict[str, tuple[str, str, str]] = {
    "bare_pythonic_calls": ("[", "f(a=1, b='x'), ", "g()]"),
    "bare_pythonic_openers": ("", "[f(", ""),
    "python_tag_semicolons": (
        "<|python_tag|>",
        '{"name": "f", "parameters": {"a": 1}}; ',
        '{"name": "g", "parameters": {}}',
    ),
    "python_tags": ("", "<|python_tag|>", ""),
    "llama3_json_semicolons": (
        "",
        '{"name": "f", "parameters": {"a": 1}}; ',
        '{"name": "g", "parameters": {}}',
    ),
    "json_list": ("[", '{"name": "f", "arguments": {"a": 1}}, ', '{"name": "g", "arguments": {}}]'),
    "json_fences": ("", '```json\n{"name": "f", "arguments": {"a": 1}}\n```\n', ""),
    "json_fence_openers": ("", "```json\n", ""),
    "tool_code_fences": ("", "```tool_code\nf(a=1)\n```\n", ""),
    "function_gemma_calls": ("", "<start_function_call>call:f{a:<escape>x<escape>}<end_function_call>", ""),
    "function_gemma_escapes": ("<start_function_call>call:f{a:", "<escape>", ""),
    "deepseek_v3_calls": (
        "<｜tool▁calls▁begin｜>",
        '<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"a": 1}\n```<｜tool▁call▁end｜>',
        "<｜tool▁calls▁end｜>",
    ),
    "deepseek_v3_separators": ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function", "<｜tool▁sep｜>", ""),
    "mistral_call_ids": ("", '[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{"a":1}', ""),
    "mistral_list": (
        "[TOOL_CALLS][",
        '{"name": "f", "arguments": {"a": 1}}, ',
        '{"name": "g", "arguments": {}}]',
    ),
    "kimi_singular_sections": ("", "<|tool_call_section_begin|>", ""),
    "harmony_recipient_first": (
        "",
        "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>",
        "",
    ),
    "harmony_empty_bodies": ("", "<|channel|>commentary to=functions.f json<|message|>", ""),
    "orphan_reasoning_closers": ("", "</think>", ""),
    "nested_reasoning_openers": ("", "<think><thinking>[THINK]", ""),
    "qwen_parameters_unclosed": ("<tool_call>\n<function=f>\n", "<parameter=a>\n1\n", ""),
    "glm_values_unclosed": ("<tool_call>f", "<arg_key>a</arg_key><arg_value>1", ""),
}
CASES = sorted(UNITS)
STREAMED = ["hermes_calls", "deepseek_v3_calls", "function_gemma_calls", "harmony_recipient_first"]
STREAM_UNITS = {
    **UNITS,
    "hermes_calls": ("", '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>', ""),
}


def _streamed(text: str, chunk: int = 64) -> None:
    stream = StreamParser()
    for at in range(0, len(text), chunk):
        stream.feed(text[at : at + chunk])
    result = stream.finish()
    assert result.error is None or result.error.category == "parse_error"


def _stream_size(prefix: str, unit: str, suffix: str, size: int) -> str:
    return build(prefix, unit, suffix, size)


@pytest.mark.parametrize("name", CASES)
def test_a_fortyfold_larger_output_of_a_format_takes_far_less_than_sixteen_hundredfold_time(
    name: str,
) -> None:
    make: Callable[[int], str] = partial(build, *UNITS[name])
    measured = ratio(make, 200_000 // GROWTH, 200_000)
    assert measured[0] < measured[1], (name, measured)


@pytest.mark.parametrize("name", STREAMED)
def test_a_fortyfold_longer_raw_text_stream_takes_far_less_than_sixteen_hundredfold_time(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``ratio`` times ``parse``; here each timing feeds the text to a stream in 64-character deltas
    import tests.parse.test_linear_time as timing

    monkeypatch.setattr(timing, "_parse", _streamed)
    make: Callable[[int], str] = partial(_stream_size, *STREAM_UNITS[name])
    small, large = make(100_000 // GROWTH), make(100_000)
    measured = ratio(make, 100_000 // GROWTH, 100_000)
    assert measured[1] == bound(small, large)
    assert measured[0] < measured[1], (name, measured)
