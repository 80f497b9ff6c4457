"""A notification's POST whose connection the server resets (``notifications/initialized`` of the
handshake, ``notifications/cancelled`` of a call given up) is logged, and the session goes on: later
requests are sent and answered as before."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from actionspace import Runtime
from actionspace.adapters._mcp_http import bounded_http_client
from actionspace.adapters.mcp_client import HttpServer
from tests.adapters.test_w81_mcp_http_close import start_program


def lines(notes: Path) -> list[str]:
    return notes.read_text().splitlines()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.touch()
    return path


def program(notes: Path, modes: str) -> Iterator[str]:
    proc, url = start_program(notes, LATEST_HANDSHAKE_VERSION, modes)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_reset_initialized_notice_leaves_the_session_serving_calls(
    notes: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for url in program(notes, "initialized_reset"):
        rt = Runtime("memory://", recover_on_start=False)
        try:
            with caplog.at_level(logging.WARNING, logger="actionspace.mcp"):
                rt.add_mcp_server(
                    HttpServer(url, name="resets", allowlisted=True, timeout_s=10.0, mode="legacy")
                )
            obs = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
            again = rt.call({"name": "ok_write", "arguments": {}}, run_id=rt.new_run())
        finally:
            rt.close()
    assert obs.data == "fine", obs.error
    assert again.data == "fine", again.error
    assert "reset notifications/initialized" in lines(notes)
    assert any("notification's POST failed" in r.getMessage() for r in caplog.records), caplog.text


async def until_noted(notes: Path, line: str, within_s: float = 30.0) -> None:
    """Return once the server noted ``line``; fail after ``within_s`` seconds."""
    with anyio.fail_after(within_s):
        while line not in lines(notes):
            await anyio.sleep(0.02)


def test_a_reset_cancel_notice_leaves_the_session_serving_the_next_call(notes: Path) -> None:
    async def scenario(url: str) -> str:
        async with create_mcp_http_client() as http:
            transport = bounded_http_client(url, http_client=http, answer_timeout_s=60.0)
            async with Client(transport, mode="legacy", cache=None) as client:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "stall", {})
                    await until_noted(notes, "stall")  # the server holds the call
                    tg.cancel_scope.cancel()  # so the client sends the cancel notice
                await until_noted(notes, "reset notifications/cancelled")
                await until_noted(notes, "closed stall")
                with anyio.fail_after(30):
                    after = await client.call_tool("ok", {})
                return after.content[0].text  # type: ignore[union-attr]

    for url in program(notes, "notice_reset"):
        text = anyio.run(scenario, url)
    assert text == "fine"
