"""Every call id the runtime answers under is a string, distinct from the others of its message.

A scripted model (or one replayed from a log) may hand a session a ``ParseResult`` whose calls'
ids are not strings: a JSON number, ``null``, ``true``, an object. Every provider writes its call
ids as strings (OpenAI chat ``tool_calls[].id``, Anthropic ``tool_use.id``, Gemini
``functionCall.id``), so such an id is no id: the call is given one, as a call without one is.
Before, when no id of the message began with the run's prefix, the id was answered as it was (an
``int`` as an observation's ``call_id`` and in the provider's tool message, two calls of one
message under the same ``7``; an object failed the turn in the Gemini rendering).

The property: over messages with ids of every JSON type, duplicates, and more calls than the bound,
every observation's ``call_id`` is a ``str``, and the ids the provider's tool message answers are
strings, each once.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.parse import ParseResult
from actionspace.session import Provider

RUN = "ids"
BOUND = 4

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from(["", "a", "b", "7", f"{RUN}:n1", f"{RUN}:n2", f"{RUN}:0", f"{RUN}:1", f"{RUN}:parse"]),
)
IDS = st.one_of(
    _json_scalars,
    st.lists(_json_scalars, max_size=2),
    st.dictionaries(st.sampled_from(["id", "a"]), _json_scalars, max_size=2),
)


def _runtime() -> Runtime:
    rt = Runtime("memory://")
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    rt.add_tool(name="bump", input_schema=schema, fn=lambda x: x, effect="read", description="Bump.")
    return rt


def _says(ids: list[Any]) -> ParseResult:
    calls = tuple(ToolCall(name="bump", arguments={"x": i}, id=ident) for i, ident in enumerate(ids))
    return ParseResult(calls=calls, content=None, reasoning=None, error=None, format="openai_chat")


def _answered(provider: str, messages: list[dict[str, Any]]) -> list[Any]:
    """The call ids the provider's tool message answers, in order (Gemini: those it names)."""
    if provider == "openai_chat":
        return [m["tool_call_id"] for m in messages]
    if provider == "anthropic":
        return [block["tool_use_id"] for m in messages for block in m["content"]]
    parts = [part["functionResponse"] for m in messages for part in m["parts"] if "functionResponse" in part]
    return [response["id"] for response in parts if "id" in response]


def _check(provider: str, ids: list[Any], turn: Any) -> None:
    assert len(turn.observations) == len(ids)  # one per proposed call
    for obs in turn.observations:
        assert type(obs.call_id) is str and obs.call_id, (ids, obs.call_id)
    answered = _answered(provider, turn.messages)
    assert all(type(ident) is str and ident for ident in answered), (ids, answered)
    assert len(set(answered)) == len(answered), (ids, answered)  # no two answers of the message under one id
    for ident in ids:  # a string id of the model's own is answered under itself
        if type(ident) is str and ident and provider != "gemini":
            assert ident in answered, (ids, answered)


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic", "gemini"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(IDS, min_size=1, max_size=BOUND + 2))
def test_every_answered_call_id_is_a_string_and_once_per_message(provider: Provider, ids: list[Any]) -> None:
    rt = _runtime()
    try:
        session = rt.session(RUN, provider=provider)
        session.max_calls = BOUND
        _check(provider, ids, session.handle(_says(ids)))
    finally:
        rt.close()


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic", "gemini"])
@pytest.mark.parametrize(
    "ident", [7, True, 1.5, {"id": "a"}, [1]], ids=["int", "true", "float", "object", "list"]
)
def test_a_lone_call_whose_id_is_no_string_is_answered_under_one_given_to_it(
    provider: Provider, ident: Any
) -> None:
    """The example: one call whose id is no string, and no id of the message with the run's prefix."""
    rt = _runtime()
    try:
        turn = rt.session(RUN, provider=provider).handle(_says([ident, ident]))
        assert [o.status for o in turn.observations] == ["ok", "ok"]  # two calls without an id: both run
        _check(provider, [ident, ident], turn)
    finally:
        rt.close()
