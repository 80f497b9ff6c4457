"""``ids_apart``: the calls of a message that carry no id get ids none of its calls carries, when
the model wrote ids of the form a runtime mints (``<run>:n<k>``); the ids it gave stay as they are."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from actionspace.parse import ParseResult, ids_apart, parse
from actionspace.types import ToolCall

PREFIX = "conv:"
ids = (
    st.none()
    | st.integers(1, 12).map(lambda k: f"{PREFIX}n{k}")
    | st.sampled_from(["c1", "conv:", "conv:parse"])
)


def _result(call_ids: list[str | None]) -> ParseResult:
    calls = tuple(ToolCall(name="t", arguments={"i": i}, id=cid) for i, cid in enumerate(call_ids))
    return ParseResult(calls=calls, content=None, reasoning=None, error=None, format="openai_chat")


@given(
    st.lists(ids, min_size=1, max_size=12).filter(
        lambda xs: len({x for x in xs if x}) == len([x for x in xs if x])
    )
)
def test_minted_ids_skip_every_id_of_the_message_and_given_ids_stay(call_ids: list[str | None]) -> None:
    parsed = _result(call_ids)
    out = ids_apart(parsed, PREFIX, itertools.count(1))
    got = [c.id for c in out.calls]
    assert [c.arguments for c in out.calls] == [c.arguments for c in parsed.calls]
    for before, after in zip(call_ids, got, strict=True):
        assert after == before or (before is None and after is not None and after.startswith(f"{PREFIX}n"))
    if None in call_ids and any(i is not None and i.startswith(PREFIX) for i in call_ids):
        assert None not in got and len(set(got)) == len(got)
    else:
        assert out is parsed  # nothing could collide: the parse is handed back as it is


def test_an_openai_message_with_one_id_less_call_gets_a_free_id() -> None:
    entry = {"type": "function", "function": {"name": "t", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [entry, {**entry, "id": "conv:n1"}]}
    out = ids_apart(parse(message), PREFIX, itertools.count(1))
    assert [c.id for c in out.calls] == ["conv:n2", "conv:n1"]
