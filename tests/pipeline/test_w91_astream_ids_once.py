"""``Runtime.astream`` answers a call id the message gives twice once, as ``call_all`` does.

A message giving one id to two calls runs none of them: each distinct id is answered
``parse_error`` (``duplicate_call_id``), and the trace holds one ``observation`` event per id.
``call_all`` and ``acall_all`` return one observation per distinct id; before, ``astream`` yielded
one per call, the repeated id again each time it came: a caller feeding the stream back to its
model sent two results under one id (which providers refuse), and the stream did not join the
trace's observations one to one. A hypothesis property over messages repeating ids, in the shape
of every provider in ``session.PROVIDERS``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.session import PROVIDERS, Provider
from actionspace.types import Observation


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Runtime, list[str]]]:
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="external", idempotency="none", writes=["mail:{to}"])
    def send(to: str, body: str) -> str:
        """Send a note."""
        sent.append(to)
        return "sent"

    @rt.tool(effect="read", reads=["book:{q}"])
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    yield rt, sent
    rt.close()


def _message(provider: Provider, calls: list[tuple[str, str, dict[str, Any]]]) -> Any:
    """One model message proposing ``calls`` (id, tool, arguments) at once, as ``provider`` sends it."""
    if provider == "openai_chat":
        entries = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
        return {"role": "assistant", "content": None, "tool_calls": entries}
    if provider == "openai_responses":
        return [
            {"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
            for i, n, a in calls
        ]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls],
        }
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls],
    }


def _call(index: int, kind: int) -> tuple[str, dict[str, Any]]:
    if kind == 0:
        return "send", {"to": f"p{index}", "body": "x"}
    return "look", {"q": f"q{index}"}


@st.composite
def repeated_ids(draw: st.DrawFn) -> list[str]:
    """Two to seven call ids among four, at least one of them given twice."""
    ids = draw(st.lists(st.sampled_from(["c1", "c2", "c3", "call_x"]), min_size=2, max_size=7))
    if len(set(ids)) == len(ids):
        ids.insert(draw(st.integers(0, len(ids))), draw(st.sampled_from(ids)))
    return ids


async def _streamed(rt: Runtime, raw: Any, run_id: str) -> list[Observation]:
    return [obs async for obs in rt.astream(raw, run_id=run_id)]


_runs = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    provider=st.sampled_from(PROVIDERS),
    ids=repeated_ids(),
    kinds=st.lists(st.integers(0, 1), min_size=7, max_size=7),
)
def test_astream_answers_each_repeated_call_id_once_as_call_all_does(
    world: tuple[Runtime, list[str]], provider: Provider, ids: list[str], kinds: list[int]
) -> None:
    rt, sent = world
    calls = [(i, *_call(n, kinds[n])) for n, i in enumerate(ids)]
    raw = _message(provider, calls)
    streamed_run, listed_run = f"s{next(_runs)}", f"l{next(_runs)}"
    streamed = asyncio.run(_streamed(rt, raw, streamed_run))
    listed = rt.call_all(raw, run_id=listed_run)
    once = list(dict.fromkeys(ids))
    assert [o.call_id for o in streamed] == once
    assert all(o.error is not None and o.error.details.get("reason") == "duplicate_call_id" for o in streamed)
    assert [(o.call_id, o.status, o.error) for o in streamed] == [
        (o.call_id, o.status, o.error) for o in listed
    ]
    traced = [e.call_id for e in rt.trace.events(streamed_run) if e.kind == "observation"]
    assert traced == once  # the stream joins the trace's observations one to one
    assert sent == []
