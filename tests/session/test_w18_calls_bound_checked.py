"""``Session.max_calls`` is checked when set, and a message over it that is also malformed says both.

The bound is a developer's setting: anything but a whole number of at least one (0, a negative
number, a float, a bool, a string, None) is refused where it is set, with ``ConfigurationError``,
and the session keeps the bound it had. A bound of 0 would refuse every call of every message;
a string would fail each message later with a ``TypeError`` the model never sees the reason of.

A message over the bound whose output is also malformed (a call with truncated JSON arguments
after the bound was passed) runs none of its calls, as either fault alone would; every call id
of it is answered once, the calls after the fault too (providers refuse the next request
otherwise), and the model reads both faults: the ``parse_error`` (its calls must be written
again) whose message, ``details`` and ``recovery`` also carry the bound.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.parse import parse
from tests.session.w47_world import answered_ids, chat

_DEFAULT = 512
"""The documented default bound (docs/quickstart.md)."""


def _world(store: str) -> tuple[Runtime, list[str]]:
    rt = Runtime(store, recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="write", writes=["counter:{name}"])
    def set_counter(name: str, value: int) -> dict[str, Any]:
        """Set a counter."""
        sent.append(name)
        return {"name": name, "value": value}

    return rt, sent


_bad_bounds = st.one_of(
    st.integers(max_value=0),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(1, 5), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(bound=_bad_bounds)
def test_a_bound_that_is_not_a_whole_number_of_at_least_one_is_refused_where_it_is_set(bound: Any) -> None:
    rt, sent = _world("memory://")
    try:
        s = rt.session(run_id="conv-bad-bound", provider="openai_chat")
        s.max_calls = 7
        with pytest.raises(ConfigurationError, match="max_calls"):
            s.max_calls = bound
        assert s.max_calls == 7  # the bound it had stands
        s.user("set two")
        turn = s.handle(chat(("a", "set_counter", '{"name": "x", "value": 1}')))
        assert [o.status for o in turn.observations] == ["ok"] and sent == ["x"]
    finally:
        rt.close()


@pytest.mark.parametrize("bound", [1, 2, 10**6])
def test_a_whole_number_bound_is_taken_and_a_new_session_starts_from_the_default(bound: int) -> None:
    rt, _ = _world("memory://")
    try:
        s = rt.session(run_id="conv-good-bound", provider="openai_chat")
        assert s.max_calls == _DEFAULT
        s.max_calls = bound
        assert s.max_calls == bound
        assert rt.session(run_id="conv-good-bound", provider="openai_chat").max_calls == _DEFAULT
    finally:
        rt.close()


def _over_and_cut(good: int) -> dict[str, Any]:
    """``good`` well-formed calls, then one whose JSON arguments stop mid-string, then one more."""
    calls = [(f"w{i}", "set_counter", json.dumps({"name": f"k{i}", "value": i})) for i in range(good)]
    calls.append((f"w{good}", "set_counter", '{"name": "k'))
    calls.append((f"w{good + 1}", "set_counter", '{"name": "z", "value": 9}'))
    return chat(*calls)


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("handed", ["message", "parse_result"])
def test_a_message_over_the_bound_and_malformed_answers_every_id_with_both_faults(
    tmp_path: Path, is_async: bool, handed: str
) -> None:
    rt, sent = _world(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        s = rt.session(run_id="conv-both", provider="openai_chat")
        s.max_calls = 2
        s.user("set them")
        message = _over_and_cut(3)
        # a ParseResult knows the ids up to its fault's (as when it is within the bound), a message all
        ids = [f"w{i}" for i in range(5 if handed == "message" else 4)]
        output: Any = message if handed == "message" else parse(message)
        turn = asyncio.run(s.ahandle(output)) if is_async else s.handle(output)
        assert sent == [] and rt.ledger.list() == []  # none ran, nothing reached the ledger
        assert [o.call_id for o in turn.observations] == ids
        assert answered_ids("openai_chat", turn.messages) == ids  # each id once, after the fault too
        for o in turn.observations:
            assert o.status == "error" and o.error is not None
            assert o.error.category == "parse_error"  # its calls must be written again in any case
            assert "re_emit_call" in o.error.recovery and "send_fewer_calls" in o.error.recovery
            assert o.error.details["max_calls_per_message"] == 2 and o.error.details["calls"] >= 3
            assert "at most 2" in o.error.message
        assert "at most 2" in turn.messages[0]["content"]
        assert "line" in turn.messages[0]["content"] or "offset" in turn.messages[0]["content"]
    finally:
        rt.close()


@pytest.mark.parametrize("good", [1, 2])
def test_a_malformed_message_within_the_bound_is_answered_as_before(good: int) -> None:
    """At or under the bound (counting the calls before the fault) the parse error alone answers."""
    rt, sent = _world("memory://")
    try:
        s = rt.session(run_id="conv-within", provider="openai_chat")
        s.max_calls = 2
        s.user("set them")
        turn = s.handle(_over_and_cut(good))
        assert sent == []
        assert answered_ids("openai_chat", turn.messages) == [f"w{i}" for i in range(good + 2)]
        for o in turn.observations:
            assert o.error is not None and o.error.category == "parse_error"
            assert "send_fewer_calls" not in o.error.recovery
            assert "max_calls_per_message" not in o.error.details
    finally:
        rt.close()


def _hermes(*calls: dict[str, Any]) -> str:
    return "".join("<tool_call>" + json.dumps(c) + "</tool_call>" for c in calls)


@pytest.mark.parametrize("taken", ["conv-ids:0", "conv-ids:n1", "conv-ids:1"])
def test_a_refused_message_answers_a_call_without_an_id_under_no_other_calls_id(taken: str) -> None:
    """Raw text writes ids or not, call by call: a call without one is answered under an id of the
    runtime's making, which must be none the model gave another call of the message (one answer per
    id: the model could not tell which call it answers), over the bound as within it."""
    rt, sent = _world("memory://")
    try:
        s = rt.session(run_id="conv-ids", provider="openai_chat")
        s.user("set them")
        text = _hermes(
            {"name": "set_counter", "arguments": {"name": "a", "value": 1}},
            {"name": "set_counter", "arguments": {"name": "b", "value": 2}, "id": taken},
            {"name": "set_counter", "arguments": {"name": "c", "value": 3}},
        )
        s.max_calls = 2
        refused = s.handle(text)
        ids = [o.call_id for o in refused.observations]
        assert ids[1] == taken and len(set(ids)) == 3, ids
        assert answered_ids("openai_chat", refused.messages) == ids
        assert sent == []
        assert {o.error.category for o in refused.observations if o.error} == {"budget_exceeded"}
        s.max_calls = 3
        ran = s.handle(text)
        ids = [o.call_id for o in ran.observations]
        assert ids[1] == taken and len(set(ids)) == 3 and sorted(sent) == ["a", "b", "c"], ids
    finally:
        rt.close()
