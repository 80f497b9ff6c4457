"""A Gemini message that does not run answers its ``functionCall`` parts in order, each naming the
function the model called: Gemini refuses the next request (400 "the number of function response
parts is equal to the number of function call parts") when a call of the turn goes unanswered,
and the conversation cannot go on.

A malformed or cut-off message whose calls mix ids and none answered only the calls with an id;
a message giving one id to two calls answered the id naming no function (``""``), and left a
call without an id beside them unanswered. Now a call with an id of its own is answered under it
(an id given to several calls once, naming the first one's function); a call without one by its
position, as a message without ids is.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from google.genai.types import Content
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery.render import render_results
from actionspace.types import Observation

RUN = "g96"


def _runtime(sent: list[str]) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="external", idempotency="none")
    def ping(host: str) -> str:
        """Send one ping."""
        sent.append(host)
        return "pong"

    @rt.tool(effect="external", idempotency="none")
    def trace_route(host: str) -> str:
        """Trace the route to a host."""
        sent.append(host)
        return "ok"

    return rt


def _call(ident: str | None, name: str, args: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if ident is not None:
        call["id"] = ident
    return {"functionCall": call}


def _message(parts: list[dict[str, Any]], reason: str = "STOP") -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}]}


def _answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (content,) = messages
    Content.model_validate(content)
    assert content["role"] == "user"
    return [part["functionResponse"] for part in content["parts"]]


CASES: dict[str, tuple[Any, list[tuple[str | None, str]]]] = {
    "malformed_mixed_ids": (
        _message(
            [
                _call("g1", "ping", {"host": "a"}),
                _call(None, "trace_route", '{"host": '),
                _call(None, "ping", {"host": "c"}),
            ]
        ),
        [("g1", "ping"), (None, "trace_route"), (None, "ping")],
    ),
    "cut_off_mixed_ids": (
        _message(
            [_call(None, "ping", {"host": "a"}), _call("g2", "trace_route", {"host": "b"})], "MAX_TOKENS"
        ),
        [(None, "ping"), ("g2", "trace_route")],
    ),
    "one_id_for_two_calls": (
        _message([_call("x", "ping", {"host": "a"}), _call("x", "trace_route", {"host": "b"})]),
        [("x", "ping")],
    ),
    "one_id_for_two_calls_beside_one_without": (
        _message(
            [
                _call(None, "ping", {"host": "a"}),
                _call("x", "ping", {"host": "b"}),
                _call("x", "trace_route", {"host": "c"}),
            ]
        ),
        [(None, "ping"), ("x", "ping")],
    ),
}
CASES["parts_handed_as_a_list"] = (  # each part read apart: a fault names the calls of them all
    [_call("g1", "ping", {"host": "a"}), _call(None, "trace_route", '{"host": '), _call("g3", "ping", {})],
    [("g1", "ping"), (None, "trace_route"), ("g3", "ping")],
)
CASES["contents_handed_as_a_list"] = (
    [
        {"role": "model", "parts": [_call(None, "ping", {"host": "a"})]},
        {"role": "model", "parts": [_call(None, "trace_route", '{"host": ')]},
    ],
    [(None, "ping"), (None, "trace_route")],
)
CALLS = {"one_id_for_two_calls": 2, "one_id_for_two_calls_beside_one_without": 3}
"""How many calls a case's message proposes, where an id given to two of them is answered once."""


def _check(case: str, observations: tuple[Observation, ...], messages: Any) -> None:
    expected = CASES[case][1]
    answers = _answers(messages)
    assert [(a.get("id"), a["name"]) for a in answers] == expected
    for answer in answers:
        ((key, text),) = answer["response"].items()
        assert key == "error" and json.loads(text)["error"]["category"] == "parse_error"
    assert len(observations) == CALLS.get(case, len(expected))  # one per proposed call
    assert all(o.error is not None and o.error.category == "parse_error" for o in observations)
    assert len({o.call_id for o in observations}) == len(expected)  # one answer per id


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_call_of_a_message_that_did_not_run_is_answered_in_its_position(case: str, mode: str) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id=RUN, provider="gemini")
    s.user("ping and trace")
    turn = s.handle(CASES[case][0]) if mode == "sync" else asyncio.run(s.ahandle(CASES[case][0]))
    _check(case, turn.observations, turn.messages)
    answered = [e for e in rt.trace.events(RUN) if e.kind == "rendered"][-1].data["results"]
    assert answered == list(dict.fromkeys(o.call_id for o in turn.observations))  # what the model reads
    assert sent == []
    rt.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_call_all_of_such_a_message_renders_every_call_too(case: str) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    message, expected = CASES[case]
    (content,) = render_results(rt.call_all(message, run_id=RUN), "gemini")
    assert [p["functionResponse"]["name"] for p in content["parts"]] == [name for _, name in expected]
    assert sent == []
    rt.close()


IDS = st.sampled_from([None, None, "a", "b", "", f"{RUN}:n1", f"{RUN}:parse"])
NAMES = st.sampled_from(["ping", "trace_route", "nope"])
ARGS = st.sampled_from([{"host": "h"}, '{"host": ', "{bad", {"host": 3}])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(IDS, NAMES, ARGS), min_size=1, max_size=5), st.booleans())
def test_any_message_answers_each_call_in_order_under_its_function_and_each_id_once(
    calls: list[tuple[str | None, str, Any]], cut: bool
) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id=RUN, provider="gemini")
    s.user("go")
    parts = [_call(ident, name, args) for ident, name, args in calls]
    turn = s.handle(_message(parts, "MAX_TOKENS" if cut else "STOP"))
    answers = _answers(turn.messages)
    assert len(turn.observations) == len(calls)
    seen: set[str | None] = set()
    answered = []  # the calls answered: each without an id, and the first of each id
    for ident, name, _ in calls:
        if not ident or ident not in seen:
            answered.append((ident or None, name))
        seen.add(ident)
    assert [(a.get("id"), a["name"]) for a in answers] == answered
    if cut or any(o.error is not None and o.error.category == "parse_error" for o in turn.observations):
        assert sent == []
    rt.close()
