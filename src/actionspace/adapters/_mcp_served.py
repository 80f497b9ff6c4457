"""When a server over streamable HTTP has the client's answer to one of its requests: once its POST's
body is sent, not once the POST's status is read.

The bound on a server's requests that wait for their answer (``_mcp_inflight.MAX_SERVED``) counted a
request until its answer's POST was over. An honest server that keeps at most that many requests
unanswered sends its next one as soon as it has an answer, while the POST's status is still on its way
back: a client slow to read those statuses counted answers the server already had, and dropped the
honest server's next requests unanswered (3 of 2,000, and more the slower the statuses came). A request
is now counted until its answer's body has been written to the connection (httpcore's
``send_request_body.complete`` trace event), or its POST ended without that. A server that floods and
holds every POST open still meets the bound: the answers' POSTs run at most ``_ANSWER_POSTS`` at a time,
and each answer waiting for its turn keeps its request counted.

A cancelled request's ``notifications/cancelled`` is POSTed beside the client's other messages too
(:func:`post_aside`): the SDK takes its next message only once a notification's POST is over, so a
server that does not take the notice (one stopped, that accepts connections and reads nothing) held
every later call, and the session's liveness check, up to the POST's bound (10 s).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final

import anyio
import httpx2
from anyio.abc import TaskGroup
from mcp_types import JSONRPCMessage, JSONRPCNotification

__all__ = ["CANCEL_POSTS", "is_cancel", "note_sent_body", "post_answer", "post_aside"]

_log = logging.getLogger("actionspace.mcp")

CANCEL_POSTS: Final = 8
"""Most POSTs of cancellation notices under way at a time; past that a notice is dropped. It is a
courtesy the protocol does not wait for: the request it names has already ended on this side."""

_SENT_BODY: Final = frozenset({"http11.send_request_body.complete", "http2.send_request_body.complete"})
"""The trace events that say a request's body was written (HTTP/1.1, HTTP/2)."""
_ANSWERING: ContextVar[Callable[[], None] | None] = ContextVar("_ANSWERING", default=None)
"""While this task POSTs an answer to a request of the server: what to call once the body is sent."""


async def post_answer(
    post: Callable[[], Awaitable[None]], sent: Callable[[], None], posts: anyio.CapacityLimiter
) -> None:
    """Run ``post`` (the POST of an answer) under ``posts``; call ``sent`` once: when its body has been
    written (:func:`note_sent_body`), or when it ends without that."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            sent()

    try:
        async with posts:
            token = _ANSWERING.set(once)
            try:
                await post()
            finally:
                _ANSWERING.reset(token)
    finally:
        once()


async def note_sent_body(request: httpx2.Request) -> None:
    """An HTTP request hook: a POST of an answer tells :func:`post_answer` when its body is sent."""
    sent = _ANSWERING.get()
    if sent is None or request.method != "POST":
        return
    traced = request.extensions.get("trace")
    request.extensions["trace"] = _tracer(sent, traced)


def _tracer(sent: Callable[[], None], traced: Any) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
    async def trace(name: str, info: dict[str, Any]) -> None:
        if name in _SENT_BODY:
            sent()
        if traced is not None:  # a trace the caller set goes on
            await traced(name, info)

    return trace


def is_cancel(message: JSONRPCMessage) -> bool:
    return isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled"


def post_aside(
    tasks: TaskGroup, posts: anyio.CapacityLimiter, post: Callable[[], Awaitable[None]], where: str
) -> None:
    """Run ``post`` (a cancellation notice's POST, bounded) in ``tasks``, holding one of ``posts``
    (taken here, before it runs); with none left it is dropped, so a server that takes no notice holds
    at most ``posts`` of them, and never the client's next message."""
    borrower = object()
    try:
        posts.acquire_on_behalf_of_nowait(borrower)
    except anyio.WouldBlock:
        _log.warning(
            "MCP server at %s: a cancellation notice was dropped (%g under way)", where, posts.total_tokens
        )
        return

    async def aside() -> None:
        try:
            await post()
        finally:
            posts.release_on_behalf_of(borrower)

    tasks.start_soon(aside)
