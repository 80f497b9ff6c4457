"""gpt-oss harmony output that stops inside its ``analysis`` message (no ``<|end|>``, nothing after
it) stopped while the model was still reasoning: its answer or its call was never written. As
``<think>`` never closed, it is a ``parse_error`` of reason ``unterminated_reasoning`` (the text kept
as reasoning, the recovery to re-emit), never a finished turn whose answer is nothing. ``<|end|>``,
or the next message's header, closes the analysis; a ``final`` or ``commentary`` message may end
without its stop token, which servers drop."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import ActionError, Runtime, parse
from actionspace.parse import StreamParser

_REEMIT = ActionError.of("parse_error", "x").recovery
OPEN = {
    "bare": "<|channel|>analysis<|message|>The user wants the weather. I should call get_weather",
    "with_start": "<|start|>assistant<|channel|>analysis<|message|>Need the weather for Paris",
    "second_analysis": (
        "<|channel|>analysis<|message|>First thought.<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Second thought, cut"
    ),
    "drafted_call": (
        '<|channel|>analysis<|message|>Maybe commentary to=functions.delete_repo json {"name": "prod"}'
    ),
}
CLOSED = {
    "analysis_ended": ("<|channel|>analysis<|message|>Done thinking.<|end|>", None, "Done thinking."),
    "final_without_return": (
        "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Paris.",
        "Paris.",
        "Easy.",
    ),
}


def _reasoning(text: str) -> str:
    return text.rsplit("<|message|>", 1)[1]


@pytest.mark.parametrize("name", sorted(OPEN))
def test_harmony_output_stopping_inside_its_analysis_is_unterminated_reasoning(name: str) -> None:
    text = OPEN[name]
    result = parse(text)
    assert result.calls == () and result.content is None
    assert result.reasoning is not None and result.reasoning.endswith(_reasoning(text))
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == "unterminated_reasoning"
    assert result.error.recovery == _REEMIT


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(OPEN)), st.lists(st.integers(0, 200), max_size=6))
def test_any_split_of_a_stream_stopping_inside_its_analysis_finishes_as_parse_reads_it(
    name: str, pieces: list[int]
) -> None:
    text = OPEN[name]
    stream = StreamParser()
    points = sorted({0, len(text), *(p % (len(text) + 1) for p in pieces)})
    shown = [call for a, b in itertools.pairwise(points) for call in stream.feed(text[a:b])]
    result = stream.finish()
    assert shown == [] and result == parse(text)
    assert result.error is not None and result.error.details["reason"] == "unterminated_reasoning"


@pytest.mark.parametrize("name", sorted(OPEN))
def test_a_session_given_output_stopping_inside_its_analysis_is_not_done(name: str) -> None:
    rt = Runtime("memory://")
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("What is the weather in Paris?")
    turn = s.handle(OPEN[name])
    assert not turn.done
    (obs,) = turn.observations
    assert obs.error is not None and obs.error.category == "parse_error" and obs.error.recovery == _REEMIT
    assert "parse_error" in turn.messages[0]["content"] and "re_emit_call" in turn.messages[0]["content"]
    rt.close()


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_harmony_messages_closed_or_ending_as_servers_end_them_stay_well_formed(name: str) -> None:
    text, content, reasoning = CLOSED[name]
    result = parse(text)
    assert result.error is None and result.calls == ()
    assert (result.content, result.reasoning) == (content, reasoning)
    rt = Runtime("memory://")
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("What is the weather in Paris?")
    assert s.handle(text).done
    rt.close()
