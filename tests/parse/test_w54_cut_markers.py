"""Raw text that stops inside the opening marker of another call (``…</tool_call><tool_ca``) was
cut as the model began that call: the output is a ``parse_error`` (reason ``truncated``) whose
recovery is to re-emit the calls, and a session runs none of them. Text that merely ends with
``<`` after other words is still read as it was."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, parse
from actionspace.parse._deepseek import DEEPSEEK, DSML_MARKERS
from actionspace.parse._gemma import FUNCTION_GEMMA, GEMMA4
from actionspace.parse._harmony import HARMONY_START
from actionspace.parse._kimi import KIMI
from actionspace.parse._llama import PYTHON_START, PYTHON_TAG
from actionspace.parse._mistral import MISTRAL_CALLS
from actionspace.parse._qwen_xml import FUNCTION_OPEN
from actionspace.parse._tagged import TOOL_CALL_OPEN

A = json.dumps({"to": "bob", "text": "late"})
KIMI_CALL = f"{KIMI.call_open}functions.send_sms:0<|tool_call_argument_begin|>{A}<|tool_call_end|>"
DEEPSEEK_CALL = f"{DEEPSEEK.call_open}send_sms<｜tool▁sep｜>{A}<｜tool▁call▁end｜>"
DSML_CALL = (
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="send_sms">\n'
    '<｜DSML｜parameter name="to" string="true">bob</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="text" string="true">late</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
)

# (format, one whole call in it, the opening markers another call would begin with)
WHOLE: list[tuple[str, str, tuple[str, ...]]] = [
    ("hermes", f'<tool_call>{{"name": "send_sms", "arguments": {A}}}</tool_call>', (TOOL_CALL_OPEN,)),
    (
        "qwen3_xml",
        "<tool_call>\n<function=send_sms>\n<parameter=to>\nbob\n</parameter>\n"
        "<parameter=text>\nlate\n</parameter>\n</function>\n</tool_call>",
        (TOOL_CALL_OPEN,),
    ),
    (
        "qwen3_xml bare",
        "<function=send_sms>\n<parameter=to>\nbob\n</parameter>\n<parameter=text>\nlate\n</parameter>\n</function>",
        (FUNCTION_OPEN,),
    ),
    (
        "glm45",
        "<tool_call>send_sms\n<arg_key>to</arg_key>\n<arg_value>bob</arg_value>\n"
        "<arg_key>text</arg_key>\n<arg_value>late</arg_value>\n</tool_call>",
        (TOOL_CALL_OPEN,),
    ),
    ("llama3", f'{PYTHON_TAG}{{"name": "send_sms", "parameters": {A}}}', (PYTHON_TAG,)),
    ("llama4 pythonic", f"{PYTHON_START}[send_sms(to='bob', text='late')]<|python_end|>", (PYTHON_START,)),
    ("mistral", f"{MISTRAL_CALLS}send_sms[ARGS]{A}", (MISTRAL_CALLS,)),
    ("mistral list", f'{MISTRAL_CALLS}[{{"name": "send_sms", "arguments": {A}}}]', (MISTRAL_CALLS,)),
    ("deepseek", f"{DEEPSEEK.section_open}{DEEPSEEK_CALL}{DEEPSEEK.section_close}", (DEEPSEEK.section_open,)),
    ("deepseek dsml", DSML_CALL, (DSML_MARKERS[0],)),
    ("kimi", f"{KIMI.section_open}{KIMI_CALL}{KIMI.section_close}", (KIMI.section_open,)),
    (
        "harmony",
        f"{HARMONY_START}assistant<|channel|>commentary to=functions.send_sms <|constrain|>json"
        f"<|message|>{A}<|call|>",
        (HARMONY_START,),
    ),
    ("gemma4", '<|tool_call>call:send_sms{to:<|"|>bob<|"|>,text:<|"|>late<|"|>}<tool_call|>', (GEMMA4.open,)),
    (
        "function_gemma",
        "<start_function_call>call:send_sms{to:<escape>bob<escape>,text:<escape>late<escape>}<end_function_call>",
        (FUNCTION_GEMMA.open,),
    ),
]
CASES = [
    (fmt, whole, marker[:n])
    for fmt, whole, markers in WHOLE
    for marker in markers
    for n in range(1, len(marker))
]


def test_every_whole_call_parses_alone() -> None:
    for fmt, whole, _ in WHOLE:
        result = parse(whole)
        assert result.error is None, fmt
        assert [c.name for c in result.calls] == ["send_sms"], fmt


@pytest.mark.parametrize(("fmt", "whole", "partial"), CASES)
@pytest.mark.parametrize("gap", ["", "\n"])
def test_text_ending_inside_the_opening_marker_of_another_call_is_truncated(
    fmt: str, whole: str, partial: str, gap: str
) -> None:
    result = parse(whole + gap + partial)
    assert result.error is not None, (fmt, partial)
    assert result.error.category == "parse_error" and result.error.details["reason"] == "truncated"
    assert result.error.recovery == ("re_emit_call",)
    assert result.error.details["position"] == len(whole + gap)


@pytest.mark.parametrize("partial", ["<tool_ca", "<", "<tool_call"])
def test_a_session_runs_none_of_the_calls_of_a_message_cut_inside_a_marker(partial: str) -> None:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="external")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        sent.append(to)
        return "sent"

    s = rt.session(provider="openai_chat")
    s.user("text Bob")
    (obs,) = s.handle(WHOLE[0][1] + partial).observations
    assert sent == []
    assert obs.error is not None and obs.error.details["reason"] == "truncated"
    rt.close()


words = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(WHOLE), text=words.filter(lambda t: t.strip() != ""))
def test_text_after_a_call_that_merely_ends_with_a_less_than_sign_is_content(
    case: tuple[str, str, tuple[str, ...]], text: str
) -> None:
    _, whole, _ = case
    before = parse(whole + "\n" + text)
    if before.error is not None or before.calls != parse(whole).calls:
        return  # the words themselves begin or break a call
    result = parse(whole + "\n" + text + " <")
    assert result.error is None and result.calls == before.calls
    assert result.content is not None and result.content.endswith("<")


@settings(max_examples=150, deadline=None)
@given(text=words, tail=st.sampled_from(["<", "<t", "<tool_ca", "[TOOL_CA", "<|python_ta", "a <"]))
def test_a_plain_answer_ending_with_less_than_or_a_marker_piece_is_read_as_before(
    text: str, tail: str
) -> None:
    result = parse(text + tail)
    if TOOL_CALL_OPEN in text or "[" in text or "{" in text or "<" in text or "`" in text:
        return  # another format: not a plain answer
    assert result.error is None and result.calls == ()
