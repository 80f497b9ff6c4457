"""Evaluation policies: scripted, replayed and OpenAI-compatible HTTP, against a real local server."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.evaluation._policy_http import tool_choice_confidence
from actionspace.evaluation.policies import (
    OpenAICompatiblePolicy,
    Policy,
    PolicyHTTPError,
    PolicyView,
    Proposal,
    ReplayPolicy,
    ScriptedPolicy,
    openai_tools,
    policy_from_spec,
)
from actionspace.parse import parse

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
MESSAGES = (
    {"role": "system", "content": "You help with the weather."},
    {"role": "user", "content": "Weather in Paris?"},
)
CALL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}
# What a vLLM-style server logs for the generated text behind CALL_MESSAGE: the name spans two tokens.
NAME_LOGPROBS = [math.log(0.9), math.log(0.8)]
TOKENS = [
    ("<tool_call>", math.log(0.99)),
    ('{"name": "', math.log(0.97)),
    ("get_", NAME_LOGPROBS[0]),
    ("weather", NAME_LOGPROBS[1]),
    ('", "arguments": {"city": "Paris"}}', math.log(0.95)),
    ("</tool_call>", 0.0),
]


def completion(*, logprobs: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "message": CALL_MESSAGE, "finish_reason": "tool_calls"}
    if logprobs:
        choice["logprobs"] = {
            "content": [{"token": t, "logprob": lp, "top_logprobs": []} for t, lp in TOKENS]
        }
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [choice],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }


@dataclass
class ChatServer:
    """A local chat-completions server; its behaviour is chosen by the request's ``model``."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, model: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r["body"]["model"] == model)


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with server.lock:
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            seen = server.count(body["model"])
            model = body["model"]
            if model == "plain":
                self._send(200, completion(logprobs=False))
            elif model == "logprobs":
                self._send(200, completion(logprobs=True))
            elif model == "flaky" and seen == 1:
                self._send(429, {"error": {"message": "slow down"}}, {"Retry-After": "3"})
            elif model == "flaky":
                self._send(200, completion(logprobs=False))
            elif model == "broken":
                self._send(500, {"error": {"message": "boom"}})
            elif model == "garbled":
                self._send(200, {"object": "chat.completion"})
            else:
                self._send(404, {"error": {"message": f"model {model} not found"}})

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    state = ChatServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def view(task_id: str = "t1", turn: int = 0) -> PolicyView:
    return PolicyView(task_id=task_id, turn=turn, messages=MESSAGES, tools=(WEATHER_TOOL,))


def http_policy(server: ChatServer, model: str, **options: Any) -> OpenAICompatiblePolicy:
    return OpenAICompatiblePolicy(base_url=server.url, model=model, api_key="sk-test", **options)


# ---------------------------------------------------------------------------------------- HTTP


def test_a_request_carries_the_messages_the_offered_tools_and_the_logprob_options(
    chat_server: ChatServer,
) -> None:
    http_policy(chat_server, "plain").propose(view())
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["messages"] == [dict(m) for m in MESSAGES]
    assert body["tools"] == [WEATHER_TOOL]
    assert body["tool_choice"] == "auto"
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["temperature"] == 0


def test_the_assistant_message_is_the_raw_output_and_parses_to_the_call(chat_server: ChatServer) -> None:
    proposal = http_policy(chat_server, "plain").propose(view())
    assert proposal.raw == CALL_MESSAGE
    result = parse(proposal.raw)
    assert result.ok
    assert [(c.name, c.arguments, c.id) for c in result.calls] == [
        ("get_weather", {"city": "Paris"}, "call_1")
    ]
    assert proposal.tokens == 52


def test_without_logprobs_the_confidence_is_unknown(chat_server: ChatServer) -> None:
    assert http_policy(chat_server, "plain").propose(view()).confidence is None


def test_confidence_is_the_product_of_the_name_token_probabilities(chat_server: ChatServer) -> None:
    proposal = http_policy(chat_server, "logprobs").propose(view())
    assert proposal.confidence == pytest.approx(0.9 * 0.8)


def test_confidence_counts_straddling_tokens_whole_and_skips_longer_names() -> None:
    tokens = [
        ("I could use get_weather_forecast", math.log(0.5)),
        ('.{"name": "get', math.log(0.6)),
        ('_weather"}', math.log(0.7)),
    ]
    logprobs = {"content": [{"token": t, "logprob": lp} for t, lp in tokens]}
    assert tool_choice_confidence(CALL_MESSAGE, logprobs) == pytest.approx(0.6 * 0.7)
    assert tool_choice_confidence({"role": "assistant", "content": "hi"}, logprobs) is None
    assert tool_choice_confidence(CALL_MESSAGE, {"content": [{"token": "x", "logprob": 0.0}]}) is None


def test_a_429_is_retried_after_the_servers_retry_after(chat_server: ChatServer) -> None:
    waits: list[float] = []
    proposal = http_policy(chat_server, "flaky", sleep=waits.append).propose(view())
    assert parse(proposal.raw).calls[0].name == "get_weather"
    assert chat_server.count("flaky") == 2
    assert waits == [3.0]


def test_a_server_failing_forever_is_tried_max_attempts_times_with_growing_backoff(
    chat_server: ChatServer,
) -> None:
    waits: list[float] = []
    policy = http_policy(
        chat_server, "broken", max_attempts=4, backoff_s=0.5, max_backoff_s=1.5, sleep=waits.append
    )
    with pytest.raises(PolicyHTTPError) as caught:
        policy.propose(view())
    assert caught.value.status == 500 and caught.value.attempts == 4
    assert "boom" in caught.value.body
    assert chat_server.count("broken") == 4
    assert waits == [0.5, 1.0, 1.5]


def test_the_deadline_stops_retries_before_the_attempt_cap(chat_server: ChatServer) -> None:
    now = [0.0]

    def advance(seconds: float) -> None:
        now[0] += seconds

    policy = http_policy(
        chat_server,
        "broken",
        max_attempts=10,
        deadline_s=2.5,
        backoff_s=1.0,
        sleep=advance,
        clock=lambda: now[0],
    )
    with pytest.raises(PolicyHTTPError) as caught:
        policy.propose(view())
    # t=0 fails, waits 1; t=1 fails, the next wait (2) would end past 2.5 s: give up after two.
    assert caught.value.attempts == 2
    assert chat_server.count("broken") == 2
    assert now[0] == 1.0


def test_a_client_error_is_raised_at_once_as_a_configuration_error(chat_server: ChatServer) -> None:
    waits: list[float] = []
    with pytest.raises(ConfigurationError) as caught:
        http_policy(chat_server, "no-such-model", sleep=waits.append).propose(view())
    assert isinstance(caught.value, PolicyHTTPError) and caught.value.status == 404
    assert "no-such-model" in str(caught.value)
    assert chat_server.count("no-such-model") == 1 and waits == []


def test_an_answer_without_a_message_is_a_policy_error(chat_server: ChatServer) -> None:
    with pytest.raises(PolicyHTTPError, match=r"choices\[0\]\.message"):
        http_policy(chat_server, "garbled").propose(view())


def test_an_unreachable_server_is_retried_then_reported() -> None:
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = probe.server_address[1]
    probe.server_close()  # nothing listens on the port any more
    waits: list[float] = []
    policy = OpenAICompatiblePolicy(
        base_url=f"http://127.0.0.1:{port}", model="m", max_attempts=2, sleep=waits.append
    )
    with pytest.raises(PolicyHTTPError) as caught:
        policy.propose(view())
    assert caught.value.status is None and caught.value.attempts == 2 and waits == [0.5]


def test_the_endpoint_accepts_a_root_a_v1_root_or_the_full_url() -> None:
    for base in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/chat/completions"):
        assert OpenAICompatiblePolicy(base_url=base, model="m").url == "http://h:1/v1/chat/completions"


def test_no_tools_are_sent_when_none_are_offered() -> None:
    body = OpenAICompatiblePolicy(base_url="http://h", model="m").request_body(
        PolicyView(task_id="t", messages=MESSAGES)
    )
    assert "tools" not in body and "tool_choice" not in body


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        OpenAICompatiblePolicy(base_url="localhost:8000", model="m")
    with pytest.raises(ConfigurationError):
        OpenAICompatiblePolicy(base_url="http://h", model="m", max_attempts=0)


def test_the_http_proposal_runs_through_the_real_runtime(chat_server: ChatServer) -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return f"sunny in {city}"

    run = rt.new_run()
    tools = openai_tools(rt.offer(run_id=run))
    assert [t["function"]["name"] for t in tools] == ["get_weather"]
    assert tools[0]["function"]["parameters"]["required"] == ["city"]
    proposal = http_policy(chat_server, "plain").propose(
        PolicyView(task_id="t1", messages=MESSAGES, tools=tools)
    )
    assert chat_server.requests[0]["body"]["tools"] == [dict(t) for t in tools]
    obs = rt.call(proposal.raw, run_id=run)
    assert obs.status == "ok" and obs.data == "sunny in Paris"


# ------------------------------------------------------------------------------------ scripted


def test_a_scripted_policy_plays_each_tasks_turns_in_order_then_no_call() -> None:
    policy = ScriptedPolicy({"t1": ["first", Proposal(raw="second", confidence=0.5)]})
    assert policy.propose(view("t1", 0)) == Proposal(raw="first")
    assert policy.propose(view("t1", 1)) == Proposal(raw="second", confidence=0.5)
    assert policy.propose(view("t1", 2)).empty
    assert policy.propose(view("other", 0)).empty
    assert parse(policy.propose(view("other", 0)).raw).calls == ()


def test_a_scripted_policy_may_be_a_function_of_the_view() -> None:
    policy = ScriptedPolicy(lambda v: None if v.turn else f"turn of {v.task_id}")
    assert policy.propose(view("a", 0)).raw == "turn of a"
    assert policy.propose(view("a", 1)).empty


def test_a_script_file_round_trips_through_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"t1": [CALL_MESSAGE, ""], "t2": ['{"name": "get_weather", "arguments": {}}']})
    )
    policy = policy_from_spec(f"scripted:{path}")
    assert isinstance(policy, ScriptedPolicy) and isinstance(policy, Policy)
    assert policy.propose(view("t1", 0)).raw == CALL_MESSAGE
    assert policy.propose(view("t1", 1)).empty
    assert parse(policy.propose(view("t2", 0)).raw).calls[0].name == "get_weather"


def test_a_script_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"t1": "not a list"}))
    with pytest.raises(ConfigurationError, match="t1"):
        ScriptedPolicy.from_file(path)


# -------------------------------------------------------------------------------------- replay


def test_a_replay_file_round_trips_raw_confidence_and_tokens(tmp_path: Path) -> None:
    records = {
        ("t1", 0): Proposal(raw=CALL_MESSAGE, confidence=0.72, tokens=52),
        ("t1", 1): Proposal(raw="The weather in Paris is sunny."),
        ("t2", 0): Proposal(
            raw='<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'
        ),
    }
    path = tmp_path / "replay.jsonl"
    ReplayPolicy.write(path, records)
    policy = policy_from_spec(f"replay:{path}")
    assert isinstance(policy, ReplayPolicy) and len(policy) == 3
    for (task_id, turn), expected in records.items():
        assert policy.propose(view(task_id, turn)) == expected
    assert parse(policy.propose(view("t2", 0)).raw).calls[0].arguments == {"city": "Rome"}


def test_a_missing_replay_entry_is_the_empty_proposal_meaning_no_call(tmp_path: Path) -> None:
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps({"task_id": "t1", "turn": 0, "raw": "hi"}) + "\n\n")
    proposal = ReplayPolicy.from_file(path).propose(view("t1", 1))
    assert proposal == Proposal() and proposal.empty
    result = parse(proposal.raw)
    assert result.ok and result.calls == ()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("not json", "not JSON"),
        ('{"turn": 0, "raw": "x"}', "task_id"),
        ('{"task_id": "t", "turn": -1, "raw": "x"}', "turn"),
        ('{"task_id": "t", "turn": 0, "raw": "x", "confidence": 1.5}', "confidence"),
        ('{"task_id": "t", "turn": 0, "raw": 7}', "raw output"),
    ],
)
def test_a_malformed_replay_line_is_refused_with_its_line_number(
    tmp_path: Path, line: str, reason: str
) -> None:
    path = tmp_path / "replay.jsonl"
    path.write_text('{"task_id": "ok", "turn": 0, "raw": ""}\n' + line + "\n")
    with pytest.raises(ConfigurationError, match=reason) as caught:
        ReplayPolicy.from_file(path)
    assert f"{path}:2" in str(caught.value)


def test_a_turn_recorded_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "replay.jsonl"
    line = json.dumps({"task_id": "t", "turn": 0, "raw": "x"})
    path.write_text(f"{line}\n{line}\n")
    with pytest.raises(ConfigurationError, match="twice"):
        ReplayPolicy.from_file(path)


# ---------------------------------------------------------------------------------------- spec


def test_an_openai_spec_names_the_server_and_the_model() -> None:
    policy = policy_from_spec("openai:http://localhost:8000/v1#qwen3-8b", api_key="k")
    assert isinstance(policy, OpenAICompatiblePolicy)
    assert (policy.url, policy.model, policy.api_key) == (
        "http://localhost:8000/v1/chat/completions",
        "qwen3-8b",
        "k",
    )


@pytest.mark.parametrize("spec", ["replay", "openai:http://h:1", "openai:#m", "magic:x", "scripted:"])
def test_a_malformed_spec_is_refused(spec: str) -> None:
    with pytest.raises(ConfigurationError):
        policy_from_spec(spec)


# ------------------------------------------------------------------------------ tool conversion


def test_offered_descriptions_become_openai_tools_and_openai_tools_pass_through() -> None:
    described = {
        "name": "get_weather",
        "version": "1",
        "description": "Current weather of a city.",
        "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
        "effect": "none",
        "risk": "low",
        "schema_hash": "abc",
    }
    assert openai_tools([described]) == (WEATHER_TOOL,)
    assert openai_tools([WEATHER_TOOL]) == (WEATHER_TOOL,)
