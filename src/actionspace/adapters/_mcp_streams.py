"""The pair of streams an MCP transport yields to the SDK's ``Client``, typed here.

The SDK names that pair ``TransportStreams`` in a private module (``mcp.client._transport``) and
exports only the ``Transport`` protocol built on it. :data:`Streams` is the same shape spelled with
local protocols, which the SDK's own stream classes satisfy as they are: a release that moves or
renames its private alias changes nothing here, and ``mypy`` checks each bounded transport's pair
against the public ``mcp.client.Transport`` wherever it is handed to ``Client``.

:class:`Held` is a body read here before the SDK reads the response, given to it through the response's
public ``stream`` (httpx2 keeps a read body in a private attribute).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Protocol, Self, TypeVar

import httpx2
from mcp.shared.message import SessionMessage

__all__ = ["Held", "Reading", "Streams", "Writing"]

_Out = TypeVar("_Out", covariant=True)
_In = TypeVar("_In", contravariant=True)


class Reading(Protocol[_Out]):
    """What the session reads the server's messages (or a transport's error) from."""

    async def receive(self) -> _Out: ...
    async def aclose(self) -> None: ...
    def __aiter__(self) -> Reading[_Out]: ...
    async def __anext__(self) -> _Out: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...


class Writing(Protocol[_In]):
    """What the session writes its messages to."""

    async def send(self, item: _In, /) -> None: ...
    async def aclose(self) -> None: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...


Streams = tuple[Reading[SessionMessage | Exception], Writing[SessionMessage]]
"""What a bounded transport yields: the messages read from the server, and where to write the session's."""


class Held(httpx2.AsyncByteStream):
    """A response's body already read (and bounded) here, given whole to whoever reads the response
    next: the SDK's ``aread`` of an error status's body. Closing it closes the stream it was read from
    (``raw``), whose unread rest, if any, drops its connection."""

    def __init__(self, body: bytes, raw: httpx2.AsyncByteStream) -> None:
        self._body = body
        self._raw = raw

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body

    async def aclose(self) -> None:
        await self._raw.aclose()
