"""One live session with one MCP server, owned by a private event loop on a daemon thread.

The official SDK's ``Client`` must be entered and left in one task, and its requests must run on
the loop that entered it. The runtime calls tools from worker threads, its own portal loop and
the caller's event loop, so each connected server gets its own loop: an owner task holds the
session open; every request is submitted to that loop and awaited from wherever the caller is.
Cancelling the awaiting side cancels the request's task, and the SDK then sends the server
``notifications/cancelled`` (on streamable HTTP at the 2026 revision: it aborts the request).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client
from mcp.client.session import MessageHandlerFnT
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, HEADER_MISMATCH, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from actionspace.adapters._mcp_errors import (
    UNDELIVERED,
    UNSENT,
    InputRefused,
    ServerUnavailable,
    ToolChanged,
    ToolChangedDuringCall,
)
from actionspace.adapters._mcp_listings import Listings
from actionspace.adapters._mcp_liveness import NO_ANSWER, Liveness
from actionspace.adapters._mcp_pipe import SEND_WITHIN, Handing
from actionspace.adapters._mcp_reconnect import (
    SESSION_LOST,
    STREAM_DROPPED,
    Reconnect,
    Waking,
    either,
    refusal,
    reopen,
)
from actionspace.adapters._mcp_sdk import refused_here, without_resend
from actionspace.execution.loop import new_event_loop

_refused_here = refused_here  # where tests look for it

__all__ = ["MAX_TOOLS", "Connection", "OpenClient"]

_log = logging.getLogger("actionspace.mcp")

T = TypeVar("T")

OpenClient = Callable[[AsyncExitStack, MessageHandlerFnT], Awaitable[Client]]
"""Enters a connected ``Client`` (and whatever it needs, e.g. an HTTP client) onto the stack."""

_CLOSE_TIMEOUT_S = 10.0
"""Longest wait for a session to end on close: the SDK's stdio shutdown takes up to about 6.5 s
(2 s for the server to exit once its stdin closes, 2 s after SIGTERM, 2 s to reap after SIGKILL)."""
_LISTING_TIMEOUT_S = 60.0
"""Default bound of a listing after a change notification (the server's ``connect_timeout_s``)."""
MAX_TOOLS = 1000
"""Most tools taken from one server's listing by default (the server's ``max_tools``), in the
order it lists them. Each costs a schema
compile and a catalog entry (about 0.7 ms), and a page of 32 MiB names tens of thousands: without a
bound, 100 pages of a hostile server would keep registration busy for an hour and take gigabytes."""


class Connection(Liveness, Listings):
    """A connected MCP session usable from any thread or event loop.

    ``on_tools`` is called (on the connection's thread) with the full tool listing after every
    refresh that ``tools/list_changed`` (or a ``subscriptions/listen`` event) triggers.
    """

    def __init__(
        self,
        name: str,
        open_client: OpenClient,
        on_tools: Callable[[list[types.Tool]], None],
        *,
        max_tools: int = MAX_TOOLS,
        listing_timeout_s: float = _LISTING_TIMEOUT_S,
        reconnect: Reconnect | None = None,
        probed: bool = False,
    ) -> None:
        self.name = name
        self.probed = probed
        """Whether a silent server is asked (``Reconnect.unanswered``, ``idle_probe_s``) and its session
        ended when it does not answer (a stdio server's process is then stopped and started again)."""
        self.max_tools = max_tools
        """Most tools taken from one listing, the first ones in the server's order."""
        self.listing_timeout_s = listing_timeout_s
        """Longest a listing after a change notification may take: a server that never answers it
        would hold every later listing, and every call waiting for one (see :meth:`_settle`)."""
        self._open_client = open_client
        self._on_tools = on_tools
        self._loop, self._thread = self._new_loop()
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None
        self._owner: concurrent.futures.Future[None] | None = None
        self._ended = threading.Event()
        """Set once the owner task has left the session (the server process is stopped)."""
        self._refresh_lock: asyncio.Lock | None = None
        self._refresh_queued = False
        """A notified refresh waits to list: later notifications ride on it (a storm lists twice)."""
        self._announced = 0
        """How many tool changes the server announced; ``_listed``: how many of them the last finished
        listing covers. A call waits until every change announced before it is listed (see :meth:`_call`)."""
        self._listed = 0
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        """(announced changes it waits for, its future: True when that listing failed) per waiting call."""
        self._background: set[asyncio.Task[Any]] = set()
        self._abandoned: set[asyncio.Future[Any]] = set()
        """Listings given up on, still unwinding (held here only so that they are not collected)."""
        self.refreshes = 0
        """How many listings were taken after the first one (from a change notification, or before a
        write when the last was too old: see :meth:`call_tool`)."""
        self.clock: Callable[[], float] = time.monotonic
        """What the age of a listing is measured with (seconds)."""
        self._listed_at = float("-inf")
        """When the last listing that succeeded began (:attr:`clock`)."""
        self._relisting: asyncio.Task[list[types.Tool]] | None = None
        """The listing calls share when theirs is too old (see :meth:`_fresh`)."""
        self.failure: BaseException | None = None
        """Why the session ended, when it ended on its own."""
        self.reconnect = reconnect
        """How a session that ended on its own is opened again (None: never); see ``_mcp_reconnect``."""
        self.reconnects = 0  # how many times a session was opened again
        self._retry_at: float | None = None
        """While no session is up and one will be tried: when (``time.monotonic()``) the next attempt is."""
        self._lost = asyncio.Event()
        """Set when the current session is known to be gone (``SESSION_LOST``, or a probe)."""
        self._waking = Waking()
        """Where a connection whose attempts are spent waits for a call after the cool-down."""
        self._heard = 0
        """How many times something came from the server (an answer, a notification, an event)."""
        self._heard_at = time.monotonic()
        self._silent = 0
        """Requests in a row that ended unanswered while nothing was heard (see :meth:`_unanswered`)."""
        self._asking = False
        """A probe (:meth:`_probe`) is under way: calls wait for its verdict (:meth:`_verdict_of`)."""
        self._verdict = asyncio.Event()
        self._verdict_due = 0.0

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float) -> list[types.Tool]:
        """Connect and list the tools (blocks the calling thread up to ``timeout_s`` seconds)."""
        started = self._begin()
        try:
            return started.result(timeout=timeout_s)
        except BaseException:
            self.close(abort=True)
            raise

    async def astart(self, timeout_s: float) -> list[types.Tool]:
        """Async :meth:`start`."""
        started = self._begin()
        try:
            return await asyncio.wait_for(asyncio.wrap_future(started), timeout_s)
        except BaseException:
            await asyncio.to_thread(self.close, abort=True)
            raise

    def _new_loop(self) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        loop = new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"actionspace-mcp-{self.name}", daemon=True)
        return loop, thread

    def _begin(self) -> concurrent.futures.Future[list[types.Tool]]:
        if self._thread.is_alive():
            raise RuntimeError(f"MCP server {self.name!r} is already started")
        if self._thread.ident is not None or self._loop.is_closed():  # closed before: connect afresh
            self._loop, self._thread = self._new_loop()
            self.failure = None
        self._thread.start()
        started: concurrent.futures.Future[list[types.Tool]] = concurrent.futures.Future()
        self._ended.clear()
        self._owner = asyncio.run_coroutine_threadsafe(self._own(started), self._loop)
        return started

    async def _own(self, started: concurrent.futures.Future[list[types.Tool]]) -> None:
        """Hold the session open until :meth:`close`; one that ends on its own is opened again under
        :attr:`reconnect` (``_mcp_reconnect``). A first session that cannot be opened fails ``started``."""
        self._stop = asyncio.Event()
        self._refresh_lock = asyncio.Lock()
        self._waking = Waking()
        self._verdict, self._asking = asyncio.Event(), False  # this loop's
        try:
            if await self._session(started) and self.reconnect is not None:
                session = lambda: self._session(started)  # noqa: E731
                await reopen(self.reconnect, self._stop, session, self._due, self.name, self._waking)
        finally:
            self._client = None
            self._retry_at = None
            self._listing_done(self._announced, failed=True)  # no listing comes: waiting calls end
            self._ended.set()

    async def _session(self, started: concurrent.futures.Future[list[types.Tool]]) -> bool:
        """Open a session, list the tools and hold it until it ends or :meth:`close`; whether it opened.
        A reopened one hands its listing to ``on_tools`` (a changed tool becomes a new version)."""
        lost = self._lost = asyncio.Event()
        stop = self._stop
        assert stop is not None
        watching = SESSION_LOST.set(
            lambda: None if lost is not self._lost or stop.is_set() else self._gone(None)
        )
        dropping = STREAM_DROPPED.set(
            lambda: None if lost is not self._lost or stop.is_set() else self._stream_dropped()
        )
        opened = False
        try:
            async with AsyncExitStack() as stack:
                async with asyncio.timeout(None if not started.done() else self.listing_timeout_s):
                    client = await self._open_client(stack, self._on_message)
                    without_resend(client)
                    self._client = None if started.done() else client  # a reopened one: once it is listed
                    began = self.clock()
                    tools = await self._list(client)
                if started.done():
                    self._on_tools(tools)
                    self._listing_done(self._announced, failed=False)  # it covers every change announced
                    self.reconnects += 1
                    _log.warning("MCP server %s: reconnected", self.name)
                self._listed_at = began
                opened = True
                if not lost.is_set():  # it may have ended already, while it listed
                    self._client, self._retry_at, self.failure = client, None, None
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    self._spawn(self._listen(client))
                if self.probed and self.reconnect is not None and self.reconnect.idle_probe_s is not None:
                    self._spawn(self._idle(client, self.reconnect.idle_probe_s))
                if not started.done():
                    started.set_result(tools)
                await either(lost, stop)
                self._client = None
                for task in list(self._background):
                    task.cancel()
                await asyncio.gather(*self._background, return_exceptions=True)
        except BaseException as exc:
            self.failure = exc
            if not started.done():
                started.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                _log.warning("MCP server %s: session ended: %r", self.name, exc)
            if not isinstance(exc, Exception):
                raise
            return opened
        finally:
            STREAM_DROPPED.reset(dropping)
            SESSION_LOST.reset(watching)
            self._client = None
        return opened

    def close(self, timeout_s: float = _CLOSE_TIMEOUT_S, *, abort: bool = False) -> None:
        """End the session (stops a stdio server's process) and the loop thread, within about
        ``timeout_s`` seconds. ``abort``: the session is still starting, cancel it at once. Idempotent.

        The loop runs until the session's own shutdown is over (for a stdio server: its stdin
        closed, then SIGTERM, then SIGKILL to its process group), so no server process outlives it.
        """
        if not self._thread.is_alive():
            if self._thread.ident is None and not self._loop.is_closed():
                self._loop.close()  # never started: its loop's descriptors go with it
            return
        deadline = time.monotonic() + timeout_s
        owner = self._owner
        if owner is not None and not abort:
            stop = self._stop
            if stop is not None:
                self._loop.call_soon_threadsafe(stop.set)
            abort = not self._ended.wait(timeout_s / 2)  # a stop that is not heard: cancel
        if owner is not None and abort:
            owner.cancel()  # the owner task unwinds the SDK's bounded, shielded shutdown
            if not self._ended.wait(max(0.0, deadline - time.monotonic())):
                _log.warning("MCP server %s: session did not end within %ss", self.name, timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        if not self._thread.is_alive():
            self._loop.close()

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def resting(self) -> bool:
        """The attempts to reconnect are spent and the cool-down is over: the next call starts a new round."""
        return self._waking.open

    @property
    def protocol_version(self) -> str | None:
        client = self._client
        return None if client is None else client.protocol_version

    # ------------------------------------------------------------------ requests
    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the connection's loop."""
        if not self._thread.is_alive() or self._loop.is_closed():
            coro.close()
            raise ServerUnavailable(f"MCP server {self.name!r} is not connected")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        check: Callable[[], None] | None = None,
        wait_s: float = _LISTING_TIMEOUT_S,
        fresh_s: float | None = None,
    ) -> types.CallToolResult:
        """Call a tool; awaitable from any event loop. Cancelling this cancels the request.

        ``check`` (on the connection's loop, once every tool change the server announced before the
        call is listed, just before the request is sent) raises to refuse the call: its tool's
        definition is no longer the one the call was made (and perhaps approved) for. ``fresh_s``: unless
        the last listing began less than this long ago (seconds), list again first, since a server may
        change a tool without announcing it (None: never). ``wait_s``: the longest wait for either
        listing; then the call is refused, unsent (``ServerUnavailable``). A change announced while the
        call runs is listed before it returns: a changed tool raises ``ToolChangedDuringCall``."""
        sent: list[tuple[Client, int]] = []
        try:
            return await asyncio.wrap_future(
                self.submit(self._call(name, arguments, check, wait_s, fresh_s, sent))
            )
        except asyncio.CancelledError:  # the call's timeout, or its caller gave up: counted at once, since
            if sent:  # the SDK ends the request only once its cancellation is sent, which may wait long
                with contextlib.suppress(RuntimeError):  # the loop closed: the session is over anyway
                    self._loop.call_soon_threadsafe(self._unanswered, *sent[0])
            raise

    async def _call(
        self,
        name: str,
        arguments: dict[str, Any],
        check: Callable[[], None] | None = None,
        wait_s: float = _LISTING_TIMEOUT_S,
        fresh_s: float | None = None,
        sent: list[tuple[Client, int]] | None = None,
    ) -> types.CallToolResult:
        if self._client is not None and self._listed < self._announced:
            if not self._refresh_queued and not (self._refresh_lock and self._refresh_lock.locked()):
                self._refresh_queued = True  # the last listing failed: list again before sending anything
                self._spawn(self._refresh_logged())
            await self._settle(self._announced, wait_s)
        if fresh_s is not None and self._client is not None and self.clock() - self._listed_at >= fresh_s:
            await self._fresh(wait_s)
        client = self._client
        if client is not None and not self._lost.is_set():
            await self._verdict_of(client, wait_s)  # not sent into a silence being asked about
            client = self._client
        if client is None or self._lost.is_set():
            if self._waking.call():  # the attempts were spent and the cool-down is over: a new round
                self._due(time.monotonic())
            raise refusal(self.name, self._retry_at)
        if check is not None:
            check()
        announced, heard = self._announced, self._heard
        if sent is not None:
            sent.append((client, heard))
        try:
            handing = SEND_WITHIN.set(Handing(wait_s))  # a stdio server not reading: refused unsent
            try:
                result = await client.call_tool(name, arguments)
            finally:
                SEND_WITHIN.reset(handing)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                self._unanswered(client, heard)
            elif exc.code not in NO_ANSWER:
                self._heard_from()
            if refused_here(exc):
                said = f"the server asked for input this client does not offer ({exc.message[:100]})"
                raise InputRefused(said) from exc
            if exc.code == UNSENT:  # not a byte of it reached the server: nothing ran
                raise self._unread(client, exc) from exc
            if exc.code == UNDELIVERED:  # it reached no session of the server: nothing ran
                self._gone(client, exc)
                raise refusal(self.name, self._retry_at) from exc
            if exc.code == CONNECTION_CLOSED:
                await self._check_alive(client, exc)
            elif exc.code == HEADER_MISMATCH:  # the server's definition is not the listed one: list again
                self._refresh_soon()
            raise
        except RuntimeError:  # the SDK's output-schema check, against the newest listing
            if check is not None and self._announced > announced:
                await self._unchanged_since(announced, check, wait_s)
            raise
        self._heard_from()
        if check is not None and self._announced > announced:
            await self._unchanged_since(announced, check, wait_s)
        return result

    async def _unchanged_since(self, announced: int, check: Callable[[], None], wait_s: float) -> None:
        """A change was announced while a call ran: once it is listed, raise ToolChangedDuringCall unless
        ``check`` finds the call's tool as it was sent. The answer may come from either definition."""
        try:
            if self._listed < self._announced:
                await self._settle(self._announced, wait_s)
            check()
        except (ServerUnavailable, ToolChanged) as exc:
            said = "the server announced a change of the tool while the call ran"
            raise ToolChangedDuringCall(f"{said}; which definition answered is not known: {exc}") from exc

    def _gone(self, client: Client | None, why: BaseException | None = None) -> None:
        """The session (of ``client``, if given) is gone: later calls are refused unsent, and it is opened
        again. Called by a probe, or by the transport (``SESSION_LOST``), perhaps while it still opens."""
        if client is not None and self._client is not client:
            return
        self._client = None
        if not self._lost.is_set() or why is not None:
            _log.warning("MCP server %s: session ended: %r", self.name, why or "its transport ended")
        self._lost.set()
        self._due(time.monotonic())
        self.failure = why or self.failure

    def _due(self, retry_at: float | None) -> None:
        """Note when the next attempt to open the session is due (None: none comes)."""
        self._retry_at = retry_at if self.reconnect is not None and not self._ended.is_set() else None
