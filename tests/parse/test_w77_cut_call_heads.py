"""Calls written without an opening marker (a JSON call object or list, a fenced JSON block, a
pythonic list) are only told from words once enough of them arrived. An output known to be cut
off (finish reason ``length`` / ``max_tokens``, ``StreamParser.end("length")``, events without
their finish signal) whose visible text is a proper prefix of such a call (``{"na``, ``[{"name"``,
```` ```json\\n{"na ````, ``[get_weather(ci``) was cut as the model began it: a ``parse_error``
(``cut_off``) asking to re-emit the call, never a plain answer. Without a cut, nothing changes."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import ActionError, parse
from actionspace.parse import ParseResult, StreamParser

_REEMIT = ActionError.of("parse_error", "x").recovery
A = {"to": "bob", "text": "late"}
B = {"to": "amy", "text": "on my way"}
ONE = json.dumps({"name": "send_sms", "arguments": A})
TWO = json.dumps({"name": "send_sms", "arguments": B})

# (format, a whole output of two calls in it)
WHOLE = [
    ("json object", ONE),
    ("json objects", f"{ONE}\n{TWO}"),
    ("json list", f"[{ONE}, {TWO}]"),
    ("llama3 json", json.dumps({"name": "send_sms", "parameters": A})),
    ("openai entry json", json.dumps({"type": "function", "function": {"name": "send_sms", "arguments": A}})),
    ("fenced json", f"```json\n{ONE}\n```"),
    ("fenced json list", f"```json\n[{ONE}, {TWO}]\n```"),
    ("bare fence", f"```\n{ONE}\n```"),
    ("pythonic", "[send_sms(to='bob', text='late'), send_sms(to='amy', text='on my way')]"),
]

HEADS = [
    "{",
    '{"',
    '{"na',
    '{"name"',
    '{"function',
    "[{",
    '[{"na',
    '[ {"name" ',
    '[{"name": "send_sms", "arguments": {"to": "b',
    "`",
    "``",
    "```",
    "```js",
    "```json",
    "```json\n",
    '```json\n{"na',
    '```json\n[{"name"',
    f"```json\n{ONE}\n`",
    f"```json\n{ONE}\n``",
    "[get_weather",
    "[get_weather(ci",
    '<think>The user wants Bob texted.</think>\n{"na',
]


def _completion(text: str, finish: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
    return {"object": "chat.completion", "choices": [choice]}


def _chunks(text: str, finish: str | None) -> list[dict[str, Any]]:
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    out: list[dict[str, Any]] = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": p}}]}
        for p in pieces
    ]
    if finish is not None:
        end = {"index": 0, "delta": {}, "finish_reason": finish}
        out.append({"object": "chat.completion.chunk", "choices": [end]})
    return out


def _raw_stream(text: str, reason: str | None, cuts: list[int] = []) -> StreamParser:  # noqa: B006
    stream = StreamParser()
    points = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    for a, b in itertools.pairwise(points):
        stream.feed(text[a:b])
    stream.end(reason)
    return stream


def _cut_results(text: str, cuts: list[int] = []) -> dict[str, ParseResult]:  # noqa: B006
    stream = _raw_stream(text, "length", cuts)
    return {
        "completion": parse(_completion(text, "length")),
        "message": parse({"role": "assistant", "content": text, "stop_reason": "max_tokens"}),
        "raw stream": stream.finish(),
        "raw stream output": parse(stream.output()),
        "chunks": parse(_chunks(text, "length")),
        "unfinished chunks": parse(_chunks(text, None)),
    }


@pytest.mark.parametrize("text", HEADS)
def test_a_cut_output_that_is_the_head_of_an_unmarked_call_is_cut_off(text: str) -> None:
    for how, result in _cut_results(text).items():
        assert result.calls == (), how
        assert result.error is not None and result.error.category == "parse_error", how
        assert result.error.recovery == _REEMIT, how
        # a lost end (no finish signal) keeps the fault its text had where there is one
        reasons = {"cut_off", "truncated"} if how == "unfinished chunks" else {"cut_off"}
        assert result.error.details["reason"] in reasons, how


def test_the_error_says_where_the_call_began() -> None:
    text = '<think>The user wants Bob texted.</think>\n{"na'
    result = parse(_completion(text, "length"))
    assert result.error is not None
    assert result.error.details["position"] == text.index("{")
    assert '{"na' in result.error.message


@pytest.mark.parametrize("text", ['{"na', "[{", '```json\n{"na', "```", "`", "[get_weather", '[{"name"'])
def test_without_a_cut_the_same_text_is_read_as_before(text: str) -> None:
    for result in (
        parse(_completion(text, "stop")),
        parse({"role": "assistant", "content": text}),
        parse(_chunks(text, "stop")),
    ):
        assert result.error is None and result.calls == () and result.content == text


@pytest.mark.parametrize(
    "text",
    [
        "[1] Smith et al.",
        "```python\nprint(",
        "```json\n[1, 2",
        'On it. {"na',
        "[see the docs] for",
        "`code` is",
        "Done",
        "[get weather",
    ],
)
def test_a_cut_answer_that_no_unmarked_call_begins_with_stays_a_plain_answer(text: str) -> None:
    for result in (parse(_completion(text, "length")), _raw_stream(text, "length").finish()):
        assert result.error is None and result.calls == () and result.content == text


@settings(max_examples=400, deadline=None)
@given(
    case=st.sampled_from(WHOLE),
    lead=st.sampled_from(["", "\n", "  "]),
    cut_at=st.integers(1, 400),
    cuts=st.lists(st.integers(1, 400), max_size=5),
)
def test_any_prefix_of_an_unmarked_call_list_marked_cut_is_no_answer_and_runs_no_call(
    case: tuple[str, str], lead: str, cut_at: int, cuts: list[int]
) -> None:
    _, whole = case
    output = lead + whole
    prefix = output[: min(len(lead) + cut_at, len(output))]
    for how, result in _cut_results(prefix, cuts).items():
        assert result.calls == (), how
        assert result.error is not None and result.error.category == "parse_error", (how, prefix)
        assert result.error.recovery[0] == "re_emit_call", how
