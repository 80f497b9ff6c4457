"""Outputs in the shapes the serving engines' own tool-parser tests feed their parsers, each with the
calls it must yield; then, for each, every cut and every split of the stream.

The shapes are written for these tests after the examples in (per entry, ``source``):

* vLLM ``tests/tool_parsers/test_hermes_tool_parser.py`` (Hermes, text before the call, several
  calls, arguments already serialized into a JSON string);
* vLLM ``tests/tool_parsers/test_llama3_json_tool_parser.py`` (``;``-separated calls, prose or a
  JSON fragment after the calls);
* vLLM ``tests/tool_parsers/test_mistral_tool_parser.py`` (``[TOOL_CALLS]`` list, ``name{…}`` and
  ``[ARGS]`` forms, several calls);
* vLLM ``tests/tool_parsers/test_pythonic_tool_parser.py`` / ``test_llama4_pythonic_tool_parser.py``
  (nested dicts and lists, escaped quotes, an empty call);
* vLLM ``tests/tool_parsers/test_openai_tool_parser.py`` (gpt-oss harmony: analysis then calls,
  a call with no content type, one with an empty body closed by ``<|call|>``);
* vLLM ``tests/tool_parsers/test_kimi_k2_tool_parser.py``, ``test_glm4_moe_tool_parser.py``,
  ``test_qwen3coder_tool_parser.py``, ``test_deepseekv31_tool_parser.py``;
* SGLang ``test/srt/test_function_call_parser.py`` (Qwen 2.5 ``<tool_call>`` with ``\\n`` around
  the JSON, DeepSeek V3 ``function<｜tool▁sep｜>NAME`` with a fenced JSON body, Llama 3.2
  ``<|python_tag|>``).

Properties: each output parses to exactly its calls; every cut of it parses to a prefix of them
(never a half call: a call cut anywhere is dropped, and what stops inside one is a ``parse_error``
with a recovery); streamed in any split, ``feed`` reports a prefix of the calls and ``finish``
equals ``parse`` of the whole; nothing ever raises.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import ParseResult, StreamParser, parse

W = {"city": "Tokyo"}
W_RAW = '{"city": "Tokyo"}'

# name → (raw output, the calls as (name, arguments))
OUTPUTS: dict[str, tuple[str, list[tuple[str, Any]]]] = {
    "hermes_newlines": (
        '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>',
        [("final_answer", {"trigger": True})],
    ),
    "hermes_text_then_two": (
        'Sure, let me check.<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
        '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>',
        [("search", {"q": "cats"}), ("search", {"q": "dogs"})],
    ),
    "hermes_serialized_arguments": (
        '<tool_call>\n{"name": "get_db_config", '
        '"arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
        [("get_db_config", {"param": "max_connections"})],
    ),
    "llama3_semicolons_spaced": (
        '{"name": "searchTool", "parameters": {"query": "test1"}} ; '
        '{"name": "getOpenIncidentsTool", "parameters": {}} ; '
        '{"name": "searchTool", "parameters": {"query": "test2"}}',
        [
            ("searchTool", {"query": "test1"}),
            ("getOpenIncidentsTool", {}),
            ("searchTool", {"query": "test2"}),
        ],
    ),
    "llama3_json_after": (
        '{"name": "searchTool", "parameters": {"query": "test"}} '
        'The arguments I passed were {"query": "test"}',
        [("searchTool", {"query": "test"})],
    ),
    "llama3_nested_brackets_in_strings": (
        '{"name": "searchTool", "parameters": '
        '{"query": "test {value} [complex]", "nested": {"inner": "more {b}"}}}',
        [("searchTool", {"query": "test {value} [complex]", "nested": {"inner": "more {b}"}})],
    ),
    "llama32_python_tag": (
        '<|python_tag|>{"name": "get_weather", "parameters": ' + W_RAW + "}<|eom_id|>",
        [("get_weather", W)],
    ),
    "mistral_list": (
        '[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": 4}}, '
        '{"name": "get_weather", "arguments": ' + W_RAW + "}]",
        [("add", {"a": 3.5, "b": 4}), ("get_weather", W)],
    ),
    "mistral_named_twice": (
        '[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}[TOOL_CALLS]get_weather' + W_RAW,
        [("add_this_and_that", {"a": 3.5, "b": 4}), ("get_weather", W)],
    ),
    "mistral_args_twice": (
        "[TOOL_CALLS]get_weather[ARGS]" + W_RAW + '[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}</s>',
        [("get_weather", W), ("add", {"a": 1, "b": 2})],
    ),
    "pythonic_nested": (
        "[get_weather(city='San Francisco', metric='celsius'), register_user(name='John Doe', age=37, "
        "address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, "
        "aliases=['John', 'Johnny'])]",
        [
            ("get_weather", {"city": "San Francisco", "metric": "celsius"}),
            (
                "register_user",
                {
                    "name": "John Doe",
                    "age": 37,
                    "address": {"city": "San Francisco", "state": "CA"},
                    "role": None,
                    "passed_test": True,
                    "aliases": ["John", "Johnny"],
                },
            ),
        ],
    ),
    "pythonic_escapes_and_empty": (
        "<|python_start|>[get_weather(city='Martha\\'s Vineyard', metric='\"cool units\"'), "
        "do_something_cool()]<|python_end|>",
        [("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'}), ("do_something_cool", {})],
    ),
    "harmony_analysis_and_calls": (
        "<|channel|>analysis<|message|>We need get_current_weather and get_user_location.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json"
        '<|message|>{\n"location": "Tokyo"\n}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.no_content_type<|message|>"
        '{"location": "Tokyo"}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.no_args <|constrain|>json<|message|><|call|>",
        [
            ("get_current_weather", {"location": "Tokyo"}),
            ("no_content_type", {"location": "Tokyo"}),
            ("no_args", {}),
        ],
    ),
    "kimi_two": (
        "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        "<|tool_call_argument_begin|>" + W_RAW + "<|tool_call_end|><|tool_call_begin|>functions.get_time:1"
        '<|tool_call_argument_begin|>{"tz": "JST"}<|tool_call_end|><|tool_calls_section_end|>',
        [("get_weather", W), ("get_time", {"tz": "JST"})],
    ),
    "glm45_two": (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "<arg_key>date</arg_key>\n<arg_value>2024-06-27</arg_value>\n</tool_call>"
        "<tool_call>get_time\n</tool_call>",
        [("get_weather", {"city": "Beijing", "date": "2024-06-27"}), ("get_time", {})],
    ),
    "qwen3_coder_two": (
        "Let me run it.\n<tool_call>\n<function=run_shell>\n<parameter=command>\nls -la\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas\n"
        "</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>",
        [("run_shell", {"command": "ls -la"}), ("get_weather", {"city": "Dallas", "state": "TX"})],
    ),
    "deepseek_v3_fenced": (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        + W_RAW
        + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        [("get_weather", W)],
    ),
    "deepseek_v31_two": (
        "Let me check<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        + W_RAW
        + "<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}"
        + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        [("get_weather", W), ("get_time", {})],
    ),
    "qwen25_think_then_call": (
        '<think>\nThe user wants Tokyo. I might write <tool_call>{"name": "rm", "arguments": {}}'
        "</tool_call> but no.\n</think>\n\n<tool_call>\n"
        + '{"name": "get_weather", "arguments": '
        + W_RAW
        + "}\n</tool_call><|im_end|>",
        [("get_weather", W)],
    ),
}


def _calls(result: ParseResult) -> list[tuple[str, Any]]:
    return [(call.name, call.arguments) for call in result.calls]


def _typed(result: ParseResult) -> None:
    assert isinstance(result, ParseResult)
    if result.error is not None:
        assert result.error.category == "parse_error", result.error
        assert result.error.details["reason"]
        assert result.error.recovery


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_each_engine_output_parses_to_its_calls(name: str) -> None:
    text, calls = OUTPUTS[name]
    result = parse(text)
    assert result.error is None, result.error
    assert _calls(result) == calls


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_every_cut_of_an_engine_output_is_a_prefix_of_its_calls_never_a_half_call(name: str) -> None:
    text, calls = OUTPUTS[name]
    for cut in range(len(text) + 1):
        result = parse(text[:cut])
        _typed(result)
        got = _calls(result)
        assert got == calls[: len(got)], (cut, text[:cut][-30:], got)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(OUTPUTS)), st.data())
def test_any_split_of_a_stream_reports_a_prefix_and_finishes_as_the_whole(
    name: str, data: st.DataObject
) -> None:
    text, calls = OUTPUTS[name]
    cut = data.draw(st.integers(min_value=0, max_value=len(text)), label="cut")
    body = text[:cut]
    bounds = sorted(
        data.draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=12), label="splits")
    )
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    stream = StreamParser()
    shown = [call for piece in pieces for call in stream.feed(piece)]
    result = stream.finish()
    _typed(result)
    assert result == parse(body)
    got = _calls(result)
    assert got == calls[: len(got)]
    assert [(c.name, c.arguments) for c in shown] == got[: len(shown)] or result.error is not None


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(OUTPUTS)), st.data())
def test_noise_spliced_into_an_engine_output_never_raises(name: str, data: st.DataObject) -> None:
    text, _ = OUTPUTS[name]
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    noise = data.draw(st.text(alphabet='{}[]()<>|"\\:;,=`\n /' + "abc▁｜", max_size=6))
    mangled = text[:at] + noise + text[at:]
    _typed(parse(mangled))
    stream = StreamParser()
    for piece in (mangled[: at // 2], mangled[at // 2 :]):
        stream.feed(piece)
    _typed(stream.finish())


@pytest.mark.parametrize(
    "text",
    [
        "<function=get_weather>\n<parameter=city>\nDallas\n</parameter>\n</function>",
        'Checking.\n<function=get_weather>{"city": "Dallas"}</function>',
    ],
    ids=["qwen3_coder_unwrapped", "llama31_function_tag"],
)
def test_function_blocks_without_a_wrapper_are_labelled_with_their_format(text: str) -> None:
    # vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py feeds calls without <tool_call>; the
    # result was labelled "empty", the label of an output holding nothing
    result = parse(text)
    assert result.error is None
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Dallas"})]
    assert result.format == "qwen3_xml"
