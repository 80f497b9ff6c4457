"""A graph run asynchronously (``ainvoke``, ``astream``, ``astream_events``) whose tools node holds
one call of a message for approval lets the message's other calls that are in flight finish
before the graph stops: the write commits once, and the resumed graph replays it. Before, the
interrupt left the node at once and the write still being sent was cancelled with the run's
event loop: ``unknown_commit``, and the resumed graph answered it so instead of its result."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from actionspace import Runtime
from tests.adapters.test_w12_occurrence_frameworks import graph, lc_answers, lc_call

_DEADLINE_S = 10.0


def postal() -> tuple[Runtime, list[str]]:
    """``send`` (a write that is still being sent when ``note`` is held) and ``note``."""
    rt = Runtime("memory://")
    mailed: list[str] = []

    @rt.tool(effect="write", writes=["mail:{to}"])
    async def send(to: str, text: str) -> dict[str, Any]:
        """Send a message."""
        deadline = time.monotonic() + _DEADLINE_S
        while not rt.approvals.list(status="pending"):  # the note is held: its interrupt is on its way
            assert time.monotonic() < deadline, "the note was never held"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # still sending while the interrupt leaves the node
        mailed.append(to)
        return {"sent": to}

    @rt.tool(effect="write", writes=["note:{text}"], requires_approval=True)
    def note(text: str) -> dict[str, Any]:
        """Write a note (always held for a decision)."""
        return {"noted": text}

    return rt, mailed


async def drive(app: Any, given: Any, config: Any, how: str) -> dict[str, Any]:
    if how == "ainvoke":
        out: dict[str, Any] = await app.ainvoke(given, config)
        return out
    if how == "astream":
        async for _ in app.astream(given, config, stream_mode="updates"):
            pass
    else:
        async for _ in app.astream_events(given, config, version="v2"):
            pass
    state = await app.aget_state(config)
    return {**state.values, "__interrupt__": list(state.interrupts)}


@pytest.mark.parametrize("how", ["ainvoke", "astream", "astream_events"])
def test_a_write_in_flight_when_its_message_is_held_commits_once_and_is_replayed_on_resume(how: str) -> None:
    rt, mailed = postal()
    message = [lc_call("m1", "send", {"to": "bob", "text": "hi"}), lc_call("n1", "note", {"text": "x"})]
    app = graph(rt, message, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}

    held = asyncio.run(drive(app, {"messages": [HumanMessage("mail bob, then note it")]}, config, how))
    assert held["__interrupt__"]
    assert mailed == ["bob"]
    assert [(e.tool, e.state) for e in rt.ledger.list()] == [("send@1", "committed")]

    done = asyncio.run(drive(app, Command(resume=True), config, how))
    sent, noted = (json.loads(str(a)) for a in lc_answers(done))
    assert sent["status"] == "ok" and sent["data"] == {"sent": "bob"} and sent.get("replayed") is True
    assert noted["status"] == "ok" and noted["data"] == {"noted": "x"}
    assert mailed == ["bob"]
