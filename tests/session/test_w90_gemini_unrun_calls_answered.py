"""A Gemini message whose calls do not run (one of them malformed, the output cut off, two calls
under one id) answers each call with a ``functionResponse`` under its id and its function's name:
Gemini wants one response per ``functionCall`` of the turn, naming the function called."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.genai.types import Content

from actionspace import Runtime
from actionspace.discovery.render import render_results


def _runtime() -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://")
    sent: list[str] = []

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

    return rt, sent


def _call(ident: str, name: str, args: Any) -> dict[str, Any]:
    return {"functionCall": {"id": ident, "name": name, "args": args}}


MESSAGES = {
    "cut_arguments": {
        "role": "model",
        "parts": [_call("g1", "ping", {"host": "a"}), _call("g2", "trace_route", '{"host": "b')],
    },
    "max_tokens": {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [_call("g1", "ping", {"host": "a"}), _call("g2", "trace_route", {"host": "b"})],
                },
                "finishReason": "MAX_TOKENS",
            }
        ]
    },
    "no_name": {"role": "model", "parts": [_call("g1", "ping", {"host": "a"}), _call("g2", "", {})]},
}
NAMES = {
    "cut_arguments": ["ping", "trace_route"],
    "max_tokens": ["ping", "trace_route"],
    "no_name": ["ping", ""],
}


@pytest.mark.parametrize("case", sorted(MESSAGES))
def test_each_call_that_did_not_run_is_answered_under_its_id_and_name(case: str) -> None:
    rt, sent = _runtime()
    s = rt.session(run_id="g", provider="gemini")
    s.user("ping a, trace b")
    turn = s.handle(MESSAGES[case])
    assert [o.call_id for o in turn.observations] == ["g1", "g2"]
    assert all(o.error is not None and o.error.category == "parse_error" for o in turn.observations)
    (content,) = turn.messages
    Content.model_validate(content)
    answers = [part["functionResponse"] for part in content["parts"]]
    assert [(a["id"], a["name"]) for a in answers] == list(zip(["g1", "g2"], NAMES[case], strict=True))
    for answer in answers:
        ((key, text),) = answer["response"].items()
        assert key == "error" and json.loads(text)["error"]["category"] == "parse_error"
    assert sent == []
    rt.close()


def test_call_all_of_a_malformed_message_renders_the_names_too() -> None:
    rt, sent = _runtime()
    every = rt.call_all(MESSAGES["cut_arguments"])
    (content,) = render_results(every, "gemini")
    assert [(p["functionResponse"]["id"], p["functionResponse"]["name"]) for p in content["parts"]] == [
        ("g1", "ping"),
        ("g2", "trace_route"),
    ]
    assert sent == []
    rt.close()


def test_a_message_none_of_whose_calls_has_an_id_answers_the_call_under_its_name() -> None:
    rt, sent = _runtime()
    s = rt.session(run_id="g", provider="gemini")
    s.user("ping a")
    bad = {"role": "model", "parts": [{"functionCall": {"name": "ping", "args": '{"host": '}}]}
    turn = s.handle(bad)
    (obs,) = turn.observations
    assert obs.call_id == "g:n1"  # an id the run gave the call that had none
    (content,) = turn.messages
    Content.model_validate(content)
    (part,) = content["parts"]
    answer = part["functionResponse"]
    assert answer["name"] == "ping" and "id" not in answer
    assert json.loads(answer["response"]["error"])["error"]["category"] == "parse_error"
    assert sent == []
    rt.close()
