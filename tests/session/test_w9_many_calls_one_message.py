"""A model proposes thousands of writes in one message. Each call is checked for a read/write
conflict only against the calls begun before it and not shown yet, and those are bounded: the
checks grow with the number of calls, not with its square (2,000 writes made 2 million checks,
4,000 took half a minute). Every call still runs once and is answered in order. Reads are never
checked, and a message of reads, however many, runs all of them together."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

import actionspace.pipeline.together as together
from actionspace import Runtime
from actionspace.plan.conflicts import conflicting
from tests.session.w47_world import answered_ids, chat

CALLS = 2_000


@pytest.mark.parametrize("is_async", [False, True])
def test_the_conflict_checks_of_a_message_grow_linearly_with_its_calls(
    monkeypatch: pytest.MonkeyPatch, is_async: bool
) -> None:
    checks = 0

    def counted(*sets: Sequence[str]) -> str | None:
        nonlocal checks
        checks += 1
        return conflicting(*sets)

    monkeypatch.setattr(together, "conflicting", counted)
    rt = Runtime("memory://")
    sent: list[str] = []

    @rt.tool(effect="write", writes=["counter:{name}"])
    def set_counter(name: str, value: int) -> dict[str, Any]:
        """Set a counter."""
        sent.append(name)
        return {"name": name, "value": value}

    s = rt.session(run_id="conv-many-writes", provider="openai_chat")
    s.max_calls = CALLS  # past the default bound on calls per message
    s.user("set them all")
    message = chat(
        *((f"w{i}", "set_counter", json.dumps({"name": f"k{i}", "value": i})) for i in range(CALLS))
    )
    turn = asyncio.run(s.ahandle(message)) if is_async else s.handle(message)
    ids = [f"w{i}" for i in range(CALLS)]
    assert [o.call_id for o in turn.observations] == ids
    assert answered_ids("openai_chat", turn.messages) == ids
    assert all(o.status == "ok" for o in turn.observations)
    assert sorted(sent) == sorted(f"k{i}" for i in range(CALLS))
    assert 0 < checks <= CALLS * together._BEGUN_AT_MOST, checks
    rt.close()


def test_a_message_of_more_reads_than_the_window_runs_them_all_together() -> None:
    """Each read waits until every read of the message has begun: a message run in windows would
    leave the first window waiting for reads that begin only after it ended."""
    reads = 3 * together._BEGUN_AT_MOST
    rt = Runtime("memory://")
    begun = 0
    everyone: asyncio.Event | None = None

    @rt.tool(effect="none")
    async def look(i: int) -> str:
        """Look something up."""
        nonlocal begun, everyone
        everyone = everyone or asyncio.Event()
        begun += 1
        if begun == reads:
            everyone.set()
        try:
            await asyncio.wait_for(everyone.wait(), 20)
        except TimeoutError:
            return f"alone at {begun}"
        return "together"

    s = rt.session(run_id="conv-many-reads", provider="openai_chat")
    s.user("look them all up")
    message = chat(*((f"r{i}", "look", json.dumps({"i": i})) for i in range(reads)))
    turn = asyncio.run(s.ahandle(message))
    assert [o.data for o in turn.observations] == ["together"] * reads
    rt.close()
