"""A turn cancelled while its failing run-state save waits still keeps its calls in the trace.

Async callers save a message's run state on a worker thread. When the caller's task was cancelled
while that save waited (its timeout ran out) and the save then failed (the store down), the
calls' records the save held back were dropped with the thread's exception: the trace lost calls
that ran, a write's ``dispatched`` among them, though its ledger entry is committed. Now the
save and what follows its failure are one step on the worker thread: the records reach the trace
store (each call's ``observation`` event what the model would be told, what it ended in under
``withheld``), and the cancellation still reaches the caller. Fault injection: a run-state store
whose save blocks until the caller is cancelled, then raises.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from tests.store_faults import StoreDown


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Runtime, list[str]]]:
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
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

    yield rt, paid
    rt.close()


def _message(ids: list[str]) -> dict[str, Any]:
    """``pay`` under the first id; ``look`` under the second, when given."""
    calls = [("pay", {"to": "bob", "cents": 5}), ("look", {"q": "ledger"})]
    entries = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in zip(ids, calls, strict=False)
    ]
    return {"role": "assistant", "content": None, "tool_calls": entries}


class BlocksUntilCancelled:
    """Stands in for the run-state store's ``save``: waits until the caller is cancelled, then
    raises :class:`StoreDown` (the store went away while the caller waited for it)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.cancelled = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        self.cancelled.wait(30)
        raise StoreDown("the database does not answer")


async def _cancelled_during_save(rt: Runtime, how: str, raw: Any, save: BlocksUntilCancelled) -> bool:
    """Run ``raw`` as ``how`` does, cancel it once its save waits (as a caller's timeout would);
    True when the cancellation reached the caller."""

    async def handled() -> Any:
        try:
            if how == "session":
                return await rt.session(run_id="conv", provider="openai_chat").ahandle(raw)
            return await rt.acall_all(raw, run_id="conv")
        finally:
            save.cancelled.set()  # the store gives up once the caller is gone

    task = asyncio.create_task(handled())
    assert await asyncio.to_thread(save.entered.wait, 30)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True
    return False


@pytest.mark.parametrize("how", ["session", "acall_all"])
@pytest.mark.parametrize("calls", [1, 2])
def test_a_turn_cancelled_while_its_failing_save_waits_keeps_its_calls_in_the_trace(
    world: tuple[Runtime, list[str]], how: str, calls: int
) -> None:
    rt, paid = world
    rt.session(run_id="conv", provider="openai_chat").user("pay bob 5 cents and look up the ledger")
    store = rt.engine.runs.run_states
    save, real = BlocksUntilCancelled(), store.save
    store.save = save  # type: ignore[method-assign]
    ids = ["c1", "c2"][:calls]
    try:
        # asyncio.run returns once the worker threads it started have ended
        assert asyncio.run(_cancelled_during_save(rt, how, _message(ids), save)) is True
    finally:
        store.save = real  # type: ignore[method-assign]
    assert paid == ["bob"]
    events = rt.trace.events("conv")
    assert "c1" in [e.call_id for e in events if e.kind == "dispatched"]  # the write ran: traced
    for call_id in ids:
        [data] = [e.data for e in events if e.kind == "observation" and e.call_id == call_id]
        assert data["category"] == "transient" and data["withheld"]["status"] == "ok", data
    [entry] = [e for e in rt.ledger.list() if e.node_id]
    assert entry.state == "committed"
    again = rt.session(run_id="conv", provider="openai_chat").handle(_message(["c3"]))
    [obs] = again.observations  # asked again: answered from the ledger, not sent twice
    assert obs.ok and obs.diagnostics.get("replayed") is True and paid == ["bob"]
