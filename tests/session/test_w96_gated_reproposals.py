"""A gated session's confidence decides whether a call may run, not what the model is told of an
action the ledger already holds: a committed action proposed again in its turn with a low
confidence is replayed (as without a gate), and one whose answer was lost is ``unknown_commit``.
Neither asks the user to confirm an action that was already sent. A new action (a new turn, an
action that failed and would be sent again) is still held by the gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.evaluation.calibration import ThresholdPolicy
from actionspace.session import Session
from tests.session.w47_world import chat, sends, world

ARGS = json.dumps({"to": "+15550100", "text": "running late"})
LOW = 0.1


def _gated(rt: Runtime, run_id: str = "conv") -> Session:
    s = rt.session(run_id=run_id, provider="openai_chat")
    s.gate = ThresholdPolicy()  # an external call runs from 0.95
    return s


def _one(s: Session, call_id: str, confidence: Any) -> Any:
    (obs,) = s.handle(chat((call_id, "send_sms", ARGS)), confidence=confidence).observations
    return obs


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_committed_send_proposed_again_with_low_confidence_is_replayed(tmp_path: Path, store: str) -> None:
    outbox = tmp_path / "outbox.db"
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'rt.db'}"
    rt = world(url, outbox)
    s = _gated(rt)
    s.user("text Bob I'm late")
    assert _one(s, "c1", 0.99).status == "ok"
    again = _one(s, "c2", LOW)
    assert again.status == "ok" and again.diagnostics.get("replayed"), again.error
    assert len(sends(outbox)) == 1
    decided = [e.data for e in rt.trace.events("conv") if e.kind == "gate_decided"]
    assert decided[-1]["decision"] == "ask_user" and decided[-1]["answered_by"] == "ledger"
    rt.close()


def test_a_send_whose_answer_was_lost_proposed_again_with_a_low_confidence_is_unknown_commit(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox, lose_answer=True)
    s = _gated(rt)
    s.user("text Bob I'm late")
    first = _one(s, "c1", 0.99)
    assert first.error is not None and first.error.category == "unknown_commit"
    for confidence in (LOW, 0.6):  # ask_user, then observe_more
        again = _one(s, "c2", confidence)
        assert again.error is not None and again.error.category == "unknown_commit", again.error
    rt.close()
    restarted = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)  # a second process goes on
    later = _one(_gated(restarted), "c3", LOW)
    assert later.error is not None and later.error.category == "unknown_commit", later.error
    assert len(sends(outbox)) == 1
    restarted.close()


def test_a_new_turn_or_a_send_that_failed_is_still_held_by_the_gate(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world("memory://", outbox)
    s = _gated(rt)
    s.user("text Bob I'm late")
    assert _one(s, "c1", 0.99).status == "ok"
    s.user("and again")  # a new turn: the same send is a new action
    held = _one(s, "c2", LOW)
    assert held.error is not None and held.error.category == "needs_approval"
    assert held.error.details["gate"] == "ask_user"
    assert len(sends(outbox)) == 1

    failing = Runtime("memory://")
    tries: list[str] = []

    @failing.tool(effect="external", idempotency="none")
    def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        tries.append(to)
        raise PermissionError("the carrier refused")

    f = _gated(failing, "fail")
    f.user("text Bob")
    refused = _one(f, "c1", 0.99)
    assert refused.error is not None and refused.error.category == "permission_denied"
    again = _one(f, "c2", LOW)  # a failed send would be sent again: the gate judges it
    assert again.error is not None and again.error.category == "needs_approval"
    assert tries == ["+15550100"]
    rt.close()
    failing.close()
