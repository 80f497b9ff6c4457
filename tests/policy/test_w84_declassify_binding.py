"""A declassification approval is bound to one run, one call (tool and argument digest) and one
value: it is not reused in another run, for another value, for a value that adds anything to the
one approved, by a second node once used, nor after it expired; and it lowers no label."""

from __future__ import annotations

import time
from typing import Any

from actionspace import Labels, Plan, Runtime
from actionspace.errors import ToolError
from actionspace.policy import label_of
from actionspace.types import ManualClock

PASSWORD = "hunter2-correct-horse"
PIN = "4921-7788"


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(start=time.time())
        self.rt = Runtime("memory://", clock=self.clock)
        self.sent: list[Any] = []
        self.fail_next = 0
        sent = self.sent

        @self.rt.tool(effect="read", labels=Labels(confidentiality="secret"))
        def read_password() -> str:
            """The stored password."""
            return PASSWORD

        @self.rt.tool(effect="read", labels=Labels(confidentiality="secret"))
        def read_pin() -> str:
            """The card's PIN."""
            return PIN

        @self.rt.tool(effect="external", idempotency="native")
        def send_email(recipient: str, body: Any, idempotency_key: str) -> str:
            """Send an email."""
            if self.fail_next:
                self.fail_next -= 1
                raise ToolError("transient", "the mail server is busy")
            sent.append(body)
            return "sent"

    def secret_run(self) -> str:
        run = self.rt.new_run()
        assert self.rt.call({"name": "read_password", "arguments": {}}, run_id=run).ok
        assert self.rt.call({"name": "read_pin", "arguments": {}}, run_id=run).ok
        return run

    def send(self, run: str, body: Any, node_id: str | None = None) -> Any:
        call = {"name": "send_email", "arguments": {"recipient": "bob@example.com", "body": body}}
        return self.rt.call(call, run_id=run, node_id=node_id)

    def declassify(self, blocked: Any, ttl_s: float | None = 3600.0) -> str:
        assert blocked.error is not None and blocked.error.category == "policy_violation", blocked
        request_id = str(blocked.error.details["declassify_request"])
        self.rt.approvals.approve(request_id, by="the user", ttl_s=ttl_s)
        return request_id


def _violation(obs: Any) -> bool:
    return obs.error is not None and obs.error.category == "policy_violation"


def test_an_approval_given_in_one_run_lets_nothing_through_in_another() -> None:
    w = World()
    first = w.secret_run()
    w.declassify(w.send(first, PASSWORD))
    other = w.secret_run()
    assert _violation(w.send(other, PASSWORD))
    assert w.sent == []
    assert w.send(first, PASSWORD).ok
    assert w.sent == [PASSWORD]


def test_an_approval_of_one_value_lets_no_other_value_through() -> None:
    w = World()
    run = w.secret_run()
    w.declassify(w.send(run, PASSWORD))
    assert _violation(w.send(run, PIN))
    assert _violation(w.send(run, f"{PASSWORD} {PIN}"))
    assert _violation(w.send(run, [PASSWORD, PIN]))
    assert w.sent == []


def test_a_declassified_value_does_not_lift_the_other_values_of_its_argument_in_a_plan() -> None:
    w = World()
    run = w.rt.new_run()

    def plan(body: Any) -> Any:
        nodes = [
            {"id": "pw", "tool": "read_password", "arguments": {}},
            {"id": "pin", "tool": "read_pin", "arguments": {}},
            {"id": "s", "tool": "send_email", "arguments": {"recipient": "bob@example.com", "body": body}},
        ]
        return w.rt.run_plan(Plan.from_dict({"nodes": nodes}), run_id=run).nodes["s"]

    w.declassify(plan([{"$ref": "pw.data"}]))
    mixed = plan([{"$ref": "pw.data"}, {"$ref": "pin.data"}])
    assert _violation(mixed)
    assert w.sent == []


def test_a_used_approval_lets_no_second_node_through() -> None:
    w = World()
    run = w.secret_run()
    w.declassify(w.send(run, PASSWORD, node_id="n1"), ttl_s=None)
    assert w.send(run, PASSWORD, node_id="n1").ok
    assert _violation(w.send(run, PASSWORD, node_id="n2"))
    assert w.sent == [PASSWORD]


def test_an_expired_approval_lets_nothing_through() -> None:
    w = World()
    run = w.secret_run()
    w.declassify(w.send(run, PASSWORD), ttl_s=60)
    w.clock.advance(61)
    assert _violation(w.send(run, PASSWORD))
    assert w.sent == []


def test_an_approval_used_by_a_send_that_failed_sends_nothing_after_it_expired() -> None:
    w = World()
    run = w.secret_run()
    first = w.declassify(w.send(run, PASSWORD, node_id="n1"), ttl_s=60)
    w.fail_next = 100
    failed = w.send(run, PASSWORD, node_id="n1")
    assert failed.error is not None and failed.error.category == "transient", failed
    assert w.sent == []
    w.fail_next = 0
    w.clock.advance(3600)
    late = w.send(run, PASSWORD, node_id="n1")
    assert _violation(late), late
    assert w.sent == []
    assert _violation(w.send(run, PASSWORD, node_id="n1"))
    assert len(w.rt.approvals.list("pending")) == 1  # asking again files no second request
    again = w.declassify(late)
    assert again != first
    assert w.send(run, PASSWORD, node_id="n1").ok
    assert w.sent == [PASSWORD]


def test_a_sent_declassified_call_proposed_again_before_expiry_is_the_ledgers_replay() -> None:
    w = World()
    run = w.secret_run()
    w.declassify(w.send(run, PASSWORD, node_id="n1"), ttl_s=60)
    assert w.send(run, PASSWORD, node_id="n1").ok
    replay = w.send(run, PASSWORD, node_id="n1")
    assert replay.ok and replay.diagnostics.get("replayed") is True, replay
    assert w.sent == [PASSWORD]


def test_a_declassified_send_leaves_its_output_and_the_run_secret() -> None:
    w = World()
    run = w.secret_run()
    w.declassify(w.send(run, PASSWORD))
    sent = w.send(run, PASSWORD)
    assert sent.ok
    assert label_of(sent).confidentiality == "secret"
    assert w.rt.context_label(run).confidentiality == "secret"
    assert _violation(w.send(run, "an unrelated note"))
    assert w.sent == [PASSWORD]
