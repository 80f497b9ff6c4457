"""The bounded HTTP transport's backstop: a response stream nobody cancels is still read no longer
than its answer deadline, which outlasts every call's own timeout."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import REQUEST_TIMEOUT

from actionspace.adapters._mcp_http import bounded_http_client
from actionspace.adapters.mcp_client import HttpServer, _answer_s
from tests.adapters.mcp_work import Timeouts, ending
from tests.adapters.test_w64_mcp_http_hostile_answers import start_program, wait_for_line

ANSWER_S = 2.0
"""The answer deadline under test. It bounds every request of the session, the handshake and the call
after the stall too: each must be answered within it on a loaded machine."""


def _serving(url: str) -> None:
    """Returns once the program answers HTTP: its socket listens before Python has started it, and
    the handshake must not wait (under the answer deadline) for the program's start-up."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=60):
                return
        except urllib.error.HTTPError:
            return  # any answer: it serves
        except OSError:
            assert time.monotonic() < deadline, "the program did not start"
            time.sleep(0.1)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


@pytest.fixture
def endpoint(notes: Path) -> Iterator[str]:
    proc, url = start_program(notes)
    try:
        _serving(url)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_stalled_answer_nobody_cancels_ends_at_the_answer_deadline_and_the_session_goes_on(
    endpoint: str, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeouts = Timeouts(monkeypatch)

    async def scenario() -> tuple[int, int, str]:
        async with create_mcp_http_client() as http:
            transport = bounded_http_client(endpoint, http_client=http, answer_timeout_s=ANSWER_S)
            async with Client(transport, mode="legacy", cache=None) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("stall_write", {})
                given_up = timeouts.answer_deadlines
                after = await client.call_tool("ok", {})
                text = after.content[0].text  # type: ignore[union-attr]
                return given_up, raised.value.code, text

    # The stalled answer never comes: ended at all, it was ended by the answer deadline (counted,
    # once), within ``ending``'s 60 s (far above the 2 s deadline, and the stall lasts for ever).
    given_up, code, text = ending(lambda: anyio.run(scenario))
    assert code == REQUEST_TIMEOUT
    assert given_up == 1 and timeouts.answer_deadlines == 1  # the stall's request only, not the next one
    assert text == "fine"
    assert wait_for_line(notes, "closed stall_write", within_s=30.0)


def test_the_answer_deadline_outlasts_the_longest_call_timeout_of_any_tool() -> None:
    server = HttpServer(
        "http://127.0.0.1:1/mcp",
        timeout_s=30.0,
        connect_timeout_s=10.0,
        tool_options={"slow": {"timeout_s": 600}, "odd": {"timeout_s": "x"}},
    )
    assert _answer_s(server) > 600
    assert _answer_s(HttpServer("http://127.0.0.1:1/mcp", timeout_s=5.0, connect_timeout_s=60.0)) > 60
