"""A streamed Gemini response the token limit cut off runs none of its calls, and answers each
under its id and the function name the model gave it (as a whole cut response is answered)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.genai.types import Content

from actionspace import Runtime
from actionspace.discovery.render import render_results
from actionspace.parse import StreamParser, parse


def _call(ident: str, name: str, args: Any) -> dict[str, Any]:
    return {"functionCall": {"id": ident, "name": name, "args": args}}


def _chunk(parts: list[Any], reason: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if reason is not None:
        candidate["finishReason"] = reason
    return {"candidates": [candidate]}


CUT_STREAM = [
    _chunk([{"text": "Pinging."}, _call("g1", "ping", {"host": "a"})]),
    _chunk([_call("g2", "trace_route", {"host": "b"})]),
    _chunk([_call("g3", "ping", {"host": "c"})], "MAX_TOKENS"),
]
NAMED = [("g1", "ping"), ("g2", "trace_route"), ("g3", "ping")]


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


def test_the_cut_off_fault_of_a_stream_names_each_call_it_voided() -> None:
    stream = StreamParser()
    for chunk in CUT_STREAM:
        stream.feed(chunk)
    result = stream.finish()
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    assert result.error.details["function_names"] == dict(NAMED)
    assert parse(CUT_STREAM).error.details["function_names"] == dict(NAMED)  # type: ignore[union-attr]


@pytest.mark.parametrize("given", ["parser", "output", "chunks"])
def test_each_call_of_a_cut_stream_is_answered_under_its_id_and_name(given: str) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id="g", provider="gemini")
    s.user("ping a and c, trace b")
    stream = StreamParser()
    for chunk in CUT_STREAM:
        stream.feed(chunk)
    output: Any = {"parser": stream, "output": stream.output(), "chunks": CUT_STREAM}[given]
    turn = s.handle(output)
    (content,) = turn.messages
    Content.model_validate(content)
    answers = [part["functionResponse"] for part in content["parts"]]
    assert [(a["id"], a["name"]) for a in answers] == NAMED
    for answer in answers:
        ((key, text),) = answer["response"].items()
        assert key == "error" and json.loads(text)["error"]["category"] == "parse_error"
    assert sent == []
    rt.close()


def test_call_all_of_a_cut_stream_renders_the_names_too() -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    (content,) = render_results(rt.call_all(CUT_STREAM), "gemini")
    assert [(p["functionResponse"]["id"], p["functionResponse"]["name"]) for p in content["parts"]] == NAMED
    assert sent == []
    rt.close()
