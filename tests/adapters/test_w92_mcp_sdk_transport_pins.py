"""What the bounded HTTP transport takes from the SDK's ``StreamableHTTPTransport``, which it extends
because the SDK offers no public way to bound an answer, resume one with ``Last-Event-ID`` a bounded
number of times, or end a cancelled request's stream: every method it overrides, every attribute and
helper it uses, checked against the installed SDK, so that a release changing one fails here, naming
it, instead of leaving an override the SDK no longer calls (or calls otherwise):

* each method the transport defines that the SDK's class also defines has the SDK's parameters (names,
  kinds, defaults), and each of the transport's own methods is a name the SDK's class does not use;
  a changed SDK signature is reported (shown with one changed here);
* the SDK's attributes, request context fields, header name and context streams the transport reads;
* against the SDK's own server over streamable HTTP, a session calls through the overrides (the POST,
  the SSE answer and its events, the notification stream, the closing DELETE); against a server that
  drops every answer, the resume loop here is what the SDK calls, once per dropped answer.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import streamable_http
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import ClientMessageMetadata
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from actionspace import Runtime
from actionspace.adapters._mcp_http import _BoundedTransport
from actionspace.adapters._mcp_resumes import MAX_RESUMES, ResumingTransport
from actionspace.adapters.mcp_client import HttpServer
from actionspace.catalog.spec import RetryPolicy
from tests.adapters.mcp_fixtures import CONNECT_TIMEOUT_S, start_http_server, stop
from tests.adapters.test_w81_mcp_http_close import start_program

SDK = StreamableHTTPTransport
OURS = (ResumingTransport, _BoundedTransport)
OVERRIDDEN = frozenset(
    {
        "_consume_modern_cancellation",
        "_handle_json_response",
        "_handle_post_request",
        "_handle_reconnection",
        "_handle_sse_event",
        "_handle_sse_response",
        "_prepare_headers",
        "_resolve_abandoned_request",
        "handle_get_stream",
        "terminate_session",
    }
)
"""The SDK's methods the transport replaces: each is called by the SDK's own code."""
CALLED = frozenset({"post_writer", "_in_flight_posts", "session_id", "url", "max_sse_event_size"})
"""What the transport uses of the SDK's class without replacing it."""


_SIZE = ("max_sse_event_size", "KEYWORD_ONLY")


def _shape(function: Callable[..., Any]) -> list[tuple[str, str, Any]]:
    """A signature's parameters as compared: name, kind and default (annotations are spelled apart)."""
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(function).parameters.values()]


def _spelled(function: Callable[..., Any]) -> str:
    """A signature as reported: without its annotations."""
    signature = inspect.signature(function)
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def drift() -> list[str]:
    """How the installed SDK's transport class differs from what the bounded transport relies on."""
    found = []
    for ours in OURS:
        for name, member in vars(ours).items():
            if not inspect.isfunction(member) or name == "__init__":
                continue
            theirs: Any = getattr(SDK, name, None)
            if name in OVERRIDDEN and theirs is None:
                found.append(f"{ours.__name__}.{name} overrides nothing: the SDK no longer has {name}")
            elif name in OVERRIDDEN and _shape(member) != _shape(theirs):
                found.append(
                    f"the SDK's StreamableHTTPTransport.{name}{_spelled(theirs)} is not what "
                    f"{ours.__name__}.{name}{_spelled(member)} replaces"
                )
            elif name not in OVERRIDDEN and theirs is not None:
                found.append(
                    f"the SDK's StreamableHTTPTransport now has {name}, which {ours.__name__} replaces"
                )
    defined = {name for ours in OURS for name in vars(ours)}
    found += [f"{name} is no longer replaced here" for name in sorted(OVERRIDDEN - defined)]
    built = [(name, kind) for name, kind, _ in _shape(SDK.__init__)]  # ``super().__init__`` here
    if built != [("self", "POSITIONAL_OR_KEYWORD"), ("url", "POSITIONAL_OR_KEYWORD"), _SIZE]:
        found.append(f"the SDK's StreamableHTTPTransport{_spelled(SDK.__init__)} changed")
    return found


def test_the_sdks_transport_has_what_the_bounded_transport_overrides_and_calls() -> None:
    assert drift() == []


def test_a_changed_sdk_signature_is_reported_naming_the_method(monkeypatch: pytest.MonkeyPatch) -> None:
    async def _handle_reconnection(self: Any, ctx: Any, last_event_id: str, attempt: int = 0) -> None:
        """As if a release dropped the retry interval."""

    monkeypatch.setattr(SDK, "_handle_reconnection", _handle_reconnection)
    monkeypatch.delattr(SDK, "terminate_session")
    monkeypatch.setattr(SDK, "_served", lambda self: None, raising=False)
    found = drift()
    assert len(found) == 4, found  # ``_served`` is replaced by both classes
    assert found[0].startswith("the SDK's StreamableHTTPTransport._handle_reconnection(self, ctx, "), found
    assert "(self, ctx, last_event_id, retry_interval_ms=None, attempt=0) replaces" in found[0], found
    assert [line for line in found if "has _served, which" in line] == [
        "the SDK's StreamableHTTPTransport now has _served, which ResumingTransport replaces",
        "the SDK's StreamableHTTPTransport now has _served, which _BoundedTransport replaces",
    ], found
    gone = "_BoundedTransport.terminate_session overrides nothing: the SDK no longer has terminate_session"
    assert found[-1] == gone, found


def test_the_sdks_attributes_context_fields_and_streams_are_what_the_transport_reads() -> None:
    client = httpx2.AsyncClient()
    transport = _BoundedTransport("http://127.0.0.1:9/mcp", client=client, max_bytes=10, answer_timeout_s=1)
    assert (transport.url, transport.max_sse_event_size, transport.session_id) == (
        "http://127.0.0.1:9/mcp",
        10,
        None,
    )
    assert transport._in_flight_posts == {}
    assert callable(SDK.post_writer) and list(inspect.signature(SDK.post_writer).parameters) == [
        "self",
        "client",
        "write_stream_reader",
        "read_stream_writer",
        "write_stream",
        "start_get_stream",
        "tg",
    ]
    assert {"scope", "modern"} <= {f.name for f in dataclasses.fields(streamable_http._InFlightPost)}
    fields = {f.name for f in dataclasses.fields(streamable_http.RequestContext)}
    assert {"client", "session_message", "metadata", "read_stream_writer"} <= fields
    assert "on_resumption_token_update" in {f.name for f in dataclasses.fields(ClientMessageMetadata)}
    assert streamable_http.LAST_EVENT_ID == "last-event-id"
    anyio.run(_context_kept)


async def _context_kept() -> None:
    """The SDK's ``post_writer`` runs a message in its sender's context only when the stream keeps it."""
    send, receive = create_context_streams[int](1)
    async with send, receive:
        await send.send(7)
        assert await receive.receive() == 7
        assert receive.last_context is not None


def _spy(own: Any, name: str, counted: Counter[str]) -> Any:
    """``own``, counting its calls under ``name``."""
    if inspect.iscoroutinefunction(own):

        async def waited(self: Any, *args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return await own(self, *args, **kwargs)

        return functools.wraps(own)(waited)

    def called(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted[name] += 1
        return own(self, *args, **kwargs)

    return functools.wraps(own)(called)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the SDK called each method the transport replaces."""
    counted: Counter[str] = Counter()
    for name in OVERRIDDEN:
        monkeypatch.setattr(_BoundedTransport, name, _spy(getattr(_BoundedTransport, name), name, counted))
    return counted


@pytest.fixture
def http_url() -> Iterator[str]:
    proc, url = start_http_server()
    try:
        yield url
    finally:
        stop(proc)


def test_a_session_with_the_sdks_own_server_goes_through_the_overrides(
    http_url: str, calls: Counter[str]
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    server = HttpServer(
        http_url, name="test", allowlisted=True, mode="legacy", connect_timeout_s=CONNECT_TIMEOUT_S
    )
    try:
        rt.add_mcp_server(server)
        obs = rt.call({"name": "chatty", "arguments": {"count": 3}}, run_id=rt.new_run())
        assert obs.data == {"result": "chatted 3"}, obs.error
    finally:
        rt.close()
    every = {"_handle_post_request", "_handle_sse_response", "_handle_sse_event", "_prepare_headers"}
    every |= {"_consume_modern_cancellation", "handle_get_stream", "terminate_session"}
    assert {name for name in every if calls[name] == 0} == set(), calls


@pytest.fixture
def dropping(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    notes = tmp_path / "notes.txt"
    notes.touch()
    proc, url = start_program(notes, LATEST_HANDSHAKE_VERSION, "answer_drop")
    try:
        yield url, notes
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_the_sdk_resumes_a_dropped_answer_through_the_bounded_loop_once(
    dropping: tuple[str, Path], calls: Counter[str]
) -> None:
    url, notes = dropping
    once = {"drop": {"retry": RetryPolicy(max_attempts=1)}}
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_mcp_server(HttpServer(url, name="drops", allowlisted=True, mode="legacy", tool_options=once))
    try:
        obs = rt.call({"name": "drop", "arguments": {}}, run_id=rt.new_run())
    finally:
        rt.close()
    assert obs.error is not None and obs.error.details.get("error") == "connection_closed", obs
    assert calls["_handle_reconnection"] == 1, calls  # the SDK handed the dropped answer to the loop here
    resumed = [line for line in notes.read_text().splitlines() if line.startswith("resume ")]
    assert len(resumed) == MAX_RESUMES, resumed
