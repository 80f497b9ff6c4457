"""A native tool dedupes a key only for its declared window: past it, the same key is not resent."""

from __future__ import annotations

import threading
import time
from typing import Any

from actionspace import Runtime
from actionspace.ledger.commit import new_entry

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


class Relay:
    """Dedupes a key for ``window_s`` seconds only; records every request it receives."""

    def __init__(self, window_s: float, hang: threading.Event | None = None) -> None:
        self.window_s = window_s
        self.requests: list[str] = []
        self.hang = hang

    def send(self, to: str, idempotency_key: str) -> str:
        self.requests.append(idempotency_key)
        if self.hang is not None and len(self.requests) == 1:
            self.hang.wait(10)  # the first answer is lost (it comes far too late)
        return f"sent to {to}"


def _runtime(relay: Relay, **extra: Any) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="notify",
        input_schema=SCHEMA,
        fn=relay.send,
        effect="external",
        idempotency="native",
        dedupe_window_s=relay.window_s,
        **extra,
    )
    return rt


def test_a_lost_answer_past_the_window_is_unknown_commit_not_a_second_request() -> None:
    release = threading.Event()
    relay = Relay(window_s=0.05, hang=release)
    rt = _runtime(relay, timeout_s=0.2)
    obs = rt.call({"name": "notify", "arguments": {"to": "bob"}})
    release.set()
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert "dedupe window" in obs.error.message
    assert len(relay.requests) == 1
    rt.close(wait=True)


def test_within_the_window_the_same_key_is_asked_again() -> None:
    release = threading.Event()
    relay = Relay(window_s=600, hang=release)
    rt = _runtime(relay, timeout_s=0.2)
    obs = rt.call({"name": "notify", "arguments": {"to": "bob"}})
    release.set()
    assert obs.ok, obs.error
    assert len(relay.requests) == 2 and relay.requests[0] == relay.requests[1]
    rt.close(wait=True)


def test_recovery_past_the_window_does_not_hand_the_key_back_for_sending() -> None:
    relay = Relay(window_s=60)
    rt = _runtime(relay)
    spec = rt.catalog.get("notify")
    old = new_entry(key="as1_" + "1" * 32, run_id="r1", node_id="n1", spec=spec, arguments={"to": "bob"})
    old = old.evolve(created_at=time.time() - 3600)
    rt.ledger.begin(old)
    rt.ledger.transition(old.key, ("accepted",), old.evolve(state="dispatched", attempts=1))
    fresh = new_entry(key="as1_" + "2" * 32, run_id="r1", node_id="n2", spec=spec, arguments={"to": "bob"})
    rt.ledger.begin(fresh)
    rt.ledger.transition(fresh.key, ("accepted",), fresh.evolve(state="dispatched", attempts=1))
    report = rt.recover().to_dict()
    assert report["unknown_commit"] == [old.key]
    assert report["redispatchable"] == [fresh.key]
