"""The GET stream that carries an MCP server's notifications over streamable HTTP is reconnected a
bounded number of times in a row, with a growing delay: a server that accepts that stream and drops
it (at once, by a reset, or after junk) no longer keeps the client reconnecting for the session's
life. Once given up, that is logged once and calls still work. An answer to a call sent on that
stream (where the protocol allows none) never passes for the call's answer. A stream that brings a
notification each time is a working one (it is reconnected as long as it does), and a server
answering 405 offers no stream at all (it is not asked again)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from actionspace import Runtime
from actionspace.adapters.mcp_client import HttpServer

PROGRAM = str(Path(__file__).with_name("test_w9_mcp_notice_program.py"))
_MOST_GETS = 8
"""The most GET streams a server that drops every one may get from the client (the bound and one)."""
_DEADLINE_S = 60.0


class _Seen(logging.Handler):
    """Records of the MCP client's log that contain ``needle``; ``seen`` is set at the first."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.DEBUG)
        self.needle = needle
        self.records: list[logging.LogRecord] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.records.append(record)
            self.seen.set()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.touch()
    return path


def _gets(notes: Path) -> int:
    return notes.read_text().splitlines().count("GET /mcp")


@pytest.fixture
def watch() -> Iterator[dict[str, _Seen]]:
    logger = logging.getLogger("actionspace.mcp")
    seen = {"given_up": _Seen("given up for this session"), "refused": _Seen("offers no notification stream")}
    level = logger.level
    logger.setLevel(logging.INFO)
    for handler in seen.values():
        logger.addHandler(handler)
    try:
        yield seen
    finally:
        for handler in seen.values():
            logger.removeHandler(handler)
        logger.setLevel(level)


def _serve(
    notes: Path, mode: str, version: str = LATEST_HANDSHAKE_VERSION
) -> tuple[subprocess.Popen[bytes], str]:
    """The server of ``test_w9_mcp_notice_program`` in ``mode`` on a free port, and its endpoint."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    env = {**os.environ, "W64_NOTES": str(notes)}
    argv = [sys.executable, PROGRAM, str(sock.fileno()), version, mode]
    proc = subprocess.Popen(argv, pass_fds=[sock.fileno()], env=env)
    sock.close()
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def session(notes: Path, watch: dict[str, _Seen], request: pytest.FixtureRequest) -> Iterator[Runtime]:
    proc, url = _serve(notes, request.param)
    try:
        rt = Runtime("memory://", recover_on_start=False)
        rt.add_mcp_server(HttpServer(url, name="w9", allowlisted=True, timeout_s=30.0))
        try:
            yield rt
        finally:
            rt.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _ok(rt: Runtime) -> None:
    obs = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    assert obs.data == "fine", obs.error


@pytest.mark.parametrize("session", ["get_drop", "get_reset", "get_junk"], indirect=True)
def test_a_notification_stream_dropped_every_time_is_given_up_after_a_bounded_number_of_tries(
    session: Runtime, notes: Path, watch: dict[str, _Seen]
) -> None:
    _ok(session)
    assert watch["given_up"].seen.wait(_DEADLINE_S), f"still reconnecting after {_gets(notes)} GET streams"
    taken = _gets(notes)
    assert 2 <= taken <= _MOST_GETS, taken
    _ok(session)  # calls still work
    _ok(session)
    assert _gets(notes) == taken  # and the stream is not taken again
    assert len(watch["given_up"].records) == 1, watch["given_up"].records
    assert watch["given_up"].records[0].levelno == logging.WARNING


@pytest.mark.parametrize("session", ["get_notice"], indirect=True)
def test_a_notification_stream_that_brings_a_notification_each_time_is_reconnected(
    session: Runtime, notes: Path, watch: dict[str, _Seen]
) -> None:
    deadline = time.monotonic() + _DEADLINE_S
    while _gets(notes) <= _MOST_GETS + 2:
        assert time.monotonic() < deadline, _gets(notes)
        _ok(session)
    assert not watch["given_up"].seen.is_set(), watch["given_up"].records


@pytest.mark.parametrize("session", ["get_forge"], indirect=True)
def test_an_answer_sent_on_the_notification_stream_never_answers_a_call(
    session: Runtime, notes: Path, watch: dict[str, _Seen]
) -> None:
    obs = session.call({"name": "ok_write", "arguments": {}}, run_id=session.new_run())
    assert obs.data == "fine", (obs.data, obs.error)  # the answer on the call's own stream
    assert notes.read_text().splitlines().count("ok_write") == 1
    _ok(session)


@pytest.mark.parametrize("session", ["get_refused"], indirect=True)
def test_a_server_that_answers_405_is_not_asked_for_a_notification_stream_again(
    session: Runtime, notes: Path, watch: dict[str, _Seen]
) -> None:
    assert watch["refused"].seen.wait(_DEADLINE_S)
    _ok(session)
    _ok(session)
    assert _gets(notes) == 1
    assert [r.levelno for r in watch["refused"].records] == [logging.INFO], watch["refused"].records
    assert not watch["given_up"].seen.is_set()
