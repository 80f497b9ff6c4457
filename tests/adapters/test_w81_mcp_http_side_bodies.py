"""The bodies of an MCP server over streamable HTTP that answer no call: a notification's POST that is
answered with a stalled error body or not at all holds the session no longer than its deadline; the
GET stream is reconnected no faster than once a second, whatever ``retry`` the server asks for; and
the error body of a GET or DELETE is never read."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from actionspace import Runtime
from actionspace.adapters._mcp_http import _BoundedTransport, bounded_http_client
from actionspace.adapters.mcp_client import HttpServer
from tests.adapters.test_w81_mcp_http_close import start_program


def lines(notes: Path) -> list[str]:
    return notes.read_text().splitlines()


@pytest.mark.parametrize(("modes", "most_s"), [("notice_stall", 2.0), ("notice_silent", 4.5)])
def test_a_cancel_notice_that_is_never_answered_holds_later_calls_at_most_its_deadline(
    tmp_path: Path, modes: str, most_s: float
) -> None:
    notes = tmp_path / "notes.txt"
    notes.touch()
    proc, url = start_program(notes, LATEST_HANDSHAKE_VERSION, modes)

    async def scenario() -> tuple[float, str]:
        async with create_mcp_http_client() as http:
            transport = bounded_http_client(url, http_client=http, answer_timeout_s=3.0)
            async with Client(transport, mode="legacy", cache=None) as client:
                with anyio.move_on_after(0.5):
                    await client.call_tool("stall", {})  # cancelled: the client sends the cancel notice
                started = time.monotonic()
                with anyio.fail_after(30):
                    after = await client.call_tool("ok", {})
                return time.monotonic() - started, after.content[0].text  # type: ignore[union-attr]

    try:
        took, text = anyio.run(scenario)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert text == "fine"
    assert took < most_s, took
    assert "closed stall" in lines(notes)


def test_a_get_stream_the_server_ends_with_retry_zero_is_taken_again_at_most_once_a_second(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    notes.touch()
    proc, url = start_program(notes, LATEST_HANDSHAKE_VERSION, "get_retry_zero")
    try:
        rt = Runtime("memory://", recover_on_start=False)
        rt.add_mcp_server(HttpServer(url, name="w81", allowlisted=True, timeout_s=5.0))
        try:
            first = lines(notes).count("GET /mcp")
            time.sleep(3.0)
            taken = lines(notes).count("GET /mcp") - first
            obs = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
        finally:
            rt.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert 1 <= taken <= 5, taken
    assert obs.data == "fine", obs.error


class _Unending(httpx2.AsyncByteStream):
    def __init__(self) -> None:
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.read += 1
            yield b" " * 65536
            await anyio.sleep(0)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_the_error_body_of_a_get_or_delete_is_never_read(method: str) -> None:
    async def hook() -> int:
        client = httpx2.AsyncClient()
        transport = _BoundedTransport(
            "http://127.0.0.1:9/mcp", client=client, max_bytes=1 << 20, answer_timeout_s=5.0
        )
        stream = _Unending()
        request = client.build_request(method, "http://127.0.0.1:9/mcp")
        headers = {"content-type": "application/json"}
        response = httpx2.Response(500, headers=headers, stream=stream, request=request)
        with anyio.fail_after(5):
            await transport.bound_answer(response)
        await client.aclose()
        return stream.read

    assert anyio.run(hook) == 0
