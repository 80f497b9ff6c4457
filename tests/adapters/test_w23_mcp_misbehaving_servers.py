"""A real stdio server that misbehaves per call (``test_w23_raw_mcp_program.py``, raw JSON lines): answers
out of order, an answer to an id never sent, an answer that is not UTF-8, a result that is not a
``CallToolResult``, a tool change announced during a call, half an answer and then an exit, its output
closed while it keeps running, a server that answers ``initialize`` and nothing after it, and any line at
all before an answer (hypothesis). Each call ends typed (an ``ActionError`` with a category and a
recovery), within its timeout, a write never sent twice, and the connection serves the next call; no
thread is left behind once the runtime closes."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters.mcp_client import StdioServer
from actionspace.catalog.spec import NO_RETRY
from actionspace.errors import ConfigurationError

PROGRAM = str(Path(__file__).with_name("test_w23_raw_mcp_program.py"))
KINDS: tuple[str, ...] = (
    "ok",
    "raw",
    "hold",
    "release",
    "stranger",
    "bad_utf8",
    "cut_exit",
    "close_stdout",
    "not_a_result",
    "changed",
    "close_stdin",
)
TIMEOUT_S = 8.0
"""Each call's timeout. An answer the client can take (or refuse) ends its call at once."""
AT_ONCE_S = TIMEOUT_S / 2
"""A call that ends later than this waited for its timeout."""
LATEST_S = 60.0
"""Far beyond any call's timeout on a loaded machine: a call taking longer hangs."""


class Server:
    def __init__(self, rt: Runtime, notes: Path) -> None:
        self.rt = rt
        self.notes = notes

    def calls(self, name: str) -> int:
        return self.notes.read_text().splitlines().count(f"call {name}")

    def starts(self) -> int:
        return sum(line.startswith("start ") for line in self.notes.read_text().splitlines())

    def call(self, name: str, **arguments: Any) -> tuple[Any, float, list[Any]]:
        run = self.rt.new_run()
        began = time.monotonic()
        obs = self.rt.call({"name": name, "arguments": arguments}, run_id=run)
        took = time.monotonic() - began
        assert took < LATEST_S, (name, took)
        return obs, took, [e for e in self.rt.ledger.list() if e.run_id == run]

    def serves(self) -> bool:
        """The connection serves a call (after a restart, if one was due), within a generous bound."""
        deadline = time.monotonic() + LATEST_S
        while time.monotonic() < deadline:
            obs, _, _ = self.call("ok", text="next")
            if obs.status == "ok":
                return True
            time.sleep(0.2)
        return False


def typed(error: Any) -> bool:
    return error is not None and bool(error.category) and bool(error.recovery)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    notes = tmp_path_factory.mktemp("w23") / "notes.txt"
    options: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        options[kind] = {"timeout_s": TIMEOUT_S, "retry": NO_RETRY}
        options[f"{kind}_write"] = {"timeout_s": TIMEOUT_S}
    threads = threading.active_count()
    rt = Runtime("memory://", recover_on_start=False)
    stdio = StdioServer(
        sys.executable,
        args=(PROGRAM, str(notes)),
        name="raw",
        allowlisted=True,
        tool_options=options,
        connect_timeout_s=120.0,
    )
    try:
        rt.add_mcp_server(stdio)
        yield Server(rt, notes)
    finally:
        rt.close()
    deadline = time.monotonic() + LATEST_S
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads, [t.name for t in threading.enumerate()]


@pytest.mark.parametrize("name", ["bad_utf8", "bad_utf8_write"])
def test_an_answer_that_is_not_utf8_ends_its_call_at_once_as_malformed(server: Server, name: str) -> None:
    before = server.calls(name)
    obs, took, entries = server.call(name)
    assert typed(obs.error), obs
    assert took < AT_ONCE_S, (took, obs.error)  # not at its timeout, as an answer never heard
    if name.endswith("_write"):
        assert obs.error.category == "unknown_commit", obs.error
        assert [e.attempts for e in entries] == [1]  # never sent twice
    else:
        assert obs.error.category == "permanent", obs.error
        assert obs.error.details.get("error") == "malformed_answer", obs.error
        assert "not UTF-8" in obs.error.message, obs.error
    assert server.calls(name) == before + 1
    assert server.serves()


def test_answers_out_of_order_each_reach_their_own_call(server: Server) -> None:
    got: list[Any] = []
    before = server.calls("hold")
    holder = threading.Thread(target=lambda: got.append(server.call("hold", text="first")), daemon=True)
    holder.start()
    deadline = time.monotonic() + LATEST_S
    while server.calls("hold") == before and time.monotonic() < deadline:  # its request is held
        time.sleep(0.02)
    released, _, _ = server.call("release")
    holder.join(LATEST_S)
    assert released.status == "ok", released.error
    assert got and got[0][0].status == "ok", got
    assert "held first" in json.dumps(got[0][0].data, default=str)
    assert "released" in json.dumps(released.data, default=str)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(order=st.integers(2, 4).flatmap(lambda n: st.permutations(range(n))))
def test_answers_in_any_order_each_reach_their_own_call(server: Server, order: list[int]) -> None:
    got: dict[int, Any] = {}
    held = server.calls("hold")
    holders = []
    for n in range(len(order)):  # one at a time: the server holds them in this order
        holder = threading.Thread(target=lambda n=n: got.update({n: server.call("hold", text=str(n))}))
        holder.daemon = True
        holder.start()
        holders.append(holder)
        deadline = time.monotonic() + LATEST_S
        while server.calls("hold") < held + n + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    released, _, _ = server.call("release", text=",".join(map(str, order)))
    assert released.status == "ok", released.error
    for holder in holders:
        holder.join(LATEST_S)
    for n in range(len(order)):
        obs, _, _ = got[n]
        assert obs.status == "ok", obs.error
        assert json.dumps(obs.data, default=str) == json.dumps(f"held {n}"), (n, obs.data)


def test_an_answer_to_an_id_never_sent_is_dropped_and_the_calls_own_answer_taken(server: Server) -> None:
    obs, took, _ = server.call("stranger")
    assert obs.status == "ok", obs.error
    assert took < AT_ONCE_S, took
    data = json.dumps(obs.data, default=str)
    assert "mine" in data and "forged" not in data, data
    assert server.serves()


@pytest.mark.parametrize("name", ["not_a_result", "not_a_result_write"])
def test_a_result_that_is_not_a_call_tool_result_ends_typed_at_once(server: Server, name: str) -> None:
    obs, took, entries = server.call(name)
    assert typed(obs.error), obs
    assert took < AT_ONCE_S, (took, obs.error)
    if name.endswith("_write"):
        assert [e.attempts for e in entries] == [1]
        assert entries[0].state in ("unknown_commit", "failed", "committed"), entries
    assert server.serves()


def test_a_change_announced_during_a_call_is_listed_and_the_unchanged_tool_answers(server: Server) -> None:
    obs, took, entries = server.call("changed_write")
    assert obs.status == "ok", obs.error
    assert took < AT_ONCE_S, took
    assert [e.state for e in entries] == ["committed"]
    assert server.serves()


@pytest.mark.parametrize("name", ["cut_exit_write", "close_stdout_write"])
def test_a_write_whose_server_stops_mid_answer_is_unknown_commit_and_sent_once(
    server: Server, name: str
) -> None:
    before, starts, held = server.calls(name), server.starts(), server.calls("hold")
    other: list[Any] = []
    holder = threading.Thread(target=lambda: other.append(server.call("hold", text="beside")), daemon=True)
    holder.start()  # another call in flight on the same connection, never answered
    deadline = time.monotonic() + LATEST_S
    while server.calls("hold") == held and time.monotonic() < deadline:
        time.sleep(0.02)
    obs, _, entries = server.call(name)
    assert typed(obs.error), obs
    assert obs.error.category == "unknown_commit", obs.error
    assert [(e.state, e.attempts) for e in entries] == [("unknown_commit", 1)], entries
    holder.join(LATEST_S)
    assert other and typed(other[0][0].error), other  # failed cleanly, not hung
    assert other[0][0].error.category == "transient", other[0][0].error
    assert server.serves()  # its process is stopped and started again
    assert server.calls(name) == before + 1  # never sent again, to the new process either
    assert server.starts() == starts + 1


def test_a_write_to_a_server_that_stopped_reading_its_input_is_refused_unsent(server: Server) -> None:
    deaf, _, _ = server.call("close_stdin")
    assert deaf.status == "ok", deaf.error
    before = server.calls("ok_write")
    obs, _, entries = server.call("ok_write", text="never")
    if obs.status != "ok":  # its process is found gone and started again: refused, nothing sent
        assert typed(obs.error) and obs.error.category == "transient", obs.error
        assert [e.state for e in entries] in ([], ["failed"]), entries
        assert server.calls("ok_write") == before
    assert server.serves()
    written, _, _ = server.call("ok_write", text="now")
    assert written.status == "ok", written.error
    assert server.calls("ok_write") == before + 1 + (obs.status == "ok")


ANSWERISH = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.just("{ID}"), st.integers(-3, 3), st.none(), st.text(max_size=3)),
        "result": st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        "error": st.fixed_dictionaries({"code": st.integers(-33000, 0), "message": st.text(max_size=5)}),
        "method": st.sampled_from(["notifications/tools/list_changed", "ping", "x"]),
    },
)


def _line(members: dict[str, Any], tail: bytes) -> bytes:
    text = json.dumps(members).replace('"{ID}"', "{ID}")
    return text.encode() + tail


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    members=ANSWERISH,
    tail=st.sampled_from([b"", b"\xff", b" junk", b"{", b"\x00"]),
    write=st.booleans(),
)
def test_any_line_before_an_answer_ends_the_call_typed_and_the_session_serves_on(
    server: Server, members: dict[str, Any], tail: bytes, write: bool
) -> None:
    assume("after" not in json.dumps(members))  # the second answer's text, told from the first by it
    name = "raw_write" if write else "raw"
    before = server.calls(name)
    obs, took, entries = server.call(name, hex=_line(members, tail).hex())
    assert obs.status == "ok" or typed(obs.error), obs
    assert took < AT_ONCE_S, (took, obs)  # its own answer follows the line: never at its timeout
    if write:
        assert [e.attempts for e in entries] == [1], entries  # never sent twice
    names_it = members.get("id") == "{ID}" and "method" not in members
    if not tail and names_it and ("result" in members or "error" in members):
        # the first answer under the call's id is its answer (taken or refused); the second one is dropped
        assert "after" not in json.dumps(obs.data, default=str), (obs, members)
    assert server.calls(name) == before + 1
    assert server.serves()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.binary(max_size=12), write=st.booleans())
def test_an_answers_text_is_taken_when_utf8_and_refused_at_once_when_not(
    server: Server, raw: bytes, write: bool
) -> None:
    text = bytes(c for c in raw if c >= 0x20 and c not in b'"\\')  # nothing JSON would need escaped
    assume(b"after" not in text)  # the second answer's text, which the first must not be taken for
    head = b'{"jsonrpc": "2.0", "id": {ID}, "result": {"content": [{"type": "text", "text": "'
    try:
        decoded: str | None = text.decode()
    except UnicodeDecodeError:
        decoded = None
    obs, took, entries = server.call("raw_write" if write else "raw", hex=(head + text + b'"}]}}').hex())
    assert took < AT_ONCE_S, (took, obs)
    assert "after" not in json.dumps(obs.data, default=str), obs  # its first answer is the one taken
    if decoded is not None:
        assert obs.status == "ok", obs.error
        assert decoded in json.dumps(obs.data, ensure_ascii=False), obs.data
    else:
        assert typed(obs.error), obs
        assert obs.error.category == ("unknown_commit" if write else "permanent"), obs.error
    if write:
        assert [e.attempts for e in entries] == [1], entries


def test_a_server_that_answers_only_initialize_fails_to_connect_on_time(tmp_path: Path) -> None:
    threads = threading.active_count()
    rt = Runtime("memory://", recover_on_start=False)
    stdio = StdioServer(
        sys.executable,
        args=(PROGRAM, str(tmp_path / "notes.txt")),
        env={"W23_MODE": "hang_after_init"},
        name="hang",
        connect_timeout_s=6.0,
    )
    began = time.monotonic()
    try:
        with pytest.raises(ConfigurationError, match="cannot connect"):
            rt.add_mcp_server(stdio)
        assert time.monotonic() - began < 6.0 + 15.0  # its bound, then the stop of its process
    finally:
        rt.close()
    pid = int((tmp_path / "notes.txt").read_text().split()[1])
    deadline = time.monotonic() + LATEST_S
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads
