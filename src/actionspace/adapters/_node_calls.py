"""The calls one async run of a tools node has in flight, settled before an interrupt leaves it.

A LangGraph ``ToolNode`` run asynchronously (``ainvoke``, ``astream``, ``astream_events``) runs
the calls of a message as tasks under one ``asyncio.gather``. A call held for approval raises
LangGraph's interrupt: the gather passes it on at once, the graph stops, and the calls still
running are cancelled with the run's event loop — a write cancelled while it is being sent is
``unknown_commit``, and the resumed graph's call of it is answered so, never sent. (Run
synchronously, the node's thread pool lets them finish.) :class:`NodeCalls` lets the node wait
for the calls in flight before the interrupt leaves it, so each commits (and is replayed on
resume), and keeps a call that was not started yet from starting once the node is stopping (it
runs when the graph resumes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar, Token
from typing import Any

__all__ = ["STOPPED", "NodeCalls"]

STOPPED = "not run: another call of this message stopped the graph for a decision; it runs on resume"
"""What a call not started before the node stopped answers (the node's output is discarded)."""

_CURRENT: ContextVar[NodeCalls | None] = ContextVar("actionspace_node_calls", default=None)


class NodeCalls:
    """The governed calls in flight in one async run of a tools node (tasks of one event loop)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self.stopping = False
        """The node is leaving with an exception: calls not started yet are not started."""

    @staticmethod
    def current() -> NodeCalls | None:
        """The node run the calling task's call belongs to (None outside a governed node)."""
        return _CURRENT.get()

    def enter(self) -> Token[NodeCalls | None]:
        """Make this the node run of the calls started from the calling context; a token for
        :meth:`leave`."""
        return _CURRENT.set(self)

    @staticmethod
    def leave(token: Token[NodeCalls | None]) -> None:
        _CURRENT.reset(token)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[bool]:
        """While the calling task runs a call: yields False when the node is stopping (the call
        must not start)."""
        task = asyncio.current_task()
        if self.stopping or task is None:
            yield not self.stopping
            return
        self._running.add(task)
        try:
            yield True
        finally:
            self._running.discard(task)

    async def settle(self) -> None:
        """Stop starting calls and wait for those in flight (each ends within its tool's timeout)."""
        self.stopping = True
        here = asyncio.current_task()
        while pending := {t for t in self._running if t is not here and not t.done()}:
            await asyncio.wait(pending)
