"""An SSE answer the server drops after an event with an id is resumed (a GET with ``Last-Event-ID``)
only a bounded number of times, with a growing delay that honours the server's ``retry`` above a floor:
a server that drops every answer ends the call with a typed error in bounded time, whether the request
has an answer deadline or not (``subscriptions/listen``), and the session goes on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, JSONRPCError, JSONRPCRequest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from actionspace import Runtime
from actionspace.adapters._mcp_http import bounded_http_client
from actionspace.adapters._mcp_resumes import MAX_RESUMES, RESUME_FLOOR_S, RESUME_MOST_S, resume_delay
from actionspace.adapters.mcp_client import HttpServer
from actionspace.catalog.spec import RetryPolicy
from tests.adapters.test_w81_mcp_http_close import start_program

_MOST_RESUMES = 5
"""The bound every test holds the client to: the SDK alone resumes until the answer deadline."""


def resumes(notes: Path) -> list[str]:
    return [line for line in notes.read_text().splitlines() if line.startswith("resume ")]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.touch()
    return path


@pytest.fixture
def modes() -> str:
    return "answer_drop"


@pytest.fixture
def endpoint(notes: Path, modes: str) -> Iterator[str]:
    proc, url = start_program(notes, LATEST_HANDSHAKE_VERSION, modes)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def rt(endpoint: str) -> Iterator[Runtime]:
    once = {"retry": RetryPolicy(max_attempts=1)}
    server = HttpServer(
        endpoint,
        name="drops",
        allowlisted=True,
        timeout_s=60.0,
        mode="legacy",
        tool_options={"drop": once, "drop_write": once},
    )
    runtime = Runtime("memory://", recover_on_start=False)
    runtime.add_mcp_server(server)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.mark.parametrize(("tool", "category"), [("drop", "transient"), ("drop_write", "unknown_commit")])
def test_an_answer_dropped_after_every_event_is_resumed_a_bounded_number_of_times(
    rt: Runtime, notes: Path, tool: str, category: str
) -> None:
    started = time.monotonic()
    obs = rt.call({"name": tool, "arguments": {}}, run_id=rt.new_run())
    took = time.monotonic() - started
    assert obs.status == "error" and obs.error is not None
    assert obs.error.category == category, obs.error
    if category == "transient":
        assert obs.error.details.get("error") == "connection_closed", obs.error
    assert notes.read_text().splitlines().count(f"dropped {tool}") == 1  # sent once, never again
    assert 1 <= len(resumes(notes)) <= _MOST_RESUMES, resumes(notes)
    assert took < 40.0, took  # well before the 65 s answer deadline
    after = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    assert after.data == "fine", after.error


def test_a_dropped_answer_is_resumed_with_the_last_event_id_seen(rt: Runtime, notes: Path) -> None:
    rt.call({"name": "drop", "arguments": {}}, run_id=rt.new_run())
    ids = [line.removeprefix("resume ") for line in resumes(notes)]
    assert ids == [str(n) for n in range(1, MAX_RESUMES + 1)], ids  # each names the event before it


@pytest.mark.parametrize("modes", ["answer_drop,resume_error"])
def test_resumes_the_server_refuses_count_towards_the_same_bound(rt: Runtime, notes: Path) -> None:
    obs = rt.call({"name": "drop", "arguments": {}}, run_id=rt.new_run())
    assert obs.error is not None and obs.error.category == "transient", obs.error
    assert obs.error.details.get("error") == "connection_closed", obs.error
    assert resumes(notes) == ["resume 1"] * MAX_RESUMES  # nothing new came: the same id each time
    after = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    assert after.data == "fine", after.error


@given(
    attempt=st.integers(min_value=0, max_value=10_000),
    retry_ms=st.none() | st.integers(min_value=-(10**12), max_value=10**12),
)
def test_the_wait_before_a_resume_honours_retry_above_a_doubling_floor_and_is_capped(
    attempt: int, retry_ms: int | None
) -> None:
    wait = resume_delay(attempt, retry_ms)
    asked = 0.0 if retry_ms is None else retry_ms / 1000
    assert min(RESUME_FLOOR_S * 2 ** min(attempt, 16), RESUME_MOST_S) <= wait <= RESUME_MOST_S
    assert wait >= min(asked, RESUME_MOST_S)
    assert resume_delay(attempt + 1, retry_ms) >= wait


def test_a_listen_stream_dropped_after_every_event_ends_with_a_typed_error(
    endpoint: str, notes: Path
) -> None:
    async def scenario() -> tuple[float, JSONRPCError]:
        async with create_mcp_http_client() as http:
            # a short answer deadline, which a listen stream is not held to
            transport = bounded_http_client(endpoint, http_client=http, answer_timeout_s=1.0)
            async with transport as (read, write):
                listen = JSONRPCRequest(jsonrpc="2.0", id=7, method="subscriptions/listen", params={})
                started = time.monotonic()
                await write.send(SessionMessage(listen))
                with anyio.fail_after(40):
                    got = await read.receive()
                assert isinstance(got, SessionMessage), got
                assert isinstance(got.message, JSONRPCError), got
                return time.monotonic() - started, got.message

    took, error = anyio.run(scenario)
    assert error.id == 7
    assert error.error.code == CONNECTION_CLOSED, error
    assert 1 <= len(resumes(notes)) <= _MOST_RESUMES, resumes(notes)
    assert took > 1.0  # not ended by the answer deadline: by the bound on resumes
