"""A call answered by replaying a committed action's outcome records its ``observation`` event, marked
``replayed``: the trace holds the result the model was shown, and the run counts the call."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace import Runtime, ToolCall


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_replayed_call_records_its_observation(store: str, tmp_path: Path) -> None:
    rt = Runtime("memory://" if store == "memory" else f"sqlite:///{tmp_path / 'as.db'}")
    sent: list[int] = []

    @rt.tool(effect="external", idempotency="none")
    def pay(amount: int) -> str:
        """Pay once."""
        sent.append(amount)
        return "paid"

    run = rt.new_run()
    first = rt.call(ToolCall(name="pay", arguments={"amount": 5}, id="c1"), run_id=run, node_id="p1")
    again = rt.call(ToolCall(name="pay", arguments={"amount": 5}, id="c2"), run_id=run, node_id="p1")
    assert first.ok and again.ok and again.diagnostics["replayed"] is True and sent == [5]
    observed = [e for e in rt.trace.events(run) if e.kind == "observation"]
    assert [(e.call_id, e.data.get("replayed")) for e in observed] == [("c1", None), ("c2", True)]
    assert observed[1].data["status"] == "ok" and observed[1].data["content_hash"] == first.content_hash
    (summary,) = rt.trace.runs(limit=1)
    assert summary.calls == 2
    rt.close()
