"""A Gemini message whose calls carry no ids and do not run (one of them malformed, the output cut
off) answers each call, in its position, by a ``functionResponse`` naming the function the model
gave it (and no id): Gemini pairs responses with calls by position and name when they have none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.genai.types import Content
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery.render import render_results


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


def _call(name: Any, args: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}}


MESSAGES: dict[str, Any] = {
    "cut_arguments": {
        "role": "model",
        "parts": [_call("ping", {"host": "a"}), {"text": "and"}, _call("trace_route", '{"host": ')],
    },
    "max_tokens": {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [_call("ping", {"host": "a"}), _call("trace_route", {"host": "b"})],
                },
                "finishReason": "MAX_TOKENS",
            }
        ]
    },
    "streamed": [
        {"candidates": [{"content": {"role": "model", "parts": [_call("ping", {"host": "a"})]}}]},
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [_call("trace_route", {"host": "b"})]},
                    "finishReason": "MAX_TOKENS",
                }
            ]
        },
    ],
}


@pytest.mark.parametrize("case", sorted(MESSAGES))
def test_each_call_position_is_answered_under_its_function_name(case: str) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id="g", provider="gemini")
    s.user("ping a, trace b")
    turn = s.handle(MESSAGES[case])
    assert len(turn.observations) == 2
    assert len({o.call_id for o in turn.observations}) == 2
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    (content,) = turn.messages
    Content.model_validate(content)
    answers = [part["functionResponse"] for part in content["parts"]]
    assert [a["name"] for a in answers] == ["ping", "trace_route"]
    assert all("id" not in a for a in answers)
    for answer in answers:
        ((key, text),) = answer["response"].items()
        assert key == "error" and json.loads(text)["error"]["category"] == "parse_error"
    assert sent == []
    rt.close()


def test_call_all_of_such_a_message_renders_each_position_too() -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    (content,) = render_results(rt.call_all(MESSAGES["cut_arguments"]), "gemini")
    assert [p["functionResponse"]["name"] for p in content["parts"]] == ["ping", "trace_route"]
    assert sent == []
    rt.close()


NAMES = st.sampled_from(["ping", "trace_route", "", "a.b"]) | st.none() | st.integers() | st.text(max_size=5)
ARGS = st.sampled_from([{"host": "a"}, '{"host": ', "{bad", 3, None])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(NAMES, ARGS), min_size=1, max_size=4), st.booleans())
def test_a_message_without_ids_that_does_not_run_answers_one_response_per_call(
    calls: list[tuple[Any, Any]], cut: bool
) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id="g", provider="gemini")
    s.user("go")
    parts = [_call(name, args) for name, args in calls]
    reason = "MAX_TOKENS" if cut else "STOP"
    turn = s.handle({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}]})
    (content,) = turn.messages
    Content.model_validate(content)
    if all(o.error is None or o.error.category != "parse_error" for o in turn.observations):
        assert not cut  # every call was read: each ran through the stages
    else:
        assert sent == []
        answers = [part["functionResponse"] for part in content["parts"]]
        assert [a["name"] for a in answers] == [n if type(n) is str else "" for n, _ in calls]
        assert all("id" not in a for a in answers)
    rt.close()
