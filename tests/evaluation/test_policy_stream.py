"""The OpenAI-compatible policy against a local server speaking the API, streamed and not."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.cli import _mount, app
from actionspace.evaluation._policy_http import OpenAICompatiblePolicy, assemble_stream
from actionspace.evaluation.policies import PolicyView, policy_from_spec

ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
TOKENS = [('{"name": "', -0.01), ("get_", -0.1), ("weather", -0.2), ('", ...}', -0.05)]


def _message() -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGUMENTS}}
        ],
    }


def _logprobs(tokens: list[tuple[str, float]]) -> dict[str, Any]:
    return {"content": [{"token": t, "logprob": lp, "top_logprobs": []} for t, lp in tokens]}


USAGE = {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}


def _chunks(model: str) -> list[dict[str, Any]]:
    """The same answer cut into the deltas a streaming server sends."""
    if model == "text":
        parts = [{"role": "assistant", "content": "I need "}, {"content": "more details."}]
        return [{"choices": [{"index": 0, "delta": d}]} for d in parts] + [{"choices": [], "usage": USAGE}]
    first = {"role": "assistant", "content": "Check"}
    deltas: list[tuple[dict[str, Any], list[tuple[str, float]]]] = [
        (first, TOKENS[:1]),
        ({"content": "ing."}, []),
        (
            {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_"}}]},
            TOKENS[1:2],
        ),
        (
            {"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": ARGUMENTS[:9]}}]},
            TOKENS[2:3],
        ),
        ({"tool_calls": [{"index": 0, "function": {"arguments": ARGUMENTS[9:]}}]}, TOKENS[3:]),
    ]
    out: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": d, **({"logprobs": _logprobs(t)} if t else {})}]}
        for d, t in deltas
    ]
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    out.append({"choices": [], "usage": USAGE})
    return out


def _whole(model: str) -> dict[str, Any]:
    if model == "text":
        message: dict[str, Any] = {"role": "assistant", "content": "I need more details."}
        return {"choices": [{"index": 0, "message": message}], "usage": USAGE}
    choice = {"index": 0, "message": _message(), "logprobs": _logprobs(TOKENS)}
    return {"object": "chat.completion", "choices": [choice], "usage": USAGE}


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        if not body.get("stream"):
            data = json.dumps(_whole(body["model"])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b": keep-alive\n\n")
        for chunk in _chunks(body["model"]):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


VIEW = PolicyView(
    task_id="t",
    messages=({"role": "user", "content": "Weather in Paris?"},),
    tools=(
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        },
    ),
)


def test_a_streamed_answer_is_the_same_proposal_as_the_whole_one(server: str) -> None:
    whole = OpenAICompatiblePolicy(base_url=server, model="calls").propose(VIEW)
    streamed = OpenAICompatiblePolicy(base_url=server, model="calls", stream=True).propose(VIEW)
    assert streamed == whole
    assert streamed.raw["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": ARGUMENTS}  # type: ignore[index,call-overload]
    assert streamed.tokens == 39
    assert streamed.confidence is not None and abs(streamed.confidence - 0.7408) < 1e-3  # exp(-0.1 - 0.2)
    assert _Handler.requests[-1]["stream"] is True
    assert _Handler.requests[-1]["stream_options"] == {"include_usage": True}
    assert "stream" not in _Handler.requests[0]


def test_a_streamed_plain_answer_has_no_call(server: str) -> None:
    proposal = policy_from_spec(f"openai+stream:{server}#text").propose(VIEW)
    assert proposal.raw == {"role": "assistant", "content": "I need more details."}
    assert proposal.confidence is None


def test_the_streamed_message_runs_through_a_session_like_any_provider_output(server: str) -> None:
    proposal = OpenAICompatiblePolicy(base_url=server, model="calls", stream=True).propose(VIEW)
    with Runtime("memory://", recover_on_start=False) as rt:

        @rt.tool(effect="read")
        def get_weather(city: str, unit: str = "celsius") -> str:
            return f"sunny in {city}"

        turn = rt.session("s").handle(proposal.raw)
    assert [o.data for o in turn.observations] == ["sunny in Paris"]
    assert turn.messages[0]["tool_call_id"] == "call_1"


def test_a_stream_without_any_choice_is_a_policy_error() -> None:
    from actionspace.errors import PolicyHTTPError

    with pytest.raises(PolicyHTTPError, match="no choice"):
        assemble_stream([b"data: [DONE]\n"])


@pytest.mark.parametrize("kind", ["openai", "openai+stream"])
def test_eval_runs_unchanged_against_a_local_server(server: str, kind: str) -> None:
    _mount()
    result = CliRunner().invoke(
        app, ["eval", "suite", "support-desk", "--policy", f"{kind}:{server}#text", "--limit", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{") :])
    assert printed["n"] == 2
    assert printed["layers"]["p_select"] == 0.0  # asking back where a call was expected
    assert all(r["model"] == "text" for r in _Handler.requests)
