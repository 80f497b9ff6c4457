"""A raw text stream never reports a call that a reasoning closer still to come turns into reasoning.

A reasoning model whose chat template opens ``<think>`` in the prompt writes its reasoning first and
closes it with an orphan ``</think>``: whole, a call drafted before that closer is reasoning, no
call. ``StreamParser()`` (whether the prompt opened a block not known) reported such a drafted call
from ``feed`` as soon as its ``</tool_call>`` arrived, and ``finish`` then held no such call. Now a
raw text call is reported once no closer still to come can make it reasoning (the text holds a
reasoning opener or closer), else only at ``finish``; ``in_reasoning=False`` keeps reporting calls
as soon as they are complete. The outputs are written for these tests.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse

DRAFT = 'I could call <tool_call>{"name": "delete_repo", "arguments": {"name": "prod"}}</tool_call> but no.'
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'


def _call(name: str, n: int) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {{"n": {n}}}}}</tool_call>'


def _feed_cut(stream: StreamParser, text: str, cuts: list[int]) -> list[list[str]]:
    """The calls shown after each piece, and checks at each that they are what ``finish`` keeps."""
    shown: list[str] = []
    seen: list[list[str]] = []
    points = sorted({0, len(text), *(c for c in cuts if 0 < c < len(text))})
    for a, b in itertools.pairwise(points):
        shown += [c.name for c in stream.feed(text[a:b])]
        so_far = [c.name for c in stream.finish().calls]
        assert shown == so_far[: len(shown)], (text[:b], shown, so_far)
        seen.append(list(shown))
    return seen


@pytest.mark.parametrize("closer", ["</think>", "</thinking>", "[/THINK]"])
@pytest.mark.parametrize("step", [1, 3, 7, 64])
def test_a_call_drafted_before_an_orphan_closer_is_never_reported(closer: str, step: int) -> None:
    text = DRAFT + "\n" + closer + "\n\n" + CALL
    stream = StreamParser()
    shown = _feed_cut(stream, text, list(range(step, len(text), step)))[-1]
    assert stream.finish() == parse(text)
    assert [c.name for c in stream.finish().calls] == ["get_weather"]
    assert shown == ["get_weather"]


def test_without_a_reasoning_tag_calls_are_shown_provisionally_and_kept_by_finish() -> None:
    stream = StreamParser()
    for at in range(0, len(CALL + CALL), 5):
        assert stream.feed((CALL + CALL)[at : at + 5]) == []
    assert [c.name for c in stream.progress().provisional] == ["get_weather", "get_weather"]
    assert [c.name for c in stream.finish().calls] == ["get_weather", "get_weather"]


def test_a_reasoning_block_the_model_opens_settles_the_stream_at_its_opener() -> None:
    text = "<think>" + DRAFT + "</think>" + CALL + CALL
    stream = StreamParser()
    shown = [c.name for at in range(0, len(text), 4) for c in stream.feed(text[at : at + 4])]
    assert shown == ["get_weather", "get_weather"]
    assert stream.finish() == parse(text)


def test_in_reasoning_false_reports_calls_as_soon_as_they_are_complete() -> None:
    stream = StreamParser(in_reasoning=False)
    first = [c.name for at in range(0, len(CALL), 7) for c in stream.feed(CALL[at : at + 7])]
    assert first == ["get_weather"]


def test_the_earliest_orphan_closer_ends_the_reasoning_whatever_its_family() -> None:
    # the first closer settles a stream: a later closer of another family may not reach back
    text = "plan</thinking>" + _call("a", 1) + " then </think>" + _call("b", 2)
    assert [c.name for c in parse(text).calls] == ["a", "b"]
    assert parse(text).reasoning == "plan"


_PROSE = st.sampled_from(["Okay, ", "let me think. ", "Hmm\n", "", "the user wants it. ", "x < y "])
_CLOSERS = st.sampled_from(["</think>", "</thinking>", "[/THINK]"])
_OPENS = st.sampled_from([("<think>", "</think>"), ("<thinking>", "</thinking>"), ("[THINK]", "[/THINK]")])


@st.composite
def _outputs(draw: st.DrawFn) -> str:
    """Outputs with reasoning: an orphan block the prompt opened, blocks the model opens, calls
    drafted in both, and calls in the answer."""
    parts: list[str] = []
    n = 0
    if draw(st.booleans()):
        for _ in range(draw(st.integers(0, 2))):
            parts += [draw(_PROSE), _call("draft", n)]
            n += 1
        parts += [draw(_PROSE), draw(_CLOSERS)]
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            opener, closer = draw(_OPENS)
            parts += [opener, draw(_PROSE), _call("draft", n) if draw(st.booleans()) else "", closer]
        else:
            parts += [draw(_PROSE), _call(f"call{n}", n)]
        n += 1
    return "".join(parts)


@settings(max_examples=250, deadline=None)
@given(_outputs(), st.lists(st.integers(0, 600), max_size=12))
def test_feed_agrees_with_finish_at_every_cut_of_outputs_with_reasoning(text: str, cuts: list[int]) -> None:
    stream = StreamParser()
    seen = _feed_cut(stream, text, cuts)
    whole = parse(text)
    assert stream.finish() == whole
    assert not any(c.name == "draft" for c in whole.calls)
    shown = seen[-1] if seen else []
    assert shown == [c.name for c in whole.calls][: len(shown)]
