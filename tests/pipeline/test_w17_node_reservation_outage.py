"""A node-number reservation the run-state store cannot make is a store outage: ``transient``.

On a store other processes share, a process takes a run's node numbers in blocks reserved in the
run-state store (``ledger/run_nodes.py``, ``pipeline/runs.py`` ``ReservedNodes``). When that store
is down or erring (SQLite's file unreadable or locked past its timeout, PostgreSQL's connection
lost or its server stopped), the call used to end ``internal`` ("report to the maintainers"); it
is an outage, which a retry with the same key may get past. The tool is not run and nothing is
written to the ledger; once the store answers again, the same proposal goes through.

The store's driver raises its own operational error from the reservation alone: a server stopped
outright fails the run state's save of the call too, which already ended it ``transient``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace import Runtime, ToolCall
from actionspace.types import Observation
from tests.pg import fresh_schema


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'run.db'}"
        return
    yield from fresh_schema(request.getfixturevalue("pg_url"))


def _outage(url: str) -> BaseException:
    """The driver's own operational error for a store that did not answer."""
    if url.startswith("sqlite"):
        return sqlite3.OperationalError("disk I/O error")
    return psycopg.OperationalError("server closed the connection unexpectedly")


class _World:
    def __init__(self, url: str) -> None:
        self.rt = Runtime(url, recover_on_start=False)
        self.sent: list[str] = []

        @self.rt.tool(effect="external", idempotency="none")
        def pay(to: str) -> str:
            """Pay someone."""
            self.sent.append(to)
            return "paid"

        @self.rt.tool(effect="read")
        def look(x: int) -> int:
            """Look x up."""
            return x


def _made_elsewhere(url: str, run: str) -> None:
    """The run made (and its first block of node numbers held) by another runtime: the next
    runtime on it reserves its node numbers in the run-state store."""
    other = _World(url)
    try:
        assert other.rt.call(ToolCall(name="look", arguments={"x": 0}), run_id=run).ok
    finally:
        other.rt.close()


def _broken(world: _World, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> list[int]:
    """Make the run-state store's reservation raise ``error`` (until the list it returns is
    appended to); the reservations asked for are counted in it too."""
    store = world.rt.engine.runs.run_states
    real = store.reserve_nodes  # type: ignore[attr-defined]
    healed: list[int] = []

    def reserve_nodes(run_id: str, floor: int, count: int) -> int:
        if not healed:
            raise error
        return int(real(run_id, floor, count))

    monkeypatch.setattr(store, "reserve_nodes", reserve_nodes)
    return healed


def _assert_outage(obs: Observation, world: _World, run: str) -> None:
    assert obs.error is not None, obs
    assert obs.error.category == "transient", obs.error
    assert obs.error.retryable and obs.error.recovery == ("retry_same_key",)
    assert obs.error.details.get("sent") is False
    assert world.sent == []  # the tool never ran
    assert [e for e in world.rt.ledger.list(limit=100) if e.run_id == run] == []  # nothing written


_CALLS: dict[str, Callable[[Runtime, str], Observation]] = {
    "call": lambda rt, run: rt.call(ToolCall(name="pay", arguments={"to": "ana"}), run_id=run),
    "call_with_id": lambda rt, run: rt.call(
        ToolCall(name="pay", arguments={"to": "ana"}, id="c1"), run_id=run
    ),
    "acall": lambda rt, run: asyncio.run(rt.acall(ToolCall(name="pay", arguments={"to": "ana"}), run_id=run)),
    "call_all": lambda rt, run: rt.call_all(
        {"role": "assistant", "tool_calls": [_chat_call("c1")]}, run_id=run
    )[0],
    "session": lambda rt, run: (
        rt.session(run_id=run, provider="openai_chat")
        .handle({"role": "assistant", "content": None, "tool_calls": [_chat_call("c1")]})
        .observations[0]
    ),
}


def _chat_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "pay", "arguments": '{"to": "ana"}'}}


@pytest.mark.parametrize("how", sorted(_CALLS))
def test_a_reservation_the_store_cannot_make_ends_the_call_transient(
    url: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = f"r-{how}"
    _made_elsewhere(url, run)
    world = _World(url)
    try:
        healed = _broken(world, monkeypatch, _outage(url))
        _assert_outage(_CALLS[how](world.rt, run), world, run)
        healed.append(1)  # the store answers again: the same proposal goes through, sent once
        again = _CALLS[how](world.rt, run)
        assert again.ok, again
        assert world.sent == ["ana"]
    finally:
        world.rt.close()


def test_a_failure_of_ours_in_the_reservation_stays_internal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an outage is ``transient``: a bug (a table missing) is still reported as ``internal``."""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    _made_elsewhere(url, "r")
    world = _World(url)
    try:
        _broken(world, monkeypatch, sqlite3.OperationalError("no such table: run_state_nodes"))
        obs = _CALLS["call"](world.rt, "r")
        assert obs.error is not None and obs.error.category == "internal", obs
        assert world.sent == []
    finally:
        world.rt.close()
