"""The tool listings of an MCP session: after a change the server announced, before a write whose listing
is too old, and the calls that wait for them (a mixin of ``_mcp_connection.Connection``).

Kept apart from ``_mcp_connection`` so that the connection reads as the session's lifecycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client
from mcp.client.session import IncomingMessage

from actionspace.adapters._mcp_errors import ServerUnavailable
from actionspace.adapters._mcp_sdk import list_tools, logged_failure

__all__ = ["Listings"]

_log = logging.getLogger("actionspace.mcp")

T = TypeVar("T")


class Listings:
    """How a connection lists its server's tools and keeps calls from running a definition nobody saw."""

    name: str
    max_tools: int
    listing_timeout_s: float
    refreshes: int
    clock: Callable[[], float]
    _client: Client | None
    _on_tools: Callable[[list[types.Tool]], None]
    _refresh_lock: asyncio.Lock | None
    _refresh_queued: bool
    _announced: int
    _listed: int
    _waiters: list[tuple[int, asyncio.Future[bool]]]
    _background: set[asyncio.Task[Any]]
    _abandoned: set[asyncio.Future[Any]]
    _listed_at: float
    _relisting: asyncio.Task[list[types.Tool]] | None

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:  # pragma: no cover
        raise NotImplementedError

    def _heard_from(self) -> None:  # pragma: no cover - the connection's
        """Something came from the server: it is there."""
        raise NotImplementedError

    def _stream_dropped(self) -> None:  # pragma: no cover - the connection's
        """The stream of the server's own messages failed: ask whether the session is still there."""
        raise NotImplementedError

    async def _settle(self, announced: int, wait_s: float) -> None:
        """Wait until the listing that covers the first ``announced`` change announcements has
        finished: a call sent before it would run a definition nobody was shown (say, an approved
        write whose tool just became another). A listing that failed, or that is not over within
        ``wait_s`` (less than the call's timeout, so a write ends known unsent, not in doubt), refuses
        the call, unsent."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((announced, waiter))
        try:
            failed = await asyncio.wait_for(asyncio.shield(waiter), wait_s)
        except TimeoutError:
            failed = True
        finally:
            if not waiter.done():  # the call was cancelled, or waited too long
                self._waiters.remove((announced, waiter))
        if failed:
            raise ServerUnavailable(
                f"MCP server {self.name!r} announced a tool change that was not listed; nothing was sent"
            )

    async def _fresh(self, wait_s: float) -> None:
        """List again before a call, sharing the listing with other calls that wait for one. A listing
        that fails, or is not over within ``wait_s``, refuses the call, unsent: it would run a
        definition nobody has seen for longer than the call allows."""
        task = self._relisting
        if task is None or task.done():
            task = self._relisting = asyncio.ensure_future(self._refresh())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        try:
            await asyncio.wait_for(asyncio.shield(task), wait_s)
        except Exception as exc:  # a timeout too; the listing itself goes on, and is logged if it fails
            task.add_done_callback(logged_failure(self.name))
            raise ServerUnavailable(
                f"MCP server {self.name!r}: its tools could not be listed again before the call "
                f"({type(exc).__name__}); nothing was sent"
            ) from exc

    @property
    def waiting(self) -> int:
        """How many calls wait for a listing of the tool changes the server announced."""
        return len(self._waiters)

    def refresh(self, timeout_s: float) -> list[types.Tool]:
        """List the tools again now and hand them to ``on_tools`` (blocks up to ``timeout_s``)."""
        return self.submit(self._refresh()).result(timeout=timeout_s)

    # ------------------------------------------------------------------ change notifications
    async def _list(self, client: Client) -> list[types.Tool]:
        tools = await list_tools(client, self.name, self.max_tools)
        self._heard_from()
        return tools

    async def _refresh(self) -> list[types.Tool]:
        client = self._client
        if client is None or self._refresh_lock is None:
            self._listing_done(self._announced, failed=True)
            raise ServerUnavailable(f"MCP server {self.name!r} is not connected")
        async with self._refresh_lock:
            self._refresh_queued = False  # this listing covers every change announced until now
            covers, failed, began = self._announced, True, self.clock()
            try:
                tools = await self._bounded_list(client)
                self._listed_at = max(self._listed_at, began)
                self.refreshes += 1
                self._on_tools(tools)
                failed = False
                return tools
            finally:
                self._listing_done(covers, failed=failed)

    async def _bounded_list(self, client: Client) -> list[types.Tool]:
        """:meth:`_list`, given up after ``listing_timeout_s``. The abandoned request is cancelled but
        not waited for: the SDK's unwinding of it may itself wait for the server that is not answering."""
        listing = asyncio.ensure_future(self._list(client))
        try:
            await asyncio.wait({listing}, timeout=self.listing_timeout_s)
        finally:
            if not listing.done():
                listing.cancel()
                self._abandoned.add(listing)
                listing.add_done_callback(self._abandoned.discard)
        if not listing.done():
            raise TimeoutError(
                f"MCP server {self.name!r} did not list its tools within {self.listing_timeout_s}s"
            )
        return listing.result()

    def _listing_done(self, covers: int, *, failed: bool) -> None:
        """Let the calls waiting for the first ``covers`` announced changes go on (or be refused). A
        failed listing leaves them unlisted: the next call lists again first."""
        if not failed:
            self._listed = max(self._listed, covers)
        waiting, self._waiters = self._waiters, []
        for announced, waiter in waiting:
            if announced > covers:
                self._waiters.append((announced, waiter))
            elif not waiter.done():
                waiter.set_result(failed)

    async def _on_message(self, message: IncomingMessage) -> None:
        """Handshake-era servers announce a changed tool list with a bare notification."""
        self._heard_from()
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh_soon()

    async def _listen(self, client: Client) -> None:
        """2026-era servers deliver change events only on a ``subscriptions/listen`` stream. One that the
        server accepted and that then dropped (``SubscriptionLost``) may say the server went away: the
        session is asked whether it is still there."""
        accepted = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                accepted = True
                async for _event in subscription:
                    self._heard_from()
                    self._refresh_soon()
        except Exception as exc:  # the server does not serve listen: the listing stays as it is
            _log.info("MCP server %s: no tool change events: %r", self.name, exc)
            if accepted:
                self._stream_dropped()

    def _refresh_soon(self) -> None:
        """List again after a change notification, unless a listing yet to start will cover it."""
        self._announced += 1
        if not self._refresh_queued:
            self._refresh_queued = True
            self._spawn(self._refresh_logged())

    async def _refresh_logged(self) -> None:
        try:
            await self._refresh()
        except Exception:
            _log.exception("MCP server %s: refreshing the tool list failed", self.name)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
