"""A policy backed by any OpenAI-compatible chat-completions server, with the standard library only.

Each turn POSTs the view's messages and offered tools to ``/v1/chat/completions`` with
``tool_choice="auto"``, ``logprobs=true`` and ``top_logprobs=5``, and returns the assistant message
unchanged as the proposal's ``raw`` (the runtime parses it, as it would any provider output).

**Confidence.** When the server returns token logprobs (``choices[0].logprobs.content``) for the
generated text, the generated text is rebuilt by joining the tokens, and the first occurrence of
the first call's function name (not touching other name characters on either side) is located.
The confidence is ``exp(sum of the logprobs of every token overlapping that name)``: the
probability the model gave to spelling the chosen tool's name, given everything it generated before
it. A token that straddles the name's edge (``"get``) is counted whole, which can only lower the
value. It is None when there is no call, no logprobs, or the name is not among the logged tokens
(hosted APIs that parse tool calls server-side often log no tokens for them).

**Streaming.** With ``stream=True`` the request asks for server-sent events (``"stream": true``
and ``stream_options.include_usage``, as vLLM, llama.cpp's server and OpenAI accept) and the
deltas are put back together into the same assistant message: content concatenated, each tool
call (by its ``index``) with its id, its name and its argument fragments joined, the logprob
entries of every chunk in order, and the usage of the last chunk. The proposal is then exactly the
one a non-streamed answer with the same content gives.

**Errors.** 429, 5xx, timeouts and connection failures are retried with exponential backoff
(``Retry-After`` honoured, every delay capped) until ``max_attempts`` or ``deadline_s`` is reached;
then, or at once for any other HTTP status or a malformed response, :class:`PolicyHTTPError` is
raised: the evaluation is misconfigured or its server is unusable, which no model turn can fix.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace.errors import ConfigurationError, PolicyHTTPError
from actionspace.evaluation._policy_view import PolicyView, Proposal

__all__ = [
    "OpenAICompatiblePolicy",
    "PolicyHTTPError",
    "assemble_stream",
    "proposal_from_completion",
    "tool_choice_confidence",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAICompatiblePolicy:
    """The model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    base_url: str
    """Server root (``http://localhost:8000``), or ending in ``/v1``, or the full completions URL."""
    model: str
    """The ``model`` field sent with every request."""
    api_key: str | None = None
    """Sent as ``Authorization: Bearer …`` when set; default None (local servers need none)."""
    timeout_s: float = 60.0
    """Seconds one request may take; default 60."""
    temperature: float = 0.0
    """Sampling temperature; default 0."""
    max_attempts: int = 4
    """Requests per turn, the first included; default 4."""
    deadline_s: float = 120.0
    """Seconds a turn may spend across all attempts and backoffs; default 120."""
    backoff_s: float = 0.5
    """Delay before the first retry, doubled after each; default 0.5 s."""
    max_backoff_s: float = 8.0
    """Upper bound of any single delay, ``Retry-After`` included; default 8 s."""
    top_logprobs: int = 5
    """Alternatives logged per token; default 5."""
    stream: bool = False
    """Ask for the answer as server-sent events and assemble it (see the module docstring); default False."""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    """How to wait between attempts; default ``time.sleep``."""
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    """Monotonic seconds, for the deadline; default ``time.monotonic``."""

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            raise ConfigurationError("model must be named")
        if self.max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        if self.timeout_s <= 0 or self.deadline_s <= 0:
            raise ConfigurationError("timeout_s and deadline_s must be positive")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigurationError("backoff_s and max_backoff_s must not be negative")

    @property
    def url(self) -> str:
        """The completions endpoint requests go to."""
        base = self.base_url.rstrip("/")
        if base.endswith("/chat/completions"):
            return base
        if base.endswith("/v1"):
            return base + "/chat/completions"
        return base + "/v1/chat/completions"

    def request_body(self, view: PolicyView) -> dict[str, Any]:
        """The JSON object sent for ``view`` (no ``tools``/``tool_choice`` when nothing is offered)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in view.messages],
            "temperature": self.temperature,
            "logprobs": True,
            "top_logprobs": self.top_logprobs,
        }
        if view.tools:
            body["tools"] = [dict(t) for t in view.tools]
            body["tool_choice"] = "auto"
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def propose(self, view: PolicyView) -> Proposal:
        """One completion for ``view``; raises PolicyHTTPError (see the module docstring)."""
        data = json.dumps(self.request_body(view)).encode("utf-8")
        return proposal_from_completion(self._post(data))

    def _headers(self) -> dict[str, str]:
        accept = "text/event-stream" if self.stream else "application/json"
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _post(self, data: bytes) -> Mapping[str, Any]:
        start = self.clock()
        attempt = 0
        while True:
            attempt += 1
            remaining = self.deadline_s - (self.clock() - start)
            request = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
            retry_after: float | None = None
            try:
                with urllib.request.urlopen(request, timeout=max(min(self.timeout_s, remaining), 0.001)) as r:
                    if self.stream:
                        return assemble_stream(r, attempt)
                    payload = r.read()
                return _decode(payload, attempt)
            except urllib.error.HTTPError as exc:
                status: int | None = exc.code
                body = _error_body(exc)
                if exc.code != 429 and exc.code < 500:
                    raise PolicyHTTPError(
                        f"{self.url} answered HTTP {exc.code}: {body[:200]}",
                        status=exc.code,
                        attempts=attempt,
                        body=body,
                    ) from exc
                retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                last: Exception = exc
            except (OSError, http.client.HTTPException) as exc:
                status, body, last = None, "", exc
            delay = self.backoff_s * 2 ** (attempt - 1) if retry_after is None else retry_after
            delay = min(delay, self.max_backoff_s)
            if attempt >= self.max_attempts or self.clock() - start + delay >= self.deadline_s:
                what = f"HTTP {status}" if status is not None else type(last).__name__
                raise PolicyHTTPError(
                    f"{self.url} unavailable after {attempt} attempt(s): {what}",
                    status=status,
                    attempts=attempt,
                    body=body,
                ) from last
            self.sleep(delay)


def _error_body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read()[:500].decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds; None otherwise (HTTP dates are ignored)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _decode(payload: bytes, attempts: int) -> Mapping[str, Any]:
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise PolicyHTTPError("the server's answer is not JSON", status=200, attempts=attempts) from exc
    if not isinstance(value, dict):
        raise PolicyHTTPError("the server's answer is not a JSON object", status=200, attempts=attempts)
    return value


def assemble_stream(lines: Iterable[bytes], attempts: int = 1) -> Mapping[str, Any]:
    """A chat completion put back together from its server-sent ``data:`` events.

    Raises PolicyHTTPError when an event is not JSON or the stream ends without a choice.
    """
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    logprobs: list[Any] = []
    usage: Any = None
    role = "assistant"
    seen_choice = False
    for line in lines:
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith("data:"):
            continue  # blank keep-alives, comments and event names
        data = text[5:].strip()
        if data == "[DONE]":
            break
        chunk = _decode(data.encode("utf-8"), attempts)
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            seen_choice = True
            delta = choice.get("delta") or {}
            role = str(delta.get("role") or role)
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for part in delta.get("tool_calls") or ():
                _merge_call(calls.setdefault(int(part.get("index", 0)), {}), part)
            entries = (choice.get("logprobs") or {}).get("content")
            if isinstance(entries, list):
                logprobs.extend(entries)
    if not seen_choice:
        raise PolicyHTTPError("the server's stream held no choice", status=200, attempts=attempts)
    message: dict[str, Any] = {"role": role, "content": "".join(content) if content else None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    choice_out: dict[str, Any] = {"index": 0, "message": message}
    if logprobs:
        choice_out["logprobs"] = {"content": logprobs}
    completion: dict[str, Any] = {"object": "chat.completion", "choices": [choice_out]}
    if usage is not None:
        completion["usage"] = usage
    return completion


def _merge_call(call: dict[str, Any], part: Mapping[str, Any]) -> None:
    """One streamed fragment of a tool call into the call assembled so far."""
    if part.get("id"):
        call["id"] = part["id"]
    call.setdefault("type", "function")
    function = call.setdefault("function", {"name": "", "arguments": ""})
    fragment = part.get("function") or {}
    if isinstance(fragment.get("name"), str):
        function["name"] += fragment["name"]
    if isinstance(fragment.get("arguments"), str):
        function["arguments"] += fragment["arguments"]


def proposal_from_completion(completion: Mapping[str, Any]) -> Proposal:
    """The proposal in a chat-completions response: its first choice's message, tokens, confidence.

    ``tokens`` is ``usage.total_tokens`` (else prompt + completion tokens, else None). Raises
    PolicyHTTPError when there is no ``choices[0].message`` object.
    """
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        raise PolicyHTTPError("the server's answer has no choices[0].message", status=200, attempts=1)
    return Proposal(
        raw=message,
        confidence=tool_choice_confidence(message, choice.get("logprobs")),
        tokens=_tokens(completion.get("usage")),
    )


def _tokens(usage: object) -> int | None:
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    return sum(p for p in parts if isinstance(p, int)) if any(isinstance(p, int) for p in parts) else None


def tool_choice_confidence(message: Mapping[str, Any], logprobs: object) -> float | None:
    """Probability of the first call's tool name from the token logprobs (see the module docstring)."""
    name = _first_tool_name(message)
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if name is None or not isinstance(content, list) or not content:
        return None
    spans: list[tuple[int, int, float]] = []
    offset = 0
    for entry in content:
        token = entry.get("token") if isinstance(entry, dict) else None
        logprob = entry.get("logprob") if isinstance(entry, dict) else None
        if not isinstance(token, str) or not isinstance(logprob, int | float) or isinstance(logprob, bool):
            return None
        spans.append((offset, offset + len(token), float(logprob)))
        offset += len(token)
    text = "".join(e["token"] for e in content)
    found = re.search(rf"(?<![\w.\-]){re.escape(name)}(?![\w.\-])", text)
    if found is None:
        return None
    total = sum(lp for s, e, lp in spans if s < found.end() and e > found.start())
    return min(1.0, max(0.0, math.exp(total)))


def _first_tool_name(message: Mapping[str, Any]) -> str | None:
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
        return None
    function = calls[0].get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else None
