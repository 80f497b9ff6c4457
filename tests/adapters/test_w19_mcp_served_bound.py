"""The bound on a server's own requests (``_mcp_inflight.MAX_SERVED``) holds a flood, not an honest server.

* An honest server over streamable HTTP that keeps at most ``MAX_SERVED`` of its requests unanswered
  (``test_w19_mcp_restarts_program.py``'s ``asks``), whose answers' POST statuses come back late, loses
  none of them: a request was counted until its answer's POST was over, after the server had the answer
  and had sent its next request, so that one was dropped unanswered.
* Requests the server cancels (``notifications/cancelled``) give their places back: 64 of them, cancelled,
  no longer block the 65th (over stdio, read by the transport's reader; over HTTP, by its transport).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from actionspace import Runtime
from actionspace.adapters._mcp_inflight import MAX_SERVED, Asked
from actionspace.adapters._mcp_stdio import _Lines
from actionspace.adapters.mcp_client import HttpServer
from actionspace.catalog.spec import NO_RETRY

PROGRAM = str(Path(__file__).with_name("test_w19_mcp_restarts_program.py"))
LAG_S = 0.2
"""How long the server holds each ``202 Accepted`` (of a POSTed answer) on its way back."""
ASKS = 200
PING_S = 20.0
"""How long the server waits for each answer: a dropped request is lost; none else on any machine."""


def _request(request_id: int | str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode() + b"\n"


def _cancel(request_id: int | str) -> bytes:
    params = {"requestId": request_id, "reason": "no longer needed"}
    return (
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}).encode() + b"\n"
    )


def _handed(items: Iterator[SessionMessage | Exception]) -> list[SessionMessage]:
    return [i for i in items if isinstance(i, SessionMessage) and isinstance(i.message, types.JSONRPCRequest)]


@pytest.mark.parametrize("ids", ["ints", "strings", "cancelled_as_strings"])
def test_requests_the_server_cancelled_do_not_block_the_next_over_stdio(ids: str) -> None:
    lines = _Lines(1 << 20)
    asked = [n if ids == "ints" else f"r{n}" if ids == "strings" else n for n in range(MAX_SERVED)]
    assert len(_handed(lines.feed(b"".join(_request(i) for i in asked)))) == MAX_SERVED
    named = [str(i) if ids == "cancelled_as_strings" else i for i in asked]  # the SDK matches loosely too
    list(lines.feed(b"".join(_cancel(i) for i in named)))
    assert len(_handed(lines.feed(_request("next")))) == 1


def test_a_cancel_of_a_request_never_handed_on_frees_no_place() -> None:
    lines = _Lines(1 << 20)
    assert len(_handed(lines.feed(b"".join(_request(n) for n in range(MAX_SERVED))))) == MAX_SERVED
    list(lines.feed(b"".join(_cancel(f"other{n}") for n in range(MAX_SERVED))))
    assert _handed(lines.feed(_request("next"))) == []


def test_requests_the_server_cancelled_do_not_block_the_next_over_http() -> None:
    import anyio
    import httpx2
    from mcp.shared._context_streams import create_context_streams

    from actionspace.adapters._mcp_http import _BoundedTransport

    async def run() -> list[SessionMessage | Exception]:
        async with httpx2.AsyncClient() as client:
            transport = _BoundedTransport(
                "http://127.0.0.1:9/mcp", client=client, max_bytes=1 << 20, answer_timeout_s=5
            )
            told, reader = create_context_streams[SessionMessage | Exception](1000)
            for n in range(MAX_SERVED + 1):
                asking = types.JSONRPCRequest(jsonrpc="2.0", id=n, method="ping")
                assert await transport._served(asking, told) == (n < MAX_SERVED)
            params = {"requestId": 0}
            cancel = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params)
            assert await transport._served(cancel, told)
            assert await transport._served(
                types.JSONRPCRequest(jsonrpc="2.0", id="next", method="ping"), told
            )
            told.close()
            return [item async for item in reader]

    told = anyio.run(run)
    assert len(told) == 1 and "dropped unanswered" in str(told[0])  # only the one past the bound


_IDS = st.sampled_from([1, 2, "1", "a"])
_STEPS = st.lists(st.tuples(st.sampled_from(["ask", "answer", "cancel"]), _IDS), max_size=300)


@given(steps=_STEPS)
def test_cancels_never_let_more_requests_wait_than_the_bound(steps: list[tuple[str, int | str]]) -> None:
    asked = Asked()
    waiting = 0
    for step, request_id in steps:
        if step == "ask":
            request = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))
            waiting += isinstance(asked.serve(request), SessionMessage)
        elif step == "answer":
            before = asked.serving
            asked.sent(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))
            waiting -= before - asked.serving
        else:
            params = {"requestId": request_id}
            before = asked.serving
            asked.withdrawn(
                types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params)
            )
            assert before - asked.serving in (0, 1)
            waiting -= before - asked.serving
        assert asked.serving == waiting <= MAX_SERVED
        assert waiting >= 0


@pytest.fixture
def honest_url(tmp_path: Path) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    env = {**os.environ, "W19_NOTES": str(tmp_path / "notes.txt"), "W19_LAG_S": str(LAG_S)}
    proc = subprocess.Popen(
        [sys.executable, PROGRAM, "http", str(sock.fileno())], pass_fds=[sock.fileno()], env=env
    )
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        sock.close()


def test_an_honest_server_whose_answer_statuses_come_late_loses_no_request(honest_url: str) -> None:
    options = {"asks": {"timeout_s": 600.0, "retry": NO_RETRY}}
    server = HttpServer(honest_url, name="honest", allowlisted=True, mode="legacy", tool_options=options)
    rt = Runtime("memory://", recover_on_start=False)
    try:
        rt.add_mcp_server(server)
        arguments = {"count": ASKS, "timeout_s": PING_S, "window": MAX_SERVED}
        obs = rt.call({"name": "asks", "arguments": arguments}, run_id=rt.new_run())
    finally:
        rt.close()
    assert obs.status == "ok", obs.error
    found = re.fullmatch(r"answered (\d+) lost (\d+)", str(obs.data["result"]))
    assert found is not None, obs.data
    assert (int(found[1]), int(found[2])) == (ASKS, 0)
