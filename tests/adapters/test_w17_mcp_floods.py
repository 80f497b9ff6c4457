"""A stdio server that floods the client during a call (``test_w17_hostile_ids_program.py``): with
notifications the session does nothing with, and with requests whose answers it does not read. The
notifications are dropped as they are read, so the call is answered long before its timeout; the
requests are served only while a bound of them waits for its answer, so a server that never reads
cannot make the client hold a task for each.

The work is counted, not timed (``mcp_work``): the flood's lines are each parsed once and none reaches
the session, and the call ends answered, never at its timeout."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from actionspace import Runtime
from actionspace.adapters._mcp_inflight import MAX_SERVED
from actionspace.adapters._mcp_stdio import HEARD, _Lines
from actionspace.adapters.mcp_client import StdioServer
from actionspace.catalog.spec import NO_RETRY
from tests.adapters.mcp_work import ReadWork, Timeouts

PROGRAM = str(Path(__file__).with_name("test_w17_hostile_ids_program.py"))
TIMEOUT_S = 300.0
"""Far beyond reading 200,000 short lines on any machine: a call here ends answered, never at it."""
WAIT_S = 120.0
"""How long the server's notes are polled for what it was answered (it is there within milliseconds)."""
FLOOD = 200_000


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("w17floods") / "notes.txt"


@pytest.fixture(scope="module")
def rt(notes: Path) -> Iterator[Runtime]:
    options: dict[str, dict[str, Any]] = {
        kind: {"timeout_s": TIMEOUT_S, "retry": NO_RETRY} for kind in ("ok", "flood", "asks")
    }
    runtime = Runtime("memory://", recover_on_start=False)
    server = StdioServer(
        sys.executable,
        args=(PROGRAM, str(notes)),
        name="floods",
        allowlisted=True,
        tool_options=options,
        connect_timeout_s=120.0,
        mode="legacy",
    )
    try:
        runtime.add_mcp_server(server)
        yield runtime
    finally:
        runtime.close()


def test_a_flood_of_notifications_during_a_call_is_dropped_as_it_is_read(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, timeouts = ReadWork(monkeypatch), Timeouts(monkeypatch)
    obs = rt.call({"name": "flood", "arguments": {"count": FLOOD}})
    assert obs.status == "ok" and obs.data == "flooded", obs.error
    assert not timeouts.by_tool  # answered, not ended at its timeout
    assert work.lines >= FLOOD  # the flood went through the reader...
    assert work.notifications == 0  # ...and none of it was handed to the session (the SDK's ~230 µs each)
    assert work.parses <= work.lines + 1 and work.parsed_bytes <= work.read_bytes  # each line parsed once
    assert rt.call({"name": "ok", "arguments": {}}).data == "fine"


def _answers(notes: Path, prefix: str) -> int:
    return sum(line.startswith(f"answer {prefix}") for line in notes.read_text().splitlines())


def test_requests_of_a_server_that_does_not_read_its_answers_are_served_only_up_to_a_bound(
    rt: Runtime, notes: Path
) -> None:
    # 20,000 requests while the server reads nothing for 5 s: a pipe's worth of answers is written,
    # MAX_SERVED more wait to be, and the rest are dropped, not each held in a task of its own
    obs = rt.call({"name": "asks", "arguments": {"count": 20_000, "pause": 5}})
    assert obs.status == "ok" and obs.data == "asked", obs.error
    assert rt.call({"name": "ok", "arguments": {}}).data == "fine"  # the server reads again
    # later requests are served again; their answers are written after any held earlier ones
    again = rt.call({"name": "asks", "arguments": {"count": 10, "late": 1}})
    assert again.status == "ok", again.error
    deadline = time.monotonic() + WAIT_S
    while _answers(notes, "late") < 10:
        assert time.monotonic() < deadline, "the later requests were not answered"
        time.sleep(0.05)
    assert MAX_SERVED <= _answers(notes, "ask") < 20_000


_METHODS = st.one_of(
    st.sampled_from(sorted(HEARD)),
    st.sampled_from(["notifications/resources/updated", "notifications/message", "notifications/progress"]),
    st.text(max_size=40),
)


@given(method=_METHODS, stamped=st.booleans(), params=st.dictionaries(st.text(max_size=5), st.integers()))
def test_a_notification_reaches_the_session_only_when_it_acts_on_it(
    method: str, stamped: bool, params: dict[str, int]
) -> None:
    # acted on: a tool list change, a cancellation, a listen stream's acknowledgment and its events
    # (stamped with the subscription's id); anything else is dropped as it is read
    sent: dict[str, Any] = {**params}
    if stamped:
        sent["_meta"] = {SUBSCRIPTION_ID_META_KEY: "listen-1"}
    line = json.dumps({"jsonrpc": "2.0", "method": method, "params": sent}).encode() + b"\n"
    got = list(_Lines(1 << 20).feed(line))
    handed = [i.message for i in got if isinstance(i, SessionMessage)]
    assert all(isinstance(m, types.JSONRPCNotification) and m.method == method for m in handed)
    assert bool(handed) == (method in HEARD or stamped)
