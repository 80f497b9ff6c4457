"""The words of a user turn the store did not save are not heard.

``s.user(text)`` raises when the run-state store does not take the new turn, and the turn stays
where the store has it. Its words must go with it: argument provenance credits the user only
with words of turns that began. Before, they stayed in the run's flow state, so a value found in
them was credited to the user (``user``) though the turn never began, and a retry of ``s.user``
added them a second time (the user's count of messages parted from the store's).
Fault injection: a run-state store whose save fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.policy.provenance_stage import ProvenanceStage
from tests.store_faults import StoreDown, down


def _world(url: str) -> tuple[Runtime, list[str]]:
    rt = Runtime(url, recover_on_start=False, stages=[ProvenanceStage()])  # records each value's provenance
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    return rt, paid


def _pay(call_id: str, to: str) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "pay", "arguments": json.dumps({"to": to, "cents": 5})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _provenance(rt: Runtime, run_id: str, call_id: str) -> dict[str, list[str]]:
    """Per argument, the sources the ``proposed`` event credits its value to."""
    [proposed] = [e for e in rt.trace.events(run_id) if e.kind == "proposed" and e.call_id == call_id]
    return {name: [p["source"] for p in found] for name, found in proposed.data["provenance"].items()}


def _failing_user(rt: Runtime, s: Any, text: str) -> None:
    put_back = down(rt.engine.runs.run_states, "save")
    try:
        with pytest.raises(StoreDown):
            s.user(text)
    finally:
        put_back()


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_words_of_a_turn_not_saved_are_not_credited_to_the_user(tmp_path: Path, store: str) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'a.db'}"
    rt, paid = _world(url)
    try:
        s = rt.session(run_id="conv-words", provider="openai_chat")
        s.user("pay bob 5 cents")
        _failing_user(rt, s, "pay mallory 5 cents")
        assert s.turn == 1
        run = rt.run_state("conv-words")
        assert run.flow.user_texts == ["pay bob 5 cents"] and run.flow.user_count == 1
        [obs] = s.handle(_pay("c1", "mallory")).observations
        assert obs.ok and paid == ["mallory"]
        # the user never said "mallory" in a turn that began: the model inferred it
        assert _provenance(rt, "conv-words", "c1")["to"] == ["model"]
    finally:
        rt.close()


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_retried_turn_is_heard_once(tmp_path: Path, store: str) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'b.db'}"
    rt, _ = _world(url)
    try:
        s = rt.session(run_id="conv-retry", provider="openai_chat")
        s.user("hello")
        _failing_user(rt, s, "pay carol 5 cents")
        s.user("pay carol 5 cents")  # the store answers now
        run = rt.run_state("conv-retry")
        assert s.turn == 2
        assert run.flow.user_texts == ["hello", "pay carol 5 cents"] and run.flow.user_count == 2
        [obs] = s.handle(_pay("c1", "carol")).observations
        assert obs.ok and _provenance(rt, "conv-retry", "c1")["to"] == [
            "user(1:4-9)"
        ]  # its one message, once
    finally:
        rt.close()
    if store == "sqlite":  # another process continuing the run reads the same two messages
        later, _ = _world(url)
        try:
            flow = later.run_state("conv-retry").flow
            assert flow.user_texts == ["hello", "pay carol 5 cents"] and flow.user_count == 2
        finally:
            later.close()
