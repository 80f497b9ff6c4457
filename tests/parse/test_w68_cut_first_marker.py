"""Output known to be cut off (a finish reason ``length`` / ``max_tokens``, ``StreamParser.end`` given
one, or provider events that stop without their finish signal) whose text stops inside the opening
marker of its *first* call (``<tool_ca``, ``[TOOL_C``, ``<|python_ta``) was cut as the model began
that call: a ``parse_error`` of reason ``cut_off`` whose recovery is to re-emit the call, never a
plain answer. Without any sign of a cut such text is still read as the words it is."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import ActionError, parse
from actionspace.parse import ParseResult, StreamParser, call_ids
from tests.parse.test_w54_cut_markers import WHOLE

_REEMIT = ActionError.of("parse_error", "x").recovery
LEADS = ["", "On it.\n", "Let me text Bob. "]
# (format, lead text, the text that stops inside the first call's opening marker)
CASES = [
    (fmt, lead, lead + marker[:n])
    for fmt, _, markers in WHOLE
    for marker in markers[:1]
    for n in range(1, len(marker))
    for lead in LEADS
]
IDS = [f"{fmt}-{len(lead)}-{len(text) - len(lead)}" for fmt, lead, text in CASES]


def _completion(text: str, finish: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
    return {"object": "chat.completion", "choices": [choice]}


def _chunks(text: str, finish: str | None) -> list[dict[str, Any]]:
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    chunks = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": p}}]}
        for p in pieces
    ]
    if finish is not None:
        end = {"index": 0, "delta": {}, "finish_reason": finish}
        chunks.append({"object": "chat.completion.chunk", "choices": [end]})
    return chunks


def _raw_stream(text: str, reason: str | None) -> StreamParser:
    stream = StreamParser()
    for i in range(0, len(text), 4):
        stream.feed(text[i : i + 4])
    stream.end(reason)
    return stream


def _assert_cut(result: ParseResult, where: str) -> None:
    assert result.calls == (), where
    assert result.error is not None, where
    assert result.error.category == "parse_error", where
    assert result.error.details["reason"] == "cut_off", where
    assert result.error.recovery == _REEMIT, where


@pytest.mark.parametrize(("fmt", "lead", "text"), CASES, ids=IDS)
def test_a_completion_cut_by_the_limit_inside_its_first_call_marker_is_cut_off(
    fmt: str, lead: str, text: str
) -> None:
    _assert_cut(parse(_completion(text, "length")), "completion")
    message = {"role": "assistant", "content": text, "stop_reason": "max_tokens"}
    _assert_cut(parse(message), "message")


@pytest.mark.parametrize(("fmt", "lead", "text"), CASES, ids=IDS)
def test_a_raw_text_stream_ended_by_the_limit_inside_its_first_call_marker_is_cut_off(
    fmt: str, lead: str, text: str
) -> None:
    for reason in ("length", "max_tokens", "cut_off"):
        stream = _raw_stream(text, reason)
        _assert_cut(stream.finish(), f"finish {reason}")
        _assert_cut(parse(stream.output()), f"output {reason}")


@pytest.mark.parametrize(("fmt", "lead", "text"), CASES, ids=IDS)
def test_streamed_chunks_cut_or_unfinished_inside_their_first_call_marker_are_cut_off(
    fmt: str, lead: str, text: str
) -> None:
    _assert_cut(parse(_chunks(text, "length")), "length")
    _assert_cut(parse(_chunks(text, None)), "no finish signal")


def test_the_error_says_where_the_marker_began() -> None:
    result = parse(_completion("On it.\n<tool_ca", "length"))
    assert result.error is not None
    assert result.error.details["position"] == len("On it.\n")
    assert "<tool_call>" in result.error.message


@pytest.mark.parametrize(("fmt", "lead", "text"), CASES[:: max(1, len(CASES) // 60)])
def test_without_a_sign_of_a_cut_such_text_stays_a_plain_answer(fmt: str, lead: str, text: str) -> None:
    for result in (
        parse(text),
        parse(_completion(text, "stop")),
        parse(_chunks(text, "stop")),
        _raw_stream(text, "stop").finish(),
        _raw_stream(text, None).finish(),
    ):
        assert result.error is None and result.calls == ()
        assert result.content == text.strip()


@pytest.mark.parametrize("text", ["On it.", "It is 3 < 4", "See [the docs]", "Done"])
def test_a_cut_plain_answer_that_begins_no_marker_stays_a_plain_answer(text: str) -> None:
    for result in (parse(_completion(text, "length")), _raw_stream(text, "length").finish()):
        assert result.error is None and result.calls == () and result.content == text


def _two_calls(whole: str) -> str:
    return whole + "\n" + whole


@settings(max_examples=300, deadline=None)
@given(
    case=st.sampled_from(WHOLE),
    lead=st.sampled_from(LEADS),
    cut_at=st.integers(0, 2000),
    cuts=st.lists(st.integers(1, 2000), max_size=6),
    how=st.sampled_from(["completion", "raw stream", "chunks", "unfinished chunks"]),
)
def test_any_prefix_of_a_two_call_output_marked_cut_runs_no_call_and_is_no_answer_once_a_marker_began(
    case: tuple[str, str, tuple[str, ...]], lead: str, cut_at: int, cuts: list[int], how: str
) -> None:
    _, whole, _ = case
    output = lead + _two_calls(whole)
    prefix = output[: min(cut_at, len(output))]
    if how == "completion":
        result = parse(_completion(prefix, "length"))
    elif how == "raw stream":
        stream = StreamParser()
        points = sorted({0, len(prefix), *(c for c in cuts if c < len(prefix))})
        for a, b in itertools.pairwise(points):
            stream.feed(prefix[a:b])
        stream.end("length")
        result = stream.finish()
        assert parse(stream.output()).calls == ()
        assert (parse(stream.output()).error is None) == (result.error is None)
    else:
        result = parse(_chunks(prefix, "length" if how == "chunks" else None))
    assert result.calls == ()
    if len(prefix) > len(lead):  # the first call's marker began
        assert result.error is not None and result.error.category == "parse_error"
        assert result.error.recovery[0] == "re_emit_call"


@pytest.mark.parametrize("how", ["completion", "unfinished chunks"])
def test_a_cut_output_whose_text_also_stops_inside_a_later_marker_keeps_none_of_its_calls(how: str) -> None:
    text = WHOLE[0][1] + "\n<tool_ca"
    result = parse(_completion(text, "length")) if how == "completion" else parse(_chunks(text, None))
    _assert_cut(result, how)


def test_the_parse_of_a_cut_stream_still_names_the_call_ids_it_voided() -> None:
    stream = StreamParser()
    for index, call_id in enumerate(["c1", "c2"]):
        function = {"name": "send_sms", "arguments": '{"to": "bob"}'}
        entry = {"index": index, "id": call_id, "type": "function", "function": function}
        stream.feed(
            {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]}
        )
    stream.feed(
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    )
    result = stream.finish()
    _assert_cut(result, "chat stream")
    assert call_ids(result) == ("c1", "c2") == call_ids(ParseResult.from_dict(result.to_dict()))
    assert call_ids(parse(_completion("On it.\n<tool_ca", "length"))) == ()
