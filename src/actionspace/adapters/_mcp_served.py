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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final

import anyio
import httpx2

__all__ = ["note_sent_body", "post_answer"]

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
