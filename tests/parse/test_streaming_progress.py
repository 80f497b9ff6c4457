"""Progress of a long streamed call costs work in proportion to what arrived, not its square.

A console asks ``progress()`` after each delta to show the call being written. For provider
events, each answer joined every argument delta received so far into a new string: a tool call
writing an 80 KB file in 8-character deltas cost 0.3-0.5 s of parsing, and four times that for
twice the file. These tests count the characters built rather than time them, and hold what a
console is shown to what arrived.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser

EAGER = 8192
"""Below this many characters a call's progress shows every delta at once."""


def _chat(arguments: str, cuts: list[int]) -> Iterator[dict[str, Any]]:
    yield {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "write"}}]}}
        ]
    }
    for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True):
        piece = {"index": 0, "function": {"arguments": arguments[a:b]}}
        yield {"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


def _anthropic(arguments: str, cuts: list[int]) -> Iterator[dict[str, Any]]:
    block = {"type": "tool_use", "id": "t1", "name": "write", "input": {}}
    yield {"type": "content_block_start", "index": 0, "content_block": block}
    for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True):
        delta = {"type": "input_json_delta", "partial_json": arguments[a:b]}
        yield {"type": "content_block_delta", "index": 0, "delta": delta}
    yield {"type": "content_block_stop", "index": 0}
    yield {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}
    yield {"type": "message_stop"}


def _responses(arguments: str, cuts: list[int]) -> Iterator[dict[str, Any]]:
    item = {"type": "function_call", "call_id": "r1", "name": "write", "arguments": ""}
    yield {"type": "response.output_item.added", "output_index": 0, "item": item}
    for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True):
        yield {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": arguments[a:b]}
    yield {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": arguments}
    yield {"type": "response.completed", "response": {"status": "completed"}}


FORMS: dict[str, Callable[[str, list[int]], Iterator[dict[str, Any]]]] = {
    "openai_chat": _chat,
    "anthropic": _anthropic,
    "openai_responses": _responses,
}


@pytest.mark.parametrize("form", FORMS)
def test_showing_progress_after_every_delta_builds_linear_not_quadratic_text(form: str) -> None:
    arguments = json.dumps({"path": "big.txt", "text": "x" * 100_000})
    cuts = list(range(16, len(arguments), 16))
    stream = StreamParser()
    shown: list[str] = []  # kept alive: an id is never reused by a later string
    for event in FORMS[form](arguments, cuts):
        stream.feed(event)
        for call in stream.progress().provisional:
            if not any(call.arguments is s for s in shown[-1:]):
                shown.append(call.arguments)
    built = sum(len(s) for s in shown)
    # every delta below 8 KB, then each time it grew by an eighth: about 2.1 M + 0.9 M characters;
    # before, each of the 6,250 deltas was joined anew: 313 M
    assert built < 4_000_000, built
    assert stream.finish().calls[0].arguments == json.loads(arguments)


@settings(max_examples=60, deadline=None)
@given(
    form=st.sampled_from(sorted(FORMS)),
    size=st.integers(0, 40_000),
    step=st.integers(1, 3_000),
)
def test_progress_shows_a_prefix_of_what_arrived_lagging_at_most_an_eighth(
    form: str, size: int, step: int
) -> None:
    arguments = json.dumps({"text": "y" * size})
    cuts = list(range(step, len(arguments), step))
    stream = StreamParser()
    received = 0
    for event in FORMS[form](arguments, cuts):
        stream.feed(event)
        piece = event.get("delta")
        if form == "openai_chat":
            entries = event["choices"][0]["delta"].get("tool_calls") or [{}]
            received += len(entries[0].get("function", {}).get("arguments", ""))
        elif form == "anthropic" and isinstance(piece, dict):
            received += len(piece.get("partial_json", ""))
        elif form == "openai_responses" and isinstance(piece, str):
            received += len(piece)
        progress = stream.progress()
        assert progress.chars == received
        for call in progress.provisional:
            shown = call.arguments
            assert isinstance(shown, str) and arguments[: len(shown)] == shown
            assert len(shown) == received if received <= EAGER else len(shown) * 9 >= received * 8
    assert [c.arguments for c in stream.finish().calls] == [json.loads(arguments)]


def test_many_parallel_chat_calls_feed_in_time_linear_in_their_number() -> None:
    def stream_of(n: int) -> int:
        stream = StreamParser()
        steps = 0
        for i in range(n):
            head = {"index": i, "id": f"c{i}", "function": {"name": "add", "arguments": ""}}
            for piece in (
                head,
                {"index": i, "function": {"arguments": '{"a": 1, '}},
                {"index": i, "function": {"arguments": '"b": 2}'}},
            ):
                stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
                steps += 1
        stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        assert len(stream.finish().calls) == n
        return steps

    counts = [_lines_run(stream_of, n) for n in (50, 500)]
    # ten times the calls: ten times the lines run, not a hundred (each delta walked every call)
    assert counts[1] < 12 * counts[0], counts


def _lines_run(fn: Callable[[int], object], n: int) -> int:
    """Lines of the stream parser run by ``fn(n)`` (loop iterations included, unlike calls)."""
    import sys

    from actionspace.parse import _stream

    lines = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == _stream.__file__ else None

    sys.settrace(tracer)
    try:
        fn(n)
    finally:
        sys.settrace(None)
    return lines
