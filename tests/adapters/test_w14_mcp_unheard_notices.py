"""A server's log messages and progress notes are dropped by the transport, before the SDK spends a
task and a second validation on each: the client asks for neither. So is any notification the session
does nothing with (methods no one knows among them: ``test_w17_mcp_floods.py``). Answers, requests,
list changes and cancellations still reach the session, and a chatty server's calls keep their
answers, over stdio and streamable HTTP."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters import _mcp_connection
from actionspace.adapters._mcp_stdio import HEARD, _Lines
from actionspace.adapters.mcp_client import HttpServer, StdioServer
from tests.adapters import test_w9_mcp_notice_stream as w9
from tests.adapters.mcp_fixtures import CONNECT_TIMEOUT_S, http_url, rt

__all__ = ["http_url", "rt"]

NOTICES = str(Path(__file__).with_name("test_w13_notice_program.py"))


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def fed(*messages: dict[str, Any]) -> list[object]:
    lines = _Lines(1 << 20)
    return list(lines.feed(b"".join(line(m) for m in messages)))


def test_log_and_progress_notes_are_not_handed_to_the_session() -> None:
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 2},
    }
    assert fed(log, progress, log) == []


def test_answers_list_changes_and_cancellations_still_reach_the_session() -> None:
    kept: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "id": 4, "result": {"content": []}},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
    ]
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    whatever = {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"a": 1}}
    out = fed(log, kept[0], log, whatever, *kept[1:])
    assert [m.message.model_dump(by_alias=True, exclude_unset=True) for m in out] == kept  # type: ignore[attr-defined]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    method=st.sampled_from(
        ["notifications/message", "notifications/progress", "notifications/tools/list_changed", "x/y"]
    )
    | st.text(max_size=30),
    params=st.none() | st.dictionaries(st.text(max_size=8), _JSON, max_size=4),
)
def test_only_notifications_the_session_acts_on_are_handed_on(
    method: str, params: dict[str, Any] | None
) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    out = fed(message)
    if method not in HEARD:
        assert out == []
    else:
        [item] = out
        assert not isinstance(item, types.JSONRPCNotification)  # wrapped, as the session takes it
        assert getattr(getattr(item, "message", None), "method", method) == method


@pytest.fixture
def heard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The kinds of message each connection's handler was handed."""
    seen: list[str] = []
    original = _mcp_connection.Connection._on_message

    async def spy(self: _mcp_connection.Connection, message: Any) -> None:
        seen.append(type(message).__name__)
        await original(self, message)

    monkeypatch.setattr(_mcp_connection.Connection, "_on_message", spy)
    yield seen


def test_a_stdio_server_s_notes_reach_no_handler_and_its_list_changes_still_do(
    rt: Runtime, heard: list[str]
) -> None:
    server = StdioServer(
        sys.executable,
        args=(NOTICES, "many"),
        name="w14-many",
        allowlisted=True,
        mode="legacy",
        connect_timeout_s=CONNECT_TIMEOUT_S,
        timeout_s=120.0,
    )
    toolset = rt.add_mcp_server(server)
    obs = rt.call({"name": "noisy", "arguments": {}})
    assert obs.status == "ok" and obs.data == "done noisy"
    assert heard and set(heard) == {"ToolListChangedNotification"}  # 4,000 of them, no log or progress
    deadline = time.monotonic() + 60.0  # the listing each change asks for runs in the background
    while toolset.connection.refreshes < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert toolset.connection.refreshes >= 1
    echo = rt.call({"name": "echo", "arguments": {}})
    assert echo.status == "ok" and echo.data == "done echo"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_http_server_s_log_notes_reach_no_handler(
    rt: Runtime, http_url: str, heard: list[str], mode: Literal["auto", "legacy"]
) -> None:
    rt.add_mcp_server(
        HttpServer(
            http_url, name="w14-chatty", allowlisted=True, mode=mode, connect_timeout_s=CONNECT_TIMEOUT_S
        )
    )
    obs = rt.call({"name": "chatty", "arguments": {"count": 50}})
    assert obs.status == "ok", obs.error
    assert obs.data == {"result": "chatted 50"}
    assert "LoggingMessageNotification" not in heard


def test_log_notes_on_the_notification_stream_reach_no_handler_and_keep_it_reconnected(
    tmp_path: Path, heard: list[str]
) -> None:
    """A GET stream that brings only a log note is still a working stream (taken again), but the
    note itself goes no further than the transport."""
    notes = tmp_path / "notes.txt"
    notes.touch()
    proc, url = w9._serve(notes, "get_notice")
    rt = Runtime("memory://", recover_on_start=False)
    try:
        rt.add_mcp_server(HttpServer(url, name="w14-get", allowlisted=True, timeout_s=30.0))
        deadline = time.monotonic() + 60.0
        while notes.read_text().splitlines().count("GET /mcp") < 3:  # each brought its one note
            assert time.monotonic() < deadline
            obs = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
            assert obs.status == "ok", obs.error
        assert "LoggingMessageNotification" not in heard
    finally:
        rt.close()
        proc.kill()
        proc.wait(timeout=30)
