"""Counters a test installs on seams the MCP client already has, so a test holds the work a call
costs, and how it ended, instead of timing it (a bound on wall time fails on a loaded machine).

* :class:`ReadWork` counts what the stdio reader (``_mcp_stdio._Lines.feed``) reads and hands on,
  and what the protocol's types parse (``mcp_types.jsonrpc_message_adapter.validate_json``);
* :class:`Timeouts` counts the calls the executor ended at their timeout (``executor._timeout_error``),
  and the requests the HTTP transport gave up at its answer deadline (``REQUEST_TIMEOUT``);
* :func:`ending` fails a test whose call never ends (held past its timeout for good) instead of hanging it.
"""

from __future__ import annotations

import concurrent.futures
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from actionspace.adapters import _mcp_http, _mcp_stdio
from actionspace.execution import executor

T = TypeVar("T")
HANG_S = 60.0
"""A call not ended this long after it began is held past its timeout for good: a timer that fired ends
it within the 0.25 s grace of ``execution.deadlines``, on any machine however loaded."""


def ending(fn: Callable[[], T], within_s: float = HANG_S) -> T:
    """``fn()``, or a failed test (``AssertionError``) when it has not ended within ``within_s``."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(fn).result(timeout=within_s)
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"the call had not ended {within_s:g} s after it began") from None
    finally:
        pool.shutdown(wait=False)  # a call held for good is cut by its runtime's close


class _CountingAdapter:
    """``jsonrpc_message_adapter`` with its ``validate_json`` counted (calls and bytes)."""

    def __init__(self, adapter: Any, work: ReadWork) -> None:
        self._adapter = adapter
        self._work = work

    def validate_json(self, data: bytes | str, *args: Any, **kwargs: Any) -> Any:
        self._work.parses += 1
        self._work.parsed_bytes += len(data)
        return self._adapter.validate_json(data, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)


class ReadWork:
    """What the stdio reader read (``lines``, ``read_bytes``), parsed (``parses``, ``parsed_bytes``)
    and handed to the session (``notifications``: notifications among them), since :meth:`reset`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reset()
        feed = _mcp_stdio._Lines.feed
        work = self

        def counted(lines: Any, chunk: bytes) -> Iterator[SessionMessage | Exception]:
            work.read_bytes += len(chunk)
            work.lines += chunk.count(b"\n")
            for item in feed(lines, chunk):
                message = item.message if isinstance(item, SessionMessage) else None
                work.notifications += isinstance(message, mcp_types.JSONRPCNotification)
                yield item

        monkeypatch.setattr(_mcp_stdio._Lines, "feed", counted)
        adapter = _CountingAdapter(mcp_types.jsonrpc_message_adapter, self)
        monkeypatch.setattr(mcp_types, "jsonrpc_message_adapter", adapter)

    def reset(self) -> None:
        self.lines = self.read_bytes = self.parses = self.parsed_bytes = self.notifications = 0


class Timeouts:
    """How many attempts of each tool the executor ended at their timeout (``by_tool``, with the
    timeouts it ended them at in ``limits``), and how many requests the HTTP transport gave up at its
    answer deadline (``answer_deadlines``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_tool: Counter[str] = Counter()
        self.limits: list[float] = []
        self.answer_deadlines = 0
        made = executor._timeout_error
        resolve = _mcp_http._BoundedTransport._resolve_abandoned_request

        def counted(spec: Any) -> Any:
            self.by_tool[spec.name] += 1
            self.limits.append(spec.timeout_s)
            return made(spec)

        async def given_up(transport: Any, writer: Any, request_id: Any, message: str, **kw: Any) -> None:
            if kw.get("code") == mcp_types.REQUEST_TIMEOUT:
                self.answer_deadlines += 1
            await resolve(transport, writer, request_id, message, **kw)

        monkeypatch.setattr(executor, "_timeout_error", counted)
        monkeypatch.setattr(_mcp_http._BoundedTransport, "_resolve_abandoned_request", given_up)
