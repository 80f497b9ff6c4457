"""The id a run gives a call of a message that has none skips every id the message holds, for a
call whose id is empty as for one with no id, and for a message streamed (``Runtime.astream``) as
for one run whole.

An empty id was kept as the call's when ids were set apart, so the runtime later gave that call
``<run>:n<k>`` from the run's counter without looking at the message: a model that wrote
``<run>:n<k>`` for another call of the same message (the counter is easy to guess) had both calls
run under one id, one answer dropped, and the other call's result handed back under its id.
``astream`` did not set ids apart at all: a call without an id was given ``<run>:n<k>`` even when
another call of its message wrote that id.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from actionspace import Runtime, ToolCall
from actionspace.parse import ParseResult
from actionspace.types import Observation


def _runtime(ran: list[int]) -> Runtime:
    rt = Runtime("memory://")

    def bump(x: int) -> int:
        ran.append(x)
        return x

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    rt.add_tool(name="bump", input_schema=schema, fn=bump, effect="read", description="Bump.")
    return rt


def _says(ids: list[str | None]) -> ParseResult:
    calls = tuple(ToolCall(name="bump", arguments={"x": i}, id=ident) for i, ident in enumerate(ids))
    return ParseResult(calls=calls, content=None, reasoning=None, error=None, format="openai_chat")


def _check(ids: list[str | None], out: tuple[Observation, ...]) -> None:
    assert len({o.call_id for o in out}) == len(ids), [o.call_id for o in out]  # one id per call
    for ident, obs in zip(ids, out, strict=True):
        assert obs.ok, obs.error
        if ident:
            assert obs.call_id == ident
        assert obs.data == ids.index(ident)  # each call's own result under its id


@pytest.mark.parametrize("k", range(4))
@pytest.mark.parametrize("together", [False, True], ids=["handle", "ahandle"])
def test_a_call_with_an_empty_id_is_not_given_the_id_another_call_of_its_message_wrote(
    k: int, together: bool
) -> None:
    ran: list[int] = []
    rt = _runtime(ran)
    try:
        s = rt.session(provider="openai_chat")
        s.user("bump them")
        ids: list[str | None] = ["", f"{s.run_id}:n{k}"]  # n<k>: the counter's next values, guessed
        said = _says(ids)  # a parse handed over (a model's own reader, a stream's)
        turn = asyncio.run(s.ahandle(said)) if together else s.handle(said)
        _check(ids, turn.observations)
        assert [m["tool_call_id"] for m in turn.messages] == [o.call_id for o in turn.observations]
        assert sorted(ran) == [0, 1]
    finally:
        rt.close()


@pytest.mark.parametrize("k", range(4))
def test_a_streamed_call_without_an_id_is_not_given_the_id_another_call_of_its_message_wrote(k: int) -> None:
    ran: list[int] = []
    rt = _runtime(ran)
    run_id = rt.new_run()
    written = f"{run_id}:n{k}"  # the counter's next values, guessed
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"type": "function", "function": {"name": "bump", "arguments": json.dumps({"x": 0})}},
            {
                "id": written,
                "type": "function",
                "function": {"name": "bump", "arguments": json.dumps({"x": 1})},
            },
        ],
    }

    async def finals() -> tuple[Observation, ...]:
        return tuple([o async for o in rt.astream(message, run_id=run_id) if not o.provisional])

    try:
        _check([None, written], asyncio.run(finals()))
        assert sorted(ran) == [0, 1]
        answered = {e.call_id for e in rt.trace.events(run_id) if e.kind == "observation"}
        assert len(answered) == 2 and written in answered  # the trace holds each call's own answer
    finally:
        rt.close()
