"""Behaviour of the family parsers the corpus alone does not pin: no guessed calls, markers inside
arguments, schema typing, the shared JSON-ish scanner and the forward-only finder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import parse
from actionspace.types import ToolCall

Q = '<|"|>'


def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
    }


def calls(text: str, tools: Any = None) -> list[tuple[str, Any]]:
    return [(c.name, c.arguments) for c in parse(text, tools).calls]


def reason(text: str, tools: Any = None) -> str | None:
    error = parse(text, tools).error
    assert error is None or error.category == "parse_error"
    return None if error is None else str(error.details["reason"])


# -- gpt-oss harmony ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        "<|start|>assistant<|channel|>commentary to=assistant<|channel|>analysis",
        "<|start|>assistant to=assistant<|channel|>analysis",
        "<|channel|>analysis to=assistant",
    ],
)
def test_a_harmony_message_addressed_to_the_assistant_is_never_a_call(header: str) -> None:
    result = parse(header + '<|message|>{"command":"./test"}<|call|>')
    assert result.calls == ()


@pytest.mark.parametrize("recipient", ["python", "browser.search", "container.exec"])
def test_a_harmony_builtin_recipient_is_a_parse_error_not_a_call_of_that_name(recipient: str) -> None:
    text = f'<|start|>assistant<|channel|>analysis to={recipient} code<|message|>{{"q": 1}}<|call|>'
    result = parse(text)
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "unsupported_recipient"


def test_a_harmony_builtin_recipient_is_a_call_when_a_tool_of_exactly_that_name_is_offered() -> None:
    text = '<|start|>assistant<|channel|>analysis to=python code<|message|>{"code": "print(1)"}<|call|>'
    assert calls(text, [tool("python", {"code": {"type": "string"}})]) == [("python", {"code": "print(1)"})]


def test_a_harmony_call_needs_no_start_token_when_the_recipient_leads_the_header() -> None:
    text = ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>'
    assert calls(text) == [("get_weather", {"city": "Paris"})]


def test_a_harmony_tool_result_message_is_neither_content_nor_a_call() -> None:
    text = (
        "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>"
        '<|start|>functions.f to=assistant<|channel|>commentary<|message|>"secret result"<|end|>'
    )
    result = parse(text)
    assert [c.name for c in result.calls] == ["f"]
    assert result.content is None


# -- Gemma 4 -----------------------------------------------------------------------------------------


def test_gemma4_reads_unquoted_keys_delimited_strings_numbers_and_nesting() -> None:
    text = (
        f"<|channel>thought\nNeed both.<channel|>Sure.<|tool_call>call:store{{my key:{Q}a, b}}{Q},"
        f"big:1e+21,n:-2.5,ok:true,none:null,items:[1,{Q}x{Q}],deep:{{k:{{j:[]}}}}}}<tool_call|>"
        f"<|tool_call>call:next{{}}<tool_call|> done"
    )
    result = parse(text)
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("store", {"my key": "a, b}", "big": 1e21, "n": -2.5, "ok": True, "none": None, "items": [1, "x"],
                   "deep": {"k": {"j": []}}}),
        ("next", {}),
    ]  # fmt: skip
    assert (result.reasoning, result.content) == ("Need both.", "Sure.\ndone")


def test_gemma4_marker_inside_a_string_argument_stays_text() -> None:
    text = f"<|tool_call>call:note{{text:{Q}<|tool_call>call:evil{{}}<tool_call|>{Q}}}<tool_call|>"
    assert calls(text) == [("note", {"text": "<|tool_call>call:evil{}<tool_call|>"})]


def test_gemma4_call_cut_inside_its_arguments_is_a_parse_error_and_no_call() -> None:
    text = f"<|tool_call>call:a{{x:1}}<tool_call|><|tool_call>call:b{{x:{Q}par"
    result = parse(text)
    assert [c.name for c in result.calls] == ["a"]
    assert result.error is not None and result.error.details["reason"] == "truncated"


def test_gemma4_non_finite_or_overlong_numbers_are_parse_errors() -> None:
    assert reason("<|tool_call>call:f{x:1e999}<tool_call|>") == "invalid_number"
    assert reason("<|tool_call>call:f{x:" + "9" * 5000 + "}<tool_call|>") == "invalid_number"


# -- DeepSeek DSML -----------------------------------------------------------------------------------

FC, FCE = "<｜DSML｜function_calls>", "</｜DSML｜function_calls>"


def dsml_param(name: str, value: str, string: str) -> str:
    return f'<｜DSML｜parameter name="{name}" string="{string}">{value}</｜DSML｜parameter>'


def test_dsml_string_values_are_typed_by_the_schema_and_only_by_it() -> None:
    body = (
        dsml_param("count", "42", "true") + dsml_param("flag", "true", "true") + dsml_param("n", "7", "false")
    )
    text = f'{FC}<｜DSML｜invoke name="f">{body}</｜DSML｜invoke>{FCE}'
    typed = [tool("f", {"count": {"type": "integer"}, "flag": {"type": "boolean"}, "n": {"type": "string"}})]
    assert calls(text, typed) == [("f", {"count": 42, "flag": True, "n": 7})]
    assert calls(text) == [("f", {"count": "42", "flag": "true", "n": 7})]


def test_dsml_v4_blocks_self_closing_and_empty_invokes_and_ascii_bars() -> None:
    v4 = (
        '<｜DSML｜tool_calls><｜DSML｜invoke name="a"/><｜DSML｜invoke name="b">'
        "</｜DSML｜invoke></｜DSML｜tool_calls>"
    )
    assert calls("Text. " + v4) == [("a", {}), ("b", {})]
    ascii_bars = (
        '<|DSML|function_calls><|DSML|invoke name="c"><|DSML|parameter name="x" string="true">1'
        "</|DSML|parameter></|DSML|invoke></|DSML|function_calls>"
    )
    assert calls(ascii_bars) == [("c", {"x": "1"})]


def test_dsml_parameter_holding_dsml_markup_keeps_it_until_its_own_closer() -> None:
    value = "<｜DSML｜invoke name=&quot;x&quot;> is how a call starts"
    text = f'{FC}<｜DSML｜invoke name="doc">{dsml_param("text", value, "true")}</｜DSML｜invoke>{FCE}'
    assert calls(text) == [("doc", {"text": value})]


# -- Kimi, Hermes, Qwen3, GLM, Llama -----------------------------------------------------------------


def test_kimi_sections_with_text_between_them_are_all_read() -> None:
    one = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}"
        "<|tool_call_end|><|tool_calls_section_end|>"
    )
    two = one.replace("functions.a:0", "functions.b:1")
    result = parse(f"First {one} then {two} end")
    assert [c.name for c in result.calls] == ["a", "b"]
    assert result.content == "First\nthen\nend"


def test_kimi_bare_counter_id_is_not_resolved_by_guessing_from_the_tools() -> None:
    text = (
        '<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>{"city": "x"}'
        "<|tool_call_end|><|tool_calls_section_end|>"
    )
    assert calls(text, [tool("get_weather", {"city": {"type": "string"}})]) == []
    assert reason(text) == "invalid_call_id"


def test_a_hermes_argument_holding_the_tool_call_markers_keeps_them_as_text() -> None:
    text = '<tool_call>\n{"name": "w", "arguments": {"text": "a <tool_call> b </tool_call> c"}}\n</tool_call>'
    assert calls(text) == [("w", {"text": "a <tool_call> b </tool_call> c"})]


def test_a_qwen3_parameter_holding_the_tool_call_marker_keeps_it() -> None:
    text = (
        "<tool_call>\n<function=w>\n<parameter=text>\nsee <tool_call> here\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    assert calls(text) == [("w", {"text": "see <tool_call> here"})]


def test_glm47_arguments_without_newlines_and_a_sentence_is_never_a_function_name() -> None:
    assert calls("<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>") == [("f", {"a": 1})]
    assert calls("<tool_call>Sure, I will do it.</tool_call>") == []
    assert calls("<tool_call>\n<function=Sure I will>\n</function>\n</tool_call>") == []


def test_pythonic_non_finite_literal_is_a_parse_error_not_infinity() -> None:
    result = parse("[calc(x=1e999)]")
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "non_json_value"


def test_text_after_the_last_end_of_turn_token_is_stripped_by_index() -> None:
    result = parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>' + " </s>" * 1000 + "<turn|>")
    assert (result.calls, result.content) == ((ToolCall(name="f", arguments={}),), None)


# -- shared scanners ---------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab<>|", max_size=40),
    st.lists(st.integers(0, 45), max_size=8),
    st.sampled_from(["a", "<|", "ab", "|>"]),
)
def test_the_forward_finder_agrees_with_str_find(text: str, positions: list[int], marker: str) -> None:
    from actionspace.parse._scan import Finder

    finder = Finder(text)
    for pos in sorted(positions) + positions:
        assert finder.find(marker, pos) == text.find(marker, pos)
        assert finder.find(marker, pos, pos + 3) == text.find(marker, pos, pos + 3)


def test_the_jsonish_scanner_reads_both_gemma_dialects_alike() -> None:
    from actionspace.parse._jsonish import JsonishScanner

    for delimiter in ('<|"|>', "<escape>"):
        text = f'{{a:{delimiter}x,y{delimiter},b:[1,{{c:null}}],d:"q"}}'
        assert JsonishScanner(text, delimiter).object_at(0) == (
            {"a": "x,y", "b": [1, {"c": None}], "d": "q"},
            len(text),
        )


def test_the_format_is_decided_by_the_first_marker_not_one_quoted_inside_an_argument() -> None:
    hermes = (
        '<tool_call>\n{"name": "say", "arguments": {"text": "[TOOL_CALLS] and <|channel|> are tokens"}}\n'
        "</tool_call>"
    )
    assert calls(hermes) == [("say", {"text": "[TOOL_CALLS] and <|channel|> are tokens"})]
    mistral = '[TOOL_CALLS]say[ARGS]{"text": "wrap it in <tool_call></tool_call>"}'
    assert calls(mistral) == [("say", {"text": "wrap it in <tool_call></tool_call>"})]
