"""The stdio transport's writer (``_mcp_pipe.Outbox``) over a real pipe nobody reads:

* a call's request not begun when its bound passes is taken back and refused ``UNSENT``; it never
  reaches the pipe, and the messages written are whole lines, in order;
* a request whose first bytes went in is written to its end, even when its sender was cancelled;
* a cancelled sender's message that had not begun is never written;
* a call's later request (another round of a call the server had) is never refused as unsent;
* once the pipe breaks, a call's first request not begun is ``UNSENT``, anything else closed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification, JSONRPCRequest

from actionspace.adapters._mcp_errors import UNSENT
from actionspace.adapters._mcp_inflight import Asked
from actionspace.adapters._mcp_pipe import SEND_WITHIN, Handing, Outbox

BOUND_S = 0.2
"""A request's bound here: only ever passed while the pipe is full and nothing reads it."""


def request(n: int, size: int = 10) -> SessionMessage:
    params = {"name": "note", "arguments": {"text": "x" * size}}
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=n, method="tools/call", params=params))


def notice() -> SessionMessage:
    return SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))


class _Stream:
    async def send(self, item: bytes) -> None:
        raise AssertionError("the pipe's descriptor is written, not the stream")


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    try:
        yield read, write
    finally:
        os.close(read)


def drain(fd: int) -> bytes:
    got = bytearray()
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return bytes(got)
        if not chunk:
            return bytes(got)
        got += chunk


def ids(data: bytes) -> list[int]:
    """The ids of the complete lines in ``data``."""
    return [json.loads(line)["id"] for line in data.split(b"\n")[:-1]]


async def bounded(outbox: Outbox, message: SessionMessage, within_s: float = BOUND_S) -> None:
    token = SEND_WITHIN.set(Handing(within_s))
    try:
        await outbox.send(message)
    finally:
        SEND_WITHIN.reset(token)


def test_a_request_not_begun_within_its_bound_is_refused_unsent_and_never_written(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    asked = Asked()

    async def main() -> list[int]:
        outbox = Outbox(write, _Stream(), asked)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            await bounded(outbox, request(1, size=1 << 20))  # begun: the pipe takes 64 KiB of it
            with pytest.raises(MCPError) as refused:
                await bounded(outbox, request(2))
            assert refused.value.code == UNSENT
            late = anyio.Event()

            async def unbounded() -> None:
                await outbox.send(request(3))  # no bound: waits for the pipe
                late.set()

            tg.start_soon(unbounded)
            got = bytearray()
            with anyio.fail_after(120):
                while not late.is_set() or not got.endswith(b"\n") or len(ids(bytes(got))) < 2:
                    got += drain(read)
                    await anyio.sleep(0.01)
            outbox.shut()
            tg.cancel_scope.cancel()
        return ids(bytes(got))

    assert anyio.run(main) == [1, 3]
    assert asked.named([1, 2, 3]) == [1, 3]  # the one taken back is not waited for


def test_a_begun_request_is_written_whole_after_its_sender_is_cancelled(pipe: tuple[int, int]) -> None:
    read, write = pipe

    async def main() -> bytes:
        outbox = Outbox(write, _Stream(), Asked())  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            with anyio.CancelScope() as scope:
                await outbox.send(request(1, size=1 << 20))
                scope.cancel()  # its sender is gone; the rest of its line still goes in
                await anyio.sleep(1)
            cancelled = anyio.CancelScope()

            async def given_up() -> None:
                with cancelled:
                    await outbox.send(request(2))

            tg.start_soon(given_up)
            await anyio.sleep(0)
            cancelled.cancel()  # not begun: taken back
            got = bytearray()

            async def reader() -> None:
                while True:
                    got.extend(drain(read))
                    await anyio.sleep(0.01)

            tg.start_soon(reader)
            await bounded(outbox, request(3), within_s=120)  # begun once the pipe is read
            with anyio.fail_after(120):
                while len(ids(bytes(got))) < 2 or not got.endswith(b"\n"):
                    await anyio.sleep(0.01)
            outbox.shut()
            tg.cancel_scope.cancel()
        return bytes(got)

    written = anyio.run(main)
    assert ids(written) == [1, 3]
    assert all(json.loads(line) for line in written.splitlines())  # whole lines, none cut or glued


def test_a_calls_later_request_is_not_refused_as_unsent(pipe: tuple[int, int]) -> None:
    read, write = pipe

    async def main() -> None:
        outbox = Outbox(write, _Stream(), Asked())  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            token = SEND_WITHIN.set(Handing(BOUND_S))
            try:
                await outbox.send(request(1, size=1 << 20))  # the call's first request: begun
                second = anyio.Event()

                async def round_two() -> None:
                    await outbox.send(request(2))  # no bound: the server had the call
                    second.set()

                tg.start_soon(round_two)
                await anyio.sleep(BOUND_S * 3)
                assert not second.is_set()
                with anyio.fail_after(120):
                    while not second.is_set():
                        drain(read)
                        await anyio.sleep(0.01)
            finally:
                SEND_WITHIN.reset(token)
            outbox.shut()
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_once_the_pipe_breaks_a_first_request_is_unsent_and_others_are_closed() -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)

    async def main() -> None:
        outbox = Outbox(write, _Stream(), Asked())  # type: ignore[arg-type]
        failed: list[BaseException] = []

        async def writer() -> None:
            try:
                await outbox.run()
            except OSError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await bounded(outbox, request(1, size=1 << 20))
            refused: list[BaseException] = []

            async def queued() -> None:
                try:
                    await bounded(outbox, request(2), within_s=120)
                except MCPError as exc:
                    refused.append(exc)

            tg.start_soon(queued)
            await anyio.sleep(0.1)
            os.close(read)  # the server's end of its input closes: its process ended
            with anyio.fail_after(120):
                while not (failed and refused):
                    await anyio.sleep(0.01)
            assert isinstance(refused[0], MCPError) and refused[0].code == UNSENT
            with pytest.raises(MCPError) as first:
                await bounded(outbox, request(3))
            assert first.value.code == UNSENT
            with pytest.raises(anyio.ClosedResourceError):
                await outbox.send(notice())
            outbox.shut()

    anyio.run(main)
