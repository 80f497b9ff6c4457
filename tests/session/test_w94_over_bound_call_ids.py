"""A message over ``Session.max_calls`` answers each of its calls under an id of its own: a call
without a usable id (none, empty, not a string) is given one that no id of the message holds.

The id given was ``<run>:<index>``, whatever the message held: a model that wrote ``<run>:<k>``
for one call (by chance or on purpose) beside an id-less call at position ``k`` had two calls
answered under one id, one of them dropped from the provider's tool message and from the trace,
and the other answered under the id the model wrote.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.parse import ParseResult
from actionspace.session import Provider
from actionspace.types import Observation

RUN = "over"
BOUND = 2


def _runtime(ran: list[int]) -> Runtime:
    rt = Runtime("memory://")

    def bump(x: int) -> int:
        ran.append(x)
        return x

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    rt.add_tool(name="bump", input_schema=schema, fn=bump, effect="read", description="Bump.")
    return rt


def _says(ids: list[Any]) -> ParseResult:
    """What a scripted model says: one call of ``bump`` per id (``None``: no id)."""
    calls = tuple(ToolCall(name="bump", arguments={"x": i}, id=ident) for i, ident in enumerate(ids))
    return ParseResult(calls=calls, content=None, reasoning=None, error=None, format="openai_chat")


def _answered(provider: str, messages: list[dict[str, Any]]) -> list[str | None]:
    """The call ids the provider's tool message answers, in order (Gemini: ``None`` for no id)."""
    if provider == "openai_chat":
        return [m["tool_call_id"] for m in messages]
    if provider == "anthropic":
        (content,) = messages
        return [block["tool_use_id"] for block in content["content"]]
    (content,) = messages
    return [part["functionResponse"].get("id") for part in content["parts"]]


def _own(ident: Any) -> bool:
    return type(ident) is str and ident != ""


def _check(
    provider: str, rt: Runtime, run_id: str, ids: list[Any], observations: tuple[Observation, ...]
) -> None:
    assert len(observations) == len(ids)
    assert {o.error.category for o in observations if o.error} == {"budget_exceeded"}
    given_ids = [o.call_id for o in observations]
    assert len(set(given_ids)) == len(ids), given_ids  # no two calls of the message share an id
    for ident, obs in zip(ids, observations, strict=True):
        if _own(ident):
            assert obs.call_id == ident  # the model's own id answers its own call
    refused = [e.call_id for e in rt.trace.events(run_id) if e.kind == "observation"]
    assert Counter(refused) == Counter(given_ids)  # the trace holds one refusal per call


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic", "gemini"])
@pytest.mark.parametrize("missing", [None, "", 7], ids=["none", "empty", "not_a_string"])
def test_an_id_less_call_over_the_bound_is_not_given_the_id_another_call_wrote(
    provider: Provider, missing: Any
) -> None:
    ran: list[int] = []
    rt = _runtime(ran)
    try:
        s = rt.session(run_id=RUN, provider=provider)
        s.max_calls = BOUND
        s.user("bump them")
        ids: list[Any] = [missing, f"{RUN}:0", "own"]  # the id-less call is at position 0
        turn = s.handle(_says(ids))
        _check(provider, rt, RUN, ids, turn.observations)
        answered = _answered(provider, turn.messages)
        assert len(answered) == len(ids)  # every call answered, none dropped as a repeat
        if provider == "gemini":  # the model's ids echoed; the one the run gave is not
            assert answered == [None, f"{RUN}:0", "own"]
        else:
            assert answered == [o.call_id for o in turn.observations]
        assert ran == []
    finally:
        rt.close()


_IDS = st.one_of(
    st.none(),
    st.just(""),
    st.builds(lambda k: f"{RUN}:{k}", st.integers(0, 6)),
    st.builds(lambda k, n: f"{RUN}:{k}.{n}", st.integers(0, 6), st.integers(1, 3)),
    st.text(min_size=1, max_size=4),
    st.integers(0, 3),  # an id that is no string: a call without one
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ids=st.lists(_IDS, min_size=BOUND + 1, max_size=7, unique_by=lambda i: i if _own(i) else object()))
def test_every_call_of_a_message_over_the_bound_answers_under_an_id_of_its_own(ids: list[Any]) -> None:
    rt = _runtime([])
    try:
        s = rt.session(run_id=RUN, provider="openai_chat")
        s.max_calls = BOUND
        s.user("bump them")
        turn = s.handle(_says(ids))
        _check("openai_chat", rt, RUN, ids, turn.observations)
        assert _answered("openai_chat", turn.messages) == [o.call_id for o in turn.observations]
    finally:
        rt.close()
