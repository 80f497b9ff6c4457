"""Model output with the wrong type in any slot: every entry point answers with values, never raises.

``test_fuzz_session.py`` sends well-shaped messages with odd names and arguments; here each slot
of a provider's message (the role, the content, the list of calls, a call's id, type, name and
arguments) may hold any JSON value, huge integers and non-finite floats included, or the whole
message may be one. The session's turn, ``rt.call`` of the raw value and a plan read from such a
mapping each end in observations whose errors carry a category of the taxonomy, never
``internal`` (a failure of ours), and a write tool runs only with arguments its schema accepts.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CATEGORIES, Runtime
from actionspace.session import PROVIDERS, Provider
from actionspace.types import Observation
from tests.text_strategies import any_text, wild_json

_words = st.sampled_from(["put", "get", "put@1", "{", "<tool_call>", "n0", "n1", "#/n0/data", ""]) | any_text
wild = wild_json(_words, max_leaves=15)

_arguments = _words | wild | wild.map(lambda v: json.dumps(v, allow_nan=True))
_function = st.fixed_dictionaries({}, optional={"name": _words | wild, "arguments": _arguments})
_call = st.fixed_dictionaries(
    {},
    optional={
        "id": wild,
        "call_id": wild,
        "type": st.sampled_from(["function", "tool_use", "function_call"]) | wild,
        "function": _function | wild,
        "name": _words | wild,
        "input": wild,
        "arguments": _arguments,
    },
)

_gemini_call = st.fixed_dictionaries(
    {}, optional={"id": wild, "name": _words | wild, "args": wild | _arguments}
)


def _message(provider: Provider) -> st.SearchStrategy[Any]:
    """A message of ``provider``'s form with any value in each slot, or any value at all."""
    calls = st.lists(_call, max_size=4) | wild
    shaped: st.SearchStrategy[Any]
    if provider == "openai_chat":
        shaped = st.fixed_dictionaries(
            {"role": st.just("assistant") | wild}, optional={"content": wild, "tool_calls": calls}
        )
    elif provider == "openai_responses":
        shaped = calls
    elif provider == "gemini":
        part = st.fixed_dictionaries(
            {}, optional={"functionCall": _gemini_call | wild, "text": _words | wild}
        )
        shaped = st.fixed_dictionaries(
            {"role": st.just("model") | wild}, optional={"parts": st.lists(part) | wild}
        )
        shaped |= st.fixed_dictionaries(
            {
                "candidates": st.lists(
                    st.fixed_dictionaries({"content": shaped}, optional={"finishReason": _words})
                )
            }
        )
    else:
        shaped = st.fixed_dictionaries(
            {"role": st.just("assistant") | wild}, optional={"content": calls | _words}
        )
    return shaped | wild


def _runtime() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://")
    ran: list[dict[str, Any]] = []

    @rt.tool(effect="write", writes=["kv:{key}"])
    def put(key: str, value: int) -> dict[str, Any]:
        """Store a value."""
        ran.append({"key": key, "value": value})
        return {"key": key}

    @rt.tool(effect="none")
    async def get(key: str) -> str:
        """Read a value."""
        return key

    return rt, ran


def _typed(observations: Sequence[Observation]) -> None:
    for obs in observations:
        assert obs.ok or (obs.error is not None and obs.error.category in CATEGORIES), obs
        assert obs.error is None or obs.error.category != "internal", obs.error  # a bug of ours
        _typed(obs.items)


def _schema_held(ran: list[dict[str, Any]]) -> None:
    for args in ran:
        assert type(args["key"]) is str and type(args["value"]) is int and not isinstance(args["value"], bool)


_SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@_SETTINGS
@given(st.data())
def test_a_session_answers_any_message_with_typed_observations(data: st.DataObject) -> None:
    provider = data.draw(st.sampled_from(PROVIDERS))
    message = data.draw(_message(provider))
    rt, ran = _runtime()
    s = rt.session(provider=provider)
    s.user("store and read things")
    turn = s.handle(message)
    _typed(turn.observations)
    json.dumps(turn.messages)  # the provider messages are JSON, whatever came in
    _schema_held(ran)


@_SETTINGS
@given(
    _message("openai_chat")
    | _call.map(lambda c: json.dumps(c, allow_nan=True))  # one tool_calls entry as JSON text
    | _words
    | wild.map(lambda v: json.dumps(v, allow_nan=True))
)
def test_a_raw_call_of_any_value_ends_as_a_typed_observation(raw: Any) -> None:
    rt, ran = _runtime()
    _typed([rt.call(raw)])
    _typed([asyncio.run(rt.acall(raw))])
    _schema_held(ran)


_node = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["n0", "n1", "n2"]) | wild,
        "tool": st.sampled_from(["put", "get"]) | wild,
        "arguments": st.fixed_dictionaries(
            {}, optional={"key": _words | wild | st.just({"$ref": "#/n0/data"}), "value": wild}
        )
        | wild,
        "depends_on": st.lists(st.sampled_from(["n0", "n1", "n2"]) | wild, max_size=3) | wild,
        "reads": wild,
        "writes": wild,
        "first_of": wild,
        "independent_of": wild,
    },
)


@_SETTINGS
@given(
    st.fixed_dictionaries(
        {"nodes": st.lists(_node, max_size=4) | wild}, optional={"groups": wild, "max_concurrency": wild}
    )
    | wild
)
def test_a_plan_read_from_any_mapping_is_refused_or_run_with_typed_results(plan: Any) -> None:
    rt, ran = _runtime()
    result = rt.run_plan(plan, run_id=rt.new_run())
    assert result.status in ("ok", "partial", "error")
    if result.error is not None:
        assert result.error.category in CATEGORIES and not result.nodes and not ran
    _typed(list(result.nodes.values()))
    _schema_held(ran)
    assert all(not isinstance(v, float) or math.isfinite(v) for r in ran for v in r.values())
