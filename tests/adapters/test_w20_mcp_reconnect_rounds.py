"""Once a dead server's attempts to reconnect are spent, a call made after ``Reconnect.cooldown_s`` starts a
new round (without it, only adding the server again brought it back), against a real stdio server
(``test_w19_mcp_restarts_program.py``): bounded, since a round is started only by a call, and at most
one per cool-down.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters.mcp_client import Reconnect
from actionspace.errors import ConfigurationError
from tests.adapters.test_w19_mcp_reconnects import Server, echo, reconnected, stdio, wait_for


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield Server(tmp_path / "notes.txt", tmp_path / "plan.txt")


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def test_a_call_after_the_cool_down_starts_a_new_round_that_brings_the_server_back(
    rt: Runtime, server: Server
) -> None:
    policy = Reconnect(attempts=2, initial_backoff_s=0.05, max_backoff_s=0.1, cooldown_s=0.2)
    toolset = rt.add_mcp_server(stdio(server, reconnect=policy))
    server.next_start("die")  # every later start dies before the handshake is answered
    server.kill_stdio()
    wait_for(lambda: toolset.connection.resting)  # the round is spent and the cool-down over
    assert len(server.lines("start die")) == policy.attempts
    time.sleep(0.5)  # no call, no new round: a dead server is not started over and over
    assert len(server.lines("start die")) == policy.attempts
    server.next_start("a")
    woke = echo(rt)  # refused unsent, but it starts the round
    assert woke.error is not None and woke.error.category == "transient", woke.error
    assert woke.error.details.get("reconnecting") is True and woke.error.retry_after is not None
    wait_for(reconnected(toolset))
    obs = echo(rt)
    assert obs.status == "ok" and obs.data == {"result": "hi"}, obs.error
    assert len(server.lines("start a")) == 2  # the first start, and the new round's first attempt


def test_every_later_round_is_bounded_by_the_attempts_too(rt: Runtime, server: Server) -> None:
    policy = Reconnect(attempts=2, initial_backoff_s=0.05, max_backoff_s=0.1, cooldown_s=0.2)
    toolset = rt.add_mcp_server(stdio(server, reconnect=policy))
    server.next_start("die")
    server.kill_stdio()
    for rounds in (1, 2, 3):
        wait_for(lambda: toolset.connection.resting)
        assert len(server.lines("start die")) == rounds * policy.attempts
        down = echo(rt)
        assert down.error is not None and down.error.category == "transient", down.error
        wait_for(lambda: not toolset.connection.resting)
    assert server.lines("note ") == []


def test_an_infinite_cool_down_leaves_the_server_down_after_its_attempts(rt: Runtime, server: Server) -> None:
    policy = Reconnect(attempts=2, initial_backoff_s=0.05, max_backoff_s=0.1, cooldown_s=math.inf)
    toolset = rt.add_mcp_server(stdio(server, reconnect=policy))
    server.next_start("die")
    server.kill_stdio()
    wait_for(lambda: len(server.lines("start die")) == policy.attempts and echo(rt).error.retry_after is None)
    for _ in range(3):
        down = echo(rt)
        assert down.error is not None and down.error.vendor_code == "server_unavailable"
        assert down.error.retry_after is None
    assert not toolset.connection.resting
    assert len(server.lines("start die")) == policy.attempts


@pytest.mark.parametrize(
    "bad",
    [
        {"cooldown_s": -1},
        {"cooldown_s": float("nan")},
        {"cooldown_s": "60"},
        {"unanswered": 0},
        {"unanswered": 2.0},
        {"unanswered": True},
        {"idle_probe_s": 0},
        {"idle_probe_s": math.inf},
        {"idle_probe_s": False},
    ],
)
def test_a_bad_new_reconnect_setting_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Reconnect(**bad)


@given(
    st.integers(min_value=1, max_value=10**6),
    st.floats(min_value=0, max_value=1e300),
    st.floats(min_value=1, max_value=1e300),
    st.floats(min_value=0, max_value=1e300),
)
def test_the_backoff_never_overflows_and_stays_within_its_cap(
    failed: int, initial: float, multiplier: float, cap: float
) -> None:
    policy = Reconnect(
        attempts=10**6, initial_backoff_s=initial, backoff_multiplier=multiplier, max_backoff_s=cap
    )
    assert 0 <= policy.delay(failed) <= cap
