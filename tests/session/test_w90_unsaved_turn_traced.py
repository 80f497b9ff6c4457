"""The calls of a turn whose run state was not saved still reach the trace.

When the run-state store does not take the run's new state at the end of a model message (the
database down, the connection lost, the disk full), each call of the message is answered
``transient`` (its result is withheld: its label could not be saved). The calls ran all the same,
a write's side effect happened and its ledger entry is committed. Before, the trace records the
message held were dropped with the failed save: evaluation and monitoring never saw calls that
ran, nor what the model was told. Now each call's events are stored, its ``observation`` event
being what the model was told (``transient``) with what the call ended in under ``withheld``, and
the rendered answer is recorded too. Nothing the model was told contradicts the ledger: asked
again in the same turn once the store answers, the write is answered from the ledger, not sent
twice. Fault injection: a run-state store whose saves raise, on SQLite and PostgreSQL, sync and
async, through a session and through ``call_all``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.types import Observation
from tests.store_faults import down


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
    else:
        from tests.pg import fresh_schema

        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _world(url: str) -> tuple[Runtime, list[str]]:
    rt = Runtime(url, recover_on_start=False)
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    @rt.tool(effect="read", reads=["book:{q}"])
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    return rt, paid


def _entry(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _message(ids: list[str]) -> dict[str, Any]:
    """``pay`` under the first id; ``look`` under the second, when given."""
    calls = [_entry(ids[0], "pay", {"to": "bob", "cents": 5})]
    if len(ids) > 1:
        calls.append(_entry(ids[1], "look", {"q": "ledger"}))
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _saves_fail(rt: Runtime) -> Callable[[], None]:
    """Every save of the run-state store raises (waited for or not); returns the undo."""
    store = rt.engine.runs.run_states
    undo = [down(store, "save")]
    if hasattr(store, "save_later"):
        undo.append(down(store, "save_later"))

    def put_back() -> None:
        for u in undo:
            u()

    return put_back


def _check_traced(rt: Runtime, run_id: str, out: list[Observation], ids: list[str]) -> None:
    """The message's calls answered ``transient``, and the trace holds their events: the write
    dispatched, one observation per call id saying what the model was told and what the call
    ended in (withheld)."""
    assert [o.call_id for o in out] == ids
    assert all(o.error is not None and o.error.category == "transient" for o in out)
    assert all(o.error is not None and o.error.details.get("sent") is not False for o in out)
    events = rt.trace.events(run_id)
    dispatched = [e.call_id for e in events if e.kind == "dispatched"]
    assert ids[0] in dispatched  # the write ran: the trace says so
    for call_id in ids:
        observed = [e.data for e in events if e.kind == "observation" and e.call_id == call_id]
        assert len(observed) == 1, (call_id, observed)
        [data] = observed
        assert data["status"] == "error" and data["category"] == "transient"
        assert data["withheld"]["status"] == "ok"  # what the call ended in, not shown to the model
    entries = [e for e in rt.ledger.list() if e.node_id and e.state == "committed"]
    assert len(entries) == 1  # the write is committed in the ledger


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("calls", [1, 2])
def test_a_turn_whose_state_was_not_saved_keeps_its_calls_in_the_trace(
    url: str, mode: str, calls: int
) -> None:
    rt, paid = _world(url)
    try:
        s = rt.session(run_id="conv", provider="openai_chat")
        s.user("pay bob 5 cents and look up the ledger")
        ids = ["c1", "c2"][:calls]
        put_back = _saves_fail(rt)
        try:
            raw = _message(ids)
            turn = s.handle(raw) if mode == "sync" else asyncio.run(s.ahandle(raw))
        finally:
            put_back()
        assert paid == ["bob"]
        _check_traced(rt, "conv", list(turn.observations), ids)
        rendered = [e.data["results"] for e in rt.trace.events("conv") if e.kind == "rendered"]
        assert rendered == [ids]  # what the model was handed is recorded too
        again_ids = ["c3", "c4"][:calls]  # the model asks again, in the same turn
        raw = _message(again_ids)
        again = s.handle(raw) if mode == "sync" else asyncio.run(s.ahandle(raw))
        assert all(o.ok for o in again.observations), again.observations
        assert again.observations[0].diagnostics.get("replayed") is True and paid == ["bob"]
    finally:
        rt.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_call_all_whose_state_was_not_saved_keeps_its_calls_in_the_trace(url: str, mode: str) -> None:
    rt, paid = _world(url)
    try:
        run_id = rt.new_run("plain")
        rt.call_all(_message(["c0"]), run_id=run_id)  # the run's state saved once
        paid.clear()
        put_back = _saves_fail(rt)
        try:
            raw = {"role": "assistant", "content": None, "tool_calls": _message(["c1"])["tool_calls"]}
            raw["tool_calls"][0]["function"]["arguments"] = json.dumps({"to": "ann", "cents": 7})
            raw["tool_calls"].append(_entry("c2", "look", {"q": "ledger"}))
            out = (
                rt.call_all(raw, run_id=run_id)
                if mode == "sync"
                else asyncio.run(rt.acall_all(raw, run_id=run_id))
            )
        finally:
            put_back()
        assert paid == ["ann"]
        events = rt.trace.events(run_id)
        assert "c1" in [e.call_id for e in events if e.kind == "dispatched"]
        for call_id in ("c1", "c2"):
            [data] = [e.data for e in events if e.kind == "observation" and e.call_id == call_id]
            assert data["category"] == "transient" and data["withheld"]["status"] == "ok"
        assert [o.error.category for o in out if o.error is not None] == ["transient", "transient"]
    finally:
        rt.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_single_write_whose_state_was_not_saved_is_traced(tmp_path: Path, store: str, mode: str) -> None:
    rt, paid = _world("memory://" if store == "memory" else f"sqlite:///{tmp_path / 'a.db'}")
    try:
        run_id = rt.new_run("single")
        first = ToolCall(name="pay", arguments={"to": "ann", "cents": 5}, id="c0")
        assert rt.call(first, run_id=run_id).ok  # the write's own frame is ready for the next one
        paid.clear()
        put_back = _saves_fail(rt)
        try:
            call = ToolCall(name="pay", arguments={"to": "bob", "cents": 5}, id="c1")
            obs = (
                rt.call(call, run_id=run_id) if mode == "sync" else asyncio.run(rt.acall(call, run_id=run_id))
            )
        finally:
            put_back()
        assert paid == ["bob"] and obs.error is not None and obs.error.category == "transient"
        events = rt.trace.events(run_id)
        assert "c1" in [e.call_id for e in events if e.kind == "dispatched"]
        [data] = [e.data for e in events if e.kind == "observation" and e.call_id == "c1"]
        assert data["category"] == "transient" and data["withheld"]["status"] == "ok"
    finally:
        rt.close()
