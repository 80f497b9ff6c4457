"""A chat stream of several candidates (``n`` > 1) is read as its first candidate alone.

Each chunk of such a stream carries one choice, its ``index`` naming the candidate. The chunks were
read by position (``choices[0]``), whatever candidate they belonged to: the candidates' calls were
merged into one message (names glued together, and a call only the second candidate proposed run
as if the model had sent it), and the second candidate's finish reason ended the first. A
completion holding several choices is read as its first; its stream now is too.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.parse import StreamParser, parse


def _chunk(choice: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}],
    }


def _candidate(choice: int, calls: list[tuple[str, str]], pieces: int) -> list[dict[str, Any]]:
    """One candidate's chunks: a call's name and id first, then its arguments in ``pieces`` pieces."""
    chunks = [_chunk(choice, {"role": "assistant", "content": None})]
    for index, (call_id, to) in enumerate(calls):
        function = {"name": "pay", "arguments": ""}
        head = {"index": index, "id": call_id, "type": "function", "function": function}
        chunks.append(_chunk(choice, {"tool_calls": [head]}))
        text = json.dumps({"to": to})
        step = max(1, len(text) // pieces)
        for start in range(0, len(text), step):
            piece = {"index": index, "function": {"arguments": text[start : start + step]}}
            chunks.append(_chunk(choice, {"tool_calls": [piece]}))
    chunks.append(_chunk(choice, {}, "tool_calls"))
    return chunks


def _merge(first: list[Any], second: list[Any], picks: list[bool]) -> list[Any]:
    """The two lists interleaved as ``picks`` says, each in its own order; ``first`` leads."""
    out, a, b = [first[0]], 1, 0
    for take_first in picks:
        if take_first and a < len(first):
            out.append(first[a])
            a += 1
        elif b < len(second):
            out.append(second[b])
            b += 1
    return out + first[a:] + second[b:]


CHOSEN = [("call_a", "alice")]
OTHER = [("call_b", "bob"), ("call_m", "mallory")]


def test_a_second_candidates_call_is_not_run_with_the_first() -> None:
    events = _merge(_candidate(0, CHOSEN, 3), _candidate(1, OTHER, 3), [False, True] * 20)
    stream = StreamParser()
    for event in events:
        stream.feed(event)
    result = stream.finish()
    assert result.error is None, result.error
    assert [(c.name, c.arguments, c.id) for c in result.calls] == [("pay", {"to": "alice"}, "call_a")]
    paid: list[str] = []
    with Runtime("memory://", recover_on_start=False) as rt:

        @rt.tool(effect="external", writes=["account:{to}"])
        def pay(to: str) -> str:
            """Pay someone."""
            paid.append(to)
            return "paid"

        s = rt.session(run_id="choices", provider="openai_chat")
        s.user("pay alice")
        turn = s.handle(stream.output())
        assert [o.call_id for o in turn.observations] == ["call_a"]
        assert [m["tool_call_id"] for m in turn.messages] == ["call_a"]
    assert paid == ["alice"]


def test_a_second_candidate_cut_off_does_not_void_the_first() -> None:
    other = _candidate(1, OTHER, 2)
    other[-1] = _chunk(1, {}, "length")
    events = _merge(_candidate(0, CHOSEN, 2), other, [True, False] * 20)
    result = parse(events)
    assert result.error is None, result.error
    assert [c.id for c in result.calls] == ["call_a"]


@settings(max_examples=150, deadline=None)
@given(
    chosen=st.lists(st.tuples(st.text("abc", min_size=1, max_size=4), st.text(max_size=8)), max_size=3),
    other=st.lists(st.tuples(st.text("xyz", min_size=1, max_size=4), st.text(max_size=8)), max_size=3),
    pieces=st.integers(1, 5),
    picks=st.lists(st.booleans(), max_size=60),
)
def test_any_interleaving_reads_as_the_first_candidate_alone(
    chosen: list[tuple[str, str]], other: list[tuple[str, str]], pieces: int, picks: list[bool]
) -> None:
    chosen = [(f"a{i}_{cid}", to) for i, (cid, to) in enumerate(chosen)]
    other = [(f"b{i}_{cid}", to) for i, (cid, to) in enumerate(other)]
    alone = parse(_candidate(0, chosen, pieces))
    together = parse(_merge(_candidate(0, chosen, pieces), _candidate(1, other, pieces), picks))
    assert together.calls == alone.calls
    assert (together.error is None) == (alone.error is None)
