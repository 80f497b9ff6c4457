"""Calls to a misbehaving MCP server over streamable HTTP, on raw sockets (``test_w90_raw_http_program``):
answers out of order, twice, to an id never sent, not UTF-8 or not JSON, an event stream cut mid-event,
endless, or too large, a redirect to another origin, an error status after the request was read or
before, a session id that changes or never comes. Each call ends as its category says (``transient``
only when the request provably reached no session, ``unknown_commit`` when a write may have landed,
``malformed_answer`` for an answer that is not one), within its timeout, and nothing keeps reading.

An event stream's bytes are taken as UTF-8 only: httpx2 decodes them with replacement characters (and
in whatever charset the content type names), so an answer whose text was not UTF-8 was taken as a
result holding ``U+FFFD`` where the server's bytes were.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Observation, Runtime
from actionspace.adapters.mcp_client import HttpServer

PROGRAM = str(Path(__file__).with_name("test_w90_raw_http_program.py"))
TIMEOUT_S = 4.0


class Raw:
    """The raw server in one mode, its notes, and a runtime calling it."""

    def __init__(self, tmp: Path, mode: str) -> None:
        self.notes = tmp / f"notes-{mode}.txt"
        self.notes.write_text("")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        env = {**os.environ, "W90_NOTES": str(self.notes), "W90_MODE": mode}
        self.proc = subprocess.Popen(
            [sys.executable, PROGRAM, str(sock.fileno())], pass_fds=[sock.fileno()], env=env
        )
        sock.close()
        self.rt = Runtime("memory://", recover_on_start=False)
        server = HttpServer(self.url, name="w90", allowlisted=True, timeout_s=TIMEOUT_S, mode="legacy")
        try:
            self.rt.add_mcp_server(server)
        except BaseException:
            self.close()
            raise

    def call(self, name: str, **arguments: object) -> tuple[float, Observation]:
        """Each call is another: a write's arguments name a new run, so none is a call seen before."""
        run = self.rt.new_run()
        began = time.monotonic()
        obs = self.rt.call({"name": name, "arguments": {**arguments, "run": run}}, run_id=run)
        return time.monotonic() - began, obs

    def lines(self) -> list[str]:
        return self.notes.read_text().splitlines()

    def posts(self, what: str) -> list[str]:
        """The session ids of the POSTs of ``what`` (a method, a tool, ``unread``, ``404``)."""
        return [
            line.split(" ")[1]
            for line in self.lines()
            if line.startswith("POST ") and line.endswith(f" {what}")
        ]

    def closed(self, name: str, within_s: float = 5.0) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if f"closed {name}" in self.lines():
                return True
            time.sleep(0.05)
        return False

    def close(self) -> None:
        try:
            self.rt.close()
        finally:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Raw]:
    server = Raw(tmp_path_factory.mktemp("w90"), "keep")
    try:
        yield server
    finally:
        server.close()


def failed(obs: Observation) -> tuple[str, str]:
    """The failed call's category and, for a read, the MCP failure's name (a write in doubt is
    reported by the ledger, whose error names what to do, not the failure)."""
    assert obs.error is not None, obs
    if obs.error.category == "unknown_commit":
        return obs.error.category, ""
    return obs.error.category, str(obs.error.details.get("error"))


def in_doubt_or(obs: Observation, write: bool, read_category: str, read_error: str) -> None:
    assert failed(obs) == (("unknown_commit", "") if write else (read_category, read_error)), obs.error


def still_serving(raw: Raw) -> None:
    took, obs = raw.call("ok")
    assert obs.status == "ok" and obs.data == "fine", obs.error
    assert took < TIMEOUT_S


def expected_text(raw_text: bytes) -> str | None:
    """The text a JSON string holding ``raw_text`` between its quotes says, or None: it is no such string
    (its bytes are not UTF-8, it holds a control character or a bad escape, or it ends the string)."""
    try:
        said = json.loads(b'"' + raw_text + b'"')
        said.encode()  # a lone surrogate, escaped, is no text either
    except ValueError:  # UnicodeDecodeError and UnicodeEncodeError too
        return None
    return said if isinstance(said, str) else None


_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_TEXTS = st.one_of(
    st.binary(max_size=24),
    st.text(max_size=12).map(lambda t: t.encode()),
    st.tuples(st.text(max_size=6), st.binary(min_size=1, max_size=4), st.text(max_size=6)).map(
        lambda p: p[0].encode() + p[1] + p[2].encode()
    ),
)


@_SETTINGS
@given(text=_TEXTS, write=st.booleans())
def test_an_event_answer_is_taken_only_as_the_utf8_json_the_server_sent(
    raw: Raw, text: bytes, write: bool
) -> None:
    tool = "text_write" if write else "text"
    took, obs = raw.call(tool, hex=text.hex())
    assert took < TIMEOUT_S
    expected = expected_text(text)
    if expected is not None:
        assert obs.status == "ok", obs.error
        assert obs.data == expected
        return
    in_doubt_or(obs, write, "permanent", "malformed_answer")


@_SETTINGS
@given(text=_TEXTS, write=st.booleans())
def test_a_json_answer_is_taken_only_as_the_utf8_json_the_server_sent(
    raw: Raw, text: bytes, write: bool
) -> None:
    took, obs = raw.call("json_text_write" if write else "json_text", hex=text.hex())
    assert took < TIMEOUT_S
    expected = expected_text(text)
    if expected is not None:
        assert obs.status == "ok", obs.error
        assert obs.data == expected
        return
    in_doubt_or(obs, write, "permanent", "malformed_answer")


UNENDED = frozenset({"endless_event", "endless_comments", "huge_json"})
"""The answers the server is still sending when the call ends: their connection is dropped."""


def test_answers_given_out_of_order_each_reach_their_own_call(raw: Raw) -> None:
    got: dict[str, Observation] = {}

    def held() -> None:
        got["hold"] = raw.call("hold")[1]

    waiting = threading.Thread(target=held)
    waiting.start()
    time.sleep(0.5)
    got["release"] = raw.call("release")[1]
    waiting.join(TIMEOUT_S * 2)
    assert got["release"].data == "released", got
    assert got["hold"].data == "held", got


def test_an_answer_given_twice_is_taken_once(raw: Raw) -> None:
    _, obs = raw.call("twice_write")
    assert obs.status == "ok" and obs.data == "first", obs.error
    assert len(raw.posts("twice_write")) == 1
    still_serving(raw)


@pytest.mark.parametrize(
    ("tool", "category", "error"),
    [
        ("stranger", "permanent", "malformed_answer"),
        ("stranger_write", "unknown_commit", ""),
        ("cut_event", "transient", "connection_closed"),
        ("cut_event_write", "unknown_commit", ""),
        ("ended_event", "transient", "connection_closed"),
        ("ended_event_write", "unknown_commit", ""),
        ("endless_event", "permanent", "result_too_large"),
        ("endless_event_write", "unknown_commit", ""),
        ("endless_comments", "transient", "request_timeout|None"),  # the answer deadline, or the call's
        ("endless_comments_write", "unknown_commit", ""),
        ("huge_json", "permanent", "result_too_large"),
        ("huge_json_write", "unknown_commit", ""),
        ("cross_origin", "permanent", "redirect_refused"),
        ("cross_origin_write", "permanent", "redirect_refused"),
        ("fail_after_read", "unclassified", "internal_error"),
        ("fail_after_read_write", "unknown_commit", ""),
    ],
)
def test_a_bad_answer_ends_its_call_in_its_category_within_its_timeout_and_is_not_read_on(
    raw: Raw, tool: str, category: str, error: str
) -> None:
    took, obs = raw.call(tool)
    got_category, got_error = failed(obs)
    assert got_category == category and got_error in error.split("|"), obs.error
    sent = raw.posts(tool)
    if category == "transient":  # a read asked again, each time within the answer deadline and a grace
        assert 1 <= len(sent) <= 3 and took < (TIMEOUT_S + 2.0) * len(sent), (took, sent)
    else:  # never sent again (a redirect to another origin: never followed)
        assert len(sent) == 1 and took < TIMEOUT_S + 2.0, (took, sent)
    if tool.removesuffix("_write") in UNENDED:
        assert raw.closed(tool)  # nothing keeps reading its answer
    still_serving(raw)


def serving(tmp_path: Path, mode: str) -> Iterator[Raw]:
    server = Raw(tmp_path, mode)
    try:
        yield server
    finally:
        server.close()


def test_a_server_naming_no_session_is_called_without_one(tmp_path: Path) -> None:
    for server in serving(tmp_path, "none"):
        _, obs = server.call("ok_write")
        assert obs.status == "ok" and obs.data == "fine", obs.error
        assert server.posts("ok_write") == ["-"]


def test_a_session_id_changed_by_later_answers_is_not_taken(tmp_path: Path) -> None:
    for server in serving(tmp_path, "churn"):
        for _ in range(3):
            _, obs = server.call("ok_write")
            assert obs.status == "ok" and obs.data == "fine", obs.error
        assert server.posts("ok_write") == ["s1", "s1", "s1"]
        assert server.posts("404") == []


def test_a_write_to_a_session_the_server_forgot_is_unsent_and_the_next_call_opens_a_new_one(
    tmp_path: Path,
) -> None:
    for server in serving(tmp_path, "forget"):
        assert server.call("ok_write")[1].status == "ok"
        took, obs = server.call("ok_write")
        assert took < TIMEOUT_S
        if obs.status == "ok":  # refused unsent, then sent once on the new session
            assert server.posts("ok_write") == ["s1", "s2"]
        else:
            assert failed(obs) == ("transient", "undelivered"), obs.error
            assert server.posts("ok_write") == ["s1"]
        assert server.posts("404") == ["s1"]
        deadline = time.monotonic() + 10
        while (after := server.call("ok")[1]).status != "ok" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert after.data == "fine", after.error


def test_an_error_status_before_the_request_was_read_leaves_a_write_in_doubt(tmp_path: Path) -> None:
    """A server may answer before it read the body, but the client cannot tell: its bytes were sent."""
    for server in serving(tmp_path, "refuse"):
        took, obs = server.call("ok_write")
        assert took < TIMEOUT_S + 2.0
        category, _ = failed(obs)
        assert category == "unknown_commit", obs.error
        assert server.posts("unread") != [] and server.posts("ok_write") == []


def test_a_write_to_a_server_gone_after_its_session_opened_is_unsent(tmp_path: Path) -> None:
    """No connection can be made: provably unsent, so ``transient`` (the SDK's transport let the
    failed connection end the session, and the write ended ``unknown_commit``)."""
    for server in serving(tmp_path, "keep"):
        assert server.call("ok_write")[1].status == "ok"
        server.proc.kill()
        server.proc.wait(timeout=30)
        took, obs = server.call("ok_write")
        assert took < TIMEOUT_S
        assert failed(obs)[0] == "transient", obs.error
        assert server.posts("ok_write") == ["s1"]
